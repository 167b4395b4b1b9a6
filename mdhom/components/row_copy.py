"""A copy of 8-byte words as a generated kernel: the benches' bandwidth reference (:mod:`mdhom.bench.profile`)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mdhom.components.specs import KernelSpec, Tuning, elementwise
from mdhom.mdh import Concat, Description, Input


@lru_cache(maxsize=1)
def copy_words() -> Description:
    """A copy of 8-byte words as a kernel, beside the buffer copy, for the benches' bandwidth reference (the faster of
    the two, :func:`mdhom.bench.profile.copy_bandwidth`): CPU runtimes copy buffers (``clEnqueueCopyBuffer``) on one
    thread (PoCL on the H200 host's 16 cores: 336 MB in 34 ms, ~10 GB/s, while its kernels streamed 18-80 GB/s)."""
    return Description("tree_copy_words", ["i"], [Concat()], "ulong", "out = src;",
                       inputs=[Input("src", "ulong", ("i",))], chunked=True)


COPY = KernelSpec("tree_copy_words", elementwise(), tuning=Tuning(
    lambda s: copy_words(), {"words_1e7": {"i": 10**7}},
    lambda s, rng: {"src": rng.integers(0, 2**63, s["i"], dtype=np.uint64)}, lambda a: a["src"],
    doc="a copy of 8-byte words (the benches' bandwidth reference)"))
SPECS = (COPY,)
