"""The Optuna study of one (device, kernel, size class), and the tune of a whole device.

A study is named after the device key, the kernel, the size class and the hash of the kernel's
description, and lives in persistent Optuna storage (SQLite in the user data directory unless told
otherwise), so an interrupted tune resumes where it stopped and a changed kernel starts afresh.

Budgets count *distinct configurations measured*: a point rejected before building (pruned) costs nothing,
and one the sampler proposes again is answered from the runner's cache. The heuristic default is enqueued
as the first trial, so every study measures it and the speedup is against the same clock.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from mdhom.tuning.measure import Runner
from mdhom.tuning.space import SearchSpace, config_key, parse_key

STUDY_VERSION = 1


class TrialFailed(Exception):
    """A configuration that was built or run and failed (build, launch, wrong result): one failed trial."""


def default_storage() -> str:
    """A journal file in the user data directory: append-only, so an interrupt cannot corrupt it, and far
    faster than SQLite for studies of this size."""
    import platformdirs

    d = Path(platformdirs.user_data_dir("mdhom"))
    d.mkdir(parents=True, exist_ok=True)
    return str(d / "studies.journal")


def open_storage(spec: str | optuna.storages.BaseStorage | None) -> str | optuna.storages.BaseStorage | None:
    """``None`` (in memory), an RDB URL (``sqlite:///...``, anything with ``://``), or a journal file path."""
    if spec is None or not isinstance(spec, str) or "://" in spec:
        return spec
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    Path(spec).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(spec))


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's own log lines and warnings off while a study runs, its settings restored afterwards.

    A failed trial is an expected outcome here (a configuration that does not build or exceeds a limit),
    counted in the summary line of ``mdhom tune``; Optuna logs each one as a WARNING with a traceback, which
    buried the tuner's output. Errors still show."""
    old = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", module=r"optuna(\.|$)")
            yield
    finally:
        optuna.logging.set_verbosity(old)


def make_sampler(kind: str, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    """TPE (default; multivariate, grouped for the conditional parameter) or random, seeded."""
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "tpe":
        startup = max(3, min(10, budget // 4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, group=True)
    raise ValueError(f"unknown sampler {kind!r}: 'tpe' or 'random'")


def study_name(device_key: str, kernel: str, size_class: str, desc_hash: str) -> str:
    return f"v{STUDY_VERSION}/{device_key}/{kernel}/{size_class}/{desc_hash.removeprefix('sha256:')[:16]}"


@dataclass
class StudyResult:
    """What one study found; ``entry()`` is the record stored in the device file."""

    kernel: str
    size_class: str
    sizes: dict[str, int]
    config: dict[str, int] | None
    seconds: float | None
    default_config: dict[str, int]
    default_seconds: float | None
    measured: int
    failed: int
    pruned: int
    history: list[float] = field(default_factory=list)  # best-so-far seconds after each measurement

    @property
    def speedup(self) -> float | None:
        if self.seconds and self.default_seconds:
            return self.default_seconds / self.seconds
        return None

    def entry(self, versions: Mapping[str, str], date: str) -> dict[str, Any]:
        """The stored record; a study that kept its baseline (the heuristic's configuration) is marked as the heuristic
        kept, which a lookup answers with today's heuristic (:mod:`mdhom.configs`)."""
        kept = {"heuristic": True} if self.config == self.default_config else {}
        return {
            "sizes": self.sizes,
            "config": self.config,
            "median_s": self.seconds,
            "default_config": self.default_config,
            "default_s": self.default_seconds,
            "trials": self.measured,
            "failed_trials": self.failed,
            "date": date,
            "versions": dict(versions),
            **kept,
        }


def _counts(study: optuna.Study) -> tuple[int, int, int]:
    """(distinct configurations measured, of which failed, pruned points) over the study so far."""
    seen: set[str] = set()
    failed = pruned = 0
    for t in study.get_trials(deepcopy=False):
        if t.state == optuna.trial.TrialState.PRUNED:
            pruned += 1
            continue
        key = t.user_attrs.get("config")
        if key is None or key in seen:
            continue
        if t.state == optuna.trial.TrialState.COMPLETE or (
            t.state == optuna.trial.TrialState.FAIL and "failure" in t.user_attrs
        ):
            seen.add(key)
            failed += t.state == optuna.trial.TrialState.FAIL
    return len(seen), failed, pruned


@quiet_optuna()
def run_study(
    space: SearchSpace,
    runner: Runner,
    *,
    kernel: str,
    size_class: str,
    device_key: str,
    desc_hash: str,
    budget: int,
    timeout: float | None = None,
    storage: str | optuna.storages.BaseStorage | None = None,
    sampler: str = "tpe",
    seed: int = 0,
    progress: Callable[[int, int, float | None], None] | None = None,
    max_trials_factor: int = 30,
    seeds: Sequence[Mapping[str, int]] = (),
) -> StudyResult:
    """Run (or resume) the study until ``budget`` distinct configurations are measured or ``timeout``
    seconds pass. ``storage=None`` keeps the study in memory (tests, experiments). A new study measures the default
    first, then ``seeds`` (the configuration stored by an earlier tune, for an older version of the kernel: a
    re-tune starts from what won before, and a short budget does not lose it), then what the sampler proposes."""
    name = study_name(device_key, kernel, size_class, desc_hash)
    if sampler != "tpe":
        name += f"/{sampler}"
    study = optuna.create_study(
        study_name=name, storage=open_storage(storage), direction="minimize", load_if_exists=True,
        sampler=make_sampler(sampler, seed, budget),
    )
    cache: dict[str, tuple[str, float | None]] = {}
    for t in study.get_trials(deepcopy=False):
        key = t.user_attrs.get("config")
        if key is not None and t.state == optuna.trial.TrialState.COMPLETE:
            cache[key] = ("ok", t.value)
        elif key is not None and t.state == optuna.trial.TrialState.FAIL and "failure" in t.user_attrs:
            cache[key] = ("fail", None)
    if not study.trials:
        study.enqueue_trial(space.trial_params(space.default), user_attrs={"default": True})
        for seed in seeds:
            study.enqueue_trial(space.trial_params(seed), user_attrs={"seed": config_key(seed)})

    def objective(trial: optuna.Trial) -> float:
        config = space.suggest(trial)
        if trial.user_attrs.get("default"):
            config = dict(space.default)
        elif "seed" in trial.user_attrs:
            config = parse_key(trial.user_attrs["seed"])
        key = config_key(config)
        trial.set_user_attr("config", key)
        why = space.check(config)
        if why is not None:
            trial.set_user_attr("rejected", why[:300])
            raise optuna.TrialPruned(why)
        if key in cache:
            trial.set_user_attr("repeat", True)
            status, value = cache[key]
            if status == "ok":
                return float(value)
            trial.set_user_attr("failure", "repeat of a failed configuration")
            raise TrialFailed(key)
        m = runner.evaluate(config)
        if not m.ok:
            if m.limit is not None:
                space.learn_limit(config, *m.limit)
            cache[key] = ("fail", None)
            trial.set_user_attr("failure", f"{m.status}: {m.message}"[:500])
            raise TrialFailed(f"{m.status}: {m.message}")
        cache[key] = ("ok", m.seconds)
        trial.set_user_attr("samples", [float(s) for s in m.samples][:32])
        return float(m.seconds)

    measured, _, _ = _counts(study)
    deadline = None if timeout is None else time.monotonic() + timeout
    state = {"measured": measured}

    def stop_when_done(st: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if "config" in trial.user_attrs and "repeat" not in trial.user_attrs and "rejected" not in trial.user_attrs:
            state["measured"] += 1
            if progress is not None:
                best = _best(st)
                progress(state["measured"], budget, best)
        if state["measured"] >= budget or (deadline is not None and time.monotonic() >= deadline):
            st.stop()

    if measured < budget and (timeout is None or timeout > 0):
        study.optimize(
            objective,
            n_trials=max(1, (budget - measured) * max_trials_factor),
            timeout=timeout,
            catch=(TrialFailed,),
            callbacks=[stop_when_done],
            gc_after_trial=False,
        )
    return summarize(study, space, kernel, size_class)


def _best(study: optuna.Study) -> float | None:
    done = [t.value for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    return min(done) if done else None


def summarize(study: optuna.Study, space: SearchSpace, kernel: str, size_class: str) -> StudyResult:
    """The best measured configuration, the default's time and the best-so-far history of a study."""

    best_key, best_s = None, math.inf
    default_key = config_key(space.default)
    default_s = None
    history: list[float] = []
    for t in study.get_trials(deepcopy=False):
        key = t.user_attrs.get("config")
        if key is None or "repeat" in t.user_attrs or "rejected" in t.user_attrs:
            continue
        if t.state == optuna.trial.TrialState.COMPLETE:
            if key == default_key:
                default_s = t.value
            if t.value < best_s:
                best_key, best_s = key, t.value
        if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL) and (
            t.state == optuna.trial.TrialState.COMPLETE or "failure" in t.user_attrs
        ):
            history.append(best_s)
    measured, failed, pruned = _counts(study)
    return StudyResult(
        kernel=kernel,
        size_class=size_class,
        sizes=dict(space.sizes),
        config=parse_key(best_key) if best_key else None,
        seconds=None if best_key is None else best_s,
        default_config=dict(space.default),
        default_seconds=default_s,
        measured=measured,
        failed=failed,
        pruned=pruned,
        history=history,
    )


__all__ = [
    "StudyResult", "TrialFailed", "default_storage", "make_sampler", "open_storage", "quiet_optuna", "run_study",
    "study_name", "summarize",
]
