"""Sparse input stays sparse: an absent entry is missing (XGBoost's meaning), training and prediction equal the
dense matrix with NaN there on every device, memory follows the stored entries, and sizes that cannot fit are
refused before anything is allocated."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, TreeBoostRegressor
from mdhom.learn.binning import BinMapper

sparse = pytest.importorskip("scipy.sparse")


def _pair(n=400, f=9, seed=0):
    """(sparse X, the same X dense with NaN where nothing is stored, y): explicit zeros and NaN stored too."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f))
    X[:, 1] = np.round(X[:, 1] * 2)  # few distinct values, 0 among them
    X[rng.random((n, f)) < 0.55] = 0.0
    X[:, 4] = 0.0  # a feature with nothing stored
    D = np.where(X == 0.0, np.nan, X)
    for r, c in ((3, 2), (7, 2), (11, 0)):  # an explicitly stored 0 is the value 0
        D[r, c] = 0.0
    D[20, 3] = np.nan  # a stored NaN is missing too
    stored = ~np.isnan(D)
    stored[20, 3] = True
    r, c = np.nonzero(stored)
    S = sparse.csr_matrix((D[r, c], (r, c)), shape=D.shape)
    assert S.nnz == stored.sum()
    y = (np.nan_to_num(D[:, 0]) - np.nan_to_num(D[:, 2]) + 0.5 * np.isnan(D[:, 3]) + 0.3 * rng.normal(size=n) > 0)
    return S.tocsr(), D, y.astype(int)


def _doc(est, path):
    est.save_model(path)
    doc = json.loads(path.read_text())
    doc["params"].pop("device")
    return doc


def test_sparse_bins_equal_dense_bins_with_nan():
    S, D, _ = _pair()
    assert np.isnan(D[:, 4]).all()
    m = BinMapper(31).fit(S)
    d = BinMapper(31).fit(D)
    for a, b in zip(m.edges, d.edges, strict=True):
        np.testing.assert_array_equal(a, b)
    assert m.n_bins == d.n_bins
    bins = m.transform(D)
    np.testing.assert_array_equal(m.transform(S), bins)
    np.testing.assert_array_equal(m.transform(S.tocsc(), feature_major=True), bins.T)
    assert (bins[:, 4] == m.n_bins - 1).all() and bins[3, 2] != m.n_bins - 1 and bins[20, 3] == m.n_bins - 1
    rows = np.array([0, 5, 9, 100, 399])
    w = np.linspace(0.5, 2.0, S.shape[0])
    for a, b in zip(BinMapper(7).fit(S, w, rows).edges, BinMapper(7).fit(D, w, rows).edges, strict=True):
        np.testing.assert_array_equal(a, b)


def test_n_bins_is_what_the_data_needs():
    """The most real bins of a feature, one more where it has NaN (its last real bin stays a candidate), plus
    the NaN bin; never more than max_bin + 1."""
    X = np.column_stack([np.arange(10.0) % 3, np.arange(10.0) % 5])
    assert BinMapper(255).fit(X).n_bins == 6
    X[0, 1] = np.nan
    assert BinMapper(255).fit(X).n_bins == 7  # 5 real bins and NaN: the last real bin stays a candidate
    X[0, 0] = np.nan
    assert BinMapper(255).fit(X).n_bins == 7
    assert BinMapper(3).fit(np.arange(100.0)[:, None]).n_bins == 4
    assert BinMapper(3).fit(np.r_[np.arange(100.0), np.nan][:, None]).n_bins == 4  # 2 real bins, then NaN's
    assert BinMapper(255).fit(np.ones((5, 2))).n_bins == 2


@pytest.mark.parametrize("cls, fmt", [(TreeBoostClassifier, "csr"), (TreeBoostRegressor, "csc")])
def test_sparse_fit_equals_dense_with_nan_on_numpy(tmp_path, cls, fmt):
    S, D, y = _pair(seed=1)
    S = S.asformat(fmt)
    target = y if cls is TreeBoostClassifier else np.nan_to_num(D[:, 0]) + y
    kw = dict(n_estimators=6, max_depth=4, device="numpy")
    a = cls(**kw).fit(S, target, eval_set=[(S[:80], target[:80])])
    b = cls(**kw).fit(D, target, eval_set=[(D[:80], target[:80])])
    assert _doc(a, tmp_path / "a.json") == _doc(b, tmp_path / "b.json")
    assert a.evals_result_ == b.evals_result_
    np.testing.assert_array_equal(a.predict(S), b.predict(D))
    assert any(t.default_left[t.feature >= 0].any() for t in a._ensemble.trees)  # missing went somewhere learned


@pytest.mark.parametrize("kw, f", [(dict(grow_policy="depthwise", max_depth=4), 9),
                                   (dict(grow_policy="lossguide", max_depth=0, max_leaves=12, colsample_bytree=0.8,
                                         random_state=4), 9),
                                   (dict(grow_policy="depthwise", max_depth=3), 70)],
                         ids=["depthwise", "lossguide", "wide"])
def test_sparse_fit_on_device_is_the_reference_model(tmp_path, device, kw, f):
    """A device trains the same model file from sparse input as the numpy reference does from the dense
    matrix with NaN, in exact precision; sparse eval sets and predictions agree too. Wide rows (70 features)
    are read through the row index on CPUs."""
    S, D, y = _pair(n=301, f=f, seed=2)
    kw = dict(n_estimators=5, precision="double", **kw)
    a = TreeBoostClassifier(device=device, **kw).fit(S, y, eval_set=[(S[::3], y[::3])])
    b = TreeBoostClassifier(device="numpy", **kw).fit(D, y, eval_set=[(D[::3], y[::3])])
    assert _doc(a, tmp_path / "a.json") == _doc(b, tmp_path / "b.json")
    assert a.evals_result_ == b.evals_result_
    np.testing.assert_array_equal(a.predict_proba(S), b.predict_proba(D))


def test_sparse_bins_in_either_device_layout(device):
    """Host bins of sparse rows come back in the layout the backend reads (feature-major on GPUs), no copy."""
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    S, D, _ = _pair(n=97, seed=3)
    m = BinMapper(15).fit(S)
    for feature_major in (False, True):
        bins = OpenCLTreeKernels(device, feature_major=feature_major).bin_rows(m)(S)
        np.testing.assert_array_equal(np.asarray(bins), m.transform(D))
        assert bins.T.flags.c_contiguous if feature_major else bins.flags.c_contiguous


def test_sparse_prediction_goes_in_bounded_dense_blocks():
    from mdhom.learn.validation import sparse_chunks

    S, D, _ = _pair(n=50, seed=4)
    blocks = list(sparse_chunks(S, n_cells=4 * S.shape[1]))
    assert [hi - lo for lo, hi, _ in blocks] == [4] * 12 + [2]
    np.testing.assert_array_equal(np.vstack([b for _, _, b in blocks]), D)


def test_sparse_fit_never_makes_a_float64_dense_copy():
    """5000 x 2000 with 10k entries: a float64 dense copy is 80 MB, the bins 10 MB; training and prediction stay
    far below the copy (numpy allocations, traced)."""
    rng = np.random.default_rng(5)
    n, f, nnz = 5000, 2000, 10_000
    S = sparse.csr_matrix((rng.standard_normal(nnz), (rng.integers(0, n, nnz), rng.integers(0, f, nnz))), (n, f))
    y = (np.asarray(S.sum(axis=1)).ravel() > 0).astype(int)
    est = TreeBoostClassifier(n_estimators=2, max_depth=3, device="numpy")
    tracemalloc.start()
    try:
        est.fit(S, y)
        est.predict_proba(S)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.parametrize("dev", ["numpy", "device"])
def test_oversized_input_is_refused_before_allocating(dev, request, monkeypatch):
    from mdhom.learn import memory

    # the same refusals on every machine: as if 4 GiB of host memory were available (the GPU machine's 128 GiB
    # would hold the 80 GiB copy below)
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 4 * memory.GiB)
    device = "numpy" if dev == "numpy" else request.getfixturevalue("cpu")
    est = TreeBoostClassifier(n_estimators=1, device=device)
    wide = sparse.csr_matrix((np.ones(2), ([0, 3], [5, 2**31 - 1])), shape=(4, 2**31))  # 2 entries, 8 GiB of bins
    with pytest.raises(MemoryError, match="histograms|bin matrix"):
        est.fit(wide, np.array([0, 1, 0, 1]))
    # 2 entries, 4 TiB of dense bins: 2^32 features are past the compressed rows' int32 indices, so the bins
    # would be dense (a 2^20 x 2^20 matrix with 2 entries now keeps 8 MB of compressed rows)
    huge = sparse.csr_matrix((np.ones(2), ([0, 1], [0, 1])), shape=(2**10, 2**32))
    with pytest.raises(MemoryError, match=r"bin matrix.*would fit"):
        est.fit(huge, np.arange(2**10) % 2)
    view = np.broadcast_to(np.arange(5.0), (2**31, 5))  # zero strides: its copy would be 80 GiB
    with pytest.raises(MemoryError, match=r"float64 copy of X \(2147483648, 5\).*rows of this width would fit"):
        est.fit(view, np.zeros(2))  # X is checked first


def _wide(n=600, f=300, nnz=1500, seed=7):
    """A sparse matrix whose bins pay to stay compressed (0.8 % stored), its dense twin with NaN, and y."""
    from mdhom.bench.memory import make_sparse

    S, y = make_sparse(n, f, nnz, seed)
    D = np.full(S.shape, np.nan)
    c = S.tocoo()
    D[c.row, c.col] = c.data
    return S, D, y


def test_compressed_row_bins_read_as_the_dense_bins():
    from mdhom.learn.sparse_bins import SparseBins, sparse_pays

    S, D, _ = _pair()
    m = BinMapper(31).fit(S)
    dense = m.transform(D)
    sb = m.transform_sparse(S)
    np.testing.assert_array_equal(sb.toarray(), dense)
    assert sb.nnz == int((dense != m.n_bins - 1).sum())  # a stored NaN is not kept: it reads as missing anyway
    np.testing.assert_array_equal(SparseBins.from_dense(dense, m.n_bins).toarray(), dense)
    rows = np.array([5, 0, 3, 399, 20, 20])
    np.testing.assert_array_equal(sb[rows, 2:7], dense[rows, 2:7])
    np.testing.assert_array_equal(sb[rows, 3], dense[rows, 3])
    feats = np.array([0, 8, 3, 4, 2, 3])
    np.testing.assert_array_equal(sb[rows, feats], dense[rows, feats])
    np.testing.assert_array_equal(sb[:, :], dense)
    packed = sb.packed()
    assert packed.nbytes == 4 * (S.shape[0] + 1) + 5 * sb.nnz
    assert not sparse_pays(400, 9, S.nnz, 1) and sparse_pays(600, 300, 1500, 1)


def test_wide_sparse_bins_stay_compressed_on_numpy():
    from mdhom.learn.sparse_bins import SparseBins
    from mdhom.trees.reference import NumpyTreeKernels

    S, D, y = _wide()
    m = BinMapper(255).fit(S)
    bins = NumpyTreeKernels().bin_rows(m)(S)
    assert isinstance(bins, SparseBins) and bins.nbytes < 0.1 * S.shape[0] * S.shape[1]
    np.testing.assert_array_equal(bins.toarray(), m.transform(D))


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_wide_sparse_fit_reads_compressed_rows_on_device(tmp_path, device, precision):
    """Bins of wide sparse input stay compressed rows on the device (a few bytes per stored entry instead of a
    byte per cell): the same model file as the numpy reference trains from the dense matrix with NaN, and the same
    eval scores, sparse or dense eval sets alike."""
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    S, D, y = _wide()
    m = BinMapper(255).fit(S)
    kern = OpenCLTreeKernels(device, precision=precision)
    kern.load(kern.bin_rows(m)(S), m.n_bins, 1)
    assert kern.ws.sparse and kern.ws.row_index
    assert kern.ws.bins_orig.size < 0.1 * S.shape[0] * S.shape[1]  # dense: a byte per cell
    for kw in (dict(max_depth=4), dict(grow_policy="lossguide", max_leaves=9, max_depth=-1)):
        kw = dict(n_estimators=4, precision=precision, **kw)
        a = TreeBoostClassifier(device=device, **kw).fit(S, y, eval_set=[(S[::2], y[::2]), (D[1::2], y[1::2])])
        b = TreeBoostClassifier(device="numpy", **kw).fit(D, y, eval_set=[(D[::2], y[::2]), (D[1::2], y[1::2])])
        assert _doc(a, tmp_path / "a.json") == _doc(b, tmp_path / "b.json")
        assert a.evals_result_ == b.evals_result_
