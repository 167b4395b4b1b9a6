"""The K-tree round's gradients in class-major order: (g, h) of output ``c`` for every row, output after output.

The level kernels of :mod:`mdhom.forests.boost_level` read tree ``t``'s (g, h) for the rows of its nodes; stored
(class, row), a tree's rows are contiguous (16 bytes a row), where the components' (row, output) order puts them
16 bytes in every ``16 K`` (PoCL, 200k rows, ten classes: the root level's histograms took 0.28 s in row order,
0.04 s in class order). The loss is the components' scalar function (``kernels/trees/loss.cl``, the same operations,
so the same bits as :meth:`mdhom.learn.losses.Loss.gradients`), and the quantiser the components' rule.

=====================  ===================  ==============================================================
kernel                 index space          combine operators
=====================  ===================  ==============================================================
boost_softmax_norm     row                  concat: a row's largest score and sum of exps (softmax only)
boost_gradients_<loss> cls x row            concat, concat: (g, h) from the resident scores (row, class)
boost_gh_absmax        cls x pos            concat, max over rows: the round's fixed-point scale from it
boost_quantize_gh      cls x pos            concat, concat: rint((g, h) * 2^k)
=====================  ===================  ==============================================================
"""

from __future__ import annotations

from functools import lru_cache

from mdhom.components.gradients import LOSS_KINDS, _loss_defines, absmax_heuristic
from mdhom.components.lanes import GHQ, gh_type, snippet
from mdhom.components.specs import KernelSpec, elementwise
from mdhom.mdh import MAX, Concat, Description, Input, Param, Reduce, Struct

SOFTMAX_NORM = Struct("boost_norm_t", (("m", "double"), ("total", "double")))
# softmax from a row's (max, sum of exps): tree_loss_gh's softmax branch, its operations in its order
_SOFTMAX_GH = """
inline void boost_softmax_gh(__global const double* scores, __global const double* y,
                             __global const boost_norm_t* norm, const long row, const int k, const int n_out,
                             const double factor, double* g, double* h) {
    const double p = tree_exp_nonpositive(scores[row * n_out + k] - norm[row].m) / norm[row].total;
    *g = p - (((int)y[row] == k) ? (double)1 : (double)0);
    *h = tree_floor_eps(factor * p * ((double)1 - p));
}
"""


def _preamble(kind: str) -> str:
    return "typedef double tree_real_t;\n" + _loss_defines(kind, "double") + snippet("loss.cl")


@lru_cache(maxsize=1)
def softmax_norm() -> Description:
    """Each row's largest score and the sum of exp(score - max) over its classes, added in class order (as
    :func:`mdhom.learn.losses.softmax_exact`): the softmax's normaliser once per row, not once per (class, row)."""
    return Description(
        "boost_softmax_norm", ["row"], [Concat()], SOFTMAX_NORM,
        scalar="""
__global const double* s = scores + (long)row * n_cls;
double m = s[0];
for (int j = 1; j < n_cls; ++j) m = (s[j] > m) ? s[j] : m;
double total = tree_exp_nonpositive(s[0] - m);
for (int j = 1; j < n_cls; ++j) total = total + tree_exp_nonpositive(s[j] - m);
out.m = m; out.total = total;""",
        inputs=[Input("scores", "double", ("*",), gather=True)], params=[Param("n_cls", "int")],
        preamble=_preamble("softmax"),
    )


@lru_cache(maxsize=4)
def gradients(kind: str) -> Description:
    """(g, h) of every (class, row) from the raw scores (row, class): rows with ``keep[row] == 0`` (when
    ``use_keep``) get zeros, weights multiply both; ``y`` is the loss's target (class indices for softmax),
    ``factor`` softmax's K / (K - 1); softmax reads each row's normaliser (:func:`softmax_norm`)."""
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss kind must be one of {', '.join(LOSS_KINDS)}, got {kind!r}")
    softmax = kind == "softmax"
    call = ("boost_softmax_gh(scores, y, (__global const boost_norm_t*)norm, (long)row, (int)cls, (int)SIZE_cls, "
            "factor, &g, &h);" if softmax else
            "tree_loss_gh(scores, y, (long)row, (int)cls, (int)SIZE_cls, factor, &g, &h);")
    inputs = [Input("scores", "double", ("*",), gather=True), Input("y", "double", ("*",), gather=True),
              Input("w", "double", ("*",), gather=True), Input("keep", "uchar", ("*",), gather=True)]
    if softmax:
        inputs.append(Input("norm", "double", ("*",), gather=True))
    return Description(
        f"boost_gradients_{kind}", ["cls", "row"], [Concat(), Concat()], gh_type("double"),
        scalar=f"""
tree_real_t g = 0, h = 0;
if (keep[use_keep ? row : 0]) {{
    {call}
    g = g * w[row];
    h = h * w[row];
}}
out.g = g; out.h = h;""",
        inputs=inputs, params=[Param("use_keep", "int"), Param("factor", "double")],
        preamble=_preamble(kind) + (SOFTMAX_NORM.declaration("boost_norm_t") + "\n" + _SOFTMAX_GH if softmax else ""),
    )


@lru_cache(maxsize=1)
def gh_absmax() -> Description:
    """max |g| and max |h| of each class over the rows (NaN counts as +inf, so the host sees it)."""
    return Description(
        "boost_gh_absmax", ["cls", "pos"], [Concat(), Reduce(MAX)], gh_type("double"),
        scalar="const long i = 2 * ((long)cls * SIZE_pos + pos);\n"
               "out.g = isnan(gh[i]) ? INFINITY : fabs(gh[i]);\n"
               "out.h = isnan(gh[i + 1]) ? INFINITY : fabs(gh[i + 1]);",
        inputs=[Input("gh", "double", ("*",), gather=True)],
    )


@lru_cache(maxsize=1)
def quantize_gh() -> Description:
    """(g, h) as int32 fixed point, ``rint(x * scale)`` with a power of two per (class, g|h): exact, so every device
    and :func:`mdhom.components.quantize.quantize` give the same integers."""
    return Description(
        "boost_quantize_gh", ["cls", "pos"], [Concat(), Concat()], GHQ,
        scalar="const long i = 2 * ((long)cls * SIZE_pos + pos);\n"
               "out.g = (int)mdh_rint(gh[i] * scale[2 * cls]);\n"
               "out.h = (int)mdh_rint(gh[i + 1] * scale[2 * cls + 1]);",
        inputs=[Input("gh", "double", ("*",), gather=True), Input("scale", "double", ("*",), gather=True)],
    )


GRADIENTS = {kind: KernelSpec(f"boost_gradients_{kind}", elementwise("row")) for kind in LOSS_KINDS}
NORM = KernelSpec("boost_softmax_norm", elementwise("row"))
ABSMAX = KernelSpec("boost_gh_absmax", absmax_heuristic)
QUANTIZE = KernelSpec("boost_quantize_gh", elementwise("pos"))
SPECS = (*GRADIENTS.values(), NORM, ABSMAX, QUANTIZE)
