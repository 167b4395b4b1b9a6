"""The numpy reference for every tree kernel: plain, float64, and written for clarity over speed.

The OpenCL kernels are tested against these functions, and the learner run with this backend is the
"pure-numpy reference learner" that must grow the same trees as the device does. The conventions
(missing bin, split rule, gain, tie-breaking) are stated once, in :mod:`mdhom.trees.backend`.

Quantized mode (``precision="quantized"``): each round's gradients and hessians become int32 fixed point,
``q = rint(g * 2^k)`` with one power-of-two scale per (output, g|h) chosen so that no sum over rows can
overflow (:func:`quantization_exponents`). Histograms, their prefix sums and differences are then integer
sums, exact in any order, so a device may fold rows in parallel (atomics included) and still match this
reference bit for bit; sums become reals only at the split search, as ``(double)q * 2^-k``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mdhom.components import histogram_blocks
from mdhom.components.lookahead import may_split, within_budget, within_chain_budget
from mdhom.components.quantize import quantize_gh, to_real
from mdhom.learn.binning import bin_dtype
from mdhom.learn.memory import check_host, size_text
from mdhom.learn.portable import sum_in_order
from mdhom.learn.sparse_bins import SparseBins, sparse_bytes, sparse_pays
from mdhom.learn.validation import is_sparse
from mdhom.trees.backend import SplitParams, Splits


def _exact_int_bincount(idx: np.ndarray, w: np.ndarray, minlength: int, n_terms: int) -> np.ndarray:
    """np.bincount of int64 weights, exact: the weights' two's-complement bits in chunks small enough that
    every float64 partial sum is an integer below 2^53, recombined modulo 2^64 (the true sums fit int64)."""
    bits = max(1, 52 - max(1, int(n_terms)).bit_length())
    u = np.ascontiguousarray(w, np.int64).view(np.uint64)
    out = np.zeros(minlength, np.uint64)
    mask = np.uint64((1 << bits) - 1)
    for shift in range(0, 64, bits):
        chunk = ((u >> np.uint64(shift)) & mask).astype(np.float64)
        if not chunk.any():
            continue
        s = np.bincount(idx, weights=chunk, minlength=minlength).astype(np.uint64)
        out += s << np.uint64(shift)
    return out.view(np.int64)



def soft_threshold(g: np.ndarray, alpha: float) -> np.ndarray:
    """L1 shrinkage of a gradient sum (XGBoost's ThresholdL1)."""
    return np.sign(g) * np.maximum(np.abs(g) - alpha, 0.0)


def leaf_weight(g: np.ndarray, h: np.ndarray, reg_lambda: float, reg_alpha: float) -> np.ndarray:
    """Optimal leaf value -S(G) / (H + lambda), per output."""
    return -soft_threshold(g, reg_alpha) / (h + reg_lambda)


def score(g: np.ndarray, h: np.ndarray, reg_lambda: float, reg_alpha: float) -> np.ndarray:
    """S(G)^2 / (H + lambda) summed over the last (output) axis in index order: the structure score of a leaf."""
    s = soft_threshold(g, reg_alpha)
    return sum_in_order(s * s / (h + reg_lambda), axis=-1)


_HIST_BLOCK = 1 << 20  # (row, feature) cells per bincount: bounds the index and weight temporaries (~40 MB)


def histograms(bins: np.ndarray, grad: np.ndarray, hess: np.ndarray, row_node: np.ndarray,
               nodes: np.ndarray, n_bins: int, blocked: bool = True) -> np.ndarray:
    """(n_nodes, n_features, n_bins, n_outputs, 2) sums of (g, h) of each node's rows per feature and bin:
    float64, or exact int64 sums for int64 (quantized) gradients. Features go in blocks (8 bytes of index and
    weight per cell otherwise: 1.6 GB for 20000 x 5000); a bin's rows are added in ascending order either way. Real
    sums of a node of more than BLOCK_ROWS rows go block by block, each block's sum from zero and the blocks'
    sums in order (:mod:`mdhom.components.histogram_blocks`: the order that lets a device fold a node's rows on many
    cores); ``blocked=False`` folds every node whole (what one launch of a histogram kernel computes)."""
    n_features = bins.shape[1]
    n_outputs = grad.shape[1]
    integer = np.asarray(grad).dtype.kind in "iu"
    block_rows = histogram_blocks.BLOCK_ROWS if blocked else max(1, bins.shape[0])
    out = np.zeros((len(nodes), n_features, n_bins, n_outputs, 2), np.int64 if integer else np.float64)
    for i, node in enumerate(np.asarray(nodes)):
        rows = np.flatnonzero(row_node == node)
        if rows.size == 0:
            continue
        if not integer and rows.size > block_rows:  # real sums: block by block, the blocks' sums in order
            for at in range(0, rows.size, block_rows):
                out[i] = out[i] + _node_histogram(bins, grad, hess, rows[at:at + block_rows], n_bins, False)
            continue
        out[i] = _node_histogram(bins, grad, hess, rows, n_bins, integer)
    return out


def _node_histogram(bins: np.ndarray, grad: np.ndarray, hess: np.ndarray, rows: np.ndarray, n_bins: int,
                    integer: bool) -> np.ndarray:
    """(n_features, n_bins, n_outputs, 2) sums of (g, h) of ``rows`` (ascending), each bin's in row order."""
    n_features, n_outputs = bins.shape[1], grad.shape[1]
    out = np.zeros((n_features, n_bins, n_outputs, 2), np.int64 if integer else np.float64)
    step = max(1, _HIST_BLOCK // rows.size)
    for f0 in range(0, n_features, step):
        nf = min(step, n_features - f0)
        offsets = (np.arange(nf) * n_bins)[None, :]
        idx = bins[rows, f0:f0 + nf].astype(np.int64)
        idx += offsets
        idx = idx.ravel()
        for k in range(n_outputs):
            for c, w in enumerate((grad[rows, k], hess[rows, k])):
                if integer:
                    flat = _exact_int_bincount(idx, np.repeat(w, nf), nf * n_bins, rows.size)
                else:
                    flat = np.bincount(idx, weights=np.repeat(w, nf), minlength=nf * n_bins)
                out[f0:f0 + nf, :, k, c] = flat.reshape(nf, n_bins)
    return out


# How a feature's bins split (the per-feature mode of a fit, ``cat_mode``): numeric ("bin <= b" goes left),
# categorical one-vs-rest ("bin == b"), categorical sorted partition (the bins ordered by G / (H + cat_smooth)
# up to b's place; LightGBM's and XGBoost's partition of many categories).
NUMERIC, ONE_VS_REST, SORTED = 0, 1, 2


def category_modes(categories: list[np.ndarray | None], n_outputs: int, max_cat_to_onehot: int) -> np.ndarray | None:
    """The split mode of every feature from the binning's known categories (None: all numeric). Multi-output
    trees split categories one against the rest: one sort order cannot rank categories for several outputs."""
    if not any(c is not None for c in categories):
        return None
    mode = np.zeros(len(categories), np.uint8)
    for j, c in enumerate(categories):
        if c is not None:
            mode[j] = ONE_VS_REST if n_outputs > 1 or c.size <= max_cat_to_onehot else SORTED
    return mode


def category_keys(hist: np.ndarray, inv_scale: np.ndarray | None, cat_smooth: float) -> np.ndarray:
    """(..., B) sort keys of a sorted-partition split from (..., B, K, 2) histograms: output 0's
    G / (H + cat_smooth), and +inf for a bin without hessian (no rows here: never put left ahead of others)."""
    g, h = hist[..., 0, 0], hist[..., 0, 1]
    if inv_scale is not None:
        g, h = g.astype(np.float64) * inv_scale[0, 0], h.astype(np.float64) * inv_scale[0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        key = g / (h + cat_smooth)
    return np.where(h > 0, key, np.inf)


def category_predicate(hist: np.ndarray, mode: np.ndarray, inv_scale: np.ndarray | None,
                       cat_smooth: float) -> np.ndarray:
    """(N, C, n_cand, B - 1): whether real bin c2 goes left under candidate c, for (N, C, B, K, 2) histograms of
    C categorical features with modes ``mode`` (C,). One-vs-rest: c2 == c; sorted: c2 is ordered at or before
    c by (key, bin)."""
    n_bins = hist.shape[2]
    c = np.arange(n_bins - 2)[:, None]
    c2 = np.arange(n_bins - 1)[None, :]
    key = category_keys(hist, inv_scale, cat_smooth)  # (N, C, B)
    kc, kc2 = key[:, :, : n_bins - 2, None], key[:, :, None, : n_bins - 1]
    sorted_ = (kc2 < kc) | ((kc2 == kc) & (c2 <= c))
    onehot = np.broadcast_to(c2 == c, sorted_.shape)
    return np.where((np.asarray(mode) == SORTED)[None, :, None, None], sorted_, onehot)


def category_sums(hist: np.ndarray, mode: np.ndarray, inv_scale: np.ndarray | None, cat_smooth: float) -> np.ndarray:
    """(N, C, n_cand, K, 2) left sums of the candidates of C categorical features (``hist`` (N, C, B, K, 2)),
    added from zero in bin order, as the kernels' reduction over bins does."""
    n_bins = hist.shape[2]
    pred = category_predicate(hist, mode, inv_scale, cat_smooth)
    acc = np.zeros(hist.shape[:2] + (n_bins - 2,) + hist.shape[3:], hist.dtype)
    for c2 in range(n_bins - 1):
        acc = acc + np.where(pred[:, :, :, c2, None, None], hist[:, :, None, c2], 0)
    return acc


def category_left(hist: np.ndarray, mode: int, candidate: int, inv_scale: np.ndarray | None,
                  cat_smooth: float) -> np.ndarray:
    """(B,) bool: the bins of one node's categorical feature (``hist`` (B, K, 2)) that go left under
    ``candidate``; the missing bin is never among them (the default direction decides it)."""
    pred = category_predicate(hist[None, None], np.array([mode]), inv_scale, cat_smooth)[0, 0, candidate]
    return np.concatenate([pred, [False]])


def left_prefix_sums(hist: np.ndarray, cat_mode: np.ndarray | None, inv_scale: np.ndarray | None,
                     cat_smooth: float) -> np.ndarray:
    """(N, F, n_cand, K, 2) left sums of every candidate: the in-order prefix sums over bins for numeric
    features, :func:`category_sums` for categorical ones."""
    n_cand = max(hist.shape[2] - 2, 0)
    cum = np.cumsum(hist[:, :, :n_cand], axis=2)
    if cat_mode is not None and n_cand and np.any(cat_mode):
        cf = np.flatnonzero(cat_mode)
        cum[:, cf] = category_sums(hist[:, cf], cat_mode[cf], inv_scale, cat_smooth)
    return cum


def best_splits(hist: np.ndarray, feature_mask: np.ndarray, params: SplitParams,
                inv_scale: np.ndarray | None = None, cat_mode: np.ndarray | None = None) -> Splits:
    """The best split of each node, following the rule and tie-breaking of :mod:`mdhom.trees.backend`.

    Quantized: ``hist`` is int64 and ``inv_scale`` (n_outputs, 2) holds 2^-k; left, right and total sums
    are formed in integers and converted to float64 just before the gain (the kernels' order). ``cat_mode``
    (per feature, :data:`NUMERIC` where None) makes features categorical."""
    n_nodes, n_features, n_bins, n_outputs, _ = hist.shape
    n_cand = max(n_bins - 2, 0)
    total = sum_in_order(hist, axis=2)  # (N, F, K, 2), the kernels' in-order prefix sum
    miss = hist[:, :, n_bins - 1]  # (N, F, K, 2)
    cum = left_prefix_sums(hist, cat_mode, inv_scale, params.cat_smooth)  # left sums of the non-missing bins
    # candidates ordered (feature, bin, default_left True then False): argmax takes the first maximum
    left = np.stack([cum + miss[:, :, None], cum], axis=3)  # (N, F, b, 2 directions, K, 2)
    right = total[:, :, None, None] - left
    total, left, right = (to_real(a, inv_scale) for a in (total, left, right))
    lam, alpha = params.reg_lambda, params.reg_alpha
    parent = score(total[..., 0], total[..., 1], lam, alpha)[:, :, None, None]
    gain = 0.5 * (score(left[..., 0], left[..., 1], lam, alpha)
                  + score(right[..., 0], right[..., 1], lam, alpha) - parent) - params.min_split_gain
    mcw = params.min_child_weight
    ok = (sum_in_order(left[..., 1]) >= mcw) & (sum_in_order(right[..., 1]) >= mcw)
    ok &= np.asarray(feature_mask, bool)[None, :, None, None]
    ok &= np.isfinite(gain)  # an empty side with lambda = 0 gives 0/0: never a split
    gain = np.where(ok, gain, -np.inf).reshape(n_nodes, -1)
    out = Splits.none(n_nodes, n_outputs, node_totals(hist, inv_scale))
    if n_cand == 0:
        return out
    best = np.argmax(gain, axis=1)
    for i, j in enumerate(best):
        if not np.isfinite(gain[i, j]):
            continue
        f, rest = divmod(int(j), n_cand * 2)
        b, d = divmod(rest, 2)
        out.gain[i] = gain[i, j]
        out.feature[i], out.bin[i], out.default_left[i] = f, b, d == 0
        out.left_sum[i] = left[i, f, b, d]
        out.right_sum[i] = right[i, f, b, d]
    set_category_left(out, hist, cat_mode, inv_scale, params.cat_smooth)
    return out


def set_category_left(out: Splits, hist: np.ndarray, cat_mode: np.ndarray | None, inv_scale: np.ndarray | None,
                      cat_smooth: float) -> None:
    """Fill ``out.cat_left`` for the nodes whose best split is on a categorical feature."""
    if cat_mode is None or not np.any(cat_mode):
        return
    n_nodes, _, n_bins = hist.shape[:3]
    out.cat_left = np.zeros((n_nodes, n_bins), bool)
    for i in range(n_nodes):
        f = int(out.feature[i])
        if np.isfinite(out.gain[i]) and cat_mode[f]:
            out.cat_left[i] = category_left(hist[i, f], int(cat_mode[f]), int(out.bin[i]), inv_scale, cat_smooth)


def node_totals(hist: np.ndarray, inv_scale: np.ndarray | None = None) -> np.ndarray:
    """(n_nodes, n_outputs, 2): each node's (g, h) as the in-order prefix sum over the bins of feature 0
    (float64; quantized sums converted with ``inv_scale``)."""
    if hist.shape[0] == 0 or hist.shape[1] == 0:
        return np.zeros((hist.shape[0], hist.shape[3], 2))
    return np.asarray(to_real(np.cumsum(hist[:, 0], axis=1)[:, -1], inv_scale), np.float64)


def goes_left(bin_values: np.ndarray, split_bin: np.ndarray, default_left: np.ndarray, n_bins: int,
              cat_left: np.ndarray | None = None) -> np.ndarray:
    """The split rule: bin <= split bin (or, for a categorical split, ``cat_left[bin]``: a (B,) table, or
    (rows, B) with one table per row), and missing values follow the learned default direction."""
    missing = bin_values == n_bins - 1
    if cat_left is None:
        return np.where(missing, default_left, bin_values <= split_bin)
    table = np.asarray(cat_left, bool)
    left = table[bin_values] if table.ndim == 1 else table[np.arange(bin_values.size), bin_values]
    return np.where(missing, default_left, left)


def predict_bins(bins: np.ndarray, tree, n_bins: int) -> np.ndarray:  # noqa: ANN001 - a model Tree
    """Leaf node id of every binned row in ``tree`` (split bins in ``tree.bin``, categorical left tables in
    ``tree.cat_left``), by the split rule."""
    node = np.zeros(bins.shape[0], np.int64)
    active = tree.left[node] >= 0
    tables = getattr(tree, "cat_left", None)
    while active.any():
        r = np.flatnonzero(active)
        n = node[r]
        b = bins[r, tree.feature[n]]
        go = goes_left(b, tree.bin[n], tree.default_left[n], n_bins)
        if tables is not None:
            cat = tables.row[n] >= 0
            if cat.any():
                go[cat] = goes_left(b[cat], 0, tree.default_left[n][cat], n_bins, tables.table[tables.row[n][cat]])
        node[r] = np.where(go, tree.left[n], tree.right[n])
        active[r] = tree.left[node[r]] >= 0
    return node


def left_smaller(left_sum: np.ndarray, right_sum: np.ndarray) -> np.ndarray:
    """Per split ((k, n_outputs, 2) child sums): whether the left child has the smaller hessian sum, the proxy for
    its row count, so the child whose histogram is built; ties go left."""
    return np.asarray(sum_in_order(left_sum[:, :, 1], axis=-1) <= sum_in_order(right_sum[:, :, 1], axis=-1), bool)


def ahead_step(found: Splits, alive: np.ndarray, allow: np.ndarray, first_id: int, room: int | None = None,
               min_gain: float = 0.0, chain: tuple[np.ndarray, np.ndarray, int] | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One level of a look-ahead (:meth:`mdhom.trees.backend.TreeKernels.look_ahead`) from its entries' splits:
    which entries split (alive, allowed, gain finite, above SPLIT_EPS and at least ``min_gain``; where ``room`` is
    given, a tree's last level, only the ``room`` largest gains of those:
    :func:`~mdhom.components.lookahead.within_budget`; where ``chain`` is given, only those a bounded loss-guided
    batch's next batch takes: :func:`~mdhom.components.lookahead.within_chain_budget`), the id of the child each
    builds (``left_smaller``; an entry that does not split: the left one, an empty node; children ``first_id + 2e``
    and ``+ 1``), the ids of the next level's slots (entry e's built child at e, the other at n + e) and which of
    those are alive.

    The step is kept with ``found`` (read-only arrays): a backend takes it while its last search runs, and the grower
    asks again for the same step after the look-ahead returns, when the device waits for its next partition (41 us
    a level on a 2-core EPYC)."""
    memo = found.ahead
    if memo is not None and memo[2] == (first_id, room, min_gain) and memo[4] is chain and all(
            m is x or np.array_equal(m, x) for m, x in ((memo[0], alive), (memo[1], allow))):
        return memo[3]
    ok = within_budget(found.gain, np.asarray(alive, bool) & may_split(found.gain, allow, min_gain), room)
    if chain is not None:
        ok = within_chain_budget(found.gain, ok, *chain)
    built_left = left_smaller(found.left_sum, found.right_sum) | ~ok
    lo = first_id + 2 * np.arange(ok.size, dtype=np.int64)
    built = np.where(built_left, lo, lo + 1)
    out = (ok, built, np.concatenate([built, np.where(built_left, lo + 1, lo)]), np.concatenate([ok, ok]))
    for a in out:
        a.flags.writeable = False
    found.ahead = (np.array(alive, bool), np.array(allow, bool), (first_id, room, min_gain), out, chain)
    return out


class NumpyTreeKernels:
    """:class:`mdhom.trees.backend.TreeKernels` in numpy: the reference backend.

    ``precision="quantized"`` is the reference of the devices' quantized mode (int64 histograms); any other
    value computes in float64 (the reference of "double", and of "single" to rounding).
    """

    precision = "double"
    inv_scale: np.ndarray | None = None  # (n_outputs, 2) 2^-k of this round's gradients, quantized only
    # the reference grows loss-guided trees one leaf per step, the walk the batched one must reproduce
    batch_lossguide = False
    lookahead = depth_ahead = 0  # ... and look_ahead is the reference of the devices' look-ahead steps
    speculate = False
    batch = 0
    overlap_trees = False  # no device to overlap
    build_seconds = 0.0
    cat_mode: np.ndarray | None = None  # per feature (NUMERIC, ONE_VS_REST, SORTED); None: all numeric

    def __init__(self, precision: str = "double") -> None:
        if precision not in ("double", "single", "quantized"):
            raise ValueError(f"precision must be 'double', 'single' or 'quantized', got {precision!r}")
        self.precision = precision

    def set_objective(self, loss, y: np.ndarray, w: np.ndarray, base_score: np.ndarray) -> None:  # noqa: ANN001
        self.loss, self.y, self.w = loss, np.asarray(y, np.float64), np.asarray(w, np.float64)
        self.raw = np.tile(np.asarray(base_score, np.float64), (self.bins.shape[0], 1))
        self.evals: list[list[np.ndarray]] = []

    def compute_gradients(self, keep: np.ndarray | None) -> None:
        g, h = self.loss.gradients(self.y, self.raw, self.w)
        if keep is not None:
            g[~keep] = 0.0
            h[~keep] = 0.0
        self.set_gradients(g, h)
        self.reset_rows()

    def update_scores(self, value: np.ndarray) -> None:
        self.raw = self.raw + np.asarray(value, np.float64)[self.row_node]

    def scores_ahead(self, value: np.ndarray, learning_rate: float, params: SplitParams) -> bool:
        return False  # the host holds every result already: nothing to gain

    def scores(self) -> np.ndarray:
        return self.raw.copy()

    def add_eval(self, bins: np.ndarray | SparseBins, base_score: np.ndarray) -> int:
        bins = bins if isinstance(bins, SparseBins) else np.ascontiguousarray(bins)
        self.evals.append([bins, np.tile(np.asarray(base_score, np.float64), (bins.shape[0], 1))])
        return len(self.evals) - 1

    def update_eval(self, handle: int, tree) -> np.ndarray:  # noqa: ANN001
        bins, raw = self.evals[handle]
        self.evals[handle][1] = raw + tree.value[predict_bins(bins, tree, self.n_bins)]
        return self.evals[handle][1]

    def sync(self) -> None:
        pass

    def end_round(self) -> None:
        pass

    def siblings(self, parent: np.ndarray, child: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """[child, parent[index] - child] along the node axis: a split's (or level's) children histograms."""
        p = parent if index is None else parent[np.asarray(index, np.int64)]
        return np.concatenate([child, p - child], axis=0)

    def siblings_from(self, parents: list[tuple[np.ndarray, int]], child: np.ndarray) -> np.ndarray:
        """[child, parent - child], each child's parent a node ``(handle, index)`` of any handle."""
        p = np.stack([h[i] for h, i in parents]) if parents else child[:0]
        return np.concatenate([child, p - child], axis=0)

    def take(self, hist: np.ndarray, index: np.ndarray) -> np.ndarray:
        return hist[np.asarray(index, np.int64)]

    def kernel_configs(self) -> dict[str, dict[str, object]]:
        return {}

    def bin_rows(self, mapper) -> Callable[[np.ndarray], np.ndarray | SparseBins]:  # noqa: ANN001 - a BinMapper
        """Dense bins, or for sparse input where it pays (:func:`mdhom.learn.sparse_bins.sparse_pays`) bins kept
        sparse: the same cells, read through :class:`mdhom.learn.sparse_bins.SparseBins`."""

        def to_bins(X: object) -> np.ndarray | SparseBins:
            n, f = X.shape
            if is_sparse(X) and sparse_pays(n, f, X.nnz, bin_dtype(mapper.n_bins).itemsize):
                return mapper.transform_sparse(X)
            return mapper.transform(X)

        return to_bins

    def check_size(self, n_rows: int, n_features: int, n_bins: int, n_outputs: int,
                   n_stored: int | None = None) -> None:
        # the bins, a few node histograms (a level and its parents) and a block of histogram indices
        node = n_features * n_bins * n_outputs * 2 * 8
        width = bin_dtype(n_bins).itemsize
        cells = n_rows * n_features * width
        if n_stored is not None and sparse_pays(n_rows, n_features, n_stored, width):
            cells = sparse_bytes(n_rows, n_stored, width) + 8 * n_stored  # and the lookup keys
        check_host(cells + 4 * node + 16 * _HIST_BLOCK,
                   f"a fit of {n_rows} x {n_features} features (the bin matrix, {n_bins} bins per feature and "
                   f"{n_outputs} output(s) in each node's histograms: {size_text(node)} a node)", n_features)

    def load(self, bins: np.ndarray | SparseBins, n_bins: int, n_outputs: int,
             cat_mode: np.ndarray | None = None) -> None:
        if bins.dtype != bin_dtype(n_bins) or bins.ndim != 2:
            raise TypeError(f"bins must be a 2-D {bin_dtype(n_bins)} array for {n_bins} bins (uint8 up to 256)")
        self.bins = bins if isinstance(bins, SparseBins) else np.ascontiguousarray(bins)
        self.n_bins, self.n_outputs = int(n_bins), int(n_outputs)
        self.row_node = np.zeros(bins.shape[0], np.int32)
        self.cat_mode = None if cat_mode is None or not np.any(cat_mode) else np.asarray(cat_mode, np.uint8)

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        n = self.bins.shape[0]
        self.grad = np.asarray(grad, np.float64).reshape(n, self.n_outputs)
        self.hess = np.asarray(hess, np.float64).reshape(n, self.n_outputs)
        if self.precision == "quantized":
            self.grad, self.hess, self.inv_scale = quantize_gh(self.grad, self.hess)

    def reset_rows(self) -> None:
        self.row_node[:] = 0

    def histograms(self, nodes: np.ndarray, transient: bool = False) -> np.ndarray:
        return histograms(self.bins, self.grad, self.hess, self.row_node, np.asarray(nodes), self.n_bins)

    def subtract(self, parent: np.ndarray, child: np.ndarray) -> np.ndarray:
        return parent - child

    def concat(self, hists: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(hists, axis=0)

    def to_host(self, hist: np.ndarray) -> np.ndarray:
        return hist

    def best_splits(self, hist: np.ndarray, feature_mask: np.ndarray, params: SplitParams,
                    then: Callable[[], None] | None = None) -> Splits:
        if then is not None:
            then()
        return best_splits(hist, feature_mask, params, self.inv_scale if hist.dtype.kind in "iu" else None,
                           self.cat_mode)

    def apply_splits(self, nodes: np.ndarray, feature: np.ndarray, bin: np.ndarray, default_left: np.ndarray,
                     left: np.ndarray, right: np.ndarray, small_left: np.ndarray | None = None,
                     cat_left: np.ndarray | None = None, final: bool = False) -> None:
        for i, (n, f, b, d, lo, hi) in enumerate(zip(nodes, feature, bin, default_left, left, right, strict=True)):
            rows = np.flatnonzero(self.row_node == n)
            table = None if cat_left is None or self.cat_mode is None or not self.cat_mode[f] else cat_left[i]
            go = goes_left(self.bins[rows, f], b, d, self.n_bins, table)
            self.row_node[rows] = np.where(go, lo, hi)

    def look_ahead(self, hist: np.ndarray, feature_mask: np.ndarray, params: SplitParams, nodes: np.ndarray,
                   allow: list[np.ndarray], first_id: list[int], final: tuple[int, int] | None = None,
                   then: Callable[[], None] | None = None, min_gain: float = 0.0,
                   chain: tuple[np.ndarray, np.ndarray, int] | None = None) -> tuple[list[Splits], list[np.ndarray]]:
        founds, hists = [self.best_splits(hist, feature_mask, params)], []
        ids, alive = np.asarray(nodes, np.int32).reshape(-1), np.ones(hist.shape[0], bool)
        leaves, max_leaves = final if final is not None else (0, 0)
        for k, (al, base) in enumerate(zip(allow, first_id, strict=True)):
            last = final is not None and k == len(allow) - 1
            f = founds[-1]
            ok, built, next_ids, next_alive = ahead_step(f, alive, al, base,
                                                         max_leaves - leaves if last and max_leaves else None,
                                                         min_gain, chain if k == 0 else None)
            leaves += int(ok.sum())
            lo = base + 2 * np.flatnonzero(ok)
            self.apply_splits(ids[ok], f.feature[ok], f.bin[ok], f.default_left[ok], lo, lo + 1)
            if last:  # the tree's last level: nothing below it to build or search
                break
            hist = self.siblings(hist, self.histograms(built))
            hists.append(hist)
            founds.append(self.best_splits(hist, feature_mask, params))
            ids, alive = next_ids, next_alive
        if then is not None:
            then()
        return founds, hists

    def relabel(self, node_map: np.ndarray) -> None:
        self.row_node = np.asarray(node_map, np.int32)[self.row_node]

    def row_nodes(self) -> np.ndarray:
        return self.row_node.copy()

    def node_rows(self, node: int) -> np.ndarray:
        return np.flatnonzero(self.row_node == node).astype(np.int32)
