"""Which entries of a step decided on the device may split (the look-ahead's ``allow``): where a depth limit forbids
some, the host's mask uploaded; then, where a rule narrows them, the device's pick of them: a depth-wise tree's last
level its leaf budget (``tree_ahead_budget``), a bounded loss-guided batch's children the next batch would take
(``tree_ahead_chain``). The row partitioner's table maker reads the result; the kernels are
:mod:`mdhom.components.lookahead`'s, built at their first use (most trees ask for neither)."""

from __future__ import annotations

import numpy as np

from mdhom.components.lookahead import AHEAD_BUDGET, AHEAD_CHAIN, AHEAD_ENTRIES, ahead_budget, ahead_chain
from mdhom.components.workspace import Bound, Workspace


class SplitGate:
    """The look-ahead's ``allow``: ``ahead_allow`` (the host's mask), ``ahead_budget`` (the device's pick of it)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._budget_bounds: dict[str, Bound] = {}
        self._budget_comp = None
        self._chain_bound: Bound | None = None
        self._ones = 0  # "ahead_allow" holds this many ones (the look-ahead without a depth limit uploads it once)
        ws.ensure("ahead_allow", 4 * 16)

    def allowed(self, allow: np.ndarray, last_tab: str, leaves: int = -1, max_leaves: int = 0, min_gain: float = 0.0,
                chain: tuple[np.ndarray, np.ndarray, int] | None = None) -> str:
        """The buffer holding which of the ``allow.size`` entries of the step made from table ``last_tab`` may split:
        ``allow`` itself, or, where ``max_leaves`` > 0 (the tree's ``leaves`` before the step), the largest gains its
        leaf budget holds, or, given ``chain`` (each entry's parent's chain value, the left-out candidates' chain
        values, the batch bound), those the next batch would take (of a gain at least ``min_gain``). Launches what
        the pick needs; uploads only where the mask has a zero or outgrew the ones already there."""
        ws = self.ws
        m = int(allow.size)
        if not (allow.all() and self._ones >= m):  # an upload only where a depth limit forbids some
            vals = np.ones(max(2 * m, 64), np.int32) if allow.all() else allow.astype(np.int32)
            ws.ensure("ahead_allow", 4 * vals.size)
            ws.put("ahead_allow", ws["ahead_allow"], vals, np.int32)
            self._ones = vals.size if allow.all() else 0
        if max_leaves > 0:  # the leaf budget picks which of the allowed may split
            ws.ensure("ahead_budget", 4 * m)
            budget = self._budget_bounds.get(last_tab)
            if budget is None:  # built at its first use: loss-guided trees and trees without a depth limit never ask
                if self._budget_comp is None:
                    self._budget_comp = ws.build(AHEAD_BUDGET, ahead_budget(ws.n_bins, ws.n_outputs, ws.precision),
                                                 {"entry": AHEAD_ENTRIES + 1})
                budget = self._budget_bounds[last_tab] = Bound(ws, self._budget_comp, lambda: (
                    ws["ahead_budget"], dict(best_value=ws["best"], last_tab=ws[last_tab], allow=ws["ahead_allow"])))
            ws.record("tree_ahead_budget", budget({"entry": m}, n_entries=m, leaves=int(leaves),
                                                  max_leaves=int(max_leaves)))
            return "ahead_budget"
        if chain is not None:  # of the allowed, those the next batch would take
            pchain, lchain, bound = chain
            vals = np.concatenate([np.asarray(pchain, np.float64).reshape(m), np.asarray(lchain, np.float64)])
            ws.ensure("ahead_budget", 4 * m)
            ws.ensure("ahead_chain", 8 * max(1, vals.size))
            ws.put("ahead_chain", ws["ahead_chain"], vals, np.float64)
            if self._chain_bound is None:  # built at its first use: only bounded loss-guided batches ask
                comp = ws.build(AHEAD_CHAIN, ahead_chain(ws.n_bins, ws.n_outputs, ws.precision),
                                {"entry": AHEAD_ENTRIES + 1})
                self._chain_bound = Bound(ws, comp, lambda: (ws["ahead_budget"], dict(
                    best_value=ws["best"], allow=ws["ahead_allow"], chains=ws["ahead_chain"])))
            ws.record("tree_ahead_chain", self._chain_bound({"entry": m}, n_entries=m, n_lchain=vals.size - m,
                                                             most=int(bound), min_gain=float(min_gain)))
            return "ahead_budget"
        return "ahead_allow"
