"""Each tree kernel against its numpy reference, on every device, at awkward sizes, under the default
configuration and random valid ones (a configuration must never change the result beyond rounding)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pyopencl.array as cl_array
import pytest
from device_marks import runtime_faults

from mdhom.components import gradients as gr
from mdhom.components import histogram as hg
from mdhom.components import lanes as ln
from mdhom.components import leaf_rows as lr
from mdhom.components import lookahead, row_copy
from mdhom.components import partition_kernels as pt
from mdhom.components import predictor as pr
from mdhom.components import quantize as qz
from mdhom.components import row_histogram as rh
from mdhom.components import row_histogram_real as rhr
from mdhom.components import scores as sc
from mdhom.components import split as sp
from mdhom.components import split_result as spr
from mdhom.components import tables as tb
from mdhom.components.quantize import QUANT_BITS
from mdhom.components.workspace import opaque, view
from mdhom.learn.binning import bin_dtype
from mdhom.mdh import Computation, ConfigError, build_within_limits
from mdhom.trees.backend import SplitParams

N_CONFIGS = 2  # random configurations per kernel and device, besides the default


def configs(desc, device, sizes, seed, n=N_CONFIGS, max_groups=4096):
    """The default configuration, then ``n`` random valid points of the description's parameter space."""
    rng = np.random.default_rng(seed)
    space = desc.parameter_space(device, sizes)
    out = [desc.default_config(device, sizes)]
    for _ in range(200):
        if len(out) > n:
            break
        cfg = {p.name: int(rng.choice(p.values)) for p in space}
        groups = math.prod(v for k, v in cfg.items() if k.startswith("NUM_WG_"))
        if groups > max_groups:
            continue
        try:
            desc.check_config(cfg, device)
        except ConfigError:
            continue
        out.append(cfg)
    assert len(out) == n + 1, "could not sample valid configurations"
    return out


def run(desc, device, cfg, sizes, **args):
    return run_writing(desc, device, cfg, sizes, **args)[0]


def run_writing(desc, device, cfg, sizes, **args):
    """:func:`run`, and what the kernel left in its inputs (by name: the written ones' bytes)."""
    q = device.queue
    dev_args = {k: cl_array.to_device(q, np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
                for k, v in args.items()}
    whole = {}
    for k, v in list(dev_args.items()):
        if isinstance(v, tuple) and v[0] == "o":  # ("o", array, dtype): the whole buffer behind a (1,) view
            whole[k] = cl_array.to_device(q, np.ascontiguousarray(v[1]))
            dev_args[k] = opaque(whole[k], v[2])
        elif isinstance(v, tuple):  # ("v", array, shape): the whole buffer behind a view of that shape
            dev_args[k] = view(cl_array.to_device(q, np.ascontiguousarray(v[1])), v[2], v[1].dtype)
    # a point the compiled kernel cannot run (registers) is shrunk to fit, as the backend does
    out = build_within_limits(desc, device, cfg).enqueue(sizes, queue=q, **dev_args).out.get()
    return out, {k: whole[k].get() for k in (i.name for i in desc.inputs if i.writes)}


def grouped_rows(rng, n_rows, counts):
    """A ridx with consecutive ranges of the given counts (rows ascending in each), and their begins."""
    perm = rng.permutation(n_rows).astype(np.int32)
    begin = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
    for b, c in zip(begin, counts, strict=True):
        perm[b:b + c] = np.sort(perm[b:b + c])
    return perm, begin, np.asarray(counts, np.int32)


# ------------------------------------------------------------------------------------------------ histogram
@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
def test_histogram(device, feature_major):
    rng = np.random.default_rng(1)
    n_rows, n_feat, n_bins, n_out = 1031, 7, 17, 2
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(np.uint8)
    grad, hess = rng.standard_normal((n_rows, n_out)), rng.random((n_rows, n_out))
    counts = [257, 0, 129, 1, 513]  # 2^k +- 1, an empty node, a single row; 131 rows belong to no listed node
    ridx, begin, count = grouped_rows(rng, n_rows, counts)
    want = hg.histogram_reference(bins, grad, hess, ridx, begin, count, n_bins)
    desc = hg.histogram(n_bins, "double", feature_major)
    sizes = {"node": len(counts), "feat": n_feat, "output": n_out, "pos": max(counts)}
    ordered = bins[ridx]  # the kernel reads bins and (g, h) in position order
    stored = np.ascontiguousarray(ordered.T if feature_major else ordered)
    gh = np.stack([grad[ridx], hess[ridx]], axis=-1)  # (pos, output, 2)
    for cfg in configs(desc, device, sizes, seed=2):
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, n_rows=n_rows,
                  bins=("v", stored, (n_feat, max(counts)) if feature_major else (max(counts), n_feat)),
                  gh=("v", gh, (max(counts), n_out, 2)))
        got = np.stack([got["g"], got["h"]], axis=-1)  # (node, feat, output, bin, 2)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str(cfg))


def test_gather_gh(device):
    rng = np.random.default_rng(17)
    n_rows, n_out = 257, 3
    grad, hess = rng.standard_normal((n_rows, n_out)), rng.random((n_rows, n_out))
    ridx = rng.permutation(n_rows).astype(np.int32)
    desc = gr.gather_gh()
    sizes = {"pos": n_rows, "output": n_out}
    for cfg in configs(desc, device, sizes, seed=18):
        got = run(desc, device, cfg, sizes, ridx=ridx, grad=("o", grad, None), hess=("o", hess, None))
        np.testing.assert_array_equal(got["g"], grad[ridx])
        np.testing.assert_array_equal(got["h"], hess[ridx])


def test_copy_words(device):
    """The copy kernel (a tree's reset of the rows on CPUs, the benches' copy reference): every word, bit for bit."""
    src = np.random.default_rng(19).integers(0, 2**63, 10007, dtype=np.uint64)
    src[:3] = [0, 2**64 - 1, 0x7FF8000000000001]  # a NaN's bits stay bits
    desc = row_copy.copy_words()
    for cfg in configs(desc, device, {"i": src.size}, seed=20):
        np.testing.assert_array_equal(run(desc, device, cfg, {"i": src.size}, src=src), src)


# ------------------------------------------------------------------------------------------------ subtraction
def test_hist_subtract(device):
    rng = np.random.default_rng(3)
    n = 2 * 3 * 5 * 17 * 2 + 1
    parent, child = rng.standard_normal(n), rng.standard_normal(n)
    desc = hg.hist_subtract("double")
    for cfg in configs(desc, device, {"i": n}, seed=4):
        got = run(desc, device, cfg, {"i": n}, parent=parent, child=child)
        np.testing.assert_array_equal(got, parent - child)


# ------------------------------------------------------------------------------------------------ split scan
def test_split_scan(device):
    rng = np.random.default_rng(5)
    n_nodes, n_feat, n_out, n_bins = 3, 5, 2, 33
    hist = rng.standard_normal((n_nodes, n_feat, n_out, n_bins, 2))
    want = sp.split_scan_reference(hist)
    desc = sp.split_scan(n_bins)
    sizes = {"node": n_nodes, "feat": n_feat, "output": n_out, "bin": n_bins}
    cfgs = configs(desc, device, sizes, seed=6)
    seq = dict(cfgs[0], NUM_WI_bin=1, NUM_WG_bin=1)  # the backend's exact (sequential) form
    for cfg in [seq, *cfgs]:
        got = run(desc, device, cfg, sizes, hist=hist)
        got = np.stack([got["g"], got["h"]], axis=-1)
        if cfg is seq:
            np.testing.assert_array_equal(got, want)  # same order as np.cumsum: bit-identical
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str(cfg))


@pytest.mark.parametrize("n_feat, n_out, n_bins", [(28, 1, 256), (28, 1, 64), (5, 2, 17), (1, 1, 3), (33, 1, 2)])
def test_split_scan_gpu_rule_is_exact(request, device, n_feat, n_out, n_bins):
    """The GPUs' integer scan along bins (``scan_heuristic``: a run of bins a work-item, the features over groups),
    as a GPU builds it, on every device: int32 sums equal np.cumsum's in any order, so bit for bit. Shapes: the default
    256 bins, 64, a few bins over several outputs, one feature of 3 bins, 2 bins (no candidate). Launched for 3 nodes and
    for 70, past the grid's 64 groups of nodes (a level launched on the one-node build). The H100 host's PoCL 5.0 gave
    other sums for this GPU configuration (28 features, 64 bins; a CPU's fits never build it), which Oclgrind runs clean
    (no race, no barrier divergence) and exact: the runtime's known fault (``runtime_faults``)."""
    import dataclasses

    runtime_faults(request, device)

    rng = np.random.default_rng(61)
    gpu = dataclasses.replace(device, type="gpu", compute_units=132)
    desc = sp.split_scan(n_bins, "quantized")
    built = {"node": 1, "feat": n_feat, "output": n_out, "bin": n_bins}
    cfg = sp.SCAN.heuristic(desc, gpu, built)
    assert cfg["NUM_WI_bin"] == min(64, max(1, n_bins // 4)) and cfg["SCAN_TILED"] == 0
    for n_nodes in (3, 70):
        hist = rng.integers(-2**20, 2**20, (n_nodes, n_feat, n_out, n_bins, 2)).astype(np.int32)
        hist[..., 1] = np.abs(hist[..., 1])
        sizes = {**built, "node": n_nodes}
        got = run(desc, device, cfg, sizes, hist=hist)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), sp.split_scan_reference(hist),
                                      err_msg=str(cfg))


# ------------------------------------------------------------------------------------------------ split score
def split_inputs(rng, n_nodes, n_feat, n_out, n_bins):
    """Histograms with integer gradients (so many gains tie exactly), empty bins and empty missing bins."""
    g = rng.integers(-4, 5, size=(n_nodes, n_feat, n_out, n_bins)).astype(np.float64)
    h = rng.integers(0, 4, size=(n_nodes, n_feat, n_out, n_bins)).astype(np.float64)
    empty = rng.random((n_nodes, n_feat, 1, n_bins)) < 0.3
    g, h = np.where(empty, 0.0, g), np.where(empty, 0.0, h)
    hist = np.stack([g, h], axis=-1)
    hist[0] = 0.0  # a node with no rows: no valid split
    return hist


@pytest.mark.parametrize("params", [
    SplitParams(1.0, 0.0, 0.0, 1.0), SplitParams(0.5, 0.75, 0.25, 0.0), SplitParams(2.0, 0.0, 0.0, 1e9),
], ids=["plain", "l1-gamma", "min-child-weight"])
def test_split_score_and_sums(request, device, params):
    runtime_faults(request, device)
    rng = np.random.default_rng(7)
    n_nodes, n_feat, n_out, n_bins = 5, 7, 2, 17
    hist = split_inputs(rng, n_nodes, n_feat, n_out, n_bins)
    scan = sp.split_scan_reference(hist)
    mask = np.ones(n_feat, bool)
    mask[2] = False
    want = sp.split_reference(hist, mask, params)
    score, sums = sp.split_score(n_bins, n_out), spr.split_sums(n_bins, n_out)
    sizes = {"node": n_nodes, "feat": n_feat, "bin": n_bins - 2, "dir": 2}
    stride, _, rstride = spr.best_layout("double")
    sums_cfg = sums.default_config(device, {"node": n_nodes, "output": n_out})
    for cfg in configs(score, device, sizes, seed=8):
        best = run(score, device, cfg, sizes, scan=scan, hist=hist, feature_mask=mask.astype(np.uint8),
                   reg_lambda=params.reg_lambda, reg_alpha=params.reg_alpha,
                   min_split_gain=params.min_split_gain, min_child_weight=params.min_child_weight)
        finite = np.isfinite(want.gain)
        np.testing.assert_array_equal(np.isfinite(best["value"]), finite, err_msg=str(cfg))
        np.testing.assert_array_equal(best["value"][finite], want.gain[finite], err_msg=str(cfg))
        idx = best["index"][finite]
        n_cand = n_bins - 2
        np.testing.assert_array_equal(idx // (2 * n_cand), want.feature[finite], err_msg=str(cfg))
        np.testing.assert_array_equal((idx // 2) % n_cand, want.bin[finite], err_msg=str(cfg))
        np.testing.assert_array_equal(idx % 2 == 0, want.default_left[finite], err_msg=str(cfg))
        lr = run(sums, device, sums_cfg, {"node": n_nodes, "output": n_out}, scan=("o", scan, None),
                 hist=("o", hist, None), best=best.view(np.int32).reshape(n_nodes, stride),
                 best_value=("o", best.view(np.float64), None), n_feat=n_feat)
        assert rstride == 2
        np.testing.assert_array_equal(np.stack([lr["lg"], lr["lh"]], -1)[finite], want.left_sum[finite])
        np.testing.assert_array_equal(np.stack([lr["rg"], lr["rh"]], -1)[finite], want.right_sum[finite])
        # the packed result: the argmax repeated over outputs, and each node's total (feature 0's prefix)
        np.testing.assert_array_equal(lr["gain"], np.repeat(best["value"][:, None], n_out, axis=1))
        np.testing.assert_array_equal(lr["index"], np.repeat(best["index"][:, None], n_out, axis=1))
        np.testing.assert_array_equal(np.stack([lr["tg"], lr["th"]], -1), want.total)


@pytest.mark.parametrize("reg", [0.5, 0.0], ids=["regularised", "bare"])
@pytest.mark.parametrize("precision", ["double", "single", "quantized"])
@pytest.mark.parametrize("n_out, n_bins", [(1, 64), (2, 17), (1, 6), (1, 146)])
def test_split_score_vector_form_gives_the_scalar_bits(device, precision, n_out, n_bins, reg):
    """The split score's vector form (what CPUs build: VEC features a block, one a lane, a share's last block
    reaching past the features) finds every node's best split with the scalar form's gain bits and index, under
    every width and random configurations; features with and without missing values (default-right scored or
    skipped), L1 and min_child_weight active, ties among integer gradients."""
    rng = np.random.default_rng(61)
    n_nodes, n_feat = 9, 5
    hist = split_inputs(rng, n_nodes, n_feat, n_out, n_bins)
    # the last nodes' sums inexact in float64: their order decides the last bits (a compiler that vectorizes a sum of
    # doubles adds in another order: Intel's CPU compiler did, at 64 bins, and in launches of fewer nodes than its
    # work-item vectors hold at 146)
    frac = rng.random(hist[5:].shape) * (hist[5:] != 0)
    hist[5:] += frac * np.where(np.arange(2) == 1, 0.3, 0.7) if precision == "double" else 0.0
    hist[:, :2, :, -1, :] = 0.0  # two features without missing values
    if precision == "quantized":
        hist = (hist * 2**20).astype(np.int32)
    elif precision == "single":
        hist = hist.astype(np.float32)
    scan = sp.split_scan_reference(hist)
    mask = np.ones(n_feat, np.uint8)
    mask[3] = 0
    inv = np.ldexp(1.0, -np.full((n_out, 2), 20))
    # bare: no lambda and no least child weight, so an empty side's score is 0/0 or g^2/0 (the gain's finiteness)
    args = dict(scan=scan, hist=hist, feature_mask=mask, reg_lambda=reg, reg_alpha=0.25, min_split_gain=0.0,
                min_child_weight=reg)
    if precision == "quantized":
        args["inv_scale"] = ("o", inv, None)
    sizes = {"node": n_nodes, "feat": n_feat, "bin": n_bins - 2, "dir": 2}
    scalar, vector = sp.split_score(n_bins, n_out, precision), sp.split_score(n_bins, n_out, precision, vector=True)
    assert "VEC" not in scalar.parameter_names()
    if precision == "single":  # OpenCL's float division may round either way: no vector form (H200: an ulp apart)
        assert vector == scalar
        return
    assert "VEC" in vector.parameter_names()
    want = run(scalar, device, None, sizes, **args)
    assert np.isfinite(want["value"]).sum() >= n_nodes - 1
    # the vector form sums the bins itself, and reads the scan for features whose cat_mode is not 0 (here the plain
    # prefix sums: the same candidates either way)
    cats = np.array([0, 1, 0, 0, 2], np.uint8)
    cfgs = [{**vector.default_config(device, sizes), "VEC": v} for v in (1, 2, 4, 8)]
    for cfg in cfgs + configs(vector, device, sizes, seed=62)[1:]:
        got = run(vector, device, cfg, sizes, **args, cat_mode=cats)
        assert got["value"].tobytes() == want["value"].tobytes(), cfg
        np.testing.assert_array_equal(got["index"], want["index"], err_msg=str(cfg))
    # the packed result after it, summed from the histogram (for cat_mode 0), has the scan's bits
    plain, summed = spr.split_sums(n_bins, n_out, precision), spr.split_sums(n_bins, n_out, precision, summed=True)
    stride = spr.best_layout(precision)[0]
    sums_sizes = {"node": n_nodes, "output": n_out}
    both = dict(scan=("o", scan, None), hist=("o", hist, None), best=want.view(np.int32).reshape(n_nodes, stride),
                best_value=("o", want.view(np.float64), None), n_feat=n_feat, **{k: v for k, v in args.items()
                                                                                if k == "inv_scale"})
    lr = run(plain, device, plain.default_config(device, sums_sizes), sums_sizes, **both)
    for modes in (cats, np.zeros(n_feat, np.uint8)):
        got = run(summed, device, summed.default_config(device, sums_sizes), sums_sizes, **both,
                  cat_mode=("o", modes, None))
        for name in lr.dtype.names:  # (not the records' padding)
            assert got[name].tobytes() == lr[name].tobytes(), name


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_split_score_vector_form_blocks_of_features(device, precision):
    """The vector form's lanes are features. 13 features make a partial block at every width, the first and last
    masked; copies of one feature tie across lanes and blocks (the lowest feature wins, as in the scalar fold); the
    categorical features' scan is a permutation whose total was added in another order (other last bits than the
    histogram's sums: their lanes must read the scan); a node holds missing values only, and in another nothing may
    split (index 0 comes back). The scalar form's bits under every width, and configurations that split the bins
    and the directions over work-items and work-groups (blocks walked out of order, default-right alone)."""
    rng = np.random.default_rng(62)
    n_nodes, n_feat, n_out, n_bins = 5, 13, 2, 12
    hist = split_inputs(rng, n_nodes, n_feat, n_out, n_bins)
    if precision == "double":
        hist += rng.random(hist.shape) * (hist != 0) * np.where(np.arange(2) == 1, 0.3, 0.7)
    hist[:, :4, :, -1, :] = 0.0  # features without missing values
    hist[:, [5, 8, 11]] = hist[:, 4:5]  # ties across lanes and blocks
    hist[2, :, :, :-1, :] = 0.0  # missing values only
    hist[4] = 0.0  # no hessian: no candidate may split
    cats = np.zeros(n_feat, np.uint8)
    cats[[1, 6, 9]] = [2, 1, 2]
    hist[[0, 1, 3], 1, :, :, 0] *= 6  # the sorted feature 1 wins these nodes: its lane's sums decide them
    if precision == "quantized":
        hist = (hist * 2**20).astype(np.int32)
    scan = sp.split_scan_reference(hist)
    for f in np.nonzero(cats)[0]:  # the sorted features' candidates: another order, another total's bits
        order = list(rng.permutation(n_bins - 1)) + [n_bins - 1]
        part = hist[:, f][:, :, order]
        scan[:, f] = np.cumsum(part, axis=2, dtype=hist.dtype)
        scan[:, f, :, -1] = np.flip(part, axis=2).cumsum(axis=2, dtype=hist.dtype)[:, :, -1]
    mask = np.ones(n_feat, np.uint8)
    mask[[0, 12]] = 0
    args = dict(scan=scan, hist=hist, feature_mask=mask, reg_lambda=1.0, reg_alpha=0.25, min_split_gain=0.0,
                min_child_weight=0.5)
    if precision == "quantized":
        args["inv_scale"] = ("o", np.ldexp(1.0, -np.full((n_out, 2), 20)), None)
    sizes = {"node": n_nodes, "feat": n_feat, "bin": n_bins - 2, "dir": 2}
    scalar, vector = sp.split_score(n_bins, n_out, precision), sp.split_score(n_bins, n_out, precision, vector=True)
    want = run(scalar, device, None, sizes, **args)
    assert not np.isfinite(want["value"][4]) and want["index"][4] == 0
    assert np.isfinite(want["value"]).sum() >= 2  # (the node of missing values only has no split)
    assert (want["index"][[0, 1, 3]] // (2 * (n_bins - 2)) == 1).sum() >= 2
    base = vector.default_config(device, sizes)
    splits = ({"NUM_WI_dir": 2}, {"NUM_WG_dir": 2}, {"NUM_WG_bin": 4}, {"NUM_WI_bin": 2, "NUM_WI_dir": 2},
              {"NUM_WG_feat": 2, "NUM_WI_feat": 2})
    # a GPU's heuristic for the summed score (a layout's choice there): a node a work-group, two features a work-item
    gpu = dataclasses.replace(device, type="gpu", checker=False, compute_units=132)
    on_gpu = sp.score_heuristic(vector, gpu, sizes)
    assert on_gpu["NUM_WI_feat"] == 4 and on_gpu["NUM_WG_node"] == 4 and on_gpu["VEC"] == 2  # (VEC 1 walks again)
    for cfg in [{**base, "VEC": v} for v in (2, 4, 8)] + [{**base, "VEC": v, **e} for v in (2, 8) for e in splits] + [
            on_gpu]:
        got = run(vector, device, cfg, sizes, **args, cat_mode=cats)
        assert got["value"].tobytes() == want["value"].tobytes(), cfg
        np.testing.assert_array_equal(got["index"], want["index"], err_msg=str(cfg))


def test_vector_forms_call_no_vector_builtins():
    """The trees' vector forms move vectors with the generator's lane-by-lane helpers (mdh_vload_t, mdh_vstore_t,
    mdh_convert_to_from), never vloadn, vstoren or convert_ of a vector: PoCL 3.0 on a Zen 4 EPYC builds kernels
    for znver3 beside its AVX-512 built-ins and passes their 512-bit vectors wrongly (wrong split gains at VEC=4,
    an aborted build at VEC=8). A source check: the machine that shows the fault may not be the one running this."""
    import re

    from mdhom.mdh.computation import generate

    builtin = re.compile(r"\b(vload|vstore)(\d+|_half\d*)?\s*\(|\bconvert_[a-z]+\d+\w*\s*\(|MDH_CAT\((vload|vstore|convert_)")
    forms = [sp.split_score(b, k, p, vector=True) for p in ("double", "quantized") for b, k in ((64, 1), (9, 3))]
    forms += [gr.gradients(kind, "double", vector=True) for kind in ("logistic", "softmax")]
    for desc in forms:
        assert desc.vector is not None, desc.name
        source = generate(desc)
        assert "mdh_vstore_double" in source, desc.name
        assert not builtin.search(source), (desc.name, builtin.search(source))


# ------------------------------------------------------------------------------------------------ partition
@pytest.mark.parametrize("row_index", [False, True], ids=["moved", "indexed"])
@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
def test_partition(device, feature_major, row_index):
    """The go-left scan over the split nodes' rows end to end, the group partition's per-block counts and the block
    partition's walk (its counts and the rows it keeps), against the numpy partition; with bins in position order
    (rows moved) or in row order read through the row index. (The
    scatters that move each row to the position these counts give: test_row_scatters, and the byte-identical trees of
    test_trees_backend.)"""
    rng = np.random.default_rng(9)
    n_rows, n_feat, n_bins = 1031, 5, 9
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(np.uint8)
    counts = [100, 257, 0, 129, 1, 544]
    ridx, begin, count = grouped_rows(rng, n_rows, counts)
    node_ids = np.array([3, 4, 5, 6, 7, 8])
    row_node = np.zeros(n_rows, np.int32)
    for n, b, c in zip(node_ids, begin, count, strict=True):
        row_node[ridx[b:b + c]] = n
    split = [4, 1, 2, 3]  # nodes 7, 4, 5 (empty), 6 split, in this table order; 3 and 8 do not
    tab = tb.split_table(len(split))
    for j, i in enumerate(split):
        tab[j] = (node_ids[i], rng.integers(n_feat), rng.integers(n_bins - 2), i % 2, 20 + 2 * i, 21 + 2 * i,
                  begin[i], count[i], -1, 0, -1)
    tab["first"][1:] = np.cumsum(tab["count"][:-1])
    # the first split is categorical: its left bins in a table after the records (the buffer's bytes)
    cat_row = np.array([0, -1, -1, -1])
    tables = np.zeros((1, n_bins + 3), np.uint8)  # padded: the kernel sees the buffer as int32
    tables[0, :n_bins - 1] = rng.random(n_bins - 1) < 0.5
    raw = tb.with_left_tables(tab, cat_row, tables)
    want_ridx, want_node, want_counts = pt.partition_reference(bins, ridx, row_node, tab, n_bins, raw)
    # the compact index space: the split nodes' positions end to end, in table order
    at = np.concatenate([np.arange(b, b + c) for b, c in zip(tab["begin"], tab["count"], strict=True)])
    ordered = bins if row_index else bins[ridx]
    stored = np.ascontiguousarray(ordered.T if feature_major else ordered)
    common = dict(split_tab=("o", raw.view(np.int32), None), n_split=len(tab))
    flags_d = pt.partition_flags(n_bins, feature_major, row_index)
    through = {"ridx": ridx.astype(np.int32)} if row_index else {}
    sizes = {"pos": at.size}
    for cf in configs(flags_d, device, sizes, seed=10):
        incl = run(flags_d, device, cf, sizes, bins=("o", stored, None), n_rows=n_rows, n_feat=n_feat, **common,
                   **through)
        goes = np.concatenate([np.isin(ridx[b:b + c], want_ridx[b:b + c][:nl])
                               for b, c, nl in zip(tab["begin"], tab["count"], want_counts, strict=True)])
        np.testing.assert_array_equal(incl, np.cumsum(goes), err_msg=str(cf))
    # the group partition's counts: each block's left rows, blocks of 64 (a split's last one shorter, an empty
    # split one empty block), the (split, block) pairs after the records and the left tables
    blk_rows = 64
    pairs, n_blk = pt.block_table(tab["count"].astype(np.int64), blk_rows)
    assert n_blk == sum(max(1, -(-int(c) // blk_rows)) for c in tab["count"])
    blk_at = raw.size // 4
    want = [int(goes[f + k * blk_rows:f + min(c, (k + 1) * blk_rows)].sum())
            for f, c in zip(tab["first"], tab["count"], strict=True) for k in range(max(1, -(-int(c) // blk_rows)))]
    sizes = {"blk": n_blk, "k": blk_rows}
    table = np.concatenate([raw.view(np.int32), pairs])
    group_d = pt.group_counts(n_bins, feature_major, row_index)
    for cf in configs(group_d, device, sizes, seed=13):
        got = run(group_d, device, cf, sizes, bins=("o", stored, None), split_tab=("o", table, None),
                  blk_tab=("o", table, None), blk_at=blk_at, n_rows=n_rows, n_feat=n_feat, **through)
        np.testing.assert_array_equal(got, want, err_msg=str(cf))
        # the pairs in a buffer of their own (a table made on the device: tree_split_from_search writes them)
        got = run(group_d, device, cf, sizes, bins=("o", stored, None), split_tab=("o", table, None),
                  blk_tab=("o", pairs, None), blk_at=0, n_rows=n_rows, n_feat=n_feat, **through)
        np.testing.assert_array_equal(got, want, err_msg=str(cf))
    if not row_index:
        return
    # the CPUs' block walk through the row index (tree_block_stage): the same counts, and each block's rows kept in
    # its own indices, left rows in order from its first index, right rows from its last down; indices past the
    # split nodes' untouched
    stage_d = pt.block_stage(n_bins, feature_major)
    kept = np.full(at.size + 5, -5, np.int32)
    for f, c in zip(tab["first"].tolist(), tab["count"].tolist(), strict=True):
        for i0 in range(f, f + c, blk_rows):
            end = min(i0 + blk_rows, f + c)
            rows, go = ridx[at[i0:end]], goes[i0:end].astype(bool)
            kept[i0:end] = np.concatenate([rows[go], rows[~go][::-1]])
    for cf in configs(stage_d, device, {"blk": n_blk}, seed=14):
        for blk_tab, at_ in ((table, blk_at), (pairs, 0)):
            got, written = run_writing(stage_d, device, cf, {"blk": n_blk}, ridx=("o", ridx.astype(np.int32), None),
                                       split_bins=("o", stored, None), split_tab=("o", table, None),
                                       blk_tab=("o", blk_tab, None),
                                       stage=("o", np.full(at.size + 5, -5, np.int32), None), split_cols=0,
                                       n_rows=n_rows, stride=n_rows, n_feat=n_feat, blk_at=at_, blk_rows=blk_rows)
            np.testing.assert_array_equal(got, want, err_msg=str(cf))
            np.testing.assert_array_equal(written["stage"], kept, err_msg=str(cf))


def block_scatter_reference(tab, goes, ridx3, bins3, gh3, n_rows, move):
    """The block scatter in numpy: each split's rows (region 0 or 2 -> the next region, tree_flip) left rows first,
    each side in its old order, their bins and (g, h) rows along where ``bins3``/``gh3`` (position order, three
    regions; None: the row index only) and ``move``; each split's left count and its next child's slot."""
    ridx3 = ridx3.copy()
    bins3 = None if bins3 is None else bins3.copy()
    gh3 = None if gh3 is None else gh3.copy()
    n_left = np.zeros(len(tab), np.int64)
    slot_begin, slot_count = np.full(len(tab), -7, np.int64), np.full(len(tab), -7, np.int64)
    for s, t in enumerate(tab):
        b, c, f = int(t["begin"]), int(t["count"]), int(t["first"])
        go = goes[f:f + c].astype(bool)
        src = np.arange(b, b + c)
        order = np.concatenate([src[go], src[~go]])
        dst = int(pt.flip_positions(b, n_rows))
        ridx3[dst:dst + c] = ridx3[order]
        if bins3 is not None and move:
            bins3[dst:dst + c] = bins3[order]
            gh3[dst:dst + c] = gh3[order]
        n_left[s] = go.sum()
        if t["next_child"] >= 0:
            slot_begin[s] = dst if t["next_child"] == 0 else dst + n_left[s]
            slot_count[s] = n_left[s] if t["next_child"] == 0 else c - n_left[s]
    return ridx3, bins3, gh3, n_left, slot_begin, slot_count


@pytest.mark.parametrize("kind", ["blocks", "groups", "rows"])
@pytest.mark.parametrize("row_index", [False, True], ids=["moved", "indexed"])
@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_row_scatters(device, feature_major, row_index, wide, kind):
    """The generated scatters against numpy: a split step's rows (nodes in region 0, and in region 2 where the step's
    second half sits) each to the next region, left rows first and each side in its old order; moved rows take their
    bins (4-byte words where a row is whole words: 8 features) and (g, h) words (4 or 8 bytes, two outputs) along
    unless ``move`` is 0; every split's left count and its next child's slot; nothing else written. The block
    partition's (``blocks``) walks a block at a time (blocks of 64, a split's last shorter, an empty split one empty
    block, a sentinel record with spare blocks ending the table as a table made on the device does) from the blocks' left
    counts: the scatter where rows move, the walk and then the copy through the row index; the group partition's
    (``groups``, GPUs) the same blocks a work-group each (a placing scan), its output each block's left count, each
    split's in ``n_left``; the per-row one (``rows``) takes each index's place from the inclusive go-left counts,
    launched for an upper bound of the indices (a sentinel record with no rows ends the table, as a table made on the
    device does). Under random configurations."""
    rng = np.random.default_rng(21)
    n_rows, n_feat, n_bins, n_out = 1031, 8, 9, 2
    counts = [100, 257, 0, 129, 1, 544]
    ridx, begin, count = grouped_rows(rng, n_rows, counts)
    begin = begin.astype(np.int64)
    begin[3:] += 2 * n_rows  # the last three nodes in region 2 (their children go to region 1)
    split = [4, 1, 2, 3]
    tab = tb.split_table(len(split) + 1)
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(np.uint8)  # row order
    # positions: region 0 holds the rows in order, region 2 the nodes that lie there
    ridx3 = np.full(3 * n_rows, -1, np.int32)
    ridx3[:n_rows] = np.arange(n_rows)
    for b, c in zip(begin[3:], count[3:], strict=True):
        ridx3[b:b + c] = ridx[b - 2 * n_rows:b - 2 * n_rows + c]
    for j, i in enumerate(split):  # (the next child: the left, the right, none, the left)
        tab[j] = (i, rng.integers(n_feat), rng.integers(n_bins - 2), i % 2, 20 + 2 * i, 21 + 2 * i,
                  begin[i], count[i], (0, 1, -1, 0)[j], 0, -1)
    tab["first"][1:] = np.cumsum(tab["count"][:-1])
    # the sentinel that ends a table made on the device: no rows, at the end of the ranges
    tab[-1] = (-1, 0, 0, 0, -1, -1, 0, 0, -1, tab["first"][-2] + tab["count"][-2], -1)
    raw = tb.with_left_tables(tab, np.full(len(tab), -1), np.zeros((0, n_bins + 3), np.uint8))
    gh_words = 2 * n_out
    word = np.uint64 if wide else np.uint32
    gh3 = rng.integers(0, 2**31, size=(3 * n_rows, gh_words)).astype(word)
    bins3 = bins[np.maximum(ridx3, 0)]  # moved rows: bins in position order, all three regions
    if row_index:  # only the order moves; bins in row order, read through it
        stored, stride = (bins.T if feature_major else bins), n_rows
    else:
        stored, stride = (bins3.T if feature_major else bins3), 3 * n_rows
    stored = np.ascontiguousarray(stored)
    goes = np.concatenate([
        np.asarray([(bins[r, t["feature"]] <= t["bin"]) if bins[r, t["feature"]] != n_bins - 1 else t["default_left"]
                    for r in ridx3[t["begin"]:t["begin"] + t["count"]]], np.int32).reshape(-1) for t in tab])
    words = 0 if row_index or feature_major else n_feat // 4
    slots = np.full(len(tab), -7, np.int32)
    moves = dict(ridx=("o", ridx3, None), bins=("o", stored, None), gh=("o", gh3, None),
                 slot_begin=("o", slots, None), slot_count=("o", slots, None), n_rows=n_rows, stride=stride,
                 n_feat=n_feat, n_out=n_out)
    if kind in ("blocks", "groups"):
        blk_rows = 64
        pairs, n_blk = pt.block_table(tab["count"].astype(np.int64), blk_rows)
        spare = 3  # a table made on the device is launched for an upper bound of its blocks: the sentinel's
        pairs = np.concatenate([pairs, np.array([[len(tab) - 1, k] for k in range(1, spare + 1)], np.int32).reshape(-1)])
        n_blk += spare
        blk_left = np.array([int(goes[f + k * blk_rows:f + min(c, (k + 1) * blk_rows)].sum())
                             for f, c in zip(tab["first"], tab["count"], strict=True)
                             for k in range(max(1, -(-int(c) // blk_rows)))] + [0] * spare, np.int32)
        table = np.concatenate([raw.view(np.int32), pairs])
        sizes = {"blk": n_blk}
        common = dict(split_tab=("o", table, None), blk_tab=("o", table, None), blk_left=blk_left,
                      blk_at=raw.size // 4, blk_rows=blk_rows)
        if kind == "groups":  # a work-group a block: the scatter from the blocks' counts, through the order or not
            desc = pt.group_scatter(n_bins, feature_major, not row_index, wide, gh_words, words, blk_rows)
            sizes = {"blk": n_blk, "k": blk_rows}
            args = dict(split_tab=("o", table, None), blk_tab=("o", table, None), blk_left=blk_left,
                        blk_at=raw.size // 4, split_bins=("o", stored, None), split_cols=0,
                        n_left=("o", np.full(len(tab), -7, np.int32), None))
        elif row_index:  # the walk first (tree_block_stage: the blocks' counts and the rows it keeps), then the copy
            stage_d = pt.block_stage(n_bins, feature_major)
            want_kept = np.full(n_rows, -1, np.int32)  # each block's left rows up from its first index, right down
            for t in tab:
                f, c = int(t["first"]), int(t["count"])
                for i0 in range(f, f + c, blk_rows):
                    end = min(i0 + blk_rows, f + c)
                    rows = ridx3[t["begin"] + (i0 - f):t["begin"] + (end - f)]
                    go = goes[i0:end].astype(bool)
                    want_kept[i0:end] = np.concatenate([rows[go], rows[~go][::-1]])
            for cf in configs(stage_d, device, sizes, seed=23, n=4):
                got, kept = run_writing(stage_d, device, cf, sizes, ridx=("o", ridx3, None),
                                        split_bins=("o", stored, None), split_tab=("o", table, None),
                                        blk_tab=("o", table, None), stage=("o", np.full(n_rows, -1, np.int32), None),
                                        split_cols=0, n_rows=n_rows, stride=stride, n_feat=n_feat,
                                        blk_at=raw.size // 4, blk_rows=blk_rows)
                np.testing.assert_array_equal(got, blk_left, err_msg=str(cf))
                np.testing.assert_array_equal(kept["stage"], want_kept, err_msg=str(cf))
            desc = pt.block_copy()
            args = dict(common, stage=kept["stage"])
            moves = dict(ridx=moves["ridx"], slot_begin=moves["slot_begin"], slot_count=moves["slot_count"],
                         n_rows=n_rows)
        else:  # the scatter, from the blocks' counts
            desc = pt.block_scatter(n_bins, feature_major, wide, gh_words, words)
            args = dict(common, split_bins=("o", stored, None), split_cols=0)
    else:
        n = int(tab["count"].sum()) + 37  # an upper bound of the indices
        desc = pt.scatter_rows(n_bins, feature_major, not row_index, wide, gh_words, words)
        sizes = {"pos": n}
        args = dict(split_tab=("o", raw.view(np.int32), None), incl=np.cumsum(goes).astype(np.int32), n=n,
                    n_split=len(tab))
    for move in ((1, 0) if any(p.name == "move" for p in desc.params) else (1,)):  # (the copy moves the order only)
        want = block_scatter_reference(tab, goes, ridx3, None if row_index else bins3, None if row_index else gh3,
                                       n_rows, move)
        for cf in configs(desc, device, sizes, seed=22 + move, n=4):
            move_arg = {"move": move} if any(p.name == "move" for p in desc.params) else {}
            out, written = run_writing(desc, device, cf, sizes, **moves, **args, **move_arg)
            msg = f"{cf} move={move}"
            if kind == "groups":  # each block's count out, each split's in n_left
                np.testing.assert_array_equal(out, blk_left, err_msg=msg)
                np.testing.assert_array_equal(written["n_left"], want[3], err_msg=msg)
            else:
                np.testing.assert_array_equal(out[:len(tab)], want[3], err_msg=msg)
            np.testing.assert_array_equal(written["ridx"], want[0], err_msg=msg)
            np.testing.assert_array_equal(written["slot_begin"], want[4], err_msg=msg)
            np.testing.assert_array_equal(written["slot_count"], want[5], err_msg=msg)
            if not row_index:
                got_bins = written["bins"].reshape(n_feat, -1).T if feature_major else written["bins"].reshape(-1, n_feat)
                np.testing.assert_array_equal(got_bins, want[1], err_msg=msg)
                np.testing.assert_array_equal(written["gh"].reshape(-1, gh_words), want[2], err_msg=msg)
            elif "bins" in written:  # bins and (g, h) stay where they are (the copy has neither)
                np.testing.assert_array_equal(written["bins"].reshape(-1), stored.reshape(-1), err_msg=msg)
                np.testing.assert_array_equal(written["gh"].reshape(-1, gh_words), gh3, err_msg=msg)


@pytest.mark.parametrize("n_bins", [9, 300])
def test_bin_columns(device, n_bins):
    """The partition's features x rows copy of a rows x features bin matrix (8- and 16-bit bins)."""
    rng = np.random.default_rng(11)
    n_rows, n_feat = 517, 7
    dtype = np.uint8 if n_bins <= 256 else np.uint16
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(dtype)
    desc = pt.bin_columns(n_bins)
    sizes = {"feat": n_feat, "row": n_rows}
    for cf in configs(desc, device, sizes, seed=12):
        out = run(desc, device, cf, sizes, bins=("o", bins, None), n_feat=n_feat)
        np.testing.assert_array_equal(out.reshape(n_feat, n_rows), bins.T, err_msg=str(cf))


def test_views_share_the_buffer(device):
    """The opaque and reshaped views the backend hands to kernels alias the original buffer."""
    a = cl_array.to_device(device.queue, np.arange(8, dtype=np.float64))
    assert view(a, (2, 4), np.dtype(np.float64)).get().tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert opaque(a).shape == (1,) and opaque(a).base_data is a.base_data


def _fits(kern, sizes, device) -> bool:  # noqa: ANN001
    """Whether a tunable's class builds on ``device`` in its description's default configuration."""
    from mdhom.mdh.parts import ConfigError

    desc = kern.describe(sizes)
    try:
        desc.check_config(desc.default_config(device, kern.dim_sizes(sizes)), device)
    except ConfigError:
        return False
    return True


def test_tunables_match_their_references(device):
    """What the tuner runs (registered inputs, reference, tolerance) agrees at the smallest size class."""
    from mdhom import tunable

    rng = np.random.default_rng(19)
    for name in ("tree_histogram", "tree_histogram_q", "tree_histogram_rows", "tree_split_scan", "tree_split_score",
                 "tree_bin_features", "tree_bin_features_fm", "tree_gradients_squared", "tree_gradients_logistic",
                 "tree_gradients_softmax", "tree_score_update", "tree_partition_flags", "tree_group_counts",
                 "tree_predict_forest"):
        kern = tunable.registered()[name]
        # the first quick class and the default max_bin's code that build on the device (a GPU's 256-bin whole rows
        # need feature groups: the whole-row histogram's quick class is one of them)
        fit = [c for c in kern.size_classes if _fits(kern, kern.size_classes[c], device)]
        quick = [c for c in kern.classes(quick=True) if c in fit][:1] or sorted(
            (c for c in fit if not c.endswith("_bins256")), key=kern.points)[:1]
        wide = [c for c in fit if c.endswith("_bins256")]
        assert quick, (name, "no size class builds on", device.key)
        for cls in quick + sorted(wide, key=kern.points)[:1]:
            sizes = kern.size_classes[cls]
            sizes = dict(sizes, pos=min(sizes.get("pos", 1), 4099)) if "pos" in sizes else sizes
            inputs = kern.make_inputs(sizes, rng)
            dims = kern.dim_sizes(sizes)
            got = Computation(kern.describe(sizes), device, None, dims)(dims, **kern.arguments(sizes, inputs))
            assert kern.compare(got, kern.reference(inputs)) is None, (name, cls)


# ------------------------------------------------------------------------------------------------ a round
@pytest.mark.parametrize("objective,k", [("reg:squarederror", 1), ("binary:logistic", 1), ("multi:softmax", 4),
                                         ("multilabel:logistic", 3)])
def test_gradients_match_the_losses(device, objective, k):
    """Double precision: bit for bit the numpy loss (its portable exp included), in the vector form too (what CPUs
    build for the logistic and softmax losses; subnormal and clamped exps among the scores); single: to rounding."""
    from mdhom.learn.losses import make_loss

    loss = make_loss(objective, k)
    rng = np.random.default_rng(23)
    n = 1031
    raw = rng.standard_normal((n, k)) * 4
    raw[:5] = [[-800.0], [-40.0], [0.0], [37.5], [745.0]][:5] if k == 1 else raw[:5] * 100
    y = (rng.integers(0, k, (n, 1)) if objective == "multi:softmax" else rng.integers(0, 2, (n, k))).astype(float)
    if objective == "reg:squarederror":
        y = rng.standard_normal((n, 1))
    w = rng.random(n) + 0.25
    keep = rng.random(n) < 0.7
    g, h = loss.gradients(y, raw, w)
    g[~keep], h[~keep] = 0.0, 0.0
    factor = k / (k - 1.0) if objective == "multi:softmax" else 1.0
    sizes = {"row": n, "output": k}
    for precision, vector in (("double", False), ("double", True), ("single", False)):
        real = ln.REALS[precision]
        desc = gr.gradients(loss.kind, precision, vector=vector)
        # the vector form (logistic and softmax losses: VEC rows a block, the last partial one row by row) at every width
        cfgs = [{**desc.default_config(device, sizes), "VEC": v} for v in (2, 4, 8)] if desc.vector else [None]
        for cfg in cfgs:
            got = run(desc, device, cfg, sizes, scores=raw.astype(real), y=y.astype(real), w=w.astype(real),
                      keep=("o", keep.astype(np.uint8), None), use_keep=1, factor=real(factor))
            if precision == "double":
                np.testing.assert_array_equal(got["g"], g, err_msg=str(cfg))
                np.testing.assert_array_equal(got["h"], h, err_msg=str(cfg))
            else:
                np.testing.assert_allclose(got["g"], g, rtol=2e-5, atol=1e-6)
                np.testing.assert_allclose(got["h"], h, rtol=2e-5, atol=1e-6)


def _small_tree(rng, n_feat, n_bins, k):
    from mdhom.trees.model import Tree

    left, right = np.array([1, 3, -1, -1, -1], np.int32), np.array([2, 4, -1, -1, -1], np.int32)
    feature = np.array([0, n_feat - 1, -1, -1, -1], np.int32)
    return Tree(left=left, right=right, feature=feature, threshold=np.zeros(5), default_left=np.array([1, 0, 0, 0, 0],
                bool), value=rng.standard_normal((5, k)), gain=np.zeros(5), cover=np.zeros(5),
                bin=np.array([n_bins // 2, 1, 0, 0, 0], np.int32))


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_leaf_values(device, precision, n_outputs):
    """The value table with a split search's children made on the device: the host's node values bit for bit (the
    L1 shrinkage at zero sums, signed zeros and a NaN sum included), the nodes outside the children the host's."""
    rng = np.random.default_rng(53)
    n_nodes, n_entries, base = 301, 64, 137
    rt = spr.result_type(precision)
    res = np.zeros((n_entries, n_outputs), rt.dtype)
    for f in ("lg", "rg"):
        res[f] = rng.standard_normal((n_entries, n_outputs)) * 10.0 ** rng.integers(-3, 4, (n_entries, n_outputs))
    for f in ("lh", "rh"):
        res[f] = rng.random((n_entries, n_outputs)) * 50
    res["lg"][:4, 0] = [0.0, -0.0, 0.05, -0.05]  # within alpha of zero: shrunk to zero
    res["rg"][4, 0] = np.nan
    real = np.float32 if precision == "single" else np.float64
    known = rng.standard_normal((n_nodes, n_outputs)).astype(real)
    left = np.stack([res["lg"], res["lh"]], axis=-1).astype(np.float64)
    right = np.stack([res["rg"], res["rh"]], axis=-1).astype(np.float64)
    desc = sc.leaf_values(precision)
    sizes = {"node": n_nodes, "output": n_outputs}
    for alpha in (0.0, 0.1):
        want = sc.leaf_values_reference(known, left, right, base, 0.3, 1.5, alpha).astype(real)
        assert np.isnan(want[base + 9, 0]) and want[base, 0] == 0 and np.signbit(want[base, 0])  # -0: -(+0) / h
        for cfg in configs(desc, device, sizes, seed=5, n=3):
            got = run(desc, device, cfg, sizes, known=known, res=("o", res.view(np.uint8), None), base=base,
                      n_entries=n_entries, learning_rate=0.3, reg_lambda=1.5, reg_alpha=alpha)
            np.testing.assert_array_equal(got, want)  # (NaN where NaN: a non-finite sum never splits in a fit)
            np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))  # -0 as -0


@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
def test_score_update_and_predict_bins(device, feature_major):
    from mdhom.trees import reference as ref

    rng = np.random.default_rng(29)
    n, n_feat, n_bins, k = 777, 4, 9, 2
    bins = rng.integers(0, n_bins, size=(n, n_feat)).astype(np.uint8)
    scores = rng.standard_normal((n, k))
    tree = _small_tree(rng, n_feat, n_bins, k)
    leaf = ref.predict_bins(bins, tree, n_bins)
    stored = np.ascontiguousarray(bins.T if feature_major else bins)
    got = run(pr.predict_bins(n_bins, "double", feature_major), device, None, {"row": n, "output": k},
              scores=scores, bins=("o", stored, None), tree=("o", tb.tree_table(tree).view(np.int32), None),
              value=("o", tree.value, None), n_feat=n_feat)
    np.testing.assert_array_equal(got, scores + tree.value[leaf])
    row_node = leaf.astype(np.int32)
    got = run(sc.score_update("double"), device, None, {"row": n, "output": k}, scores=scores, row_node=row_node,
              value=("o", tree.value, None))
    np.testing.assert_array_equal(got, scores + tree.value[leaf])


def _leaf_table(begin, node, region, n_rows, shift=None, split=None, right=None, rule=None, stay=None):
    """tree_leaf_rows' table from its records' columns (``split``, ``rule`` and ``right`` None: leaves only)."""
    rec = lr.leaf_records(np.size(begin))
    cols = dict(begin=begin, node=node, region=region, split=split, right=right, rule=rule, stay=stay)
    for name in tb.LEAF_RECORD.dtype.names:
        if cols[name] is not None:
            rec[name] = cols[name]
    return lr.leaf_records_table(rec, n_rows, shift)


@pytest.mark.parametrize("feature_major", [False, True], ids=["rows-major", "features-major"])
def test_leaf_rows(device, feature_major):
    """Every row's node from the nodes' position ranges, each in any of the three regions of the positions, written
    through the output view ridx[region + pos]; some ranges are a split's two children, cut at the left count the
    kernel reads on the device (the last partition's, not yet on the host); others a split no partition ran for
    (a tree's last step), each row's child decided from its bin by the split's record, numeric or categorical, the
    missing bin by the default direction: bins in position order (rows moved with the row order), rows x features
    or features x rows."""
    rng = np.random.default_rng(41)
    n, n_feat, n_bins = 3001, 5, 17
    begin = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), 49, replace=False))]).astype(np.int32)
    ends = np.append(begin[1:], n)
    region = (rng.integers(0, 3, 50) * n).astype(np.int32)
    assert set(region.tolist()) == {0, n, 2 * n}
    ridx = np.full(3 * n, -1, np.int32)  # the rows where the ranges are; the other regions' stale entries are -1
    perm = rng.permutation(n).astype(np.int32)
    for b, e, h in zip(begin, ends, region, strict=True):
        ridx[h + b:h + e] = perm[b:e]
    node = rng.permutation(200)[:50].astype(np.int32)
    right = (node + 1000).astype(np.int32)
    # every third range a split's children: its left count at index split[i] of n_left (0 to the whole range)
    split = np.where(np.arange(50) % 3 == 1, rng.permutation(50), -1).astype(np.int32)
    n_left = np.full(50, 10**6, np.int32)
    cut = begin + np.array([rng.integers(0, e - b + 1) for b, e in zip(begin, ends, strict=True)])
    n_left[split[split >= 0]] = (cut - begin)[split >= 0]
    # and every third a split no partition ran for: record rule[i] of the split table, one of them categorical
    ruled = np.flatnonzero(np.arange(50) % 3 == 2)
    rule = np.full(50, -1, np.int32)
    rule[ruled] = rng.permutation(ruled.size)
    recs = tb.split_table(ruled.size)
    recs["feature"] = rng.integers(0, n_feat, ruled.size)
    recs["bin"] = rng.integers(0, n_bins - 2, ruled.size)
    recs["default_left"] = rng.integers(0, 2, ruled.size)
    cat_left = rng.integers(0, 2, (1, n_bins)).astype(np.uint8)
    cat_row = np.full(ruled.size, -1)
    cat_row[3] = 0
    split_tab = tb.with_left_tables(recs, cat_row, cat_left)
    split_tab = np.concatenate([split_tab, np.zeros(-split_tab.size % 4, np.uint8)]).view(np.int32)
    rows_bins = rng.integers(0, n_bins, (n, n_feat)).astype(np.uint8)  # a row's bins; the last bin is the missing one
    pos_bins = rows_bins[np.maximum(ridx, 0)]  # rows moved with the row order: each position holds its row's bins
    stride = pos_bins.shape[0]
    bins = np.ascontiguousarray(pos_bins.T if feature_major else pos_bins)
    feat = recs["feature"]
    cats = tb.with_left_tables(recs.copy(), cat_row, cat_left)[: recs.nbytes].view(tb.SPLIT_RECORD.dtype)["cats"]
    goes_left = np.stack([
        np.asarray(cat_left[0], bool)[pos_bins[:, f]] if c >= 0 else pos_bins[:, f] <= b
        for f, b, c in zip(feat, recs["bin"], cats, strict=True)], axis=1)
    missing = pos_bins[:, feat] == n_bins - 1
    goes_left = np.where(missing, recs["default_left"][None, :] != 0, goes_left)
    tab, shift = _leaf_table(begin, node, region, n, split=split, right=right, rule=rule)
    assert shift == 4 and tab.size == lr.LEAF_INTS * 50 + 188 + 1  # about four buckets of 16 positions a leaf, the end
    want = lr.leaf_rows_reference(ridx, tab, n, 50, n_left, goes_left)
    for i, (b, e, c, v, r, s) in enumerate(zip(begin, ends, cut, node, right, split, strict=True)):  # the reference
        if rule[i] >= 0:
            at = region[i] + np.arange(b, e)
            np.testing.assert_array_equal(want[perm[b:e]], np.where(goes_left[at, rule[i]], v, r))
        else:
            assert np.all(want[perm[b:c if s >= 0 else e]] == v) and np.all(want[perm[c:e]] == (r if s >= 0 else v))
    assert len(set(want[perm[begin[1]:ends[1]]].tolist())) == 2 or cut[1] in (begin[1], ends[1])
    assert len(set(want[perm[begin[5]:ends[5]]].tolist())) == 2  # a ruled range whose rows went both ways
    desc = lr.leaf_rows(n_bins, feature_major)
    args = dict(ridx=ridx, n_left=("o", n_left, None), bins=("o", bins, None), split_tab=("o", split_tab, None),
                n_leaves=50, n_rows=stride, n_feat=n_feat)
    for s in (shift, 0, 7, 12):  # any bucket size: each bucket's search starts at the leaf of its first position
        tab, _ = _leaf_table(begin, node, region, n, s, split=split, right=right, rule=rule)
        got = run(desc, device, None, {"pos": n}, leaf_tab=("o", tab, None), bucket_shift=s, **args)
        np.testing.assert_array_equal(got, want, err_msg=str(s))
    leaves, _ = _leaf_table(begin, node, region, n)  # leaves only: no count is read
    got = run(desc, device, None, {"pos": n}, leaf_tab=("o", leaves, None), bucket_shift=shift,
              **{**args, "n_left": ("o", np.zeros(1, np.int32), None)})
    np.testing.assert_array_equal(got[perm], np.repeat(node, ends - begin))


def test_leaf_rows_ahead(device):
    """Leaves written before the host has read the tree's last search (rows that move, the last step not
    partitioned): a node of that step (``stay``) keeps its rows where the step's table record holds none, else each
    row goes to the child its bin says, read in the node's region; other ranges are leaves, or a split's children cut
    at the left count. Ranges in each of the three regions; the positions the kernel must not read hold -1."""
    rng = np.random.default_rng(47)
    n, n_feat, n_bins, m = 2003, 3, 9, 60
    begin = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), m - 1, replace=False))]).astype(np.int32)
    ends = np.append(begin[1:], n)
    region = (np.arange(m) % 3 * n).astype(np.int32)
    kind = rng.permutation(np.arange(m) % 4)  # 0 a leaf, 1 a split cut at its left count, 2 kept, 3 split by bins
    opened = kind >= 2
    rule = np.where(opened, rng.permutation(m), -1).astype(np.int32)
    recs = tb.split_table(m)
    recs["count"][rule[opened]] = np.where(kind[opened] == 3, rng.integers(1, 99, opened.sum()), 0)
    recs["feature"] = rng.integers(0, n_feat, m)
    recs["bin"] = rng.integers(0, n_bins - 2, m)
    recs["default_left"] = rng.integers(0, 2, m)
    split_tab = tb.with_left_tables(recs, np.full(m, -1), np.zeros((0, n_bins), np.uint8))
    split_tab = np.concatenate([split_tab, np.zeros(-split_tab.size % 4, np.uint8)]).view(np.int32)
    split = np.where(kind == 1, rng.permutation(m), -1).astype(np.int32)
    cut = np.array([rng.integers(b, e + 1) for b, e in zip(begin, ends, strict=True)])
    n_left = np.zeros(m, np.int32)
    n_left[split[kind == 1]] = (cut - begin)[kind == 1]
    ridx = np.full(3 * n, -1, np.int32)
    perm = rng.permutation(n).astype(np.int32)
    for b, e, h in zip(begin, ends, region, strict=True):
        ridx[h + b:h + e] = perm[b:e]
    rows_bins = rng.integers(0, n_bins, (n, n_feat)).astype(np.uint8)
    pos_bins = rows_bins[np.maximum(ridx, 0)]  # rows moved with the row order
    goes_left = np.stack([pos_bins[:, f] <= b for f, b in zip(recs["feature"], recs["bin"], strict=True)], axis=1)
    goes_left = np.where(pos_bins[:, recs["feature"]] == n_bins - 1, recs["default_left"][None, :] != 0, goes_left)
    node = np.arange(m, dtype=np.int32) * 3
    right, stay = node + 1, np.where(opened, node + 2, -1).astype(np.int32)
    tab, shift = _leaf_table(begin, node, region, n, split=split, right=right, rule=rule, stay=stay)
    want = lr.leaf_rows_reference(ridx, tab, n, m, n_left, goes_left, recs["count"])
    for i, (b, e, c) in enumerate(zip(begin, ends, cut, strict=True)):  # the reference, case by case
        got = want[perm[b:e]]
        if kind[i] == 0:
            assert np.all(got == node[i])
        elif kind[i] == 1:
            np.testing.assert_array_equal(got, np.where(np.arange(b, e) < c, node[i], right[i]))
        elif kind[i] == 2:
            assert np.all(got == stay[i])
        else:
            np.testing.assert_array_equal(got, np.where(goes_left[region[i] + np.arange(b, e), rule[i]], node[i],
                                                        right[i]))
    assert len(set(want.tolist())) > m  # both children of some splits
    got = run(lr.leaf_rows(n_bins), device, None, {"pos": n}, ridx=ridx, leaf_tab=("o", tab, None),
              n_left=("o", n_left, None), bins=("o", pos_bins, None), split_tab=("o", split_tab, None), n_leaves=m,
              bucket_shift=shift, n_rows=pos_bins.shape[0], n_feat=n_feat)
    np.testing.assert_array_equal(got, want)


def ahead_search(rng, m, n_feat, n_outputs, n_bins, gains):
    """A split search's inputs for ``m`` entries as the look-ahead reads them (quantized): small integer histograms
    (the children's hessian sums tie now and then), their scan, the score's best records with gains drawn from
    ``gains`` and valid indices (one entry's out of range, as a node without a candidate has), the round's scales."""
    hist = np.zeros((m, n_feat, n_outputs, n_bins, 2), np.int32)
    hist[..., 0] = rng.integers(-40, 41, hist.shape[:-1])
    hist[..., 1] = rng.integers(0, 3, hist.shape[:-1])
    hist[m // 2, ..., 1] = 0  # no hessian: its children's sums tie
    scan = np.cumsum(hist, axis=3, dtype=np.int32)
    best = np.zeros(m, ln.split_type("quantized").dtype)
    best["value"] = rng.choice(gains, m)
    best["index"] = rng.integers(0, n_feat * (n_bins - 2) * 2, m)
    best["index"][m // 3] = n_feat * (n_bins - 2) * 2  # past the candidates: no sums
    best["value"][m // 2] = max(g for g in gains if np.isfinite(g))
    inv = np.ldexp(1.0, -np.arange(10, 10 + 2 * n_outputs)).reshape(n_outputs, 2)
    return hist, scan, best, inv


def ahead_inputs(hist, scan, best, inv, summed):
    """The keyword arguments of ``tree_split_from_search``'s search inputs (opaque buffers)."""
    stride = spr.best_layout("quantized")[0]
    args = dict(scan=("o", scan, None), hist=("o", hist, None), best=best.view(np.int32).reshape(-1, stride),
                best_value=("o", best.view(np.float64), None), inv_scale=("o", inv, None), n_feat=hist.shape[1])
    if summed:  # the score's vector form's result: the sums of the histogram's bins (cat_mode 0)
        args["cat_mode"] = ("o", np.zeros(hist.shape[1], np.uint8), None)
    return args


def ahead_case(n_outputs):
    """A look-ahead step's inputs: the last table (records in each of the three regions of positions, longer than the
    step), its left counts, the step's search (:func:`ahead_search`) and its packed result, which entries are allowed."""
    rng = np.random.default_rng(43)
    half, n_bins, n_feat, prec = 37, 19, 4, "quantized"
    n_rows = 9000  # positions a region
    last = tb.split_table(half + 5)  # longer than the step: a table buffer holds earlier rows past its end
    last["count"][:half] = rng.integers(0, 400, half)
    parent_region = np.arange(half) % 3
    last["begin"][:half] = np.cumsum(last["count"][:half]) - last["count"][:half] + 3 + parent_region * n_rows
    last["next_child"][:half] = rng.integers(0, 2, half)
    n_left = np.array([rng.integers(0, c + 1) for c in last["count"][:half]] + [0] * 5, np.int32)
    m = 2 * half
    hist, scan, best, inv = ahead_search(rng, m, n_feat, n_outputs, n_bins,
                                         [-np.inf, np.nan, np.inf, 0.0, 1e-7, 1e-6, 2e-6, 0.5, 3.0])
    res = spr.split_sums_reference(scan, hist, best, prec, inv)
    assert res["tg"].any() and res["lh"].any() and (res["lh"][:, 0] == 0).any()
    allow = (rng.random(m) < 0.8).astype(np.int32)
    allow[m // 2] = 1
    last["node"][half] = 40  # the leaves the last step's sentinel counts
    return last, n_left, hist, scan, best, inv, res, allow


@pytest.mark.parametrize("summed", [False, True], ids=["scanned", "summed"])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_split_from_search(device, n_outputs, summed):
    """The split table the device decides from a split search's result (the loss-guided look-ahead): ranges from
    the last table and its left counts, splits only where allowed with a finite gain above SPLIT_EPS and at least
    the batch's floor (``min_gain``, ties kept), the child of the smaller hessian sum built next, running ``first``
    and a sentinel; records in each of the three regions of positions, whose children go to the next region (0 and
    2 to 1, 1 to 2). The same launch writes the host's packed result of the search (``tree_split_sums``'s records,
    from the scan or the summed bins) into ``res``, every entry's and no further."""
    half, n_bins, prec, n_rows = 37, 19, "quantized", 9000
    m = 2 * half
    last, n_left, hist, scan, best, inv, res, allow = ahead_case(n_outputs)
    parent_region = np.arange(half) % 3
    want = lookahead.split_from_search_reference(res, last, n_left, allow, 500, n_bins, n_rows, -1)
    ok = lookahead.ahead_budget_reference(best["value"], allow, 0, 0).astype(bool)  # the entries that split
    n_split = int(ok.sum())
    assert want["node"][m] == 40 + n_split and (want["node"][:m] == -1).all()
    assert (want["begin"][:m] >= n_rows).all()
    assert np.array_equal(want["begin"][:m] // n_rows, np.tile(np.where(parent_region == 1, 2, 1), 2))
    assert 0 < want["count"][:m].sum() and (want["count"][:m] == 0).any()
    sl, sr = res["lh"].astype(np.float64).sum(axis=1), res["rh"].astype(np.float64).sum(axis=1)
    assert (want["next_child"][:m][ok] == 1).any() and (want["next_child"][:m][ok] == 0).any()
    assert (ok & (sl == sr)).any()  # a tie: the left child is built
    desc = lookahead.split_from_search(n_bins, n_outputs, prec, summed)
    floored = lookahead.split_from_search_reference(res, last, n_left, allow, 500, n_bins, n_rows, -1, 0.5)
    gain = best["value"].astype(np.float64)
    # the floor drops the entries of smaller gains and keeps those at it (ties), some of which hold rows
    np.testing.assert_array_equal(floored["count"][:m], np.where(gain >= 0.5, want["count"][:m], 0))
    assert (floored["count"][:m][gain == 0.5] > 0).any() and (want["count"][:m][gain < 0.5] > 0).any()
    search = ahead_inputs(hist, scan, best, inv, summed)
    no_blocks = dict(blk_tab=("o", np.full(2, -3, np.int32), None), blk_rows=0, n_blk=0)
    fill = np.full((m + 3, n_outputs), 0, res.dtype)  # the host's records: room past the entries stays as it was
    fill["gain"], fill["index"] = -5.0, -9
    # a grid of fewer work-items than entries launched (work-items loop), the learner's, and random ones
    few = {"NUM_WI_entry": 2, "NUM_WG_entry": 3}
    learner = lookahead.AHEAD.heuristic(desc, device, {"entry": m + 1})
    for cf in [few, learner, *configs(desc, device, {"entry": m + 1}, seed=44)]:
        for leaves, floor in ((-1, 0.0), (7, 0.0), (-1, 0.5)):  # the last table's count, or the host's; a floor
            want = lookahead.split_from_search_reference(res, last, n_left, allow, 500, n_bins, n_rows, leaves,
                                                         floor)
            got, wrote = run_writing(
                desc, device, cf, {"entry": m + 1}, res=("o", fill, np.uint8), last_tab=("o", last, np.int32),
                n_left=("o", n_left, None), allow=("o", allow, None), n_entries=m, base=500, n_rows=n_rows, root=0,
                leaves=leaves, min_gain=floor, **search, **no_blocks)
            np.testing.assert_array_equal(got.view(tb.SPLIT_RECORD.dtype).reshape(-1), want, err_msg=str(cf))
            recs = wrote["res"].view(res.dtype).reshape(m + 3, n_outputs)
            for name in res.dtype.names:  # (not the records' padding)
                assert recs[name][:m].tobytes() == res[name].tobytes(), (name, cf)
            assert recs[m:].tobytes() == fill[m:].tobytes()
    # the root (a depth-wise tree whose root's split is the device's): every row in region 0, no last table read
    for g, split in ((0.5, True), (-np.inf, False)):
        one = best[:1].copy()
        one["value"] = g
        args = ahead_inputs(hist[:1], scan[:1], one, inv, summed)
        want = lookahead.split_from_search_reference(spr.split_sums_reference(scan[:1], hist[:1], one, prec, inv),
                                                     None, None, np.ones(1, np.int32), 1, n_bins, n_rows, 1)
        assert want["count"][0] == (n_rows if split else 0) and want["begin"][0] == 0
        assert want["first"][1] == want["count"][0] and want["count"][1] == 0 and want["node"][1] == 1 + split
        got = run(desc, device, None, {"entry": 2}, res=("o", fill, np.uint8), last_tab=("o", last, np.int32),
                  n_left=("o", n_left, None), allow=("o", np.ones(1, np.int32), None), n_entries=1, base=1,
                  n_rows=n_rows, root=1, leaves=1, min_gain=0.0, **args, **no_blocks)
        np.testing.assert_array_equal(got.view(tb.SPLIT_RECORD.dtype).reshape(-1), want)


@pytest.mark.parametrize("blk_rows", [1, 7, 64])
def test_split_from_search_blocks(device, blk_rows):
    """The block table the table maker writes beside its table for the block and group partitions: the host's block
    table of its records (one block at least a record, empty ones too), then, up to the launched bound, more blocks of
    the sentinel; a bound below the blocks cuts them there. Nothing past the bound is written. The root's step too
    (every row in one record)."""
    half, n_bins, n_rows = 37, 19, 9000
    m = 2 * half
    last, n_left, hist, scan, best, inv, res, allow = ahead_case(1)
    desc = lookahead.split_from_search(n_bins, 1, "quantized")
    common = dict(res=("o", res, np.uint8), last_tab=("o", last, np.int32), n_left=("o", n_left, None),
                  **ahead_inputs(hist, scan, best, inv, False), n_rows=n_rows, leaves=-1, min_gain=0.0, base=500)
    table = lookahead.split_from_search_reference(res, last, n_left, allow, 500, n_bins, n_rows, -1)
    total = int(np.maximum(1, -(-table["count"].astype(np.int64) // blk_rows)).sum())
    few = {"NUM_WI_entry": 2, "NUM_WG_entry": 3}
    learner = lookahead.AHEAD.heuristic(desc, device, {"entry": m + 1})
    for n_blk, cf in zip(sorted({total, total + 13, max(1, total // 2)}), [few, learner, few], strict=False):
        want = lookahead.block_pairs_reference(table["count"], n_blk, blk_rows)
        assert want.shape == (n_blk, 2)
        if n_blk >= total:
            np.testing.assert_array_equal(want[:total].reshape(-1), pt.block_table(table["count"], blk_rows)[0])
        got, wrote = run_writing(desc, device, cf, {"entry": m + 1}, **common, allow=("o", allow, None),
                                 blk_tab=("o", np.full(2 * n_blk + 6, -3, np.int32), None), n_entries=m, root=0,
                                 blk_rows=blk_rows, n_blk=n_blk)
        np.testing.assert_array_equal(got.view(tb.SPLIT_RECORD.dtype).reshape(-1), table, err_msg=str(cf))
        np.testing.assert_array_equal(wrote["blk_tab"][:2 * n_blk].reshape(-1, 2), want, err_msg=f"{n_blk} {cf}")
        assert (wrote["blk_tab"][2 * n_blk:] == -3).all()
    # the root: its rows in blocks, the sentinel's one, then the sentinel's up to the bound
    one = best[:1].copy()
    one["value"] = 0.5
    root_res = spr.split_sums_reference(scan[:1], hist[:1], one, "quantized", inv)
    root_tab = lookahead.split_from_search_reference(root_res, None, None, np.ones(1, np.int32), 1, n_bins, n_rows, 1)
    n_blk = n_rows // blk_rows + 3
    root = common | ahead_inputs(hist[:1], scan[:1], one, inv, False) | dict(base=1, leaves=1)
    got, wrote = run_writing(desc, device, None, {"entry": 2}, **root, allow=("o", np.ones(1, np.int32), None),
                             blk_tab=("o", np.full(2 * n_blk, -3, np.int32), None), n_entries=1, root=1,
                             blk_rows=blk_rows, n_blk=n_blk)
    np.testing.assert_array_equal(got.view(tb.SPLIT_RECORD.dtype).reshape(-1), root_tab)
    np.testing.assert_array_equal(wrote["blk_tab"].reshape(-1, 2),
                                  lookahead.block_pairs_reference(root_tab["count"], n_blk, blk_rows))


def test_split_sums_reference_is_the_kernel(device):
    """``split_sums_reference`` (the look-ahead test's oracle of the host's records) has ``tree_split_sums``'s bits,
    scanned and summed."""
    rng = np.random.default_rng(45)
    m, n_feat, n_out, n_bins = 23, 3, 2, 11
    hist, scan, best, inv = ahead_search(rng, m, n_feat, n_out, n_bins, [-np.inf, 0.0, 0.5, 3.0])
    want = spr.split_sums_reference(scan, hist, best, "quantized", inv)
    assert (want["lg"] != 0).any() and (want["rh"] != 0).any()
    for summed in (False, True):
        desc = spr.split_sums(n_bins, n_out, "quantized", summed)
        sizes = {"node": m, "output": n_out}
        got = run(desc, device, desc.default_config(device, sizes), sizes, **ahead_inputs(hist, scan, best, inv,
                                                                                            summed))
        for name in want.dtype.names:
            assert got[name].tobytes() == want[name].tobytes(), (name, summed)


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_ahead_budget(device, n_outputs):
    """A tree's last level on the device: of the entries that may split (allowed, a finite gain above SPLIT_EPS),
    only the largest gains the leaf budget has room for, ties to the earlier entry (the host's level-wise rule);
    the leaves before the level are the host's count or the last table's sentinel's. The gains are the score's."""
    rng = np.random.default_rng(47)
    m, n_bins, prec = 90, 19, "quantized"
    best = np.zeros(m, ln.split_type(prec).dtype)
    # few distinct gains: ties across the budget's edge
    best["value"] = rng.choice([-np.inf, np.nan, 0.0, 1e-7, 0.25, 0.5, 0.5, 1.0, 2.0, 3.0], m)
    gain = best["value"].astype(np.float64)
    allow = (rng.random(m) < 0.9).astype(np.int32)
    last = tb.split_table(m // 2 + 3)
    last["node"][m // 2] = 100  # the sentinel of the last table: the tree's leaves before the level
    n_ok = int(lookahead.ahead_budget_reference(gain, allow, 0, 0).sum())
    assert n_ok > 30
    desc = lookahead.ahead_budget(n_bins, n_outputs, prec)
    for leaves, max_leaves in ((-1, 0), (-1, 100 + n_ok + 5), (-1, 100 + n_ok // 2), (-1, 100), (3, 20), (7, 8)):
        before = 100 if leaves < 0 else leaves
        want = lookahead.ahead_budget_reference(gain, allow, before, max_leaves)
        assert want.sum() == (n_ok if not max_leaves else min(n_ok, max_leaves - before))
        for cf in configs(desc, device, {"entry": m}, seed=48):
            got = run(desc, device, cf, {"entry": m}, best_value=("o", best.view(np.float64), None),
                      last_tab=("o", last, np.int32), allow=("o", allow, None), n_entries=m, leaves=leaves,
                      max_leaves=max_leaves)
            np.testing.assert_array_equal(got, want, err_msg=f"{leaves} {max_leaves} {cf}")
    # the reference's rule: among equal gains the earlier entries, the largest gains first
    keep = lookahead.ahead_budget_reference(gain, allow, 100, 100 + n_ok // 2).astype(bool)
    ok = lookahead.ahead_budget_reference(gain, allow, 0, 0).astype(bool)
    edge = gain[keep].min()
    assert (gain[ok & ~keep] <= edge).all()
    tied = np.flatnonzero(ok & (gain == edge))
    assert np.array_equal(keep[tied], np.arange(tied.size) < keep[tied].sum())


def _chain_case(seed: int, m: int):
    """A level of ``m`` entries for ``tree_ahead_chain``: few distinct gains and parents' chain values (ties across the
    bound's edge and against the left-out candidates), some not allowed."""
    rng = np.random.default_rng(seed)
    best = np.zeros(m, ln.split_type("quantized").dtype)
    best["value"] = rng.choice([-np.inf, np.nan, 0.0, 1e-7, 0.25, 0.5, 0.5, 1.0, 2.0, 3.0], m)
    allow = (rng.random(m) < 0.9).astype(np.int32)
    pchain = np.repeat(rng.choice([0.5, 1.0, 2.0, 4.0], m // 2), 2)  # a parent's two children share its chain value
    lchain = np.sort(rng.choice([0.25, 0.5, 1.0, 1.5, 3.0], 20))[::-1].copy()
    return best, allow, pchain, lchain


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_ahead_chain(device, n_outputs):
    """Below a bounded loss-guided batch the device splits the children its next batch would take: of the entries that
    may split (allowed, a finite gain above SPLIT_EPS, at least the floor), those fewer than ``most`` candidates rank
    ahead of: the left-out ones of a chain value at least theirs, entries of a larger one or the same one earlier, a
    chain value the smaller of the gain and the parent's. The host's replay (within_chain_budget) is the same rule,
    and it never takes an entry that the host's batch (every tie kept) would not."""
    m, n_bins, prec = 64, 19, "quantized"
    best, allow, pchain, lchain = _chain_case(53, m)
    gain = best["value"].astype(np.float64)
    desc = lookahead.ahead_chain(n_bins, n_outputs, prec)
    for most, n_l, floor in ((32, 20, 0.0), (32, 0, 0.0), (8, 20, 0.0), (8, 5, 0.6), (1, 20, 0.0), (64, 20, 0.0)):
        left = lchain[:n_l]
        want = lookahead.ahead_chain_reference(gain, allow, pchain, left, most, floor)
        chains = np.concatenate([pchain, left])
        for cf in configs(desc, device, {"entry": m}, seed=54):
            got = run(desc, device, cf, {"entry": m}, best_value=("o", best.view(np.float64), None),
                      allow=("o", allow, None), chains=("o", chains, None), n_entries=m, n_lchain=n_l, most=most,
                      min_gain=floor)
            np.testing.assert_array_equal(got, want, err_msg=f"{most} {n_l} {floor} {cf}")
        # the host's rule: the most largest chain values of the left-out and the may-split entries, every tie kept
        ok = lookahead.may_split(gain, allow, floor)
        chain = np.fmin(pchain, gain)
        pool = np.concatenate([left, chain[ok]])
        edge = np.sort(pool)[::-1][most - 1] if pool.size >= most else -np.inf
        took = want.astype(bool)
        assert not (took & ~ok).any() and (chain[took] >= edge).all(), (most, n_l)
        if most == 32 and n_l == 20:
            assert 0 < took.sum() < ok.sum()  # the bound binds, and leaves room for some children
        if n_l == 0 and most >= ok.sum():
            assert np.array_equal(took, ok)  # nothing left out and room for all: every entry that may split


@pytest.mark.parametrize("chunked", [0, 1], ids=["strided", "chunked"])
def test_hist_siblings(device, chunked):
    """Both schedules (CHUNKED, the CPUs' default: PoCL, 500k Higgs rows, 255 leaves, 3.6-3.7 against 7.4-8.6 ms
    of the kernel a round) on every compute device; the chunked one runs under Oclgrind in test_trees_oclgrind. With
    ``zero_next`` the launch zeroes 2 x nodes x cells of ``zero`` (the next level's histograms), no more; with
    ``store_at`` >= 0 it writes its output into ``store`` from that cell on as well, no more (else nothing there)."""
    rng = np.random.default_rng(31)
    parent, child = rng.standard_normal((5, 37)), rng.standard_normal((3, 37))
    desc = hg.hist_siblings("double")
    sizes = {"side": 2, "node": 3, "cell": 37}
    cfg = {**hg.SIBLINGS.heuristic(desc, device, sizes), "CHUNKED": chunked}
    for index, zero_next, store_at in ((None, 0, -1), (np.array([4, 0, 2]), 0, 5), (None, 1, 37),
                                       (np.array([4, 0, 2]), 1, -1)):
        got, wrote = run_writing(desc, device, cfg, sizes, child=child, parent=("o", parent, None),
                                 pidx=("o", np.zeros(1, np.int32) if index is None else index.astype(np.int32), None),
                                 zero=("o", np.full(6 * 37 + 5, 7.0), None), store=("o", np.full(8 * 37, 9.0), None),
                                 use_index=int(index is not None), pnode0=1 if index is None else 0,
                                 zero_next=zero_next, store_at=store_at)
        want = hg.hist_siblings_reference(parent, child, np.arange(1, 4) if index is None else index)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        np.testing.assert_array_equal(wrote["zero"], np.concatenate([np.full(6 * 37, 0.0 if zero_next else 7.0),
                                                                     np.full(5, 7.0)]))
        stored = np.full(8 * 37, 9.0)
        if store_at >= 0:
            stored[store_at: store_at + want.size] = want.reshape(-1)
        np.testing.assert_array_equal(wrote["store"], stored)


# ------------------------------------------------------------------------------------------------ quantized
def _quantized_gh(rng, n_rows, n_out):
    """int32 fixed-point (g, h) as a round makes them (mdhom.components.quantize.quantize_gh)."""
    from mdhom.components.quantize import quantize_gh

    grad, hess = rng.standard_normal((n_rows, n_out)), rng.random((n_rows, n_out))
    grad[rng.random(n_rows) < 0.2] = 0.0
    gq, hq, _ = quantize_gh(grad, hess)
    return gq.astype(np.int32), hq.astype(np.int32)


def _grouped_quantized_case(seed, n_rows, n_feat, n_bins, n_out):
    """Bins, int32 (g, h), five nodes' row ranges (one empty, one of a single row) and the reference histograms."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
    gq, hq = _quantized_gh(rng, n_rows, n_out)
    counts = [257, 0, 129, 1, 513]
    ridx, begin, count = grouped_rows(rng, n_rows, counts)
    return bins, gq, hq, counts, ridx, begin, count, hg.histogram_reference(bins, gq, hq, ridx, begin, count, n_bins)


# (PARTIALS_LOCAL, PACKED, SPLIT_PAIRS): private partials, 32-bit or packed 64-bit adds; local 32-bit atomics into
# interleaved pairs or two planes, or packed 64-bit atomics (the packed ones give a negative g sum's borrow back to h)
_LOCAL_PACKED = ((0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 0, 1), (1, 1, 0))


@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
def test_histogram_quantized_is_exact_under_every_configuration(device, feature_major):
    """int32 sums: every configuration, PARTIALS_LOCAL 0 (private partials) and 1 (local atomics), (g, h) added as
    two 32-bit (interleaved or in two planes) or one packed 64-bit word, any split of rows over work-items and
    work-groups, gives the reference's sums bit for bit."""
    n_rows, n_feat, n_bins, n_out = 1031, 5, 17, 2
    bins, gq, hq, counts, ridx, begin, count, want = _grouped_quantized_case(41, n_rows, n_feat, n_bins, n_out)
    assert 2**22 < np.abs(want).max() < 2**30  # the scale uses much of the int32 lanes' range
    assert (want[..., 0] < 0).any() and (want[..., 0] > 0).any()  # g sums of both signs: the packed borrow
    desc = hg.histogram(n_bins, "quantized", feature_major)
    assert desc.name == "tree_histogram_q" and "PARTIALS_LOCAL" in desc.parameter_names()
    sizes = {"node": len(counts), "feat": n_feat, "output": n_out, "pos": max(counts)}
    ordered = bins[ridx]
    stored = np.ascontiguousarray(ordered.T if feature_major else ordered)
    gh = np.stack([gq[ridx], hq[ridx]], axis=-1)
    base = {f"NUM_{w}_{d}": 1 for d in ("node", "feat", "output", "pos") for w in ("WG", "WI")}
    fixed = [{**base, "NUM_WG_feat": 2, "NUM_WI_feat": 2, "NUM_WI_pos": 16, "NUM_WG_pos": 3, "NUM_WG_node": 2,
              "NUM_WI_COMBINE": 4, "PARTIALS_LOCAL": pl, "PACKED": pk, "SPLIT_PAIRS": sp}
             for pl, pk, sp in _LOCAL_PACKED]
    cfgs = fixed + configs(desc, device, sizes, seed=42, n=3)
    for cfg in cfgs:
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, n_rows=n_rows,
                  bins=("v", stored, (n_feat, max(counts)) if feature_major else (max(counts), n_feat)),
                  gh=("v", gh, (max(counts), n_out, 2)))
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), want, err_msg=str(cfg))


def test_histogram_rows_prefetches_dense_rows_major_rows_only():
    """The prefetch asks for bins + row * features: only where that is the gathered row (dense, rows-major, read
    through the row index); compressed rows (sparse input) and features-major bins lie elsewhere, and moved rows
    stream."""
    assert rh.histogram_rows(17, 16, 1, False, True).prefetch
    assert not rh.histogram_rows(17, 16, 1, False, True, True).prefetch  # compressed rows
    assert not rh.histogram_rows(17, 16, 1, True, True).prefetch
    assert not rh.histogram_rows(17, 16, 1, False, False).prefetch


def test_histogram_rows_pads_where_features_share_banks():
    """GPUs' heuristic pads the local accumulator where a feature's bins span a multiple of 32 words, so that each
    feature's bins lie some banks on from the last's (64 bins: a pad word a feature, one bank), and not where they
    fall apart already; CPUs' builds (moved rows, no local atomics) offer no padding."""
    assert rh.feature_pad(rh.histogram_rows(64, 28, 1, False, True)) == 6
    assert rh.feature_pad(rh.histogram_rows(256, 28, 1, False, True)) == 8
    assert rh.feature_pad(rh.histogram_rows(32, 28, 3, False, True)) == 5  # 96 words: a pad every 32
    assert rh.feature_pad(rh.histogram_rows(17, 28, 2, False, True)) == 0
    assert rh.feature_pad(rh.histogram_rows(2048, 4, 1, False, True)) == 8  # the largest offered pad
    assert not rh.histogram_rows(64, 28, 1, False, False).padded


@pytest.mark.parametrize("feature_major", [False, True], ids=["row-major", "feature-major"])
@pytest.mark.parametrize("row_index", [False, True], ids=["moved", "indexed"])
@pytest.mark.parametrize("n_feat, n_bins", [(5, 17), (8, 17), (6, 300)], ids=["bytes", "words", "wide-words"])
def test_histogram_rows_is_exact_under_every_configuration(device, feature_major, row_index, n_feat, n_bins):
    """The whole-row histogram (every feature per point, local-memory node histograms): the reference's int32
    sums bit for bit, with rows moved into position order or read through the row index; rows-major rows of a
    whole number of 32-bit words (8 one-byte bins, 6 two-byte bins) also read as words (ROW_WORDS); each work-item
    from its own feature (or, reading words through the row index, its own word) on (ROTATE) or all from the first; private partials over contiguous runs of a node's rows
    (CHUNKED), nodes of unequal counts (the fold is ragged); rows read through the row index prefetched or not
    (PREFETCH)."""
    n_rows, n_out = 1031, 2
    bins, gq, hq, counts, ridx, begin, count, want = _grouped_quantized_case(47, n_rows, n_feat, n_bins, n_out)
    desc = rh.histogram_rows(n_bins, n_feat, n_out, feature_major, row_index)
    words = n_feat != 5 and not feature_major
    assert ("ROW_WORDS" in desc.parameter_names()) == words
    sizes = {"node": len(counts), "pos": max(counts)}
    order = np.arange(n_rows) if row_index else ridx  # indexed: bins and (g, h) stay in row order
    stored = np.ascontiguousarray(bins[order].T if feature_major else bins[order]).reshape(-1)
    gh = np.stack([gq[order], hq[order]], axis=-1).reshape(-1)
    extra = {"ridx": ridx.astype(np.int32)} if row_index else {}
    base = {f"NUM_{w}_{d}": 1 for d in ("node", "pos") for w in ("WG", "WI")}
    fixed = [{**base, "NUM_WI_pos": 16, "NUM_WG_pos": 3, "NUM_WG_node": 2, "NUM_WI_COMBINE": 4, "PARTIALS_LOCAL": pl,
              "PACKED": pk, "SPLIT_PAIRS": sp, "ROTATE": int(pl == sp), "CHUNKED": 1 - pl} for pl, pk, sp in _LOCAL_PACKED]
    fixed += [{**c, "CHUNKED": 1 - c["CHUNKED"]} for c in fixed]
    fixed += [{**c, "ROW_WORDS": 1, "ROTATE": 1 - c["ROTATE"]} for c in fixed] if words else []
    # PREFETCH: each work-item asks for the row 16 positions on (dense rows-major rows through the row index)
    assert desc.prefetch == (row_index and not feature_major)
    if desc.prefetch and device.type == "cpu":
        fixed = [{**c, "PREFETCH": i % 2} for i, c in enumerate(fixed)]
    elif desc.prefetch:  # CPUs' code: refused elsewhere (in a configuration valid otherwise: the heuristic's)
        valid = rh.rows_heuristic(desc, device, sizes)
        desc.check_config(valid, device)
        with pytest.raises(ConfigError, match="PREFETCH=1"):
            desc.check_config({**valid, "PREFETCH": 1}, device)
    # FLAT: the nodes' rows end to end, pieces of them into the zeroed output by global atomics; moved rows (CPUs')
    # also with private accumulators (flat="private"), each of a work-group's work-items a share of its own
    assert desc.flat and desc.flat_private == (not row_index)
    fixed += [{**c, "FLAT": 1, "NUM_WG_node": 1, "NUM_WG_pos": wg} for c, wg in zip(
        [c for c in fixed if c["PARTIALS_LOCAL"]][::2], (3, 5, 7), strict=False)]
    if not row_index:
        fixed += [{**c, "FLAT": 1, "NUM_WG_node": 1, "NUM_WG_pos": wg, "NUM_WI_pos": wi} for c, (wg, wi) in zip(
            [c for c in fixed if not c["PARTIALS_LOCAL"]], ((3, 16), (7, 1), (1, 1), (64, 1), (2, 4)), strict=False)]
    # LOCAL_PAD: a word of padding every 2^s words of the local accumulator (GPUs' builds: moved rows keep the
    # source their stored configurations were tuned for); two nodes' accumulators per work-group among them
    assert desc.padded == row_index
    if row_index:
        local = [c for c in fixed if c["PARTIALS_LOCAL"]]
        fixed += [{**c, "LOCAL_PAD": pad} for c, pad in zip(local, itertools.cycle((5, 6, 7, 8)))]
        fixed += [{**local[0], "NUM_WI_node": 2, "NUM_WI_pos": 8, "LOCAL_PAD": 5}]
    for cfg in fixed + configs(desc, device, sizes, seed=48, n=2):
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, n_rows=n_rows, bins=stored, gh=gh,
                  **extra)
        got = got.reshape(len(counts), n_feat, n_out, n_bins)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), want, err_msg=str(cfg))


@pytest.mark.parametrize("n_feat, n_bins, groups, feature_major, row_index",
                         [(6, 17, 2, False, True), (6, 17, 2, True, False), (6, 300, 3, False, True),
                          (6, 300, 3, False, False), (6, 300, 2, False, True), (10, 300, 2, False, True),
                          (8, 256, 4, False, True), (12, 256, 4, False, True), (8, 256, 4, True, True)],
                         ids=["bytes-indexed", "bytes-feature-major-moved", "wide-indexed", "wide-moved",
                              "wide-halves-indexed", "wide-three-words-indexed", "quarters-indexed",
                              "threes-indexed", "quarters-feature-major-indexed"])
def test_histogram_groups_is_exact_under_every_configuration(device, feature_major, row_index, n_feat, n_bins, groups):
    """The whole-row histogram in feature groups (a group's features of every row per point, a group's histogram in
    local memory): the reference's int32 sums bit for bit in the node's (feat, output, bin) layout, rows moved or read
    through the row index, private or local partials (packed, in planes, padded), each work-item from its own
    feature (or word, ROW_WORDS) of the group on (ROTATE) or not, a group's bins read as bytes or as words, the groups
    in one work-group or each in its own, FLAT's line over every (node, group) run (moved rows: local or private
    accumulators)."""
    n_rows, n_out = 1031, 2
    bins, gq, hq, counts, ridx, begin, count, want = _grouped_quantized_case(53, n_rows, n_feat, n_bins, n_out)
    desc = rh.histogram_groups(n_bins, n_feat, n_out, groups, feature_major, row_index)
    sizes = {"node": len(counts), "grp": groups, "pos": max(counts)}
    order = np.arange(n_rows) if row_index else ridx
    stored = np.ascontiguousarray(bins[order].T if feature_major else bins[order]).reshape(-1)
    gh = np.stack([gq[order], hq[order]], axis=-1).reshape(-1)
    extra = {"ridx": ridx.astype(np.int32)} if row_index else {}
    base = {f"NUM_{w}_{d}": 1 for d in ("node", "grp", "pos") for w in ("WG", "WI")}
    fixed = [{**base, "NUM_WI_pos": 16, "NUM_WG_pos": 3, "NUM_WG_node": 2, "NUM_WG_grp": g, "NUM_WI_COMBINE": 4,
              "PARTIALS_LOCAL": pl, "PACKED": pk, "SPLIT_PAIRS": sp, "ROTATE": int(pl == sp), "CHUNKED": 1 - pl}
             for (pl, pk, sp), g in zip(_LOCAL_PACKED, itertools.cycle((1, groups)))]
    fixed += [{**c, "ROTATE": 1 - c["ROTATE"], "NUM_WI_grp": 2 if groups % 2 == 0 else 1} for c in fixed]
    # ROW_WORDS where rows are whole words: a group's bins as words, shifted where the group starts inside a word (by
    # 16 bits: the quarters' second and fourth groups, the wide halves' second; by 24, 16 and 8: the threes' groups),
    # rotated by word or not (over 3 words: the wide three-word groups, whose second starts mid-word)
    words = rh.row_words(n_bins, n_feat, feature_major)
    assert ("ROW_WORDS" in desc.switches) == bool(words)
    fixed += [{**c, "ROW_WORDS": 1} for c in fixed] if words else []
    local = [c for c in fixed if c["PARTIALS_LOCAL"]]
    fixed += [{**c, "FLAT": 1, "NUM_WG_node": 1, "NUM_WG_grp": 1, "NUM_WI_grp": 1, "NUM_WG_pos": wg}
              for c, wg in zip(local[::2], (3, 5, 7), strict=False)]
    if row_index:
        fixed += [{**c, "LOCAL_PAD": pad} for c, pad in zip(local, itertools.cycle((5, 6, 7, 8)))]
    else:  # FLAT with private accumulators (CPUs'): the line over every (node, group) run, work-items sharing it
        fixed += [{**c, "FLAT": 1, "NUM_WG_node": 1, "NUM_WG_grp": 1, "NUM_WG_pos": wg, "NUM_WI_pos": wi}
                  for c, (wg, wi) in zip([c for c in fixed if not c["PARTIALS_LOCAL"]],
                                         ((3, 16), (7, 1), (64, 1)), strict=False)]
    if desc.prefetch and device.type == "cpu":
        fixed = [{**c, "PREFETCH": i % 2} for i, c in enumerate(fixed)]
    for cfg in fixed + configs(desc, device, sizes, seed=54, n=2):
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, n_rows=n_rows, bins=stored, gh=gh,
                  **extra)
        got = got.reshape(len(counts), n_feat, n_out, n_bins)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), want, err_msg=str(cfg))



@pytest.mark.parametrize("n_feat, n_bins, groups, feature_major, precision, row_index, stride",
                         [(6, 17, 1, False, "double", False, 0), (6, 17, 3, False, "double", False, 0),
                          (8, 300, 2, False, "double", False, 0), (12, 256, 4, False, "double", False, 0),
                          (6, 17, 2, True, "double", False, 0), (8, 64, 4, False, "single", False, 0),
                          (12, 17, 1, False, "double", True, 0), (8, 300, 2, False, "double", True, 0),
                          (6, 17, 3, False, "double", True, 0), (12, 17, 1, False, "double", True, 16),
                          (8, 300, 2, False, "double", True, 12), (8, 300, 2, False, "double", True, 11),
                          (6, 17, 3, False, "double", True, 8)],
                         ids=["whole-row", "bytes-threes", "wide-halves", "quarters", "feature-major", "single",
                              "row-index", "row-index-wide-halves", "row-index-bytes-threes", "row-index-padded",
                              "row-index-padded-wide-halves", "row-index-padded-odd-words",
                              "row-index-padded-part-word-threes"])
def test_histogram_rows_real_adds_rows_in_the_references_order(device, n_feat, n_bins, groups, feature_major,
                                                               precision, row_index, stride):
    """The real-lane whole-row histogram (float64 or float32 (g, h), a group's features of every row per point): under
    the exact pins (one work-item folds a (node, group)'s rows in position order) every bin's sum is the reference's
    bit for bit in the node's (feat, output, bin) layout, whatever the groups, bins read as bytes or words, rows moved
    or read through the row index, with and without the prefetch (row-index builds), a row's (g, h) added as two
    scalars or as one vector (``PAIR_VEC``); rows of zero (g, h)
    (subsampling) are added too, as the reference's bincount adds them. Rows read through the row index may lie
    ``stride`` bins apart (padded rows, the padding random bins that no feature may read; rows read as words only
    where every padded row starts on a word, then also rows that end mid-word)."""
    if precision == "double" and not device.has_fp64:
        pytest.skip(f"{device.key} has no float64")
    n_rows, n_out = 1160, 2
    rng = np.random.default_rng(61)
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
    dtype = np.float64 if precision == "double" else np.float32
    g = rng.standard_normal((n_rows, n_out)).astype(dtype)
    h = (rng.random((n_rows, n_out)) * 0.25).astype(dtype)
    g[::7], h[::7] = 0.0, 0.0  # rows left out by subsampling
    counts = [257, 0, 129, 1, 513, 128]  # (with blocks of 64 rows: nodes of 1, 2, 3, 5 and 9 blocks)
    ridx, begin, count = grouped_rows(rng, n_rows, counts)
    desc = rhr.histogram_rows_real(n_bins, n_feat, n_out, groups, precision, feature_major, row_index,
                                   row_stride=stride)
    assert desc.name == "tree_histogram_rows_real" and "PARTIALS_LOCAL" not in desc.parameter_names()
    assert desc.prefetch == row_index
    sizes = {"node": len(counts), "grp": groups, "pos": max(counts)}
    ordered = bins if row_index else bins[ridx]  # a row-index build reads row ridx[p] at position p
    if stride:
        ordered = np.concatenate([ordered, rng.integers(0, n_bins, (n_rows, stride - n_feat)).astype(bins.dtype)], 1)
    stored = np.ascontiguousarray(ordered.T if feature_major else ordered).reshape(-1)
    gh = np.stack([g, h] if row_index else [g[ridx], h[ridx]], axis=-1).reshape(-1)
    extra = {"ridx": ridx.astype(np.int32)} if row_index else {}
    base = {f"NUM_{w}_{d}": 1 for d in ("node", "grp", "pos") for w in ("WG", "WI")}
    cfgs = [{**base, "NUM_WG_node": 2, "NUM_WG_grp": groups}, {**base, "NUM_WI_node": 2, "NUM_WG_grp": 1},
            {**base, "NUM_WG_node": 8, "NUM_WI_grp": groups}]
    words = rh.row_words(n_bins, n_feat, feature_major)
    if stride * bins.itemsize % 4:  # padded rows that do not all start on a word: read as bytes
        words = 0
    elif stride:  # padded rows on words: read as words, the last one's bins past the row padding
        words = -(-n_feat * bins.itemsize // 4)
    assert ("ROW_WORDS" in desc.switches) == bool(words)
    cfgs += [{**c, "ROW_WORDS": 1} for c in cfgs] if words else []
    if device.type == "cpu":  # moved rows' builds take INLINE, row-index builds PREFETCH
        cfgs = [{**c, "PREFETCH" if row_index else "INLINE": i % 2} for i, c in enumerate(cfgs)]
    assert "PAIR_VEC" in desc.switches  # (g, h) added as one two-lane vector: every configuration both ways
    cfgs += [{**c, "PAIR_VEC": 1} for c in cfgs]
    if precision == "double":  # the reference sums in float64; float32 lanes are compared to their own order below
        want = hg.histogram_reference(bins, g.astype(np.float64), h.astype(np.float64), ridx, begin, count, n_bins)
    else:  # float32: the same adds in the same order on the host
        want = np.zeros((len(counts), n_feat, n_out, n_bins, 2), np.float32)
        for i, (b0, c) in enumerate(zip(begin, count, strict=True)):
            for r in ridx[b0:b0 + c]:
                for k in range(n_out):
                    want[i, np.arange(n_feat), k, bins[r], 0] += g[r, k]
                    want[i, np.arange(n_feat), k, bins[r], 1] += h[r, k]
    whole = dict(part=("o", np.zeros(1, dtype), None), blocks=0)
    for cfg in cfgs:
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, n_rows=n_rows, bins=stored, gh=gh,
                  **extra, **whole)
        got = got.reshape(len(counts), n_feat, n_out, n_bins)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), want, err_msg=str(cfg))
    if precision == "double":  # each node's blocks of 64 rows in turn (blocks 1): the learner's blocked order
        _check_real_blocks(device, rhr.histogram_rows_real(n_bins, n_feat, n_out, groups, precision, feature_major,
                                                           row_index, block_rows=64, row_stride=stride),
                           cfgs[::3], sizes, dict(n_rows=n_rows, bins=stored, gh=gh, **extra), bins, g, h, ridx, begin,
                           count, n_bins)
    with pytest.raises(ValueError, match="dividing"):
        rhr.histogram_rows_real(n_bins, 7, 1, 2)
    with pytest.raises(ValueError, match="power of two"):
        rhr.histogram_rows_real(n_bins, n_feat, 1, 1, block_rows=48)
    with pytest.raises(ValueError, match="row_stride"):  # fewer bins a row than features, or rows that are not rows
        rhr.histogram_rows_real(n_bins, n_feat, 1, 1, row_index=True, row_stride=n_feat - 1)
    with pytest.raises(ValueError, match="row_stride"):
        rhr.histogram_rows_real(n_bins, n_feat, 1, 1, feature_major=True, row_stride=n_feat + 4)


def _check_real_blocks(device, desc, cfgs, sizes, inputs, bins, g, h, ridx, begin, count, n_bins, block_rows=64):
    """A real-lane whole-row build folding each node's blocks in turn (``blocks`` 1, under the exact pins): its output
    the blocked reference's sums bit for bit (each block's from zero, the blocks' in order), added up by the work-item
    itself, with the running sums of nodes of more than one block in ``part`` past the nodes' slots (``part`` starts
    as NaN: a running sum read before its first block was stored would show)."""
    n = len(count)
    want = np.zeros((n, bins.shape[1], g.shape[1], n_bins, 2))
    for i, (b0, c) in enumerate(zip(begin, count, strict=True)):
        for at in range(0, int(c), block_rows):
            part = hg.histogram_reference(bins, g, h, ridx, np.array([b0 + at]), np.array([min(block_rows, c - at)]),
                                          n_bins)
            want[i] = want[i] + part[0]
    assert int(np.max(count)) > 2 * block_rows  # (a node of three blocks or more: a running sum added to)
    cells = bins.shape[1] * g.shape[1] * n_bins  # a node's (g, h) cells
    for cfg in cfgs:
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, blocks=1,
                  part=("o", np.full(2 * n * cells * 2, np.nan), None), **inputs)
        got = got.reshape(n, bins.shape[1], g.shape[1], n_bins)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), want, err_msg=str(cfg))


def test_real_groups_give_every_compute_unit_work(cpu):
    """The groups of a real-lane build: the fewest dividing the features with a (node, group) for every compute unit,
    a feature each where no divisor reaches them; more where a group's histogram would not fit half the local memory,
    none where one feature's does not."""
    from types import SimpleNamespace

    two = SimpleNamespace(compute_units=2, local_mem_size=256 * 1024)  # Intel's CPU runtime: 128 KB a histogram
    sixteen = SimpleNamespace(compute_units=16, local_mem_size=1 << 20)
    assert [rhr.real_groups(two, 28, n, 64 * 16) for n in (1, 2, 8)] == [2, 1, 1]
    assert [rhr.real_groups(sixteen, 28, n, 64 * 16) for n in (1, 2, 8, 64)] == [28, 14, 2, 1]
    assert rhr.real_groups(sixteen, 7, 1, 64 * 16) == 7
    # 256 bins of float64 (g, h): 4 KB a feature, 28 of them fit 128 KB; ten outputs' 40 KB a feature take 14 groups
    assert rhr.real_groups(two, 28, 8, 256 * 16) == 1
    assert rhr.real_groups(two, 28, 8, 10 * 256 * 16) == 14
    assert rhr.real_groups(two, 28, 1, 1 << 20) == 0  # not even a feature's: a feature per lane

def test_feature_groups_fit_local_memory(cpu):
    """The fewest equal groups whose histogram fits a work-group's local memory (a GPU's beside the 16 KB that FLAT
    takes at 1024 work-items and the pads, half of a CPU's): one where the whole row's does, a divisor of the features
    otherwise, none where one feature's does not; a description of one group or of groups that do not divide the
    features is refused."""
    from types import SimpleNamespace

    nv = SimpleNamespace(local_mem_size=48 * 1024, type="gpu", max_work_group_size=1024)  # NVIDIA's
    assert rh.feature_groups(nv, 28, 1, 64) == 1
    assert rh.feature_groups(nv, 28, 1, 256) == 2  # 14 features x 256 bins x 8 bytes = 28 KB, + 17 KB of FLAT's, pads
    assert rh.feature_groups(nv, 75, 1, 64) == 3  # 37.5 KB whole would leave FLAT too little
    assert rh.feature_groups(nv, 29, 1, 256) == 29  # a prime: a feature a group
    assert rh.feature_groups(SimpleNamespace(local_mem_size=32 * 1024, type="gpu"), 28, 1, 256) == 4
    assert rh.feature_groups(SimpleNamespace(local_mem_size=64 * 1024, type="gpu"), 28, 1, 256) == 2
    assert rh.feature_groups(nv, 4, 1, 4096) == 0  # one feature's 32 KB leaves FLAT too little
    cpu48 = SimpleNamespace(local_mem_size=48 * 1024, type="cpu")
    assert rh.feature_groups(cpu48, 28, 1, 256) == 4  # half of a CPU's
    assert rh.feature_groups(cpu48, 4, 1, 4096) == 0
    with pytest.raises(ValueError, match="dividing"):
        rh.histogram_groups(256, 28, 1, 3)
    with pytest.raises(ValueError, match="at least 2"):
        rh.histogram_groups(256, 28, 1, 1)



def test_private_flat_zeroes_and_keeps_gpu_sources(device):
    """FLAT with private accumulators (``flat="private"``, moved rows: CPUs' builds): a bound launch into an output
    holding garbage, twice and then for fewer nodes, gives the reference each time (its zero kernel clears what the
    pieces cut by a share's end add into; whole nodes are stored); FLAT without local partials is refused where a
    description offers only the local form, whose source (the row-index builds GPUs tuned) has neither the private
    fold nor the zero kernel; any other value of ``flat`` is refused."""
    from mdhom import mdh
    from mdhom.mdh import DescriptionError
    from mdhom.mdh.codegen import generate

    rng = np.random.default_rng(57)
    n_feat, n_bins, n_out = 8, 17, 1
    counts = rng.integers(0, 90, 23)
    counts[[3, 4]] = 0
    counts[9] = 700  # a node longer than a share: cut by several shares' ends
    n_rows = int(counts.sum())
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
    gq, hq = _quantized_gh(rng, n_rows, n_out)
    begin = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
    want = hg.histogram_reference(bins, gq, hq, np.arange(n_rows), begin, counts, n_bins)
    desc = rh.histogram_rows(n_bins, n_feat, n_out, False, False)
    indexed = rh.histogram_rows(n_bins, n_feat, n_out, False, True)
    assert desc.flat_private and not indexed.flat_private and indexed.flat
    assert "void tree_histogram_rows_zero(" in generate(desc)
    assert "_zero(" not in generate(indexed).replace("atom_zero(", "")
    base = {f"NUM_{w}_{d}": 1 for d in ("node", "pos") for w in ("WG", "WI")}
    cfg = {**base, "NUM_WG_pos": 5, "NUM_WI_pos": 2, "PARTIALS_LOCAL": 0, "FLAT": 1, "PACKED": 1, "CHUNKED": 1,
           "NUM_WI_COMBINE": 4}
    with pytest.raises(ConfigError, match="FLAT=1"):
        indexed.check_config({**cfg, "LOCAL_PAD": 0}, device)
    q = device.queue
    comp = build_within_limits(desc, device, cfg)
    d_bins = cl_array.to_device(q, bins.reshape(-1))
    d_gh = cl_array.to_device(q, np.stack([gq, hq], axis=-1).reshape(-1))
    d_begin, d_count = cl_array.to_device(q, begin), cl_array.to_device(q, counts.astype(np.int32))
    out = cl_array.to_device(q, np.full(counts.size * n_feat * n_out * n_bins * 2, -7, np.int32))
    bound = comp.bind(out, bins=d_bins, gh=d_gh, slot_begin=d_begin, slot_count=d_count)
    for n in (counts.size, counts.size, 11):
        bound({"node": n, "pos": int(counts[:n].max())}, n_rows=n_rows)
        got = out.get()[: n * n_feat * n_out * n_bins * 2].reshape(n, n_feat, n_out, n_bins, 2)
        np.testing.assert_array_equal(got, want[:n], err_msg=f"{n} nodes")
    with pytest.raises(DescriptionError, match="flat must be"):
        mdh.Description("bad", ["i"], [mdh.Reduce(mdh.SUM)], "int", "out = x;", [mdh.Input("x", "int", ("i",))],
                        flat="local")

def test_histogram_rows_flat_spans_windows(device):
    """FLAT over more nodes than one prefix window holds (FLAT_SPAN): each window's runs laid end to end and shared
    out again, empty nodes and nodes of one row among them, more work-groups than some windows have rows."""
    from mdhom.mdh.parts import FLAT_SPAN

    rng = np.random.default_rng(49)
    n_nodes, n_feat, n_bins, n_out = FLAT_SPAN + 77, 5, 17, 1
    counts = rng.integers(0, 5, n_nodes)
    counts[FLAT_SPAN - 3: FLAT_SPAN + 40] = 0  # the second window starts among empty nodes
    counts[7] = 300
    n_rows = int(counts.sum())
    bins = rng.integers(0, n_bins, size=(n_rows, n_feat)).astype(bin_dtype(n_bins))
    gq, hq = _quantized_gh(rng, n_rows, n_out)
    ridx, begin, count = grouped_rows(rng, n_rows, counts)
    want = hg.histogram_reference(bins, gq, hq, ridx, begin, count, n_bins)
    desc = rh.histogram_rows(n_bins, n_feat, n_out, False, True)
    sizes = {"node": n_nodes, "pos": int(counts.max())}
    gh = np.stack([gq, hq], axis=-1).reshape(-1)
    base = {f"NUM_{w}_{d}": 1 for d in ("node", "pos") for w in ("WG", "WI")}
    for wg, wi, packed, split, chunked, pad in ((3, 16, 0, 1, 0, 5), (64, 8, 1, 0, 1, 6), (1, 32, 0, 0, 0, 0)):
        cfg = {**base, "NUM_WG_pos": wg, "NUM_WI_pos": wi, "PARTIALS_LOCAL": 1, "FLAT": 1, "PACKED": packed,
               "SPLIT_PAIRS": split, "CHUNKED": chunked, "ROTATE": 1, "LOCAL_PAD": pad}
        got = run(desc, device, cfg, sizes, slot_begin=begin, slot_count=count, n_rows=n_rows,
                  bins=bins.reshape(-1), gh=gh, ridx=ridx.astype(np.int32))
        got = got.reshape(n_nodes, n_feat, n_out, n_bins)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], axis=-1), want, err_msg=str(cfg))


def test_histogram_class_of_a_bound_is_a_flat_build():
    """Levels split on the device know only a bound on a node's rows (the last host step's largest node): their
    whole-row builds are chosen by the rows a node holds about, among the FLAT builds, which share out the rows
    there are; with the exact longest range the rule is the class of the most rows at or below it."""
    from mdhom.components.histogram_builder import row_class, row_classes

    classes = row_classes(10_500_000)
    assert [c for c, _ in classes] == [1, 8, 64, 512]
    grid_only, flat_deep = [False] * 4, [False, False, True, True]
    assert row_class(classes, flat_deep, 10_500_000, 10_500_000) == 0
    assert row_class(classes, flat_deep, 10_500_000, 3_000_000) == 1
    assert row_class(classes, flat_deep, 10_500_000, 170_000) == 2
    # the root's rows as the bound of 64 children of about 80k rows each
    assert row_class(classes, flat_deep, 10_500_000, 10_500_000, per_node=80_000) == 3
    assert row_class(classes, flat_deep, 10_500_000, 10_500_000, per_node=2_000_000) == 2  # the first FLAT one
    assert row_class(classes, grid_only, 10_500_000, 10_500_000, per_node=2_000_000) == 1  # no FLAT: by rows
    assert row_class(classes, flat_deep, 10_500_000, 1_000, per_node=80_000) == 3  # never above the bound
    assert row_class(classes[:1], [False], 500, 500, per_node=10) == 0


def test_quantize_and_absmax(device):
    """The round's scale: max |g|, |h| (NaN shows as NaN) and rint(x * 2^k), bit for bit the reference's."""
    rng = np.random.default_rng(43)
    n, k = 1031, 3
    gh = np.stack([rng.standard_normal((n, k)) * 3, rng.random((n, k))], -1)
    gh[5, 1, 0] = -7.5  # the largest |g| is negative
    gh[::7, :, :] = 0.0
    gh[9, 2, 0] = 2.0**-1074  # subnormal
    absmax, quant = gr.gh_absmax(), gr.quantize_gh()
    want_max = np.abs(gh).max(axis=0)
    for cfg in configs(absmax, device, {"pos": n, "output": k}, seed=44):
        got = gr.absmax_values(run(absmax, device, cfg, {"pos": n, "output": k}, gh=gh))
        np.testing.assert_array_equal(got, want_max, err_msg=str(cfg))
    scale, inv = qz.quantization_scales(qz.quantization_exponents(want_max, n))
    bound = 2.0**QUANT_BITS
    assert np.all(n * want_max * scale <= bound) and np.all(n * want_max * scale * 2 > bound)
    ties = gh.copy()  # products on exact halves, both signs: rint's ties to even, not away from zero
    for j, t in enumerate((0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5)):
        ties[20 + j, :, 0] = t / scale[:, 0]
        ties[30 + j, :, 1] = abs(t) / scale[:, 1]
    want_g, want_h = qz.quantize(ties[..., 0], scale[:, 0]), qz.quantize(ties[..., 1], scale[:, 1])
    assert want_g[20:27, 0].tolist() == [0, 0, 2, -2, 2, -2, 4]
    for cfg in configs(quant, device, {"pos": n, "output": k}, seed=45):
        got = run(quant, device, cfg, {"pos": n, "output": k}, gh=ties, scale=scale)
        np.testing.assert_array_equal(got["g"], want_g, err_msg=str(cfg))
        np.testing.assert_array_equal(got["h"], want_h, err_msg=str(cfg))
    bad = gh.copy()
    bad[3, 0, 1] = np.nan
    bad[4, 0, 1] = bad[900, 0, 1] = np.inf  # NaN above +inf, before and after it
    bad[7, 1, 0] = -np.inf
    bad[11, 2, 0] = np.copysign(np.nan, -1.0)  # a NaN with the sign bit: |x| keeps it a NaN
    signed_zeros = np.zeros((n, k, 2))
    signed_zeros[::3] = -0.0  # |-0| is +0: no sign bit in the maximum
    for cfg in configs(absmax, device, {"pos": n, "output": k}, seed=46):  # NaN and inf across work-groups
        got = gr.absmax_values(run(absmax, device, cfg, {"pos": n, "output": k}, gh=bad))
        assert np.isnan(got[0, 1]) and np.isposinf(got[1, 0]) and got[0, 0] == want_max[0, 0], cfg
        assert np.isnan(got[2, 0]) and got[2, 1] == want_max[2, 1], cfg
        zero = gr.absmax_values(run(absmax, device, cfg, {"pos": n, "output": k}, gh=signed_zeros))
        assert not zero.view(np.int64).any(), cfg
    with pytest.raises(ValueError, match="not finite"):
        qz.quantization_exponents(got, n)


def test_quantization_exponent_is_the_rational_bound():
    """The host's exponent (integer arithmetic on the double's mantissa) is the largest k with n * m * 2^k <= 2^30,
    checked with rationals: every kind of double and row count, and k off by one either way fails."""
    from fractions import Fraction

    def rational(m: float, n: int) -> int:
        if m == 0.0:
            return 0
        bound, val = Fraction(2) ** QUANT_BITS, Fraction(m) * max(1, n)
        k = QUANT_BITS - math.frexp(m)[1] - max(1, n).bit_length()
        while val * Fraction(2) ** k > bound:
            k -= 1
        while val * Fraction(2) ** (k + 1) <= bound:
            k += 1
        return max(-qz.MAX_EXPONENT, min(qz.MAX_EXPONENT, k))

    rng = np.random.default_rng(46)
    tiny = 2.0**-1074
    vals = [0.0, tiny, 3 * tiny, 2.0**-1022 - tiny, 2.0**-1022, 0.25, 0.5, 1.0, 3.0, 1e300, np.finfo(np.float64).max]
    vals += [float(np.nextafter(2.0**e, d)) for e in (-40, -3, 0, 1, 30, 52) for d in (0.0, np.inf)]
    vals += (10.0 ** rng.uniform(-320, 308, 60)).tolist() + (rng.random(60) * 2.0 ** rng.integers(-60, 60, 60)).tolist()
    for n in (0, 1, 2, 3, 1031, 500_000, 10_500_000, 2**31 - 1, 2**40 + 17):
        for m in vals:
            assert qz.quantization_exponent(m, n) == rational(m, n), (m, n)
    with pytest.raises(ValueError, match="not finite"):
        qz.quantization_exponent(float("nan"), 10)


def test_gh_scale(device):
    """The round's scales made on the device (tree_gh_scale): 2^k and 2^-k with k the reference's exponent for every
    kind of double (zero, subnormal, normal, the largest, around powers of two) and row count (none to 2^31 - 1);
    a non-finite maximum gives k = 0 there (the host refuses it)."""
    rng = np.random.default_rng(47)
    tiny, big = 2.0**-1074, np.finfo(np.float64).max
    edges = [0.0, tiny, 3 * tiny, 2.0**-1022 - tiny, 2.0**-1022, 0.5, 1.0, 3.0, 7.5, 1e300, big]
    edges += [np.nextafter(2.0**e, d) for e in (-3, 0, 1, 30, 52) for d in (0.0, np.inf)]
    vals = np.concatenate([edges, 10.0 ** rng.uniform(-320, 308, 40), rng.random(20) * 2.0 ** rng.integers(-60, 60, 20)])
    vals = np.abs(np.concatenate([vals[: vals.size // 2 * 2], [np.nan, np.inf]]))
    k = vals.size // 2
    desc = gr.gh_scale()
    for n_rows in (0, 1, 3, 1031, 10_500_000, 2**31 - 1):
        exps = np.array([0 if not np.isfinite(m) else qz.quantization_exponent(float(m), n_rows) for m in vals])
        for cfg in configs(desc, device, {"output": k, "lane": 2}, seed=48 + n_rows % 7):
            # inv_scale written by the same launch, each (output, lane) its own place; the rest left alone
            got, written = run_writing(desc, device, cfg, {"output": k, "lane": 2}, absmax=vals.view(np.uint64),
                                       inv=("o", np.full(2 * k + 3, -7.0), "double"), n_rows=n_rows)
            inv = written["inv"]
            np.testing.assert_array_equal(got, np.ldexp(1.0, exps).reshape(k, 2), err_msg=f"{n_rows} {cfg}")
            np.testing.assert_array_equal(inv[: 2 * k], np.ldexp(1.0, -exps), err_msg=f"{n_rows} {cfg}")
            assert (inv[2 * k:] == -7.0).all()


@pytest.mark.parametrize("params", [SplitParams(1.0, 0.0, 0.0, 1.0), SplitParams(0.5, 0.75, 0.25, 0.0)],
                         ids=["plain", "l1-gamma"])
def test_split_kernels_quantized(device, params):
    """Integer scans under any configuration, then gains and sums from int32 sums exactly as the reference."""
    from mdhom.trees import reference as ref

    rng = np.random.default_rng(45)
    n_nodes, n_feat, n_out, n_bins = 4, 6, 2, 17
    # lanes whose sums over all bins stay within the quantisation bound 2^30, as a round's histograms do
    hist = rng.integers(-2**25, 2**25, size=(n_nodes, n_feat, n_out, n_bins, 2)).astype(np.int32)
    hist[..., 1] = np.abs(hist[..., 1])
    hist[np.broadcast_to(rng.random((n_nodes, n_feat, 1, n_bins, 1)) < 0.3, hist.shape)] = 0
    hist[0] = 0
    inv = np.ldexp(1.0, -rng.integers(23, 29, size=(n_out, 2)))
    scan_d = sp.split_scan(n_bins, "quantized")
    sizes = {"node": n_nodes, "feat": n_feat, "output": n_out, "bin": n_bins}
    want_scan = sp.split_scan_reference(hist)
    for cfg in configs(scan_d, device, sizes, seed=46):
        got = run(scan_d, device, cfg, sizes, hist=hist)
        np.testing.assert_array_equal(np.stack([got["g"], got["h"]], -1), want_scan, err_msg=str(cfg))
    mask = np.ones(n_feat, bool)
    mask[1] = False
    want = ref.best_splits(np.ascontiguousarray(hist.transpose(0, 1, 3, 2, 4)), mask, params, inv)
    score, sums = sp.split_score(n_bins, n_out, "quantized"), spr.split_sums(n_bins, n_out, "quantized")
    ssizes = {"node": n_nodes, "feat": n_feat, "bin": n_bins - 2, "dir": 2}
    stride, _, _ = spr.best_layout("quantized")
    for cfg in configs(score, device, ssizes, seed=47):
        best = run(score, device, cfg, ssizes, scan=want_scan, hist=hist, feature_mask=mask.astype(np.uint8),
                   inv_scale=("o", inv, None), reg_lambda=params.reg_lambda, reg_alpha=params.reg_alpha,
                   min_split_gain=params.min_split_gain, min_child_weight=params.min_child_weight)
        finite = np.isfinite(want.gain)
        np.testing.assert_array_equal(best["value"][finite], want.gain[finite], err_msg=str(cfg))
        assert np.isneginf(best["value"][~finite]).all()
        lr = run(sums, device, None, {"node": n_nodes, "output": n_out}, scan=("o", want_scan, None),
                 hist=("o", hist, None), best=best.view(np.int32).reshape(n_nodes, stride),
                 best_value=("o", best.view(np.float64), None), inv_scale=("o", inv, None), n_feat=n_feat)
        np.testing.assert_array_equal(np.stack([lr["lg"], lr["lh"]], -1)[finite], want.left_sum[finite])
        np.testing.assert_array_equal(np.stack([lr["rg"], lr["rh"]], -1)[finite], want.right_sum[finite])
        np.testing.assert_array_equal(np.stack([lr["tg"], lr["th"]], -1), want.total)
