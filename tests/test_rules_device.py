"""The rule refinement on every OpenCL device: each kernel against its numpy reference, whole refinement steps
against mdhom.rules.binned (bit for bit), model files identical to device='numpy', and Oclgrind clean."""

from __future__ import annotations

import json

import numpy as np
import pytest
from device_marks import intel_optimiser_bits

from mdhom import RuleBoostClassifier
from mdhom.components import specs
from mdhom.mdh import Computation
from mdhom.rules import device as rd
from mdhom.rules.binned import best_binned, bin_matrix
from mdhom.rules.heads import Head
from mdhom.rules.label_binning import LabelBinning
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


@pytest.mark.parametrize("kernel", ["rule_histogram_q", "rule_cover", "rule_cover_best", "rule_head_columns",
                                    "rule_head_scale", "rule_feature_bins",
                                    "tree_split_score_rule_single", "tree_split_score_rule_complete",
                                    "rule_coupled_quality"])
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


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_step_histogram_matches_bincount(device, precision):
    """The fused step histogram (statistics read in place through the head's columns, the mask and the sample's
    feature-major bins) against np.bincount over the atoms' values, bit for bit: double with the exact pins (one
    lane, rows ascending) at 1023 rows over three work-groups of features and outputs; quantized also with the rows
    over three work-groups and the local histogram's atomics."""
    from mdhom.rules import device_kernels as dk

    spec = dk.HISTOGRAM_Q if precision == "quantized" else dk.HISTOGRAM
    t = spec.tuning
    rng = np.random.default_rng(7)
    sizes = {"feat": 5, "output": 4, "pos": 1023}
    desc = t.describe(sizes)
    spread = {"NUM_WG_feat": 3, "NUM_WG_output": 3, "NUM_WG_pos": 3, "NUM_WI_pos": 4}
    if precision == "quantized":
        cfgs = [spread, dict(spread, PARTIALS_LOCAL=1)]
    else:
        cfgs = [{**spread, **spec.exact_pins}]
    for cfg in [{**spec.heuristic(desc, device, sizes), **spec.exact_pins}] + cfgs:
        args = t.make_inputs(sizes, rng)
        got = Computation(desc, device, cfg, sizes)(sizes, **args)
        want = np.asarray(t.reference(args)).reshape(got.shape)
        for field in ("g", "h"):
            assert got[field].tobytes() == want[field].tobytes(), (field, cfg)


@pytest.mark.parametrize("kind, loss, l1, lb, precision", [
    ("single", "logistic_labelwise", 0.0, None, "double"), ("complete", "logistic_labelwise", 0.0, None, "double"),
    ("complete", "squared_error", 0.3, None, "double"), ("single", "logistic_examplewise", 0.0, None, "double"),
    ("complete", "logistic_examplewise", 0.0, None, "double"), ("complete", "logistic_examplewise", 0.2, None, "double"),
    ("complete", "logistic_examplewise", 0.0, LabelBinning(0.5, 1, 0), "double"),
    ("complete", "logistic_examplewise", 0.1, LabelBinning(), "double"),
    ("single", "logistic_labelwise", 0.0, None, "quantized"), ("complete", "squared_error", 0.3, None, "quantized"),
    ("single", "logistic_examplewise", 0.0, None, "quantized"),
], ids=["single", "complete", "squared-l1", "examplewise-single", "examplewise-complete", "examplewise-complete-l1",
        "examplewise-binned", "examplewise-binned-l1", "single-quantized", "squared-l1-quantized",
        "examplewise-single-quantized"])
def test_refinement_steps_match_the_binned_reference_bit_for_bit(device, kind, loss, l1, lb, precision):
    """One refinement step after another (statistics, scan, each candidate's head and quality, the arg-max) against
    the numpy reference; complete heads of the example-wise loss (a coupled Hessian: a solve per candidate) also
    with the features in chunks of two (l1 > 0), as a small memory budget splits them, and with label binning
    (mlrl-boomer's default ratio, and a ratio of one half: two bins per sign). Quantized: the reference sums the
    fixed-point statistics' reals in doubles, the device their integers."""
    rng, X, edges, G, H = _problem(loss=loss)
    n, L = G.shape
    bins, nb = bin_matrix(X, edges)
    head = Head(kind, loss == "logistic_examplewise", np.array([0, 2, 3]), L, l1, 1.0, lb)
    w = (rng.random(n) < 0.8).astype(float)
    budget = 2 * 8 * (3 + 6 + 2) * nb if head.coupled and l1 > 0 else None
    search = rd.DeviceRefinement(device, bins, nb, edges, L, H.shape[1], l1, 1.0, 2, coupled_budget=budget,
                                 precision=precision)
    quant = QuantizedStatistics(n, L, H.shape[1]) if precision == "quantized" else None
    for _rule in range(2):
        atoms, changed = head.gather(G, H), None
        if quant is not None:
            quant.stale()
            changed = quant.refresh(G, H, head.labels, head.h_columns)
            atoms = quant.atoms(head.labels, head.h_columns)
            assert not np.array_equal(atoms, head.gather(G, H))  # rounded, so a real test
        # complete heads of the example-wise loss send the gradients only: the device builds the Hessians
        search.start(G, None if head.coupled else H, w, head, quant, changed)
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
        if loss == "logistic_examplewise":  # its Hessians are those of the gradients
            H = make_loss(loss).hessian(G)
    assert search.ws.syncs == search.steps  # one read-back per step, nothing else


@pytest.mark.parametrize("kind, precision, f, restrict", [
    ("single", "quantized", 5, False), ("complete", "double", 5, False), ("single", "double", 7, False),
    ("single", "quantized", 5, True), ("single", "double", 7, True)],
    ids=["single-quantized", "complete", "all", "restrict-quantized", "restrict-all"])
def test_step_batches_search_what_steps_one_at_a_time_search(device, kind, precision, f, restrict):
    """best_batch: step j searches the rows step j - 1's winner covers (narrowed on the device), every step's result
    read at once, bit for bit the reference's; a batch after a batch goes on from the mask the host added last. Also
    with every feature searched (f = 7: the bins themselves, no sampled copy), and with a single-label head over
    three labels restricted on the device after the first step to the label the host's head would keep."""
    rng, X, edges, G, H = _problem()
    n, L = G.shape
    bins, nb = bin_matrix(X, edges)
    head = Head(kind, False, np.array([0, 1, 3]) if restrict else np.array([1, 3]), L, 0.0, 1.0)
    w = np.ones(n)
    search = rd.DeviceRefinement(device, bins, nb, edges, L, L, 0.0, 1.0, 2, precision=precision, lookahead=3)
    quant, changed = None, None
    if precision == "quantized":
        quant = QuantizedStatistics(n, L, L)
        changed = quant.refresh(G, H, head.labels, head.h_columns)

    def atoms_of(h):  # noqa: ANN001, ANN202
        return quant.atoms(h.labels, h.h_columns) if quant is not None else h.gather(G, H)

    atoms = atoms_of(head)
    search.start(G, H, w, head, quant, changed)
    covered = np.ones(n, bool)
    seen = 0
    for m in (3, 1, 2):
        sets = [np.sort(rng.choice(X.shape[1], f, replace=False)) for _ in range(m)]
        syncs = search.ws.syncs
        first = restrict and seen == 0
        got = search.best_batch(sets, restrict_first=first)
        assert len(got) == m and search.ws.syncs == syncs + 1
        for j, fs in enumerate(sets):
            want = best_binned(bins, nb, edges, covered, w, atoms, head, fs, 2)
            assert (want is None) == (got[j] is None), j
            if want is None:
                seen = -1
                break
            g = got[j]
            assert (g.feature, g.op, g.bin, g.threshold, g.n_covered, g.quality) == \
                (want.feature, want.op, want.bin, want.threshold, want.n_covered, want.quality)
            assert g.total.tobytes() == want.total.tobytes()
            covered &= covered_by(X, want.feature, want.op, want.threshold)
            if first and j == 0:
                chosen = head.predict(want.total)[0]
                head = head.restricted(chosen)
                atoms = atoms_of(head)
                assert search.batch_label == chosen[0]
            seen += 1
        if seen < 0:
            break
        if first:
            search.restrict(head)
        search.add(got[-1])
    assert seen != 0


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
    dict(head_type="auto", loss="logistic_examplewise", l1_regularization_weight=0.05, label_sampling=0.8),
    dict(head_type="complete", loss="logistic_examplewise", label_binning="none", instance_sampling=0.8),
    dict(head_type="single", precision="quantized"),
    dict(head_type="single", loss="squared_error", instance_sampling=0.7, min_coverage=3, precision="quantized"),
    dict(head_type="single", precision="quantized", label_sampling=0.7, max_conditions=4, min_coverage=9),
    dict(head_type="complete", precision="quantized", feature_sampling=None),
], ids=["single", "complete-l1", "sampling", "examplewise-single", "examplewise-auto-binned", "examplewise-complete",
        "single-quantized", "sampling-quantized", "limits-quantized", "complete-quantized"])
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
    assert ("rule_histogram_q" if quantized else "rule_histogram") in est.kernel_configs_
    coupled = any(k.startswith("rule_coupled_quality") for k in est.kernel_configs_)
    assert coupled == (kw.get("loss") == "logistic_examplewise" and kw["head_type"] != "single")
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
            "rule_histogram": {"NUM_WG_feat": 2, "NUM_WI_feat": 2, "NUM_WG_output": 1, "NUM_WI_output": 2,
                               "NUM_WG_pos": 3, "NUM_WI_pos": 4, "NUM_WI_COMBINE": 4},
            "rule_cover": {"NUM_WG_row": 2, "NUM_WI_row": 8},
            "rule_cover_best": {"NUM_WG_row": 2, "NUM_WI_row": 8},
            "rule_head_columns": {"NUM_WG_i": 2, "NUM_WI_i": 1},
            "rule_head_scale": {"NUM_WG_slot": 2, "NUM_WI_slot": 1},
            "rule_feature_bins": {"NUM_WG_row": 2, "NUM_WI_row": 4, "NUM_WG_feat": 1, "NUM_WI_feat": 2},
            "rule_coupled_histogram": {"NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WG_blk": 2, "NUM_WI_blk": 2,
                                       "NUM_WG_bin": 3, "NUM_WI_bin": 2, "NUM_WG_pos": 1, "NUM_WI_pos": 1,
                                       "NUM_WI_COMBINE": 2},
            "rule_sort_count": {"NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WG_bin": 2, "NUM_WI_bin": 2,
                                "NUM_WG_tile": 1, "NUM_WI_tile": 1, "NUM_WG_q": 2, "NUM_WI_q": 4, "NUM_WI_COMBINE": 2},
            "rule_sort_offsets": {"NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WG_cell": 2, "NUM_WI_cell": 4,
                                  "NUM_WI_COMBINE": 4, "SCAN_TILED": 1},
            "rule_sort_rows": {"NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WG_pos": 2, "NUM_WI_pos": 8},
            "rule_cover_scan": {"NUM_WG_row": 3, "NUM_WI_row": 4, "NUM_WI_COMBINE": 4, "SCAN_TILED": 1},
            "rule_cover_rows": {"NUM_WG_row": 2, "NUM_WI_row": 8},
            "rule_coupled_scan": {"NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WG_lane": 2, "NUM_WI_lane": 3,
                                  "NUM_WG_bin": 1, "NUM_WI_bin": 1, "NUM_WI_COMBINE": 2, "SCAN_TILED": 0},
            "rule_coupled_quality": {"NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WG_bin": 2, "NUM_WI_bin": 2,
                                     "NUM_WG_dir": 1, "NUM_WI_dir": 2, "NUM_WI_COMBINE": 2},
            "rule_coupled_result": {"NUM_WG_lane": 2, "NUM_WI_lane": 4}}
G2, H2 = make_loss("logistic_examplewise").statistics(rng.integers(0, 2, (n, L)).astype(float), np.zeros((n, L)))
from mdhom.rules.label_binning import LabelBinning
from mdhom.rules import device_coupled
device_coupled.SORT_TILE = 8  # several tiles of the counting sort at 37 rows
parallel_q = dict(parallel, tree_histogram_q=dict(parallel["tree_histogram"], PARTIALS_LOCAL=1),
                  rule_histogram_q=dict(parallel["rule_histogram"], PARTIALS_LOCAL=1))
runs = [(configs, False, None, "double") for configs in (None, parallel)] + [(parallel_q, False, None, "quantized")]
runs += [(configs, True, None, "double") for configs in (None, parallel)] + [(parallel, True, LabelBinning(0.5, 1, 0),
                                                                               "double")]
# label binning with its work in private memory (the unbinned run without configs has it too; parallel: global)
runs += [(dict(parallel, rule_coupled_quality=dict(parallel["rule_coupled_quality"], SCRATCH_PRIVATE=32)), True,
          LabelBinning(0.5, 1, 0), "double")]
for configs, wise, lb, precision in runs:  # label-wise complete heads (exact, then quantized with the histogram's
    if wise:                               # atomics), the example-wise loss's coupled ones (a solve each), then
        G, H = G2, H2                      # those with label binning
    head = Head("complete", wise, np.arange(L), L, 0.0, 1.0, lb)
    search = DeviceRefinement(dev, bins, nb, edges, L, H.shape[1], 0.0, 1.0, 1, configs=configs,
                              coupled_budget=8 * 11 * nb * 2 if configs and wise else None, precision=precision,
                              lookahead=3)
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
    if not head.coupled:  # the same steps as one batch: the device narrows the mask by each winner itself, and a
        head = Head("single", False, np.arange(L), L, 0.0, 1.0)  # single-label head's label is chosen there too
        search.start(G, H, w, head, quant, changed)
        covered = np.ones(n, bool)
        sets = [np.arange(F), np.array([0, 2]), np.array([0, 2])]
        for j, (feats, got) in enumerate(zip(sets, search.best_batch(sets, restrict_first=True))):
            atoms = quant.atoms(head.labels, head.h_columns) if quant is not None else head.gather(G, H)
            want = best_binned(bins, nb, edges, covered, w, atoms, head, feats, 1)
            assert (want is None) == (got is None)
            if want is None:
                break
            assert (got.feature, got.op, got.bin) == (want.feature, want.op, want.bin), (got, want)
            covered &= covered_by(X, want.feature, want.op, want.threshold)
            if j == 0:
                head = head.restricted(head.predict(want.total)[0])
                assert search.batch_label == head.labels[0]
    print("ok", precision, configs is not None, wise, lb is not None, flush=True)
"""


def test_refinement_is_clean_under_oclgrind(oclgrind_device):
    """No out-of-bounds access or data race in any kernel of a refinement step: the exact (pinned) configuration
    and one with several work-groups and lanes along every reduced dimension (for coupled heads also features in
    chunks of two), for label-wise complete heads (also quantized, with the histogram's local-memory atomics) and
    the example-wise loss's coupled ones, with and without label binning, their quality kernel's work in private
    memory and in its global slice; for heads that are not coupled also the steps as one batch (the device's own
    cover by each winner, a single-label head's label chosen after the first step, every step's result in its row
    of one buffer)."""
    run = run_under_oclgrind(OCLGRIND, timeout=900)
    assert run.clean, run.explain()
    assert run.stdout.count("ok ") == 7, run.explain()


def test_devices_need_binned_features_and_take_every_loss_and_head():
    """Exact thresholds are refused on a device; complete heads of the example-wise loss (refused before the
    coupled search) now fit there."""
    X, Y = np.zeros((10, 2)), np.eye(10, 2, dtype=int)
    with pytest.raises(ValueError, match="set feature_binning"):
        RuleBoostClassifier(device="cpu").fit(X, Y)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0.5], 1).astype(int)
    est = RuleBoostClassifier(device="cpu", loss="logistic_examplewise", head_type="complete", max_rules=4,
                              feature_binning=("equal-width", 8)).fit(X, Y)
    assert len(est.rules_) > 1


def test_coupled_quality_is_tunable(device):
    """The tuner's runner measures the coupled quality kernel and accepts its result (its reference's shape and
    bits), at the smallest size class and with label binning at 101 labels."""
    from mdhom.tuning.measure import LiveRunner

    kernel = specs.all_specs()["rule_coupled_quality"].tunable()
    for cls in ("labels_6", "labels_101_binned"):
        sizes = kernel.size_classes[cls]
        got = LiveRunner(kernel, device, sizes, repeats=1, warmup=1).evaluate(kernel.baseline_config(device, sizes))
        assert got.status == "ok", (cls, got.message)


def test_precision_none_is_quantized_on_gpus_for_decomposable_heads_only():
    """None resolves per device and head kind; quantized coupled heads on a device are a clear error (their
    device search sums float64), in numpy they fit."""
    from types import SimpleNamespace

    from mdhom.rules import options as O

    gpu, cpu = SimpleNamespace(type="gpu"), SimpleNamespace(type="cpu")
    assert O.resolved_precision(None, gpu) == "quantized"
    assert O.resolved_precision(None, gpu, coupled=True) == "double"
    assert O.resolved_precision(None, cpu) == O.resolved_precision(None, None) == "double"
    with pytest.raises(ValueError, match="precision='double' or device='numpy'"):
        O.resolved_precision("quantized", cpu, coupled=True)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0.5], 1).astype(int)
    est = RuleBoostClassifier(loss="logistic_examplewise", head_type="complete", max_rules=4, precision="quantized",
                              feature_binning=("equal-width", 8)).fit(X, Y)
    assert est.precision_ == "quantized" and len(est.rules_) > 1


def test_coupled_sort_and_histogram_kernels_match_numpy(request, device):
    """The coupled search's counting sort (count, offsets, scatter) and its histogram, which builds each packed
    Hessian entry from two gradients, against numpy at awkward sizes (301 rows, tiles of 16, 3 features of 9
    bins, 4 labels: 16 lanes), heuristic and spread configurations: the sorted rows exactly, the histogram bit for
    bit against binned.statistics over the covered rows (with the reference's Hessians of the same gradients)."""
    intel_optimiser_bits(request, device)
    import pyopencl.array as cla

    from mdhom.mdh import build_within_limits
    from mdhom.rules import binned
    from mdhom.rules import device_coupled as dc
    from mdhom.rules.losses import packed_index

    rng = np.random.default_rng(11)
    n, f, k, nb, T = 301, 3, 4, 9, 16
    tiles, lanes = -(-n // T), dc.lanes_of(k)
    bins = rng.integers(0, nb, (n, f)).astype(np.uint8)
    bins[:, 1] = np.minimum(bins[:, 1], 2)  # empty bins
    covered = (rng.random(n) < 0.7).astype(np.uint8)
    covered[-1] = 1
    w = np.where(rng.random(n) < 0.8, 1.0, 0.0)
    loss = make_loss("logistic_examplewise")
    G = loss.gradients((rng.random((n, 6)) < 0.4).astype(float), rng.normal(size=(n, 6)) * 2)
    labels = np.array([0, 2, 3, 5])
    rows = np.flatnonzero(covered).astype(np.int32)
    at = (np.cumsum(covered) - covered).astype(np.int32)
    ridx = np.zeros(n, np.int32)
    ridx[: rows.size] = rows
    want_count = np.zeros((f, nb, tiles), np.int32)
    for t in range(tiles):
        part = rows[t * T:(t + 1) * T]
        for j in range(f):
            want_count[j, :, t] = np.bincount(bins[part, j], minlength=nb)
    flat = want_count.reshape(f, -1)
    want_off = (np.cumsum(flat, axis=1) - flat).astype(np.int32)
    want_sorted = np.stack([rows[np.argsort(bins[rows, j], kind="stable")] for j in range(f)])
    head = Head("complete", True, labels, 6, 0.0, 1.0)
    want_hist = binned.statistics(bins, nb, binned.slot_values(head.gather(G, loss.hessian(G)), covered != 0, w),
                                  rows)
    sr, sc = packed_index(k)
    lists = dict(ridx=ridx, at=at, covered=covered)
    q = device.queue
    descs = {"count": (dc.SORT_COUNT, dc.sort_count(), {"feat": f, "bin": nb, "tile": tiles, "q": T}),
             "off": (dc.SORT_OFFSETS, dc.sort_offsets(), {"feat": f, "cell": nb * tiles}),
             "rows": (dc.SORT_ROWS, dc.sort_rows(), {"feat": f, "pos": n}),
             "hist": (dc.HISTOGRAM, dc.histogram(3), {"feat": f, "bin": nb, "blk": -(-lanes // 3), "pos": n})}
    for spread in (False, True):
        comps = {}
        for key, (spec, desc, sizes) in descs.items():
            cfg = {**spec.heuristic(desc, device, sizes), **spec.exact_pins}
            if spread:  # several work-groups and work-items along every dimension that is not pinned
                cfg.update({p: 2 if p.startswith("NUM_WG") else 3 for p in cfg
                            if p.startswith("NUM_W") and p.rsplit("_", 1)[-1] in desc.dim_names
                            and p not in spec.exact_pins})
            comps[key] = build_within_limits(desc, device, cfg)
        count = comps["count"](descs["count"][2], bins=bins.ravel(), **lists, bin_stride=f, n_rows=n)
        assert np.array_equal(count, want_count)
        off = comps["off"](descs["off"][2], count=count.reshape(f, -1))
        assert np.array_equal(off, want_off)
        out = cla.to_device(q, np.full((f, n), -7, np.int32))
        comps["rows"].enqueue(descs["rows"][2], out=out, bins=bins.ravel(), **lists, off=off.ravel(), bin_stride=f,
                              n_bins=nb, tile=T, n_rows=n)
        got = out.get()
        assert np.array_equal(got[:, : rows.size], want_sorted) and (got[:, rows.size:] == -7).all()
        hist = comps["hist"](descs["hist"][2], G=G.ravel(), weight=w, gcol=labels.astype(np.int32),
                             pair_r=labels[sr].astype(np.int32), pair_c=labels[sc].astype(np.int32),
                             srows=got.ravel(), off=off.ravel(), at=at, covered=covered, feat0=0, g_stride=6, k=k,
                             width=lanes - 2, n_tiles=tiles, n_rows=n)
        got_hist = hist.reshape(f, nb, -1)  # lanes padded to whole blocks of 3
        assert not got_hist[..., lanes:].any()
        assert got_hist[..., :lanes].tobytes() == np.ascontiguousarray(want_hist).tobytes(), spread


@pytest.mark.parametrize("block", [1, 8])
def test_coupled_histogram_tuner_inputs_match_their_reference(request, device, block):
    """The example-wise histogram is tunable: its tuner inputs (covered rows grouped by bin, a few of weight 0)
    through the heuristic and a spread configuration under the exact pins give the reference's sums bit for bit,
    for the GPUs' variant (a lane per work-item) and the CPUs' (8 lanes), as the tuner compares them."""
    intel_optimiser_bits(request, device)
    from mdhom.rules import device_coupled as dc

    t = dc.HISTOGRAM.tuning
    sizes = {"feat": 3, "bin": 6, "blk": dc.lanes_of(4) // block, "pos": 157, "n_labels": 4, "block": block}
    desc = t.describe(sizes)
    dims = {d: sizes[d] for d in desc.dim_names}
    args = t.make_inputs(sizes, np.random.default_rng(11))
    want = t.reference(args)
    assert want.shape == (3, 6, dc.lanes_of(4)) and want[..., -2].sum() == (args["covered"] != 0).sum() * 3
    for cfg in (dc.HISTOGRAM.heuristic(desc, device, dims), {"NUM_WG_feat": 2, "NUM_WG_bin": 3, "NUM_WI_blk": 2}):
        got = Computation(desc, device, {**cfg, **dc.HISTOGRAM.exact_pins}, dims)(dims, **args)
        assert dc.HISTOGRAM.tunable().compare(got, want) is None, cfg
        assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def test_coupled_histogram_classes_follow_the_devices_variant(device):
    """A device tunes only the histogram variant its learner builds (lane_block), so its file's entry is never
    of another kernel version; without a device every variant is a class (what the stale check knows)."""
    from mdhom.rules import device_coupled as dc
    from mdhom.tuning.driver import plan

    kern = dc.HISTOGRAM.tunable()
    mine = kern.classes(device=device)
    assert mine and all(s["block"] == dc.lane_block(device) for s in mine.values())
    assert set(kern.classes()) == set(dc.HISTOGRAM.tuning.size_classes) > set(mine)
    assert {p.size_class for p in plan(["rule_coupled_histogram"], True, device)} <= set(mine)
