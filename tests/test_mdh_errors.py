"""Bad descriptions, configurations and inputs get clear errors that name what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

import mdhom
from mdhom import mdh
from mdhom.mdh import examples


def _sum(scalar="out = x;", index=None, atom="float", dtype="float"):
    return mdh.Description("s", ["i", "j"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], atom, scalar,
                           inputs=[mdh.Input("x", dtype, ("i", "j"), index=index)])


def test_unknown_dimension_in_index_expression():
    with pytest.raises(mdh.DescriptionError, match=r"unknown name\(s\) k.*dimensions are i, j"):
        _sum(index="i * SIZE_j + k")


def test_shape_entry_must_be_a_dimension():
    with pytest.raises(mdh.DescriptionError, match="not a dimension"):
        mdh.Description("s", ["i"], [mdh.Reduce(mdh.SUM)], "float", "out = x;", inputs=[mdh.Input("x", "float", ("n",))])


def test_any_extent_only_for_gathered_inputs():
    with pytest.raises(mdh.DescriptionError, match="only gathered inputs"):
        mdh.Description("s", ["i"], [mdh.Reduce(mdh.SUM)], "float", "out = 1;", inputs=[mdh.Input("x", "float", ("*",))])


def test_only_gathered_inputs_are_written():
    with pytest.raises(mdh.DescriptionError, match="only gathered inputs may be"):
        mdh.Description("s", ["i"], [mdh.Concat()], "float", "out = 1;",
                        inputs=[mdh.Input("x", "float", ("i",), writes=True)])


def test_unsupported_operator_mix_and_counts():
    with pytest.raises(mdh.DescriptionError, match="2 dimensions but 1 combine"):
        mdh.Description("s", ["i", "j"], [mdh.Concat()], "float", "out = 1;")
    with pytest.raises(mdh.DescriptionError, match="scan and a reduction"):
        mdh.Description("s", ["i", "j"], [mdh.Scan(mdh.SUM), mdh.Reduce(mdh.SUM)], "float", "out = 1;")
    with pytest.raises(mdh.DescriptionError, match="at most one prefix-scan"):
        mdh.Description("s", ["i", "j"], [mdh.Scan(mdh.SUM), mdh.Scan(mdh.SUM)], "float", "out = 1;")
    with pytest.raises(TypeError, match="unknown OpenCL scalar type"):
        mdh.Description("s", ["i"], [mdh.Reduce(mdh.SUM)], "float16", "out = 1;")
    with pytest.raises(mdh.DescriptionError, match="no combine operator"):
        mdh.Operator.named("no_such_op")


def test_scatter_add_needs_one_32_bit_integer_and_no_reduction():
    with pytest.raises(mdh.DescriptionError, match="one int or uint"):
        mdh.Description("s", ["i"], [mdh.Concat()], "double", "out = x;", inputs=[mdh.Input("x", "double", ("i",))],
                        scatter="add")
    with pytest.raises(mdh.DescriptionError, match="concatenated dimensions only"):
        mdh.Description("s", ["i"], [mdh.Reduce(mdh.SUM)], "int", "out = x;", inputs=[mdh.Input("x", "int", ("i",))],
                        scatter="add")
    with pytest.raises(mdh.DescriptionError, match="scatter must be"):
        mdh.Description("s", ["i"], [mdh.Concat()], "int", "out = x;", inputs=[mdh.Input("x", "int", ("i",))],
                        scatter="max")


def test_input_dtype_mismatch(device):
    comp = mdh.Computation(_sum(), device)
    with pytest.raises(TypeError, match=r"input 'x' must have dtype float32 \(float\), got float64"):
        comp(x=np.ones((3, 4)))
    with pytest.raises(TypeError, match="numpy or pyopencl array"):
        comp(x=[[1.0]])


def test_wrong_shape_and_arguments(device):
    comp = mdh.Computation(examples.HISTOGRAM, device)
    rng = np.random.default_rng(0)
    bins = rng.integers(0, 16, (10, 3)).astype(np.uint8)
    with pytest.raises(ValueError, match="axis 0 has extent 9, but dimension 'row' has size 10"):
        comp(bins=bins, g=np.ones(9), h=np.ones(10))
    with pytest.raises(ValueError, match="must have 1 dimension"):
        comp(bins=bins, g=np.ones((10, 1)), h=np.ones(10))
    # a gathered input longer than a size given: an error along an output dimension (results left out), allowed along
    # a reduced one only (a level's nodes in one buffer of every row, as the tree learner launches its histograms)
    solve = mdh.Computation(examples.PACKED_SOLVE, device)
    k = examples.SOLVE_K
    with pytest.raises(ValueError, match="axis 0 has extent 10, but dimension 'sys' has size 3"):
        solve.bind_sizes({"a": np.ones((10, k * (k + 1) // 2)), "b": np.ones((10, k))}, {"sys": 3})
    with pytest.raises(TypeError, match="missing argument"):
        comp(bins=bins, g=np.ones(10))
    with pytest.raises(TypeError, match="unexpected argument"):
        comp(bins=bins, g=np.ones(10), h=np.ones(10), w=np.ones(10))
    with pytest.raises(ValueError, match="unknown dimension"):
        comp(sizes={"zz": 3}, bins=bins, g=np.ones(10), h=np.ones(10))


def test_build_error_shows_log_and_source_lines(device):
    with pytest.raises(mdh.BuildError) as info:  # building happens when the Computation is made
        mdh.Computation(_sum(scalar="out = x +;"), device)
    msg = str(info.value)
    assert "compiler log" in msg and device.key in msg
    assert ">>" in msg and "out = x +;" in msg  # the failing generated line is quoted


def test_config_beyond_work_group_limit(device):
    too_big = device.max_work_group_size * 2
    with pytest.raises(mdh.ConfigError, match="work-group size .* exceeds the device limit"):
        mdh.Computation(examples.ROW_SUM, device, {"NUM_WI_j": too_big})


def test_config_beyond_local_memory(device):
    big = mdh.Description("big", ["row", "f"], [mdh.Reduce(mdh.SUM), mdh.Concat()],
                          mdh.Array(mdh.Scalar("double"), 4096), "out.v[0] = x;",
                          inputs=[mdh.Input("x", "double", ("row", "f"))])
    wi = min(device.max_work_group_size, 256)
    with pytest.raises(mdh.ConfigError, match="bytes of local memory"):
        mdh.Computation(big, device, {"NUM_WI_row": wi})


def test_bad_config_values(device):
    with pytest.raises(mdh.ConfigError, match="unknown configuration parameter"):
        mdh.Computation(examples.ROW_SUM, device, {"NUM_WI_q": 2})
    with pytest.raises(mdh.ConfigError, match="must be at least 1"):
        mdh.Computation(examples.ROW_SUM, device, {"NUM_WG_i": 0})


def test_unknown_device():
    with pytest.raises(ValueError, match="unknown device"):
        mdh.Computation(examples.ROW_SUM, "no-such-device")
    assert mdhom.get_device("auto")  # still resolvable afterwards


def test_build_within_limits_shrinks_to_the_kernel_limit(device, monkeypatch):
    """A configuration the compiled kernel refuses is shrunk until it runs (the limit is simulated)."""
    from mdhom.mdh import computation

    real = computation.Computation.kernel

    def limited(self, which, index64=False):
        wanted = self.work_group_size if which == "main" else self.config["NUM_WI_COMBINE"]
        if wanted > 16:
            raise mdh.KernelLimitError("simulated", which, 16, wanted)
        return real(self, which, index64)

    monkeypatch.setattr(computation.Computation, "kernel", limited)
    comp = mdh.build_within_limits(examples.ROW_SUM, device, {"NUM_WI_i": 4, "NUM_WI_j": 32, "NUM_WI_COMBINE": 64,
                                                              "NUM_WG_j": 2})
    assert comp.work_group_size <= 16 and comp.config["NUM_WI_COMBINE"] <= 16
    x = np.random.default_rng(0).standard_normal((5, 77))
    np.testing.assert_allclose(comp(x=x), x.sum(1), rtol=1e-12)


def test_scratch_needs_an_int_length_parameter_and_no_scan():
    def desc(params, combine=None):
        return mdh.Description("s", ["i"], [combine or mdh.Concat()], "double", "work[0] = 1.0; out = work[0];", params=params,
                               scratch=mdh.Scratch("work", "double", "n"))
    with pytest.raises(mdh.DescriptionError, match="must name an int parameter"):
        desc([])
    with pytest.raises(mdh.DescriptionError, match="must name an int parameter"):
        desc([mdh.Param("n", "double")])
    with pytest.raises(mdh.DescriptionError, match="scanned dimension"):
        desc([mdh.Param("n", "int")], mdh.Scan(mdh.SUM))


def test_scratch_beyond_device_memory_is_refused_before_allocating(device):
    case = {c.name: c for c in examples.all_cases()}["packed_solve"].prepare(np.random.default_rng(0))
    comp = mdh.Computation(case.description, device, {"NUM_WG_sys": 4, "NUM_WI_sys": 8})
    with pytest.raises(mdh.ConfigError, match="scratch of .* needs"):
        comp(**{**case.inputs, "work_len": 2**40})


def test_private_accumulators_beyond_a_cpu_threads_stack_are_refused(device):
    """A CPU runtime keeps a work-group's private accumulators on one thread's stack: 256 work-items a group of
    57 KB whole-row histograms (256 bins, 28 features, int32 pairs) crashed PoCL with SIGSEGV and took `mdhom tune`
    with it; such a configuration is refused before it is built, one of 16 work-items is not."""
    if device.type != "cpu":
        pytest.skip(f"{device.key} is not a CPU: its work-items' private memory is not one thread's stack")
    from mdhom.components.row_histogram import histogram_rows

    desc = histogram_rows(256, 28)
    cfg = {"NUM_WG_node": 1, "NUM_WI_node": 1, "NUM_WG_pos": 16, "NUM_WI_pos": 256, "PARTIALS_LOCAL": 0,
           "FLAT": 1, "CHUNKED": 1, "PACKED": 1}
    with pytest.raises(mdh.ConfigError, match=r"256 work-items a group .* 57344 bytes each .* thread's stack"):
        mdh.Computation(desc, device, cfg)
    assert mdh.Computation(desc, device, {**cfg, "NUM_WI_pos": 16}).work_group_size == 16
    # a stored or heuristic configuration is shrunk to fit instead (4 MiB: 64 work-items of 57 KB)
    assert mdh.build_within_limits(desc, device, cfg).work_group_size == 64


_PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'few_main' for 'sm_90'
ptxas info    : Function properties for few_main
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'many_main' for 'sm_90'
ptxas info    : Function properties for many_main
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 72 registers, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'most_main' for 'sm_90'
ptxas info    : Used 255 registers, 380 bytes cmem[0]
"""


def test_nvidia_work_group_limit_comes_from_the_registers():
    """NVIDIA's driver reports 256 work-items for every kernel; the limit is the one ptxas's registers set (65536
    a block in 256-register units a warp), and the driver's word wherever the log has no report."""
    from types import SimpleNamespace

    from mdhom.mdh.build import nvidia_registers, work_group_limit

    assert nvidia_registers(_PTXAS_LOG) == {"few_main": 30, "many_main": 72, "most_main": 255}
    assert nvidia_registers("") == {}
    cl_device = SimpleNamespace(registers_per_block_nv=65536, warp_size_nv=32)
    program = SimpleNamespace(get_build_info=lambda dev, what: _PTXAS_LOG)
    kernel = SimpleNamespace(get_work_group_info=lambda what, dev: 256)

    def limit(runtime, name, max_wg=1024):
        device = SimpleNamespace(runtime=runtime, cl_device=cl_device, max_work_group_size=max_wg)
        return work_group_limit(device, program, name, kernel)

    assert limit("nvidia", "few_main") == 1024  # 30 -> 32 registers: 64 warps, held to the device's 1024
    assert limit("nvidia", "few_main", max_wg=512) == 512
    assert limit("nvidia", "many_main") == 896  # 72 registers: 2304 a warp, 28 warps
    assert limit("nvidia", "most_main") == 256
    assert limit("nvidia", "unreported_main") == 256  # not in the log: the driver's word
    assert limit("pocl", "few_main") == 256  # other runtimes: the driver's word


def test_nvidia_runs_the_work_groups_its_registers_allow(device):
    """On NVIDIA a generated kernel of few registers runs 1024 work-items a group, beyond the 256 its driver
    reports, with the numpy reference's result."""
    if device.runtime != "nvidia":
        pytest.skip(f"{device.key} is not NVIDIA's runtime: its driver's limit is the limit")
    comp = mdh.Computation(examples.ROW_SUM, device, {"NUM_WI_i": 1, "NUM_WI_j": 1024, "NUM_WG_j": 2,
                                                      "NUM_WI_COMBINE": 2})
    assert comp.work_group_size == 1024
    x = np.random.default_rng(0).standard_normal((5, 3001))
    np.testing.assert_allclose(comp(x=x), x.sum(1), rtol=1e-12)


def test_pocl_builds_print_nothing(device, capfd, monkeypatch):
    """A fresh PoCL build of the CPUs' vector split score (double8 through functions: -Wpsabi notes on hosts without
    AVX-512) writes nothing to the process's stderr; it had printed "33 warnings generated." in a user's first fit.
    A define of its own makes PoCL compile it anew rather than load its cached build."""
    import uuid

    from mdhom.components.split import split_score
    from mdhom.mdh.build import build_program

    if device.runtime != "pocl":
        pytest.skip(f"{device.key} is not PoCL: its compiler's messages stay in the build log")
    comp = mdh.Computation(split_score(64, 1, vector=True), device, None,
                           {"node": 1, "feat": 28, "bin": 62, "dir": 2})
    capfd.readouterr()
    build_program(device, comp.source, comp.options(False) + [f"-DMDH_TEST_NONCE={uuid.uuid4().int % 10**9}"])
    assert "warning" not in capfd.readouterr().err
    # pyopencl's switch for showing build logs keeps the messages, read as pyopencl reads it ("0": off)
    for value, quiet in (("0", True), ("false", True), ("1", False)):
        monkeypatch.setenv("PYOPENCL_COMPILER_OUTPUT", value)
        assert ("-w" in comp.options(False)) == quiet, value
