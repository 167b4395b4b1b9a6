"""ClassifierChainEnsemble: every device writes the numpy reference's model file, the device prediction is the
numpy walk's bits, each chain's forests see only X and the chain's earlier labels, quality close to scikit-learn's
ClassifierChain(RandomForestClassifier) ensemble with the same orders, errors, model files, Oclgrind."""

from __future__ import annotations

import json
import textwrap
import warnings

import numpy as np
import pytest

import mdhom
from mdhom import ClassifierChainEnsemble
from mdhom.forests import chains as CH
from mdhom.testing import run_under_oclgrind


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        yield


def _data(n: int = 150, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels that depend on X and on each other (label 2 is mostly label 0 or label 1), one never set."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[::13, 4] = np.nan
    y0 = X[:, 0] + 0.3 * rng.normal(size=n) > 0
    y1 = X[:, 1] - X[:, 2] > 0.4
    y2 = (y0 | y1) & (rng.random(n) < 0.9)
    return X, np.stack([y0, y1, y2, np.zeros(n, bool)], axis=1).astype(np.int64)


def _file(est, tmp_path, name: str) -> bytes:
    path = tmp_path / name
    est.save_model(path)
    return path.read_bytes()


CASES = {
    "gini_sqrt": dict(n_chains=3, n_estimators=3),
    "entropy_depth_half_samples": dict(n_chains=2, n_estimators=4, criterion="entropy", max_depth=4, max_samples=0.5,
                                       max_features=2, min_samples_leaf=2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_file_is_the_references(device, case, tmp_path, monkeypatch):
    X, Y = _data()
    kw = dict(CASES[case], random_state=5, max_bin=15)
    ref = ClassifierChainEnsemble(device="numpy", **kw).fit(X, Y)
    dev = ClassifierChainEnsemble(device=device, **kw).fit(X, Y)
    assert dev.device_ == device.key
    assert _file(dev, tmp_path, "d.json") == _file(ref, tmp_path, "r.json")
    want = ref.predict_proba(X)
    monkeypatch.setattr(CH, "DEVICE_PREDICT_MIN", 1)  # the md_hom walk (ecc_walk / ecc_store / ecc_vote)
    assert dev._device_predictor(len(X)) is not None
    assert np.array_equal(dev.predict_proba(X), want)
    dev.set_params(voting="label")
    ref.set_params(voting="label")
    assert np.array_equal(dev.predict_proba(X), ref.predict_proba(X))
    other = ClassifierChainEnsemble(device="numpy", **{**kw, "random_state": 6}).fit(X, Y)
    assert _file(other, tmp_path, "o.json") != _file(ref, tmp_path, "r.json")


def test_float32_rows_grow_the_float64_copys_chains(tmp_path):
    """float32 rows (and the labels beside them) are binned as they are, without a float64 copy of the matrix: the
    model file of the float64 copy of the same values."""
    X, Y = _data(200, seed=3)
    kw = dict(n_chains=2, n_estimators=3, random_state=4, max_bin=31, device="numpy")
    X32 = X.astype(np.float32)
    seen = []
    transform = CH.BinMapper.transform

    def spy(self, XY, *a, **k):
        seen.append(XY.dtype)
        return transform(self, XY, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CH.BinMapper, "transform", spy)
        files = [_file(ClassifierChainEnsemble(**kw).fit(Xi, Y), tmp_path, f"{Xi.dtype}.json")
                 for Xi in (X32, X32.astype(np.float64))]
    assert seen == [np.float32, np.float64] and files[0] == files[1]


def test_float32_rows_predict_as_their_float64_copy(device, monkeypatch):
    """float32 rows to predict are taken as they are (the device walk takes them to float64 a block at a time): the
    float64 copy's votes, on the device and in numpy."""
    monkeypatch.setattr(CH, "DEVICE_PREDICT_MIN", 0)
    X, Y = _data(200, seed=3)
    X32 = X.astype(np.float32)
    X32[::11, 2] = np.nan
    for dev in ("numpy", device):
        est = ClassifierChainEnsemble(n_chains=2, n_estimators=3, random_state=4, max_bin=31, device=dev).fit(X, Y)
        np.testing.assert_array_equal(est.predict_proba(X32), est.predict_proba(X32.astype(np.float64)))


def test_chains_see_only_their_earlier_labels():
    X, Y = _data(200)
    orders = [[3, 2, 1, 0], [0, 1, 2, 3], [2, 0, 3, 1]]
    est = ClassifierChainEnsemble(n_chains=3, orders=orders, n_estimators=4, max_features=None, random_state=1,
                                  device="numpy").fit(X, Y)
    m = est._model
    assert np.array_equal(est.orders_, orders)
    used = set()
    for p in range(4):
        for c in range(3):
            t0 = m.first_tree(p) + c * 4
            sl = slice(int(m.forest.offsets[t0]), int(m.forest.offsets[t0 + 4]))
            labels = {int(f) - 6 for f in m.forest.feature[sl] if f >= 6}
            assert labels <= set(orders[c][:p]), (p, c, labels)
            used |= labels
    assert used, "no forest split on an earlier label: the chains carry nothing"
    # the never-set label is predicted 0 with certainty; label 2 follows labels 0 and 1
    proba = est.predict_proba(X)
    assert np.all(proba[:, 3] == 0) and proba.shape == (200, 4)
    assert np.mean(est.predict(X) == Y) > 0.9
    one = ClassifierChainEnsemble(n_chains=2, orders=[1, 0, 3, 2], n_estimators=2, device="numpy").fit(X, Y)
    assert np.array_equal(one.orders_, [[1, 0, 3, 2]] * 2)


def test_voting_and_threshold():
    X, Y = _data()
    est = ClassifierChainEnsemble(n_chains=5, n_estimators=3, random_state=0, device="numpy").fit(X, Y)
    state = est._model.chain_probabilities(X)
    assert np.allclose(est.predict_proba(X), state.mean(axis=0))
    est.set_params(voting="label")
    votes = est.predict_proba(X)
    assert np.allclose(votes, (state > 0.5).mean(axis=0))
    for t in (0.2, 0.8):
        assert np.array_equal(est.set_params(threshold=t).predict(X), (votes >= t).astype(int))


def test_quality_close_to_scikit_learn_on_emotions():
    """emotions' predefined split, 8 chains x 16 trees: mdhom against scikit-learn's chains of forests with the
    same orders (the scripts run 64 x 32; a smoke bound here)."""
    from pathlib import Path

    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import f1_score, hamming_loss
    from sklearn.multioutput import ClassifierChain

    from mdhom.datasets import load_arff

    root = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not (root / "emotions.xml").exists():
        pytest.skip(f"emotions not found under {root}")
    X, Y, _, _ = load_arff(root / "emotions-predefined_training.arff", root / "emotions.xml")
    Xt, Yt, _, _ = load_arff(root / "emotions-predefined_test.arff", root / "emotions.xml")
    ours = ClassifierChainEnsemble(n_chains=8, n_estimators=16, random_state=0, device="cpu").fit(X, Y)
    pred = ours.predict(Xt)
    theirs = np.mean([ClassifierChain(RandomForestClassifier(16, random_state=c), order=ours.orders_[c])
                      .fit(X, Y).predict_proba(Xt) for c in range(8)], axis=0) >= 0.5
    assert abs(hamming_loss(Yt, pred) - hamming_loss(Yt, theirs)) < 0.02
    assert abs(f1_score(Yt, pred, average="micro") - f1_score(Yt, theirs, average="micro")) < 0.04
    assert f1_score(Yt, pred, average="micro") > 0.6


def test_errors_are_clear(tmp_path):
    X, Y = _data(60)
    est = ClassifierChainEnsemble(n_chains=2, n_estimators=2, device="numpy")
    with pytest.raises(ValueError, match="not fitted"):
        est.predict(X)
    bad = [({}, Y[:, 0], "2-D"), ({}, Y * 2, "only 0 and 1"), ({}, Y[:50], "rows"),
           ({"orders": [0, 1, 2]}, Y, "3 labels"), ({"orders": [0, 0, 1, 2]}, Y, "permutation"),
           ({"orders": [[0, 1, 2, 3]] * 3}, Y, "3 chains"), ({"criterion": "squared_error"}, Y, "criterion"),
           ({"bootstrap": False, "max_samples": 0.5}, Y, "max_samples"), ({"n_chains": 0}, Y, "n_chains"),
           ({"threshold": 1.5}, Y, "threshold"), ({"voting": "soft"}, Y, "voting"),
           ({"max_features": 9}, Y, "exceeds")]
    for params, y, msg in bad:
        with pytest.raises(ValueError, match=msg):
            ClassifierChainEnsemble(**{"n_chains": 2, "n_estimators": 2, "device": "numpy", **params}).fit(X, y)
    est.fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :5])
    path = tmp_path / "m.json"
    est.save_model(path)
    doc = json.loads(path.read_text())
    doc["chains"]["orders"][0] = [0, 0, 1, 2]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="damaged"):
        mdhom.load_model(tmp_path / "bad.json")
    doc["version"] = 99
    (tmp_path / "new.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="newer"):
        ClassifierChainEnsemble().load_model(tmp_path / "new.json")


def test_model_files_and_conventions(tmp_path):
    import pandas as pd
    from sklearn.base import clone

    X, Y = _data(80)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])
    est = ClassifierChainEnsemble(n_chains=2, n_estimators=3, random_state=0, voting="label", threshold=0.4,
                                  device="numpy").fit(frame, Y)
    assert clone(est).get_params() == est.get_params() and "n_chains=2" in repr(est)
    est.save_model(tmp_path / "m.json")
    back = mdhom.load_model(tmp_path / "m.json")
    assert isinstance(back, ClassifierChainEnsemble)
    assert back.get_params()["voting"] == "label" and back.threshold == 0.4
    assert list(back.feature_names_in_) == list(frame.columns)
    assert np.array_equal(back.predict(frame), est.predict(frame))
    back.save_model(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "m.json").read_bytes()


def test_chain_kernels_clean_under_oclgrind(oclgrind_device):
    code = textwrap.dedent("""
        import warnings
        import numpy as np
        from mdhom import ClassifierChainEnsemble
        from mdhom.forests import chains as CH
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        rng = np.random.default_rng(2)
        X = rng.normal(size=(37, 3))
        X[::7, 1] = np.nan
        Y = np.stack([X[:, 0] > 0, X[:, 1] > 0.3, rng.random(37) < 0.5], axis=1).astype(int)
        kw = dict(n_chains=2, n_estimators=2, max_depth=3, max_bin=7, random_state=3)
        a = ClassifierChainEnsemble(device="numpy", **kw).fit(X, Y)
        b = ClassifierChainEnsemble(device="oclgrind", **kw).fit(X, Y)
        fa, fb = a._model.forest, b._model.forest
        assert all(np.array_equal(getattr(fa, k), getattr(fb, k)) for k in ("feature", "threshold", "left", "value"))
        CH.DEVICE_PREDICT_MIN = 1
        assert np.array_equal(b.predict_proba(X), a.predict_proba(X))
        print("ok")
    """)
    run = run_under_oclgrind(code, timeout=900)
    assert run.clean, run.explain()
    assert "ok" in run.stdout


def test_walk_kernel_matches_its_tuning_reference(device):
    """The tuner's inputs and reference of ecc_walk (random trees over X and label features) against the kernel
    at an awkward size, with the heuristic configuration and the exact pins."""
    import pyopencl.array as cl_array

    from mdhom.forests import chain_kernels as CK
    from mdhom.mdh import build_within_limits

    sizes = {"row": 257, "chain": 3, "tree": 5, "depth": 4, "n_x": 7, "labels": 4}
    a = CK._walk_inputs(sizes, np.random.default_rng(3))
    dims = {k: sizes[k] for k in ("row", "chain", "tree")}
    cfg = CK.walk_heuristic(CK.walk(), device, dims)
    cfg.update(CK.WALK.exact_pins)
    comp = build_within_limits(CK.walk(), device, cfg)
    q = device.queue
    bufs = {k: cl_array.to_device(q, v) for k, v in a.items() if isinstance(v, np.ndarray) and v.ndim == 1}
    out = cl_array.empty(q, 257 * 3, np.float64)
    comp.bind(out, q, **bufs)(dims, first_tree=a["first_tree"], n_x=a["n_x"], n_labels=a["n_labels"])
    assert np.array_equal(out.get().reshape(257, 3), CK._walk_ref(a))
