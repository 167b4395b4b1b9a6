"""The cross-vendor device matrix: every kernel test runs once per OpenCL compute device present.

Each runtime we test on is one parameter. A runtime that is not installed or finds no device is a skip
with the reason, never a silent pass. ``MDHOM_TEST_DEVICES`` (comma-separated substrings of device keys)
narrows the matrix, e.g. ``MDHOM_TEST_DEVICES=nvidia`` on the GPU machine.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import mdhom

# (parameter id, how to recognise the device, how to get it when missing)
RUNTIMES = (
    ("pocl", lambda d: d.runtime == "pocl", "PoCL not found: install pyopencl[pocl]"),
    ("intel-cpu", lambda d: d.runtime == "intel" and d.type == "cpu",
     "Intel CPU runtime not found: pip install intel-opencl-rt intel-cmplr-lib-rt (the test extra)"),
    ("gpu", lambda d: d.type == "gpu", "no OpenCL GPU on this machine"),
)


def _wanted(key: str) -> bool:
    spec = os.environ.get("MDHOM_TEST_DEVICES")
    return not spec or any(s.strip() and s.strip().lower() in key for s in spec.split(","))


def device_params() -> list:
    params = []
    compute = mdhom.compute_devices()
    for ident, match, missing in RUNTIMES:
        found = [d for d in compute if match(d)]
        if not found:
            params.append(pytest.param(None, id=ident, marks=pytest.mark.skip(reason=missing)))
            continue
        for d in found:
            if _wanted(d.key):
                params.append(pytest.param(d, id=d.key))
            else:
                params.append(pytest.param(None, id=d.key, marks=pytest.mark.skip(reason="MDHOM_TEST_DEVICES")))
    return params


DEVICE_PARAMS = device_params()


@pytest.fixture(params=DEVICE_PARAMS)
def device(request) -> mdhom.Device:
    """An OpenCL compute device; the test runs once per device present."""
    return request.param


@pytest.fixture(scope="session")
def oclgrind_device() -> mdhom.Device:
    hits = [d for d in mdhom.devices() if d.checker]
    if not hits:
        pytest.skip("Oclgrind not found: install pyopencl[oclgrind] (the test extra)")
    return hits[0]


@pytest.fixture(scope="session")
def cpu() -> mdhom.Device:
    """The first CPU compute device, for tests of device-independent logic (config store, tuner) that need one.

    A CPU, not whichever device comes first: some of these tests assert what a CPU's fits build and what its
    files hold, which a GPU (first on the GPU machine) answers otherwise."""
    devs = [d for d in mdhom.compute_devices() if d.type == "cpu"]
    if not devs:
        pytest.skip("no OpenCL CPU device")
    return devs[0]


@pytest.fixture
def binner_row_types(monkeypatch) -> list:
    """The row types (numpy dtypes) of the device binners built while the test runs, in order: what a fit bins its
    rows from (float32 rows are binned as they are)."""
    from mdhom.components import binning

    seen: list = []
    made = binning.DeviceBinner.__init__

    def spy(self, mapper, device=None, x_dtype=np.float64, *args, **kwargs):
        seen.append(np.dtype(x_dtype))
        made(self, mapper, device, x_dtype, *args, **kwargs)

    monkeypatch.setattr(binning.DeviceBinner, "__init__", spy)
    return seen
