"""``mdhom bench rules``: seconds per rule and quality of RuleBoostClassifier against mlrl-boomer, on synthetic
multi-label data shaped like mediamill (issue 10's performance section).

The workload (:func:`make_multilabel`): dense float32 features (default 20000 training and 5000 test rows x 120
features, mediamill's width) and 101 labels (mediamill's count) whose frequencies fall off as a power law from
0.6 to under 0.02 (label cardinality about 4.9; mediamill's is about 4.4): each label is a noisy
threshold of a linear function of 10 shared latent factors of the features, so labels are correlated and
learnable by axis-parallel rules only approximately, as real data is.

Per setting (label-wise logistic loss with single-label heads, example-wise logistic loss with complete heads):

* mdhom, ``feature_binning=("equal-width", bins)`` (its device search needs bins) and every other option at its
  default (mlrl-boomer's: feature sampling without replacement, no instance or label sampling, label binning as
  mlrl-boomer decides for the setting), on ``device`` (both settings run there: complete heads of the example-wise
  loss solve each candidate's system on the device); a setting a device refused would run on the numpy reference,
  and say so;
* with ``numpy_line`` and a device other than numpy, the same mdhom fit on the numpy reference (the same model,
  bit for bit: the line that says what the device buys);
* mlrl-boomer with its own defaults (``auto`` feature binning: exact thresholds below 200000 examples; ``auto``
  label binning: equal-width bins of labels for the example-wise loss with complete heads; 32-bit statistics;
  no holdout), rule refinement and statistic update on ``threads`` threads;
* mlrl-boomer with mdhom's settings (the same feature bins, the same label binning, 64-bit statistics): the
  like-for-like line.

Seconds per rule: the fit's seconds over its rules (binning and, for mdhom, program builds included), and for mdhom
also the median of its rules' own times (``rule_times_``). The marginal seconds per rule, (fit of n rules - fit of
the default rule alone) / (n - 1), take what every fit pays once (binning, sorting, uploads) out of both sides' figure,
as a fit of many rules would; mdhom's two fits for it run after its first, so that its OpenCL programs are built (as
pyopencl's cache of built programs has them in a later process) and the difference is the rules' work (with, for
mdhom, what its first rule sets up: the search's buffers and kernels).
A separate profiled mdhom fit splits a rule's time into kernels, launches and transfers, and host work, as
``mdhom bench trees`` does for rounds.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mdhom.bench.boomer import (
    SETTINGS,
    boomer_params,
    boomer_version,
    fit_boomer,
    multilabel_scores,
    n_rules,
    predict_boomer,
)

FACTORS = 10


def make_multilabel(rows: int, features: int = 120, labels: int = 101, seed: int = 0,
                    test_rows: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, Y, X_test, Y_test): float32 features, uint8 labels (see the module docstring); train and test rows are
    drawn from one model with one seed."""
    if min(rows, features, labels) < 1 or test_rows < 0:
        raise ValueError(f"rows, features and labels must be >= 1 and test_rows >= 0 (got {rows}, {features}, "
                         f"{labels}, {test_rows})")
    rng = np.random.default_rng([seed, 10])
    mixing = rng.normal(size=(features, FACTORS)) * (rng.random((features, FACTORS)) < 0.3)
    weights = rng.normal(size=(FACTORS, labels))
    frequency = 0.6 * np.arange(1, labels + 1) ** -0.8
    n = rows + test_rows
    X = rng.normal(size=(n, features)) * rng.lognormal(0.0, 0.5, size=features)
    z = (X / X.std(axis=0)) @ mixing @ weights
    z += rng.normal(size=z.shape) * z.std(axis=0) * 0.3
    at = np.minimum(((1.0 - frequency) * rows).astype(np.intp), rows - 1)
    Y = (z > np.sort(z[:rows], axis=0)[at, np.arange(labels)]).astype(np.uint8)
    X = X.astype(np.float32)
    return X[:rows], Y[:rows], X[rows:], Y[rows:]


@dataclass
class RulesConfig:
    """One run of the benchmark; written into the JSON report."""

    rows: int = 20_000
    test_rows: int = 5_000
    features: int = 120
    labels: int = 101
    rules: int = 50  # per fit, the default rule included
    # examplewise-complete: label binning as mlrl-boomer decides (equal-width) on every line
    settings: list[str] = field(default_factory=lambda: ["labelwise-single", "examplewise-complete"])
    bins: int = 32  # mdhom's equal-width bins per feature (and mlrl-boomer's in the like-for-like line)
    device: str = "auto"  # mdhom's device
    precision: str | None = None  # mdhom's precision (None: as the estimator resolves it for the device)
    threads: int = 0  # mlrl-boomer's threads (0: every core)
    seed: int = 0
    profile_rules: int = 10  # rules of the extra, profiled mdhom fit (0: none; OpenCL devices only)
    anchors: bool = True  # run mlrl-boomer when it is installed
    numpy_line: bool = True  # also fit mdhom on the numpy reference when the device is another
    quick: bool = False

    @classmethod
    def quick_config(cls, **overrides: Any) -> RulesConfig:
        """The CI size: a second or two per system on numpy, no mlrl-boomer needed."""
        base = {"rows": 1500, "test_rows": 500, "features": 12, "labels": 6, "rules": 8, "device": "numpy",
                "profile_rules": 0, "quick": True}
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


def _result(system: str, setting: str, fit: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"system": system, "setting": setting}
    try:
        out.update(fit())
        out["status"] = "ok"
    except Exception as exc:  # one refusal or failure must not take the others down
        out.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
    return out


def _mdhom_params(config: RulesConfig, setting: str, rules: int | None = None) -> dict[str, Any]:
    return {**SETTINGS[setting], "max_rules": rules or config.rules, "random_state": config.seed,
            "feature_binning": ("equal-width", config.bins), "device": config.device, "precision": config.precision}


def _fit_mdhom(config: RulesConfig, setting: str, data: tuple, device: str | None = None) -> dict[str, Any]:
    from mdhom import RuleBoostClassifier
    from mdhom.rules.options import validate

    X, Y, Xt, Yt = data
    params = _mdhom_params(config, setting)
    if device is not None:
        params["device"] = device
    note = None
    try:
        validate(params)
    except ValueError as exc:  # a setting the device refuses runs on the numpy reference, and says so
        if params["device"] == "numpy":
            raise
        note = f"{exc}: ran on device='numpy'"
        params["device"] = "numpy"

    def timed(max_rules: int) -> tuple[Any, float]:
        t0 = time.perf_counter()
        est = RuleBoostClassifier(**{**params, "max_rules": max_rules}).fit(X, Y)
        return est, time.perf_counter() - t0

    est, fit = timed(params["max_rules"])
    rules = len(est.rules_) + 1
    times = est.rule_times_[1:] if len(est.rule_times_) > 1 else est.rule_times_
    fit_1 = timed(1)[1]
    warm = timed(params["max_rules"])[1] if est.device_key_ else fit  # numpy builds nothing: no second fit
    return {"params": {**params, "feature_binning": list(params["feature_binning"])}, "fit_seconds": fit,
            "rules": rules, "seconds_per_rule": fit / rules, "rule_median_seconds": float(np.median(times)),
            **_marginal(warm, fit_1, rules), "warm_fit_seconds": warm,
            "build_seconds": est.build_seconds_, "device": est.device_key_ or "numpy", "precision": est.precision_,
            "warnings": [note] if note else [], **multilabel_scores(est.predict(Xt), Yt)}


def _marginal(fit_n: float, fit_1: float, rules: int) -> dict[str, Any]:
    """The marginal seconds per rule of a fit of ``rules`` rules against a fit of the default rule alone (None when
    there is no rule after the default one, or the difference is not positive: timing noise on a tiny fit)."""
    m = (fit_n - fit_1) / (rules - 1) if rules > 1 else 0.0
    return {"default_rule_fit_seconds": fit_1, "marginal_seconds_per_rule": m if m > 0 else None}


def _fit_boomer(kwargs: dict[str, Any], data: tuple) -> dict[str, Any]:
    X, Y, Xt, Yt = data
    model, fit = fit_boomer(X, Y, kwargs)
    rules = n_rules(model) or kwargs["max_rules"]
    fit_1 = fit_boomer(X, Y, {**kwargs, "max_rules": 1})[1]
    return {"params": kwargs, "fit_seconds": fit, "rules": rules, "seconds_per_rule": fit / rules,
            **_marginal(fit, fit_1, rules), **multilabel_scores(predict_boomer(model, Xt), Yt)}


@contextlib.contextmanager
def record_rules() -> Iterator[Any]:
    """Within the block, a rule fit's device refinement runs with OpenCL profiling and its calls timed; yields the
    :class:`mdhom.bench.profile.KernelRecorder` (a rule starts with ``start``)."""
    from mdhom.bench.profile import KernelRecorder
    from mdhom.rules import device

    recorder = KernelRecorder(calls=("start", "restrict", "best", "best_batch", "add", "apply_head"), starts=("start",))
    original = device.DeviceRefinement.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        recorder.wrap(self)

    device.DeviceRefinement.__init__ = init
    try:
        yield recorder
    finally:
        device.DeviceRefinement.__init__ = original
        if recorder.backend is not None:
            recorder.mark()


def _profile(config: RulesConfig, setting: str, data: tuple) -> dict[str, Any]:
    from mdhom import RuleBoostClassifier
    from mdhom.bench.profile import summarize

    X, Y, _, _ = data
    with record_rules() as recorder:
        est = RuleBoostClassifier(**_mdhom_params(config, setting, config.profile_rules + 1)).fit(X, Y)
    if recorder.backend is None:
        return {"status": "unavailable", "reason": "the fit ran no OpenCL refinement"}
    return {"status": "ok", **summarize(list(est.rule_times_), recorder.rounds())}


def run_rules(config: RulesConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    t0 = time.perf_counter()
    data = make_multilabel(config.rows, config.features, config.labels, config.seed, config.test_rows)
    log(f"workload: {config.rows} x {config.features}, {config.labels} labels (label cardinality "
        f"{data[1].sum(axis=1).mean():.2f}), {config.test_rows} test rows, made in {time.perf_counter() - t0:.1f} s")
    version = boomer_version() if config.anchors else None
    results = []
    for setting in config.settings:
        systems: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("mdhom", lambda s=setting: _fit_mdhom(config, s, data))]
        if config.numpy_line and config.device != "numpy":
            systems.append(("mdhom, numpy reference", lambda s=setting: _fit_mdhom(config, s, data, "numpy")))
        if version is not None:
            base = {**SETTINGS[setting], "max_rules": config.rules, "random_state": config.seed}
            systems += [
                ("mlrl-boomer (its defaults)",
                 lambda b=base: _fit_boomer(boomer_params(b, same_as_mdhom=False, threads=config.threads), data)),
                ("mlrl-boomer (mdhom's settings)",
                 lambda b=base: _fit_boomer(boomer_params({**b, "feature_binning": ("equal-width", config.bins)},
                                                          threads=config.threads), data))]
        for name, fit in systems:
            log(f"{setting}: {name}: running")
            r = _result(name, setting, fit)
            results.append(r)
            log(f"{setting}: {name}: " + (f"{r['seconds_per_rule']:.4g} s/rule, marginal "
                                          f"{_fmt(r['marginal_seconds_per_rule'], '.4g', 0)}, Hamming "
                                          f"{r['hamming']:.4f}, micro-F1 {r['micro_f1']:.4f}"
                                          if r["status"] == "ok" else r["reason"]))
        mdhom = next(r for r in results if r["setting"] == setting and r["system"] == "mdhom")
        for r in results:
            if r["setting"] == setting and r["status"] == "ok" and mdhom["status"] == "ok":
                r["ratio_to_mdhom"] = r["seconds_per_rule"] / mdhom["seconds_per_rule"]
                if r["marginal_seconds_per_rule"] is not None and mdhom["marginal_seconds_per_rule"] is not None:
                    r["marginal_ratio_to_mdhom"] = r["marginal_seconds_per_rule"] / mdhom["marginal_seconds_per_rule"]
        if config.profile_rules > 0 and mdhom["status"] == "ok" and mdhom["device"] != "numpy":
            mdhom["profile"] = _profile(config, setting, data)
    from mdhom.bench.trees import machine_info, versions

    return {"benchmark": "rules", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "parameters": asdict(config),
            "machine": machine_info(), "versions": {**versions(), "mlrl-boomer": version},
            "anchors": "mlrl-boomer " + version if version else
            ("mlrl-boomer not installed" if config.anchors else "mlrl-boomer not run (--anchors none)"),
            "ratio_note": "ratio_to_mdhom = system's seconds per rule / mdhom's (2.0: twice as slow as mdhom); "
                          "marginal_ratio_to_mdhom: the same of marginal seconds per rule",
            "results": results}


def _fmt(value: float | None, spec: str, width: int = 10) -> str:
    return f"{(format(value, spec) if value is not None else '-'):>{width}}"


def format_rules(report: dict[str, Any]) -> str:
    from mdhom.bench.profile import format_profile

    p = report["parameters"]
    lines = [f"rules: {p['rows']} x {p['features']}, {p['labels']} labels, {p['rules']} rules, mdhom on "
             f"{p['device']} with {p['bins']} equal-width bins; anchors: {report['anchors']}",
             f"{'setting':<22}{'system':<32}{'s/rule':>10}{'median':>10}{'vs mdhom':>10}{'marginal':>10}"
             f"{'vs mdhom':>10}{'Hamming':>9}{'micro-F1':>9}"]
    lines.append("-" * len(lines[-1]))
    notes = []
    for r in report["results"]:
        if r["status"] != "ok":
            lines.append(f"{r['setting']:<22}{r['system']:<32}{r['status']:>10}")
            notes.append(f"  {r['setting']} {r['system']}: {r['reason']}")
            continue
        median = r.get("rule_median_seconds")
        notes += [f"  {r['setting']} {r['system']}: {w}" for w in r.get("warnings", [])]
        system = r["system"] + (f" ({r['precision']})" if r.get("precision") else "")
        lines.append(f"{r['setting']:<22}{system:<32}{r['seconds_per_rule']:>10.4g}"
                     f"{_fmt(median, '.4g')}{r.get('ratio_to_mdhom', 1.0):>10.3g}"
                     f"{_fmt(r.get('marginal_seconds_per_rule'), '.4g')}"
                     f"{_fmt(r.get('marginal_ratio_to_mdhom'), '.3g')}"
                     f"{r['hamming']:>9.4f}{r['micro_f1']:>9.4f}")
    lines.append("s/rule: fit seconds / rules (binning, builds included); median: mdhom's median rule (rules 2..n); "
                 "marginal: (fit of n rules - fit of the default rule) / (n - 1), mdhom's programs built")
    lines += notes
    for r in report["results"]:
        if r.get("profile"):
            lines += ["", format_profile(r["profile"], r.get("rule_median_seconds"), f"mdhom {r['setting']}", "rule")]
    return "\n".join(lines)
