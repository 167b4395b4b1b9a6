"""The boosting level's md_hom kernels (:mod:`mdhom.forests.boost_level`, :mod:`mdhom.forests.boost_gradients`)
against their numpy references on every device, and a one-tree-per-output fit under Oclgrind."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from test_trees_kernels import run_writing

from mdhom import mdh
from mdhom.components import histogram_blocks as hb
from mdhom.forests import boost_gradients as BG
from mdhom.forests import boost_level as BL
from mdhom.forests import partition as FP
from mdhom.learn.losses import make_loss
from mdhom.testing import run_under_oclgrind

# awkward sizes: not multiples of any work-group size
N, F, K, B = 301, 5, 3, 13
PARAMS = {"reg_lambda": 0.7, "reg_alpha": 0.2, "min_split_gain": 0.01, "min_child_weight": 0.3}


def _comp(desc, device, config=None):
    """A build; a partial ``config`` leaves the other dimensions one work-item wide."""
    if config is not None:
        config = {**{f"NUM_WI_{d}": 1 for d in desc.dim_names}, **config}
    return mdh.build_within_limits(desc, device, config)


def _level(rng: np.random.Generator, quantized: bool):
    """A level of three trees (classes 2, 0, 1) over N rows: three slots each, of unequal sizes, one empty; each
    tree's rows in its own position order, ascending inside a slot."""
    bins = rng.integers(0, B, (N, F)).astype(np.uint8)
    bins[rng.random((N, F)) < 0.1] = B - 1  # missing values
    if quantized:
        gh = np.stack([rng.integers(-2**20, 2**20, (N, K)), rng.integers(0, 2**20, (N, K))], -1).astype(np.int64)
    else:
        gh = np.stack([rng.normal(size=(N, K)), rng.random((N, K))], -1)
    order = np.stack([rng.permutation(N) for _ in range(K)]).astype(np.int32)
    begin, count, tree = [], [], []
    for t in range(K):
        a, b = N // 5, N // 5 + N // 2
        begin += [t * N, t * N + a, t * N + b]
        count += [a, b - a, 0 if t == 1 else N - b]
        tree += [t] * 3
        for lo, hi in ((0, a), (a, b), (b, N)):
            order[t, lo:hi] = np.sort(order[t, lo:hi])
    return bins, gh, order, *(np.array(v, np.int32) for v in (begin, count, tree))


def _hist_configs(device, quantized: bool) -> list:
    out = [None, {"NUM_WG_slot": 3, "NUM_WG_feat": 2, "NUM_WI_pos": 5, "NUM_WG_pos": 3, "NUM_WI_COMBINE": 7}]
    if quantized:
        out[1]["PARTIALS_LOCAL"] = 0
        out.append({"NUM_WG_slot": 2, "NUM_WG_feat": F, "NUM_WI_pos": 16, "NUM_WG_pos": 3, "NUM_WI_COMBINE": 16,
                    "PARTIALS_LOCAL": 1})
    return out


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_histogram_matches_reference(device, precision):
    """Quantized: the same integers under every configuration (local atomics included). Double: the same bits with
    exact mode's pins (a slot's rows in position order), close under parallel ones."""
    quantized = precision == "quantized"
    rng = np.random.default_rng(3)
    bins, gh, order, sb, sc, st = _level(rng, quantized)
    tree_col = np.array([2, 0, 1], np.int32)
    built = np.array([0, 2, 3, 5, 6, 8], np.int32)  # slot 4 is not built; slot 5 is the empty one
    desc = BL.histogram(B, BL.lane_ctype(precision))
    ref = BL.histogram_reference(bins, gh, order, sb, sc, built, st, tree_col, B, blocked=False)
    assert ref[3].sum() == 0 and np.abs(ref[2]).sum() > 0
    dtype = np.int32 if quantized else np.float64
    for config in _hist_configs(device, quantized):
        if config is None:
            config = BL.HISTOGRAM.heuristic(desc, device, {"slot": len(built), "feat": F, "pos": N})
            if not quantized:
                config.update(BL.HISTOGRAM.exact_pins)
        if config.get("PARTIALS_LOCAL") and config["NUM_WI_pos"] > device.max_work_group_size:
            continue
        out = _comp(desc, device, config)(
            sizes={"slot": len(built), "feat": F, "pos": N}, bins=bins.T.reshape(-1),
            gh=np.ascontiguousarray(gh.transpose(1, 0, 2)).astype(dtype).reshape(-1), order=order.reshape(-1),
            slot_begin=sb, slot_count=sc, slot_id=built, slot_tree=st, tree_col=tree_col, n_rows=np.int32(N))
        got = out.reshape(ref.shape)
        if quantized or config.get("NUM_WI_pos") == config.get("NUM_WG_pos") == 1:
            assert got.tobytes() == ref.astype(dtype).tobytes(), config
        else:
            assert np.allclose(got, ref, atol=1e-12), config


@pytest.mark.parametrize("precision", ["double", "quantized"])
def test_split_kernels_match_reference(device, precision):
    """The feature split (both default directions, min_child_weight, gamma, L1/L2, a masked feature) and the node
    split, record for record and bit for bit; the empty slot has no split."""
    quantized = precision == "quantized"
    rng = np.random.default_rng(5)
    bins, gh, order, sb, sc, st = _level(rng, quantized)
    tree_col = np.array([2, 0, 1], np.int32)
    slots = np.arange(len(sb), dtype=np.int32)
    hist = BL.histogram_reference(bins, gh, order, sb, sc, slots, st, tree_col, B)
    mask = np.array([1, 1, 0, 1, 1], np.uint8)
    inv = np.ldexp(1.0, -np.arange(2 * K) - 18).reshape(K, 2) if quantized else None
    ref = BL.feature_split_reference(hist, mask, st, tree_col, PARAMS, inv)
    extra = {"inv_scale": inv.reshape(-1)} if quantized else {}
    got = _comp(BL.feature_split(B, precision), device, {"NUM_WG_slot": 2, "NUM_WI_feat": 3, "NUM_WG_feat": 2})(
        sizes={"slot": len(sb), "feat": F}, hist=hist.astype(np.int32 if quantized else np.float64).reshape(-1),
        feature_mask=mask, slot_tree=st, tree_col=tree_col, **extra, **{k: np.float64(v) for k, v in PARAMS.items()})
    assert got.tobytes() == ref.tobytes()
    assert np.isneginf(ref["gain"][:, 2]).all() and np.isfinite(ref["gain"]).sum() > 10
    assert set(ref["dir"][np.isfinite(ref["gain"])].tolist()) == {0, 1}  # both default directions win somewhere
    ns = _comp(BL.node_split(), device, {"NUM_WI_slot": 4, "NUM_WG_slot": 2})(
        sizes={"slot": len(sb)}, fsplit=ref.view(np.int32).reshape(-1), slot_count=sc, n_feat=np.int32(F))
    ns_ref = BL.node_split_reference(ref, sc)
    assert ns.tobytes() == ns_ref.tobytes()
    assert np.isneginf(ns_ref["gain"][5]) and np.isfinite(ns_ref["gain"]).sum() >= 7


def test_row_kernels_match_reference(device):
    """The root level, the routing (children slots, children leaves, leaves, rows already in leaves), the left
    counts, the forests' partition on them, the next level's slot ranges and the score update."""
    rng = np.random.default_rng(7)
    bins, _, order, sb, sc, st = _level(rng, False)
    roots = _comp(BL.roots(), device, {"NUM_WI_row": 7, "NUM_WG_row": 3, "NUM_WG_tree": 2})
    assert np.array_equal(roots(sizes={"tree": K, "row": N}, field=np.int32(0)).reshape(K, N),
                          np.tile(np.arange(N), (K, 1)))
    assert np.array_equal(roots(sizes={"tree": K, "row": N}, field=np.int32(1)).reshape(K, N),
                          np.repeat(np.arange(K)[:, None], N, axis=1))
    row_slot = np.full((K, N), -1, np.int32)
    for s, (b, c) in enumerate(zip(sb, sc, strict=True)):
        row_slot[b // N, order.reshape(-1)[b:b + c]] = s
    # slots 0, 3, 6 split into slots (children 0..5), slot 2 into leaves 9, 10; 1, 4, 7, 8 are leaves; 5 is empty
    tab = np.zeros((9, 4), np.int32)
    for s, child in ((0, 0), (3, 2), (6, 4)):
        tab[s] = (rng.integers(0, F), rng.integers(0, B - 2), child, BL.SPLITS | (s % 2) * BL.DEFAULT_LEFT)
    tab[2] = (1, 4, 9, BL.SPLITS | BL.TO_LEAVES | BL.DEFAULT_LEFT)
    for s, leaf in ((1, 11), (4, 12), (7, 13), (8, 14), (5, 15)):
        tab[s, 2] = leaf
    row_slot[0, order[0, sb[1]:sb[1] + 3]] = -7  # rows of a leaf slot already in a leaf of an earlier level
    new = _comp(BL.route(B), device, {"NUM_WI_row": 7, "NUM_WG_row": 3, "NUM_WG_tree": 2})(
        sizes={"tree": K, "row": N}, row_slot=row_slot.reshape(-1), route_tab=tab.reshape(-1), bins=bins.T.reshape(-1))
    new_ref = BL.route_reference(row_slot, tab, bins, B)
    assert np.array_equal(new.reshape(K, N), new_ref)
    assert set(np.unique(new_ref[new_ref < 0]).tolist()) >= {-7, -11, -12, -13, -14}  # -2 - leaf
    part = np.full((9, 3), -1, np.int32)
    part[[0, 3, 6]] = tab[[0, 3, 6], :3]
    scan = FP.left_scan_reference(order, new_ref)
    left = _comp(BL.split_left(), device, {"NUM_WI_slot": 2, "NUM_WG_slot": 2})(
        sizes={"slot": 9}, part_tab=part.reshape(-1), slot_begin=sb, slot_count=sc, scan=scan.reshape(-1),
        order=order.reshape(-1), new_slot=new_ref.reshape(-1), n_rows=np.int32(N))
    left_ref = BL.split_left_reference(new_ref, order, part, sb, sc)
    assert np.array_equal(left, left_ref) and left_ref[[0, 3, 6]].min() > 0 and left_ref[[1, 2]].max() == 0
    pairs = np.array([0, 3, 6], np.int32)
    child = _comp(BL.child_slots(), device, {"NUM_WI_slot": 4, "NUM_WG_slot": 1})
    cb, cc = BL.child_slots_reference(pairs, sb, sc, left_ref)
    for field, want in ((0, cb), (1, cc)):
        got = child(sizes={"slot": 6}, pair_parent=pairs, slot_begin=sb, slot_count=sc, split_left=left_ref,
                    field=np.int32(field))
        assert np.array_equal(got, want)
    assert np.array_equal(cc[0::2] + cc[1::2], sc[pairs]) and np.array_equal(cb[0::2], sb[pairs])
    order_next = FP.partition_reference(order, new_ref, part, sb, sc)
    flat = order_next.reshape(-1)
    for j in range(6):  # every child slot holds exactly its rows, ascending
        rows = flat[cb[j]:cb[j] + cc[j]]
        assert np.all(new_ref[cb[j] // N, rows] == j) and np.all(np.diff(rows) > 0)
    leaf = np.where(new_ref < -1, new_ref, -2).astype(np.int32)  # every row in a leaf (-1: rows of no slot)
    scores = rng.normal(size=(N, K))
    values = rng.normal(size=16)
    up = _comp(BL.score_update(), device, {"NUM_WI_row": 5, "NUM_WG_row": 3, "NUM_WI_cls": 2})(
        sizes={"row": N, "cls": K}, scores=scores.reshape(-1), leaf=leaf.reshape(-1), leaf_value=values)
    assert up.tobytes() == BL.score_update_reference(scores, leaf, values).tobytes()


@pytest.mark.parametrize("kind", ["softmax", "logistic"])
def test_gradient_kernels_match_reference(device, kind):
    """Class-major (g, h) from the scores, bit for bit the loss's (rows left out at zero, weights applied), their
    maxima and the fixed point of the components' quantiser."""
    from mdhom.components.quantize import quantization_exponents, quantization_scales, quantize

    rng = np.random.default_rng(1)
    scores = rng.normal(size=(N, K)) * 3
    y = rng.integers(0, K, (N, 1)) if kind == "softmax" else rng.integers(0, 2, (N, K))
    w = rng.random(N) + 0.5
    keep = (rng.random(N) < 0.7).astype(np.uint8)
    loss = make_loss("multi:softmax" if kind == "softmax" else "multilabel:logistic", K)
    g, h = loss.gradients(y.astype(np.float64), scores, w)
    g[keep == 0] = h[keep == 0] = 0.0
    norm = {}
    if kind == "softmax":  # the row's normaliser first
        norm["norm"] = _comp(BG.softmax_norm(), device, {"NUM_WI_row": 8, "NUM_WG_row": 3})(
            sizes={"row": N}, scores=scores.reshape(-1), n_cls=np.int32(K)).view(np.float64).reshape(-1)
    got = _comp(BG.gradients(kind), device, {"NUM_WI_row": 7, "NUM_WG_row": 3, "NUM_WG_cls": 2})(
        sizes={"cls": K, "row": N}, scores=scores.reshape(-1), y=y.astype(np.float64).reshape(-1), w=w, keep=keep,
        use_keep=np.int32(1), factor=np.float64(K / (K - 1) if kind == "softmax" else 1.0), **norm)
    assert got["g"].reshape(K, N).T.tobytes() == g.tobytes() and got["h"].reshape(K, N).T.tobytes() == h.tobytes()
    gh = np.ascontiguousarray(np.stack([g.T, h.T], -1)).reshape(-1)
    am = _comp(BG.gh_absmax(), device, {"NUM_WI_pos": 8, "NUM_WG_pos": 3, "NUM_WI_COMBINE": 4})(
        sizes={"cls": K, "pos": N}, gh=gh)
    assert np.array_equal(am["g"], np.abs(g).max(0)) and np.array_equal(am["h"], np.abs(h).max(0))
    scale, _ = quantization_scales(quantization_exponents(np.stack([am["g"], am["h"]], -1), N))
    q = _comp(BG.quantize_gh(), device, {"NUM_WI_pos": 7, "NUM_WG_pos": 3})(
        sizes={"cls": K, "pos": N}, gh=gh, scale=scale.reshape(-1))
    assert np.array_equal(q["g"].reshape(K, N).T, quantize(g, scale[:, 0]))
    assert np.array_equal(q["h"].reshape(K, N).T, quantize(h, scale[:, 1]))


def test_tuned_histogram_reference_agrees(device):
    """What ``mdhom tune`` checks every trial against: the tuning inputs' reference equals the kernel's result."""
    spec = BL.HISTOGRAM
    sizes = {"slot": 6, "feat": 3, "pos": 500, "rows": 500, "trees": 3, "n_bins": 16}
    a = spec.tuning.make_inputs(sizes, np.random.default_rng(0))
    desc = spec.tuning.describe(sizes)
    out = _comp(desc, device, spec.heuristic(desc, device, sizes))(sizes={k: sizes[k] for k in ("feat", "pos")}, **a)
    ref = spec.tuning.reference(a, 16)
    assert np.array_equal(out.reshape(ref.shape), ref)


def test_row_blocks_match_reference(device):
    """The block table of a level's built slots (through ``slot_id``; an empty slot, slots of one block and of many)
    in blocks of 16 rows: counts, begins and trees of every block slot, each built slot's first earlier block and its
    rows, as the reference lays them out; slots past the last block empty."""
    rng = np.random.default_rng(8)
    _, _, _, sb, sc, st = _level(rng, False)
    built = np.array([0, 2, 3, 5, 6, 8], np.int32)
    n_slots = hb.block_slots(len(built), int(sc[built].sum()), 16)
    want = BL.row_blocks_reference(sb, sc, built, st, n_slots, 16)
    assert want["count"].sum() == sc[built].sum() and want["count"][-1] == 0
    desc = BL.row_blocks()
    sizes = {"v": n_slots}
    fill = {k: ("o", np.full(n_slots, -9, np.int32), None) for k in ("begin", "tree", "first", "cnt")}
    got, wrote = run_writing(desc, device, BL.ROW_BLOCKS.heuristic(desc, device, sizes), sizes,
                             slot_begin=("o", sb, None), slot_count=("o", sc, None), slot_id=("o", built, None),
                             slot_tree=("o", st, None), n_built=len(built), block_rows=16, **fill)
    np.testing.assert_array_equal(got, want["count"])
    for k in ("begin", "tree"):
        np.testing.assert_array_equal(wrote[k], want[k])
    for k in ("first", "cnt"):
        np.testing.assert_array_equal(wrote[k][:len(built)], want[k])


def test_ktree_fit_clean_under_oclgrind(oclgrind_device):
    code = textwrap.dedent("""
        import json, os, tempfile
        import numpy as np
        from mdhom import TreeBoostClassifier
        path = os.path.join(tempfile.mkdtemp(), "m.json")
        rng = np.random.default_rng(4)
        X = rng.normal(size=(71, 4))
        X[::5, 2] = np.nan
        y = np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5])
        from mdhom.components import histogram_blocks as hb
        for precision, blocks in (("double", 0), ("quantized", 0), ("double", 8)):
            hb.BLOCK_ROWS = blocks or 1 << 14  # float64 slots of many rows in blocks of 8: laid out as slots
            docs = []
            for device in ("numpy", "oclgrind"):
                est = TreeBoostClassifier(n_estimators=2, max_depth=3, max_bin=8, subsample=0.8, random_state=1,
                                          multi_strategy="one_output_per_tree", device=device, precision=precision)
                est.fit(X, y)
                est.save_model(path)
                doc = json.load(open(path))
                doc["params"].pop("device")
                docs.append(doc)
            assert docs[0] == docs[1] and docs[0]["trees_per_round"] == 3
            assert sum(len(t["left"]) for t in docs[0]["trees"]) > 12
        # the histogram's parallel forms: rows over lanes and work-groups, local-memory atomics
        from mdhom import mdh
        from mdhom.forests import boost_level as BL
        n, f, b = 97, 3, 9
        bins = rng.integers(0, b, (f, n)).astype(np.uint8)
        gh = rng.integers(-1000, 1000, (2, n, 2)).astype(np.int32)
        args = dict(bins=bins.reshape(-1), gh=gh.reshape(-1), order=np.tile(np.arange(n, dtype=np.int32), 2),
                    slot_begin=np.array([0, 40, n], np.int32), slot_count=np.array([40, n - 40, n], np.int32),
                    slot_id=np.arange(3, dtype=np.int32), slot_tree=np.array([0, 0, 1], np.int32),
                    tree_col=np.array([1, 0], np.int32), n_rows=np.int32(n))
        ref = BL.histogram_reference(bins.T, gh.transpose(1, 0, 2).astype(np.int64), args["order"].reshape(2, n),
                                     args["slot_begin"], args["slot_count"], args["slot_id"], args["slot_tree"],
                                     args["tree_col"], b)
        for local in (0, 1):
            cfg = {"NUM_WI_slot": 1, "NUM_WG_slot": 2, "NUM_WI_feat": 1, "NUM_WG_feat": 2, "NUM_WI_pos": 8,
                   "NUM_WG_pos": 2, "NUM_WI_COMBINE": 4, "PARTIALS_LOCAL": local}
            out = mdh.Computation(BL.histogram(b, "int"), "oclgrind", cfg)(sizes={"slot": 3, "feat": f, "pos": n},
                                                                            **args)
            assert np.array_equal(out.reshape(ref.shape), ref)
        print("ok")
    """)
    run = run_under_oclgrind(code, timeout=900)
    assert run.clean, run.explain()
    assert "ok" in run.stdout
