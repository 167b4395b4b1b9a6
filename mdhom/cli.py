"""The ``mdhom`` command: one sub-command per module in ``mdhom.commands``.

Each module there defines ``register(subparsers)``, which adds its parser and sets ``func``; keeping
them apart lets each command import only what it needs (a ``devices`` listing never loads optuna).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("devices", "demo", "tune", "bench", "train", "predict")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mdhom", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"mdhom.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"mdhom {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
