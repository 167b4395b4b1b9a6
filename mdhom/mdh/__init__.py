"""The md_hom model: describe a computation, generate its OpenCL kernels, run them.

A description names the dimensions of an index space, a scalar function in OpenCL C that maps one point to
an output atom, and one combine operator per dimension::

    from mdhom import mdh
    hist = mdh.Description(
        "histogram", ["row", "feat"], [mdh.Reduce(mdh.SUM), mdh.Concat()],
        mdh.Array(mdh.Scalar("float"), 16),
        scalar="out.v[bins] = g;",                 # one-hot contribution of the row ...
        accumulate="acc.v[bins] += g;",           # ... folded straight into its bin
        inputs=[mdh.Input("bins", "uchar", ("row", "feat")), mdh.Input("g", "float", ("row",))],
    )
    counts = mdh.Computation(hist, device="auto")(bins=b, g=g)   # shape (n_features, 16)

The README's md_hom computations section describes the model and the skeleton the generator emits.
"""

from mdhom.mdh.build import BuildError, build_program, program_kernel
from mdhom.mdh.computation import BoundLaunch, Computation, Launch
from mdhom.mdh.description import Description
from mdhom.mdh.limits import build_within_limits
from mdhom.mdh.parts import (
    Concat,
    ConfigError,
    DescriptionError,
    Dim,
    Input,
    KernelLimitError,
    Operator,
    Param,
    Parameter,
    Place,
    Reduce,
    Scan,
    Scratch,
    Vector,
)
from mdhom.mdh.types import Array, Scalar, Struct

SUM = Operator.named("sum")
MAX = Operator.named("max")
MIN = Operator.named("min")
ARGMAX = Operator.named("argmax")
ARGMIN = Operator.named("argmin")

__all__ = [
    "ARGMAX",
    "ARGMIN",
    "MAX",
    "MIN",
    "SUM",
    "Array",
    "BoundLaunch",
    "BuildError",
    "Computation",
    "Concat",
    "ConfigError",
    "Description",
    "DescriptionError",
    "Dim",
    "Input",
    "KernelLimitError",
    "Launch",
    "Operator",
    "Param",
    "Parameter",
    "Place",
    "Reduce",
    "Scalar",
    "Scan",
    "Scratch",
    "Struct",
    "Vector",
    "build_program",
    "build_within_limits",
    "program_kernel",
]
