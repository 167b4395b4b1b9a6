"""The tree benchmark: its workload generator, its AUC, and ``mdhom bench trees --quick`` end to end."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from mdhom.bench import anchors
from mdhom.bench.trees import BLOCK_ROWS, TEST_STREAM, TreesConfig, make_higgs_like, roc_auc
from mdhom.cli import main


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:
        return False
    return True


# ------------------------------------------------------------------------------------------- workload


def test_workload_shapes_and_types():
    X, y = make_higgs_like(1000)
    assert X.shape == (1000, 28) and X.dtype == np.float32 and X.flags.c_contiguous
    assert y.shape == (1000,) and y.dtype == np.float32 and set(np.unique(y)) == {0.0, 1.0}
    assert np.isfinite(X).all()
    assert 0.45 < y.mean() < 0.6
    for features in (1, 3, 8, 13):
        Xf, yf = make_higgs_like(257, features=features)
        assert Xf.shape == (257, features) and np.isfinite(Xf).all() and 0.0 < yf.mean() < 1.0
    X0, y0 = make_higgs_like(0)
    assert X0.shape == (0, 28) and y0.shape == (0,)


def test_workload_is_higgs_shaped():
    X, _ = make_higgs_like(20_000)
    pt, eta, phi, btag, masses = X[:, 0:20:4], X[:, 1:20:4], X[:, 2:20:4], X[:, 3:20:4], X[:, 21:]
    assert (pt > 0).all() and np.median(pt) < pt.mean()  # positive, right-skewed
    assert np.abs(eta).max() <= 2.5 and abs(float(eta.mean())) < 0.05
    assert np.abs(phi).max() <= np.pi and np.unique(btag).tolist() == pytest.approx([0.0, 1.1, 2.2])
    assert (masses >= 0).all() and masses.shape[1] == 7


def test_workload_deterministic_and_streams_differ():
    a = make_higgs_like(3000, seed=7)
    b = make_higgs_like(3000, seed=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(make_higgs_like(3000, seed=8)[0], a[0])
    assert not np.array_equal(make_higgs_like(3000, seed=7, stream=TEST_STREAM)[0], a[0])


def test_workload_chunks_equal_one_shot():
    rows = BLOCK_ROWS + 1234  # crosses a block boundary, ends mid-block
    X, y = make_higgs_like(rows, seed=3, nan_fraction=0.02)
    cuts = [0, 17, 5000, BLOCK_ROWS - 1, BLOCK_ROWS + 1, rows]
    parts = [
        make_higgs_like(hi - lo, seed=3, nan_fraction=0.02, start=lo)
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), X)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), y)
    Xt, yt = make_higgs_like(rows, seed=3, nan_fraction=0.02, threads=2)
    np.testing.assert_array_equal(Xt, X)
    np.testing.assert_array_equal(yt, y)


def test_workload_nan_fraction():
    X, _ = make_higgs_like(20_000, nan_fraction=0.05)
    assert 0.045 < np.isnan(X).mean() < 0.055
    with pytest.raises(ValueError):
        make_higgs_like(10, nan_fraction=1.0)


def test_workload_signal_is_learnable_but_not_linear():
    """A boosted tree model must beat a linear one clearly: the signal is learnable and nonlinear."""
    pytest.importorskip("sklearn")
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    X, y = make_higgs_like(10_000, seed=1)
    Xt, yt = make_higgs_like(10_000, seed=1, stream=TEST_STREAM)
    with threadpool_limits(1):  # OpenMP spin-waiting on a loaded 2-core CI box costs 40x
        trees = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(X, y)
        linear = LogisticRegression(max_iter=500).fit(X, y)
    auc_trees = roc_auc(yt, trees.predict_proba(Xt)[:, 1])
    auc_linear = roc_auc(yt, linear.predict_proba(Xt)[:, 1])
    assert auc_trees > 0.75
    assert auc_trees > auc_linear + 0.05


# ------------------------------------------------------------------------------------------------ AUC


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_roc_auc_matches_sklearn(seed):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    n = 2001
    y = rng.integers(0, 2, n)
    continuous = rng.normal(size=n) + 0.7 * y
    tied = np.round(continuous)  # many ties: averaged ranks matter
    for scores in (continuous, tied, np.zeros(n)):
        assert roc_auc(y, scores) == pytest.approx(metrics.roc_auc_score(y, scores), abs=1e-12)
    labels = np.where(y == 1, 1, -1)  # any two label values; the larger is positive
    assert roc_auc(labels, continuous) == pytest.approx(metrics.roc_auc_score(labels, continuous), abs=1e-12)
    assert roc_auc(y.astype(bool), continuous.astype(np.float32)) == pytest.approx(
        metrics.roc_auc_score(y, continuous.astype(np.float32)), abs=1e-12
    )


def test_roc_auc_extremes_and_errors():
    assert roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert roc_auc([0, 0, 1, 1], [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    with pytest.raises(ValueError, match="two classes"):
        roc_auc([1, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="NaN"):
        roc_auc([0, 1], [0.1, np.nan])
    with pytest.raises(ValueError):
        roc_auc([0, 1, 1], [0.1, 0.2])


# ------------------------------------------------------------------------------------ system choice


def test_select_explicit_and_aliases():
    chosen = anchors.select(["lightgbm", "xgboost-cpu", "xgboost", "none"])
    assert [s.name for s in chosen] == ["mdhom", "lightgbm-cpu", "xgboost-cpu"]
    assert [s.name for s in anchors.select(["none"], include_mdhom=False)] == []
    with pytest.raises(ValueError, match="unknown anchor 'catboost'"):
        anchors.select(["catboost"])


def test_select_default_lists_cpu_anchors_and_gpu_ones_only_with_a_gpu():
    names = [s.name for s in anchors.select(None)]
    assert names[:3] == ["mdhom", "lightgbm-cpu", "lightgbm-opencl"] or names[:2] == ["mdhom", "lightgbm-cpu"]
    assert "xgboost-cpu" in names
    if not anchors.gpu_visible():
        assert "lightgbm-opencl" not in names and "xgboost-cuda" not in names


def test_unavailable_system_is_reported_not_raised():
    system = anchors.XGBoostCUDA()
    if system.reason is None:
        pytest.skip("CUDA XGBoost and a GPU are present: nothing unavailable to report")
    result = system.run(np.zeros((4, 2), np.float32), np.zeros(4), None, None, TreesConfig.quick_config())
    assert result["status"] == "unavailable" and result["reason"]


def test_failing_system_is_recorded(monkeypatch):
    class Broken(anchors.System):
        name = "broken"

        def _run(self, X, y, Xt, yt, cfg):
            raise RuntimeError("kernel exploded")

    result = Broken().run(None, None, None, None, None)
    assert result["status"] == "failed" and "RuntimeError: kernel exploded" in result["reason"]
    assert result["traceback"]


# ------------------------------------------------------------------------------------------ end to end


def test_bench_trees_quick_end_to_end(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = main(["bench", "trees", "--quick", "--threads", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["benchmark"] == "trees" and report["parameters"]["quick"] is True
    assert report["parameters"]["rows"] == 20_000 and report["parameters"]["rounds"] == 5
    assert report["workload"]["train_rows"] == 20_000 and report["machine"]["cores_usable"] >= 1
    results = {r["system"]: r for r in report["results"]}
    assert list(results)[0] == "mdhom"
    expected = {"lightgbm-cpu": "lightgbm", "xgboost-cpu": "xgboost"}
    if anchors.gpu_visible():
        expected.update({"lightgbm-opencl": "lightgbm"})
    for system, module in expected.items():
        r = results[system]
        if not _importable(module):
            assert r["status"] == "unavailable" and module in r["reason"]
            continue
        assert r["status"] == "ok", r.get("reason")
        assert r["version"] == report["versions"][module]
        assert len(r["round_seconds"]) == 5 and all(t > 0 for t in r["round_seconds"])
        assert r["round_median_seconds"] == pytest.approx(float(np.median(r["round_seconds"][1:])))
        assert r["test_auc"] > 0.7  # 20k rows, 5 rounds of 15 leaves on a learnable signal
        assert system in printed
    mdhom = results["mdhom"]
    has_estimator = any(
        _importable(m) and hasattr(importlib.import_module(m), "TreeBoostClassifier") for m in ("mdhom", "mdhom.trees")
    )
    if has_estimator:
        assert mdhom["status"] == "ok", mdhom.get("reason")
        assert mdhom["test_auc"] > 0.7 and mdhom["ratio_to_mdhom"] == pytest.approx(1.0)
        for r in report["results"]:
            if r["status"] == "ok":
                assert r["ratio_to_mdhom"] == pytest.approx(r["round_median_seconds"] / mdhom["round_median_seconds"])
    else:
        assert mdhom["status"] == "unavailable" and "TreeBoostClassifier" in mdhom["reason"]
        assert all(r["ratio_to_mdhom"] is None for r in report["results"])
    assert code == (1 if any(r["status"] == "failed" for r in report["results"]) else 0)


def test_bench_trees_rejects_unknown_anchor(tmp_path, capsys):
    assert main(["bench", "trees", "--quick", "--anchors", "catboost", "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown anchor" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_isolated_worker_matches_in_process(tmp_path):
    """A system in its own process regenerates identical data: same AUC as in-process, bit for bit."""
    pytest.importorskip("xgboost")
    from mdhom.bench.trees import _run_isolated, run_trees

    config = TreesConfig.quick_config(anchors=["xgboost-cpu"], threads=1)
    isolated = _run_isolated("xgboost-cpu", config)
    assert isolated["status"] == "ok", isolated.get("reason")
    assert isolated["workload"]["positive_fraction"] > 0.4
    report = run_trees(TreesConfig.quick_config(anchors=["xgboost-cpu"], threads=1), log=lambda _: None)
    in_process = next(r for r in report["results"] if r["system"] == "xgboost-cpu")
    assert in_process["test_auc"] == isolated["test_auc"]
    assert isolated["workload"]["positive_fraction"] == report["workload"]["positive_fraction"]


def test_isolated_worker_failure_is_recorded():
    from mdhom.bench.trees import _run_isolated

    result = _run_isolated("no-such-system", TreesConfig.quick_config())
    assert result["status"] == "failed" and "KeyError" in result["reason"]
