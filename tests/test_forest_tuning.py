"""The forests' tunable kernels: what the tuner runs agrees with its references on every device, and a stored
configuration is used by a fit and a prediction and never changes a model."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mdhom import config_store, configs
from mdhom.mdh import Computation

FOREST_TUNABLES = ("forest_candidates", "forest_slot_totals", "forest_sampled_split", "forest_cand_split",
                   "forest_route", "forest_left_scan", "forest_partition", "forest_leaves", "forest_leaf_sums",
                   "forest_node_totals", "forest_feature_split", "forest_node_split")
SMALL = 1500  # rows of the shrunk smallest class (the classes are 1M-row fits; the kernels' logic is the same)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        yield


def _small(sizes: dict[str, int]) -> dict[str, int]:
    out = dict(sizes)
    for k in ("rows", "row", "pos"):
        if k in out:
            out[k] = min(out[k], SMALL)
    return out


def test_forest_kernels_are_registered():
    from mdhom import tunable

    known = tunable.registered()
    assert set(FOREST_TUNABLES) <= set(known)
    assert known["forest_leaf_sums"].fixed == {"NUM_WI_tree": 1, "NUM_WG_tree": 1}  # tuned under its exact pins
    assert known["ecc_walk"].fixed == {"NUM_WI_tree": 1, "NUM_WG_tree": 1}


@pytest.mark.parametrize("name", FOREST_TUNABLES)
def test_forest_tunables_match_their_references(device, name):
    """What the tuner runs (registered inputs, reference, tolerance) agrees at the smallest size class, under
    the default configuration and the learner's heuristic (each with the pins the search holds)."""
    from mdhom import tunable

    kern = tunable.registered()[name]
    sizes = _small(kern.size_classes[next(iter(kern.classes(quick=True)))])
    inputs = kern.make_inputs(sizes, np.random.default_rng(19))
    dims = kern.dim_sizes(sizes)
    want = kern.reference(inputs)
    desc = kern.describe(sizes)
    for cfg in ({**desc.default_config(device, dims), **kern.fixed}, kern.baseline_config(device, sizes)):
        got = Computation(desc, device, cfg, dims)(dims, **inputs)
        assert kern.compare(got, want) is None, (name, cfg)


@pytest.mark.parametrize("cls", ["dense_roots_64", "dense_level_1024"])
def test_the_gpu_heuristic_of_the_feature_split_spreads_the_features_and_matches_the_reference(device, cls):
    """A GPU's heuristic of ``forest_feature_split`` gives each (slot, feature) scan a work-item of its own (its
    groups cover every pair at once; a work-item had scanned a slot's every feature), built here as a GPU builds it
    (132 compute units) and run on every device against the reference, at both of the tuner's dense classes."""
    import dataclasses

    from mdhom import tunable

    kern = tunable.registered()["forest_feature_split"]
    sizes = _small(kern.size_classes[cls])
    dims = kern.dim_sizes(sizes)
    gpu = dataclasses.replace(device, type="gpu", compute_units=132)
    cfg = kern.baseline_config(gpu, sizes)
    wi, wg = cfg["NUM_WI_slot"] * cfg["NUM_WI_feat"], cfg["NUM_WG_slot"] * cfg["NUM_WG_feat"]
    assert wi == 64 and cfg["NUM_WI_feat"] > 1 and wi * wg >= dims["slot"] * dims["feat"], cfg
    inputs = kern.make_inputs(sizes, np.random.default_rng(23))
    got = Computation(kern.describe(sizes), device, cfg, dims)(dims, **inputs)
    assert kern.compare(got, kern.reference(inputs)) is None, cfg


def _odd_config(name: str, device, sizes: dict[str, int]) -> dict[str, int]:  # noqa: ANN001
    """A valid configuration unlike the heuristic's: odd work-group counts, two work-items on the first dimension."""
    from mdhom import tunable

    kern = tunable.registered()[name]
    desc = kern.describe(sizes)
    cfg = dict(kern.baseline_config(device, kern.dim_sizes(sizes)))
    first = desc.dim_names[0]
    cfg[f"NUM_WI_{first}"] = 2
    cfg[f"NUM_WG_{first}"] = 3
    cfg.update(kern.fixed)
    desc.check_config(cfg, device)
    return cfg


def _store(device, names, directory):  # noqa: ANN001
    from mdhom import tunable

    entries = []
    for name in names:
        kern = tunable.registered()[name]
        for cls, sizes in kern.size_classes.items():
            cfg = _odd_config(name, device, sizes)
            entries.append((name, cls, {"sizes": kern.dim_sizes(sizes), "config": cfg, "median_s": 1.0,
                                        "default_config": cfg, "default_s": 1.0, "trials": 1, "failed_trials": 0,
                                        "date": "2026-11-24T00:00:00Z", "versions": {}},
                            configs.description_hash(kern.describe(sizes))))
    return config_store.store_results(device, entries, directory), entries


def _bytes(est, path) -> bytes:  # noqa: ANN001
    est.save_model(path)
    return path.read_bytes()


def test_stored_forest_configs_are_used_and_grow_the_same_model(device, tmp_path, monkeypatch):
    from mdhom import RandomForestClassifier

    rng = np.random.default_rng(4)
    X = rng.normal(size=(700, 12))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(scale=0.5, size=700) > 0).astype(int)
    kw = dict(n_estimators=6, max_depth=6, random_state=2, device=device)  # sqrt(12) = 3: the sampled level
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "none"))
    monkeypatch.setattr(configs, "package_dir", lambda: tmp_path / "none")  # not the shipped files either
    configs.reset_warnings()
    plain = RandomForestClassifier(**kw).fit(X, y)
    fit_kernels = [k for k in FOREST_TUNABLES if k in plain.kernel_configs_]
    assert {"forest_candidates", "forest_sampled_split", "forest_route", "forest_partition"} <= set(fit_kernels)
    assert all(not plain.kernel_configs_[k]["source"].startswith("tuned") for k in fit_kernels)
    _store(device, fit_kernels, tmp_path / "tuned")
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "tuned"))
    configs.reset_warnings()
    tuned = RandomForestClassifier(**kw).fit(X, y)
    for k in fit_kernels:
        ran = tuned.kernel_configs_[k]
        assert ran["source"].startswith("tuned"), (k, ran)
        assert ran["config"] != plain.kernel_configs_[k]["config"], k
    assert _bytes(plain, tmp_path / "a.json") == _bytes(tuned, tmp_path / "b.json")


def test_stored_dense_level_configs_are_used_and_grow_the_same_model(device, tmp_path, monkeypatch):
    """The dense level (every feature searched: the regressor's default) runs its stored configurations too."""
    from mdhom import RandomForestClassifier

    rng = np.random.default_rng(6)
    X = rng.normal(size=(600, 6))
    y = (X[:, 0] - X[:, 1] + rng.normal(scale=0.5, size=600) > 0).astype(int)
    kw = dict(n_estimators=5, max_depth=5, max_features=None, random_state=3, device=device)
    dense = ("forest_node_totals", "forest_feature_split", "forest_node_split")
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "none"))
    monkeypatch.setattr(configs, "package_dir", lambda: tmp_path / "none")
    configs.reset_warnings()
    plain = RandomForestClassifier(**kw).fit(X, y)
    assert set(dense) <= set(plain.kernel_configs_)
    _store(device, dense, tmp_path / "tuned")
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "tuned"))
    configs.reset_warnings()
    tuned = RandomForestClassifier(**kw).fit(X, y)
    for k in dense:
        assert tuned.kernel_configs_[k]["source"].startswith("tuned"), (k, tuned.kernel_configs_[k])
        assert tuned.kernel_configs_[k]["config"] != plain.kernel_configs_[k]["config"], k
    assert _bytes(plain, tmp_path / "a.json") == _bytes(tuned, tmp_path / "b.json")


def test_stored_walk_configs_are_used_and_predict_the_same_bits(device, tmp_path, monkeypatch):
    from mdhom import RandomForestClassifier
    from mdhom.forests.walker import ForestWalker

    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 6))
    y = (X[:, 0] > 0).astype(int)
    est = RandomForestClassifier(n_estimators=7, max_depth=5, random_state=1, device="numpy").fit(X, y)
    X_new = rng.normal(size=(333, 6))
    X_new[::7, 2] = np.nan
    want = est._forest.tree_sums(X_new)
    _store(device, ["forest_leaves", "forest_leaf_sums"], tmp_path / "tuned")
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "tuned"))
    configs.reset_warnings()
    walker = ForestWalker(device, est._forest)
    ran = walker.kernel_configs()
    assert all(ran[k]["source"].startswith("tuned") for k in ("forest_leaves", "forest_leaf_sums")), ran
    assert ran["forest_leaf_sums"]["config"]["NUM_WI_tree"] == 1  # the exact pins hold
    assert walker.tree_sums(X_new).tobytes() == want.tobytes()
