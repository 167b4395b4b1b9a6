"""The end of every tune: kernel-level wins only count where they make training faster.

Each study times one kernel at one size class in isolation; whether the configurations make a boosting round
faster is another question (the learner builds kernels at its own sizes, launches them thousands of times per
round between host work, and one kernel's speed moves another's caches). So after the studies, the tuner trains
a few rounds of a real fit (a Higgs-shaped workload, in the learner's default precision and quantized) with
the candidate device file and with no stored configuration at all (``MDHOM_TUNED=0``, the heuristics): a
loss-guided fit and a depth-wise one, each at 63 bins and at the default ``max_bin=255`` (the histograms and the split
score are other code at 256 bins, tuned in size classes of their own), whose round times count as their geometric mean
(the two policies run the same kernels at other sizes: the H100's file from a loss-guided check alone made depth-wise
rounds 8% slower), and keeps a kernel's tuned configurations only where the round with them is faster: one kernel at
a time, in the order of the studies, each reverted to its heuristic configuration (stored as such, so that no vendor
default takes its place) when the round without its tuned entries is at least as fast. What is kept is reported as the
end-to-end speedup over the heuristics. A kernel is timed by the fits that look up its changed size classes (a
256-bin class by the fits at 255 bins). Kernels that run in no boosting round are judged the same way by the fits
they run in (:data:`CHECKS`): forest and chain kernels by forest and chain fits and predictions, the rule
refinement's kernels by the seconds per rule of two rule fits, the binning of raw rows by the seconds it takes to bin
the check's rows.

Measurements alternate between the variants compared and keep the fastest of several medians, so a burst of
other work on the machine does not decide a comparison.

A kernel's configuration changes its device time, not the host's work, and a GPU round is host-bound: its wall
time moves with the host's CPUs between fits (the H200 machine's vCPUs 1.3-1.8x apart), far more than a kernel
that got 1.2x faster moves it. So the boosting-round check also times the same fits' kernels (OpenCL profiling
events of every launch, summed per round: :func:`device_round_seconds`) and keeps a kernel's configurations where
either the round or its device time is faster by the margin. CPUs' rounds are judged by the round alone: their
kernels and the host share the cores. Layouts (``tree_layout_*``) change the host's work
too and are judged by the round alone. Where the fits' own repeats vary by more than the margin, round times must
differ by that much to decide anything (a win, or a round "no slower" beside a lower device time): a check on the
H200 machine had timed the same configurations at 7.3 and 8.7 ms a round, and by a 2% margin it dropped split-scan
configurations 1.9-2.9x faster at kernel level than the heuristic of the time without comparing their device time.
A win within that spread still counts where it is consistent: every repeat of the faster side beat every repeat of
the other by the margin (at least three repeats each; alternating, so a slow phase of the machine hits both): a
2-core Xeon's PoCL check, its fits varying 8%, had called the row-index layout's 41.71 against 44.96 ms noise, a
layout 1.21-1.24x faster in alternating fits.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import statistics
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mdhom import config_store, configs
from mdhom.tuning.workload import Workload

# a candidate must beat what it replaces by this much to stay: timing noise is not a win
MARGIN = 0.02
# host CPUs this far apart (the slowest over the fastest at a fixed Python loop) get a line in the check's trace: a
# GPU round is host-bound, and the H200 machine's vCPUs differed 1.6-2x, moving rounds between fits by as much
HOST_SPREAD = 1.25


@dataclass
class CheckResult:
    heuristic_seconds: float  # median seconds per round with MDHOM_TUNED=0
    tuned_seconds: float  # with the kept configurations
    kept: list[str]  # kernels whose tuned configurations stay
    dropped: list[str]  # kernels stored with their heuristic configurations: the tuned ones did not pay
    trace: list[str] = field(default_factory=list)
    unit: str = "round"  # what the seconds are per: a boosting round, a forest fit, a rule
    # kernels whose changed entries are of size classes the check's fits never look up: the studies' configurations
    # stay as found (timed side by side with the heuristic's), since timing fits that do not run them is noise
    unjudged: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.heuristic_seconds / self.tuned_seconds if self.tuned_seconds > 0 else float("nan")

    def summary(self) -> str:
        """The line a tune ends with: rounds with the heuristics and with what is stored, and what was kept."""
        unjudged = (f"; the studies' configurations of {', '.join(self.unjudged)} stored unjudged (not of the "
                    "check's fits' classes)") if self.unjudged else ""
        if math.isnan(self.heuristic_seconds):
            return f"end to end: nothing to time{unjudged or ' (every study kept its heuristic configuration)'}"
        return (f"end to end: {self.heuristic_seconds * 1e3:.2f} ms/{self.unit} with the heuristics, "
                f"{self.tuned_seconds * 1e3:.2f} with the stored configurations ({self.speedup:.2f}x); tuned "
                f"configurations kept for {', '.join(self.kept) or 'no kernel'}{unjudged}")


def _set_env(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextlib.contextmanager
def _env(**values: str | None) -> Iterator[None]:
    """The environment with ``values`` set (None: unset) for the block, as it was afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_env(values)
        yield
    finally:
        _set_env(saved)


def _fits(device: Any, work: Workload, data: tuple[Any, Any], profiled: bool = False,
          **params: Any) -> Iterator[tuple[Any, Any]]:
    """Each of ``work``'s fits of ``data`` on ``device`` (``params`` override its estimator parameters), as (fitted
    estimator, its :class:`mdhom.bench.profile.KernelRecorder` where ``profiled``, else None). Without a ``precision``
    in ``params`` each fit trains in every precision :func:`mdhom.tuning.layouts.precisions` names: the learner's
    default and quantized (a CPU's check had trained double alone, so the quantized classes a CPU tunes, the split
    score's int32 lanes 1.55-2.08x at kernel level on PoCL, were judged by fits that never ran them)."""
    import contextlib
    import warnings

    from mdhom import TreeBoostClassifier
    from mdhom.bench.profile import record_fit
    from mdhom.configs import TunedConfigWarning
    from mdhom.tuning.layouts import precisions

    X, y = data
    runs = [{}] if "precision" in params else [{"precision": p} for p in precisions(device)]
    for how in runs:
        for fit in work.fits():
            with warnings.catch_warnings(), (record_fit() if profiled else contextlib.nullcontext()) as rec:
                warnings.simplefilter("ignore", TunedConfigWarning)
                est = TreeBoostClassifier(**{**fit, **how, **params}, device=device).fit(X, y)
            yield est, rec


def fit_rounds(device: Any, work: Workload, data: tuple[Any, Any], profiled: bool = False,
               each: Callable[[Any], None] | None = None, **params: Any) -> tuple[float, Any]:
    """The geometric mean over ``work``'s fits (:func:`_fits`) of their median seconds per round (rounds 2..n) on
    ``device``, and the last fitted estimator (``each``: called with every fitted estimator). ``profiled``: kernel
    seconds per round instead, every launch's profiling events summed (:func:`mdhom.bench.profile.record_fit`;
    launches then wait for each other, so this is the device's work without its overlap with the host's), NaN where
    a fit recorded no profiled launch."""
    logs, est = [], None
    for est, rec in _fits(device, work, data, profiled, **params):
        if each is not None:
            each(est)
        if profiled:
            per = [sum(r["kernel_seconds"].values()) for r in rec.rounds()]
            if not per or not all(per):  # no profiled launch (a backend without profiling): nothing to compare
                return float("nan"), est
        else:
            per = list(est.round_times_)
        logs.append(math.log(statistics.median(per[1:] or per)))
    return math.exp(sum(logs) / len(logs)), est


def learner_seconds(device: Any, work: Workload) -> dict[str, float]:
    """Device seconds per kernel (its description's name) over rounds 2..n of ``work``'s fits (:func:`_fits`) of
    ``work.rows`` Higgs-shaped rows, every launch profiled: what a round spends in each kernel, by which a tune under
    a time budget orders and weighs its studies (:func:`mdhom.tuning.driver.ordered`)."""
    from collections import Counter

    seconds: Counter[str] = Counter()
    for _, rec in _fits(device, work, work.data(), profiled=True):
        for r in rec.rounds()[1:]:
            seconds.update(r["kernel_seconds"])
    return dict(seconds)


def fit_classes(device: Any, work: Workload, data: tuple[Any, Any]) -> dict[str, set[str]]:
    """The size classes of the device file in force that each kernel's configurations came from in ``work``'s fits
    (:func:`_fits`; their ``kernel_configs_`` sources, a build's role in parentheses dropped): a lookup happens when a
    fit builds its kernels, so two rounds a fit show them."""
    out: dict[str, set[str]] = {}
    for est, _ in _fits(device, work, data, n_estimators=2):
        for name, built in est.kernel_configs_.items():
            parts = str(built.get("source", "")).split()
            if len(parts) >= 3 and parts[0] == "tuned":
                out.setdefault(name.split(" (")[0], set()).add(parts[2])
    return out


def round_seconds(device: Any, work: Workload, data: tuple[Any, Any]) -> float:
    """Seconds per round of ``work`` on ``device`` (:func:`fit_rounds`)."""
    return fit_rounds(device, work, data)[0]


def device_round_seconds(device: Any, work: Workload, data: tuple[Any, Any]) -> float:
    """Kernel seconds per round of the same fits (:func:`fit_rounds` profiled)."""
    return fit_rounds(device, work, data, profiled=True)[0]


def judged_by_round_alone(kernel: str) -> bool:
    """Entries whose choice changes the host's work (layouts: the partition, the look-ahead): no device-time
    criterion for them."""
    return kernel.startswith("tree_layout_")


def as_heuristic(entry: dict[str, Any]) -> dict[str, Any]:
    """The study's entry with its baseline (the heuristic's configuration) as the configuration to use, marked as the
    heuristic kept (a lookup runs today's heuristic: :mod:`mdhom.configs`). An entry at its baseline already stays as
    it is, mark or none: a layout that won by forcing on every fit the layout the heuristic's fits ran some of equals
    its baseline and is not the heuristic (:func:`mdhom.tuning.layouts.layout_entries`)."""
    if entry["config"] == entry["default_config"]:
        return entry
    return {**entry, "config": dict(entry["default_config"]), "median_s": entry["default_s"], "heuristic": True}


def choose(entries: list[tuple[str, str, dict[str, Any], str | None]],
           keep: list[str]) -> list[tuple[str, str, dict[str, Any], str | None]]:
    """The entries to store: tuned configurations for the kernels in ``keep``, the heuristic's for the others."""
    return [(k, c, e if k in keep else as_heuristic(e), h) for k, c, e, h in entries]


def host_note(probe: dict[str, Any] | None) -> str | None:
    """The trace's line for a host whose CPUs differ by :data:`HOST_SPREAD` or more
    (:func:`mdhom.bench.trees.host_probe`), else None: the check's comparisons are then within that noise, whatever
    they say."""
    if not probe or probe["min_ms"] <= 0 or probe["max_ms"] / probe["min_ms"] < HOST_SPREAD:
        return None
    return (f"host CPUs differ {probe['max_ms'] / probe['min_ms']:.2f}x (a fixed Python loop {probe['min_ms']:.3g}-"
            f"{probe['max_ms']:.3g} ms across {probe['cpus']} CPUs): host-bound rounds move between fits by as much, "
            f"more than the {MARGIN:.0%} a kept configuration must win by")


def check(device: Any, entries: list[tuple[str, str, dict[str, Any], str | None]], work: Workload,
          echo: Callable[[str], None] = print,
          timer: Callable[[Any, Workload, Any], float] | None = None, data: Any = None,
          unit: str = "round", device_timer: Callable[[Any, Workload, Any], float] | None = None,
          classes_run: Callable[[Any, Workload, Any], dict[str, set[str]]] | None = None) -> CheckResult:
    """Which kernels' new entries pay end to end (see the module docstring). ``timer`` times one fit of ``data``
    (default: ``work.rows`` Higgs-shaped rows) under the environment in force (tests pass a model of the
    machine); ``device_timer``, the same fits' device seconds (default with the default timer on a GPU:
    :func:`device_round_seconds`; None on other devices and with another timer); ``classes_run``, the size classes
    each kernel's fits look up (default with the default timer: :func:`fit_classes`): a kernel none of whose changed
    classes is among them is not timed (fits that never run its entries would judge it by noise: a PoCL check had
    kept the logistic gradients for a 4-output class and the histogram for its 10M-row one) and goes in as its study
    found it."""
    from mdhom.bench.trees import host_probe

    if timer is None:
        # the device time speaks where a round is host-bound (GPUs); on a CPU the kernels and the host share the
        # cores, and the round is their work: a 2-core Xeon's PoCL check kept float64 whole-row histogram
        # configurations for a device time 1.03x lower (profiled, launches serialised) beside a round 1.03x slower,
        # whose fits then ran 1.10x slower than the heuristic's (36.2 against 33.0 ms a depth-wise round, alternating)
        gpu = getattr(device, "type", None) == "gpu"
        timer, device_timer = round_seconds, device_timer or (device_round_seconds if gpu else None)
        classes_run = classes_run or fit_classes
    if data is None:
        data = work.data()
    kernels = list(dict.fromkeys(k for k, _, _, _ in entries))
    # a kernel whose studies kept their heuristic's configuration everywhere has nothing to judge: timing it against
    # itself costs fits (the most of a budgeted tune's check, whose short studies measured the default alone)
    unchanged = [k for k in kernels if all(e["config"] == e["default_config"] for x, _, e, _ in entries if x == k)]
    if unchanged:
        echo(f"  {len(unchanged)} kernel(s) tuned to their heuristic's configurations, nothing to check: "
             f"{', '.join(unchanged)}")
        entries = [e for e in entries if e[0] not in unchanged]
        kernels = [k for k in kernels if k not in unchanged]
    unjudged: list[str] = []
    scope: dict[str, Workload] = {}  # each kernel's fits: those at the bins whose fits look up its changed classes
    if kernels and classes_run is not None:
        with tempfile.TemporaryDirectory(prefix="mdhom-e2e-classes-") as tmp:
            config_store.store_results(device, entries, Path(tmp))
            with _env(**{configs.TUNED_ENV: None, configs.TUNED_DIR_ENV: tmp}):
                ran = {b: classes_run(device, replace(work, tree_bins=(b,)), data) for b in work.tree_bins}
        changed = {k: {c for x, c, e, _ in entries if x == k and e["config"] != e["default_config"]} for k in kernels}
        runs = {k: tuple(b for b in work.tree_bins if changed[k] & ran[b].get(k, set())) for k in kernels}
        unjudged = [k for k in kernels if not runs[k]]
        scope = {k: replace(work, tree_bins=b) for k, b in runs.items() if b}
        if unjudged:
            echo(f"  {len(unjudged)} kernel(s) whose changed classes the check's fits do not look up, stored as their "
                 f"studies found them: " + ", ".join(f"{k} ({', '.join(sorted(changed[k]))})" for k in unjudged))
            entries = [e for e in entries if e[0] not in unjudged]
            kernels = [k for k in kernels if k not in unjudged]
    if not kernels:
        return CheckResult(math.nan, math.nan, [], unchanged, [], unit, unjudged)
    with tempfile.TemporaryDirectory(prefix="mdhom-e2e-") as tmp:
        def with_kernels(keep: list[str]) -> Path:
            d = Path(tmp, f"v{len(list(Path(tmp).iterdir()))}")
            d.mkdir()
            config_store.store_results(device, choose(entries, keep), d)
            return d

        def timed(directory: Path | None, how: Callable[[Any, Workload, Any], float] | None = None,
                  w: Workload = work) -> float:
            env = {configs.TUNED_ENV: "0"} if directory is None else {configs.TUNED_ENV: None,
                                                                      configs.TUNED_DIR_ENV: str(directory)}
            with _env(**env):
                return (how or timer)(device, w, data)

        spread: list[float] = []  # the fits' own noise: each round-time comparison's repeats, (max - min) / min
        last: list[list[float]] = [[], []]  # the last comparison's repeats, each side's

        def compare(a: Path | None, b: Path | None, how: Callable[[Any, Workload, Any], float] | None = None,
                    w: Workload = work) -> tuple[float, float]:
            """Fastest median of each, the two measured in turn (by ``how``, default ``timer``) on ``w``'s fits."""
            ta, tb = [], []
            for _ in range(w.repeats):
                ta.append(timed(a, how, w))
                tb.append(timed(b, how, w))
            if how is None and w.repeats > 1:
                spread.extend((max(t) - min(t)) / min(t) for t in (ta, tb) if min(t) > 0)
            last[:] = [ta, tb]
            return min(ta), min(tb)

        def consistent(faster: list[float], slower: list[float]) -> bool:
            """Whether every repeat of ``faster`` beat every repeat of ``slower`` by the margin (three each at
            least): a win that the repeats' spread does not explain."""
            return min(len(faster), len(slower)) >= 3 and max(faster) * (1.0 + MARGIN) < min(slower)

        def band() -> float:
            """What a round-time comparison must exceed to say anything: the margin, or the repeats' largest spread
            so far where the host is noisier (the module docstring's H200 check)."""
            return max([MARGIN, *spread])

        def device_times(a: Path | None, b: Path | None, what: str, w: Workload = work) -> tuple[float, float]:
            """``a``'s and ``b``'s device seconds (a line in the trace)."""
            da, db = compare(a, b, device_timer, w)
            trace.append(f"    {what}: device {da * 1e3:.2f} ms/{unit} against {db * 1e3:.2f}")
            return da, db

        def device_win(a: Path | None, b: Path | None, what: str, w: Workload = work) -> bool:
            """Whether ``a``'s device seconds beat ``b``'s by the margin."""
            da, db = device_times(a, b, what, w)
            return da < db * (1.0 - MARGIN)

        timed(None)  # builds and first-touch costs out of the way
        keep = list(kernels)
        current = with_kernels(keep)
        note = host_note(host_probe())
        trace = [note] if note else []
        base, best = compare(None, current)
        trace.append(f"heuristic {base * 1e3:.2f} ms/{unit}, all new configurations {best * 1e3:.2f} ms/{unit}")
        for k in kernels:
            trial_keep = [x for x in keep if x != k]
            trial = with_kernels(trial_keep)
            w = scope.get(k, work)
            with_k, without_k = compare(current, trial, w=w)
            steady = consistent(*last)
            at = "" if w.tree_bins == work.tree_bins else f" at {', '.join(map(str, w.tree_bins))} bins"
            line = f"({with_k * 1e3:.2f} ms tuned, {without_k * 1e3:.2f} without{at})"
            if without_k > with_k * (1.0 + band()) or steady:
                trace.append(f"  {k}: tuned kept {line}{' (every repeat faster)' if steady else ''}")
            elif (device_timer is not None and not judged_by_round_alone(k) and with_k <= without_k * (1.0 + band())
                  and device_win(current, trial, k, w)):  # the round no slower beyond its noise, the device's work less
                trace.append(f"  {k}: tuned kept for the device time {line}")
            else:  # no win worth its noise: the heuristic stays
                keep, current = trial_keep, trial
                trace.append(f"  {k}: heuristic kept {line}")
        base, best = compare(None, current)
        device_pair = None  # (stored, heuristics) device seconds of what is kept, once measured
        if keep and best > base * (1.0 - band()) and not consistent(last[1], last[0]):
            # what is kept does not beat the heuristics together in the round: only kernels whose device work it
            # lessens stay (no layout), where the round is no slower beyond its noise
            kernels_kept = [k for k in keep if not judged_by_round_alone(k)]
            if device_timer is not None and kernels_kept and best <= base * (1.0 + band()):
                candidate = current if kernels_kept == keep else with_kernels(kernels_kept)
                device_pair = device_times(candidate, None, "together")
            if device_pair is not None and device_pair[0] < device_pair[1] * (1.0 - MARGIN):
                if candidate is not current:
                    keep, current = kernels_kept, candidate
                    base, best = compare(None, current)
            else:
                trace.append(f"  together {best * 1e3:.2f} ms vs heuristic {base * 1e3:.2f} ms: heuristics kept")
                keep = []
        if band() > MARGIN:
            trace.append(f"the fits' repeats varied up to {band():.0%}: round times within that decided nothing")
        if device_timer is not None and keep:
            device_best, device_base = device_pair or compare(current, None, device_timer)
            trace.append(f"device time {device_base * 1e3:.2f} ms/{unit} with the heuristics, {device_best * 1e3:.2f} "
                         f"with the stored configurations ({device_base / device_best:.2f}x)")
    for line in trace:
        echo(line)
    return CheckResult(base, best, keep, [k for k in kernels if k not in keep] + unchanged, trace, unit, unjudged)


# ------------------------------------------------------------------------------------------------ forests
FOREST_PREFIXES = ("forest_", "ecc_")  # forests' and chains' kernels: judged by forest fits, not boosting rounds


def is_forest_kernel(kernel: str) -> bool:
    """Whether a kernel runs in a random forest's or a classifier chain ensemble's fit or prediction (only there)."""
    return kernel.startswith(FOREST_PREFIXES)


def forest_seconds(device: Any, work: Workload, data: tuple[Any, Any]) -> float:
    """Seconds of one random-forest fit (``work.rounds`` trees of depth ``work.depth`` + 2, sqrt features: the
    sampled level), one device prediction of its training rows (the walker's kernels), a fit of a quarter of
    the trees searching every feature (the dense level: ``max_features=None``) and a classifier chain ensemble
    (8 chains x 4 trees, six labels) fitted on a hundredth of the rows and predicting all of them (the chains'
    batched forests and ``ecc_walk``), on ``device``: what the forest kernels' configurations must make faster
    to be kept."""
    import time
    import warnings

    from mdhom import ClassifierChainEnsemble, RandomForestClassifier
    from mdhom.configs import TunedConfigWarning
    from mdhom.forests.walker import ForestWalker

    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TunedConfigWarning)
        t0 = time.perf_counter()
        est = RandomForestClassifier(n_estimators=work.rounds, max_depth=work.depth + 2, max_bin=work.forest_bins,
                                     random_state=0, device=device).fit(X, y)
        fit = time.perf_counter() - t0
        walker = ForestWalker(_device(device), est._forest)
        walker.tree_sums(X[:1])  # builds out of the timing
        t0 = time.perf_counter()
        walker.tree_sums(np.asarray(X, np.float64))
        RandomForestClassifier(n_estimators=max(1, work.rounds // 4), max_depth=work.depth, max_features=None,
                               max_bin=work.forest_bins, random_state=0, device=device).fit(X, y)
        Y = (X[:, :6] + X[:, 6:12] > 0).astype(np.int32)
        n_fit = max(200, len(X) // 100)
        ecc = ClassifierChainEnsemble(n_chains=8, n_estimators=4, max_depth=work.depth, max_bin=work.forest_bins,
                                      random_state=0, device=device).fit(X[:n_fit], Y[:n_fit])
        ecc.predict_proba(X)  # rows x 192 trees (8 chains x 4 trees x 6 positions): the device walk
    return fit + time.perf_counter() - t0  # the first fit, the prediction, the dense-level fit and the chains


def _device(device: Any) -> Any:
    from mdhom.devices import get_device

    return get_device(device)


def check_forests(device: Any, entries: list[tuple[str, str, dict[str, Any], str | None]], work: Workload,
                  echo: Callable[[str], None] = print) -> CheckResult:
    """:func:`check` of the forest kernels' entries on forest fits and predictions (:func:`forest_seconds`)."""
    return check(device, entries, work, echo, timer=forest_seconds, unit="fit")


# ------------------------------------------------------------------------------------------------ rules
RULE_PREFIXES = ("rule_", "tree_split_score_rule_")  # the rule refinement's kernels: judged by rule fits


def is_rule_kernel(kernel: str) -> bool:
    """Whether a kernel runs in a rule fit (and only there: the split scan it shares with the trees is judged by
    boosting rounds)."""
    return kernel.startswith(RULE_PREFIXES)


def rule_data(work: Workload) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """The multi-label sets of the rule check: (X, Y) of the label-wise fit and of the coupled one."""
    from mdhom.bench.rules import make_multilabel

    r = work.rules
    return (make_multilabel(r.rows, r.features, r.labels, 0)[:2],
            make_multilabel(r.coupled_rows, r.features, r.coupled_labels, 1)[:2])


def rule_seconds(device: Any, work: Workload, data: tuple[tuple[Any, Any], tuple[Any, Any]]) -> float:
    """The geometric mean of the median seconds per rule (rules 2..n) of a label-wise fit with single-label heads
    and an example-wise fit with complete heads (label binning as mlrl-boomer decides) on ``device``: what the
    rule kernels' configurations must make faster to be kept."""
    import warnings

    from mdhom import RuleBoostClassifier
    from mdhom.bench.boomer import SETTINGS
    from mdhom.configs import TunedConfigWarning

    r = work.rules
    fits = ((data[0], SETTINGS["labelwise-single"], r.rules), (data[1], SETTINGS["examplewise-complete"],
                                                               r.coupled_rules))
    logs = []
    for (X, Y), setting, rules in fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TunedConfigWarning)
            est = RuleBoostClassifier(**setting, max_rules=rules, feature_binning=("equal-width", r.bins),
                                      random_state=0, device=device).fit(X, Y)
        times = list(est.rule_times_[1:]) or list(est.rule_times_)
        logs.append(math.log(max(statistics.median(times), 1e-9)))
    return math.exp(sum(logs) / len(logs))


def check_rules(device: Any, entries: list[tuple[str, str, dict[str, Any], str | None]], work: Workload,
                echo: Callable[[str], None] = print) -> CheckResult:
    """:func:`check` of the rule kernels' entries on rule fits (:func:`rule_seconds`)."""
    return check(device, entries, work, echo, timer=rule_seconds, data=rule_data(work), unit="rule")


# ------------------------------------------------------------------------------------------------ binning
def is_binning_kernel(kernel: str) -> bool:
    """Whether a kernel maps raw rows to bins (the binning's specs, :data:`mdhom.components.binning.SPECS`: rows x
    features or features x rows): once per matrix a fit loads or a prediction bins, in no boosting round.
    Judged by boosting rounds, its entries were kept or dropped by the rounds' noise (H200: a configuration that bins
    1M rows 2.9x faster than the heuristic's was dropped)."""
    from mdhom.components.binning import SPECS

    return any(kernel == spec.name for spec in SPECS)


def binning_seconds(device: Any, work: Workload, data: tuple[Any, Any]) -> float:
    """Seconds to bin the check's rows on ``device`` in both orders of the bins and from float64 and float32 rows
    (the learners bin float32 rows as they are; each variant's configuration moves only its own part), the rows
    already on the device: per variant the median device time (profiling events) of five passes after a first (the
    build out of the timing). What the binning's configurations must make faster to be kept. Device time, not the
    host's clock around each pass: on the H200's host that clock's repeats varied up to 44%, which rejected
    configurations binning 1.55x faster (a noise band the wins had to beat)."""
    import warnings

    import pyopencl.array as cl_array

    from mdhom.components.binning import DeviceBinner
    from mdhom.configs import TunedConfigWarning
    from mdhom.learn.binning import BinMapper, sample_rows

    X = np.ascontiguousarray(data[0], np.float64)
    mapper = BinMapper(work.forest_bins).fit(X, None, sample_rows(X.shape[0], 200_000, 0))
    total, rows = 0.0, {}
    for dtype, feature_major in itertools.product((np.float64, np.float32), (False, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TunedConfigWarning)
            binner = DeviceBinner(mapper, device, dtype, feature_major, rows=X.shape[0])
        q = binner.queue  # the device's: the rows go there once in each type
        x = rows.get(dtype)
        if x is None:
            x = rows[dtype] = cl_array.to_device(q, X.astype(dtype, copy=False))
        binner.launch(x).kernel_seconds()
        total += statistics.median(binner.launch(x).kernel_seconds() for _ in range(5))
    return total


def check_binning(device: Any, entries: list[tuple[str, str, dict[str, Any], str | None]], work: Workload,
                  echo: Callable[[str], None] = print) -> CheckResult:
    """:func:`check` of the binning kernels' entries on the binning of the check's rows (:func:`binning_seconds`)."""
    return check(device, entries, work, echo, timer=binning_seconds, unit="binning")


# which fits judge a kernel's entries: (what the check times, whether a kernel belongs to it, the check); a kernel
# goes to the first that claims it
CHECKS: tuple[tuple[str, Callable[[str], bool], Callable[..., CheckResult]], ...] = (
    ("forest fits with the new forest configurations", is_forest_kernel, check_forests),
    ("rule fits with the new rule configurations", is_rule_kernel, check_rules),
    ("the binning of the rows with the new binning configurations", is_binning_kernel, check_binning),
    ("training rounds with the new configurations", lambda kernel: True, check),
)


def check_passes(device: Any, work: Workload, kernels: Iterable[str]) -> list[tuple[float, set[str]]]:
    """The seconds of one pass over the forest check's fits and one over the rule check's, each with those of
    ``kernels`` it will judge, for the checks that will judge any: what :func:`mdhom.tuning.driver.check_share` keeps
    of a budget for them (the boosting rounds' pass is the profiled one that orders the studies). The pass builds the
    fits' programs, as the check's first pass does."""
    import time

    names = set(kernels)
    out = []
    for claims, timer, data in ((is_forest_kernel, forest_seconds, work.data),
                                (is_rule_kernel, rule_seconds, lambda: rule_data(work))):
        judged = {k for k in names if claims(k)}
        if judged:
            rows = data()
            t0 = time.perf_counter()
            timer(device, work, rows)
            out.append((time.perf_counter() - t0, judged))
    return out
