"""compile_ops: a chain of ops checked as a whole (by the C core's chain rules,
``fq_img_chain_check``) and packed into ``fq_op[]``; the output dtype, layout and channel
names it takes."""
import numbers
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Tuple, Union

import numpy as np

from fastq._native import _image
from fastq.ops._base import DEFAULT_MAX_PIXELS, MAX_OPS, Op, _size
from fastq.ops._compose import _rows
from fastq.ops._geometry import CenterCrop

# the public names of this family (fastq.ops re-exports them)
__all__ = ["compile_ops", "CompiledOps", "channels_order"]

DTYPES = _image.DTYPES  # ("uint8", "float32", "float16", "bfloat16")
IDCTS = _image.IDCTS  # ("accurate", "fast")
_LAYOUTS = {"NHWC": "NHWC", "HWC": "NHWC", "NCHW": "NCHW", "CHW": "NCHW"}


def dtype_name(dtype: Any, where: str = "compile_ops") -> str:
    """The output dtype's name: accepts "float32", ``np.float32``, ``np.dtype("float32")``,
    ``tf.float32``, ``ml_dtypes.bfloat16``/``jnp.bfloat16``..."""
    name = None
    if isinstance(dtype, str):
        name = dtype.lower()
    elif dtype is not None:
        np_dtype = getattr(dtype, "as_numpy_dtype", None)  # a tf.DType
        try:
            name = np.dtype(np_dtype if np_dtype is not None else dtype).name
        except TypeError:
            name = None
    if name not in DTYPES:
        raise ValueError(f"{where}: dtype must be one of {list(DTYPES)} (a name, a numpy dtype or a "
                         f"TensorFlow dtype), got {dtype!r}")
    return name


def layout_name(layout: str, where: str = "compile_ops") -> str:
    """"NHWC"/"NCHW" from any case of NHWC, NCHW, HWC, CHW."""
    key = layout.upper() if isinstance(layout, str) else None
    if key not in _LAYOUTS:
        raise ValueError(f"{where}: layout must be NHWC or NCHW (any case; HWC and CHW too), got {layout!r}")
    return _LAYOUTS[key]


def channels_order(channels: Any, where: str = "compile_ops") -> Tuple[int, str]:
    """``(channels, channel_order)`` from the ``channels`` option: 3 or "RGB" -> (3, "RGB"),
    "BGR" -> (3, "BGR"), 1 or "gray" -> (1, "RGB") (names in any case)."""
    if isinstance(channels, str):
        key = channels.upper()
        if key in ("RGB", "BGR"):
            return 3, key
        if key == "GRAY":
            return 1, "RGB"
    elif isinstance(channels, numbers.Integral) and not isinstance(channels, bool) and int(channels) in (1, 3):
        return int(channels), "RGB"
    raise ValueError(f"{where}: channels must be 3, 1, 'RGB', 'BGR' or 'gray', got {channels!r}")


@dataclass(frozen=True)
class CompiledOps:
    """A validated chain: what ``fastq._native._image.ImageSpec`` (and the pipeline) take.

    ``packed_ops`` is an ``FQ_OP_DTYPE`` array laid out exactly as ``fq_op[]``.
    ``out_shape`` is per sample: (h, w, c) for NHWC, (c, h, w) for NCHW."""

    ops: tuple
    packed_ops: np.ndarray
    channels: int
    dtype: str
    layout: str
    max_pixels: int
    dct_scaling: bool
    out_shape: tuple
    channel_order: str = "RGB"  # "BGR": the output channels reversed (channels="BGR")
    idct: str = "accurate"  # the JPEG decoder's inverse DCT: "accurate" or "fast" (compile_ops)


def compile_ops(ops: Union["Op", Iterable["Op"], None], *, dtype: Any = "float32", layout: str = "NHWC",
                channels: int = 3, max_pixels: int = DEFAULT_MAX_PIXELS, dct_scaling: bool = True,
                input_size: Optional[Tuple[int, int]] = None, idct: str = "accurate") -> "CompiledOps":
    """Validate a chain of ops and pack it.

    Rules: at most 16 ops (one op alone is taken as a chain of one); the chain must
    give a fixed output size (its last size-changing op is a crop,
    ``RandomResizedCrop`` or ``Resize((h, w))``) unless ``input_size`` says every input
    image already has one ``(height, width)`` (``Arrays`` of equal-sized images): a
    chain without any size-changing op (even an empty one) then keeps that size.
    ``Normalize`` at most once and last, and only with a float dtype.  ``dtype``:
    uint8, float32, float16, bfloat16 (a name, numpy dtype or tf.DType); ``layout``:
    NHWC or NCHW (any case); ``channels``: 3 or "RGB", "BGR" (RGB reversed, fused into
    the write; Normalize's mean/std stay in RGB order and follow their channel), 1 or
    "gray"; ``max_pixels``:
    encoded images declaring more pixels fail with ImageTooLargeError before
    decoding; ``dct_scaling``: allow approximate JPEG DCT-domain downscaling when the
    first op is RandomResizedCrop or Resize (see docs/ops.md); ``idct``: the JPEG decoder's
    inverse DCT at full scale, ``"accurate"`` (libjpeg's ISLOW: PIL's and OpenCV's decode)
    or ``"fast"`` (IFAST: ``tf.io.decode_jpeg``'s and so Keras's default, up to a few levels
    away from the accurate one).
    """
    if isinstance(ops, Op):
        ops = (ops,)
    elif ops is None:
        ops = ()
    elif isinstance(ops, (str, bytes, dict)) or not hasattr(ops, "__iter__"):
        raise TypeError(f"compile_ops: ops must be a list of fastq.ops ops (or one op), got {type(ops).__name__}")
    ops = tuple(ops)
    if len(ops) > MAX_OPS:
        raise ValueError(f"compile_ops: at most {MAX_OPS} ops, got {len(ops)}")
    for i, op in enumerate(ops):
        if not isinstance(op, Op):
            raise ValueError(f"compile_ops: op {i} is not a fastq.ops op: {op!r}")
    dtype = dtype_name(dtype)
    layout = layout_name(layout)
    channels, channel_order = channels_order(channels)
    if idct not in IDCTS:
        raise ValueError(f"compile_ops: idct must be one of {', '.join(map(repr, IDCTS))}, got {idct!r}")
    if not (isinstance(max_pixels, numbers.Integral) and max_pixels > 0):
        raise ValueError(f"compile_ops: max_pixels must be a positive int, got {max_pixels!r}")
    # the chain rules are the C core's (fq_img_chain_check); only the input_size case
    # and the wording of the advice are decided here
    packed = _image.pack_ops(_rows(ops))
    chain = _image.check_chain(packed, dtype)
    if chain["out_size"] is None and input_size is not None and chain["keeps_size"]:
        # every input is already input_size: an exact-size CenterCrop is the identity
        # and tells the C core the (fixed) output size
        if len(ops) >= MAX_OPS:
            raise ValueError(f"compile_ops: at most {MAX_OPS - 1} ops when the chain keeps the input size")
        ops = (CenterCrop(_size("compile_ops", input_size, "input_size")),) + ops
        packed = _image.pack_ops(_rows(ops))
        chain = _image.check_chain(packed, dtype)
    if chain["error"] is not None:
        if not ops:
            raise ValueError(
                "compile_ops: the op chain is empty and the images do not all have one size; it needs a "
                "crop or Resize((h, w)) (an empty chain is valid for Arrays of equal-sized images)")
        raise ValueError(f"compile_ops: {chain['error']}")
    size = chain["out_size"]
    h, w = size
    out_shape = (h, w, channels) if layout == "NHWC" else (channels, h, w)
    return CompiledOps(ops, packed, channels, dtype, layout, int(max_pixels), bool(dct_scaling), out_shape,
                       channel_order, idct)
