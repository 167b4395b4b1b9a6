"""Writing files so that a crash or an interrupt never leaves a torn one (models, tuned configurations)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows (``/proc/self/status`` on Linux).

    ``os.umask`` can only read the mask by setting it, which races with other threads creating files; it is
    the fallback, under a lock, where ``/proc`` has no ``Umask`` line."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write_json(path: str | os.PathLike, doc: Mapping[str, Any], **dump: Any) -> None:
    """Write ``doc`` as JSON so that readers see the old file or the new one, never a torn one: a temporary
    file in the same directory, flushed and fsynced, then ``os.replace``. ``dump`` goes to ``json.dump``.

    The file gets the mode an ordinary ``open`` would give it (``0o666`` less the umask): ``mkstemp``
    creates its file ``0o600`` and ``os.replace`` keeps that, which made models and tuned configurations
    unreadable to the rest of a team sharing them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, **dump)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = os.fspath(path)  # a full disk fails in write or fsync, which name no file
        raise
