"""The device components as a second learner would use them: kernel specs declared once, shared table layouts,
and a split evaluator whose gain is a plugged-in scalar function."""

import numpy as np
import pytest

from mdhom.components import histogram as hg
from mdhom.components import specs, tables
from mdhom.components.histogram_builder import HistogramBuilder
from mdhom.components.split import XGBOOST_GAIN, Gain
from mdhom.components.split_evaluator import SplitEvaluator
from mdhom.components.workspace import Workspace
from mdhom.devices import get_device
from mdhom.trees.backend import SplitParams

# The left side's hessian sum as the gain (a stand-in for another learner's head quality): candidates with both
# sides at min_child_weight or more, the best per node by the same argmax and tie rule as XGBoost's gain.
LEFT_HESSIAN = Gain("left_hessian", """
inline tree_real_t tree_gain(__global const tree_hist_t* scan, __global const tree_hist_t* hist, const long node,
                             const long n_feat, const long feat, const int bin, const int dir,
                             const tree_real_t min_child_weight TREE_INV_DECL) {
    tree_real_t hl = 0, hr = 0;
    for (int k = 0; k < TREE_OUTPUTS; ++k) {
        const long cell = ((node * n_feat + feat) * TREE_OUTPUTS + k) * TREE_BINS;
        tree_hist_t lg, lh;
        tree_left_sums(scan, hist, cell, bin, dir, &lg, &lh);
        const tree_hist_t th = scan[2 * (cell + TREE_BINS - 1) + 1];
        hl = hl + TREE_REAL_OF(lh, k, 1);
        hr = hr + TREE_REAL_OF(th - lh, k, 1);
    }
    return (hl >= min_child_weight && hr >= min_child_weight) ? hl : -INFINITY;
}
""", ("min_child_weight",))


def _left_hessian_reference(hist, mcw):
    """(gain, feature, bin, default_left) per node for LEFT_HESSIAN on (node, feat, output, bin, 2) sums."""
    n_nodes, n_feat, _, n_bins, _ = hist.shape
    h = hist[..., 1].sum(axis=2)  # (node, feat, bin)
    cum = np.cumsum(h[:, :, : n_bins - 2], axis=2)
    miss, total = h[:, :, n_bins - 1], h.sum(axis=2)
    out = []
    for n in range(n_nodes):
        best = (-np.inf, 0, 0, True)
        for f in range(n_feat):
            for b in range(n_bins - 2):
                for d in (0, 1):  # default left first: the lower index wins ties
                    hl = cum[n, f, b] + (miss[n, f] if d == 0 else 0.0)
                    ok = hl >= mcw and total[n, f] - hl >= mcw
                    if ok and hl > best[0]:
                        best = (hl, f, b, d == 0)
        out.append(best)
    return out



def _at_root(device, n_rows, n_feat, n_bins, seed, gain=XGBOOST_GAIN):
    """A double workspace loaded with seeded random bins and gradients (bins, then g, then h drawn), every row in the
    root, and the components a tree's step runs: (rng, bins, g, h, ws, rows, hist, evaluator)."""
    from mdhom.components.gradients import GradientSource
    from mdhom.components.partition import RowPartitioner

    rng = np.random.default_rng(seed)
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(np.uint8)
    g, h = rng.standard_normal(n_rows), rng.integers(1, 5, n_rows).astype(np.float64)
    ws = Workspace(device, "double")
    ws.load(bins, n_bins, 1)
    grads, rows, hist = GradientSource(ws), RowPartitioner(ws), HistogramBuilder(ws)
    evaluator = SplitEvaluator(ws, gain)
    grads.set_gradients(g, h)
    rows.reset()
    grads.ensure()
    return rng, bins, g, h, ws, rows, hist, evaluator

def test_plugged_in_gain(device):
    n_feat = 4
    *_, rows, hist, evaluator = _at_root(device, 2003, n_feat, 11, 5, LEFT_HESSIAN)
    assert evaluator.d_score.name == "tree_split_score_left_hessian"
    root = hist.build(np.array([0], np.int32), rows.slots(np.array([0], np.int32)).longest)
    host = hist.to_host(root)  # (node, feat, bin, output, 2)
    got = evaluator.search(hist.view(root), 1, np.ones(n_feat, bool), SplitParams(0, 0, 0, 30.0), lambda: None)
    want = _left_hessian_reference(host.transpose(0, 1, 3, 2, 4), 30.0)
    assert (got.gain[0], got.feature[0], got.bin[0], got.default_left[0]) == want[0]


@pytest.mark.parametrize("copies", [False, True], ids=["device-views", "copied-views"])
def test_histograms_are_written_and_read_in_place(device, copies, monkeypatch):
    """A build is written into the arena's slots, siblings into new slots with their parents read through a view of
    the slots below, children where they are (hist_small or the arena), and the search reads any handle where it
    is: the values of the numpy sums, of the root's own search and of a copy at other slots, after the arena grew.
    Handles start where views may (the device's base address alignment with sub-buffers; ``take`` realigns a copy).
    ``copied-views``: as on a device without sub-buffers (NVIDIA), whose views past offset 0 are copies and whose
    written regions are copied into place. Each node's splits are the numpy reference's of its own histograms."""
    from mdhom.trees import reference

    if copies:
        monkeypatch.setattr(type(device), "sub_buffers", property(lambda self: False))
    n_rows, n_feat, n_bins = 1501, 3, 9
    _, bins, g, h, ws, rows, hist, evaluator = _at_root(device, n_rows, n_feat, n_bins, 11)

    def built(k, transient=True):  # k nodes, each of every row (the root's range k times)
        nodes = np.zeros(k, np.int32)
        return hist.build(nodes, rows.slots(nodes).longest, transient=transient)

    root = built(1, transient=False)  # into the arena in place
    r = hist.to_host(root)[0]
    want_r = np.zeros((n_feat, n_bins, 2))
    for f in range(n_feat):  # rows in ascending order, one lane: the device's exact double sums
        for i in range(n_rows):
            want_r[f, bins[i, f]] += (g[i], h[i])
    np.testing.assert_array_equal(r[:, :, 0], want_r)
    lvl1 = hist.siblings(root, built(1))  # [R, R - R]: the child from hist_small
    version = ws.version
    hist.zeros(np.zeros(64, np.int32))  # the arena grows: every view after this is of the new one
    assert ws.version > version
    lvl2 = hist.siblings(lvl1, built(2, transient=False), np.array([0, 1]))  # [R, R, 0, -R]: children in the arena
    want = np.stack([r, r, r - r, (r - r) - r])
    np.testing.assert_array_equal(hist.to_host(lvl1), np.stack([r, r - r]))
    np.testing.assert_array_equal(hist.to_host(lvl2), want)
    params, mask = SplitParams(0, 0, 0, 1.0), np.ones(n_feat, bool)
    here = evaluator.search(hist.view(lvl2), 4, mask, params, lambda: None)
    swapped = hist.take(lvl2, np.array([2, 0]))  # [0, R]: not what the arena's first slots hold
    for handle, got in ((lvl2, here), (swapped, evaluator.search(hist.view(swapped), 2, mask, params, lambda: None))):
        with np.errstate(invalid="ignore", divide="ignore"):  # a zero node's sides: 0 / 0, never a split
            ref = reference.best_splits(hist.to_host(handle), mask, params)
        for a, b in zip(_splits_of(got), _splits_of(ref), strict=True):  # each node's own histograms were read
            np.testing.assert_array_equal(a, b)
    again = hist.concat([hist.zeros(np.zeros(1, np.int32)), lvl2])  # the same histograms one slot on
    there = evaluator.search(hist.view(hist.take(again, np.arange(1, 5))), 4, mask, params, lambda: None)
    first = evaluator.search(hist.view(root), 1, mask, params, lambda: None)  # R alone: what nodes 0 and 1 hold
    for field in ("gain", "feature", "bin", "default_left", "left_sum", "right_sum"):
        np.testing.assert_array_equal(getattr(here, field), getattr(there, field))
        for node in (0, 1):
            np.testing.assert_array_equal(getattr(here, field)[node], getattr(first, field)[0])
    assert np.isfinite(here.gain[:2]).all()  # the nodes of every row have splits to find
    assert (ws.capacity("view:hist") > 0) == (not device.sub_buffers)  # the search read copies, or sub-buffers
    if ws.view_align > 1:
        with pytest.raises(ValueError, match="multiple"):
            ws.view("arena", 1, 8)


def _splits_of(splits, nodes=slice(None)):
    """A search's choices per node, comparable across searches (the gains to their last bits)."""
    return [np.asarray(getattr(splits, f))[nodes] for f in ("gain", "feature", "bin", "default_left")]


@pytest.mark.parametrize("copies", [False, True], ids=["device-views", "copied-views"])
def test_many_views_made_after_their_buffer_was_used(device, copies, monkeypatch):
    """What a loss-guided fit does to the arena, many times over: searches of handles at slots and sizes that keep
    changing, each a new view made after kernels used the arena, the oldest released as the cache fills (on NVIDIA's
    driver such sub-buffers crashed the process: `Device.sub_buffers`). The slots alternate two nodes' histograms, so
    each search must read its own handle's: node for node, the numpy reference's splits of the two."""
    if device.checker:
        pytest.skip("thousands of launches: too slow for the checker")
    if copies:
        monkeypatch.setattr(type(device), "sub_buffers", property(lambda self: False))
    from mdhom.trees import reference

    n_feat = 8
    rng, *_, rows, hist, evaluator = _at_root(device, 999, n_feat, 63, 3)
    params, mask = SplitParams(0, 0, 0, 1.0), np.ones(n_feat, bool)
    root = np.zeros(1, np.int32)

    def alternating():  # 300 slots: the root's histograms and its half's, by turns
        pair = hist.siblings(hist.build(root, rows.slots(root).longest),
                             hist.build(root, rows.slots(root).longest, transient=True),
                             np.array([0]))  # [R, R - R]: every row's sums, then zeros
        halves = hist.take(pair, np.zeros(2, np.int64))  # [R, R]
        two = hist.siblings(halves, hist.take(pair, np.array([1, 1])), np.array([0, 1]))  # [0, 0, R, R]
        return hist.take(two, np.arange(300) % 2 * 2 + 1)  # [0, R, 0, R, ...]

    copies_ = alternating()
    with np.errstate(invalid="ignore"):  # the zero node's sides: 0 / 0, never a split
        want = reference.best_splits(hist.to_host(hist.take(copies_, np.arange(2))), mask, params)
    for i in range(2000):  # views of changing handles: the cache (256) evicts, releasing views made after use
        start, n = int(rng.integers(0, 290)), int(rng.integers(1, 10))
        got = evaluator.search(hist.view(hist.take(copies_, np.arange(start, start + n))), n, mask, params,
                               lambda: None)
        expect = _splits_of(want, (np.arange(start, start + n) % 2))
        for a, b in zip(_splits_of(got), expect, strict=True):
            np.testing.assert_array_equal(a, b)
        if i % 50 == 49:
            hist.reset()  # a new tree: the arena's handles start over
            copies_ = alternating()


def test_a_view_of_the_region_just_written_is_the_buffer_that_wrote_it(device, monkeypatch):
    """On a device without sub-buffers (NVIDIA), a search of the siblings just written reads the buffer their launch
    wrote, with no copy of the arena's slots; once anything else writes the arena (a fill, a copy into it) or another
    written block begins, a view of that region is a copy of the arena again. Each search finds the splits of its own
    handle's histograms (the numpy reference's); a view that kept the held buffer after the arena changed would read
    the old sums and fail that."""
    from mdhom.trees import reference

    monkeypatch.setattr(type(device), "sub_buffers", property(lambda self: False))
    n_feat = 4
    *_, ws, rows, hist, evaluator = _at_root(device, 1200, n_feat, 13, 7)
    params, mask = SplitParams(0, 0, 0, 1.0), np.ones(n_feat, bool)
    copies = []
    copy = ws.copy
    monkeypatch.setattr(ws, "copy", lambda name, *a: (copies.append(name), copy(name, *a)))
    root_nodes = np.zeros(1, np.int32)

    def searched(handle):
        with np.errstate(invalid="ignore", divide="ignore"):
            want = reference.best_splits(hist.to_host(handle), mask, params)
        got = evaluator.search(hist.view(handle), handle.n_nodes, mask, params, lambda: None)
        for a, b in zip(_splits_of(got), _splits_of(want), strict=True):
            np.testing.assert_array_equal(a, b)

    root = hist.build(root_nodes, rows.slots(root_nodes).longest, transient=False)
    pair = hist.siblings(root, hist.build(root_nodes, rows.slots(root_nodes).longest, transient=True))  # [R, R - R]
    before = len(copies)
    searched(pair)
    assert copies[before:] == []  # the siblings' own buffer: no copy of the slots
    hist.zeros(np.zeros(3, np.int32))  # a fill into the arena: the held buffer no longer stands for it
    before = len(copies)
    searched(pair)
    assert copies[before:] == ["view_copies"]
    swapped = hist.take(pair, np.array([1, 0]))  # a copy into the arena
    searched(swapped)
    again = hist.siblings(root, hist.build(root_nodes, rows.slots(root_nodes).longest, transient=True))
    other = hist.take(again, np.array([1, 0]))  # [R - R, R] at new slots, then a written block elsewhere:
    hist.siblings(root, hist.build(root_nodes, rows.slots(root_nodes).longest, transient=True))
    searched(other)  # ... the held buffer is the last block's, not other's
    searched(again)
    # a written block whose launch reads the region held before it: a child built into the arena, then its siblings
    # (their block writes the buffer the child's block wrote): the child is read from a copy of the arena, not from
    # the buffer being written (the second time round, with the arena and the buffers as large as they get)
    for n in (100, 1):  # room in the arena, so that neither block moves it (which would end the hold anyway)
        hist.zeros(np.zeros(n, np.int32))
    r = hist.to_host(root)[0]
    for _ in range(2):
        version = ws.version
        child = hist.build(root_nodes, rows.slots(root_nodes).longest, transient=False)
        before = len(copies)
        both = hist.siblings(root, child)
        # the child's view; the siblings' launch writes its slots in the arena itself (``store``), no copy after
        assert copies[before:] == ["view_copies"]
        np.testing.assert_array_equal(hist.to_host(both), np.stack([r, r - r]))
        searched(both)
    assert ws.version == version


@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_fits_without_sub_buffers_copy_no_view_and_write_the_same_model(device, policy, monkeypatch, tmp_path):
    """On a device without sub-buffers (NVIDIA) the siblings' launch writes its slots of the arena itself beside the
    buffer the search reads (``tree_hist_siblings``' ``store``): a fit launches no copy of a view (the copy into the
    arena after each siblings launch, one a level, is gone), and its model file is the one a fit through sub-buffers
    writes, byte for byte (where the device has sub-buffers; on one without, NVIDIA, only the copies are checked:
    its fits through sub-buffers crashed its driver)."""
    if device.checker:
        pytest.skip("two fits of a few hundred launches each: too slow for the checker")
    from mdhom import TreeBoostClassifier
    from mdhom.bench.trees import make_higgs_like

    X, y = make_higgs_like(2000, seed=3)
    kw = dict(max_depth=5) if policy == "depthwise" else dict(max_depth=0, grow_policy="lossguide", max_leaves=31)
    launched = []
    record = Workspace.record
    monkeypatch.setattr(Workspace, "record", lambda self, name, *a: (launched.append(name), record(self, name, *a)))
    files = []  # (not through sub-buffers where the device has none: NVIDIA's driver crashed with them)
    for sub in (True, False) if device.sub_buffers else (False,):
        monkeypatch.setattr(type(device), "sub_buffers", property(lambda self, sub=sub: sub))
        launched.clear()
        model = TreeBoostClassifier(device=device, precision="quantized", n_estimators=4, max_bin=63, **kw).fit(X, y)
        files.append(tmp_path / f"{sub}.json")
        model.save_model(files[-1])
        assert "tree_hist_siblings" in launched and "view_copies" not in launched
    assert files[0].read_bytes() == files[-1].read_bytes()


@pytest.mark.filterwarnings("ignore::mdhom.configs.TunedConfigWarning")  # the checker has no tuned file
def test_a_view_too_small_for_its_output_is_refused_on_the_checker(oclgrind_device):
    """Oclgrind checks a sub-buffer's accesses against its parent only: on the checker each launch checks that its
    output buffer holds what the sizes address, so a view too small for it cannot write into its neighbours unseen."""
    from mdhom.components.gradients import GradientSource
    from mdhom.components.partition import RowPartitioner

    rng = np.random.default_rng(2)
    ws = Workspace(oclgrind_device, "double")
    ws.load(rng.integers(0, 5, size=(40, 2)).astype(np.uint8), 5, 1)
    grads, rows, hist = GradientSource(ws), RowPartitioner(ws), HistogramBuilder(ws)
    grads.set_gradients(rng.standard_normal(40), np.ones(40))
    rows.reset()
    grads.ensure()
    nodes = np.zeros(2, np.int32)
    sizes = {"node": 2, "feat": 2, "output": 1, "pos": rows.slots(nodes).longest}
    with pytest.raises(ValueError, match="output buffer"):
        hist.k_hist[0](sizes, {"out": ws.view("arena", 0, hist.nb)}, n_rows=ws.pos_stride)  # room for 1 node of 2
    hist.k_hist[0](sizes, {"out": ws.view("arena", 0, 2 * hist.nb)}, n_rows=ws.pos_stride)  # room for both


def test_specs_are_declared_once_and_name_their_descriptions():
    every = specs.all_specs()
    assert {"tree_histogram", "tree_histogram_q", "tree_split_scan", "tree_split_score", "tree_partition_flags",
            "tree_gather_gh", "tree_score_update", "tree_predict_bins", "tree_bin_features"} <= set(every)
    for name, spec in every.items():
        if spec.tuning is not None:
            sizes = next(iter(spec.tuning.size_classes.values()))
            assert spec.tuning.describe(sizes).name == name
            assert spec.tunable().baseline is spec.heuristic  # the tuner starts from what the learner runs
    # XGBoost's gain keeps the tuned name; a plugged-in gain gets a kernel name of its own
    assert XGBOOST_GAIN.kernel_name == "tree_split_score" and LEFT_HESSIAN.kernel_name != "tree_split_score"


def test_tables_are_one_declaration():
    """The OpenCL typedef and the numpy dtype come from one Struct; fields are addressed by name."""
    for struct in (tables.SPLIT_RECORD, tables.TREE_NODE):
        assert f"}} {struct.name};" in tables.TABLE_TYPEDEFS
        assert struct.dtype.itemsize == 4 * len(struct.dtype.names)
    tab = tables.split_table(3)
    tab["count"] = (5, 0, 7)
    assert tab.dtype.names[-1] == "cats" and tab["count"].tolist() == [5, 0, 7]
    assert tab["cats"].tolist() == [-1, -1, -1]  # numeric splits unless a left table is attached


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_exact_pins_come_from_the_spec(precision):
    ws = Workspace(get_device("cpu"), precision)
    desc = hg.histogram(16, precision)
    cfg, source = ws.config(hg.histogram_spec(precision), desc, {"node": 1, "feat": 3, "output": 1, "pos": 1000})
    if precision == "double":  # exact by default: rows in ascending order, one lane
        assert cfg["NUM_WI_pos"] == cfg["NUM_WG_pos"] == 1
    else:
        assert "pinned" not in source


@pytest.mark.parametrize("precision", ["double", "single"])
def test_search_results_unpack_field_by_field(precision):
    """A search's packed records become Splits field by field: feature and bin from the best candidate's index
    (feature, bin, direction), default-left for direction 0; a node without a valid split (gain -inf or NaN) gets gain
    -inf, feature and bin 0, not default-left and zero child sums; the arrays are read-only views of one array."""
    from types import SimpleNamespace

    from mdhom.components.split_result import result_type

    k, b = 2, 9  # outputs, bins: 7 candidate bins
    real = np.dtype(np.float32 if precision == "single" else np.float64)
    host = np.zeros((4, k), result_type(precision).dtype)
    for f in ("lg", "lh", "rg", "rh", "tg", "th"):
        host[f] = np.arange(8).reshape(4, k) + {"lg": 0.5, "lh": 1.5, "rg": 2.5, "rh": 3.5, "tg": 4.5, "th": 5.5}[f]
    host["gain"] = np.array([[2.0], [-np.inf], [0.25], [np.nan]])
    host["index"] = np.array([[(3 * 7 + 5) * 2 + 1], [99], [0], [7]])
    ev = SimpleNamespace(ws=SimpleNamespace(n_outputs=k, n_bins=b, real=real), categorical=False)
    out = SplitEvaluator._unpack(ev, 4, host)
    np.testing.assert_array_equal(out.gain, [2.0, -np.inf, 0.25, -np.inf])
    np.testing.assert_array_equal(out.feature, [3, 0, 0, 0])
    np.testing.assert_array_equal(out.bin, [5, 0, 0, 0])
    np.testing.assert_array_equal(out.default_left, [False, False, True, False])
    assert out.feature.dtype == out.bin.dtype == np.int32 and out.left_sum.dtype == np.float64
    np.testing.assert_array_equal(out.left_sum[[1, 3]], 0.0)
    np.testing.assert_array_equal(out.right_sum[[1, 3]], 0.0)
    np.testing.assert_array_equal(out.left_sum[0, :, 0], host["lg"][0].astype(np.float64))
    np.testing.assert_array_equal(out.right_sum[2, :, 1], host["rh"][2].astype(np.float64))
    np.testing.assert_array_equal(out.total[3, :, 1], host["th"][3].astype(np.float64))  # totals even without a split
    with pytest.raises(ValueError):
        out.left_sum[0, 0, 0] = 1.0


def test_fence_frees_the_uploads_of_the_round_before(device):
    """A round ended by ``fence`` is not waited for: its uploads' host arrays stay taken until the next fence has
    waited for it (the device may still read them), and a sync frees every one; the uploads arrive either way."""
    ws = Workspace(device, "quantized")
    ws.ensure("a", 64)

    def upload(key: str, value: int) -> None:
        ws.put(key, ws["a"], np.full(16, value, np.int32), np.int32)

    upload("r0", 1)
    ws.fence()  # round 0's end: nothing before it to wait for
    assert [k for k, _ in ws._staging.busy] == ["r0"]
    upload("r1", 2)
    ws.fence()  # round 1's end: round 0's array is free, round 1's still taken
    assert [k for k, _ in ws._staging.busy] == ["r1"] and "r0" in ws._staging._free
    upload("r2", 3)
    out = ws.read(np.empty(16, np.int32), ws["a"])  # a blocking read: everything done, everything free
    assert out.tolist() == [3] * 16
    assert not ws._staging.busy and ws._fence is None and not ws._sent
    ws.fence()
    ws.sync()
    assert not ws._staging.busy and ws._fence is None


def test_leaf_values_ahead_refuse_nodes_past_the_known():
    """The score update with device-made leaf values refuses a children's range outside the value table the host
    gives (it would read and write past it), before anything is uploaded or launched."""
    from mdhom.components.scores import ScoreUpdater

    ws = Workspace(get_device("cpu"), "quantized")
    ws.load(np.zeros((8, 2), np.uint8), 5, 1)
    scores = ScoreUpdater(ws, np.zeros(1))
    for base, n_entries in ((3, 2), (-1, 1)):  # nodes 3..6 of 5 known; a negative first node
        with pytest.raises(ValueError, match="outside the 5 known"):
            scores.update_ahead(np.zeros((5, 1)), base, n_entries, 0.3, 1.0, 0.0)
    assert scores.cur == 0  # nothing launched
