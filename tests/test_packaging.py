"""The wheel holds every module and kernel file of the source tree, all under the `mdhom` namespace."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _expected() -> set[str]:
    want = set()
    for src, dst in (("mdhom", "mdhom"), ("kernels", "mdhom/kernels"), ("tuning", "mdhom/tuning"),
                     ("tuned_configs", "mdhom/tuned_configs")):
        for f in (ROOT / src).rglob("*"):
            # tuning/results holds recorded experiment tables: evidence kept in the repository, not package data
            skip = "__pycache__" in f.parts or "results" in f.relative_to(ROOT / src).parts
            if f.is_file() and not skip and f.suffix in (".py", ".cl", ".mako", ".json"):
                want.add(f"{dst}/{f.relative_to(ROOT / src).as_posix()}")
    return want


def test_wheel_contains_every_source_file(tmp_path):
    # Build from a clean copy: a build/ folder left in the checkout would leak stale files into the wheel.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", ".venv", ".whl*", "__pycache__", ".pytest_cache", ".ruff_cache"))
    try:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(src)], check=True, capture_output=True, text=True, timeout=300)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"pip wheel failed:\n{exc.stderr[-3000:]}")
    wheel = next(tmp_path.glob("mdhom-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_expected() - names)
    assert not missing, f"not in the wheel: {missing}"
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"mdhom"}, tops
