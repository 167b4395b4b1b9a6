"""Where mdhom's time per boosting round goes: device kernels, launches and transfers, host work.

The issue asks for this table in the note. A fit is run with the OpenCL backend's profiling on
(``OpenCLTreeKernels.profile``: each launch waits for its events and adds their device time to
``kernel_seconds``), and every public backend call is timed on the host. Per round that splits the wall time
into three parts that add up:

- kernels: device time from OpenCL profiling events, per kernel;
- launch + transfer: time inside backend calls that no kernel event covers (enqueue latency, waiting,
  host<->device copies, pyopencl fills, the backend's own host glue);
- host outside the backend: the boosting loop itself (loss gradients in numpy, tree bookkeeping, score
  updates).

Profiling serialises launches, so the profiled fit is slower than the timed one; it is run separately and
reported next to the unprofiled median. The estimator keeps no reference to its backend, so the recorder
wraps :func:`mdhom.trees.estimators.make_kernels` for the duration of the fit (see ``record_fit``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["KernelRecorder", "record_fit", "record_timeline", "summarize", "summarize_timeline", "format_profile"]

# the TreeKernels protocol's calls of a fit's rounds (mdhom.trees.backend; not its set-up: load, bin_rows,
# check_size, kernel_configs); any the backend lacks are skipped. A depth-wise tree's look_ahead includes the host
# work the driver does while the device grows it (the last tree's assembly: start_tree's while_busy).
BACKEND_CALLS = (
    "set_gradients",
    "set_objective",
    "compute_gradients",
    "update_scores",
    "scores_ahead",
    "scores",
    "add_eval",
    "update_eval",
    "sync",
    "end_round",
    "to_host",
    "reset_rows",
    "histograms",
    "subtract",
    "concat",
    "take",
    "siblings",
    "siblings_from",
    "best_splits",
    "apply_splits",
    "look_ahead",
    "relabel",
    "row_nodes",
    "node_rows",
)

ROUND_STARTS = ("compute_gradients", "set_gradients")


class _CountingSeconds(dict):
    """``kernel_seconds`` that also counts how often each entry is updated: one update per enqueue call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __setitem__(self, key: str, value: float) -> None:
        self.calls[key] += 1
        super().__setitem__(key, value)


class KernelRecorder:
    """Turns profiling on in every backend the estimator creates and cuts its counters at round starts.

    A round starts with its gradients: ``compute_gradients`` (gradients on the device) or ``set_gradients``
    (computed on the host), the first backend call of every round and made before any kernel of it. The
    counters are snapshotted there (once for a run of such calls) and once more at the end, so round i's
    share is the difference of snapshots i and i+1.
    """

    def __init__(self, calls: tuple[str, ...] = BACKEND_CALLS, starts: tuple[str, ...] = ROUND_STARTS) -> None:
        self.calls, self.starts = calls, starts  # the calls timed, and those that open a round (trees: gradients)
        self.backend: Any = None
        self.unsupported: str | None = None
        self.marks: list[dict[str, Counter]] = []
        self.call_seconds: Counter[str] = Counter()
        self.call_counts: Counter[str] = Counter()
        self._depth = 0
        self._last_call: str | None = None

    def wrap(self, kernels: Any) -> Any:
        if self.backend is not None:  # one fit, one backend: a second would mix the counters
            return kernels
        if not hasattr(kernels, "profile") or not hasattr(kernels, "kernel_seconds"):
            self.unsupported = f"{type(kernels).__name__} has no OpenCL profiling (profile / kernel_seconds)"
            return kernels
        kernels.profile = True
        kernels.kernel_seconds = _CountingSeconds()
        self.backend = kernels
        for name in self.calls:
            method = getattr(kernels, name, None)
            if callable(method):
                setattr(kernels, name, self._timed(name, method))
        return kernels

    def _timed(self, name: str, method: Any) -> Any:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._depth:  # a backend call made by another one: its time is already counted
                return method(*args, **kwargs)
            if name in self.starts and self._last_call not in self.starts:
                self.mark()
            self._last_call = name
            self._depth += 1
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1
                self.call_seconds[name] += time.perf_counter() - t0
                self.call_counts[name] += 1

        return call

    def mark(self) -> None:
        ks = self.backend.kernel_seconds
        largest = getattr(self.backend, "kernel_largest", None)  # the round's own: taken, and cleared for the next
        round_largest = dict(largest or {})
        if largest is not None:
            largest.clear()
        self.marks.append(
            {
                "kernel_seconds": Counter(dict(ks)),
                "kernel_bytes": Counter(dict(getattr(self.backend, "kernel_bytes", {}))),
                "kernel_largest": round_largest,
                "kernel_calls": Counter(getattr(ks, "calls", {})),
                "call_seconds": Counter(self.call_seconds),
                "call_counts": Counter(self.call_counts),
            }
        )

    def finish(self) -> None:
        """The last snapshot, after the fit."""
        self.mark()

    def rounds(self) -> list[dict[str, dict[str, float]]]:
        """Per round: the counters' increments between consecutive marks (call ``mark`` once after the fit)."""
        out = []
        for a, b in zip(self.marks[:-1], self.marks[1:], strict=True):
            r: dict[str, Any] = {k: {n: float(v) for n, v in (b[k] - a[k]).items()} for k in b if k != "kernel_largest"}
            r["kernel_largest"] = dict(b["kernel_largest"])  # not a running total: the launches' since the last mark
            out.append(r)
        return out


@contextlib.contextmanager
def _recording(recorder: Any) -> Iterator[Any]:
    """Within the block, estimators build their backend through ``recorder.wrap``; yields the recorder and calls its
    ``finish`` on exit, where it saw a backend.

    Works by replacing ``mdhom.trees.estimators.make_kernels`` (module global, looked up at each fit) and
    restoring it on exit. A ``kernels_`` attribute on the fitted estimator would make this unnecessary.
    """
    from mdhom.trees import estimators

    original = estimators.make_kernels

    def make_kernels(*args: Any, **kwargs: Any) -> Any:
        return recorder.wrap(original(*args, **kwargs))

    estimators.make_kernels = make_kernels
    try:
        yield recorder
    finally:
        estimators.make_kernels = original
        if recorder.backend is not None:
            recorder.finish()


def record_fit() -> contextlib.AbstractContextManager[KernelRecorder]:
    """A :class:`KernelRecorder` for the fits in the block (see :func:`_recording`)."""
    return _recording(KernelRecorder())


class TimelineRecorder:
    """Collects the launches' events of the backend the estimator creates (``timeline``: no waits, so the fit runs
    at full speed) and cuts them into rounds at each round's gradients, as :class:`KernelRecorder` does. At a cut
    the last round's events are waited for (a GPU's round ends without waiting for its last kernels): they are kept as
    (start, end) device nanoseconds and the kernel's name, and let go (a deep tree launches hundreds a round)."""

    def __init__(self, starts: tuple[str, ...] = ROUND_STARTS) -> None:
        self.starts = starts
        self.events: list[tuple[str, Any]] = []  # the backend's timeline: this round's launches so far
        self.rounds: list[list[tuple[int, int, str]]] = []
        self.backend: Any = None
        self.unsupported: str | None = None

    def wrap(self, kernels: Any) -> Any:
        if self.backend is not None:
            return kernels
        if not hasattr(kernels, "timeline"):
            self.unsupported = f"{type(kernels).__name__} keeps no timeline of its launches"
            return kernels
        kernels.timeline = self.events
        self.backend = kernels
        for name in self.starts:
            method = getattr(kernels, name, None)
            if callable(method):
                setattr(kernels, name, self._cut(method))
        return kernels

    def _cut(self, method: Any) -> Any:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.rounds or self.events:  # once for a run of round-starting calls with no launch between
                self.close()
                self.rounds.append([])
            return method(*args, **kwargs)

        return call

    def finish(self) -> None:
        """The last round's events, and the backend stops collecting."""
        self.close()
        self.backend.timeline = None

    def close(self) -> None:
        """Move the events since the last cut into the open round (those before the first: the fit's setup). A GPU's
        round ends without waiting for its last kernels (``end_round``): they are waited for here."""
        for _, event in self.events:
            event.wait()
        if self.rounds:
            self.rounds[-1].extend((int(e.profile.start), int(e.profile.end), name) for name, e in self.events)
        self.events.clear()


def record_timeline() -> contextlib.AbstractContextManager[TimelineRecorder]:
    """A :class:`TimelineRecorder` for the fits in the block (see :func:`_recording`)."""
    return _recording(TimelineRecorder())


def summarize_timeline(wall: list[float], rounds: list[list[tuple]], skip: int = 1, waits: int = 3) -> dict[str, Any]:
    """Per round of an unserialised fit (``rounds``: its kernels' (start, end) device nanoseconds, each with its
    kernel's name where known): the device's span (first kernel start to last kernel end), busy time (the union of the
    kernels' intervals) and launches; medians over rounds ``skip+1 .. n``. Busy well below the wall time says the
    device waits for the host (launches, read-backs, the host's decisions between steps); ``waits`` says where: the
    idle time before each launch, summed per round by the kernel before it and its own (``"a -> b"``), the ``waits``
    largest by their mean over the same rounds (a loss-guided step's read-back and host walk show as the idle before
    its first launch)."""
    spans, busy, launches, idle = [], [], [], []
    for iv in rounds:
        iv = sorted(iv)
        t0 = iv[0][0] if iv else 0
        total, end, before = 0, t0, None
        gaps: dict[str, list[float]] = {}
        for a, b, *name in iv:
            if name and before is not None:
                pair = gaps.setdefault(f"{before} -> {name[0]}", [0.0, 0])
                pair[0] += max(0, a - end) * 1e-9
                pair[1] += 1
            before = name[0] if name else None
            total += max(0, b - max(a, end))
            end = max(end, b)
        spans.append((end - t0) * 1e-9)
        busy.append(total * 1e-9)
        launches.append(len(iv))
        idle.append(gaps)
    n = min(len(wall), len(rounds))
    steady = slice(skip, n) if n > skip else slice(0, n)

    def med(vals: list[float]) -> float:
        return float(np.median(vals[steady])) if vals[steady] else 0.0

    out = {"rounds": n, "wall_seconds": med(list(wall)), "span_seconds": med(spans), "busy_seconds": med(busy),
           "launches": med(launches)}
    kept = idle[steady]
    if kept and any(kept):
        pairs = {p for g in kept for p in g}
        mean = {p: (sum(g.get(p, [0.0, 0])[0] for g in kept) / len(kept),
                    sum(g.get(p, [0.0, 0])[1] for g in kept) / len(kept)) for p in pairs}
        out["waits"] = [{"pair": p, "seconds": mean[p][0], "count": mean[p][1]}
                        for p in sorted(mean, key=lambda p: (-mean[p][0], p))[:waits]]
    return out


def summarize(wall: list[float], rounds: list[dict[str, dict[str, float]]], skip: int = 1) -> dict[str, Any]:
    """Per-round rows and their mean over rounds ``skip+1 .. n`` (round 1 builds programs: excluded).

    Means, not medians, so that kernels + launch/transfer + host add up to the wall time.
    """
    n = min(len(wall), len(rounds))
    per_round = []
    for i in range(n):
        r = rounds[i]
        kernels = dict(sorted(r.get("kernel_seconds", {}).items()))
        kernel_total = float(sum(kernels.values()))
        backend_total = float(sum(r.get("call_seconds", {}).values()))
        per_round.append(
            {
                "round": i + 1,
                "wall_seconds": float(wall[i]),
                "kernel_seconds": kernels,
                "kernel_calls": {k: int(v) for k, v in sorted(r.get("kernel_calls", {}).items())},
                "kernel_bytes": dict(sorted(r.get("kernel_bytes", {}).items())),
                "kernel_largest": {k: list(v) for k, v in sorted(r.get("kernel_largest", {}).items())},
                "kernel_total_seconds": kernel_total,
                "backend_call_seconds": dict(sorted(r.get("call_seconds", {}).items())),
                "backend_calls": {k: int(v) for k, v in sorted(r.get("call_counts", {}).items())},
                "launch_transfer_seconds": backend_total - kernel_total,
                "host_outside_backend_seconds": float(wall[i]) - backend_total,
                "remainder_seconds": float(wall[i]) - kernel_total,
            }
        )
    steady = per_round[skip:] if len(per_round) > skip else per_round

    def mean(key: str, sub: str | None = None) -> float:
        vals = [(r[key].get(sub, 0.0) if sub is not None else r[key]) for r in steady]
        return float(np.mean(vals)) if vals else 0.0

    names = sorted({k for r in steady for k in r["kernel_seconds"]})
    kernels = {
        k: {"seconds": mean("kernel_seconds", k), "calls": mean("kernel_calls", k), "bytes": mean("kernel_bytes", k)}
        for k in sorted(names, key=lambda k: -mean("kernel_seconds", k))
    }
    for k, entry in kernels.items():
        if (largest := _largest_launch([r["kernel_largest"][k] for r in steady if k in r["kernel_largest"]])):
            entry["largest"] = largest
    calls = sorted({k for r in steady for k in r["backend_call_seconds"]})
    backend = {
        k: {"seconds": mean("backend_call_seconds", k), "calls": mean("backend_calls", k)}
        for k in sorted(calls, key=lambda k: -mean("backend_call_seconds", k))
    }
    return {
        "rounds_profiled": n,
        "rounds_in_mean": len(steady),
        "mean_per_round": {
            "wall_seconds": mean("wall_seconds"),
            "kernel_total_seconds": mean("kernel_total_seconds"),
            "launch_transfer_seconds": mean("launch_transfer_seconds"),
            "host_outside_backend_seconds": mean("host_outside_backend_seconds"),
            "remainder_seconds": mean("remainder_seconds"),
            "kernels": kernels,
            "backend_calls": backend,
        },
        "per_round": per_round,
    }


def _largest_launch(per_round: list[list[float]]) -> dict[str, float] | None:
    """A kernel's launch of the most bytes over the rounds (each round's largest, (bytes, seconds)): those bytes, and
    the median time of the rounds' launches that moved them (a depth-wise round partitions every row at each level,
    and its root reads every row: the same size each round)."""
    if not per_round:
        return None
    most = max(b for b, _ in per_round)
    if most <= 0:
        return None
    seconds = float(np.median([t for b, t in per_round if b == most]))
    return {"bytes": float(most), "seconds": seconds} if seconds > 0 else None


def copy_bandwidth(device: Any, nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Bytes per second (read + written) of a device-to-device copy on ``device``: the faster of a buffer copy and
    the copy kernel (:func:`mdhom.components.row_copy.copy_words`, the device's configuration for it), each the
    median of ``repeats`` copies of ``nbytes`` (at most a quarter of the largest allocation), by profiling events.
    The reference the kernels' bandwidth is reported against, measured in the same run. Both, because CPU runtimes
    copy buffers on one thread (PoCL on 16 cores: ~18 GB/s, which its row scatter passed 4.5-fold) and a GPU's copy
    engine may beat a kernel."""
    import pyopencl as cl

    from mdhom.components.row_copy import COPY, copy_words
    from mdhom.components.workspace import Workspace

    nbytes = int(min(nbytes, device.cl_device.max_mem_alloc_size // 4)) // 8 * 8
    queue = cl.CommandQueue(device.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    src = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, nbytes)
    dst = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(queue, src, np.zeros(1, np.uint8), 0, nbytes).wait()
    sizes = {"i": nbytes // 8}
    kernel = Workspace(device).build(COPY, copy_words(), sizes).bind(dst, queue, src=src)  # as a fit builds it
    best = 0.0
    for copy in (lambda: [cl.enqueue_copy(queue, dst, src, byte_count=nbytes)], lambda: kernel(sizes)):
        times = []
        for _ in range(repeats + 1):  # the first copy maps the pages in
            events = copy()
            queue.finish()
            times.append(sum((e.profile.end - e.profile.start) for e in events) * 1e-9)
        best = max(best, 2 * nbytes / float(np.median(times[1:])))
    return best


def format_profile(profile: dict[str, Any], unprofiled_median: float | None = None, title: str = "mdhom",
                   unit: str = "round") -> str:
    """The mean-per-round breakdown as a table: one line per kernel, then the remainder and its two parts (``unit``:
    what a round is called, "rule" for the rule learner)."""
    if profile.get("status") != "ok":
        return f"{title} profile: {profile.get('status', 'unavailable')}: {profile.get('reason')}"
    m = profile["mean_per_round"]
    wall = m["wall_seconds"] or float("nan")
    lines = [
        f"{title} profile: {profile['rounds_profiled']}-{unit} fit with OpenCL profiling (launches serialised), "
        f"mean per {unit} over {unit}s 2..{profile['rounds_profiled']}"
        if profile["rounds_in_mean"] < profile["rounds_profiled"]
        else f"{title} profile: {profile['rounds_profiled']}-{unit} fit with OpenCL profiling, mean per {unit}",
        f"{'part':<40}{'s/' + unit:>11}{'calls':>8}{'share':>8}",
    ]
    lines.append("-" * len(lines[-1]))
    copy = profile.get("copy_bytes_per_second")
    for name, k in m["kernels"].items():
        line = f"  kernel {name:<31}{k['seconds']:>11.4g}{k['calls']:>8.1f}{k['seconds'] / wall:>8.1%}"
        if k.get("bytes") and k["seconds"] > 0:
            rate = k["bytes"] / k["seconds"]
            line += f"  {rate / 1e9:8.1f} GB/s" + (f" = {rate / copy:5.1%} of a copy" if copy else "")
        lines.append(line)
        if (big := k.get("largest")) and k.get("calls", 0) > 1:
            rate = big["bytes"] / big["seconds"]
            lines.append(f"    its largest launch: {big['bytes'] / 1e6:.4g} MB in {big['seconds'] * 1e3:.4g} ms, "
                         f"{rate / 1e9:.1f} GB/s" + (f" = {rate / copy:5.1%} of a copy" if copy else ""))
    for label, key in (
        ("kernels (device time, events)", "kernel_total_seconds"),
        ("launch + transfer (backend, no event)", "launch_transfer_seconds"),
        ("host outside the backend", "host_outside_backend_seconds"),
        ("remainder = wall - kernels", "remainder_seconds"),
    ):
        lines.append(f"{label:<40}{m[key]:>11.4g}{'':>8}{m[key] / wall:>8.1%}")
    lines.append(f"{'wall, profiled run':<40}{m['wall_seconds']:>11.4g}{'':>8}{1:>8.1%}")
    if unprofiled_median is not None:
        lines.append(f"{'wall, timed run (median, no profiling)':<40}{unprofiled_median:>11.4g}")
    t = profile.get("timeline")
    if t and t.get("status") == "ok" and t.get("wall_seconds"):  # its "calls": a round's kernel events
        lines.append(f"{'device busy, unserialised fit (median)':<40}{t['busy_seconds']:>11.4g}{t['launches']:>8.1f}"
                     f"{t['busy_seconds'] / t['wall_seconds']:>8.1%}  of its {t['wall_seconds']:.4g} s {unit}"
                     f" (kernels' span {t['span_seconds']:.4g} s)")
        for w in t.get("waits", []):  # where the device waits: idle before a launch, by the kernels around the gap
            lines.append(f"{'  idle between':<40}{w['seconds']:>11.4g}{w['count']:>8.1f}"
                         f"{w['seconds'] / t['wall_seconds']:>8.1%}  {w['pair']}")
    if m.get("backend_calls"):
        lines.append("backend calls (host time, their kernels included):")
        for name, c in m["backend_calls"].items():
            lines.append(f"  {name:<38}{c['seconds']:>11.4g}{c['calls']:>8.1f}{c['seconds'] / wall:>8.1%}")
    lines.append(f"calls: enqueue calls per {unit} (an md_hom call may launch a second, combining kernel)")
    if copy:
        lines.append(f"GB/s: bytes each kernel must move by design (its row-sized reads and writes) / its device time; "
                     f"a copy on the same device in the same run (the faster of a buffer copy and a copy kernel): "
                     f"{copy / 1e9:.1f} GB/s (read + write); a kernel's largest launch: its launch of the most bytes "
                     f"in a round (a fit's root: every row), the median over the rounds")
    return "\n".join(lines)
