"""The layout stage of ``mdhom tune``: which of the tree backend's layouts (:mod:`mdhom.trees.layouts`) trains
fastest on this device, timed as training rounds.

Layouts run different kernels (rows moved or read through an index, a feature or a whole row per work-item), so
no kernel-level study compares them; the stage trains the end-to-end check's workload with every candidate
forced (:func:`mdhom.trees.layouts.forcing`) and with the heuristic's choice, alternating so that a burst of other
work on the machine does not decide (after a first repeat of every candidate, the others time only the fastest
quarter: :func:`screened`), and proposes the fastest where it beats the heuristic by the check's margin. Its
entries go into the same end-to-end check as the kernels' (:mod:`mdhom.tuning.endtoend`), which keeps them only
where the round with them is faster, and are stored like theirs: the chosen layout as ``config``, the heuristic's
as ``default_config``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mdhom.tuning.endtoend import MARGIN
from mdhom.tuning.workload import Workload

Timer = Callable[[Any, Workload, tuple[Any, Any], str], tuple[float, dict[str, int]]]


# the key a timer's layout carries where the check's fits ran different layouts (the heuristic's choice may differ by
# the fit's bins or policy): such a run is timed, but the same as no other
MIXED = "mixed"


def fit_seconds(device: Any, work: Workload, data: tuple[Any, Any], precision: str) -> tuple[float, dict[str, int]]:
    """Seconds per round of ``work`` in ``precision`` under the layout in force (the end-to-end check's measure,
    :func:`mdhom.tuning.endtoend.fit_rounds`), and the layout the fits ran (what the data allowed of the one
    asked for): the last fit's, with :data:`MIXED` set where the fits did not all run the same."""
    from mdhom.trees.layouts import kernel_name
    from mdhom.tuning.endtoend import fit_rounds

    ran: list[dict[str, int]] = []
    seconds, _ = fit_rounds(device, work, data, precision=precision, each=lambda est: ran.append(
        dict(est.kernel_configs_.get(kernel_name(precision), {}).get("config", {}))))
    last = dict(ran[-1]) if ran else {}
    if any(r != ran[0] for r in ran):
        last[MIXED] = 1
    return seconds, last


def precisions(device: Any) -> list[str]:
    """The precisions whose layouts are tuned: the learner's default on the device, and quantized (the fast
    mode, and the default on GPUs)."""
    from mdhom.trees.estimators import resolve_precision

    return list(dict.fromkeys([resolve_precision(device, None), "quantized"]))


# the candidates that the first repeat keeps for the others: the fastest quarter, at least SCREEN_MIN
SCREEN_MIN = 4


def screened(best: dict[int, float], twins: frozenset[int] = frozenset()) -> list[int]:
    """The candidates (indices into the stage's list, 0 the heuristic's choice) that the first repeat's times
    (``best``) keep for the other repeats, in the list's order: the heuristic and the fastest quarter of the others,
    at least :data:`SCREEN_MIN`, ranked without ``twins`` (candidates whose fits ran the heuristic's layout: never the
    pick, and the heuristic is timed again anyway). Every repeat of every candidate had taken a CPU's stage ~11
    minutes a precision at 500k rows (2-core Xeon, 48 or 64 candidates x 3 repeats x 4 fits), past the 14 minutes a
    tune gave both. The trade: a candidate whose one first time fell in a slow phase of the machine (up to 1.7x, see
    layout_entries) can be screened out; the fastest quarter keeps room for that, and the later repeats guard the
    survivors' order as before."""
    others = sorted((i for i in best if i > 0 and i not in twins), key=lambda i: (best[i], i))
    keep = max(SCREEN_MIN, -(-len(others) // 4))
    return [0, *sorted(others[:keep])]


def twins_of(best: dict[int, float], ran: dict[int, dict[str, int]]) -> frozenset[int]:
    """The candidates timed so far (``best``) whose every fit ran the layout the heuristic's fits ran (``ran[0]``):
    the heuristic itself, never a pick (none where the heuristic's fits ran different layouts, :data:`MIXED`)."""
    return frozenset(i for i in best if i > 0 and MIXED not in ran[0] and ran[i] == ran[0])


def layout_entries(device: Any, work: Workload, versions: dict[str, str], date: str,
                   echo: Callable[[str], None] = print, timer: Timer | None = None,
                   only: list[str] | None = None, deadline: float | None = None
                   ) -> list[tuple[str, str, dict[str, Any], str]]:
    """One tuned-file entry per precision (see the module docstring), as
    (pseudo-kernel, size class, entry, :data:`mdhom.trees.layouts.LAYOUT_HASH`). ``only``: the layout names to
    tune (default: every precision's). ``timer`` times one fit (tests pass a model of the machine). ``deadline``
    (``time.monotonic()``): no candidate is timed after it, beyond each precision's heuristic once; what was timed
    by then is compared."""
    from mdhom.trees.layouts import LAYOUT_HASH, Layout, candidates, forcing, kernel_name

    timer = timer or fit_seconds
    data = work.data()
    out = []
    for precision in precisions(device):
        name = kernel_name(precision)
        if only is not None and name not in only:
            continue
        # None: the heuristic's choice
        cands: list[Layout | None] = [None, *candidates(precision, device.type == "cpu")]

        def timed(layout: Layout | None, precision: str = precision) -> tuple[float, dict[str, int]]:
            with forcing(layout, precision):
                return timer(device, work, data, precision)

        if deadline is not None and time.monotonic() >= deadline:
            echo(f"  {name}: no time left before the deadline; not tuned")
            continue
        timed(None)  # builds and first-touch costs out of the way
        best: dict[int, float] = {}
        ran: dict[int, dict[str, int]] = {}
        failed = 0
        late = False
        alive = list(range(len(cands)))
        for rep in range(work.repeats):
            order = alive if rep % 2 == 0 else alive[::-1]
            for i in order:
                if i in ran and not ran[i]:
                    continue  # failed before
                if deadline is not None and 0 in best and time.monotonic() >= deadline:
                    late = True
                    break
                try:
                    t, what = timed(cands[i])
                except Exception as exc:  # noqa: BLE001 - a layout the device cannot run is no candidate
                    if i not in ran:  # (one that trained before keeps its times and its layout)
                        failed += 1
                        echo(f"  {name} {cands[i].text() if cands[i] else 'heuristic'}: failed ({exc})")
                        ran[i] = {}
                    continue
                best[i] = min(best.get(i, t), t)
                ran[i] = what
            if late:
                echo(f"  {name}: the deadline came in repeat {rep + 1} of {work.repeats}; {len(best) - 1} of "
                     f"{len(cands) - 1} candidates timed before it")
                break
            if 0 not in best:  # the heuristic does not train: nothing to compare with (said below)
                break
            if rep == 0 and work.repeats > 1:
                twins = twins_of(best, ran)
                alive = screened(best, twins)
                echo(f"  {name}: the heuristic and the fastest {len(alive) - 1} of {len(best) - 1 - len(twins)} "
                     f"candidates timed again")
        if 0 not in best:
            echo(f"  {name}: the heuristic layout does not train here; no layout stored")
            continue
        heuristic = Layout.of(ran[0])
        for i in sorted(best):
            label = "heuristic" if i == 0 else cands[i].text()
            echo(f"  {name} {label}: {best[i] * 1e3:.2f} ms/round")
        # a candidate whose every fit ran the heuristic's layout is the heuristic: the fastest of their times is the
        # heuristic's (PoCL, 2-core EPYC: the heuristic timed twice at 36.7 ms a round, its twin three times at 22.0,
        # the same layout alternating in one process 21.4-21.7 both: a slow phase of the machine), so no candidate
        # wins against one unlucky time of it; and it is no candidate. (Where the heuristic's fits ran different
        # layouts, a candidate is never the heuristic: each forces its layout on every fit.)
        twins = twins_of(best, ran)
        t_heuristic = min([best[0]] + [best[i] for i in twins])
        if t_heuristic < best[0]:
            echo(f"  {name} heuristic: {t_heuristic * 1e3:.2f} ms/round, as it ran among the candidates")
        pick = min((i for i in best if i > 0 and i not in twins), key=lambda i: best[i], default=0)
        chosen, t_chosen = heuristic, t_heuristic
        won = bool(pick) and best[pick] < t_heuristic * (1.0 - MARGIN)
        if won:  # (a candidate may force on every fit the layout the heuristic's fits ran some of: not the heuristic)
            chosen, t_chosen = Layout.of(ran[pick]), best[pick]
        echo(f"{name}: {chosen.text()} ({t_chosen * 1e3:.2f} ms/round; heuristic {heuristic.text()}, "
             f"{t_heuristic * 1e3:.2f} ms/round: {t_heuristic / t_chosen:.2f}x)")
        entry = {"sizes": {"feat": 28, "row": work.rows}, "config": chosen.config(), "median_s": t_chosen,
                 "default_config": heuristic.config(), "default_s": t_heuristic, "trials": len(best) - 1,
                 "failed_trials": failed, "date": date, "versions": dict(versions),
                 **({} if won else {"heuristic": True})}
        out.append((name, "higgs28", entry, LAYOUT_HASH))
    return out
