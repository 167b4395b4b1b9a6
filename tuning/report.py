"""The stored table of tuned configurations, and optional plots of a study's optimisation history."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mdhom import configs


def device_files(dirs: Iterable[Path] | None = None) -> dict[str, tuple[Path, dict]]:
    """Every valid device file along the search path, by device key (the first found wins, as at lookup)."""
    found: dict[str, tuple[Path, dict]] = {}
    for d in dirs if dirs is not None else configs.search_dirs():
        for p in sorted(Path(d).glob("*.json")):
            if p.name == configs.DEFAULTS_FILE or p.name.startswith("."):
                continue
            doc = configs.load_file(p)
            if doc is None or doc.get("schema") != configs.SCHEMA:
                continue
            found.setdefault(doc["device"]["key"], (p, doc))
    return found


def _ms(s: Any) -> str:
    return f"{s * 1e3:10.3f}" if isinstance(s, int | float) else f"{'-':>10}"


def table(doc: dict, path: Path | None = None) -> str:
    """One device's stored results: per kernel and size class, default vs tuned time and the parameters."""
    dev = doc["device"]
    lines = [f"{dev['key']}  ({dev.get('name', '?')}, {dev.get('platform', '?')}, "
             f"driver {dev.get('driver_version', '?')})"]
    if path is not None:
        lines.append(f"  file: {path}")
    lines.append(f"  {'kernel':<16} {'class':<12} {'default ms':>10} {'tuned ms':>10} {'speedup':>8} {'trials':>6}  "
                 f"{'date':<10}  parameters")
    for kname in sorted(doc["kernels"]):
        classes = doc["kernels"][kname]["classes"]
        for cls in sorted(classes, key=lambda c: sorted(classes[c]["sizes"].items())):
            e = classes[cls]
            sp = e["default_s"] / e["median_s"] if e.get("default_s") and e.get("median_s") else None
            params = " ".join(f"{k.removeprefix('NUM_')}={v}" for k, v in sorted(e["config"].items()))
            if e.get("heuristic"):  # fits run today's heuristic at their sizes (mdhom.configs): its numbers then
                params = f"the heuristic kept (then: {params})"
            lines.append(
                f"  {kname:<16} {cls:<12} {_ms(e.get('default_s'))} {_ms(e.get('median_s'))} "
                f"{'-' if sp is None else f'{sp:7.2f}x':>8} {e.get('trials', '?'):>6}  {e.get('date', '?')[:10]:<10}  "
                f"{params}"
            )
    return "\n".join(lines)


def report(device_keys: Iterable[str] | None = None, dirs: Iterable[Path] | None = None) -> str:
    files = device_files(dirs)
    keys = list(device_keys) if device_keys else sorted(files)
    parts = []
    for k in keys:
        if k not in files:
            parts.append(f"{k}: not tuned")
        else:
            parts.append(table(files[k][1], files[k][0]))
    return "\n\n".join(parts) if parts else "no tuned configurations found in " + ", ".join(
        str(d) for d in (dirs or configs.search_dirs()))


def plot_histories(storage: Any, out_dir: Path, device_key: str | None = None) -> list[Path]:
    """Optimisation-history plots (Optuna's matplotlib helpers) for every study in ``storage``; needs
    matplotlib, which is not a dependency of mdhom."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError as exc:
        raise ValueError("plots need matplotlib: pip install matplotlib") from exc
    import optuna
    from optuna.visualization.matplotlib import plot_optimization_history

    from mdhom.tuning.study import open_storage

    storage = open_storage(storage)

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for s in optuna.get_all_study_summaries(storage):
        if device_key and f"/{device_key}/" not in s.study_name:
            continue
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        ax = plot_optimization_history(study)
        p = out_dir / (s.study_name.replace("/", "__") + ".png")
        ax.figure.savefig(p, dpi=100, bbox_inches="tight")
        matplotlib.pyplot.close(ax.figure)
        written.append(p)
    return written


__all__ = ["device_files", "plot_histories", "report", "table"]
