"""The estimators under scikit-learn's contract: check_estimator, Pipeline, GridSearchCV, ClassifierChain."""

from __future__ import annotations

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, TreeBoostRegressor

sklearn = pytest.importorskip("sklearn")
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402


def _has_opencl_backend() -> bool:
    try:
        import mdhom
        import mdhom.trees.opencl_backend  # noqa: F401
    except ImportError:
        return False
    return bool(mdhom.compute_devices())


@pytest.mark.parametrize("est", [TreeBoostClassifier(device="numpy", n_estimators=20),
                                 TreeBoostRegressor(device="numpy", n_estimators=20)], ids=lambda e: type(e).__name__)
def test_check_estimator_numpy(est):
    failures = [r for r in check_estimator(est, on_fail=None) if r["status"] == "failed"]
    assert not failures, [(r["check_name"], repr(r["exception"])[:300]) for r in failures]


@pytest.mark.skipif(not _has_opencl_backend(), reason="no OpenCL tree backend or no OpenCL device")
@pytest.mark.parametrize("cls", [TreeBoostClassifier, TreeBoostRegressor], ids=lambda c: c.__name__)
def test_check_estimator_default_device(cls):
    """Every check again with the default device (the OpenCL backend), on smaller models to keep it quick."""
    results = check_estimator(cls(n_estimators=5, max_depth=3), on_fail=None)
    failures = [r for r in results if r["status"] == "failed"]
    assert not failures, [(r["check_name"], repr(r["exception"])[:300]) for r in failures]


def _blobs(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int)
    return X, y


def test_pipeline_and_grid_search():
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _blobs()
    pipe = make_pipeline(StandardScaler(), TreeBoostClassifier(device="numpy", n_estimators=10))
    assert pipe.fit(X, y).score(X, y) > 0.9
    grid = GridSearchCV(TreeBoostClassifier(device="numpy", n_estimators=10),
                        {"max_depth": [1, 4], "learning_rate": [0.1, 0.5]}, cv=3)
    grid.fit(X, y)
    assert grid.best_params_["max_depth"] == 4 and grid.best_score_ > 0.85
    reg = GridSearchCV(TreeBoostRegressor(device="numpy", n_estimators=10), {"reg_lambda": [0.0, 1.0]}, cv=3)
    assert reg.fit(X, X[:, 0] * 2).best_score_ > 0.8


def test_classifier_chain_and_native_multilabel():
    from sklearn.multioutput import ClassifierChain

    X, y = _blobs(400, seed=1)
    Y = np.column_stack([y, X[:, 2] > 0, (X[:, 2] > 0) & (X[:, 3] > 0)]).astype(int)
    chain = ClassifierChain(TreeBoostClassifier(device="numpy", n_estimators=15), order=[0, 1, 2], random_state=0)
    assert (chain.fit(X, Y).predict(X) == Y).mean() > 0.9
    native = TreeBoostClassifier(device="numpy", n_estimators=15).fit(X, Y)
    assert native.predict(X).dtype == Y.dtype and (native.predict(X) == Y).mean() > 0.9
    assert native.predict_proba(X).shape == (400, 3)


def test_pandas_sparse_and_string_labels():
    pd = pytest.importorskip("pandas")
    sparse = pytest.importorskip("scipy.sparse")
    X, y = _blobs()
    labels = np.array(["no", "yes"])[y]
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    est = TreeBoostClassifier(device="numpy", n_estimators=10).fit(frame, pd.Series(labels))
    assert list(est.classes_) == ["no", "yes"] and list(est.predict(frame)[:3]) == list(labels[:3])
    assert list(est.feature_names_in_) == list(frame.columns)
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(frame[frame.columns[::-1]])
    Xs = X.copy()
    Xs[np.abs(Xs) < 0.7] = 0.0
    Xn = np.where(Xs == 0.0, np.nan, Xs)  # absent entries of sparse input are missing, as in XGBoost
    a = TreeBoostClassifier(device="numpy", n_estimators=10).fit(sparse.csr_matrix(Xs), y)
    b = TreeBoostClassifier(device="numpy", n_estimators=10).fit(Xn, y)
    assert np.array_equal(a.decision_function(sparse.csr_matrix(Xs)), b.decision_function(Xn))


@pytest.mark.parametrize("fit_args, match", [
    ((np.zeros((4, 2)), np.array([0, 1, np.nan, 1])), "NaN"),
    ((np.zeros((4, 2)), np.array([0, 1, np.inf, 1])), "infinity"),
    ((np.zeros(4), np.array([0, 1, 0, 1])), "2D"),
    ((np.zeros((4, 2)), np.array([1, 1, 1, 1])), "one class"),
    ((np.zeros((4, 2)), np.array([0, 1, 0])), "rows"),
    ((np.array([[1.0, np.inf]] * 4), np.array([0, 1, 0, 1])), "infinity"),
    # numpy turned the list into strings ("1"); the object array made np.unique raise a bare TypeError
    ((np.zeros((4, 2)), ["a", 1, "b", 2]), r"y mixes strings and numbers \(int, str\)"),
    ((np.zeros((4, 2)), np.array(["a", 1, "b", 2], dtype=object)), "mixes strings and numbers"),
    ((np.zeros((4, 2)), [None, 1, 0, 1]), "all strings or all numbers"),
    ((np.zeros((4, 2)), np.array([0, 1, np.nan, 1], dtype=object)), "NaN"),
])
def test_bad_input_is_a_clear_value_error(fit_args, match):
    with pytest.raises(ValueError, match=match):
        TreeBoostClassifier(device="numpy").fit(*fit_args)


def test_mixed_labels_in_an_eval_set_and_pandas():
    import pandas as pd

    X, y = _blobs(40)
    with pytest.raises(ValueError, match="mixes strings and numbers"):
        TreeBoostClassifier(device="numpy").fit(X, pd.Series(["a" if v else 1 for v in y]))
    with pytest.raises(ValueError, match="mixes strings and numbers"):
        TreeBoostClassifier(device="numpy", n_estimators=2).fit(X, y, eval_set=[(X, ["a"] + list(y[1:]))])


def test_one_leaf_trees_are_refused():
    """max_leaves=1 trained trees without a split (a constant model); 0 means no limit, 2 is the least."""
    X, y = _blobs(40)
    with pytest.raises(ValueError, match=r"max_leaves must be 0 \(no limit\) or at least 2, got 1"):
        TreeBoostClassifier(max_leaves=1, device="numpy").fit(X, y)
    for leaves in (0, 2):
        est = TreeBoostClassifier(max_leaves=leaves, n_estimators=2, device="numpy").fit(X, y)
        assert est._ensemble.trees[0].n_nodes > 1


def test_regression_target_that_overflows_is_refused():
    """y ~ 1e160: the squared gradient sums overflowed, every gain was inf and the model came out constant."""
    rng = np.random.default_rng(0)
    X = rng.random((100, 3))
    with pytest.raises(ValueError, match=r"too large for squared-error training.*below about 1e\+149"):
        TreeBoostRegressor(device="numpy").fit(X, X[:, 0] * 1e160)
    with pytest.raises(ValueError, match=r"eval_set\[0\] y is too large"):
        TreeBoostRegressor(device="numpy").fit(X, X[:, 0], eval_set=[(X, X[:, 0] * 1e160)])
    with pytest.raises(ValueError, match="too large"):  # large weights count too
        TreeBoostRegressor(device="numpy").fit(X, X[:, 0] * 1e145, sample_weight=np.full(100, 1e12))
    y = X[:, 0] * 1e140  # inside the range: trains, and not to a constant
    est = TreeBoostRegressor(n_estimators=5, device="numpy").fit(X, y)
    assert np.ptp(est.predict(X)) > 0 and est.score(X, y) > 0.3


def test_bad_weights_and_feature_count():
    X, y = _blobs(50)
    with pytest.raises(ValueError, match="non-negative"):
        TreeBoostClassifier(device="numpy").fit(X, y, sample_weight=-np.ones(50))
    est = TreeBoostClassifier(device="numpy", n_estimators=3).fit(X, y)
    with pytest.raises(ValueError, match="X has 4 features, but TreeBoostClassifier is expecting 5"):
        est.predict(X[:, :4])
    with pytest.raises(ValueError, match="Unknown label type"):
        TreeBoostClassifier(device="numpy").fit(X, X[:, 0])
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(num_leaves=31)


def test_get_set_params_and_repr():
    est = TreeBoostRegressor(max_depth=3, device="numpy")
    assert est.get_params()["max_depth"] == 3 and "max_depth=3" in repr(est)
    assert est.set_params(max_depth=5) is est and est.max_depth == 5
    from sklearn.base import clone, is_classifier, is_regressor

    assert is_regressor(est) and is_classifier(TreeBoostClassifier())
    assert clone(est).get_params() == est.get_params()
