"""A copy of 8-byte words as a generated kernel: the rows' reset at each tree on CPUs, and the benches' bandwidth
reference (:mod:`mdhom.bench.profile`)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.mdh import Concat, Description, Input


@lru_cache(maxsize=1)
def copy_words() -> Description:
    """A copy of 8-byte words as a kernel. CPU runtimes copy buffers (``clEnqueueCopyBuffer``) on one thread: PoCL on
    the H200 host's 16 cores reset a tree's rows (336 MB) in 34 ms, ~10 GB/s, while its kernels streamed 18-80 GB/s;
    a kernel copies on every core. The bench reports kernels' bandwidth against it (:mod:`mdhom.bench.profile`)."""
    return Description("tree_copy_words", ["i"], [Concat()], "ulong", "out = src;",
                       inputs=[Input("src", "ulong", ("i",))], chunked=True)


def copy_by_kernel(device) -> bool:  # noqa: ANN001 - a Device
    """Whether row-sized copies run as :func:`copy_words` (CPUs) or as buffer copies (GPUs: the copy engine)."""
    return device.type == "cpu"


COPY = KernelSpec("tree_copy_words", elementwise(), tuning=Tuning(
    lambda s: copy_words(), {"words_1e7": {"i": 10**7}},
    lambda s, rng: {"src": rng.integers(0, 2**63, s["i"], dtype=np.uint64)}, lambda a: a["src"],
    doc="a copy of 8-byte words (a tree's reset of the rows on CPUs)"))
SPECS = (COPY,)
