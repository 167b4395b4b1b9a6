"""The tuner on a real device (PoCL): measurement, verification, and a tune killed by SIGINT that resumes."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import mdhom
from mdhom import config_store, configs, tunable
from mdhom.tuning.measure import LiveRunner


@pytest.fixture(scope="module")
def pocl() -> mdhom.Device:
    hits = [d for d in mdhom.compute_devices() if d.runtime == "pocl"]
    if not hits:
        pytest.skip("PoCL not found: install pyopencl[pocl]")
    return hits[0]


SIZES = {"row": 3001, "out_k": 3}


def test_live_runner_measures_verifies_and_rejects(pocl):
    gh = tunable.get("gh_sum")
    runner = LiveRunner(gh, pocl, SIZES, repeats=3, warmup=1)
    desc = gh.describe(SIZES)
    default = desc.default_config(pocl, SIZES)
    m = runner.evaluate(default)
    assert m.ok and len(m.samples) == 3 and m.seconds == float(np.median(m.samples)) and m.seconds > 0
    assert runner.evaluate(default) is m  # cached: one build, one verification per configuration
    other = {**default, "NUM_WG_row": 1, "NUM_WI_row": 4}
    t_default, t_other = runner.retime([default, other], rounds=2)
    assert len(t_default) == len(t_other) == 6 and min(t_default + t_other) > 0
    too_big = {**default, "NUM_WI_row": pocl.max_work_group_size * 2}
    assert runner.evaluate(too_big).status == "invalid"
    # a kernel whose reference disagrees with the device: every configuration is rejected as wrong
    liar = dataclasses.replace(gh, name="gh_sum_liar",
                               reference=lambda a: _shifted(gh.reference(a)))
    bad = LiveRunner(liar, pocl, SIZES, repeats=1, warmup=0).evaluate(default)
    assert bad.status == "wrong" and "field 'g'" in bad.message


def _trials(journal, kernel: str, size_class: str) -> int:
    import optuna

    from mdhom.tuning.study import open_storage

    storage = open_storage(str(journal))
    names = [s.study_name for s in optuna.get_all_study_summaries(storage) if f"/{kernel}/{size_class}/" in s.study_name]
    assert len(names) == 1, names
    return len(optuna.load_study(study_name=names[0], storage=storage).trials)


def _shifted(r: np.ndarray) -> np.ndarray:
    r = r.copy()
    r["g"][1] += 1e-3 * max(1.0, abs(r["g"][1]))
    return r


def test_sigint_midway_keeps_file_and_resumes(pocl, tmp_path):
    out, journal = tmp_path / "out", tmp_path / "studies.journal"
    # an earlier tune's file, which an interrupted tune must leave exactly as it is
    old = {**SIZES}
    cfg = tunable.get("gh_sum").describe(old).default_config(pocl, old)
    entry = {"sizes": old, "config": cfg, "median_s": 1.0, "default_s": 1.0, "trials": 1, "failed_trials": 0,
             "date": "2026-01-01T00:00:00Z", "versions": {}}
    # stored with the current description's hash, as a real earlier tune would have it (a stale hash makes a
    # new tune drop the old classes, by design)
    desc_hash = configs.description_hash(tunable.get("gh_sum").describe(old))
    path = config_store.store_result(pocl, "gh_sum", "earlier", entry, desc_hash, directory=out)
    before = path.read_bytes()
    cmd = [sys.executable, "-m", "mdhom.cli", "tune", "--device", pocl.key, "--kernels", "gh_sum", "row_sum",
           "--quick", "--trials", "4", "--storage", str(journal), "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("gh_sum"):  # the first study is done: interrupt the second
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (lines, rest, err)
    assert "interrupted" in err and "Traceback" not in err
    assert path.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == [path.name]
    first = next(ln for ln in lines if ln.startswith("gh_sum")).split()[:2]
    trials_before = _trials(journal, *first)
    assert trials_before >= 4
    # run again: the finished study runs no new trial, the interrupted one resumes, the rest completes
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _trials(journal, *first) == trials_before
    doc = configs.load_device(pocl.key, [out])
    assert "earlier" in doc["kernels"]["gh_sum"]["classes"]  # a partial tune keeps what it did not touch
    tuned = {(k, c) for k, v in doc["kernels"].items() for c in v["classes"]}
    want = {(k, c) for k in ("gh_sum", "row_sum") for c in tunable.get(k).classes(quick=True)}
    assert want <= tuned
