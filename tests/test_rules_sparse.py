"""scipy.sparse X in RuleBoostClassifier: kept sparse (no n x features float64 matrix is built), an absent entry
read as 0, and the same model, bit for bit, as the dense matrix's, on numpy and on every device."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from mdhom import RuleBoostClassifier
from mdhom.rules.binned import bin_matrix
from mdhom.rules.features import Features
from mdhom.rules.induction import bin_edges
from mdhom.rules.refinement import _dense_segments, _stored_segments  # noqa: PLC2701 - the two paths compared

pytestmark = pytest.mark.filterwarnings("ignore::mdhom.configs.TunedConfigWarning")


def _text_like(n=257, F=23, L=4, density=0.15, seed=0):
    """Mostly-zero features (counts, a few negative values, NaN, stored zeros, one dense column) and labels that
    depend on them."""
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((n, F)) < density, rng.integers(1, 5, (n, F)).astype(float), 0.0)
    X[:, 3] = rng.normal(size=n)  # dense: 0 is not its most frequent value
    X[rng.random((n, F)) < 0.02] = -1.5
    X[rng.random((n, F)) < 0.02] = np.nan
    X[5, 0] = 0.0
    Y = np.stack([X[:, 0] > 0, X[:, 1] + X[:, 2] > 1, X[:, 3] < -0.2, rng.random(n) < 0.3], 1)[:, :L]
    coo = sp.coo_matrix(X)  # NaN is stored (it is not zero)
    S = sp.csr_matrix((np.append(coo.data, 0.0), (np.append(coo.row, 5), np.append(coo.col, 0))), shape=X.shape)
    assert S.nnz == coo.nnz + 1  # a stored zero
    return X, S, Y.astype(np.int8)


def test_stored_segments_are_the_dense_segments_bit_for_bit():
    rng = np.random.default_rng(1)
    X, S, _ = _text_like()
    Xf = Features(S)
    n = X.shape[0]
    for trial in range(60):
        rows = np.flatnonzero(rng.random(n) < rng.uniform(0.05, 1.0))
        if rows.size < 2:
            continue
        A = rng.normal(size=(rows.size, 3)) * (rng.random((rows.size, 1)) < 0.9)
        ones = (rng.random(rows.size) < 0.8).astype(float)
        total = A.sum(axis=0)
        for f in range(X.shape[1]):
            want = _dense_segments(X[rows, f], A, ones, total)
            got = _stored_segments(Xf, f, rows, A, ones, total)
            if want is None:
                assert got is None
                continue
            for w, g in zip(want, got, strict=True):
                assert w.tobytes() == g.tobytes(), (trial, f)


@pytest.mark.parametrize("method", ["equal-width", "equal-frequency"])
def test_bins_of_a_sparse_matrix_are_the_dense_bins(method):
    X, S, _ = _text_like()
    for bins in (3, 8, 64):
        want = bin_edges(X, (method, bins))
        got = bin_edges(Features(S.tocsc()), (method, bins))
        assert all(w.tobytes() == g.tobytes() for w, g in zip(want, got, strict=True))
        bw, nw = bin_matrix(X, want)
        bg, ng = bin_matrix(Features(S), got)
        assert nw == ng and bw.dtype == bg.dtype and np.array_equal(bw, bg)


def _doc(est, tmp_path):
    est.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["params"].pop("device")
    return json.dumps(doc, sort_keys=True)


@pytest.mark.parametrize("kw", [
    dict(head_type="single"),
    dict(loss="logistic_examplewise", feature_sampling=0.5),
    dict(loss="squared_error", instance_sampling=0.7, label_sampling=0.8),
    dict(head_type="single", feature_binning=("equal-frequency", 8)),
    dict(head_type="complete", feature_binning=("equal-width", 16), global_pruning="post-pruning{min_rules=5}"),
], ids=["exact-single", "exact-examplewise", "exact-sampling", "binned-single", "binned-pruned"])
def test_sparse_fits_write_the_dense_fits_model(tmp_path, kw):
    X, S, Y = _text_like()
    kw = {"max_rules": 20, "random_state": 2, **kw}
    want = _doc(RuleBoostClassifier(**kw).fit(X, Y), tmp_path)
    for form in (S, S.tocsc(), sp.coo_matrix(S)):
        est = RuleBoostClassifier(**kw).fit(form, Y)
        assert _doc(est, tmp_path) == want
        for pred in (S, S.tocsc()):
            np.testing.assert_array_equal(est.decision_function(pred), est.decision_function(X))
            np.testing.assert_array_equal(est.predict(pred), est.predict(X))


def test_sparse_fits_on_a_device_write_the_dense_fits_model(tmp_path, device):
    X, S, Y = _text_like(n=301)
    for kw in (dict(head_type="single"), dict(loss="logistic_examplewise", label_binning="none")):
        kw = {"max_rules": 15, "random_state": 3, "feature_binning": ("equal-frequency", 8), "precision": "double",
              **kw}
        want = _doc(RuleBoostClassifier(**kw).fit(X, Y), tmp_path)
        assert _doc(RuleBoostClassifier(device=device, **kw).fit(S, Y), tmp_path) == want


def test_no_dense_float64_matrix_is_built(monkeypatch):
    """A 6000 x 4000 text-shaped matrix (0.3% filled; 192 MB as float64): fit and predict stay within a few MB
    (measured: 2.2 MB exact) beyond the uint8 bins a binned fit keeps (24 MB; measured 28 MB in all), and never
    densify the matrix."""
    rng = np.random.default_rng(4)
    n, F = 6000, 4000
    S = sp.random(n, F, density=0.003, format="csr", random_state=5, data_rvs=lambda k: rng.integers(1, 4, k))
    Y = np.stack([S[:, 0].toarray().ravel() > 0, rng.random(n) < 0.2], 1).astype(np.int8)

    def refuse(*args, **kwargs):
        raise AssertionError("the sparse matrix was densified")

    for cls in (sp.csr_matrix, sp.csc_matrix):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    for kw, budget in ((dict(), 8e6), (dict(feature_binning=("equal-width", 8)), 24e6 + 8e6)):
        tracemalloc.start()
        est = RuleBoostClassifier(max_rules=4, head_type="single", random_state=1, **kw).fit(S, Y)
        est.predict(S)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < budget, (kw, peak)


def test_sparse_input_is_checked_and_never_changed():
    X, S, Y = _text_like()
    est = RuleBoostClassifier(max_rules=3).fit(S, Y)
    bad = S.tocsc(copy=True)
    bad.data[0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        RuleBoostClassifier(max_rules=3).fit(bad, Y)
    with pytest.raises(ValueError, match="features"):
        est.predict(S[:, :-1])
    with pytest.raises(ValueError, match="0 sample"):
        RuleBoostClassifier(max_rules=3).fit(S[:0], Y[:0])
    assert est.predict(S[:0]).shape == (0, Y.shape[1])
    # a CSC matrix with a duplicate entry (summed, as scipy reads it) and unsorted indices: not changed by fit
    dup = sp.csc_matrix((np.array([1.0, 2.0, 5.0]), np.array([7, 3, 7]), np.array([0, 3] + [3] * (S.shape[1] - 1))),
                        shape=S.shape)
    dup.has_canonical_format = False
    before = (dup.data.copy(), dup.indices.copy(), dup.indptr.copy())
    dense = dup.toarray()
    a = RuleBoostClassifier(max_rules=3, feature_sampling=None).fit(dup, Y)
    b = RuleBoostClassifier(max_rules=3, feature_sampling=None).fit(dense, Y)
    assert str(a.rules_) == str(b.rules_)
    assert all(np.array_equal(x, y) for x, y in zip(before, (dup.data, dup.indices, dup.indptr), strict=True))
