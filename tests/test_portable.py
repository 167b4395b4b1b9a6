"""The reference's portable arithmetic: accurate to an ulp, and the only transcendentals on the training path.

numpy's ``np.exp``/``np.log`` differ in the last bit between CPUs (SIMD code picked at run time) and ``np.sum``
adds eight or more terms pairwise; either made the numpy reference's softmax models differ from the devices'.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mdhom import TreeBoostClassifier
from mdhom.learn import losses, metrics
from mdhom.learn.portable import exp_nonpositive, log1p_nonnegative, log_positive, sum_in_order


def _ulps(got: np.ndarray, want: list[float]) -> np.ndarray:
    return np.array([abs(g - w) / math.ulp(w) for g, w in zip(got.tolist(), want, strict=True)])


def test_exp_within_an_ulp_down_to_subnormals():
    rng = np.random.default_rng(0)
    x = np.concatenate([-np.exp(rng.uniform(-40, math.log(745), 20000)), rng.uniform(-1, 0, 5000),
                        [0.0, -0.0, -1e-300, -708.4, -709.0, -730.0, -745.0, -745.2]])
    got = exp_nonpositive(x)
    assert _ulps(got, [math.exp(v) for v in x.tolist()]).max() <= 1.0
    assert exp_nonpositive(np.array([-746.0, -1e300, -np.inf])).tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(exp_nonpositive(np.array([np.nan])))[0]


def test_log_within_an_ulp_over_the_whole_range():
    rng = np.random.default_rng(1)
    x = np.concatenate([np.exp(rng.uniform(-744, 709, 20000)), 1 + rng.uniform(-0.3, 0.3, 5000),
                        [5e-324, 1e-310, 2.2250738585072014e-308, 0.5, 1.0, 2.0, math.sqrt(0.5), 1.7976931348623157e308]])
    got = log_positive(x)
    want = [math.log(v) for v in x.tolist()]
    assert _ulps(got[x != 1.0], [w for w, v in zip(want, x.tolist(), strict=True) if v != 1.0]).max() <= 1.0
    assert got[x == 1.0].tolist() == [0.0]
    assert log_positive(np.array([0.0, np.inf])).tolist() == [-np.inf, np.inf]
    assert np.isnan(log_positive(np.array([-1.0, np.nan]))).all()


def test_log1p_keeps_tiny_arguments():
    x = np.concatenate([np.exp(np.linspace(-700, 0, 5000)), [0.0, 1e-300, 1e-17, 1.0]])
    got = log1p_nonnegative(x)
    want = [math.log1p(v) for v in x.tolist()]
    nonzero = x > 0
    assert _ulps(got[nonzero], [w for w, v in zip(want, x.tolist(), strict=True) if v > 0]).max() <= 2.0
    assert got[~nonzero].tolist() == [0.0]


def test_sums_run_in_index_order():
    """Half-ulp terms vanish added one by one to 1, not when added to each other first (np.sum, from eight terms)."""
    a = np.array([[1.0] + [2.0**-53] * 15])
    assert sum_in_order(a, axis=1).tolist() == [1.0]
    assert sum_in_order(np.zeros((3, 0)), axis=1).tolist() == [0.0, 0.0, 0.0]


def test_training_path_calls_no_numpy_transcendental(monkeypatch):
    """A multiclass and a binary fit with an eval set (base score, gradients, links, the early-stopping metric)
    on the numpy reference, with numpy's exp and log families made to raise."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y10 = np.digitize(X[:, 0] + 0.3 * X[:, 1], np.quantile(X[:, 0], np.linspace(0.1, 0.9, 9)))
    y2 = (X[:, 1] > 0).astype(int)

    def forbidden(*args, **kwargs):
        raise AssertionError("a numpy transcendental on the training path")

    for name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp", "logaddexp2", "tanh"):
        monkeypatch.setattr(np, name, forbidden)
    for y in (y10, y2):
        est = TreeBoostClassifier(n_estimators=3, max_depth=3, early_stopping_rounds=2, device="numpy")
        est.fit(X, y, eval_set=[(X, y)])
        assert np.isfinite(est.predict_proba(X)).all()


def test_links_and_metrics_match_numpy_closely():
    rng = np.random.default_rng(3)
    raw = rng.normal(scale=8, size=(500, 10))
    y = rng.integers(0, 10, (500, 1)).astype(float)
    sm = losses.Softmax(10)
    z = np.exp(raw - raw.max(axis=1, keepdims=True))
    np.testing.assert_allclose(sm.transform(raw), z / z.sum(axis=1, keepdims=True), rtol=1e-14)
    want = -np.mean(np.log((z / z.sum(axis=1, keepdims=True))[np.arange(500), y[:, 0].astype(int)]))
    assert metrics.mlogloss(y, raw, np.ones(500)) == pytest.approx(want, rel=1e-12)
    lg = losses.Logistic(3)
    yb = rng.integers(0, 2, (500, 3)).astype(float)
    want = np.mean(np.logaddexp(0.0, raw[:, :3]) - yb * raw[:, :3])
    assert metrics.logloss(yb, raw[:, :3], np.ones(500)) == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(lg.transform(raw), 1 / (1 + np.exp(-raw)), rtol=1e-14)


def test_exp_is_the_same_bits_block_by_block_and_element_by_element():
    """exp_nonpositive works through long arrays a cache-sized block at a time, in place: every element, across the
    blocks' edges and in any shape, gets the bits it gets alone."""
    from mdhom.learn import portable

    rng = np.random.default_rng(4)
    n = 2 * portable._EXP_BLOCK + 4
    x = -np.abs(rng.standard_normal(n) * 10.0 ** rng.integers(-8, 3, n))
    x[[0, portable._EXP_BLOCK - 1, portable._EXP_BLOCK, n - 1]] = [-800.0, np.nan, -0.0, -745.5]
    got = exp_nonpositive(x.reshape(4, -1))
    alone = np.array([exp_nonpositive(np.array([v]))[0] for v in x])
    assert got.reshape(-1).tobytes() == alone.tobytes()
    assert exp_nonpositive(x[:0]).shape == (0,) and isinstance(exp_nonpositive(-1.0), np.floating)
