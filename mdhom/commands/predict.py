"""``mdhom predict``: apply a saved tree model to a data file and write one prediction line per row.

Lines hold the predicted label (multi-label: the 0/1 labels, comma-separated) or, with ``--proba``, the
probabilities (comma-separated). When the file carries targets, the score goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from mdhom.commands.train import _integral_labels, add_data_arguments, read_data


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict with a saved tree model (from 'mdhom train')")
    p.add_argument("--model", required=True, help="the model file (JSON)")
    add_data_arguments(p)
    p.add_argument("--proba", action="store_true", help="write class probabilities instead of labels")
    p.add_argument("--out", default=None, help="output file (default: standard output)")
    p.set_defaults(func=run)


def _text(value: object) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mdhom.trees import TreeBoostClassifier, load_model

    est = load_model(args.model)
    X, y = read_data(args, n_features=est.n_features_in_)
    if args.proba:
        if not isinstance(est, TreeBoostClassifier):
            raise ValueError("--proba needs a classifier model")
        out = est.predict_proba(X)
    else:
        out = est.predict(X)
    out = np.asarray(out)
    if out.dtype.kind == "f":
        lines = [",".join(repr(float(v)) for v in np.atleast_1d(row)) for row in out]
    else:
        lines = [",".join(_text(v) for v in np.atleast_1d(row)) for row in out]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    if y is not None:
        if isinstance(est, TreeBoostClassifier):
            y = _integral_labels(y)
            print(f"accuracy {est.score(X, y):.6f} on {len(y)} rows", file=sys.stderr)
        else:
            rmse = float(np.sqrt(np.mean((est.predict(X) - y) ** 2)))
            print(f"rmse {rmse:.6f} on {len(y)} rows", file=sys.stderr)
    return 0
