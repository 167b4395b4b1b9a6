"""The end-to-end check that closes every tune: only kernels whose configurations make training faster are kept.

The timer is a model of a machine (seconds per round from the configurations in force), so the decisions are
checked exactly; the real timer trains a few rounds (``round_seconds``) and is exercised once at toy size."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest

import mdhom
from mdhom import config_store, configs
from mdhom.tuning import endtoend
from mdhom.tuning.endtoend import check
from mdhom.tuning.workload import RuleWork, Workload

DEVICE_ROUND_SECONDS = endtoend.device_round_seconds  # the real one (the tests' fixture models it)
FIT_CLASSES = endtoend.fit_classes  # likewise


def _entry(cfg: dict[str, int], heuristic: dict[str, int] | None = None) -> dict:
    return {"sizes": {"i": 64}, "config": cfg, "median_s": 1e-3, "default_config": heuristic or {"NUM_WI_i": 1},
            "default_s": 2e-3, "trials": 3, "failed_trials": 0, "date": "2026-11-23T00:00:00Z",
            "versions": {"driver": "x", "mdhom": "0.1.0", "optuna": "5", "pyopencl": "x"}}


def _machine(effects: dict[str, float]):
    """Seconds per round: 1.0 with the heuristics, times each kernel's effect when its tuned configuration (not
    the heuristic's) is stored (a kernel the file does not hold counts as not tuned)."""
    def timer(device, work, data):
        if os.environ.get(configs.TUNED_ENV) == "0":
            return 1.0
        path = Path(os.environ[configs.TUNED_DIR_ENV]) / configs.device_file_name(device.key)
        stored = json.loads(path.read_text())["kernels"]
        t = 1.0
        for k, e in effects.items():
            if k in stored and stored[k]["classes"]["c"]["config"] != stored[k]["classes"]["c"]["default_config"]:
                t *= e
        return t
    return timer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No shipped or user device file takes part: a check stores into a copy of the device file it finds, and a
    shipped entry of a kernel the test does not model would be timed for real (rule kernels: full rule fits)."""
    monkeypatch.setattr(configs, "user_dir", lambda: tmp_path / "no-user")
    monkeypatch.setattr(configs, "package_dir", lambda: tmp_path / "no-pkg")
    monkeypatch.delenv(configs.TUNED_DIR_ENV, raising=False)
    # the same device time with every configuration (the modelled round decides), unless a test models it too
    monkeypatch.setattr(endtoend, "device_round_seconds", lambda device, work, data: 1.0)
    # the modelled fits look up every class the file in force holds, unless a test models them too
    monkeypatch.setattr(endtoend, "fit_classes", _every_stored_class)


def _every_stored_class(device, work, data):
    path = Path(os.environ[configs.TUNED_DIR_ENV]) / configs.device_file_name(device.key)
    return {k: set(body["classes"]) for k, body in json.loads(path.read_text())["kernels"].items()}


@pytest.fixture
def cpu_device():
    devs = [d for d in mdhom.compute_devices() if d.type == "cpu"]
    if not devs:
        pytest.skip("no OpenCL CPU device")
    return devs[0]


def test_keeps_what_pays_and_drops_the_rest(cpu_device, tmp_path, monkeypatch):
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))  # no stored file leaks in
    entries = [(k, "c", _entry({"NUM_WI_i": 2}), "sha256:0") for k in ("fast", "slow", "same")]
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lambda s: None,
                timer=_machine({"fast": 0.6, "slow": 1.2, "same": 1.0}))
    assert res.kept == ["fast"] and sorted(res.dropped) == ["same", "slow"]
    assert res.heuristic_seconds == 1.0 and res.tuned_seconds == pytest.approx(0.6)
    assert res.speedup == pytest.approx(1 / 0.6)
    stored = {k: e["config"] for k, _, e, _ in endtoend.choose(entries, res.kept)}
    assert stored == {"fast": {"NUM_WI_i": 2}, "slow": {"NUM_WI_i": 1}, "same": {"NUM_WI_i": 1}}


def test_nothing_kept_when_the_sum_does_not_beat_the_heuristics(cpu_device, tmp_path, monkeypatch):
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    entries = [("slow", "c", _entry({"NUM_WI_i": 2}), "sha256:0")]
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lambda s: None,
                timer=_machine({"slow": 1.5}))
    assert res.kept == [] and res.dropped == ["slow"] and res.tuned_seconds == 1.0


def test_a_tune_stores_the_heuristic_where_tuning_did_not_pay(cpu_device, tmp_path, monkeypatch):
    """tune_device with the check: the device file holds the tuned configuration of the kernel that paid and
    the heuristic's of the one that did not (no vendor default can take its place)."""
    from mdhom.tuning import driver

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    entries = [("fast", "c", _entry({"NUM_WI_i": 2}), "sha256:0"), ("slow", "c", _entry({"NUM_WI_i": 4}), "sha256:1")]
    monkeypatch.setattr(endtoend, "round_seconds", _machine({"fast": 0.5, "slow": 1.3}))
    monkeypatch.setattr(endtoend, "device_round_seconds", _machine({"fast": 0.5, "slow": 1.3}))
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lambda s: None)
    path = config_store.store_results(cpu_device, endtoend.choose(entries, res.kept), tmp_path / "out")
    doc = json.loads(path.read_text())["kernels"]
    assert doc["fast"]["classes"]["c"]["config"] == {"NUM_WI_i": 2}
    assert doc["slow"]["classes"]["c"]["config"] == {"NUM_WI_i": 1}
    # marked as the heuristic kept, so a lookup runs today's heuristic (mdhom.configs), the tuned one not
    assert doc["slow"]["classes"]["c"]["heuristic"] is True and "heuristic" not in doc["fast"]["classes"]["c"]
    # an entry at its baseline already (a layout that won by forcing the heuristic's last layout on every fit) is
    # stored as it came, unmarked
    at_base = {**_entry({"NUM_WI_i": 2}), "config": {"NUM_WI_i": 1}}
    assert endtoend.choose([("tree_layout_quantized", "c", at_base, "h")], [])[0][2] == at_base
    assert driver.tune_device.__kwdefaults__["end_to_end"] is None  # the CLI asks for it; library calls opt in


def test_a_host_bound_round_keeps_what_the_device_time_gains(cpu_device, tmp_path, monkeypatch):
    """Rounds whose wall time the host decides (the same with every configuration): a kernel's configuration is kept
    where the fits' device time is lower by the margin; a layout's (its host work changes too) only by the round."""
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    kernels = ("kern", "tree_layout_quantized", "same", "worse", "slower_round")
    entries = [(k, "c", _entry({"NUM_WI_i": 2}), "sha256:0") for k in kernels]
    lines: list[str] = []
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lines.append,
                timer=_machine({"slower_round": 1.1}),
                device_timer=_machine({"kern": 0.8, "tree_layout_quantized": 0.8, "same": 0.99, "worse": 1.2,
                                       "slower_round": 0.8}))
    assert res.kept == ["kern"], lines
    assert sorted(res.dropped) == ["same", "slower_round", "tree_layout_quantized", "worse"], lines
    assert any("kern: tuned kept for the device time" in line for line in lines), lines
    assert any(line.startswith("device time 1000.00 ms/round with the heuristics, 800.00") for line in lines), lines
    # with another timer (forest fits, rule fits) and no device timer: the fits' time alone decides
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lambda s: None,
                timer=_machine({}))
    assert res.kept == []


def test_a_noisy_host_decides_by_the_device_time(cpu_device, tmp_path, monkeypatch):
    """Round times that jump between repeats by more than the margin (a host-bound round on a host whose cores differ)
    decide nothing: no configuration is kept for a lucky repeat, and the one whose fits' device time is lower stays
    (the round no slower beyond that noise). Rounds with any stored file drawn from 0.85-1.25 of the heuristics' (the
    same for every configuration); device time 0.7 with one kernel's configuration, 1.2 with the other's."""
    import numpy as np

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    rng = np.random.default_rng(5)

    def noisy(device, work, data):
        return 1.0 if os.environ.get(configs.TUNED_ENV) == "0" else float(rng.uniform(0.85, 1.25))

    entries = [(k, "c", _entry({"NUM_WI_i": 2}), "sha256:0") for k in ("lower_device", "higher_device")]
    lines: list[str] = []
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=5), echo=lines.append,
                timer=noisy, device_timer=_machine({"lower_device": 0.7, "higher_device": 1.2}))
    assert res.kept == ["lower_device"] and res.dropped == ["higher_device"], lines
    assert any(line.startswith("the fits' repeats varied up to") for line in lines), lines
    assert any("lower_device: tuned kept for the device time" in line for line in lines), lines
    # a quiet host (one value a configuration) keeps deciding by the 2% margin
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=3), echo=lambda s: None,
                timer=_machine({"lower_device": 0.9, "higher_device": 1.0}))
    assert res.kept == ["lower_device"]


def test_a_kernel_is_timed_by_the_fits_that_look_up_its_classes(cpu_device, tmp_path, monkeypatch):
    """A 256-bin class is looked up by the fits at the default max_bin=255 alone: its kernel is timed by those fits
    (the fits at 63 bins do not run its entries, and their noise would decide), a kernel of both bins by all fits."""
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    entries = [("wide", "c256", _entry({"NUM_WI_i": 2}), "sha256:0"), ("both", "c", _entry({"NUM_WI_i": 2}), "sha256:1")]
    seen: list[tuple[int, ...]] = []

    def timer(device, work, data):
        seen.append(work.tree_bins)
        if os.environ.get(configs.TUNED_ENV) == "0":
            return 1.0
        path = Path(os.environ[configs.TUNED_DIR_ENV]) / configs.device_file_name(device.key)
        tuned = {k for k, body in json.loads(path.read_text())["kernels"].items()
                 if any(e["config"] != e["default_config"] for e in body["classes"].values())}
        t = 0.8 if "both" in tuned else 1.0
        if "wide" in tuned:  # faster at 255 bins; the 63-bin fits' noise against it, which must not count
            t *= (0.7 if 255 in work.tree_bins else 1.0) * (1.5 if 63 in work.tree_bins else 1.0)
        return t

    def looked_up(device, work, data):
        return {"both": {"c"}, **({"wide": {"c256"}} if 255 in work.tree_bins else {})}

    lines: list[str] = []
    work = Workload(rows=200, rounds=2, leaves=3, repeats=1)
    assert work.tree_bins == (63, 255) and {f["max_bin"] for f in work.fits()} == {63, 255}
    res = check(cpu_device, entries, work, echo=lines.append, timer=timer, classes_run=looked_up)
    assert res.kept == ["wide", "both"], lines
    assert (255,) in seen and any("wide: tuned kept" in line and "at 255 bins" in line for line in lines), lines
    assert any(line.startswith("  both: tuned kept") and "bins" not in line for line in lines), lines


def test_device_round_seconds_profiles_a_real_fit(cpu_device):
    from mdhom.bench.trees import make_higgs_like

    work = Workload(rows=2000, rounds=3, leaves=7)
    data = make_higgs_like(2000, 28, 0, 0.0, 0)
    t = DEVICE_ROUND_SECONDS(cpu_device, work, data)
    # a round's kernels take microseconds at least (a few dozen launches), and less than ten rounds' wall time
    assert 1e-6 < t < endtoend.round_seconds(cpu_device, work, data) * 10


def test_round_seconds_trains_for_real(cpu_device):
    from mdhom.bench.trees import make_higgs_like

    work = Workload(rows=2000, rounds=3, leaves=7)
    t = endtoend.round_seconds(cpu_device, work, make_higgs_like(2000, 28, 0, 0.0, 0))
    assert 0 < t < 10


def test_recheck_judges_forest_kernels_by_forest_fits(cpu_device, tmp_path, monkeypatch):
    """A forest kernel runs in no boosting round: the recheck times it on forest fits, as a tune does (boosting
    rounds would keep or drop it by noise), and the tree kernels on training rounds."""
    from mdhom.tuning import driver

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    entries = [("fast", "c", _entry({"NUM_WI_i": 2}), "sha256:0"),
               ("forest_x", "c", _entry({"NUM_WI_i": 4}), "sha256:1")]
    config_store.store_results(cpu_device, entries, tmp_path / "user")
    # rounds: only "fast" pays; forest fits: only "forest_x" does
    monkeypatch.setattr(endtoend, "round_seconds", _machine({"fast": 0.5, "forest_x": 1.3}))
    monkeypatch.setattr(endtoend, "forest_seconds", _machine({"fast": 1.3, "forest_x": 0.5}))
    kept, path = driver.recheck(cpu_device, Workload(rows=200, rounds=2, leaves=3, repeats=1), tmp_path / "out",
                                echo=lambda s: None)
    assert sorted(kept) == ["fast", "forest_x"]
    doc = json.loads(path.read_text())["kernels"]
    assert doc["forest_x"]["classes"]["c"]["config"] == {"NUM_WI_i": 4}


def test_rule_kernels_are_judged_by_rule_fits(cpu_device, tmp_path, monkeypatch):
    """The rule refinement's kernels run in no boosting round: a check times them on rule fits (the split scan,
    which trees and rules share, stays with the boosting rounds), each group against its own heuristics."""
    from mdhom.tuning import driver

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    entries = [("tree_split_scan", "c", _entry({"NUM_WI_i": 2}), "sha256:0"),
               ("rule_histogram_q", "c", _entry({"NUM_WI_i": 4}), "sha256:1"),
               ("tree_split_score_rule_single", "c", _entry({"NUM_WI_i": 8}), "sha256:2"),
               ("forest_x", "c", _entry({"NUM_WI_i": 4}), "sha256:3")]
    effects = {"tree_split_scan": 0.5, "rule_histogram_q": 0.5, "tree_split_score_rule_single": 0.5,
               "forest_x": 0.5}
    # each kind of fit is faster only with the configurations of the kernels it runs; the others are noise there
    # that a timer judging all kernels by one kind of fit would keep (0.99 x: within the margin, so dropped)
    def only(kernels):
        return _machine({k: (e if k in kernels else 0.99) for k, e in effects.items()})

    monkeypatch.setattr(endtoend, "round_seconds", only({"tree_split_scan"}))
    monkeypatch.setattr(endtoend, "rule_seconds", only({"rule_histogram_q", "tree_split_score_rule_single"}))
    monkeypatch.setattr(endtoend, "forest_seconds", only({"forest_x"}))
    monkeypatch.setattr(endtoend, "rule_data", lambda work: None)  # the modelled timer reads no data
    seen = []
    chosen, kept = driver.checked_entries(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1),
                                          echo=seen.append)
    assert sorted(kept) == sorted(effects)
    assert any("rule fits" in line for line in seen) and any("forest fits" in line for line in seen)
    assert [e[0] for e in chosen] and {e[0] for e in chosen} == set(effects)
    assert endtoend.is_rule_kernel("rule_coupled_quality") and not endtoend.is_rule_kernel("tree_split_scan")
    assert endtoend.is_forest_kernel("ecc_walk") and not endtoend.is_forest_kernel("tree_histogram_rows")


def test_binning_is_judged_by_binning_rows(cpu_device, monkeypatch):
    """The binning kernel runs once per matrix, in no boosting round: a check times it binning the check's rows
    (boosting rounds would keep or drop it by their noise), the tree kernels by training rounds."""
    from mdhom.tuning import driver

    entries = [("tree_split_scan", "c", _entry({"NUM_WI_i": 2}), "sha256:0"),
               ("tree_bin_features", "c", _entry({"NUM_WI_i": 4}), "sha256:1")]

    def only(kernel):  # faster with that kernel's configuration; the other's is noise (within the margin: dropped)
        return _machine({k: (0.5 if k == kernel else 0.99) for k, _, _, _ in entries})

    monkeypatch.setattr(endtoend, "round_seconds", only("tree_split_scan"))
    monkeypatch.setattr(endtoend, "binning_seconds", only("tree_bin_features"))
    seen = []
    chosen, kept = driver.checked_entries(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1),
                                          echo=seen.append)
    assert sorted(kept) == ["tree_bin_features", "tree_split_scan"]
    assert any("binning" in line for line in seen)
    assert endtoend.is_binning_kernel("tree_bin_features") and endtoend.is_binning_kernel("tree_bin_features_fm")
    assert not endtoend.is_binning_kernel("tree_split_scan")
    # judged by training rounds, where it does not run, the binning's entry is dropped: the check would be noise
    res = endtoend.check(cpu_device, entries[1:], Workload(rows=200, rounds=2, leaves=3, repeats=1),
                         echo=lambda s: None, data=(None, None))
    assert res.kept == []


def test_binning_seconds_bins_for_real(cpu_device, monkeypatch):
    """The binning check's timer at toy size: the rows' bins on the device, in both orders, from float64 and float32
    rows (each a kernel of its own), timed by the kernels' profiling events."""
    from mdhom.bench.trees import make_higgs_like
    from mdhom.components.binning import DeviceBinner

    built, launch = [], DeviceBinner.launch

    def timed(self, X):
        built.append((self.x_dtype, self.feature_major))
        return launch(self, X)

    monkeypatch.setattr(DeviceBinner, "launch", timed)
    X, y = make_higgs_like(3000, 28, 0)[:2]
    t = endtoend.binning_seconds(cpu_device, Workload(rows=3000, rounds=2, leaves=3), (X, y))
    assert 0 < t < 10
    assert set(built) == {(np.dtype(d), fm) for d in (np.float64, np.float32) for fm in (False, True)}


def test_rule_seconds_fits_for_real(cpu_device):
    work = Workload(rows=200, rounds=2, leaves=3, rules=RuleWork(300, 6, 4, 4, 200, 3, 3, 8))
    t = endtoend.rule_seconds(cpu_device, work, endtoend.rule_data(work))
    assert 0 < t < 10


def test_forest_seconds_fits_for_real(cpu_device):
    """The forest check's timer at toy size: a sampled-level fit, a device prediction, a dense-level fit and a
    classifier chain ensemble's fit and prediction."""
    from mdhom.bench.trees import make_higgs_like

    X, y = make_higgs_like(1500, 28, 0)[:2]
    t = endtoend.forest_seconds(cpu_device, Workload(rows=1500, rounds=4, leaves=3, depth=2), (X, y))
    assert 0 < t < 30


def test_recheck_keeps_what_pays_of_a_stored_file(cpu_device, tmp_path, monkeypatch):
    """``mdhom tune --recheck``: the check alone, on the entries a device file holds; what does not pay is stored
    with its heuristic's configuration."""
    from mdhom.tuning import driver

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    entries = [("fast", "c", _entry({"NUM_WI_i": 2}), "sha256:0"), ("slow", "c", _entry({"NUM_WI_i": 4}), "sha256:1")]
    config_store.store_results(cpu_device, entries, tmp_path / "user")
    monkeypatch.setattr(endtoend, "round_seconds", _machine({"fast": 0.5, "slow": 1.3}))
    kept, path = driver.recheck(cpu_device, Workload(rows=200, rounds=2, leaves=3, repeats=1), tmp_path / "out",
                                echo=lambda s: None)
    assert kept == ["fast"]
    doc = json.loads(path.read_text())["kernels"]
    assert doc["fast"]["classes"]["c"]["config"] == {"NUM_WI_i": 2}
    assert doc["slow"]["classes"]["c"]["config"] == {"NUM_WI_i": 1}
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "none"))
    if configs.find_device_file(cpu_device.key) is None:  # no file shipped for this device either
        with pytest.raises(ValueError, match="no tuned-config file"):
            driver.recheck(cpu_device, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lambda s: None)


def test_a_noisy_host_is_noted_in_the_check():
    """CPUs 1.6x apart at the same loop (as the H200 machine's vCPUs were) get a line saying that the check's
    comparisons are within that noise; CPUs alike get none, and neither does a machine without a probe."""
    from mdhom.tuning.endtoend import HOST_SPREAD, host_note

    noisy = {"cpus": 16, "min_ms": 200.0, "median_ms": 300.0, "max_ms": 320.0}
    assert "1.60x" in host_note(noisy) and "16 CPUs" in host_note(noisy)
    even = {"cpus": 2, "min_ms": 100.0, "median_ms": 101.0, "max_ms": 100.0 * HOST_SPREAD * 0.99}
    assert host_note(even) is None and host_note(None) is None


def test_the_check_traces_a_noisy_host(cpu_device, tmp_path, monkeypatch):
    """The check itself puts the note first in its trace when the probe finds CPUs far apart."""
    from mdhom.bench import trees as bench_trees

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    monkeypatch.setattr(bench_trees, "host_probe",
                        lambda: {"cpus": 16, "min_ms": 6.0, "median_ms": 9.0, "max_ms": 11.5})
    entries = [("fast", "c", _entry({"NUM_WI_i": 2}), "sha256:0")]
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1), echo=lambda s: None,
                timer=_machine({"fast": 0.6}))
    assert res.trace[0].startswith("host CPUs differ 1.92x") and res.kept == ["fast"]


def test_kernels_tuned_to_their_heuristic_are_not_timed(cpu_device, tmp_path, monkeypatch):
    """A kernel whose studies stored their heuristic's configuration everywhere (a budgeted tune's short studies
    measure the default alone) costs the check no fits: it goes in as the heuristic's, and with nothing else to judge
    the check trains nothing."""
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    unchanged = ("same_a", "same_b")
    entries = [(k, "c", _entry({"NUM_WI_i": 1}), "sha256:0") for k in unchanged]
    fits = []
    machine = _machine({"fast": 0.6})

    def timer(device, work, data):
        fits.append(os.environ.get(configs.TUNED_ENV))
        return machine(device, work, data)

    work = Workload(rows=200, rounds=2, leaves=3, repeats=1)
    lines: list[str] = []
    res = check(cpu_device, entries, work, echo=lines.append, timer=timer)
    assert fits == [] and res.kept == [] and sorted(res.dropped) == list(unchanged)
    assert "nothing to time" in res.summary()
    assert any("2 kernel(s) tuned to their heuristic's configurations" in line for line in lines), lines
    both = check(cpu_device, entries + [("fast", "c", _entry({"NUM_WI_i": 2}), "sha256:0")], work, echo=lambda s: None,
                 timer=timer)
    assert both.kept == ["fast"] and sorted(both.dropped) == list(unchanged)
    # the heuristics' warm-up, the pair before and after judging "fast", and its own pair: same_* never timed
    assert len(fits) == 7


def test_learner_seconds_profiles_the_rounds_kernels(cpu_device):
    seconds = endtoend.learner_seconds(cpu_device, Workload(rows=2000, rounds=3, leaves=7))
    assert seconds and all(v > 0 for v in seconds.values())
    assert "tree_split_score" in seconds and any(k.startswith("tree_histogram") for k in seconds)


def test_entries_the_checks_fits_never_look_up_are_not_judged_by_them(cpu_device, tmp_path, monkeypatch):
    """A kernel changed only at size classes the check's fits do not look up (a 10M-row class, a 4-output one) is
    not timed: those fits cannot run its entries, so their times would decide by noise. Its entries go in as the
    studies found them, and the summary says so; the kernels the fits run are judged as before."""
    from mdhom.tuning import driver

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    monkeypatch.setattr(endtoend, "round_seconds", _machine({"fast": 0.5, "big": 2.0}))  # "big", timed, would lose
    monkeypatch.setattr(endtoend, "fit_classes", lambda device, work, data: {"fast": {"c"}, "big": {"small"}})
    entries = [("fast", "c", _entry({"NUM_WI_i": 2}), "sha256:0"), ("big", "c", _entry({"NUM_WI_i": 4}), "sha256:1"),
               ("big", "small", _entry({"NUM_WI_i": 1}), "sha256:1")]  # its looked-up class kept the heuristic
    lines: list[str] = []
    out, kept = driver.checked_entries(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=1),
                                       lines.append)
    assert kept == ["fast"]
    assert {(k, c): e["config"] for k, c, e, _ in out} == {("fast", "c"): {"NUM_WI_i": 2}, ("big", "c"): {"NUM_WI_i": 4},
                                                           ("big", "small"): {"NUM_WI_i": 1}}
    said = "\n".join(lines)
    assert "1 kernel(s) whose changed classes the check's fits do not look up" in said and "big (c)" in said, said
    assert "the studies' configurations of big stored unjudged" in said, said


def test_fit_classes_reads_the_classes_a_real_fit_looked_up(cpu_device, tmp_path, monkeypatch):
    from mdhom.bench.trees import make_higgs_like
    from mdhom.components.scores import score_update

    desc = score_update("double")
    cfg = desc.default_config(cpu_device, {"row": 10**4, "output": 1})
    entry = {**_entry(cfg, cfg), "sizes": {"row": 10**4, "output": 1}}
    config_store.store_result(cpu_device, desc.name, "rows_1e4", entry, configs.description_hash(desc), tmp_path)
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path))
    ran = FIT_CLASSES(cpu_device, Workload(rows=2000, rounds=3, leaves=7), make_higgs_like(2000, 28, 0, 0.0, 0))
    assert ran.get("tree_score_update") == {"rows_1e4"}, ran


def test_a_cpus_check_trains_its_quantized_fits_too(cpu_device, tmp_path, monkeypatch):
    """A CPU's default precision is double; its tune also stores quantized classes (whole-row histograms, the split
    score's int32 lanes), which only quantized fits look up: the check trains both, so those classes are judged."""
    from mdhom import tunable
    from mdhom.bench.trees import make_higgs_like
    from mdhom.tuning.layouts import precisions

    assert precisions(cpu_device) == ["double", "quantized"]
    k = tunable.get("tree_histogram_rows")
    cls = next(c for c in k.classes(device=cpu_device) if c.endswith("nodes_1"))
    sizes = k.size_classes[cls]
    cfg = k.baseline_config(cpu_device, sizes)
    entry = {**_entry(cfg, cfg), "sizes": k.dim_sizes(sizes)}
    config_store.store_result(cpu_device, k.name, cls, entry, configs.description_hash(k.describe(sizes)), tmp_path)
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path))
    ran = FIT_CLASSES(cpu_device, Workload(rows=3000, rounds=3, leaves=7), make_higgs_like(3000, 28, 0, 0.0, 0))
    assert cls in ran.get("tree_histogram_rows", set()), ran


def test_a_consistent_win_within_the_noise_is_kept(cpu_device, tmp_path, monkeypatch):
    """A configuration whose every repeat beats every repeat without it by the margin is kept even where one outlier
    fit makes the repeats' spread larger than the win (a CPU check, judged by the round): rounds 0.90-0.92 with the
    tuned layout against 1.0 without, one of them an outlier of 1.3. A configuration whose repeats overlap (0.88-1.05
    against 1.0) is not."""
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    calls = itertools.count()

    def timer(effect, spread):  # noqa: ANN001, ANN202
        base = _machine({"tree_layout_quantized": effect})

        def run(device, work, data):  # noqa: ANN001, ANN202
            t = base(device, work, data)
            i = next(calls)
            if t == 1.0:  # without: one outlier fit in every seven
                return 1.3 if i % 7 == 3 else 1.0
            return t * spread[i % len(spread)]
        return run

    entries = [("tree_layout_quantized", "c", _entry({"NUM_WI_i": 2}), "sha256:0")]
    lines: list[str] = []
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=3), echo=lines.append,
                timer=timer(0.9, (1.0, 1.01, 1.02)))
    assert res.kept == ["tree_layout_quantized"], lines
    assert any("(every repeat faster)" in line for line in lines), lines
    assert any(line.startswith("the fits' repeats varied up to 30%") for line in lines), lines
    res = check(cpu_device, entries, Workload(rows=200, rounds=2, leaves=3, repeats=3), echo=lambda s: None,
                timer=timer(0.9, (0.98, 1.17, 1.02)))
    assert res.kept == []
