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


def test_bench_forests_refuses_unknown_anchor():
    with pytest.raises(ValueError, match="unknown anchor"):
        run_forests(ForestsConfig.quick_config(rows=500, test_rows=100, trees=1, device="numpy",
                                               anchors=("lightgbm",)), log=lambda _: None)
