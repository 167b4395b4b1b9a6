"""The fits an end-to-end check times (:mod:`mdhom.tuning.endtoend`): the boosting workload of a tune and the rule
fits that judge the rule refinement's kernels, sized per device type (:meth:`Workload.for_tune`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RuleWork:
    """The rule fits that judge the rule kernels (:func:`mdhom.tuning.endtoend.rule_seconds`): mediamill's shape for
    the label-wise loss with single-label heads (in the device's default precision), and a smaller one for complete
    heads of the example-wise loss (float64 statistics, a coupled label Hessian): the two refinements whose kernels
    differ."""

    rows: int = 20_000
    features: int = 120
    labels: int = 101
    rules: int = 16  # per fit, the default rule counted; rules 2.. are timed
    coupled_rows: int = 4_000
    coupled_labels: int = 20
    coupled_rules: int = 5
    bins: int = 32  # equal-width feature bins (the device search needs binned features)


@dataclass(frozen=True)
class Workload:
    """The fit the check times: sized so that a round takes tens of milliseconds on a CPU device."""

    rows: int
    rounds: int
    leaves: int
    forest_bins: int = 63  # max_bin of the forests', chains' and binning kernel's fits (the boosting fits': tree_bins)
    repeats: int = 3
    depth: int = 8  # the depth-wise fit's max_depth (its max_leaves is 2^depth)
    policies: tuple[str, ...] = ("lossguide", "depthwise")
    rules: RuleWork = RuleWork()
    # the boosting fits' max_bin: the benchmarks' 63 and the learners' default 255 (a check at 63 alone had left every
    # CPU fit at the default running 64-bin classes' configurations, tuned for other code)
    tree_bins: tuple[int, ...] = (63, 255)

    def __post_init__(self) -> None:
        if not self.tree_bins:
            raise ValueError("a workload fits at one max_bin at least (tree_bins)")

    def data(self) -> tuple[Any, Any]:
        """The rows every boosting, layout and forest fit of the check trains on: ``rows`` Higgs-shaped rows of the
        benchmarks' training stream."""
        from mdhom.bench.trees import TRAIN_STREAM, make_higgs_like

        return make_higgs_like(self.rows, 28, 0, 0.0, TRAIN_STREAM)

    def fits(self) -> list[dict[str, Any]]:
        """The estimator parameters of each fit the check times."""
        return [dict(n_estimators=self.rounds, grow_policy=p, max_bin=b,
                     max_leaves=self.leaves if p == "lossguide" else 2 ** self.depth,
                     max_depth=0 if p == "lossguide" else self.depth) for b in self.tree_bins for p in self.policies]

    @classmethod
    def for_tune(cls, quick: bool, gpu: bool = False) -> Workload:
        """The check's and layouts' fits of a tune: few small rounds with ``quick``; else 2M rows on GPUs and 500k on
        other devices (the 2-core benchmark's size), 8 rounds there. Fits of 200k rows had stayed in a 2-core CPU's
        caches, where moving whole rows costs little: the layout stage kept moved rows on the 2-core Xeon's PoCL
        (row index, whole rows and the column copy 1.02x, within the margin), whose rounds of 500k rows it makes
        1.18x faster in float64 and 1.1x quantized (the stage's own measure, fits alternating)."""
        if quick:
            return cls(rows=20_000, rounds=6, leaves=31, repeats=2, depth=5,
                       rules=RuleWork(2_000, 12, 6, 6, 600, 6, 4))
        if gpu:
            return cls(rows=2_000_000, rounds=12, leaves=255)
        return cls(rows=500_000, rounds=8, leaves=255)
