"""Declarative image ops.

An op is a small immutable description, validated when it is constructed (a bad
parameter raises ``ValueError`` naming the op, the parameter and the value).  A chain
of ops is packed for the C core and checked as a whole by :func:`compile_ops` (with the C
core's chain rules, ``fq_img_chain_check``).
Nothing here runs pixels: the chain is executed natively (``csrc/image/api/fq_image_ops.cpp``) on
uint8 images with OpenCV, and the last step (``Normalize`` + dtype + layout) is fused
into the write of the output row.

Conventions (torchvision's, unless stated; exact definitions in ``docs/ops.md``):

* images are RGB (or 1-channel gray when ``channels=1``), uint8, HWC while ops run;
* sizes are ``(height, width)``; an int size means a square, except for ``Resize``
  where an int is the length of the shorter side;
* random parameters of sample ``index`` come from a counter-based stream keyed by
  ``(seed, epoch, index)``, drawn in chain order; an op draws only what it needs;
* interpolation names: ``nearest``, ``bilinear``, ``bicubic``, ``area``, ``lanczos``
  (OpenCV's INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4;
  note that OpenCV's bilinear does not antialias when shrinking, use ``area`` for that);
  for the resize ops also ``pil_nearest``, ``pil_bilinear``, ``pil_bicubic``,
  ``pil_lanczos``, ``pil_box``, ``pil_hamming``: Pillow's ``Image.resize`` with that
  ``resample``, bit for bit (antialiased; what torchvision does to PIL images), and a
  JPEG op 0 with one of them is never DCT-scaled.

One namespace, one module per family (as torchvision's ``transforms/v2/``): ``_base``
(the ``Op`` base class, the C core's constants, argument checks), ``_geometry``,
``_color``, ``_augment`` (erasing and noise), ``_auto_augment`` (policies), ``_compose``,
``_custom`` (CustomOp, PyFunc) and ``_compile`` (``compile_ops``).  Every name is defined
once there, listed in that module's ``__all__`` and re-exported here; the public classes
and functions keep ``__module__ == "fastq.ops"``, so pickles and reprs name ``fastq.ops.X``
whatever file holds it.  The modules import only ``fastq._native._image`` and each other, never upward.
"""
from fastq.ops import _augment, _auto_augment, _base, _color, _compile, _compose, _custom, _geometry
from fastq.ops._base import *  # noqa: F401,F403
from fastq.ops._geometry import *  # noqa: F401,F403
from fastq.ops._color import *  # noqa: F401,F403
from fastq.ops._augment import *  # noqa: F401,F403
from fastq.ops._auto_augment import *  # noqa: F401,F403
from fastq.ops._compose import *  # noqa: F401,F403
from fastq.ops._custom import *  # noqa: F401,F403
from fastq.ops._compile import *  # noqa: F401,F403
# names of fastq.ops outside __all__, as before the split
from fastq.ops._base import (BORDERS, INTERPOLATIONS, K_CENTER_CROP, K_COLOR_JITTER, K_GRAYSCALE,  # noqa: F401
                             K_HFLIP, K_NORMALIZE, K_RANDOM_AFFINE, K_RANDOM_CROP, K_RANDOM_RESIZED_CROP, K_RESIZE,
                             K_VFLIP, MAX_OPS, MAX_SIDE, Fill, Pair, Range)
from fastq.ops._color import normalize_table  # noqa: F401
from fastq.ops._compose import _rows  # noqa: F401 (fastq.batchpad)
from fastq.ops._compile import DTYPES, dtype_name, layout_name  # noqa: F401

# Each family module's __all__ is re-exported as it stands: a new op is its class and its
# name in its family's __all__, nothing here.
__all__: list = []
__all__ += _base.__all__
__all__ += _geometry.__all__
__all__ += _color.__all__
__all__ += _augment.__all__
__all__ += _auto_augment.__all__
__all__ += _compose.__all__
__all__ += _custom.__all__
__all__ += _compile.__all__

# The public classes and functions are fastq.ops.X, as when this was one module (pickles
# store __module__; reprs and help() show it).
for _obj in [v for v in list(globals().values()) if isinstance(v, type) or callable(v)]:
    if getattr(_obj, "__module__", "").startswith("fastq.ops.") and not _obj.__name__.startswith("_"):
        _obj.__module__ = __name__
del _obj
