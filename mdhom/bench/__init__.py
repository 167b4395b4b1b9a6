"""Benchmarks: scripts that time mdhom against the anchor libraries in the same run (the README's Tuning and
benchmarks section).

Absolute times move from run to run on shared machines, so every benchmark trains all systems on the same
data in one process and reports ratios to mdhom next to the raw figures. Each has a ``--quick`` mode for CI.
"""

from mdhom.bench.trees import make_higgs_like, roc_auc

__all__ = ["make_higgs_like", "roc_auc"]
