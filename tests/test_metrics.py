"""mdhom.learn.metrics against scikit-learn's definitions, and how a learner resolves ``eval_metric``."""

from __future__ import annotations

import numpy as np
import pytest

from mdhom.learn import metrics as M
from mdhom.learn.losses import make_loss

sk = pytest.importorskip("sklearn.metrics")


def _binary(n=500, seed=0, ties=False):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(float)
    raw = rng.normal(size=n) + y
    if ties:
        raw = np.round(raw * 2) / 2  # few distinct scores: runs of ties across both classes
    w = rng.uniform(0.1, 3.0, n)
    return y[:, None], raw[:, None], w


@pytest.mark.parametrize("ties", [False, True])
def test_auc_matches_roc_auc_score_weighted_and_tied(ties):
    y, raw, w = _binary(ties=ties)
    assert M.auc(y, raw, w) == pytest.approx(sk.roc_auc_score(y[:, 0], raw[:, 0], sample_weight=w), abs=1e-12)
    assert M.auc(y, raw, np.ones(len(w))) == pytest.approx(sk.roc_auc_score(y[:, 0], raw[:, 0]), abs=1e-12)


def test_auc_all_tied_is_half_and_one_class_is_an_error():
    y, _, w = _binary(50)
    assert M.auc(y, np.zeros_like(y), w) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one class"):
        M.auc(np.ones_like(y), np.zeros_like(y), w)


def test_multilabel_auc_is_the_macro_mean():
    rng = np.random.default_rng(1)
    Y = (rng.random((300, 3)) < 0.5).astype(float)
    raw = rng.normal(size=(300, 3)) + Y
    assert M.auc(Y, raw, np.ones(300)) == pytest.approx(sk.roc_auc_score(Y, raw, average="macro"), abs=1e-12)


def test_pointwise_metrics_match_sklearn():
    y, raw, w = _binary()
    p = 1.0 / (1.0 + np.exp(-raw[:, 0]))
    assert M.logloss(y, raw, w) == pytest.approx(sk.log_loss(y[:, 0], p, sample_weight=w), rel=1e-12)
    assert M.error(y, raw, w) == pytest.approx(1 - sk.accuracy_score(y[:, 0], p > 0.5, sample_weight=w))
    t = raw[:, 0] * 2
    assert M.rmse(y, raw, w) == pytest.approx(np.sqrt(sk.mean_squared_error(y[:, 0], raw[:, 0], sample_weight=w)))
    assert M.mae(t[:, None], raw, w) == pytest.approx(sk.mean_absolute_error(t, raw[:, 0], sample_weight=w))
    rng = np.random.default_rng(2)
    raw3 = rng.normal(size=(200, 3))
    k = rng.integers(0, 3, 200)
    prob = np.exp(raw3) / np.exp(raw3).sum(axis=1, keepdims=True)
    assert M.mlogloss(k[:, None].astype(float), raw3, np.ones(200)) == pytest.approx(sk.log_loss(k, prob), rel=1e-12)
    assert M.merror(k[:, None].astype(float), raw3, np.ones(200)) == pytest.approx(1 - sk.accuracy_score(k, prob.argmax(1)))


def test_resolve_checks_the_objective_and_names():
    binary, multi, reg = make_loss("binary:logistic", 1), make_loss("multi:softmax", 3), make_loss("reg:squarederror", 1)
    assert [m.name for m in M.resolve(None, binary)] == ["logloss"]
    assert [m.name for m in M.resolve(None, multi)] == ["mlogloss"]
    assert [(m.name, m.maximize) for m in M.resolve(["binary_logloss", "auc"], binary)] == [("logloss", False),
                                                                                          ("auc", True)]
    with pytest.raises(ValueError, match="'auc' does not apply to objective 'multi:softmax'.*mlogloss, merror"):
        M.resolve("auc", multi)
    with pytest.raises(ValueError, match="'logloss' does not apply to objective 'reg:squarederror'"):
        M.resolve("logloss", reg)
    with pytest.raises(ValueError, match="metric name among"):
        M.check_spec("accuracy")
    with pytest.raises(ValueError, match="twice"):
        M.resolve(["auc", "auc"], binary)


def test_callable_gets_labels_and_probabilities():
    seen = {}

    def brier(y_true, y_score, sample_weight=None):
        seen.update(y_true=y_true, y_score=y_score, weighted=sample_weight is not None)
        return float(np.average((y_score - y_true) ** 2, weights=sample_weight))

    y, raw, w = _binary(100)
    (m,) = M.resolve(brier, make_loss("binary:logistic", 1), weighted=True)
    assert m.name == "brier" and not m.maximize
    value = m.score(y, raw, w)
    assert seen["y_true"].dtype.kind == "i" and seen["y_score"].shape == (100,) and seen["weighted"]
    assert value == pytest.approx(np.average((1 / (1 + np.exp(-raw[:, 0])) - y[:, 0]) ** 2, weights=w))
    def record(y_true, y_score):
        seen.update(y_true=y_true, y_score=y_score, weighted=False)
        return 0.0

    (m,) = M.resolve(record, make_loss("multi:softmax", 3))
    m.score(np.zeros((5, 1)), np.zeros((5, 3)), np.ones(5))
    assert seen["y_score"].shape == (5, 3) and np.allclose(seen["y_score"], 1 / 3) and not seen["weighted"]
