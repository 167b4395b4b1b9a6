"""Measurement behind one interface, "configuration -> seconds or a reason it failed".

:class:`LiveRunner` builds and runs on an OpenCL device: inputs are copied to the device once, each
configuration is built once, its output is checked against the numpy reference once, then it is timed by
OpenCL profiling events (warm-up launches, then the median of several). :class:`ReplayRunner` answers from
recorded timings, so the search logic is tested and compared without a device (Kernel Tuner's simulation
mode); :class:`RecordingRunner` wraps a live runner and keeps what it measured for later replay.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mdhom.tuning.space import config_key

OK, INVALID, BUILD, LAUNCH, WRONG = "ok", "invalid", "build", "launch", "wrong"


@dataclass
class Measurement:
    """The outcome for one configuration. ``seconds`` is the median kernel time when ``status == "ok"``."""

    status: str
    seconds: float | None = None
    samples: list[float] = field(default_factory=list)
    message: str = ""
    # (kernel, work-items): the most a built kernel runs per group, where that refused the configuration
    limit: tuple[str, int] | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


class Runner(Protocol):
    """What the study driver needs from a measurement back end."""

    def evaluate(self, config: Mapping[str, int]) -> Measurement: ...


class LiveRunner:
    """Measure configurations of one kernel at one problem size on a device.

    ``repeats`` timed launches follow ``warmup`` untimed ones; the result is their median. A configuration
    whose first timed launch already exceeds ``slow_seconds`` is not repeated (its one time is final), so a
    hopeless point cannot eat the budget. Results are cached per configuration.
    """

    def __init__(
        self,
        kernel: Any,
        device: Any,
        sizes: Mapping[str, int],
        repeats: int = 7,
        warmup: int = 2,
        seed: int = 0,
        slow_seconds: float = 2.0,
        verify: bool = True,
    ) -> None:
        self.kernel, self.device, self.sizes = kernel, device, dict(sizes)
        self.description = kernel.describe(self.sizes)
        self.dim_sizes = kernel.dim_sizes(self.sizes)
        self.repeats, self.warmup, self.slow_seconds, self.verify = repeats, warmup, slow_seconds, verify
        self.seed = seed
        self.host_inputs: dict[str, Any] | None = None
        self.args: dict[str, Any] = {}
        self._expected: np.ndarray | None = None
        self.cache: dict[str, Measurement] = {}
        self.build_seconds: dict[str, float] = {}

    def _prepare(self) -> None:
        """Make the inputs and copy them to the device, on first use (a resumed study may need none)."""
        import pyopencl.array as cl_array

        rng = np.random.default_rng(self.seed)
        self.host_inputs = self.kernel.make_inputs(self.sizes, rng)
        names = {i.name for i in self.description.inputs}
        queue = self.device.queue
        self.args = {
            k: cl_array.to_device(queue, np.ascontiguousarray(v)) if k in names else v
            for k, v in self.kernel.arguments(self.sizes, self.host_inputs).items()
        }
        queue.finish()

    @property
    def expected(self) -> np.ndarray:
        if self._expected is None:
            self._expected = self.kernel.reference(self.host_inputs)
        return self._expected

    def evaluate(self, config: Mapping[str, int]) -> Measurement:
        key = config_key(config)
        if key not in self.cache:
            if self.host_inputs is None:
                self._prepare()
            self.cache[key] = self._measure(dict(config), key)
        return self.cache[key]

    def retime(self, configs: list[Mapping[str, int]], rounds: int = 3) -> list[list[float]]:
        """Fresh timings of already-verified configurations, interleaved round by round so that drifts of a
        shared machine hit them alike (the tune's best was the minimum of many noisy medians; comparing it
        with one measurement of the default would flatter it)."""
        from mdhom.mdh import Computation

        if self.host_inputs is None:
            self._prepare()
        comps = [Computation(self.description, self.device, dict(c), self.dim_sizes) for c in configs]
        outs = [comp.enqueue(self.dim_sizes, **self.args).out for comp in comps]
        times: list[list[float]] = [[] for _ in comps]
        for _ in range(rounds):
            for i, comp in enumerate(comps):
                for _ in range(self.repeats):
                    times[i].append(comp.enqueue(self.dim_sizes, out=outs[i], **self.args).kernel_seconds())
        return times

    def _measure(self, config: dict[str, int], key: str) -> Measurement:
        import pyopencl as cl

        from mdhom.mdh import BuildError, Computation, ConfigError, KernelLimitError

        t0 = time.perf_counter()
        try:
            comp = Computation(self.description, self.device, config, self.dim_sizes)
            comp.program(comp._index64(self.dim_sizes, self.args))
        except KernelLimitError as exc:
            return Measurement(INVALID, message=str(exc), limit=(exc.kernel, exc.limit))
        except ConfigError as exc:
            return Measurement(INVALID, message=str(exc))
        except BuildError as exc:
            return Measurement(BUILD, message=str(exc).splitlines()[0])
        self.build_seconds[key] = time.perf_counter() - t0
        try:
            launch = comp.enqueue(self.dim_sizes, **self.args)
            first = launch.kernel_seconds()
            if self.verify:
                got = launch.out.get()
                if self.description.scatter:  # a scattered output is a buffer: its order, not the index space's shape
                    got = got.reshape(np.shape(self.expected))
                why = self.kernel.compare(got, self.expected)
                if why is not None:
                    return Measurement(WRONG, message=why)
            out = launch.out
            samples: list[float] = []
            if first > self.slow_seconds:
                return Measurement(OK, first, [first], "slow: timed once")
            for _ in range(max(0, self.warmup - 1)):
                comp.enqueue(self.dim_sizes, out=out, **self.args).kernel_seconds()
            for _ in range(self.repeats):
                samples.append(comp.enqueue(self.dim_sizes, out=out, **self.args).kernel_seconds())
        except (cl.Error, MemoryError, ValueError) as exc:
            return Measurement(LAUNCH, message=f"{type(exc).__name__}: {exc}")
        return Measurement(OK, statistics.median(samples), samples)


class ReplayRunner:
    """Answer from recorded measurements: ``{config_key: seconds}`` or ``{config_key: Measurement dict}``.

    A configuration not in the table is a launch failure (it was never measured). ``interrupt_after``
    raises ``KeyboardInterrupt`` on that evaluation, as a user's Ctrl-C would, so interrupted tunes are
    testable; ``on_evaluate`` is called with each configuration (counting, tracing).
    """

    def __init__(
        self,
        table: Mapping[str, Any],
        interrupt_after: int | None = None,
        on_evaluate: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        self.table: dict[str, Measurement] = {}
        for k, v in table.items():
            if isinstance(v, Measurement):
                self.table[k] = v
            elif isinstance(v, Mapping):
                self.table[k] = Measurement(**v)
            elif v is None:
                self.table[k] = Measurement(LAUNCH, message="recorded as failed")
            else:
                self.table[k] = Measurement(OK, float(v), [float(v)])
        self.interrupt_after = interrupt_after
        self.on_evaluate = on_evaluate
        self.calls = 0

    def evaluate(self, config: Mapping[str, int]) -> Measurement:
        self.calls += 1
        if self.interrupt_after is not None and self.calls >= self.interrupt_after:
            raise KeyboardInterrupt
        if self.on_evaluate is not None:
            self.on_evaluate(config)
        return self.table.get(config_key(config), Measurement(LAUNCH, message="not in the recorded table"))

    @classmethod
    def load(cls, path: str | Path, **kw: Any) -> ReplayRunner:
        return cls(json.loads(Path(path).read_text())["measurements"], **kw)


class RecordingRunner:
    """Wrap a runner and keep every measurement, to save as a replay table."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.records: dict[str, Measurement] = {}

    def evaluate(self, config: Mapping[str, int]) -> Measurement:
        m = self.inner.evaluate(config)
        self.records[config_key(config)] = m
        return m

    def save(self, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
        from mdhom.configs import atomic_write_json

        doc = {"meta": dict(meta or {}), "measurements": {k: asdict(m) for k, m in self.records.items()}}
        atomic_write_json(Path(path), doc)


__all__ = ["BUILD", "INVALID", "LAUNCH", "OK", "WRONG", "LiveRunner", "Measurement", "RecordingRunner",
           "ReplayRunner", "Runner"]
