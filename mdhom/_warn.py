"""Warnings that point at the user's code: the first frame outside mdhom, not the library line that warned.

A fixed ``stacklevel`` is right for one call path only; a tuned-config warning is raised three to eight
frames below the user's ``fit``, so it printed an mdhom source line the user cannot act on. (Python 3.12's
``skip_file_prefixes`` does the same; mdhom supports 3.11.)
"""

from __future__ import annotations

import os
import sys
import warnings


def _package_dirs() -> tuple[str, ...]:
    """The directories mdhom's Python code lives in (``mdhom.tuning`` may sit apart in an editable install)."""
    dirs = []
    for name in ("mdhom", "mdhom.tuning"):
        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None)
        if file:
            dirs.append(os.path.dirname(os.path.abspath(file)) + os.sep)
    return tuple(dirs)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the innermost caller outside mdhom (the user's line)."""
    prefixes = _package_dirs()
    frame = sys._getframe(1)
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(prefixes):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
