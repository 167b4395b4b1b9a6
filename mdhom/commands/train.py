"""``mdhom train``: fit a TreeBoostClassifier/Regressor, or a RuleBoostClassifier on multi-label data, on a data
file and save the model as JSON.

Every option of :mod:`mdhom.trees.params` and of :mod:`mdhom.rules.options` is a ``--name value`` flag (``none``
for None), so the command line and the Python API cannot drift apart; only the flags given reach the estimator.
``--learner auto`` (the default) fits rules when the target has several labels (an ARFF file with ``--labels``) and
no tree-only option is given, or when a rule-only option is given; trees otherwise. Data readers come from
:mod:`mdhom.datasets`.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "tsv", ".libsvm": "libsvm", ".svm": "libsvm",
           ".svmlight": "libsvm", ".arff": "arff"}


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    """The data-file flags that ``train`` and ``predict`` share."""
    p.add_argument("--data", required=True, help="the data file")
    p.add_argument("--format", choices=("csv", "tsv", "libsvm", "arff"), default=None,
                   help="file format (default: from the extension)")
    p.add_argument("--target", default="0",
                   help="csv/tsv: the target column, an index (negative from the end) or a header name (default 0)")
    p.add_argument("--labels", default=None,
                   help="arff: the label attributes, a count N (the last N) or a Mulan XML file "
                        "(default: the last attribute is the single target)")


def _value(kind: str) -> Any:
    def parse(text: str) -> Any:
        if text.lower() == "none":
            return None
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "list" and "," in text:  # --eval-metric logloss,auc
            return [t.strip() for t in text.split(",")]
        return text
    parse.__name__ = kind
    return parse


def _any(text: str) -> Any:
    """A rule option of several types: none, an integer, a (method, count) pair written ``method:count``
    (``--feature-binning equal-width:32``), a number, or the text itself."""
    low = text.lower()
    if low == "none":
        return None
    method, sep, count = text.partition(":")
    if sep and count.isdigit():
        return (method, int(count))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _option_names() -> tuple[set[str], set[str]]:
    """(tree options, rule options) by name."""
    from mdhom.rules.options import TABLE
    from mdhom.trees.params import OPTIONS

    return {o.name for o in OPTIONS}, set(TABLE.by_name)


def register(sub: argparse._SubParsersAction) -> None:
    from mdhom.rules.options import TABLE
    from mdhom.trees.params import OPTIONS

    p = sub.add_parser("train", help="fit gradient-boosted trees, or multi-label rules, on a data file and save the "
                                     "model (JSON)")
    add_data_arguments(p)
    p.add_argument("--model", required=True, help="where to write the model (JSON)")
    p.add_argument("--eval-data", default=None, help="a validation file (same format) for early stopping (trees)")
    p.add_argument("--learner", choices=("auto", "trees", "rules"), default="auto",
                   help="trees (TreeBoostClassifier/Regressor), rules (RuleBoostClassifier, multi-label 0/1 targets) "
                        "or auto (default): rules for a target of several labels unless a tree-only option is given, "
                        "or when a rule-only option is given; trees otherwise")
    trees = p.add_argument_group("tree options (as in the Python API; 'none' for None)")
    for o in OPTIONS:
        _add_option(trees, o.name, _value(o.kind), o.doc, o.default)
    rules = p.add_argument_group("rule options (RuleBoostClassifier's; 'none' for None; --device, --precision and "
                                 "--random-state above serve both)")
    for o in TABLE.options:
        if o.name not in {t.name for t in OPTIONS}:
            _add_option(rules, o.name, _any if o.kind == "any" else _value(o.kind), o.doc, o.default)
    p.set_defaults(func=run)


def _add_option(group: argparse._ArgumentGroup, name: str, parse: Any, doc: str, default: Any) -> None:
    """``--max-bin`` and ``--max_bin``; absent unless given (the estimator's default applies)."""
    flags = dict.fromkeys([f"--{name.replace('_', '-')}", f"--{name}"])
    group.add_argument(*flags, dest=name, type=parse, default=argparse.SUPPRESS,
                       help=f"{doc} (default: {default})".replace("%", "%%"))


def data_format(path: str, given: str | None) -> str:
    if given:
        return given
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"cannot tell the format of {path!r} from its extension; pass --format")
    return FORMATS[ext]


def _target(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def read_data(args: argparse.Namespace, n_features: int | None = None) -> tuple[Any, Any]:
    """(X, y) from ``--data``; y is None when a csv/tsv file holds features only (prediction input)."""
    from mdhom import datasets

    fmt = data_format(args.data, args.format)
    if fmt == "libsvm":
        return datasets.load_libsvm(args.data, n_features=n_features)
    if fmt == "arff":
        labels: Any = args.labels
        if labels is not None and labels.isdigit():
            labels = int(labels)
        X, Y, _, _ = datasets.load_arff(args.data, labels=labels)
        return X, (Y[:, 0] if Y.shape[1] == 1 else Y)
    delimiter = "," if fmt == "csv" else "\t"
    if n_features is not None and _n_columns(args.data, delimiter) == n_features:
        return _features_only(args.data, delimiter), None
    return datasets.load_delimited(args.data, target=_target(args.target), delimiter=delimiter)


def _rows(path: str, delimiter: str) -> Any:
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        for cells in csv.reader(handle, delimiter=delimiter):
            if cells and any(c.strip() for c in cells):
                yield cells


def _number(cell: str) -> float:
    from mdhom.datasets import MISSING_TOKENS

    return float("nan") if cell.strip().lower() in MISSING_TOKENS else float(cell)


def _n_columns(path: str, delimiter: str) -> int:
    return len(next(_rows(path, delimiter), []))


def _features_only(path: str, delimiter: str) -> Any:
    """A csv/tsv file of features alone (prediction input); a first line that is not numeric is a header."""
    import numpy as np

    rows = list(_rows(path, delimiter))
    try:
        [_number(c) for c in rows[0]]
    except ValueError:
        rows = rows[1:]
    try:
        return np.array([[_number(c) for c in r] for r in rows], dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _integral_labels(y: Any) -> Any:
    """Class labels read as floats (1.0, 0.0) become integers, so predictions print as they were written."""
    import numpy as np

    y = np.asarray(y)
    if y.dtype.kind == "f" and np.all(y == np.round(y)) and np.abs(y).max() < 2**53:
        return y.astype(np.int64)
    return y


def choose_learner(args: argparse.Namespace, y: Any) -> str:
    """'trees' or 'rules' for ``--learner`` and the flags given (see the module docstring)."""
    tree_names, rule_names = _option_names()
    tree_only = sorted(n for n in tree_names - rule_names if hasattr(args, n))
    rule_only = sorted(n for n in rule_names - tree_names if hasattr(args, n))
    flags = lambda names: ", ".join(f"--{n.replace('_', '-')}" for n in names)  # noqa: E731
    if args.learner == "trees" and rule_only:
        raise ValueError(f"--learner trees does not take the rule options {flags(rule_only)}")
    if args.learner == "rules" and tree_only:
        raise ValueError(f"--learner rules does not take the tree options {flags(tree_only)}")
    if args.learner != "auto":
        return args.learner
    if tree_only and rule_only:
        raise ValueError(f"options of both learners given (trees: {flags(tree_only)}; rules: {flags(rule_only)}); "
                         "pass --learner trees or --learner rules")
    several = y is not None and getattr(y, "ndim", 1) == 2 and y.shape[1] > 1
    return "rules" if rule_only or (several and not tree_only) else "trees"


def run(args: argparse.Namespace) -> int:
    X, y = read_data(args)
    if y is None:
        raise ValueError(f"{args.data} has no target column")
    if choose_learner(args, y) == "rules":
        return run_rules(args, X, y)
    from mdhom.trees import TreeBoostClassifier, TreeBoostRegressor
    from mdhom.trees.params import OPTIONS

    params = {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}
    objective = params.get("objective", next(o.default for o in OPTIONS if o.name == "objective"))
    regression = objective in ("reg:squarederror", "regression", "squared_error", "l2", "mse")
    est = (TreeBoostRegressor if regression else TreeBoostClassifier)(**params)
    y = _integral_labels(y) if not regression else y
    fit_args: dict[str, Any] = {}
    if args.eval_data:
        eval_args = argparse.Namespace(**{**vars(args), "data": args.eval_data})
        Xe, ye = read_data(eval_args, n_features=X.shape[1])
        if ye is None:
            raise ValueError(f"{args.eval_data} has no target column")
        ye = _integral_labels(ye) if not regression else ye
        fit_args["eval_set"] = [(Xe, ye)]
    start = time.perf_counter()
    est.fit(X, y, **fit_args)
    seconds = time.perf_counter() - start
    est.save_model(args.model)
    print(f"trained {type(est).__name__} ({est.objective_}) on {X.shape[0]} rows x {X.shape[1]} features: "
          f"{len(est.round_times_)} rounds in {seconds:.2f} s; best iteration {est.best_iteration_}; "
          f"model written to {args.model}")
    return 0


def run_rules(args: argparse.Namespace, X: Any, y: Any) -> int:
    """Fit a RuleBoostClassifier on 0/1 labels (a single target column is one label) and save it."""
    import numpy as np

    from mdhom.rules import RuleBoostClassifier

    _, rule_names = _option_names()
    if args.eval_data:
        raise ValueError("--eval-data: RuleBoostClassifier takes no separate evaluation set; its early stopping "
                         "measures a holdout split off the training data, as mlrl-boomer's (--global-pruning "
                         "pre-pruning, --holdout)")
    Y = np.asarray(y)
    Y = Y[:, None] if Y.ndim == 1 else Y
    est = RuleBoostClassifier(**{n: getattr(args, n) for n in rule_names if hasattr(args, n)})
    start = time.perf_counter()
    est.fit(X, Y)
    seconds = time.perf_counter() - start
    est.save_model(args.model)
    print(f"trained RuleBoostClassifier ({est.loss}, {est.head_type_} heads) on {X.shape[0]} rows x {X.shape[1]} "
          f"features, {Y.shape[1]} labels: {len(est.rules_)} rules after the default rule in {seconds:.2f} s; "
          f"model written to {args.model}")
    return 0
