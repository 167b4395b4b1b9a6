"""Model quality on real data against the anchor libraries (numpy reference backend).

The figures each test reaches are printed (``pytest -s``) so that a report can quote them; the assertions
are floors a correct learner clears and a subtly broken one (wrong gain, wrong default direction, off-by-one
thresholds) does not.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from shared_data import DATA as _DATA

from mdhom import TreeBoostClassifier

DATA = str(_DATA)
datasets = pytest.importorskip("mdhom.datasets")
pytestmark = pytest.mark.skipif(not os.path.isdir(DATA), reason=f"datasets not found at {DATA}")


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC by the rank statistic (ties get average ranks), without scikit-learn."""
    order = np.argsort(score, kind="stable")
    ranks = np.empty(len(score))
    s = score[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def test_auc_helper():
    assert _auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == 0.75
    assert _auc(np.array([0, 1]), np.array([0.5, 0.5])) == 0.5


def test_higgs_7k_lossguide_255_leaves():
    """LightGBM's parameters where the libraries differ: no L2 on leaves (lambda_l2=0) and its
    min_sum_hessian_in_leaf=1e-3 (its min_data_in_leaf does not change LightGBM's AUC here: 0.832 either way).

    Measured with these parameters (2026-11-20): mdhom 0.8250; XGBoost (same parameters) 0.8179, LightGBM 0.8320.
    At max_bin 63 the order flips (XGBoost 0.8308, LightGBM 0.8193, mdhom 0.8285): on a 500-row test set a
    255-leaf model moves by ~0.01 with any small change, so only a sanity floor is asserted here; the comparison
    with LightGBM is the cross-validated one below."""
    X, y = datasets.load_delimited(os.path.join(DATA, "higgs-7k.train.tsv"), target=0)
    Xt, yt = datasets.load_delimited(os.path.join(DATA, "higgs-7k.test.tsv"), target=0)
    est = TreeBoostClassifier(n_estimators=100, learning_rate=0.1, grow_policy="lossguide", max_leaves=255,
                              max_depth=0, max_bin=255, reg_lambda=0.0, min_child_weight=1e-3, device="numpy")
    start = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - start
    auc = _auc(yt, est.predict_proba(Xt)[:, 1])
    print(f"\nhiggs-7k: test AUC {auc:.4f} (LightGBM 0.832, XGBoost 0.818 with these parameters), "
          f"fit {seconds:.1f} s, median round {np.median(est.round_times_) * 1e3:.0f} ms")
    assert auc >= 0.82
    assert max((t.left < 0).sum() for t in est._ensemble.trees) == 255


# 5-fold stratified CV (shuffle, random_state 0) over higgs-7k's 7000 training rows, measured 2026-11-21 with
# LightGBM 4.7 (num_leaves 255, lr 0.1, 100 rounds, its defaults otherwise) and XGBoost 3.4 (same parameters as
# mdhom below, tree_method hist): the AUC per fold on 1400 held-out rows each
HIGGS_CV_LIGHTGBM = (0.7767, 0.7591, 0.7719, 0.7599, 0.7803)  # mean 0.7696
HIGGS_CV_XGBOOST = (0.7740, 0.7662, 0.7773, 0.7625, 0.7806)  # mean 0.7721


def test_higgs_7k_cross_validated_against_lightgbm():
    """The issue's criterion (AUC at least LightGBM's minus 0.005) on data that can resolve it: the 500-row test
    set moves a 255-leaf model's AUC by ~0.01 with any small change (max_bin 250 / 240 / 225 / 200 / 128 gave
    mdhom - LightGBM of +0.0015, +0.0005, -0.017, -0.0085, -0.0024), so this compares the mean over five folds
    of 1400 rows each. Measured: mdhom 0.7710, LightGBM 0.7696, XGBoost 0.7721."""
    from sklearn.model_selection import StratifiedKFold

    X, y = datasets.load_delimited(os.path.join(DATA, "higgs-7k.train.tsv"), target=0)
    aucs = []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        est = TreeBoostClassifier(n_estimators=100, learning_rate=0.1, grow_policy="lossguide", max_leaves=255,
                                  max_depth=0, max_bin=255, reg_lambda=0.0, min_child_weight=1e-3, device="numpy")
        aucs.append(_auc(y[test], est.fit(X[train], y[train]).predict_proba(X[test])[:, 1]))
    mean, lgb = float(np.mean(aucs)), float(np.mean(HIGGS_CV_LIGHTGBM))
    print(f"\nhiggs-7k 5-fold CV AUC: mdhom {mean:.4f} ({', '.join(f'{a:.4f}' for a in aucs)}), "
          f"LightGBM {lgb:.4f}, XGBoost {np.mean(HIGGS_CV_XGBOOST):.4f}")
    assert mean >= lgb - 0.005


def test_agaricus_10_rounds():
    X, y = datasets.load_libsvm(os.path.join(DATA, "agaricus.train.libsvm"))
    Xt, yt = datasets.load_libsvm(os.path.join(DATA, "agaricus.test.libsvm"), n_features=X.shape[1])
    est = TreeBoostClassifier(n_estimators=10, device="numpy").fit(X, y)
    error = float(np.mean(est.predict(Xt) != yt))
    print(f"\nagaricus: test error {error:.4f} after 10 rounds (LightGBM 0.0025, XGBoost 0.0)")
    assert error <= 0.003


def test_emotions_multilabel():
    xml = os.path.join(DATA, "emotions.xml")
    X, Y, _, _ = datasets.load_arff(os.path.join(DATA, "emotions-predefined_training.arff"), labels=xml)
    Xt, Yt, _, _ = datasets.load_arff(os.path.join(DATA, "emotions-predefined_test.arff"), labels=xml)
    est = TreeBoostClassifier(n_estimators=300, learning_rate=0.05, max_depth=4, colsample_bytree=0.5,
                              random_state=0, device="numpy")
    start = time.perf_counter()
    est.fit(X, Y)
    seconds = time.perf_counter() - start
    assert est.objective_ == "multilabel:logistic"
    P = est.predict(Xt)
    hamming = float(np.mean(P != Yt))
    subset = float(np.mean(np.all(P == Yt, axis=1)))
    tp = float(np.sum((P == 1) & (Yt == 1)))
    micro_f1 = 2 * tp / float(P.sum() + Yt.sum())
    print(f"\nemotions: Hamming loss {hamming:.4f}, subset accuracy {subset:.3f}, micro F1 {micro_f1:.3f} "
          f"(mlrl-boomer 0.2005, 0.277, 0.677), fit {seconds:.1f} s")
    assert hamming <= 0.22 and subset >= 0.22 and micro_f1 >= 0.64


def test_higgs_7k_quantized_against_double():
    """precision='quantized' (numpy, the reference of every device's quantized mode) against double.

    At 63 leaves the two modes grow the same model here, so the AUC must agree within 0.002. At 255 leaves on
    7k rows the model is chaotic: a split of gain ~1e-15 (rounding noise on a pure node of the first tree,
    where the exact gain is 0) changes every later tree, so the AUC moves by about 0.01 either way, like a change
    of subsampling seed (0.820 .. 0.839 in double); only a floor is asserted there, and both figures printed."""
    X, y = datasets.load_delimited(os.path.join(DATA, "higgs-7k.train.tsv"), target=0)
    Xt, yt = datasets.load_delimited(os.path.join(DATA, "higgs-7k.test.tsv"), target=0)
    kw = dict(n_estimators=100, learning_rate=0.1, grow_policy="lossguide", max_depth=0, max_bin=255,
              reg_lambda=0.0, min_child_weight=5.0, device="numpy")
    auc = {}
    for leaves in (63, 255):
        for precision in ("double", "quantized") if leaves == 63 else ("quantized",):
            est = TreeBoostClassifier(max_leaves=leaves, precision=precision, **kw).fit(X, y)
            assert est.precision_ == precision
            auc[leaves, precision] = _auc(yt, est.predict_proba(Xt)[:, 1])
    print(f"\nhiggs-7k test AUC: 63 leaves double {auc[63, 'double']:.4f}, quantized {auc[63, 'quantized']:.4f}; "
          f"255 leaves quantized {auc[255, 'quantized']:.4f}")
    assert abs(auc[63, "quantized"] - auc[63, "double"]) <= 0.002
    assert auc[255, "quantized"] >= 0.82
