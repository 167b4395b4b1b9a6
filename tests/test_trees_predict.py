"""Prediction of new rows on the device (tree_predict_forest): the same bits as the numpy walk, numeric,
missing and categorical splits, multi-output leaves, on every device; clean under Oclgrind."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, TreeBoostRegressor
from mdhom.testing import run_under_oclgrind
from mdhom.trees import estimators


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 2] = rng.integers(0, 11, n)
    X[rng.random(n) < 0.05, 2] = np.nan
    y = (np.nan_to_num(X[:, 0]) + (X[:, 2] % 3 == 0) + 0.3 * rng.standard_normal(n) > 0.5).astype(int)
    return X, y + (np.nan_to_num(X[:, 1]) > 1)


@pytest.mark.parametrize("kind", ["multiclass", "regression"])
def test_device_predictions_equal_the_numpy_walk(device, monkeypatch, kind):
    X, y = _data(1500)
    Xt, _ = _data(700, seed=1)
    Xt[:20, 2] = 99.0  # an unseen category: missing
    cls = TreeBoostClassifier if kind == "multiclass" else TreeBoostRegressor
    est = cls(n_estimators=8, max_depth=5, categorical_feature=[2], device=device).fit(X, y)
    monkeypatch.setattr(estimators, "DEVICE_PREDICT_MIN", 1 << 62)
    want = est._raw(Xt)
    assert est._device_predictor(len(Xt)) is None
    monkeypatch.setattr(estimators, "DEVICE_PREDICT_MIN", 0)
    assert est._device_predictor(len(Xt)) is not None
    got = est._raw(Xt)
    assert np.array_equal(got, want)


def test_every_walk_of_the_device_predictor_gives_the_numpy_walks_bits(device):
    """The forest predictor's vector form (several rows' walks of a tree at once, stepped until none moves or for the
    tree's depth, FIXED_DEPTH) at every width, strided and chunked shares, against the numpy walk: numeric, missing
    and categorical splits, trees of several depths, a lone leaf, a partial last block."""
    from mdhom.components.predictor import ForestPredictor, tree_depths

    X, y = _data(1500)
    Xt, _ = _data(301, seed=2)
    est = TreeBoostClassifier(n_estimators=5, max_depth=6, max_leaves=21, grow_policy="lossguide",
                              categorical_feature=[2], device="numpy").fit(X, y)
    ens = est._ensemble
    depths = tree_depths(ens.trees)
    assert len(set(depths.tolist())) > 1 or depths.max() > 1, depths
    want = ens.tree_sums(Xt)
    rows = ens.category_positions(Xt)
    for vec in (1, 2, 4, 8):
        for fixed in (0, 1):
            for chunked in (0, 1):
                cfg = {"NUM_WG_row": 3, "NUM_WI_row": 4, "NUM_WG_output": 1, "NUM_WI_output": 1, "NUM_WG_tree": 1,
                       "NUM_WI_tree": 1, "NUM_WI_COMBINE": 1, "CHUNKED": chunked, "VEC": vec, "FIXED_DEPTH": fixed}
                got = ForestPredictor(device, ens.trees, ens.categories, ens.n_outputs, config=cfg).tree_sums(rows)
                assert got.tobytes() == want.tobytes(), cfg
    lone = TreeBoostClassifier(n_estimators=1, min_child_weight=1e9, device="numpy").fit(X, y)._ensemble
    assert tree_depths(lone.trees).tolist() == [0]
    got = ForestPredictor(device, lone.trees, lone.categories, lone.n_outputs, config={**cfg, "FIXED_DEPTH": 1})
    assert got.tree_sums(Xt).tobytes() == lone.tree_sums(Xt).tobytes()


@pytest.mark.parametrize("categorical", [False, True], ids=["numeric", "categorical"])
def test_float32_rows_are_walked_as_they_are_with_the_float64_copys_leaves(device, monkeypatch, categorical):
    """float32 rows go to the device as they are (the float variant of the walk, half the bytes, no float64 copy on
    the host), and give the bits the float64 copy of the same values gives, on the device and in numpy; with
    categorical features, which take positions among the known codes, as float64."""
    from mdhom.components.predictor import ForestPredictor

    X, y = _data(1500)
    Xt = _data(700, seed=1)[0].astype(np.float32)
    Xt[:3, 0] = [np.float32(1e-45), np.float32(-3.4e38), np.nextafter(np.float32(0.1), np.float32(1))]
    est = TreeBoostRegressor(n_estimators=6, max_depth=5, categorical_feature=[2] if categorical else None,
                             device=device).fit(X, y)
    monkeypatch.setattr(estimators, "DEVICE_PREDICT_MIN", 0)
    want = est._raw(Xt.astype(np.float64))
    assert est._raw(Xt).tobytes() == want.tobytes()
    if not categorical:
        ens = est._ensemble
        pred = ForestPredictor(device, ens.trees, ens.categories, ens.n_outputs)
        assert pred.tree_sums(Xt).tobytes() == pred.tree_sums(Xt.astype(np.float64)).tobytes()
        assert "tree_predict_forest (float32)" in pred.ws.computations
    monkeypatch.setattr(estimators, "DEVICE_PREDICT_MIN", 1 << 62)
    assert est._raw(Xt).tobytes() == want.tobytes()


def test_numpy_device_never_predicts_on_a_device(monkeypatch):
    X, y = _data(300)
    est = TreeBoostRegressor(n_estimators=3, device="numpy").fit(X, y)
    monkeypatch.setattr(estimators, "DEVICE_PREDICT_MIN", 0)
    assert est._device_predictor(len(X)) is None


CODE = textwrap.dedent("""
    import numpy as np
    from mdhom.components.predictor import ForestPredictor
    from mdhom.trees.grower import GrowParams, grow_tree
    from mdhom.trees.numpy_backend import NumpyKernels
    from mdhom.trees.model import Ensemble
    from mdhom import TreeBoostClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((97, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 1] = rng.integers(0, 7, 97)
    y = rng.integers(0, 3, 97)
    est = TreeBoostClassifier(n_estimators=3, max_depth=3, categorical_feature=[1], device="numpy").fit(X, y)
    ens = est._ensemble
    assert any(t.categories is not None for t in ens.trees)
    pred = ForestPredictor("oclgrind", ens.trees, ens.categories, ens.n_outputs)
    got = pred.tree_sums(ens.category_positions(X))
    assert np.array_equal(got, ens.tree_sums(X))
    for fixed in (0, 1):  # the vector form's walks, a partial last block
        cfg = {"NUM_WG_row": 2, "NUM_WI_row": 4, "NUM_WG_output": 1, "NUM_WI_output": 1, "NUM_WG_tree": 1,
               "NUM_WI_tree": 1, "NUM_WI_COMBINE": 1, "CHUNKED": 1, "VEC": 4, "FIXED_DEPTH": fixed}
        pred = ForestPredictor("oclgrind", ens.trees, ens.categories, ens.n_outputs, config=cfg)
        assert np.array_equal(pred.tree_sums(ens.category_positions(X)), ens.tree_sums(X))
        X32 = ens.category_positions(X).astype(np.float32)  # the float variant (positions and values exact here)
        assert np.array_equal(pred.tree_sums(X32), pred.tree_sums(X32.astype(np.float64)))
    print("FOREST-OK")
""")


def test_forest_predictor_clean_under_oclgrind(oclgrind_device):
    run = run_under_oclgrind(CODE, timeout=600)
    assert run.clean, run.explain()
    assert "FOREST-OK" in run.stdout, run.explain()
