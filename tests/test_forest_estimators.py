"""RandomForestClassifier / RandomForestRegressor: the same model file on every device as the numpy reference,
quality against scikit-learn, scikit-learn's estimator conventions, model files and error handling."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

import mdhom
from mdhom import RandomForestClassifier, RandomForestRegressor


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        yield


def _cancer(n: int = 300):
    X, y = load_breast_cancer(return_X_y=True)
    return X[:n], y[:n]


def _file(est, tmp_path, name: str) -> bytes:
    path = tmp_path / name
    est.save_model(path)
    return path.read_bytes()


CLASSIFIER_CASES = {
    "bootstrap_sqrt": dict(n_estimators=6),
    "no_bootstrap_3_features": dict(n_estimators=5, bootstrap=False, max_features=3, min_samples_leaf=2),
    "entropy_half_samples_depth": dict(n_estimators=5, criterion="entropy", max_samples=0.5, max_depth=5,
                                       max_features=0.5),
}


@pytest.mark.parametrize("case", sorted(CLASSIFIER_CASES))
def test_classifier_file_is_the_references(device, case, tmp_path):
    X, y = _cancer()
    X = X.copy()
    X[::17, 3] = np.nan  # missing values go right
    kw = dict(CLASSIFIER_CASES[case], random_state=7, max_bin=31)
    ref = RandomForestClassifier(device="numpy", **kw).fit(X, y)
    dev = RandomForestClassifier(device=device, **kw).fit(X, y)
    assert dev.device_ == device.key
    assert _file(dev, tmp_path, "d.json") == _file(ref, tmp_path, "r.json")
    assert np.array_equal(dev.predict_proba(X), ref.predict_proba(X))
    other = RandomForestClassifier(device="numpy", **{**kw, "random_state": 8}).fit(X, y)
    assert _file(other, tmp_path, "o.json") != _file(ref, tmp_path, "r.json")  # the seed matters


REGRESSOR_CASES = {
    "bootstrap_all_features": dict(n_estimators=5),
    "no_bootstrap_sqrt_quantized": dict(n_estimators=4, bootstrap=False, max_features="sqrt", precision="quantized"),
    "max_samples_int_leaf": dict(n_estimators=4, max_samples=150, min_samples_leaf=3),
}


@pytest.mark.parametrize("case", sorted(REGRESSOR_CASES))
def test_regressor_file_is_the_references(device, case, tmp_path):
    X, y = load_diabetes(return_X_y=True)
    X, y = X[:300], y[:300]
    kw = dict(REGRESSOR_CASES[case], random_state=3)
    ref = RandomForestRegressor(device="numpy", **kw).fit(X, y)
    dev = RandomForestRegressor(device=device, **kw).fit(X, y)
    assert _file(dev, tmp_path, "d.json") == _file(ref, tmp_path, "r.json")
    assert np.array_equal(dev.predict(X), ref.predict(X))


@pytest.mark.parametrize("kw", [dict(criterion="entropy"), dict(max_samples=0.4), dict(bootstrap=False)])
def test_weighted_bags_are_the_references(device, kw, tmp_path):
    """Sample weights (zeros too) times the device's draws: the numpy reference's model file, for the classifier
    (entropy's x log x table sized by the heaviest tree) and the regressor (its fixed-point scale likewise)."""
    X, y = _cancer()
    sw = np.random.default_rng(2).integers(0, 4, len(y))
    for Est, target in ((RandomForestClassifier, y), (RandomForestRegressor, X[:, 0] * 2 + y)):
        if Est is RandomForestRegressor and kw.get("criterion"):
            continue
        args = dict(kw, n_estimators=4, random_state=5, max_bin=31)
        ref = Est(device="numpy", **args).fit(X, target, sample_weight=sw)
        dev = Est(device=device, **args).fit(X, target, sample_weight=sw)
        assert _file(dev, tmp_path, "d.json") == _file(ref, tmp_path, "r.json"), Est.__name__


def test_bag_weights_bounds_and_checks():
    """A bag's heaviest tree, exactly (unequal weights draw every tree's rows); bad bags and weights refused."""
    from mdhom.forests.grower import Bag

    sw = np.random.default_rng(1).integers(0, 5, 200)
    for boot, n_draw in ((True, 200), (True, 70), (False, 200)):
        bag = Bag(np.arange(6, dtype=np.uint64) * 977, 200, n_draw, boot, sw)
        assert bag.max_tree_weight == int(bag.weights().sum(axis=1, dtype=np.int64).max())
        assert bag.max_tree_weight <= bag.worst_weight
    ones = Bag(np.arange(3, dtype=np.uint64), 50, 30, True, np.ones(50))
    assert ones.max_tree_weight == 30 and ones.weights().sum(axis=1).tolist() == [30, 30, 30]
    assert Bag(np.zeros(0, np.uint64), 5, 5, True, np.ones(5)).weights().shape == (0, 5)
    with pytest.raises(ValueError, match="at most the rows"):
        Bag(np.arange(2, dtype=np.uint64), 10, 11, True, np.ones(10))
    with pytest.raises(ValueError, match="at most the rows"):
        Bag(np.arange(2, dtype=np.uint64), 10, 5, False, np.ones(10))
    with pytest.raises(ValueError, match="sample weights"):
        Bag(np.arange(2, dtype=np.uint64), 3, 3, True, [1, 2**31, 1])
    X, y = _cancer(60)
    for sw in ([2**31 + 5] + [1] * 59, [2**32] + [1] * 59):
        with pytest.raises(ValueError, match="beyond 2\\^31"):
            RandomForestClassifier(n_estimators=2, device="numpy").fit(X, y, sample_weight=sw)


def test_device_prediction_is_the_numpy_walk(device, monkeypatch):
    """rows x trees on the device (the boosting trees' md_hom forest walk), the same bits as the numpy walk."""
    from mdhom.components.predictor import ForestPredictor
    from mdhom.forests import estimators as E
    from mdhom.forests import walk_kernels as WK
    from mdhom.forests.walker import ForestWalker

    X, y = _cancer()
    X = X.copy()
    X[::11, 2] = np.nan
    for est in (RandomForestClassifier(n_estimators=7, random_state=0, device=device).fit(X, y),
                RandomForestRegressor(n_estimators=5, random_state=0, device=device).fit(X, X[:, 0] * 3 + y)):
        want = est._forest.predict_sum(X)
        monkeypatch.setattr(E, "DEVICE_PREDICT_MIN", 1)
        # the forest's own walk: one walk per (row, tree) for all the leaf's values, tree-major
        assert isinstance(est._device_predictor(len(X)), ForestWalker)
        got = est.predict_proba(X) if isinstance(est, RandomForestClassifier) else est.predict(X)
        assert np.array_equal(np.asarray(got).reshape(want.shape), want)
        # more values per leaf than a walk carries: the boosting trees' walk per output, the same bits
        monkeypatch.setattr(WK, "MAX_WALK_VALUES", 0)
        del est._predictor
        assert isinstance(est._device_predictor(len(X)), ForestPredictor)
        assert np.array_equal(est._mean(X), want)
        monkeypatch.setattr(E, "DEVICE_PREDICT_MIN", 1 << 40)
        assert est._device_predictor(len(X)) is None
        monkeypatch.undo()


def test_device_bins_are_the_host_bins(device):
    """A fit on a device bins its rows there (feature-major, the kernels' layout): the mapper's bins exactly, with
    missing values, values on the edges, a constant and an all-missing column."""
    from mdhom.forests.opencl_backend import DeviceBins, OpenCLForest
    from mdhom.learn.binning import BinMapper

    rng = np.random.default_rng(3)
    X = rng.normal(size=(1025, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 2] = 1.5
    X[:, 4] = np.nan
    mapper = BinMapper(31).fit(X)
    X[:40, 0] = mapper.edges[0][3]  # exactly on an edge: that bin (x <= edge)
    got = OpenCLForest(device).bin_rows(mapper, X)
    assert isinstance(got, DeviceBins) and got.shape == X.shape
    assert np.array_equal(got.array.get(), mapper.transform(X, feature_major=True))


def test_float32_rows_grow_the_float64_copys_forest(device, tmp_path, binner_row_types):
    """float32 training rows are binned as they are (on the device, its binner reads float rows): the model file of
    the float64 copy of the same values, as in numpy."""
    X, y = _cancer()
    X32 = X.astype(np.float32)
    X32[::17, 3] = np.nan
    read = binner_row_types
    for dev in ("numpy", device):
        files = []
        for Xi in (X32, X32.astype(np.float64)):
            read.clear()
            est = RandomForestClassifier(n_estimators=4, max_features=0.5, device=dev, random_state=2).fit(Xi, y)
            assert read == ([] if dev == "numpy" else [Xi.dtype])
            files.append(_file(est, tmp_path, "f.json"))
        assert files[0] == files[1]


@pytest.mark.parametrize("many", [False, True], ids=["walk", "trees-walk"])
def test_float32_rows_predict_as_their_float64_copy(device, monkeypatch, many):
    """float32 rows to predict are taken as they are, no float64 copy of the whole matrix: the device walks (the
    forest's walk, which takes them to float64 a block at a time, and the boosting trees' walk for more values than
    a walk carries, which reads floats) and the numpy walk give the float64 copy's predictions, bit for bit."""
    from mdhom.forests import estimators as E
    from mdhom.forests import walk_kernels

    if many:
        monkeypatch.setattr(walk_kernels, "MAX_WALK_VALUES", 1)
    monkeypatch.setattr(E, "DEVICE_PREDICT_MIN", 0)
    X, y = _cancer()
    X32 = X.astype(np.float32)
    X32[::13, 5] = np.nan
    seen = []
    as_matrix = E.as_matrix
    monkeypatch.setattr(E, "as_matrix", lambda *a, **k: seen.append(out := as_matrix(*a, **k)) or out)
    for dev in ("numpy", device):
        est = RandomForestClassifier(n_estimators=4, max_features=0.5, device=dev, random_state=2).fit(X, y)
        seen.clear()
        got = est.predict_proba(X32)
        assert seen[-1].dtype == np.float32
        np.testing.assert_array_equal(got, est.predict_proba(X32.astype(np.float64)))


def test_thresholds_and_importances_are_the_per_node_ones():
    """The fit's thresholds (BinMapper.thresholds) are BinMapper.threshold of every split node, +inf past the last
    edge included, and the importances the per-tree normalised sums added in tree order, bit for bit."""
    from mdhom.forests import estimators as E
    from mdhom.forests import grower as G
    from mdhom.learn.binning import BinMapper

    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 6))
    X[:, 3] = rng.integers(0, 3, 600)
    y = (X[:, 0] + X[:, 3] > 1).astype(int)
    X[::4, 3] = np.nan  # "every value left, missing right": a split past the last edge, threshold +inf
    mapper = BinMapper(15).fit(X)
    bins = mapper.transform(X)
    w = G.Bag(rng.integers(0, 2**64, 7, dtype=np.uint64), 600, 600, True, np.ones(600, np.int32))
    grown = G.grow(G.NumpyForest(), bins, mapper.n_bins, np.eye(2, dtype=np.int32)[y], w,
                   rng.integers(0, 2**32, 7, dtype=np.uint32), G.GrowSpec((2,), "gini", None, 2, 1, 2))
    want = np.zeros(grown.feature.size)
    for i in np.flatnonzero(grown.feature >= 0):
        want[i] = mapper.threshold(int(grown.feature[i]), int(grown.split_bin[i]))
    assert np.isinf(want).any() and E._thresholds(mapper, grown).tobytes() == want.tobytes()
    per_tree = np.zeros(6)
    trees = np.repeat(np.arange(7), np.diff(grown.offsets))
    for t in range(7):
        m = (grown.feature >= 0) & (trees == t)
        imp = np.bincount(grown.feature[m], weights=grown.gain[m], minlength=6)
        if imp.sum() > 0:
            per_tree += imp / imp.sum()
    assert E._importances(grown, 6).tobytes() == (per_tree / per_tree.sum()).tobytes()


def test_multi_output_on_device(device, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(250, 5))
    Y = np.stack([X[:, 0] > 0, (X[:, 1] + X[:, 2] > 0.5).astype(int) + (X[:, 3] > 1)], axis=1).astype(int)
    ref = RandomForestClassifier(n_estimators=4, random_state=1, device="numpy").fit(X, Y)
    dev = RandomForestClassifier(n_estimators=4, random_state=1, device=device).fit(X, Y)
    assert _file(dev, tmp_path, "d.json") == _file(ref, tmp_path, "r.json")
    proba = dev.predict_proba(X)
    assert isinstance(proba, list) and [p.shape for p in proba] == [(250, 2), (250, 3)]
    assert dev.predict(X).shape == (250, 2) and dev.score(X, Y) > 0.8
    Yr = np.stack([X[:, 0] * 2, X[:, 1] - X[:, 2]], axis=1)
    r_ref = RandomForestRegressor(n_estimators=3, random_state=1, device="numpy").fit(X, Yr)
    r_dev = RandomForestRegressor(n_estimators=3, random_state=1, device=device).fit(X, Yr)
    assert _file(r_dev, tmp_path, "rd.json") == _file(r_ref, tmp_path, "rr.json")
    assert r_dev.predict(X).shape == (250, 2) and r_dev.score(X, Yr) > 0.8


def _cv(make_ours, make_sklearn, X, y, metric, folds: int = 3) -> tuple[float, float]:
    from sklearn.model_selection import KFold

    ours, theirs = [], []
    for i, (a, b) in enumerate(KFold(folds, shuffle=True, random_state=0).split(X)):
        ours.append(metric(y[b], make_ours(i).fit(X[a], y[a]), X[b]))
        theirs.append(metric(y[b], make_sklearn(i).fit(X[a], y[a]), X[b]))
    return float(np.mean(ours)), float(np.mean(theirs))


@pytest.mark.parametrize("data", ["breast_cancer", "digits", "diabetes"])
def test_quality_close_to_scikit_learn(data):
    """3-fold CV, 40 trees, unlimited depth, on the default CPU device (scripts: 5-fold and 100 trees)."""
    from sklearn import ensemble
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score

    if data == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        ours, theirs = _cv(lambda i: RandomForestRegressor(n_estimators=40, random_state=i, device="cpu"),
                           lambda i: ensemble.RandomForestRegressor(n_estimators=40, random_state=i),
                           X, y, lambda t, m, x: r2_score(t, m.predict(x)))
        assert abs(ours - theirs) < 0.03 and ours > 0.35
        return
    X, y = (load_breast_cancer if data == "breast_cancer" else load_digits)(return_X_y=True)
    if data == "breast_cancer":
        metric, bound = (lambda t, m, x: roc_auc_score(t, m.predict_proba(x)[:, 1])), 0.01
    else:
        metric, bound = (lambda t, m, x: accuracy_score(t, m.predict(x))), 0.015
    ours, theirs = _cv(lambda i: RandomForestClassifier(n_estimators=40, random_state=i, device="cpu"),
                       lambda i: ensemble.RandomForestClassifier(n_estimators=40, random_state=i), X, y, metric)
    assert abs(ours - theirs) < bound and ours > 0.95


def test_scikit_learn_conventions():
    from sklearn.base import clone

    est = RandomForestClassifier(n_estimators=3, max_depth=4, device="numpy")
    assert est.get_params()["max_depth"] == 4 and est.get_params()["max_features"] == "default"
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    est.set_params(n_estimators=2)
    assert est.n_estimators == 2
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(learning_rate=0.1)
    with pytest.raises(Exception, match="not fitted"):
        est.predict(np.zeros((2, 3)))
    assert "max_depth=4" in repr(est)
    import pandas as pd

    X, y = _cancer(200)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    est.fit(frame, y)
    assert list(est.feature_names_in_) == list(frame.columns) and est.n_features_in_ == 30
    imp = est.feature_importances_
    assert imp.shape == (30,) and abs(imp.sum() - 1) < 1e-12 and imp.max() > imp.min()
    with pytest.raises(ValueError, match="feature names"):
        est.predict(frame.rename(columns={"f0": "g0"}))
    assert est.predict(frame.iloc[:0]).shape == (0,)
    assert set(est.predict(frame)) <= set(est.classes_)
    strings = np.where(y == 1, "yes", "no")
    s = RandomForestClassifier(n_estimators=2, device="numpy", random_state=0).fit(X, strings)
    assert list(s.classes_) == ["no", "yes"] and s.predict(X).dtype.kind == "U"


def test_errors_are_clear():
    X, y = _cancer(100)
    fit = lambda **kw: RandomForestClassifier(**{"device": "numpy", "n_estimators": 2, **kw}).fit(X, y)  # noqa: E731
    for kw, match in ((dict(n_estimators=0), "n_estimators"), (dict(max_features="half"), "max_features"),
                      (dict(criterion="squared_error"), "criterion"), (dict(bootstrap=False, max_samples=0.5),
                                                                        "max_samples"),
                      (dict(max_samples=1000), "exceeds"), (dict(min_samples_leaf=1.0), "min_samples_leaf"),
                      (dict(max_features=31), "exceeds"), (dict(precision="single"), "precision")):
        with pytest.raises(ValueError, match=match):
            fit(**kw)
    with pytest.raises(ValueError, match="criterion"):
        RandomForestRegressor(criterion="gini", device="numpy").fit(X, y)
    est = RandomForestClassifier(device="numpy", n_estimators=2)
    with pytest.raises(ValueError, match="continuous"):
        est.fit(X, y + 0.5)
    with pytest.raises(ValueError, match="rows"):
        est.fit(X, y[:-1])
    with pytest.raises(ValueError, match="whole numbers"):
        est.fit(X, y, sample_weight=np.full(100, 0.5))
    bad = X.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.fit(bad, y)
    import scipy.sparse as sp

    with pytest.raises(ValueError, match="sparse"):
        est.fit(sp.csr_matrix(X), y)
    est.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :5])
    with pytest.raises(ValueError, match="numeric"):
        RandomForestRegressor(device="numpy").fit(X, np.array(["a"] * 100))


def test_sample_weight_counts_are_row_copies(tmp_path):
    """Integer weights are row multiplicities: without bootstrap, weight 2 equals the row given twice."""
    X, y = _cancer(120)
    w = np.where(np.arange(120) % 3 == 0, 2, 1)
    kw = dict(n_estimators=3, bootstrap=False, max_features=None, device="numpy", random_state=0)
    a = RandomForestClassifier(**kw).fit(X, y, sample_weight=w)
    rows = np.repeat(np.arange(120), w)
    b = RandomForestClassifier(**kw).fit(X[rows], y[rows])
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


def test_model_files(tmp_path):
    X, y = load_digits(return_X_y=True)
    est = RandomForestClassifier(n_estimators=3, random_state=2, device="numpy").fit(X[:400], y[:400])
    path = tmp_path / "forest.json"
    old = os.umask(0o027)
    try:
        est.save_model(path)
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o640  # the user's umask, as a plain open() would give
    loaded = mdhom.load_model(path)
    assert isinstance(loaded, RandomForestClassifier)
    assert np.array_equal(loaded.predict_proba(X), est.predict_proba(X))
    assert np.array_equal(loaded.feature_importances_, est.feature_importances_)
    again = tmp_path / "again.json"
    loaded.save_model(again)
    assert again.read_bytes() == path.read_bytes()
    with pytest.raises(ValueError, match="RandomForestClassifier model, not a RandomForestRegressor"):
        RandomForestRegressor().load_model(path)
    doc = json.loads(path.read_text())
    for damage, match in ((lambda d: d["forest"].__setitem__("left", d["forest"]["left"][:-1]), "damaged"),
                          (lambda d: d["forest"]["feature"].__setitem__(0, 99), "damaged"),
                          (lambda d: d.__setitem__("version", 99), "newer"),
                          (lambda d: d.__setitem__("format", "other"), "not an mdhom forest")):
        broken = json.loads(json.dumps(doc))
        damage(broken)
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=match):
            RandomForestClassifier().load_model(bad)
    bad.write_text(path.read_text()[:100])
    with pytest.raises(ValueError, match="corrupt"):
        mdhom.load_model(bad)
    reg = RandomForestRegressor(n_estimators=2, random_state=0, device="numpy").fit(X[:200], y[:200] * 0.5)
    reg.save_model(tmp_path / "reg.json")
    assert np.array_equal(mdhom.load_model(tmp_path / "reg.json").predict(X), reg.predict(X))


# scikit-learn's own forests fail this check too (its test suite marks it so): the bootstrap draws n rows whatever
# the weights, so weight 2 is not the row given twice
_EXPECTED = {"check_sample_weight_equivalence_on_dense_data": "the bootstrap draws from the row count, as "
             "scikit-learn's forests (an expected failure there too)"}


@pytest.mark.parametrize("cls", [RandomForestClassifier, RandomForestRegressor], ids=lambda c: c.__name__)
def test_check_estimator(cls):
    """scikit-learn's estimator checks on the default CPU device (the numpy backend shares every line outside
    the grower's two steps, whose equality the device tests above check)."""
    from sklearn.utils.estimator_checks import check_estimator

    if not mdhom.compute_devices():
        pytest.skip("no OpenCL device")
    results = check_estimator(cls(n_estimators=4, device="cpu"), on_fail=None, expected_failed_checks=_EXPECTED)
    failures = [r for r in results if r["status"] == "failed"]
    assert not failures, [(r["check_name"], repr(r["exception"])[:300]) for r in failures]
    assert len(results) > 50


def test_n_jobs_runs_on_a_sub_device(tmp_path):
    """n_jobs as the boosting trees take it: a CPU device's sub-device of that many threads, the same model."""
    if not any(d.type == "cpu" for d in mdhom.compute_devices()):
        pytest.skip("no OpenCL CPU device")
    X, y = _cancer(200)
    ref = RandomForestClassifier(n_estimators=3, random_state=0, device="numpy").fit(X, y)
    one = RandomForestClassifier(n_estimators=3, random_state=0, device="cpu", n_jobs=1).fit(X, y)
    assert _file(one, tmp_path, "one.json") == _file(ref, tmp_path, "ref.json")
