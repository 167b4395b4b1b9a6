"""Rules, the rule list a fit learns, prediction on raw features, and the versioned JSON model file.

Format ``mdhom.ruleboost`` version 2 or 3 (one JSON object; version 1 files, which predate the example-wise
predictor, are read as output-wise models; a file is written at the lowest version that holds it, so version 3 only
where ``n_used_rules`` is set, and readers of version 2 refuse what they would mispredict):

* ``format``, ``version``, ``mdhom_version``, ``estimator`` ("RuleBoostClassifier");
* ``params`` (every option of :mod:`mdhom.rules.options`), ``loss``, ``head_type`` (as resolved), ``n_features``,
  ``n_labels``, ``feature_names`` and ``label_names`` (lists of strings or null);
* ``default_scores``: the default rule's head, one raw score per label;
* ``rules``: one object per rule in learning order: ``conditions`` (a list of ``[feature, "<=" | ">",
  threshold]``; NaN satisfies neither operator), ``labels`` (ascending label indices) and ``scores`` (one per
  label, shrinkage applied);
* with the example-wise predictor, ``label_vectors`` (the distinct training label vectors in order of first
  occurrence, each as its list of label indices) and ``label_vector_counts`` (how often each occurred);
* version 3: ``n_used_rules``, the number of rules, the default rule counted, that predict (global pruning with
  ``remove_unused_rules=false``; the rules after them stay in the file);
* with global pruning, ``global_pruning_result``: ``n_induced_rules`` (the rules learned, the default rule counted),
  ``rules`` and ``loss`` (each model size measured and its mean loss); informative, prediction does not read it.
  The options added after version 2 (``holdout``, ``global_pruning``) are in ``params`` only where they are set.

The raw score of an example is the default scores plus the scores of every used rule whose conditions it meets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdhom.learn import model_files
from mdhom.rules.features import Features, columns
from mdhom.rules.predictors import LabelVectors

FORMAT = "mdhom.ruleboost"
VERSION = 3  # the newest version read and written (written only where the file needs it: n_used_rules)


@dataclass(frozen=True)
class Condition:
    feature: int
    op: str  # "<=" or ">"
    threshold: float

    def holds(self, X: np.ndarray | Features) -> np.ndarray:
        return columns(X).holds(self.feature, self.op, self.threshold)


@dataclass
class Rule:
    conditions: tuple[Condition, ...]
    labels: np.ndarray  # intp, ascending
    scores: np.ndarray  # float64, one per label

    def covers(self, X: np.ndarray | Features) -> np.ndarray:
        out = np.ones(X.shape[0], bool)
        for c in self.conditions:
            out &= c.holds(X)
        return out


@dataclass
class RuleList:
    """The default rule's scores and the rules after it; printing it gives the rules as text."""

    default_scores: np.ndarray
    rules: list[Rule] = field(default_factory=list)
    feature_names: list[str] | None = None
    label_names: list[str] | None = None
    label_vectors: LabelVectors | None = None  # the example-wise predictor's candidates
    n_used: int | None = None  # the rules that predict, the default rule counted (None: every rule)

    @property
    def n_labels(self) -> int:
        return int(self.default_scores.size)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def used_rules(self) -> list[Rule]:
        """The rules that predict: all, or the first ``n_used - 1`` after the default rule."""
        return self.rules if self.n_used is None else self.rules[: self.n_used - 1]

    def decision_function(self, X: np.ndarray | Features) -> np.ndarray:
        """Raw scores (n, labels): the default scores plus the heads of the covering rules, in rule order (``X``
        dense, or :class:`~mdhom.rules.features.Features` over a sparse matrix: absent entries are 0)."""
        X = columns(X)
        S = np.tile(self.default_scores, (X.shape[0], 1))
        for rule in self.used_rules:
            rows = np.flatnonzero(rule.covers(X))
            if rows.size:
                S[np.ix_(rows, rule.labels)] += rule.scores
        return S

    def _feature(self, j: int) -> str:
        return self.feature_names[j] if self.feature_names is not None else f"x{j}"

    def _label(self, j: int) -> str:
        return self.label_names[j] if self.label_names is not None else f"y{j}"

    def _head(self, labels: np.ndarray, scores: np.ndarray) -> str:
        return ", ".join(f"{self._label(int(j))} = {s:+.4g}" for j, s in zip(labels, scores, strict=True))

    def __str__(self) -> str:
        lines = [f"{{}} => ({self._head(np.arange(self.n_labels), self.default_scores)})"]
        for i, rule in enumerate(self.rules):
            if i == len(self.used_rules):
                lines.append(f"# the {len(self.rules) - i} rules below are not used for prediction (global pruning)")
            body = " & ".join(f"{self._feature(c.feature)} {c.op} {c.threshold:.6g}" for c in rule.conditions)
            lines.append(f"{{{body}}} => ({self._head(rule.labels, rule.scores)})")
        return "\n".join(lines)

    # ------------------------------------------------------------------------------------------ JSON

    def to_document(self) -> dict[str, Any]:
        vectors = {} if self.label_vectors is None else self.label_vectors.to_document()
        return {
            "default_scores": self.default_scores.tolist(),
            "rules": [{"conditions": [[c.feature, c.op, c.threshold] for c in r.conditions],
                       "labels": r.labels.tolist(), "scores": r.scores.tolist()} for r in self.rules],
            "feature_names": self.feature_names,
            "label_names": self.label_names,
            **vectors,
            **({} if self.n_used is None else {"n_used_rules": self.n_used}),
        }

    @property
    def version(self) -> int:
        """The lowest format version that holds this rule list (see the module's description)."""
        return 2 if self.n_used is None else 3

    @classmethod
    def from_document(cls, doc: dict[str, Any], n_features: int, where: str) -> RuleList:
        """The rule list of a model document; any inconsistency is a ValueError naming ``where``."""
        try:
            default = np.asarray(doc["default_scores"], np.float64)
            n_labels = default.size
            rules = []
            for i, r in enumerate(doc["rules"]):
                conds = []
                for f, op, t in r["conditions"]:
                    if not (isinstance(f, int) and 0 <= f < n_features and op in ("<=", ">")):
                        raise ValueError(f"rule {i} has a bad condition {[f, op, t]!r}")
                    conds.append(Condition(f, op, float(t)))
                labels = np.asarray(r["labels"], np.intp)
                scores = np.asarray(r["scores"], np.float64)
                if labels.ndim != 1 or labels.shape != scores.shape or labels.size == 0 or \
                        labels.min() < 0 or labels.max() >= n_labels:
                    raise ValueError(f"rule {i} has a bad head")
                rules.append(Rule(tuple(conds), labels, scores))
            vectors = LabelVectors.from_document(doc, n_labels) if "label_vectors" in doc else None
            n_used = doc.get("n_used_rules")
            if n_used is not None and (isinstance(n_used, bool) or not isinstance(n_used, int)
                                       or not 1 <= n_used <= len(rules) + 1):
                raise ValueError(f"n_used_rules must be an integer in [1, {len(rules) + 1}], got {n_used!r}")
            return cls(default, rules, doc.get("feature_names"), doc.get("label_names"), vectors, n_used)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: damaged mdhom rule model ({exc})") from None


def save_json(path: str | os.PathLike, document: dict[str, Any]) -> None:
    """Write a rule model file (see :func:`mdhom.learn.model_files.save_json`)."""
    model_files.save_json(path, document)


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """A rule model document, its format and version checked."""
    return model_files.read_json(path, FORMAT, VERSION, "an mdhom rule model")
