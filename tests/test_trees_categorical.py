"""Categorical features: binning of category codes, one-vs-rest and sorted-partition splits, the kernels against
the numpy reference on every device, byte-identical model files, pandas 'category' columns and the model file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, TreeBoostRegressor, load_model
from mdhom.learn.binning import BinMapper
from mdhom.trees.backend import SplitParams
from mdhom.trees.numpy_backend import fast_best_splits
from mdhom.trees.reference import ONE_VS_REST, SORTED, best_splits, category_modes

EFFECT = np.array([2.0, -1.0, 0.5, 3.0, -2.0, 0.0, 1.0, -3.0, 2.5])


def _data(n: int = 900, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Columns: numeric, 9 categories (NaN 5%), numeric, 3 categories; y depends on the categories' effects."""
    rng = np.random.default_rng(seed)
    c1 = rng.integers(0, 9, n).astype(float)
    c2 = rng.integers(0, 3, n).astype(float)
    x = rng.standard_normal((n, 2))
    c1[rng.random(n) < 0.05] = np.nan
    logit = EFFECT[np.nan_to_num(c1, nan=0).astype(int)] + x[:, 0] + (c2 == 1)
    y = (logit + rng.standard_normal(n) > 0).astype(int)
    return np.column_stack([x[:, 0], c1, x[:, 1], c2]), y


# ------------------------------------------------------------------------------------------------ binning
def test_categories_bin_by_code_and_unknown_codes_are_missing():
    X = np.array([[5.0], [7.0], [5.0], [np.nan], [-1.0], [9.0], [7.0]])
    m = BinMapper(8, categorical=np.array([True])).fit(X)
    assert m.categories[0].tolist() == [5, 7, 9]
    bins = m.transform(np.array([[5.0], [7.0], [9.0], [np.nan], [-3.0], [6.0], [1e6]]))[:, 0]
    assert bins.tolist() == [0, 1, 2] + [m.n_bins - 1] * 4  # NaN, negative and unknown codes: the missing bin


def test_most_frequent_categories_are_kept():
    codes = np.repeat(np.arange(10), np.arange(1, 11))[:, None].astype(float)  # code k appears k + 1 times
    m = BinMapper(4, categorical=np.array([True])).fit(codes)
    assert m.categories[0].tolist() == [7, 8, 9]  # max_bin - 1 categories: every one a split candidate
    assert (m.transform(np.array([[0.0]])) == m.n_bins - 1).all()


def test_fractional_codes_are_refused_naming_the_feature():
    with pytest.raises(ValueError, match="categorical feature 1 holds 2.5"):
        BinMapper(8, categorical=np.array([False, True])).fit(np.array([[0.0, 1.0], [1.0, 2.5]]))


# ------------------------------------------------------------------------------------------------ split search
def _hist(rng: np.random.Generator, n_nodes: int, n_feat: int, n_bins: int, k: int, quantized: bool) -> np.ndarray:
    g = rng.integers(-40, 41, (n_nodes, n_feat, n_bins, k))
    h = rng.integers(0, 30, (n_nodes, n_feat, n_bins, k)) * (rng.random((n_nodes, n_feat, n_bins, k)) < 0.8)
    hist = np.stack([g, h], axis=-1)
    return hist.astype(np.int64) if quantized else hist * 0.37


@pytest.mark.parametrize("quantized", [False, True], ids=["double", "quantized"])
def test_sorted_partition_finds_the_best_subset(quantized):
    """For one output without regularisation, the best prefix of the categories sorted by G / H is the best of
    all subsets (Fisher's result, what LightGBM and XGBoost rely on): checked by brute force, the missing bin
    empty."""
    from itertools import combinations

    rng = np.random.default_rng(3)
    params = SplitParams(0.0, 0.0, 0.0, 0.0, cat_smooth=0.0)
    inv = np.array([[0.5, 0.25]]) if quantized else None
    for _ in range(20):
        hist = _hist(rng, 1, 1, 8, 1, quantized)
        hist[..., 1] = np.abs(hist[..., 1]) + (1 if quantized else 0.5)  # every category holds rows
        hist[:, :, -2:] = 0  # the last real bin and the missing bin stay empty, as the binning leaves them
        with np.errstate(invalid="ignore"):  # lambda 0: empty sides are 0/0, never a split
            s = best_splits(hist, np.ones(1, bool), params, inv, cat_mode=np.array([SORTED], np.uint8))
        real = hist[0, 0, :, 0].astype(np.float64) * (inv[0] if quantized else 1.0)
        G, H = real.sum(axis=0)

        def score(g, h):
            return g * g / h

        brute = max(0.5 * (score(*real[list(c)].sum(axis=0)) + score(G - real[list(c), 0].sum(),
                                                                     H - real[list(c), 1].sum()) - score(G, H))
                    for r in range(1, 6) for c in combinations(range(6), r))
        assert s.gain[0] == pytest.approx(brute, rel=1e-12, abs=1e-12)
        left = s.left_sum[0, 0]
        chosen = real[s.cat_left[0]].sum(axis=0)
        assert np.allclose(left, chosen)


@pytest.mark.parametrize("quantized", [False, True], ids=["double", "quantized"])
@pytest.mark.parametrize("k", [1, 2])
def test_lean_split_search_matches_the_reference_with_categories(quantized, k):
    rng = np.random.default_rng(7)
    hist = _hist(rng, 5, 4, 10, k, quantized)
    mode = np.array([0, SORTED, ONE_VS_REST, 0], np.uint8)
    inv = np.full((k, 2), 0.125) if quantized else None
    mask = np.array([True, True, True, False])
    for params in (SplitParams(1.0, 0.0, 0.0, 1.0), SplitParams(0.5, 0.3, 0.1, 0.0, cat_smooth=2.0)):
        a = best_splits(hist, mask, params, inv, mode)
        b = fast_best_splits(hist, mask, params, inv, mode)
        for field in ("gain", "feature", "bin", "default_left", "left_sum", "right_sum", "cat_left"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), field
        assert np.isin(a.feature, [1, 2]).any()


def test_category_modes():
    cats = [None, np.arange(4), np.arange(5)]
    assert category_modes(cats, 1, 4).tolist() == [0, ONE_VS_REST, SORTED]
    assert category_modes(cats, 2, 4).tolist() == [0, ONE_VS_REST, ONE_VS_REST]  # multi-output: one vs rest
    assert category_modes([None, None], 1, 4) is None


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_device_split_search_matches_the_reference(device, precision):
    """tree_split_scan_cat and tree_split_cat_left against the numpy reference: the best split of every node,
    its sums and its left categories, bit for bit."""
    from mdhom.trees.opencl_backend import OpenCLTreeKernels
    from mdhom.trees.reference import NumpyTreeKernels

    rng = np.random.default_rng(5)
    n_rows, n_bins, k = 500, 11, 2
    bins = rng.integers(0, n_bins, (n_rows, 4)).astype(np.uint8)
    bins[:, 1] = np.minimum(bins[:, 1], n_bins - 3)  # categorical: never the last real bin
    bins[rng.random(n_rows) < 0.1, 1] = n_bins - 1
    bins[:, 2] = rng.integers(0, 3, n_rows)
    mode = np.array([0, SORTED, ONE_VS_REST, 0], np.uint8)
    g, h = rng.standard_normal((n_rows, k)), rng.random((n_rows, k)) + 0.05
    g[:, 0] += EFFECT[np.minimum(bins[:, 1], EFFECT.size - 1)]  # categories of both signs: a partition wins
    for kk in (1, k):
        m = mode if kk == 1 else np.where(mode > 0, ONE_VS_REST, 0).astype(np.uint8)
        dev, ref = OpenCLTreeKernels(device, precision=precision), NumpyTreeKernels(precision)
        for b in (dev, ref):
            b.load(bins, n_bins, kk, m)
            b.set_gradients(g[:, :kk], h[:, :kk])
            b.reset_rows()
        params = SplitParams(1.0, 0.0, 0.0, 0.5, cat_smooth=3.0)
        for feats in ([False, True, False, False], [False, False, True, False], [True] * 4):
            mask = np.array(feats)
            s = [b.best_splits(b.histograms(np.array([0])), mask, params) for b in (dev, ref)]
            for field in ("gain", "feature", "bin", "default_left", "left_sum", "right_sum", "cat_left"):
                assert np.array_equal(getattr(s[0], field), getattr(s[1], field)), (field, feats, kk)
            assert s[1].cat_left is not None
            if feats[1] and not feats[0] and kk == 1:
                assert s[1].feature[0] == 1 and s[1].cat_left[0].sum() > 1  # a partition, not one category
            for b in (dev, ref):
                b.apply_splits(np.array([0]), s[1].feature, s[1].bin, s[1].default_left, np.array([1]),
                               np.array([2]), cat_left=s[1].cat_left)
            assert np.array_equal(dev.row_nodes(), ref.row_nodes())
            for b in (dev, ref):
                b.reset_rows()


# ------------------------------------------------------------------------------------------------ learners
def test_one_split_separates_a_scattered_set_of_categories():
    """A stump on one categorical feature sends exactly the categories of one sign left: a numeric split on
    the codes cannot."""
    rng = np.random.default_rng(0)
    c = rng.integers(0, 9, 2000)
    y = np.where(np.isin(c, [1, 4, 7, 8]), 1.0, -1.0)
    X = c[:, None].astype(float)
    kw = dict(n_estimators=1, max_depth=1, learning_rate=1.0, reg_lambda=0.0, device="numpy")
    est = TreeBoostRegressor(categorical_feature=[0], **kw).fit(X, y)
    tree = est._ensemble.trees[0]
    assert sorted(tree.categories[0].tolist()) in ([1, 4, 7, 8], [0, 2, 3, 5, 6])
    assert est.score(X, y) == pytest.approx(1.0)
    assert TreeBoostRegressor(**kw).fit(X, y).score(X, y) < 0.9


def test_few_categories_split_one_against_the_rest():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 4, 1000)
    y = np.where(np.isin(c, [0, 2]), 1.0, -1.0)
    est = TreeBoostRegressor(n_estimators=1, max_depth=1, categorical_feature=[0], device="numpy").fit(
        c[:, None].astype(float), y)
    assert len(est._ensemble.trees[0].categories[0]) == 1
    est = TreeBoostRegressor(n_estimators=1, max_depth=1, categorical_feature=[0], max_cat_to_onehot=2,
                             device="numpy").fit(c[:, None].astype(float), y)
    assert sorted(est._ensemble.trees[0].categories[0].tolist()) in ([0, 2], [1, 3])


@pytest.mark.parametrize("precision", ["double", "quantized"])
@pytest.mark.parametrize("kw", [dict(grow_policy="depthwise", max_depth=4),
                                dict(grow_policy="lossguide", max_depth=0, max_leaves=12, subsample=0.8,
                                     colsample_bytree=0.75, random_state=3)], ids=["depthwise", "lossguide"])
def test_model_files_are_identical_on_every_device(tmp_path, device, precision, kw):
    """The numpy reference and the device write the same model file, byte for byte (the device's name aside),
    binary (sorted partitions and one-vs-rest) and multi-label (one-vs-rest)."""
    X, y = _data()
    Y = np.column_stack([y, X[:, 0] > 0]).astype(int)
    for target in (y, Y):
        texts = []
        for d in ("numpy", device):
            est = TreeBoostClassifier(n_estimators=4, device=d, precision=precision, categorical_feature=[1, 3],
                                      **kw).fit(X, target, eval_set=[(X[:200], target[:200])])
            est.save_model(tmp_path / "m.json")
            doc = json.loads((tmp_path / "m.json").read_text())
            doc["params"].pop("device")
            texts.append(json.dumps(doc, sort_keys=True))
            assert any(c is not None for t in doc["trees"] for c in t.get("categories", []))
        assert texts[0] == texts[1]


def test_group_partition_with_categorical_splits(tmp_path, device, monkeypatch):
    """The GPUs' group partition (a work-group a block) on any device: categorical splits' left tables before its
    block table in the split table's buffer, several blocks a node (blocks of 64 rows); the numpy reference's model."""
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    made, init = [], OpenCLTreeKernels.__init__

    def group_init(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "blocks": 64, "block_group": 8})
        made.append(self)

    X, y = _data()
    texts = []
    for d in ("numpy", device):
        if d == device:
            monkeypatch.setattr(OpenCLTreeKernels, "__init__", group_init)
        est = TreeBoostClassifier(n_estimators=3, device=d, precision="quantized", categorical_feature=[1, 3],
                                  grow_policy="lossguide", max_leaves=12).fit(X, y)
        est.save_model(tmp_path / "m.json")
        doc = json.loads((tmp_path / "m.json").read_text())
        doc["params"].pop("device")
        texts.append(json.dumps(doc, sort_keys=True))
    assert made and all(b.rows.group == 8 and b.rows.blocks == 64 for b in made)
    assert texts[0] == texts[1]


def test_prediction_on_raw_codes_follows_the_training_bins():
    """Raw prediction equals the binned walk of training, missing and unseen codes taking the default way."""
    X, y = _data(n=600)
    est = TreeBoostClassifier(n_estimators=5, max_depth=4, categorical_feature=[1, 3], device="numpy").fit(
        X, y, eval_set=[(X, y)])
    eval_raw = est.evals_result_["validation_0"]
    assert eval_raw  # the binned eval walk ran
    Xu = X.copy()
    Xu[:50, 1] = 42.0  # a code never seen in training behaves as missing
    Xn = X.copy()
    Xn[:50, 1] = np.nan
    assert np.array_equal(est.decision_function(Xu), est.decision_function(Xn))
    assert np.array_equal(est.predict_proba(X), load_model_roundtrip(est).predict_proba(X))


def load_model_roundtrip(est, tmp=None):
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        est.save_model(path)
        return load_model(path)
    finally:
        os.unlink(path)


def test_pandas_category_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = _data(n=600)
    names = np.array(list("abcdefghi"))
    codes = np.nan_to_num(X[:, 1], nan=0).astype(int)
    frame = pd.DataFrame({"x0": X[:, 0], "c": pd.Categorical(np.where(np.isnan(X[:, 1]), None, names[codes])),
                          "x2": X[:, 2]})
    est = TreeBoostClassifier(n_estimators=5, max_depth=3, device="numpy").fit(frame, y)
    assert est._ensemble.categories[1] is not None
    p = est.predict_proba(frame)
    shuffled = frame.copy()
    shuffled["c"] = shuffled["c"].cat.reorder_categories(list(names[::-1]))  # other codes, same labels
    assert np.array_equal(est.predict_proba(shuffled), p)
    as_text = frame.copy()
    as_text["c"] = as_text["c"].astype(object)  # labels without the dtype still map by label
    assert np.array_equal(est.predict_proba(as_text), p)
    est.save_model(tmp_path / "m.json")
    assert np.array_equal(load_model(tmp_path / "m.json").predict_proba(shuffled), p)
    numeric = TreeBoostClassifier(n_estimators=2, device="numpy").fit(frame.assign(c=codes), y)
    with pytest.raises(ValueError, match="'c' is a 'category' column, but it was not categorical in fit"):
        numeric.predict(frame)


def test_text_columns_that_are_not_categories_are_named():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "colour": ["r", "g", "b", "r"]})
    with pytest.raises(ValueError, match="column 'colour' is not numeric"):
        TreeBoostClassifier(device="numpy").fit(frame, [0, 1, 0, 1])


def test_categorical_feature_option():
    X, y = _data(n=300)
    with pytest.raises(ValueError, match="X has 4 features"):
        TreeBoostClassifier(categorical_feature=[7], device="numpy").fit(X, y)
    with pytest.raises(ValueError, match="not a column name"):
        TreeBoostClassifier(categorical_feature=["nope"], device="numpy").fit(X, y)
    with pytest.raises(ValueError, match="categorical_feature"):
        TreeBoostClassifier(categorical_feature=[1.5], device="numpy").fit(X, y)
    a = TreeBoostClassifier(n_estimators=3, categorical_feature="1,3", device="numpy").fit(X, y)
    b = TreeBoostClassifier(n_estimators=3, categorical_feature=[1, 3], device="numpy").fit(X, y)
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


def test_a_model_file_naming_unknown_categories_is_refused(tmp_path):
    X, y = _data(n=300)
    est = TreeBoostClassifier(n_estimators=3, max_depth=3, categorical_feature=[1], device="numpy").fit(X, y)
    est.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    for tree in doc["trees"]:
        for i, c in enumerate(tree.get("categories") or []):
            if c is not None:
                tree["categories"][i] = c + [1000]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="damaged mdhom model file.*categories"):
        load_model(tmp_path / "bad.json")


def test_sparse_categorical_input_means_the_same_as_dense_with_nan(tmp_path, device):
    """A CSR matrix (absent entries missing, stored zeros the code 0) trains the model the dense matrix with NaN
    for the absent entries trains, categorical splits included, on the numpy reference and the device."""
    sparse = pytest.importorskip("scipy.sparse")
    X, y = _data(n=500)
    r, c = np.nonzero(~np.isnan(X))
    Xs = sparse.csr_matrix((X[r, c], (r, c)), shape=X.shape)  # explicit zeros stay stored
    assert Xs.nnz == np.count_nonzero(~np.isnan(X))
    texts = []
    for d, data in (("numpy", X), ("numpy", Xs), (device, Xs)):
        est = TreeBoostClassifier(n_estimators=3, max_depth=4, categorical_feature=[1, 3], device=d,
                                  precision="double").fit(data, y)
        est.save_model(tmp_path / "m.json")
        doc = json.loads((tmp_path / "m.json").read_text())
        doc["params"].pop("device")
        texts.append(json.dumps(doc, sort_keys=True))
        assert np.array_equal(est.predict_proba(Xs), est.predict_proba(X))
    assert texts[0] == texts[1] == texts[2]
