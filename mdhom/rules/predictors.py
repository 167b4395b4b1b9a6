"""Turning a rule list's scores into 0/1 labels, as mlrl-boomer's binary predictors do.

* output-wise: a label is predicted where its score is positive (probability above 0.5 for the logistic losses,
  the midpoint of -1 and +1 for squared error);
* example-wise: each example gets the training label vector closest to its scores, the distance being the
  training loss of that vector at those scores; ties go to the vector seen more often in training, then to the
  one seen first (mlrl-boomer's ``IDistanceMeasure::getClosestLabelVector``). Only label combinations that
  occurred in training can be predicted, which is what makes the example-wise loss pay off in subset accuracy.

``auto`` is mlrl-boomer's choice: example-wise for a non-decomposable loss, else output-wise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mdhom.rules.losses import RuleLoss

PREDICTORS = ("auto", "output-wise", "example-wise")
# (examples x label vectors) loss values one chunk of examples may take at once
CHUNK_ELEMENTS = 1 << 22


def resolved_predictor(name: str, loss: RuleLoss) -> str:
    """What ``auto`` means for ``loss``."""
    if name == "auto":
        return "output-wise" if loss.decomposable else "example-wise"
    return name


@dataclass
class LabelVectors:
    """The distinct label vectors of the training data in order of first occurrence, and how often each occurred."""

    vectors: np.ndarray  # (V, L) uint8
    counts: np.ndarray  # (V,) int64

    @classmethod
    def of(cls, Y: np.ndarray) -> LabelVectors:
        Yb = np.ascontiguousarray(Y, dtype=np.uint8)
        # each row as one opaque item: np.unique sorts bytes instead of comparing rows column by column (30x faster
        # at 20000 x 101); the order of first occurrence does not depend on how they were sorted
        rows = Yb.view(np.dtype((np.void, Yb.shape[1]))).ravel() if Yb.shape[1] else np.zeros(len(Yb), "V1")
        unique, first, counts = np.unique(rows, return_index=True, return_counts=True)
        order = np.argsort(first, kind="stable")
        return cls(Yb[first[order]], counts[order].astype(np.int64))

    def closest(self, S: np.ndarray, loss: RuleLoss) -> np.ndarray:
        """Per row of scores ``S`` (n, L) the closest vector as 0/1 labels (int8)."""
        n, V = S.shape[0], self.vectors.shape[0]
        out = np.empty(S.shape, np.int8)
        chunk = max(1, CHUNK_ELEMENTS // max(1, V))
        for start in range(0, n, chunk):
            part = S[start : start + chunk]
            dist = np.stack([loss.value(np.broadcast_to(v, part.shape), part) for v in self.vectors], axis=1)
            nearest = dist == dist.min(axis=1, keepdims=True)
            pick = np.argmax(np.where(nearest, self.counts[None, :], -1), axis=1)  # the first of the most frequent
            out[start : start + chunk] = self.vectors[pick]
        return out

    def to_document(self) -> dict[str, Any]:
        return {"label_vectors": [np.flatnonzero(v).tolist() for v in self.vectors],
                "label_vector_counts": self.counts.tolist()}

    @classmethod
    def from_document(cls, doc: dict[str, Any], n_labels: int) -> LabelVectors:
        """The label vectors of a model document (KeyError, TypeError or ValueError where damaged)."""
        rows, counts = doc["label_vectors"], np.asarray(doc["label_vector_counts"], np.int64)
        if not isinstance(rows, list) or not rows or counts.shape != (len(rows),) or (counts < 1).any():
            raise ValueError("bad label vectors")
        vectors = np.zeros((len(rows), n_labels), np.uint8)
        for i, idx in enumerate(rows):
            idx = np.asarray(idx, np.int64)
            if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= n_labels)):
                raise ValueError(f"label vector {i} names a label beyond {n_labels}")
            vectors[i, idx] = 1
        return cls(vectors, counts)
