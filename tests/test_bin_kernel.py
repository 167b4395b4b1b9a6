"""Device binning equals the host BinMapper exactly, on every device (ties at edges, NaN, float32 input)."""

from __future__ import annotations

import numpy as np
import pytest

from mdhom.components.binning import DeviceBinner
from mdhom.learn.binning import BinMapper


def _data(rng, n, f, dtype):
    X = rng.standard_normal((n, f))
    X[:, 1] = rng.integers(0, 5, n)           # few distinct values: one bin per value
    X[rng.random((n, f)) < 0.05] = np.nan       # missing values
    return X.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("feature_major", [False, True])
def test_device_bins_equal_host_bins(device, dtype, feature_major):
    rng = np.random.default_rng(0)
    X = _data(rng, 3001, 7, dtype)
    mapper = BinMapper(63).fit(X.astype(np.float64))
    # values exactly on an edge must fall in the bin below it, as np.searchsorted(side="left") puts them
    X[:7, 0] = mapper.edges[0][:7].astype(dtype)
    want = mapper.transform(X.astype(np.float64))
    odd = {"NUM_WG_row": 3, "NUM_WI_row": 5, "NUM_WG_feat": 2, "NUM_WI_feat": 2}
    for cfg in (None, {**odd, "LINEAR_SEARCH": 0}, {**odd, "LINEAR_SEARCH": 1}):
        got = DeviceBinner(mapper, device, dtype, feature_major, cfg).transform(X).get()
        np.testing.assert_array_equal(got.T if feature_major else got, want)


def test_wide_bins_search_without_the_linear_count(device):
    """Past 256 bins (two-byte bins, up to 65534 edges a feature) only the binary search is built: a pass over
    every edge would cost a value thousands of compares."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4000, 3))
    mapper = BinMapper(1000).fit(X)
    binner = DeviceBinner(mapper, device)
    assert "LINEAR_SEARCH" not in binner.desc.switches and max(e.size for e in mapper.edges) > 256
    np.testing.assert_array_equal(binner.transform(X).get(), mapper.transform(X))


def test_rows_of_another_type_are_refused(device):
    """A binner is built for float64 or float32 rows (its kernel's input type): rows of the other type are an error,
    not a silent reinterpretation of their bytes."""
    mapper = BinMapper(15).fit(np.random.default_rng(1).standard_normal((50, 3)))
    with pytest.raises(TypeError, match="float64 rows, got float32"):
        DeviceBinner(mapper, device).transform(np.zeros((5, 3), np.float32))


def test_feature_count_mismatch(device):
    mapper = BinMapper(15).fit(np.random.default_rng(1).standard_normal((50, 3)))
    with pytest.raises(ValueError, match="fitted on 3"):
        DeviceBinner(mapper, device).transform(np.zeros((5, 4)))


def test_binning_clean_under_oclgrind(oclgrind_device):
    from mdhom.testing import run_under_oclgrind

    run = run_under_oclgrind(r"""
import numpy as np
from mdhom.components.binning import DeviceBinner
from mdhom.learn.binning import BinMapper
rng = np.random.default_rng(0)
X = rng.standard_normal((37, 3)); X[rng.random((37, 3)) < 0.1] = np.nan
m = BinMapper(7).fit(X)
for fm in (False, True):
    for linear in (0, 1):
        cfg = {"NUM_WG_row": 2, "NUM_WI_row": 3, "NUM_WG_feat": 2, "NUM_WI_feat": 1, "LINEAR_SEARCH": linear}
        got = DeviceBinner(m, None, np.float64, fm, cfg).transform(X).get()
        assert np.array_equal(got.T if fm else got, m.transform(X))
print("ok")
""", timeout=600)
    assert run.clean and "ok" in run.stdout, run.explain()


def test_the_binner_takes_the_class_of_the_rows_it_bins(cpu, tmp_path, monkeypatch):
    """A fit's binner is configured for its training rows' size class (it had looked up 2^20 rows whatever the fit's
    size, so no fit ran the other classes' tuned entries, and no tune's check judged them)."""
    from mdhom import config_store, configs
    from mdhom.components.binning import bin_features
    from mdhom.components.lanes import bin_ctype

    rng = np.random.default_rng(3)
    X = _data(rng, 500, 3, np.float64)
    mapper = BinMapper(15).fit(X)
    desc = bin_features("double", False, bin_ctype(mapper.n_bins))
    h = configs.description_hash(desc)
    small = {"NUM_WG_row": 2, "NUM_WI_row": 4, "NUM_WG_feat": 1, "NUM_WI_feat": 1}
    large = {"NUM_WG_row": 8, "NUM_WI_row": 16, "NUM_WG_feat": 1, "NUM_WI_feat": 1}
    for cls, rows, cfg in (("rows_1e3", 1000, small), ("rows_1e6", 10**6, large)):
        cfg = {**desc.default_config(cpu, {"row": rows, "feat": 3}), **cfg}
        entry = {"sizes": {"row": rows, "feat": 3}, "config": cfg, "median_s": 1e-3, "default_config": cfg,
                 "default_s": 1e-3, "trials": 1, "failed_trials": 0, "date": "2026-12-01T00:00:00Z",
                 "versions": {"driver": "x", "mdhom": "0.1.0", "optuna": "5", "pyopencl": "x"}}
        config_store.store_result(cpu, desc.name, cls, entry, h, directory=tmp_path)
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path))
    fitted = DeviceBinner(mapper, cpu, rows=X.shape[0])
    assert "rows_1e3" in fitted.config_source and fitted.comp.config["NUM_WI_row"] == 4
    assert "rows_1e6" in DeviceBinner(mapper, cpu).config_source  # no rows given: 2^20
    np.testing.assert_array_equal(fitted.transform(X).get(), mapper.transform(X))


def test_float32_rows_take_the_classes_tuned_for_them(cpu, tmp_path, monkeypatch):
    """float32 rows (what a fit of float32 rows bins) build the float description, another kernel than the double
    one: the tuner tunes it in classes of its own (``f32_*``, marked ``x32``), which the float binner takes and the
    double binner never does; where a file holds only the double's classes, the float binner runs them as what they
    are, another version of the kernel."""
    from mdhom import config_store, configs
    from mdhom.components.binning import BIN_FEATURES, BIN_FEATURES_FM, bin_features
    from mdhom.components.lanes import bin_ctype

    for spec in (BIN_FEATURES, BIN_FEATURES_FM):
        classes = spec.tuning.size_classes
        assert {c for c in classes if classes[c].get("x32")} == {f"f32_{c}" for c in classes if "x32" not in classes[c]}
        for sizes in classes.values():
            desc = spec.tuning.describe(sizes)
            assert desc.inputs[0].ctype == ("float" if sizes.get("x32") else "double")
            x = spec.tuning.make_inputs({**sizes, "row": 50}, np.random.default_rng(0))["x"]
            assert x.dtype == (np.float32 if sizes.get("x32") else np.float64)
    rng = np.random.default_rng(4)
    X = _data(rng, 800, 3, np.float64)
    mapper = BinMapper(15).fit(X)
    stored = {}
    for cls, ctype, wi in (("rows_1e3", "double", 4), ("f32_rows_1e3", "float", 8)):
        desc = bin_features(ctype, False, bin_ctype(mapper.n_bins))
        sizes = {"row": 1000, "feat": 3, **({"x32": 1} if ctype == "float" else {})}
        cfg = {**desc.default_config(cpu, {"row": 1000, "feat": 3}), "NUM_WG_row": 2, "NUM_WI_row": wi,
               "NUM_WG_feat": 1, "NUM_WI_feat": 1}
        stored[cls] = (desc, {"sizes": sizes, "config": cfg, "median_s": 1e-3, "default_config": cfg,
                              "default_s": 1e-3, "trials": 1, "failed_trials": 0, "date": "2026-12-01T00:00:00Z",
                              "versions": {"driver": "x", "mdhom": "0.1.0", "optuna": "5", "pyopencl": "x"}})
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path))
    desc, entry = stored["rows_1e3"]
    config_store.store_result(cpu, desc.name, "rows_1e3", entry, configs.description_hash(desc), directory=tmp_path)
    lone = DeviceBinner(mapper, cpu, np.float32, rows=X.shape[0])
    assert "rows_1e3" in lone.config_source and "another version" in lone.config_source
    config_store.store_results(cpu, [(d.name, c, e, configs.description_hash(d)) for c, (d, e) in stored.items()],
                               directory=tmp_path)  # one tune's two variants
    floats = DeviceBinner(mapper, cpu, np.float32, rows=X.shape[0])
    doubles = DeviceBinner(mapper, cpu, np.float64, rows=X.shape[0])
    assert "f32_rows_1e3" in floats.config_source and "another version" not in floats.config_source
    assert floats.comp.config["NUM_WI_row"] == 8
    assert "f32" not in doubles.config_source and doubles.comp.config["NUM_WI_row"] == 4
    np.testing.assert_array_equal(floats.transform(X.astype(np.float32)).get(), mapper.transform(X.astype(np.float32)))
