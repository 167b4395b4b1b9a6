"""The rule refinement on every OpenCL device: each kernel against its numpy reference, whole refinement steps
against mdhom.rules.binned (bit for bit), model files identical to device='numpy', and Oclgrind clean."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom import RuleBoostClassifier
from mdhom.components import specs
from mdhom.mdh import Computation
from mdhom.rules import device as rd
from mdhom.rules.binned import best_binned, bin_matrix
from mdhom.rules.heads import Head
from mdhom.rules.losses import make_loss
from mdhom.rules.quantized import QuantizedStatistics
from mdhom.rules.refinement import covered_by
from mdhom.testing import run_under_oclgrind

pytestmark = pytest.mark.filterwarnings("ignore::mdhom.configs.TunedConfigWarning")


def _problem(n=301, F=7, L=4, seed=5, loss="logistic_labelwise"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    X[rng.random((n, F)) < 0.1] = np.nan
    X[:, 1] = np.round(X[:, 1])  # few distinct values: empty bins between occupied ones
    edges = [np.quantile(X[~np.isnan(X[:, f]), f], np.linspace(0.1, 0.9, 3 + f)) for f in range(F)]
    edges = [np.unique(e) for e in edges]
    Y = rng.integers(0, 2, (n, L)).astype(float)
    G, H = make_loss(loss).statistics(Y, rng.normal(size=(n, L)))
    return rng, X, edges, G, H


@pytest.mark.parametrize("kernel", ["rule_atoms", "rule_atoms_q", "rule_cover", "rule_feature_bins", "tree_split_score_rule_single",
                                    "tree_split_score_rule_complete"])
def test_kernels_agree_with_their_numpy_references(device, kernel):
    """Each new kernel through its spec's tuner inputs and reference, at the spec's smallest size class and at
    awkward sizes with several work-groups."""
    spec = specs.all_specs()[kernel]
    t = spec.tuning
    rng = np.random.default_rng(3)
    sizes = dict(min(t.size_classes.values(), key=lambda s: s.get("row", s.get("feat", 0))))
    if "row" in sizes:
        sizes["row"] = 1023
    desc = t.describe(sizes)
    dims = {d: sizes[d] for d in desc.dim_names}
    for cfg in (spec.heuristic(desc, device, dims), {f"NUM_WG_{d}": 3 for d in desc.dim_names}):
        args = t.make_inputs(sizes, rng)
        got = Computation(desc, device, cfg, dims)(dims, **args)
        want = np.asarray(t.reference(args)).reshape(got.shape)
        for field in got.dtype.names or (None,):  # bit for bit, field by field (not the structs' padding)
            g, w = (got, want) if field is None else (got[field], want[field])
            assert g.tobytes() == w.tobytes(), (kernel, field, cfg)


@pytest.mark.parametrize("kind, loss, l1, precision", [
    ("single", "logistic_labelwise", 0.0, "double"), ("complete", "logistic_labelwise", 0.0, "double"),
    ("complete", "squared_error", 0.3, "double"), ("single", "logistic_examplewise", 0.0, "double"),
    ("single", "logistic_labelwise", 0.0, "quantized"), ("complete", "squared_error", 0.3, "quantized"),
    ("single", "logistic_examplewise", 0.0, "quantized")])
def test_refinement_steps_match_the_binned_reference_bit_for_bit(device, kind, loss, l1, precision):
    """Quantized: the reference sums the fixed-point statistics' reals in doubles, the device their integers."""
    rng, X, edges, G, H = _problem(loss=loss)
    n, L = G.shape
    bins, nb = bin_matrix(X, edges)
    head = Head(kind, loss == "logistic_examplewise", np.array([0, 2, 3]), L, l1, 1.0)
    w = (rng.random(n) < 0.8).astype(float)
    search = rd.DeviceRefinement(device, bins, nb, edges, L, H.shape[1], l1, 1.0, 2, precision=precision)
    quant = QuantizedStatistics(n, L, H.shape[1]) if precision == "quantized" else None
    for _rule in range(2):
        atoms, changed = head.gather(G, H), None
        if quant is not None:
            quant.stale()
            changed = quant.refresh(G, H, head.labels, head.h_columns)
            atoms = quant.atoms(head.labels, head.h_columns)
            assert not np.array_equal(atoms, head.gather(G, H))  # rounded, so a real test
        search.start(G, H, w, head, quant, changed)
        covered = np.ones(n, bool)
        for _step in range(4):
            feats = np.sort(rng.choice(X.shape[1], 5, replace=False))
            want = best_binned(bins, nb, edges, covered, w, atoms, head, feats, 2)
            got = search.best(feats)
            assert (want is None) == (got is None)
            if want is None:
                break
            assert (got.feature, got.op, got.bin, got.threshold, got.n_covered) == \
                (want.feature, want.op, want.bin, want.threshold, want.n_covered)
            assert got.quality == want.quality and got.total.tobytes() == want.total.tobytes()
            covered &= covered_by(X, want.feature, want.op, want.threshold)
            search.add(got)
        G = G[::-1].copy()  # the next rule sees other statistics
    assert search.ws.syncs == search.steps  # one read-back per step, nothing else


def _fit_doc(tmp_path, device, X, Y, **kw):
    est = RuleBoostClassifier(device=device, **kw).fit(X, Y)
    est.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["params"].pop("device")
    return json.dumps(doc, sort_keys=True), est


@pytest.mark.parametrize("kw", [
    dict(head_type="single"),
    dict(head_type="complete", feature_binning=("equal-width", 12), l1_regularization_weight=0.1),
    dict(head_type="single", loss="squared_error", instance_sampling=0.7, label_sampling=0.8, min_coverage=3),
    dict(head_type="single", loss="logistic_examplewise", max_conditions=2),
    dict(head_type="single", precision="quantized"),
    dict(head_type="single", loss="squared_error", instance_sampling=0.7, min_coverage=3, precision="quantized"),
], ids=["single", "complete-l1", "sampling", "examplewise-single", "single-quantized", "sampling-quantized"])
def test_model_files_are_identical_to_numpy(tmp_path, device, kw):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(257, 9))
    X[rng.random(X.shape) < 0.05] = np.nan
    Y = np.stack([X[:, 0] > 0, X[:, 1] + X[:, 2] > 0.3, X[:, 3] < -0.2, rng.random(257) < 0.3], 1).astype(int)
    kw = {"max_rules": 25, "feature_binning": ("equal-frequency", 16), "random_state": 4, "precision": "double",
          **kw}  # a mode given: precision=None would pick 'quantized' on a GPU and 'double' on numpy
    want, ref = _fit_doc(tmp_path, "numpy", X, Y, **kw)
    got, est = _fit_doc(tmp_path, device, X, Y, **kw)
    assert len(ref.rules_) > 5 and ref.device_key_ is None and est.device_key_ == device.key
    quantized = kw.get("precision") == "quantized"
    assert ref.precision_ == est.precision_ == ("quantized" if quantized else "double")
    assert ("tree_histogram_q" if quantized else "tree_histogram") in est.kernel_configs_
    assert got == want


OCLGRIND = r"""
import warnings
import numpy as np
from mdhom import get_device
from mdhom.rules.binned import best_binned, bin_matrix
from mdhom.rules.device import DeviceRefinement
from mdhom.rules.heads import Head
from mdhom.rules.losses import make_loss
from mdhom.rules.quantized import QuantizedStatistics
from mdhom.rules.refinement import covered_by
warnings.simplefilter("ignore")
dev = get_device()
assert dev.checker, dev.key
rng = np.random.default_rng(2)
n, F, L = 37, 3, 3
X = rng.normal(size=(n, F)); X[rng.random((n, F)) < 0.1] = np.nan
edges = [np.array([-0.5, 0.0, 0.7]), np.array([0.1]), np.array([-1.0, -0.2, 0.2, 1.0])]
bins, nb = bin_matrix(X, edges)
G, H = make_loss("logistic_labelwise").statistics(rng.integers(0, 2, (n, L)).astype(float), np.zeros((n, L)))
w = np.ones(n)
parallel = {"tree_histogram": {"NUM_WG_node": 1, "NUM_WI_node": 1, "NUM_WG_feat": 2, "NUM_WI_feat": 2,
                               "NUM_WG_output": 1, "NUM_WI_output": 2, "NUM_WG_pos": 3, "NUM_WI_pos": 4,
                               "NUM_WI_COMBINE": 4},
            "tree_split_score_rule_complete": {"NUM_WG_node": 1, "NUM_WI_node": 1, "NUM_WG_feat": 2, "NUM_WI_feat": 1,
                                               "NUM_WG_bin": 2, "NUM_WI_bin": 2, "NUM_WG_dir": 1, "NUM_WI_dir": 2,
                                               "NUM_WI_COMBINE": 2},
            "rule_atoms": {"NUM_WG_row": 3, "NUM_WI_row": 4, "NUM_WG_slot": 1, "NUM_WI_slot": 2},
            "rule_cover": {"NUM_WG_row": 2, "NUM_WI_row": 8},
            "rule_feature_bins": {"NUM_WG_row": 2, "NUM_WI_row": 4, "NUM_WG_feat": 1, "NUM_WI_feat": 2}}
parallel_q = dict(parallel, tree_histogram_q=dict(parallel["tree_histogram"], PARTIALS_LOCAL=1),
                  rule_atoms_q=parallel["rule_atoms"])
for precision, configs in (("double", None), ("double", parallel), ("quantized", parallel_q)):
    head = Head("complete", False, np.arange(L), L, 0.0, 1.0)
    search = DeviceRefinement(dev, bins, nb, edges, L, L, 0.0, 1.0, 1, configs=configs, precision=precision)
    quant, changed, atoms = None, None, head.gather(G, H)
    if precision == "quantized":
        quant = QuantizedStatistics(n, L, L)
        changed = quant.refresh(G, H, head.labels, head.h_columns)
        atoms = quant.atoms(head.labels, head.h_columns)
    search.start(G, H, w, head, quant, changed)
    covered = np.ones(n, bool)
    for step in range(3):  # every feature, then samples (the sampled features' bins copied side by side)
        feats = np.arange(F) if step == 0 else np.array([0, 2])
        want = best_binned(bins, nb, edges, covered, w, atoms, head, feats, 1)
        got = search.best(feats)
        assert (want is None) == (got is None)
        if want is None:
            break
        assert (got.feature, got.op, got.bin) == (want.feature, want.op, want.bin), (got, want)
        np.testing.assert_allclose(got.total, want.total, rtol=1e-12)
        covered &= covered_by(X, want.feature, want.op, want.threshold)
        search.add(got)
    print("ok", precision, configs is not None, flush=True)
"""


def test_refinement_is_clean_under_oclgrind(oclgrind_device):
    """No out-of-bounds access or data race in any kernel of a refinement step: the exact (pinned) configuration,
    one with several work-groups and lanes along every reduced dimension, and the quantized kernels with the
    histogram's local-memory atomics."""
    run = run_under_oclgrind(OCLGRIND, timeout=900)
    assert run.clean, run.explain()
    assert run.stdout.count("ok ") == 3, run.explain()


def test_devices_need_binned_decomposable_statistics():
    X, Y = np.zeros((10, 2)), np.eye(10, 2, dtype=int)
    with pytest.raises(ValueError, match="set feature_binning"):
        RuleBoostClassifier(device="cpu").fit(X, Y)
