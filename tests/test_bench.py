"""The tree benchmark: its workload generator, its AUC, and ``mdhom bench trees --quick`` end to end."""

from __future__ import annotations

import importlib
import json
import os

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
    assert [s.name for s in anchors.select(["catboost"], include_mdhom=False)] == ["catboost-gpu"]
    with pytest.raises(ValueError, match="unknown anchor 'catboost-cpu'"):
        anchors.select(["catboost-cpu"])


def test_catboost_settings_follow_the_grow_policy():
    cfg = TreesConfig.quick_config()
    cfg.grow_policy, cfg.max_depth = "lossguide", None
    params = anchors.CatBoostGPU.params(anchors.CatBoostGPU.__new__(anchors.CatBoostGPU), cfg)
    assert params["grow_policy"] == "Lossguide" and params["max_leaves"] == cfg.leaves and params["depth"] == 16
    assert params["border_count"] == cfg.bins and params["bootstrap_type"] == "No"
    cfg.grow_policy = "depthwise"
    params = anchors.CatBoostGPU.params(anchors.CatBoostGPU.__new__(anchors.CatBoostGPU), cfg)
    assert params["grow_policy"] == "Depthwise" and "max_leaves" not in params
    assert params["depth"] == anchors.tree_shape(cfg)[1]


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
        if system == "lightgbm-opencl" and r["status"] == "unavailable":  # LightGBM reached no GPU: said why
            assert r["reason"] and r["platform_choice"]["platform"] is None
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


def test_repeats_take_turns_and_pair_the_runs(monkeypatch):
    """--repeats: the systems take turns, every other repeat in reverse; s/round is the median of a system's runs'
    medians, each anchor's runs are compared with mdhom's run by run, only the first run profiles, and a system that
    fails is reported as failed and not run again."""
    from mdhom.bench.trees import format_table, run_trees

    calls = []
    rounds = {"mdhom": [0.2, 1.0, 3.0, 2.0], "fast": [0.1, 0.5, 1.2, 1.5]}  # the runs' medians (round 1 left out)

    def system(name, fail_at=None):
        class Fake(anchors.System):
            def _run(self, X, y, Xt, yt, cfg):
                calls.append((self.name, cfg.profile_rounds))
                run = sum(1 for c in calls if c[0] == self.name)
                if run == fail_at:
                    raise RuntimeError("lost the device")
                median = rounds.get(self.name, rounds["fast"])[run]
                return {"round_seconds": [9.0, median, median], "test_auc": 0.8, "fit_seconds": 1.0}

        Fake.name = name
        return Fake()

    missing = anchors.XGBoostCUDA()
    missing.reason = "no CUDA here"
    monkeypatch.setattr(anchors, "select", lambda names, include_mdhom=True: [
        system("mdhom"), system("fast"), system("flaky", fail_at=2), missing])
    report = run_trees(TreesConfig.quick_config(repeats=3, profile_rounds=4), log=lambda _: None)
    assert [c[0] for c in calls] == ["mdhom", "fast", "flaky", "flaky", "fast", "mdhom", "mdhom", "fast"]
    assert [c[1] for c in calls if c[0] == "mdhom"] == [4, 0, 0]
    res = {r["system"]: r for r in report["results"]}
    assert [run["round_median_seconds"] for run in res["mdhom"]["repeats"]] == [1.0, 3.0, 2.0]
    assert res["mdhom"]["round_median_seconds"] == 2.0 and res["fast"]["round_median_seconds"] == 1.2
    assert res["fast"]["ratio_to_mdhom"] == pytest.approx(0.6)  # the ratio of the medians ...
    assert res["fast"]["paired_ratios"] == pytest.approx([0.5, 0.4, 0.75])  # ... and run by run
    assert res["fast"]["paired_ratio_median"] == pytest.approx(0.5)
    assert res["flaky"]["status"] == "failed" and res["flaky"]["reason"].startswith("run 2 of 3:")
    assert "lost the device" in res["flaky"]["reason"] and res["flaky"]["ratio_to_mdhom"] is None
    assert res["xgboost-cuda"]["status"] == "unavailable" and res["xgboost-cuda"]["reason"] == "no CUDA here"
    table = format_table(report)
    assert "repeats: 3 runs" in table and "vs mdhom run by run 0.5 0.4 0.75 (median 0.5)" in table
    from mdhom.bench.merge import merge_reports  # merged: each anchor still paired with its own report's mdhom

    merged = format_table(merge_reports([report, report], ["a.json", "b.json"]))
    assert merged.count("vs its own report's mdhom run by run 0.5 0.4 0.75") == 2


def test_bench_trees_rejects_unknown_anchor(tmp_path, capsys):
    assert main(["bench", "trees", "--quick", "--anchors", "catboost-cpu", "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown anchor" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_bench_trees_rejects_no_repeats(tmp_path, capsys):
    assert main(["bench", "trees", "--quick", "--repeats", "0", "--out", str(tmp_path / "x.json")]) == 2
    assert "--repeats must be positive, got 0" in capsys.readouterr().err
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


def test_bench_trees_quick_reports_the_mdhom_profile(tmp_path, capsys):
    """The profiled fit splits each round into kernels, launch + transfer and host work that add up."""
    out = tmp_path / "bench.json"
    code = main(["bench", "trees", "--quick", "--anchors", "none", "--out", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    mdhom = report["results"][0]
    if mdhom["status"] != "ok":
        pytest.skip(f"mdhom could not run here: {mdhom.get('reason')}")
    assert code == 0 and report["parameters"]["profile_rounds"] == 5
    profile = mdhom["profile"]
    assert profile["status"] == "ok", profile.get("reason")
    assert profile["rounds_profiled"] == 5 and profile["rounds_in_mean"] == 4 and len(profile["per_round"]) == 5
    # the histogram kernel's name follows the precision and the row mode: tree_histogram_q or tree_histogram_rows
    # where it is quantized (tree_histogram_rows on GPUs and CPUs by default), tree_histogram in double precision, or
    # tree_histogram_rows_real (CPUs by default)
    hist = {"tree_histogram", "tree_histogram_q", "tree_histogram_rows", "tree_histogram_rows_real"} & set(
        profile["per_round"][0]["kernel_seconds"])
    assert len(hist) == 1, profile["per_round"][0]["kernel_seconds"]
    hist = hist.pop()
    for r in profile["per_round"]:
        assert r["kernel_total_seconds"] > 0 and r["kernel_seconds"][hist] > 0
        assert r["kernel_total_seconds"] == pytest.approx(sum(r["kernel_seconds"].values()))
        parts = r["kernel_total_seconds"] + r["launch_transfer_seconds"] + r["host_outside_backend_seconds"]
        assert parts == pytest.approx(r["wall_seconds"], rel=1e-9)
        assert r["remainder_seconds"] == pytest.approx(r["wall_seconds"] - r["kernel_total_seconds"])
        starts = r["backend_calls"].get("compute_gradients", 0) + r["backend_calls"].get("set_gradients", 0)
        assert starts == 1 and r["kernel_calls"][hist] >= 1
        assert r["launch_transfer_seconds"] >= 0 and r["host_outside_backend_seconds"] >= 0
    mean = profile["mean_per_round"]
    steady = profile["per_round"][1:]
    assert mean["wall_seconds"] == pytest.approx(float(np.mean([r["wall_seconds"] for r in steady])))
    assert sum(k["seconds"] for k in mean["kernels"].values()) == pytest.approx(mean["kernel_total_seconds"])
    assert "mdhom profile" in printed and f"kernel {hist}" in printed and "launch + transfer" in printed
    # bandwidth: the bytes the histogram must read (every row of the root once, each round) and a copy's rate
    n_rows, n_feat = report["workload"]["train_rows"], report["workload"]["features"]
    assert mean["kernels"][hist]["bytes"] >= n_rows * (n_feat + 8)
    assert profile["copy_bytes_per_second"] > 0 and "of a copy" in printed
    # the histogram's largest launch: the root's, every row read (bins and (g, h)), within the round's bytes and
    # time of that kernel, the same size every round
    big = mean["kernels"][hist]["largest"]
    assert big["bytes"] >= n_rows * (n_feat + 8) and big["seconds"] > 0
    assert big["bytes"] <= mean["kernels"][hist]["bytes"] and big["seconds"] <= mean["kernels"][hist]["seconds"]
    assert all(r["kernel_largest"][hist][0] == big["bytes"] for r in steady)
    assert f"its largest launch: {big['bytes'] / 1e6:.4g} MB" in printed
    # the timed run ran without profiling: its rounds are not the profiled ones
    assert len(mdhom["round_seconds"]) == 5


# ------------------------------------------------------------------------------- LightGBM OpenCL probe

_POCL_LOG = [
    "[LightGBM] [Info] This is the GPU trainer!!",
    "[LightGBM] [Info] Using requested OpenCL platform {p} device 0",
    "[LightGBM] [Info] Using GPU Device: cpu-skylake-avx512-Intel(R) Xeon(R) Processor, Vendor: The pocl project",
]
_H200_LOG = [
    "[LightGBM] [Info] Using requested OpenCL platform {p} device 0",
    "[LightGBM] [Info] Using GPU Device: NVIDIA H200, Vendor: NVIDIA Corporation",
    "[LightGBM] [Info] Compiling OpenCL Kernel with 64 bins...",
]


class FakeTrainer:
    """LightGBM's log per platform id, as the loader on the GPU machine would number them."""

    def __init__(self, logs):
        self.logs = logs
        self.calls = []

    def __call__(self, p):
        self.calls.append(p)
        log = self.logs.get(p)
        if isinstance(log, Exception):
            raise log
        if log is None:  # an id LightGBM does not know: it falls back to its default device, unannounced
            log = [ln for ln in self.logs.get("default", _POCL_LOG) if "requested" not in ln]
        return [ln.format(p=p) for ln in log]


@pytest.fixture
def probe_cache():
    from mdhom.bench import lightgbm_gpu

    lightgbm_gpu.clear_cache()
    yield lightgbm_gpu
    lightgbm_gpu.clear_cache()


def test_parse_log():
    from mdhom.bench.lightgbm_gpu import parse_log

    lines = [ln.format(p=2) for ln in _H200_LOG]
    assert parse_log(lines, 2) == (True, "NVIDIA H200")
    assert parse_log(lines, 1) == (False, "NVIDIA H200")  # confirmed for another id only
    assert parse_log(["[LightGBM] [Fatal] No OpenCL device found"], 0) == (False, None)


def test_probe_skips_cpu_platforms_and_stops_at_the_gpu(probe_cache):
    trainer = FakeTrainer({0: _POCL_LOG, 1: RuntimeError("clGetDeviceIDs failed"), 2: _H200_LOG, 3: _H200_LOG})
    choice = probe_cache.choose_platform("NVIDIA H200", range(5), trainer)
    assert choice.platform == 2 and choice.confirmed and choice.device_name == "NVIDIA H200"
    assert trainer.calls == [0, 1, 2]  # the first match ends the probe
    assert [t["platform"] for t in choice.tried] == [0, 1, 2]
    assert choice.tried[0]["device"].startswith("cpu-skylake") and "clGetDeviceIDs" in choice.tried[1]["error"]
    assert choice.reason is None


def test_probe_prefers_a_confirmed_id_over_the_default_fallback(probe_cache):
    # ids 0..1 unknown to LightGBM: it silently uses its default device, which is the GPU; id 2 confirms it
    trainer = FakeTrainer({"default": _H200_LOG, 2: _H200_LOG})
    choice = probe_cache.choose_platform("nvidia  h200", range(4), trainer)
    assert choice.platform == 2 and choice.confirmed
    only_fallback = probe_cache.choose_platform("NVIDIA H200", range(2), FakeTrainer({"default": _H200_LOG}))
    assert only_fallback.platform == 0 and not only_fallback.confirmed


def test_probe_without_a_match_reports_why(probe_cache):
    trainer = FakeTrainer({0: _POCL_LOG, 1: ["[LightGBM] [Fatal] No OpenCL device found"]})
    choice = probe_cache.choose_platform("NVIDIA H200", range(3), trainer)
    assert choice.platform is None and trainer.calls == [0, 1, 2]
    assert "NVIDIA H200" in choice.reason and "cpu-skylake" in choice.reason and "--lightgbm-platform" in choice.reason
    assert "No OpenCL device found" in choice.tried[1]["error"]


def test_probe_is_cached_per_process(probe_cache):
    trainer = FakeTrainer({0: _POCL_LOG, 1: _H200_LOG})
    first = probe_cache.probe_lightgbm_platform(target="NVIDIA H200", n_candidates=3, trainer=trainer)
    again = probe_cache.probe_lightgbm_platform(target="NVIDIA H200", n_candidates=3, trainer=trainer)
    assert first is again and first.platform == 1 and trainer.calls == [0, 1]


def test_probe_without_a_target_looks_for_mdhoms_gpu():
    """``target=None`` means the first OpenCL GPU mdhom's own device discovery lists; with none there is nothing
    to probe. (This test expected "no OpenCL GPU" and so failed on the GPU machine.)"""
    from mdhom import devices
    from mdhom.bench import lightgbm_gpu

    gpu = lightgbm_gpu.target_gpu_name()
    assert gpu == next((d.name for d in devices() if d.type == "gpu" and not d.checker), None)
    lightgbm_gpu.clear_cache()
    try:
        nothing = FakeTrainer({})  # LightGBM reaches only a CPU runtime, whatever the id
        choice = lightgbm_gpu.probe_lightgbm_platform(target=None, n_candidates=3, trainer=nothing)
        assert lightgbm_gpu.probe_lightgbm_platform(target=None, n_candidates=3, trainer=nothing) is choice
    finally:
        lightgbm_gpu.clear_cache()
    assert choice.platform is None
    if gpu is None:
        assert "no OpenCL GPU" in choice.reason and nothing.calls == []
    else:
        assert choice.target == gpu and nothing.calls == [0, 1, 2] and gpu in choice.reason


@pytest.mark.parametrize("gpu", [None, "NVIDIA H200"])
def test_probe_without_a_target_either_way(probe_cache, monkeypatch, gpu):
    """Both branches of the test above, whatever this machine has."""
    monkeypatch.setattr(probe_cache, "target_gpu_name", lambda: gpu)
    nothing = FakeTrainer({})
    choice = probe_cache.probe_lightgbm_platform(target=None, n_candidates=3, trainer=nothing)
    assert choice.platform is None and choice.target == gpu
    if gpu is None:
        assert "no OpenCL GPU" in choice.reason and nothing.calls == []
    else:
        assert nothing.calls == [0, 1, 2] and gpu in choice.reason and "cpu-skylake" in choice.reason


def test_lightgbm_opencl_unavailable_rather_than_timed_on_a_cpu(monkeypatch, probe_cache):
    system = anchors.LightGBMOpenCL()
    if system.reason is not None:
        pytest.skip(system.reason)
    no_gpu = probe_cache.PlatformChoice(None, None, "NVIDIA H200", reason="ran on no device named like it")
    monkeypatch.setattr(probe_cache, "probe_lightgbm_platform", lambda device=0: no_gpu)
    monkeypatch.setattr(anchors.LightGBM, "_run", lambda *a: pytest.fail("must not train"))
    result = system.run(None, None, None, None, TreesConfig.quick_config())
    assert result["status"] == "unavailable" and result["reason"] == no_gpu.reason
    assert result["platform_choice"]["target"] == "NVIDIA H200"

    gpu = probe_cache.PlatformChoice(3, "NVIDIA H200", "NVIDIA H200", confirmed=True)
    monkeypatch.setattr(probe_cache, "probe_lightgbm_platform", lambda device=0: gpu)
    seen = {}
    monkeypatch.setattr(anchors.LightGBM, "_run", lambda self, *a: seen.update(self.params(a[-1])) or {})
    assert system.run(None, None, None, None, TreesConfig.quick_config())["status"] == "ok"
    assert seen["gpu_platform_id"] == 3 and seen["gpu_device_id"] == 0 and seen["device_type"] == "gpu"


def test_lightgbm_platform_option_skips_the_probe(monkeypatch, probe_cache):
    system = anchors.LightGBMOpenCL()
    if system.reason is not None:
        pytest.skip(system.reason)
    monkeypatch.setattr(probe_cache, "probe_lightgbm_platform", lambda device=0: pytest.fail("must not probe"))
    seen = {}
    monkeypatch.setattr(anchors.LightGBM, "_run", lambda self, *a: seen.update(self.params(a[-1])) or {})
    cfg = TreesConfig.quick_config(lightgbm_platform=1, lightgbm_device=2)
    assert system.run(None, None, None, None, cfg)["status"] == "ok"
    assert seen["gpu_platform_id"] == 1 and seen["gpu_device_id"] == 2


def test_live_probe_reads_lightgbm_log_and_stops_early():
    """The real child process: LightGBM names the device it took, and the child is stopped right there."""
    pytest.importorskip("lightgbm")
    from mdhom.bench.lightgbm_gpu import DEVICE_LINE, parse_log, subprocess_trainer

    lines = subprocess_trainer(0, timeout=90)
    requested, device = parse_log(lines, 0)
    if device is None:
        assert any("OpenCL" in ln or "GPU" in ln for ln in lines), lines[-5:]
        pytest.skip(f"LightGBM found no OpenCL device here: {lines[-1:]}")
    assert DEVICE_LINE in lines[-1]  # nothing read after the device line: the child was stopped
    assert not any("GPU programs have been built" in ln for ln in lines)


# ------------------------------------------------------------------------------------------ grow policy


def test_tree_shape_and_system_parameters():
    cfg = TreesConfig.quick_config()
    assert cfg.grow_policy == "lossguide" and anchors.tree_shape(cfg) == ("lossguide", 0)
    assert anchors.tree_shape(TreesConfig(leaves=255, grow_policy="depthwise")) == ("depthwise", 8)
    assert anchors.tree_shape(TreesConfig(leaves=15, grow_policy="depthwise")) == ("depthwise", 4)
    with pytest.raises(ValueError, match="grow_policy"):
        anchors.tree_shape(TreesConfig(grow_policy="oblivious"))
    deep = TreesConfig.quick_config(grow_policy="depthwise")
    xgb = anchors.XGBoost.__new__(anchors.XGBoost)  # parameters only: no import, no probe
    assert xgb.params(deep)["grow_policy"] == "depthwise" and xgb.params(deep)["max_leaves"] == 15
    assert xgb.params(deep)["max_depth"] == 4 and xgb.params(cfg)["max_depth"] == 0
    lgb = anchors.LightGBM.__new__(anchors.LightGBM)
    assert lgb.params(deep)["max_depth"] == 4 and lgb.params(cfg)["max_depth"] == -1
    assert lgb.params(cfg)["num_leaves"] == 15 and "gpu_platform_id" not in lgb.params(cfg)
    mdhom = anchors.Mdhom()
    if mdhom.reason is None:
        params, dropped = mdhom.params(deep)
        assert params["grow_policy"] == "depthwise" and params["max_depth"] == 4 and params["max_leaves"] == 15
        assert not dropped


# --------------------------------------------------------------------------------------------- profile


class FakeBackend:
    """Stands in for OpenCLTreeKernels: ``profile`` and ``kernel_seconds`` and a few protocol calls."""

    def __init__(self):
        self.profile = False
        self.kernel_seconds = {}

    def _kernel(self, name, seconds):
        assert self.profile
        self.kernel_seconds[name] = self.kernel_seconds.get(name, 0.0) + seconds

    def compute_gradients(self, keep):
        self._kernel("tree_gradients", 0.125)

    def set_gradients(self, g, h):
        self._kernel("tree_gather_gh", 0.5)

    def histograms(self, nodes, transient=False):
        self._kernel("tree_histogram", 1.0 * len(nodes))
        return self.subtract(None, None)  # a nested backend call: counted once, under the outer call

    def subtract(self, a, b):
        self._kernel("tree_hist_subtract", 0.25)


def test_recorder_cuts_counters_at_round_starts(monkeypatch):
    from mdhom.bench.profile import record_fit, summarize
    from mdhom.trees import estimators

    original = estimators.make_kernels
    backend = FakeBackend()
    monkeypatch.setattr(estimators, "make_kernels", lambda device, precision: backend)
    with record_fit() as recorder:
        kern = estimators.make_kernels("fake", "double")
        for nodes in ([0], [0, 1, 2]):  # two rounds; a round starts with its gradients, one call or two
            kern.compute_gradients(None)
            if nodes == [0]:
                kern.set_gradients(None, None)
            kern.histograms(nodes)
            kern.subtract(None, None)
    assert estimators.make_kernels is not original and estimators.make_kernels("x", "y") is backend  # restored
    assert backend.profile is True and recorder.backend is backend
    rounds = recorder.rounds()
    assert len(rounds) == 2
    assert rounds[0]["kernel_seconds"] == {
        "tree_gradients": 0.125, "tree_gather_gh": 0.5, "tree_histogram": 1.0, "tree_hist_subtract": 0.5
    }
    assert rounds[1]["kernel_seconds"]["tree_histogram"] == 3.0 and "tree_gather_gh" not in rounds[1]["kernel_seconds"]
    assert rounds[1]["kernel_calls"] == {"tree_gradients": 1, "tree_histogram": 1, "tree_hist_subtract": 2}
    assert rounds[1]["call_counts"] == {"compute_gradients": 1, "histograms": 1, "subtract": 1}
    summary = summarize([10.0, 20.0], rounds)
    assert summary["rounds_in_mean"] == 1
    last = summary["per_round"][1]
    assert last["kernel_total_seconds"] == 3.625 and last["remainder_seconds"] == 16.375
    # the fake's kernels take no host time: their "device seconds" exceed the calls' host time
    assert last["launch_transfer_seconds"] < 0
    assert last["kernel_total_seconds"] + last["launch_transfer_seconds"] + last["host_outside_backend_seconds"] == (
        pytest.approx(20.0)
    )
    assert list(summary["mean_per_round"]["kernels"])[:2] == ["tree_histogram", "tree_hist_subtract"]


def test_recorder_reports_a_backend_without_profiling():
    from mdhom.bench.profile import record_fit
    from mdhom.trees import estimators

    with record_fit() as recorder:
        estimators.make_kernels("numpy", "double")
    assert recorder.backend is None and "NumpyKernels" in recorder.unsupported


def test_profile_times_every_round_call_of_the_backend_protocol():
    """The profile's backend calls are the TreeKernels protocol's, less its set-up: a call left out (as look_ahead
    was) puts its kernels' device time against no host time, and 'launch + transfer' went negative."""
    from mdhom.bench.profile import BACKEND_CALLS
    from mdhom.trees.backend import TreeKernels

    protocol = {name for name, v in vars(TreeKernels).items() if callable(v) and not name.startswith("_")}
    assert protocol - {"load", "bin_rows", "check_size", "kernel_configs"} == set(BACKEND_CALLS)


def test_format_profile_table():
    from mdhom.bench.profile import format_profile, summarize

    rounds = [
        {"kernel_seconds": {"tree_histogram": 0.002, "tree_split_score": 0.001}, "kernel_calls": {"tree_histogram": 3},
         "call_seconds": {"histograms": 0.004, "best_splits": 0.003}, "call_counts": {"histograms": 3}}
    ] * 3
    profile = {"status": "ok", **summarize([0.02, 0.01, 0.01], rounds)}
    text = format_profile(profile, unprofiled_median=0.008)
    assert "rounds 2..3" in text and "kernel tree_histogram" in text and "30.0%" in text  # 0.003 of 0.01
    assert "host outside the backend" in text and "0.008" in text
    assert format_profile({"status": "unavailable", "reason": "numpy"}).endswith("unavailable: numpy")


# ----------------------------------------------------------------------------------- split runs, merge


def test_no_mdhom_runs_only_the_anchors():
    from mdhom.bench.trees import run_trees
    from mdhom.cli import build_parser

    assert build_parser().parse_args(["bench", "trees", "--no-mdhom"]).include_mdhom is False
    assert build_parser().parse_args(["bench", "trees"]).include_mdhom is None
    report = run_trees(TreesConfig.quick_config(anchors=["none"], include_mdhom=False), log=lambda _: None)
    assert report["results"] == [] and report["parameters"]["include_mdhom"] is False


def _report(results, **params):
    base = {"rows": 100, "test_rows": 10, "features": 28, "leaves": 15, "bins": 63, "rounds": 5,
            "learning_rate": 0.1, "seed": 0, "nan_fraction": 0.0, "grow_policy": "lossguide", "threads": 2,
            "device": None, "precision": None}
    base.update(params)
    return {
        "benchmark": "trees", "date": "2026-11-20", "parameters": base,
        "workload": {"train_rows": base["rows"], "features": base["features"]},
        "machine": {"cpu": "Xeon", "cores_usable": 16, "gpus": ["NVIDIA H200"]},
        "versions": {"mdhom": "0.1", "xgboost": None}, "results": results,
    }


def _ok(system, seconds):
    return {"system": system, "status": "ok", "round_median_seconds": seconds, "first_round_seconds": seconds,
            "test_auc": 0.8, "ratio_to_mdhom": None}


def test_merge_reports_ratios_labels_and_checks():
    from mdhom.bench.merge import merge_reports

    anchors_part = _report([_ok("xgboost-cuda", 0.04), {"system": "lightgbm-opencl", "status": "unavailable",
                                                         "reason": "no GPU platform"}])
    mdhom_part = _report([_ok("mdhom", 0.02)], rounds=20, precision="single")
    mdhom_double = _report([_ok("mdhom", 0.05)], precision="double")
    mdhom_double["versions"]["xgboost"] = "3.4"
    merged = merge_reports([anchors_part, mdhom_part, mdhom_double], ["a.json", "b.json", "c.json"])
    labels = [r["label"] for r in merged["results"]]
    assert labels == ["xgboost-cuda", "lightgbm-opencl", "mdhom", "mdhom precision=double,rounds=5"]
    ratios = [r["ratio_to_mdhom"] for r in merged["results"]]
    assert ratios == [pytest.approx(2.0), None, pytest.approx(1.0), pytest.approx(2.5)]
    assert merged["results"][2]["run"]["rounds"] == 20 and merged["results"][2]["run"]["precision"] == "single"
    assert merged["results"][0]["source"] == "a.json" and merged["merge_warnings"] == []
    assert merged["versions"] == {"mdhom": "0.1", "xgboost": "3.4"}
    twice = merge_reports([merged], ["all.json"])  # a merged report merges again, keeping its labels
    assert [r["label"] for r in twice["results"]] == labels and twice["results"][3]["source"] == "c.json"
    same = merge_reports([mdhom_part, mdhom_part], ["b", "b2"])
    assert [r["label"] for r in same["results"]] == ["mdhom", "mdhom#2"]
    other = merge_reports([anchors_part, mdhom_part], ["a", "b"], baseline="xgboost-cuda")
    assert other["results"][2]["ratio_to_mdhom"] == pytest.approx(0.5)

    with pytest.raises(ValueError, match="workload leaves: 15 in a, 255 in b"):
        merge_reports([anchors_part, _report([_ok("mdhom", 1.0)], leaves=255)], ["a", "b"])
    elsewhere = _report([_ok("mdhom", 1.0)])
    elsewhere["machine"]["gpus"] = []
    with pytest.raises(ValueError, match="machine gpus"):
        merge_reports([anchors_part, elsewhere], ["a", "b"])
    forced = merge_reports([anchors_part, elsewhere], ["a", "b"], allow_mismatch=True)
    assert forced["merge_warnings"] and "gpus" in forced["merge_warnings"][0]
    old = _report([_ok("mdhom", 1.0)])
    del old["parameters"]["grow_policy"]  # written before --grow-policy existed: lossguide
    assert merge_reports([anchors_part, old], ["a", "b"])["merge_warnings"] == []
    with pytest.raises(ValueError, match="not a 'mdhom bench trees' report"):
        merge_reports([{"benchmark": "rules"}], ["r.json"])


def test_bench_merge_command(tmp_path, capsys):
    from mdhom.bench.trees import write_json

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_json(_report([_ok("xgboost-cuda", 0.04)]), a)
    write_json(_report([_ok("mdhom", 0.02)]), b)
    out = tmp_path / "all.json"
    assert main(["bench", "merge", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    merged = json.loads(out.read_text())
    assert [r["ratio_to_mdhom"] for r in merged["results"]] == [pytest.approx(2.0), pytest.approx(1.0)]
    assert "xgboost-cuda" in printed and "[2]" in printed and str(b) in printed
    write_json(_report([_ok("mdhom", 0.02)], bins=255), b)
    assert main(["bench", "merge", str(a), str(b)]) == 2
    assert "workload bins" in capsys.readouterr().err
    assert main(["bench", "merge", str(a), str(b), "--allow-mismatch"]) == 0
    assert "merge warning: workload bins" in capsys.readouterr().out


def test_bench_trees_option_ranges(tmp_path, capsys):
    """--profile-rounds 0 means no profiled fit (as its help says); a zero row or round count is an error."""
    out = tmp_path / "bench.json"
    code = main(["bench", "trees", "--quick", "--anchors", "none", "--profile-rounds", "0", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 0 and report["parameters"]["profile_rounds"] == 0
    assert "profile" not in report["results"][0] or report["results"][0]["profile"] is None
    for option in ("--rows", "--rounds"):
        assert main(["bench", "trees", "--quick", "--anchors", "none", option, "0", "--out", str(out)]) != 0
        assert "must be positive" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ report details


def test_versions_find_xgboost_under_its_cpu_distribution(monkeypatch):
    """XGBoost's CPU-only wheel is the distribution ``xgboost-cpu``: its version was reported as None."""
    import importlib.metadata as md
    import sys
    import types

    from mdhom.bench.trees import versions

    real = md.version

    def version(dist):
        if dist == "xgboost-cpu":
            return "3.2.0"
        if dist == "xgboost":
            raise md.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(md, "version", version)
    monkeypatch.delitem(sys.modules, "xgboost", raising=False)
    assert versions()["xgboost"] == "3.2.0"
    # once imported, the module itself says what ran
    monkeypatch.setitem(sys.modules, "xgboost", types.SimpleNamespace(__version__="3.2.1"))
    assert versions()["xgboost"] == "3.2.1"


def test_unavailable_anchor_reported_once(tmp_path, monkeypatch, capsys):
    """Why an anchor cannot run is said once, under the table (it was printed twice, and again below it)."""

    class Missing(anchors.System):
        name = "missing-anchor"

        def probe(self):
            return "cannot import missinglib: ModuleNotFoundError: No module named 'missinglib'"

    monkeypatch.setitem(anchors.ANCHORS, "missing-anchor", Missing)
    out = tmp_path / "bench.json"
    assert main(["bench", "trees", "--quick", "--rows", "500", "--test-rows", "100", "--no-mdhom",
                 "--anchors", "missing-anchor", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("No module named 'missinglib'") == 1, printed
    assert json.loads(out.read_text())["results"][0]["status"] == "unavailable"


# ------------------------------------------------------------------------------------------- memory


def test_bench_memory_quick_end_to_end(tmp_path, capsys):
    out = tmp_path / "mem.json"
    assert main(["bench", "memory", "--quick", "--devices", "numpy", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    (r,) = report["results"]
    assert report["benchmark"] == "memory" and r["status"] == "ok" and r["device"] == "numpy"
    assert r["growth_mib"] >= 0 and r["first_fit_growth_mib"] >= 0
    assert "RSS MiB" in capsys.readouterr().out


def test_issue_shape_trains_in_little_extra_memory_on_numpy():
    """Issue 11: a 20000 x 5000 CSR with 100k entries trains in well under 200 MB of extra memory. The dense
    uint8 bin matrix alone was 95 MiB (the fit peaked at 139 MiB); compressed rows of bins need 0.6 MB. Peak RSS
    growth of the fit in a fresh process, 2 trees, with a wide margin (measured: about 40 MiB)."""
    from mdhom.bench.memory import MemoryConfig, _run_child

    r = _run_child(MemoryConfig(rounds=2), "numpy", "double")
    assert r["status"] == "ok", r
    if r["peak_source"] != "VmHWM":
        pytest.skip("the peak RSS cannot be reset here (no /proc/self/clear_refs)")
    assert r["growth_mib"] < 80, r


def test_timeline_summary_is_the_union_of_kernel_intervals_per_round():
    from mdhom.bench.profile import format_profile, summarize, summarize_timeline

    s = 10**9  # device nanoseconds, at a realistic offset (the unit of OpenCL profiling timestamps)
    base = 1_700_000_000 * s
    rounds = [[(base, base + s)],  # round 1: skipped in the medians
              [(base + 10 * s, base + 11 * s), (base + 10 * s + s // 2, base + 12 * s), (base + 13 * s, base + 14 * s)],
              [(base + 20 * s, base + 21 * s), (base + 20 * s + s // 5, base + 20 * s + 2 * s // 5),
               (base + 22 * s, base + 23 * s)]]  # busy 3 of a 4 s span, then 2 of 3
    t = summarize_timeline([5.0, 5.0, 4.0], rounds)
    assert t["rounds"] == 3 and t["launches"] == 3
    assert t["busy_seconds"] == pytest.approx(2.5) and t["span_seconds"] == pytest.approx(3.5)
    assert t["wall_seconds"] == pytest.approx(4.5)
    profile = {"status": "ok", **summarize([5.0, 5.0, 4.0], [{"kernel_seconds": {"a": 1.0}, "call_seconds": {}}] * 3)}
    text = format_profile({**profile, "timeline": {"status": "ok", **t}})
    assert "device busy, unserialised fit" in text and "55.6%" in text  # 2.5 of 4.5
    assert "device busy" not in format_profile({**profile, "timeline": {"status": "failed", "reason": "x"}})
    assert "waits" not in t and "idle" not in text  # no kernel names: nothing to say where the device waits


def test_timeline_says_where_the_device_waits():
    """The idle time before each launch, summed per round by the kernel before it and its own, the largest by their
    mean over the rounds after the first: the gaps of a step's read-back and host work show before its first launch."""
    from mdhom.bench.profile import format_profile, summarize, summarize_timeline

    ms = 10**6
    base = 1_700_000_000 * 10**9

    def step(t0: int, gap: int) -> list[tuple[int, int, str]]:  # a step: sums, then (after the host's gap) a partition
        return [(t0, t0 + ms, "split"), (t0 + ms + gap, t0 + 2 * ms + gap, "partition")]

    rounds = [step(base, 50 * ms),  # round 1: skipped
              # round 2: 3 and 5 ms before the partitions, 5 between the steps; round 3: 1 and 1, then 7
              step(base + 100 * ms, 3 * ms) + step(base + 110 * ms, 5 * ms),
              step(base + 200 * ms, 1 * ms) + step(base + 210 * ms, 1 * ms)]
    t = summarize_timeline([0.05, 0.03, 0.03], rounds, waits=2)
    assert [w["pair"] for w in t["waits"]] == ["partition -> split", "split -> partition"]
    assert t["waits"][0]["seconds"] == pytest.approx(0.006) and t["waits"][0]["count"] == 1  # (5 + 7) / 2 ms
    assert t["waits"][1]["seconds"] == pytest.approx(0.005) and t["waits"][1]["count"] == 2  # (3 + 5 + 1 + 1) / 2
    assert len(summarize_timeline([0.05, 0.03, 0.03], rounds, waits=1)["waits"]) == 1
    profile = {"status": "ok", **summarize([0.05, 0.03, 0.03], [{"kernel_seconds": {}, "call_seconds": {}}] * 3)}
    text = format_profile({**profile, "timeline": {"status": "ok", **t}})
    assert "idle between" in text and "20.0%  partition -> split" in text and "16.7%  split -> partition" in text


def test_timeline_of_a_real_fit_runs_unserialised(device):
    """The timeline fit records its rounds' launches without turning profiling on (no waits per launch): every
    launch of a round but the fit's setup ones, each within the round's kernels' span."""
    from mdhom import TreeBoostClassifier
    from mdhom.bench.profile import record_timeline, summarize_timeline

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    with record_timeline() as recorder:
        model = TreeBoostClassifier(n_estimators=3, max_leaves=7, device=device).fit(X, y)
    backend = recorder.backend
    assert backend is not None and backend.profile is False and backend.timeline is None  # let go after the fit
    assert len(recorder.rounds) == 3 and not recorder.events
    in_rounds = sum(len(r) for r in recorder.rounds)
    assert 0 < in_rounds <= backend.launches and all(len(r) > 5 for r in recorder.rounds)
    for r in recorder.rounds:
        assert all(a <= b for a, b, _ in r)
        assert {name for _, _, name in r} >= {"tree_split_score", "tree_partition"}  # each launch's kernel named
    t = summarize_timeline(list(model.round_times_), recorder.rounds)
    assert t["rounds"] == 3 and 0 < t["busy_seconds"] <= t["span_seconds"]
    idle = sum(w["seconds"] for w in t["waits"])
    assert 0 <= idle <= t["span_seconds"] - t["busy_seconds"] + 1e-9 and len(t["waits"]) == 3
    # the kernels of a round run within it and the next (a GPU's round ends without waiting for its last kernels;
    # the next round's waits for them): its span is at most two rounds' wall time
    assert t["span_seconds"] <= 2 * max(model.round_times_) + 1e-3


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_host_probe_times_every_usable_cpu_and_restores_the_affinity(monkeypatch):
    """The loop runs pinned to each usable CPU in turn, one positive time each, and the thread's affinity is set back
    to what it was (a probe that left the bench pinned to one CPU would time every system on it); the table shows
    the spread."""
    from mdhom.bench import trees as bench_trees

    before = os.sched_getaffinity(0)
    calls = []
    real = os.sched_setaffinity
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: (calls.append(set(cpus)), real(pid, cpus)))
    probe = bench_trees.host_probe(loops=2_000)
    assert calls == [{c} for c in sorted(before)] + [before]
    assert os.sched_getaffinity(0) == before
    assert probe["cpus"] == len(before) and set(probe["per_cpu_ms"]) == {str(c) for c in before}
    assert all(t > 0 for t in probe["per_cpu_ms"].values())
    assert probe["min_ms"] <= probe["median_ms"] <= probe["max_ms"]
    report = {"parameters": {"leaves": 15, "bins": 63, "rounds": 5, "learning_rate": 0.1, "threads": 1},
              "workload": {"train_rows": 10, "features": 28}, "results": [], "machine": {"host_probe": probe}}
    assert f"across {probe['cpus']} CPUs" in bench_trees.format_table(report)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_host_probe_without_pinning_is_none_and_leaves_the_affinity(monkeypatch):
    """Where no CPU may be pinned (a sandbox refusing sched_setaffinity), the probe is None, no error reaches the
    bench report or the tuner, and nothing is set back that was never changed."""
    from mdhom.bench import trees as bench_trees

    calls = []

    def refuse(pid, cpus):
        calls.append(set(cpus))
        raise PermissionError("not here")

    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    assert bench_trees.host_probe(loops=100) is None
    assert calls == [{c} for c in sorted(os.sched_getaffinity(0))]
