"""The rule learner's parts against first principles: loss derivatives against finite differences, heads
against brute-force minimisation, the refinement search against enumerating every condition."""

from __future__ import annotations

import numpy as np
import pytest

from mdhom.rules.heads import Head
from mdhom.rules.losses import make_loss, unpack
from mdhom.rules.refinement import SearchSpace, best_refinement, covered_by


@pytest.mark.parametrize("name", ["logistic_labelwise", "squared_error", "logistic_examplewise"])
def test_loss_derivatives_match_finite_differences(name):
    rng = np.random.default_rng(3)
    Y = rng.integers(0, 2, (5, 4)).astype(float)
    S = rng.normal(0, 2, (5, 4))
    loss = make_loss(name)
    G, H = loss.statistics(Y, S)
    eps = 1e-5
    for c in range(4):
        d = np.zeros(4)
        d[c] = eps
        g_num = (loss.value(Y, S + d) - loss.value(Y, S - d)) / (2 * eps)
        np.testing.assert_allclose(G[:, c], g_num, rtol=1e-6, atol=1e-8)
        g_plus, _ = loss.statistics(Y, S + d)
        g_minus, _ = loss.statistics(Y, S - d)
        h_col = (g_plus - g_minus) / (2 * eps)  # column c of each example's Hessian
        if loss.decomposable:
            np.testing.assert_allclose(H[:, c], h_col[:, c], rtol=1e-5, atol=1e-8)
            off = np.delete(h_col, c, axis=1)
            np.testing.assert_allclose(off, 0.0, atol=1e-8)
        else:
            np.testing.assert_allclose(unpack(H, 4)[:, :, c], h_col, rtol=1e-5, atol=1e-8)


def _brute_quality(g, hm, l2):
    """min over s of g.s + 1/2 s'(H + l2 I)s by a generic optimiser-free route: the normal equations."""
    s = np.linalg.solve(hm + l2 * np.eye(len(g)), -g)
    return g @ s + 0.5 * s @ (hm + l2 * np.eye(len(g))) @ s, s


def test_heads_minimise_the_second_order_loss():
    rng = np.random.default_rng(5)
    n, L, l2 = 40, 3, 1.0
    Y = rng.integers(0, 2, (n, L)).astype(float)
    S = rng.normal(0, 1, (n, L))
    for name in ("logistic_labelwise", "logistic_examplewise"):
        loss = make_loss(name)
        G, H = loss.statistics(Y, S)
        full = not loss.decomposable
        labels = np.arange(L)
        g = G.sum(axis=0)
        hm = unpack(H, L).sum(axis=0) if full else np.diag(H.sum(axis=0))
        complete = Head("complete", full, labels, L, 0.0, l2)
        total = complete.gather(G, H).sum(axis=0)
        q_ref, s_ref = _brute_quality(g, hm, l2)
        got_labels, got_scores = complete.predict(total)
        np.testing.assert_array_equal(got_labels, labels)
        np.testing.assert_allclose(got_scores, s_ref, rtol=1e-10)
        np.testing.assert_allclose(complete.evaluate(total[None])[0], q_ref, rtol=1e-10)
        single = Head("single", full, labels, L, 0.0, l2)
        per_label = [_brute_quality(g[[c]], hm[np.ix_([c], [c])], l2) for c in range(L)]
        best = int(np.argmax([abs(s[0]) for _, s in per_label]))  # mlrl-boomer: the largest |score|
        per_label = [q for q, _ in per_label]
        stotal = single.gather(G, H).sum(axis=0)
        np.testing.assert_allclose(single.evaluate(stotal[None])[0], per_label[best], rtol=1e-10)
        assert single.predict(stotal)[0].tolist() == [best]


def test_single_label_head_takes_the_largest_score_not_the_best_quality():
    """mlrl-boomer's choice: label 0 scores -1 (quality -0.5), label 1 scores -0.5 (quality -1.0)."""
    head = Head("single", False, np.arange(2), 2, 0.0, 1.0)
    total = np.array([1.0, 4.0, 0.0, 7.0])  # gradients, then Hessians
    labels, scores = head.predict(total)
    assert labels.tolist() == [0]
    np.testing.assert_allclose(scores, [-1.0])
    np.testing.assert_allclose(head.evaluate(total[None]), [-0.5])


def test_l1_shrinks_scores_towards_zero():
    labels = np.arange(2)
    head = Head("complete", False, labels, 2, 0.5, 1.0)
    total = np.array([2.0, -0.3, 1.0, 1.0])  # gradients, then Hessians
    _, s = head.predict(total)
    np.testing.assert_allclose(s, [-(2.0 - 0.5) / 2.0, 0.0])


def _brute_refinement(X, covered, weights, atoms, head, features, min_cov):
    best = None
    for f in features:
        vals = np.unique(X[covered & ~np.isnan(X[:, f]), f])
        for lo, hi in zip(vals[:-1], vals[1:], strict=True):
            t = lo + (hi - lo) / 2
            for op in ("<=", ">"):
                rows = covered & covered_by(X, f, op, t)
                if ((weights > 0) & rows).sum() < min_cov:
                    continue
                q = head.evaluate((atoms[rows] * weights[rows, None]).sum(axis=0)[None])[0]
                if best is None or q < best[0] - 1e-9:
                    best = (q, f, op, t)
    return best


@pytest.mark.parametrize("kind", ["single", "complete"])
def test_refinement_search_agrees_with_enumeration(kind):
    rng = np.random.default_rng(11)
    n, F, L = 63, 5, 3
    X = np.round(rng.normal(size=(n, F)), 1)  # repeated values: boundaries only between distinct ones
    X[rng.random((n, F)) < 0.1] = np.nan
    Y = rng.integers(0, 2, (n, L)).astype(float)
    G, H = make_loss("logistic_labelwise").statistics(Y, rng.normal(size=(n, L)))
    head = Head(kind, False, np.arange(L), L, 0.0, 1.0)
    atoms = head.gather(G, H)
    covered = rng.random(n) < 0.8
    weights = (rng.random(n) < 0.7).astype(float)
    features = np.arange(F)
    got = best_refinement(SearchSpace(X), covered, weights, atoms, head, features, 2)
    want = _brute_refinement(X, covered, weights, atoms, head, features, 2)
    assert (got.feature, got.op) == (want[1], want[2])
    assert got.threshold == want[3]
    np.testing.assert_allclose(got.quality, want[0], rtol=1e-10)
    rows = covered & covered_by(X, got.feature, got.op, got.threshold)
    np.testing.assert_allclose(got.total, (atoms[rows] * weights[rows, None]).sum(axis=0), rtol=1e-10)
    assert got.n_covered == int(((weights > 0) & rows).sum())


def test_binned_search_uses_only_bin_edges():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 2))
    edges = [np.array([-0.5, 0.0, 0.5]), np.array([0.1])]
    Y = rng.integers(0, 2, (50, 2)).astype(float)
    G, H = make_loss("squared_error").statistics(Y, np.zeros((50, 2)))
    head = Head("complete", False, np.arange(2), 2, 0.0, 1.0)
    got = best_refinement(SearchSpace(X, edges), np.ones(50, bool), np.ones(50), head.gather(G, H), head,
                          np.arange(2), 1)
    assert got.threshold in set(edges[got.feature].tolist())


@pytest.mark.parametrize("kind", ["single", "complete"])
def test_binned_search_agrees_with_the_exact_search_on_bin_indices(kind):
    """The binned search (sums per bin, then prefix sums over bins) picks the condition the sorted search picks
    on the examples' bin indices, with the same statistics; NaN and zero weights included."""
    from mdhom.rules.binned import best_binned, bin_matrix

    rng = np.random.default_rng(5)
    n, F, L = 97, 4, 3
    X = rng.normal(size=(n, F))
    X[rng.random((n, F)) < 0.1] = np.nan
    edges = [np.array([-1.0, -0.2, 0.3, 0.9]), np.array([0.0]), np.array([-0.5, 0.5]), np.array([])]
    bins, n_bins = bin_matrix(X, edges)
    assert n_bins == 6 and (bins[np.isnan(X)] == n_bins - 1).all()
    Y = rng.integers(0, 2, (n, L)).astype(float)
    G, H = make_loss("logistic_labelwise").statistics(Y, rng.normal(size=(n, L)))
    head = Head(kind, False, np.arange(L), L, 0.0, 1.0)
    atoms = head.gather(G, H)
    covered = rng.random(n) < 0.8
    weights = (rng.random(n) < 0.7).astype(float)
    got = best_binned(bins, n_bins, edges, covered, weights, atoms, head, np.arange(F), 2)
    values = np.where(bins == n_bins - 1, np.nan, bins.astype(float))
    want = best_refinement(SearchSpace(values), covered, weights, atoms, head, np.arange(F), 2)
    assert (got.feature, got.op, got.n_covered) == (want.feature, want.op, want.n_covered)
    assert got.threshold == edges[want.feature][int(np.floor(want.threshold))]
    np.testing.assert_allclose(got.quality, want.quality, rtol=1e-12)
    np.testing.assert_allclose(got.total, want.total, rtol=1e-12)


def test_fixed_order_solve_agrees_with_lapack_and_keeps_its_bits_per_candidate():
    """The coupled head's LDL^T solve (the order the device copies) against LAPACK to rounding, at 30 labels; a
    candidate's result does not depend on the batch it is solved in (the device solves one at a time)."""
    from mdhom.rules import coupled

    rng = np.random.default_rng(8)
    n, L = 200, 30
    G, H = make_loss("logistic_examplewise").statistics(rng.integers(0, 2, (n, L)).astype(float),
                                                        rng.normal(size=(n, L)))
    rows = [rng.random(n) < 0.5 for _ in range(5)]
    g = np.stack([G[r].sum(axis=0) for r in rows])
    h = np.stack([H[r].sum(axis=0) for r in rows])
    s = coupled.scores(g, h, 0.0, 1.0)
    want = np.linalg.solve(unpack(h, L) + np.eye(L), -g[..., None])[..., 0]
    np.testing.assert_allclose(s, want, rtol=1e-9, atol=1e-12)
    assert coupled.scores(g[2:3], h[2:3], 0.0, 1.0).tobytes() == s[2:3].tobytes()
    q = coupled.quality(s, g, h, 0.0, 1.0)
    np.testing.assert_allclose(q, 0.5 * (g * s).sum(axis=1), rtol=1e-9)  # at the minimiser: g.s / 2


def test_label_binning_groups_labels_as_mlrl_boomer():
    from mdhom.rules.label_binning import LabelBinning, bins_of, solve

    lb = LabelBinning()
    # ceil(0.04 n) in float32, at least 1: 1 bin up to 25 labels of one sign, 5 at 101
    assert lb.bounded(np.array([1, 25, 26, 101])).tolist() == [1, 1, 2, 5]
    assert LabelBinning(0.5, 2, 3).bounded(np.array([1, 4, 10])).tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="ratio"):
        LabelBinning(1.5)
    # criteria -g / (h + l2): two negative (-2, -1), a zero (g = 0), three positive (0.5, 0.6, 3)
    g = np.array([[2.0, 1.0, 0.0, -0.5, -0.6, -3.0]])
    k = g.shape[1]
    h = np.zeros((1, k * (k + 1) // 2))
    idx, n_bins = bins_of(g, h, 0.0, 1.0, LabelBinning(0.5, 1, 0))
    # negatives: 1 bin (ceil(0.5 * 2)); positives: 2 equal-width bins over [0.5, 3] (0.5, 0.6 low; 3 high)
    assert idx.tolist() == [[0, 0, -1, 1, 1, 2]] and n_bins.tolist() == [3]
    # one bin, diagonal Hessians only: s = -sum(g) / (sum(h_ii) + n l2) for every label
    rng = np.random.default_rng(2)
    g = -rng.random((4, 5)) - 0.1
    h = rng.random((4, 15))
    scores, q = solve(g, h, 0.0, 1.0, lb)
    d = np.arange(5) * (np.arange(5) + 3) // 2  # the packed diagonal
    s1 = -g.sum(axis=1) / (h[:, d].sum(axis=1) + 5.0)
    np.testing.assert_allclose(scores, np.repeat(s1[:, None], 5, axis=1), rtol=1e-12)
    np.testing.assert_allclose(q, 0.5 * s1 * g.sum(axis=1), rtol=1e-12)


def test_label_binning_option_resolves_as_mlrl_boomer():
    from mdhom import RuleBoostClassifier
    from mdhom.rules.label_binning import LabelBinning
    from mdhom.rules.options import resolved_label_binning

    assert resolved_label_binning("logistic_examplewise", "auto", "auto") == LabelBinning()
    assert resolved_label_binning("logistic_examplewise", "single", "auto") is None
    assert resolved_label_binning("logistic_labelwise", "complete", "auto") is None
    assert resolved_label_binning("logistic_examplewise", "complete", ("equal-width", 0.1, 2, 4)) == \
        LabelBinning(0.1, 2, 4)
    X = np.random.default_rng(0).normal(size=(30, 2))
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0], 1).astype(int)
    with pytest.raises(ValueError, match="example-wise loss only"):
        RuleBoostClassifier(label_binning="equal-width").fit(X, Y)
    with pytest.raises(ValueError, match="label_binning"):
        RuleBoostClassifier(label_binning=("equal-width", 0.1, 3, 2)).fit(X, Y)
