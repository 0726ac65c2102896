"""Custom ops: where the C header of ``fastq.ops.CustomOp`` is (docs/custom_ops.md)."""
import os

__all__ = ["get_include", "HEADER"]

HEADER = "fastq_custom_op.h"


def get_include() -> str:
    """The folder that holds ``fastq_custom_op.h``, for ``cc -I``: ``fastq/include`` in an
    installed package, ``csrc/image`` in a source checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(here, "include"), os.path.join(os.path.dirname(here), "csrc", "image")):
        if os.path.isfile(os.path.join(d, HEADER)):
            return d
    raise FileNotFoundError(f"{HEADER} is not installed with fastq (looked in {here}/include)")
