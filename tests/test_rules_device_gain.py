"""The rule head quality plugged into the split evaluator as its gain, on every device: the best condition
(feature, bin, operator) of a root histogram over labels agrees with the numpy heads of mdhom.rules."""

from __future__ import annotations

import numpy as np
import pytest

from mdhom.components import histogram as hg
from mdhom.components.gradients import GradientSource
from mdhom.components.partition import RowPartitioner
from mdhom.components.split import SplitEvaluator, SplitParams
from mdhom.components.workspace import Workspace
from mdhom.rules.device_gain import COMPLETE_HEAD_GAIN, SINGLE_HEAD_GAIN
from mdhom.rules.heads import Head
from mdhom.rules.losses import make_loss


def _reference(hist, head, mcw):
    """(gain, feature, bin, dir) of the best candidate on (feat, label, bin, 2) sums: dir 1 is "bin <= b", dir 0
    "bin > b", the last bin (missing) on neither side; candidates in (feat, bin, dir) order, first wins ties."""
    n_feat, n_labels, n_bins, _ = hist.shape
    best = (-np.inf, 0, 0, 0)
    for f in range(n_feat):
        cum = np.cumsum(hist[f], axis=1)  # (label, bin, 2)
        real_total = cum[:, n_bins - 2]  # without the missing bin
        for b in range(n_bins - 2):
            for d in (0, 1):
                side = cum[:, b] if d == 1 else real_total - cum[:, b]
                if not side[:, 1].sum() >= mcw or side[:, 1].sum() == 0:
                    continue
                gain = -head.evaluate(np.concatenate([side[:, 0], side[:, 1]])[None])[0]
                if gain > best[0]:
                    best = (gain, f, b, d)
    return best


@pytest.mark.parametrize("kind, gain", [("single", SINGLE_HEAD_GAIN), ("complete", COMPLETE_HEAD_GAIN)])
def test_rule_head_gain_picks_the_reference_condition(device, kind, gain):
    rng = np.random.default_rng(9)
    n_rows, n_feat, n_bins, n_labels = 1001, 3, 9, 4
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(np.uint8)
    Y = (rng.random((n_rows, n_labels)) < 0.3).astype(float)
    Y[bins[:, 1] <= 2, 2] = 1.0  # a condition worth finding
    G, H = make_loss("logistic_labelwise").statistics(Y, np.zeros(Y.shape))
    ws = Workspace(device, "double")
    ws.load(bins, n_bins, n_labels)
    grads, rows, hist = GradientSource(ws), RowPartitioner(ws), hg.HistogramBuilder(ws)
    evaluator = SplitEvaluator(ws, gain)
    grads.set_gradients(G, H)
    rows.reset()
    grads.ensure()
    root = hist.build(np.array([0], np.int32), rows.slots(np.array([0], np.int32)))
    host = hist.to_host(root)[0]  # (feat, bin, label, 2)
    hist.to_work(root)
    got = evaluator.search(1, np.ones(n_feat, bool), SplitParams(1.0, 0.0, 0.0, 2.0), None)
    want = _reference(host.transpose(0, 2, 1, 3), Head(kind, False, np.arange(n_labels), n_labels, 0.0, 1.0), 2.0)
    assert (got.feature[0], got.bin[0], 0 if got.default_left[0] else 1) == want[1:]
    np.testing.assert_allclose(got.gain[0], want[0], rtol=1e-12)
