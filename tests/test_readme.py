"""The README's promises: its Python example runs as written, and its parameter table is the option table."""

from __future__ import annotations

import re
from pathlib import Path

from mdhom.trees import params as P

README = Path(__file__).resolve().parent.parent / "README.md"


def _training_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Training\n")
    return text[start:text.index("\n## ", start + 1)]


def test_first_python_example_runs(tmp_path, monkeypatch):
    """Exactly the first ```python block, in a fresh namespace and an empty directory (it writes model.json)."""
    block = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert block is not None and "## Training" in README.read_text(encoding="utf-8")[:block.start()]
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "model.json").is_file()


def test_parameter_table_lists_every_option_with_its_default():
    rows = re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", _training_section(), re.M)
    assert [name for name, _ in rows] == [o.name for o in P.OPTIONS], "README rows and the option table differ"
    for name, default in rows:
        want = P.DEFAULTS[name]
        assert default == (f'"{want}"' if isinstance(want, str) else repr(want)), f"README default of {name}"
