"""The gradient source: (g, h) of every row from the resident raw scores (the loss on the device), or from the
host; in position order for the histogram; and, in quantized mode, as int32 fixed point with a power-of-two
scale per round (the quantiser).

Gradients are computed in row order right after the rows were reset (position order = row order then);
after ``set_gradients`` they are gathered into position order once (``tree_gather_gh``). Quantisation takes
max |g|, |h| per output on the device, the exponents there too (``tree_gh_scale``, exactly the reference's
:func:`mdhom.components.quantize.quantization_exponent`; the host reads the maxima behind the launches and refuses
non-finite ones), then rint(x * 2^k) on the device: every device and numpy produce the same integers.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_gradients_<loss>  row x output                     concat, concat: (g, h) from the resident scores
tree_gather_gh         pos x output                     concat: (g, h) of row ridx[pos]
tree_gh_absmax         pos x output                     max over positions, concat over outputs
tree_gh_scale          output x lane                    concat, concat: 2^(+-k) from the maxima
tree_quantize_gh       pos x output                     concat: rint((g, h) * 2^k)
=====================  ===============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache

import numpy as np
import pyopencl as cl

from mdhom.components.lanes import (
    GHQ,
    gh_struct,
    gh_type,
    real_ctype,
    snippet,
    vector_class_applies,
    vector_defines,
    vector_forms,
    with_vector_classes,
)
from mdhom.components.quantize import (
    MAX_EXPONENT,
    QUANT_BITS,
    quantization_exponents,
    quantization_scales,
    quantize,
)
from mdhom.components.specs import KernelSpec, Tuning, elementwise, ones
from mdhom.components.workspace import Bound, Workspace
from mdhom.devices import Device
from mdhom.learn import losses, portable
from mdhom.mdh import MAX, Concat, Description, Input, Param, Reduce, Struct, Vector


@lru_cache(maxsize=4)
def gather_gh(precision: str = "double") -> Description:
    """Gradients and hessians in position order: (g, h) of row ``ridx[pos]`` for every output."""
    r = real_ctype(precision)
    return Description(
        "tree_gather_gh", ["pos", "output"], [Concat(), Concat()], gh_type(precision),
        scalar="const long i = (long)ridx[pos] * SIZE_output + output; out.g = grad[i]; out.h = hess[i];",
        inputs=[Input("ridx", "int", ("pos",), gather=True), Input("grad", r, (1,), gather=True),
                Input("hess", r, (1,), gather=True)],
        chunked=True,
    )


# ------------------------------------------------------------------------------------------------ quantisation
# |g| and |h| as the bits of non-negative doubles: their order as unsigned integers is the doubles' order, with NaN
# above +inf
GH_BITS = Struct("gh_bits_t", (("g", "ulong"), ("h", "ulong")))


@lru_cache(maxsize=1)
def gh_absmax() -> Description:
    """max |g| and max |h| per output over the positions, as the bits of the doubles (:func:`absmax_values` reads
    them): what the fixed-point scale of a round is chosen from. MAX is exact, so the result does not depend on the
    order; a NaN anywhere shows as NaN (its bits exceed every other |x|'s), which the scale's choice refuses. The
    maximum of integers with no select on doubles is what CPUs' compilers vectorize (the kernel alone, 500k rows,
    2-core AMD EPYC: PoCL 2.9-3.8 -> 1.5-2.8 ms, Intel's runtime 1.8-2.0 -> 1.5-1.7; the H100 at 10.5M rows 0.24 ->
    0.32 ms, heuristic configurations), and |x| as the bits with the sign cleared, which is what fabs gives, since
    PoCL calls fabs out of line, a call a lane (PoCL, 1M rows, 2-core EPYC: 2.8-3.1 -> 0.6-1.5 ms)."""
    return Description(
        "tree_gh_absmax", ["pos", "output"], [Reduce(MAX), Concat()], GH_BITS,
        scalar="const long i = 2 * ((long)pos * SIZE_output + output);\n"
               "out.g = as_ulong(gh[i]) & 0x7fffffffffffffffUL;\n"
               "out.h = as_ulong(gh[i + 1]) & 0x7fffffffffffffffUL;",
        inputs=[Input("gh", "double", ("pos", "output", 2), gather=True)],
        chunked=True,
    )


def absmax_values(bits: np.ndarray) -> np.ndarray:
    """(n_outputs, 2) max |g|, max |h| as float64 from ``tree_gh_absmax``'s (n_outputs,) records."""
    bits = np.asarray(bits)
    return np.stack([bits["g"], bits["h"]], axis=-1).astype(np.uint64).view(np.float64).reshape(-1, 2)


@lru_cache(maxsize=1)
def gh_scale() -> Description:
    """The round's fixed-point scales from ``tree_gh_absmax``'s records, on the device: ``2^k`` and ``2^-k`` per
    (output, g|h) with k :func:`mdhom.components.quantize.quantization_exponent`'s, the largest with
    ``n_rows * m * 2^k <= 2^QUANT_BITS`` (clamped to +-MAX_EXPONENT, 0 for m = 0). Exact in integers: m = M * 2^e
    with M the 53-bit significand, ``n_rows * M`` in 128 bits (``mul_hi``), k = QUANT_BITS - e - ceil(log2(n_rows *
    M)). The output is the quantisation's scale 2^k; the split search's ``inv_scale`` 2^-k is written beside it (a
    written gathered input, each point its own (output, lane): one launch, where two had run, one per sign), so the
    round's (g, h) are quantised without a round trip to the host (H200, 10.5M rows: the device waited ~0.16 ms a
    round for it). A non-finite m gives 0 here: the host, which reads the records behind the launches, refuses it."""
    return Description(
        "tree_gh_scale", ["output", "lane"], [Concat(), Concat()], "double",
        scalar="""
const int k = tree_quant_exponent(absmax[2 * output + lane], (ulong)n_rows);
inv[2 * output + lane] = ldexp(1.0, -k);
out = ldexp(1.0, k);""",
        inputs=[Input("absmax", "ulong", ("*",), gather=True),
                Input("inv", "double", ("*",), gather=True, writes=True)],
        params=[Param("n_rows", "long")],
        preamble=f"""/* k for the double of ``bits`` (|x|, so the sign bit is 0) and n = max(1, n_rows) rows */
inline int tree_quant_exponent(const ulong bits, const ulong rows) {{
    const ulong ef = bits >> 52, n = rows > 0 ? rows : 1;
    if (bits == 0 || ef >= 0x7ff) return 0;
    const ulong m = ef ? ((bits & 0xfffffffffffffUL) | 0x10000000000000UL) : bits;
    const int e = ef ? (int)ef - 1075 : -1074;
    const ulong lo = m * n, hi = mul_hi(m, n);
    const int floor_log2 = hi ? 127 - (int)clz(hi) : 63 - (int)clz(lo);
    const int ceil_log2 = floor_log2 + ((popcount(hi) + popcount(lo)) == 1 ? 0 : 1);
    return clamp({QUANT_BITS} - e - ceil_log2, -{MAX_EXPONENT}, {MAX_EXPONENT});
}}
""",
    )


@lru_cache(maxsize=1)
def quantize_gh() -> Description:
    """(g, h) as int32 fixed point: ``rint(g * scale)`` with ``scale`` a power of two per (output, g|h).

    Multiplying by a power of two is exact and rint is correctly rounded, so every device and numpy
    (:func:`mdhom.components.quantize.quantize`) produce the same integers. The products lie within +-2^QUANT_BITS
    (the scale's choice; non-finite gradients are refused before), where adding and subtracting 1.5 * 2^52 is
    rint: the generator's ``mdh_rint`` (for every double: fabs, copysign, a select) kept PoCL's and Intel's
    compilers from vectorizing the loop (the kernel alone, 500k rows, 2-core AMD EPYC: PoCL 4.7-5.7 -> 0.8-1.4 ms,
    Intel's runtime 3.0 -> 2.6 ms)."""
    return Description(
        "tree_quantize_gh", ["pos", "output"], [Concat(), Concat()], GHQ,
        scalar="const long i = 2 * ((long)pos * SIZE_output + output);\n"
               "out.g = (int)tree_rint_quantized(gh[i] * scale[2 * output]);\n"
               "out.h = (int)tree_rint_quantized(gh[i + 1] * scale[2 * output + 1]);",
        inputs=[Input("gh", "double", ("pos", "output", 2), gather=True),
                Input("scale", "double", ("output", 2), gather=True)],
        preamble="""#pragma OPENCL FP_CONTRACT OFF
/* rint(x) for |x| < 2^51, ties to even: x + 1.5 * 2^52 lies in [2^52, 2^53), where the spacing is 1 */
inline double tree_rint_quantized(const double x) { return (x + 0x1.8p52) - 0x1.8p52; }
""",
        chunked=True,
    )


# ------------------------------------------------------------------------------------------------ a round
LOSS_KINDS = {"squared": 0, "logistic": 1, "softmax": 2}


def _hex(x: float) -> str:
    return float(x).hex()


def _loss_defines(kind: str, precision: str) -> str:
    exact = precision == "double"
    lines = [f"#define TREE_LOSS {LOSS_KINDS[kind]}", f"#define TREE_EXP_EXACT {int(exact)}",
             f"#define TREE_EPS {_hex(losses._EPS)}"]
    if exact:
        lines += [f"#define TREE_INV_LN2 {_hex(portable.INV_LN2)}", f"#define TREE_LN2_HI {_hex(portable.LN2_HI)}",
                  f"#define TREE_LN2_LO {_hex(portable.LN2_LO)}", f"#define TREE_EXP_MIN {_hex(portable.EXP_MIN)}"]
        lines += [f"#define TREE_EXP_C{i} {_hex(c)}" for i, c in enumerate(portable.EXP_COEFFS)]
    return "\n".join(lines) + "\n"


# a vector form's end: the block's (g, h) times the rows' weights, 0 where a row is left out
_VEC_WEIGHTED = """
go.v = g * ws.v;
ho.v = h * ws.v;
for (int s = 0; s < VEC; ++s) {
    out[s].g = ks[s] ? go.s[s] : (tree_real_t)0;
    out[s].h = ks[s] ? ho.s[s] : (tree_real_t)0;
}"""
# the vector form of the logistic loss's (g, h) (kernels/trees/loss_vec.cl): VEC rows a block, each row's bits
_LOGISTIC_VEC = """
union { tree_real_t s[VEC]; tree_real_v v; } xs, ys, ws, go, ho;  /* PoCL calls vload/vstore out of line */
int ks[VEC];
for (int s = 0; s < VEC; ++s) {
    const long r = (long)row + s;
    xs.s[s] = scores[r * SIZE_output + output];
    ys.s[s] = y[r * SIZE_output + output];
    ws.s[s] = w[r];
    ks[s] = keep[use_keep ? r : 0];
}
tree_real_v g, h;
tree_logistic_gh_vec(xs.v, ys.v, &g, &h);""" + _VEC_WEIGHTED


# the softmax loss's vector form (kernels/trees/loss_softmax_vec.cl): a block of VEC rows at one output
_SOFTMAX_VEC = """
union { tree_real_t s[VEC]; tree_real_v v; } ks_y, ws, go, ho;
int ks[VEC];
for (int s = 0; s < VEC; ++s) {
    const long r = (long)row + s;
    ks_y.s[s] = ((int)y[r] == (int)output) ? (tree_real_t)1 : (tree_real_t)0;
    ws.s[s] = w[r];
    ks[s] = keep[use_keep ? r : 0];
}
tree_real_v g, h;
tree_softmax_gh_vec(scores, (long)row, (int)output, (int)SIZE_output, ks_y.v, factor, &g, &h);""" + _VEC_WEIGHTED
# the losses with a vector form (double precision, the portable exp), its body and the snippets it adds
_VECTOR_FORMS = {"logistic": (_LOGISTIC_VEC, ("loss_vec.cl",)),
                 "softmax": (_SOFTMAX_VEC, ("loss_vec.cl", "loss_softmax_vec.cl"))}


@lru_cache(maxsize=16)
def gradients(kind: str, precision: str = "double", vector: bool = False) -> Description:
    """(g, h) at every (row, output) from the resident raw scores: :meth:`mdhom.learn.losses.Loss.gradients`.

    Rows with ``keep[row] == 0`` (row subsampling, when ``use_keep``) get g = h = 0; weights multiply both.
    ``y`` is (row, output) for squared error and logistic, (row, 1) class indices for softmax; ``factor``
    is softmax's K / (K - 1). Written in position order = row order (the state right after reset_rows).

    ``vector`` (what CPUs build, :func:`mdhom.components.lanes.vector_forms`): the logistic and softmax losses with the
    portable exp (double precision) compute ``VEC`` rows at once in vector types (:class:`mdhom.mdh.Vector` along
    ``row``), the same bits; PoCL runs the exp's polynomial one row at a time otherwise (a 2-core Xeon: ~10-20 ns a
    row).
    """
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss kind must be one of {', '.join(LOSS_KINDS)}, got {kind!r}")
    r = real_ctype(precision)
    ycols: int | str = 1 if kind == "softmax" else "output"
    body, snippets = _VECTOR_FORMS.get(kind, ("", ())) if vector and precision == "double" else ("", ())
    form = Vector("row", body) if body else None
    vec_code = vector_defines(precision) + "".join(snippet(name) for name in snippets) if form else ""
    return Description(
        f"tree_gradients_{kind}", ["row", "output"], [Concat(), Concat()], gh_type(precision),
        scalar="""
tree_real_t g = 0, h = 0;
if (keep[use_keep ? row : 0]) {
    tree_loss_gh(scores, y, (long)row, (int)output, (int)SIZE_output, factor, &g, &h);
    g = g * w[row];
    h = h * w[row];
}
out.g = g; out.h = h;""",
        inputs=[Input("scores", r, ("row", "output"), gather=True), Input("y", r, ("row", ycols), gather=True),
                Input("w", r, ("row",), gather=True), Input("keep", "uchar", (1,), gather=True)],
        params=[Param("use_keep", "int"), Param("factor", r)],
        preamble=f"typedef {r} tree_real_t;\n" + _loss_defines(kind, precision) + snippet("loss.cl") + vec_code,
        chunked=True, vector=form,
    )



# ------------------------------------------------------------------------------------------------ specs
def absmax_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """GPUs: two work-groups per compute unit, so the combine kernel (one work-item folding every work-group's
    partial in order) stays short. H200, 10.5M rows, kernels alone: 16 groups per compute unit 0.045 ms + 0.170 ms
    of combine; 2 per compute unit 0.056 + 0.019 ms (2.2 TB/s); 1 per compute unit 0.087 + 0.009 ms."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    cfg["NUM_WI_pos"] = 256 if gpu else 64
    cfg["NUM_WG_pos"] = (2 if gpu else 4) * max(1, dev.compute_units)
    return cfg


_ROWS = {"1e4": 10**4, "1e5": 10**5, "1e6": 10**6, "1e7": 10**7}


def _grad_inputs(kind: str) -> Callable:
    def make(s, rng):
        n, k = s["row"], s["output"]
        y = rng.integers(0, k, (n, 1)) if kind == "softmax" else rng.integers(0, 2, (n, k))
        return {"scores": rng.standard_normal((n, k)), "y": y.astype(np.float64), "w": rng.random(n) + 0.5,
                "keep": np.ones(1, np.uint8), "use_keep": 0, "factor": k / (k - 1.0) if kind == "softmax" else 1.0}
    return make


def _grad_ref(kind: str) -> Callable:
    def reference(a):
        k = a["scores"].shape[1]
        loss = losses.make_loss({"squared": "reg:squarederror", "logistic": "binary:logistic",
                                 "softmax": "multi:softmax"}[kind], k)
        g, h = loss.gradients(a["y"], a["scores"], a["w"])
        return gh_struct(np.stack([g, h], axis=-1))
    return reference


def _grad_classes(kind: str) -> dict[str, dict[str, int]]:
    """Rows 10^4 .. 10^7 at one output and at four (softmax: four); the losses with a vector form also in it
    (``vec_*``, what CPUs build)."""
    classes = {f"rows_{k}_out{o}": {"row": v, "output": o} for k, v in _ROWS.items()
               for o in {"squared": (1,), "logistic": (1, 4), "softmax": (4,)}[kind]}
    return with_vector_classes(classes) if kind in _VECTOR_FORMS else classes


# the per-round kernels: element-wise over rows (x outputs); tuned at the Higgs shape (one output) and a softmax shape
GRADIENTS = {kind: KernelSpec(
    f"tree_gradients_{kind}", elementwise("row"),
    tuning=Tuning(lambda s, kind=kind: gradients(kind, vector=bool(s.get("vector"))), _grad_classes(kind),
                  _grad_inputs(kind), _grad_ref(kind), doc=f"(g, h) of the {kind} loss from the resident scores",
                  applies=vector_class_applies if kind in _VECTOR_FORMS else None))
    for kind in LOSS_KINDS}
GATHER = KernelSpec("tree_gather_gh", elementwise("pos"))


def _gh_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A round's real (g, h): signed g, non-negative h, a few exact zeros."""
    n, k = s["pos"], s["output"]
    gh = np.stack([rng.standard_normal((n, k)), rng.random((n, k))], axis=-1)
    gh[:: 97] = 0.0
    return {"gh": gh}


def _quantize_inputs(s: Mapping[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """:func:`_gh_inputs` and a scale that keeps them within the fixed point's range."""
    return {**_gh_inputs(s, rng), "scale": np.ldexp(1.0, np.full((s["output"], 2), 20))}


def _absmax_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    m = np.abs(a["gh"]).max(axis=0)  # (output, 2)
    out = np.empty(m.shape[0], GH_BITS.dtype)
    out["g"], out["h"] = m[:, 0].view(np.uint64), m[:, 1].view(np.uint64)
    return out


def _quantize_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    gh = a["gh"]
    out = np.empty(gh.shape[:2], GHQ.dtype)
    out["g"], out["h"] = quantize(gh[..., 0], a["scale"][:, 0]), quantize(gh[..., 1], a["scale"][:, 1])
    return out


# the round's scale and its fixed point, once a round over all rows: tuned at the Higgs shape and a softmax one
_GH_CLASSES = {f"rows_{k}_out{o}": {"pos": v, "output": o} for k, v in _ROWS.items() if v >= 10**5 for o in (1, 4)}
ABSMAX = KernelSpec("tree_gh_absmax", absmax_heuristic,
                    tuning=Tuning(lambda s: gh_absmax(), _GH_CLASSES, _gh_inputs, _absmax_ref,
                                  doc="max |g|, |h| of a round (the bits of the doubles)"))
QUANTIZE = KernelSpec("tree_quantize_gh", elementwise("pos"),
                      tuning=Tuning(lambda s: quantize_gh(), _GH_CLASSES, _quantize_inputs, _quantize_ref,
                                    doc="a round's (g, h) in fixed point"))
# (output, g|h): a handful of points, one work-group
SCALE = KernelSpec("tree_gh_scale", ones)
SPECS = (*GRADIENTS.values(), GATHER, ABSMAX, SCALE, QUANTIZE)


# ------------------------------------------------------------------------------------------------ the source
class GradientSource:
    """(g, h) of the round in the workspace's ``gh`` (position order), quantised when the precision says so.

    ``inv_scale`` ((n_outputs, 2), 2^-k) is the round's scale, quantized only; the split evaluator turns integer
    sums back into reals with it."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        rows, k, rp = max(1, ws.n_rows), ws.n_outputs, ws.rp
        self.grad = ws.buf(rows * k * ws.real.itemsize)  # row order, as set_gradients gives them
        self.hess = ws.buf(rows * k * ws.real.itemsize)
        # the round's real (g, h) before quantisation, in position order
        self.gh_real = ws.buf(rows * k * gh_type("double").dtype.itemsize) if ws.quantized else ws.gh
        self.keep = ws.buf(rows)
        self._one = np.ones(1, np.uint8)
        self.stale = True
        self._inv: np.ndarray | None = None  # the round's inv_scale, once the host has its absmax records ...
        self._absmax_read: tuple[np.ndarray, cl.Event] | None = None  # ... read behind the launches
        self.d_gather = gather_gh(rp)
        gather = ws.build(GATHER, self.d_gather, {"pos": rows, "output": k})
        self.k_gather = Bound(ws, gather, lambda: (self.gh_real, dict(ridx=ws.ridx, grad=self.grad, hess=self.hess)))
        if ws.quantized:
            ws.ensure("inv_scale", 16 * k)
            self.scale = ws.buf(16 * k)
            self.absmax = ws.buf(16 * k)
            absmax = ws.build(ABSMAX, gh_absmax(), {"pos": rows, "output": k})
            quant = ws.build(QUANTIZE, quantize_gh(), {"pos": rows, "output": k})
            scale = ws.build(SCALE, gh_scale(), {"output": k, "lane": 2})
            self.k_absmax = Bound(ws, absmax, lambda: (self.absmax, dict(gh=self.gh_real)))
            self.k_scale = Bound(ws, scale, lambda: (self.scale, dict(absmax=self.absmax, inv=ws["inv_scale"])))
            self.k_quant = Bound(ws, quant, lambda: (ws.gh, dict(gh=self.gh_real, scale=self.scale)))
        self.k_grad: list[Bound] = []

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        """Gradients and hessians from the host, (n_rows, n_outputs) each, in row order."""
        ws = self.ws
        shape = (ws.n_rows, ws.n_outputs)
        if ws.n_rows:
            for dst, x in ((self.grad, grad), (self.hess, hess)):
                host = np.ascontiguousarray(np.asarray(x, ws.real).reshape(shape))
                cl.enqueue_copy(ws.queue, dst, host, is_blocking=True)
        self.stale = True

    def set_objective(self, kind: str, y: np.ndarray, w: np.ndarray, score_buffers: tuple) -> None:
        """The loss ``kind`` with targets ``y`` (the loss's encoding) and weights ``w``, reading the raw scores
        from either of ``score_buffers`` (the score updater's ping-pong pair)."""
        ws = self.ws
        n, k = ws.n_rows, ws.n_outputs
        self.d_grad = gradients(kind, ws.rp, vector=vector_forms(ws.device))
        ycols = 1 if kind == "softmax" else k
        y = np.asarray(y, np.float64).reshape(n, -1)[:, :ycols]
        y_host = np.ascontiguousarray(y, ws.real).reshape(max(1, n), ycols) if n else np.zeros((1, ycols), ws.real)
        w_host = np.ascontiguousarray(np.asarray(w, np.float64).reshape(n), ws.real) if n else np.zeros(1, ws.real)
        mf = cl.mem_flags
        self.y = cl.Buffer(ws.device.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=y_host)
        self.w = cl.Buffer(ws.device.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=w_host)
        self.factor = ws.real.type(k / (k - 1.0) if kind == "softmax" else 1.0)
        comp = ws.build(GRADIENTS[kind], self.d_grad, {"row": max(1, n), "output": k})
        self.k_grad = [Bound(ws, comp, lambda s=s: (self.gh_real, dict(scores=s, y=self.y, w=self.w, keep=self.keep)))
                       for s in score_buffers]

    def compute(self, keep: np.ndarray | None, cur: int) -> None:
        """Gradients of the scores in ``score_buffers[cur]``, rows with ``keep`` False at g = h = 0; the rows
        must be in row order (just reset)."""
        ws = self.ws
        if not self.k_grad:
            raise RuntimeError("compute_gradients needs set_objective first")
        if ws.n_rows:
            if keep is None:  # the kernel reads keep[0] (non-zero) when use_keep is 0
                ws.send(self.keep, self._one)
            else:
                ws.put("keep", self.keep, np.asarray(keep, bool).reshape(-1), np.uint8)
            ws.record(self.d_grad.name, self.k_grad[cur]({"row": ws.n_rows, "output": ws.n_outputs},
                                                          use_keep=int(keep is not None), factor=self.factor))
            if ws.quantized:
                self._quantize()
        self.stale = False

    def ensure(self) -> None:
        """(g, h) in position order, gathered once after set_gradients (and quantised, when quantized)."""
        ws = self.ws
        if self.stale and ws.n_rows:
            ws.record("tree_gather_gh", self.k_gather({"pos": ws.n_rows, "output": ws.n_outputs}))
            if ws.quantized:
                self._quantize()
        self.stale = False

    def _quantize(self) -> None:
        ws = self.ws
        n, k = ws.n_rows, ws.n_outputs
        ws.record("tree_gh_absmax", self.k_absmax({"pos": n, "output": k}))
        self._absmax_read = ws.read_later("gh_absmax", self.absmax, k, GH_BITS.dtype)
        self._inv = None
        ws.record("tree_gh_scale", self.k_scale({"output": k, "lane": 2}, n_rows=n))
        ws.record("tree_quantize_gh", self.k_quant({"pos": n, "output": k}))

    def check(self) -> None:
        """Refuse a round whose gradients are not finite (quantized; :attr:`inv_scale` raises): asked after the
        round's first split search, whose blocking read has brought the absmax records in, so it never waits."""
        if self._absmax_read is not None:
            _ = self.inv_scale

    @property
    def inv_scale(self) -> np.ndarray | None:
        """(n_outputs, 2) 2^-k of the round's (g, h) (quantized only; None before the first round), what
        ``tree_gh_scale`` gave the device: from the absmax records on first use, which refuses non-finite gradients
        (the device quantised them with k = 0 meanwhile; :meth:`check` raises before a split is used)."""
        if self._absmax_read is not None:
            self._inv = read_inv_scale(self._absmax_read, self.ws.n_rows)
            self._absmax_read = None
        return self._inv


def read_inv_scale(read: tuple[np.ndarray, cl.Event], n_rows: int) -> np.ndarray:
    """The inv_scale ((n_outputs, 2) 2^-k) of a round from its absmax records read behind its launches
    (``ws.read_later`` of ``GH_BITS`` records): what ``tree_gh_scale`` gave the device; non-finite maxima raise."""
    host, event = read
    event.wait()
    return quantization_scales(quantization_exponents(absmax_values(host), n_rows))[1]
