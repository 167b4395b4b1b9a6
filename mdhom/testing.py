"""Helpers for cross-vendor kernel tests: run code under the Oclgrind checker and collect its reports.

Oclgrind reads its options from the environment when it starts and writes its diagnostics (out-of-bounds
accesses, data races, API misuse) to ``OCLGRIND_LOG``, not to an exception. So the code under test runs in
a fresh interpreter with those variables set, and the log comes back for the test to fail on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass


@dataclass
class CheckerRun:
    returncode: int
    stdout: str
    stderr: str
    report: str  # everything Oclgrind logged; empty means no out-of-bounds access, race or API error

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and not self.report.strip()

    def explain(self) -> str:
        return (
            f"exit code {self.returncode}\n--- Oclgrind report ---\n{self.report}\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def run_under_oclgrind(code: str, timeout: float = 600, data_races: bool = True,
                       uninitialized: bool = False) -> CheckerRun:
    """Run Python ``code`` with ``MDHOM_DEVICE`` set to Oclgrind and its checks on; return the report.

    Out-of-bounds accesses and API errors are always checked, data races by default. The
    uninitialized-value check is opt-in: it reported values in a second kernel only when other programs
    had run before in the same process (the same kernel alone was clean), which is not yet explained.
    """
    with tempfile.TemporaryDirectory(prefix="mdhom-oclgrind-") as tmp:
        log = os.path.join(tmp, "oclgrind.log")
        env = dict(os.environ)
        env.update(
            MDHOM_DEVICE="oclgrind",
            OCLGRIND_LOG=log,
            OCLGRIND_CHECK_API="1",
            OCLGRIND_DATA_RACES="1" if data_races else "0",
            OCLGRIND_UNINITIALIZED="1" if uninitialized else "0",
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
        )
        report = open(log).read() if os.path.exists(log) else ""
        return CheckerRun(proc.returncode, proc.stdout, proc.stderr, report)
