"""The statistics update after a rule, on the device, for the label-wise losses in quantized precision: why the
host sends no statistics per rule.

Before, the host added a rule's head to the covered examples' scores, recomputed their gradients and Hessians
(:meth:`mdhom.rules.induction.Learner.apply`), quantized the changed columns for the next rule
(:meth:`mdhom.rules.quantized.QuantizedStatistics.refresh`) and sent them up (two column copies per rule of a
single-label head): ~1.9 ms of host numpy per rule on PoCL, more than the rule's kernels on a GPU. Here the scores
``S`` (label-major doubles, one upload per fit after the default rule), the labels ``Y`` (label-major bytes, one
upload) and the int32 fixed point the refinement reads (``GHq``: the gradient columns, then the Hessian columns at
an aligned offset) live on the device, and a rule's head is applied by five md_hom kernels (one exp per row):

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
rule_apply_scores_<l>  slot x row                       concat: a head label's new scores (the head's score
                                                        added where the row is covered) and the loss's (g, h)
                                                        at them (<l>: logistic_labelwise, squared_error)
rule_stat_absmax       row x slot                       max over rows, concat over slots: max |g|, max |h| of
                                                        each new column
rule_stat_scale        slot x part                      concat, scattered to the column: 2^k and 2^-k with the
                                                        trees' exponent rule, in exact integer arithmetic
rule_stat_quantize     slot x part x row                concat, scattered to the column: rint((g | h) * 2^k)
rule_commit_scores     slot x row                       concat, scattered: the new score columns into ``S``
rule_head_inv          slot                             concat: a head's 2^-k per slot (the score kernels'
                                                        ``inv_scale``) from the per-column table
=====================  ===============================  ======================================================

The same bits as the host: the gradients are the loss's own formula (:class:`mdhom.rules.losses.LogisticLabelWise`:
``sigmoid_exact`` with the portable exp of ``kernels/trees/loss.cl``, ``p - y``, ``p * (1 - p)``;
:class:`~mdhom.rules.losses.SquaredError`: ``s - (2y - 1)``, ``1``) under ``FP_CONTRACT OFF``, and a gradient is a
function of its score alone, so recomputing a whole column from the scores gives what the host's updates of the
covered rows left; MAX is exact in any order; the exponent is
:func:`mdhom.components.quantize.quantization_exponent`'s, computed with a 128-bit integer product instead of
rationals; multiplying by a power of two is exact and ``rint`` correctly rounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.lanes import gh_type, snippet
from mdhom.components.quantize import MAX_EXPONENT, QUANT_BITS, quantization_exponents, quantization_scales
from mdhom.components.specs import KernelSpec, Tuning, description_default, elementwise, ones
from mdhom.devices import Device
from mdhom.learn import portable
from mdhom.mdh import MAX, Concat, Description, Input, Param, Reduce, Struct
from mdhom.rules.losses import make_loss

# the losses whose statistics update runs on the device: decomposable, one Hessian column per label
LOSSES = {"squared_error": 0, "logistic_labelwise": 1}


def _preamble(loss: str) -> str:
    """The portable exp of ``kernels/trees/loss.cl`` (its constants as hex literals) and the rule losses' (g, h)."""
    defines = [f"#define RULE_LOSS {LOSSES[loss]}", "#define TREE_EXP_EXACT 1", "#define TREE_EPS 0x0p+0",
               f"#define TREE_INV_LN2 {portable.INV_LN2.hex()}", f"#define TREE_LN2_HI {portable.LN2_HI.hex()}",
               f"#define TREE_LN2_LO {portable.LN2_LO.hex()}", f"#define TREE_EXP_MIN {portable.EXP_MIN.hex()}",
               f"#define RULE_QUANT_BITS {QUANT_BITS}", f"#define RULE_MAX_EXPONENT {MAX_EXPONENT}"]
    defines += [f"#define TREE_EXP_C{i} {c.hex()}" for i, c in enumerate(portable.EXP_COEFFS)]
    return "typedef double tree_real_t;\n" + "\n".join(defines) + "\n" + snippet("loss.cl") + r"""
#pragma OPENCL FP_CONTRACT OFF
/* (g, h) of one (example, label) at score s for the label y (0 or 1): mdhom.rules.losses' statistics. */
inline void rule_loss_gh(const double s, const double y, double* g, double* h) {
#if RULE_LOSS == 1
    const double e = tree_exp_nonpositive(-fabs(s));
    const double p = (s >= 0.0) ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *g = p - y;
    *h = p * (1.0 - p);
#else
    *g = s - (2.0 * y - 1.0);
    *h = 1.0;
#endif
}

/* The largest k with n * m * 2^k <= 2^RULE_QUANT_BITS, clamped to +-RULE_MAX_EXPONENT, 0 for m == 0:
 * mdhom.components.quantize.quantization_exponent. m = M 2^(e - 53) with M a 53-bit integer, so the condition is
 * M n <= 2^(QUANT_BITS + 53 - e - k): k = QUANT_BITS + 53 - e - ceil(log2(M n)), M n a 128-bit product. */
inline int rule_quant_exponent(const double m, const long n_rows) {
    if (m == 0.0) return 0;
    int e;
    const double f = frexp(m, &e);
    const ulong big = (ulong)ldexp(f, 53);
    const ulong n = (ulong)(n_rows > 1 ? n_rows : 1);
    ulong hi = mul_hi(big, n), lo = big * n;
    if (lo == 0) hi -= 1;  /* P - 1: ceil(log2 P) is its bit length */
    lo -= 1;
    const int bits = hi != 0 ? 128 - (int)clz(hi) : 64 - (int)clz(lo);
    const int k = RULE_QUANT_BITS + 53 - e - bits;
    return k < -RULE_MAX_EXPONENT ? -RULE_MAX_EXPONENT : (k > RULE_MAX_EXPONENT ? RULE_MAX_EXPONENT : k);
}
"""


# a row of a head's column after the head: its new score and the loss's (g, h) there
SGH = Struct("rule_sgh_t", (("s", "double"), ("g", "double"), ("h", "double")))
# read as doubles (s, g, h at 0, 1, 2 of a record): the new column's row
_NEW = [Input("new", "double", ("*",), gather=True)]
_ROW = "const long mdh_r = 3 * ((long)slot * SIZE_row + row);\n"


@lru_cache(maxsize=2)
def apply_scores(loss: str) -> Description:
    """The new score columns of a head's labels ``cols[slot]`` and the loss's (g, h) at them (one exp per row, which
    :func:`stat_absmax` and :func:`stat_quantize` then read): ``S + score[slot]`` where the row is covered and
    ``add`` is set, the old score elsewhere (:meth:`Learner.apply`'s ``S[rows, col] + score``; ``add`` 0: the
    statistics of the scores as they are, after the upload). Written beside ``S`` (slot-major), not into it:
    :func:`commit_scores` puts the scores back."""
    return Description(
        f"rule_apply_scores_{loss}", ["slot", "row"], [Concat(), Concat()], SGH,
        scalar="""
const long mdh_i = (long)cols[slot] * SIZE_row + row;
const double mdh_s = S[mdh_i];
out.s = (add && covered != 0) ? mdh_s + score[slot] : mdh_s;
rule_loss_gh(out.s, (double)Y[mdh_i], &out.g, &out.h);""",
        inputs=[Input("S", "double", ("*",), gather=True), Input("Y", "uchar", ("*",), gather=True),
                Input("covered", "uchar", ("row",)), Input("cols", "int", ("*",), gather=True),
                Input("score", "double", ("*",), gather=True)],
        params=[Param("add", "int")], preamble=_preamble(loss),
    )


@lru_cache(maxsize=1)
def stat_absmax() -> Description:
    """max |g| and max |h| over every row of each slot's new column (NaN as +inf): the fixed-point scale's input
    (:func:`mdhom.rules.quantized._quantize`'s ``absmax``)."""
    return Description(
        "rule_stat_absmax", ["row", "slot"], [Reduce(MAX), Concat()], gh_type("double"),
        scalar=_ROW + "const double mdh_g = new[mdh_r + 1], mdh_h = new[mdh_r + 2];\n"
                      "out.g = isnan(mdh_g) ? INFINITY : fabs(mdh_g);\nout.h = isnan(mdh_h) ? INFINITY : fabs(mdh_h);",
        inputs=_NEW,
    )


@lru_cache(maxsize=1)
def stat_scale() -> Description:
    """Per slot and part (0: gradient, 1: Hessian) the column's (2^k, 2^-k) from its max, scattered to the column's
    row of the per-column table (gradient column c at c, Hessian column c at ``h_base + c``). Non-finite maxima (no
    finite score gives them) scale by 0: the host's ValueError has no device form."""
    return Description(
        "rule_stat_scale", ["slot", "part"], [Concat(), Concat()], gh_type("double"),
        scalar="""
const double mdh_m = part == 0 ? absmax[2 * slot] : absmax[2 * slot + 1];
const int mdh_k = rule_quant_exponent(mdh_m, n_rows);
const int mdh_ok = isfinite(mdh_m);
out.g = mdh_ok ? ldexp(1.0, mdh_k) : 0.0;
out.h = mdh_ok ? ldexp(1.0, -mdh_k) : 0.0;
out_at = part == 0 ? (idx_t)cols[slot] : (idx_t)h_base + cols[h_at + slot];""",
        inputs=[Input("absmax", "double", ("*",), gather=True), Input("cols", "int", ("*",), gather=True)],
        params=[Param("n_rows", "long"), Param("h_base", "int"), Param("h_at", "int")],
        preamble=_preamble("squared_error"), scatter=True,
    )


@lru_cache(maxsize=1)
def stat_quantize() -> Description:
    """``rint(g * 2^k)`` (part 0) and ``rint(h * 2^k)`` (part 1) of every row of each slot's new column, scattered
    into the refinement's label-major int32 statistics (gradient column c at ``c * rows``, Hessian column c at
    ``h_off + c * rows``): :func:`mdhom.components.quantize.quantize`."""
    return Description(
        "rule_stat_quantize", ["slot", "part", "row"], [Concat(), Concat(), Concat()], "int",
        scalar=_ROW + """const int mdh_c = part == 0 ? cols[slot] : cols[h_at + slot];
out = (int)mdh_rint(new[mdh_r + 1 + part] * scale[2 * (part == 0 ? mdh_c : h_base + mdh_c)]);
out_at = (part == 0 ? 0 : h_off) + (idx_t)mdh_c * SIZE_row + row;""",
        inputs=[*_NEW, Input("cols", "int", ("*",), gather=True), Input("scale", "double", ("*",), gather=True)],
        params=[Param("h_base", "int"), Param("h_at", "int"), Param("h_off", "long")], scatter=True,
    )


@lru_cache(maxsize=1)
def commit_scores() -> Description:
    """The new score columns back into ``S`` (every row: an uncovered one's is its old score)."""
    return Description(
        "rule_commit_scores", ["slot", "row"], [Concat(), Concat()], "double",
        scalar=_ROW + "out = new[mdh_r];\nout_at = (idx_t)cols[slot] * SIZE_row + row;",
        inputs=[*_NEW, Input("cols", "int", ("*",), gather=True)],
        scatter=True,
    )


@lru_cache(maxsize=1)
def head_inv() -> Description:
    """A head's 2^-k per slot from the per-column table: slot < k its gradient column ``cols[slot]``'s and its
    Hessian column ``cols[h_at + slot]``'s, slot k (the count) 1.0, 1.0: the score and result kernels'
    ``inv_scale``, so that no scale goes up with the head."""
    return Description(
        "rule_head_inv", ["slot"], [Concat()], gh_type("double"),
        scalar="""
out.g = slot < k ? scale[2 * cols[slot] + 1] : 1.0;
out.h = slot < k ? scale[2 * (h_base + cols[h_at + slot]) + 1] : 1.0;""",
        inputs=[Input("scale", "double", ("*",), gather=True), Input("cols", "int", ("*",), gather=True)],
        params=[Param("k", "int"), Param("h_base", "int"), Param("h_at", "int")],
    )


# ------------------------------------------------------------------------------------------------ references
def loss_statistics(loss: str, Y: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The host's (g, h) (:meth:`RuleLoss.statistics`): what every kernel above must reproduce to the bit."""
    return make_loss(loss).statistics(np.asarray(Y, np.float64), S)


def _apply_inputs(loss: str):  # noqa: ANN202
    """``slot`` of ``slot`` + 3 label columns of ``row`` rows: scores with extremes (0, -0, 40, tiny, huge), labels,
    a mask, the head's scores."""
    def make(s, rng):  # noqa: ANN001, ANN202
        n, k = int(s["row"]), int(s["slot"])
        L = k + 3
        S = rng.normal(size=(L, n)) * 3.0
        S[:, : min(n, 5)] = np.array([0.0, -0.0, 40.0, -1e-300, -800.0])[: min(n, 5)]
        return {"S": S.ravel(), "Y": rng.integers(0, 2, L * n).astype(np.uint8),
                "covered": (rng.random(n) < 0.6).astype(np.uint8),
                "cols": rng.choice(L, k, replace=False).astype(np.int32), "score": rng.normal(size=k), "add": 1}
    return make


def _apply_ref(loss: str):  # noqa: ANN202
    def ref(a):  # noqa: ANN001, ANN202
        n = a["covered"].size
        S = a["S"].reshape(-1, n)[a["cols"]]
        new = np.where(a["covered"][None] != 0, S + a["score"][:, None], S) if a["add"] else S
        g, h = loss_statistics(loss, a["Y"].reshape(-1, n)[a["cols"]], new)
        out = np.zeros(new.shape, SGH.dtype)
        out["s"], out["g"], out["h"] = new, g, h
        return out
    return ref


def _new_columns(s: Mapping[str, int], rng: np.random.Generator) -> np.ndarray:
    """``slot`` new columns of ``row`` rows as :func:`apply_scores` leaves them (logistic statistics)."""
    n, k = int(s["row"]), int(s["slot"])
    S = rng.normal(size=(k, n)) * 3.0
    g, h = loss_statistics("logistic_labelwise", rng.integers(0, 2, (k, n)), S)
    new = np.zeros((k, n), SGH.dtype)
    new["s"], new["g"], new["h"] = S, g, h
    new["g"][0, 0] = -0.0
    return new


def _flat(new: np.ndarray) -> np.ndarray:
    """(slot, row) new columns as the kernels read them, doubles, and one more holding the slot count (the kernels
    never read it; the references take the shape from it)."""
    return np.append(new.view(np.float64).ravel(), float(new.shape[0]))


def _unflat(flat: np.ndarray) -> np.ndarray:
    return flat[:-1].view(SGH.dtype).reshape(int(flat[-1]), -1)


def _absmax_inputs(s, rng):  # noqa: ANN001, ANN202
    return {"new": _flat(_new_columns(s, rng))}


def _absmax_ref(a):  # noqa: ANN001, ANN202
    new = _unflat(a["new"])
    out = np.zeros(new.shape[0], gh_type("double").dtype)
    out["g"], out["h"] = np.abs(new["g"]).max(axis=1), np.abs(new["h"]).max(axis=1)
    return out


def _scale_inputs(s, rng):  # noqa: ANN001, ANN202
    k = int(s["slot"])
    m = np.abs(rng.normal(size=2 * k)) * 2.0 ** rng.integers(-40, 40, 2 * k)
    m[:6] = [0.0, 1.0, 0.25, 2.0 ** -1070, 1.5, 2.0 ** 900][: min(6, 2 * k)]  # zero, powers of two, extremes
    return {"absmax": m, "cols": np.concatenate([rng.permutation(k)] * 2).astype(np.int32), "n_rows": 20000,
            "h_base": k, "h_at": k}


def _scale_ref(a):  # noqa: ANN001, ANN202
    k = a["cols"].size // 2
    am = a["absmax"].reshape(k, 2)
    scale, inv = quantization_scales(quantization_exponents(am, a["n_rows"]))
    out = np.zeros(2 * k, gh_type("double").dtype)
    at = np.concatenate([a["cols"][:k], a["h_base"] + a["cols"][a["h_at"]:]])
    out["g"][at], out["h"][at] = scale.T.ravel(), inv.T.ravel()
    return out


def _quantize_inputs(s, rng):  # noqa: ANN001, ANN202
    """New columns, a column order, and a scale table (per column (2^k, 2^-k): gradient columns, then Hessian
    columns) from their maxima, as :func:`stat_scale` leaves it."""
    new = _new_columns(s, rng)
    k, n = new.shape
    cols = rng.permutation(k).astype(np.int32)
    am = np.stack([np.abs(new["g"]).max(axis=1), np.abs(new["h"]).max(axis=1)], axis=1)
    scale, _ = quantization_scales(quantization_exponents(am, n))
    table = np.zeros((2 * k, 2))
    table[np.concatenate([cols, k + cols]), 0] = scale.T.ravel()
    return {"new": _flat(new), "cols": cols, "scale": table.ravel(), "h_base": k, "h_at": 0, "h_off": k * n}


def _quantize_ref(a):  # noqa: ANN001, ANN202
    new = _unflat(a["new"])
    k, n = new.shape
    table = a["scale"].reshape(-1, 2)[:, 0]
    out = np.zeros((2, k, n), np.int32)
    for j, c in enumerate(a["cols"]):
        out[0, c] = np.rint(new["g"][j] * table[c]).astype(np.int64)
        out[1, c] = np.rint(new["h"][j] * table[a["h_base"] + c]).astype(np.int64)
    return out.ravel()


def _commit_inputs(s, rng):  # noqa: ANN001, ANN202
    new = _new_columns(s, rng)
    return {"new": _flat(new), "cols": rng.permutation(new.shape[0]).astype(np.int32)}


def _commit_ref(a):  # noqa: ANN001, ANN202
    new = _unflat(a["new"])
    out = np.zeros(new.shape)
    out[a["cols"]] = new["s"]
    return out.ravel()


def _head_inv_inputs(s, rng):  # noqa: ANN001, ANN202
    k = int(s["slot"]) - 1
    L = max(11, k)  # labels: a head of k distinct ones (the "all" class: mediamill's 101)
    return {"scale": rng.random(4 * L), "cols": np.concatenate([rng.choice(L, k, replace=False)] * 2).astype(np.int32),
            "k": k, "h_base": L, "h_at": k}


def _head_inv_ref(a):  # noqa: ANN001, ANN202
    k = a["k"]
    table = a["scale"].reshape(-1, 2)
    out = np.ones(k + 1, gh_type("double").dtype)
    out["g"][:k], out["h"][:k] = table[a["cols"][:k], 1], table[a["h_base"] + a["cols"][a["h_at"]: a["h_at"] + k], 1]
    return out


def absmax_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """The trees' absmax heuristic (:func:`mdhom.components.gradients.absmax_heuristic`) over ``row``: lanes and
    work-groups along the rows (a column of 20000 rows is too little work for more)."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_row"] = 256 if gpu else 64
    cfg["NUM_WG_row"] = max(1, dev.compute_units) * (4 if gpu else 1)
    return cfg


_ROWS = {"rows_1e3": 10**3, "rows_2e4": 20000}
APPLY = {loss: KernelSpec(f"rule_apply_scores_{loss}", elementwise("row"), tuning=Tuning(
    lambda s, loss=loss: apply_scores(loss), {c: {"slot": 1, "row": n} for c, n in _ROWS.items()},
    _apply_inputs(loss), _apply_ref(loss),
    doc=f"rule statistics: a head's new score columns and the {loss} loss's (g, h) there")) for loss in LOSSES}
ABSMAX = KernelSpec("rule_stat_absmax", absmax_heuristic, tuning=Tuning(
    lambda s: stat_absmax(), {c: {"row": n, "slot": 1} for c, n in _ROWS.items()}, _absmax_inputs, _absmax_ref,
    doc="rule statistics: max |g|, |h| of each new column"))
SCALE = KernelSpec("rule_stat_scale", description_default, tuning=Tuning(
    lambda s: stat_scale(), {"one": {"slot": 1, "part": 2}, "all": {"slot": 101, "part": 2}}, _scale_inputs,
    _scale_ref, doc="rule statistics: a column's fixed-point exponent from its max, exactly"))
QUANTIZE = KernelSpec("rule_stat_quantize", elementwise("row"), tuning=Tuning(
    lambda s: stat_quantize(), {c: {"slot": 1, "part": 2, "row": n} for c, n in _ROWS.items()}, _quantize_inputs,
    _quantize_ref, doc="rule statistics: the (g, h) of the new columns as int32 fixed point"))
COMMIT = KernelSpec("rule_commit_scores", elementwise("row"), tuning=Tuning(
    lambda s: commit_scores(), {c: {"slot": 1, "row": n} for c, n in _ROWS.items()}, _commit_inputs, _commit_ref,
    doc="rule statistics: the new score columns back into the scores"))
HEAD_INV = KernelSpec("rule_head_inv", description_default, tuning=Tuning(
    lambda s: head_inv(), {"single": {"slot": 2}, "all": {"slot": 102}}, _head_inv_inputs, _head_inv_ref,
    doc="rule refinement (quantized): a head's 2^-k per slot from the device's per-column table"))
SPECS = (*APPLY.values(), ABSMAX, SCALE, QUANTIZE, COMMIT, HEAD_INV)
