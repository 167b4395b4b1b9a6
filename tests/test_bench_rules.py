"""``mdhom bench rules`` and ``rules-quality``'s parts: the synthetic multi-label workload, the mlrl-boomer
parameter spelling, the profiled rule fit on every device, and ``--quick`` end to end (mlrl-boomer not needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom.bench import boomer, rules
from mdhom.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::mdhom.configs.TunedConfigWarning")


def test_workload_is_seeded_and_shaped_like_mediamill():
    X, Y, Xt, Yt = rules.make_multilabel(3000, 40, 25, seed=3, test_rows=700)
    assert X.shape == (3000, 40) and Y.shape == (3000, 25) and Xt.shape == (700, 40) and Yt.shape == (700, 25)
    assert X.dtype == np.float32 and Y.dtype == np.uint8
    again = rules.make_multilabel(3000, 40, 25, seed=3, test_rows=700)
    assert all(np.array_equal(a, b) for a, b in zip((X, Y, Xt, Yt), again, strict=True))
    freq = Y.mean(axis=0)
    assert freq[0] > 0.5 and freq[-1] < 0.05 and freq[0] > freq[5] > freq[-1]  # power-law label frequencies
    assert not np.array_equal(rules.make_multilabel(3000, 40, 25, seed=4)[1], Y)
    with pytest.raises(ValueError, match="rows"):
        rules.make_multilabel(0, 4, 2)


def test_boomer_parameters_spell_mdhoms_settings():
    p = boomer.boomer_params({"loss": "logistic_examplewise", "head_type": "complete", "max_rules": 20,
                              "feature_sampling": None, "feature_binning": ("equal-width", 16), "max_conditions": 3,
                              "random_state": 0}, threads=0)
    assert p["loss"] == "logistic-non-decomposable" and p["head_type"] == "complete" and p["max_rules"] == 20
    assert p["feature_sampling"] == "none" and p["feature_binning"] == "equal-width{min_bins=16,max_bins=16}"
    assert p["rule_induction"] == "top-down-greedy{max_conditions=3}" and p["random_state"] == 1
    assert p["label_binning"] == "equal-width{bin_ratio=0.04,min_bins=1,max_bins=0}"  # 'auto': mlrl-boomer's choice
    assert p["statistic_type"] == "64-bit" and p["holdout"] == "none"
    assert boomer.boomer_params({**boomer.SETTINGS["examplewise-complete-unbinned"]})["label_binning"] == "none"
    assert boomer.boomer_params({**boomer.SETTINGS["labelwise-single"]})["label_binning"] == "none"
    assert p["parallel_rule_refinement"] == "true{num_preferred_threads=0}"
    own = boomer.boomer_params({"max_rules": 5}, same_as_mdhom=False)
    assert own["feature_sampling"] == "without-replacement" and "feature_binning" not in own
    assert "label_binning" not in own and "statistic_type" not in own
    assert boomer.boomer_params({"feature_sampling": 0.25})["feature_sampling"] == \
        "without-replacement{sample_size=0.25}"


def test_multilabel_scores():
    Y = np.array([[1, 0, 1], [0, 0, 1]])
    P = np.array([[1, 1, 0], [0, 0, 1]])
    got = boomer.multilabel_scores(P, Y)
    assert got["hamming"] == pytest.approx(2 / 6) and got["micro_f1"] == pytest.approx(4 / 6)
    assert got["subset_accuracy"] == 0.5


def test_profiled_rule_fit_splits_a_rules_time(device):
    from mdhom import RuleBoostClassifier
    from mdhom.bench.profile import format_profile, summarize

    X, Y, _, _ = rules.make_multilabel(600, 8, 4, seed=1)
    with rules.record_rules() as recorder:
        est = RuleBoostClassifier(max_rules=5, head_type="single", feature_binning=("equal-width", 8),
                                  device=device).fit(X, Y)
    profile = {"status": "ok", **summarize(list(est.rule_times_), recorder.rounds())}
    m = profile["mean_per_round"]
    assert profile["rounds_profiled"] == len(est.rules_)
    # a refinement step's fused histogram (quantized on GPUs by default)
    hist = "rule_histogram_q" if est.precision_ == "quantized" else "rule_histogram"
    # a rule's steps go to the device in batches (best_batch), one step at a time where a batch would not pay
    assert hist in m["kernels"] and {"best", "best_batch"} & set(m["backend_calls"])
    assert 0 < m["kernel_total_seconds"] < m["wall_seconds"]
    assert "s/rule" in format_profile(profile, None, "mdhom", "rule")


@pytest.mark.parametrize("installed", [True, False])
def test_bench_rules_quick_end_to_end(tmp_path, capsys, monkeypatch, installed):
    if not installed:  # as on a machine without mlrl-boomer
        monkeypatch.setattr(rules, "boomer_version", lambda: None)
    elif boomer.boomer_version() is None:
        pytest.skip("mlrl-boomer is not installed (pip install mlrl-boomer; 0.12.3 on Python 3.11)")
    out = tmp_path / "rules.json"
    assert main(["bench", "rules", "--quick", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    text = capsys.readouterr().out
    assert report["benchmark"] == "rules" and report["parameters"]["quick"] is True
    systems = {(r["setting"], r["system"]): r for r in report["results"]}
    for setting in ("labelwise-single", "examplewise-complete"):
        r = systems[(setting, "mdhom")]
        assert r["status"] == "ok" and r["seconds_per_rule"] > 0 and 0 <= r["hamming"] < 0.5
        assert 1 < r["rules"] <= report["parameters"]["rules"]
        # the marginal figure: the fit of n rules less the default rule's fit, over the n - 1 rules after it
        assert 0 < r["default_rule_fit_seconds"] and 0 < r["warm_fit_seconds"]
        diff = (r["warm_fit_seconds"] - r["default_rule_fit_seconds"]) / (r["rules"] - 1)
        assert (r["marginal_seconds_per_rule"] == pytest.approx(diff)) if diff > 0 else \
            r["marginal_seconds_per_rule"] is None
    assert "marginal" in text
    if installed:
        assert report["anchors"].startswith("mlrl-boomer 0.")
        assert systems[("labelwise-single", "mlrl-boomer (its defaults)")]["status"] == "ok"
        anchor = systems[("examplewise-complete", "mlrl-boomer (mdhom's settings)")]
        ours = systems[("examplewise-complete", "mdhom")]["marginal_seconds_per_rule"]
        assert "ratio_to_mdhom" in anchor
        if anchor["marginal_seconds_per_rule"] is not None and ours is not None:
            assert anchor["marginal_ratio_to_mdhom"] == pytest.approx(anchor["marginal_seconds_per_rule"] / ours)
        else:  # a tiny fit's difference lost in timing noise: no figure, no ratio
            assert "marginal_ratio_to_mdhom" not in anchor
    else:
        assert report["anchors"] == "mlrl-boomer not installed" and len(report["results"]) == 2
        assert "mlrl-boomer not installed" in text


def test_examplewise_complete_runs_on_the_device_beside_the_numpy_reference():
    """Complete heads of the example-wise loss (once refused on a device) run there, with a numpy-reference line
    that fits the same model (the same predictions)."""
    config = rules.RulesConfig.quick_config(settings=["examplewise-complete"], device="cpu", anchors=False)
    dev, ref = rules.run_rules(config, log=lambda _: None)["results"]
    assert dev["status"] == "ok" and dev["device"] != "numpy" and not dev["warnings"]
    assert ref["system"] == "mdhom, numpy reference" and ref["device"] == "numpy"
    assert (dev["hamming"], dev["micro_f1"]) == (ref["hamming"], ref["micro_f1"])


def test_bench_rules_refuses_bad_sizes(capsys):
    assert main(["bench", "rules", "--quick", "--rules", "1"]) == 2
    assert "--rules must be at least 2" in capsys.readouterr().err


def test_rules_sparse_quick_measures_both_input_forms(tmp_path):
    """``python -m mdhom.bench.rules_sparse --quick``: each fit in its own process, dense and CSR input giving the
    same model file, the memory figures present."""
    from mdhom.bench import rules_sparse

    out = tmp_path / "sparse.json"
    assert rules_sparse.main(["--quick", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "rules-sparse" and len(report["results"]) == 4
    for dense, sparse in zip(report["results"][::2], report["results"][1::2], strict=True):
        assert dense["form"] == "dense" and sparse["form"] == "sparse" and dense["bins"] == sparse["bins"]
        assert dense["model_sha"] == sparse["model_sha"] and dense["rules"] > 1
        assert sparse["input_mib"] < dense["input_mib"] and sparse["fit_seconds"] > 0


def test_rules_quality_reports_each_settings_parameters():
    """The quality report names the parameters of every setting it ran (once it printed the label-wise ones under
    every table), from a small run on emotions' split."""
    from shared_data import DATA

    from mdhom.bench import rules_quality

    config = rules_quality.QualityConfig(datasets=["emotions"], seeds=[1], max_rules=3, folder=str(DATA),
                                         settings=["labelwise-single", "examplewise-complete-unbinned"])
    report = rules_quality.run_quality(config, log=lambda _: None)
    settings = report["boomer_settings"]
    assert list(settings) == config.settings
    assert settings["examplewise-complete-unbinned"]["loss"] == "logistic-non-decomposable"
    assert settings["examplewise-complete-unbinned"]["head_type"] == "complete"
    assert settings["labelwise-single"]["loss"] == "logistic-decomposable"
    text = rules_quality.format_quality(report)
    assert text.count("mlrl-boomer settings for ") == 2 and [r["setting"] for r in report["results"]] == config.settings


def test_marginal_is_none_without_a_rule_after_the_default_or_a_positive_difference():
    assert rules._marginal(3.0, 1.0, 3) == {"default_rule_fit_seconds": 1.0, "marginal_seconds_per_rule": 1.0}
    assert rules._marginal(3.0, 1.0, 1)["marginal_seconds_per_rule"] is None
    assert rules._marginal(0.4, 0.5, 3)["marginal_seconds_per_rule"] is None  # noise on a tiny fit


def test_mdhom_marginal_fits_on_a_device_run_again_with_built_programs(device, monkeypatch):
    """On an OpenCL device the bench fits n rules (programs built), the default rule alone, then n rules again,
    and takes the marginal figure from the last two; numpy fits n rules and the default rule alone."""
    from mdhom import RuleBoostClassifier

    calls = []
    original = RuleBoostClassifier.fit

    def fit(self, X, Y, **kw):  # noqa: ANN001, ANN202
        calls.append(self.max_rules)
        return original(self, X, Y, **kw)

    monkeypatch.setattr(RuleBoostClassifier, "fit", fit)
    config = rules.RulesConfig.quick_config(settings=["labelwise-single"], device=device.key, anchors=False,
                                            numpy_line=False)
    data = rules.make_multilabel(config.rows, config.features, config.labels, 0, config.test_rows)
    r = rules._fit_mdhom(config, "labelwise-single", data)
    assert calls == [config.rules, 1, config.rules] and r["device"] != "numpy"
    diff = (r["warm_fit_seconds"] - r["default_rule_fit_seconds"]) / (r["rules"] - 1)
    # a fast device's few rules can cost less than the timing noise: then no figure rather than a negative one
    assert (r["marginal_seconds_per_rule"] == pytest.approx(diff)) if diff > 0 else r["marginal_seconds_per_rule"] is None
    calls.clear()
    rules._fit_mdhom(config, "labelwise-single", data, device="numpy")
    assert calls == [config.rules, 1]
