"""Writing files so that a crash or an interrupt never leaves a torn one (models, tuned configurations)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def atomic_write_json(path: str | os.PathLike, doc: Mapping[str, Any], **dump: Any) -> None:
    """Write ``doc`` as JSON so that readers see the old file or the new one, never a torn one: a temporary
    file in the same directory, flushed and fsynced, then ``os.replace``. ``dump`` goes to ``json.dump``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, **dump)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
