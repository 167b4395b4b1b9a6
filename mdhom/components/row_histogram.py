"""The whole-row histograms: a node's int32 (g, h) histogram with a whole row (or a group of its features) per point,
the node's histogram per work-group in local memory on GPUs (XGBoost's shared-memory histogram) or per work-item in
private memory on CPUs, with their heuristic, size classes and tuner inputs. The per-feature histogram, the reference
and the subtraction are :mod:`mdhom.components.histogram`'s; the builder that launches them is
:mod:`mdhom.components.histogram_builder`. The real-lane (float64 or float32) whole-row histogram reuses the bodies,
size classes and tuner inputs here but adds a node's rows in order, without atomics (real sums depend on their order):
it is :mod:`mdhom.components.row_histogram_real`'s.

=====================  ===============================  ======================================================
kernel                 index space                      combine operators
=====================  ===============================  ======================================================
tree_histogram_rows    node x pos                       concat, sum of whole rows into the node's histogram
tree_histogram_groups  node x grp x pos                 concat, concat, sum of a feature group's part of rows
=====================  ===============================  ======================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from mdhom.components.histogram import hist_q_inputs, histogram_reference, node_slots
from mdhom.components.lanes import (
    DEFAULT_BINS,
    bin_ctype,
    bins_reader,
    defined,
    defines,
    gh_struct,
    hist_gh_type,
    with_default_bins,
)
from mdhom.components.specs import KernelSpec, Tuning, ones, pow2_at_most
from mdhom.devices import Device
from mdhom.learn.binning import bin_dtype
from mdhom.mdh import SUM, Array, Concat, Description, Input, Param, Reduce
from mdhom.mdh.parts import FLAT_SPAN, LOCAL_PADS

# A point's row: its position in the node's range and, through the row index, the row (both bodies below)
_ROW_AT = """
const int mdh_cnt = slot_count[node];
if (pos < mdh_cnt) {{
    const long mdh_p = slot_begin[node] + pos;
#if TREE_ROW_INDEX
    const long mdh_r = ridx[mdh_p];
{prefetch}#else
    const long mdh_r = mdh_p;
#endif
"""
# each output's (g, h) of the row, read once for the row's features
_ROW_GH = """    for (int mdh_k = 0; mdh_k < TREE_OUTPUTS; ++mdh_k) {{
        const long mdh_gi = 2 * (mdh_r * TREE_OUTPUTS + mdh_k);
        const int mdh_g = gh[mdh_gi], mdh_h = gh[mdh_gi + 1];
        if (mdh_g == 0 && mdh_h == 0) continue;  /* rows left out by subsampling */
"""
_ROWS_BODY = _ROW_AT + """#if ROW_WORDS
    /* the row's bins as 32-bit words, all loaded before the first is used (TREE_ROW_WORDS words) */
    uint mdh_w[TREE_ROW_WORDS];
    __global const uint* mdh_src = (__global const uint*)(bins + mdh_r * TREE_FEATURES);
    for (int mdh_i = 0; mdh_i < TREE_ROW_WORDS; ++mdh_i) mdh_w[mdh_i] = mdh_src[mdh_i];
{rotate_words}#endif
""" + _ROW_GH + """#if ROTATE{by_feature}
        /* each work-item starts at its own feature, so a warp's atomics fall in different features' bins */
        const int mdh_f0 = (int)(get_local_id(0) % TREE_FEATURES);
#endif
#if ROW_WORDS{unrolled}
#pragma unroll
#endif
        for (int mdh_i = 0; mdh_i < TREE_FEATURES; ++mdh_i) {{
{feature}#if ROW_WORDS && TREE_BIN_WIDE
            const int mdh_b = (mdh_w[{word} >> 1] >> (16 * ({word} & 1))) & 0xffff;
#elif ROW_WORDS
            const int mdh_b = (mdh_w[{word} >> 2] >> (8 * ({word} & 3))) & 0xff;
#else
            const int mdh_b = tree_bin_of(bins, mdh_r, mdh_f, n_rows, TREE_FEATURES);
#endif
            const int mdh_c = (mdh_f * TREE_OUTPUTS + mdh_k) * TREE_BINS + mdh_b;
{body}
        }}
    }}
}}
"""
# ROTATE in row-index builds (GPUs, where local atomics contend) with the row read as words: each work-item starts at
# its own word (work-item i at word i mod TREE_ROW_WORDS), the words rotated by selects, so the feature loop reads them
# at fixed indices and they can stay in registers (a rotated index into the word array puts the row in slow private
# memory: H200, 10^7 rows without any contention, 0.50 ms against 0.25 unrotated, 0.24 rotated by selects; this keeps
# to registers only where the compiler unrolls the steps' loop, as NVIDIA's does: its count is a constant). Moved
# builds (CPUs, no local atomics) keep the rotation by feature, and their source the stored configurations were tuned
# for.
# the feature a work-item adds at step mdh_i: rotated from its own (mdh_f0) or in order (after "#" or "#el")
_FEATURE_ROTATED = """if ROTATE
            const int mdh_f = mdh_i + mdh_f0 < TREE_FEATURES ? mdh_i + mdh_f0 : mdh_i + mdh_f0 - TREE_FEATURES;
#else
            const int mdh_f = mdh_i;
#endif
"""


def _rotate_words(count: str) -> str:
    """Under ROTATE, the ``count`` words ``mdh_w`` rotated so that work-item i's start at word i mod ``count``, by
    selects in log2 steps (fixed indices: the words stay in registers), the rotation ``mdh_s``."""
    return f"""#if ROTATE
    const int mdh_s = (int)(get_local_id(0) % {count});
    for (int mdh_step = 1; mdh_step < {count}; mdh_step <<= 1) {{
        uint mdh_t[{count}];
#pragma unroll
        for (int mdh_i = 0; mdh_i < {count}; ++mdh_i) {{
            const int mdh_j = mdh_i + mdh_step;
            mdh_t[mdh_i] = mdh_w[mdh_j < {count} ? mdh_j : mdh_j - {count}];
        }}
#pragma unroll
        for (int mdh_i = 0; mdh_i < {count}; ++mdh_i)
            mdh_w[mdh_i] = (mdh_s & mdh_step) ? mdh_t[mdh_i] : mdh_w[mdh_i];
    }}
#endif
"""


_ROWS_ROTATE_WORDS = {
    "rotate_words": _rotate_words("TREE_ROW_WORDS"),
    "by_feature": " && !ROW_WORDS",
    "unrolled": "",
    "feature": """#if ROW_WORDS && ROTATE
            /* the rotated row's word mdh_i / (bins a word) is the row's word mdh_s on from it */
            const int mdh_j = mdh_i / (4 >> TREE_BIN_WIDE) + mdh_s;
            const int mdh_f = (mdh_j < TREE_ROW_WORDS ? mdh_j : mdh_j - TREE_ROW_WORDS) * (4 >> TREE_BIN_WIDE)
                              + mdh_i % (4 >> TREE_BIN_WIDE);
#el""" + _FEATURE_ROTATED,
    "word": "mdh_i",
}
_ROWS_ROTATE_FEATURES = {
    "rotate_words": "", "by_feature": "", "unrolled": " && !ROTATE", "word": "mdh_f", "feature": "#" + _FEATURE_ROTATED,
}


def rows_prefetch(stride: str = "TREE_FEATURES") -> str:
    """Row-index builds only (the moved rows' source stays as it was, and with it their stored configurations): the
    prefetch of the row a work-item gathers MDH_PREFETCH_AHEAD positions on, a row every ``stride`` bins."""
    return f"""#if PREFETCH
    /* the row this work-item gathers MDH_PREFETCH_AHEAD positions on: its bins (a row may span two cache lines)
     * and (g, h) */
    if (pos + MDH_PREFETCH_AHEAD < mdh_cnt) {{
        const long mdh_ra = ridx[mdh_p + MDH_PREFETCH_AHEAD];
        MDH_PREFETCH(bins + mdh_ra * {stride});
        MDH_PREFETCH(bins + mdh_ra * {stride} + TREE_FEATURES - 1);
        MDH_PREFETCH(gh + 2 * mdh_ra * TREE_OUTPUTS);
    }}
#endif
"""
_ROWS_ADD = "            acc.v[mdh_c].g += mdh_g;\n            acc.v[mdh_c].h += mdh_h;"
_ROWS_ADD_PAIR = "            mdh_add_pair(&acc.v[mdh_c].g, mdh_g, mdh_h);"
_ROWS_ATOMIC = "            mdh_atomic_add_pair(acc, mdh_c, mdh_g, mdh_h);"


def _zero_cells(cells: str) -> str:
    """The scalar function's start: the ``cells`` cells of its histogram zeroed."""
    return f"for (int c = 0; c < {cells}; ++c) {{ out.v[c].g = 0; out.v[c].h = 0; }}\n"


def _row_parts(body: str, cells: str, n_bins: int, row_index: bool, feature_major: bool, sparse: bool,
               **fmt: str) -> dict:
    """What the whole-row descriptions share: their inputs, the prefetch (a row-index build gathers a dense rows-major
    row at bins + r * TREE_FEATURES, the prefetch's address; compressed rows and features-major bins lie elsewhere),
    and the scalar function and folds of ``body`` (its histogram of ``cells`` cells zeroed in the scalar function)."""
    inputs = [
        Input("bins", bin_ctype(n_bins), ("*",), gather=True),
        Input("gh", "int", ("*",), gather=True),
        Input("slot_begin", "int", ("node",), gather=True),
        Input("slot_count", "int", ("node",), gather=True),
    ] + ([Input("ridx", "int", ("*",), gather=True)] if row_index else [])
    prefetch = row_index and not feature_major and not sparse
    fmt["prefetch"] = rows_prefetch() if prefetch else ""
    fmt.setdefault("stride", "TREE_FEATURES")
    zero = _zero_cells(cells)
    return dict(scalar=zero + body.format(body=_ROWS_ADD.replace("acc.", "out."), **fmt),
                accumulate=body.format(body=_ROWS_ADD_PAIR, **fmt),
                accumulate_atomic=body.format(body=_ROWS_ATOMIC, **fmt), packed_pairs=True,
                extents={"pos": "slot_count[node]"}, chunked=True, inline_fold=not row_index,
                flat=True if row_index else "private",
                padded=row_index, prefetch=prefetch, inputs=inputs, params=[Param("n_rows", "int")])


@lru_cache(maxsize=32)
def histogram_rows(n_bins: int, n_features: int, n_outputs: int = 1, feature_major: bool = False,
                   row_index: bool = False, sparse: bool = False) -> Description:
    """The quantized histogram with a whole row per point: (node, pos), each work-item reading a row's (g, h)
    once and adding it to every feature's bin (the per-feature kernel re-reads (g, h) once per feature); one
    atom holds a node's whole histogram (feat, output, bin), so with PARTIALS_LOCAL a work-group scatters into
    a local copy of it (XGBoost's shared-memory histogram). ``row_index``: rows are not moved by partitioning;
    position ``p`` holds row ``ridx[p]``, whose bins and (g, h) are read in row order (XGBoost's row indices;
    rows x features bins then cost one cache line per row). Same output layout as :func:`histogram`.
    Moved rows (what CPUs read) take the generator's ``INLINE`` switch: PoCL calls a fold this large once per row
    otherwise. Row-index builds (what GPUs read) go without it, so their tuned entries keep their description hash.
    Both take the generator's ``FLAT`` (the nodes' rows end to end in equal shares): row-index builds fold a
    work-group's share in local memory, moved ones also a work-item's privately (``flat="private"``, what CPUs run).

    Row-index builds of dense rows-major bins take the generator's ``PREFETCH``: a CPU's work-item asks for the row 16
    positions on in its run while it adds this one (PoCL, 2-core EPYC, 500k binned Higgs rows, a loss-guided round's
    histograms: 131-138 -> 31-37 ms; a CPU otherwise waits a memory latency per gathered row).

    Its own switches: ``ROW_WORDS`` (a row's bins read as 32-bit words, where rows are whole words) and ``ROTATE``
    (each work-item walks the features from its own one on, so the work-items of a warp add to different
    features' bins at once instead of contending for one feature's few; row-index builds reading words start each
    work-item at its own word instead, ``_ROWS_ROTATE_WORDS``). The row fold is ragged (a node folds its own
    rows, not the longest node's count) and ``CHUNKED`` (a work-item folds one contiguous run of its node's rows, what
    a CPU streams; strided shares made every work-group read every cache line of the rows: PoCL, 500k binned Higgs
    rows in one node, kernel alone, 10.6-14.7 ms strided at 8 work-groups, 4.7 at 2, 3.5 chunked with ROW_WORDS)."""
    f, k, b = int(n_features), int(n_outputs), int(n_bins)
    words = row_words(b, f, feature_major, sparse)
    rotate = _ROWS_ROTATE_WORDS if row_index else _ROWS_ROTATE_FEATURES
    return Description(
        "tree_histogram_rows", ["node", "pos"], [Concat(), Reduce(SUM)], Array(hist_gh_type("quantized"), f * k * b),
        switches=("ROW_WORDS", "ROTATE") if words else ("ROTATE",),
        **_row_parts(_ROWS_BODY, "TREE_FEATURES * TREE_OUTPUTS * TREE_BINS", b, row_index, feature_major, sparse,
                     **rotate),
        preamble=defines("quantized", b, k, feature_major) + f"#define TREE_FEATURES {f}\n"
        f"#define TREE_ROW_WORDS {words}\n"
        f"#define TREE_ROW_INDEX {int(row_index)}\n" + bins_reader(sparse),
    )


# A node's histogram in feature groups (tree_histogram_groups): the group's features of every row, (g, h) read once a
# row and group; the same layouts and switches as _ROWS_BODY. ``ROW_WORDS`` reads the group's bins as 32-bit words (the
# row's words from the one holding the group's first bin, shifted so that word i holds the group's bins from its
# (TREE_PER_WORD i)-th on), ``ROTATE`` then starts each work-item at its own word (rotated by selects, as _ROWS_BODY's
# words); without ROW_WORDS the bins are bytes and ROTATE starts each work-item at its own feature (what each buys:
# rows_heuristic)
_GROUPS_BODY = _ROW_AT + """    const int mdh_f1 = grp * TREE_GROUP_FEATURES;  /* the group's first feature */
#if ROW_WORDS
    /* the group's bins as words, all loaded before the first is used; a word past the row's last is never read */
    uint mdh_w[TREE_GROUP_WORDS + 1];
    {{
        const int mdh_w0 = mdh_f1 / TREE_PER_WORD;
        __global const uint* mdh_src = (__global const uint*)(bins + mdh_r * {stride}) + mdh_w0;
#pragma unroll
        for (int mdh_i = 0; mdh_i <= TREE_GROUP_WORDS; ++mdh_i)
            mdh_w[mdh_i] = mdh_w0 + mdh_i < TREE_ROW_WORDS ? mdh_src[mdh_i] : 0u;
        const int mdh_sh = (mdh_f1 % TREE_PER_WORD) * (32 / TREE_PER_WORD);  /* the group's first bin's bit */
        if (mdh_sh) {{
#pragma unroll
            for (int mdh_i = 0; mdh_i < TREE_GROUP_WORDS; ++mdh_i)
                mdh_w[mdh_i] = (mdh_w[mdh_i] >> mdh_sh) | (mdh_w[mdh_i + 1] << (32 - mdh_sh));
        }}
    }}
""" + _rotate_words("TREE_GROUP_WORDS").replace("{", "{{").replace("}", "}}") + """#endif
""" + _ROW_GH + """#if ROTATE && !ROW_WORDS
        /* each work-item starts at its own feature of the group (_ROWS_BODY's ROTATE) */
        const int mdh_f0 = (int)(get_local_id(0) % TREE_GROUP_FEATURES);
#endif
#if ROW_WORDS
#pragma unroll
        for (int mdh_i = 0; mdh_i < TREE_GROUP_WORDS * TREE_PER_WORD; ++mdh_i) {{
#if ROTATE
            /* the rotated words' word mdh_i / TREE_PER_WORD is the group's word mdh_s on from it */
            const int mdh_j = mdh_i / TREE_PER_WORD + mdh_s;
            const int mdh_l = (mdh_j < TREE_GROUP_WORDS ? mdh_j : mdh_j - TREE_GROUP_WORDS) * TREE_PER_WORD
                              + mdh_i % TREE_PER_WORD;
#else
            const int mdh_l = mdh_i;
#endif
            if (mdh_l >= TREE_GROUP_FEATURES) continue;  /* the last word's bins past the group */
            const int mdh_b = (mdh_w[mdh_i / TREE_PER_WORD] >> ((32 / TREE_PER_WORD) * (mdh_i % TREE_PER_WORD)))
                              & (TREE_BIN_WIDE ? 0xffff : 0xff);
#else
        for (int mdh_i = 0; mdh_i < TREE_GROUP_FEATURES; ++mdh_i) {{
#if ROTATE
            const int mdh_j = mdh_i + mdh_f0;
            const int mdh_l = mdh_j < TREE_GROUP_FEATURES ? mdh_j : mdh_j - TREE_GROUP_FEATURES;
#else
            const int mdh_l = mdh_i;
#endif
            const int mdh_b = tree_bin_of(bins, mdh_r, mdh_f1 + mdh_l, n_rows, {stride});
#endif
            const int mdh_c = (mdh_l * TREE_OUTPUTS + mdh_k) * TREE_BINS + mdh_b;
{body}
        }}
    }}
}}
"""


def feature_groups(dev: Device, n_features: int, n_outputs: int, n_bins: int) -> int:
    """Into how many groups of equal size a node's whole-row histogram splits its features so that a group's fits in
    local memory (:func:`rows_fit`): 1 where the whole row's does, the fewest dividing ``n_features`` otherwise, 0
    where not even one feature's fits. NVIDIA's 48 KB of local memory hold 28 features of 64 bins but not of the 256
    that ``max_bin=255`` (the default) takes (2 groups of 14 there): without groups such fits read (g, h) once a
    feature and row instead
    (``tree_histogram_q``; H200, 10.5M rows, depth-wise: its histograms 20.7 of a 24.1 ms round, 0.66x XGBoost
    CUDA)."""
    for g in range(1, max(1, n_features) + 1):
        if n_features % g == 0 and rows_fit(dev, n_features // g, n_outputs, n_bins):
            return g
    return 0


@lru_cache(maxsize=32)
def histogram_groups(n_bins: int, n_features: int, n_outputs: int, groups: int, feature_major: bool = False,
                     row_index: bool = False, sparse: bool = False) -> Description:
    """:func:`histogram_rows` with a node's features in ``groups`` groups of equal size (``groups`` divides
    ``n_features``): (node, grp, pos), each work-item reading a row's (g, h) once per group and adding it to the
    group's features' bins; one atom holds a group's histogram (feat, output, bin), so a work-group's local copy is a
    group's and the output (node, grp, ...) is the node's (feat, output, bin) layout. For histograms whose whole row
    does not fit a work-group's local memory (:func:`feature_groups`); the same inputs and output, and the same
    switches: ``ROW_WORDS`` (where rows are whole words) reads a group's bins as words, ``ROTATE`` starts each work-item
    at its own word of the group then, else at its own feature (``_GROUPS_BODY``)."""
    f, k, b, g = int(n_features), int(n_outputs), int(n_bins), int(groups)
    if g < 2 or f % g:
        raise ValueError(f"feature groups: at least 2, dividing the {f} features; got {g}")
    words = row_words(b, f, feature_major, sparse)
    per_word = 4 // np.dtype(bin_dtype(b)).itemsize
    return Description(
        "tree_histogram_groups", ["node", "grp", "pos"], [Concat(), Concat(), Reduce(SUM)],
        Array(hist_gh_type("quantized"), (f // g) * k * b), switches=("ROW_WORDS", "ROTATE") if words else ("ROTATE",),
        **_row_parts(_GROUPS_BODY, "TREE_GROUP_FEATURES * TREE_OUTPUTS * TREE_BINS", b, row_index, feature_major,
                     sparse),
        preamble=defines("quantized", b, k, feature_major) + f"#define TREE_FEATURES {f}\n"
        f"#define TREE_GROUP_FEATURES {f // g}\n#define TREE_ROW_INDEX {int(row_index)}\n"
        f"#define TREE_ROW_WORDS {words}\n#define TREE_PER_WORD {per_word}\n"
        f"#define TREE_GROUP_WORDS {-(-(f // g) // per_word)}\n" + bins_reader(sparse),
    )


def row_words(n_bins: int, n_features: int, feature_major: bool = False, sparse: bool = False,
              stride: int = 0) -> int:
    """32-bit words per row of bins where a row may be read as words (rows x features, dense, every row starting on
    a word), else 0. ``stride``: the bins from one row to the next (0: the features, rows end to end); padded rows
    may end mid-word, the last word's bins past the row then padding, which no feature reads."""
    width = np.dtype(bin_dtype(n_bins)).itemsize
    step = (stride or n_features) * width
    return 0 if feature_major or sparse or step % 4 else -(-n_features * width // 4)


# what a GPU work-group's local memory holds besides the histogram (Configuration.local_mem_bytes): FLAT's window
# prefix and run sums at up to 1024 work-items, and LOCAL_PAD's pad words (at most one in 32, see feature_pad, and one)
_FLAT_ROOM = 8 * (FLAT_SPAN + 1)


def rows_fit(dev: Device, n_features: int, n_outputs: int, n_bins: int) -> bool:
    """Whether a node's int32 histogram (of a feature group) fits a work-group's local memory: on GPUs beside FLAT's
    and the pads' words, on other devices in half of it, whose "local memory" is cache (CPUs accumulate privately;
    groups measured no faster there). NVIDIA's 48 KB had been held to half as well, 4 groups of 7 features at 256 bins
    where 2 of 14 fit: H200, 10.5M rows at `--bins 255`, the histograms 4.02 -> 3.31 ms a depth-wise round and 4.74 ->
    4.32 loss-guided (each pass reads a row's index and (g, h) once for its group)."""
    need = n_features * n_outputs * n_bins * hist_gh_type("quantized").dtype.itemsize
    if getattr(dev, "type", None) == "gpu":
        items = min(int(getattr(dev, "max_work_group_size", 1024)), 1024)
        return need + need // 32 + 8 + _FLAT_ROOM + 8 * items <= dev.local_mem_size
    return need <= dev.local_mem_size // 2


def feature_pad(desc: Description) -> int:
    """``LOCAL_PAD`` that moves each feature's bins (one plane of TREE_OUTPUTS x TREE_BINS words with SPLIT_PAIRS) some
    banks on from the previous feature's: a pad word every 2^s words, 2^s the largest power of two dividing that stride
    (at most the largest offered pad): one bank on where the stride is 2^s (64 bins), stride / 2^s banks otherwise;
    0 where the stride is not a multiple of the 32 banks (features fall apart already)."""
    words = defined(desc, "TREE_OUTPUTS") * defined(desc, "TREE_BINS")
    s = (words & -words).bit_length() - 1
    return min(s, max(LOCAL_PADS)) if s >= min(p for p in LOCAL_PADS if p) else 0


def rows_heuristic(desc: Description, dev: Device, sizes: Mapping[str, int]) -> dict[str, int]:
    """One node's histogram per work-group in local memory (the description's default where local atomics fit):
    work-groups enough to fill the device (4 per compute unit on GPUs), as many per node as its rows keep busy
    (8 rows per work-item), the rest across nodes; a node's partials are added by the combine kernel. FLAT builds
    (64 nodes or more) share the rows out over 2 work-groups per compute unit on GPUs, a work-item's private share per
    core on CPUs (moved rows, ``flat="private"``). Feature groups take their own
    work-groups out of the same total, or under FLAT their runs' share of the line (H200, 10.5M rows at 256 bins in 4
    groups: a depth-wise round's histograms 4.60 ms, against 20.68 for a feature per lane)."""
    cfg = ones(desc, dev, sizes)
    gpu = dev.type == "gpu"
    total = (4 if gpu else 1) * max(1, dev.compute_units)
    if "grp" in desc.dim_names:  # feature groups (tree_histogram_groups): each its own work-groups, sharing the rest
        cfg["NUM_WG_grp"] = int(sizes["grp"])
        total = max(1, total // int(sizes["grp"]))
    wi = 256 if gpu else 16
    if cfg.get("PARTIALS_LOCAL"):
        cfg["NUM_WI_pos"] = wi
    # a work-group's share of a node: 8 rows a work-item at least, and on CPUs 4 rows a bin at least. A CPU's share
    # folds into a private histogram that is zeroed, written out as a partial and added by the combine kernel, a
    # node's whole histogram each: 16 shares of a 64-node level at 255 bins moved 57 KB x 16 x 64 for ~4000 rows a
    # node (16-core PoCL, the learner's 1e6-row classes at 256 bins, kernel alone: 64 nodes in 16 shares each 2.33 ms,
    # in one 0.60; fits of 500k rows at 255 bins, two leases: depth-wise 26.3 -> 22.3 and 33.0 -> 27.0 ms a round,
    # loss-guided 46.9 -> 39.0 and 52.5 -> 45.6; 12, 16 or 32 rows a bin, or 4 work-groups a core, were slower). GPUs
    # fold a work-group's share in local memory
    rows_min = 8 * cfg["NUM_WI_pos"] if gpu else max(8, 4 * (defined(desc, "TREE_BINS") or 64))
    per_node = pow2_at_most(max(1, sizes["pos"] // rows_min), pow2_at_most(total, 512))
    cfg["NUM_WG_pos"] = per_node
    cfg["NUM_WG_node"] = pow2_at_most(max(1, total // per_node), pow2_at_most(sizes["node"], 512))
    if "ROW_WORDS" in desc.switches and (gpu or "grp" not in desc.dim_names):
        # a row's bins as 32-bit words: H100 1.1-1.3x (gathered rows); 2-core EPYC, 500k binned Higgs rows in one
        # node, contiguous runs (CHUNKED): PoCL 4.4 -> 3.5 ms, Intel's runtime 3.0 -> 2.6 ms (the feature loop
        # unrolled, so the words stay in registers). A feature group's words (tree_histogram_groups): H200, 2.5M of
        # 10^7 binned Higgs-like rows through a scattered row index, 1 / 8 / 64 nodes 0.187 / 0.267 / 0.215 ms as
        # rotated bytes, 0.124 / 0.158 / 0.176 as rotated words, the 10^7-row root 0.417 -> 0.368; on PoCL (2-core
        # EPYC, 50k of 200k rows) words were slower, 0.54 -> 0.73 ms: CPUs keep bytes there
        cfg["ROW_WORDS"] = 1
    # local atomics spread over the banks (pairs in two planes) and over the features (each work-item from its own
    # on): H100, 10.5M binned Higgs rows through a row index, 1.35-1.45x over neither
    cfg["ROTATE"] = cfg["SPLIT_PAIRS"] = int(gpu and bool(cfg.get("PARTIALS_LOCAL")))
    if desc.padded and cfg["ROTATE"]:
        # a warp's work-items on different features still met in one bank where a feature's bins span a multiple of
        # the 32 banks (64 bins: bin b of every feature in bank b mod 32; few-valued features' common bins conflicted
        # as if on one address): padding moves each feature's bins some banks on (64 bins: a pad word a feature, one
        # bank). H200, 10^7 binned Higgs rows in one node, rows rotated by word: 0.48 -> 0.33 ms; every row in one
        # bin 2.24 -> 0.41 ms
        cfg["LOCAL_PAD"] = feature_pad(desc)
    if desc.flat_private and dev.type == "cpu" and sizes["node"] >= 64:
        # CPUs, batches of many unequal nodes: a private share of the rows end to end per work-item (FLAT under
        # PARTIALS_LOCAL=0), a node whole in a share stored and one cut by a share's end added with atomics, instead of
        # every node the same work-groups, each writing a partial of the node's whole histogram for the combine kernel
        # (500k binned Higgs rows at 255 bins, fits alternating in one process, MDHOM_TUNED=0: 16-core PoCL depth-wise
        # 1.036x, loss-guided 1.00x; 2-core Xeon 1.02x and 1.00x; the kernel alone, 64 unequal nodes: 0.92 -> 0.64 ms)
        # (a share per core: the shares need not be a power of two, a 12-core CPU runs 12)
        cfg["FLAT"], cfg["NUM_WG_node"], cfg["NUM_WG_pos"] = 1, 1, max(1, min(total, 512))
    if desc.flat and gpu and cfg.get("PARTIALS_LOCAL") and sizes["node"] >= 64:
        # batches of many unequal nodes: their rows end to end, an equal share per work-group, instead of every node
        # the same work-groups and the launch waiting for its longest node's (H200, 10.5M rows, loss-guided batches
        # of 16-127 nodes 0.20-0.27 ms against 0.23-0.37); one node or a few keep the grid, whose partials the
        # combine kernel adds faster than hundreds of work-groups add theirs into one node with global atomics
        # (the root 0.50 ms against 0.64). Two work-groups a compute unit, not four: each adds every piece of a node
        # it holds into the output with global atomics, a node's whole histogram a piece (H200, the tuner's classes
        # of 10^7 rows in 64 and 512 nodes, rotated and padded: 0.20 -> 0.16 and 0.21 -> 0.17 ms)
        cfg["FLAT"], cfg["NUM_WG_node"], cfg["NUM_WG_pos"] = 1, 1, pow2_at_most(max(1, total // 2), 1024)
        if "grp" in desc.dim_names:  # the groups' runs are on the line too: every work-group takes its share of them
            cfg["NUM_WG_grp"], cfg["NUM_WG_pos"] = 1, pow2_at_most(max(1, 2 * max(1, dev.compute_units)), 1024)
    return cfg




def _rows_inputs(s, rng):
    """What a whole-row histogram call of the learner sees: ``node`` nodes, the longest of ``pos`` rows and the
    others of ``pos / 64 .. pos`` (log-uniform: a loss-guided batch's nodes differ that much, and a build is chosen
    by its longest node), int32 (g, h) at the scale a round of that many rows uses, the class's bins (63 or 255 +
    missing), rows x features. Read through the row index (``row_index`` 1, GPUs' layout): each node a disjoint random
    set of the matrix's rows in ascending order (the partition keeps a node's rows so); moved (0, CPUs' layout): the
    nodes' rows contiguous, one range after another."""
    n_nodes, per, f, b = s["node"], s["pos"], s["feat"], s.get("n_bins", 64)
    n = n_nodes * per
    a = hist_q_inputs({"pos": n, "feat": f, "output": 1, "n_bins": b}, rng)
    begin, count = node_slots(n_nodes, per, rng)
    out = {"bins": a["bins"].reshape(-1), "gh": a["gh"].reshape(-1), "n_rows": n, "slot_begin": begin,
           "slot_count": count, "n_bins": b}
    if s.get("row_index", 1):
        rows = rng.permutation(n)
        out["ridx"] = np.concatenate([np.sort(rows[b0:b0 + c]) for b0, c in zip(begin, count, strict=True)])
        out["ridx"] = out["ridx"].astype(np.int32)
    return out


def _rows_ref(a):
    n = a["n_rows"]
    bins = a["bins"].reshape(n, -1)
    gh = a["gh"].reshape(n, -1, 2)
    ridx = a["ridx"] if "ridx" in a else np.arange(n)
    h = histogram_reference(bins, gh[..., 0], gh[..., 1], ridx, a["slot_begin"], a["slot_count"], a["n_bins"])
    return gh_struct(h).reshape(h.shape[0], -1)


def _row_class(prefix: str, nodes: int, rows: int, row_index: int) -> tuple[str, dict[str, int]]:
    """A size class of the whole-row histogram: ``rows`` rows in ``nodes`` nodes, read through the row index or
    moved (``row_index``), named so that the tuned file says which."""
    return (f"{prefix}_1e{round(math.log10(rows))}_nodes_{nodes}",
            {"node": nodes, "pos": rows // nodes, "feat": 28, "n_bins": 64, "row_index": row_index})


# tuned at the calls the learner makes (HistogramBuilder's builds, row_classes), in the variant the device's layout
# reads (``row_index``): GPUs through the row index, 10^7 rows in one node and in 8, 64 and 512 nodes, and a root of
# 10^6 rows (``rows_*``); CPUs 10^6 rows in 1, 8 and 64 nodes (a trial of 10^7 rows takes seconds there), moved
# (``moved_*``) or, where a CPU's layout reads the row index, ``rows_1e6_nodes_1`` and ``index_*``
_ROW_CLASSES = dict([_row_class("rows", 1, 10**6, 1)] + [_row_class("rows", c, 10**7, 1) for c in (1, 8, 64, 512)]
                    + [_row_class("index", c, 10**6, 1) for c in (8, 64)]
                    + [_row_class("moved", c, 10**6, 0) for c in (1, 8, 64)])
# fits at the default max_bin=255 where a node's 256-bin histogram needs no feature groups (the CPUs': half their local
# memory holds it): the CPU classes again at 256 bins (tree_histogram_groups has those of devices that need groups)
_ROW_CLASSES_ALL = with_default_bins(_ROW_CLASSES, ("rows_1e6_nodes_1", "index_1e6_nodes_8", "index_1e6_nodes_64",
                                                    "moved_1e6_nodes_1", "moved_1e6_nodes_8", "moved_1e6_nodes_64"),
                                     n_bins=DEFAULT_BINS)


def _layout_reads(device: Device, precision: str, n_features: int) -> tuple[int, int]:
    """(row index, whole rows) of the device's fits in ``precision``: its tuned layout, else the backend's heuristic
    (:mod:`mdhom.trees.opencl_backend`: GPUs read quantized rows through the row index, other devices move them;
    CPUs build whole-row histograms, accelerators none; the row index reads quantized rows whole)."""
    from mdhom.trees.layouts import stored  # here: importing mdhom.trees imports the components

    quantized = precision == "quantized"
    layout, _ = stored(device, precision, n_features)
    if layout is not None:
        return layout.row_index, int(bool(layout.whole_rows or (quantized and layout.row_index)))
    row_index = int(device.type == "gpu" and quantized)
    return row_index, int(bool(row_index or device.type == "cpu"))


def _rows_variant_applies(device: Device, s: Mapping[str, int]) -> bool:
    """Whether a class is the variant the device's quantized fits build (:func:`_layout_reads`), at the sizes tuned
    on its type. A tune that changes the layout tunes this kernel in the new variant in the same run
    (:func:`mdhom.tuning.driver._new_variant_plans`) where it studied the kernel, else on its next run (the tuner
    says so)."""
    row_index, whole = _layout_reads(device, "quantized", int(s["feat"]))
    total = s["node"] * s["pos"]
    sized = total <= 10**6 if device.type == "cpu" else (total > 10**6 or s["node"] == 1)
    return bool(whole) and int(s.get("row_index", 1)) == int(row_index) and sized


def _rows_class_applies(device: Device, s: Mapping[str, int]) -> bool:
    """:func:`_rows_variant_applies` for the classes whose bins fit a node's histogram in one group on the device
    (64 bins on every device, 256 where its local memory holds them: CPUs): the others are :data:`HISTOGRAM_GROUPS`'."""
    return (feature_groups(device, int(s["feat"]), 1, int(s.get("n_bins", 64))) == 1
            and _rows_variant_applies(device, s))


HISTOGRAM_ROWS = KernelSpec(
    "tree_histogram_rows", rows_heuristic,
    tuning=Tuning(lambda s: histogram_rows(int(s.get("n_bins", 64)), int(s["feat"]), 1, False,
                                           bool(s.get("row_index", 1))),
                  _ROW_CLASSES_ALL, _rows_inputs, _rows_ref, applies=_rows_class_applies,
                  doc="int32 (g, h) histograms of whole rows (all 28 features per work-item) in 1 to 512 nodes, rows "
                      "read through the row index or moved, as the device's layout reads them (64 bins; 256 where "
                      "one group holds them)"))
def _groups_variant_applies(device: Device, s: Mapping[str, int]) -> bool:
    """Whether a class is what the device's 256-bin fits build: Higgs-shaped rows in ``grp`` groups (the fewest that
    fit its local memory), read as its layout reads them (:func:`_rows_variant_applies`)."""
    return (feature_groups(device, int(s["feat"]), 1, int(s["n_bins"])) == int(s["grp"])
            and _rows_variant_applies(device, s))


# GPUs' 256-bin fits (max_bin=255, the default): 28 features in 2 groups (NVIDIA's 48 KB, AMD's 64) or 4 (32 KB),
# 10^7 rows in 1 and 64 nodes and a root of 10^6 rows, read through the row index
_GROUP_CLASSES = {f"groups{g}_{name}": {**sizes, "n_bins": 256, "grp": g}
                  for g in (2, 4) for name, sizes in ((n, c) for n, c in _ROW_CLASSES.items()
                                                       if n in ("rows_1e6_nodes_1", "rows_1e7_nodes_1",
                                                                "rows_1e7_nodes_64"))}
HISTOGRAM_GROUPS = KernelSpec(
    "tree_histogram_groups", rows_heuristic,
    tuning=Tuning(lambda s: histogram_groups(int(s["n_bins"]), int(s["feat"]), 1, int(s["grp"]), False,
                                             bool(s.get("row_index", 1))),
                  _GROUP_CLASSES, _rows_inputs, _rows_ref, applies=_groups_variant_applies,
                  doc="int32 (g, h) histograms of whole rows in feature groups (256 bins, 28 features in 2 or 4 "
                      "groups), where a node's whole histogram does not fit local memory"))

SPECS = (HISTOGRAM_ROWS, HISTOGRAM_GROUPS)
