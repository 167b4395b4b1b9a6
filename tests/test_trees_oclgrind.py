"""The tree kernels under Oclgrind: no out-of-bounds access, no data race, no uninitialised read.

A small tree is grown with both the exact (sequential) and a parallel configuration of every kernel, so
the local-memory reductions, the second (combine / fixup) kernels and the scatter all run under the checker;
the results are compared with the numpy reference inside the checked process.
"""

from __future__ import annotations

import textwrap

import pytest

from mdhom.testing import run_under_oclgrind


def checked(code: str, marker: str, timeout: int = 600):  # noqa: ANN201
    """Run ``code`` under Oclgrind: clean (no out-of-bounds access, no race, no uninitialised read) and printing
    ``marker`` (its own checks passed); the run, for further checks of its output."""
    run = run_under_oclgrind(code, timeout=timeout)
    assert run.clean, run.explain()
    assert marker in run.stdout, run.explain()
    return run

CODE = textwrap.dedent("""
    import numpy as np
    from mdhom.learn.binning import bin_dtype
    from mdhom.trees.backend import SplitParams
    from mdhom.trees.opencl_backend import OpenCLTreeKernels
    from mdhom.trees.reference import NumpyTreeKernels

    rng = np.random.default_rng(0)
    n_rows, n_feat, n_bins, n_out = 67, 3, N_BINS, 2
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
    grad, hess = rng.standard_normal((n_rows, n_out)), rng.random((n_rows, n_out)) + 0.1
    params = SplitParams(1.0, 0.1, 0.0, 0.5)
    one = lambda dims: {f"NUM_{w}_{d}": 1 for d in dims for w in ("WG", "WI")}
    parallel = {
        "tree_histogram": {**one(("node", "feat", "output", "pos")), "NUM_WG_feat": 2, "NUM_WI_pos": 4,
                           "NUM_WG_pos": 2, "NUM_WI_COMBINE": 8},
        "tree_split_scan": {**one(("node", "feat", "output", "bin")), "NUM_WI_bin": 4, "NUM_WG_bin": 2,
                            "NUM_WI_COMBINE": 8},
        "tree_split_score": {**one(("node", "feat", "bin", "dir")), "NUM_WI_bin": 4, "NUM_WI_dir": 2,
                             "NUM_WG_feat": 2, "NUM_WI_COMBINE": 4, "VEC": 2},
        "tree_partition_flags": {"NUM_WI_pos": 8, "NUM_WG_pos": 3, "NUM_WI_COMBINE": 8},
        # contiguous runs per work-item (the CPUs' default schedule), over a cell count they do not divide
        "tree_hist_siblings": {**one(("side", "node", "cell")), "NUM_WI_cell": 4, "NUM_WG_cell": 3, "CHUNKED": 1},
    }
    for exact, configs in ((True, None), (False, parallel)):
        dev = OpenCLTreeKernels("oclgrind", exact=exact, configs=configs, row_index=ROW_INDEX, blocks=BLOCKS,
                                block_group=GROUP,
                                feature_major=FEATURE_MAJOR)
        ref = NumpyTreeKernels()
        for b in (dev, ref):
            b.load(bins, n_bins, n_out)
            b.set_gradients(grad, hess)
            b.reset_rows()
        nodes, next_id = np.array([0]), 1
        hists = [b.histograms(nodes) for b in (dev, ref)]
        for level in range(2):
            assert np.allclose(dev.to_host(hists[0]), hists[1], atol=1e-12), level
            s = [b.best_splits(h, np.ones(n_feat, bool), params) for b, h in zip((dev, ref), hists)]
            assert np.array_equal(s[0].feature, s[1].feature) and np.array_equal(s[0].bin, s[1].bin), level
            ok = np.isfinite(s[1].gain)
            left = np.arange(next_id, next_id + 2 * ok.sum(), 2)
            right = left + 1
            next_id += 2 * int(ok.sum())
            for b in (dev, ref):
                b.apply_splits(nodes[ok], s[1].feature[ok], s[1].bin[ok], s[1].default_left[ok], left, right)
            assert np.array_equal(dev.row_nodes(), ref.row_nodes())
            lh = [b.histograms(left) for b in (dev, ref)]
            hists = [b.concat([l, b.subtract(p, l)]) for b, p, l in zip((dev, ref), hists, lh)]
            nodes = np.concatenate([left, right])
        two = left[:2]  # parents out of order: the index-table path of tree_hist_siblings
        pidx = np.array([len(nodes) - 1, 0])[: two.size]
        sib = [b.siblings(h, b.histograms(two), pidx) for b, h in zip((dev, ref), hists)]
        assert np.allclose(dev.to_host(sib[0]), sib[1], atol=1e-12)

    # a device-resident round per loss: gradients, the tree, score and eval-set updates
    from mdhom.trees.grower import GrowParams, grow_tree
    from mdhom.trees.numpy_backend import NumpyKernels
    from mdhom.learn.losses import make_loss
    grow = GrowParams(params, 0.3, 3, 0, False)
    for objective, k in (("reg:squarederror", 1), ("binary:logistic", 1), ("multi:softmax", 3),
                         ("multilabel:logistic", 2)):
        loss = make_loss(objective, k)
        y = (rng.integers(0, k, (n_rows, 1)) if k > 1 and objective == "multi:softmax"
             else rng.integers(0, 2, (n_rows, k))).astype(float)
        w = rng.random(n_rows) + 0.5
        base = loss.base_score(y, w)
        keep = rng.random(n_rows) < 0.8
        dev, ref = (OpenCLTreeKernels("oclgrind", exact=True, row_index=ROW_INDEX, blocks=BLOCKS,
                                block_group=GROUP,
                                      feature_major=FEATURE_MAJOR), NumpyKernels())
        for b in (dev, ref):
            b.load(bins, n_bins, k)
            b.set_objective(loss, y, w, base)
            b.add_eval(bins[:29], base)
            b.compute_gradients(keep)
        assert np.array_equal(dev.to_host(dev.histograms(np.array([0]))), ref.histograms(np.array([0]))), objective
        trees = [grow_tree(b, None, np.ones(n_feat, bool), grow, lambda f, b: np.asarray(b, float)) for b in (dev, ref)]
        for b, t in zip((dev, ref), trees):
            b.update_scores(t.value)
        assert np.array_equal(dev.scores(), ref.scores()), objective
        assert np.array_equal(dev.update_eval(0, trees[0]), ref.update_eval(0, trees[1])), objective
    print("TREES-OK")
""")


QUANTIZED = textwrap.dedent("""
    import numpy as np
    from mdhom.learn.binning import bin_dtype
    from mdhom.trees.backend import SplitParams
    from mdhom.trees.grower import GrowParams, grow_tree
    from mdhom.trees.numpy_backend import NumpyKernels
    from mdhom.learn.losses import make_loss
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    import mdhom
    from mdhom.components.row_histogram import feature_groups

    rng = np.random.default_rng(1)
    # 4 one-byte bins: a row is a 32-bit word; 3 with 300 bins (a node's whole-row histogram fits local memory), 3 with
    # 600 (it does not: a feature a group, tree_histogram_groups), or 4 (two words a row: a group's bin read from a
    # word, shifted where it is the word's second, ROW_WORDS)
    n_rows, n_bins, k = 71, N_BINS, 2
    n_feat = 4 if n_bins <= 256 or GROUP_WORDS else 3
    groups = feature_groups([d for d in mdhom.devices() if d.checker][0], n_feat, k, n_bins)
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
    one = lambda dims: {f"NUM_{w}_{d}": 1 for d in dims for w in ("WG", "WI")}
    mode = MODE
    local = int(not mode["blocks"])  # blocks are the CPUs' layout: private partials there, as on CPUs
    configs = {
        # local-memory partials with 32-bit atomics (g and h in two planes), several work-groups along rows (so the
        # combine kernel runs), two features per work-group (two local accumulators)
        "tree_histogram_q": {**one(("node", "feat", "output", "pos")), "NUM_WI_feat": 2, "NUM_WG_feat": 2,
                             "NUM_WI_pos": 8, "NUM_WG_pos": 3, "NUM_WG_node": 2, "NUM_WI_COMBINE": 4,
                             "PARTIALS_LOCAL": 1, "PACKED": 0, "SPLIT_PAIRS": 1},
        "tree_split_scan": {**one(("node", "feat", "output", "bin")), "NUM_WI_bin": 4, "NUM_WG_bin": 2,
                            "NUM_WI_COMBINE": 8},
        "tree_gh_absmax": {**one(("pos", "output")), "NUM_WI_pos": 8, "NUM_WG_pos": 3, "NUM_WI_COMBINE": 4},
        # whole rows per point, a node's histogram per work-group in local memory (packed 64-bit atomics) or, in
        # blocks, per work-item in private memory (packed 64-bit adds); partials of 3 groups combined; each work-item
        # from its own feature on; in blocks, each work-item folds a contiguous run of its node's rows (CHUNKED)
        "tree_histogram_rows": {**one(("node", "pos")), "NUM_WI_pos": 8 if local else 1, "NUM_WG_pos": 3,
                                "NUM_WG_node": 2, "NUM_WI_COMBINE": 4, "PARTIALS_LOCAL": local, "PACKED": 1,
                                "SPLIT_PAIRS": 0, "ROTATE": 1, "CHUNKED": 1 - local,
                                # rows read through the row index are rows-major here: a row's bins as words,
                                # the row 16 positions on prefetched (a checked read here)
                                **({"ROW_WORDS": 1} if mode["row_index"] and n_feat == 4 else {}),
                                **({"PREFETCH": 1} if mode["row_index"] else {}),
                                # ... and their local accumulator padded (a word every 32)
                                **({"LOCAL_PAD": 5} if mode["row_index"] and local else {}),
                                # moved rows offer INLINE, which Oclgrind cannot run: the same code as calls
                                **({} if mode["row_index"] else {"INLINE": 0}),
                                # the nodes' rows end to end, 3 work-groups' shares added into the zeroed output
                                **({"FLAT": 1, "NUM_WG_node": 1} if USE_FLAT else {})},
        # in feature groups: the groups over 2 work-groups, packed 64-bit local atomics, each work-item from its own
        # feature of the group on, the accumulator padded, rows 16 positions on prefetched
        "tree_histogram_groups": {**one(("node", "grp", "pos")), "NUM_WI_pos": 8, "NUM_WG_pos": 3, "NUM_WG_node": 2,
                                  "NUM_WG_grp": 2, "NUM_WI_COMBINE": 4, "PARTIALS_LOCAL": 1, "PACKED": 1,
                                  "SPLIT_PAIRS": 0, "ROTATE": 1,
                                  **({"LOCAL_PAD": 5, "PREFETCH": 1} if mode["row_index"] else {"INLINE": 0}),
                                  **({"ROW_WORDS": 1} if GROUP_WORDS else {})},
    }
    loss = make_loss("multilabel:logistic", k)
    y = rng.integers(0, 2, (n_rows, k)).astype(float)
    w = rng.random(n_rows) + 0.5
    base = loss.base_score(y, w)
    # a depthwise tree (on the device from the root: its last level within a budget of 6 leaves, which binds at 4
    # nodes, by tree_ahead_budget), then a loss-guided one (leaves searched in batches, some renamed back; rows learn
    # their leaves from tree_leaf_rows); the second tree's root reads region 0 of the positions, which the first
    # tree's splits (depth 3: regions 1 and 2) left as it was
    policies = [GrowParams(SplitParams(1.0, 0.1, 0.0, 0.5), 0.3, 3, 6, False),
                GrowParams(SplitParams(1.0, 0.1, 0.0, 0.5), 0.3, 0, 9, True)]
    dev = OpenCLTreeKernels("oclgrind", precision="quantized", configs=configs, **mode)
    ref = NumpyKernels("quantized")
    for b in (dev, ref):
        b.load(bins, n_bins, k)
        b.set_objective(loss, y, w, base)
        b.add_eval(bins[:29], base)
    hist_name = "tree_histogram_q" if not any(mode.values()) else (
        "tree_histogram_groups" if groups > 1 else "tree_histogram_rows")
    built = dev.ws.computations[hist_name].config  # and the defaults of what the test leaves out (FLAT)
    assert {k: built[k] for k in configs[hist_name]} == configs[hist_name], built
    for round_ in range(2):
        keep = rng.random(n_rows) < 0.8
        for b in (dev, ref):
            b.compute_gradients(keep)
        assert np.array_equal(dev.inv_scale, ref.inv_scale), round_
        assert np.array_equal(dev.to_host(dev.histograms(np.array([0]))), ref.histograms(np.array([0]))), round_
        grow = policies[round_]
        # the scores updated as the estimator does, as soon as the values are known: where rows move, the depth-wise
        # tree's last level's values made on the device (tree_leaf_values) before its search is read
        trees = [grow_tree(b, None, np.ones(n_feat, bool), grow, lambda f, b: np.asarray(b, float),
                           on_values=b.update_scores) for b in (dev, ref)]
        assert np.array_equal(trees[0].value, trees[1].value) and np.array_equal(trees[0].bin, trees[1].bin)
        assert np.array_equal(dev.row_nodes(), ref.row_nodes()), round_
        assert (trees[0].left < 0).sum() >= 4, round_
        assert np.array_equal(dev.scores(), ref.scores()), round_
        assert np.array_equal(dev.update_eval(0, trees[0]), ref.update_eval(0, trees[1])), round_
    print("QUANTIZED-OK", "tree_leaf_values" in dev.ws.computations, "tree_ahead_chain" in dev.ws.computations)
""")


CATEGORICAL = textwrap.dedent("""
    import numpy as np
    from mdhom.trees.backend import SplitParams
    from mdhom.trees.grower import GrowParams, grow_tree
    from mdhom.trees.numpy_backend import NumpyKernels
    from mdhom.trees.opencl_backend import OpenCLTreeKernels
    from mdhom.learn.losses import make_loss
    from mdhom.trees.reference import ONE_VS_REST, SORTED

    rng = np.random.default_rng(2)
    n_rows, n_bins = 61, 9
    bins = rng.integers(0, n_bins, size=(n_rows, 3)).astype(np.uint8)
    bins[:, 1] = np.minimum(bins[:, 1], n_bins - 3)
    bins[::7, 1] = n_bins - 1
    bins[:, 2] = rng.integers(0, 3, n_rows)
    mode = np.array([0, SORTED, ONE_VS_REST], np.uint8)
    y = rng.standard_normal((n_rows, 1)) + np.array([2, -1, 0.5, 3, -2, 0, 1, -3, 0])[bins[:, 1]][:, None]
    loss = make_loss("reg:squarederror", 1)
    w = rng.random(n_rows) + 0.5
    one = lambda dims: {f"NUM_{w}_{d}": 1 for d in dims for w in ("WG", "WI")}
    parallel = {"tree_split_scan_cat": {**one(("node", "feat", "output", "bin", "bin2")), "NUM_WI_bin": 4,
                                        "NUM_WG_bin": 2, "NUM_WI_bin2": 4, "NUM_WG_bin2": 2, "NUM_WI_COMBINE": 4}}
    grow = GrowParams(SplitParams(1.0, 0.0, 0.0, 0.5, cat_smooth=1.0), 0.3, 3, 0, False,
                      categorical=mode > 0)
    # the per-row partition, and the group partition in blocks of 16 rows (several a split node)
    for precision, configs, part in (("double", None, dict(blocks=0)),
                                     ("quantized", parallel, dict(blocks=16, block_group=4))):
        dev = OpenCLTreeKernels("oclgrind", precision=precision, configs=configs, **part)
        ref = NumpyKernels(precision)
        trees = []
        for b in (dev, ref):
            b.load(bins, n_bins, 1, mode)
            b.set_objective(loss, y, w, np.zeros(1))
            b.compute_gradients(None)
            b.add_eval(bins[:23], np.zeros(1))
            trees.append(grow_tree(b, None, np.ones(3, bool), grow, lambda f, b: np.asarray(b, float)))
        assert trees[1].cat_left is not None and (trees[1].cat_left.row >= 0).any(), precision
        assert np.array_equal(trees[0].value, trees[1].value), precision
        assert np.array_equal(trees[0].cat_left.table, trees[1].cat_left.table), precision
        assert np.array_equal(dev.row_nodes(), ref.row_nodes()), precision
        assert np.array_equal(dev.update_eval(0, trees[0]), ref.update_eval(0, trees[1])), precision
    print("CATEGORICAL-OK")
""")


def test_categorical_tree_kernels_clean_under_oclgrind(oclgrind_device):
    """Categorical split search (the O(bins^2) scan, sequential and with several work-groups along the summed
    bins), left tables in the partition's split table (partitioned a work-item per row, and by the group partition,
    its block table after the left tables) and in the predictor's tree table, under the checker."""
    checked(CATEGORICAL, "CATEGORICAL-OK", timeout=900)


@pytest.mark.parametrize("mode, n_bins", [("{'row_index': False, 'whole_rows': False, 'blocks': 0}", 9),
                                          ("{'row_index': False, 'whole_rows': True, 'lookahead': 2, 'blocks': 8, 'block_group': 0}", 9),
                                          ("{'row_index': False, 'whole_rows': True, 'blocks': 8, 'block_group': 0, "
                                           "'flat': 1}", 9),
                                          ("{'row_index': True, 'columns': False, 'lookahead': 1, 'blocks': 0}", 9),
                                          ("{'row_index': True, 'columns': True, 'blocks': 8, 'block_group': 0}", 300),
                                          ("{'row_index': True, 'columns': True, 'lookahead': 1, 'blocks': 8, "
                                           "'block_group': 2}", 9),
                                          ("{'row_index': True, 'columns': False, 'blocks': 0, 'flat': 1}", 9),
                                          ("{'row_index': True, 'columns': True, 'lookahead': 1, 'blocks': 8, "
                                           "'block_group': 2}", 600),
                                          ("{'row_index': True, 'columns': False, 'blocks': 0, 'words': 1}", 600)],
                         ids=["moved", "whole-rows-blocks", "whole-rows-blocks-flat", "row-index",
                              "row-index-16-bit-bins-blocks", "row-index-groups", "row-index-flat",
                              "row-index-feature-groups", "row-index-feature-groups-words"])
def test_quantized_tree_kernels_clean_under_oclgrind(oclgrind_device, mode, n_bins):
    """The quantized round (MAX reduction, quantisation, int32 histograms with local atomics over several
    work-groups, 32-bit or packed 64-bit, or packed in private memory, rows read as 32-bit words, integer scans
    and subtraction) under the checker, equal to the numpy reference; with rows
    moved and a feature per lane, whole rows per point, and rows read through the row index (the 300-bin case
    with the partition reading a column copy of the bins); 300 bins: 16-bit bins and a 14 KB local histogram.
    The scores are updated as the estimator does, from the tree's values as soon as they are known: where rows
    move, the depth-wise tree's last level's values come from ``tree_leaf_values`` before its search is read, its
    rows' leaves from ``tree_leaf_rows`` queued behind the level's launches. Those with ``lookahead`` grow the
    loss-guided tree with the device's look-ahead (split tables made on the device, partitions launched for an upper
    bound of the rows; below its bounded batches, the children the next batch takes: ``tree_ahead_chain``); two partition in blocks of 8 rows (the CPUs' layout: a split node
    spans several blocks), moving rows as CPUs do; one in blocks of a work-group
    each (GPUs' group partition); the look-ahead's tables in both block cases are cut into blocks on the device; one
    builds its whole-row histograms FLAT (the nodes' rows end to end, pieces added into the output with global
    atomics), and one more so with rows moved, in private accumulators (a whole node's stored); one has 600 bins,
    whose whole-row histogram does not fit Oclgrind's local memory: it builds them in feature groups (``tree_histogram_groups``), and once more with rows of whole words, each group's bins read as
    words (``ROW_WORDS``)."""
    flat, words = "'flat': 1" in mode, "'words': 1" in mode
    mode = mode.replace(", 'flat': 1", "").replace(", 'words': 1", "")
    code = (QUANTIZED.replace("MODE", mode).replace("N_BINS", str(n_bins)).replace("USE_FLAT", str(flat))
            .replace("GROUP_WORDS", str(words)))
    run = checked(code, "QUANTIZED-OK", timeout=900)
    # where rows move, the depth-wise tree's last level had its leaf values made on the device (tree_leaf_values); with
    # the look-ahead, the loss-guided tree's bounded batches had their next batches' children split on the device
    # (tree_ahead_chain)
    values, chained = run.stdout.split("QUANTIZED-OK ")[1].split()[:2]
    assert (values == "True") == ("'row_index': False" in mode), run.explain()
    assert (chained == "True") == ("'lookahead'" in mode), run.explain()


FLAT_WINDOWS = textwrap.dedent("""
    import numpy as np
    import mdhom
    from mdhom.components import histogram as hg
    from mdhom.components import row_histogram as rh
    from mdhom.mdh import build_within_limits
    from mdhom.mdh.parts import FLAT_SPAN

    dev = [d for d in mdhom.devices() if d.checker][0]
    rng = np.random.default_rng(3)
    n_nodes, n_feat, n_bins = FLAT_SPAN + 9, 4, 9
    counts = rng.integers(0, 3, n_nodes).astype(np.int32)
    counts[FLAT_SPAN - 2: FLAT_SPAN + 3] = 0
    n = int(counts.sum())
    begin = (np.cumsum(counts) - counts).astype(np.int32)
    ridx = rng.permutation(n).astype(np.int32)
    bins = rng.integers(0, n_bins, size=(n, n_feat)).astype(np.uint8)
    gh = rng.integers(-1000, 1000, size=(n, 1, 2)).astype(np.int32)
    gh[..., 1] = np.abs(gh[..., 1])
    want = hg.histogram_reference(bins, gh[..., 0], gh[..., 1], ridx, begin, counts, n_bins)
    desc = rh.histogram_rows(n_bins, n_feat, 1, False, True)
    one = {f"NUM_{w}_{d}": 1 for d in ("node", "pos") for w in ("WG", "WI")}
    cfg = {**one, "NUM_WG_pos": 3, "NUM_WI_pos": 8, "PARTIALS_LOCAL": 1, "FLAT": 1, "PACKED": 0, "SPLIT_PAIRS": 1,
           "ROTATE": 1, "ROW_WORDS": 1, "LOCAL_PAD": 5}
    got = build_within_limits(desc, dev, cfg)(
        {"node": n_nodes, "pos": int(counts.max())}, bins=bins.reshape(-1), gh=gh.reshape(-1), slot_begin=begin,
        slot_count=counts, ridx=ridx, n_rows=n).reshape(n_nodes, n_feat, 1, n_bins)
    assert np.array_equal(np.stack([got["g"], got["h"]], axis=-1), want)
    print("FLAT-OK")
""")


def test_flat_histogram_windows_clean_under_oclgrind(oclgrind_device):
    """FLAT over more nodes than one prefix window (FLAT_SPAN): the second window's prefix rewritten after every
    work-item of the first is done with it, empty nodes at the seam; no race, no out-of-bounds access."""
    checked(FLAT_WINDOWS, "FLAT-OK")


AHEAD_WRITES = textwrap.dedent("""
    import numpy as np
    import pyopencl.array as cl_array
    import mdhom
    from mdhom.components import lanes as ln
    from mdhom.components import lookahead
    from mdhom.components import split_result as spr
    from mdhom.components import tables as tb
    from mdhom.components.workspace import opaque
    from mdhom.mdh import build_within_limits

    dev = [d for d in mdhom.devices() if d.checker][0]
    q = dev.queue
    rng = np.random.default_rng(5)
    half, n_feat, k, n_bins, n_rows = 6, 3, 2, 9, 500
    m = 2 * half
    hist = np.zeros((m, n_feat, k, n_bins, 2), np.int32)
    hist[..., 0] = rng.integers(-9, 10, hist.shape[:-1])
    hist[..., 1] = rng.integers(0, 3, hist.shape[:-1])
    scan = np.cumsum(hist, axis=3, dtype=np.int32)
    best = np.zeros(m, ln.split_type("quantized").dtype)
    best["value"] = rng.choice([-np.inf, 0.0, 0.5, 2.0], m)
    best["index"] = rng.integers(0, n_feat * (n_bins - 2) * 2, m)
    inv = np.ldexp(1.0, -np.arange(10, 10 + 2 * k)).reshape(k, 2)
    last = tb.split_table(half)
    last["count"] = rng.integers(0, 40, half)
    last["begin"] = np.cumsum(last["count"]) - last["count"]
    last["next_child"] = rng.integers(0, 2, half)
    n_left = np.array([rng.integers(0, c + 1) for c in last["count"]], np.int32)
    allow = np.ones(m, np.int32)
    res = spr.split_sums_reference(scan, hist, best, "quantized", inv)
    want = lookahead.split_from_search_reference(res, last, n_left, allow, 50, n_bins, n_rows, 3)
    blk_rows = 8
    n_blk = int(last["count"].sum()) // blk_rows + m + 2  # the partition's bound
    pairs = lookahead.block_pairs_reference(want["count"], n_blk, blk_rows)
    put = lambda a: cl_array.to_device(q, np.ascontiguousarray(a))
    for summed in (False, True):
        desc = lookahead.split_from_search(n_bins, k, "quantized", summed)
        recs = put(np.zeros((m, k), res.dtype))  # exactly the entries' records: a write past them is out of bounds
        blk = put(np.zeros(2 * n_blk, np.int32))  # ... and exactly the bound's blocks
        extra = {"cat_mode": opaque(put(np.zeros(n_feat, np.uint8)), None)} if summed else {}
        comp = build_within_limits(desc, dev, {"NUM_WI_entry": 4, "NUM_WG_entry": 2})
        got = comp.enqueue({"entry": m + 1}, queue=q, res=opaque(recs, np.uint8), scan=opaque(put(scan), None),
                           hist=opaque(put(hist), None), best=put(best.view(np.int32).reshape(m, -1)),
                           best_value=opaque(put(best.view(np.float64)), None), inv_scale=opaque(put(inv), None),
                           last_tab=opaque(put(last), np.int32), n_left=opaque(put(n_left), None),
                           allow=opaque(put(allow), None), blk_tab=opaque(blk, None), n_entries=m, base=50,
                           n_rows=n_rows, root=0, leaves=3, min_gain=0.0, n_feat=n_feat, blk_rows=blk_rows,
                           n_blk=n_blk, **extra).out.get()
        assert np.array_equal(got.view(tb.SPLIT_RECORD.dtype).reshape(-1), want), summed
        back = recs.get()
        assert all(back[f].tobytes() == res[f].tobytes() for f in res.dtype.names), summed
        assert np.array_equal(blk.get().reshape(-1, 2), pairs), summed
    print("AHEAD-OK")
""")


def test_split_from_search_writes_clean_under_oclgrind(oclgrind_device):
    """The look-ahead's table maker writes the search's packed result and the block table beside its table (written
    gathered inputs): each entry its own records and blocks, none past them (the sentinel's blocks up to the bound),
    while every entry reads the others' gains from the score's result; no race, no out-of-bounds access, both ways of
    summing."""
    checked(AHEAD_WRITES, "AHEAD-OK")


SIBLINGS_ZERO = textwrap.dedent("""
    import numpy as np
    import pyopencl.array as cl_array
    import mdhom
    from mdhom.components import histogram as hg
    from mdhom.components.workspace import opaque
    from mdhom.mdh import build_within_limits

    dev = [d for d in mdhom.devices() if d.checker][0]
    q = dev.queue
    rng = np.random.default_rng(9)
    n, cells = 5, 41
    parent = rng.integers(-99, 99, (7, cells)).astype(np.int32)
    child = rng.integers(-99, 99, (n, cells)).astype(np.int32)
    put = lambda a: cl_array.to_device(q, np.ascontiguousarray(a))
    desc = hg.hist_siblings("quantized")
    one = {f"NUM_{w}_{d}": 1 for d in ("side", "node", "cell") for w in ("WG", "WI")}
    for cfg in ({**one, "NUM_WI_cell": 4, "NUM_WG_cell": 3, "CHUNKED": 1},
                {**one, "NUM_WI_cell": 8, "NUM_WG_cell": 2, "NUM_WG_side": 2, "NUM_WG_node": 2, "CHUNKED": 0}):
        zero = put(np.full(2 * n * cells, 5, np.int32))  # exactly the next level's cells: a write past is caught
        # the arena as on NVIDIA: the parents' slots, then exactly the slots the launch stores its output into, one
        # buffer read as the parents and written as the store (disjoint cells: no race, no write past the end)
        arena = put(np.concatenate([parent, np.full((2 * n, cells), 3, np.int32)]))
        got = build_within_limits(desc, dev, cfg).enqueue(
            {"side": 2, "node": n, "cell": cells}, queue=q, child=put(child), parent=opaque(arena, None),
            pidx=opaque(put(np.zeros(1, np.int32)), None), zero=opaque(zero, None), store=opaque(arena, None),
            use_index=0, pnode0=2, zero_next=1, store_at=7 * cells).out.get()
        want = hg.hist_siblings_reference(parent, child, np.arange(2, 7))
        assert np.array_equal(got.reshape(2 * n, cells), want)
        assert not zero.get().any(), cfg
        assert np.array_equal(arena.get().reshape(-1, cells), np.concatenate([parent, want])), cfg
    print("ZERO-OK")
""")


def test_siblings_zeroing_clean_under_oclgrind(oclgrind_device):
    """The siblings' zeroing of the next level's histograms (a written input, as many cells as it writes) and their
    store into the arena past the parents they read from the same buffer (as on NVIDIA): no race, no out-of-bounds
    access, under a chunked and a strided schedule."""
    checked(SIBLINGS_ZERO, "ZERO-OK")


REAL_ROWS = textwrap.dedent("""
    import numpy as np
    import pyopencl.array as cl_array
    import mdhom
    from mdhom.components import histogram as hg
    from mdhom.components import row_histogram_real as rhr
    from mdhom.components.workspace import opaque
    from mdhom.learn.binning import bin_dtype
    from mdhom.mdh import build_within_limits

    dev = [d for d in mdhom.devices() if d.checker][0]
    q = dev.queue
    rng = np.random.default_rng(9)
    n_rows, k = 203, 2
    counts = [61, 0, 1, 141]  # an empty node and a node of one row
    order = rng.permutation(n_rows)
    begin = np.cumsum([0] + counts[:-1]).astype(np.int32)
    count = np.asarray(counts, np.int32)
    ridx = np.concatenate([np.sort(order[b:b + c]) for b, c in zip(begin, count)]).astype(np.int32)
    put = lambda a: cl_array.to_device(q, np.ascontiguousarray(a))
    # (features, bins, groups, words, row index, row stride: rows padded to it, the padding never read)
    cases = ((6, 9, 1, 1, 0, 0), (6, 9, 3, 0, 0, 0), (6, 9, 2, 1, 0, 0), (4, 300, 2, 1, 0, 0), (3, 9, 1, 0, 0, 0),
             (8, 9, 1, 1, 1, 0), (6, 9, 3, 0, 1, 0), (4, 300, 2, 1, 1, 0), (8, 9, 1, 1, 1, 12), (6, 9, 3, 0, 1, 7),
             (6, 9, 3, 1, 1, 8), (7, 9, 1, 1, 1, 8))
    for case, (n_feat, n_bins, groups, words, index, stride) in enumerate(cases):
        bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
        g, h = rng.standard_normal((n_rows, k)), rng.random((n_rows, k))
        want = hg.histogram_reference(bins, g, h, ridx, begin, count, n_bins)
        desc = rhr.histogram_rows_real(n_bins, n_feat, k, groups, row_index=bool(index), row_stride=stride)
        one = {f"NUM_{w}_{d}": 1 for d in ("node", "grp", "pos") for w in ("WG", "WI")}
        # moved rows' builds take INLINE, row-index builds PREFETCH (here a read of each prefetched address)
        cfg = {**one, "NUM_WG_node": 2, "NUM_WG_grp": groups, "PREFETCH" if index else "INLINE": index,
               "PAIR_VEC": case % 2}  # (g, h) as one vector add in half the cases, with and without words
        if "ROW_WORDS" in desc.switches:
            cfg["ROW_WORDS"] = words
        comp = build_within_limits(desc, dev, cfg)
        at = np.arange(n_rows) if index else ridx  # a row-index build reads row ridx[p] at position p
        extra = {"ridx": put(ridx)} if index else {}
        laid = np.pad(bins[at], ((0, 0), (0, max(0, stride - n_feat))), constant_values=n_bins - 1)
        args = dict(bins=put(laid.reshape(-1)), gh=put(np.stack([g[at], h[at]], -1).reshape(-1)),
                    slot_begin=put(begin), slot_count=put(count), n_rows=n_rows, **extra)
        got = comp.enqueue({"node": len(counts), "grp": groups, "pos": max(counts)}, queue=q, **args, blocks=0,
                           part=opaque(put(np.zeros(1)), None)).out.get()
        got = got.reshape(len(counts), n_feat, k, n_bins)
        assert np.array_equal(np.stack([got["g"], got["h"]], axis=-1), want), (n_feat, n_bins, groups, words, index,
                                                                                stride)
        # each node's blocks of 16 rows in turn, added up by the work-item (running sums in part past the nodes, NaN
        # until a first block is stored there): the blocked sums
        cells = n_feat * k * n_bins
        blocked = build_within_limits(rhr.histogram_rows_real(n_bins, n_feat, k, groups, row_index=bool(index),
                                                              block_rows=16, row_stride=stride), dev, cfg)
        part = put(np.full(2 * len(counts) * cells * 2, np.nan))
        got = blocked.enqueue({"node": len(counts), "grp": groups, "pos": max(counts)}, queue=q, **args, blocks=1,
                              part=opaque(part, None)).out.get()
        got = got.reshape(len(counts), n_feat, k, n_bins)
        blocks = np.zeros_like(want)
        for i, (b, c) in enumerate(zip(begin, count)):
            for j in range(0, c, 16):
                blocks[i] = blocks[i] + hg.histogram_reference(bins, g, h, ridx, [b + j], [min(16, c - j)], n_bins)[0]
        assert np.array_equal(np.stack([got["g"], got["h"]], axis=-1), blocks), (n_feat, n_bins, groups, index)
    print("REAL-OK")
""")


def test_real_whole_row_histogram_clean_under_oclgrind(oclgrind_device):
    """The float64 whole-row histogram (``tree_histogram_rows_real``, CPUs' default in float64 fits) in feature groups
    and whole, bins read as bytes and as words (a group starting mid-word), 16-bit bins, rows moved and read through
    the row index (with the prefetch of the row 16 positions on; rows padded to a longer stride too, the padding never
    read), a row's (g, h) added as scalars and as one vector
    (``PAIR_VEC``), an empty node and a node of one row, the four nodes dealt in strides to two work-groups (as CPUs
    deal block slots): the reference's sums bit for bit, no out-of-bounds access, no race, no uninitialised read; and
    each node's blocks of 16 rows folded in turn and added up in order (``blocks`` 1: the earlier ones' sum kept in
    ``part``), the blocked sums."""
    checked(REAL_ROWS, "REAL-OK")


BLOCKED_TREES = textwrap.dedent("""
    import numpy as np
    import mdhom.components.histogram_blocks as hb
    from mdhom.learn.binning import BinMapper
    from mdhom.trees.backend import SplitParams
    from mdhom.trees.grower import GrowParams, grow_tree
    from mdhom.trees.numpy_backend import NumpyKernels
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    hb.BLOCK_ROWS = 16
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 4))
    g, h = np.tanh(X[:, :2].sum(1, keepdims=True)), 0.25 + 0.5 * rng.random((300, 1))
    m = BinMapper(15).fit(X)
    bins = m.transform(X)
    mask = np.ones(4, bool)

    def tree(kernels, lossguide, turns_from=None):
        kernels.load(bins, m.n_bins, 1)
        if turns_from is not None:
            kernels.hist.turns_from = turns_from
        kernels.set_gradients(g, h)
        gp = GrowParams(SplitParams(1.0, 0.0, 0.0, 1e-3), 0.1, 0 if lossguide else 4, 12 if lossguide else 0,
                        lossguide)
        return grow_tree(kernels, None, mask, gp, lambda f, b: np.asarray(b, float))

    for layout in ({"whole_rows": True}, {"whole_rows": True, "row_index": True}, {}):
        for turns_from in (1, 4):  # every launch's nodes folding their blocks in turn; fewer than 4 nodes in slots
            for lossguide in (True, False):
                dev = OpenCLTreeKernels("oclgrind", **layout)
                got, want = tree(dev, lossguide, turns_from), tree(NumpyKernels(), lossguide)
                for field in ("left", "right", "feature", "bin", "default_left", "value", "gain"):
                    assert np.array_equal(getattr(got, field), getattr(want, field)), (layout, field)
                assert "tree_hist_blocks" in dev.ws.computations
    print("BLOCKS-OK")
""")


def test_blocked_histograms_clean_under_oclgrind(oclgrind_device):
    """Float64 trees whose nodes span many row blocks (blocks of 16 rows here): their blocks built as nodes of their
    own (``tree_row_blocks``) or folded in turn by the whole-row build, added up by ``tree_hist_blocks``; the trees the
    blocked reference grows, no out-of-bounds access, no race, no uninitialised read."""
    checked(BLOCKED_TREES, "BLOCKS-OK", timeout=900)


@pytest.mark.parametrize("row_index, n_bins, blocks, group, feature_major",
                         [(False, 9, 0, 0, None), (True, 9, 40, 0, None), (False, 300, 16, 0, None),
                          (False, 9, 16, 0, False), (True, 9, 16, 4, None), (False, 300, 16, 8, None)],
                         ids=["moved", "row-index-blocks", "16-bit-bins-blocks", "moved-rows-major-blocks",
                              "row-index-groups", "16-bit-bins-groups"])
def test_tree_kernels_clean_under_oclgrind(oclgrind_device, row_index, n_bins, blocks, group, feature_major):
    """Double precision, exact and parallel, with rows moved and read through the row index (wide rows on CPUs),
    and with 16-bit bins (300 bins: the scatter moves two bytes a cell); partitions a work-item per row or in
    blocks of 16 rows (40 read through the row index, where a block's walk prefetches, here reads, the split bin of
    the row 16 on), walked by a work-item each (CPUs) or by a work-group of 4 or 8 (GPUs' group partition: a
    work-item's run of 4 or 2 rows, the runs' left counts scanned in local memory). Moved rows are features-major by default here (Oclgrind is a GPU-type device: both halves of
    the positions in each feature's column), and rows-major as on CPUs (a row's bins moved as 4-byte words)."""
    code = CODE.replace("ROW_INDEX", str(row_index)).replace("N_BINS", str(n_bins)).replace("BLOCKS", str(blocks))
    code = code.replace("FEATURE_MAJOR", str(feature_major)).replace("GROUP", str(group))
    checked(code, "TREES-OK", timeout=900)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
