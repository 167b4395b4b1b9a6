"""The statistics update after a rule on the device (mdhom.rules.device_stats, mdhom.rules.device_update): each
kernel against its numpy reference on every device, the device's scores and fixed point against the host's after
rules, the model files against numpy's, and Oclgrind."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom import RuleBoostClassifier
from mdhom.components import specs
from mdhom.components.quantize import quantization_exponent
from mdhom.mdh import Computation
from mdhom.rules import device_stats as ds
from mdhom.rules.induction import InductionParams, Learner, bin_edges
from mdhom.rules.losses import make_loss
from mdhom.rules.quantized import QuantizedStatistics
from mdhom.testing import run_under_oclgrind

pytestmark = pytest.mark.filterwarnings("ignore::mdhom.configs.TunedConfigWarning")


def same_rule(a, b) -> bool:  # noqa: ANN001
    return (a is None) == (b is None) and (a is None or (
        a.conditions == b.conditions and a.labels.tolist() == b.labels.tolist() and a.scores.tobytes() == b.scores.tobytes()))

KERNELS = [s.name for s in ds.SPECS]


@pytest.mark.parametrize("kernel", KERNELS)
def test_statistics_kernels_agree_with_their_numpy_references(device, kernel):
    """Bit for bit at awkward sizes (1023 rows, 3 columns), with the heuristic and with several work-groups."""
    spec = specs.all_specs()[kernel]
    t = spec.tuning
    rng = np.random.default_rng(3)
    sizes = dict(min(t.size_classes.values(), key=lambda s: (s.get("row", 0), s.get("slot", 0))))
    if "row" in sizes:
        sizes["row"], sizes["slot"] = 1023, 3
    desc = t.describe(sizes)
    dims = {d: sizes[d] for d in desc.dim_names}
    for cfg in (spec.heuristic(desc, device, dims), {f"NUM_WG_{d}": 3 for d in desc.dim_names}):
        args = t.make_inputs(sizes, rng)
        got = Computation(desc, device, cfg, dims)(dims, **args)
        want = np.asarray(t.reference(args)).reshape(got.shape)
        for field in got.dtype.names or (None,):
            g, w = (got, want) if field is None else (got[field], want[field])
            assert g.tobytes() == w.tobytes(), (kernel, field, cfg)


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_tuned_size_class_makes_inputs_its_reference_agrees_with(cpu, kernel):
    """What a tune does first at each size class: inputs, a launch with the heuristic, the reference. The head's
    inverse at a head of 101 labels had drawn 101 distinct columns of 11 and stopped every tune of the rules'
    statistics kernels at that class (``mdhom tune: error: Cannot take a larger sample than population``)."""
    t = specs.all_specs()[kernel].tuning
    for name, sizes in t.size_classes.items():
        desc = t.describe(sizes)
        dims = {d: sizes[d] for d in desc.dim_names}
        args = t.make_inputs(sizes, np.random.default_rng(1))
        got = Computation(desc, cpu, specs.all_specs()[kernel].heuristic(desc, cpu, dims), dims)(dims, **args)
        want = np.asarray(t.reference(args)).reshape(got.shape)
        assert got.tobytes() == want.tobytes(), (kernel, name)


def test_device_exponent_is_the_rational_rule(device):
    """The 128-bit integer exponent against quantization_exponent's rationals where the bound is met exactly
    (powers of two, n a power of two), just missed (one ulp above), at the clamp and for subnormals."""
    m = [1.0, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0), 0.75, 2.0 ** -30, 3.0 * 2.0 ** -60, 5e-324, 2.0 ** -1060,
         1e300, 2.0 ** 1000, 0.25, 0.0, 7.0]
    for n in (1, 2, 3, 1024, 20000, 2**31 - 1):
        k = len(m)
        args = {"absmax": np.repeat(np.asarray(m), 2), "cols": np.concatenate([np.arange(k)] * 2).astype(np.int32),
                "n_rows": n, "h_base": k, "h_at": k}
        desc = ds.stat_scale()
        dims = {"slot": k, "part": 2}
        got = Computation(desc, device, ds.SCALE.heuristic(desc, device, dims), dims)(dims, **args).ravel()
        want = np.ldexp(1.0, [quantization_exponent(x, n) for x in m])
        np.testing.assert_array_equal(got["g"][:k], want)
        np.testing.assert_array_equal(got["g"][k:], want)
        np.testing.assert_array_equal(got["h"][:k], 1.0 / want)


@pytest.mark.parametrize("loss", list(ds.LOSSES))
def test_device_statistics_follow_the_host_after_rules(device, loss):
    """After the default rule and each rule the device's scores and int32 statistics are the host's (the numpy
    learner's, updated there and quantized by QuantizedStatistics), complete heads over sampled labels included."""
    rng = np.random.default_rng(7)
    n, F, L = 301, 6, 5
    X = rng.normal(size=(n, F))
    Y = (rng.random((n, L)) < 0.4).astype(float)
    p = InductionParams(max_rules=10, shrinkage=0.3, l1=0.0, l2=1.0, head_type="complete", feature_sampling=None,
                        instance_sampling=None, label_sampling=0.6, max_conditions=3, min_coverage=1, seed=2,
                        quantized=True)
    edges = bin_edges(X, ("equal-width", 8))
    host = Learner(X, Y, make_loss(loss), p, edges, None)
    dev = Learner(X, Y, make_loss(loss), p, edges, device)
    assert dev.on_device and not host.on_device
    host.default_rule()
    dev.default_rule()
    search = dev.search
    for _ in range(5):
        assert same_rule(host.grow(), dev.grow())
        q = QuantizedStatistics(n, L, L)
        q.refresh(host.G, host.H, np.arange(L), np.arange(L))
        raw = np.empty(search.h_off + L * n, np.int32)
        search.ws.read(raw, search.ws["GHq"])
        np.testing.assert_array_equal(raw[: L * n].reshape(L, n), q.Gq)
        np.testing.assert_array_equal(raw[search.h_off:].reshape(L, n), q.Hq)
        assert search.stats.scores().tobytes() == host.S.tobytes()
    # the host's copies, made when read: the scores from the device, the statistics recomputed from them
    assert dev.S.tobytes() == host.S.tobytes() and dev.G.tobytes() == host.G.tobytes()
    assert dev.H.tobytes() == host.H.tobytes()


def _doc(tmp_path, device, X, Y, **kw):
    est = RuleBoostClassifier(device=device, **kw).fit(X, Y)
    est.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["params"].pop("device")
    return json.dumps(doc, sort_keys=True), est


@pytest.mark.parametrize("kw", [
    dict(head_type="single"),
    dict(head_type="single", loss="squared_error", instance_sampling=0.7, min_coverage=3),
    dict(head_type="complete", loss="squared_error", label_sampling=0.6, instance_sampling=0.8),
    dict(head_type="single", global_pruning="pre-pruning{min_rules=5,num_past=3,num_recent=3}",
         holdout="random:0.25", max_rules=60),
], ids=["single", "squared-sampling", "complete-sampling", "pruning"])
def test_model_files_are_numpys_with_the_update_on_the_device(tmp_path, device, kw):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(257, 9))
    X[rng.random(X.shape) < 0.05] = np.nan
    Y = np.stack([X[:, 0] > 0, X[:, 1] + X[:, 2] > 0.3, X[:, 3] < -0.2, rng.random(257) < 0.3], 1).astype(int)
    kw = {"max_rules": 25, "feature_binning": ("equal-frequency", 16), "random_state": 4, "precision": "quantized",
          **kw}
    want, ref = _doc(tmp_path, "numpy", X, Y, **kw)
    got, est = _doc(tmp_path, device, X, Y, **kw)
    assert len(ref.rules_) > 5 and any(k.startswith("rule_apply_scores") for k in est.kernel_configs_)
    assert got == want


def test_batched_bodies_rebuild_the_rules_mask(device, monkeypatch):
    """With several steps per read-back the device's mask can run past a rule's last condition: the update
    rebuilds it from the kept conditions, and the model stays numpy's."""
    from mdhom.rules import device as rd

    monkeypatch.setattr(rd, "LOOKAHEAD", 4)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 8))
    Y = np.stack([X[:, 0] > 0, X[:, 1] - X[:, 2] > 0.2, rng.random(300) < 0.3], 1).astype(int)
    kw = {"max_rules": 20, "feature_binning": ("equal-width", 16), "random_state": 3, "precision": "quantized",
          "head_type": "single"}
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        want, _ = _doc(Path(d), "numpy", X, Y, **kw)
        got, est = _doc(Path(d), device, X, Y, **kw)
    assert got == want


OCLGRIND = r"""
import warnings
import numpy as np
from mdhom import get_device
from mdhom.rules.induction import InductionParams, Learner, bin_edges
from mdhom.rules.losses import make_loss
from mdhom.rules.quantized import QuantizedStatistics
warnings.simplefilter("ignore")
dev = get_device()
assert dev.checker, dev.key
rng = np.random.default_rng(2)
n, F, L = 37, 3, 3
X = rng.normal(size=(n, F))
Y = (rng.random((n, L)) < 0.5).astype(float)
parallel = {"rule_apply_scores": {"NUM_WG_slot": 2, "NUM_WI_slot": 1, "NUM_WG_row": 3, "NUM_WI_row": 4},
            "rule_stat_scale": {"NUM_WG_slot": 2, "NUM_WI_slot": 1, "NUM_WG_part": 1, "NUM_WI_part": 2},
            "rule_commit_scores": {"NUM_WG_slot": 2, "NUM_WI_slot": 1, "NUM_WG_row": 3, "NUM_WI_row": 4},
            "rule_head_inv": {"NUM_WG_slot": 2, "NUM_WI_slot": 2}}
for loss in ("logistic_labelwise", "squared_error"):
    parallel[f"rule_stat_absmax_{loss}"] = {"NUM_WG_row": 3, "NUM_WI_row": 4, "NUM_WG_slot": 2, "NUM_WI_slot": 1,
                                            "NUM_WI_COMBINE": 2}
    parallel[f"rule_stat_quantize_{loss}"] = {"NUM_WG_slot": 2, "NUM_WI_slot": 1, "NUM_WG_part": 1, "NUM_WI_part": 2,
                                              "NUM_WG_row": 3, "NUM_WI_row": 4}
for loss in ("logistic_labelwise", "squared_error"):
    for configs in (None, parallel):
        p = InductionParams(max_rules=4, shrinkage=0.3, l1=0.0, l2=1.0, head_type="complete", feature_sampling=None,
                            instance_sampling=None, label_sampling=None, max_conditions=2, min_coverage=1, seed=1,
                            quantized=True)
        host = Learner(X, Y, make_loss(loss), p, bin_edges(X, ("equal-width", 4)), None)
        learner = Learner(X, Y, make_loss(loss), p, bin_edges(X, ("equal-width", 4)), dev)
        if configs:
            learner.search.ws.overrides.update(configs)
        host.default_rule(); learner.default_rule()
        for _ in range(2):
            a, b = host.grow(), learner.grow()
            assert a.conditions == b.conditions and a.scores.tobytes() == b.scores.tobytes()
        s = learner.search
        raw = np.empty(s.h_off + L * n, np.int32); s.ws.read(raw, s.ws["GHq"])
        q = QuantizedStatistics(n, L, L); q.refresh(host.G, host.H, np.arange(L), np.arange(L))
        assert np.array_equal(raw[: L * n].reshape(L, n), q.Gq) and np.array_equal(raw[s.h_off:].reshape(L, n), q.Hq)
        print("ok", loss, configs is not None, flush=True)
"""


def test_statistics_update_is_clean_under_oclgrind(oclgrind_device):
    """No out-of-bounds access or data race in the update's kernels, with the heuristic configurations and with
    several work-groups along every dimension (the absmax's partials combined in a second kernel)."""
    run = run_under_oclgrind(OCLGRIND, timeout=900)
    assert run.clean, run.explain()
    assert run.stdout.count("ok ") == 4, run.explain()
