"""Make every OpenCL implementation on the machine visible to the ICD loader, with no manual set-up.

pyopencl's wheels ship their own ICD loader (ocl-icd), which always sees the PoCL and Oclgrind copies bundled
with pyopencl. Three kinds of implementation stay invisible to it unless someone writes an ``.icd`` file:

* Intel's CPU runtime from PyPI (``intel-opencl-rt``): its shipped ``.icd`` names a build-machine path;
* vendor drivers installed without an ``.icd`` file (the NVIDIA image of the GPU machine has
  ``libnvidia-opencl.so.1`` but no ``/etc/OpenCL/vendors/nvidia.icd``);
* the system ICD folder, once ``OCL_ICD_VENDORS`` points anywhere else.

So before the loader first enumerates platforms we write one folder of ``.icd`` files that names them all,
and point ``OCL_ICD_VENDORS`` at it. Whatever the user had in ``OCL_ICD_VENDORS`` is carried over.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

SYSTEM_VENDOR_DIR = Path("/etc/OpenCL/vendors")

# Driver libraries that implement the ICD interface, by vendor. Each is only used when no .icd names it.
DRIVER_LIBRARIES = (
    "libnvidia-opencl.so.1",
    "libamdocl64.so",
    "libamdocl-orca64.so",
    "libigdrcl.so",
    "libintelocl.so",
)

# Folders where drivers live on common images but that are not always on the linker path.
DRIVER_DIRS = (
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/opt/rocm/lib",
    "/opt/rocm/opencl/lib",
    "/usr/lib/wsl/lib",
)


def _icd_libraries_in(path: Path) -> list[str]:
    """The library names listed by the .icd files of a folder (or by one .icd file)."""
    files = [path] if path.is_file() else sorted(path.glob("*.icd")) if path.is_dir() else []
    names = []
    for f in files:
        try:
            name = f.read_text().strip()
        except OSError:
            continue
        if name:
            names.append(name)
    return names


def _pip_prefixes() -> list[Path]:
    """Prefixes where pip puts data files (Intel's runtime installs its libraries under <prefix>/lib)."""
    seen: list[Path] = []
    for p in (sysconfig.get_paths().get("data"), sys.prefix, sys.base_prefix, sys.exec_prefix):
        if p and Path(p) not in seen:
            seen.append(Path(p))
    return seen


def _linker_paths() -> list[str]:
    """Library files the dynamic linker knows by name (``ldconfig -p``), cheap and optional."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.rsplit("=>", 1)[1].strip() for line in out.splitlines() if "=>" in line]


def find_driver_libraries() -> list[str]:
    """Absolute paths of OpenCL implementations that need an .icd file written for them."""
    found: list[str] = []
    for prefix in _pip_prefixes():
        lib = prefix / "lib" / "libintelocl.so"
        if lib.exists():
            found.append(str(lib))
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(DRIVER_DIRS)
    linker = _linker_paths()
    for name in DRIVER_LIBRARIES:
        for d in dirs:
            candidate = Path(d) / name
            if candidate.exists():
                found.append(str(candidate))
        found.extend(p for p in linker if os.path.basename(p) == name)
    unique: list[str] = []
    real_seen: set[str] = set()
    for lib in found:
        real = os.path.realpath(lib)
        if real not in real_seen:
            real_seen.add(real)
            unique.append(lib)
    return unique


def vendor_entries() -> list[str]:
    """Every library the loader should open: the user's, the system's, then drivers without an .icd."""
    entries: list[str] = []
    user = os.environ.get("OCL_ICD_VENDORS")
    if user:
        entries.extend(_icd_libraries_in(Path(user)))
    entries.extend(_icd_libraries_in(SYSTEM_VENDOR_DIR))
    named_real = {os.path.realpath(e) for e in entries if os.path.isabs(e)}
    named_base = {os.path.basename(e) for e in entries}
    for lib in find_driver_libraries():
        if os.path.realpath(lib) in named_real or os.path.basename(lib) in named_base:
            continue
        entries.append(lib)
    return list(dict.fromkeys(entries))


def _vendor_dir(entries: list[str]) -> Path:
    """A folder holding one .icd file per entry, written once per distinct set of entries."""
    digest = hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]
    base = Path(tempfile.gettempdir()) / f"mdhom-icd-{os.getuid() if hasattr(os, 'getuid') else 0}"
    target = base / digest
    if target.is_dir():
        return target
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=base, prefix=".staging-"))
    for i, entry in enumerate(entries):
        (staging / f"{i:02d}-{Path(entry).stem.split('.')[0]}.icd").write_text(entry + "\n")
    try:
        staging.rename(target)  # atomic: concurrent processes either win the rename or reuse the winner's
    except OSError:
        for f in staging.iterdir():
            f.unlink()
        staging.rmdir()
    return target


_configured: Path | None = None


def configure() -> Path | None:
    """Point ``OCL_ICD_VENDORS`` at a folder naming every implementation found; idempotent.

    Must run before pyopencl asks the loader for platforms for the first time. Set ``MDHOM_ICD_SETUP=0``
    to leave the loader's environment untouched.
    """
    global _configured
    if _configured is not None or os.environ.get("MDHOM_ICD_SETUP", "1") == "0":
        return _configured
    entries = vendor_entries()
    if not entries:
        return None
    _configured = _vendor_dir(entries)
    os.environ["OCL_ICD_VENDORS"] = str(_configured)
    return _configured

