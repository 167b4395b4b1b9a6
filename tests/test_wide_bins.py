"""More than 255 bins per feature: 16-bit bins where the data needs more than 256 bins (uint8 otherwise, so the
byte-per-cell path is unchanged), the same model file as the numpy reference on every device in exact precision,
kernels that fit local memory however many bins, and the limit refused clearly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mdhom import TreeBoostRegressor
from mdhom.learn.binning import BinMapper, bin_dtype


def _data(n=1500, f=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f))
    X[rng.random(X.shape) < 0.04] = np.nan
    y = 2 * np.nan_to_num(X[:, 0]) + np.sin(3 * np.nan_to_num(X[:, 1])) + 0.1 * rng.normal(size=n)
    return X, y


def _doc(est, path):
    est.save_model(path)
    doc = json.loads(path.read_text())
    doc["params"].pop("device")
    return doc


def test_bin_storage_follows_the_bins_the_data_needs():
    X, _ = _data()
    assert bin_dtype(256) == np.uint8 and bin_dtype(257) == np.uint16 and bin_dtype(65536) == np.uint16
    m = BinMapper(1000).fit(X)
    bins = m.transform(X)
    assert m.n_bins == 1001 and bins.dtype == np.uint16  # 999 real bins, the free one, NaN's
    assert (bins[np.isnan(X)] == 1000).all() and bins[~np.isnan(X)].max() == 998
    few = np.round(X, 1)  # ~70 distinct values: a byte per cell even with max_bin=1000
    assert BinMapper(1000).fit(few).transform(few).dtype == np.uint8
    m = BinMapper(256).fit(X[:, :1][~np.isnan(X[:, 0])])
    assert m.n_bins == 257 and m.transform(X[:, :1]).dtype == np.uint16


@pytest.mark.parametrize("max_bin", [65536, 1])
def test_max_bin_beyond_the_limit_is_refused(max_bin):
    X, y = _data(n=50)
    with pytest.raises(ValueError, match="max_bin"):
        TreeBoostRegressor(max_bin=max_bin, device="numpy").fit(X, y)
    with pytest.raises(ValueError, match=r"max_bin must lie in \[2, 65535\]"):
        BinMapper(max_bin)
    BinMapper(65535)


@pytest.mark.parametrize("max_bin, precision", [(300, "double"), (1000, "double"), (256, "double"),
                                                (1000, "quantized")])
def test_wide_bins_give_the_reference_model(tmp_path, device, max_bin, precision):
    """A 16-bit fit on a device writes the numpy reference's model file byte for byte (eval set included)."""
    X, y = _data()
    kw = dict(n_estimators=4, max_depth=4, max_bin=max_bin, precision=precision)
    a = TreeBoostRegressor(device=device, **kw).fit(X, y, eval_set=[(X[:200], y[:200])])
    b = TreeBoostRegressor(device="numpy", **kw).fit(X, y, eval_set=[(X[:200], y[:200])])
    assert _doc(a, tmp_path / "a.json") == _doc(b, tmp_path / "b.json")
    assert a.evals_result_ == b.evals_result_
    assert BinMapper(max_bin).fit(X).n_bins > 256  # more bins than a byte holds: 16-bit bins


def test_local_memory_is_fitted_not_refused(oclgrind_device):
    """A histogram atom of 5000 bins (40 KB int32 pairs) overflows Oclgrind's 32 KB of local memory: the
    configuration drops local partials and work-items instead of raising ConfigError."""
    from mdhom.components.histogram import histogram
    from mdhom.mdh.limits import within_local_memory

    desc = histogram(5001, "quantized")
    cfg = {**desc.default_config(oclgrind_device), "PARTIALS_LOCAL": 1, "NUM_WI_pos": 64}
    assert desc.local_mem_bytes(cfg) > oclgrind_device.local_mem_size
    fitted = within_local_memory(desc, oclgrind_device, cfg)
    assert fitted["PARTIALS_LOCAL"] == 0 and desc.local_mem_bytes(fitted) <= oclgrind_device.local_mem_size
    desc.check_config(fitted, oclgrind_device)


def test_flat_is_dropped_with_local_partials(oclgrind_device):
    """FLAT folds into local memory only: where a whole-row histogram's local accumulator does not fit, the fitted
    configuration drops FLAT with PARTIALS_LOCAL (check_config would refuse FLAT without it) and still builds."""
    from mdhom.components.row_histogram import histogram_rows
    from mdhom.mdh.limits import within_local_memory

    desc = histogram_rows(300, 28, 1, False, True)  # 28 x 300 int32 pairs: 67 KB
    cfg = {**desc.default_config(oclgrind_device), "PARTIALS_LOCAL": 1, "FLAT": 1, "NUM_WI_pos": 64}
    assert desc.local_mem_bytes(cfg) > oclgrind_device.local_mem_size
    fitted = within_local_memory(desc, oclgrind_device, cfg)
    assert fitted["PARTIALS_LOCAL"] == 0 and fitted["FLAT"] == 0
    desc.check_config(fitted, oclgrind_device)
