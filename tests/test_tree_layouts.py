"""The tree backend's layouts as a tuning choice: the candidates, the tuner's layout stage (timed with a model
of a machine, so its decisions are checked exactly), and fits that take a stored layout (on every device: a
layout moves data differently, never to other trees)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from mdhom import TreeBoostClassifier, config_store, configs
from mdhom.trees import layouts
from mdhom.trees.layouts import BATCH, BLOCK_ROWS, DEPTH_AHEAD, GROUP_ROWS, LAYOUT_HASH, Layout, candidates, kernel_name
from mdhom.tuning.workload import Workload

VERSIONS = {"driver": "x", "mdhom": "0.1.0", "optuna": "5", "pyopencl": "x"}
HEURISTIC = Layout(0, 1, 0, 0, BLOCK_ROWS, DEPTH_AHEAD, BATCH)  # the CPUs' (the stage tests run on a CPU)


@pytest.fixture
def cpu():
    """An OpenCL CPU device (conftest's ``cpu`` is the first compute device, a GPU on the GPU machine): the stage's
    tests model a CPU's candidates and heuristic."""
    import mdhom

    dev = next((d for d in mdhom.compute_devices() if d.type == "cpu"), None)
    if dev is None:
        pytest.skip("no OpenCL CPU device: the layout stage's tests model a CPU's candidates and heuristic")
    return dev


def test_candidates_are_distinct_and_consistent():
    q, d = candidates("quantized", cpu=True), candidates("double", cpu=True)
    assert len(set(q)) == len(q) == 64 and len(set(d)) == len(d) == 48
    gq, gd = candidates("quantized", cpu=False), candidates("double", cpu=False)
    assert len(set(gq)) == len(gq) == 64 and len(set(gd)) == len(gd) == 24
    assert {c.summed for c in q + d} == {1} and {c.summed for c in gq + gd} == {0}  # GPUs scan first
    assert {c.summed for c in candidates("single", cpu=True) + candidates("single", cpu=False)} == {0}
    assert {c.depth_ahead for c in q + gq + d + gd} == {0, DEPTH_AHEAD}
    assert {c.batch for c in q + d} == {c.batch for c in gq + gd} == {0, BATCH}
    assert {c.blocks for c in q + d} == {0, BLOCK_ROWS} and {c.blocks for c in gq + gd} == {0, GROUP_ROWS}
    assert all(c.whole_rows for c in q if c.row_index)  # the row index reads whole rows
    assert not any(c.columns for c in q + d if not c.row_index)  # only it has a column copy
    assert not any(c.lookahead for c in d + gd)  # the loss-guided look-ahead needs quantized histograms
    # whole rows of real lanes: CPUs', moved or through the row index (their exact fold is a work-item a node and
    # feature group), with and without the column copy
    assert {c.whole_rows for c in d if not c.row_index} == {c.whole_rows for c in d if c.row_index} == {0, 1}
    assert {c.columns for c in d if c.row_index and c.whole_rows} == {0, 1}
    assert not any(c.whole_rows for c in gd)
    with pytest.raises(ValueError, match="precision"):
        kernel_name("half")
    with pytest.raises(ValueError, match="lacks"):
        Layout.of({"row_index": 1})


def _machine(times: dict[Layout, float]):
    """Seconds per round by the layout in force (the heuristic's is HEURISTIC); a layout missing from ``times``
    fails as a device would."""
    def timer(device, work, data, precision):
        layout = layouts._forced[-1][0] or HEURISTIC
        if layout not in times:
            raise RuntimeError("out of resources")
        return times[layout], layout.config()
    return timer


def _stage(cpu, times, only=("tree_layout_quantized",)):
    return layouts_stage(cpu, Workload(rows=300, rounds=2, leaves=3, repeats=2), VERSIONS, "2026-11-24T00:00:00Z",
                         echo=lambda s: None, timer=_machine(times), only=list(only))


def layouts_stage(*a, **k):
    from mdhom.tuning.layouts import layout_entries

    return layout_entries(*a, **k)


def test_the_stage_proposes_the_fastest_layout(cpu):
    fast = Layout(1, 1, 1, 0, 0, 0, 0)
    times = {c: 1.0 for c in candidates("quantized", cpu=True)} | {fast: 0.5}
    times.pop(Layout(1, 1, 0, 1, 0, 0, BATCH))  # one candidate the device cannot run: skipped, counted
    ((name, cls, entry, h),) = _stage(cpu, times)
    assert (name, h) == ("tree_layout_quantized", LAYOUT_HASH)
    assert entry["config"] == fast.config() and entry["median_s"] == 0.5
    assert entry["default_config"] == HEURISTIC.config() and entry["default_s"] == 1.0
    assert entry["failed_trials"] == 1 and entry["trials"] == 63


def test_the_heuristic_stays_where_nothing_beats_it_by_the_margin(cpu):
    times = {c: 1.0 for c in candidates("quantized", cpu=True)} | {Layout(1, 1, 1, 0, 0, 0, 0): 0.99}
    ((_, _, entry, _),) = _stage(cpu, times)
    assert entry["config"] == entry["default_config"] == HEURISTIC.config()


def test_the_heuristic_counts_its_twins_times(cpu):
    """The heuristic's layout among the candidates is the heuristic: where its own times were slow (a slow phase of
    the machine), its twin's faster ones are its time, and a candidate faster only than the slow ones is not stored;
    where the heuristic's fits ran different layouts (its choice varies by fit), the layout it ran last, forced on
    every fit, is a candidate like any other."""
    from mdhom.tuning.layouts import MIXED, layout_entries

    other = Layout(1, 1, 1, 0, 0, 0, 0)
    times = {c: 1.0 for c in candidates("quantized", cpu=True)} | {HEURISTIC: 0.5, other: 0.6}

    def timer(device, work, data, precision, mixed=False):
        forced = layouts._forced[-1][0]
        if forced is None:  # the heuristic's own runs: slow
            return 1.0, HEURISTIC.config() | ({MIXED: 1} if mixed else {})
        return times[forced], forced.config()

    def stage(t):
        return layout_entries(cpu, Workload(rows=300, rounds=2, leaves=3, repeats=2), VERSIONS,
                              "2026-11-24T00:00:00Z", echo=lambda s: None, timer=t, only=["tree_layout_quantized"])

    ((_, _, entry, _),) = stage(timer)
    assert entry["config"] == entry["default_config"] == HEURISTIC.config() and entry["default_s"] == 0.5
    assert entry["heuristic"] is True  # the heuristic kept: a fit runs its own heuristic's layout
    ((_, _, entry, _),) = stage(lambda *a: timer(*a, mixed=True))  # the layout forced on every fit: a candidate
    assert entry["config"] == HEURISTIC.config() and (entry["median_s"], entry["default_s"]) == (0.5, 1.0)
    assert "heuristic" not in entry  # forced on every fit, which the heuristic is not


def test_stale_layouts_are_retuned():
    from mdhom.tuning.driver import stale_entry

    assert not stale_entry("tree_layout_quantized", LAYOUT_HASH)
    assert stale_entry("tree_layout_quantized", "layout-v0:row_index")
    # stored before the batch bound was a choice, and before the summed score was
    assert stale_entry("tree_layout_quantized", "layout-v1:row_index,whole_rows,columns,lookahead,blocks,depth_ahead")
    assert stale_entry("tree_layout_quantized",
                       "layout-v1:row_index,whole_rows,columns,lookahead,blocks,depth_ahead,batch")


def test_a_layout_only_tune_stores_the_layout(cpu, tmp_path, monkeypatch):
    from mdhom.tuning import driver, endtoend
    from mdhom.tuning import layouts as stage

    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "user"))
    fast = Layout(1, 1, 0, 0, 0, 0, BATCH)
    monkeypatch.setattr(stage, "fit_seconds", _machine({c: 1.0 for c in candidates("quantized", cpu=True)} | {fast: 0.4}))

    def rounds(device, work, data):  # the end-to-end check (on devices whose default precision is quantized)
        if os.environ.get(configs.TUNED_ENV) == "0":
            return 1.0
        path = Path(os.environ[configs.TUNED_DIR_ENV]) / configs.device_file_name(device.key)
        e = json.loads(path.read_text())["kernels"]["tree_layout_quantized"]["classes"]["higgs28"]
        return 0.4 if e["config"] != e["default_config"] else 1.0

    monkeypatch.setattr(endtoend, "round_seconds", rounds)
    results, path = driver.tune_device(cpu, ["tree_layout_quantized"], directory=tmp_path / "out", echo=lambda s: None,
                                       progress_bar=False, end_to_end=Workload(rows=300, rounds=2, leaves=3,
                                                                               repeats=1))
    assert results == []  # no kernel study ran
    doc = json.loads(path.read_text())["kernels"]
    assert "tree_layout_quantized" in doc  # beside whatever the package ships for this device
    assert doc["tree_layout_quantized"]["classes"]["higgs28"]["config"] == fast.config()


def _data(n=3000, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


# blocks of 64 rows: several blocks per split node; with the look-ahead, steps of both partitions in one tree
@pytest.mark.parametrize("policy", ["lossguide", "depthwise"])
# the first with the scan and the plain score (a GPU's heuristic), whose table maker then reads the scan
@pytest.mark.parametrize("layout", [Layout(1, 1, 1, 1, 64, 2, 0, 0), Layout(0, 0, 0, 0, 0, 0, 2),
                                    Layout(0, 1, 0, 0, 64, 3, BATCH)],
                         ids=lambda v: v.text())
def test_a_stored_layout_is_used_and_grows_the_same_trees(device, layout, policy, tmp_path, monkeypatch):
    X, y = _data()
    kw = dict(n_estimators=4, grow_policy=policy, max_depth=0 if policy == "lossguide" else 5, max_leaves=15,
              precision="quantized", random_state=1)
    with layouts.forcing(None):  # whatever the package ships for this device
        heuristic = TreeBoostClassifier(device=device, **kw).fit(X, y)
    entry = {"sizes": {"feat": X.shape[1], "row": 1000}, "config": layout.config(), "median_s": 1.0,
             "default_config": HEURISTIC.config(), "default_s": 1.0, "trials": 1, "failed_trials": 0,
             "date": "2026-11-24T00:00:00Z", "versions": VERSIONS}
    config_store.store_results(device, [("tree_layout_quantized", "higgs28", entry, LAYOUT_HASH)], tmp_path / "tuned")
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "tuned"))
    stored = TreeBoostClassifier(device=device, **kw).fit(X, y)
    ran = stored.kernel_configs_["tree_layout_quantized"]
    assert ran["source"].startswith("tuned") and ran["config"] == layout.config()
    assert heuristic.kernel_configs_["tree_layout_quantized"]["source"].startswith("heuristic")
    paths = []
    for i, est in enumerate((heuristic, stored)):
        est.save_model(tmp_path / f"m{i}.json")
        paths.append((tmp_path / f"m{i}.json").read_bytes())
    assert paths[0] == paths[1]  # the layout moves data differently, never to other trees
    monkeypatch.setenv(configs.TUNED_ENV, "0")  # tuning off: the heuristic's layout again
    off = TreeBoostClassifier(device=device, **kw).fit(X, y)
    assert off.kernel_configs_["tree_layout_quantized"]["source"] == "heuristic (disabled)"  # as a kernel's build says


def test_an_explicit_option_wins_over_the_stored_layout(cpu, tmp_path, monkeypatch):
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    X, _ = _data(500)
    bins = np.clip((X * 8 + 32).astype(np.int64), 0, 62).astype(np.uint8)
    with layouts.forcing(Layout(1, 1, 1, 0, 0, 0, 0)):
        forced = OpenCLTreeKernels(cpu, "quantized")
        forced.load(bins, 64, 1)
        mine = OpenCLTreeKernels(cpu, "quantized", row_index=False, whole_rows=False, summed=False)
        mine.load(bins, 64, 1)
    assert forced.effective_layout() == Layout(1, 1, 0 if forced.ws.feature_major else 1, 0, 0, 0, 0)
    assert mine.effective_layout().row_index == 0 and mine.effective_layout().whole_rows == 0
    assert mine.effective_layout().summed == 0 and not mine.split.summed


def test_wide_float64_rows_keep_a_feature_per_lane_unless_asked(cpu, monkeypatch):
    """Float64 rows of WIDE_ROWS features on a CPU are read through the row index by the heuristic, which keeps their
    histogram a feature per lane (what it was measured with); a stored or forced layout, or the caller, asking for
    whole rows through the row index gets the real-lane whole-row build."""
    from mdhom.trees.opencl_backend import WIDE_ROWS, OpenCLTreeKernels

    monkeypatch.setenv(configs.TUNED_ENV, "0")  # no stored layout
    rng = np.random.default_rng(3)
    bins = rng.integers(0, 15, size=(300, WIDE_ROWS)).astype(np.uint8)
    heuristic = OpenCLTreeKernels(cpu, "double")
    heuristic.load(bins, 16, 1)
    assert heuristic.ws.row_index and heuristic.hist.d_hist.name == "tree_histogram"
    asked = OpenCLTreeKernels(cpu, "double", whole_rows=True)
    asked.load(bins, 16, 1)
    assert asked.ws.row_index and asked.hist.d_hist.name == "tree_histogram_rows_real"
    with layouts.forcing(Layout(1, 1, 0, 0, 2048, 7, 32, 1), "double"):
        forced = OpenCLTreeKernels(cpu, "double")
        forced.load(bins, 16, 1)
    assert forced.ws.row_index and forced.hist.d_hist.name == "tree_histogram_rows_real"


def test_the_reported_layout_says_summed_only_where_the_search_skips_the_scan(cpu):
    """A fit's reported layout (``kernel_configs_``) is the one it ran: categorical features' orders, and fits of at
    most two bins, scan before they score whatever the layout asks; a numeric fit on a CPU skips the scan."""
    from mdhom.trees.opencl_backend import OpenCLTreeKernels

    X, y = _data(400)
    kw = dict(n_estimators=2, max_depth=3, device=cpu, precision="quantized")
    numeric = TreeBoostClassifier(**kw).fit(X, y)
    cats = TreeBoostClassifier(categorical_feature=[0], **kw).fit(np.c_[np.arange(400) % 5, X[:, 1:]], y)
    summed = [e.kernel_configs_["tree_layout_quantized"]["config"]["summed"] for e in (numeric, cats)]
    two_bins = OpenCLTreeKernels(cpu, "quantized")
    two_bins.load((X[:, :4] > 0).astype(np.uint8), 2, 1)
    assert summed + [two_bins.effective_layout().summed] == [1, 0, 0]


def test_gpus_read_rows_through_the_index_up_to_a_few_feature_groups(oclgrind_device):
    """The GPU heuristic (Oclgrind is a GPU-type device of 32 KB local memory): quantized rows are read through the row
    index and histograms built of whole rows where a node's histogram fits local memory whole or in at most
    ROW_GROUPS feature groups; wider rows stay moved, a feature per lane, as before feature groups."""
    from mdhom.components.row_histogram import feature_groups
    from mdhom.trees.opencl_backend import ROW_GROUPS, OpenCLTreeKernels

    rng = np.random.default_rng(5)
    for n_feat, n_bins, indexed in ((4, 64, True), (16, 256, True), (40, 256, True), (80, 256, False)):
        groups = feature_groups(oclgrind_device, n_feat, 1, n_bins)
        assert (0 < groups <= ROW_GROUPS) == indexed, (n_feat, n_bins, groups)
        kern = OpenCLTreeKernels(oclgrind_device, "quantized", feature_major=False)
        kern.load(rng.integers(0, n_bins, size=(64, n_feat)).astype(np.uint8 if n_bins <= 256 else np.uint16),
                  n_bins, 1)
        layout = kern.effective_layout()
        assert (layout.row_index, layout.whole_rows) == (int(indexed), int(indexed)), (n_feat, n_bins)


def test_a_stored_layout_applies_only_near_the_shape_it_was_timed_at(cpu, tmp_path, monkeypatch):
    entry = {"sizes": {"feat": 28, "row": 1000}, "config": Layout(1, 1, 1, 0, 0, 0, 0).config(), "median_s": 1.0,
             "default_config": HEURISTIC.config(), "default_s": 1.0, "trials": 1, "failed_trials": 0,
             "date": "2026-11-24T00:00:00Z", "versions": VERSIONS}
    config_store.store_results(cpu, [("tree_layout_quantized", "higgs28", entry, LAYOUT_HASH)], tmp_path)
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path))
    assert layouts.stored(cpu, "quantized", 40)[0] == Layout(1, 1, 1, 0, 0, 0, 0)
    assert layouts.stored(cpu, "quantized", 500)[0] is None  # wide rows: the heuristic's call
    # a class that kept the heuristic's layout: the fit's own heuristic decides, and the source says whose class it was
    kept = {**entry, "config": HEURISTIC.config(), "heuristic": True}
    config_store.store_results(cpu, [("tree_layout_quantized", "higgs28", kept, LAYOUT_HASH)], tmp_path)
    layout, source = layouts.stored(cpu, "quantized", 40)
    assert layout is None and source.startswith("heuristic (tuned ") and source.endswith("higgs28: the heuristic kept)")


def test_the_stage_compares_what_it_timed_before_its_deadline(cpu, monkeypatch):
    """A budgeted tune gives the layouts a deadline: candidates are timed until then (the heuristic always), what was
    timed is compared, and a precision whose turn comes after it is not tuned. The stage's clock is a model that each
    fit advances by one tick: a wall clock made the test depend on the machine's load (a busy CI host spent the whole
    0.1 s before the first candidate)."""
    import types

    from mdhom.tuning import layouts as stage

    now = [0.0]
    monkeypatch.setattr(stage, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    fast = Layout(1, 1, 1, 0, 0, 0, 0)
    times = {c: 1.0 for c in candidates("quantized", cpu=True)} | {fast: 0.5}
    machine = _machine(times)

    def slow(*a):
        now[0] += 1
        return machine(*a)

    work = Workload(rows=300, rounds=2, leaves=3, repeats=2)
    lines: list[str] = []
    ((_, _, entry, _),) = layouts_stage(cpu, work, VERSIONS, "2026-11-24T00:00:00Z", echo=lines.append, timer=slow,
                                       only=["tree_layout_quantized"], deadline=10)
    # the warm-up and the heuristic take 2 of the 10 ticks: eight candidates are timed, in the first repeat
    assert entry["trials"] == 8, lines
    assert any("candidates timed before it" in line for line in lines), lines
    assert layouts_stage(cpu, work, VERSIONS, "2026-11-24T00:00:00Z", echo=lines.append, timer=slow,
                         only=["tree_layout_quantized"], deadline=now[0]) == []
    assert "tree_layout_quantized: no time left before the deadline; not tuned" in lines[-1]


def test_the_first_repeat_screens_the_candidates(cpu):
    """Only the heuristic and the fastest quarter of the other candidates (the heuristic's twin not among them) are
    timed again after the first repeat; the stage still counts every candidate it timed, and picks among the
    survivors' best times. A candidate that trained and fails in a later repeat keeps its first times."""
    from mdhom.tuning.layouts import layout_entries, screened

    cands = candidates("quantized", cpu=True)
    times = {c: 1.0 + 0.01 * (len(cands) - i) for i, c in enumerate(cands)}  # the list's last ones fastest
    fastest = cands[-1]
    times[fastest], times[HEURISTIC] = 0.5, 0.6  # (the heuristic's twin among the fastest: no place taken)
    calls: dict = {}

    def timer(device, work, data, precision):
        forced = layouts._forced[-1][0]  # None: the heuristic's own fits
        calls[forced] = calls.get(forced, 0) + 1
        if forced == fastest and calls[forced] > 1:
            raise RuntimeError("out of resources")  # trained in the first repeat, fails after
        layout = forced or HEURISTIC
        return times[layout], layout.config()

    ((_, _, entry, _),) = layout_entries(cpu, Workload(rows=300, rounds=2, leaves=3, repeats=3), VERSIONS,
                                         "2026-11-24T00:00:00Z", echo=lambda s: None, timer=timer,
                                         only=["tree_layout_quantized"])
    ranked = sorted((c for c in cands if c != HEURISTIC), key=times.get)
    survivors = ranked[:len(ranked) // 4 + (len(ranked) % 4 > 0)]
    assert calls[None] == 4  # the heuristic: a warm-up fit and every repeat
    assert {c for c in cands if calls[c] > 1} == set(survivors)  # the heuristic's twin not timed again
    assert all(calls[c] == 3 for c in survivors)
    assert entry["trials"] == len(cands) and entry["failed_trials"] == 0
    assert entry["config"] == fastest.config() and entry["median_s"] == 0.5  # its first time stands
    assert entry["default_s"] == 0.6
    assert screened({0: 1.0, 1: 3.0, 2: 2.0}) == [0, 1, 2]  # fewer than SCREEN_MIN: all kept
    assert screened({0: 9.0} | {i: float(10 - i) for i in range(1, 10)}) == [0, 6, 7, 8, 9]
    assert screened({0: 9.0} | {i: float(10 - i) for i in range(1, 10)}, frozenset({9})) == [0, 5, 6, 7, 8]


def test_the_stage_stops_where_the_heuristic_fails(cpu):
    """A heuristic layout that does not train leaves nothing to compare: no entry, and no candidate timed again."""
    from mdhom.tuning.layouts import layout_entries

    calls: dict = {}

    def timer(device, work, data, precision):
        forced = layouts._forced[-1][0]
        calls[forced] = calls.get(forced, 0) + 1
        if forced is None and calls[forced] > 1:  # (the warm-up fit trains; the heuristic's timed fits fail)
            raise RuntimeError("out of resources")
        return 1.0, (forced or HEURISTIC).config()

    assert layout_entries(cpu, Workload(rows=300, rounds=2, leaves=3, repeats=3), VERSIONS, "2026-11-24T00:00:00Z",
                          echo=lambda s: None, timer=timer, only=["tree_layout_quantized"]) == []
    assert max(n for c, n in calls.items() if c is not None) == 1
