"""``mdhom bench forests`` end to end at a toy size: every system's row, ratios to mdhom, a failing anchor recorded."""

from __future__ import annotations

import json
import warnings

import pytest

from mdhom.bench.forests import ForestsConfig, format_table, run_forests


def test_bench_forests_reports_every_system(tmp_path):
    cfg = ForestsConfig.quick_config(rows=3000, test_rows=1000, trees=3, max_depth=4, device="cpu", threads=2,
                                     anchors=("sklearn",))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        report = run_forests(cfg, log=lambda _: None)
    rows = {r["system"]: r for r in report["results"]}
    assert rows["mdhom"]["status"] == "ok" and rows["sklearn"]["status"] == "ok", report["results"]
    assert rows["mdhom"]["fit_vs_mdhom"] == 1.0 and rows["sklearn"]["fit_vs_mdhom"] > 0
    assert 0.6 < rows["mdhom"]["auc"] <= 1.0 and 0.6 < rows["sklearn"]["auc"] <= 1.0
    table = format_table(report)
    assert "sklearn" in table and "3 trees" in table
    json.dumps(report)  # the report is JSON as written by --out
    # prediction timed twice (the first call builds mdhom's predictor), the walk and the fit's round trips named
    for r in rows.values():
        assert r["first_predict_s"] > 0 and r["predict_s"] > 0
    assert rows["mdhom"]["predict_path"] == "numpy"  # 1000 rows x 3 trees: below the device walk's threshold
    assert rows["mdhom"]["launches"] > 0 and 0 < rows["mdhom"]["syncs"] <= 7  # a read per level of depth 4, the bag's counts
    # (and on CPUs its weights, for the host's bag order)
    assert "numpy walk" in table


def test_bench_shape_predicts_on_the_device():
    """The bench's default shape (100k test rows x 50 or 500 trees) takes the device walk: its prediction figure
    measures the md_hom walk, not numpy's (the threshold moving above it would show here, not as seconds)."""
    from mdhom.forests.estimators import DEVICE_PREDICT_MIN

    cfg = ForestsConfig()
    assert cfg.test_rows * 50 >= DEVICE_PREDICT_MIN and cfg.test_rows * cfg.trees >= DEVICE_PREDICT_MIN


def test_forest_profile_splits_a_fit(device):
    """python -m mdhom.bench.forest_profile at a toy size: phases that add up to the fit, every level's call,
    kernel device seconds from the profiled fit, the same trees in both fits."""
    from mdhom.bench.forest_profile import PHASES, format_report, run_profile

    cfg = ForestsConfig(rows=3000, trees=3, max_depth=4, device=device.key, threads=2, anchors=())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        report = run_profile(cfg)
    timed = report["timed"]
    assert report["same_trees"] and set(PHASES) < set(timed["phases_s"])
    assert abs(sum(timed["phases_s"].values()) - timed["fit_s"]) < 1e-9
    calls = [c["call"] for c in timed["calls"]]
    assert calls.count("level") == 4 and calls.count("totals") == 1  # depth 4: the deepest level asks totals only
    assert calls[0] == "start" and timed["calls"][0]["slots"] == 3  # the bag: one root per tree
    assert sum(c["syncs"] for c in timed["calls"]) == timed["syncs"]
    assert "forest_histogram" in report["profiled"]["kernel_s"]
    assert "device seconds per kernel" in format_report(report)
    json.dumps(report)


def test_bench_forests_refuses_unknown_anchor():
    with pytest.raises(ValueError, match="unknown anchor"):
        run_forests(ForestsConfig.quick_config(rows=500, test_rows=100, trees=1, device="numpy",
                                               anchors=("lightgbm",)), log=lambda _: None)


def test_bench_ecc_reports_mdhom_and_sklearn():
    from mdhom.bench.chains import ChainsConfig, run_chains
    from mdhom.bench.chains import format_table as chains_table

    cfg = ChainsConfig.for_shape("mediamill", quick=True, rows=150, test_rows=60, features=10, labels=3, chains=2,
                                 trees=2, device="cpu", threads=2)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        report = run_chains(cfg, log=lambda _: None)
    rows = {r["system"]: r for r in report["results"]}
    assert rows["mdhom"]["status"] == "ok" and rows["sklearn"]["status"] == "ok", report["results"]
    assert 0 <= rows["mdhom"]["hamming_loss"] < 0.5 and rows["sklearn"]["fit_vs_mdhom"] > 0
    assert "mediamill-shaped" in chains_table(report) and "2 chains x 2 trees" in chains_table(report)
    json.dumps(report)
    with pytest.raises(ValueError, match="unknown --ecc shape"):
        ChainsConfig.for_shape("yeast")
