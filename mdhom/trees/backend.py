"""The contract between the tree-growing driver (host) and the kernels that do the per-row work.

The driver (binning, growth policy, model) is written once; the heavy work goes through a
:class:`TreeKernels` implementation: ``NumpyTreeKernels`` is the reference, ``OpenCLTreeKernels`` runs the
md_hom kernels on a device. Both must produce the same trees in double precision, so every decision the
driver takes is a function of what these methods return.

Conventions shared by every implementation:

* ``bins``: uint8 array (n_rows, n_features), uint16 when ``n_bins`` exceeds 256; bin ``n_bins - 1`` of every
  feature is the missing-value (NaN; an absent entry of sparse input) bin; real values use bins
  ``0 .. n_bins - 2`` (a feature may use fewer).
* Gradients and hessians: (n_rows, n_outputs) in the working precision; rows left out by subsampling have
  g = h = 0 (as in XGBoost's uniform sampling).
* Histograms: shape (n_nodes, n_features, n_bins, n_outputs, 2), the last axis (sum g, sum h), for the
  rows currently assigned to each listed node. Implementations keep them on the device behind a handle.
* Split rule: a split (feature f, bin b, default_left d) sends a row left when its bin is <= b and not
  missing, or when it is missing and d is true. Candidate bins b run over 0 .. n_bins - 3 (so the right
  side can be non-empty). Gain is XGBoost's, summed over outputs:
  ``0.5 * sum_k [S(G_L)^2/(H_L+lambda) + S(G_R)^2/(H_R+lambda) - S(G)^2/(H+lambda)] - min_split_gain``
  with ``S`` the L1 soft threshold by alpha; a candidate needs ``sum_k H_L >= min_child_weight`` and
  ``sum_k H_R >= min_child_weight``. Ties: the larger gain wins; equal gains go to the lower feature, then
  the lower bin, then default_left=True over False.
* Categorical features (``cat_mode`` at ``load``, :mod:`mdhom.trees.reference`): candidate ``b`` of such a
  feature sends left the bin ``b`` alone (one-vs-rest), or every bin ordered at or before ``b`` by
  G / (H + cat_smooth) of output 0 (+inf without hessian; ties by bin); the left sums are added from zero in
  bin order. ``Splits.cat_left`` carries the bins that go left; ``apply_splits`` takes them back.

A boosting round can stay on the device (``set_objective`` once, then per round ``compute_gradients``,
the tree, ``update_scores``): the host then sends a row mask and a tree's leaf values and reads back only
the packed result of each split search. ``set_gradients`` remains for tests and custom objectives.
Per split step the driver calls ``apply_splits`` with ``small_left`` (which child it builds next), so
the device can prepare that histogram's row ranges without telling the host the new row counts first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from mdhom.components.split import SplitParams, Splits

__all__ = ["SplitParams", "Splits", "TreeKernels"]


class TreeKernels(Protocol):
    """Device-resident state of one fit and the operations the driver needs; every implementation has all of
    them (the driver never probes)."""

    # grow loss-guided trees by searching several leaves per step (the same tree; fewer device round trips)
    batch_lossguide: bool
    # ... and split that many levels below each such step ahead, on the device, by their best splits (look_ahead; below
    # a bounded step one level, the children the next step takes; below an unbounded one speculative: some of them the
    # walk never takes)
    lookahead: int
    # depth-wise trees: levels split on the device below a level whose leaf budget cannot bind (look_ahead; exact:
    # the level-wise rule takes every such split); loss-guided trees: as many levels below the root's batch, as far
    # as the batches would have taken those levels whole (the same splits and searches, fewer round trips)
    depth_ahead: int
    # ... and take into each step the searched children of leaves the walk may still reach, not only the heap's
    # leaves (mdhom.trees.lossguide._Candidates.reachable: about as many steps as the tree is deep, some searches
    # in vain)
    speculate: bool
    # ... at most that many candidates a step (and those tied with the last), those the walk reaches first (0: every
    # one it may reach; fewer splits and searches in vain, more round trips)
    batch: int
    # whether a driver assembles each tree on the host while the device grows the next (mdhom.trees.grower.start_tree):
    # where the device computes beside the host (a GPU); a CPU device's kernels run on the host's cores, which that
    # Python would take from them (PoCL, 2-core EPYC, depth-wise: 76-78 against 83-85 ms a round)
    overlap_trees: bool
    build_seconds: float  # seconds spent building kernels (reported apart from the rounds)

    def bin_rows(self, mapper: object) -> Callable[[np.ndarray], object]:
        """How raw rows become this backend's bins (``load``'s and ``add_eval``'s input) with a fitted
        :class:`mdhom.learn.binning.BinMapper`: its transform, or the same bins made on the device."""

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        """Each kernel's configuration and where it came from (empty for numpy)."""

    def check_size(self, n_rows: int, n_features: int, n_bins: int, n_outputs: int,
                   n_stored: int | None = None) -> None:
        """Refuse, with a MemoryError that says what would fit, a fit whose bin matrix or node histograms exceed
        this backend's memory (host, or the device's global memory and largest allocation), before any of it
        is allocated. ``n_stored``: the stored entries of sparse input (its bins stay sparse where that pays,
        :func:`mdhom.learn.sparse_bins.sparse_pays`)."""

    def load(self, bins: np.ndarray, n_bins: int, n_outputs: int, cat_mode: np.ndarray | None = None) -> None:
        """Take the binned training matrix (kept resident for the whole fit): dense, or a
        :class:`mdhom.learn.sparse_bins.SparseBins` (the same cells); ``cat_mode``: the split mode of each feature
        where some are categorical."""

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        """Gradients and hessians of this round, (n_rows, n_outputs) each."""

    def set_objective(self, loss: object, y: np.ndarray, w: np.ndarray, base_score: np.ndarray) -> None:
        """Keep the targets (``loss``'s encoding), weights and raw scores (all ``base_score``) for the fit."""

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        """Gradients of the resident scores for the next tree (rows with ``keep`` False get g = h = 0);
        puts every row into the root like ``reset_rows``."""

    def update_scores(self, value: np.ndarray) -> None:
        """Add ``value[node of the row]`` ((n_nodes, n_outputs), the tree just grown) to every row's score: the node
        id the row holds now, which is the backend's own until :meth:`relabel` renames it."""

    def scores_ahead(self, value: np.ndarray, learning_rate: float, params: SplitParams) -> bool:
        """:meth:`update_scores` of a depth-wise tree whose last level :meth:`look_ahead` split (``final``) before the
        host has read that level's search: ``value`` holds the values of the nodes above it, and the backend makes
        its children's (``learning_rate`` x the leaf weight of their sums under ``params``) from the search it ran,
        with the same bits as :func:`mdhom.trees.growth.node_values`. So the update needs no round trip, and the host
        reads the search when it writes the tree. Returns False where the backend cannot (the caller reads the level
        and calls :meth:`update_scores`): a backend with no device, or rows whose nodes wait for that search."""

    def scores(self) -> np.ndarray:
        """The resident raw scores (n_rows, n_outputs), for tests."""

    def add_eval(self, bins: np.ndarray, base_score: np.ndarray) -> int:
        """Keep a binned evaluation matrix and its raw scores (all ``base_score``); returns its handle."""

    def update_eval(self, handle: int, tree: object) -> np.ndarray:
        """Add the leaf values ``tree`` (a model Tree with split bins) gives each eval row; the new scores."""

    def sync(self) -> None:
        """Wait for the device (the end of a fit, for honest round times)."""

    def end_round(self) -> None:
        """The end of a boosting round: wait for the device, or (where it computes beside the host) for the round
        before only, so that the next round's first launches queue while this one's last kernels run."""

    def reset_rows(self) -> None:
        """Put every row into node 0 (the root) at the start of a tree."""

    def histograms(self, nodes: np.ndarray, transient: bool = False) -> object:
        """Histograms of the listed node ids (int32) over the rows now in those nodes; a handle. ``transient``:
        the handle is only the child of the next ``siblings``/``siblings_from`` call (a device keeps no copy)."""

    def subtract(self, parent: object, child: object) -> object:
        """parent - child, node by node: the sibling's histograms without a pass over the rows."""

    def siblings(self, parent: object, child: object, index: np.ndarray | None = None) -> object:
        """[child, parent[index] - child] along the node axis in one step (``index``: the parent node of each
        child, default in order): a split batch's children histograms."""

    def siblings_from(self, parents: list[tuple[object, int]], child: object) -> object:
        """[child, parent - child], each child's parent a node ``(handle, index)`` of any handle of this tree."""

    def take(self, hist: object, index: np.ndarray) -> object:
        """The listed nodes of a multi-node handle."""

    def concat(self, hists: list[object]) -> object:
        """Stack handles along the node axis (in order)."""

    def to_host(self, hist: object) -> np.ndarray:
        """The histograms as a numpy array (for tests and the tuner's checks)."""

    def best_splits(self, hist: object, feature_mask: np.ndarray, params: SplitParams,
                    then: Callable[[], None] | None = None) -> Splits:
        """The best split of every node in ``hist``; features where ``feature_mask`` is False are skipped.
        ``then`` runs once, after the search is under way and before its result is waited for: host work that
        overlaps the device's."""

    def apply_splits(
        self, nodes: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
        left: np.ndarray, right: np.ndarray, small_left: np.ndarray | None = None,
        cat_left: np.ndarray | None = None, final: bool = False,
    ) -> None:
        """Move the rows of each node ``nodes[i]`` to node ``left[i]`` or ``right[i]`` by its split.

        ``small_left``, a hint: the next ``histograms`` call asks for ``left[i]`` where it is True, else
        ``right[i]``, in this order. ``cat_left`` (n_splits, n_bins): the left bins of each split, read where its
        feature is categorical. ``final``, a hint: the children are leaves of the tree (no histogram, search or split
        asks for their rows again), so a backend that moves rows with their data may move the row order alone."""

    def look_ahead(self, hist: object, feature_mask: np.ndarray, params: SplitParams, nodes: np.ndarray,
                   allow: list[np.ndarray], first_id: list[int], final: tuple[int, int] | None = None,
                   then: Callable[[], None] | None = None, min_gain: float = 0.0,
                   chain: tuple[np.ndarray, np.ndarray, int] | None = None) -> tuple[list[Splits], list[object]]:
        """``best_splits(hist)`` and ``len(allow)`` split steps after it, taken before the host has seen those
        results: several steps for one round trip. ``hist`` holds the children of the last ``apply_splits`` (with
        ``small_left``), built ones first, then the others, as ``siblings`` returns them; ``nodes`` are their ids.
        Level k's entries (``len(nodes) * 2^k`` of them) split by their best split where ``allow[k]`` is True,
        the entry is alive and the gain is above ``SPLIT_EPS`` (finite) and at least ``min_gain`` (a loss-guided
        batch's floor: a candidate below it is never split, :meth:`mdhom.trees.lossguide._Candidates.reachable`),
        into ``first_id[k] + 2i`` (left) and
        ``first_id[k] + 2i + 1``; level k + 1 holds, for each entry, the child of the smaller hessian sum
        (``left_smaller``), then for each the other (:func:`mdhom.trees.reference.ahead_step`: an entry that does
        not split contributes an empty node and itself, neither alive). Returns (the splits of ``hist`` and of
        each level, the levels' histograms). ``final``: (the tree's leaves now, its ``max_leaves`` or 0): the last
        level of ``allow`` is the tree's last (at its depth limit), split where its leaf budget holds (where more of
        its entries would split than the budget has room for, those of the largest gains, ties to the earlier entry:
        the level-wise rule), its children neither built nor searched: then one split per level and one histogram
        less. ``chain`` (each entry's parent's chain value, the chain values of the candidates a bounded loss-guided
        batch left out, the bound): the first level splits only the entries the batch's next batch would take
        (:func:`~mdhom.components.lookahead.within_chain_budget`). ``then`` runs once every launch is queued, before the
        host first waits for a result (as ``best_splits``'). Numeric splits of quantized histograms (on devices; any
        precision in numpy)."""

    def relabel(self, node_map: np.ndarray) -> None:
        """Rename every row's node: ``node_map[node]`` (int32, one entry per node id used since the tree
        started). Ends a tree whose nodes were numbered differently while it grew."""

    def row_nodes(self) -> np.ndarray:
        """The node id of every row (int32, n_rows), for the driver's leaf updates and for tests."""

    def node_rows(self, node: int) -> np.ndarray:
        """The rows of ``node``, ascending (int32), for tests."""
