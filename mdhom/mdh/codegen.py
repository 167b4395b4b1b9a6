"""Render an md_hom description into OpenCL C with the Mako templates in ``kernels/``.

The source depends on the description only; tuning parameters stay preprocessor macros (``-D NUM_WI_x=``),
so one rendering serves every configuration and sizes are kernel arguments, not constants.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from mako.lookup import TemplateLookup

from mdhom.mdh.description import Description
from mdhom.mdh.parts import FLAT_SPAN, PREFETCH_AHEAD, Scan
from mdhom.mdh.types import helpers


def kernels_dir() -> Path:
    return Path(str(resources.files("mdhom.kernels")))


@lru_cache(maxsize=1)
def _lookup() -> TemplateLookup:
    return TemplateLookup(directories=[str(kernels_dir())], strict_undefined=True)


def _row_major(names: tuple[str, ...], term: str = "{d}", shifted: str | None = None) -> str:
    """Row-major linear index over ``names`` (the last varies fastest); ``shifted``: that dimension at ``+ mdh_s``."""
    if not names:
        return "0"

    def at(d: str) -> str:
        return f"({d} + mdh_s)" if d == shifted else term.format(d=d)

    expr = at(names[0])
    for d in names[1:]:
        expr = f"({expr}) * SIZE_{d} + {at(d)}"
    return expr


def _row_major_groups(names: tuple[str, ...]) -> str:
    if not names:
        return "0"
    expr = f"wg_{names[0]}"
    for d in names[1:]:
        expr = f"({expr}) * NUM_WG_{d} + wg_{d}"
    return expr


def template_context(desc: Description) -> dict:
    """Everything the templates read, derived from the description."""
    fn_params, fn_args, loads = [], [], []
    for inp in desc.inputs:
        if inp.gather:
            fn_params.append(f"__global {'' if inp.writes else 'const '}{inp.ctype}* restrict {inp.name}")
            fn_args.append(inp.name)
        else:
            fn_params.append(f"__global const {inp.ctype}* restrict mdh_in_{inp.name}")
            fn_args.append(f"mdh_in_{inp.name}")
            index = inp.index if inp.index is not None else _row_major(tuple(str(s) for s in inp.shape))
            loads.append((inp.ctype, inp.name, index))
    scratch_decl = ""
    if desc.scratch is not None:  # after the inputs: the computation passes its scratch buffer there
        sc = desc.scratch
        fn_params.append(f"__global {sc.ctype}* restrict mdh_scratch")
        fn_args.append("mdh_scratch")
        glob = (f"    MDH_SCRATCH {sc.ctype}* const {sc.name} = mdh_scratch + (long)get_global_id(0) * "
                f"(long){sc.length};")
        lines = ["    /* this work-item's own slice of the scratch memory */", glob]
        if sc.private:  # a build-time choice (SCRATCH_PRIVATE): the same name, private memory when it is small
            lines = [lines[0], "#if SCRATCH_PRIVATE > 0", f"    {sc.ctype} mdh_private_scratch[SCRATCH_PRIVATE];",
                     f"    MDH_SCRATCH {sc.ctype}* const {sc.name} = mdh_private_scratch;", "#else", glob, "#endif"]
        scratch_decl = "\n".join(lines)
    for d in desc.dim_names:
        fn_params.append(f"const idx_t SIZE_{d}")
        fn_args.append(f"SIZE_{d}")
    for p in desc.params:
        fn_params.append(f"const {p.ctype} {p.name}")
        fn_args.append(p.name)
    op = desc.operator
    scan = next((c for c in desc.combine if isinstance(c, Scan)), None)
    concat = desc.concat_dims
    return {
        "desc": desc,
        "name": desc.name,
        "dims": desc.dim_names,
        "lane_dims": desc.lane_dims,
        "concat_dims": concat,
        "output_dims": desc.output_dims,
        "scan_dim": desc.scan_dim,
        "inclusive": bool(scan.inclusive) if scan else True,
        # exact rounding helpers (mdh_rint, mdh_ldexp) where the description's code calls them
        "exact_rounding": desc.double_fp and any("mdh_rint" in t or "mdh_ldexp" in t for t in (
            desc.scalar, desc.preamble, desc.accumulate or "", desc.accumulate_atomic or "")),
        "type_declaration": desc.atom.declaration("atom_t"),
        "type_helpers": helpers(desc.atom),
        "operator_source": op.source if op else "",
        "operator_name": op.name if op else "",
        "fn_params": ", ".join(fn_params),
        "fn_args": ", ".join(fn_args),
        "loads": loads,
        "scratch_decl": scratch_decl,
        "point_params": ", ".join(f"const idx_t {d}" for d in desc.dim_names),
        "fold_inline": "MDH_FOLD_INLINE" if desc.inline_fold else "inline",
        "scalar_inline": "MDH_SCALAR_INLINE" if desc.inline_scalar else "inline",
        "point_args": ", ".join(desc.dim_names),
        # the vector form's dimension, and the point of a partial block's mdh_s-th point (folded one by one)
        "vec_dim": desc.vector.dim if desc.vector else None,
        "vec_reach": (desc.vector.reach or f"SIZE_{desc.vector.dim}") if desc.vector else None,
        "vec_tail_args": ", ".join(f"{d} + mdh_s" if desc.vector and d == desc.vector.dim else d
                                   for d in desc.dim_names),
        # the output position of a block's mdh_s-th point (the vector form of a concatenated dimension)
        "vec_concat_index": _row_major(concat, shifted=desc.vector.dim if desc.vector else None),
        "concat_count": " * ".join(["(idx_t)1"] + [f"SIZE_{d}" for d in concat]),
        "concat_index": _row_major(concat),
        "output_index": _row_major(desc.output_dims),
        "wg_lane_index": _row_major_groups(desc.lane_dims),
        "combine_lanes": desc.combine_lanes,
        "lane_ctype": desc.atom.scalars[0],
        # the bound of each dimension's loop: its size, or its ragged extent at the current point
        "flat_span": FLAT_SPAN,
        "prefetch_ahead": PREFETCH_AHEAD,
        "bounds": {d: f"EXTENT_{d}" if d in dict(desc.extents) else f"SIZE_{d}" for d in desc.dim_names},
        **_local_accumulator(desc),
    }


def _local_accumulator(desc: Description) -> dict:
    """How the templates declare and address the local accumulator (PARTIALS_LOCAL): atoms, or with ``padded`` a
    padded array of words (LOCAL_PAD, ``MDH_PAD``). Unpadded descriptions keep their source as it was."""
    aligned = " __attribute__((aligned(8)))" if desc.packed_pairs else ""
    if desc.padded:
        return {
            "lacc_decl": lambda n: f"    __local uint mdh_lacc[{n} * MDH_LANE_WORDS]{aligned};",
            "lane_acc": lambda c: f"(__local atom_t*)(mdh_lacc + ({c}) * MDH_LANE_WORDS)",
            "acc_words": "MDH_LANE_WORDS",
            "pad": lambda i: f"MDH_PAD({i})",
        }
    return {
        "lacc_decl": lambda n: f"    __local atom_t mdh_lacc[{n}]{aligned};",
        "lane_acc": lambda c: f"&mdh_lacc[{c}]",
        "acc_words": "(idx_t)(sizeof(atom_t) / 4)",
        "pad": lambda i: i,
    }


@lru_cache(maxsize=256)
def generate(desc: Description) -> str:
    """The complete OpenCL C source (prelude, parameter defaults, skeleton) of a description."""
    ctx = template_context(desc)
    skeleton = "mdh_place.cl.mako" if desc.place else "mdh_scan.cl.mako" if desc.scan_dim else "mdh_reduce.cl.mako"
    parts = [_lookup().get_template(t).render(**ctx) for t in ("mdh_prelude.cl.mako", "mdh_params.cl.mako", skeleton)]
    return "\n".join(parts)
