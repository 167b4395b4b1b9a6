"""Marks for tests whose outcome depends on a device's known behaviour (imported by the test modules)."""

from __future__ import annotations

import pytest

import mdhom


def intel_optimiser_bits(request: pytest.FixtureRequest, device: mdhom.Device | None) -> None:
    """Mark an exact-bits test an expected failure on Intel's CPU runtime. Seen on a 2-core Xeon (AVX-512, Intel's
    runtime 2026.2): the example-wise rules' coupled histogram and the K-trees multiclass fit in double precision
    return other last bits than numpy with the runtime's optimiser on, and numpy's bits with ``-cl-opt-disable``
    (neither a lone a * b + c nor a sequential sum shows it); they passed on the AMD EPYC machines of earlier
    sessions. Not strict: where the runtime gives the bits, the test passes."""
    if device is not None and device.runtime == "intel":
        request.applymarker(pytest.mark.xfail(
            reason="Intel's CPU runtime's optimiser changes last bits of these double kernels on AVX-512 Xeons "
                   "(exact with -cl-opt-disable)", strict=False))


def runtime_faults(request: pytest.FixtureRequest, device: mdhom.Device | None) -> None:
    """Mark a test of many kernel configurations an expected failure on a runtime version with a known fault that
    changes results (:func:`mdhom.devices.known_faults`: PoCL 4 and 5 run some reductions whose loop holds a barrier
    wrong; on the H200 machine's PoCL 5.0 these tests failed in random configurations, not in the heuristics'). Not
    strict: the configurations drawn may all pass."""
    if device is not None and device.known_faults:
        request.applymarker(pytest.mark.xfail(reason=device.known_faults[0], strict=False))
