"""Canonical md_hom descriptions with their numpy references: the demo, the tests and the tuner share them.

Each :class:`Case` pairs a description with a way to make inputs of given sizes and the numpy result they
must produce, so a configuration can be checked on any device by one call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from mdhom.mdh import linalg
from mdhom.mdh.computation import Computation
from mdhom.mdh.description import Description
from mdhom.mdh.parts import Concat, Input, Param, Place, Reduce, Scan, Scratch
from mdhom.mdh.types import Array, Scalar, Struct

from . import ARGMAX, MAX, SUM

GH = Struct("gh_t", (("g", "double"), ("h", "double")))
ARGMAX_F = Struct("argmax_t", (("value", "float"), ("index", "int")))

ROW_SUM = Description(
    "row_sum", ["i", "j"], [Concat(), Reduce(SUM)], "double", "out = x;",
    inputs=[Input("x", "double", ("i", "j"))],
)
TOTAL_SUM = Description(
    "total_sum", ["i"], [Reduce(SUM)], "float", "out = x;", inputs=[Input("x", "float", ("i",))],
)
COLUMN_MAX = Description(
    "column_max", ["i", "j"], [Reduce(MAX), Concat()], "float", "out = x;",
    inputs=[Input("x", "float", ("i", "j"))],
)
ARGMAX_ROWS = Description(
    "argmax_rows", ["i", "j"], [Concat(), Reduce(ARGMAX)], ARGMAX_F,
    "out.value = x; out.index = (int)j;", inputs=[Input("x", "float", ("i", "j"))],
)
SUM_3D = Description(
    "sum_3d", ["a", "b", "c"], [Concat(), Reduce(SUM), Concat()], "long", "out = (long)x * (long)(b + 1);",
    inputs=[Input("x", "int", ("a", "b", "c"))],
)
GH_SUM = Description(
    "gh_sum", ["row", "out_k"], [Reduce(SUM), Concat()], GH, "out.g = g; out.h = h;",
    inputs=[Input("g", "double", ("row", "out_k")), Input("h", "double", ("row", "out_k"))],
)
HIST_BINS = 16
HISTOGRAM = Description(
    "histogram", ["row", "feat"], [Reduce(SUM), Concat()], Array(GH, HIST_BINS),
    # The scalar function is the one-hot contribution of a row; `accumulate` is the same fold, scattered.
    scalar="out.v[bins].g = g; out.v[bins].h = h;",
    accumulate="acc.v[bins].g += g; acc.v[bins].h += h;",
    inputs=[Input("bins", "uchar", ("row", "feat")), Input("g", "double", ("row",)), Input("h", "double", ("row",))],
)
GHQ32 = Struct("ghq_t", (("g", "int"), ("h", "int")))
GHQ64 = Struct("ghq64_t", (("g", "long"), ("h", "long")))
# Quantised-gradient histograms: the same scatter, with integer lanes, so PARTIALS_LOCAL=1 may fold it with
# atomics into one accumulator per work-group in local memory (exact: integer sums ignore order).
HISTOGRAM_Q32 = Description(
    "histogram_q32", ["row", "feat"], [Reduce(SUM), Concat()], Array(GHQ32, HIST_BINS),
    scalar="out.v[bins].g = g; out.v[bins].h = h;",
    accumulate="acc.v[bins].g += g; acc.v[bins].h += h;",
    accumulate_atomic="atomic_add(&acc->v[bins].g, g); atomic_add(&acc->v[bins].h, h);",
    inputs=[Input("bins", "uchar", ("row", "feat")), Input("g", "int", ("row",)), Input("h", "int", ("row",))],
)
HISTOGRAM_Q64 = Description(
    "histogram_q64", ["row", "feat"], [Reduce(SUM), Concat()], Array(GHQ64, HIST_BINS),
    scalar="out.v[bins].g = g; out.v[bins].h = h;",
    accumulate="acc.v[bins].g += g; acc.v[bins].h += h;",
    accumulate_atomic="atom_add(&acc->v[bins].g, g); atom_add(&acc->v[bins].h, h);",
    inputs=[Input("bins", "uchar", ("row", "feat")), Input("g", "long", ("row",)), Input("h", "long", ("row",))],
)
# Weighted counts per key (a bincount per row of keys): a scatter whose positions repeat, each point's weight added
# at its key with an integer atomic; the output starts at zero. Keys < 0 count nowhere.
KEY_COUNT = Description(
    "key_count", ["i", "j"], [Concat(), Concat()], "int",
    "out = w;\nout_at = key < 0 ? -1 : (idx_t)i * n_keys + key;",
    inputs=[Input("key", "int", ("i", "j")), Input("w", "int", ("i", "j"))],
    params=[Param("n_keys", "int")], scatter="add",
)
SCAN_INCLUSIVE = Description(
    "scan_inclusive", ["i", "j"], [Concat(), Scan(SUM, inclusive=True)], "long", "out = (long)x;",
    inputs=[Input("x", "int", ("i", "j"))],
)
SCAN_EXCLUSIVE = Description(
    "scan_exclusive", ["i", "j", "k"], [Concat(), Scan(SUM, inclusive=False), Concat()], "double", "out = x;",
    inputs=[Input("x", "double", ("i", "j", "k"))],
)
SCAN_MAX_1D = Description(
    "scan_max", ["i"], [Scan(MAX)], "float", "out = x;", inputs=[Input("x", "float", ("i",))],
)

# A stable partition of each line (a placing scan): a line's odd keys first, then its even ones, each side in order,
# moved into ``moved``; the output is each line's count of odd keys. Lines are ``lens[line]`` long (ragged), ``stride``
# apart. The prologue's line sum takes part in every line (it adds the line's work-items, less themselves: 0).
STABLE_PARTITION = Description(
    "stable_partition", ["line", "k"], [Concat(), Scan(SUM, inclusive=False)], "int",
    "out = (keys[line * stride + k] & 1) != 0;",
    inputs=[Input("keys", "int", ("*",), gather=True), Input("moved", "int", ("*",), gather=True, writes=True),
            Input("lens", "int", ("*",), gather=True)],
    params=[Param("stride", "int")],
    extents={"k": "lens[line]"},
    place=Place(at="mdh_at = mdh_self ? mdh_excl : mdh_total + (k - mdh_excl);",
                emit="moved[line * stride + mdh_dst] = keys[line * stride + mdh_src] + none;",
                prologue="const int none = MDH_LINE_SUM(1) - MDH_LINE_WI;", line_max=512, local_values="uchar"),
)


def stable_partition_reference(keys: np.ndarray, lens: np.ndarray, stride: int, moved: np.ndarray
                               ) -> tuple[np.ndarray, np.ndarray]:
    """:data:`STABLE_PARTITION` in numpy: each line's odd keys, then its even ones (``moved`` where lines are not),
    and each line's count of odd keys."""
    moved = moved.copy()
    odd = np.zeros(lens.size, np.int32)
    for line, n in enumerate(lens.tolist()):
        seg = keys[line * stride: line * stride + n]
        flag = (seg & 1) != 0
        moved[line * stride: line * stride + n] = np.concatenate([seg[flag], seg[~flag]])
        odd[line] = np.count_nonzero(flag)
    return odd, moved

# A batched solve: each point solves its own packed symmetric system in its slice of scratch memory, in the
# numpy twin's order of operations (mdhom.mdh.linalg), so the solutions agree to the bit on every device; its 20
# doubles may also live in private memory (SCRATCH_PRIVATE=32).
SOLVE_K = 5
PACKED_SOLVE = Description(
    "packed_solve", ["sys"], [Concat()], Array(Scalar("double"), SOLVE_K),
    scalar="""
const long P = (long)k * (k + 1) / 2;
for (long e = 0; e < P; ++e) work[e] = a[sys * P + e];
for (int i = 0; i < k; ++i) work[P + i] = b[sys * k + i];
mdh_ldl_packed(work, k);
mdh_ldl_solve_packed(work, k, work + P);
for (int i = 0; i < k; ++i) out.v[i] = work[P + i];""",
    inputs=[Input("a", "double", ("sys", linalg.packed_size(SOLVE_K)), index="0", gather=True),
            Input("b", "double", ("sys", SOLVE_K), index="0", gather=True)],
    params=[Param("k", "int"), Param("work_len", "int")],
    preamble=linalg.SOURCE, scratch=Scratch("work", "double", "work_len", private=(32,)),
)


def _solve_inputs(s, rng):
    k = SOLVE_K
    m = rng.standard_normal((s["sys"], k, k))
    spd = m @ m.transpose(0, 2, 1) + 0.5 * np.eye(k)
    rows, cols = np.tril_indices(k)
    return {"a": spd[:, rows, cols], "b": rng.standard_normal((s["sys"], k)), "k": k,
            "work_len": linalg.packed_size(k) + k}


def _hist_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    bins, g, h = a["bins"], a["g"], a["h"]
    out = np.zeros((bins.shape[1], HIST_BINS), HISTOGRAM.atom.dtype)
    for f in range(bins.shape[1]):
        out["g"][f] = np.bincount(bins[:, f], weights=g, minlength=HIST_BINS)
        out["h"][f] = np.bincount(bins[:, f], weights=h, minlength=HIST_BINS)
    return out


def _hist_q_ref(dtype: np.dtype):
    def ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
        bins, g, h = a["bins"], a["g"].astype(np.int64), a["h"].astype(np.int64)
        out = np.zeros((bins.shape[1], HIST_BINS), dtype)
        for f in range(bins.shape[1]):
            for lane, w in (("g", g), ("h", h)):
                acc = np.zeros(HIST_BINS, np.int64)
                np.add.at(acc, bins[:, f], w)  # exact integer sums
                out[lane][f] = acc
        return out
    return ref


def _hist_q_inputs(dtype, g_bound: int):
    def make(s, rng):
        return {
            "bins": rng.integers(0, HIST_BINS, size=(s["row"], s["feat"])).astype(np.uint8),
            "g": rng.integers(-g_bound, g_bound + 1, size=s["row"]).astype(dtype),
            "h": rng.integers(0, g_bound + 1, size=s["row"]).astype(dtype),
        }
    return make


def _argmax_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    x = a["x"]
    out = np.zeros(x.shape[0], ARGMAX_F.dtype)
    out["value"] = x.max(1)
    out["index"] = x.argmax(1)  # first maximum: ties go to the lower index
    return out


def _gh_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    out = np.zeros(a["g"].shape[1], GH.dtype)
    out["g"], out["h"] = a["g"].sum(0), a["h"].sum(0)
    return out


def _exclusive_cumsum(x: np.ndarray, axis: int) -> np.ndarray:
    c = np.cumsum(x, axis=axis)
    return c - x


@dataclass
class Case:
    """A description, inputs of given sizes, and the numpy result they must produce."""

    name: str
    description: Description
    make: Callable[[Mapping[str, int], np.random.Generator], dict[str, np.ndarray]]
    reference: Callable[[Mapping[str, np.ndarray]], np.ndarray]
    sizes: dict[str, int]
    rtol: float = 1e-5
    atol: float = 1e-6
    inputs: dict[str, np.ndarray] = field(default_factory=dict)

    def prepare(self, rng: np.random.Generator) -> Case:
        self.inputs = self.make(self.sizes, rng)
        return self

    def run(self, device, config: Mapping[str, int] | None = None) -> np.ndarray:
        return Computation(self.description, device, config, self.sizes)(**self.inputs)

    def expected(self) -> np.ndarray:
        return self.reference(self.inputs)

    def matches(self, got: np.ndarray) -> bool:
        want = self.expected()
        if want.dtype.names:
            return all(np.allclose(got[f], want[f], rtol=self.rtol, atol=self.atol) for f in want.dtype.names)
        return got.shape == want.shape and np.allclose(got, want, rtol=self.rtol, atol=self.atol)


def _uniform(dtype, *dims):
    def make(s, rng):
        shape = tuple(s[d] for d in dims)
        if np.issubdtype(dtype, np.integer):
            return {"x": rng.integers(-1000, 1000, size=shape).astype(dtype)}
        return {"x": rng.standard_normal(shape).astype(dtype)}
    return make


def _argmax_inputs(s, rng):
    # few distinct values so ties are common and the lower-index rule is exercised
    return {"x": rng.integers(0, 5, size=(s["i"], s["j"])).astype(np.float32)}


def _gh_inputs(s, rng):
    return {"g": rng.standard_normal((s["row"], s["out_k"])), "h": rng.random((s["row"], s["out_k"]))}


def _key_count_inputs(s, rng):
    # more points than keys (collisions), some negative keys, zero weights and weights of both signs
    n_keys = max(1, s["j"] // 3)
    return {"key": rng.integers(-2, n_keys, size=(s["i"], s["j"])).astype(np.int32),
            "w": rng.integers(-3, 7, size=(s["i"], s["j"])).astype(np.int32), "n_keys": np.int32(n_keys)}


def _key_count_ref(a: Mapping[str, np.ndarray]) -> np.ndarray:
    key, w, k = a["key"], a["w"], int(a["n_keys"])
    out = np.zeros(key.shape[0] * key.shape[1], np.int64)
    rows = np.repeat(np.arange(key.shape[0]), key.shape[1]).reshape(key.shape)
    ok = key >= 0
    np.add.at(out, (rows * k + key)[ok], w[ok])
    return out.astype(np.int32).reshape(key.shape)


def _hist_inputs(s, rng):
    return {
        "bins": rng.integers(0, HIST_BINS, size=(s["row"], s["feat"])).astype(np.uint8),
        "g": rng.standard_normal(s["row"]),
        "h": rng.random(s["row"]),
    }


def all_cases(scale: int = 1) -> list[Case]:
    """One case per description, at awkward (prime and power-of-two) sizes times ``scale``."""
    return [
        Case("row_sum", ROW_SUM, _uniform(np.float64, "i", "j"), lambda a: a["x"].sum(1), {"i": 31, "j": 257 * scale}),
        Case("total_sum", TOTAL_SUM, _uniform(np.float32, "i"), lambda a: np.array(a["x"].sum(dtype=np.float64)),
             {"i": 4099 * scale}, rtol=1e-4, atol=1e-3),
        Case("column_max", COLUMN_MAX, _uniform(np.float32, "i", "j"), lambda a: a["x"].max(0),
             {"i": 1024 * scale, "j": 7}),
        Case("argmax_rows", ARGMAX_ROWS, _argmax_inputs, _argmax_ref, {"i": 17, "j": 509 * scale}),
        Case("sum_3d", SUM_3D, _uniform(np.int32, "a", "b", "c"),
             lambda a: (a["x"].astype(np.int64) * (np.arange(a["x"].shape[1]) + 1)[None, :, None]).sum(1),
             {"a": 5, "b": 129 * scale, "c": 3}),
        Case("gh_sum", GH_SUM, _gh_inputs, _gh_ref, {"row": 1031 * scale, "out_k": 3}, rtol=1e-10, atol=1e-9),
        Case("histogram", HISTOGRAM, _hist_inputs, _hist_ref, {"row": 2053 * scale, "feat": 5}, rtol=1e-10, atol=1e-9),
        Case("histogram_q32", HISTOGRAM_Q32, _hist_q_inputs(np.int32, 127), _hist_q_ref(GHQ32.dtype),
             {"row": 2053 * scale, "feat": 5}),
        Case("histogram_q64", HISTOGRAM_Q64, _hist_q_inputs(np.int64, 2**40), _hist_q_ref(GHQ64.dtype),
             {"row": 1031 * scale, "feat": 3}),
        Case("key_count", KEY_COUNT, _key_count_inputs, _key_count_ref, {"i": 3, "j": 1031 * scale}),
        Case("scan_inclusive", SCAN_INCLUSIVE, _uniform(np.int32, "i", "j"),
             lambda a: np.cumsum(a["x"].astype(np.int64), 1), {"i": 3, "j": 1000 * scale + 9}),
        Case("scan_exclusive", SCAN_EXCLUSIVE, _uniform(np.float64, "i", "j", "k"),
             lambda a: _exclusive_cumsum(a["x"], 1), {"i": 2, "j": 263 * scale, "k": 4}, rtol=1e-9, atol=1e-9),
        Case("packed_solve", PACKED_SOLVE, _solve_inputs, lambda a: linalg.solve_packed(a["a"], a["b"], SOLVE_K),
             {"sys": 37 * scale}, rtol=0.0, atol=0.0),
        Case("scan_max", SCAN_MAX_1D, _uniform(np.float32, "i"), lambda a: np.maximum.accumulate(a["x"]),
             {"i": 2048 * scale}),
    ]


def demo_cases(rows: int, rng: np.random.Generator) -> list[Case]:
    """The demo: a histogram, a (g, h) sum, an argmax and a scan at a realistic number of rows."""
    cases = {c.name: c for c in all_cases()}
    picked = []
    for name, sizes in (
        ("histogram", {"row": rows, "feat": 28}),
        ("gh_sum", {"row": rows, "out_k": 1}),
        ("argmax_rows", {"i": 64, "j": max(1, rows // 64)}),
        ("scan_inclusive", {"i": 28, "j": max(1, rows // 28)}),
    ):
        c = cases[name]
        c.sizes = sizes
        picked.append(c.prepare(rng))
    return picked
