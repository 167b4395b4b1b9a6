"""The ``mdhom`` command: one sub-command per module in ``mdhom.commands``.

Each module there defines ``register(subparsers)``, which adds its parser and sets ``func``; keeping
them apart lets each command import only what it needs (a ``devices`` listing never loads optuna).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Callable

COMMANDS = ("devices", "demo", "tune", "bench", "train", "predict")


def build_parser() -> argparse.ArgumentParser:
    from mdhom import __version__

    parser = argparse.ArgumentParser(prog="mdhom", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"mdhom {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"mdhom.commands.{name}").register(sub)
    return parser


def _one_line_warnings(command: str) -> Callable[..., None]:
    """``warnings.showwarning`` for the command line: ``mdhom <command>: warning: <message>``, one line.

    Python's default shows the file and source line the warning is attributed to; on the command line that
    is mdhom's own code (or the console script), which tells the user nothing."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        ours = category is UserWarning or category.__module__.startswith("mdhom")
        kind = "" if ours else f" ({category.__name__})"
        try:
            print(f"mdhom {command}: warning: {message}{kind}", file=file or sys.stderr)
        except OSError:
            pass

    return show


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warnings(args.command)
        try:
            return int(args.func(args) or 0)
        except (ValueError, TypeError, FileNotFoundError) as exc:
            print(f"mdhom {args.command}: error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
