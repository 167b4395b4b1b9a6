"""The forest's md_hom kernels against their numpy references on every device, the generator's ragged and
scatter capabilities they rest on, and a whole forest grown under Oclgrind."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from mdhom import mdh
from mdhom.forests import grower as G
from mdhom.forests import histogram as H
from mdhom.forests import partition as P
from mdhom.forests import split as S
from mdhom.forests import walk_kernels as WK
from mdhom.testing import run_under_oclgrind

# awkward sizes: not multiples of any work-group size
N, F, T, B = 301, 5, 3, 13


def _data(rng: np.random.Generator, lane: str = "int"):
    bins = rng.integers(0, B, (N, F)).astype(np.uint8)
    if lane == "int":
        stat = np.eye(3, dtype=np.int32)[rng.integers(0, 3, N)]
    else:
        stat = rng.integers(-2**40, 2**40, (N, 1)).astype(np.int64)
    weight = rng.integers(0, 3, (T, N)).astype(np.int32)
    order = np.argsort(weight == 0, axis=1, kind="stable").astype(np.int32)
    cnt = (weight > 0).sum(1)
    begin, count, tree = [], [], []
    for t in range(T):  # three slots per tree of unequal sizes (one empty)
        a, b = cnt[t] // 5, cnt[t] // 5 + cnt[t] // 2
        begin += [t * N, t * N + a, t * N + b]
        count += [a, b - a, 0 if t == 1 else cnt[t] - b]
        tree += [t] * 3
    slots = tuple(np.array(v, np.int32) for v in (begin, count, tree))
    return bins, stat, weight, order, slots


def _comp(desc, device, config=None):
    """A build; a partial ``config`` leaves the other dimensions one work-item wide (the device default may
    already fill a work-group: H100, 256 x 5 work-items is past its 1024)."""
    if config is not None:
        config = {**{f"NUM_WI_{d}": 1 for d in desc.dim_names}, **config}
    return mdh.build_within_limits(desc, device, config)


@pytest.mark.parametrize("lane", ["int", "long"])
@pytest.mark.parametrize("config", [None, {"NUM_WG_slot": 3, "NUM_WG_feat": 2, "NUM_WI_pos": 5, "NUM_WG_pos": 3,
                                           "NUM_WI_COMBINE": 7}])
def test_histogram_matches_reference(device, lane, config):
    rng = np.random.default_rng(3)
    bins, stat, weight, order, (sb, sc, st) = _data(rng, lane)
    outputs = (3,) if lane == "int" else (1,)
    desc = H.histogram(B, lane, outputs)
    cfg = config or H.histogram_heuristic(desc, device, {"slot": len(sb), "feat": F, "pos": int(sc.max())})
    out = _comp(desc, device, cfg)(sizes={"feat": F, "pos": int(sc.max())}, bins=bins.T.reshape(-1),
                                   stat=stat.reshape(-1), weight=weight.reshape(-1), order=order.reshape(-1),
                                   slot_begin=sb, slot_count=sc, slot_tree=st, n_rows=np.int32(N))
    ref = H.histogram_reference(bins, stat, weight, order, sb, sc, st, B)
    assert np.array_equal(out.reshape(ref.shape), ref)
    assert ref[5].sum() == 0 and ref[4].sum() > 0  # the empty slot stays empty; the others are not


def test_sibling_subtraction_matches_reference(device):
    rng = np.random.default_rng(9)
    prev = rng.integers(0, 1000, (5, 7, 3)).astype(np.int64)
    small = rng.integers(0, 100, (4, 7, 3)).astype(np.int64)
    pair = np.array([[3, 0], [0, 1], [4, 1], [1, 0]], np.int32)
    got = _comp(H.hist_siblings("long"), device, {"NUM_WI_cell": 5, "NUM_WG_cell": 3})(
        sizes={"slot": 8, "cell": 21}, small=small.reshape(-1), prev=prev.reshape(-1), pair=pair.reshape(-1))
    ref = H.hist_siblings_reference(small, prev, pair)
    assert np.array_equal(got.reshape(ref.shape), ref)
    assert np.array_equal(ref[0], small[0]) and np.array_equal(ref[1], prev[3] - small[0])
    assert np.array_equal(ref[3], small[1]) and np.array_equal(ref[2], prev[0] - small[1])


@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_split_kernels_match_reference(device, criterion):
    rng = np.random.default_rng(5)
    lane = "long" if criterion == "squared_error" else "int"
    outputs = (1,) if lane == "long" else (3,)
    bins, stat, weight, order, (sb, sc, st) = _data(rng, lane)
    hist = H.histogram_reference(bins, stat, weight, order, sb, sc, st, B)
    lanes = hist.shape[-1]
    xlogx = S.xlogx_table(int(weight.sum(1).max()) if criterion == "entropy" else 0)
    dtype = np.int32 if lane == "int" else np.int64
    flat = hist.astype(dtype).reshape(-1)
    tot = _comp(S.node_totals(lane), device)(sizes={"slot": len(sb), "lane": lanes, "bin": B}, hist=flat,
                                              n_feat=np.int32(F))
    totals = S.node_totals_reference(hist)
    assert np.array_equal(tot, totals)
    fs = _comp(S.feature_split(lane, outputs, criterion), device)(
        sizes={"slot": len(sb), "feat": F}, hist=flat, xlogx=xlogx, n_bins=np.int32(B), min_leaf=np.int32(2))
    fs_ref = S.feature_split_reference(hist, outputs, criterion, 2, xlogx)
    assert fs.tobytes() == fs_ref.tobytes()  # the same bits, scores included
    seed = rng.integers(0, 2**32, len(sb), dtype=np.uint32)
    node = np.arange(len(sb), dtype=np.int32)
    for max_features in (1, 2, F):
        ns = _comp(S.node_split(lane, outputs, criterion, F), device)(
            sizes={"slot": len(sb)}, fsplit=fs.view(np.int32).reshape(-1), totals=totals.astype(dtype).reshape(-1),
            slot_seed=seed, slot_node=node, xlogx=xlogx, max_features=np.int32(max_features))
        ref = S.node_split_reference(fs_ref, totals, seed, node, max_features, outputs, criterion, xlogx)
        assert ns.tobytes() == ref.tobytes()
        assert (ref["feat"] >= 0).sum() >= 2


def test_routing_and_partition_match_reference(device):
    rng = np.random.default_rng(7)
    bins, _, weight, order, (sb, sc, st) = _data(rng)
    # this level's slot of every (tree, row): the slot whose range holds it
    row_slot = np.full((T, N), -1, np.int32)
    flat = order.reshape(-1)
    for s, (b, c) in enumerate(zip(sb, sc, strict=True)):
        row_slot[b // N, flat[b:b + c]] = s
    # slots 0, 2, 3, 5 split (children 0..7), the others are leaves
    child = np.array([0, -1, 2, 4, -1, 6, -1, -1, -1], np.int32)
    tab = np.stack([rng.integers(0, F, 9), rng.integers(0, B, 9), child], 1).astype(np.int32)
    new = _comp(P.route(B), device)(sizes={"tree": T, "row": N}, row_slot=row_slot.reshape(-1),
                                    split_tab=tab.reshape(-1), bins=bins.T.reshape(-1))
    new_ref = P.route_reference(row_slot, tab, bins)
    assert np.array_equal(new.reshape(T, N), new_ref)
    scan = _comp(P.left_scan(), device, {"NUM_WG_pos": 3, "NUM_WI_pos": 7})(
        sizes={"tree": T, "pos": N}, order=order.reshape(-1), new_slot=new_ref.reshape(-1))
    scan_ref = P.left_scan_reference(order, new_ref)
    assert np.array_equal(scan.reshape(T, N), scan_ref)
    left = np.zeros(9, np.int32)
    for s in np.flatnonzero(child >= 0):
        left[s] = int((new_ref[sb[s] // N, flat[sb[s]:sb[s] + sc[s]]] % 2 == 0).sum())
    part = _comp(P.partition(), device)(sizes={"tree": T, "pos": N}, order=order.reshape(-1),
                                        row_slot=row_slot.reshape(-1), new_slot=new_ref.reshape(-1),
                                        scan=scan_ref.reshape(-1), split_tab=tab.reshape(-1), slot_begin=sb,
                                        split_left=left)
    part_ref = P.partition_reference(order, new_ref, tab, sb, sc)
    assert np.array_equal(part.reshape(T, N), part_ref)
    assert not np.array_equal(part_ref, order)  # rows did move
    assert all(sorted(p) == sorted(o) for p, o in zip(part_ref, order, strict=True))


@pytest.mark.parametrize("config", [None, {"NUM_WG_row": 3, "NUM_WI_row": 7, "NUM_WG_tree": 2}])
def test_bag_kernels_match_reference(device, config):
    """The root level from the weights: the bag order (in-bag rows ascending, then the others) by a prefix count
    and a scatter, and the root slots; trees with no row, every row and some rows in the bag."""
    from mdhom.forests.grower import bag_order

    rng = np.random.default_rng(11)
    weight = rng.integers(0, 3, (T + 1, N)).astype(np.int32)
    weight[1] = 0
    weight[2] = rng.integers(1, 4, N)
    sizes = {"tree": T + 1, "row": N}
    scan = _comp(P.bag_scan(), device, None if config is None else {"NUM_WG_row": 3, "NUM_WI_row": 7})(
        sizes=sizes, weight=weight.reshape(-1))
    flag = (weight > 0).astype(np.int64)
    assert np.array_equal(scan.reshape(T + 1, N), np.cumsum(flag, axis=1) - flag)
    order = _comp(P.bag_order(), device, config)(sizes=sizes, weight=weight.reshape(-1), scan=scan.reshape(-1))
    assert np.array_equal(order.reshape(T + 1, N), bag_order(weight > 0)[0])
    slots = _comp(P.bag_slots(), device, config)(sizes=sizes, weight=weight.reshape(-1))
    assert np.array_equal(slots.reshape(T + 1, N), P.bag_slots_reference(weight))


@pytest.mark.parametrize("config", [None, {"NUM_WG_draw": 3, "NUM_WI_draw": 7, "NUM_WG_tree": 2}])
def test_bootstrap_and_bag_counts_match_reference(device, config):
    """Bag weights drawn and counted on the device: the numpy stream's rows (seeds at both ends of 64 bits), with
    sample weights, fewer draws than rows and no bootstrap; then each tree's in-bag rows."""
    rng = np.random.default_rng(3)
    seeds = np.array([0, 2**64 - 1, 2**63 + 12345, 7], np.uint64)
    sw = rng.integers(0, 4, N).astype(np.int32)  # zeros too: a drawn row of weight 0 stays out of the bag
    sizes = {"tree": len(seeds), "draw": N}
    boot = _comp(P.bootstrap(), device, config)
    counts = _comp(P.bag_counts(), device, None if config is None else {"NUM_WG_row": 3, "NUM_WI_row": 7})
    for bootstrap, n_draw in ((True, N), (True, N // 3), (False, N)):
        want = P.bootstrap_reference(seeds, N, n_draw, bootstrap, sw)
        got = boot(sizes=sizes, seed=seeds, sample_weight=sw, n_draw=np.int32(n_draw),
                   bootstrap=np.int32(bootstrap)).reshape(len(seeds), N)
        assert np.array_equal(got, want), (bootstrap, n_draw)
        assert want.sum() > 0 and (not bootstrap or (want == 0).any())
        inbag = counts(sizes={"tree": len(seeds), "row": N}, weight=want.reshape(-1))
        assert np.array_equal(inbag, (want > 0).sum(1))


def test_draw_stream_is_uniform_and_seeded():
    """The counter-based draws: every row about equally often, other seeds other rows, a prefix of a longer
    stream the shorter stream."""
    rows = P.draw_rows(99, 400_000, 1000)
    counts = np.bincount(rows, minlength=1000)
    assert rows.min() >= 0 and rows.max() < 1000
    assert abs(counts.std() / np.sqrt(400) - 1) < 0.15  # a multinomial's spread
    assert np.array_equal(P.draw_rows(99, 1000, 1000), rows[:1000])
    assert not np.array_equal(P.draw_rows(100, 1000, 1000), rows[:1000])


def test_forest_grows_identically_on_device(device):
    from mdhom.forests.opencl_backend import OpenCLForest

    rng = np.random.default_rng(11)
    n = 400
    X = rng.normal(size=(n, 4))
    bins = np.clip((X * 3 + 8).astype(int), 0, 14).astype(np.uint8)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    stat = np.eye(2, dtype=np.int32)[y]
    w = G.Bag(rng.integers(0, 2**64, 5, dtype=np.uint64), n, n, True, np.ones(n, np.int32))
    seeds = rng.integers(0, 2**32, 5, dtype=np.uint32)
    spec = G.GrowSpec((2,), "gini", None, 2, 1, 2)
    a = G.grow(G.NumpyForest(), bins, 16, stat, w, seeds, spec)
    assert a.depth.max() >= 5
    for bag_on_device in (False, True):  # the root level sent from the host, or made by the device (GPUs' way)
        b = G.grow(OpenCLForest(device, bag_on_device=bag_on_device), bins, 16, stat, w, seeds, spec)
        for k in ("offsets", "feature", "split_bin", "left", "totals", "gain"):
            assert np.array_equal(getattr(a, k), getattr(b, k)), k


def test_ragged_extent_and_scatter_in_the_generator(device):
    """A ragged sum (each row of a matrix summed up to its own length) and a scatter (a reversal)."""
    ragged = mdh.Description("ragged_sums", ["i", "j"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "long",
                             "out = x[i * SIZE_j + j];", inputs=[mdh.Input("x", "long", ("*",), gather=True),
                                                                mdh.Input("n", "int", ("i",), gather=True)],
                             extents={"j": "n[i]"})
    rng = np.random.default_rng(2)
    x = rng.integers(-100, 100, (37, 129)).astype(np.int64)
    n = rng.integers(0, 130, 37).astype(np.int32)
    for cfg in (None, {"NUM_WG_j": 3, "NUM_WI_j": 5, "NUM_WI_i": 2}):
        out = mdh.Computation(ragged, device, cfg)(sizes={"j": 129}, x=x.reshape(-1), n=n)
        assert np.array_equal(out, [x[i, :n[i]].sum() for i in range(37)])
    rev = mdh.Description("reverse", ["i"], [mdh.Concat()], "int", "out = x[i]; out_at = SIZE_i - 1 - i;",
                          inputs=[mdh.Input("x", "int", ("*",), gather=True)], scatter=True)
    v = rng.integers(0, 1000, 1001).astype(np.int32)
    assert np.array_equal(mdh.Computation(rev, device, {"NUM_WI_i": 7, "NUM_WG_i": 3})(sizes={"i": 1001}, x=v),
                          v[::-1])


def test_ragged_and_scatter_are_validated():
    with pytest.raises(mdh.DescriptionError, match="not a reduced dimension"):
        mdh.Description("bad", ["i", "j"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "int", "out = 1;",
                        extents={"i": "4"})
    with pytest.raises(mdh.DescriptionError, match="unknown name"):
        mdh.Description("bad", ["i", "j"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "int", "out = 1;",
                        extents={"j": "count[i]"})
    with pytest.raises(mdh.DescriptionError, match="concatenated dimensions only"):
        mdh.Description("bad", ["i", "j"], [mdh.Concat(), mdh.Reduce(mdh.SUM)], "int", "out = 1;", scatter=True)


def _walk_forest(n_values: int):
    """A fitted forest (numpy reference) of awkward size, and rows with missing values to walk it with."""
    from mdhom import RandomForestClassifier, RandomForestRegressor

    rng = np.random.default_rng(9)
    X = rng.normal(size=(N, F))
    X[rng.random(X.shape) < 0.1] = np.nan
    if n_values == 3:
        y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (np.nan_to_num(X[:, 1]) > 0.5)
        est = RandomForestClassifier(n_estimators=T + 4, max_depth=6, random_state=1, device="numpy").fit(X, y)
    else:
        Y = np.nan_to_num(X[:, :n_values]) * 2 + rng.normal(size=(N, n_values))
        est = RandomForestRegressor(n_estimators=T + 4, max_depth=6, random_state=1, device="numpy").fit(X, Y)
    forest = est._forest
    assert forest.value.shape[1] == n_values and (forest.feature >= 0).sum() > 10
    return forest, rng.normal(size=(N, F)) * np.where(rng.random((N, F)) < 0.1, np.nan, 1.0)


@pytest.mark.parametrize("n_values", [3, 2])
@pytest.mark.parametrize("config", [None, {"NUM_WI_row": 5, "NUM_WG_row": 3, "NUM_WG_tree": 2, "NUM_WI_tree": 2}])
def test_walk_kernels_match_reference(device, n_values, config):
    """forest_leaves gives the numpy walk's leaves (tree-major), forest_leaf_sums its tree sums bit for bit."""
    from mdhom.components.predictor import forest_table

    forest, X = _walk_forest(n_values)
    raw, roots, values = forest_table(forest.as_trees(), None)
    want = forest.leaves(X)
    got = _comp(WK.leaves(), device, config)(sizes={"tree": forest.n_trees, "row": N}, X=X.reshape(-1),
                                            forest=raw.view(np.int32), root=roots, n_feat=np.int32(F))
    assert np.array_equal(got.reshape(forest.n_trees, N), want.T)
    d_sums, sizes = WK.leaf_sums(n_values), {"row": N, "tree": forest.n_trees}
    sums_cfg = WK.LEAF_SUMS.heuristic(d_sums, device, sizes) if config is None else {"NUM_WI_row": 7, "NUM_WG_row": 3}
    sums = _comp(d_sums, device, {**sums_cfg, **WK.LEAF_SUMS.exact_pins})(
        sizes=sizes, leaf=want.T.astype(np.int32).reshape(-1), value=values.reshape(-1))
    assert sums.tobytes() == forest.tree_sums(X).tobytes()


def test_forest_kernels_clean_under_oclgrind(oclgrind_device):
    code = textwrap.dedent("""
        import numpy as np
        from mdhom.forests import grower as G
        from mdhom.forests.opencl_backend import OpenCLForest
        rng = np.random.default_rng(4)
        n = 67
        for crit, stat, outs in (("entropy", np.eye(3, dtype=np.int32)[rng.integers(0, 3, n)], (3,)),
                                 ("squared_error", rng.integers(-2**40, 2**40, (n, 1)), (1,))):
            bins = rng.integers(0, 7, (n, 3)).astype(np.uint8)
            w = G.Bag(rng.integers(0, 2**64, 3, dtype=np.uint64), n, n, True, np.ones(n, np.int32))
            seeds = rng.integers(0, 2**32, 3, dtype=np.uint32)
            spec = G.GrowSpec(outs, crit, 4, 2, 1, 2)
            a = G.grow(G.NumpyForest(), bins, 8, stat, w, seeds, spec)
            b = G.grow(OpenCLForest("oclgrind"), bins, 8, stat, w, seeds, spec)
            assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("feature", "split_bin", "totals", "gain"))
            assert (a.feature >= 0).sum() >= 3
        from mdhom import RandomForestClassifier
        from mdhom.devices import get_device
        from mdhom.forests.walker import ForestWalker
        X = rng.normal(size=(n, 4))
        X[::7, 1] = np.nan
        est = RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0, device="numpy")
        est.fit(X, (X[:, 0] > 0).astype(int))
        got = ForestWalker(get_device("oclgrind"), est._forest).tree_sums(X)
        assert got.tobytes() == est._forest.tree_sums(X).tobytes()
        print("ok")
    """)
    run = run_under_oclgrind(code, timeout=900)
    assert run.clean, run.explain()
    assert "ok" in run.stdout
