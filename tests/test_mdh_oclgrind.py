"""The generated kernels under Oclgrind: no out-of-bounds access, no data race, no API misuse.

Every skeleton path is covered on small sizes: one and several work-groups along the reduced dimension
(the second kernel), several lanes combining in local memory, non-power-of-two lanes, the scan with and
without the fixup kernel, a concatenation-only description, and a placing scan (a stable partition).
"""

from __future__ import annotations

import pytest

from mdhom.testing import run_under_oclgrind

SCRIPT = r"""
import numpy as np
from mdhom import get_device, mdh
from mdhom.mdh import examples

dev = get_device()
assert dev.checker, dev.key
cases = {c.name: c for c in examples.all_cases()}
plan = [
    ("histogram", {"row": 37, "feat": 3}, {"NUM_WG_row": 3, "NUM_WI_row": 5, "NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WI_COMBINE": 2}),
    ("histogram", {"row": 37, "feat": 3}, {"NUM_WG_row": 1, "NUM_WI_row": 8, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 4}),
    ("histogram_q32", {"row": 37, "feat": 3}, {"NUM_WG_row": 3, "NUM_WI_row": 5, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 2, "PARTIALS_LOCAL": 1}),
    ("histogram_q64", {"row": 29, "feat": 2}, {"NUM_WG_row": 1, "NUM_WI_row": 4, "NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WI_COMBINE": 2, "PARTIALS_LOCAL": 1}),
    ("argmax_rows", {"i": 3, "j": 29}, {"NUM_WG_i": 2, "NUM_WI_i": 2, "NUM_WG_j": 2, "NUM_WI_j": 3, "NUM_WI_COMBINE": 3}),
    ("sum_3d", {"a": 2, "b": 13, "c": 3}, {"NUM_WG_a": 1, "NUM_WI_a": 2, "NUM_WG_b": 2, "NUM_WI_b": 4, "NUM_WG_c": 2, "NUM_WI_c": 1, "NUM_WI_COMBINE": 2}),
    ("gh_sum", {"row": 41, "out_k": 2}, {"NUM_WG_row": 4, "NUM_WI_row": 4, "NUM_WG_out_k": 1, "NUM_WI_out_k": 2, "NUM_WI_COMBINE": 8}),
    ("scan_inclusive", {"i": 2, "j": 45}, {"NUM_WG_i": 1, "NUM_WI_i": 2, "NUM_WG_j": 3, "NUM_WI_j": 4, "NUM_WI_COMBINE": 16}),
    ("scan_exclusive", {"i": 2, "j": 23, "k": 2}, {"NUM_WG_i": 2, "NUM_WI_i": 1, "NUM_WG_j": 1, "NUM_WI_j": 5, "NUM_WG_k": 1, "NUM_WI_k": 2, "NUM_WI_COMBINE": 4}),
    ("key_count", {"i": 2, "j": 37}, {"NUM_WG_i": 1, "NUM_WI_i": 2, "NUM_WG_j": 2, "NUM_WI_j": 5}),  # atomic adds
    ("scan_max", {"i": 50}, {"NUM_WG_i": 4, "NUM_WI_i": 3, "NUM_WI_COMBINE": 8}),
    ("packed_solve", {"sys": 11}, {"NUM_WG_sys": 2, "NUM_WI_sys": 3}),  # scratch slices of 20 per work-item
    ("packed_solve", {"sys": 11}, {"NUM_WG_sys": 2, "NUM_WI_sys": 3, "SCRATCH_PRIVATE": 32}),  # ... in private memory
    # grids wider than the launch along the first dimension: only the groups holding points run (Computation.groups)
    ("argmax_rows", {"i": 3, "j": 29}, {"NUM_WG_i": 7, "NUM_WI_i": 1, "NUM_WG_j": 2, "NUM_WI_j": 3, "NUM_WI_COMBINE": 3}),
    ("sum_3d", {"a": 2, "b": 13, "c": 3}, {"NUM_WG_a": 5, "NUM_WI_a": 1, "NUM_WG_b": 2, "NUM_WI_b": 4, "NUM_WG_c": 2, "NUM_WI_c": 1, "NUM_WI_COMBINE": 2}),
    ("scan_exclusive", {"i": 2, "j": 23, "k": 2}, {"NUM_WG_i": 6, "NUM_WI_i": 1, "NUM_WG_j": 2, "NUM_WI_j": 5, "NUM_WG_k": 1, "NUM_WI_k": 2, "NUM_WI_COMBINE": 4}),
    ("key_count", {"i": 2, "j": 37}, {"NUM_WG_i": 4, "NUM_WI_i": 1, "NUM_WG_j": 2, "NUM_WI_j": 5}),
    ("packed_solve", {"sys": 5}, {"NUM_WG_sys": 4, "NUM_WI_sys": 2}),
]
for name, sizes, cfg in plan:
    case = cases[name]
    case.sizes = sizes
    case.prepare(np.random.default_rng(0))
    got = case.run(dev, cfg)
    assert case.matches(got), (name, cfg)
    print("ok", name, flush=True)

lookup = mdh.Description("lookup", ["i", "j"], [mdh.Concat(), mdh.Concat()], "float", "out = t[c] + x;",
    inputs=[mdh.Input("c", "int", ("i", "j")), mdh.Input("x", "float", ("i", "j")), mdh.Input("t", "float", (4,), gather=True)])
c = np.random.default_rng(1).integers(0, 4, (5, 7)).astype(np.int32)
x = np.ones((5, 7), np.float32)
t = np.arange(4, dtype=np.float32)
got = mdh.Computation(lookup, dev, {"NUM_WG_i": 2, "NUM_WI_i": 2, "NUM_WG_j": 2, "NUM_WI_j": 3})(c=c, x=x, t=t)
assert np.array_equal(got, t[c] + 1)
print("ok lookup")

def chunked(d):  # the same description offering CHUNKED: each work-item a contiguous run
    return mdh.Description(d.name + "_chunked", d.dims, d.combine, d.atom, d.scalar, d.inputs, d.params, d.accumulate,
                           d.preamble, d.accumulate_atomic, dict(d.extents), d.scatter, d.scratch, chunked=True)

for name, sizes, cfg in [
    ("histogram_q32", {"row": 37, "feat": 3}, {"NUM_WG_row": 3, "NUM_WI_row": 5, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 2, "PARTIALS_LOCAL": 1, "CHUNKED": 1}),
    ("sum_3d", {"a": 2, "b": 13, "c": 3}, {"NUM_WG_a": 1, "NUM_WI_a": 2, "NUM_WG_b": 2, "NUM_WI_b": 4, "NUM_WG_c": 2, "NUM_WI_c": 1, "NUM_WI_COMBINE": 2, "CHUNKED": 1}),
]:
    case = cases[name]
    case.sizes = sizes
    case.prepare(np.random.default_rng(0))
    case.description = chunked(case.description)
    assert case.matches(case.run(dev, cfg)), (name, cfg)
    print("ok chunked", name, flush=True)
got = mdh.Computation(chunked(lookup), dev, {"NUM_WG_i": 2, "NUM_WI_i": 2, "NUM_WG_j": 2, "NUM_WI_j": 3, "CHUNKED": 1})(c=c, x=x, t=t)
assert np.array_equal(got, t[c] + 1)
print("ok chunked lookup")

# a description offering INLINE, private and local-atomic partials: INLINE=0 (the same code as calls); 1 is refused
# here, since Oclgrind cannot run what LLVM's inliner makes of the fold
q32 = cases["histogram_q32"]
q32.sizes = {"row": 37, "feat": 3}
q32.prepare(np.random.default_rng(0))
d = q32.description
q32.description = mdh.Description(d.name, d.dims, d.combine, d.atom, d.scalar, d.inputs, accumulate=d.accumulate,
                                   accumulate_atomic=d.accumulate_atomic, inline_fold=True)
for local in (0, 1):
    cfg = {"NUM_WG_row": 3, "NUM_WI_row": 5, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 2,
           "PARTIALS_LOCAL": local, "INLINE": 0}
    assert q32.matches(q32.run(dev, cfg)), cfg
    print("ok inline", local, flush=True)
try:
    q32.description.check_config({**cfg, "INLINE": 1}, dev)
    raise AssertionError("INLINE=1 accepted on the checker")
except mdh.ConfigError as exc:
    assert "Oclgrind cannot run" in str(exc), exc

# vector forms (VEC): blocks over several work-items, the last partial block point by point or, with reach, in
# vector form over the row's padding
x = np.random.default_rng(2).integers(-9, 9, (3, 24)).astype(np.int32)
for reach in (None, "stride"):
    vec = mdh.Description("vec_sum", ["row", "col"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "long",
        "out = (long)x[row * stride + col];", inputs=[mdh.Input("x", "int", ("*",), gather=True)],
        params=[mdh.Param("stride", "int")], vector=mdh.Vector("col", '''
long t[VEC];
mdh_vstore_long(mdh_convert_long_int(mdh_vload_int(x + row * stride + col)), t);
for (int s = 0; s < VEC; ++s) out[s] = t[s];''', reach=reach))
    cfg = {"NUM_WG_row": 2, "NUM_WI_row": 1, "NUM_WG_col": 2, "NUM_WI_col": 2, "NUM_WI_COMBINE": 2, "VEC": 4}
    got = mdh.Computation(vec, dev, cfg)({"row": 3, "col": 21}, x=x.reshape(-1), stride=24)
    assert np.array_equal(got, x[:, :21].sum(axis=1)), reach
    print("ok vector", reach, flush=True)

# a vector form along a concatenated dimension: the logistic gradients, 8 rows a block, the last block row by row
from mdhom.components import gradients as gr
rng = np.random.default_rng(3)
n = 21
args = dict(scores=rng.standard_normal((n, 1)) * 30, y=rng.integers(0, 2, (n, 1)).astype(float), w=rng.random(n) + 0.5,
            keep=np.ones(1, np.uint8), use_keep=0, factor=1.0)
desc = gr.gradients("logistic", vector=True)
cfg = {"NUM_WG_row": 2, "NUM_WI_row": 1, "NUM_WG_output": 1, "NUM_WI_output": 1, "CHUNKED": 1}
want = mdh.Computation(desc, dev, {**cfg, "VEC": 1})({"row": n, "output": 1}, **args)
got = mdh.Computation(desc, dev, {**cfg, "VEC": 8})({"row": n, "output": 1}, **args)
assert got.tobytes() == want.tobytes()
print("ok vector gradients", flush=True)

# ... and the softmax loss's, 4 outputs: each block reads its rows' every score
k = 4
args = dict(scores=rng.standard_normal((n, k)) * 30, y=rng.integers(0, k, (n, 1)).astype(float), w=rng.random(n) + 0.5,
            keep=np.ones(1, np.uint8), use_keep=0, factor=k / (k - 1.0))
desc = gr.gradients("softmax", vector=True)
cfg = {**cfg, "NUM_WG_output": 2, "NUM_WI_output": 2}
want = mdh.Computation(desc, dev, {**cfg, "VEC": 1})({"row": n, "output": k}, **args)
got = mdh.Computation(desc, dev, {**cfg, "VEC": 8})({"row": n, "output": k}, **args)
assert got.tobytes() == want.tobytes()
print("ok vector softmax gradients", flush=True)

# a placing scan (mdh.Place): ragged and empty lines, lanes of a power of two and not, lines in turn per group
import pyopencl.array as cl_array
from mdhom.mdh.examples import STABLE_PARTITION, stable_partition_reference
rng = np.random.default_rng(4)
n_lines, stride = 7, 45
keys = rng.integers(-99, 99, n_lines * stride).astype(np.int32)
lens = np.array([0, 1, 45, 17, 44, 3, 30], np.int32)
before = np.full(n_lines * stride, -5, np.int32)
want_odd, want = stable_partition_reference(keys, lens, stride, before)
for cfg in ({"NUM_WG_line": 3, "NUM_WI_line": 1, "NUM_WG_k": 1, "NUM_WI_k": 8},
            {"NUM_WG_line": 2, "NUM_WI_line": 1, "NUM_WG_k": 1, "NUM_WI_k": 5},
            {"NUM_WG_line": 7, "NUM_WI_line": 1, "NUM_WG_k": 1, "NUM_WI_k": 1}):
    moved = cl_array.to_device(dev.queue, before)
    got = mdh.Computation(STABLE_PARTITION, dev, cfg)({"line": n_lines, "k": stride}, keys=cl_array.to_device(dev.queue, keys),
                                                       moved=moved, lens=cl_array.to_device(dev.queue, lens), stride=stride)
    assert np.array_equal(got.get(), want_odd) and np.array_equal(moved.get(), want), cfg
    print("ok place", cfg["NUM_WI_k"], flush=True)
"""


def test_generated_kernels_are_clean_under_oclgrind(oclgrind_device):
    run = run_under_oclgrind(SCRIPT, timeout=900)
    assert run.clean, run.explain()
    assert run.stdout.count("ok ") == 31, run.explain()


def test_checker_catches_an_out_of_bounds_write(oclgrind_device):
    """The check above can fail: a deliberately broken kernel is reported."""
    bad = r"""
import pyopencl as cl
from mdhom import get_device
dev = get_device()
prg = cl.Program(dev.context, "__kernel void k(__global int* a) { a[get_global_id(0) + 1] = 1; }").build()
buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 16)
prg.k(dev.queue, (4,), None, buf)
dev.queue.finish()
"""
    run = run_under_oclgrind(bad, timeout=300)
    assert not run.clean
    assert "Invalid write" in run.report


def test_checker_catches_a_data_race(oclgrind_device):
    racy = r"""
import pyopencl as cl
from mdhom import get_device
dev = get_device()
src = "__kernel void k(__global int* a) { __local int l[1]; l[0] = get_local_id(0); barrier(CLK_LOCAL_MEM_FENCE); a[get_global_id(0)] = l[0]; }"
prg = cl.Program(dev.context, src).build()
buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 16)
prg.k(dev.queue, (4,), (4,), buf)
dev.queue.finish()
"""
    run = run_under_oclgrind(racy, timeout=300)
    assert "data race" in run.report, run.explain()


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
