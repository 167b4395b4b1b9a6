"""Holdout sets and global pruning (mlrl-boomer's early stopping and post-pruning) of RuleBoostClassifier: when it
stops and when not, which model size it keeps, the holdout splits, model files, devices and bad values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom import RuleBoostClassifier
from mdhom.learn import model_files
from mdhom.rules import pruning as P
from mdhom.rules.induction import InductionParams, Learner
from mdhom.rules.losses import make_loss
from mdhom.rules.model import FORMAT, RuleList

pytestmark = pytest.mark.filterwarnings("ignore::mdhom.configs.TunedConfigWarning")

FAST_PRE = "pre-pruning{min_rules=20,num_past=10,num_recent=10}"


def _noise(n=400, F=8, L=3, seed=0):
    """Labels independent of the features: every rule after the default rule fits noise."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, F)), (rng.random((n, L)) < 0.4).astype(np.int8)


def _signal(n=400, F=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    Y = np.stack([X[:, 0] > 0, X[:, 1] + X[:, 2] > 0.3, X[:, 3] < -0.2, rng.random(n) < 0.3], 1).astype(np.int8)
    return X, Y


def _holdout_losses(est, X, Y):
    """The mean holdout loss of the fitted model at every size it measured, recomputed from its rules."""
    held = est.holdout_indices_
    out = []
    for k in est.pruning_rules_:
        S = RuleList(est.rules_.default_scores, est.rules_.rules[: k - 1]).decision_function(X[held])
        out.append(P.example_losses(est.loss, Y[held].astype(float), S).mean())
    return np.array(out)


def test_pre_pruning_stops_on_noise_and_keeps_the_best_size():
    X, Y = _noise()
    est = RuleBoostClassifier(max_rules=300, global_pruning=FAST_PRE, random_state=1).fit(X, Y)
    assert est.n_induced_rules_ < 100  # stopped long before max_rules
    assert est.n_rules_ == len(est.rules_) + 1 <= est.n_induced_rules_
    # measured before every rule from the start (min_rules 20 = 10 past + 10 recent), the first 20 only buffered
    np.testing.assert_array_equal(est.pruning_rules_, np.arange(1, est.n_induced_rules_ + 1))
    best = 20 + int(np.argmin(est.pruning_loss_[20:]))
    assert est.n_rules_ == est.pruning_rules_[best]
    # the losses are the holdout set's (held out by 'auto': stratified, 0.33), following the model's rules
    assert est.holdout_indices_.size == int(np.float32(0.33) * np.float32(len(Y)))
    est_all = RuleBoostClassifier(max_rules=300, global_pruning=FAST_PRE.replace("}", ",remove_unused_rules=false}"),
                                  random_state=1).fit(X, Y)
    np.testing.assert_allclose(est_all.pruning_loss_[: est.pruning_loss_.size], est.pruning_loss_, rtol=0, atol=0)
    np.testing.assert_allclose(_holdout_losses(est_all, X, Y), est_all.pruning_loss_, rtol=1e-12)


def test_pre_pruning_does_not_stop_before_min_rules():
    X, Y = _noise()
    late = RuleBoostClassifier(max_rules=300, global_pruning=FAST_PRE.replace("20", "60"), random_state=1).fit(X, Y)
    assert late.n_rules_ >= 60 and late.n_induced_rules_ >= 60
    assert late.pruning_rules_[0] == 41  # measuring starts (10 + 10) rules before min_rules
    never = RuleBoostClassifier(max_rules=80, global_pruning=FAST_PRE.replace("20", "500"), random_state=1).fit(X, Y)
    assert never.n_induced_rules_ == never.n_rules_ == 80 and never.pruning_rules_.size == 0
    signal = RuleBoostClassifier(max_rules=120, global_pruning=FAST_PRE, random_state=1).fit(*_signal())
    assert signal.n_induced_rules_ > 60  # the loss still falls: no stop at the first chance


def test_post_pruning_keeps_the_size_of_least_loss():
    X, Y = _noise()
    spec = {"method": "post-pruning", "min_rules": 5, "interval": 3}
    est = RuleBoostClassifier(max_rules=60, global_pruning=spec, random_state=2).fit(X, Y)
    assert est.n_induced_rules_ == 60
    assert (est.pruning_rules_ >= 5).all() and (est.pruning_rules_ % 3 == 0).all()
    assert est.n_rules_ == est.pruning_rules_[np.argmin(est.pruning_loss_)] < 60
    assert len(est.rules_) == est.n_rules_ - 1
    kept = RuleBoostClassifier(max_rules=60, global_pruning={**spec, "remove_unused_rules": False},
                               random_state=2).fit(X, Y)
    assert len(kept.rules_) == 59 and kept.n_rules_ == est.n_rules_
    np.testing.assert_array_equal(kept.decision_function(X), est.decision_function(X))
    assert "not used for prediction" in str(kept.rules_)
    np.testing.assert_allclose(_holdout_losses(kept, X, Y), kept.pruning_loss_, rtol=1e-12)
    unreached = RuleBoostClassifier(max_rules=30, global_pruning={**spec, "min_rules": 31}, random_state=2).fit(X, Y)
    assert unreached.n_rules_ == unreached.n_induced_rules_ == 30 and unreached.pruning_rules_.size == 0


def _trace(spec, losses):
    """(size it stopped at or None, size it chose) of a GlobalPruning fed ``losses`` one per measurement."""
    gp = P.GlobalPruning(P.check_global_pruning(spec), "logistic_labelwise", np.zeros((1, 1)), np.arange(1))
    it = iter(losses)
    gp._measure = lambda n_rules, S: next(it)  # noqa: SLF001 - a scripted loss sequence
    used, n = 0, 0
    while True:
        n += 1
        try:
            stop, chosen = gp.test(n, None)
        except StopIteration:  # the sequence is over without a stop
            return None, used
        used = chosen or used
        if stop:
            return n, used


@pytest.mark.parametrize("aggregation", ["min", "max", "avg"])
def test_pre_pruning_follows_mlrl_boomers_buffers(aggregation):
    s = f"pre-pruning{{min_rules=10,num_past=4,num_recent=3,aggregation={aggregation},min_improvement=0.01}}"
    falling = list(1.0 / np.arange(1, 200))
    flat = [1.0] * 40
    # falling fast enough: (past - recent) / recent stays above 1%, so no stop while the sequence lasts
    assert _trace(s, falling[:20])[0] is None
    stop, used = _trace(s, [0.5, 0.4, 0.3, 0.2] + flat)
    # offset = 10 - 7 = 3: measured from size 4 on; the past buffer is full after 7 measurements (sizes 4 to 10),
    # so the tests start at size 11, and the best size is the first of least loss from there: 11 (all 1.0)
    agg = {"min": min, "max": max, "avg": np.mean}[aggregation]
    buf = [0.5, 0.4, 0.3, 0.2] + flat
    expect = None
    for i in range(7, len(buf)):  # measurement i (0-based) is size i + 4; past = i-7 .. i-4, recent = i-3 .. i-1
        past, recent = agg(buf[i - 7: i - 3]), agg(buf[i - 3: i])
        if (past - recent) / recent < 0.01:
            expect = i + 4
            break
    assert stop == expect and used == 11


def test_holdout_splits_are_deterministic_and_stratified():
    rng = np.random.default_rng(0)
    Y = (rng.random((600, 5)) < [0.05, 0.2, 0.5, 0.02, 0.3]).astype(np.int8)
    for method in P.HOLDOUTS:
        a = P.holdout_rows(Y, (method, 0.33), 7)
        assert np.array_equal(a, P.holdout_rows(Y, (method, 0.33), 7))
        assert not np.array_equal(a, P.holdout_rows(Y, (method, 0.33), 8))
        assert a.size == int(np.float32(0.33) * np.float32(600)) and np.all(np.diff(a) > 0)
    held = P.holdout_rows(Y, ("stratified-output-wise", 0.33), 7)
    share = Y[held].sum(axis=0) / Y.sum(axis=0)
    assert np.abs(share - 0.33).max() < 0.07, share  # rare labels too (random splits miss them by more)
    held = P.holdout_rows(Y, ("stratified-example-wise", 0.25), 7)
    vectors, inverse, counts = np.unique(Y, axis=0, return_inverse=True, return_counts=True)
    out = np.bincount(inverse.reshape(-1)[held], minlength=len(vectors))
    # mlrl-boomer's rounding gives the rare vectors' remainders to the training set and makes the last (largest)
    # strata take up the difference: within one row, or 3% of the large ones
    assert np.all(np.abs(out - 0.25 * counts) <= 1.0 + 0.03 * counts)


def test_output_wise_strata_take_the_rarest_label_first():
    Y = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 1], [0, 0, 0], [1, 1, 0], [0, 0, 1]])
    strata = P._output_wise_strata(Y)  # noqa: SLF001
    # labels 1 and 2 have 2 rows, 0 has 4: label 1 first (ties to the lower label); that leaves label 0 two rows
    # (1, 2), tied with label 2, so label 0 next; label 2's remaining row 5; the label-less row 3 last
    assert [s.tolist() for s in strata] == [[0, 4], [1, 2], [5], [3]]


def test_holdout_rows_take_no_part_in_the_search():
    """Held-out rows have weight 0 in every search: whatever their gradient statistics, the same rules grow."""
    X, Y = _signal()
    loss = make_loss("logistic_labelwise")
    p = InductionParams(max_rules=10, shrinkage=0.3, l1=0.0, l2=1.0, head_type="single", feature_sampling=None,
                        instance_sampling=0.8, label_sampling=None, max_conditions=0, min_coverage=1, seed=3,
                        holdout=("random", 0.33))
    held = P.holdout_rows(Y, p.holdout, p.seed)
    rules = []
    for scramble in (False, True):
        learner = Learner(X, Y.astype(float), loss, p, None, None, held)
        learner.default_rule()
        grown = []
        for _ in range(4):
            if scramble:  # statistics the held-out rows could not have
                rng = np.random.default_rng(len(grown))
                learner.G[held] = rng.normal(size=(held.size, Y.shape[1])) * 50
                learner.H[held] = rng.random((held.size, Y.shape[1])) * 50
            grown.append(learner.grow())
        rules.append(grown)
    for a, b in zip(*rules, strict=True):
        assert a.conditions == b.conditions and a.labels.tolist() == b.labels.tolist()
        np.testing.assert_array_equal(a.scores, b.scores)


def test_model_files_round_trip_and_stay_version_2_without_pruning(tmp_path):
    X, Y = _noise()
    plain = tmp_path / "plain.json"
    RuleBoostClassifier(max_rules=8).fit(X, Y).save_model(plain)
    doc = json.loads(plain.read_text())
    assert doc["version"] == 2 and "holdout" not in doc["params"] and "global_pruning" not in doc["params"]
    assert "global_pruning_result" not in doc and "n_used_rules" not in doc
    for spec, version in ((FAST_PRE, 2), ("post-pruning{min_rules=5,remove_unused_rules=false}", 3)):
        est = RuleBoostClassifier(max_rules=60, global_pruning=spec, holdout="stratified-example-wise:0.25",
                                  random_state=4).fit(X, Y)
        path = tmp_path / "m.json"
        est.save_model(path)
        doc = json.loads(path.read_text())
        assert doc["version"] == version and doc["params"]["holdout"] == ["stratified-example-wise", 0.25]
        assert doc["global_pruning_result"]["n_induced_rules"] == est.n_induced_rules_
        back = RuleBoostClassifier().load_model(path)
        for name in ("n_rules_", "n_induced_rules_"):
            assert getattr(back, name) == getattr(est, name)
        np.testing.assert_array_equal(back.pruning_rules_, est.pruning_rules_)
        np.testing.assert_array_equal(back.pruning_loss_, est.pruning_loss_)
        np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
        assert back.global_pruning == P.check_global_pruning(spec)
        back.save_model(tmp_path / "again.json")
        assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    # a reader of version 2 refuses the version 3 file (it would predict with every rule)
    with pytest.raises(ValueError, match="newer than this mdhom reads"):
        model_files.read_json(path, FORMAT, 2, "an mdhom rule model")
    good = json.loads(path.read_text())
    for change, message in [({"n_used_rules": 999}, "n_used_rules must be"),
                            ({"n_used_rules": True}, "n_used_rules must be"),
                            ({"global_pruning_result": {"n_induced_rules": 3, "rules": [1], "loss": []}},
                             "global_pruning_result"),
                            ({"params": {**good["params"], "global_pruning": {"method": "pre"}}}, "method")]:
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(ValueError, match=message):
            RuleBoostClassifier().load_model(path)


def test_pruned_models_are_the_same_on_every_device(tmp_path, device):
    X, Y = _noise(n=301)
    X[np.random.default_rng(2).random(X.shape) < 0.05] = np.nan
    docs = []
    for dev in ("numpy", device):
        for spec in ("pre-pruning{min_rules=12,num_past=4,num_recent=4,min_improvement=0.001}",
                     "post-pruning{min_rules=10,interval=2,remove_unused_rules=false}"):
            est = RuleBoostClassifier(max_rules=40, global_pruning=spec, feature_binning=("equal-width", 16),
                                      instance_sampling=0.8, random_state=5, device=dev,
                                      precision="double").fit(X, Y)
            assert est.n_rules_ < 40 and est.pruning_rules_.size > 5  # it stopped, or pruned
            est.save_model(tmp_path / "m.json")
            doc = json.loads((tmp_path / "m.json").read_text())
            doc["params"].pop("device")
            docs.append(json.dumps(doc, sort_keys=True))
    assert docs[:2] == docs[2:]


@pytest.mark.parametrize("params, message", [
    ({"global_pruning": "early"}, "global_pruning method must be"),
    ({"global_pruning": "pre-pruning{min_rules=0}"}, "min_rules must be at least 1"),
    ({"global_pruning": "pre-pruning{update_interval=2,stop_interval=3}"}, "multiple of update_interval"),
    ({"global_pruning": "pre-pruning{aggregation=median}"}, "aggregation must be one of"),
    ({"global_pruning": "post-pruning{num_past=3}"}, "post-pruning has no option num_past"),
    ({"global_pruning": "pre-pruning{min_improvement=2}"}, r"min_improvement must lie in \[0, 1\]"),
    ({"global_pruning": "pre-pruning{min_rules=50"}, "does not close"),
    ({"global_pruning": {"method": "pre-pruning", "min_rules": 2.5}}, "min_rules must be an integer"),
    ({"global_pruning": {"method": "pre-pruning", "use_holdout_set": "yes"}}, "use_holdout_set must be true"),
    ({"global_pruning": 3}, "global_pruning must be 'none'"),
    ({"holdout": "random:1.5"}, r"holdout_set_size must lie in \(0, 1\)"),
    ({"holdout": "bogus"}, "holdout must be 'auto', 'none' or one of"),
    ({"holdout": ("random", 0)}, r"holdout_set_size must lie in \(0, 1\)"),
    ({"holdout": "random{size=0.2}"}, "takes the option holdout_set_size only"),
    ({"holdout": ("random", 0.001)}, "holds out 0 of 400 examples"),
])
def test_bad_values_are_clear_errors(params, message):
    X, Y = _noise()
    with pytest.raises(ValueError, match=message):
        RuleBoostClassifier(max_rules=3, **params).fit(X, Y)


def test_mlrl_boomer_spellings_are_accepted():
    assert P.check_holdout("stratified-label-wise") == ("stratified-output-wise", 0.33)
    assert P.check_holdout("random{holdout_set_size=0.2}") == P.check_holdout(("random", 0.2)) == ("random", 0.2)
    assert P.check_holdout(None) == "none"
    got = P.check_global_pruning("pre-pruning{use_holdout_set=false,aggregation=min,num_recent=7}")
    assert got == {"method": "pre-pruning", **P.PRE_PRUNING, "use_holdout_set": False, "aggregation": "min",
                   "num_recent": 7}
    assert P.resolved_holdout("auto", got) is None  # measured on the training set: 'auto' holds nothing out
    assert P.resolved_holdout("auto", P.check_global_pruning("post-pruning")) == ("stratified-output-wise", 0.33)
    assert P.resolved_holdout("auto", "none") is None
