"""The md_hom generator against numpy on every compute device, over many valid configurations.

Configurations are drawn at random from the description's parameter space and then perturbed to values that
are not powers of two (3, 5, 7, ...), because sizes need not be divisible by the parameters.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
from device_marks import runtime_faults

from mdhom import mdh
from mdhom.mdh import examples
from mdhom.mdh.codegen import generate
from mdhom.mdh.types import itemsize

CASES = {c.name: c for c in examples.all_cases()}
RANDOM_CONFIGS = 6


def random_config(desc: mdh.Description, device, sizes, rng: np.random.Generator) -> dict[str, int]:
    """A random configuration that the device accepts, mixing powers of two and odd values."""
    odd = (1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 64)
    for _ in range(200):
        cfg = {}
        for p in desc.parameter_space(device, sizes):
            pool = [v for v in set(p.values) | set(odd) if v <= max(p.values)]
            if p.name.startswith("NUM_WG"):
                pool = [v for v in pool if v <= 64]  # keep launches small on CPU devices
            cfg[p.name] = int(rng.choice(sorted(pool)))
        wg = math.prod(cfg[f"NUM_WI_{d}"] for d in desc.dim_names)
        if wg > 256:
            continue
        try:
            desc.check_config(cfg, device)
        except mdh.ConfigError:
            continue
        return cfg
    raise AssertionError(f"no valid random configuration found for {desc.name}")


def assert_matches(case: examples.Case, got: np.ndarray, config) -> None:
    want = case.expected()
    assert got.shape == want.shape, (case.name, config)
    if want.dtype.names:
        for f in want.dtype.names:
            np.testing.assert_allclose(got[f], want[f], rtol=case.rtol, atol=case.atol, err_msg=f"{case.name} {config}")
    elif np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want, err_msg=f"{case.name} {config}")
    else:
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, err_msg=f"{case.name} {config}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_and_random_configs(request, device, name):
    runtime_faults(request, device)
    rng = np.random.default_rng(abs(hash((name, device.key))) % 2**32)
    case = CASES[name].prepare(np.random.default_rng(7))
    assert_matches(case, case.run(device), "default")
    ran = 0
    for _ in range(4 * RANDOM_CONFIGS):
        cfg = random_config(case.description, device, case.sizes, rng)
        try:
            comp = mdh.Computation(case.description, device, cfg, case.sizes)
        except mdh.ConfigError:
            continue  # beyond what the compiled kernel can run on this device (registers)
        assert_matches(case, comp(**case.inputs), cfg)
        ran += 1
        if ran == RANDOM_CONFIGS:
            break
    assert ran == RANDOM_CONFIGS, f"only {ran} random configurations were runnable"


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 127, 128, 129, 1021, 1024])
def test_awkward_sizes_one_build(device, n):
    """Prime and power-of-two sizes with one fixed multi-work-group configuration (one build)."""
    desc = examples.TOTAL_SUM
    comp = mdh.Computation(desc, device, {"NUM_WG_i": 3, "NUM_WI_i": 8, "NUM_WI_COMBINE": 2})
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(comp(x=x), x.sum(dtype=np.float64), rtol=1e-5, atol=1e-5)
    scan = mdh.Computation(examples.SCAN_MAX_1D, device, {"NUM_WG_i": 3, "NUM_WI_i": 5, "NUM_WI_COMBINE": 4})
    np.testing.assert_array_equal(scan(x=x), np.maximum.accumulate(x))


def test_same_config_is_deterministic(device):
    case = CASES["histogram"].prepare(np.random.default_rng(3))
    cfg = {"NUM_WG_row": 7, "NUM_WI_row": 16, "NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WI_COMBINE": 8}
    first, second = case.run(device, cfg), case.run(device, cfg)
    assert first.tobytes() == second.tobytes()


def test_kernels_are_made_once_per_thread_and_launch_right_after_reuse(cpu):
    """Computations of one program share its kernels within a thread (a later fit reuses them, without pyopencl's
    per-kernel invoker fetch), never across threads: a kernel object is the launching thread's, whichever thread made
    the computation (each launch sets a kernel's arguments, so two threads launching one object could mix them: two
    models' predictions from a thread pool, say); a reused kernel computes with its new launch's buffers and
    sizes."""
    import threading

    case = CASES["histogram"].prepare(np.random.default_rng(3))
    cfg = {"NUM_WG_row": 3, "NUM_WI_row": 8, "NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WI_COMBINE": 4}
    first, second = (mdh.Computation(case.description, cpu, cfg) for _ in range(2))
    assert first.kernel("main") is second.kernel("main") and first.kernel("combine") is second.kernel("combine")
    other: list = []

    def elsewhere() -> None:  # this thread's kernels: of a computation made here, and of the one made before
        other.extend([mdh.Computation(case.description, cpu, cfg).kernel("main"), first.kernel("main")])
        other.append(other[0] is other[1])

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert len(other) == 3 and other[2] and other[0] is not first.kernel("main")
    # the shared kernels computing in turn for two computations with other inputs each (other buffers, other sizes)
    other_case = copy.copy(CASES["histogram"]).prepare(np.random.default_rng(4))
    other_case.sizes = {**case.sizes, "row": case.sizes["row"] // 2 + 1}
    other_case.prepare(np.random.default_rng(4))
    for _ in range(2):
        assert case.matches(first(**case.inputs))
        assert other_case.matches(second(**other_case.inputs))


def test_builds_in_threads_leave_the_warning_filters_as_they_were(cpu):
    """A build silences pyopencl's warning of a non-empty build log with ``warnings.catch_warnings``, which saves the
    process's filters and puts them back after: two threads building at once put back each other's, and a filter
    ignoring CompilerWarning outlived the builds (or the caller's filters were lost). Fits in a thread pool build
    at once; their builds now take turns."""
    import threading
    import warnings

    from mdhom.mdh.build import build_program

    before = list(warnings.filters)

    def builds(t: int) -> None:  # programs of this test alone: the first build of each in the process compiles
        for i in range(6):
            build_program(cpu, f"/* filters, thread {t} */ __kernel void k(__global int* a) {{ a[0] = {i}; }}", [])

    threads = [threading.Thread(target=builds, args=(t,)) for t in range(3)]
    for worker in threads:
        worker.start()
    for worker in threads:
        worker.join()
    assert list(warnings.filters) == before


def test_integer_reduction_is_exact_across_configs(request, device):
    """Integer accumulation is associative, so every configuration gives the same bits."""
    runtime_faults(request, device)
    case = CASES["sum_3d"].prepare(np.random.default_rng(5))
    rng = np.random.default_rng(11)
    results = {case.run(device, random_config(case.description, device, case.sizes, rng)).tobytes() for _ in range(3)}
    assert len(results) == 1


def test_device_resident_inputs_stay_on_device(device):
    import pyopencl.array as cl_array

    comp = mdh.Computation(examples.ROW_SUM, device)
    x = np.random.default_rng(1).standard_normal((9, 100))
    x_dev = cl_array.to_device(device.queue, x)
    out = comp(x=x_dev)
    assert isinstance(out, cl_array.Array)
    np.testing.assert_allclose(out.get(), x.sum(1), rtol=1e-12)
    launch = comp.enqueue(x=x_dev)
    assert launch.kernel_seconds() > 0


def test_params_reach_the_scalar_function(device):
    desc = mdh.Description(
        "scaled_sum", ["i"], [mdh.Reduce(mdh.SUM)], "double", "out = scale * x + shift;",
        inputs=[mdh.Input("x", "double", ("i",))], params=[mdh.Param("scale", "double"), mdh.Param("shift", "int")],
    )
    x = np.arange(10.0)
    got = mdh.Computation(desc, device)(x=x, scale=2.5, shift=3)
    assert got == pytest.approx(2.5 * x.sum() + 30)


def test_gather_input_and_index_expression(device):
    """A gathered lookup table and a transposed index expression."""
    desc = mdh.Description(
        "lookup", ["i", "j"], [mdh.Concat(), mdh.Concat()], "float", "out = table[code] * x;",
        inputs=[
            mdh.Input("code", "int", ("j", "i"), index="j * SIZE_i + i"),
            mdh.Input("x", "float", ("i", "j")),
            mdh.Input("table", "float", ("*",), gather=True),
        ],
    )
    rng = np.random.default_rng(2)
    code = rng.integers(0, 16, (7, 5)).astype(np.int32)  # (j, i)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    table = rng.standard_normal(16).astype(np.float32)  # any length: the extent is "*"
    got = mdh.Computation(desc, device, {"NUM_WG_i": 2, "NUM_WI_i": 2, "NUM_WG_j": 3, "NUM_WI_j": 3})(
        code=code, x=x, table=table)
    np.testing.assert_allclose(got, table[code.T] * x, rtol=1e-6)


def test_written_gathered_input_is_a_second_result(device):
    """A gathered input with ``writes=True`` is the scalar function's to write as well as read: each point leaves its
    own element there beside the output (one launch, two results), under every configuration; a read-only input stays
    ``const`` in the kernel."""
    import pyopencl.array as cl_array

    desc = mdh.Description(
        "two_results", ["i"], [mdh.Concat()], "int", "out = 2 * x[i];\nif (i < n) aux[i] = x[i] + 1;",
        inputs=[mdh.Input("x", "int", ("*",), gather=True), mdh.Input("aux", "int", ("*",), gather=True, writes=True)],
        params=[mdh.Param("n", "int")],
    )
    src = generate(desc)
    assert "__global int* restrict aux" in src and "__global const int* restrict x" in src
    rng = np.random.default_rng(11)
    n = 203
    x = rng.integers(-1000, 1000, n + 5).astype(np.int32)
    for _ in range(RANDOM_CONFIGS):
        cfg = random_config(desc, device, {"i": n}, rng)
        aux = cl_array.to_device(device.queue, np.full(n + 5, -7, np.int32))
        got = mdh.Computation(desc, device, cfg)({"i": n}, x=cl_array.to_device(device.queue, x), aux=aux, n=n - 3)
        np.testing.assert_array_equal(got.get(), 2 * x[:n], err_msg=str(cfg))
        want = np.full(n + 5, -7, np.int32)
        want[: n - 3] = x[: n - 3] + 1
        np.testing.assert_array_equal(aux.get(), want, err_msg=str(cfg))


def test_scatter_permutes_positions(device):
    """A scattering description writes each point's atom where its scalar function sends it (``out_at``, a
    permutation: a row scatter): the same result under every configuration, awkward tile sizes included."""
    desc = mdh.Description(
        "scatter_rows", ["r", "c"], [mdh.Concat(), mdh.Concat()], "float", "out = x * 2;\nout_at = perm[r] * SIZE_c + c;",
        inputs=[mdh.Input("x", "float", ("r", "c")), mdh.Input("perm", "int", ("r",), gather=True)],
        scatter=True,
    )
    rng = np.random.default_rng(5)
    n, m = 301, 7
    x = rng.standard_normal((n, m)).astype(np.float32)
    perm = rng.permutation(n).astype(np.int32)
    want = np.empty_like(x)
    want[perm] = 2 * x
    sizes = {"r": n, "c": m}
    for _ in range(RANDOM_CONFIGS):
        cfg = random_config(desc, device, sizes, rng)
        got = mdh.Computation(desc, device, cfg)(x=x, perm=perm)
        np.testing.assert_array_equal(got, want, err_msg=str(cfg))


def test_placing_scan_partitions_each_line_stably(device):
    """A placing scan (``mdh.Place``) moves each line's points to the places their exclusive prefixes give them: the
    stable partition of every line (a line's odd keys first, each side in order), ragged lines, an empty one and a
    full one included, under the default and random configurations (lanes that are not powers of two among them,
    and fewer work-groups than lines); the output is each line's count."""
    import pyopencl.array as cl_array

    desc = examples.STABLE_PARTITION
    rng = np.random.default_rng(3)
    n_lines, stride = 41, 300
    keys = rng.integers(-1000, 1000, n_lines * stride).astype(np.int32)
    lens = rng.integers(0, stride + 1, n_lines).astype(np.int32)
    lens[:3] = (0, 1, stride)
    before = np.full(n_lines * stride, -5, np.int32)
    want_odd, want = examples.stable_partition_reference(keys, lens, stride, before)
    sizes = {"line": n_lines, "k": stride}
    for cfg in [None] + [random_config(desc, device, sizes, rng) for _ in range(RANDOM_CONFIGS)]:
        moved = cl_array.to_device(device.queue, before)
        got = mdh.Computation(desc, device, cfg)(sizes, keys=cl_array.to_device(device.queue, keys), moved=moved,
                                                 lens=cl_array.to_device(device.queue, lens), stride=stride)
        np.testing.assert_array_equal(got.get(), want_odd, err_msg=str(cfg))
        np.testing.assert_array_equal(moved.get(), want, err_msg=str(cfg))


def test_placing_scan_is_checked(cpu):
    """What a placing scan needs is checked where it is known: a scanned dimension and none of the options it does not
    take (the description), a line a work-group (the configuration), lines within ``line_max`` (the launch)."""
    pl = examples.STABLE_PARTITION.place
    base = dict(inputs=[mdh.Input("x", "int", ("*",), gather=True)], place=pl)
    with pytest.raises(mdh.DescriptionError, match="needs a Scan"):
        mdh.Description("p", ["i", "k"], [mdh.Concat(), mdh.Concat()], "int", "out = x[k];", **base)
    with pytest.raises(mdh.DescriptionError, match="does not go with `scatter`"):
        mdh.Description("p", ["i", "k"], [mdh.Concat(), mdh.Scan(mdh.SUM)], "int", "out = x[k];", scatter=True, **base)
    with pytest.raises(mdh.DescriptionError, match="must set mdh_at"):
        mdh.Description("p", ["i", "k"], [mdh.Concat(), mdh.Scan(mdh.SUM)], "int", "out = x[k];",
                        inputs=base["inputs"], place=mdh.Place(at="", emit="", line_max=8))
    desc = examples.STABLE_PARTITION
    assert {"NUM_WI_COMBINE", "SCAN_TILED"}.isdisjoint(desc.parameter_names())
    assert desc.output_dims == ("line",)
    cfg = {"NUM_WG_line": 2, "NUM_WI_line": 1, "NUM_WG_k": 1, "NUM_WI_k": 4}
    desc.check_config(cfg, cpu)
    for bad in ({"NUM_WG_k": 2}, {"NUM_WI_line": 2}):
        with pytest.raises(mdh.ConfigError, match="a line a work-group"):
            desc.check_config({**cfg, **bad}, cpu)
    n = pl.line_max + 1
    x = np.zeros(2 * n, np.int32)
    with pytest.raises(ValueError, match="line_max"):
        mdh.Computation(desc, cpu, cfg)({"line": 2, "k": n}, keys=x, moved=x.copy(), lens=np.full(2, n, np.int32),
                                        stride=n)


@pytest.mark.parametrize("name", ["histogram_q32", "histogram_q64"])
def test_local_atomic_partials_equal_private_partials(device, name):
    """PARTIALS_LOCAL=1 (integer atomics into a work-group accumulator) gives the same bits as the private path."""
    case = CASES[name].prepare(np.random.default_rng(9))
    base = {"NUM_WG_row": 3, "NUM_WI_row": 16, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 4}
    if case.description.atomic_64 and not device.has_int64_atomics:
        pytest.skip(f"{device.key} lacks cl_khr_int64_base_atomics")
    got = {p: case.run(device, {**base, "PARTIALS_LOCAL": p}) for p in (0, 1)}
    assert_matches(case, got[1], "local")
    assert got[0].tobytes() == got[1].tobytes()


def packed_twin(desc: mdh.Description, padded: bool = False) -> mdh.Description:
    """The (int g, int h) histogram ``desc`` with its folds through the pair helpers, offering PACKED and
    SPLIT_PAIRS (and LOCAL_PAD where ``padded``)."""
    return mdh.Description(desc.name + "_packed", desc.dims, desc.combine, desc.atom, desc.scalar, desc.inputs,
                           desc.params, "mdh_add_pair(&acc.v[bins].g, g, h);", desc.preamble,
                           "mdh_atomic_add_pair(acc, bins, g, h);", packed_pairs=True, padded=padded)


def test_packed_pairs_equal_two_int32_lanes(device):
    """PACKED=1 adds each (g, h) as one 64-bit word (private memory, or local 64-bit atomics), SPLIT_PAIRS=1 keeps
    the local accumulator's g and h lanes in two planes: the same bits as two interleaved int32 adds, over several
    work-groups and work-items, with g sums of both signs (the borrow a negative g sum takes from h is given
    back)."""
    case = copy.copy(CASES["histogram_q32"]).prepare(np.random.default_rng(23))
    twin = packed_twin(case.description)
    assert {"PACKED", "SPLIT_PAIRS"} <= set(twin.parameter_names())
    assert "PACKED" not in case.description.parameter_names()
    want = case.expected()
    assert (want["g"] < 0).any() and (want["g"] > 0).any()
    base = {"NUM_WG_row": 3, "NUM_WI_row": 16, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 4}
    # (PARTIALS_LOCAL, PACKED, SPLIT_PAIRS)
    modes = [(0, 0, 0), (0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1)] + ([(1, 1, 0)] if device.has_int64_atomics else [])
    got = {m: mdh.Computation(twin, device, {**base, "PARTIALS_LOCAL": m[0], "PACKED": m[1], "SPLIT_PAIRS": m[2]},
                              case.sizes)(**case.inputs)
           for m in modes}
    plain = case.run(device, {**base, "PARTIALS_LOCAL": 0})
    assert_matches(case, plain, "two int32 lanes")
    for m, g in got.items():
        assert g.tobytes() == plain.tobytes(), m


def test_packed_pairs_are_checked(device):
    """PACKED needs an atom of int pairs (a description error otherwise) and, with local partials, 64-bit local
    atomics (a configuration error on a device without them)."""
    import dataclasses

    q64 = examples.HISTOGRAM_Q64
    with pytest.raises(mdh.DescriptionError, match="packed_pairs"):
        mdh.Description("bad", q64.dims, q64.combine, q64.atom, q64.scalar, q64.inputs, accumulate=q64.accumulate,
                        accumulate_atomic=q64.accumulate_atomic, packed_pairs=True)
    q32 = examples.HISTOGRAM_Q32
    with pytest.raises(mdh.DescriptionError, match="mdh_add_pair"):  # folds that PACKED could not pack
        mdh.Description("bad", q32.dims, q32.combine, q32.atom, q32.scalar, q32.inputs, accumulate=q32.accumulate,
                        accumulate_atomic=q32.accumulate_atomic, packed_pairs=True)
    twin = packed_twin(q32)
    dev = dataclasses.replace(device, has_int64_atomics=False)
    cfg = {**twin.default_config(dev, None), "PARTIALS_LOCAL": 1, "PACKED": 1}
    with pytest.raises(mdh.ConfigError, match="64-bit"):
        twin.check_config(cfg, dev)
    twin.check_config({**cfg, "PARTIALS_LOCAL": 0}, dev)  # private packing needs no atomics
    with pytest.raises(mdh.ConfigError, match="SPLIT_PAIRS"):  # one 64-bit word per pair, or pairs kept apart
        twin.check_config({**cfg, "SPLIT_PAIRS": 1}, dataclasses.replace(device, has_int64_atomics=True))
    twin.check_config({**cfg, "PACKED": 0, "SPLIT_PAIRS": 1}, dev)
    # a configuration that does not say PACKED (stored before it existed) builds unpacked local atomics there
    stored = {k: v for k, v in cfg.items() if k != "PACKED"}
    assert mdh.build_within_limits(twin, dev, stored).config["PACKED"] == 0
    twin.check_config({k: v for k, v in stored.items() if k != "SPLIT_PAIRS"}, dev)  # absent: 0


def test_padded_local_accumulator_gives_the_same_bits(device):
    """``padded`` (LOCAL_PAD=s: a word of padding after every 2^s words of the local accumulator, so that cells 2^s
    words apart fall in different banks): the same bits as unpadded, with pairs interleaved, in two planes or packed
    64-bit words, two concatenation lanes (each its own padded accumulator); the local memory it needs is counted,
    other values are refused, and unpadded descriptions keep their source (their stored configurations' hash)."""
    from mdhom.configs import description_hash

    case = copy.copy(CASES["histogram_q32"]).prepare(np.random.default_rng(29))
    twin, padded = packed_twin(case.description), packed_twin(case.description, padded=True)
    assert "LOCAL_PAD" in padded.parameter_names() and "LOCAL_PAD" not in twin.parameter_names()
    unpadded_source = generate(twin)
    assert "MDH_PAD" in generate(padded) and "MDH_PAD" not in unpadded_source
    assert description_hash(twin) != description_hash(padded)
    base = {"NUM_WG_row": 3, "NUM_WI_row": 16, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 4,
            "PARTIALS_LOCAL": 1}
    plain = case.run(device, {**base, "PARTIALS_LOCAL": 0})
    modes = [(0, 0), (0, 1)] + ([(1, 0)] if device.has_int64_atomics else [])  # (PACKED, SPLIT_PAIRS)
    for (packed, split), pad in itertools.product(modes, (0, 5, 8)):
        cfg = {**base, "PACKED": packed, "SPLIT_PAIRS": split, "LOCAL_PAD": pad}
        got = mdh.Computation(padded, device, cfg, case.sizes)(**case.inputs)
        assert got.tobytes() == plain.tobytes(), cfg
    pairs = itemsize(twin.atom) // 8
    assert padded.local_mem_bytes({**base, "LOCAL_PAD": 5}) == 2 * 8 * (pairs + (pairs >> 5) + 1)
    assert padded.local_mem_bytes({**base, "LOCAL_PAD": 0}) == twin.local_mem_bytes(base)
    with pytest.raises(mdh.ConfigError, match="LOCAL_PAD"):
        padded.check_config({**padded.default_config(device, case.sizes), "LOCAL_PAD": 3}, device)
    q32 = case.description
    with pytest.raises(mdh.DescriptionError, match="padded"):
        mdh.Description("bad", q32.dims, q32.combine, q32.atom, q32.scalar, q32.inputs, accumulate=q32.accumulate,
                        accumulate_atomic=q32.accumulate_atomic, padded=True)


def test_switches_are_tuning_parameters_of_the_description(device):
    """A description's switches are 0/1 parameters of its own code (``#if NAME``): in the space, 0 where a stored
    configuration lacks one, both values computing what the code says; a name of the generator's is refused."""
    desc = mdh.Description("halve_or_double", ["i"], [mdh.Concat()], "int", "out = HALVE ? x / 2 : 2 * x;",
                           inputs=[mdh.Input("x", "int", ("i",))], switches=("HALVE",))
    assert {p.name: p.values for p in desc.parameter_space(device)}["HALVE"] == (0, 1)
    cfg = {k: v for k, v in desc.default_config(device, {"i": 37}).items() if k != "HALVE"}
    desc.check_config(cfg, device)  # absent: 0
    x = np.arange(37, dtype=np.int32)
    for halve, want in ((0, 2 * x), (1, x // 2)):
        np.testing.assert_array_equal(mdh.Computation(desc, device, {**cfg, "HALVE": halve})(x=x), want)
    for bad in ("CHUNKED", "NUM_WI_i", "lower"):
        with pytest.raises(mdh.DescriptionError, match="switch"):
            mdh.Description("bad", ["i"], [mdh.Concat()], "int", "out = x;", inputs=[mdh.Input("x", "int", ("i",))],
                            switches=(bad,))


def test_inline_fold_is_a_generator_switch(device):
    """``inline_fold`` offers INLINE (the folds forced inline): both values give the plain fold's bits, private and
    local-atomic partials alike; 1 by default on CPUs, and a configuration stored without it builds the default; a
    description that does not opt in keeps its source (no INLINE anywhere), and one without a fold is refused."""
    case = copy.copy(CASES["histogram_q32"]).prepare(np.random.default_rng(31))
    q32 = case.description
    twin = mdh.Description(q32.name, q32.dims, q32.combine, q32.atom, q32.scalar, q32.inputs,
                           accumulate=q32.accumulate, accumulate_atomic=q32.accumulate_atomic, inline_fold=True)
    assert "INLINE" in twin.parameter_names() and "INLINE" not in q32.parameter_names()
    assert "INLINE" not in generate(q32) and "MDH_FOLD_INLINE void mdh_fold(" in generate(twin)
    assert {p.name: p.values for p in twin.parameter_space(device, case.sizes)}["INLINE"] == (0, 1)
    assert twin.default_config(device, case.sizes)["INLINE"] == int(device.type == "cpu")
    base = {"NUM_WG_row": 3, "NUM_WI_row": 16, "NUM_WG_feat": 1, "NUM_WI_feat": 2, "NUM_WI_COMBINE": 4}
    plain = case.run(device, {**base, "PARTIALS_LOCAL": 0})
    assert_matches(case, plain, "the plain fold")
    for local in (0, 1):
        for inline in (0, 1):
            got = mdh.Computation(twin, device, {**base, "PARTIALS_LOCAL": local, "INLINE": inline},
                                  case.sizes)(**case.inputs)
            assert got.tobytes() == plain.tobytes(), (local, inline)
    stored = {**base, "PARTIALS_LOCAL": 0}
    twin.check_config(stored, device)  # absent: the default
    assert mdh.build_within_limits(twin, device, stored).config["INLINE"] == int(device.type == "cpu")
    with pytest.raises(mdh.ConfigError, match="INLINE must be 0 or 1"):
        twin.check_config({**stored, "INLINE": 2}, device)
    with pytest.raises(mdh.DescriptionError, match="needs a fold"):
        mdh.Description("bad", ["i"], [mdh.Concat()], "int", "out = x[i];", [mdh.Input("x", "int", ("i",))],
                        inline_fold=True)


def test_inline_scalar_is_a_generator_switch(device):
    """``inline_scalar`` offers INLINE for a description without a fold (its scalar function forced inline): both
    values write the plain description's output, 1 by default on CPUs; a description that does not opt in keeps its
    source, and one with a fold is refused (``inline_fold`` is its switch)."""
    case = copy.copy(CASES["key_count"]).prepare(np.random.default_rng(37))
    kc = case.description
    assert kc.scatter_add  # the case adds each point where it lands
    twin = mdh.Description(kc.name, kc.dims, kc.combine, kc.atom, kc.scalar, kc.inputs, kc.params, scatter="add",
                           inline_scalar=True)
    assert "INLINE" in twin.parameter_names() and "INLINE" not in kc.parameter_names()
    assert "INLINE" not in generate(kc) and "MDH_SCALAR_INLINE atom_t mdh_scalar(" in generate(twin)
    assert twin.default_config(device, case.sizes)["INLINE"] == int(device.type == "cpu")
    base = {"NUM_WG_i": 2, "NUM_WI_i": 1, "NUM_WG_j": 3, "NUM_WI_j": 16}
    plain = case.run(device, base)
    assert_matches(case, plain, "the plain scalar function")
    for inline in (0, 1):
        got = mdh.Computation(twin, device, {**base, "INLINE": inline}, case.sizes)(**case.inputs)
        assert got.tobytes() == plain.tobytes(), inline
    with pytest.raises(mdh.DescriptionError, match="without a fold"):
        mdh.Description("bad", ["i"], [mdh.Reduce(mdh.SUM)], "int", "out = x;", [mdh.Input("x", "int", ("i",))],
                        inline_scalar=True)


@pytest.mark.parametrize("name", ["histogram", "scan_exclusive", "argmax_rows"])
def test_bound_launch_equals_checked_enqueue(device, name):
    """Buffers bound once at the largest size; every smaller size gives what a checked enqueue gives."""
    import pyopencl.array as cl_array

    case = CASES[name]
    desc = case.description
    comp = mdh.Computation(desc, device, random_config(desc, device, case.sizes, np.random.default_rng(1)))
    big = case.prepare(np.random.default_rng(2)).inputs
    q = device.queue
    dev_in = {k: cl_array.to_device(q, np.ascontiguousarray(v)) for k, v in big.items()}
    out = cl_array.empty(q, comp.output_shape(case.sizes), desc.atom.dtype)
    bound = comp.bind(out, **dev_in)
    for shrink in (1, 2, 3):
        sizes = {d: max(1, n // shrink) if i == 0 else n for i, (d, n) in enumerate(case.sizes.items())}
        # the smaller problem is the leading block of the big inputs along the first dimension
        first = desc.dim_names[0]
        small = {k: np.ascontiguousarray(v[: sizes[first]]) for k, v in big.items()}
        want = comp(sizes=sizes, **small)
        bound(sizes)
        got = out.get().ravel()[: want.size].reshape(want.shape)
        assert got.tobytes() == want.tobytes(), (name, sizes)


@pytest.mark.parametrize("name", ["row_sum", "argmax_rows", "sum_3d", "key_count", "scan_inclusive", "scan_exclusive",
                                  "packed_solve"])
def test_launches_along_fewer_points_than_the_grid_run_only_the_groups_that_hold_them(request, device, name):
    """A launch whose first, concatenated dimension has fewer points than the build's work-groups cover in one pass
    runs only the groups holding them (PoCL's threads take the groups in contiguous runs, so the empty ones had left a
    thread idle): a grid four times too wide gives the bits of one that fits, and both the reference's, over random
    configurations of reductions (with partials and their combine), scans, a scatter and a concatenation alone."""
    runtime_faults(request, device)
    case = copy.copy(CASES[name]).prepare(np.random.default_rng(23))
    desc = case.description
    first = desc.dim_names[0]
    assert first in desc.concat_dims
    n = case.sizes[first]
    rng = np.random.default_rng(11)
    ran = 0
    for _ in range(4 * RANDOM_CONFIGS):
        cfg = random_config(desc, device, case.sizes, rng)
        need = -(-n // cfg[f"NUM_WI_{first}"])  # the groups that hold the points in one pass
        try:
            fit = mdh.Computation(desc, device, {**cfg, f"NUM_WG_{first}": need}, case.sizes)
            wide = mdh.Computation(desc, device, {**cfg, f"NUM_WG_{first}": 4 * need + 1}, case.sizes)
        except mdh.ConfigError:
            continue  # beyond what the compiled kernel can run on this device (registers)
        assert wide.groups(n) == fit.groups(n) == fit.num_groups < wide.num_groups, cfg
        got = wide(**case.inputs)
        assert_matches(case, got, cfg)
        assert got.tobytes() == fit(**case.inputs).tobytes(), cfg
        ran += 1
        if ran == RANDOM_CONFIGS:
            break
    assert ran == RANDOM_CONFIGS, f"only {ran} random configurations were runnable"


def test_a_first_dimension_that_reduces_keeps_the_whole_grid(device):
    """Only a concatenated first dimension is trimmed: groups along a reduced one each fold a share of every point."""
    comp = mdh.Computation(examples.TOTAL_SUM, device, {"NUM_WG_i": 8, "NUM_WI_i": 4, "NUM_WI_COMBINE": 2})
    assert comp.groups(3) == comp.num_groups == 8
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(comp(x=x), np.float32(3.0))


def test_sums_of_lanes_combine_lane_by_lane(device):
    """A SUM over an atom of one lane type (a histogram) folds its work-group partials a lane per work-item, in
    the same order as whole atoms, so the bits are the same; other operators keep one work-item per atom."""
    assert examples.HISTOGRAM_Q32.combine_lanes == 2 * 16
    assert examples.ARGMAX_ROWS.combine_lanes == 0  # (value, index): two lane types, and not a SUM
    case = CASES["histogram"].prepare(np.random.default_rng(11))
    desc = case.description
    assert desc.combine_lanes > 1 and "mdh_stride" in mdh.Computation(desc, device, None).source
    for groups in (1, 3, 7):
        cfg = {"NUM_WG_row": groups, "NUM_WI_row": 8, "NUM_WG_feat": 2, "NUM_WI_feat": 1, "NUM_WI_COMBINE": 16}
        assert_matches(case, case.run(device, cfg), f"{groups} groups")


@pytest.mark.parametrize("name", ["scan_inclusive", "scan_exclusive"])
def test_tiled_scan_equals_chunked_scan(device, name):
    """SCAN_TILED=1 (rounds of consecutive elements per work-group) gives the chunked scan's result, over one
    and several work-groups and work-group sizes that do not divide the rows."""
    case = CASES[name].prepare(np.random.default_rng(13))
    desc = case.description
    assert "SCAN_TILED" in desc.parameter_names()
    lane, other = desc.scan_dim, next(d for d in desc.dim_names if d != desc.scan_dim)
    for groups, wi in ((1, 8), (3, 16), (5, 4)):
        cfg = {f"NUM_WG_{lane}": groups, f"NUM_WI_{lane}": wi, f"NUM_WG_{other}": 2, f"NUM_WI_{other}": 1,
               "NUM_WI_COMBINE": 8}
        got = {t: case.run(device, {**cfg, "SCAN_TILED": t}) for t in (0, 1)}
        assert_matches(case, got[1], f"tiled {groups}x{wi}")
        if got[0].dtype.kind in "iu":
            assert got[0].tobytes() == got[1].tobytes()


@pytest.mark.parametrize("k", [1, 2, 17, 40])
def test_batched_packed_solve_matches_its_numpy_twin_bit_for_bit(device, k):
    """A description over systems whose scalar function solves its own k x k system in scratch memory (sized at
    launch: one build for every k) gives mdh.linalg's bits, also for a singular system (zero pivots give zeros)."""
    from mdhom.mdh import linalg

    rng = np.random.default_rng(k)
    m = rng.normal(size=(9, k, k))
    spd = m @ m.transpose(0, 2, 1) + 0.1 * np.eye(k)
    spd[3] = 0.0  # singular: every pivot zero
    rows, cols = np.tril_indices(k)
    a, b = spd[:, rows, cols].copy(), rng.normal(size=(9, k))
    desc = mdh.Description(
        "solve_k", ["sys"], [mdh.Concat()], "double",
        scalar="""
const long P = (long)k * (k + 1) / 2;
for (long e = 0; e < P; ++e) work[e] = a[sys * P + e];
for (int i = 0; i < k; ++i) work[P + i] = b[sys * k + i];
mdh_ldl_packed(work, k);
mdh_ldl_solve_packed(work, k, work + P);
out = work[P + lane];""",
        inputs=[mdh.Input("a", "double", ("*",), gather=True), mdh.Input("b", "double", ("*",), gather=True)],
        params=[mdh.Param("k", "int"), mdh.Param("lane", "int"), mdh.Param("work_len", "int")],
        preamble=linalg.SOURCE, scratch=mdh.Scratch("work", "double", "work_len", private=(4, 1024)))
    want = linalg.solve_packed(a, b, k)
    work_len = a.shape[1] + k
    cap = desc.private_capacity(work_len)
    assert cap == (4 if work_len <= 4 else 1024)
    for private in (0, cap):  # the global slice, then private memory: the same operations, the same bits
        comp = mdh.Computation(desc, device, {"NUM_WG_sys": 2, "NUM_WI_sys": 4, "SCRATCH_PRIVATE": private})
        for lane in (0, k - 1):
            got = comp({"sys": 9}, a=a.ravel(), b=b.ravel(), k=k, lane=lane, work_len=work_len)
            assert got.tobytes() == np.ascontiguousarray(want[:, lane]).tobytes(), (private, lane)
    assert not want[3].any()


def test_private_scratch_is_a_build_time_choice_checked_at_launch(device):
    """SCRATCH_PRIVATE is 0 or an offered capacity; a launch longer than the built capacity is refused (never an
    overflow), and fit_scratch moves a configuration to the smallest capacity that holds a known length."""
    from mdhom.mdh import examples

    desc = examples.PACKED_SOLVE
    assert "SCRATCH_PRIVATE" in desc.parameter_names() and desc.private_scratch == (32,)
    assert desc.default_config(device)["SCRATCH_PRIVATE"] == 0
    with pytest.raises(mdh.ConfigError, match="SCRATCH_PRIVATE must be"):
        desc.check_config({**desc.default_config(device), "SCRATCH_PRIVATE": 16}, device)
    assert desc.fit_scratch({"SCRATCH_PRIVATE": 32}, 40)["SCRATCH_PRIVATE"] == 0  # too long: the global slice
    assert desc.fit_scratch({"SCRATCH_PRIVATE": 0}, 20)["SCRATCH_PRIVATE"] == 0  # global holds any length: kept
    assert desc.fit_scratch({"SCRATCH_PRIVATE": 32}, 20)["SCRATCH_PRIVATE"] == 32
    case = {c.name: c for c in examples.all_cases()}["packed_solve"].prepare(np.random.default_rng(0))
    comp = mdh.Computation(desc, device, {"NUM_WG_sys": 1, "NUM_WI_sys": 1, "SCRATCH_PRIVATE": 32})
    assert case.matches(comp(**case.inputs))
    with pytest.raises(mdh.ConfigError, match="exceeds the private capacity"):
        comp(**{**case.inputs, "work_len": 33})
    with pytest.raises(mdh.DescriptionError, match="capacities must be positive"):
        mdh.Description(
            "bad", ["i"], [mdh.Concat()], "double", "out = 0.0;", params=[mdh.Param("work_len", "int")],
            scratch=mdh.Scratch("work", "double", "work_len", private=(0,)))


def chunked_twin(desc: mdh.Description) -> mdh.Description:
    """``desc`` offering CHUNKED (the same computation: only the schedule differs)."""
    return mdh.Description(desc.name + "_chunked", desc.dims, desc.combine, desc.atom, desc.scalar, desc.inputs,
                           desc.params, desc.accumulate, desc.preamble, desc.accumulate_atomic, dict(desc.extents),
                           desc.scatter, desc.scratch, chunked=True)


@pytest.mark.parametrize("name", ["histogram_q32", "sum_3d", "argmax_rows", "column_max", "gh_sum"])
def test_chunked_shares_equal_strided_shares(request, device, name):
    """CHUNKED=1 (each work-item a contiguous run of every dimension) computes what the strided shares do, over one
    and several work-groups, sizes the runs do not divide, concatenated and reduced dimensions; integer and
    order-free (max, argmax) results to the bit. It is offered only where a description asks for it."""
    runtime_faults(request, device)
    case = copy.copy(CASES[name]).prepare(np.random.default_rng(17))
    assert "CHUNKED" not in case.description.parameter_names()
    twin = chunked_twin(case.description)
    assert "CHUNKED" in twin.parameter_names()
    case.description = twin
    rng = np.random.default_rng(3)
    exact = name in ("histogram_q32", "sum_3d", "argmax_rows", "column_max")
    ran = 0
    for _ in range(4 * RANDOM_CONFIGS):
        cfg = random_config(twin, device, case.sizes, rng)
        try:
            comps = {c: mdh.Computation(twin, device, {**cfg, "CHUNKED": c}, case.sizes) for c in (0, 1)}
        except mdh.ConfigError:
            continue  # beyond what the compiled kernel can run on this device (registers)
        got = {c: comp(**case.inputs) for c, comp in comps.items()}
        assert_matches(case, got[1], {**cfg, "CHUNKED": 1})
        if exact:
            assert got[0].tobytes() == got[1].tobytes(), cfg
        ran += 1
        if ran == RANDOM_CONFIGS:
            break
    assert ran == RANDOM_CONFIGS, f"only {ran} random configurations were runnable"


def test_chunked_ragged_and_scattered(device):
    """CHUNKED with ragged extents (each slot folds its own count of rows) and with a scattering description."""
    ragged = mdh.Description(
        "ragged_sum", ["slot", "pos"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "long", "out = (long)x[slot * SIZE_pos + pos];",
        inputs=[mdh.Input("x", "int", ("*",), gather=True), mdh.Input("count", "int", ("slot",), gather=True)],
        extents={"pos": "count[slot]"}, chunked=True)
    rng = np.random.default_rng(19)
    x = rng.integers(-1000, 1000, (13, 101)).astype(np.int32)
    count = rng.integers(0, 102, 13).astype(np.int32)
    want = np.array([x[i, :c].sum() for i, c in enumerate(count)], np.int64)
    scatter = mdh.Description(
        "scatter_rows_c", ["r"], [mdh.Concat()], "float", "out = x * 2;\nout_at = perm[r];",
        inputs=[mdh.Input("x", "float", ("r",)), mdh.Input("perm", "int", ("r",), gather=True)], scatter=True,
        chunked=True)
    xs = rng.standard_normal(301).astype(np.float32)
    perm = rng.permutation(301).astype(np.int32)
    want_s = np.empty_like(xs)
    want_s[perm] = 2 * xs
    for c in (0, 1):
        for wg, wi in ((1, 1), (3, 5), (2, 16)):
            cfg = {"NUM_WG_slot": 2, "NUM_WI_slot": 1, "NUM_WG_pos": wg, "NUM_WI_pos": wi, "NUM_WI_COMBINE": 4,
                   "CHUNKED": c}
            got = mdh.Computation(ragged, device, cfg)({"slot": 13, "pos": 101}, x=x.reshape(-1), count=count)
            np.testing.assert_array_equal(got, want, err_msg=str(cfg))
            got = mdh.Computation(scatter, device, {"NUM_WG_r": wg, "NUM_WI_r": wi, "CHUNKED": c})(x=xs, perm=perm)
            np.testing.assert_array_equal(got, want_s, err_msg=str(cfg))


def test_exact_rounding_helpers_give_the_library_bits(device):
    """``mdh_rint`` and ``mdh_ldexp``, which a description's code may call instead of the library (a scalar call on
    CPU runtimes), give numpy's ``rint`` and ``ldexp`` bit for bit: ties to even, signed zeros, the 2^52 edge,
    infinities and NaN; ``ldexp`` over its domain (0.5 <= |p| < 2) into and below the subnormal range."""
    if not device.has_fp64:
        pytest.skip(f"{device.key} has no double precision")
    rint = mdh.Description("exact_rint", ["i"], [mdh.Concat()], "double", "out = mdh_rint(x);",
                           inputs=[mdh.Input("x", "double", ("i",))])
    ldexp = mdh.Description("exact_ldexp", ["i"], [mdh.Concat()], "double", "out = mdh_ldexp(p, k);",
                            inputs=[mdh.Input("p", "double", ("i",)), mdh.Input("k", "int", ("i",))])
    assert "mdh_rint" in mdh.Computation(rint, device, None).source
    rng = np.random.default_rng(23)
    edges = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 1e-300, -1e-300,
                      2.0**52 - 0.5, 2.0**52, 2.0**52 + 1, -(2.0**52 + 3), 2.0**53 + 2, 1e300, np.inf, -np.inf,
                      np.nan, 4503599627370495.5, -4503599627370495.5])
    x = np.concatenate([edges, rng.standard_normal(1000) * 10.0 ** rng.integers(-3, 12, 1000),
                        rng.integers(-10**6, 10**6, 500) + 0.5])
    got = mdh.Computation(rint, device, None)(x=x)
    assert np.array_equal(got.view(np.int64), np.rint(x).view(np.int64))
    k = np.concatenate([np.array([0, 1, 1023, -1, -1021, -1022, -1023, -1024, -1074, -1075, -1076, -1077, -2042,
                                  -2100], np.int32), rng.integers(-1100, 1024, 1500).astype(np.int32)])
    p = rng.uniform(0.5, 2.0, k.size) * rng.choice([-1.0, 1.0], k.size)
    p[:4] = [0.5, np.nextafter(2.0, 0.0), 0.0, np.nan]
    got = mdh.Computation(ldexp, device, None)(p=p, k=k)
    want = np.ldexp(p, k)
    nan = np.isnan(want)
    assert nan.any() and np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.int64), want[~nan].view(np.int64))


def _vector_descriptions(reach: str | None, fold: str | None = None) -> tuple[mdh.Description, mdh.Description]:
    """A sum of squares (long, exact) and an argmax with ties (double) over the columns of a row-padded matrix, each
    with a vector form over ``col``; ``reach`` lets blocks run past the row's last column into its padding; ``fold``:
    the argmax's block fold."""
    x_in = [mdh.Input("x", "int", ("*",), gather=True)]
    stride = [mdh.Param("stride", "int")]
    sq = mdh.Description(
        "vec_squares", ["row", "col"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "long",
        "const long v = x[row * stride + col];\nout = v * v;", inputs=x_in, params=stride,
        vector=mdh.Vector("col", """
const MDH_VT(long) v = mdh_convert_long_int(mdh_vload_int(x + row * stride + col));
long t[VEC];
mdh_vstore_long(v * v, t);
for (int s = 0; s < VEC; ++s) out[s] = t[s];""", reach=reach))
    arg = mdh.Description(
        "vec_argmax", ["row", "col"], [mdh.Concat(), mdh.Reduce(mdh.ARGMAX)],
        mdh.Struct("best_t", (("value", "double"), ("index", "int"))),
        "out.value = 0.5 * (double)x[row * stride + col];\nout.index = (int)col;", inputs=x_in, params=stride,
        vector=mdh.Vector("col", None if fold else """
const MDH_VT(double) v = 0.5 * mdh_convert_double_int(mdh_vload_int(x + row * stride + col));
double t[VEC];
mdh_vstore_double(v, t);
for (int s = 0; s < VEC; ++s) { out[s].value = t[s]; out[s].index = (int)col + s; }""", reach=reach, fold=fold))
    return sq, arg


def _argmax_folding_blocks(reach: str | None) -> mdh.Description:
    """The argmax of :func:`_vector_descriptions` whose vector form folds a block at once (``Vector.fold``): the
    block's best lane among its first ``mdh_vn``, combined once."""
    fold = """
const MDH_VT(double) v = 0.5 * mdh_convert_double_int(mdh_vload_int(x + row * stride + col));
double t[VEC];
mdh_vstore_double(v, t);
int b = 0;
for (int s = 1; s < mdh_vn; ++s) if (t[s] > t[b]) b = s;
atom_t best;
best.value = t[b];
best.index = (int)col + b;
acc = mdh_combine(acc, best);"""
    _, arg = _vector_descriptions(reach, fold)
    return arg


@pytest.mark.parametrize("reach", [None, "stride"])
def test_vector_form_equals_the_scalar_fold(device, reach):
    """VEC (a description's vector form, Vector) folds blocks of points computed in OpenCL vector types: the same
    sums and the same argmax (ties to the lower index) as point by point, under every width, over one and several
    work-items and work-groups along the vectorised dimension, in rows whose length no width divides; the last,
    partial block of a share runs point by point, or in vector form where ``reach`` allows it (the padding's lanes
    are computed and not folded)."""
    rows, cols, stride = 13, 101, 112
    rng = np.random.default_rng(29)
    x = np.full((rows, stride), 10**6, np.int32)  # padding: never a row's maximum, a large square if folded
    x[:, :cols] = rng.integers(-50, 50, (rows, cols))  # many ties
    sq, arg = _vector_descriptions(reach)
    folds = _argmax_folding_blocks(reach)
    assert "mdh_fold_vec" in generate(folds) and "mdh_scalar_vec" not in generate(folds)
    want_sq = (x[:, :cols].astype(np.int64) ** 2).sum(axis=1)
    want_i = x[:, :cols].argmax(axis=1)
    sizes = {"row": rows, "col": cols}
    for desc in (sq, arg):
        assert [p.values for p in desc.parameter_space(device, sizes) if p.name == "VEC"] == [(1, 2, 4, 8)]
        assert desc.default_config(device, sizes)["VEC"] == (8 if device.type == "cpu" and device.runtime == "pocl"
                                                             else 1)
    for vec in (1, 2, 4, 8):
        for wg, wi in ((1, 1), (3, 5), (2, 16)):
            cfg = {"NUM_WG_row": 2, "NUM_WI_row": 1, "NUM_WG_col": wg, "NUM_WI_col": wi, "NUM_WI_COMBINE": 4,
                   "VEC": vec}
            got = mdh.Computation(sq, device, cfg)(sizes, x=x.reshape(-1), stride=stride)
            np.testing.assert_array_equal(got, want_sq, err_msg=str(cfg))
            for desc in (arg, folds):
                got = mdh.Computation(desc, device, cfg)(sizes, x=x.reshape(-1), stride=stride)
                np.testing.assert_array_equal(got["index"], want_i, err_msg=f"{desc.name} {cfg}")
                np.testing.assert_array_equal(got["value"], 0.5 * x[np.arange(rows), want_i],
                                              err_msg=f"{desc.name} {cfg}")


def test_vector_fold_carries_its_sums_from_block_to_block(device):
    """``Vector.carry``: what a fold keeps from one block of its walk to the next. Each row's argmax of its running
    sums, the fold carrying the sum of the columns before its block (and which row and column that sum reaches), so it
    adds each column once, not from the row's first on: the scalar function's answer under every width, over one and
    several work-items and work-groups along the columns, whose blocks come to a work-item with gaps between them;
    a carry without a fold is refused."""
    rows, cols = 13, 101
    x = np.random.default_rng(37).integers(-20, 21, (rows, cols)).astype(np.int32)
    fold = """
const long at = row * SIZE_col;
if (mdh_carry->row != row + 1 || mdh_carry->col > col) {  /* another row, or a block behind the sum: start over */
    mdh_carry->row = row + 1;
    mdh_carry->col = 0;
    mdh_carry->sum = 0;
}
for (; mdh_carry->col < col; ++mdh_carry->col) mdh_carry->sum += x[at + mdh_carry->col];
long s = mdh_carry->sum;
for (idx_t l = 0; l < mdh_vn; ++l) {
    s += x[at + col + l];
    atom_t a;
    a.value = (double)s;
    a.index = (int)(col + l);
    acc = mdh_combine(acc, a);
}"""
    base = dict(name="vec_running", dims=["row", "col"], combine=[mdh.Concat(), mdh.Reduce(mdh.ARGMAX)],
                atom=mdh.Struct("best_t", (("value", "double"), ("index", "int"))),
                scalar="long s = 0;\nfor (idx_t c = 0; c <= col; ++c) s += x[row * SIZE_col + c];\n"
                       "out.value = (double)s;\nout.index = (int)col;",
                inputs=[mdh.Input("x", "int", ("*",), gather=True)])
    carry = "long row;  /* 1 + the row summed */\nlong col;  /* the columns summed: 0 .. col - 1 */\nlong sum;"
    desc = mdh.Description(**base, vector=mdh.Vector("col", reach="SIZE_col + 8", fold=fold, carry=carry))
    assert "mdh_carry_t" in generate(desc) and "mdh_carry" not in generate(mdh.Description(**base))
    want = np.cumsum(x, axis=1).argmax(axis=1)
    sizes = {"row": rows, "col": cols}
    for vec in (1, 2, 4, 8):
        for wg, wi in ((1, 1), (3, 5), (2, 16)):
            cfg = {"NUM_WG_row": 2, "NUM_WI_row": 1, "NUM_WG_col": wg, "NUM_WI_col": wi, "NUM_WI_COMBINE": 4,
                   "VEC": vec}
            got = mdh.Computation(desc, device, cfg)(sizes, x=x.reshape(-1))
            np.testing.assert_array_equal(got["index"], want, err_msg=str(cfg))
    with pytest.raises(mdh.DescriptionError, match="carry .* needs a fold"):
        mdh.Description(**base, vector=mdh.Vector("col", "out[0] = 0;", carry=carry))


def test_vector_form_is_declared_and_checked(device):
    """A vector form belongs to a reduced dimension of a description whose points load nothing of their own; its
    widths are VEC's values, a configuration without VEC (stored before the vector form existed) builds the device's
    default, and another width is refused."""
    sq, _ = _vector_descriptions(None)
    assert "VEC" in sq.parameter_names() and mdh.parts.is_generator_parameter("VEC")
    cfg = sq.default_config(device, {"row": 4, "col": 9})
    del cfg["VEC"]
    sq.check_config(cfg, device)
    assert mdh.Computation(sq, device, cfg).config["VEC"] == sq.vec_default(device)
    with pytest.raises(mdh.ConfigError, match="VEC must be 1 or one of"):
        sq.check_config({**cfg, "VEC": 3}, device)
    base = dict(name="v", dims=["i", "j"], combine=[mdh.Concat(), mdh.Reduce(mdh.SUM)], atom="long",
                scalar="out = x[i];", inputs=[mdh.Input("x", "int", ("*",), gather=True)])
    scan = dict(base, combine=[mdh.Concat(), mdh.Scan(mdh.SUM)])
    with pytest.raises(mdh.DescriptionError, match="descriptions that concatenate or reduce"):
        mdh.Description(**scan, vector=mdh.Vector("i", "out[0] = 0;"))
    along_i = mdh.Description(**base, vector=mdh.Vector("i", "out[0] = 0;"))
    with pytest.raises(mdh.ConfigError, match="one work-item along the reduced dimensions"):
        along_i.check_config({**along_i.default_config(device, {"i": 64, "j": 64}), "NUM_WI_j": 2, "VEC": 2}, device)
    concat = dict(base, combine=[mdh.Concat(), mdh.Concat()])
    with pytest.raises(mdh.DescriptionError, match="fold is for a reduced dimension"):
        mdh.Description(**concat, vector=mdh.Vector("j", fold="acc = 0;"))
    for neither_or_both in (mdh.Vector("j"), mdh.Vector("j", "out[0] = 0;", fold="acc = 0;")):
        with pytest.raises(mdh.DescriptionError, match="one of the two"):
            mdh.Description(**base, vector=neither_or_both)
    with pytest.raises(mdh.DescriptionError, match="widths must be among 2, 4 and 8"):
        mdh.Description(**base, vector=mdh.Vector("j", "out[0] = 0;", widths=(16,)))
    with pytest.raises(mdh.DescriptionError, match="unknown name"):
        mdh.Description(**base, vector=mdh.Vector("j", "out[0] = 0;", reach="SIZE_j + pad"))
    with pytest.raises(mdh.DescriptionError, match="accumulate"):
        mdh.Description(**base, accumulate="acc += x[i];", vector=mdh.Vector("j", "out[0] = 0;"))
    with pytest.raises(mdh.DescriptionError, match="inputs loaded at the point"):
        mdh.Description(**{**base, "inputs": [mdh.Input("x", "int", ("i", "j"))]},
                        vector=mdh.Vector("j", "out[0] = 0;"))


@pytest.mark.parametrize("dim", ["row", "col"])
def test_vector_form_of_a_concatenated_dimension(device, dim):
    """A vector form along a concatenated dimension: the work-items share blocks of VEC points, each block computed in
    vector form and written to its points' places (the vectorised dimension first or last of the output), the last,
    partial block point by point; under every width, strided and chunked shares, one and several work-groups."""
    rows, cols = 37, 11
    x = np.random.default_rng(31).integers(-1000, 1000, (rows, cols)).astype(np.int32)
    step = "SIZE_col" if dim == "row" else "1"  # between a block's points in x
    desc = mdh.Description(
        "vec_affine", ["row", "col"], [mdh.Concat(), mdh.Concat()], "long",
        "out = 3 * (long)x[row * SIZE_col + col] + row;", inputs=[mdh.Input("x", "int", ("*",), gather=True)],
        chunked=True, vector=mdh.Vector(dim, f"""
union {{ long s[VEC]; MDH_VT(long) v; }} t;
for (int s = 0; s < VEC; ++s) t.s[s] = x[row * SIZE_col + col + s * {step}];
const MDH_VT(long) v = 3 * t.v + row{" + mdh_convert_long_int(MDH_IOTA)" if dim == "row" else ""};
long o[VEC];
mdh_vstore_long(v, o);
for (int s = 0; s < VEC; ++s) out[s] = o[s];"""))
    want = 3 * x.astype(np.int64) + np.arange(rows)[:, None]
    for vec in (1, 2, 4, 8):
        for chunked in (0, 1):
            for wg, wi in ((1, 1), (3, 2), (2, 8)):
                cfg = {"NUM_WG_row": wg, "NUM_WI_row": wi, "NUM_WG_col": 2, "NUM_WI_col": 1, "CHUNKED": chunked,
                       "VEC": vec}
                got = mdh.Computation(desc, device, cfg)({"row": rows, "col": cols}, x=x.reshape(-1))
                np.testing.assert_array_equal(got, want, err_msg=str(cfg))


def test_vector_form_of_a_concatenated_dimension_that_reduces(device):
    """Along a concatenated dimension of a description that also reduces: a work-item's block of VEC rows, an
    accumulator each, every step of the reduced dimension a whole block's atoms; each row folds what VEC=1 folds in
    the same order (float sums, so any other order shows), the last, partial block point by point; under every width,
    strided and chunked shares, one and several work-groups along the reduced dimension (partials and the combine)."""
    rows, cols, k = 37, 3, 29
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((rows, cols, k)) * 10.0 ** rng.integers(-8, 8, (rows, cols, k))).astype(np.float64)
    desc = mdh.Description(
        "vec_rows_sum", ["row", "col", "k"], [mdh.Concat(), mdh.Concat(), mdh.Reduce(mdh.SUM)], "double",
        "out = x[(row * SIZE_col + col) * SIZE_k + k];", inputs=[mdh.Input("x", "double", ("*",), gather=True)],
        chunked=True, vector=mdh.Vector("row", """
for (int s = 0; s < VEC; ++s) out[s] = x[((row + s) * SIZE_col + col) * SIZE_k + k];"""))
    seq = np.zeros((rows, cols))
    for j in range(k):  # the fold's order with one work-group along k
        seq = seq + x[:, :, j]
    for wg_k in (1, 3):  # several work-groups along k: another order (strided or chunked), the same at every width
        for chunked in (0, 1):
            for wg, wi in ((1, 1), (3, 2), (2, 8)):
                cfg = {"NUM_WG_row": wg, "NUM_WI_row": wi, "NUM_WG_col": 2, "NUM_WI_col": 1, "NUM_WG_k": wg_k,
                       "NUM_WI_k": 1, "NUM_WI_COMBINE": 4, "CHUNKED": chunked}
                plain = mdh.Computation(desc, device, {**cfg, "VEC": 1})({"row": rows, "col": cols, "k": k},
                                                                        x=x.reshape(-1))
                # Intel's CPU compiler vectorises a loop of plain adds (1-ulp differences from the sequential sum at
                # VEC=1 already, with the generator's plain reduction too): there the widths agree to rounding only
                ordered = device.runtime != "intel"
                assert plain.tobytes() == seq.tobytes() or wg_k > 1 or not ordered, cfg
                for vec in (2, 4, 8):
                    got = mdh.Computation(desc, device, {**cfg, "VEC": vec})({"row": rows, "col": cols, "k": k},
                                                                            x=x.reshape(-1))
                    if ordered:
                        assert got.tobytes() == plain.tobytes(), {**cfg, "VEC": vec}
                    else:
                        np.testing.assert_allclose(got, seq, rtol=1e-15, atol=1e-7, err_msg=str({**cfg, "VEC": vec}))


def test_bound_launches_choose_the_index_width_by_points_not_by_work_groups(device):
    """A bound launch takes the 64-bit build where a point index (plus a stride of every launched work-item), an input
    loaded at the point or a lane of the partials passes 2^31 - 1, as :meth:`Computation._index64` does: not where
    points times the work-groups along a reduced dimension do (the learner's 10.5M-row histograms over 512 groups ran
    64-bit programs that no tune had timed)."""
    import pyopencl as cl

    from mdhom.components.row_histogram import histogram_rows

    desc = histogram_rows(64, 28, 1, False, True)
    comp = mdh.build_within_limits(desc, device, {"NUM_WG_pos": 512, "NUM_WI_pos": 1, "NUM_WG_node": 1,
                                                  "NUM_WI_node": 1, "PARTIALS_LOCAL": 0, "FLAT": 0})
    buf = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, 64)
    bound = comp.bind(buf, bins=buf, gh=buf, slot_begin=buf, slot_count=buf, ridx=buf)
    assert not bound.index64([1, 10_500_000], 1)
    assert bound.index64([1, 2**31 - 100], 1)  # a stride of 512 past the bound wraps
    assert bound.index64([2**22, 1], 2**22)  # 512 partials of 2^22 nodes, 3584 lanes each
    pairs = mdh.Description("pairs", ["i"], [mdh.Concat()], "int", "out = x;",
                            inputs=[mdh.Input("x", "int", ("i", 2), index="2 * i")])
    bound = mdh.build_within_limits(pairs, device, {"NUM_WG_i": 1, "NUM_WI_i": 1}).bind(buf, x=buf)
    assert not bound.index64([2**29], 2**29) and bound.index64([2**30 + 1], 2**30 + 1)  # two ints a point
