"""``mdhom predict``: apply a saved model (trees or rules, from ``mdhom train``) to a data file and write one
prediction line per row.

Lines hold the predicted label (multi-label: the 0/1 labels, comma-separated) or, with ``--proba``, the
probabilities (comma-separated). When the file carries targets, the score goes to stderr: accuracy or RMSE for
trees, Hamming loss and micro-F1 for rules.
"""

from __future__ import annotations

import argparse
import sys

from mdhom.commands.train import _integral_labels, add_data_arguments, read_data


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict with a saved model (trees or rules, from 'mdhom train')")
    p.add_argument("--model", required=True, help="the model file (JSON)")
    add_data_arguments(p)
    p.add_argument("--proba", action="store_true", help="write class probabilities instead of labels")
    p.add_argument("--out", default=None, help="output file (default: standard output)")
    p.set_defaults(func=run)


def _text(value: object) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from mdhom import load_model
    from mdhom.rules import RuleBoostClassifier
    from mdhom.trees import TreeBoostClassifier

    est = load_model(args.model)
    X, y = read_data(args, n_features=est.n_features_in_)
    rules = isinstance(est, RuleBoostClassifier)
    if rules and X.shape[1] != est.n_features_in_:
        hint = f"; pass --labels (the model predicts {est.n_outputs_} labels)" if est.n_outputs_ > 1 else ""
        raise ValueError(f"{args.data} has {X.shape[1]} features, the model expects {est.n_features_in_}{hint}")
    if args.proba:
        if not isinstance(est, (TreeBoostClassifier, RuleBoostClassifier)):
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
    if y is not None and rules:
        from mdhom.bench.boomer import multilabel_scores

        Y = np.asarray(y).reshape(len(X), -1)
        if Y.shape[1] != est.n_outputs_:
            raise ValueError(f"{args.data} has {Y.shape[1]} labels, the model predicts {est.n_outputs_}")
        got = multilabel_scores(est.predict(X), Y)
        print(f"hamming {got['hamming']:.6f} micro-f1 {got['micro_f1']:.6f} subset-accuracy "
              f"{got['subset_accuracy']:.6f} on {len(X)} rows", file=sys.stderr)
    elif y is not None:
        if isinstance(est, TreeBoostClassifier):
            y = _integral_labels(y)
            print(f"accuracy {est.score(X, y):.6f} on {len(y)} rows", file=sys.stderr)
        else:
            rmse = float(np.sqrt(np.mean((est.predict(X) - y) ** 2)))
            print(f"rmse {rmse:.6f} on {len(y)} rows", file=sys.stderr)
    return 0
