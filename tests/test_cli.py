"""The ``mdhom`` command itself: ``--version``, and warnings as one line each rather than a source excerpt."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mdhom
from mdhom import configs
from mdhom.cli import main


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"mdhom {mdhom.__version__}"
    proc = subprocess.run([sys.executable, "-m", "mdhom", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"mdhom {mdhom.__version__}"


def test_warnings_on_the_command_line_are_one_line(cpu, tmp_path, monkeypatch, capsys):
    (tmp_path / f"{cpu.key}.json").write_text("{not json")
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path))
    configs.reset_warnings()
    try:
        assert main(["devices"]) == 0
    finally:
        configs.reset_warnings()
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "ignoring tuned-config file" in ln]
    assert len(lines) == 1 and lines[0].startswith("mdhom devices: warning: ignoring tuned-config file"), err
    assert "warn(" not in err and "configs.py" not in err and "TunedConfigWarning" not in err


def test_tune_list_says_where_a_device_variant_class_is_tuned(capsys):
    """`mdhom tune --list` names, for a class that applies only to some devices (the example-wise histogram's lane
    variants), which of this machine's devices it is tuned on."""
    import mdhom
    from mdhom.rules import device_coupled as dc

    assert main(["tune", "--list"]) == 0
    out = capsys.readouterr().out
    line = out.split("rule_coupled_histogram", 1)[1].splitlines()[1]
    for d in (d for d in mdhom.devices() if not d.checker):
        for cls, sizes in dc.HISTOGRAM.tuning.size_classes.items():
            mark = line.split(f"{cls} ", 1)[1].split(")", 1)[0]
            assert (d.key in mark) == (sizes["block"] == dc.lane_block(d)), (cls, d.key)
