"""uint8 on the wire, conversion on the device: :func:`to_device` (and the conversion
fastq.tf.dataset runs on its device), and :func:`from_dlpack`."""
import contextlib
from typing import Any, Optional

import numpy as np


def _tf():
    import tensorflow as tf
    return tf


def _conversion(normalize, dtype, layout, input_layout):
    """The conversion asked for (fastq.device.convert.ConversionSpec), or None when there is none."""
    from fastq.device.convert import ConversionSpec
    spec = ConversionSpec(normalize, dtype, layout, input_layout, where="fastq.tf")
    if spec.layout == "channels_last":
        raise ValueError("fastq.tf: layout='channels_last' is PyTorch's memory format (an NCHW shape); TensorFlow "
                         "tensors have none: ask for 'NHWC' (Keras' channels_last) or 'NCHW'")
    return spec if spec.active else None


def _convert_images(images, spec):
    """uint8 images -> the spec's layout and dtype, normalized as fastq's Normalize writes it
    (bit for bit: a gather from fastq.ops.normalize_table), on the device the ops run on."""
    tf = _tf()
    from fastq.tf import ops as tf_ops
    if spec.casts and images.dtype != tf.uint8:
        raise TypeError(f"fastq.tf: normalize/dtype on the device needs uint8 images, got {images.dtype.name}: "
                        f"build the Pipeline with dtype='uint8' and without ops.Normalize (the device does that)")
    perm, _, axis = spec.plan(tuple(images.shape))
    if perm != (0, 1, 2, 3):  # uint8: a quarter of the bytes of the float result to move
        images = tf.transpose(images, perm)
    if not spec.casts:
        return images
    return tf_ops.gather_table(images, tf_ops.table_as(spec.table(), spec.dtype), axis)


def to_device(batch: Any, device: Optional[str] = None, *, normalize: Any = None, dtype: Any = None,
              layout: Optional[str] = None, input_layout: str = "NHWC") -> Any:
    """A batch ``(images, ...)`` (or an images tensor) on `device`, its uint8 images
    converted there (fastq.device.convert.ConversionSpec): ``normalize`` True (ImageNet),
    ``(mean, std)`` on the 0..1 scale or an ``ops.Normalize`` - the result equals the
    Pipeline's Normalize bit for bit; ``dtype`` float32 (the default when normalizing),
    bfloat16, float16 (without ``normalize``: ``x / 255``, as a Pipeline without Normalize
    writes); ``layout`` "NHWC" or "NCHW" (``input_layout``: the Pipeline's).  The other
    tensors are copied as they are.  Eager or inside a ``tf.function`` (a training step);
    ``device=None``: where TensorFlow places the ops.  The names of fastq.torch.to_device
    and fastq.jax.device_put."""
    tf = _tf()
    spec = _conversion(normalize, dtype, layout, input_layout)
    single = not isinstance(batch, (tuple, list))
    items = (batch,) if single else tuple(batch)
    with tf.device(device) if device else contextlib.nullcontext():
        first = tf.convert_to_tensor(items[0])
        first = first if spec is None else _convert_images(first, spec)
        out = (tf.identity(first),) + tuple(tf.nest.map_structure(tf.identity, x) for x in items[1:])
    return out[0] if single else out


def from_dlpack(array: np.ndarray) -> Any:
    """A TF tensor viewing `array` (e.g. one array of a fastq batch) through
    DLPack, without a copy.  The DLPack capsule holds a reference to the array,
    so the tensor keeps the batch's slot leased until TensorFlow frees it."""
    tf = _tf()
    return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
