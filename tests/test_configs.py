"""The tuned-config store: schema, atomic writes, the search path, and lookup with its fallback chain."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

import mdhom
from mdhom import config_store, configs, tunable
from mdhom.configs import TunedConfigWarning


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    # Keep every test away from the real user and package directories.
    monkeypatch.delenv(configs.TUNED_DIR_ENV, raising=False)
    monkeypatch.setattr(configs, "user_dir", lambda: tmp_path / "user")
    monkeypatch.setattr(configs, "package_dir", lambda: tmp_path / "pkg")
    (tmp_path / "pkg").mkdir()
    configs.reset_warnings()
    yield
    configs.reset_warnings()


def _entry(config: dict, sizes: dict, t: float = 1e-3) -> dict:
    return {"sizes": sizes, "config": config, "median_s": t, "default_config": config, "default_s": 2 * t,
            "trials": 5, "failed_trials": 0, "date": "2026-11-20T00:00:00Z", "versions": {"mdhom": "0"}}


HIST = tunable.get("histogram")


def _hist_cfg(device, rows: int, wi: int) -> dict:
    cfg = HIST.describe({}).default_config(device, {"row": rows, "feat": 28})
    cfg["NUM_WI_row"] = wi
    return cfg


def test_store_and_lookup_nearest_class(cpu, tmp_path):
    d = tmp_path / "pkg"
    small, big = _hist_cfg(cpu, 10**4, 2), _hist_cfg(cpu, 10**6, 8)
    config_store.store_result(cpu, "histogram", "rows_1e4", _entry(small, {"row": 10**4, "feat": 28}), directory=d)
    config_store.store_result(cpu, "histogram", "rows_1e6", _entry(big, {"row": 10**6, "feat": 28}), directory=d)
    doc = json.loads((d / f"{cpu.key}.json").read_text())
    assert doc["schema"] == configs.SCHEMA and doc["schema_version"] == configs.SCHEMA_VERSION
    assert doc["device"]["key"] == cpu.key and set(doc["kernels"]["histogram"]["classes"]) == {"rows_1e4", "rows_1e6"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a tuned device must not warn
        assert configs.lookup_config(cpu, "histogram", {"row": 20_000, "feat": 28}) == small
        # 10^5 is nearer 10^4 than 10^6 only if below sqrt(10^10); 2e5 is nearer 10^6 in log-distance
        assert configs.lookup_config(cpu, "histogram", {"row": 90_000, "feat": 28}) == small
        assert configs.lookup_config(cpu, "histogram", {"row": 200_000, "feat": 28}) == big
        assert configs.lookup_config(cpu, "histogram", {"row": 10**8}) == big


def test_nearest_class_uses_log_distance_over_shared_dims():
    classes = {"a": {"sizes": {"i": 64, "j": 10**5}}, "b": {"sizes": {"i": 10**5, "j": 64}}}
    assert configs.nearest_class(classes, {"i": 50, "j": 3 * 10**4}) == "a"
    assert configs.nearest_class(classes, {"i": 2 * 10**5, "j": 10}) == "b"
    assert configs.nearest_class(classes, {"zzz": 3}) is None


def test_user_dir_searched_first(cpu, tmp_path):
    a, b = _hist_cfg(cpu, 10**4, 2), _hist_cfg(cpu, 10**4, 4)
    sizes = {"row": 10**4, "feat": 28}
    config_store.store_result(cpu, "histogram", "c", _entry(a, sizes), directory=tmp_path / "pkg")
    config_store.store_result(cpu, "histogram", "c", _entry(b, sizes), directory=tmp_path / "user")
    assert configs.lookup_config(cpu, "histogram", sizes) == b


def test_lookups_see_files_written_by_another_process(cpu, tmp_path):
    """Lookups answer from memory while no candidate file changed (a fit looks configurations up ~80 times), yet see
    a file another process wrote: one appearing in a directory searched first, one replaced in place, one removed."""
    a, b, c = (_hist_cfg(cpu, 10**4, wi) for wi in (2, 4, 8))
    sizes = {"row": 10**4, "feat": 28}
    config_store.store_result(cpu, "histogram", "c", _entry(a, sizes), directory=tmp_path / "pkg")
    elsewhere = tmp_path / "elsewhere"  # another process's tune, moved in below: no forget() in this one
    config_store.store_result(cpu, "histogram", "c", _entry(b, sizes), directory=elsewhere)
    assert configs.lookup_config(cpu, "histogram", sizes) == a
    user = tmp_path / "user"
    user.mkdir()
    (elsewhere / f"{cpu.key}.json").replace(user / f"{cpu.key}.json")
    assert configs.lookup_config(cpu, "histogram", sizes) == b
    doc = json.loads((user / f"{cpu.key}.json").read_text())
    doc["kernels"]["histogram"]["classes"]["c"]["config"] = c
    (user / f"{cpu.key}.json").write_text(json.dumps(doc, indent=3))  # in place, another size
    assert configs.lookup_config(cpu, "histogram", sizes) == c
    (user / f"{cpu.key}.json").unlink()
    assert configs.lookup_config(cpu, "histogram", sizes) == a


def test_write_dir_is_the_user_dir_unless_told_into_the_package(monkeypatch, tmp_path):
    assert configs.write_dir() == tmp_path / "user"  # the package dir is writable, but not the default
    assert configs.write_dir(into_package=True) == tmp_path / "pkg"
    monkeypatch.setenv(configs.TUNED_DIR_ENV, str(tmp_path / "env"))
    assert configs.write_dir() == tmp_path / "env" and configs.search_dirs()[0] == tmp_path / "env"
    assert configs.write_dir(into_package=True) == tmp_path / "pkg"
    assert configs.search_dirs()[1:] == [tmp_path / "user", tmp_path / "pkg"]  # the user's tune wins
    blocker = tmp_path / "afile"
    blocker.write_text("")
    monkeypatch.setattr(configs, "package_dir", lambda: blocker / "tuned_configs")  # cannot be created
    with pytest.raises(ValueError, match="not writable"):
        configs.write_dir(into_package=True)


def test_fallback_chain_exact_then_runtime_type_then_type_then_none(cpu, tmp_path):
    d = tmp_path / "pkg"
    sizes = {"row": 10**5, "feat": 28}
    dev_a = dataclasses.replace(cpu, key="acme-widget-v1", type="gpu")
    dev_b = dataclasses.replace(cpu, key="acme-other-v1", type="gpu")
    dev_c = dataclasses.replace(cpu, key="zeta-thing-v1", type="gpu")
    dev_d = dataclasses.replace(cpu, key="zeta-else-v1", type="accelerator")
    tuned = _hist_cfg(cpu, 10**5, 16)
    config_store.store_result(dev_a, "histogram", "rows_1e5", _entry(tuned, sizes), directory=d)
    config_store.rebuild_defaults([d])
    defaults = json.loads((d / configs.DEFAULTS_FILE).read_text())
    assert set(defaults["groups"]) == {"acme-gpu", "gpu"}
    assert configs.lookup_config(dev_a, "histogram", sizes) == tuned  # exact
    for dev in (dev_b, dev_c):  # runtime+type group, then type group, each with one warning
        with pytest.warns(TunedConfigWarning, match="defaults"):
            assert configs.lookup_config(dev, "histogram", sizes) == tuned
    with pytest.warns(TunedConfigWarning, match="heuristic"):
        assert configs.lookup_config(dev_d, "histogram", sizes) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per device, not once per call
        assert configs.lookup_config(dev_d, "histogram", sizes) is None
        assert configs.lookup_config(dev_b, "histogram", sizes) == tuned


BAD_ENTRY = '{"c": {"sizes": {"row": 5}, "config": {"A": 0}}}'
BAD_FILES = [
    "{not json",
    '{"schema": "something-else", "schema_version": 1}',
    '{"schema": "mdhom-tuned-configs", "schema_version": 99}',
    '{"schema": "mdhom-tuned-configs", "schema_version": 1, "device": {"key": "k"}, '
    '"kernels": {"h": {"classes": ' + BAD_ENTRY + "}}}",
]


@pytest.mark.parametrize("content", BAD_FILES)
def test_corrupt_or_foreign_file_warns_once_and_falls_back(cpu, tmp_path, content):
    (tmp_path / "pkg" / f"{cpu.key}.json").write_text(content)
    with pytest.warns(TunedConfigWarning) as rec:
        assert configs.lookup_config(cpu, "histogram", {"row": 10, "feat": 28}) is None
    assert any("ignoring" in str(w.message) for w in rec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert configs.lookup_config(cpu, "histogram", {"row": 10, "feat": 28}) is None


def test_warnings_point_at_the_callers_line_not_at_mdhom(cpu, tmp_path):
    """Whatever the depth of the call inside mdhom, the warning names the user's file and line."""
    (tmp_path / "pkg" / f"{cpu.key}.json").write_text("{not json")
    sizes = {"row": 10, "feat": 28}
    for call in (configs.lookup_config, configs.lookup):
        configs.reset_warnings()
        with pytest.warns(TunedConfigWarning) as rec:
            call(cpu, "histogram", sizes); line = _line()  # noqa: E702 (the call's own line)
        assert {w.filename for w in rec} == {__file__}, [(w.filename, w.lineno) for w in rec]
        assert {w.lineno for w in rec} == {line}


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_fit_warning_points_at_the_fit_call(cpu, tmp_path):
    X = np.random.default_rng(0).normal(size=(300, 3))
    model = mdhom.TreeBoostRegressor(n_estimators=2, max_leaves=4, device=cpu.key)
    with pytest.warns(TunedConfigWarning, match="not tuned") as rec:
        model.fit(X, X[:, 0]); line = _line()  # noqa: E702
    assert {(w.filename, w.lineno) for w in rec if w.category is TunedConfigWarning} == {(__file__, line)}


def test_file_of_another_device_is_not_used(cpu, tmp_path):
    other = dataclasses.replace(cpu, key="acme-widget-v1")
    config_store.store_result(other, "histogram", "c", _entry(_hist_cfg(cpu, 10, 1), {"row": 10, "feat": 28}),
                         directory=tmp_path / "pkg")
    (tmp_path / "pkg" / "acme-widget-v1.json").rename(tmp_path / "pkg" / f"{cpu.key}.json")
    with pytest.warns(TunedConfigWarning, match="holds configurations of acme-widget-v1"):
        assert configs.lookup_config(cpu, "histogram", {"row": 10, "feat": 28}) is None


def test_stored_config_invalid_on_device_is_skipped_with_description(cpu, tmp_path):
    desc = HIST.describe({})
    bad = _hist_cfg(cpu, 10**4, 1)
    bad["NUM_WI_row"] = cpu.max_work_group_size * 2  # above the device's work-group limit
    config_store.store_result(cpu, "histogram", "c", _entry(bad, {"row": 10**4, "feat": 28}), directory=tmp_path / "pkg")
    assert configs.lookup_config(cpu, "histogram", {"row": 10**4}) == bad  # no description: caller validates
    with pytest.warns(TunedConfigWarning, match="not usable"):
        assert configs.lookup_config(cpu, "histogram", {"row": 10**4}, description=desc) is None


def test_description_hash_mismatch_is_reported(cpu, tmp_path):
    desc = HIST.describe({})
    good = _hist_cfg(cpu, 10**4, 4)
    config_store.store_result(cpu, "histogram", "c", _entry(good, {"row": 10**4, "feat": 28}), "sha256:old",
                         directory=tmp_path / "pkg")
    config, source = configs.lookup(cpu, "histogram", {"row": 10**4}, description=desc)
    assert config == good and "another version of the kernel" in source
    # re-tuning under the new hash drops the stale classes
    config_store.store_result(cpu, "histogram", "d", _entry(good, {"row": 10**6, "feat": 28}),
                         configs.description_hash(desc), directory=tmp_path / "pkg")
    doc = configs.load_device(cpu.key)
    assert set(doc["kernels"]["histogram"]["classes"]) == {"d"}


def test_description_hash_covers_the_code_not_its_comments(monkeypatch):
    """A configuration is tuned for the code a compiler reads: a kernel whose comments or indentation were edited
    keeps its hash (its tuned entries stay current), while any change of code, a string literal's included, or of
    the parameter names gives another. Session 62 had left two over-long comment lines in a kernel file because
    editing them would have made every tuned entry of the split search one "of an older version"."""
    from mdhom.mdh import codegen

    desc = tunable.get("tree_split_score").describe(tunable.get("tree_split_score").size_classes["vec_nodes_16"])
    real = codegen.generate(desc)
    assert "/*" in real and "  " in real  # the kernel has comments and indentation to edit
    monkeypatch.setattr(configs, "_HASHES", {})  # the made-up sources' hashes die with the test
    base = configs.description_hash(desc)

    def hashed(text: str) -> str:
        configs._HASHES.clear()
        monkeypatch.setattr(codegen, "generate", lambda d: text)
        return configs.description_hash(desc)

    lines = real.splitlines()
    commented = "\n".join(f"{line}  // a note on line {i}" if line and not line.endswith("\\") else line
                          for i, line in enumerate(lines))
    reflowed = "/* a new header\n   over two lines */\n\n" + "\n".join("\t " + " ".join(line.split()) for line in lines)
    assert hashed(commented) == hashed(reflowed) == hashed(real) == base
    assert hashed(real.replace("/*", "/* edited:", 1)) == base
    code = next(i for i, line in enumerate(lines) if "=" in line and not line.lstrip().startswith(("/*", "*", "//")))
    assert hashed("\n".join(lines[:code] + [lines[code] + " + 0"] + lines[code + 1:])) != base
    assert hashed(real + '\nconstant char note[] = "/* not a comment */";') != hashed(real + '\nconstant char '
                                                                                        'note[] = "/* other */";')
    assert configs.source_text('a = "x // y"; // z\nb = \'"\'; /* c */ d') == 'a = "x // y"; b = \'"\'; d'
    def code_line(i: int) -> bool:  # neither a directive (or its continuation) nor within a comment's reach
        line = lines[i]
        return not (line.lstrip().startswith(("#", "*")) or (i and lines[i - 1].endswith("\\"))
                    or any(m in line for m in ("//", "/*", "*/")))

    wrapped = "\n".join(line.replace(", ", ",\n        ") if code_line(i) else line for i, line in enumerate(lines))
    assert wrapped != real and hashed(wrapped) == base  # a long line broken after its commas
    assert configs.source_text("int a;\n  #define B(x) \\\n (x)\nint c;\n/*\n*/#if B\nd;\n#define C a\\\nb") == \
        "int a;\n#define B(x) (x)\nint c;\n#if B\nd;\n#define C ab"


def test_a_build_no_class_was_tuned_for_takes_its_own_variants_class(cpu, tmp_path):
    """A build of another version of a kernel (the split score at 128 bins; every class tuned at 64 or 256) takes the
    nearest class of its own variant (quantized, vector form) where there is one, not the nearest of any variant: the
    float64 class's configuration had run the quantized vector build at 256 bins 2.3-2.4x slower on PoCL."""
    from mdhom.components import split as sp
    from mdhom.components.workspace import Workspace

    desc = sp.split_score(128, 1, "quantized", vector=True)
    mine = sp.SCORE.variant_classes(desc)
    assert mine == {c for c in sp.SCORE.tuning.size_classes if c.startswith("vec_q_")}
    assert sp.SCORE.variant_classes(sp.split_score(128, 1, "double")) == {
        "nodes_1", "nodes_16", "nodes_128", "nodes_1_bins256", "nodes_128_bins256"}
    sizes = {"node": 1, "feat": 28, "bin": 62, "dir": 2}
    base = sp.score_heuristic(desc, cpu, sizes)
    plain, vec_q = {**base, "NUM_WG_node": 1}, {**base, "NUM_WG_node": 2}
    config_store.store_results(cpu, [("tree_split_score", "nodes_1", _entry(plain, sizes), "sha256:plain"),
                                ("tree_split_score", "vec_q_nodes_1", _entry(vec_q, sizes), "sha256:vec_q")],
                          directory=tmp_path / "pkg")
    look = {**sizes, "bin": 126}
    config, source = configs.lookup(cpu, "tree_split_score", look, description=desc, prefer=mine)
    assert config == vec_q and "vec_q_nodes_1" in source and "another version" in source
    config, source = configs.lookup(cpu, "tree_split_score", look, description=desc)  # no variant: the nearest
    assert config == plain and "nodes_1" in source
    # what a fit's workspace asks for
    ws = Workspace(cpu, "quantized")
    assert "vec_q_nodes_1" in ws.config(sp.SCORE, desc, look)[1]


def test_variants_of_one_kernel_keep_their_own_classes(cpu, tmp_path):
    """Two variants under one kernel name (a precision's lanes, a CPU's vector form): each build takes the nearest
    class tuned for its own code, even where the other variant's class is nearer in size, and a store of one
    variant keeps the other where ``stale`` calls its hash current."""
    desc = HIST.describe({})
    own = configs.description_hash(desc)
    mine, theirs = _hist_cfg(cpu, 10**4, 2), _hist_cfg(cpu, 10**6, 4)
    d = tmp_path / "pkg"
    config_store.store_results(cpu, [("histogram", "mine", _entry(mine, {"row": 10**4, "feat": 28}), own),
                                ("histogram", "theirs", _entry(theirs, {"row": 10**6, "feat": 28}), "sha256:q")],
                          directory=d)
    body = configs.load_device(cpu.key)["kernels"]["histogram"]
    assert {c: e["description_hash"] for c, e in body["classes"].items()} == {"mine": own, "theirs": "sha256:q"}
    config, source = configs.lookup(cpu, "histogram", {"row": 10**6, "feat": 28}, description=desc)
    assert config == mine and "another version" not in source and "mine" in source
    # re-tuning one variant keeps the other while its code is current, drops it once it is not
    config_store.store_results(cpu, [("histogram", "mine", _entry(mine, {"row": 10**4, "feat": 28}), own)], directory=d,
                          stale=lambda kernel, h: h != "sha256:q")
    assert set(configs.load_device(cpu.key)["kernels"]["histogram"]["classes"]) == {"mine", "theirs"}
    config_store.store_results(cpu, [("histogram", "mine", _entry(mine, {"row": 10**4, "feat": 28}), own)], directory=d,
                          stale=lambda kernel, h: True)
    assert set(configs.load_device(cpu.key)["kernels"]["histogram"]["classes"]) == {"mine"}
    # a file of the older layout (one hash per kernel) reads the same
    doc = json.loads((d / f"{cpu.key}.json").read_text())
    doc["kernels"]["histogram"]["description_hash"] = doc["kernels"]["histogram"]["classes"]["mine"].pop(
        "description_hash")
    config_store.atomic_write_json(d / f"{cpu.key}.json", doc)
    assert configs.lookup(cpu, "histogram", {"row": 10**4, "feat": 28}, description=desc)[0] == mine
    # the defaults carry each class's hash
    out = config_store.rebuild_defaults([d])
    group = json.loads(out.read_text())["groups"][cpu.type]["kernels"]["histogram"]
    assert group["classes"]["mine"]["description_hash"] == own


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "pkg" / "x.json"
    config_store.atomic_write_json(p, {"a": 1})
    before = p.read_bytes()
    with pytest.raises(TypeError):
        config_store.atomic_write_json(p, {"a": object()})  # fails mid-serialisation
    assert p.read_bytes() == before
    assert [q.name for q in p.parent.iterdir()] == ["x.json"]  # no temp file left behind


def test_store_result_rejects_schema_violations(cpu, tmp_path):
    with pytest.raises(configs.SchemaError):
        config_store.store_result(cpu, "histogram", "c", _entry({"NUM_WI_row": -1}, {"row": 5}),
                             directory=tmp_path / "pkg")
    assert not (tmp_path / "pkg" / f"{cpu.key}.json").exists()


def test_tuned_status(cpu, tmp_path):
    assert configs.tuned_status(cpu) == "no"
    config_store.store_result(cpu, "histogram", "c", _entry(_hist_cfg(cpu, 10, 1), {"row": 10, "feat": 28}),
                         directory=tmp_path / "pkg")
    assert configs.tuned_status(cpu).startswith("2026-11-20 (1 kernels)")
    if cpu.type == "cpu":  # a CPU of the same key and another core count does not use the file
        more = dataclasses.replace(cpu, compute_units=cpu.compute_units + 1)
        assert configs.tuned_status(more) == f"no (the stored file is for {cpu.compute_units} compute units)"


def test_shipped_files_are_valid():
    """Every file shipped in tuned_configs/ follows the schema."""
    from importlib import resources
    from pathlib import Path

    shipped = Path(str(resources.files("mdhom.tuned_configs")))
    for p in shipped.glob("*.json"):
        configs.validate(json.loads(p.read_text()), str(p))


def test_shipped_defaults_are_what_the_shipped_device_files_make(tmp_path):
    """defaults.json is derived from the device files (``mdhom tune --update-defaults``): a device file re-tuned
    without it leaves defaults that other devices of its group take, tuned for kernels that have since changed (the
    NVIDIA group's whole-row histogram entries were, until 2026-11-29)."""
    from importlib import resources
    from pathlib import Path

    shipped = Path(str(resources.files("mdhom.tuned_configs")))
    rebuilt = config_store.rebuild_defaults([shipped], tmp_path / "defaults.json")
    want = json.loads((shipped / "defaults.json").read_text())["groups"]
    assert json.loads(rebuilt.read_text())["groups"] == want, "run mdhom tune --update-defaults (or rebuild_defaults)"


# ------------------------------------------------------------------------------------ comparison
def test_compare_struct_and_precision_modes():
    from mdhom.mdh.examples import ARGMAX_F, GH

    want = np.zeros(4, ARGMAX_F.dtype)
    want["value"], want["index"] = [1, 2, 3, 4], [0, 1, 2, 3]
    got = want.copy()
    assert tunable.compare(got, want) is None
    got["index"][2] = 5
    assert "index" in tunable.compare(got, want) and "exact" in tunable.compare(got, want)
    got = want.copy()
    got["value"][1] *= 1 + 1e-5  # within single precision
    assert tunable.compare(got, want) is None
    got["value"][1] *= 1 + 1e-2
    assert "value" in tunable.compare(got, want)
    gh = np.zeros((3, 16), GH.dtype)
    gh["g"] = np.random.default_rng(0).standard_normal((3, 16))
    g2 = gh.copy()
    g2["g"][0, 0] += 1e-6  # far beyond double-precision tolerance
    assert "field 'g'" in tunable.compare(g2, gh)
    assert "shape" in tunable.compare(gh[:2], gh)


def test_lookup_reports_its_source_and_can_be_disabled(monkeypatch):
    from mdhom.mdh import examples

    dev = mdhom.get_device("pocl")
    cfg, source = configs.lookup(dev, "histogram", {"row": 10**5, "feat": 28}, examples.HISTOGRAM)
    if cfg is not None:  # the shipped PoCL file
        assert source.startswith(("tuned ", "defaults ")), source
    monkeypatch.setenv("MDHOM_TUNED", "0")
    assert configs.lookup(dev, "histogram", {"row": 10**5, "feat": 28}, examples.HISTOGRAM) == (None, "disabled")
    assert configs.lookup_config(dev, "histogram", {"row": 10**5, "feat": 28}) is None


def test_nearest_class_never_maps_a_trivial_dimension_to_a_wide_one():
    """A class tuned for one node must not serve a 64-node launch (nor the other way round)."""
    classes = {"root": {"sizes": {"node": 1, "pos": 10**6}}, "level": {"sizes": {"node": 16, "pos": 10**4}}}
    assert configs.nearest_class(classes, {"node": 64, "pos": 10**5}) == "level"
    assert configs.nearest_class(classes, {"node": 1, "pos": 10**4}) == "root"
    assert configs.nearest_class({"root": classes["root"]}, {"node": 64, "pos": 10**5}) is None


def test_switch_parameters_may_be_zero(tmp_path):
    """A tuned PARTIALS_LOCAL=0 (the right choice on CPUs) is stored; a zero work-group count is not."""
    from mdhom.mdh import examples

    dev = mdhom.get_device("pocl")
    cfg = {**examples.HISTOGRAM_Q32.default_config(dev, None), "PARTIALS_LOCAL": 0}
    entry = {"sizes": {"row": 10**4, "feat": 28}, "config": cfg, "median_s": 1.0, "default_s": 1.0, "trials": 1,
             "failed_trials": 0, "date": "2026-11-20T00:00:00Z", "versions": {}}
    path = config_store.store_result(dev, "histogram_q32", "rows_1e4", entry, directory=tmp_path)
    assert configs.lookup_config(dev, "histogram_q32", {"row": 10**4, "feat": 28}, dirs=[tmp_path])["PARTIALS_LOCAL"] == 0
    bad = {**entry, "config": {**cfg, "NUM_WG_row": 0}}
    with pytest.raises(configs.SchemaError, match="positive integer"):
        config_store.store_result(dev, "histogram_q32", "rows_1e4", bad, directory=tmp_path)
    assert path.exists()


def test_a_tune_drops_other_kernels_entries_of_an_older_version(cpu, tmp_path):
    """A tune of some kernels keeps the file's other kernels, except those tuned for code no longer shipped
    (mdhom.tuning.driver.stale_entry): an unknown kernel name or a description hash no size class has now."""
    from mdhom.tuning.driver import stale_entry

    d = tmp_path / "pkg"
    sizes = {"row": 10**4, "feat": 28}
    cfg = _hist_cfg(cpu, 10**4, 2)
    current = configs.description_hash(HIST.describe({}))
    for kernel, h in (("histogram", current), ("row_sum", "sha256:" + "0" * 32), ("gone_kernel", None)):
        config_store.store_result(cpu, kernel, "rows_1e4", _entry(cfg, sizes), h, directory=d)
    assert not stale_entry("histogram", current) and stale_entry("row_sum", "sha256:" + "0" * 32)
    assert stale_entry("gone_kernel", None) and not stale_entry("histogram", None)
    gh = tunable.get("gh_sum")
    path = config_store.store_results(cpu, [("gh_sum", "now", _entry(cfg, sizes), configs.description_hash(
        gh.describe(next(iter(gh.classes(True).values())))))], d, stale=stale_entry)
    assert set(json.loads(path.read_text())["kernels"]) == {"histogram", "gh_sum"}


def test_only_kernels_a_tune_stores_ask_for_one(cpu, tmp_path):
    """A device file without a kernel that no tune stores (no tuning declared, or tuned only on other kinds of
    device: the GPUs' go-left prefix counts, which a CPU's learner builds too) asks for no re-run of `mdhom tune`:
    no re-run could silence it; a tunable kernel the file lacks does."""
    from mdhom.components import leaf_rows as lr
    from mdhom.components import partition_kernels as pt
    from mdhom.components import row_histogram as rh
    from mdhom.components.workspace import Workspace

    config_store.store_results(cpu, [("other_kernel", "c", _entry({"NUM_WI_i": 2}, {"i": 64}), None)], tmp_path / "pkg")
    ws = Workspace(cpu, "quantized")
    assert lr.LEAF_ROWS.tuning is None and rh.HISTOGRAM_ROWS.tuning is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg, source = ws.config(lr.LEAF_ROWS, lr.leaf_rows(), {"pos": 1000})
        assert ws.config(pt.FLAGS, pt.partition_flags(64), {"pos": 1000})[1] == "heuristic"
    assert source == "heuristic"
    assert pt.FLAGS.tuning is not None and not pt.FLAGS.tuned_on(cpu) and rh.HISTOGRAM_ROWS.tuned_on(cpu)
    with pytest.warns(TunedConfigWarning, match="not tuned for tree_histogram_rows"):
        ws.config(rh.HISTOGRAM_ROWS, rh.histogram_rows(64, 28), {"node": 1, "pos": 1000})
    # sizes that no class of the tune serves (one block of a GPU's group partition: a fit of under 4096 rows) run the
    # heuristic whatever is tuned: no warning either (H200, a 4000-row fit asked for a re-run of the tuner)
    from mdhom.components.partition_kernels import GROUP_COUNTS, GROUP_ROWS

    gpu = dataclasses.replace(cpu, type="gpu")
    assert GROUP_COUNTS.tuned_on(gpu) and not GROUP_COUNTS.tuned_on(cpu)
    assert GROUP_COUNTS.tuned_on(gpu, {"blk": 245, "k": GROUP_ROWS})
    assert not GROUP_COUNTS.tuned_on(gpu, {"blk": 1, "k": GROUP_ROWS})


def test_a_switch_of_another_variant_is_dropped(cpu, tmp_path):
    """A stored whole-row histogram tuned where rows are whole 32-bit words (ROW_WORDS) serves a variant whose rows
    are not (27 one-byte bins a row): the switch is dropped, the rest of the configuration kept, no warning."""
    from mdhom.components import histogram as hg
    from mdhom.components import row_histogram as rh

    words, bytes_ = rh.histogram_rows(64, 28), rh.histogram_rows(64, 27)
    assert "ROW_WORDS" in words.parameter_names() and "ROW_WORDS" not in bytes_.parameter_names()
    cfg = {**rh.rows_heuristic(words, cpu, {"node": 1, "pos": 1000}), "ROW_WORDS": 1, "NUM_WG_pos": 8}
    config_store.store_results(cpu, [("tree_histogram_rows", "c", _entry(cfg, {"node": 1, "pos": 1000}),
                                 configs.description_hash(words))], tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, source = configs.lookup(cpu, "tree_histogram_rows", {"node": 1, "pos": 1000}, bytes_, dirs=[tmp_path])
    assert got == {k: v for k, v in cfg.items() if k != "ROW_WORDS"} and "ROW_WORDS not offered" in source
    assert configs.lookup(cpu, "tree_histogram_rows", {"node": 1, "pos": 1000}, words, dirs=[tmp_path])[0] == cfg
    # a generator parameter the variant lacks is not a switch of another variant: the entry is refused as before
    hist = hg.histogram(64, "double")
    assert "PARTIALS_LOCAL" not in hist.parameter_names()
    bad = {**hg.histogram_heuristic(hist, cpu, {"node": 1, "feat": 28, "output": 1, "pos": 1000}), "PARTIALS_LOCAL": 1}
    config_store.store_results(cpu, [("tree_histogram", "c", _entry(bad, {"node": 1, "feat": 28, "output": 1, "pos": 1000}),
                                 None)], tmp_path)
    with warnings.catch_warnings(record=True) as caught:  # refused, then "not tuned" for what is left
        warnings.simplefilter("always")
        got = configs.lookup_config(cpu, "tree_histogram", {"node": 1, "feat": 28, "output": 1, "pos": 1000}, hist,
                                    dirs=[tmp_path])
    assert got is None
    assert any(issubclass(w.category, TunedConfigWarning) and "PARTIALS_LOCAL" in str(w.message) for w in caught)
    # ... but one an entry of another version carries (moved rows' INLINE, read by a build of the row index) is
    moved, index = rh.histogram_rows(64, 28), rh.histogram_rows(64, 28, 1, False, True)
    assert "INLINE" in moved.parameter_names() and "INLINE" not in index.parameter_names()
    sizes = {"node": 1, "pos": 1000}
    cfg = {**rh.rows_heuristic(moved, cpu, sizes), "INLINE": 1}
    config_store.store_results(cpu, [("tree_histogram_rows", "c", _entry(cfg, sizes), configs.description_hash(moved))],
                          tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, source = configs.lookup(cpu, "tree_histogram_rows", sizes, index, dirs=[tmp_path])
    assert "INLINE" not in got and "INLINE not offered" in source and "another version" in source


def test_cpu_configurations_apply_at_their_core_count_only(cpu, tmp_path):
    """One CPU model name, and so one key, covers machines of any core count, and a tune's work-group counts are
    its machine's: a CPU's own file and a CPU defaults group's entries apply only where the compute units match
    (elsewhere the heuristics, which scale with them); a tune on another core count replaces the file instead of
    merging into it. GPUs of one key keep their file at any count."""
    d = tmp_path / "pkg"
    sizes = {"row": 10**5, "feat": 28}
    two = dataclasses.replace(cpu, key="acme-cpu-v1", type="cpu", compute_units=2)
    sixteen = dataclasses.replace(two, compute_units=16)
    tuned = _hist_cfg(two, 10**5, 4)
    config_store.store_result(two, "histogram", "rows_1e5", _entry(tuned, sizes), directory=d)
    assert configs.lookup_config(two, "histogram", sizes) == tuned
    with pytest.warns(TunedConfigWarning, match="tuned on 2 compute units, acme-cpu-v1 has 16"):
        assert configs.lookup_config(sixteen, "histogram", sizes) is None
    config_store.rebuild_defaults([d])
    other = dataclasses.replace(sixteen, key="acme-other-v1")  # falls back to the acme-cpu and cpu groups
    with pytest.warns(TunedConfigWarning, match="heuristic"):
        assert configs.lookup_config(other, "histogram", sizes) is None
    with pytest.warns(TunedConfigWarning, match="defaults"):
        assert configs.lookup_config(dataclasses.replace(other, key="acme-third-v1", compute_units=2), "histogram",
                                     sizes) == tuned
    gpu = dataclasses.replace(two, key="acme-gpu-v1", type="gpu")
    config_store.store_result(gpu, "histogram", "rows_1e5", _entry(tuned, sizes), directory=d)
    assert configs.lookup_config(dataclasses.replace(gpu, compute_units=16), "histogram", sizes) == tuned
    retuned = _hist_cfg(sixteen, 10**6, 8)
    config_store.store_result(sixteen, "histogram", "rows_1e6", _entry(retuned, {"row": 10**6, "feat": 28}), directory=d)
    doc = json.loads((d / "acme-cpu-v1.json").read_text())
    assert doc["device"]["compute_units"] == 16 and set(doc["kernels"]["histogram"]["classes"]) == {"rows_1e6"}
    assert configs.lookup_config(sixteen, "histogram", sizes) == retuned


def test_no_shipped_entry_is_of_an_older_kernel_version():
    """Every size class the package ships (device files and the defaults groups) was tuned for code it ships: a
    kernel whose source changed is re-tuned, or its entries dropped, in the same change. Session 38's vector moves
    had left the 2-core EPYC's vector-form entries of the split search and the logistic gradients tuned for the old
    source, which fits then used under a "tuned for another version" note."""
    from importlib import resources
    from pathlib import Path

    from mdhom.tuning.driver import stale_entry

    root = Path(str(resources.files("mdhom.tuned_configs")))
    stale = []
    for path in sorted(root.glob("*.json")):
        doc = json.loads(path.read_text())
        bodies = [(g, b["kernels"]) for g, b in doc["groups"].items()] if "groups" in doc else [("", doc["kernels"])]
        for group, kernels in bodies:
            for kernel, body in kernels.items():
                stale += [f"{path.name} {group} {kernel} {c}" for c in body["classes"]
                          if stale_entry(kernel, configs.class_hash(body, c))]
    assert not stale, f"{len(stale)} entries of older kernel versions: {stale[:8]}"


def test_a_kernels_other_form_takes_its_heuristic_not_the_stored_form(cpu, monkeypatch):
    """The split score's two forms (plain, and the vector form that sums its bins) are other code under one kernel
    name: a build of the form a device's file does not store takes the heuristic, not the other form's nearest class,
    and says nothing of that class. A GPU's summed build had taken the nearest plain class (VEC left at 1 is the vector
    form's scalar fold, H100: 0.92 ms a launch against 0.03 tuned) or warned it unusable; a CPU's plain build had warned
    that the stored VEC was an unknown parameter."""
    import dataclasses
    import warnings
    from importlib import resources
    from pathlib import Path

    from mdhom.components import split as sp

    # the shipped files (the H200's and this CPU's), not the empty package directory the other tests here see
    monkeypatch.setattr(configs, "package_dir", lambda: Path(str(resources.files("mdhom.tuned_configs"))))
    gpu = dataclasses.replace(cpu, type="gpu", checker=False, compute_units=132, max_work_group_size=1024,
                              key="nvidia-nvidia-h200-v580")
    for n_bins in (64, 256):
        for nodes in (1, 16, 128):
            sizes = {"node": nodes, "feat": 28, "bin": n_bins - 2, "dir": 2}
            for precision in ("double", "quantized"):
                summed = sp.split_score(n_bins, 1, precision, vector=True)
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    cfg, source = sp.SCORE.configure(gpu, summed, sizes)
                assert source == "heuristic" and cfg == sp.score_heuristic(summed, gpu, sizes) and cfg["VEC"] == 2
                # (the H200 has no tuned summed score: "run mdhom tune" is due, nothing else)
                assert all("not tuned" in str(w.message) for w in said), [str(w.message) for w in said]
                plain = sp.split_score(n_bins, 1, precision)
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    cfg, source = sp.SCORE.configure(cpu, plain, sizes)
                # (the heuristic, or a stored entry of the plain form: another version of it may serve)
                assert "vec_" not in source and "VEC" not in cfg and not said, [str(w.message) for w in said]


def test_a_class_that_kept_the_heuristic_runs_todays_heuristic(cpu, tmp_path):
    """A class a tune marked as the heuristic kept (its study kept the default, or the end-to-end check dropped what it
    found) stands for the kernel's heuristic, not for that day's numbers: a lookup answers None and the build runs
    today's heuristic at its own sizes (what the check timed), saying so, and a tune starts from no warm start there.
    The H200's file had kept the forests' feature split at the numbers of a GPU heuristic since measured 19-27x slower.
    The same numbers unmarked are used as stored."""
    from mdhom.forests import split as S

    kern = tunable.get("forest_feature_split")
    sizes = kern.size_classes["dense_roots_64"]
    desc, dims = kern.describe(sizes), kern.dim_sizes(sizes)
    gpu = dataclasses.replace(cpu, type="gpu", key="acme-gpu-v1", compute_units=132, checker=False)
    old = S.per_slot(desc, gpu, dims)  # what a tune under the old heuristic stored
    assert old != S.per_slot_feature(desc, gpu, dims)
    h = configs.description_hash(desc)
    for marked in (True, False):
        entry = {**_entry(old, dims), **({"heuristic": True} if marked else {})}
        config_store.store_results(gpu, [("forest_feature_split", "dense_roots_64", entry, h)],
                                   directory=tmp_path / "pkg")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a tuned device does not warn either way
            cfg, source = S.FEATURE_SPLIT_SPEC.configure(gpu, desc, dims)
        # the tuner's warm start: the stored numbers where they are a tuned configuration, none where the class
        # kept the heuristic (the study's baseline is today's)
        seed = config_store.stored_config(gpu, "forest_feature_split", "dense_roots_64", tmp_path / "pkg")
        if marked:
            assert cfg == S.per_slot_feature(desc, gpu, dims)
            assert source == "heuristic (tuned acme-gpu-v1.json dense_roots_64: the heuristic kept)"
            assert seed is None
        else:
            assert cfg == old and source == "tuned acme-gpu-v1.json dense_roots_64"
            assert seed == old


def test_the_heuristic_mark_is_a_boolean():
    doc = {"schema": configs.SCHEMA, "schema_version": configs.SCHEMA_VERSION, "device": {"key": "k"},
           "kernels": {"histogram": {"classes": {"c": {**_entry({"NUM_WG_row": 1}, {"row": 10}), "heuristic": 1}}}}}
    with pytest.raises(configs.SchemaError, match="'heuristic' must be true or false"):
        configs.validate(doc)
    doc["kernels"]["histogram"]["classes"]["c"]["heuristic"] = True
    assert configs.validate(doc) is doc
