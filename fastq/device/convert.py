"""What a device-side conversion of uint8 images does, framework-neutral.

fastq.torch, fastq.jax (and the TensorFlow path) copy uint8 batches to the accelerator
and convert them there: normalize, cast, lay out.  This module parses and checks those
arguments once; each framework module runs the conversion with its own kernels, as a
gather from :func:`fastq.ops.normalize_table`, so the result equals fastq's host-side
``ops.Normalize`` write bit for bit.
"""
from typing import Any, Optional, Tuple

from fastq import ops as _ops

__all__ = ["ConversionSpec", "LAYOUTS"]

LAYOUTS = ("NHWC", "NCHW", "channels_last")
FLOATS = ("float32", "bfloat16", "float16")


class ConversionSpec:
    """normalize : None, True, (mean, std) or fastq.ops.Normalize
        True: ImageNet mean/std; (mean, std) on the 0..1 scale, as ``ops.Normalize`` takes
        them.  None: no normalization (a float dtype then gives ``x / 255``, as a fastq
        pipeline without Normalize writes).
    dtype : a dtype name or object ("float32", "bfloat16", "float16", "uint8")
        Default: float32 when normalizing, else unchanged (uint8).
    layout : "NHWC", "NCHW" or "channels_last"
        The output layout: NHWC, contiguous NCHW, or (PyTorch) NCHW shape in channels_last
        memory.  Default: the input's.
    input_layout : "NHWC" or "NCHW"
        The pipeline's layout.
    """

    def __init__(self, normalize: Any = None, dtype: Any = None, layout: Optional[str] = None,
                 input_layout: str = "NHWC", where: str = "fastq") -> None:
        if normalize is True:
            normalize = _ops.Normalize()
        elif normalize is False:
            normalize = None
        elif normalize is not None and not isinstance(normalize, _ops.Normalize):
            try:
                mean, std = normalize
            except (TypeError, ValueError):
                raise TypeError(f"{where}: normalize must be None, True, (mean, std) or a fastq.ops.Normalize, "
                                f"got {normalize!r}") from None
            normalize = _ops.Normalize(mean, std)
        self.normalize: Optional[_ops.Normalize] = normalize
        name = _ops.dtype_name(dtype, where) if dtype is not None else ("float32" if normalize is not None else None)
        if name == "uint8" and normalize is not None:
            raise ValueError(f"{where}: normalize= needs a float dtype (float32, bfloat16, float16), got uint8")
        self.dtype: Optional[str] = name
        if input_layout not in ("NHWC", "NCHW"):
            raise ValueError(f"{where}: input_layout must be NHWC or NCHW, got {input_layout!r}")
        if layout is not None and layout not in LAYOUTS:
            raise ValueError(f"{where}: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if layout == "NHWC" and input_layout == "NCHW":
            raise ValueError(f"{where}: layout='NHWC' from an NCHW pipeline is not supported: build the Pipeline "
                             f"with layout='NHWC' (or ask for NCHW / channels_last)")
        self.layout = layout or input_layout
        self.input_layout = input_layout
        self.where = where

    @property
    def casts(self) -> bool:
        """True when the values change (a float output), not only the layout."""
        return self.dtype in FLOATS

    @property
    def active(self) -> bool:
        """False when the images are passed through unchanged."""
        return self.casts or self.layout != self.input_layout

    def plan(self, shape: Tuple[int, ...]) -> Tuple[Tuple[int, ...], int, int]:
        """For a batch of `shape` (input layout): the permutation to the layout the result is
        computed in contiguously (NCHW for "NCHW", NHWC otherwise; channels_last is then a
        view), the number of channels and the channel axis of that permuted batch."""
        if len(shape) != 4:
            raise ValueError(f"{self.where}: images must be a 4-D batch, got shape {tuple(shape)}")
        if self.layout == "NCHW":
            perm = (0, 1, 2, 3) if self.input_layout == "NCHW" else (0, 3, 1, 2)
            axis = 1
        else:
            perm = (0, 1, 2, 3) if self.input_layout == "NHWC" else (0, 2, 3, 1)
            axis = 3
        c = shape[perm[axis]]
        if c not in (1, 3):
            raise ValueError(f"{self.where}: images need 1 or 3 channels, got shape {tuple(shape)} "
                             f"({self.input_layout})")
        return perm, c, axis

    def table(self):
        """The float32 (3, 256) table (fastq.ops.normalize_table)."""
        return _ops.normalize_table(self.normalize)
