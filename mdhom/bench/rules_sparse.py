"""Memory and time of RuleBoostClassifier on a sparse text set given dense and as scipy.sparse (issue 10).

``python -m mdhom.bench.rules_sparse --data ../shared/datasets/enron.arff --labels ../shared/datasets/enron.xml
--rows 20000 --rules 10 --devices numpy,pocl``: enron's 1001 binary word features and 53 labels (8.4% of the cells
non-zero), its rows drawn with replacement up to ``--rows`` (seeded), fitted with label-wise single-label heads,
exact thresholds on numpy and ``--bins`` equal-width bins on numpy and on each device, once from the dense float64
array and once from its CSR form. Each fit runs in a fresh Python process (as ``mdhom bench memory`` does), which
loads the data, builds the input form and the device context, resets the peak-RSS counter (``/proc/self/clear_refs``)
and then fits and predicts the training rows: the figures are the peak resident memory of fit + predict above that
baseline (the input itself excluded), the seconds of each, the most bytes the device workspace held at once, and the
model file's SHA-256 (dense and sparse input must give the same file). Run it with an older mdhom on ``PYTHONPATH``
(this file by path: ``python path/to/rules_sparse.py``) to measure the code before a change; nothing here touches the
network. ``--quick``: 600 rows of a synthetic text-shaped set, 4 rules, numpy only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

MiB = float(1 << 20)


def load(config: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """(CSR X, Y): the rows of ``config['data']`` (an ARFF with ``config['labels']``) drawn with replacement up to
    ``config['rows']`` (default_rng(seed)), or a synthetic text-shaped set where no data file is given."""
    import scipy.sparse as sp

    rng = np.random.default_rng(config["seed"])
    if config.get("data"):
        from mdhom.datasets import load_arff

        X, Y, _, _ = load_arff(config["data"], labels=config["labels"])
        pick = rng.integers(0, X.shape[0], config["rows"]) if config["rows"] else np.arange(X.shape[0])
        return sp.csr_matrix(np.asarray(X)[pick]), np.asarray(Y)[pick]
    n, f = config["rows"] or 600, 400
    X = sp.random(n, f, density=0.08, format="csr", random_state=rng, data_rvs=lambda k: np.ones(k))
    cols = np.asarray(X[:, :6].todense())
    Y = np.stack([cols[:, 0] > 0, cols[:, 1] + cols[:, 2] > 0, rng.random(n) < 0.2], 1).astype(np.int8)
    return X, Y


def measure_one(config: dict[str, Any], form: str, device: str, bins: int | None) -> dict[str, Any]:
    """One fit + predict in this process (run it in a fresh one)."""
    from mdhom import RuleBoostClassifier
    from mdhom import __file__ as where
    from mdhom.bench.memory import _reset_peak, _status

    X, Y = load(config)
    Xin = X.toarray() if form == "dense" else X
    del X
    seen: list[Any] = []
    if device != "numpy":
        from mdhom.components import workspace
        from mdhom.devices import get_device

        get_device(device).queue  # noqa: B018 - the context exists before the baseline
        ensure = workspace.Workspace.ensure

        def spy(self: Any, *a: Any, **k: Any) -> Any:
            if not seen or seen[-1] is not self:
                seen.append(self)
            return ensure(self, *a, **k)

        workspace.Workspace.ensure = spy
    params = dict(max_rules=config["rules"], head_type="single", random_state=config["seed"], device=device,
                  feature_binning=None if bins is None else ("equal-width", bins))
    reset = _reset_peak()
    base = _status("VmRSS") if reset else float("nan")
    t0 = time.perf_counter()
    est = RuleBoostClassifier(**params).fit(Xin, Y)
    t1 = time.perf_counter()
    est.predict(Xin)
    t2 = time.perf_counter()
    peak = _status("VmHWM") if reset else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        est.save_model(path)
        doc = json.loads(open(path).read())
    doc["params"].pop("device")
    sha = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    out = {"form": form, "device": device, "bins": bins, "fit_seconds": round(t1 - t0, 3),
           "predict_seconds": round(t2 - t1, 3), "growth_mib": round(peak - base, 1), "model_sha": sha,
           "rules": len(est.rules_) + 1, "input_mib": round(_nbytes(Xin) / MiB, 1), "mdhom": os.path.dirname(where),
           "device_peak_mib": round(seen[-1].peak_bytes / MiB, 1) if seen else None}
    return out


def _nbytes(X: Any) -> int:
    if hasattr(X, "indptr"):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


def _child(config: dict[str, Any], form: str, device: str, bins: int | None) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                           json.dumps([config, form, device, bins])], capture_output=True, text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("MDHOM-RULES-SPARSE ")), None)
    if proc.returncode == 0 and line:
        return json.loads(line[len("MDHOM-RULES-SPARSE "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"form": form, "device": device, "bins": bins, "status": "failed", "error": " | ".join(tail)}


def run(config: dict[str, Any], devices: list[str], bins: int, log: Any = print) -> dict[str, Any]:
    """Every (device, binning, input form), each twice in fresh processes (the first builds a device's programs;
    the second is reported)."""
    results = []
    runs = [("numpy", None), ("numpy", bins)] + [(d, bins) for d in devices if d != "numpy"]
    for device, b in runs:
        for form in ("dense", "sparse"):
            first = _child(config, form, device, b) if device != "numpy" else None
            result = _child(config, form, device, b)
            if first is not None and "growth_mib" in first:
                result["first_fit_growth_mib"] = first["growth_mib"]
            log(json.dumps(result))
            results.append(result)
    return {"benchmark": "rules-sparse", "parameters": {**config, "bins": bins, "devices": devices},
            "results": results}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="a multi-label ARFF (default: a synthetic text-shaped set)")
    p.add_argument("--labels", help="its Mulan XML or label count")
    p.add_argument("--rows", type=int, default=0, help="rows drawn with replacement (0: the file's rows)")
    p.add_argument("--rules", type=int, default=10)
    p.add_argument("--bins", type=int, default=32)
    p.add_argument("--devices", default="numpy", help="comma-separated: numpy and device keys or 'pocl', 'cpu'")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="600 synthetic rows, 4 rules, numpy only")
    p.add_argument("--out", help="write the report as JSON here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        config, form, device, bins = json.loads(a.child)
        print("MDHOM-RULES-SPARSE " + json.dumps(measure_one(config, form, device, bins)))
        return 0
    config = {"data": a.data, "labels": a.labels, "rows": a.rows, "rules": a.rules, "seed": a.seed}
    devices = [d.strip() for d in a.devices.split(",") if d.strip()]
    if a.quick:
        config.update(data=None, rows=600, rules=4)
        devices = ["numpy"]
    report = run(config, devices, a.bins)
    if a.out:
        from mdhom._files import atomic_write_json

        atomic_write_json(a.out, report, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
