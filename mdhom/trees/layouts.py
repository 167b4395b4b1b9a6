"""The tree backend's layout: where a fit's rows live and how its histograms read them, decided per device.

Eight choices decide more of a round's time than any kernel's work-group sizes (rounds of a Higgs-shaped fit, same
run): whether the partition moves whole rows or only the row order (``row_index``: on PoCL moving rows is 2.7x faster
per round, on the H100 the row index is 1.2x faster), whether histograms read a whole row per work-item
(``whole_rows``: 4.8x on PoCL, 0.9x on the H100), whether the partition reads a column copy of the bins (``columns``),
how many levels below a loss-guided batch are split on the device before the host sees it (``lookahead``: below a
batch bounded by ``batch``, one level: the children its next batch takes, the host's own splits one round trip
earlier; below an unbounded one, every child above the floor, speculative), whether the partition walks rows in blocks
of ``blocks`` rows (0: a work-item per row and a prefix count), a work-item each on CPUs (XGBoost's CPU partition; on
PoCL blocks make a loss-guided round 1.2-1.3x faster) and a work-group each on GPUs (the group partition: two launches
a split step instead of four; H200, 10.5M rows, the partition's kernels 2.5 -> 1.9 ms a loss-guided round), and how
many depth-wise levels are split on the device per round trip where the leaf budget cannot bind (``depth_ahead``:
exact, the level-wise rule takes every such split; H200, 10.5M rows, 7.20 -> 6.41 ms a round, alternating fits; 2-core
EPYC, 500k rows, PoCL 82.8-89.1 -> 79.4-79.6 ms, Intel's runtime 83.1 -> 77.6; also the top levels of a loss-guided
tree below its root's batch, as far as its batches would take those levels whole), and how many candidates a
loss-guided batch splits at most (``batch``, 0: every one the walk may reach, figures in
:meth:`mdhom.trees.lossguide._Candidates.reachable`; exact, a bound only adds round trips), and whether the split
search's score sums a feature's bins as it walks them (``summed``: the score's vector form, no scan kernel before it,
one launch fewer a split step; the CPUs' only choice, where the scan was a memory pass as long as the score's own; not
a GPU's candidate: its walk of a feature's bins is serial where the scan and the plain score spread a node's bins over
a work-group, H100, 10.5M rows, kernels by profiling events: the summed score 1.02 ms a depth-wise round and 1.82
loss-guided against 0.32 and 0.59 for the scan and the plain score, rounds not faster; exact either way: the same sums
in the same order, the same gains).
Each is a constructor option of :class:`mdhom.trees.opencl_backend.OpenCLTreeKernels`; left at ``None``, it
comes from the device's tuned file when ``mdhom tune`` stored a layout there, else from the backend's
heuristic. The tuner times training rounds of every candidate (:mod:`mdhom.tuning.layouts`), since no
kernel-level measurement can compare layouts whose kernels differ.

A layout is stored in the tuned file as a pseudo-kernel ``tree_layout_<precision>`` (the candidates differ per
precision: whole-row histograms of real lanes are the CPUs' only, moved or through the row index) whose
configuration holds the choices as integers, with :data:`LAYOUT_HASH` in place of a description hash, so that a
layout stored under other choices is re-tuned rather than carried.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from mdhom import configs
from mdhom.components.partition_kernels import GROUP_ROWS
from mdhom.devices import Device

FIELDS = ("row_index", "whole_rows", "columns", "lookahead", "blocks", "depth_ahead", "batch", "summed")
LAYOUT_HASH = "layout-v1:" + ",".join(FIELDS)
PRECISIONS = ("double", "single", "quantized")
PREFIX = "tree_layout_"
# rows per block of the block partition where a device takes it: the CPUs' heuristic and their one candidate
BLOCK_ROWS = 2048
# depth-wise levels split on the device per round trip: every device's heuristic and the candidate beside none
# (a 255-leaf tree of depth 8: seven levels on the device from the root, then the last level, where the leaf budget
# binds, by the host)
DEPTH_AHEAD = 7
# most candidates a loss-guided batch splits: every device's heuristic and the candidate beside no bound (a 255-leaf
# tree then takes ~15 batches instead of ~14, its splits and searches in vain ~10 instead of ~110 and ~220)
BATCH = 32
# a stored layout applies to fits of up to 2x more or fewer features than it was timed with: how rows are laid out
# pays differently for wide rows (a row of 64 one-byte bins is a cache line, moving it costs more than its index)
WITHIN = math.log(2.0)


@dataclass(frozen=True)
class Layout:
    row_index: int
    whole_rows: int
    columns: int
    lookahead: int
    blocks: int
    depth_ahead: int
    batch: int
    summed: int = 1  # the CPUs' one choice (a GPU's heuristic is 0)

    def config(self) -> dict[str, int]:
        return {k: int(v) for k, v in asdict(self).items()}

    @classmethod
    def of(cls, config: dict[str, int]) -> Layout:
        missing = [f for f in FIELDS if f not in config]
        if missing:
            raise ValueError(f"a stored tree layout lacks {', '.join(missing)}")
        return cls(**{f: int(config[f]) for f in FIELDS})

    def text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.config().items())


def kernel_name(precision: str) -> str:
    """The tuned file's name for the layouts of fits in ``precision``."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return PREFIX + precision


def is_layout(kernel: str) -> bool:
    return kernel in {PREFIX + p for p in PRECISIONS}


def candidates(precision: str, cpu: bool) -> list[Layout]:
    """Every distinct layout of a fit in ``precision`` on a CPU (``cpu``) or a GPU: the row index always reads whole
    rows where they are quantized, and only it has a column copy; whole rows of real lanes, moved or through the row
    index, are the CPUs' (their exact fold is one work-item a node and feature group: no GPU's build); the loss-guided
    look-ahead needs quantized histograms, the
    depth-wise levels on the device any precision's (their splits are the host's, bit for bit); blocks are
    :data:`BLOCK_ROWS` rows a work-item on CPUs, :data:`GROUP_ROWS` a work-group on GPUs; loss-guided batches are
    bounded at :data:`BATCH` candidates or not at all; the score sums its bins on CPUs, not on GPUs, nor in single
    precision (no summed score: its float division may round either way in vector form)."""
    quantized = precision == "quantized"
    summed = int(cpu and precision != "single")
    out = []
    for row_index in (0, 1):
        if row_index:  # quantized: always whole rows; real lanes: whole rows on CPUs, a feature per lane elsewhere
            wholes = (1,) if quantized else ((0, 1) if cpu else (0,))
        else:
            wholes = (0, 1) if quantized or cpu else (0,)
        for whole_rows in wholes:
            for columns in ((0, 1) if row_index else (0,)):
                for lookahead in ((0, 1) if quantized else (0,)):
                    for blocks in (0, BLOCK_ROWS if cpu else GROUP_ROWS):
                        for depth_ahead in (0, DEPTH_AHEAD):
                            for batch in (0, BATCH):
                                out.append(Layout(row_index, whole_rows, columns, lookahead, blocks, depth_ahead,
                                                  batch, summed))
    return out


def stored(device: Device, precision: str, n_features: int) -> tuple[Layout | None, str]:
    """The layout ``mdhom tune`` stored for fits of ``n_features`` features in ``precision`` on ``device`` (the
    size class nearest, within :data:`WITHIN`), and where it came from; (None, source) when there is none (the
    heuristic decides).
    Devices tuned before layouts were tuned have none: that is not warned about, the heuristic is the layout
    every earlier release used."""
    forced = next((pair for pair in reversed(_forced) if pair[1] in (None, precision)), None)
    if forced is not None:
        return forced[0], "forced by the tuner" if forced[0] is not None else "heuristic (forced by the tuner)"
    config, source = configs.lookup(device, kernel_name(precision), {"feat": max(1, n_features)}, warn=False,
                                    within=WITHIN)
    if config is None:  # none stored, tuning disabled, or a class that kept the heuristic (its source names the class)
        return None, configs.heuristic_source(source)
    try:
        return Layout.of(config), source
    except ValueError:
        return None, "heuristic"


_forced: list[tuple[Layout | None, str | None]] = []


@contextlib.contextmanager
def forcing(layout: Layout | None, precision: str | None = None) -> Iterator[None]:
    """Fits in the block use ``layout`` (None: the heuristic's) whatever is stored: the tuner times candidates
    this way, and the heuristic it compares them with, without writing files for each. ``precision``: only fits
    in that precision (None: every fit); the innermost block that applies wins."""
    _forced.append((layout, precision))
    try:
        yield
    finally:
        _forced.pop()
