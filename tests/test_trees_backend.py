"""OpenCLTreeKernels against NumpyTreeKernels: trees grown side by side from the same gradients must take
the same decisions (feature, bin, default direction, row assignment) on every device. In exact mode (the
double-precision default) histograms, gains and sums are bit-identical; otherwise sums agree within 1e-9."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cl_array
import pytest

from mdhom.components.lanes import padded_stride
from mdhom.trees.backend import SplitParams
from mdhom.trees.opencl_backend import OpenCLTreeKernels
from mdhom.trees.reference import NumpyTreeKernels

PARAMS = SplitParams(reg_lambda=1.0, reg_alpha=0.0, min_split_gain=0.0, min_child_weight=1e-3)


def make_data(seed, n_rows, n_feat, n_bins, n_out, dyadic=False):
    """Binned features using different numbers of bins, some missing values, and gradients that depend on
    the bins (so splits are meaningful). ``dyadic`` gradients make every sum exact in any order."""
    rng = np.random.default_rng(seed)
    used = rng.integers(2, n_bins, size=n_feat)  # real-valued bins 0 .. used-2 per feature
    bins = (rng.random((n_rows, n_feat)) * (used - 1)).astype(np.uint8)
    bins[rng.random((n_rows, n_feat)) < 0.05] = n_bins - 1
    signal = (bins[:, :3].astype(float) - 3).sum(1, keepdims=True)
    grad = np.tanh(signal / 5) + 0.3 * rng.standard_normal((n_rows, n_out))
    hess = 0.25 + 0.5 * rng.random((n_rows, n_out))
    if dyadic:
        grad, hess = np.round(grad * 256) / 256, np.round(hess * 256) / 256
    grad[rng.random(n_rows) < 0.1] = 0.0  # rows left out by subsampling
    return bins, grad, hess


def _parallel_hist(device, n_feat, n_out):
    """A histogram configuration that folds rows in four lanes of three work-groups: not the row order."""
    cfg = {f"NUM_{w}_{d}": 1 for d in ("node", "feat", "output", "pos") for w in ("WG", "WI")}
    return {**cfg, "NUM_WG_feat": n_feat, "NUM_WI_pos": 4, "NUM_WG_pos": 3, "NUM_WI_COMBINE": 16}


def check_same(dev_hist, ref_hist, dev_splits, ref_splits, exact):
    got = dev_hist
    if exact:
        np.testing.assert_array_equal(got, ref_hist)
    else:
        scale = max(1.0, float(np.abs(ref_hist).max()))
        np.testing.assert_allclose(got, ref_hist, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_array_equal(dev_splits.feature, ref_splits.feature)
    np.testing.assert_array_equal(dev_splits.bin, ref_splits.bin)
    np.testing.assert_array_equal(dev_splits.default_left, ref_splits.default_left)
    np.testing.assert_array_equal(np.isfinite(dev_splits.gain), np.isfinite(ref_splits.gain))
    ok = np.isfinite(ref_splits.gain)
    if exact:
        np.testing.assert_array_equal(dev_splits.gain, ref_splits.gain)
    np.testing.assert_allclose(dev_splits.gain[ok], ref_splits.gain[ok], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dev_splits.left_sum, ref_splits.left_sum, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dev_splits.right_sum, ref_splits.right_sum, rtol=1e-9, atol=1e-9)


def grow_depthwise(backends, n_bins, levels, params, feature_mask, exact):
    """Depth-wise growth with subtraction (build the left child, subtract for the right), every step on
    every backend; the reference's decisions drive both, and the device's must equal them."""
    dev, ref = backends
    nodes, next_id = np.array([0], np.int32), 1
    hists = [b.histograms(nodes) for b in backends]
    grown = 0
    for _ in range(levels):
        splits = [b.best_splits(h, feature_mask, params) for b, h in zip(backends, hists, strict=True)]
        check_same(dev.to_host(hists[0]), hists[1], splits[0], splits[1], exact)
        ok = np.isfinite(splits[1].gain)
        if not ok.any():
            break
        s = splits[1]
        parents = nodes[ok]
        left = np.arange(next_id, next_id + 2 * ok.sum(), 2, dtype=np.int32)
        right = left + 1
        next_id += 2 * int(ok.sum())
        for b in backends:
            b.apply_splits(parents, s.feature[ok], s.bin[ok], s.default_left[ok], left, right)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
        for node in (*left[:2], *right[:2]):
            np.testing.assert_array_equal(dev.node_rows(node), np.flatnonzero(ref.row_nodes() == node))
        parent_h = [b.concat([h]) if len(parents) == len(nodes) else None for b, h in zip(backends, hists, strict=True)]
        if len(parents) == len(nodes):
            new = []
            for b, ph in zip(backends, parent_h, strict=True):
                lh = b.histograms(left)
                new.append(b.concat([lh, b.subtract(ph, lh)]))
        else:
            new = [b.histograms(np.concatenate([left, right])) for b in backends]
        nodes, hists = np.concatenate([left, right]), new
        grown += 1
    return grown


@pytest.mark.parametrize("row_index,blocks,group,feature_major,whole_rows", [
    (False, 0, 0, None, False), (True, 0, 0, None, False), (False, 96, 0, None, False), (True, 64, 0, None, False),
    (False, 0, 0, True, False), (False, 96, 0, True, False), (True, 64, 16, None, False), (False, 96, 32, None, False),
    (False, 96, 4, True, False), (False, 0, 0, None, True), (False, 96, 0, None, True), (False, 96, 32, None, True),
    (False, 0, 0, True, True), (True, 0, 0, None, True), (True, 64, 0, None, True)],
    ids=["moved", "row-index", "moved-blocks", "row-index-blocks", "moved-features-major", "moved-blocks-features-major",
         "row-index-groups", "moved-groups", "moved-groups-features-major", "moved-whole-rows", "moved-blocks-whole-rows",
         "moved-groups-whole-rows", "moved-features-major-whole-rows", "row-index-whole-rows",
         "row-index-blocks-whole-rows"])
@pytest.mark.parametrize("n_out,dyadic,exact", [(1, False, True), (3, False, True), (1, True, False)],
                         ids=["k1-exact", "k3-exact", "k1-parallel-dyadic"])
def test_grow_depthwise_side_by_side(device, n_out, dyadic, exact, row_index, blocks, group, feature_major,
                                     whole_rows):
    """Exact mode on arbitrary gradients; the parallel-fold mode on gradients whose sums are exact in any
    order (a few ulps elsewhere may flip ties between empty bins after subtraction, in either backend). With
    rows moved by the partition, and read through the row index (wide rows on CPUs): a node's rows in ascending
    order either way, so the exact fold is the reference's. The partition a work-item per row, or in blocks
    (CPUs' layout; small blocks here, so that a node spans many), or in blocks of a work-group each (GPUs' group
    partition; a few rows per work-item here). Moved rows features-major too (GPUs' default there): each feature's
    column holds both halves of the positions. Histograms a feature per lane, or whole rows in real lanes, moved or
    through the row index (``whole_rows``, CPUs' default: a (node, feature group)'s rows in order, the same bits)."""
    n_bins = 17
    bins, grad, hess = make_data(11, 2053, 6, n_bins, n_out, dyadic)
    configs = None if exact else {"tree_histogram": {**_parallel_hist(device, bins.shape[1], n_out)}}
    dev = OpenCLTreeKernels(device, exact=exact, configs=configs, row_index=row_index, blocks=blocks,
                            block_group=group, feature_major=feature_major, whole_rows=whole_rows)
    ref = NumpyTreeKernels()
    for b in (dev, ref):
        b.load(bins, n_bins, n_out)
        b.set_gradients(grad, hess)
        b.reset_rows()
    built, comps = dev.build_seconds, dev.ws.computations
    # every md_hom kernel built in load(), none later (the loss and eval kernels: set_objective, add_eval)
    hist = "tree_histogram_rows_real" if whole_rows else "tree_histogram"  # (one class of whole rows: 2053 rows)
    assert built > 0 and set(comps) == ({hist} if whole_rows else {hist, f"{hist} (few)", f"{hist} (levels)"}) | {
        "tree_gather_gh", "tree_hist_siblings",
        "tree_split_scan", "tree_split_scan (levels)", "tree_split_score", "tree_split_score (levels)", "tree_split_sums", "tree_partition_flags",
        "tree_score_update", "tree_leaf_rows", "tree_split_from_search"} | (
        {"tree_bin_columns"} if dev.ws.columns else set()) | (
        {"tree_group_counts"} if blocks and (group or not row_index) else set()) | (
        {"tree_group_scatter"} if blocks and group else set()) | (
        {"tree_block_scatter"} if blocks and not group and not row_index else set()) | (
        {"tree_block_stage", "tree_block_copy"} if blocks and not group and row_index else set()) | ({"tree_scatter_rows"} if not blocks else set())
    # (the depth-wise levels on the device: float64 fits too; their tables' blocks written by the table maker)
    assert dev.ws.columns == (row_index and device.type == "gpu")  # the partition's column copy: GPUs by default
    mask = np.ones(bins.shape[1], bool)
    mask[4] = False
    assert grow_depthwise((dev, ref), n_bins, 5, PARAMS, mask, exact=True) >= 4
    assert dev.ws.row_index == row_index and dev.hist.d_hist.name == hist and dev.rows.blocks == blocks
    assert dev.rows.group == group
    # a second tree from fresh gradients reuses every build
    grad2 = -grad
    for b in (dev, ref):
        b.set_gradients(grad2, hess)
        b.reset_rows()
    params = SplitParams(reg_lambda=0.5, reg_alpha=0.25, min_split_gain=0.01, min_child_weight=2.0)
    assert grow_depthwise((dev, ref), n_bins, 4, params, np.ones(bins.shape[1], bool), exact=True) >= 2
    assert dev.build_seconds == built and dev.ws.computations == comps


@pytest.mark.parametrize("blocks,columns", [(0, False), (64, False), (64, True)],
                         ids=["rows", "blocks", "blocks-columns"])
def test_real_whole_rows_through_the_row_index_are_padded(device, blocks, columns):
    """Float64 whole rows read through the row index lie padded to whole sectors (26 one-byte bins a row: 32 bytes,
    :func:`mdhom.components.lanes.padded_stride`): the histogram and the partition reading its split bins from the
    rows (a work-item a row, or blocks) or from the column copy made of them step by the stride; the levels are the
    reference's bit for bit, from bins given as a numpy array (a padded host copy, its rows on whole lines) or already
    on the device (copied into padded rows there). Rows that move, or of a width that padding would swell, keep their
    own."""
    if not device.has_fp64:
        pytest.skip(f"{device.key} has no float64")
    n_bins = 17
    bins, grad, hess = make_data(13, 1303, 26, n_bins, 1)
    dev = OpenCLTreeKernels(device, row_index=True, whole_rows=True, blocks=blocks, columns=columns)
    ref = NumpyTreeKernels()
    given = cl_array.to_device(dev.ws.queue, bins) if columns else bins  # (a device array: copied into padded rows)
    dev.load(given, n_bins, 1)
    ref.load(bins, n_bins, 1)
    for b in (dev, ref):
        b.set_gradients(grad, hess)
        b.reset_rows()
    assert dev.hist.d_hist.name == "tree_histogram_rows_real" and dev.ws.columns == columns
    assert dev.ws.row_stride == padded_stride(26, n_bins) == 32
    assert grow_depthwise((dev, ref), n_bins, 5, PARAMS, np.ones(26, bool), exact=True) >= 4
    np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    moved = OpenCLTreeKernels(device, row_index=False, whole_rows=True, blocks=blocks)
    moved.load(bins, n_bins, 1)
    narrow = OpenCLTreeKernels(device, row_index=True, whole_rows=True, blocks=blocks)
    narrow.load(bins[:, :20], n_bins, 1)  # 20 bytes: 32 would add more than a quarter
    assert moved.ws.row_stride == 26 and narrow.ws.row_stride == 20


@pytest.mark.parametrize("blocks,group", [(0, 0), (100, 0), (100, 8)], ids=["rows", "blocks", "groups"])
def test_grow_lossguide_side_by_side(device, blocks, group):
    """One leaf at a time (LightGBM's leaf-wise order): partitions touch only that leaf's range of rows."""
    n_bins = 33
    bins, grad, hess = make_data(12, 1031, 5, n_bins, 1)
    dev, ref = OpenCLTreeKernels(device, blocks=blocks, block_group=group), NumpyTreeKernels()
    for b in (dev, ref):
        b.load(bins, n_bins, 1)
        b.set_gradients(grad[:, 0], hess[:, 0])
        b.reset_rows()
    mask = np.ones(5, bool)
    leaves = {0: [b.histograms(np.array([0])) for b in (dev, ref)]}
    next_id = 1
    for _ in range(15):
        best = {}
        for node, hs in leaves.items():
            sp = [b.best_splits(h, mask, PARAMS) for b, h in zip((dev, ref), hs, strict=True)]
            check_same(dev.to_host(hs[0]), hs[1], sp[0], sp[1], exact=True)
            best[node] = sp[1]
        node = max(best, key=lambda n: (best[n].gain[0], -n))
        s = best[node]
        if not np.isfinite(s.gain[0]):
            break
        lo, hi = np.array([next_id]), np.array([next_id + 1])
        next_id += 2
        for b in (dev, ref):
            b.apply_splits(np.array([node]), s.feature, s.bin, s.default_left, lo, hi)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
        parent = leaves.pop(node)
        lh = [b.histograms(lo) for b in (dev, ref)]
        leaves[int(lo[0])] = lh
        leaves[int(hi[0])] = [b.subtract(p, h) for b, p, h in zip((dev, ref), parent, lh, strict=True)]
    assert next_id > 20


def test_edge_cases(device):
    rng = np.random.default_rng(13)
    bins = rng.integers(0, 2, size=(37, 3)).astype(np.uint8)
    dev = OpenCLTreeKernels(device)
    dev.load(bins, 2, 1)  # two bins: one real bin and the missing bin, so no split candidate
    dev.set_gradients(rng.standard_normal(37), np.ones(37))
    dev.reset_rows()
    s = dev.best_splits(dev.histograms(np.array([0])), np.ones(3, bool), PARAMS)
    assert np.isneginf(s.gain).all()
    bins, grad, hess = make_data(14, 131, 4, 9, 1)
    dev, ref = OpenCLTreeKernels(device), NumpyTreeKernels()
    for b in (dev, ref):
        b.load(bins, 9, 1)
        b.set_gradients(grad, hess)
        b.reset_rows()
    nodes = np.array([0, 5])  # node 5 holds no rows: a zero histogram and no split
    h = dev.histograms(nodes)
    np.testing.assert_allclose(dev.to_host(h), ref.histograms(nodes), rtol=1e-12, atol=1e-12)
    s = dev.best_splits(h, np.zeros(4, bool), PARAMS)  # every feature masked out
    assert np.isneginf(s.gain).all()
    assert dev.to_host(dev.histograms(np.zeros(0, np.int32))).shape == (0, 4, 9, 1, 2)
    with pytest.raises(ValueError, match="n_bins"):
        dev.load(bins, 4, 1)


def test_single_precision(device):
    n_bins = 17
    bins, grad, hess = make_data(15, 2053, 6, n_bins, 1)
    dev, ref = OpenCLTreeKernels(device, precision="single"), NumpyTreeKernels()
    for b in (dev, ref):
        b.load(bins, n_bins, 1)
        b.set_gradients(grad, hess)
        b.reset_rows()
    nodes = np.array([0])
    hd, hr = dev.histograms(nodes), ref.histograms(nodes)
    np.testing.assert_allclose(dev.to_host(hd), hr, rtol=1e-4, atol=1e-4 * np.abs(hr).max())
    sd, sr = dev.best_splits(hd, np.ones(6, bool), PARAMS), ref.best_splits(hr, np.ones(6, bool), PARAMS)
    # float32 may pick a near-tie; the pick must be within float32 rounding of the best gain
    np.testing.assert_allclose(sd.gain, sr.gain, rtol=1e-4)


@pytest.mark.parametrize("whole_rows", [False, True], ids=["per-feature", "whole-rows"])
def test_histogram_folds_in_place(device, whole_rows):
    """The histogram's 1 KiB accumulator (a whole row's: 3 features' here) must not be copied per row: the generator
    folds through a pointer (copying it made one pass over 200k x 28 rows 15x slower on PoCL)."""
    bins, grad, hess = make_data(16, 67, 3, 64, 1)
    dev = OpenCLTreeKernels(device, whole_rows=whole_rows)
    dev.load(bins, 64, 1)
    comp = dev.ws.computations["tree_histogram_rows_real" if whole_rows else "tree_histogram"]
    kernel_body = comp.source.split("__kernel")[1]
    assert "mdh_fold(&acc," in kernel_body, "the reduction loop must fold in place"
    assert "acc = mdh_fold(acc," not in kernel_body


def quantized_configs(device, n_feat):
    """Parallel configurations of the quantized kernels: rows over several lanes and work-groups, private
    (PARTIALS_LOCAL=0) or local-atomic (1) partials, scans split across work-groups."""
    one = {f"NUM_{w}_{d}": 1 for d in ("node", "feat", "output", "pos") for w in ("WG", "WI")}
    scan = {**{f"NUM_{w}_{d}": 1 for d in ("node", "feat", "output", "bin") for w in ("WG", "WI")},
            "NUM_WI_bin": 4, "NUM_WG_bin": 2, "NUM_WG_node": 2, "NUM_WI_COMBINE": 8}
    out = []
    for pl, wi, wg in ((0, 4, 3), (1, 16, 3), (1, 64, 1)):
        if pl and not device.has_int64_atomics:
            continue
        hist = {**one, "NUM_WG_feat": n_feat, "NUM_WI_pos": wi, "NUM_WG_pos": wg, "NUM_WG_node": 2,
                "NUM_WI_COMBINE": 16, "PARTIALS_LOCAL": pl}
        out.append({"tree_histogram_q": hist, "tree_split_scan": scan})
    return out


ROW_MODES = {"moved": {"row_index": False, "whole_rows": False, "blocks": 0},
             "whole-rows": {"row_index": False, "whole_rows": True, "blocks": 0},
             "whole-rows-blocks": {"row_index": False, "whole_rows": True, "blocks": 80, "block_group": 0},
             "whole-rows-groups": {"row_index": False, "whole_rows": True, "blocks": 80, "block_group": 4},
             "row-index": {"row_index": True, "columns": False, "blocks": 0},
             "row-index-columns": {"row_index": True, "columns": True, "blocks": 0},
             "row-index-columns-blocks": {"row_index": True, "columns": True, "blocks": 80, "block_group": 0},
             "row-index-columns-groups": {"row_index": True, "columns": True, "blocks": 80, "block_group": 16}}


@pytest.mark.parametrize("rows", ROW_MODES)
@pytest.mark.parametrize("n_out", [1, 3])
def test_grow_quantized_side_by_side(device, n_out, rows):
    """Quantized: integer histograms equal to the numpy reference's bit for bit under parallel configurations
    (no exact-order pinning), and so are gains, child sums and every decision; with rows moved by the
    partition or read through the row index, and histograms a feature per lane or a whole row per point."""
    n_bins = 17
    bins, grad, hess = make_data(21, 2053, 6, n_bins, n_out)
    modes = ROW_MODES[rows]
    for configs in [None, *(quantized_configs(device, bins.shape[1]) if rows == "moved" else [])]:
        dev = OpenCLTreeKernels(device, precision="quantized", configs=configs, **modes)
        ref = NumpyTreeKernels("quantized")
        assert not dev.exact
        for b in (dev, ref):
            b.load(bins, n_bins, n_out)
            b.set_gradients(grad, hess)
            b.reset_rows()
        assert dev.to_host(dev.histograms(np.array([0]))).dtype == np.int64
        np.testing.assert_array_equal(dev.inv_scale, ref.inv_scale)
        mask = np.ones(bins.shape[1], bool)
        mask[4] = False
        assert grow_depthwise((dev, ref), n_bins, 5, PARAMS, mask, exact=True) >= 4, configs


def test_quantized_rejects_non_finite_gradients(device):
    """Before any split is searched: the device quantises without waiting for the host's check of the scale, which
    the first search's gains need (the device's own scale for a NaN maximum is k = 0)."""
    bins, grad, hess = make_data(22, 67, 3, 9, 1)
    grad[5] = np.nan
    for b in (OpenCLTreeKernels(device, precision="quantized"), NumpyTreeKernels("quantized")):
        b.load(bins, 9, 1)
        with pytest.raises(ValueError, match="not finite"):
            b.set_gradients(grad, hess)
            b.best_splits(b.histograms(np.array([0])), np.ones(3, bool), PARAMS)
