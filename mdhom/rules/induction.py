"""The boosting loop of the rule learner, as mlrl-boomer runs it: a default rule, then one rule per round.

Each round draws its labels and instances, grows a body greedily (each step draws features, adds the condition
of best head quality, and stops when no condition improves the rule, at ``max_conditions``, or once the rule
covers ``min_coverage`` examples or fewer; after the first condition a rule keeps the labels its head chose,
mlrl-boomer's ``max_head_refinements=1``), recomputes the head on every covered example when instances were
sampled, shrinks it, adds it to the covered examples' scores and updates their gradient statistics. Training
stops early when no condition is left to add, or where global pruning (:mod:`mdhom.rules.pruning`) stops it;
examples of a holdout set take part in no search (weight 0) but their scores follow the model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdhom.learn.binning import feature_edges
from mdhom.rules.features import Features, columns
from mdhom.rules.heads import Head
from mdhom.rules.losses import RuleLoss
from mdhom.rules.model import Condition, Rule, RuleList
from mdhom.rules.pruning import GlobalPruning, holdout_rows
from mdhom.rules.quantized import QuantizedStatistics
from mdhom.rules.refinement import SearchSpace, best_refinement, covered_by


def equal_width_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """Edges of ``bins`` equal-width bins over the finite values, only where a bin boundary separates values (the
    values' multiplicity does not matter: a sparse column's absent rows are one 0.0)."""
    v = values[~np.isnan(values)]
    if v.size == 0 or v.min() == v.max():
        return np.empty(0)
    edges = v.min() + (v.max() - v.min()) * np.arange(1, bins) / bins
    occupied = np.unique(np.searchsorted(edges, v, side="left"))
    # an edge between two occupied bins is kept once: the one right below the upper bin
    return edges[occupied[1:] - 1]


def bin_edges(X: np.ndarray | Features, binning: tuple[str, int] | None) -> list[np.ndarray] | None:
    """Per feature the thresholds a binned search may use, or None for exact thresholds. A sparse matrix's column
    is its stored entries and one 0.0 weighing as many rows as are absent, which gives the dense column's edges
    (equal-frequency cuts count the weights, exact integers)."""
    if binning is None:
        return None
    method, bins = binning
    X = columns(X)
    out = []
    for f in range(X.shape[1]):
        values, weights = X.distribution(f)
        out.append(equal_width_edges(values, bins) if method == "equal-width" else
                   feature_edges(values, weights, bins))
    return out


def sample_size(n: int, spec: Any) -> int:
    """How many of ``n`` items a sampling option draws (all for None)."""
    if spec is None:
        return n
    if spec == "without-replacement":  # mlrl-boomer's default feature sample size
        return n if n <= 2 else min(n, int(math.floor(math.log2(n - 1) + 1)))
    return max(1, min(n, int(math.floor(spec * n))))


def draw(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """Ascending indices of ``size`` of ``n`` items drawn without replacement (all, without a draw, when equal)."""
    if size >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size, replace=False))


class _Draws:
    """A rule's feature samples drawn ahead for the device (:meth:`DeviceRefinement.stage_features`: one copy for
    several steps instead of one per step: 8, then up to :attr:`DeviceRefinement.fidx_rows`, so that short rules draw
    few samples they do not use), with the generator's state after each draw: :meth:`rewind` puts it back to its
    state after the last sample a step used, so later draws see the numbers one draw per step leaves."""

    FIRST = 8

    def __init__(self, rng: np.random.Generator, n: int, size: int) -> None:
        self.rng, self.n, self.size = rng, n, size
        self.sets: list[np.ndarray] = []
        self.states: list[Any] = []
        self.start = rng.bit_generator.state  # before any draw: where rewind goes when no step drew
        self.at = 0  # the samples steps have used
        self.base = 0  # the index of the device table's first sample

    def next(self, device: Any, steps: int, max_conditions: int) -> tuple[np.ndarray, int]:
        """The next step's sample and its row in the device's table (a new table when the last one is used up;
        never more samples than ``max_conditions`` leaves steps for)."""
        if self.at == len(self.sets):
            m = min(device.fidx_rows, self.FIRST if not self.sets else 2 * self.FIRST)
            if max_conditions:
                m = max(1, min(m, max_conditions - steps))
            bitgen = self.rng.bit_generator
            self.base = len(self.sets)
            for _ in range(m):
                self.sets.append(draw(self.rng, self.n, self.size))
                self.states.append(bitgen.state)
            device.stage_features(self.sets[self.base:])
        self.at += 1
        return self.sets[self.at - 1], self.at - 1 - self.base

    def rewind(self) -> None:
        """The generator as one draw per step would have left it."""
        self.rng.bit_generator.state = self.states[self.at - 1] if self.at else self.start


@dataclass(frozen=True)
class InductionParams:
    max_rules: int
    shrinkage: float
    l1: float
    l2: float
    head_type: str  # "single" or "complete"
    feature_sampling: Any
    instance_sampling: float | None
    label_sampling: float | None
    max_conditions: int
    min_coverage: int
    seed: int
    quantized: bool = False  # fixed-point statistics per rule (mdhom.rules.quantized)
    label_binning: Any = None  # a mdhom.rules.label_binning.LabelBinning for complete heads of the example-wise loss
    holdout: tuple[str, float] | None = None  # (method, holdout_set_size) as resolved (pruning.resolved_holdout)
    global_pruning: Any = "none"  # "none" or the checked dict of pruning.check_global_pruning


def _device_losses() -> tuple[str, ...]:
    """The losses whose statistics a quantized device fit updates on the device (imported late: numpy fits never
    load OpenCL)."""
    from mdhom.rules.device_stats import LOSSES

    return tuple(LOSSES)


def rule_covered(X: np.ndarray | Features, conditions: list[Condition]) -> np.ndarray:
    """The rows of ``X`` that satisfy every condition."""
    covered = np.ones(X.shape[0], bool)
    for c in conditions:
        covered &= covered_by(X, c.feature, c.op, c.threshold)
    return covered


class Learner:
    """Training state: scores and gradient statistics of every example, and the rules so far. ``device``: run the
    refinement search on that OpenCL device (binned features, every loss and head; see
    :mod:`mdhom.rules.device`), else in numpy. ``held``: the ascending rows of a holdout set (None: none), weight 0
    in every search."""

    def __init__(self, X: np.ndarray | Features, Y: np.ndarray, loss: RuleLoss, p: InductionParams,
                 edges: list[np.ndarray] | None, device: Any = None, held: np.ndarray | None = None) -> None:
        self.X, self.Y, self.loss, self.p = columns(X), Y, loss, p
        n = Y.shape[0]
        self.held = held
        self.in_train = np.ones(n, bool)
        if held is not None:
            self.in_train[held] = False
        self.train_rows = np.flatnonzero(self.in_train)
        self.touched: Any = None  # called with the rows whose scores each head changes (global pruning's measure)
        self.space = SearchSpace(self.X, edges)
        # after the default rule a quantized device fit of a label-wise loss updates the statistics on the device
        # (mdhom.rules.device_update): the host's S, G and H are then copies made when read (_s_behind: S is
        # read back from the device; _gh_behind: G and H are recomputed from S, the same bits as the updates)
        self.on_device = device is not None and p.quantized and loss.name in _device_losses()
        self._s_behind = self._gh_behind = False
        self.S = np.zeros(Y.shape)
        # a device search of complete heads over the example-wise loss builds the packed Hessians from the
        # gradients itself: the host keeps G only (H None), not the 20000 x 5151 doubles of a 101-label fit
        self.lazy_h = (device is not None and loss.hessian_from_gradients and p.head_type == "complete"
                       and not p.quantized)
        if self.lazy_h:
            self.G, self.H = loss.gradients(Y, self.S), None
        else:
            self.G, self.H = loss.statistics(Y, self.S)
        h_width = self.G.shape[1] * (self.G.shape[1] + 1) // 2 if not loss.decomposable else self.G.shape[1]
        self.rng = np.random.default_rng(p.seed)
        self.quant = QuantizedStatistics(X.shape[0], self.G.shape[1], h_width) if p.quantized else None
        self.search = None
        self._fbins: np.ndarray | None = None  # the bins features x rows (_covered_binned), made at first need
        if device is not None:
            from mdhom.rules.device import DeviceRefinement

            if edges is None:
                raise ValueError("the device refinement searches binned features: set feature_binning")
            self.search = DeviceRefinement(device, self.space.bins, self.space.n_bins, edges, Y.shape[1],
                                           h_width, p.l1, p.l2, p.min_coverage,
                                           precision="quantized" if p.quantized else "double",
                                           searched=sample_size(self.X.shape[1], p.feature_sampling))

    @property
    def S(self) -> np.ndarray:
        """The scores (n, L); read back from the device where it updates them."""
        if self._s_behind:
            self._S, self._s_behind = self.search.stats.scores(), False
        return self._S

    @S.setter
    def S(self, value: np.ndarray) -> None:
        self._S, self._s_behind = value, False

    def _statistics(self) -> None:
        if self._gh_behind:
            self._G, self._H = self.loss.statistics(self.Y, self.S)
            self._gh_behind = False

    @property
    def G(self) -> np.ndarray:
        """The gradients (n, L); recomputed from the scores where the device updates the statistics."""
        self._statistics()
        return self._G

    @G.setter
    def G(self, value: np.ndarray) -> None:
        self._G = value

    @property
    def H(self) -> np.ndarray | None:
        """The Hessians (n, L or L(L+1)/2; None: built from the gradients where needed, ``lazy_h``)."""
        self._statistics()
        return self._H

    @H.setter
    def H(self, value: np.ndarray | None) -> None:
        self._H = value

    def _apply_on_device(self, covered: np.ndarray | None, labels: np.ndarray, scores: np.ndarray) -> None:
        """:meth:`apply` on the device, for the rows its mask covers; the host keeps its scores current only while
        global pruning measures them (``touched``: ``covered`` is then the rule's rows), else reads them when
        asked."""
        if self.touched is not None:
            rows = np.flatnonzero(covered)
            self.touched(rows)
            S = self.S  # current before this rule: read back once if it was not kept
            if labels.size == 1:  # the host path's operations, to the bit
                col = int(labels[0])
                S[rows, col] = S[rows, col] + scores[0]
            else:
                S[np.ix_(rows, labels)] += scores
        self.search.apply_head(labels, scores)
        self._gh_behind = True
        if self.touched is None:
            self._s_behind = True

    def _covered_binned(self, conditions: list[Condition], bins: list[int]) -> np.ndarray:
        """:func:`rule_covered` from the bins (a condition's bin ``b`` holds the same rows: ``x <= edges[b]`` is
        ``bin <= b``, ``x > edges[b]`` is ``b < bin < missing``, and NaN's missing bin satisfies neither), read from
        a features x rows copy: a contiguous column of bytes instead of a strided one of doubles."""
        if self._fbins is None:
            self._fbins = np.ascontiguousarray(self.space.bins.T)
        missing = self.space.n_bins - 1
        covered = np.ones(self.X.shape[0], bool)
        for c, b in zip(conditions, bins, strict=True):
            col = self._fbins[c.feature]
            if c.op == "<=":
                covered &= col <= b
            else:
                covered &= (col > b) & (col < missing)
        return covered

    def head(self, kind: str, labels: np.ndarray) -> Head:
        return Head(kind, not self.loss.decomposable, labels, self.Y.shape[1], self.p.l1, self.p.l2,
                    self.p.label_binning)

    def apply(self, rows: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> None:
        """Add a head to the scores of ``rows`` and update their statistics: of the head's labels only where the
        loss is decomposable (element by element, so the same numbers as recomputing every label)."""
        if self.touched is not None:
            self.touched(rows)
        if self.loss.decomposable and labels.size == 1:  # a single-label head: one column, gathered once
            col = int(labels[0])
            s = self.S[rows, col] + scores[0]
            self.S[rows, col] = s
            self.G[rows, col], self.H[rows, col] = self.loss.statistics(self.Y[rows, col], s)
            if self.quant is not None:
                self.quant.stale(labels, labels)
            return
        at = np.ix_(rows, labels)
        self.S[at] += scores
        if self.loss.decomposable:
            self.G[at], self.H[at] = self.loss.statistics(self.Y[at], self.S[at])
            if self.quant is not None:
                self.quant.stale(labels, labels)
            return
        if self.H is None:  # the Hessians follow from the gradients where they are needed
            self.G[rows] = self.loss.gradients(self.Y[rows], self.S[rows])
        else:
            self.G[rows], self.H[rows] = self.loss.statistics(self.Y[rows], self.S[rows])
        if self.quant is not None:
            self.quant.stale()

    def atoms(self, head: Head, rows: np.ndarray | None = None) -> np.ndarray:
        """The head's atoms of every example (or of ``rows``): the statistics a search sums, in the fit's mode."""
        if self.quant is not None:
            return self.quant.atoms(head.labels, head.h_columns, rows)
        return head.gather(self.G, self.hessians()) if rows is None else head.gather(self.G[rows],
                                                                                     self.hessians(rows))

    def column_sums(self, head: Head) -> np.ndarray:
        """The head's float statistics summed over every example (the default rule's, on the host, in double in
        every mode as mlrl-boomer's default rule: the quantized columns exist only for the columns a rule search
        has read, and the default rule comes before any), ``head.gather(G, H).sum(axis=0)`` to the bit: the atoms
        are column-major, so numpy sums each column on its own (pairwise, over its n contiguous values); with
        ``lazy_h`` the packed Hessian's row r (entries (r, 0..r), :meth:`LogisticExampleWise.hessian`) is built
        from the transposed gradients, one contiguous (r + 1, n) block at a time, and each entry summed over its n
        contiguous values the same way, so the n x L(L+1)/2 matrix never exists (5x faster than gathering its
        columns: 0.19 s at 20000 x 101). Bit for bit for heads of two labels or more (the default rule's: every
        label); a one-label head's gathered (n, 2) atoms sum row by row there, which can differ in the last bit."""
        if self.H is not None:
            return head.gather(self.G, self.H).sum(axis=0)
        gt = np.ascontiguousarray(self.G[:, head.labels].T)  # (k, n)
        neg = -gt
        out = [gt.sum(axis=1)]
        buf = np.empty_like(gt)
        for r in range(head.k):
            block = np.multiply(gt[r], neg[: r + 1], out=buf[: r + 1])
            p = np.abs(gt[r])
            np.multiply(p, 1.0 - p, out=block[r])
            out.append(block.sum(axis=1))
        return np.concatenate(out)

    def hessians(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The Hessians of every example (or of ``rows``): kept, or built from the gradients (``lazy_h``)."""
        if self.H is not None:
            return self.H if rows is None else self.H[rows]
        return self.loss.hessian(self.G if rows is None else self.G[rows])

    def default_rule(self) -> np.ndarray:
        """The default rule's head: complete, over every example, not shrunk (as in mlrl-boomer)."""
        head = self.head("complete", np.arange(self.Y.shape[1]))
        labels, scores = head.predict(self.column_sums(head))
        self.apply(np.arange(self.X.shape[0]), labels, scores)
        if self.on_device:  # the scores go up once; the device quantizes every column and updates them from now on
            self.search.load_statistics(self.loss.name, self.Y, self.S)
        return scores

    def _batch(self, head: Head, conditions: list[Condition], best: Any, used: Head,
               kept: list | None = None) -> tuple[Any, Head]:
        """A rule's body on the device, several steps per read-back (3, then 6, ... up to
        :attr:`DeviceRefinement.lookahead`): the same conditions as one step at a time. Each batch draws its steps'
        features ahead (the generator's state after each draw kept), the device searches step j over the rows step
        j - 1's winner covers (after a single-label head's first step, for the label it chose), and the host keeps
        the steps up to the first that does not improve the rule (or that leaves ``min_coverage`` rows or fewer),
        then puts the generator back to its state after that step's draw: later draws see the numbers one step at
        a time would have left. Appends to ``conditions`` (and the kept Refinements to ``kept``); returns the rule's
        best refinement (None: none) and the
        head it was found with (``used`` until a step is kept)."""
        p, device = self.p, self.search
        n_features = self.X.shape[1]
        size = sample_size(n_features, p.feature_sampling)
        bitgen = self.rng.bit_generator
        m = 0
        while p.max_conditions == 0 or len(conditions) < p.max_conditions:
            m = min(max(3, 2 * m), device.lookahead)  # short rules waste few steps, long ones take few reads
            if p.max_conditions:
                m = min(m, p.max_conditions - len(conditions))
            sets, states = [], []
            for _ in range(m):
                sets.append(draw(self.rng, n_features, size))
                states.append(bitgen.state)
            # a single-label head keeps the label of its first condition's largest |score|: chosen on the device
            first = not conditions and head.kind == "single" and head.k > 1
            restricted = False
            for j, found in enumerate(device.best_batch(sets, restrict_first=first)):
                if found is None or not found.quality < (0.0 if best is None else best.quality):
                    bitgen.state = states[j]
                    return best, used
                best, used = found, head
                conditions.append(Condition(found.feature, found.op, found.threshold))
                if kept is not None:
                    kept.append(found)
                if len(conditions) == 1:
                    chosen, _ = head.predict(found.total)
                    if chosen.size < head.k:
                        head, restricted = head.restricted(chosen), True
                        if m > 1 and device.batch_label != int(chosen[0]):
                            raise RuntimeError(f"the device chose label {device.batch_label} for the rule's head, "
                                               f"the host {int(chosen[0])}")
                if found.n_covered <= p.min_coverage:
                    bitgen.state = states[j]
                    return best, used
            if restricted:  # the next batches search the chosen label from the head's own tables
                device.restrict(head)
            device.add(best)  # every step kept: the last winner narrows the mask for the next batch
        return best, used

    def grow(self) -> Rule | None:
        """One rule, added to the scores; None when no condition can be found."""
        p, n = self.p, self.X.shape[0]
        n_labels, n_features = self.Y.shape[1], self.X.shape[1]
        labels = draw(self.rng, n_labels, sample_size(n_labels, p.label_sampling))
        weights = self.in_train.astype(np.float64)
        if p.instance_sampling is not None:  # drawn from the training examples (all of them without a holdout)
            pool = self.train_rows
            weights = np.zeros(n)
            weights[pool[draw(self.rng, pool.size, sample_size(pool.size, p.instance_sampling))]] = 1.0
        head = self.head(p.head_type, labels)
        device = self.search
        changed = None
        if self.quant is not None and not self.on_device:  # fixed point, the same on every device: the columns
            changed = self.quant.refresh(self.G, self.H, head.labels, head.h_columns)  # this rule reads
        if device is None:
            atoms = self.atoms(head)
            covered = np.ones(n, bool)
        elif self.on_device:  # the statistics are on the device already
            device.start(None, None, weights, head)
        else:
            # complete heads need the gradients only; a head of one sampled label reads the Hessians' diagonal
            device.start(self.G, self.H if self.H is not None or head.coupled else self.hessians(), weights,
                         head, self.quant, changed)
        conditions: list[Condition] = []
        kept_bins: list[int] = []  # the bin of each condition (the device path's covered rows come from the bins)
        best = None
        used = head
        kept: list = []  # a batch's kept Refinements (the device's mask is rebuilt from them)
        ahead = _Draws(self.rng, n_features, sample_size(n_features, p.feature_sampling)) \
            if device is not None and not head.coupled and device.lookahead <= 1 else None
        while p.max_conditions == 0 or len(conditions) < p.max_conditions:
            if device is not None and not head.coupled and device.lookahead > 1:
                # the steps go to the device in batches (a single-label head's label chosen there too)
                best, used = self._batch(head, conditions, best, used, kept)
                kept_bins = [-1]
                break
            if ahead is not None:  # the samples of the next steps go up together; the generator is put back below
                features, row = ahead.next(device, len(conditions), p.max_conditions)
                found = device.best(features, row)
            else:
                features = draw(self.rng, n_features, sample_size(n_features, p.feature_sampling))
            if device is None:
                found = best_refinement(self.space, covered, weights, atoms, head, features, p.min_coverage)
            elif ahead is None:
                found = device.best(features)
            # a condition must improve the rule: the first one on quality 0 (no rule; mlrl-boomer's minQuality)
            if found is None or not found.quality < (0.0 if best is None else best.quality):
                break
            best, used = found, head
            conditions.append(Condition(found.feature, found.op, found.threshold))
            kept_bins.append(found.bin)
            if device is None:
                covered &= covered_by(self.X, found.feature, found.op, found.threshold)
            else:
                device.add(found)
            if len(conditions) == 1:
                chosen, _ = head.predict(found.total)
                if chosen.size < head.k:
                    head = head.restricted(chosen)
                    if device is None:
                        atoms = self.atoms(head)
                    else:
                        device.restrict(head)
            if found.n_covered <= p.min_coverage:
                break
        if ahead is not None:
            ahead.rewind()
        if best is None:
            return None
        host_rows = not self.on_device or p.instance_sampling is not None or self.touched is not None
        if device is not None and host_rows:  # the device holds the mask; the host needs the rows once
            covered = self._covered_binned(conditions, kept_bins) if -1 not in kept_bins else \
                rule_covered(self.X, conditions)
        total = best.total
        if p.instance_sampling is not None:  # mlrl-boomer's recalculate_predictions: on every covered example
            chosen, _ = used.predict(total)
            used = used.restricted(chosen)
            rows = np.flatnonzero(covered & self.in_train)
            atoms = self.search.stats.atoms(self.search.ws["GHq"], used.labels, used.h_columns, rows) \
                if self.on_device else self.atoms(used, rows)
            total = atoms.sum(axis=0)
        out_labels, scores = used.predict(total)
        scores = scores * p.shrinkage
        if self.on_device:
            if kept_bins == [-1]:  # a batched body: the device's mask is the rule's again
                device.cover_rule(kept)
            self._apply_on_device(covered if host_rows else None, out_labels, scores)
        else:
            self.apply(np.flatnonzero(covered), out_labels, scores)
        return Rule(tuple(conditions), out_labels, scores)


def induce(X: np.ndarray | Features, Y: np.ndarray, loss: RuleLoss, p: InductionParams,
           edges: list[np.ndarray] | None, device: Any = None) -> tuple[RuleList, Learner]:
    """The rule list of a fit (``max_rules`` counts the default rule, as in mlrl-boomer) and the learner that grew
    it (its device search, if any, holds the fit's kernels and counters); ``device``: the OpenCL device of the
    refinement search (None: numpy). ``learner.rule_seconds`` holds each rule's host-clock time,
    ``learner.held`` the holdout rows (or None), ``learner.pruning`` the :class:`GlobalPruning` (or None) and
    ``learner.n_induced`` the rules learned, the default rule counted (more than the model keeps where global pruning
    removed some).

    The loop is mlrl-boomer's sequential assemblage: before each rule the stopping criteria see the model so far
    (``max_rules``, and global pruning, which measures it), so the last model measured is the final one."""
    held = None if p.holdout is None else holdout_rows(Y, p.holdout, p.seed)
    learner = Learner(X, Y, loss, p, edges, device, held)
    model = RuleList(learner.default_rule())
    learner.rule_seconds = []
    pruning = None
    if p.global_pruning != "none":
        measured = held if p.global_pruning["use_holdout_set"] and held is not None else learner.train_rows
        pruning = GlobalPruning(p.global_pruning, loss.name, Y, measured)
        learner.touched = pruning.touch
    n_rules, used = 1, 0
    while True:
        if pruning is not None:
            stop, chosen = pruning.test(n_rules, learner.S)
            used = chosen or used
            if stop:
                break
        if n_rules >= p.max_rules:
            break
        t0 = time.perf_counter()
        rule = learner.grow()
        learner.rule_seconds.append(time.perf_counter() - t0)
        if rule is None:
            break
        model.rules.append(rule)
        n_rules += 1
    learner.pruning, learner.n_induced = pruning, n_rules
    if used:  # the number of rules global pruning chose, the default rule counted
        if p.global_pruning["remove_unused_rules"]:
            del model.rules[used - 1:]
        else:
            model.n_used = used
    return model, learner
