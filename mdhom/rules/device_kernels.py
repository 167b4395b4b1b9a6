"""The rule refinement's own md_hom descriptions and kernel specs (``SPECS``), with the tuner's inputs and numpy
references for them: what :class:`mdhom.rules.device.DeviceRefinement` launches besides the trees' histogram and
split scan and the split evaluator's score description with the rule head's quality plugged in
(:mod:`mdhom.rules.device_gain`). They live apart from the driver so that the tuner and the spec collection
(:data:`mdhom.components.specs.COMPONENT_MODULES`) read the declarations without the driver, and the driver reads as
the algorithm. :mod:`mdhom.rules.binned` is the numpy reference of every step, to the bit.

One refinement step, all on the device, ends in a few dozen bytes (the chosen condition, its quality and the sums
of its side). Heads that are not coupled: a histogram, a scan, the score and its combine, the result (5 launches);
a kept condition adds the cover:

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
rule_histogram(_q)     feat x output x pos              sums per (sampled feature, slot, bin) over the covered
                                                        rows of a row's (g, h) per head label and the count
                                                        slot, read where they lie (the statistics, the mask,
                                                        the sample's bins feature-major: no atoms or bins copy
                                                        first; exact order pinned)
rule_feature_bins      row x feat                       concat: the sampled features' bins side by side (the
                                                        coupled heads' counting sort reads them)
tree_split_scan        node x feat x output x bin       inclusive prefix sums over bins (exact order pinned)
tree_split_score_rule_ node x feat x bin x dir          argmax over (feature, bin, operator) of minus the
  single / _complete                                    head's quality (kernels/rules/head_quality.cl)
rule_refine_result     slot                             concat: the winner's side sums per slot, its value
                                                        and index (what the host reads)
rule_cover             row                              concat: the coverage mask after adding a condition
rule_cover_best        row                              concat: the same for the winner the device holds
rule_head_columns      i                                concat: a single-label head's columns after the label
                                                        its first step chose (the largest |score|)
rule_head_scale        slot                             concat: that head's 2^-k per slot (quantized)
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

import numpy as np

from mdhom.components import split as sp
from mdhom.components.lanes import (
    class_precision,
    gh_type,
    hist_ctype,
    hist_gh_type,
    is_quantized,
    split_type,
    with_quantized_classes,
)
from mdhom.components.quantize import quantization_exponents
from mdhom.components.specs import KernelSpec, Tuning, description_default, elementwise, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce, Struct
from mdhom.rules import binned
from mdhom.rules import device_stats as ds
from mdhom.rules.device_gain import COMPLETE_HEAD_GAIN, SINGLE_HEAD_GAIN, head_gain
from mdhom.rules.heads import Head

# what the host reads back per step: per slot the chosen side's sums, and the winner's value and index
# the coverage masks' buffers cov0, cov1, cov2 (the driver's: mdhom.rules.device)
MASKS = (0, 1, 2)
SIDE = Struct("rule_side_t", (("g", "double"), ("h", "double"), ("value", "double"), ("index", "int")))
_BEST = split_type("double").dtype
_BEST_INDEX = _BEST.fields["index"][1] // 4  # int offset of the argmax index in a split_t


# ------------------------------------------------------------------------------------------------ descriptions
_HIST_BODY = """
if (covered[pos] != 0) {{
    const int mdh_b = bins[(long)fidx[fidx0 + feat] * n_rows + pos];
    const int mdh_s = weight[pos] != 0.0;
    if (output < k) {{
        if (mdh_s) {{
{stats}
        }}
    }} else {{
{count}
    }}
}}
"""


@lru_cache(maxsize=8)
def histogram(n_bins: int, precision: str = "double", bin_type: str = "uchar") -> Description:
    """The refinement step's statistics: per (sampled feature, slot, bin) the sums over the covered rows of each
    row's atoms (:func:`mdhom.rules.binned.slot_values`), read where they lie: slot < k the (g, h) of head label
    ``cols[slot]`` / Hessian column ``cols[h_at + slot]`` (times the weight; quantized, int32 fixed point,
    label-major, weights 0 or 1), slot k the counts (covered; covered with non-zero weight); the feature
    ``fidx[fidx0 + feat]`` of ``bins`` held feature-major (``bins[f * n_rows + row]``: a sample's column is
    contiguous, so no copy of the sampled bins is made). One launch instead of an atoms pass, the sampled bins' copy
    and the trees' histogram over them. Uncovered rows and zero weights add nothing: a sum that starts at 0.0 is never
    -0.0, so leaving out the 0.0 an atom would hold is exact, and the pinned fold (one lane, rows ascending) adds what
    ``np.bincount`` adds in its order. Output: the trees' one-node histogram layout, (feat, slot) atoms of ``n_bins``
    (g, h) pairs. Quantized, the fold may run as int32 atomics into a local histogram per work-group
    (``PARTIALS_LOCAL``)."""
    q = is_quantized(precision)
    stat = hist_ctype(precision)
    w, one = ("", "1") if q else (" * weight[pos]", "1.0")
    g_at, h_at = (("(long)cols[output] * g_stride + pos", "(long)cols[h_at + output] * h_stride + pos") if q else
                  ("(long)pos * g_stride + cols[output]", "(long)pos * h_stride + cols[h_at + output]"))
    add = ("            {t}.v[mdh_b].g {op} G[{g}]{w};\n            {t}.v[mdh_b].h {op} H[{h}]{w};")
    count = "        {t}.v[mdh_b].g {op} {one};\n        if (mdh_s) {t}.v[mdh_b].h {op} {one};"

    def body(t: str, op: str) -> str:
        return _HIST_BODY.format(stats=add.format(t=t, op=op, g=g_at, h=h_at, w=w),
                                 count=count.format(t=t, op=op, one=one))

    atomic = _HIST_BODY.format(
        stats=f"""            const int mdh_g = G[{g_at}], mdh_h = H[{h_at}];
            if (mdh_g != 0) atomic_add(&acc->v[mdh_b].g, mdh_g);
            if (mdh_h != 0) atomic_add(&acc->v[mdh_b].h, mdh_h);""",
        count="        atomic_add(&acc->v[mdh_b].g, 1);\n        if (mdh_s) atomic_add(&acc->v[mdh_b].h, 1);")
    return Description(
        "rule_histogram_q" if q else "rule_histogram", ["feat", "output", "pos"], [Concat(), Concat(), Reduce(SUM)],
        Array(hist_gh_type(precision), int(n_bins)),
        scalar=body("out", "="), accumulate=body("acc", "+="), accumulate_atomic=atomic if q else None,
        inputs=[Input("bins", bin_type, ("*",), gather=True), Input("fidx", "int", ("*",), gather=True),
                Input("G", stat, ("*",), gather=True), Input("H", stat, ("*",), gather=True),
                Input("weight", "double", ("*",), gather=True), Input("covered", "uchar", ("*",), gather=True),
                Input("cols", "int", ("*",), gather=True)],
        params=[Param("n_rows", "int"), Param("fidx0", "int"), Param("g_stride", "int"), Param("h_stride", "int"),
                Param("k", "int"), Param("h_at", "int")],
    )


@lru_cache(maxsize=2)
def cover(bin_type: str = "uchar") -> Description:
    """The coverage mask after adding "bin <= b" (op 0) or "bin > b" (op 1) on ``feat``; the missing bin
    satisfies neither. ``bins`` rows x features."""
    return Description(
        "rule_cover", ["row"], [Concat()], "uchar",
        scalar="""
const int mdh_b = bins[(long)row * n_feat + feat];
out = (covered != 0 && mdh_b != missing && (op == 0 ? mdh_b <= bin : mdh_b > bin)) ? 1 : 0;""",
        inputs=[Input("covered", "uchar", ("row",)), Input("bins", bin_type, ("*",), gather=True)],
        params=[Param("n_feat", "int"), Param("feat", "int"), Param("bin", "int"), Param("op", "int"),
                Param("missing", "int")],
    )


@lru_cache(maxsize=2)
def cover_best(bin_type: str = "uchar") -> Description:
    """:func:`cover` with the condition the score kernel chose (its split_t ``best``: the flat index over (feature,
    bin, operator) of the ``n_feat`` searched features ``fidx[fidx0 ..]``, whose bins ``bins`` holds feature-major,
    as :func:`histogram` reads them), read on the device: the next refinement step is launched before the host has
    read this one's winner. No winner (value -inf, or an index out of range) covers nothing (the host discards that
    step's successors)."""
    return Description(
        "rule_cover_best", ["row"], [Concat()], "uchar",
        scalar=f"""
const int mdh_i = best[{_BEST_INDEX}];
const int mdh_n = n_bins - 2;
const int mdh_ok = best_value[0] > -INFINITY && mdh_n > 0 && mdh_i >= 0 && mdh_i < n_feat * mdh_n * 2;
const int mdh_b = mdh_ok ? bins[(long)fidx[fidx0 + mdh_i / (2 * mdh_n)] * SIZE_row + row] : 0;
const int mdh_t = mdh_ok ? (mdh_i / 2) % mdh_n : 0;
out = (mdh_ok && covered != 0 && mdh_b != n_bins - 1 && (mdh_i % 2 == 0 ? mdh_b <= mdh_t : mdh_b > mdh_t)) ? 1 : 0;""",
        inputs=[Input("covered", "uchar", ("row",)), Input("bins", bin_type, ("*",), gather=True),
                Input("fidx", "int", ("*",), gather=True), Input("best", "int", ("*",), gather=True),
                Input("best_value", "double", ("*",), gather=True)],
        params=[Param("n_feat", "int"), Param("n_bins", "int"), Param("fidx0", "int")],
    )


_SIDE_DOUBLES = SIDE.dtype.itemsize // 8  # a rule_side_t record read as doubles: g at 0, h at 1
_LABEL_CHOICE = resources.files("mdhom.kernels").joinpath("rules", "label_score.cl").read_text() + f"""
/* The slot of a single-label head's label: the largest |score| of the k side sums in ``res`` (rule_side_t records
 * read as doubles), the first of equal ones (mdhom.rules.heads.Head.predict's np.argmax). */
inline int rule_head_label(__global const double* res, const int k, const double l2, const double l1) {{
    int c = 0;
    double top = 0.0;
    for (int i = 0; i < k; ++i) {{
        const double s = fabs(rule_label_score(res[{_SIDE_DOUBLES} * i], res[{_SIDE_DOUBLES} * i + 1], l2, l1));
        if (i == 0 || s > top) {{
            top = s;
            c = i;
        }}
    }}
    return c;
}}
"""


@lru_cache(maxsize=1)
def head_columns() -> Description:
    """A batch's first step chose a single-label head's label (:func:`rule_head_label` of its winner's sides
    ``res``): the restricted head's ``cols`` table for :func:`histogram` (its label's gradient column, then its Hessian
    column: ``h_at`` 1) from the full head's (``cols``, Hessian columns from ``h_at``), on the device, so that the
    next steps launch before the host reads the first."""
    return Description(
        "rule_head_columns", ["i"], [Concat()], "int",
        scalar="out = cols[(i == 0 ? 0 : h_at) + rule_head_label(res, k, l2, l1)];",
        inputs=[Input("res", "double", ("*",), gather=True), Input("cols", "int", ("*",), gather=True)],
        params=[Param("k", "int"), Param("h_at", "int"), Param("l2", "double"), Param("l1", "double")],
        preamble=_LABEL_CHOICE,
    )


@lru_cache(maxsize=1)
def head_scale() -> Description:
    """:func:`head_columns`' partner for quantized statistics: the restricted head's 2^-k per slot (its label's
    (g, h) from the full head's ``inv_scale``, then the count slot's 1.0, 1.0), the score and result kernels'
    ``inv_scale``."""
    return Description(
        "rule_head_scale", ["slot"], [Concat()], gh_type("double"),
        scalar="""
const int mdh_c = rule_head_label(res, k, l2, l1);
out.g = slot == 0 ? inv_scale[2 * mdh_c] : 1.0;
out.h = slot == 0 ? inv_scale[2 * mdh_c + 1] : 1.0;""",
        inputs=[Input("res", "double", ("*",), gather=True), Input("inv_scale", "double", ("*",), gather=True)],
        params=[Param("k", "int"), Param("l2", "double"), Param("l1", "double")],
        preamble=_LABEL_CHOICE,
    )


@lru_cache(maxsize=2)
def feature_bins(bin_type: str = "uchar") -> Description:
    """The bins of the sampled features ``fidx[fidx0 ..]`` (ascending) as a rows x sample matrix: what the histogram
    reads instead of every feature's bins when a step searches a sample (``fidx0``: the step's row of a batch's
    samples, uploaded together)."""
    return Description(
        "rule_feature_bins", ["row", "feat"], [Concat(), Concat()], bin_type,
        scalar="out = bins[(long)row * n_feat + fidx[fidx0 + feat]];",
        inputs=[Input("bins", bin_type, ("*",), gather=True), Input("fidx", "int", ("*",), gather=True)],
        params=[Param("n_feat", "int"), Param("fidx0", "int")],
    )


@lru_cache(maxsize=2)
def result(precision: str = "double") -> Description:
    """Per slot the sums of the winning candidate's side (the prefix at its bin, or the last real bin's minus it),
    and the winner's value and index; all zero sums where no candidate is allowed (value -inf). Quantized, the
    integer prefixes become reals as the score kernel reads them (times the slot's 2^-k, exact)."""
    q = is_quantized(precision)
    g_of, h_of = ("(double)scan[{i}] * inv_scale[2 * slot]", "(double)scan[{i}] * inv_scale[2 * slot + 1]") if q \
        else ("scan[{i}]", "scan[{i}]")
    return Description(
        "rule_refine_result", ["slot"], [Concat()], SIDE,
        scalar=f"""
const int idx = best[{_BEST_INDEX}];
const int n_cand = n_bins - 2;
out.value = best_value[0];
out.index = idx;
out.g = 0.0; out.h = 0.0;
if (out.value > -INFINITY && idx >= 0 && idx < n_feat * n_cand * 2) {{
    const long cell = ((long)(idx / (2 * n_cand)) * SIZE_slot + slot) * n_bins;
    const long at = cell + (idx / 2) % n_cand, last = cell + n_bins - 2;
    const double lg = {g_of.format(i="2 * at")}, lh = {h_of.format(i="2 * at + 1")};
    out.g = (idx % 2 == 0) ? lg : {g_of.format(i="2 * last")} - lg;
    out.h = (idx % 2 == 0) ? lh : {h_of.format(i="2 * last + 1")} - lh;
}}""",
        inputs=[Input("scan", hist_ctype(precision), ("*",), gather=True), Input("best", "int", ("*",), gather=True),
                Input("best_value", "double", ("*",), gather=True)]
        + ([Input("inv_scale", "double", ("*",), gather=True)] if q else []),
        params=[Param("n_feat", "int"), Param("n_bins", "int")],
    )


def score(n_bins: int, k: int, kind: str, precision: str = "double") -> Description:
    """The split evaluator's score description over ``k`` head labels and the count slot, with the head's
    quality as its gain (quantized: int32 sums, each turned into a real by its slot's 2^-k)."""
    return sp.split_score(n_bins, k + 1, precision, head_gain(kind))


# ------------------------------------------------------------------------------------------------ layouts
def to_slots(stats: np.ndarray, k: int) -> np.ndarray:
    """(F, n_bins, 2k + 2) lanes of :mod:`binned` (gradients, Hessians, counts) as the kernels' (1, F, k + 1,
    n_bins, 2) (g, h) slots."""
    g = np.concatenate([stats[..., :k], stats[..., 2 * k: 2 * k + 1]], axis=-1)
    h = np.concatenate([stats[..., k: 2 * k], stats[..., 2 * k + 1:]], axis=-1)
    return np.ascontiguousarray(np.stack([g, h], axis=-1).transpose(0, 2, 1, 3))[None]


def from_slots(slots: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_slots`: (1, F, k + 1, n_bins, 2) as (F, n_bins, 2k + 2) lanes."""
    g, h = slots[0, ..., 0].transpose(0, 2, 1), slots[0, ..., 1].transpose(0, 2, 1)
    return np.concatenate([g[..., :-1], h[..., :-1], g[..., -1:], h[..., -1:]], axis=-1)


def best_reference(cum: np.ndarray, head: Head, min_coverage: int, feature_mask: np.ndarray) -> np.ndarray:
    """The score kernel's result (a split_t: minus the least quality, its flat index) from prefix sums (F, n_bins,
    lanes); value -inf (index 0) where nothing is allowed."""
    q = binned.qualities(cum, head, min_coverage)
    q[~np.asarray(feature_mask, bool)] = np.inf
    out = np.zeros(1, _BEST)
    flat = int(np.argmin(q))
    out["value"], out["index"] = -q.flat[flat], flat
    return out


# ------------------------------------------------------------------------------------------------ heuristics
def score_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """One node: work-groups over features (a few per compute unit), lanes over bins and both operators."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_bin"] = pow2_at_most(sizes["bin"], 64 if gpu else 16)
    cfg["NUM_WI_dir"] = 2
    cfg["NUM_WG_feat"] = pow2_at_most(sizes["feat"], max(1, dev.compute_units) * (4 if gpu else 1))
    return cfg


# ------------------------------------------------------------------------------------------------ tuner inputs
def _problem(s: Mapping[str, int], rng: np.random.Generator, kind: str = "complete"):  # noqa: ANN202
    """A refinement step's statistics: ``feat`` features of ``bin`` + 2 bins (NaN last), ``n_labels`` labels."""
    n, f, k, nb = int(s.get("rows", 2000)), int(s["feat"]), int(s["n_labels"]), int(s["bin"]) + 2
    bins = rng.integers(0, nb, (n, f)).astype(np.uint8)
    G, H = rng.normal(size=(n, k)), rng.random((n, k)) * 0.25
    head = Head(kind, False, np.arange(k), k, 0.0, 1.0)
    covered = rng.random(n) < 0.7
    vals = binned.slot_values(head.gather(G, H), covered, np.ones(n))
    return head, np.cumsum(binned.statistics(bins, nb, vals), axis=1)


def _score_inputs(kind: str):  # noqa: ANN202
    def make(s, rng):  # noqa: ANN001, ANN202
        head, cum = _problem(s, rng, kind)
        scan = to_slots(cum, head.k)
        out = {"feature_mask": np.ones(int(s["feat"]), np.uint8), "l2": 1.0, "l1": 0.0, "min_coverage": 1.0}
        if s.get("quantized"):  # fixed point: 2^e per (slot, g|h), every prefix sum within 2^30 (as a fit's are)
            e = quantization_exponents(np.abs(scan).max(axis=(0, 1, 3)), 1)
            scan = np.rint(scan * np.ldexp(1.0, e)[None, None, :, None, :]).astype(np.int32)
            out["inv_scale"] = np.ldexp(1.0, -e).reshape(-1)
        return {"scan": scan, "hist": scan, **out}
    return make


def _score_ref(kind: str):  # noqa: ANN202
    def ref(a):  # noqa: ANN001, ANN202
        scan = a["scan"]
        if "inv_scale" in a:  # the integers as the kernel reads them: q * 2^-e, exact
            scan = scan * a["inv_scale"].reshape(-1, 2)[None, None, :, None, :]
        cum = from_slots(scan)
        k = a["scan"].shape[2] - 1
        head = Head(kind, False, np.arange(k), k, float(a["l1"]), float(a["l2"]))
        return best_reference(cum, head, int(a["min_coverage"]), a["feature_mask"])
    return ref


def _atoms_inputs(s, rng):  # noqa: ANN001, ANN202
    """A step's statistics as the histogram reads them (``slot`` = head labels + the count slot), in place."""
    n, k = int(s["row"]), int(s["slot"]) - 1
    L = k + 3
    return {"G": rng.normal(size=n * L), "H": rng.random(n * L), "weight": (rng.random(n) < 0.8).astype(float),
            "covered": (rng.random(n) < 0.7).astype(np.uint8),
            "cols": np.concatenate([np.arange(1, k + 1), [0, 0], np.arange(k)]).astype(np.int32),
            "g_stride": L, "h_stride": L, "k": k, "h_at": k + 2}


def _atoms_q_inputs(s, rng):  # noqa: ANN001, ANN202
    a = _atoms_inputs(s, rng)
    a["G"], a["H"] = (rng.integers(-2**20, 2**20, a["G"].size).astype(np.int32),
                      rng.integers(0, 2**20, a["H"].size).astype(np.int32))
    a["g_stride"] = a["h_stride"] = a["weight"].size  # label-major
    return a


def _atoms_ref(a):  # noqa: ANN001, ANN202
    """Each row's (g, h) per slot, as :func:`mdhom.rules.binned.slot_values` makes them: what the histogram sums."""
    n, k = a["weight"].size, a["k"]
    gcol, hcol = a["cols"][:k], a["cols"][a["h_at"]: a["h_at"] + k]
    if a["G"].dtype.kind == "i":  # quantized: label-major
        G, H = a["G"].reshape(-1, n).T[:, gcol], a["H"].reshape(-1, n).T[:, hcol]
    else:
        L = a["g_stride"]
        G, H = a["G"].reshape(n, L)[:, gcol], a["H"].reshape(n, L)[:, hcol]
    vals = binned.slot_values(np.concatenate([G, H], axis=1), a["covered"] != 0, a["weight"])
    out = np.zeros((n, k + 1), hist_gh_type("quantized" if a["G"].dtype.kind == "i" else "double").dtype)
    out["g"] = np.concatenate([vals[:, :k], vals[:, 2 * k: 2 * k + 1]], axis=1)
    out["h"] = np.concatenate([vals[:, k: 2 * k], vals[:, 2 * k + 1:]], axis=1)
    return out


def _cover_inputs(s, rng):  # noqa: ANN001, ANN202
    n, f = int(s["row"]), 72
    return {"covered": (rng.random(n) < 0.8).astype(np.uint8), "bins": rng.integers(0, 34, n * f).astype(np.uint8),
            "n_feat": f, "feat": 5, "bin": 12, "op": 1, "missing": 33}


def _feature_bins_inputs(s, rng):  # noqa: ANN001, ANN202
    n, f = int(s["row"]), 120
    return {"bins": rng.integers(0, 34, n * f).astype(np.uint8),
            "fidx": np.concatenate([rng.integers(0, f, 5), np.sort(rng.choice(f, int(s["feat"]), replace=False))]
                                   ).astype(np.int32), "n_feat": f, "fidx0": 5}


def _feature_bins_ref(a):  # noqa: ANN001, ANN202
    return a["bins"].reshape(-1, a["n_feat"])[:, a["fidx"][a["fidx0"]:]]


def _head_inputs(s, rng):  # noqa: ANN001, ANN202
    k = 13
    res = np.zeros(k + 1, SIDE.dtype)
    res["g"], res["h"] = rng.normal(size=k + 1), rng.random(k + 1)
    res["g"][[3, 9]], res["h"][[3, 9]] = 2.0, 0.5  # a tie: the first wins
    res["h"][5] = -1.0  # h + l2 == 0: score 0
    return {"res": res.view(np.float64).copy(), "cols": rng.integers(0, 50, 2 * k + 3).astype(np.int32),
            "k": k, "h_at": k + 3, "l2": 1.0, "l1": 0.0}


def _head_scale_inputs(s, rng):  # noqa: ANN001, ANN202
    a = _head_inputs(s, rng)
    del a["cols"], a["h_at"]
    a["l1"] = 0.3  # soft thresholding too
    return {**a, "inv_scale": rng.random(2 * (a["k"] + 1))}


def _head_label(a) -> int:  # noqa: ANN001
    res = a["res"].view(SIDE.dtype)[: a["k"]]
    head = Head("single", False, np.arange(a["k"]), a["k"], a["l1"], a["l2"])
    return int(head.predict(np.concatenate([res["g"], res["h"]]))[0][0])


def _head_columns_ref(a):  # noqa: ANN001, ANN202
    c = _head_label(a)
    return np.array([a["cols"][c], a["cols"][a["h_at"] + c]], np.int32)


def _head_scale_ref(a):  # noqa: ANN001, ANN202
    c = _head_label(a)
    out = np.ones(2, gh_type("double").dtype)
    out["g"][0], out["h"][0] = a["inv_scale"][2 * c], a["inv_scale"][2 * c + 1]
    return out


def _cover_best_inputs(s, rng):  # noqa: ANN001, ANN202
    n, f, total, nb = int(s["row"]), 7, 19, 34
    best = np.zeros(1, _BEST)
    best["value"], best["index"] = 0.25, 2 * (nb - 2) * 4 + 2 * 13 + 1  # feature 4 of the sample, bin 13, ">"
    raw = best.view(np.uint8)
    fidx = np.concatenate([rng.integers(0, total, 3), np.sort(rng.choice(total, f, replace=False))]).astype(np.int32)
    return {"covered": (rng.random(n) < 0.8).astype(np.uint8), "bins": rng.integers(0, nb, total * n).astype(np.uint8),
            "fidx": fidx, "best": raw.view(np.int32).copy(), "best_value": raw.view(np.float64).copy(), "n_feat": f,
            "n_bins": nb, "fidx0": 3}


def _cover_best_ref(a):  # noqa: ANN001, ANN202
    best = a["best"].view(np.uint8).view(_BEST)[0]
    nb, f, n = a["n_bins"], a["n_feat"], a["covered"].size
    idx, n_cand = int(best["index"]), nb - 2
    if not (best["value"] > -np.inf and n_cand > 0 and 0 <= idx < f * n_cand * 2):
        return np.zeros(n, np.uint8)
    at, rest = divmod(idx, 2 * n_cand)
    b, op = divmod(rest, 2)
    feat = int(a["fidx"][a["fidx0"] + at])
    return _cover_ref({"covered": a["covered"], "bins": a["bins"].reshape(-1, n).T.ravel(),
                       "n_feat": a["bins"].size // n, "feat": feat, "bin": b, "op": op, "missing": nb - 1})


_TUNE_BINS = 34  # the tuner's and tests' histograms: 32 bins + an empty one + missing


def _histogram_inputs(quantized: bool):  # noqa: ANN202
    """A step's inputs: ``feat`` of 19 features sampled (from row 3 of the table), bins feature-major, the
    statistics of ``output`` + 2 labels (label-major int32 when quantized, else example-major doubles; a head of
    ``output`` - 1 of them), 0/1 weights and a mask."""
    def make(s, rng):  # noqa: ANN001, ANN202
        n, f, slots, total = int(s["pos"]), int(s["feat"]), int(s["output"]), 19
        a = (_atoms_q_inputs if quantized else _atoms_inputs)({"row": n, "slot": slots}, rng)
        if quantized:  # sums over 20000 rows within int32, as the fit's exponent rule keeps them
            a["G"], a["H"] = a["G"] >> 6, a["H"] >> 6
        fidx = np.concatenate([rng.integers(0, total, 3), np.sort(rng.choice(total, f, replace=False))])
        return {"bins": rng.integers(0, _TUNE_BINS, total * n).astype(np.uint8), "fidx": fidx.astype(np.int32),
                "G": a["G"], "H": a["H"], "weight": a["weight"], "covered": a["covered"], "cols": a["cols"],
                "n_rows": n, "fidx0": 3, "g_stride": a["g_stride"], "h_stride": a["h_stride"], "k": a["k"],
                "h_at": a["h_at"]}
    return make


def _histogram_ref(a):  # noqa: ANN001, ANN202
    """np.bincount per (feature, slot) over :func:`_atoms_ref`'s values, rows ascending from 0.0 (the pinned fold's
    order); (feat, slot) atoms of ``_TUNE_BINS`` (g, h) cells."""
    n, k = a["n_rows"], a["k"]
    vals = _atoms_ref(a)
    bins = a["bins"].reshape(-1, n)[a["fidx"][a["fidx0"]:]]
    out = np.zeros((bins.shape[0], k + 1, _TUNE_BINS), vals.dtype)
    for j in range(bins.shape[0]):
        for slot in range(k + 1):
            for lane in ("g", "h"):
                sums = np.bincount(bins[j], weights=vals[lane][:, slot].astype(np.float64), minlength=_TUNE_BINS)
                out[lane][j, slot] = sums  # integer lanes: exact integers below 2^53, cast on assignment
    return out


def _cover_ref(a):  # noqa: ANN001, ANN202
    b = a["bins"].reshape(a["covered"].size, a["n_feat"])[:, a["feat"]].astype(int)
    keep = (b != a["missing"]) & ((b <= a["bin"]) if a["op"] == 0 else (b > a["bin"]))
    return ((a["covered"] != 0) & keep).astype(np.uint8)


_SCORE_CLASSES = {
    "emotions": {"node": 1, "feat": 72, "bin": 32, "dir": 2, "n_labels": 6},
    "mediamill": {"node": 1, "feat": 120, "bin": 32, "dir": 2, "n_labels": 101},
}
_ROW_CLASSES = {"rows_1e3": 10**3, "rows_1e4": 10**4, "rows_1e5": 10**5}


def _score_spec(kind: str) -> KernelSpec:
    gain = head_gain(kind)
    return KernelSpec(gain.kernel_name, score_heuristic, tuning=Tuning(
        lambda s: score(int(s["bin"]) + 2, int(s["n_labels"]), kind, class_precision(s)),
        with_quantized_classes(_SCORE_CLASSES), _score_inputs(kind),
        _score_ref(kind), doc=f"rule refinement: {kind} head quality of every (feature, bin, operator), arg-max"))


SCORE_SINGLE = _score_spec("single")
SCORE_COMPLETE = _score_spec("complete")
COVER = KernelSpec("rule_cover", elementwise("row"), tuning=Tuning(
    lambda s: cover(), {c: {"row": n} for c, n in _ROW_CLASSES.items()}, _cover_inputs, _cover_ref,
    doc="rule refinement: the coverage mask after a condition"))
COVER_BEST = KernelSpec("rule_cover_best", elementwise("row"), tuning=Tuning(
    lambda s: cover_best(), {c: {"row": n} for c, n in _ROW_CLASSES.items()}, _cover_best_inputs, _cover_best_ref,
    doc="rule refinement: the coverage mask after the condition the last step chose, read on the device"))
HEAD_COLUMNS = KernelSpec("rule_head_columns", description_default, tuning=Tuning(
    lambda s: head_columns(), {"one": {"i": 2}}, _head_inputs, _head_columns_ref,
    doc="rule refinement: a single-label head's columns after the label its first step chose (2 work-items)"))
HEAD_SCALE = KernelSpec("rule_head_scale", description_default, tuning=Tuning(
    lambda s: head_scale(), {"one": {"slot": 2}}, _head_scale_inputs, _head_scale_ref,
    doc="rule refinement: a single-label head's 2^-k per slot after the label its first step chose (2 work-items)"))
FEATURE_BINS = KernelSpec("rule_feature_bins", elementwise("row"), tuning=Tuning(
    lambda s: feature_bins(), {c: {"row": n, "feat": 7} for c, n in _ROW_CLASSES.items()}, _feature_bins_inputs,
    _feature_bins_ref, doc="rule refinement: the sampled features' bins side by side"))
def histogram_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The trees' one-node histogram heuristic (:func:`mdhom.components.histogram.histogram_heuristic`) without
    the node dimension: a work-group per (feature, row chunk); quantized on a GPU with the local histogram
    (PARTIALS_LOCAL) and 256 work-items over rows; on CPUs the rows of a feature folded in one lane per group."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cu = max(1, dev.compute_units)
    cfg["NUM_WG_feat"] = sizes["feat"]
    if desc.name == "rule_histogram":
        if gpu:
            cfg["NUM_WI_pos"] = cfg["NUM_WG_pos"] = 16
        else:
            cfg["NUM_WG_pos"] = pow2_at_most(2 * cu, 64)
    elif gpu and cfg.get("PARTIALS_LOCAL"):
        cfg["NUM_WI_pos"], cfg["NUM_WG_pos"] = 256, 16
    elif gpu:
        cfg["NUM_WI_pos"] = cfg["NUM_WG_pos"] = 16
    else:
        cfg["NUM_WG_pos"] = pow2_at_most(max(1, 2 * cu // max(1, sizes["feat"])), 64)
    return cfg


_HIST_CLASSES = {"mediamill_first": {"feat": 7, "output": 102, "pos": 20000},
                 "mediamill_single": {"feat": 7, "output": 2, "pos": 20000},
                 "emotions": {"feat": 7, "output": 7, "pos": 400}}
# exact mode pins the row fold to one lane (rows ascending: np.bincount's order), and a double fit is always exact:
# the tuner searches the other parameters under the pins
_PINS = {"NUM_WI_pos": 1, "NUM_WG_pos": 1}
HISTOGRAM = KernelSpec("rule_histogram", histogram_heuristic, exact_pins=_PINS, tuning=Tuning(
    lambda s: histogram(_TUNE_BINS), _HIST_CLASSES, _histogram_inputs(False), _histogram_ref, fixed=_PINS,
    doc="rule refinement: a step's statistics per (sampled feature, slot, bin) over the covered rows, read in place "
        "(exact: one lane per sum)"))
HISTOGRAM_Q = KernelSpec("rule_histogram_q", histogram_heuristic, tuning=Tuning(
    lambda s: histogram(_TUNE_BINS, "quantized"), _HIST_CLASSES, _histogram_inputs(True), _histogram_ref,
    doc="rule refinement (quantized): a step's int32 statistics per (sampled feature, slot, bin), read in place"))
RESULT = KernelSpec("rule_refine_result", description_default)  # k + 1 work-items: nothing to tune
# the statistics update after a rule (mdhom.rules.device_stats) is listed here: the spec collection reads this module
SPECS = (SCORE_SINGLE, SCORE_COMPLETE, HISTOGRAM, HISTOGRAM_Q, COVER, COVER_BEST, HEAD_COLUMNS,
         HEAD_SCALE, FEATURE_BINS, RESULT, *ds.SPECS)
assert SCORE_SINGLE.name == SINGLE_HEAD_GAIN.kernel_name and SCORE_COMPLETE.name == COMPLETE_HEAD_GAIN.kernel_name
