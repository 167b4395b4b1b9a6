"""Files mdhom writes (models, tuned configurations) get the user's umask, like any file ``open`` creates."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from mdhom import TreeBoostRegressor, _files, config_store

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes and umask are POSIX")


@pytest.fixture
def umask():
    """Set the process umask for one test and restore it afterwards."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_json_follows_umask(tmp_path, umask, mask, mode):
    umask(mask)
    assert _files.current_umask() == mask
    p = tmp_path / "doc.json"
    _files.atomic_write_json(p, {"a": 1})
    assert _mode(p) == mode
    _files.atomic_write_json(p, {"a": 2})  # replacing keeps the umask's mode, not the temp file's 0600
    assert _mode(p) == mode
    assert [q.name for q in tmp_path.iterdir()] == ["doc.json"]


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_saved_model_file_follows_umask(tmp_path, umask, mask, mode):
    umask(mask)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    model = TreeBoostRegressor(n_estimators=2, device="numpy").fit(X, X[:, 0])
    model.save_model(tmp_path / "model.json")
    assert _mode(tmp_path / "model.json") == mode


def test_tuned_config_file_follows_umask(tmp_path, umask):
    umask(0o022)
    config_store.atomic_write_json(tmp_path / "dev.json", {"schema": "x"})
    assert _mode(tmp_path / "dev.json") == 0o644
