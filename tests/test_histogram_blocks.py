"""The real-lane histograms' fixed row blocks (mdhom.components.histogram_blocks): the block table and the blocks'
sums against their numpy references on every device, under their heuristics and random configurations (the sums
under their exact pins: bit for bit), and the reference's blocked sums against a plain fold of each block."""

from __future__ import annotations

import numpy as np
import pytest
from test_trees_kernels import configs, run_writing

from mdhom.components import histogram_blocks as hb
from mdhom.trees import reference as ref

# five nodes: empty, one row, exactly a block, a block and a row, three and a bit (blocks of 7 rows here)
_COUNTS = np.array([0, 1, 7, 8, 23], np.int32)
_BEGIN = np.array([40, 3, 0, 12, 57], np.int32)


def test_row_blocks(device):
    """Each node's last block in its own slot, its earlier (whole) ones after the nodes in order; slots past them
    are empty (count and begin 0)."""
    desc = hb.row_blocks()
    n_slots = hb.block_slots(_COUNTS.size, int(_COUNTS.sum()), 7)
    want = hb.row_blocks_reference(_BEGIN, _COUNTS, n_slots, 7)
    assert want[0].sum() == _COUNTS.sum() and want[2].tolist() == [5, 5, 5, 5, 6]
    assert want[0].tolist() == [0, 1, 7, 1, 2, 7, 7, 7, 7, 0] and want[1].tolist() == [40, 3, 0, 19, 78, 12, 57, 64, 71, 0]
    sizes = {"v": n_slots}
    for cfg in [hb.ROW_BLOCKS.heuristic(desc, device, sizes), *configs(desc, device, sizes, 5)[1:]]:
        got, wrote = run_writing(desc, device, cfg, sizes, slot_begin=("o", _BEGIN, None),
                                 slot_count=("o", _COUNTS, None), begin=("o", np.full(n_slots, -9, np.int32), None),
                                 first=("o", np.full(n_slots, -9, np.int32), None), n_nodes=_COUNTS.size, block_rows=7)
        np.testing.assert_array_equal(got, want[0])
        np.testing.assert_array_equal(wrote["begin"], want[1])
        np.testing.assert_array_equal(wrote["first"][:_COUNTS.size], want[2])


@pytest.mark.parametrize("precision", ["double", "single"])
def test_hist_blocks(device, precision):
    """Each node's earlier blocks added in order, then its last, into its slot, bit for bit; nodes of one block (or
    none) and the earlier blocks' slots left as they were."""
    if precision == "double" and not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    dtype = np.float64 if precision == "double" else np.float32
    rng = np.random.default_rng(3)
    n_slots, cells = hb.block_slots(_COUNTS.size, int(_COUNTS.sum()), 7), 37
    hist = (rng.standard_normal((n_slots, cells)) * 10.0 ** rng.integers(-8, 8, (n_slots, cells))).astype(dtype)
    _, _, first = hb.row_blocks_reference(_BEGIN, _COUNTS, n_slots, 7)
    want = hb.hist_blocks_reference(hist, first, _COUNTS, 7)
    assert np.array_equal(want[[0, 1, 2, 5, 6, 7, 8, 9]], hist[[0, 1, 2, 5, 6, 7, 8, 9]])
    assert np.array_equal(want[3], hist[5] + hist[3]) and np.array_equal(want[4], hist[6] + hist[7] + hist[8] + hist[4])
    desc = hb.hist_blocks(precision)
    sizes = {"node": _COUNTS.size, "cell": cells}
    for cfg in [hb.HIST_BLOCKS.heuristic(desc, device, sizes), *configs(desc, device, sizes, 9)[1:]]:
        _, wrote = run_writing(desc, device, cfg, sizes, hist=("o", hist, None), first=("o", first, None),
                               slot_count=("o", _COUNTS, None), block_rows=7)
        np.testing.assert_array_equal(wrote["hist"], want)


def test_reference_sums_blocks_in_order(monkeypatch):
    """A node of more than BLOCK_ROWS rows: each block's histogram from zero, the blocks' sums in order; a node of
    one block as the plain fold. Gradients of very different scales, so the order shows in the bits."""
    rng = np.random.default_rng(4)
    n, f, b = 50, 3, 5
    bins = rng.integers(0, b, (n, f)).astype(np.uint8)
    g = (rng.standard_normal((n, 1)) * 10.0 ** rng.integers(-6, 6, (n, 1)))
    h = rng.random((n, 1))
    row_node = np.where(np.arange(n) < 43, 0, 1).astype(np.int32)
    monkeypatch.setattr(hb, "BLOCK_ROWS", 10)
    got = ref.histograms(bins, g, h, row_node, np.array([0, 1]), b)
    want = np.zeros((2, f, b, 1, 2))
    for lo in range(0, 43, 10):
        part = np.zeros((f, b, 1, 2))
        for r in range(lo, min(lo + 10, 43)):
            for j in range(f):
                part[j, bins[r, j], 0] += (g[r, 0], h[r, 0])
        want[0] = want[0] + part
    for r in range(43, n):
        for j in range(f):
            want[1, j, bins[r, j], 0] += (g[r, 0], h[r, 0])
    np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(hb, "BLOCK_ROWS", 1 << 14)
    assert not np.array_equal(ref.histograms(bins, g, h, row_node, np.array([0]), b)[0], want[0])


@pytest.mark.parametrize("layout", [{}, {"whole_rows": True}, {"whole_rows": True, "row_index": True},
                                    {"row_index": True}], ids=["default", "whole-rows", "row-index-whole-rows",
                                                               "row-index"])
@pytest.mark.parametrize("lossguide,leaves,depth", [(True, 40, 0), (False, 0, 6)], ids=["lossguide", "depthwise"])
def test_trees_of_blocked_nodes_equal_the_reference(monkeypatch, device, layout, lossguide, leaves, depth):
    """Whole trees (the grower's fast paths: levels and batches on the device, look-ahead) whose top nodes span many
    blocks (blocks of 128 rows here, 3000 rows) equal the blocked reference's bit for bit (exact mode, float64); on
    CPUs the whole-row builds' block slots dealt in strides to a few work-groups, several slots each."""
    from test_trees_fastpath import _data, _same, _tree

    from mdhom.learn.binning import BinMapper
    from mdhom.trees import opencl_backend as ob
    from mdhom.trees.numpy_backend import NumpyKernels

    if not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    monkeypatch.setattr(hb, "BLOCK_ROWS", 128)
    X, g, h = _data(7, 3000, 6)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    dev = ob.OpenCLTreeKernels(device, **layout)
    want = _tree(NumpyKernels(), bins, m.n_bins, g, h, lossguide, leaves, depth)
    got = _tree(dev, bins, m.n_bins, g, h, lossguide, leaves, depth)
    assert "tree_hist_blocks" in dev.ws.computations and want.n_nodes > 40
    # CPUs' whole-row builds deal the block slots in strides (24 at the root) to one work-group a compute unit
    dealt = [c for k, c in dev.ws.computations.items() if k.endswith("slots)")]
    assert len(dealt) == (device.type == "cpu" and dev.hist.whole_rows)
    assert all(c.config["CHUNKED"] == 0 and c.config["NUM_WG_node"] == device.compute_units for c in dealt)
    _same(got, want)


@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_fits_of_blocked_nodes_equal_the_reference(monkeypatch, device, policy):
    """Whole fits (one backend over many trees: the block tables and scratch grow mid-fit, and every launch must see
    the grown buffers) whose nodes span many blocks of 16 rows: the device's model predicts what the numpy
    reference's does, bit for bit."""
    from mdhom import TreeBoostClassifier
    from mdhom.bench.trees import make_higgs_like

    if not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    monkeypatch.setattr(hb, "BLOCK_ROWS", 16)
    X, y = make_higgs_like(3000, 8, 3)
    kw = dict(n_estimators=4, grow_policy=policy, max_leaves=31, max_depth=5 if policy == "depthwise" else 0,
              max_bin=31, precision="double")
    got = TreeBoostClassifier(device=device, **kw).fit(X, y).predict_proba(X)
    want = TreeBoostClassifier(device="numpy", **kw).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("whole_rows,turns_from", [(False, 1), (True, 1), (True, 4), (True, 10**6)],
                         ids=["per-feature-slots", "whole-rows-turns", "whole-rows-turns-from-4", "whole-rows-slots"])
def test_single_precision_blocked_histograms(monkeypatch, device, whole_rows, turns_from):
    """float32 builds of nodes spanning many blocks (blocks of 64 rows; 2053 rows, the root's 33 blocks): as slots
    of their own, folded in turn (the whole-row build: every launch, or those of 4 nodes and more) or both, over four
    depth-wise levels with subtraction, every node's histogram within float32 rounding of the float64 reference's.
    A block dropped, counted twice or added into the wrong node is off by a block's sum (about 1/33 of the root's),
    far outside that (a block's fold not restarted, or a node's last earlier block left out: tried, caught). float32
    sums are not the reference's bits, so the exact tests do not cover them. (The per-feature build has no fold in
    turn: its blocks are always slots.)"""
    from test_trees_backend import PARAMS, make_data

    from mdhom.trees.opencl_backend import OpenCLTreeKernels
    from mdhom.trees.reference import NumpyTreeKernels

    monkeypatch.setattr(hb, "BLOCK_ROWS", 64)
    n_bins = 17
    bins, grad, hess = make_data(21, 2053, 6, n_bins, 1)
    dev, ref = OpenCLTreeKernels(device, precision="single", whole_rows=whole_rows), NumpyTreeKernels()
    for b in (dev, ref):
        b.load(bins, n_bins, 1)
        b.set_gradients(grad, hess)
        b.reset_rows()
    dev.hist.turns_from = turns_from
    nodes, next_id, mask = np.array([0], np.int32), 1, np.ones(bins.shape[1], bool)
    hd = dev.histograms(nodes)
    for _level in range(4):
        hr = ref.histograms(nodes)
        scale = np.abs(hr).max(axis=(1, 2, 3), keepdims=True)  # each node's own: a node's error is its rows'
        got = dev.to_host(hd)
        np.testing.assert_allclose(got, hr, rtol=0, atol=2e-5 * float(scale.max()))
        assert (np.abs(got - hr) <= 1e-5 * scale + 1e-6).all()
        s = ref.best_splits(hr, mask, PARAMS)
        ok = np.isfinite(s.gain)
        assert ok.all()
        left = np.arange(next_id, next_id + 2 * nodes.size, 2, dtype=np.int32)
        right, next_id = left + 1, next_id + 2 * nodes.size
        for b in (dev, ref):
            b.apply_splits(nodes, s.feature, s.bin, s.default_left, left, right)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
        lh = dev.histograms(left)
        hd, nodes = dev.concat([lh, dev.subtract(hd, lh)]), np.concatenate([left, right])
    assert "tree_hist_blocks" in dev.ws.computations
