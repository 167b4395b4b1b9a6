"""The tree learner's host side: binning, losses, growth policies, subtraction trick, determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, TreeBoostRegressor
from mdhom.learn.binning import BinMapper, feature_edges, nan_columns
from mdhom.learn.losses import Logistic, Softmax, SquaredError, canonical_objective
from mdhom.trees import params as P
from mdhom.trees.backend import SplitParams
from mdhom.trees.estimators import make_kernels
from mdhom.trees.grower import GrowParams, grow_tree
from mdhom.trees.model import Ensemble
from mdhom.trees.numpy_backend import NumpyKernels, fast_best_splits
from mdhom.trees.reference import NumpyTreeKernels, best_splits


def _data(n=600, f=6, seed=0, nan=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[:, 1] = np.round(X[:, 1] * 2)  # few distinct values
    y = (X[:, 0] + 0.5 * X[:, 1] - X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=n) > 0).astype(int)
    if nan:
        X[rng.random((n, f)) < nan] = np.nan
    return X, y


# ------------------------------------------------------------------------------------------------ binning

def test_edges_one_bin_per_distinct_value_when_few():
    v = np.array([3.0, 1.0, 2.0, 2.0, np.nan, 1.0])
    e = feature_edges(v, np.ones(6), max_bin=8)
    assert np.array_equal(e, [1.5, 2.5])


def test_equal_values_never_straddle_bins_and_nan_gets_last_bin():
    rng = np.random.default_rng(1)
    x = np.round(rng.exponential(size=5000), 1)
    x[::17] = np.nan
    m = BinMapper(max_bin=16).fit(x[:, None])
    b = m.transform(x[:, None])[:, 0]
    assert m.n_bins == len(m.edges[0]) + 3 <= 17  # real bins, the free one, NaN's: what the data needs
    assert (b[np.isnan(x)] == m.n_bins - 1).all() and (b[~np.isnan(x)] < m.n_bins - 2).all()
    for value in np.unique(x[~np.isnan(x)]):
        assert np.unique(b[x == value]).size == 1
    assert len(m.edges[0]) <= 14  # a feature with NaN keeps one bin free for "all values left, NaN right"
    # bins grow with the value, and the threshold of "bin <= k" separates exactly those rows
    for k in range(len(m.edges[0])):
        ok = ~np.isnan(x)
        assert np.array_equal(b[ok] <= k, x[ok] <= m.threshold(0, k))
    assert m.threshold(0, 15) == np.inf


def test_thresholds_of_many_split_nodes_at_once():
    """``thresholds`` gives each (feature, split bin) pair's edge above the bin (+inf past a feature's last edge), as
    ``threshold`` does pair by pair, for features of different edge counts."""
    rng = np.random.default_rng(4)
    X = np.column_stack([rng.normal(size=3000), rng.integers(0, 3, 3000), np.round(rng.exponential(size=3000), 1)])
    m = BinMapper(max_bin=32).fit(X)
    feature = rng.integers(0, 3, 200)
    split_bin = rng.integers(0, m.n_bins, 200)
    got = m.thresholds(feature, split_bin)
    want = [float(m.edges[f][b]) if b < m.edges[f].size else np.inf for f, b in zip(feature, split_bin, strict=True)]
    assert np.array_equal(got, want) and np.isinf(got).any() and np.isfinite(got).any()
    assert m.thresholds(np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)


def test_quantile_bins_are_balanced():
    x = np.random.default_rng(2).normal(size=10_000)
    m = BinMapper(max_bin=32).fit(x[:, None])
    counts = np.bincount(m.transform(x[:, None])[:, 0], minlength=33)[:32]
    assert len(m.edges[0]) == 31 and counts.min() > 0.6 * 10_000 / 32 and counts.max() < 1.4 * 10_000 / 32


def test_unit_weights_cut_where_uniform_weights_do():
    """Unit weights (the usual fit) sort the values alone and count each value's run; any other weights sort value
    and weight together. Uniform weights of 2 scale every cumulative weight and target exactly, so both paths must
    give the same edges: continuous and low-cardinality features, ties, NaN, more and fewer values than bins."""
    rng = np.random.default_rng(12)
    for x in (rng.normal(size=20_000), np.round(rng.exponential(size=20_000), 1), rng.integers(0, 40, 20_000) * 1.0,
              np.repeat(rng.normal(size=500), rng.integers(1, 60, 500))):
        x = x.copy()
        x[rng.random(x.size) < 0.05] = np.nan
        for max_bin in (8, 64, 255):
            unit = feature_edges(x, np.ones(x.size), max_bin)
            assert unit.size > 0
            assert np.array_equal(unit, feature_edges(x, np.full(x.size, 2.0), max_bin))


def test_zero_weight_rows_do_not_move_edges():
    x = np.array([1.0, 2.0, 3.0, 10.0, 20.0])
    e = feature_edges(x, np.array([1, 1, 1, 0, 0.0]), max_bin=255)
    assert np.array_equal(e, [1.5, 2.5])


def test_float32_values_get_the_float64_copys_edges():
    """Edges are halfway points computed in float64 whatever the input's type: a float32 column and its float64 copy
    get the same edges, also where the two values are neighbouring floats (whose float32 halfway rounds onto one
    of them), weighted or not, from sampled rows or all."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 4)).astype(np.float32)
    X[:, 1] = np.where(rng.random(3000) < 0.5, np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2.0)))
    X[rng.random(X.shape) < 0.02] = np.nan
    lo, hi = np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2.0))
    assert lo + (hi - lo) / np.float32(2.0) in (lo, hi)  # float32 arithmetic would put the edge onto a value
    w = rng.random(3000)
    for weights, rows in ((None, None), (w, None), (None, np.arange(0, 3000, 3))):
        e32 = BinMapper(15).fit(X, weights, rows).edges
        e64 = BinMapper(15).fit(X.astype(np.float64), weights, rows).edges
        assert all(a.dtype == np.float64 and a.tobytes() == b.tobytes() for a, b in zip(e32, e64, strict=True))
    assert lo < e32[1][0] < hi


@pytest.mark.parametrize("shape", [(1, 1), (63, 3), (64, 5), (1000, 28), (70001, 7), (40000, 200)])
def test_nan_columns_is_isnan_any_per_column(shape):
    """The blocked per-column NaN test is numpy's, for every shape: fewer rows than a block's 64, a partial block of
    rows at the end, NaN only in a block's last rows or only in the rows past the last whole 64."""
    rng = np.random.default_rng(shape[0])
    for dtype in (np.float64, np.float32):
        X = rng.normal(size=shape).astype(dtype)
        assert not nan_columns(X).any()
        for r, c in ((shape[0] - 1, shape[1] - 1), (shape[0] // 2, 0), (63 % shape[0], shape[1] // 2)):
            X[r, c] = np.nan
            np.testing.assert_array_equal(nan_columns(X), np.isnan(X).any(axis=0))
        np.testing.assert_array_equal(nan_columns(X[::2]), np.isnan(X[::2]).any(axis=0))  # not contiguous


@pytest.mark.parametrize("max_bin", [1, 65536])
def test_max_bin_out_of_range(max_bin):
    with pytest.raises(ValueError, match="max_bin"):
        TreeBoostRegressor(max_bin=max_bin, device="numpy").fit(np.zeros((4, 1)), np.arange(4.0))


# ------------------------------------------------------------------------------------------------- losses

def test_loss_gradients_and_base_scores():
    y = np.array([[0.0], [1.0], [1.0], [1.0]])
    w = np.array([1.0, 1.0, 1.0, 3.0])
    lg = Logistic()
    assert lg.base_score(y, w) == pytest.approx(np.log(5 / 1))
    g, h = lg.gradients(y, np.zeros((4, 1)), w)
    assert np.allclose(g[:, 0], (0.5 - y[:, 0]) * w) and np.allclose(h[:, 0], 0.25 * w)
    sq = SquaredError()
    assert sq.base_score(y, w) == pytest.approx(5 / 6)
    sm = Softmax(3)
    yc = np.array([[0.0], [2.0], [2.0]])
    assert np.allclose(np.exp(sm.base_score(yc, np.ones(3))), [1 / 3, 1e-7, 2 / 3])
    g, h = sm.gradients(yc, np.zeros((3, 3)), np.ones(3))
    assert np.allclose(g.sum(axis=1), 0) and np.allclose(g[0], [1 / 3 - 1, 1 / 3, 1 / 3])
    assert canonical_objective("multiclass") == "multi:softmax"
    with pytest.raises(ValueError, match="unknown objective"):
        canonical_objective("poisson")


# ------------------------------------------------------------------------------------------- split search

@pytest.mark.parametrize("n_outputs", [1, 4, 13])
@pytest.mark.parametrize("sp", [SplitParams(1.0, 0.0, 0.0, 1.0), SplitParams(0.3, 0.5, 0.1, 0.0),
                                SplitParams(0.0, 0.0, 0.0, 2.0), SplitParams(0.0, 0.0, 0.0, 0.0)])
def test_fast_split_search_is_bit_identical_to_reference(n_outputs, sp):
    rng = np.random.default_rng(n_outputs)
    hist = rng.normal(size=(4, 9, 12, n_outputs, 2))
    hist[..., 1] = np.abs(hist[..., 1])
    hist[1, 3:5] = hist[1, 2]  # exact ties between features
    hist[2, :, 5] = 0.0  # empty bins: ties between thresholds
    hist[3][rng.random((9, 12)) < 0.7] = 0.0  # a small node: most bins empty
    mask = np.array([1, 1, 0, 1, 1, 1, 1, 0, 1], bool)
    with np.errstate(divide="ignore", invalid="ignore"):  # the reference divides 0/0 where lambda is 0
        a, b = fast_best_splits(hist, mask, sp), best_splits(hist, mask, sp)
    for field in ("gain", "feature", "bin", "default_left", "left_sum", "right_sum"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


# ----------------------------------------------------------------------------------------------- growth

class CountingKernels(NumpyKernels):
    """Records every histograms() call, to check the level batching and the subtraction trick."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.subtractions = 0

    def histograms(self, nodes, transient=False):
        self.calls.append([int(n) for n in nodes])
        return super().histograms(nodes, transient)

    def subtract(self, parent, child):
        self.subtractions += 1
        return super().subtract(parent, child)

    def siblings(self, parent, child, index=None):
        self.subtractions += 1
        return super().siblings(parent, child, index)


def _grow(kernels, X, y, **kw):
    mapper = BinMapper(255).fit(X)
    kernels.load(mapper.transform(X), mapper.n_bins, 1)
    loss = Logistic()
    w = np.ones(len(y))
    raw = np.tile(loss.base_score(y[:, None].astype(float), w), (len(y), 1))
    g, h = loss.gradients(y[:, None].astype(float), raw, w)
    kernels.set_gradients(g, h)
    params = GrowParams(SplitParams(1.0, 0.0, 0.0, 1.0), 0.3, kw.get("max_depth", 0), kw.get("max_leaves", 0),
                        kw.get("lossguide", False))
    root = np.stack([g.sum(0), h.sum(0)], axis=1)
    tree = grow_tree(kernels, root, np.ones(X.shape[1], bool), params, mapper.thresholds)
    return tree, kernels.row_nodes(), h


@pytest.mark.parametrize("lossguide", [False, True])
def test_growth_builds_only_smaller_children_and_routes_raw_values_like_bins(lossguide):
    X, y = _data(nan=0.05)
    k = CountingKernels()
    tree, leaf, h = _grow(k, X, y, max_depth=5, max_leaves=20, lossguide=lossguide)
    n_inner = int((tree.left >= 0).sum())
    assert 5 < n_inner <= 19 and tree.n_nodes == 2 * n_inner + 1
    built = [n for call in k.calls for n in call]
    assert built[0] == 0 and len(set(built)) == len(built)
    # every built child is the smaller one of its pair (by hessian, ties left); its sibling came by subtraction
    parent_of = {int(c): i for i in range(tree.n_nodes) for c in (tree.left[i], tree.right[i]) if c >= 0}
    for n in built[1:]:
        p = parent_of[n]
        lo, hi = tree.left[p], tree.right[p]
        assert n == (lo if tree.cover[lo] <= tree.cover[hi] else hi)
    assert k.subtractions >= 1
    if not lossguide:  # one histograms() call per level that still splits
        assert len(k.calls) <= 5
    # the raw-value traversal of the saved thresholds reaches the same leaf as the binned training rows
    ens = Ensemble(X.shape[1], 1, np.zeros(1), [tree])
    assert np.array_equal(ens.leaves(X)[:, 0], leaf)
    # cover is the hessian sum of the rows in the leaf
    for node in np.unique(leaf):
        assert tree.cover[node] == pytest.approx(h[leaf == node].sum())


def test_lean_split_search_grows_the_reference_tree():
    X, y = _data(nan=0.05, seed=3)
    a, _, _ = _grow(NumpyKernels(), X, y, max_depth=6)
    b, _, _ = _grow(NumpyTreeKernels(), X, y, max_depth=6)
    assert json.dumps(a.to_json()) == json.dumps(b.to_json())


def test_limits_depth_and_leaves():
    X, y = _data(n=2000)
    for kw, check in [
        (dict(max_depth=3), lambda est: max(_depths(t).max() for t in est._ensemble.trees) == 3),
        (dict(max_depth=0, max_leaves=7, grow_policy="lossguide"),
         lambda est: all((t.left < 0).sum() == 7 for t in est._ensemble.trees)),
        (dict(max_depth=4, max_leaves=5), lambda est: max((t.left < 0).sum() for t in est._ensemble.trees) <= 5),
        (dict(min_split_gain=1e9), lambda est: all(t.n_nodes == 1 for t in est._ensemble.trees)),
    ]:
        est = TreeBoostClassifier(n_estimators=3, device="numpy", **kw).fit(X, y)
        assert check(est), kw


def _depths(tree):
    d = np.zeros(tree.n_nodes, int)
    for i in range(tree.n_nodes):
        if tree.left[i] >= 0:
            d[tree.left[i]] = d[tree.right[i]] = d[i] + 1
    return d


def test_lossguide_splits_the_best_leaf_first():
    X, y = _data(n=1500, seed=4)
    est = TreeBoostClassifier(n_estimators=1, grow_policy="lossguide", max_depth=0, max_leaves=12,
                              device="numpy").fit(X, y)
    tree = est._ensemble.trees[0]
    # node ids are allocated in split order, so the parents' gains in id order are non-increasing
    # whenever the later split was already a leaf when the earlier one was chosen
    inner = np.flatnonzero(tree.left >= 0)
    order = sorted(inner, key=lambda i: tree.left[i])
    available = {0}
    for i in order:
        assert all(tree.gain[i] >= tree.gain[j] - 1e-12 for j in available if tree.left[j] > tree.left[i])
        available |= {tree.left[i], tree.right[i]}


def test_squared_error_leaf_values_are_exact():
    X = np.repeat(np.arange(4.0), 5)[:, None]
    y = np.repeat([1.0, 1.0, 5.0, 9.0], 5)
    est = TreeBoostRegressor(n_estimators=1, learning_rate=1.0, reg_lambda=1e-9, min_child_weight=1, max_depth=3,
                             device="numpy").fit(X, y)
    assert np.allclose(est.predict(X), y, atol=1e-6)
    assert est._ensemble.base_score[0] == pytest.approx(y.mean())


def test_missing_values_learn_a_default_direction():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1000, 2))
    y = (X[:, 0] > 0).astype(int)
    X[y == 1, 1] = np.nan  # missingness itself carries the label
    X[:, 0] = rng.normal(size=1000)  # feature 0 is noise now
    est = TreeBoostClassifier(n_estimators=5, max_depth=1, device="numpy").fit(X, y)
    assert est.score(X, y) == 1.0
    assert est.feature_importances_[1] > 0.9


def test_multilabel_and_multiclass_use_multi_output_leaves():
    X, y = _data(n=500)
    Y = np.column_stack([y, X[:, 0] > 0.5, X[:, 4] < 0]).astype(int)
    est = TreeBoostClassifier(n_estimators=20, device="numpy").fit(X, Y)
    assert est.objective_ == "multilabel:logistic" and est._ensemble.trees[0].value.shape[1] == 3
    assert est.predict(X).shape == (500, 3) and (est.predict(X) == Y).mean() > 0.9
    yc = np.digitize(X[:, 0], [-0.5, 0.5])
    est = TreeBoostClassifier(n_estimators=20, device="numpy").fit(X, yc)
    assert est.objective_ == "multi:softmax" and est._ensemble.trees[0].value.shape[1] == 3
    assert np.allclose(est.predict_proba(X).sum(axis=1), 1) and est.score(X, yc) > 0.95


def test_sampling_is_deterministic_per_seed(tmp_path):
    X, y = _data(n=800)
    kw = dict(n_estimators=8, subsample=0.7, colsample_bytree=0.5, device="numpy")
    files = []
    for seed in (7, 7, 8):
        TreeBoostClassifier(random_state=seed, **kw).fit(X, y).save_model(tmp_path / f"m{len(files)}.json")
        files.append((tmp_path / f"m{len(files)}.json").read_bytes())
    assert files[0] == files[1] and files[0] != files[2]


def test_sample_weight_equals_repetition():
    X, y = _data(n=300, seed=6)
    w = np.random.default_rng(0).integers(0, 3, size=300)
    a = TreeBoostClassifier(n_estimators=5, device="numpy").fit(X, y, sample_weight=w)
    b = TreeBoostClassifier(n_estimators=5, device="numpy").fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert np.allclose(a.decision_function(X), b.decision_function(X))


def test_early_stopping_keeps_the_best_round():
    X, y = _data(n=1200, seed=8)
    Xv, yv = _data(n=400, seed=9)
    est = TreeBoostClassifier(n_estimators=300, learning_rate=0.5, max_depth=6, early_stopping_rounds=5,
                              device="numpy").fit(X, y, eval_set=[(Xv, yv)])
    curve = est.evals_result_["validation_0"]["logloss"]
    assert len(curve) == est.best_iteration_ + 6 < 300
    assert len(est._ensemble.trees) == est.best_iteration_ + 1
    assert curve[est.best_iteration_] == min(curve)
    assert len(est.round_times_) == len(curve) and est.build_seconds_ == 0.0
    with pytest.raises(ValueError, match="eval_set"):
        TreeBoostClassifier(early_stopping_rounds=3, device="numpy").fit(X, y)


def test_params_table_drives_signature_and_validation():
    import inspect

    sig = inspect.signature(TreeBoostClassifier.__init__).parameters
    assert [n for n in sig if n != "self"] == [o.name for o in P.OPTIONS]
    assert all(sig[o.name].default == o.default for o in P.OPTIONS)
    assert "max_bin : int, default=255" in TreeBoostClassifier.__doc__
    with pytest.raises(ValueError, match="unknown parameter"):
        P.validate({"num_leaves": 3})
    with pytest.raises(ValueError, match="grow_policy"):
        TreeBoostClassifier(grow_policy="leafwise", device="numpy").fit(*_data(n=50))
    with pytest.raises(ValueError, match="objective"):
        TreeBoostClassifier(objective="poisson", device="numpy").fit(*_data(n=50))


def test_device_selection():
    assert isinstance(make_kernels("numpy", "double"), NumpyKernels)
    try:
        import mdhom.trees.opencl_backend  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(ValueError, match="device='numpy'"):
            make_kernels("auto", "double")


def _opencl_available() -> bool:
    try:
        import mdhom
        import mdhom.trees.opencl_backend  # noqa: F401
    except ImportError:
        return False
    return bool(mdhom.compute_devices())


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL tree backend or no OpenCL device")
@pytest.mark.parametrize("kw", [dict(grow_policy="depthwise", max_depth=5),
                                dict(grow_policy="lossguide", max_depth=0, max_leaves=15, subsample=0.8,
                                     colsample_bytree=0.7, random_state=3)], ids=["depthwise", "lossguide"])
def test_default_device_grows_the_numpy_trees(tmp_path, kw):
    """The default device against the numpy reference in the precision the device resolved to (double on CPUs,
    quantized on GPUs): the same model file, byte for byte."""
    X, y = _data(n=700, nan=0.03, seed=11)
    Y = np.column_stack([y, X[:, 0] > 0]).astype(int)
    for target in (y, Y):
        docs = []
        on_device = TreeBoostClassifier(n_estimators=6, device=None, **kw).fit(X, target)
        reference = TreeBoostClassifier(n_estimators=6, device="numpy", precision=on_device.precision_, **kw)
        for est in (reference.fit(X, target), on_device):
            est.save_model(tmp_path / "m.json")
            doc = json.loads((tmp_path / "m.json").read_text())
            doc["params"].pop("device")
            doc["params"].pop("precision")
            docs.append(doc)
        assert docs[0] == docs[1]


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL tree backend or no OpenCL device")
@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_many_output_model_files_are_identical_everywhere(tmp_path, device, precision):
    """Ten classes and nine labels: gains, hessian sums and covers add outputs in index order in the numpy
    reference as in the kernels (np.sum adds eight or more terms pairwise: the gains differed in the last bits)."""
    X, _ = _data(n=500, nan=0.03, seed=13)
    full, _ = _data(n=500, seed=13)  # the same values without the missing ones
    s = full[:, 0] + 0.5 * full[:, 2]
    y10 = np.digitize(s, np.quantile(s, np.linspace(0.1, 0.9, 9)))
    Y9 = (full[:, :3] @ np.random.default_rng(0).normal(size=(3, 9)) > 0).astype(int)
    for target in (y10, Y9):
        docs = []
        for dev in ("numpy", device):
            est = TreeBoostClassifier(n_estimators=3, max_depth=3, device=dev, precision=precision).fit(X, target)
            est.save_model(tmp_path / "m.json")
            doc = json.loads((tmp_path / "m.json").read_text())
            doc["params"].pop("device")
            docs.append(doc)
        assert docs[0]["n_outputs"] == (10 if target is y10 else 9)
        assert docs[0] == docs[1]


def test_no_regularisation_at_all_still_gives_finite_trees():
    X, y = _data(n=300, seed=12)
    w = np.where(np.arange(300) % 7 == 0, 0.0, 1.0)  # zero-weight rows: children with h = 0 exist
    est = TreeBoostClassifier(n_estimators=5, reg_lambda=0.0, min_child_weight=0.0, subsample=0.5, random_state=0,
                              device="numpy").fit(X, y, sample_weight=w)
    assert all(np.isfinite(t.value).all() for t in est._ensemble.trees)
    assert np.isfinite(est.decision_function(X)).all()


@pytest.mark.parametrize("kw", [dict(grow_policy="depthwise", max_depth=5),
                                dict(grow_policy="lossguide", max_depth=0, max_leaves=15, subsample=0.8,
                                     colsample_bytree=0.7, random_state=3)], ids=["depthwise", "lossguide"])
def test_quantized_model_files_are_identical_everywhere(tmp_path, monkeypatch, device, kw):
    """precision='quantized': the numpy reference and the device write the same model file byte for byte (the
    device's name aside), under the default and parallel configurations, PARTIALS_LOCAL 0 and 1 alike."""
    from test_trees_backend import quantized_configs

    from mdhom.trees import estimators
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    X, y = _data(n=700, nan=0.03, seed=11)
    Y = np.column_stack([y, X[:, 0] > 0]).astype(int)
    variants = [None, *quantized_configs(device, X.shape[1])]
    original = estimators.make_kernels
    for target in (y, Y):
        texts = []
        for cfg in ["numpy", *variants]:
            maker = original if cfg == "numpy" else (lambda d, p, c=cfg: OpenCLTreeKernels(d, p, configs=c))
            monkeypatch.setattr(estimators, "make_kernels", maker)
            est = TreeBoostClassifier(n_estimators=6, device="numpy" if cfg == "numpy" else device,
                                      precision="quantized", **kw).fit(X, target)
            assert est.precision_ == "quantized"
            est.save_model(tmp_path / "m.json")
            doc = json.loads((tmp_path / "m.json").read_text())
            assert doc["precision"] == "quantized"
            doc["params"].pop("device")
            texts.append(json.dumps(doc, sort_keys=True))
        assert all(t == texts[0] for t in texts[1:])


@pytest.mark.parametrize("kw", [dict(grow_policy="depthwise", max_depth=4),
                                dict(grow_policy="lossguide", max_depth=0, max_leaves=12)], ids=["depthwise", "lossguide"])
def test_default_bins_of_wide_rows_give_the_same_model_files(tmp_path, device, kw):
    """max_bin=255 (the default) on 16 features: a node's whole-row histogram (32 KB) is more than a GPU's local memory
    holds (Oclgrind's 32 KB among them), so it is built in feature groups (``tree_histogram_groups``); the model file is
    the numpy reference's byte for byte either way."""
    from mdhom.components.row_histogram import feature_groups

    X, y = _data(n=500, f=16, seed=12, nan=0.02)
    texts = []
    for dev in ("numpy", device):
        est = TreeBoostClassifier(n_estimators=3, device=dev, precision="quantized", **kw).fit(X, y)
        if dev != "numpy":
            grouped = feature_groups(device, X.shape[1], 1, 256) > 1  # 255 bins and the missing one
            assert any(k.startswith("tree_histogram_groups") for k in est.kernel_configs_) == grouped
        est.save_model(tmp_path / "m.json")
        doc = json.loads((tmp_path / "m.json").read_text())
        doc["params"].pop("device")
        texts.append(json.dumps(doc, sort_keys=True))
    assert texts[0] == texts[1]


@pytest.mark.parametrize("kw", [dict(grow_policy="depthwise", max_depth=5, max_leaves=20),
                                dict(grow_policy="lossguide", max_depth=0, max_leaves=15, subsample=0.8,
                                     random_state=3)], ids=["depthwise", "lossguide"])
def test_trees_assembled_while_the_next_grows_give_the_same_model_files(tmp_path, monkeypatch, device, kw):
    """Where the device computes beside the host (overlap_trees, GPUs), each tree is assembled on the host while the
    device grows the next (start_tree's while_busy, the rows left with the backend's ids) and each round ends without
    waiting for its last kernels (``end_round``'s fence): the same model file as tree by tree and as the numpy
    reference; with eval sets every tree is assembled in its own round."""
    from mdhom.components.workspace import Workspace
    from mdhom.trees import boosting
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    X, y = _data(n=700, nan=0.03, seed=12)
    started = []
    original = boosting.start_tree

    def spy(*args, **kwargs):
        started.append(kwargs.get("while_busy") is not None and kwargs.get("relabel") is False)
        return original(*args, **kwargs)

    monkeypatch.setattr(boosting, "start_tree", spy)
    fences = []
    fence = Workspace.fence
    monkeypatch.setattr(Workspace, "fence", lambda self: (fences.append(1), fence(self))[1])
    texts = []
    for dev, overlap in (("numpy", None), (device, False), (device, True)):
        if overlap is not None:
            monkeypatch.setattr(OpenCLTreeKernels, "overlap_trees", property(lambda self, o=overlap: o))
        started.clear()
        fences.clear()
        est = TreeBoostClassifier(n_estimators=6, device=dev, precision="quantized", **kw).fit(X, y)
        assert started == ([True] * 6 if overlap else []), (dev, overlap, started)
        assert len(fences) == (6 if overlap else 0)  # the rounds end without waiting for their last kernels
        est.save_model(tmp_path / "m.json")
        doc = json.loads((tmp_path / "m.json").read_text())
        doc["params"].pop("device")
        texts.append(json.dumps(doc, sort_keys=True))
        assert len(est.round_times_) == 6
    assert texts[1] == texts[0] and texts[2] == texts[0]
    started.clear()
    TreeBoostClassifier(n_estimators=3, device=device, precision="quantized", **kw).fit(X, y, eval_set=[(X, y)])
    assert started == []


def test_precision_resolution():
    """None: quantized on a GPU, double elsewhere (numpy included); explicit modes are kept."""
    from mdhom.trees.estimators import resolve_precision

    assert resolve_precision("numpy", None) == "double"
    assert resolve_precision("numpy", "quantized") == "quantized"
    assert isinstance(make_kernels("numpy", "quantized"), NumpyKernels)
    assert make_kernels("numpy", "quantized").precision == "quantized"
    assert make_kernels("numpy", "single").precision == "double"
    est = TreeBoostClassifier(n_estimators=2, device="numpy").fit(*_data(n=100))
    assert est.precision_ == "double"
    with pytest.raises(ValueError, match="precision"):
        TreeBoostClassifier(precision="half", device="numpy").fit(*_data(n=50))
    if _opencl_available():
        import mdhom

        for dev in mdhom.compute_devices():
            want = "quantized" if dev.type == "gpu" and dev.has_fp64 else ("double" if dev.has_fp64 else "single")
            assert resolve_precision(dev, None) == want


def test_quantized_numpy_fit_is_close_to_double():
    """The fixed point resolves 2^30 / n_rows levels of the largest gradient (here ~2^20): the same trees as
    double on this data, leaf values to ~1e-6."""
    X, y = _data(n=800, seed=13)
    a = TreeBoostClassifier(n_estimators=10, device="numpy", precision="double").fit(X, y)
    b = TreeBoostClassifier(n_estimators=10, device="numpy", precision="quantized").fit(X, y)
    for ta, tb in zip(a._ensemble.trees, b._ensemble.trees, strict=True):
        assert np.array_equal(ta.feature, tb.feature) and np.array_equal(ta.bin, tb.bin)
        np.testing.assert_allclose(ta.value, tb.value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("y", [
    np.array([2, 0, 2, 5]), np.array([1.0, 0.0, 1.0], np.float32), np.array([True, False, True]),
    np.array([5, 2, 9, 2], np.uint8), np.array([-1, 3, 3]), np.array([0.5, 1.0]), np.array([2.0, 70000.0]),
    np.array([-0.0, 1.0, 0.0]), np.array(["b", "a", "b"]), np.array([3], np.int16), np.array([1.0, 1e300])],
    ids=["int", "float32", "bool", "uint8", "negative", "fraction", "large", "negative-zero", "str", "one", "huge"])
def test_class_codes_are_np_unique_with_inverse(y):
    """Labels counted (small non-negative integers of any numeric dtype) or sorted (the rest) give np.unique's
    classes, dtype and codes."""
    from mdhom.learn.validation import class_codes

    classes, codes = class_codes(y)
    want, inverse = np.unique(y, return_inverse=True)
    assert classes.dtype == want.dtype and np.array_equal(classes, want)
    assert np.array_equal(codes, inverse.reshape(-1))


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL tree backend or no OpenCL device")
def test_rows_too_large_to_send_are_binned_on_the_host(tmp_path, device, monkeypatch):
    """Raw rows whose float64 copy would pass half the device's largest allocation are binned on the host (PoCL
    refused a 10.5M x 28 upload), in the tree and K-trees backends: the same bins, so the same model file."""
    from types import SimpleNamespace

    from mdhom.components import binning
    from mdhom.trees import ktrees_opencl, opencl_backend

    small = SimpleNamespace(cl_device=SimpleNamespace(max_mem_alloc_size=2 * 8 * 100))
    assert binning.sends_whole(small, np.zeros((10, 10))) and not binning.sends_whole(small, np.zeros((10, 11)))
    X, y = _data(n=400, nan=0.03, seed=17)
    y3 = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    device_transform = binning.DeviceBinner.transform

    def refused(self, X):
        raise AssertionError("rows too large to send went to the device binner")

    for target, kw in ((y, {}), (y3, dict(multi_strategy="one_output_per_tree"))):
        texts = []
        for whole in (True, False):
            for module in (opencl_backend, ktrees_opencl):
                monkeypatch.setattr(module, "sends_whole", lambda dev, X, whole=whole: whole)
            monkeypatch.setattr(binning.DeviceBinner, "transform", device_transform if whole else refused)
            est = TreeBoostClassifier(n_estimators=3, max_depth=3, device=device, **kw).fit(X, target)
            est.save_model(tmp_path / "m.json")
            texts.append((tmp_path / "m.json").read_bytes())
        assert texts[0] == texts[1]


@pytest.mark.parametrize("kw", [dict(grow_policy="depthwise", max_depth=5, precision="quantized"),
                                dict(grow_policy="lossguide", max_depth=0, max_leaves=15, subsample=0.8,
                                     random_state=3)], ids=["depthwise", "lossguide"])
def test_float32_rows_fit_as_they_are_into_the_float64_copys_model(tmp_path, binner_row_types, device, kw):
    """float32 training and eval rows are binned as they are (no float64 copy of the matrix: it had been twice the
    rows' memory, and at 10.5M x 28 rows the largest part of a GPU fit's setup): the model file and the eval scores
    are the float64 copy's, in numpy and on the device, whose binner reads float rows."""
    X, y = _data(n=700, nan=0.03, seed=21)
    X32 = X.astype(np.float32)
    X32[:5, 2] = [np.float32(1e-45), np.float32(-3.4e38), np.float32(3.4e38), 0.5, np.nextafter(np.float32(0.5), 1)]
    read = binner_row_types
    for dev in ("numpy", device):
        texts, scores = [], []
        for Xi in (X32, X32.astype(np.float64)):
            read.clear()
            est = TreeBoostClassifier(n_estimators=4, device=dev, eval_metric="logloss", **kw).fit(
                Xi, y, eval_set=[(Xi[:200], y[:200])])
            if dev != "numpy":
                assert read and set(read) == {Xi.dtype}
            est.save_model(tmp_path / "m.json")
            texts.append((tmp_path / "m.json").read_bytes())
            scores.append(est.evals_result_)
        assert texts[0] == texts[1] and scores[0] == scores[1]
        # eval rows of the other type than the training rows: a binner for each type, the same scores
        mixed = TreeBoostClassifier(n_estimators=4, device=dev, eval_metric="logloss", **kw).fit(
            X32, y, eval_set=[(X32[:200].astype(np.float64), y[:200])])
        assert mixed.evals_result_ == scores[0]
