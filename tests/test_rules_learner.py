"""RuleBoostClassifier end to end on the numpy reference: fitting, prediction, the rule text, model files,
determinism and the errors bad input gets."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from mdhom import RuleBoostClassifier
from mdhom.rules.losses import make_loss
from mdhom.rules.predictors import LabelVectors


def _data(n=120, F=6, L=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    Y = np.stack([X[:, 0] > 0, (X[:, 1] + X[:, 2]) > 0.5, X[:, 3] < -0.3], axis=1)[:, :L].astype(np.int8)
    return X, Y


@pytest.mark.parametrize("loss", ["logistic_labelwise", "squared_error", "logistic_examplewise"])
@pytest.mark.parametrize("head", ["single", "complete"])
def test_learns_the_training_labels(loss, head):
    X, Y = _data()
    est = RuleBoostClassifier(max_rules=60, loss=loss, head_type=head, feature_sampling=None).fit(X, Y)
    assert 0 < len(est.rules_) <= 59
    P = est.predict(X)
    assert P.shape == Y.shape and P.dtype == np.int8
    assert (P != Y).mean() < 0.08  # the default rule alone errs on about a third
    S = est.decision_function(X)
    np.testing.assert_array_equal(P, (S > 0).astype(np.int8))
    for rule in est.rules_.rules:
        assert rule.labels.size == (1 if head == "single" else Y.shape[1])
        assert 1 <= len(rule.conditions)


def test_default_rule_alone_predicts_the_label_frequencies():
    X, Y = _data()
    est = RuleBoostClassifier(max_rules=1, l2_regularization_weight=0.0).fit(X, Y)
    assert len(est.rules_) == 0
    # with no L2, one Newton step from 0 on the logistic loss: 4 * (mean - 1/2) per label
    np.testing.assert_allclose(est.rules_.default_scores, 4 * (Y.mean(axis=0) - 0.5))


@pytest.mark.parametrize("loss", ["logistic_labelwise", "logistic_examplewise"])
def test_quantized_fits_start_from_the_same_default_rule(loss):
    """The default rule is summed from the float statistics in every mode (it was once summed from the fixed-point
    columns before any had been quantized: all zeros, a default rule that predicted nothing)."""
    X, Y = _data()
    scores = [RuleBoostClassifier(max_rules=1, loss=loss, precision=p, device="numpy").fit(X, Y).rules_.default_scores
              for p in ("double", "quantized")]
    assert np.abs(scores[0]).min() > 0.01
    np.testing.assert_array_equal(scores[1], scores[0])


def test_max_conditions_and_sampling_options_are_honoured():
    X, Y = _data(n=150, F=8)
    est = RuleBoostClassifier(max_rules=20, max_conditions=2, feature_sampling=0.5, instance_sampling=0.7,
                              label_sampling=0.67, random_state=3).fit(X, Y)
    assert all(len(r.conditions) <= 2 for r in est.rules_.rules)
    assert all(r.labels.size <= 2 for r in est.rules_.rules)


def test_feature_binning_puts_thresholds_on_bin_edges():
    X, Y = _data(n=200)
    exact = RuleBoostClassifier(max_rules=10, feature_sampling=None).fit(X, Y)
    binned = RuleBoostClassifier(max_rules=10, feature_sampling=None, feature_binning=("equal-width", 4)).fit(X, Y)
    for rule in binned.rules_.rules:
        for c in rule.conditions:
            lo, hi = X[:, c.feature].min(), X[:, c.feature].max()
            assert np.isclose(((c.threshold - lo) / (hi - lo) * 4) % 1, 0) or \
                np.isclose(((c.threshold - lo) / (hi - lo) * 4) % 1, 1)
    assert str(exact.rules_) != str(binned.rules_)


def test_same_seed_same_model_file(tmp_path):
    X, Y = _data()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    RuleBoostClassifier(max_rules=15, instance_sampling=0.8, random_state=7).fit(X, Y).save_model(a)
    RuleBoostClassifier(max_rules=15, instance_sampling=0.8, random_state=7).fit(X, Y).save_model(b)
    assert a.read_bytes() == b.read_bytes()
    RuleBoostClassifier(max_rules=15, instance_sampling=0.8, random_state=8).fit(X, Y).save_model(b)
    assert a.read_bytes() != b.read_bytes()


def test_sparse_and_boolean_labels_give_the_same_model():
    X, Y = _data()
    dense = RuleBoostClassifier(max_rules=10).fit(X, Y)
    sparse = RuleBoostClassifier(max_rules=10).fit(sp.csr_matrix(X), sp.csr_matrix(Y))
    boolean = RuleBoostClassifier(max_rules=10).fit(X, Y.astype(bool))
    assert str(dense.rules_) == str(sparse.rules_) == str(boolean.rules_)


def test_save_load_round_trip_and_rule_text(tmp_path):
    pd = pytest.importorskip("pandas")
    X, Y = _data()
    frame = pd.DataFrame(X, columns=[f"feat_{j}" for j in range(X.shape[1])])
    labels = pd.DataFrame(Y, columns=["happy", "sad", "calm"])
    est = RuleBoostClassifier(max_rules=12, loss="logistic_examplewise").fit(frame, labels)
    text = str(est.rules_)
    assert text.splitlines()[0].startswith("{} => (happy = ")
    assert "feat_" in text and len(text.splitlines()) == len(est.rules_) + 1
    path = tmp_path / "rules.json"
    est.save_model(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "mdhom.ruleboost" and doc["version"] == 2 and doc["head_type"] == "complete"
    assert len(doc["label_vectors"]) == len(doc["label_vector_counts"]) == len(np.unique(Y, axis=0))
    back = RuleBoostClassifier().load_model(path)
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.decision_function(frame), est.decision_function(frame))
    np.testing.assert_array_equal(back.predict_proba(frame), est.predict_proba(frame))
    np.testing.assert_array_equal(back.predict(frame), est.predict(frame))
    assert str(back.rules_) == text
    back.save_model(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_damaged_model_files_are_clear_errors(tmp_path):
    X, Y = _data()
    path = tmp_path / "m.json"
    RuleBoostClassifier(max_rules=5).fit(X, Y).save_model(path)
    good = json.loads(path.read_text())
    path.write_text(path.read_text()[:-10])
    with pytest.raises(ValueError, match="corrupt JSON"):
        RuleBoostClassifier().load_model(path)
    for change, message in [({"format": "mdhom.treeboost"}, "not an mdhom rule model"),
                            ({"version": 99}, "newer than this mdhom reads"),
                            ({"rules": [{"conditions": [[99, "<=", 0.0]], "labels": [0], "scores": [1.0]}]},
                             "bad condition"),
                            ({"rules": [{"conditions": [], "labels": [7], "scores": [1.0]}]}, "bad head"),
                            ({"estimator": "TreeBoostClassifier"}, "not a RuleBoostClassifier"),
                            ({"label_vectors": [[0]], "label_vector_counts": [1]}, "only it has them"),
                            ({"params": {**good["params"], "binary_predictor": "example-wise"},
                              "label_vectors": [[0, 9]], "label_vector_counts": [1]}, "label beyond 3")]:
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(ValueError, match=message):
            RuleBoostClassifier().load_model(path)


def test_example_wise_predictor_picks_the_closest_training_label_vector():
    X, Y = _data(n=150)
    Y[:, 2] = 1 - (Y[:, 0] | Y[:, 1])  # every example has a label: never (0, 0, 0)
    # without label binning: binned labels share scores, so vectors tie on their loss (ties: the other test)
    est = RuleBoostClassifier(max_rules=10, loss="logistic_examplewise", random_state=2,
                              label_binning="none").fit(X, Y)
    assert est.get_params()["binary_predictor"] == "auto"
    Xt = np.random.default_rng(9).normal(size=(80, X.shape[1])) * 2
    P, S = est.predict(Xt), est.decision_function(Xt)
    seen = np.unique(Y, axis=0)
    assert {tuple(r) for r in P} <= {tuple(r) for r in seen}
    loss = make_loss("logistic_examplewise")
    dist = np.stack([loss.value(np.broadcast_to(v, S.shape), S) for v in seen], axis=1)
    np.testing.assert_array_equal(P, seen[np.argmin(dist, axis=1)])
    wise = RuleBoostClassifier(max_rules=10, loss="logistic_examplewise", random_state=2, label_binning="none",
                               binary_predictor="output-wise").fit(X, Y)
    np.testing.assert_array_equal(wise.predict(Xt), (S > 0).astype(np.int8))
    assert (wise.predict(Xt) != P).any()  # the two predictors differ on these rows


def test_example_wise_ties_go_to_the_more_frequent_vector():
    vectors = LabelVectors.of(np.array([[0, 1], [1, 0], [1, 0], [0, 1], [1, 0]]))
    assert vectors.vectors.tolist() == [[0, 1], [1, 0]] and vectors.counts.tolist() == [2, 3]
    # scores (0, 0): both vectors have the same loss; [1, 0] occurred more often
    assert vectors.closest(np.zeros((1, 2)), make_loss("logistic_labelwise")).tolist() == [[1, 0]]


def test_version_1_files_read_as_output_wise_models(tmp_path):
    X, Y = _data()
    est = RuleBoostClassifier(max_rules=6, loss="logistic_examplewise").fit(X, Y)
    path = tmp_path / "v1.json"
    est.save_model(path)
    doc = json.loads(path.read_text())
    for key in ("label_vectors", "label_vector_counts"):
        del doc[key]
    del doc["params"]["binary_predictor"]
    path.write_text(json.dumps({**doc, "version": 1}))
    back = RuleBoostClassifier().load_model(path)
    assert back.binary_predictor == "output-wise"
    np.testing.assert_array_equal(back.predict(X), (est.decision_function(X) > 0).astype(np.int8))


@pytest.mark.parametrize("params, message", [
    ({"shrinkage": 0.0}, "shrinkage"),
    ({"loss": "hinge"}, "loss"),
    ({"head_type": "partial"}, "head_type"),
    ({"feature_binning": "equal-width"}, "feature_binning"),
    ({"feature_binning": ("equal-depth", 8)}, "feature_binning"),
    ({"feature_sampling": 1.5}, "feature_sampling"),
    ({"max_rules": 0}, "max_rules"),
    ({"device": "cpu"}, "set feature_binning"),
    ({"precision": "single"}, "precision"),
    ({"binary_predictor": "gfm"}, "binary_predictor"),
])
def test_bad_parameters_are_named(params, message):
    X, Y = _data()
    with pytest.raises(ValueError, match=message):
        RuleBoostClassifier(**params).fit(X, Y)


def test_bad_targets_and_shapes_are_refused():
    X, Y = _data()
    with pytest.raises(ValueError, match="2-D 0/1 label indicator"):
        RuleBoostClassifier().fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="only 0 and 1"):
        RuleBoostClassifier().fit(X, Y * 2)
    with pytest.raises(ValueError, match="rows"):
        RuleBoostClassifier().fit(X[:-1], Y)
    est = RuleBoostClassifier(max_rules=3).fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :-1])
    with pytest.raises(ValueError, match="not fitted"):
        RuleBoostClassifier().predict(X)
    with pytest.raises(ValueError, match="no probability model"):
        RuleBoostClassifier(max_rules=3, loss="squared_error").fit(X, Y).predict_proba(X)
    assert est.predict(X[:0]).shape == (0, Y.shape[1])


@pytest.mark.parametrize("labels", [np.arange(7), np.array([1, 4, 5])])
def test_default_rule_sums_from_gradients_alone_are_the_packed_hessians_sums(labels):
    """A device fit of complete heads over the example-wise loss keeps only the gradients (no n x L(L+1)/2
    Hessians): the default rule's column sums built from them are ``head.gather(G, H).sum(axis=0)`` bit for bit."""
    from types import SimpleNamespace

    from mdhom.rules.heads import Head
    from mdhom.rules.induction import Learner
    from mdhom.rules.losses import make_loss

    rng = np.random.default_rng(4)
    loss = make_loss("logistic_examplewise")
    G, H = loss.statistics((rng.random((3001, 7)) < 0.3).astype(float), rng.normal(size=(3001, 7)))
    head = Head("complete", True, labels, 7, 0.0, 1.0)
    want = head.gather(G, H).sum(axis=0)
    got = Learner.column_sums(SimpleNamespace(G=G, H=None), head)
    assert got.tobytes() == want.tobytes()


def test_label_vectors_keep_the_order_of_first_occurrence_and_counts():
    Y = np.random.default_rng(2).random((500, 9)) < 0.2
    v = LabelVectors.of(Y)
    firsts = [int(np.flatnonzero((Y == row).all(axis=1))[0]) for row in v.vectors.astype(bool)]
    assert firsts == sorted(firsts) and len(set(map(bytes, v.vectors))) == len(v.vectors)
    assert v.counts.sum() == 500 and all(c == int((Y == r.astype(bool)).all(axis=1).sum())
                                         for r, c in zip(v.vectors, v.counts, strict=True))
