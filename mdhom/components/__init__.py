"""The device components the learners drive (XGBoost's ``gpu_hist`` split, in md_hom kernels): a
:class:`~mdhom.components.workspace.Workspace` that owns a fit's buffers and builds, and components that each own
their kernels' descriptions and the meaning of their buffers:

- :mod:`~mdhom.components.gradients`: the gradient source and quantiser;
- :mod:`~mdhom.components.histogram`: the histogram descriptions, their heuristics and tuner inputs, and
  :mod:`~mdhom.components.histogram_builder`: the histogram builder (arena, sibling subtraction);
- :mod:`~mdhom.components.partition`: the row partitioner (row ranges on the device), and
  :mod:`~mdhom.components.partition_kernels`: its kernels' descriptions, references and tuner inputs,
  :mod:`~mdhom.components.leaf_rows`: every row's leaf at a tree's end;
- :mod:`~mdhom.components.split`: the split search's descriptions, with a pluggable gain,
  :mod:`~mdhom.components.split_result`: the packed result the host reads back,
  :mod:`~mdhom.components.split_categorical`: the scan and partition of categorical fits, and
  :mod:`~mdhom.components.split_evaluator`: the split evaluator that launches them and unpacks the result;
- :mod:`~mdhom.components.scores` and :mod:`~mdhom.components.predictor`: training and eval-set scores;
- :mod:`~mdhom.components.binning`: raw features to bins.

Each kernel family is declared once, as a :class:`~mdhom.components.specs.KernelSpec` in its component's
``SPECS``; shared table layouts are declared once in :mod:`~mdhom.components.tables`.
"""
