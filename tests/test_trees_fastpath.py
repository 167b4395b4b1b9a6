"""The OpenCL backend's hot path: bound launches on pre-allocated buffers (growing and re-binding where a tree
needs more nodes than allocated, a checked fallback for 64-bit sizes), device-array loading from the device
binner, the sampled bin edges, and the record of which configuration each kernel got."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom.learn.binning import BinMapper, sample_rows
from mdhom.trees import layouts
from mdhom.trees import opencl_backend as ob
from mdhom.trees.backend import SplitParams
from mdhom.trees.grower import GrowParams, grow_tree
from mdhom.trees.numpy_backend import NumpyKernels

PARAMS = SplitParams(reg_lambda=1.0, reg_alpha=0.0, min_split_gain=0.0, min_child_weight=1e-3)


def _data(seed, n, f, nan=0.03):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f))
    X[rng.random((n, f)) < nan] = np.nan
    g = np.tanh(np.nan_to_num(X[:, :3]).sum(1)) + 0.3 * rng.standard_normal(n)
    return X, g.reshape(-1, 1), (0.25 + 0.5 * rng.random(n)).reshape(-1, 1)


def _tree(kernels, bins, n_bins, g, h, lossguide, leaves, depth=0):
    kernels.load(bins, n_bins, 1)
    kernels.set_gradients(g, h)
    gp = GrowParams(PARAMS, 0.1, depth, leaves, lossguide)
    return grow_tree(kernels, None, np.ones(bins.shape[1] if isinstance(bins, np.ndarray) else kernels.n_features,
                                            bool), gp, lambda f, b: np.asarray(b, float))


def _same(a, b):
    for field in ("left", "right", "feature", "bin", "default_left", "value", "gain"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


def _reference_tree(seed, rows, depth, leaves, lossguide, precision="quantized"):
    """A tree-shaped case the look-ahead tests grow on devices: Higgs-like rows of 6 features in 31 bins, one output,
    and the reference's tree of it; (bins, n_bins, g, h, grow parameters, the reference backend, its tree)."""
    rng = np.random.default_rng(seed)
    X, _, h = _data(seed, rows, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, 1))) + 0.3 * rng.standard_normal((rows, 1))
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    gp = GrowParams(PARAMS, 0.1, depth, leaves, lossguide)
    ref = NumpyKernels(precision)
    ref.load(bins, m.n_bins, 1)
    ref.set_gradients(g, h)
    return bins, m.n_bins, g, h, gp, ref, grow_tree(ref, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float))


def _nodes(dev, buffer):
    """How many nodes' histograms a workspace buffer holds now."""
    return dev.ws.capacity(buffer) // dev.ws.node_bytes


@pytest.mark.parametrize("lossguide,leaves,depth", [(True, 200, 0), (False, 0, 7)], ids=["lossguide", "depthwise"])
def test_buffers_grow_and_rebind(device, lossguide, leaves, depth):
    """Trees larger than the initial buffers (16 nodes per call, a 64-node arena) grow them mid-tree; the
    trees equal the numpy reference's bit for bit (exact mode), and a second tree reuses the grown buffers."""
    X, g, h = _data(1, 3000, 6)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    dev = ob.OpenCLTreeKernels(device)
    want = _tree(NumpyKernels(), bins, m.n_bins, g, h, lossguide, leaves, depth)
    got = _tree(dev, bins, m.n_bins, g, h, lossguide, leaves, depth)
    assert want.n_nodes > 100 and _nodes(dev, "arena") > 64 and (lossguide or _nodes(dev, "hist_small") > 16)
    _same(got, want)
    caps = (_nodes(dev, "arena"), _nodes(dev, "hist_small"))
    dev.set_gradients(-g, h)
    ref = NumpyKernels()
    ref.load(bins, m.n_bins, 1)
    ref.set_gradients(-g, h)
    gp = GrowParams(PARAMS, 0.1, depth, leaves, lossguide)
    _same(grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)),
          grow_tree(ref, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)))
    assert (_nodes(dev, "arena"), _nodes(dev, "hist_small")) == caps


def test_64bit_index_launches(device, monkeypatch):
    """Bound launches past the 32-bit index limit run the program built with 64-bit indices (here: a limit of
    1000 points, so every histogram and most partitions take it) and give the same tree."""
    from mdhom.mdh import computation

    X, g, h = _data(2, 1500, 5)
    m = BinMapper(15).fit(X)
    bins = m.transform(X)
    want = _tree(ob.OpenCLTreeKernels(device), bins, m.n_bins, g, h, True, 31)
    monkeypatch.setattr(computation, "_INDEX32_LIMIT", 1000)
    calls = []
    original = computation.Computation.kernel_spec  # (what every launch asks its kernels by)
    monkeypatch.setattr(computation.Computation, "kernel_spec",
                        lambda self, which, index64=False: calls.append(index64) or original(self, which, index64))
    got = _tree(ob.OpenCLTreeKernels(device), bins, m.n_bins, g, h, True, 31)
    assert sum(calls) >= 10
    _same(got, want)


@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
def test_device_array_load_equals_host_load(device, feature_major):
    from mdhom.components.binning import DeviceBinner

    X, g, h = _data(3, 2000, 6)
    m = BinMapper(63).fit(X)
    want = _tree(ob.OpenCLTreeKernels(device, feature_major=feature_major), m.transform(X), m.n_bins, g, h, True, 40)
    dev = ob.OpenCLTreeKernels(device, feature_major=feature_major)
    on_device = DeviceBinner(m, dev.device, np.float64, feature_major).transform(X)
    got = _tree(dev, on_device, m.n_bins, g, h, True, 40)
    assert (dev.n_rows, dev.n_features) == X.shape
    _same(got, want)
    dev.add_eval(on_device, np.zeros(1))  # eval sets take device bins too


def test_stale_histogram_handles_are_refused(device):
    X, g, h = _data(4, 300, 3)
    m = BinMapper(15).fit(X)
    dev = ob.OpenCLTreeKernels(device)
    dev.load(m.transform(X), m.n_bins, 1)
    dev.set_gradients(g, h)
    dev.reset_rows()
    hist = dev.histograms(np.array([0]))
    dev.reset_rows()
    with pytest.raises(ValueError, match="earlier tree"):
        dev.best_splits(hist, np.ones(3, bool), PARAMS)


def test_bin_sample_is_seeded_and_covers_nan():
    X, _, _ = _data(5, 5000, 4, nan=0.0)
    X[4321, 2] = np.nan  # the only NaN: outside most samples, its bin must still be reserved
    rows = sample_rows(5000, 1000, 7)
    assert rows.size == 1000 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(rows, sample_rows(5000, 1000, 7))
    assert not np.array_equal(rows, sample_rows(5000, 1000, 8))
    np.testing.assert_array_equal(sample_rows(5000, 1000, None), sample_rows(5000, 1000, 0))
    assert sample_rows(5000, 5000, 1) is None and sample_rows(5000, 0, 1) is None
    m = BinMapper(255).fit(X, rows=rows)
    full = BinMapper(255).fit(X[rows])
    for j in (0, 1, 3):
        np.testing.assert_array_equal(m.edges[j], full.edges[j])
    assert m.edges[2].size <= 253 and full.edges[2].size == 254  # 254 real bins when no NaN, 253 with one


def test_estimator_bins_from_a_sample_and_reports_configs(tmp_path, monkeypatch, device):
    from mdhom import TreeBoostRegressor

    X, g, _ = _data(6, 1200, 5)
    y = g[:, 0]
    kw = dict(n_estimators=3, grow_policy="lossguide", max_depth=0, max_leaves=15, bin_sample=500, random_state=2,
              precision="double")  # the same mode on both sides (a GPU would default to quantized)
    docs = []
    for dev in ("numpy", device):
        est = TreeBoostRegressor(device=dev, **kw).fit(X, y)
        est.save_model(tmp_path / "m.json")
        doc = json.loads((tmp_path / "m.json").read_text())
        doc["params"].pop("device")
        docs.append(doc)
    assert docs[0] == docs[1]  # bins on the device equal the host's: the same model file
    assert docs[0]["params"]["bin_sample"] == 500
    assert est.bin_seconds_ > 0
    cfgs = est.kernel_configs_
    # the histogram a feature per lane, or on CPUs whole rows in real lanes (their layout's default)
    hist = "tree_histogram_rows_real" if device.type == "cpu" else "tree_histogram"
    assert {hist, "tree_split_score", "tree_partition_flags"} <= set(cfgs)
    # the binning in the bins' order the layout reads: rows x features, or features x rows (its own kernel)
    binning = [k for k in cfgs if k in ("tree_bin_features", "tree_bin_features_fm")]
    assert len(binning) == 1
    assert all(isinstance(v["config"], dict) and v["source"] for v in cfgs.values())
    monkeypatch.setenv("MDHOM_TUNED", "0")
    est = TreeBoostRegressor(device=device, **kw).fit(X, y)
    assert est.kernel_configs_["tree_split_score"]["source"] == "heuristic (disabled)"
    assert est.kernel_configs_[binning[0]]["source"] == "heuristic (disabled)"  # resolved as every kernel is


class _BatchedNumpy(NumpyKernels):
    """The numpy reference driven through the batched loss-guided walk (the OpenCL backend's path)."""

    batch_lossguide = True

    def __init__(self) -> None:
        super().__init__()
        self.searches = 0

    def best_splits(self, hist, feature_mask, params, then=None):
        self.searches += 1
        return super().best_splits(hist, feature_mask, params, then)


class _LookaheadNumpy(_BatchedNumpy):
    """... and with levels below each batch split ahead (``look_ahead``, the reference of the devices' steps)."""

    def __init__(self, levels: int) -> None:
        super().__init__()
        self.lookahead = self.depth_ahead = levels


class _RoundTripsNumpy(_LookaheadNumpy):
    """... counting a look-ahead as one search (one round trip, as on a device) however many levels it splits."""

    def look_ahead(self, *args, **kwargs):
        before = self.searches
        out = super().look_ahead(*args, **kwargs)
        self.searches = before + 1
        return out


class _SpeculativeNumpy(_BatchedNumpy):
    """... and with batches that take the searched children of every leaf the walk may still reach."""

    speculate = True


@pytest.mark.parametrize("ahead", [0, 1, 3, -1], ids=["batched", "look-ahead-1", "look-ahead-3", "speculative"])
@pytest.mark.parametrize("leaves,depth,k,seed", [(31, 0, 1, 3), (200, 0, 1, 4), (40, 4, 1, 5), (0, 6, 1, 6),
                                                 (25, 0, 3, 7), (64, 9, 2, 8)])
def test_batched_lossguide_grows_the_sequential_tree(leaves, depth, k, seed, ahead):
    """Searching several leaves ahead (and splitting their children ahead) gives the loss-guided tree node for
    node (ids, gains, leaf values) and leaves every row in its leaf, with far fewer split searches than one per
    leaf."""
    rng = np.random.default_rng(seed)
    X, _, h = _data(seed, 2500, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, k))) + 0.3 * rng.standard_normal((2500, k))
    h = np.repeat(h, k, axis=1)
    bins = BinMapper(31).fit(X).transform(X)
    seq = NumpyKernels()
    bat = _SpeculativeNumpy() if ahead < 0 else (_LookaheadNumpy(ahead) if ahead else _BatchedNumpy())
    trees = []
    for kern in (seq, bat):
        kern.load(bins, 32, k)
        kern.set_gradients(g, h)
        trees.append(grow_tree(kern, None, np.ones(6, bool), GrowParams(PARAMS, 0.1, depth, leaves, True),
                               lambda f, b: np.asarray(b, float)))
    want, got = trees
    _same(got, want)
    np.testing.assert_array_equal(bat.row_nodes(), seq.row_nodes())
    assert want.n_nodes > 20 and bat.searches < (want.n_nodes - 1) // 2
    if ahead < 0:  # reaching below the heap's leaves takes fewer round trips than batches of the heap's leaves
        heap_only = _BatchedNumpy()
        heap_only.load(bins, 32, k)
        heap_only.set_gradients(g, h)
        _same(grow_tree(heap_only, None, np.ones(6, bool), GrowParams(PARAMS, 0.1, depth, leaves, True),
                        lambda f, b: np.asarray(b, float)), want)
        assert bat.searches < heap_only.searches, (bat.searches, heap_only.searches)


def _mirror(seed: int, n: int = 300, k: int = 2):
    """Two halves told apart by feature 0, the gradients of one the negation of the other's: every split of one
    half has a twin of exactly the same gain in the other, ties of gains all over the tree."""
    rng = np.random.default_rng(seed)
    half = n // 2
    xa = rng.standard_normal((half, 3))
    ga = rng.integers(-2, 3, (half, k)).astype(float) + 1.0
    X = np.vstack([np.c_[np.zeros(half), xa], np.c_[np.ones(half), xa]])
    return X, np.vstack([ga, -ga]), np.ones((n, k))


def _speculative_grows_the_sequential_tree(bins: np.ndarray, g: np.ndarray, h: np.ndarray, gp: GrowParams,
                                           ahead: int, most: int = 0) -> int:
    """The sequential walk and speculative batches (``ahead`` levels of look-ahead, at most ``most`` candidates a
    batch) grow the same tree, every row in the same leaf; returns the batches' split searches."""
    seq, spec = NumpyKernels(), _SpeculativeNumpy()
    spec.lookahead, spec.batch = ahead, most
    trees = []
    for kern in (seq, spec):
        kern.load(bins, 32, g.shape[1])
        kern.set_gradients(g, h)
        trees.append(grow_tree(kern, None, np.ones(bins.shape[1], bool), gp, lambda f, b: np.asarray(b, float)))
    _same(trees[1], trees[0])
    np.testing.assert_array_equal(spec.row_nodes(), seq.row_nodes())
    return spec.searches


def _chain_values(cand) -> dict[int, float]:
    """Each searched candidate's least gain on its path from the root, from the candidate tree itself."""
    out = {}
    for node in np.flatnonzero(~np.isnan(cand.gain[: cand.n_ids])).tolist():
        m, x = cand.gain[node], node
        while cand.parent[x] >= 0:
            x = cand.parent[x]
            m = min(m, cand.gain[x])
        out[node] = m
    return out


def _reachable_from_scratch(cand, room: float, most: int = 0) -> tuple[set[int], float]:
    """:meth:`_Candidates.reachable` by its definition: the unexpanded candidates of gain > SPLIT_EPS among the
    ``room`` largest chain values of the candidates not split yet, with every one tied with the last, and of them
    (``most`` > 0) those among the ``most`` largest chain values, with every one tied with the last; and the floor
    (the budget's last chain value, 0 where the budget covers every one)."""
    from mdhom.components.split import SPLIT_EPS
    from mdhom.trees import lossguide as G

    if room < 1:
        return set(), 0.0
    chain = _chain_values(cand)
    unsplit = {c: m for c, m in chain.items() if cand.gain[c] > SPLIT_EPS and cand.state[c] != G.SPLIT}
    if len(unsplit) <= room:  # every searched candidate of gain > SPLIT_EPS not expanded
        out, last = {c for c in chain if cand.gain[c] > SPLIT_EPS and cand.kid[c] < 0}, 0.0
    else:
        last = sorted(unsplit.values(), reverse=True)[int(room) - 1]
        out = {c for c, m in unsplit.items() if m >= last and cand.kid[c] < 0}
    if most and len(out) > most:
        bound = sorted((chain[c] for c in out), reverse=True)[most - 1]
        out = {c for c in out if chain[c] >= bound}
    return out, last


@pytest.mark.parametrize("most", [0, 1, 2])
@pytest.mark.parametrize("ahead", [0, 1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_speculative_batches_with_tied_gains(monkeypatch, seed, ahead, most):
    """With gains tied across the tree, the batches hold every leaf the walk waits for (candidates tied with the last
    one in the leaf budget join too, and with the last of a bounded batch; a leaf in no batch raises), and the tree is
    the sequential walk's."""
    from mdhom.components.split import SPLIT_EPS
    from mdhom.trees import lossguide as G

    X, g, h = _mirror(seed)
    bins = BinMapper(31).fit(X).transform(X)
    gp = GrowParams(SplitParams(0.0, 0.0, 0.0, 1e-3), 0.1, 0, 255, True)
    orig, calls = G._Candidates.reachable, {"n": 0, "tied": 0}

    def spy(self, room, most=0):
        calls["n"] += 1
        assert calls["n"] < 1000, "the walk does not progress"
        out = orig(self, room, most)
        chain = [m for c, m in _chain_values(self).items() if self.gain[c] > SPLIT_EPS and self.kid[c] < 0]
        calls["tied"] += len(chain) > len(set(chain))
        return out

    monkeypatch.setattr(G._Candidates, "reachable", spy)
    searches = _speculative_grows_the_sequential_tree(bins, g, h, gp, ahead, most)
    assert calls["tied"] > 0, calls
    if ahead:  # a floor keeps the children tied with it: as many round trips as where every floor is 0

        def no_floor(self, room, most=0):
            out = spy(self, room, most)
            self.floor = 0.0
            return out

        monkeypatch.setattr(G._Candidates, "reachable", no_floor)
        assert _speculative_grows_the_sequential_tree(bins, g, h, gp, ahead, most) == searches


@pytest.mark.parametrize("most", [0, 1, 5])
@pytest.mark.parametrize("ahead", [0, 1])
@pytest.mark.parametrize("leaves,depth,seed", [(255, 0, 3), (31, 0, 4), (60, 5, 5), (0, 7, 6)])
def test_speculative_batches_by_chain_values(monkeypatch, leaves, depth, seed, ahead, most):
    """A speculative batch is what its definition says, chain values recomputed from the candidate tree: every
    searched candidate not yet expanded where the leaf budget covers every open one (taken without a selection),
    else those of the budget's largest chain values; at most ``most`` of them (the layout's ``batch``; ties with the
    last kept); and the tree is the sequential walk's."""
    from mdhom.trees import lossguide as G

    X, g, h = _mirror(seed, 600) if seed % 2 else (*_data(seed, 2500, 6)[:1], None, None)
    if g is None:
        rng = np.random.default_rng(seed)
        g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, 1))) + 0.3 * rng.standard_normal((2500, 1))
        h = np.ones_like(g)
    bins = BinMapper(31).fit(X).transform(X)
    gp = GrowParams(SplitParams(0.0, 0.0, 0.0, 1e-3), 0.1, depth, leaves, True)
    orig, calls = G._Candidates.reachable, {"n": 0, "all": 0, "selected": 0, "bounded": 0, "split": 0}

    def spy(self, room, most_=0):
        assert most_ == most
        whole = _reachable_from_scratch(self, room)[0]
        out = orig(self, room, most_)
        assert (set(out), self.floor) == _reachable_from_scratch(self, room, most) and len(out) == len(set(out))
        calls["n"] += 1
        calls["all"] += self.unsplit <= room
        calls["selected"] += self.unsplit > room
        calls["bounded"] += len(out) < len(whole)
        calls["split"] += len(out)
        return out

    monkeypatch.setattr(G._Candidates, "reachable", spy)
    _speculative_grows_the_sequential_tree(bins, g, h, gp, ahead, most)
    assert calls["all"] > 0, calls
    assert calls["selected"] > 0 or depth > 0, calls  # a depth limit keeps the leaf budget from binding here
    assert bool(calls["bounded"]) == bool(most), calls
    if most and not ahead:  # a bound splits fewer candidates in vain than none where the leaf budget binds
        bounded = dict(calls)
        most, calls["split"] = 0, 0
        _speculative_grows_the_sequential_tree(bins, g, h, gp, ahead)
        assert bounded["split"] < calls["split"] if not depth else bounded["split"] <= calls["split"], (bounded, calls)


class _FloorNumpy(_SpeculativeNumpy):
    """... counting the nodes its look-aheads split and the floors they were given."""

    def __init__(self, levels: int) -> None:
        super().__init__()
        self.lookahead, self.ahead_splits, self.floors = levels, 0, []
        self._ahead = False

    def look_ahead(self, *args, min_gain: float = 0.0, **kwargs):
        self.floors.append(min_gain)
        self._ahead = True
        try:
            return super().look_ahead(*args, min_gain=min_gain, **kwargs)
        finally:
            self._ahead = False

    def apply_splits(self, nodes, *args, **kwargs):
        self.ahead_splits += len(nodes) * self._ahead
        return super().apply_splits(nodes, *args, **kwargs)


@pytest.mark.parametrize("levels", [1, 2])
@pytest.mark.parametrize("leaves,seed", [(60, 5), (200, 4), (100, 8)])
def test_lookahead_splits_nothing_below_its_batchs_floor(monkeypatch, leaves, seed, levels):
    """A speculative batch's look-ahead splits no child below the batch's floor (no gain there can reach the leaf
    budget): the sequential walk's tree, every row in its leaf, with fewer nodes split ahead than where every
    batch's floor is 0, and as many round trips."""
    from mdhom.trees import lossguide as G

    rng = np.random.default_rng(seed)
    X, _, h = _data(seed, 3000, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, 1))) + 0.3 * rng.standard_normal((3000, 1))
    bins = BinMapper(31).fit(X).transform(X)
    gp = GrowParams(PARAMS, 0.1, 0, leaves, True)
    seq = NumpyKernels()
    seq.load(bins, 32, 1)
    seq.set_gradients(g, h)
    want = grow_tree(seq, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float))
    orig = G._Candidates.reachable

    def no_floor(self, room, most=0):
        out = orig(self, room, most)
        self.floor = 0.0
        return out

    from mdhom.components.split import SPLIT_EPS
    from mdhom.trees import reference as R

    step, dropped = R.ahead_step, [0]

    def checked_step(found, alive, allow, first_id, room=None, min_gain=0.0, chain=None):
        """Every entry a look-ahead splits has a gain at the floor or above; count those the floor alone kept out."""
        out = step(found, alive, allow, first_id, room, min_gain, chain)
        gain = np.asarray(found.gain, np.float64)
        assert (gain[out[0]] >= min_gain).all(), (min_gain, gain[out[0]].min())
        may = np.asarray(alive, bool) & np.asarray(allow, bool) & np.isfinite(gain) & (gain > SPLIT_EPS)
        dropped[0] += int((may & (gain < min_gain)).sum())
        return out

    monkeypatch.setattr(R, "ahead_step", checked_step)
    monkeypatch.setattr(G, "ahead_step", checked_step)
    runs = []
    for floor in (True, False):
        if not floor:
            assert dropped[0] > 0  # the floor kept some children of the batches from splitting
            monkeypatch.setattr(G._Candidates, "reachable", no_floor)
        kern = _FloorNumpy(levels)
        kern.load(bins, 32, 1)
        kern.set_gradients(g, h)
        _same(grow_tree(kern, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)), want)
        np.testing.assert_array_equal(kern.row_nodes(), seq.row_nodes())
        runs.append(kern)
    floored, plain = runs
    assert max(floored.floors) > 0 and max(plain.floors) == 0 and floored.searches == plain.searches
    assert floored.ahead_splits < plain.ahead_splits, (floored.ahead_splits, plain.ahead_splits)


@pytest.mark.parametrize("leaves,depth,k,seed", [(60, 0, 1, 5), (200, 0, 1, 4), (40, 5, 1, 9), (33, 0, 3, 7)])
def test_lookahead_grows_the_same_tree(monkeypatch, device, leaves, depth, k, seed):
    """The device's look-ahead (the children of each loss-guided batch split by their best splits on the device,
    before the host reads them) grows the reference's quantized tree bit for bit, rows in their leaves, in fewer
    round trips than without it; speculative batches pass it their floors (``tree_split_from_search``'s
    ``min_gain``), positive where the leaf budget binds."""
    from mdhom.trees import lossguide as G

    rng = np.random.default_rng(seed)
    X, _, h = _data(seed, 3000, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, k))) + 0.3 * rng.standard_normal((3000, k))
    h = np.repeat(h, k, axis=1)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    gp = GrowParams(PARAMS, 0.1, depth, leaves, True)
    ref = NumpyKernels("quantized")
    ref.load(bins, m.n_bins, k)
    ref.set_gradients(g, h)
    want = grow_tree(ref, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float))
    syncs = []
    for ahead in (0, 1, 2):
        dev = ob.OpenCLTreeKernels(device, precision="quantized", lookahead=ahead, depth_ahead=0, speculate=False)
        dev.load(bins, m.n_bins, k)
        dev.set_gradients(g, h)
        s0 = dev.syncs
        _same(grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)), want)
        syncs.append(dev.syncs - s0)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    assert want.n_nodes > 30 and syncs[2] < syncs[1] < syncs[0], syncs
    orig, floors = G._Candidates.reachable, []

    def spy(self, room, most=0):
        out = orig(self, room, most)
        floors.append(self.floor)
        return out

    monkeypatch.setattr(G._Candidates, "reachable", spy)
    # batches that reach below the heap's leaves, with and without look-ahead, bounded or not: the same tree
    for ahead, most in ((0, 0), (1, 0), (2, 0), (0, 3), (1, 3)):
        dev = ob.OpenCLTreeKernels(device, precision="quantized", lookahead=ahead, depth_ahead=0, speculate=True,
                                   batch=most)
        dev.load(bins, m.n_bins, k)
        dev.set_gradients(g, h)
        s0 = dev.syncs
        _same(grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)), want)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
        # (two levels below a batch the budget picks may take one round trip more than below each)
        if ahead < 2 and not most:
            assert dev.syncs - s0 <= syncs[ahead], (ahead, dev.syncs - s0, syncs)
    assert max(floors) > 0 or depth > 0, floors  # a depth limit keeps the leaf budget from binding here
    default = ob.OpenCLTreeKernels(device, precision="quantized")
    with layouts.forcing(None):  # the heuristic's layout, whatever the device's tuned file holds
        default.load(bins, m.n_bins, k)
    assert default.lookahead == (ob.LOOKAHEAD_GPU if device.type == "gpu" else 0)  # GPUs: a round trip is host time
    assert default.depth_ahead == ob.DEPTH_AHEAD  # exact: on by default
    assert default.batch == layouts.BATCH


@pytest.mark.parametrize("leaves,depth,most,precision,seed", [(255, 0, 32, "quantized", 5), (60, 0, 32, "double", 4),
                                                             (40, 5, 0, "quantized", 9), (100, 0, 4, "single", 7)])
def test_lossguide_top_levels_on_the_device(monkeypatch, device, leaves, depth, most, precision, seed):
    """Below the root's batch the top levels of a loss-guided tree are split on the device (``depth_ahead``) as far as
    the host's batches would have taken them whole (the leaf budget cannot bind, a level's entries within the batch
    bound): the reference's tree bit for bit (in single precision the device's without them), rows in their leaves,
    the same splits made and in fewer round trips."""
    from mdhom.trees import lossguide as G
    from mdhom.trees.growth import ahead_levels

    bins, n_bins, g, h, gp, ref, want = _reference_tree(seed, 4000, depth, leaves, True, precision)
    made, syncs, levels = [], [], []
    orig_expanded, orig_levels = G._Candidates._expanded, G._Candidates._levels

    def expanded(self, nodes, first, d):  # every split made, by a host batch or a device level
        made[-1] += int(np.asarray(nodes).size)
        return orig_expanded(self, nodes, first, d)

    def spy_levels(self, first, whole):
        out = orig_levels(self, first, whole)
        if first == 1:
            levels.append(out[0])
        return out

    monkeypatch.setattr(G._Candidates, "_expanded", expanded)
    monkeypatch.setattr(G._Candidates, "_levels", spy_levels)
    for ahead in (0, ob.DEPTH_AHEAD):
        made.append(0)
        dev = ob.OpenCLTreeKernels(device, precision=precision, lookahead=0, depth_ahead=ahead, speculate=True,
                                   batch=most)
        dev.load(bins, n_bins, 1)
        dev.set_gradients(g, h)
        s0 = dev.syncs
        tree = grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float))
        syncs.append(dev.syncs - s0)
        if precision == "single" and not ahead:  # float sums: the device's own tree without the levels ahead
            want, ref = tree, dev
            continue
        _same(tree, want)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    top = min(ahead_levels(dev, gp, 1, 2, 2), (most.bit_length() - 1) if most else 99)
    assert levels == [0, top] and top >= 2, (levels, top)
    assert made[0] == made[1] and want.n_nodes > 50, (made, want.n_nodes)
    assert syncs[1] < syncs[0], syncs


@pytest.mark.parametrize("leaves,most,seed", [(255, 32, 5), (100, 8, 4), (60, 4, 9)])
def test_lookahead_splits_what_the_next_batch_takes(monkeypatch, device, leaves, most, seed):
    """Below a bounded loss-guided batch the look-ahead splits the batch's children that the next batch would take
    (``tree_ahead_chain``: ranked by chain value against each other and the candidates the batch left out): the
    reference's tree bit for bit, rows in their leaves, in fewer round trips than without it, with about the splits
    the host's batches make (the speculative look-ahead had split every child above the floor)."""
    from mdhom.trees import lossguide as G

    bins, n_bins, g, h, gp, ref, want = _reference_tree(seed, 6000, 0, leaves, True)
    made, syncs, chained = [], [], []
    orig_expanded = G._Candidates._expanded

    def expanded(self, nodes, first, d):
        made[-1] += int(np.asarray(nodes).size)
        return orig_expanded(self, nodes, first, d)

    monkeypatch.setattr(G._Candidates, "_expanded", expanded)
    for ahead in (0, 1):
        made.append(0)
        dev = ob.OpenCLTreeKernels(device, precision="quantized", lookahead=ahead, speculate=True, batch=most)
        dev.load(bins, n_bins, 1)
        dev.set_gradients(g, h)
        s0 = dev.syncs
        _same(grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)), want)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
        syncs.append(dev.syncs - s0)
        chained.append("tree_ahead_chain" in dev.ws.computations)
    assert chained == [False, True] and want.n_nodes > 100
    assert syncs[1] < syncs[0], syncs
    assert abs(made[1] - made[0]) <= 0.05 * made[0], made


@pytest.mark.parametrize("partition", [dict(blocks=0), dict(blocks=64, block_group=0),
                                       dict(blocks=64, block_group=0, row_index=False),
                                       dict(blocks=64, block_group=8)],
                         ids=["per-row", "blocks", "blocks-moved", "groups"])
@pytest.mark.parametrize("policy", ["lossguide", "depthwise"])
def test_lookahead_partitions_its_tables_by_each_partition(device, partition, policy):
    """Tables made on the device partition by the layout's partition (their blocks cut on the device for the block
    and group partitions, launched for an upper bound): the reference's quantized tree bit for bit, rows in their
    leaves, in both policies. The CPUs' block partition in both its forms: the walk and the copy through the row
    index, the counts and the block scatter where rows move."""
    bins, n_bins, g, h, gp, ref, want = _reference_tree(11, 3000, 0 if policy == "lossguide" else 7, 80,
                                                        policy == "lossguide")
    partition = {"row_index": True, **partition}
    dev = ob.OpenCLTreeKernels(device, precision="quantized", lookahead=2, depth_ahead=2, speculate=False,
                               whole_rows=True, columns=False, **partition)
    dev.load(bins, n_bins, 1)
    dev.set_gradients(g, h)
    calls = {"_block_launch": [], "_staged_launch": [], "_group_launch": [],
             "_scatter_launch": []}  # which partition each table took

    def spy(f, seen):  # noqa: ANN001, ANN202
        def call(*a, **kw):  # noqa: ANN002, ANN003, ANN202
            seen.append(a[4] if len(a) > 4 else kw.get("blk_name"))
            return f(*a, **kw)
        return call

    for name, seen in calls.items():
        setattr(dev.rows.steps, name, spy(getattr(dev.rows.steps, name), seen))
    _same(grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)), want)
    np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    assert want.n_nodes > 30 and dev.lookahead == dev.depth_ahead == 2
    used = {name for name, seen in calls.items() if seen}
    if not partition["blocks"]:
        assert used == {"_scatter_launch"}
    else:  # the device's tables by their blocks, which the table maker wrote beside them
        launch = ("_group_launch" if partition.get("block_group")
                  else "_staged_launch" if partition["row_index"] else "_block_launch")
        assert used == {launch} and any(str(b).startswith("ahead_blk") for b in calls[launch]), calls


def _two_trees_as_the_reference(ref, dev, X, h, gp, rng):  # noqa: ANN001, ANN201
    """Grow two trees of fresh gradients on the reference and the device backend: the same trees bit for bit, every
    row in its leaf, each of more than 40 nodes; yields after each (the caller's checks of what the device did)."""
    n = X.shape[0]
    for t in range(2):
        g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, 1))) + 0.3 * rng.standard_normal((n, 1))
        trees = []
        for b in (ref, dev):
            b.set_gradients(g, h)
            trees.append(grow_tree(b, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)))
        _same(trees[1], trees[0])
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
        assert trees[0].n_nodes > 40, t
        yield t


class _BuildSpy:
    """A histogram build's launch, noted in ``seen`` as (built nodes, FLAT, whether its output was zero already)."""

    def __init__(self, bound, seen):  # noqa: ANN001
        self.bound, self.comp, self.seen = bound, bound.comp, seen

    def __call__(self, sizes, views=None, zeroed=False, **params):  # noqa: ANN001, ANN002, ANN003, ANN204
        self.seen.append((sizes["node"], self.comp.flat, zeroed))
        return self.bound(sizes, views, zeroed, **params)


def test_lookahead_levels_add_up_into_histograms_the_siblings_zeroed(device):
    """A depth-wise look-ahead's siblings zero the next level's histograms as they read this level's (the two small
    buffers alternate), so a level whose build adds up into its output (FLAT) launches no zeroing: the reference's
    quantized trees bit for bit, two of them (the second tree's first level starts from a normal zeroing), every row
    in its leaf; where the level builds are FLAT, every look-ahead level after the first skips its zeroing."""
    rng = np.random.default_rng(21)
    n = 70000  # rows enough for a build of 64 nodes' rows (row_classes), FLAT on CPUs (the heuristic's, 64 nodes up)
    X, _, h = _data(21, n, 6)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    gp = GrowParams(PARAMS, 0.1, 6, 63, False)
    ref = NumpyKernels("quantized")
    dev = ob.OpenCLTreeKernels(device, precision="quantized", depth_ahead=5)  # the device's layout otherwise
    for b in (ref, dev):
        b.load(bins, m.n_bins, 1)
    seen = []
    dev.hist.k_hist = [_BuildSpy(b, seen) for b in dev.hist.k_hist]
    for _ in _two_trees_as_the_reference(ref, dev, X, h, gp, rng):
        # the root's build, then five levels on the device (1, 2, 4, 8, 16 built nodes): the first zeroed by its own
        # launch, each later one by the siblings before it where it is FLAT, never where it is not
        root, *levels = seen
        assert [s[0] for s in levels] == [1, 2, 4, 8, 16] and not root[2] and not levels[0][2], seen
        assert all(z == flat for _, flat, z in levels[1:]), seen
        assert any(flat for _, flat, _ in levels[1:]) or device.type == "gpu", seen  # CPUs' builds: FLAT here
        seen.clear()


@pytest.mark.parametrize("lookahead", [0, 1])
def test_lossguide_batches_add_up_into_histograms_the_siblings_zeroed(device, lookahead):
    """A loss-guided batch's siblings zero 2n nodes of the other small buffer (``zero_batches``, the GPUs' default,
    forced here on every device), so the next build (the next batch's, or with a look-ahead its first level's), where
    it is FLAT and has as many nodes or fewer, adds up into zeros and launches no zeroing; a larger one zeroes its
    own. The reference's quantized trees bit for bit, two of them, every row in its leaf."""
    rng = np.random.default_rng(23)
    n = 70000  # rows enough for a build of 64 nodes' rows (row_classes), FLAT on CPUs (the heuristic's, 64 nodes up)
    X, _, h = _data(23, n, 6)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    gp = GrowParams(PARAMS, 0.1, 0, 63, True)
    ref = NumpyKernels("quantized")
    dev = ob.OpenCLTreeKernels(device, precision="quantized", lookahead=lookahead)
    dev.zero_batches = True
    for b in (ref, dev):
        b.load(bins, m.n_bins, 1)
    seen = []
    sib = dev.hist.siblings_from

    def siblings_from(parents, child, zero_next=False):  # noqa: ANN001, ANN202
        seen.append(("siblings", child.n_nodes, zero_next))
        return sib(parents, child, zero_next)
    dev.hist.siblings_from = siblings_from
    dev.hist.k_hist = [_BuildSpy(b, seen) for b in dev.hist.k_hist]
    for _ in _two_trees_as_the_reference(ref, dev, X, h, gp, rng):
        prev, skipped = None, 0
        for s in seen:  # each build after a batch's siblings: zeroed exactly where FLAT and within their 2n nodes
            if s[0] == "siblings":
                assert s[2], seen
                prev = s[1]
            elif prev is not None:  # (built nodes, FLAT, zeroed)
                assert s[2] == (s[1] and s[0] <= 2 * prev), seen
                skipped += s[2]
                prev = None
        assert skipped or device.type == "gpu", seen  # CPUs' builds: FLAT here
        seen.clear()


@pytest.mark.parametrize("ahead", [1, 2, 5, 7])
@pytest.mark.parametrize("leaves,depth,k,seed", [(255, 8, 1, 3), (0, 6, 1, 4), (40, 7, 1, 5), (31, 5, 3, 6),
                                                 (100, 0, 1, 7), (20, 5, 2, 8)])
def test_depthwise_lookahead_grows_the_level_wise_tree(leaves, depth, k, seed, ahead):
    """Depth-wise levels split on the device ahead of the host (where the leaf budget cannot bind) give the level-wise
    tree node for node, every row in its leaf, in fewer round trips."""
    rng = np.random.default_rng(seed)
    X, _, h = _data(seed, 2500, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, k))) + 0.3 * rng.standard_normal((2500, k))
    h = np.repeat(h, k, axis=1)
    bins = BinMapper(31).fit(X).transform(X)
    gp = GrowParams(PARAMS, 0.1, depth, leaves, False)
    seq, ahd = _BatchedNumpy(), _RoundTripsNumpy(ahead)
    trees = []
    for kern in (seq, ahd):
        kern.load(bins, 32, k)
        kern.set_gradients(g, h)
        trees.append(grow_tree(kern, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)))
    want, got = trees
    _same(got, want)
    np.testing.assert_array_equal(ahd.row_nodes(), seq.row_nodes())
    assert want.n_nodes > 20 and ahd.searches < seq.searches, (ahd.searches, seq.searches)
    if (leaves, depth, ahead) == (255, 8, 7):  # the root and six levels below it on the device, the last level (where
        assert ahd.searches == 1  # the budget binds) from the same round trip's last search: one round trip a tree


def _both_grow(seq, ahd, bins, g, h, gp):
    """One tree of 6 features and 31 bins grown by each numpy backend: the same tree, every row in the same leaf."""
    trees = []
    for kern in (seq, ahd):
        kern.load(bins, 32, 1)
        kern.set_gradients(g, h)
        trees.append(grow_tree(kern, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)))
    _same(trees[1], trees[0])
    np.testing.assert_array_equal(ahd.row_nodes(), seq.row_nodes())
    return trees


@pytest.mark.parametrize("n,depth,weight", [(6000, 0, 0.5), (40000, 13, 0.02)])
def test_depthwise_lookahead_without_limits_keeps_its_levels_narrow(n, depth, weight):
    """A depth-wise tree without a leaf limit (and without a depth limit, or a deep one): look-aheads below wide host
    levels split fewer levels, so the deepest level searched, or the last one split on the device, holds at most
    AHEAD_ENTRIES entries (slots below nodes that did not split included); the tree is still the level-wise one. At
    depth 13 the last level (depth 12) is over a thousand nodes wide: the host splits it."""
    from mdhom.components.lookahead import AHEAD_ENTRIES

    rng = np.random.default_rng(14)
    X, _, h = _data(14, n, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, 1))) + 0.3 * rng.standard_normal((n, 1))
    bins = BinMapper(31).fit(X).transform(X)
    gp = GrowParams(SplitParams(1.0, 0.0, 0.0, weight), 0.1, depth, 0, False)
    seq, ahd = _BatchedNumpy(), _RoundTripsNumpy(7)
    widest, capped = [], []
    orig = ahd.look_ahead

    def spy(hist, mask, params, nodes, allow, first_id, final=None, then=None):
        # the entries of the level below the last one split, or of the last one where it is the tree's last
        widest.append(len(nodes) << (len(allow) - (final is not None)))
        capped.append(len(allow) - (final is not None) < min(7, depth - 1 if depth else 7))
        return orig(hist, mask, params, nodes, allow, first_id, final, then)

    ahd.look_ahead = spy
    trees = _both_grow(seq, ahd, bins, g, h, gp)
    assert max(widest) <= AHEAD_ENTRIES and any(capped) and trees[0].n_nodes > 300, (widest, trees[0].n_nodes)


def test_depthwise_lookahead_that_splits_nothing_below_a_host_level():
    """A host level that splits, then a look-ahead whose first level splits nothing (every child too light to split
    again): the host level's record is still written, so the tree is the level-wise one, its rows in its leaves."""
    rng = np.random.default_rng(12)
    X, _, h = _data(12, 2500, 6)
    g = np.tanh(np.nan_to_num(X[:, :3]) @ rng.standard_normal((3, 1))) + 0.3 * rng.standard_normal((2500, 1))
    bins = BinMapper(31).fit(X).transform(X)
    empty = 0
    for weight in (40.0, 60.0, 90.0, 130.0, 200.0):
        for ahead in (1, 2):
            gp = GrowParams(SplitParams(1.0, 0.0, 0.0, weight), 0.1, 12, 0, False)
            seq, ahd = _BatchedNumpy(), _RoundTripsNumpy(ahead)
            firsts = []
            orig = ahd.look_ahead

            def spy(hist, mask, params, nodes, allow, first_id, final=None, then=None, orig=orig, firsts=firsts):
                founds, hists = orig(hist, mask, params, nodes, allow, first_id, final, then)
                firsts.append((len(nodes), bool(np.any((founds[0].gain > 1e-6) & allow[0]))))
                return founds, hists

            ahd.look_ahead = spy
            _both_grow(seq, ahd, bins, g, h, gp)
            empty += any(n > 1 and not split for n, split in firsts)  # below a host level, nothing split
    assert empty > 0


@pytest.mark.parametrize("precision", ["quantized", "double"])
@pytest.mark.parametrize("leaves,depth,seed", [(255, 8, 3), (0, 5, 4), (60, 7, 9), (20, 5, 10)])
def test_depthwise_lookahead_on_the_device(device, leaves, depth, seed, precision):
    """The device's depth-wise look-ahead grows the reference's level-wise tree bit for bit, rows in their leaves,
    with fewer syncs than level by level; with the tree's last level too (its leaf budget decided on the device: (20,
    5) binds it, 16 nodes for 4 more leaves) fewer still. Quantized and exact float64 fits alike (the float64
    histogram ragged, the levels' ranges unknown to the host)."""
    bins, n_bins, g, h, gp, ref, want = _reference_tree(seed, 3000, depth, leaves, False, precision)
    syncs = []
    for ahead in (0, 2, 7):
        dev = ob.OpenCLTreeKernels(device, precision=precision, depth_ahead=ahead)
        dev.load(bins, n_bins, 1)
        dev.set_gradients(g, h)
        s0 = dev.syncs
        _same(grow_tree(dev, None, np.ones(6, bool), gp, lambda f, b: np.asarray(b, float)), want)
        syncs.append(dev.syncs - s0)
        np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    assert want.n_nodes > 30 and syncs[2] <= syncs[1] < syncs[0], syncs


@pytest.mark.parametrize("leaves,depth", [(0, 6), (20, 6), (6, 4), (255, 8)])
def test_depthwise_lookahead_that_stops_early_still_settles_its_levels(device, leaves, depth):
    """A tree the look-ahead grows past where it stops (nothing splits below the root's children): the grower asks
    for no level after the first that splits nothing, and the rows still land in the reference's leaves (the ranges
    take the levels nobody asked for), already when the values are (before any renaming). With a leaf budget the
    tree's last level is on the device too, its leaves cut at the last partition's counts there: the leaves' pass
    takes that level's splits itself, and runs once."""
    rng = np.random.default_rng(21)
    X = rng.standard_normal((2000, 4))
    X[:, 0] = rng.integers(0, 2, 2000)
    g = np.where(X[:, :1] > 0, 1.0, -1.0)  # one split makes both children pure: no gain below them
    h = np.ones((2000, 1))
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    gp = GrowParams(PARAMS, 0.1, depth, leaves, False)
    at_values = []
    ref = NumpyKernels("quantized")
    ref.load(bins, m.n_bins, 1)
    ref.set_gradients(g, h)
    want = grow_tree(ref, None, np.ones(4, bool), gp, lambda f, b: np.asarray(b, float),
                     on_values=lambda v: at_values.append(ref.row_nodes()))
    dev = ob.OpenCLTreeKernels(device, precision="quantized", depth_ahead=7)
    dev.load(bins, m.n_bins, 1)
    dev.set_gradients(g, h)
    passes, launch = [], dev.rows.k_leaf_rows
    dev.rows.k_leaf_rows = lambda *a, **k: passes.append(1) or launch(*a, **k)
    _same(grow_tree(dev, None, np.ones(4, bool), gp, lambda f, b: np.asarray(b, float),
                    on_values=lambda v: at_values.append(dev.row_nodes())), want)
    assert want.n_nodes == 3 and len(passes) == 1
    np.testing.assert_array_equal(at_values[1], at_values[0])
    np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())


def test_rows_sit_in_the_final_leaves_after_batched_growth(device):
    """After a loss-guided tree (batched, some leaves expanded ahead and then renamed back), every row sits in its
    leaf of the final tree: row -> node map and each leaf's rows equal the numpy reference's."""
    X, g, h = _data(5, 2500, 6)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    ref, dev = NumpyKernels(), ob.OpenCLTreeKernels(device)
    want = _tree(ref, bins, m.n_bins, g, h, True, 60)
    _same(_tree(dev, bins, m.n_bins, g, h, True, 60), want)
    np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    for node in np.flatnonzero(want.left < 0):
        np.testing.assert_array_equal(dev.node_rows(int(node)), np.flatnonzero(ref.row_nodes() == node))


@pytest.mark.parametrize("whole_rows", [True, False], ids=["whole-rows", "feature-lanes"])
def test_profiled_histogram_bytes_are_the_rows_it_reads(device, whole_rows):
    """A profile's bytes for the histogram are the rows each launch reads x a row's bytes: the root's all rows, a
    child's only its own (bandwidth figures divide them by the kernel's time)."""
    X, g, h = _data(11, 3000, 5)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    kern = ob.OpenCLTreeKernels(device, precision="quantized", whole_rows=whole_rows)
    kern.load(bins, m.n_bins, 1)
    kern.set_gradients(g, h)
    kern.profile = True
    row = kern.hist.row_bytes
    splits = kern.best_splits(kern.histograms(np.array([0], np.int32)), np.ones(5, bool), PARAMS)
    name = kern.hist.d_hist.name
    root = kern.kernel_bytes[name]
    assert root == 3000 * row
    kern.apply_splits(np.array([0], np.int32), splits.feature[:1], splits.bin[:1], splits.default_left[:1],
                      np.array([1], np.int32), np.array([2], np.int32))
    kern.histograms(np.array([1], np.int32))
    left = kern.node_rows(1).size
    assert 0 < left < 3000
    assert kern.kernel_bytes[name] == (3000 + left) * row


@pytest.mark.parametrize("layout", [{"row_index": False}, {"row_index": True}, {"row_index": False, "blocks": 0}],
                         ids=["moved", "row-index", "moved-per-row"])
def test_a_trees_last_step_moves_no_row(device, layout):
    """Where rows move, a tree's last split step (``final``: its children are leaves) launches no partition: the
    leaves' pass takes each row's child from its bin and the step's split table, and the rows land in the reference's
    leaves. Asked for a leaf's rows, the partition runs after all, and the ranges are the reference's; a later step (a
    loss-guided batch after one whose children may not split) first partitions the one left out, since its table is
    about to be overwritten, and the rows still land where the reference puts them. Through a row index the step is
    partitioned as any other (the pass would gather the bins)."""
    X, g, h = _data(17, 3000, 5)
    m = BinMapper(31).fit(X)
    bins = m.transform(X)
    ref, dev = NumpyKernels("quantized"), ob.OpenCLTreeKernels(device, precision="quantized", **layout)
    launched = []
    for b in (ref, dev):
        b.load(bins, m.n_bins, 1)
        b.set_gradients(g, h)
    record = dev.ws.record
    dev.ws.record = lambda name, *a, **k: launched.append(name) or record(name, *a, **k)
    root = [b.best_splits(b.histograms(np.array([0], np.int32)), np.ones(5, bool), PARAMS) for b in (ref, dev)]
    s = root[0]
    assert np.isfinite(s.gain[0]) and s.feature[0] == root[1].feature[0] and s.bin[0] == root[1].bin[0]
    for b in (ref, dev):
        b.apply_splits(np.array([0], np.int32), s.feature[:1], s.bin[:1], s.default_left[:1],
                       np.array([1], np.int32), np.array([2], np.int32))
    kids = [b.best_splits(b.histograms(np.array([1, 2], np.int32)), np.ones(5, bool), PARAMS) for b in (ref, dev)]
    k = kids[0]
    np.testing.assert_array_equal(k.feature, kids[1].feature)
    assert np.isfinite(k.gain).all()

    def split(i: int, lo: int) -> None:  # node 1 + i by its best split into lo, lo + 1: the children are leaves
        for b in (ref, dev):
            b.apply_splits(np.array([1 + i], np.int32), k.feature[i:i + 1], k.bin[i:i + 1], k.default_left[i:i + 1],
                           np.array([lo], np.int32), np.array([lo + 1], np.int32), final=True)

    left_out = not layout["row_index"]
    assert dev.rows.defer_last == left_out
    before = launched.count("tree_partition")
    split(0, 3)
    np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    assert launched.count("tree_partition") == before + (not left_out) and "tree_leaf_rows" in launched
    assert len(set(dev.row_nodes()[ref.row_nodes() == 3].tolist())) == 1 and (ref.row_nodes() == 4).any()
    split(1, 5)  # where left out: the last step's partition first, then this one's (left out in turn)
    assert launched.count("tree_partition") == before + 1 + (not left_out)
    np.testing.assert_array_equal(dev.row_nodes(), ref.row_nodes())
    for node in range(3, 7):
        np.testing.assert_array_equal(dev.node_rows(node), np.flatnonzero(ref.row_nodes() == node))
    assert launched.count("tree_partition") == before + 2


@pytest.mark.parametrize("categorical", [False, True])
def test_write_splits_writes_what_split_would(categorical):
    """NodeTable.write_splits (a loss-guided walk's splits at the tree's end, parents among the nodes it makes) leaves
    the table as one NodeTable.split per split in the same order would; a fit with categorical features must give the
    splits' left bins."""
    from mdhom.trees.backend import Splits
    from mdhom.trees.growth import NodeTable

    rng = np.random.default_rng(3)
    node = np.array([0, 2, 1, 3])  # 0 -> (1, 2), 2 -> (3, 4), 1 -> (5, 6), 3 -> (7, 8)
    k = node.size
    cats = np.array([True, False, True]) if categorical else None
    gp = GrowParams(PARAMS, 0.1, 0, 16, True, cats)
    splits = Splits(gain=rng.random(k), feature=rng.integers(0, 3, k).astype(np.int32),
                    bin=rng.integers(0, 8, k).astype(np.int32), default_left=rng.random(k) < 0.5,
                    left_sum=rng.random((k, 2, 2)), right_sum=rng.random((k, 2, 2)),
                    cat_left=rng.random((k, 10)) < 0.5 if categorical else None)
    one, many = NodeTable(2), NodeTable(2)
    for t in (one, many):
        t.add(rng.random((2, 2)) if t is one else one.sums[0], 0)
    for j in range(k):
        one.split(int(node[j]), splits, j, gp)
    first = many.write_splits(node, splits.feature, splits.bin, splits.default_left, splits.gain, splits.left_sum,
                              splits.right_sum, np.array([1, 2, 2, 3]), gp,
                              (lambda j: splits.cat_left[j]) if categorical else None)
    assert first == 1 and many.n == one.n == 2 * k + 1
    for field in ("sums", "depth", "left", "right", "feature", "bin", "default_left", "gain"):
        np.testing.assert_array_equal(getattr(many, field)[: many.n], getattr(one, field)[: one.n], err_msg=field)
    assert many.cat_left.keys() == one.cat_left.keys() and (len(one.cat_left) > 0) == categorical
    for n, table in one.cat_left.items():
        np.testing.assert_array_equal(many.cat_left[n], table)
    if categorical:
        with pytest.raises(ValueError, match="left bins"):
            NodeTable(2).write_splits(node[:1], splits.feature[:1], splits.bin[:1], splits.default_left[:1],
                                      splits.gain[:1], splits.left_sum[:1], splits.right_sum[:1], np.ones(1, int),
                                      gp, None)
