"""The sampled forest level (mdhom.forests.sampled) against its numpy references on every device: the candidate
draw (constant features, the fallback past the draw, per-tree masks), the histogram of candidates, the candidate
split; the pair choosing the dense node split's split; whole forests grown sampled equal to the reference; Oclgrind.
"""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest

from mdhom import mdh
from mdhom.forests import grower as G
from mdhom.forests import histogram as H
from mdhom.forests import sampled as SM
from mdhom.forests import split as S
from mdhom.testing import run_under_oclgrind

N, F, T, B = 301, 9, 3, 13


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not tuned.*")
        yield


def _data(rng: np.random.Generator):
    """Bins with constant and nearly constant features, and slots of unequal sizes (one of 1 row, one empty)."""
    bins = rng.integers(0, B, (N, F)).astype(np.uint8)
    bins[:, 2] = 4  # constant everywhere
    bins[:, 5] = (rng.random(N) < 0.02) * 3  # constant in most small nodes
    bins[:, 7] = rng.integers(0, 2, N)
    weight = rng.integers(0, 3, (T, N)).astype(np.int32)
    order = np.argsort(weight == 0, axis=1, kind="stable").astype(np.int32)
    cnt = (weight > 0).sum(1)
    begin, count, tree = [], [], []
    for t in range(T):
        cuts = [0, 1, 3, 8, cnt[t] // 3, cnt[t]]
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            begin.append(t * N + a)
            count.append(0 if (t == 1 and a == 3) else b - a)
            tree.append(t)
    slots = tuple(np.array(v, np.int32) for v in (begin, count, tree))
    return bins, weight, order, slots


def _run(desc, device, sizes, **args):
    return mdh.build_within_limits(desc, device, None)(sizes=sizes, **args)


@pytest.mark.parametrize("masked", [False, True])
def test_candidates_match_reference(device, masked):
    rng = np.random.default_rng(4)
    bins, weight, order, (sb, sc, st) = _data(rng)
    seed = rng.integers(0, 2**32, len(sb), dtype=np.uint32)
    node = rng.integers(0, 50, len(sb)).astype(np.int32)
    mask = (rng.random((T, F)) < 0.7).astype(np.uint8)
    mask[:, 0] = 1
    width = SM.cand_width(4)
    extra = {"slot_tree": st, "feat_mask": mask.reshape(-1)} if masked else {}
    fallback = 0
    for max_features in (1, 2, 4):
        got = _run(SM.candidates(B, F, width, masked), device, {"slot": len(sb)}, bins=bins.T.reshape(-1),
                   order=order.reshape(-1), slot_begin=sb, slot_count=sc, slot_seed=seed, slot_node=node,
                   n_rows=np.int32(N), max_features=np.int32(max_features), **extra)
        ref = SM.candidates_reference(bins, order, sb, sc, seed, node, max_features, width,
                                      mask[st] != 0 if masked else None)
        assert np.array_equal(got.reshape(ref.shape), ref)
        assert (ref[:, 0] == 0).any() and (ref[:, 0] == min(max_features, F)).any()
        fallback += int(((ref[:, 0] == 1) & (max_features > 1)).sum())
    assert fallback  # some node drew only constant features and took the first non-constant one after them


@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_sampled_level_chooses_the_dense_split(device, criterion):
    """candidates -> slot totals -> histograms of the large slots' candidates -> the split of every candidate
    (histogram or row scan) -> the candidate split gives node_split_reference's records on the dense histograms,
    bit for bit (the sampled level's whole claim)."""
    rng = np.random.default_rng(8)
    bins, weight, order, (sb, sc, st) = _data(rng)
    lane = "long" if criterion == "squared_error" else "int"
    per_tree = None
    if lane == "int":  # per-tree targets: tree t reads its 2 class lanes from column 2 * (t % 2) of 4
        stat, outputs = np.eye(2, dtype=np.int32)[rng.integers(0, 2, (N, 2))].reshape(N, 4), (2,)
        per_tree = H.PerTree(np.array([0, 2, 0], np.int32), np.ones((T, F), np.uint8), 2)
    else:
        stat, outputs = rng.integers(-2**40, 2**40, (N, 1)).astype(np.int64), (1,)
    dtype = np.int32 if lane == "int" else np.int64
    xlogx = S.xlogx_table(int(weight.sum(1).max()) if criterion == "entropy" else 0)
    seed = rng.integers(0, 2**32, len(sb), dtype=np.uint32)
    node = np.arange(len(sb), dtype=np.int32)
    dense = H.histogram_reference(bins, stat, weight, order, sb, sc, st, B, per_tree)
    totals = S.node_totals_reference(dense)
    fs_dense = S.feature_split_reference(dense, outputs, criterion, 2, xlogx)
    common = dict(stat=stat.reshape(-1), weight=weight.reshape(-1), order=order.reshape(-1), slot_begin=sb,
                  slot_count=sc, slot_tree=st, n_rows=np.int32(N))
    if per_tree is not None:
        common.update(tree_col=per_tree.column, stat_stride=np.int32(stat.shape[1]))
    d_tot = SM.slot_totals(lane, outputs, per_tree is not None)
    for cfg in (None, {"NUM_WI_slot": 1, "NUM_WI_lane": 1, "NUM_WI_pos": 16, "NUM_WG_slot": 4, "NUM_WG_pos": 1}):
        tot = mdh.build_within_limits(d_tot, device, cfg)(
            sizes={"slot": len(sb), "lane": dense.shape[-1], "pos": int(sc.max())}, **common)
        assert np.array_equal(tot, totals)  # one work-item per slot, or 16 sharing its rows (the GPU heuristic)
    assert np.array_equal(SM.slot_totals_reference(stat, weight, order, sb, sc, st, per_tree), totals)
    large = np.flatnonzero(sc > 5).astype(np.int32)  # the others find their cuts from their rows
    index = np.full(len(sb), -1, np.int32)
    index[large] = np.arange(large.size)
    for max_features in (1, 3):
        width = SM.cand_width(max_features)
        cand = SM.candidates_reference(bins, order, sb, sc, seed, node, max_features, width)
        args = {**common, "slot_begin": sb[large], "slot_count": sc[large], "slot_tree": st[large]}
        hist = _run(H.histogram(B, lane, outputs, per_tree is not None, cand_width=width), device,
                    {"slot": large.size, "feat": max_features, "pos": int(sc.max())}, bins=bins.T.reshape(-1),
                    cand=cand.reshape(-1), slot_id=large, **args)
        hist = hist.reshape(large.size, max_features, B, -1)
        folded = np.arange(max_features)[None, :] < np.maximum(cand[large, :1], 1)
        want = np.where(folded[:, :, None, None], dense[large[:, None], cand[large, 1:1 + max_features]], 0)
        assert np.array_equal(hist, want)
        fs = _run(SM.sampled_split(B, lane, outputs, criterion, width, per_tree is not None, small=5), device,
                  {"slot": len(sb), "feat": max_features}, hist=hist.astype(dtype).reshape(-1), hist_index=index,
                  cand=cand.reshape(-1), bins=bins.T.reshape(-1), xlogx=xlogx, n_bins=np.int32(B),
                  min_leaf=np.int32(2), **common)
        fs_ref = SM.sampled_split_reference(bins, stat, weight, order, sb, sc, st, cand, max_features, B, outputs,
                                            criterion, 2, xlogx, per_tree)
        assert fs.tobytes() == fs_ref.tobytes()  # row scans and histograms give the same records
        got = _run(SM.cand_split(lane, outputs, criterion, width), device, {"slot": len(sb)},
                   fsplit=fs.view(np.int32).reshape(-1), totals=totals.astype(dtype).reshape(-1),
                   cand=cand.reshape(-1), xlogx=xlogx, n_cand=np.int32(max_features))
        ref = SM.cand_split_reference(fs_ref, totals, cand, outputs, criterion, xlogx)
        assert got.tobytes() == ref.tobytes()
        dense_ns = S.node_split_reference(fs_dense, totals, seed, node, max_features, outputs, criterion, xlogx)
        assert ref.tobytes() == dense_ns.tobytes()
        assert (ref["feat"] >= 0).sum() >= 3 and (ref["feat"][index < 0] >= 0).any()


def test_sampled_forest_grows_identically(device):
    from mdhom.forests.opencl_backend import OpenCLForest

    rng = np.random.default_rng(12)
    n = 300
    X = rng.normal(size=(n, 10))
    bins = np.clip((X * 3 + 8).astype(int), 0, 14).astype(np.uint8)
    bins[:, 3] = 7
    bins[:, 6] = X[:, 6] > 1.5
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    stat = np.eye(2, dtype=np.int32)[y]
    w = G.Bag(rng.integers(0, 2**64, 4, dtype=np.uint64), n, n, True, np.ones(n, np.int32))
    seeds = rng.integers(0, 2**32, 4, dtype=np.uint32)
    for max_features in (1, 3):
        spec = G.GrowSpec((2,), "gini", None, 2, 1, max_features)
        a = G.grow(G.NumpyForest(), bins, 16, stat, w, seeds, spec)
        backend = OpenCLForest(device)
        b = G.grow(backend, bins, 16, stat, w, seeds, spec)
        assert backend.sampled
        for k in ("offsets", "feature", "split_bin", "left", "totals", "gain"):
            assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert SM.use_sampled(3, 10) and not SM.use_sampled(6, 10) and not SM.use_sampled(65, 1000)


class _SearchingDeepest(G.NumpyForest):
    """The grower as it was: the deepest level searched like any other (its splits then thrown away), its totals
    from the histograms."""

    spec: G.GrowSpec

    def totals(self, slots):  # noqa: ANN001, ANN201
        return self.level(slots, self.spec, True)[0]


def _count_calls(obj: object, names: tuple[str, ...]) -> dict[str, int]:
    calls = dict.fromkeys(names, 0)

    def wrap(name: str):  # noqa: ANN202
        f = getattr(obj, name)

        def counted(*a):  # noqa: ANN001, ANN202
            calls[name] += 1
            return f(*a)
        return counted

    for name in names:
        setattr(obj, name, wrap(name))
    return calls


@pytest.mark.parametrize("criterion", ["gini", "squared_error"])
def test_deepest_level_takes_totals_only(device, criterion):
    """At max_depth the grower asks for the level's totals only (one slot_totals launch and one read, whatever
    the histogram budget), and the trees are those of a search of that level: dense and sampled backends."""
    from mdhom.forests.opencl_backend import OpenCLForest

    rng = np.random.default_rng(21)
    n, depth = 400, 3
    X = rng.normal(size=(n, 8))
    bins = np.clip((X * 3 + 8).astype(int), 0, 14).astype(np.uint8)
    y = X[:, 0] + X[:, 1] * X[:, 2]
    if criterion == "gini":
        stat, outputs = np.eye(2, dtype=np.int32)[(y > 0).astype(int)], (2,)
    else:
        stat, outputs = np.rint((y - y.mean()) * 2**20).astype(np.int64)[:, None], (1,)
    w = G.Bag(rng.integers(0, 2**64, 3, dtype=np.uint64), n, n, True, np.ones(n, np.int32))
    seeds = rng.integers(0, 2**32, 3, dtype=np.uint32)
    for max_features in (2, 8):
        spec = G.GrowSpec(outputs, criterion, depth, 2, 1, max_features)
        ref_backend = _SearchingDeepest()
        ref_backend.spec = spec
        ref = G.grow(ref_backend, bins, 16, stat, w, seeds, spec)
        assert int(ref.depth.max()) == depth
        for backend in (G.NumpyForest(), OpenCLForest(device)):
            calls = _count_calls(backend, ("level", "totals"))
            got = G.grow(backend, bins, 16, stat, w, seeds, spec)
            for k in ("offsets", "feature", "split_bin", "left", "totals", "gain", "depth"):
                assert np.array_equal(getattr(ref, k), getattr(got, k)), k
            assert calls == {"level": depth, "totals": 1}


def test_sampled_kernels_clean_under_oclgrind(oclgrind_device):
    code = textwrap.dedent("""
        import numpy as np
        from mdhom.forests import grower as G
        from mdhom.forests.opencl_backend import OpenCLForest
        rng = np.random.default_rng(5)
        n = 53
        for crit, stat, outs in (("entropy", np.eye(3, dtype=np.int32)[rng.integers(0, 3, n)], (3,)),
                                 ("squared_error", rng.integers(-2**40, 2**40, (n, 1)), (1,))):
            bins = rng.integers(0, 7, (n, 6)).astype(np.uint8)
            bins[:, 1] = 2
            w = G.Bag(rng.integers(0, 2**64, 2, dtype=np.uint64), n, n, True, np.ones(n, np.int32))
            seeds = rng.integers(0, 2**32, 2, dtype=np.uint32)
            spec = G.GrowSpec(outs, crit, 4, 2, 1, 2)
            a = G.grow(G.NumpyForest(), bins, 8, stat, w, seeds, spec)
            backend = OpenCLForest("oclgrind")
            b = G.grow(backend, bins, 8, stat, w, seeds, spec)
            assert backend.sampled
            assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("feature", "split_bin", "totals", "gain"))
            assert (a.feature >= 0).sum() >= 3
        print("ok")
    """)
    run = run_under_oclgrind(code, timeout=900)
    assert run.clean, run.explain()
    assert "ok" in run.stdout
