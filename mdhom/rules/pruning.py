"""Holdout sets and global pruning (early stopping and post-pruning) of the rule learner, as mlrl-boomer has them.

mlrl-boomer's ``holdout`` splits the examples into a training set and a holdout set once, before the default rule
(``'random'``, ``'stratified-output-wise'``: an iterative stratification that keeps each label's share,
``'stratified-example-wise'``: distinct label vectors as strata; ``holdout_set_size`` 0.33 of the examples held out,
``'auto'``: stratified output-wise where a holdout is needed, else none). Held-out examples keep weight 0 in every
rule's search, as instance sampling's unsampled ones do, but every rule's head is added to their scores, so that the
model's loss on them can be measured after each rule. The default rule is learned on every example, held out or
not: mlrl-boomer's default rule sums the statistics of all of them.

``global_pruning`` (what mlrl-boomer called ``early_stopping`` before 0.8) measures the mean loss of the model on the
holdout set (``use_holdout_set``; else on the training examples) before each rule is added, counting the default
rule as mlrl-boomer does (``min_rules``, the intervals and the model sizes below all count it):

* ``'post-pruning'`` learns every rule and keeps the number of rules, a multiple of ``interval`` and at least
  ``min_rules``, whose model had the least loss (the first of equal losses);
* ``'pre-pruning'`` (early stopping) keeps the last ``num_recent`` losses, measured every ``update_interval``
  rules, and the ``num_past`` before them in two ring buffers; once both are full it tests every ``stop_interval``
  rules whether the aggregate (``'min'``, ``'max'``, ``'avg'``) of the past buffer improves on that of the recent
  one by at least ``min_improvement`` (relative: (past - recent) / recent); when it does not, learning stops and the
  model keeps the number of rules of least loss seen since the buffers were full. Measuring starts only
  (num_past + num_recent) x update_interval rules before ``min_rules``, so no stop comes before it.

``remove_unused_rules=False`` keeps the rules after the chosen number in the model, unused for prediction
(pre-pruning then also goes on learning up to ``max_rules``). The loss is mlrl-boomer's evaluation measure: the
mean over an example's labels of the label-wise logistic or squared error loss, the example-wise logistic loss of
the example; the model's loss is its mean over the examples. Everything here runs on the host from the scores,
so a device fit stops where the numpy reference stops.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

HOLDOUTS = ("random", "stratified-output-wise", "stratified-example-wise")
HOLDOUT_SIZE = 0.33  # mlrl-boomer's holdout_set_size
AGGREGATIONS = ("min", "max", "avg")
PRE_PRUNING = {"use_holdout_set": True, "remove_unused_rules": True, "min_rules": 100, "update_interval": 1,
               "stop_interval": 1, "num_past": 50, "num_recent": 50, "aggregation": "avg", "min_improvement": 0.005}
POST_PRUNING = {"use_holdout_set": True, "remove_unused_rules": True, "min_rules": 100, "interval": 1}
PRUNINGS = {"pre-pruning": PRE_PRUNING, "post-pruning": POST_PRUNING}
# mlrl-boomer's documentation gives 'min' as pre-pruning's aggregation; its code (and 0.12.3's config, checked with
# BoomerClassifierConfig().use_global_pre_pruning().get_aggregation_function()) uses the arithmetic mean: we follow
# the code


def bracket(text: str, what: str) -> tuple[str, dict[str, str]]:
    """(name, {option: text}) of mlrl-boomer's bracket notation ``name{key=value,key=value}``."""
    name, sep, rest = text.partition("{")
    if not sep:
        return text.strip(), {}
    if not rest.endswith("}"):
        raise ValueError(f"{what}: {text!r} opens a '{{' it does not close")
    out = {}
    for item in filter(None, (s.strip() for s in rest[:-1].split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{what}: {item!r} in {text!r} is not key=value")
        out[key.strip()] = value.strip()
    return name.strip(), out


def check_holdout(v: Any) -> Any:
    """'auto', 'none', or (method, holdout_set_size); also None, a method name (size 0.33), 'method:size' and
    mlrl-boomer's 'method{holdout_set_size=0.2}'."""
    if v is None or v in ("auto", "none"):
        return "none" if v is None else v
    size: Any = HOLDOUT_SIZE
    if isinstance(v, str):
        method, opts = bracket(v, "holdout")
        if ":" in method and not opts:
            method, _, text = method.partition(":")
            opts = {"holdout_set_size": text}
        unknown = set(opts) - {"holdout_set_size"}
        if unknown:
            raise ValueError(f"takes the option holdout_set_size only, got {', '.join(sorted(unknown))}")
        if "holdout_set_size" in opts:
            try:
                size = float(opts["holdout_set_size"])
            except ValueError:
                raise ValueError(f"holdout_set_size must be a number, got {opts['holdout_set_size']!r}") from None
    else:
        try:
            method, size = v
        except (TypeError, ValueError):
            raise ValueError(f"must be 'auto', 'none', one of {', '.join(HOLDOUTS)} or (method, holdout_set_size), "
                             f"got {v!r}") from None
    method = "stratified-output-wise" if method == "stratified-label-wise" else method  # mlrl-boomer < 0.10's name
    if method not in HOLDOUTS:
        raise ValueError(f"must be 'auto', 'none' or one of {', '.join(HOLDOUTS)}, got {method!r}")
    if isinstance(size, bool) or not isinstance(size, numbers.Real) or not 0.0 < float(size) < 1.0:
        raise ValueError(f"holdout_set_size must lie in (0, 1), got {size!r}")
    return (method, float(size))


def _option(name: str, value: Any, default: Any) -> Any:
    """One global pruning option, converted from text (bracket notation) where needed and checked."""
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return bool(value)
    if name == "aggregation":
        if value not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {value!r}")
        return value
    kind = int if isinstance(default, int) else float
    if isinstance(value, str):
        try:
            value = kind(value)
        except ValueError:
            raise ValueError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            (kind is int and not float(value).is_integer()) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    value = kind(value)
    if name == "min_improvement" and not 0.0 <= value <= 1.0:
        raise ValueError(f"min_improvement must lie in [0, 1], got {value}")
    if kind is int and value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def check_global_pruning(v: Any) -> Any:
    """'none', or a dict with ``method`` ('pre-pruning' or 'post-pruning') and every option of that method; also
    None, a method name (its defaults), mlrl-boomer's 'pre-pruning{min_rules=50,aggregation=min}' or a mapping with
    ``method`` and some options."""
    if v is None or v == "none":
        return "none"
    if isinstance(v, str):
        method, given = bracket(v, "global_pruning")
    elif isinstance(v, Mapping):
        given = dict(v)
        method = given.pop("method", None)
    else:
        raise ValueError(f"must be 'none', 'pre-pruning', 'post-pruning' (optionally in mlrl-boomer's bracket "
                         f"notation, 'pre-pruning{{min_rules=50}}') or a dict with 'method', got {v!r}")
    if method not in PRUNINGS:
        raise ValueError(f"method must be 'none', 'pre-pruning' or 'post-pruning', got {method!r}")
    defaults = PRUNINGS[method]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{method} has no option {', '.join(unknown)}; it takes {', '.join(defaults)}")
    out = {"method": method, **{k: _option(k, given.get(k, d), d) for k, d in defaults.items()}}
    if method == "pre-pruning" and out["stop_interval"] % out["update_interval"]:
        raise ValueError(f"stop_interval ({out['stop_interval']}) must be a multiple of update_interval "
                         f"({out['update_interval']})")
    return out


def resolved_holdout(holdout: Any, pruning: Any) -> tuple[str, float] | None:
    """The holdout a fit uses: 'auto' is mlrl-boomer's stratified output-wise split of 0.33 when global pruning
    measures on a holdout set, else none."""
    if holdout == "none":
        return None
    if holdout == "auto":
        uses = pruning != "none" and pruning["use_holdout_set"]
        return ("stratified-output-wise", HOLDOUT_SIZE) if uses else None
    return tuple(holdout)


# ------------------------------------------------------------------------------------------------ partitions

def _output_wise_strata(Y: np.ndarray) -> list[np.ndarray]:
    """mlrl-boomer's output-wise strata: repeatedly the label with the fewest examples not yet placed (ties to the
    lower label) takes those examples (ascending); the examples without a label come last."""
    Yb = Y.astype(bool)
    left = Yb.sum(axis=0).astype(np.int64)
    placed = np.zeros(Y.shape[0], bool)
    strata = []
    while (left > 0).any():
        label = int(np.argmin(np.where(left > 0, left, np.iinfo(np.int64).max)))
        rows = np.flatnonzero(Yb[:, label] & ~placed)
        placed[rows] = True
        left -= Yb[rows].sum(axis=0)
        left[label] = 0
        strata.append(rows)
    if not placed.all():
        strata.append(np.flatnonzero(~placed))
    return strata


def _example_wise_strata(Y: np.ndarray) -> list[np.ndarray]:
    """The examples of each distinct label vector, the rarest vectors first (ties: first occurrence)."""
    _, first, inverse, counts = np.unique(Y.astype(np.int8), axis=0, return_index=True, return_inverse=True,
                                          return_counts=True)
    by_vector = np.split(np.argsort(inverse.reshape(-1), kind="stable"), np.cumsum(counts)[:-1])  # rows ascending
    groups = [by_vector[g] for g in np.argsort(first, kind="stable")]
    return sorted(groups, key=len)  # stable: equal sizes keep the order of first occurrence


def holdout_rows(Y: np.ndarray, holdout: tuple[str, float], seed: int) -> np.ndarray:
    """Ascending indices of the held-out examples. mlrl-boomer's sizes: int(holdout_set_size x n) held out, its
    float32 product; stratified splits give each stratum in turn the training set's share of it (the share of the
    examples still to place), rounded up while more training than holdout examples remain to be placed, down while
    fewer (a coin on a tie), within what is left of both sets. Deterministic from ``seed``: its own stream
    (apart from the fit's other draws)."""
    method, size = holdout
    n = Y.shape[0]
    n_out = int(np.float32(size) * np.float32(n))
    if n_out < 1 or n_out >= n:
        raise ValueError(f"holdout={method!r} with holdout_set_size={size} holds out {n_out} of {n} examples; "
                         "both the training and the holdout set need examples: pass more examples or another size")
    rng = np.random.default_rng([int(seed), 0x686F6C64])  # "hold": a stream of its own
    if method == "random":
        return np.sort(rng.permutation(n)[:n_out])
    strata = _output_wise_strata(Y) if method == "stratified-output-wise" else _example_wise_strata(Y)
    n_in, out = n - n_out, []
    for rows in strata:
        share = n_in / (n_in + n_out) * rows.size
        up = n_in > n_out or (n_in == n_out and bool(rng.integers(2)))
        take = min(int(math.ceil(share) if up else math.floor(share)), n_in)
        take = max(take, rows.size - n_out)
        n_in, n_out = n_in - take, n_out - (rows.size - take)
        out.append(rows[rng.permutation(rows.size)[take:]])
    return np.sort(np.concatenate(out))


# ------------------------------------------------------------------------------------------------ the measure

def example_losses(loss_name: str, Y: np.ndarray, S: np.ndarray) -> np.ndarray:
    """mlrl-boomer's evaluation measure of each example: the mean over its labels of the label-wise logistic loss
    log(1 + exp(-e s)) or squared error (e - s)^2 (e = +-1), or the example-wise logistic loss."""
    if loss_name == "logistic_labelwise":
        return np.logaddexp(0.0, np.where(Y > 0, -S, S)).mean(axis=1)
    if loss_name == "squared_error":
        return ((2.0 * Y - 1.0 - S) ** 2).mean(axis=1)
    from mdhom.rules.losses import make_loss

    return make_loss(loss_name).value(Y, S)


class GlobalPruning:
    """The pruning state of one fit: :meth:`test` before every rule, with the number of rules so far (the default
    rule counted) and the scores; it returns (stop, used): whether to stop learning, and the number of rules the
    model uses (0: not decided). ``rows``: the examples measured (ascending). Each measured example's loss is kept
    and computed again only where :meth:`touch` says a rule changed its scores: a rule covers a few of them, and
    at 6600 held-out rows of 101 labels a full measurement costs about as much as a GPU's rule."""

    def __init__(self, spec: dict[str, Any], loss_name: str, Y: np.ndarray, rows: np.ndarray) -> None:
        self.spec, self.loss_name = spec, loss_name
        self.rows, self.Y = rows, Y[rows]
        self.at = np.full(Y.shape[0], -1, np.intp)  # each example's place among the measured ones (-1: none)
        self.at[rows] = np.arange(rows.size)
        self.example = np.zeros(rows.size)
        self.stale = np.ones(rows.size, bool)
        self.pre = spec["method"] == "pre-pruning"
        self.sizes: list[int] = []  # the model sizes measured, and their losses
        self.losses: list[float] = []
        self.best, self.best_rules = math.inf, spec["min_rules"]
        self.stopped = False
        if self.pre:
            self.past: list[float] = []
            self.recent: list[float] = []
            span = (spec["num_past"] + spec["num_recent"]) * spec["update_interval"]
            self.offset = max(0, spec["min_rules"] - span)

    def touch(self, rows: np.ndarray) -> None:
        """The scores of ``rows`` changed (a rule's head was added to them)."""
        at = self.at[rows]
        self.stale[at[at >= 0]] = True

    def _measure(self, n_rules: int, S: np.ndarray) -> float:
        redo = np.flatnonzero(self.stale)
        if redo.size:
            self.example[redo] = example_losses(self.loss_name, self.Y[redo], S[self.rows[redo]])
            self.stale[:] = False
        value = float(np.mean(self.example))
        self.sizes.append(n_rules)
        self.losses.append(value)
        return value

    def _aggregate(self, buffer: list[float]) -> float:
        how = self.spec["aggregation"]
        return min(buffer) if how == "min" else max(buffer) if how == "max" else float(np.mean(buffer))

    def test(self, n_rules: int, S: np.ndarray) -> tuple[bool, int]:
        spec = self.spec
        if not self.pre:
            if n_rules >= spec["min_rules"] and n_rules % spec["interval"] == 0:
                value = self._measure(n_rules, S)
                if value < self.best:
                    self.best, self.best_rules = value, n_rules
                    return False, n_rules
            return False, 0
        if self.stopped or n_rules <= self.offset or n_rules % spec["update_interval"]:
            return False, 0
        value = self._measure(n_rules, S)
        stop, used = False, 0
        if len(self.past) == spec["num_past"]:
            if value < self.best:
                self.best, self.best_rules = value, n_rules
            if n_rules % spec["stop_interval"] == 0:
                past, recent = np.float64(self._aggregate(self.past)), np.float64(self._aggregate(self.recent))
                with np.errstate(divide="ignore", invalid="ignore"):  # a loss of 0: inf or NaN, no stop (as in C++)
                    improvement = (past - recent) / recent
                if improvement < spec["min_improvement"]:
                    stop, used, self.stopped = spec["remove_unused_rules"], self.best_rules, True
        self.recent.append(value)  # the ring buffers: the oldest recent value moves to the past buffer
        if len(self.recent) > spec["num_recent"]:
            self.past.append(self.recent.pop(0))
            if len(self.past) > spec["num_past"]:
                self.past.pop(0)
        return stop, used
