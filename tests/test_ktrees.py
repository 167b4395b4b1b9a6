"""multi_strategy='one_output_per_tree': the round's K trees are the depth-wise grower's per-output trees bit for
bit, every device writes the numpy reference's model file, files round-trip (format 2, format 1 still read),
unsupported combinations are refused, and the benchmark runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from device_marks import intel_optimiser_bits

from mdhom import TreeBoostClassifier, load_model
from mdhom.components import histogram_blocks
from mdhom.learn.binning import BinMapper
from mdhom.learn.losses import make_loss
from mdhom.trees.backend import SplitParams
from mdhom.trees.grower import GrowParams, grow_tree
from mdhom.trees.ktrees import NumpyKTrees, grow_round
from mdhom.trees.model import VERSION
from mdhom.trees.numpy_backend import NumpyKernels

KTREES = "one_output_per_tree"


def _data(n=500, f=6, k=4, seed=0, nan=0.03):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[:, 1] = np.round(X[:, 1] * 2)
    s = X[:, 0] + 0.5 * X[:, 1] - X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=n)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1]))
    if nan:
        X[rng.random((n, f)) < nan] = np.nan
    return X, y


def _doc(est, tmp_path):
    est.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["params"].pop("device")
    return doc


@pytest.mark.parametrize("precision,block_rows", [("double", 0), ("quantized", 0), ("double", 32)],
                         ids=["double", "quantized", "double-blocks"])
@pytest.mark.parametrize("shape", [dict(max_depth=4, max_leaves=0), dict(max_depth=0, max_leaves=6),
                                   dict(max_depth=3, max_leaves=5)], ids=["depth", "leaves", "both"])
def test_round_grows_each_outputs_tree(monkeypatch, precision, block_rows, shape):
    """Each of the round's trees is grow_tree's on its output's (g, h): structure, thresholds, gains, covers and leaf
    values, bit for bit (subsampled rows, a column mask, missing values, L1); also where float64 nodes span many row
    blocks (blocks of 32 rows here: both learners sum them block by block)."""
    if block_rows:
        monkeypatch.setattr(histogram_blocks, "BLOCK_ROWS", block_rows)
    X, y = _data(n=400, k=5, seed=3)
    mapper = BinMapper(15).fit(X)
    bins = mapper.transform(X)
    loss = make_loss("multi:softmax", 5)
    yk, w = y.astype(np.float64)[:, None], np.ones(len(y))
    params = GrowParams(SplitParams(1.0, 0.1, 0.0, 0.5), 0.3, shape["max_depth"], shape["max_leaves"], False)
    kt = NumpyKTrees(precision)
    kt.load(bins, mapper.n_bins, 5)
    kt.set_objective(loss, yk, w, loss.base_score(yk, w))
    rng = np.random.default_rng(1)
    keep, mask = rng.random(len(y)) < 0.8, np.array([1, 1, 0, 1, 1, 1], bool)
    g, h = loss.gradients(yk, kt.raw, w)
    g[~keep] = h[~keep] = 0.0
    kt.compute_gradients(keep)
    raw = kt.raw.copy()
    trees = grow_round(kt, mask, params, mapper.thresholds)
    for k, tree in enumerate(trees):
        ref = NumpyKernels(precision)
        ref.load(bins, mapper.n_bins, 1)
        ref.set_gradients(g[:, [k]], h[:, [k]])
        want = grow_tree(ref, None, mask, params, mapper.thresholds)
        assert tree.output == k and want.n_nodes >= 5
        for field in ("left", "right", "feature", "threshold", "default_left", "gain", "cover", "bin"):
            assert np.array_equal(getattr(tree, field), getattr(want, field)), (k, field)
        assert tree.value[:, k].tobytes() == want.value[:, 0].tobytes()
        assert not np.delete(tree.value, k, axis=1).any()
        raw[:, k] += want.value[ref.row_nodes(), 0]
    assert kt.raw.tobytes() == raw.tobytes()  # the scores moved by each output's own tree


def test_quantized_rejects_non_finite_gradients(device):
    """Non-finite gradients (here from a NaN score) are refused before a split of the round is used: the device makes
    the round's scale itself, and the host checks the maxima after the round's first level search."""
    from mdhom.trees.ktrees_opencl import OpenCLKTrees

    X, y = _data(n=200, k=3, seed=5, nan=0)
    mapper = BinMapper(15).fit(X)
    loss = make_loss("multi:softmax", 3)
    yk, w = y.astype(np.float64)[:, None], np.ones(len(y))
    kt = OpenCLKTrees(device, "quantized")
    kt.load(mapper.transform(X), mapper.n_bins, 3)
    kt.set_objective(loss, yk, w, loss.base_score(yk, w))
    params = GrowParams(SplitParams(1.0, 0.1, 0.0, 0.5), 0.3, 3, 0, False)
    assert len(kt.grow_round(None, np.ones(X.shape[1], bool), params, mapper.thresholds)) == 3
    scores = kt.scores()
    scores[7, 1] = np.nan
    kt.ws.put("nan_scores", kt.ws[f"scores_{kt.cur}"], scores, np.float64)
    with pytest.raises(ValueError, match="not finite"):
        kt.grow_round(None, np.ones(X.shape[1], bool), params, mapper.thresholds)


def test_batches_grow_the_same_trees():
    """Trees grown one after another (batches of one, of two) are the ones grown together."""
    X, y = _data(n=300, k=4, seed=5)
    docs = []
    for batch in (None, 1, 3):
        est = TreeBoostClassifier(n_estimators=3, max_depth=3, multi_strategy=KTREES, device="numpy")
        est._ktree_batch = batch
        docs.append(json.dumps([t.to_json() for t in est.fit(X, y)._ensemble.trees]))
    assert docs[0] == docs[1] == docs[2]


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_model_files_are_identical_everywhere(request, monkeypatch, tmp_path, device, precision):
    """The numpy reference and the device write the same model file byte for byte (multiclass with an eval set,
    row and column sampling and missing values; multi-label), together and one tree at a time; predict_proba
    is the same bits, the device's own walk included. Float64 nodes span many row blocks (blocks of 32 rows here:
    laid out as slots of their own on the device)."""
    intel_optimiser_bits(request, device)
    from mdhom.trees import estimators

    monkeypatch.setattr(histogram_blocks, "BLOCK_ROWS", 32)

    X, y = _data(n=500, k=4, seed=11)
    Y = np.column_stack([y == 0, X[:, 0] > 0, np.nan_to_num(X[:, 2]) < 0.3]).astype(int)
    kw = dict(n_estimators=4, max_depth=4, subsample=0.8, colsample_bytree=0.8, random_state=3,
              multi_strategy=KTREES, precision=precision)
    for target in (y, Y):
        docs, probas = [], []
        for dev, batch in (("numpy", None), (device, None), (device, 1)):
            est = TreeBoostClassifier(device=dev, **kw)
            est._ktree_batch = batch
            est.fit(X, target, eval_set=[(X[:120], target[:120])])
            docs.append(_doc(est, tmp_path))
            probas.append(est.predict_proba(X).tobytes())
        assert docs[0] == docs[1] == docs[2]
        assert probas[0] == probas[1] == probas[2]
        assert docs[0]["trees_per_round"] == docs[0]["n_outputs"] and len(docs[0]["trees"]) == 4 * docs[0]["n_outputs"]
    walked = load_model(tmp_path / "m.json")  # fitted on the device: its walk serves large predictions
    original = estimators.DEVICE_PREDICT_MIN
    estimators.DEVICE_PREDICT_MIN = 0  # the device's tree walk for any size
    try:
        on_device = walked.predict_proba(X)
        assert walked._forest[2] is not None  # the device predictor served it
    finally:
        estimators.DEVICE_PREDICT_MIN = original
    assert on_device.tobytes() == load_model(tmp_path / "m.json").predict_proba(X).tobytes()


def test_quantized_files_identical_under_parallel_configurations(tmp_path, device):
    """Quantized histograms from rows over lanes and work-groups, private or local-atomic partials: the same file."""
    from mdhom.trees import ktrees
    from mdhom.trees.ktrees_opencl import OpenCLKTrees

    X, y = _data(n=600, k=3, seed=2)
    variants = [None]
    for local, wi, wg in ((0, 4, 3), (1, 16, 3)):
        if local and not device.has_int64_atomics:
            continue
        variants.append({"boost_histogram": {"NUM_WI_slot": 1, "NUM_WG_slot": 2, "NUM_WI_feat": 1, "NUM_WG_feat": 3,
                                             "NUM_WI_pos": wi, "NUM_WG_pos": wg, "NUM_WI_COMBINE": 16,
                                             "PARTIALS_LOCAL": local}})
    texts = []
    original = ktrees.make_ktree_kernels
    try:
        for cfg in ["numpy", *variants]:
            if cfg != "numpy":
                ktrees.make_ktree_kernels = lambda d, p, *a, c=cfg: OpenCLKTrees(d, p, configs=c)
            est = TreeBoostClassifier(n_estimators=3, max_depth=5, multi_strategy=KTREES, precision="quantized",
                                      device="numpy" if cfg == "numpy" else device).fit(X, y)
            texts.append(json.dumps(_doc(est, tmp_path), sort_keys=True))
    finally:
        ktrees.make_ktree_kernels = original
    assert len(texts) >= 2 and all(t == texts[0] for t in texts[1:])


def test_model_file_round_trip_and_versions(tmp_path):
    X, y = _data(n=300, k=3, seed=4)
    est = TreeBoostClassifier(n_estimators=3, max_depth=3, multi_strategy=KTREES, device="numpy").fit(X, y)
    path = tmp_path / "k.json"
    est.save_model(path)
    doc = json.loads(path.read_text())
    assert doc["version"] == VERSION == 2 and doc["trees_per_round"] == 3
    assert [t["output"] for t in doc["trees"]] == [0, 1, 2] * 3
    assert all(len(v) == 1 for t in doc["trees"] for v in t["value"])  # one value per node: its output's
    again = load_model(path)
    assert again.multi_strategy == KTREES and again.predict_proba(X).tobytes() == est.predict_proba(X).tobytes()
    # a version 1 file (a multi-output model written before one tree per output existed) reads as before
    old = TreeBoostClassifier(n_estimators=2, max_depth=3, device="numpy").fit(X, y)
    old.save_model(path)
    doc1 = json.loads(path.read_text())
    doc1["version"] = 1
    del doc1["params"]["multi_strategy"]
    path.write_text(json.dumps(doc1))
    back = load_model(path)
    assert back.multi_strategy == "multi_output_tree"
    assert back.predict_proba(X).tobytes() == old.predict_proba(X).tobytes()


@pytest.mark.parametrize("damage,match", [
    (lambda d: d["trees"][1].update(output=7), "output"),
    (lambda d: d["trees"][1].update(output=2), "in order"),
    (lambda d: d.update(trees_per_round=2), "trees_per_round"),
    (lambda d: d.update(trees=d["trees"][:-1]), "trees_per_round"),
    (lambda d: d.update(best_iteration=3), "rounds"),
])
def test_damaged_one_tree_per_output_files_are_refused(tmp_path, damage, match):
    X, y = _data(n=200, k=3, seed=6)
    TreeBoostClassifier(n_estimators=3, max_depth=2, multi_strategy=KTREES, device="numpy").fit(X, y).save_model(
        tmp_path / "k.json")
    doc = json.loads((tmp_path / "k.json").read_text())
    damage(doc)
    (tmp_path / "k.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=match):
        load_model(tmp_path / "k.json")


def test_unsupported_combinations_are_refused():
    X, y = _data(n=120, k=3)
    with pytest.raises(ValueError, match="depth-wise only"):
        TreeBoostClassifier(grow_policy="lossguide", multi_strategy=KTREES, device="numpy").fit(X, y)
    with pytest.raises(ValueError, match="categorical"):
        TreeBoostClassifier(categorical_feature=[1], multi_strategy=KTREES, device="numpy").fit(np.abs(X).round(),
                                                                                                 y)
    with pytest.raises(ValueError, match="precision"):
        TreeBoostClassifier(precision="single", multi_strategy=KTREES, device="numpy").fit(X, y)
    with pytest.raises(ValueError, match="multi_strategy"):
        TreeBoostClassifier(multi_strategy="one_tree", device="numpy").fit(X, y)
    # one output (binary): the same trees either way
    yb = (y > 0).astype(int)
    a = TreeBoostClassifier(n_estimators=3, grow_policy="lossguide", multi_strategy=KTREES, device="numpy").fit(X, yb)
    b = TreeBoostClassifier(n_estimators=3, grow_policy="lossguide", device="numpy").fit(X, yb)
    assert a.predict_proba(X).tobytes() == b.predict_proba(X).tobytes()


def test_early_stopping_keeps_whole_rounds():
    X, y = _data(n=900, k=3, seed=8)
    Xv, yv = _data(n=300, k=3, seed=9)
    est = TreeBoostClassifier(n_estimators=200, learning_rate=0.8, max_depth=5, early_stopping_rounds=3,
                              multi_strategy=KTREES, device="numpy").fit(X, y, eval_set=[(Xv, yv)])
    curve = est.evals_result_["validation_0"]["mlogloss"]
    assert len(curve) == est.best_iteration_ + 4 < 200 and curve[est.best_iteration_] == min(curve)
    assert len(est._ensemble.trees) == 3 * (est.best_iteration_ + 1)
    assert [t.output for t in est._ensemble.trees[-3:]] == [0, 1, 2]


def test_quality_close_to_multi_output_trees():
    """Both strategies learn the classes (held-out accuracy within a few points of each other)."""
    X, y = _data(n=1500, k=4, seed=12, nan=0.0)
    Xt, yt = _data(n=600, k=4, seed=13, nan=0.0)
    kw = dict(n_estimators=30, max_depth=4, learning_rate=0.3, device="numpy")
    a = TreeBoostClassifier(multi_strategy=KTREES, **kw).fit(X, y).score(Xt, yt)
    b = TreeBoostClassifier(**kw).fit(X, y).score(Xt, yt)
    assert a > 0.6 and abs(a - b) < 0.05


def test_bench_quick_runs_and_checks_the_models(tmp_path, capsys):
    from mdhom.bench.ktrees import KTreesConfig, format_table, run_ktrees
    from mdhom.cli import main

    cfg = KTreesConfig.quick_config(device="numpy", systems=("together", "one-by-one", "multi-output"))
    report = run_ktrees(cfg, log=lambda _: None)
    by = {r["system"]: r for r in report["results"]}
    assert all(r["status"] == "ok" for r in report["results"])
    assert by["one-by-one"]["same_model"] and by["together"]["ratio_to_together"] == 1.0
    assert by["together"]["trees"] == cfg.rounds * cfg.classes and by["multi-output"]["trees"] == cfg.rounds
    assert "same model as together" in format_table(report)
    out = tmp_path / "k.json"
    assert main(["bench", "ktrees", "--quick", "--device", "numpy", "--systems", "together,one-by-one",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["benchmark"] == "ktrees"
    assert main(["bench", "ktrees", "--quick", "--classes", "1"]) == 2
    assert "--classes must be at least 2" in capsys.readouterr().err


def test_sparse_input_is_missing_where_not_stored(tmp_path):
    """A CSR matrix's absent entries are missing values (XGBoost's meaning), as NaN in a dense matrix."""
    from scipy import sparse

    X, y = _data(n=300, k=3, seed=14, nan=0.0)
    X[np.random.default_rng(0).random(X.shape) < 0.3] = 0.0
    dense = np.where(X == 0.0, np.nan, X)
    kw = dict(n_estimators=3, max_depth=3, multi_strategy=KTREES, device="numpy")
    a = _doc(TreeBoostClassifier(**kw).fit(sparse.csr_matrix(X), y), tmp_path)
    b = _doc(TreeBoostClassifier(**kw).fit(dense, y), tmp_path)
    assert a["trees"] == b["trees"]


def test_default_batch_follows_the_device(device):
    """GPUs grow a round's trees at once; CPUs as many as their cache holds a level's row arrays of."""
    from mdhom.trees.ktrees_opencl import default_batch

    assert default_batch(device, 100, 10, False) == 10
    assert default_batch(device, 10**9, 10, True) == (10 if device.type == "gpu" else 1)


def test_quality_script_runs():
    from mdhom.bench.ktrees_quality import compare

    rows = compare(rounds=2, max_depth=2, folds=2, device="numpy", log=lambda _: None)
    names = [r["system"] for r in rows]
    assert names[:2] == ["mdhom one_output_per_tree", "mdhom multi_output_tree"]
    assert all(0.5 < r["accuracy"] <= 1.0 for r in rows)
