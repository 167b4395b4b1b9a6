"""Tune a device: every (kernel, size class) study in turn, under a trial and a time budget, then one write.

The device file is written once, atomically, after every study ran. An interrupt (Ctrl-C) leaves the file
on disk as it was; the studies keep their trials in Optuna storage, so running the same command again
resumes them and finishes quickly.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdhom import config_store, configs
from mdhom.tuning.measure import LiveRunner, Runner
from mdhom.tuning.space import SearchSpace
from mdhom.tuning.study import StudyResult, run_study

FULL_TRIALS = 60
QUICK_TRIALS = 12
# Under --minutes the studies run until this share of the budget, the layouts' training rounds until the next; the
# end-to-end check takes the rest (it is not cut short: it decides what is stored) and reports its own time
STUDY_SHARE, LAYOUT_SHARE = 0.6, 0.2
# ... or more, as its fits take (check_share), up to this share, the studies' and layouts' shares shrunk in proportion
MAX_CHECK_SHARE = 0.5


def check_share(passes: Sequence[tuple[float, int]], repeats: int, total_seconds: float) -> float:
    """The share of a ``total_seconds`` budget to keep for the end-to-end check: what the studies and layouts leave
    (1 - STUDY_SHARE - LAYOUT_SHARE), or what the check will take where that is more, up to MAX_CHECK_SHARE. Each of
    its parts (boosting rounds, forest fits, rule fits: ``passes``, the seconds of a pass over its fits and the
    kernels it judges) times its fits once to warm up, then ``repeats`` times each way for the heuristics against all
    new configurations, once per kernel it judges (at most that many) and once more at the end. With fits at 63 and
    255 bins a PoCL check took 4.3 minutes of a 14-minute tune that had kept it 2.8; the forests' and rules' checks,
    not counted then, made the 2-core Xeon's tunes of their kernels run 15.2, 11.8 and 17.0 minutes of 14, 9 and 14."""
    need = sum(seconds * (1 + 2 * repeats * (kernels + 2)) for seconds, kernels in passes)
    rest = 1.0 - STUDY_SHARE - LAYOUT_SHARE
    return min(MAX_CHECK_SHARE, max(rest, need / total_seconds)) if total_seconds > 0 else rest
# the weight of a study of a kernel the learner's rounds do not run (another learner's, the library's examples),
# as a fraction of an average study of the kernels they run
UNSEEN_WEIGHT = 0.02


@dataclass
class Plan:
    """One study to run."""

    kernel: Any  # TunableKernel
    size_class: str
    sizes: dict[str, int]


def versions(device: Any) -> dict[str, str]:
    import optuna
    import pyopencl

    import mdhom

    return {"mdhom": mdhom.__version__, "pyopencl": pyopencl.VERSION_TEXT, "optuna": optuna.__version__,
            "driver": device.driver_version}


def plan(kernel_names: Iterable[str] | None = None, quick: bool = False, device: Any = None) -> list[Plan]:
    """The (kernel, size class) studies to run; with a ``device``, only the classes that apply to it."""
    from mdhom import tunable

    known = tunable.registered()
    names = list(kernel_names) if kernel_names else sorted(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [Plan(known[n], c, dict(s)) for n in names for c, s in known[n].classes(quick, device).items()]


def ordered(todo: list[Plan], seconds: Mapping[str, float]) -> list[tuple[Plan, float]]:
    """The studies in the order a time budget serves them, each with its weight (its share of the time left is its
    weight over the weights of the studies still to run): first the kernels a learner's round spends device time
    in (``seconds``, by kernel name: :func:`mdhom.tuning.endtoend.learner_seconds`), the heaviest first, each
    weighing that time shared over its size classes; then the kernels the round does not run, in the planned order,
    weighing :data:`UNSEEN_WEIGHT` of an average study of the others. In name order, a 3-minute tune of a 2-core
    PoCL spent its minutes on the library's example kernels and starved 163 of its 171 studies, the tree learner's
    every one among them."""
    per_kernel = Counter(p.kernel.name for p in todo)
    spent = {p.kernel.name: float(seconds.get(p.kernel.name, 0.0)) for p in todo}
    seen = [p for p in todo if spent[p.kernel.name] > 0]
    unseen = UNSEEN_WEIGHT * (sum(spent[p.kernel.name] / per_kernel[p.kernel.name] for p in seen) / len(seen)
                              if seen else 1.0)
    weighed = [(p, spent[p.kernel.name] / per_kernel[p.kernel.name] if spent[p.kernel.name] > 0 else unseen)
               for p in todo]
    return sorted(weighed, key=lambda pw: -spent[pw[0].kernel.name])  # stable: the planned order within a kernel


def tune_device(
    device: Any,
    kernels: Iterable[str] | None = None,
    *,
    trials: int | None = None,
    minutes: float | None = None,
    quick: bool = False,
    storage: str | None = None,
    directory: Path | None = None,
    seed: int = 0,
    sampler: str = "tpe",
    runner_factory: Callable[[Any, Any, dict[str, int]], Runner] | None = None,
    echo: Callable[[str], None] = print,
    progress_bar: bool = True,
    write: bool = True,
    confirm: bool = True,
    end_to_end: Any = None,
    priority: Mapping[str, float] | None = None,
) -> tuple[list[StudyResult], Path | None]:
    """Tune every planned (kernel, size class) on ``device``; return the results and the file written.

    ``runner_factory(kernel, device, sizes)`` makes the measurement back end (default: a live runner);
    tests pass a replay runner. ``minutes`` is the budget for the whole tune: the studies run until
    :data:`STUDY_SHARE` of it, in the order and with the shares of :func:`ordered` by ``priority`` (device seconds
    per kernel of a learner's round; a live tune measures them with :func:`mdhom.tuning.endtoend.learner_seconds`),
    and a study whose turn comes after that runs not at all (less where the check's fits will take more than the
    rest: :func:`check_share`); then the layouts until :data:`LAYOUT_SHARE` more, and
    in what they leave of it the studies of the variants that the quantized layout found builds where the studies
    ran others (:func:`_new_variant_plans`); then the end-to-end check. With ``confirm`` (and a runner that can
    ``retime``), the best configuration and the default are timed again side by side and those times are reported
    and stored; should the default then be the faster one, the default is stored. ``end_to_end`` (a
    :class:`mdhom.tuning.workload.Workload`) trains with the new configurations and without, and stores tuned
    configurations only for the kernels whose configurations pay (:mod:`mdhom.tuning.endtoend`); the others are
    stored with their heuristic's.
    """
    if device.checker:
        raise ValueError(f"{device.key} is a checker (simulator): its timings mean nothing, tune a real device")
    from mdhom.trees.layouts import is_layout

    budget = trials or (QUICK_TRIALS if quick else FULL_TRIALS)
    names = None if kernels is None else list(kernels)
    layouts = None if names is None else [k for k in names if is_layout(k)]
    studied = None if names is None else [k for k in names if not is_layout(k)]
    todo = [] if studied == [] else plan(studied, quick, device)
    make_runner = runner_factory or (
        lambda k, d, s: LiveRunner(k, d, s, repeats=5 if quick else 9, warmup=1 if quick else 2)
    )
    start = time.monotonic()
    checking = end_to_end is not None
    deadline = layout_deadline = None
    total = 0.0
    passes: list[tuple[float, set[str]]] = []  # the check's parts: a pass's seconds, the kernels it would judge
    rounds_first = False  # whether passes[0] is the boosting rounds' pass (which also judges the layout)
    weights = [1.0] * len(todo)
    if minutes is not None:
        total = 60.0 * minutes
        share = 1.0 - STUDY_SHARE - LAYOUT_SHARE if checking else 0.0
        if priority is None and runner_factory is None and todo:
            from mdhom.tuning.endtoend import check_passes, learner_seconds
            from mdhom.tuning.workload import Workload

            work = end_to_end or Workload.for_tune(quick, device.type == "gpu")
            try:
                t0 = time.monotonic()
                priority = learner_seconds(device, work)
                judged = {p.kernel.name for p in todo if priority.get(p.kernel.name, 0.0) > 0}
                # the boosting rounds' pass, and the forest and rule fits' where their kernels are tuned
                passes = [(time.monotonic() - t0, judged)] if judged else []
                rounds_first = bool(judged)
                if checking:
                    passes += check_passes(device, work, {p.kernel.name for p in todo})
                if passes:  # else the check times no fit: the default share
                    share = check_share([(s, len(k)) for s, k in passes], work.repeats, total)
                    if share > 1.0 - STUDY_SHARE - LAYOUT_SHARE:
                        echo(f"the end-to-end check's fits take {share:.0%} of --minutes {minutes:g}: the studies "
                             "and layouts get the rest")
            except Exception as exc:  # noqa: BLE001 - the order is a refinement: the tune goes on without it
                echo(f"the learner's rounds could not be profiled ({type(exc).__name__}: {exc}); the studies run in "
                     "the planned order, the budget shared evenly")
        before_check = 1.0 - share
        studies = before_check - (LAYOUT_SHARE * before_check / (STUDY_SHARE + LAYOUT_SHARE) if checking else 0.0)
        deadline = start + total * (studies if checking and layouts != [] else before_check)
        layout_deadline = start + total * before_check
        if priority is not None:
            todo, weights = (list(x) for x in zip(*ordered(todo, priority), strict=True)) if todo else ([], [])
    hashes: dict[str, str] = {}

    def run(plans: list[Plan], weights: list[float], deadline: float | None) -> tuple[list[StudyResult], list[Plan]]:
        """The studies of ``plans`` in turn, each its weight's share of the time left until ``deadline``; those
        whose turn comes after it are returned, not run."""
        done: list[StudyResult] = []
        for i, p in enumerate(plans):
            timeout = share_end = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:  # no time for it: not even its inputs are made
                    return done, plans[i:]
                timeout = left * weights[i] / sum(weights[i:])
                share_end = time.monotonic() + timeout
            desc = p.kernel.describe(p.sizes)
            h = configs.description_hash(desc)
            hashes[f"{p.kernel.name}/{p.size_class}"] = h
            dims = p.kernel.dim_sizes(p.sizes)
            space = SearchSpace(desc, device, dims, fixed=p.kernel.fixed_at(p.sizes),
                                baseline=p.kernel.baseline_config(device, p.sizes))
            seeds = _seeds(space, config_store.stored_config(device, p.kernel.name, p.size_class, directory))
            label = f"{p.kernel.name} {p.size_class}"
            bar = _Bar(label, budget, enabled=progress_bar)
            try:
                runner = make_runner(p.kernel, device, p.sizes)
                res = run_study(
                    space, runner, kernel=p.kernel.name, size_class=p.size_class, device_key=device.key,
                    desc_hash=h, budget=budget, timeout=timeout, storage=storage, sampler=sampler, seed=seed,
                    progress=bar.update, seeds=seeds,
                )
            finally:
                bar.close()
            if confirm and hasattr(runner, "retime") and res.config is not None and res.default_seconds is not None:
                _confirm(runner, res, until=share_end)
            done.append(res)
            echo(format_result(res))
        return done, []

    results, skipped = run(todo, weights, deadline)
    if skipped:
        names = list(dict.fromkeys(p.kernel.name for p in skipped))
        order = " (run in the order of the learner's round, its heaviest kernels first)" if priority is not None else ""
        echo(f"{len(skipped)} of {len(todo)} studies had no time left within --minutes {minutes:g}{order}: "
             f"{', '.join(names)}; give more minutes, or name them with --kernels")
    studied_at = time.monotonic()
    path = None
    if write:
        stamp = config_store.now_iso()
        vers = versions(device)

        def entries_of(done: list[StudyResult]) -> list:
            return [(r.kernel, r.size_class, r.entry(vers, stamp), hashes[f"{r.kernel}/{r.size_class}"])
                    for r in done if r.config is not None]

        entries = entries_of(results)
        unchecked = []
        varied = 0.0  # seconds of the studies of the variants that the layouts found build
        if end_to_end is not None and layouts != []:
            from mdhom.tuning.layouts import layout_entries

            echo("layouts: training rounds of each of the tree backend's layouts")
            laid = layout_deadline  # the layouts' own, later by what the check will not take of its share
            if layout_deadline is not None and passes:
                laid = max(layout_deadline, start + total * (1.0 - check_share(
                    rejudged(passes, results, rounds_first), end_to_end.repeats, total)))
            found = layout_entries(device, end_to_end, vers, stamp, echo, only=layouts, deadline=laid)
            # other precisions' layouts were compared end to end by their own stage, and go in as it chose
            checked = checked_layout(device)
            entries += [e for e in found if e[0] == checked]
            unchecked = [e for e in found if e[0] != checked]
            again = _new_variant_plans(todo, device, quick, found)
            if again:  # in what the layouts left of their share: the check keeps its own
                t0 = time.monotonic()
                variants = ", ".join(dict.fromkeys(p.kernel.name for p in again))
                echo(f"the tuned layout builds other variants of {variants}: tuning those")
                try:
                    more, _ = run(again, [1.0] * len(again), layout_deadline)
                except Exception as exc:  # noqa: BLE001 - what the tune found so far is still stored
                    echo(f"  stopped ({type(exc).__name__}: {exc})")
                    more = []
                todo = todo + again[:len(more)]
                results += more
                entries += entries_of(more)
                varied = time.monotonic() - t0
        laid_out = time.monotonic()
        if entries and end_to_end is not None:
            entries, _ = checked_entries(device, entries, end_to_end, echo)
        entries += unchecked
        if minutes is not None:
            end = time.monotonic()
            again_text = f", the layout's variants {varied / 60:.1f}" if varied else ""
            echo(f"the tune took {(end - start) / 60:.1f} of its {minutes:g} minutes: studies "
                 f"{(studied_at - start) / 60:.1f}, layouts {(laid_out - studied_at - varied) / 60:.1f}{again_text}, "
                 f"end-to-end check {(end - laid_out) / 60:.1f}")
        if entries:
            path = config_store.store_results(device, entries, directory, stale=stale_entry)
            _say_variants_changed(todo, device, quick, echo)
    return results, path


def _seeds(space: SearchSpace, stored: dict[str, int] | None) -> list[dict[str, int]]:
    """The stored configuration as the study's warm start, where the search space can build it: its parameters that
    the space still has, the default's for those it did not have (a switch added since); none where it is the
    default or the space rejects it."""
    if stored is None:
        return []
    names = {q.name for q in space.parameters}
    seed = {**space.default, **{k: v for k, v in stored.items() if k in names}, **space.fixed}
    return [] if seed == space.default or space.check(seed) is not None else [seed]


def _new_variant_plans(todo: list[Plan], device: Any, quick: bool, found: list) -> list[Plan]:
    """The studies of the variants that the layouts just found build, where the studies ran others (``Tuning.applies``
    reads the stored layout: a tune that stores a layout reading rows through the row index had tuned the whole-row
    histogram of moved rows, and every quantized fit then warned that its entries are not usable): the tuned
    kernels' classes that apply under the found layouts, each forced for its own precision's fits (the float64
    whole-row histogram's classes follow the float64 layout, the quantized kernels' the quantized one), and were not
    studied."""
    import contextlib

    from mdhom.trees.layouts import PRECISIONS, Layout, forcing, kernel_name

    chosen = [(p, e[2]["config"]) for e in found for p in PRECISIONS if e[0] == kernel_name(p)]
    if not chosen:
        return []
    with contextlib.ExitStack() as stack:
        for precision, config in chosen:
            stack.enter_context(forcing(Layout.of(config), precision))
        return _unstudied(todo, device, quick)


def _unstudied(todo: list[Plan], device: Any, quick: bool) -> list[Plan]:
    """The classes of the studied kernels whose classes follow the layout (``Tuning.applies``) that apply under the
    layout in force and that ``todo`` did not study."""
    studied = {(p.kernel.name, p.size_class) for p in todo}
    kernels = {p.kernel.name: p.kernel for p in todo if p.kernel.applies is not None}
    return [Plan(k, c, dict(sz)) for k in kernels.values() for c, sz in k.classes(quick, device).items()
            if (k.name, c) not in studied]


def _say_variants_changed(todo: list, device: Any, quick: bool, echo: Callable[[str], None]) -> None:
    """A size class may be the variant of the device's layout (``Tuning.applies``): where this tune stored a layout
    that builds other variants than the kernel studies ran (the whole-row histogram of moved rows or of the row
    index), those studies tuned code the fits no longer build; say which kernels to tune again."""
    stale = sorted({p.kernel.name for p in _unstudied(todo, device, quick)})
    if stale:
        echo(f"the tuned layout builds other variants of {', '.join(stale)}: run `mdhom tune --device {device.key} "
             f"--kernels {' '.join(stale)}` again to tune them")


def rejudged(passes: Sequence[tuple[float, set[str]]], results: Sequence[StudyResult],
             rounds_first: bool = True) -> list[tuple[float, int]]:
    """The check's parts as :func:`check_share` counts them once the studies are done: each judges only the kernels
    whose studies found another configuration than the heuristic's (the check times no kernel kept at its heuristic),
    and the boosting rounds' part (the first, where ``rounds_first``: it is left out where no kernel of the rounds
    was tuned) the layout too. Up front every tuned kernel counts: a 6-minute tune of
    the H100 host's 16-core PoCL kept half the minutes for a check that took 0.9 of them (one kernel of 23 changed)
    and had no time left for the layout of the precision its fits train in."""
    changed = {r.kernel for r in results if r.config is not None and r.config != r.default_config}
    return [(seconds, len(kernels & changed) + int(rounds_first and i == 0))
            for i, (seconds, kernels) in enumerate(passes)]


def checked_entries(device: Any, entries: list, work: Any, echo: Callable[[str], None] = print
                    ) -> tuple[list, list[str]]:
    """``entries`` as the end-to-end checks keep them (what does not pay goes in with its heuristic's
    configuration), and the kernels kept: each kernel judged by the fits it runs in (:data:`endtoend.CHECKS`:
    forest kernels by forest fits and predictions, rule kernels by rule fits, the binning by binning the check's rows,
    the rest by boosting rounds), since fits it does not run in would keep or drop it by noise."""
    from mdhom.tuning.endtoend import CHECKS, choose

    groups: list[list] = [[] for _ in CHECKS]
    for e in entries:
        groups[next(i for i, (_, claims, _) in enumerate(CHECKS) if claims(e[0]))].append(e)
    out: list = []
    kept: list[str] = []
    for (what, _, checker), part in zip(CHECKS, groups, strict=True):
        if part:
            echo(f"end-to-end check: {what} against the heuristics")
            res = checker(device, part, work, echo)
            out += choose(part, res.kept + res.unjudged)
            kept += res.kept
            echo(res.summary())
    return out, kept


def checked_layout(device: Any) -> str:
    """The layout the end-to-end check can judge: that of the learner's default precision on ``device``, the
    precision its fits train in."""
    from mdhom.trees.estimators import resolve_precision
    from mdhom.trees.layouts import kernel_name

    return kernel_name(resolve_precision(device, None))


def recheck(device: Any, work: Any, directory: Path | None = None,
            echo: Callable[[str], None] = print) -> tuple[list[str], Path]:
    """The end-to-end check alone, on the entries the device's tuned file holds (its tuned configurations against
    their heuristics' :mod:`mdhom.tuning.endtoend`), without new studies: for a file tuned before the check
    timed what it times now. Stores what pays, as a tune would; returns the kernels kept and the file."""
    from mdhom.trees.layouts import is_layout

    hit = configs.find_device_file(device.key)
    if hit is None:
        raise ValueError(f"{device.key} has no tuned-config file to check; run `mdhom tune` first")
    path, doc = hit
    checked = checked_layout(device)
    entries = [(k, c, e, configs.class_hash(body, c)) for k, body in doc["kernels"].items()
               if not is_layout(k) or k == checked
               for c, e in body["classes"].items() if "default_config" in e and "default_s" in e]
    if not entries:
        raise ValueError(f"{path} holds no tuned entry with its heuristic's configuration to check against")
    echo(f"end-to-end check of {path}")
    chosen, kept = checked_entries(device, entries, work, echo)
    return kept, config_store.store_results(device, chosen, directory, stale=stale_entry)


def stale_entry(kernel: str, stored_hash: str | None) -> bool:
    """Whether a stored kernel entry is of code no longer shipped: a kernel no longer registered, or a description
    hash that no size class of the registered kernel has now (a configuration tuned for an older version)."""
    from mdhom import tunable
    from mdhom.trees.layouts import LAYOUT_HASH, is_layout

    if is_layout(kernel):
        return stored_hash != LAYOUT_HASH
    known = tunable.registered()
    if kernel not in known:
        return True
    if stored_hash is None:
        return False
    k = known[kernel]
    current = {configs.description_hash(k.describe(dict(s))) for quick in (False, True)
               for s in k.classes(quick).values()}
    return stored_hash not in current


def _confirm(runner: Any, res: StudyResult, rounds: int = 5, until: float | None = None) -> None:
    """Re-time best and default side by side; each gets the fastest of its per-round medians, so a round
    disturbed by other work on a shared machine does not decide the comparison.

    ``until`` (``time.monotonic()``), the end of the study's share of ``--minutes``: as many rounds as fit before
    it, at least one where the study found another configuration (its best was the minimum of noisy medians), none
    where it kept the default (nothing to decide). Five rounds of a PoCL predictor class of a second a run had taken
    a minute past a 6-minute tune; an H200 tune that went on past its 3 minutes was killed before it wrote its file."""
    import statistics

    if until is not None:
        repeats = int(getattr(runner, "repeats", 1))
        timed = [res.seconds, res.default_seconds] if res.config != res.default_config else [res.default_seconds]
        per_round = repeats * sum(t or 0.0 for t in timed)
        fit = int((until - time.monotonic()) / per_round) if per_round > 0 else rounds
        if fit < 1 and res.config == res.default_config:
            return
        rounds = max(1, min(rounds, fit))

    def robust(samples: list[float]) -> float:
        n = max(1, len(samples) // rounds)
        return min(statistics.median(samples[i:i + n]) for i in range(0, len(samples), n))

    if res.config == res.default_config:
        (t,) = runner.retime([res.config], rounds=rounds)
        res.seconds = res.default_seconds = robust(t)
        return
    t_best, t_def = runner.retime([res.config, res.default_config], rounds=rounds)
    res.seconds, res.default_seconds = robust(t_best), robust(t_def)
    if res.default_seconds <= res.seconds:
        res.config, res.seconds = dict(res.default_config), res.default_seconds


def format_result(r: StudyResult) -> str:
    def ms(s: float | None) -> str:
        return "      -   " if s is None else f"{s * 1e3:9.3f}ms"

    sp = r.speedup
    return (
        f"{r.kernel:<16} {r.size_class:<12} default {ms(r.default_seconds)}  tuned {ms(r.seconds)}  "
        f"speedup {'-' if sp is None else f'{sp:5.2f}x'}  ({r.measured} configs, {r.failed} failed, "
        f"{r.pruned} rejected)"
    )


class _Bar:
    """A tqdm progress bar on stderr when it is a terminal (tqdm comes with optuna)."""

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=label, leave=False, unit="cfg")

    def update(self, done: int, total: int, best: float | None) -> None:
        if self.bar is not None:
            self.bar.n = min(done, total)
            if best is not None:
                self.bar.set_postfix_str(f"best {best * 1e3:.3f} ms")
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


__all__ = ["FULL_TRIALS", "QUICK_TRIALS", "Plan", "format_result", "plan", "recheck", "tune_device", "versions"]
