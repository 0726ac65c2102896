"""fastq batches on a JAX device, as uint8 over the wire, converted on the device.

    import fastq, fastq.jax

    pipe = fastq.Pipeline(source, batch_size=64, ops=[ops.RandomResizedCrop(224), ops.HorizontalFlip()],
                          dtype="uint8")
    for images, labels in pipe:
        x, y = fastq.jax.device_put((images, labels), jax.devices()[0], normalize=True, dtype="bfloat16")
        state = train_step(state, x, y)

:func:`device_put` is ``jax.device_put`` of each array of the batch, then (``normalize``,
``dtype``, ``layout``: :class:`fastq.device.convert.ConversionSpec`) a jitted conversion of the
images on the device: a gather from fastq's Normalize table
(:func:`fastq.ops.normalize_table`), so the values equal what ``ops.Normalize`` writes on
the host, bit for bit, in float32, bfloat16 and float16.  A uint8 batch is a quarter of
the bytes of a float32 one over host memory and PCIe.  XLA chooses device memory
layouts itself, so ``layout`` is NHWC or NCHW (no channels_last).

Slot lifetime: to an accelerator, JAX keeps a reference to the host array (and so to the
batch's slot lease) until its transfer has completed.  To a CPU device, ``jax.device_put``
would alias the slot and hold it for the JAX array's whole life, so the batch is copied on
the host first.  Either way the producers never overwrite a slot JAX still reads, and
keeping the JAX arrays does not keep slots; drop your own references whenever you like.

This module is ``fastq.jax``; its ``import jax`` is an absolute import and gets JAX.
"""
import functools
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from fastq.device.convert import ConversionSpec

__all__ = ["device_put", "convert", "converter"]


@functools.lru_cache(maxsize=64)
def _jitted(perm: Tuple[int, ...], c: int, axis: int, dtype: str) -> Callable[..., Any]:
    shape = [1, 1, 1, 1]
    shape[axis] = c
    offs = (np.arange(c, dtype=np.int32) * 256).reshape(shape)

    def run(x: Any, table: Any) -> Any:
        if dtype in ("float32", "bfloat16", "float16"):
            idx = jnp.transpose(x, perm).astype(jnp.int32) + offs
            return jnp.take(table, idx)
        return jnp.transpose(x, perm)
    return jax.jit(run)


_tables: Dict[Tuple[Any, ...], Any] = {}


def _table(spec: ConversionSpec) -> Any:
    n = spec.normalize
    key = (spec.dtype, None if n is None else (n.mean, n.std, n.max_pixel_value))
    t = _tables.get(key)
    if t is None:
        flat = jnp.asarray(spec.table().reshape(-1))  # float32
        t = _tables[key] = flat.astype(jnp.dtype(spec.dtype)) if spec.dtype != "float32" else flat  # RNE
    return t


def converter(normalize: Any = None, dtype: Any = None, layout: Optional[str] = None,
              input_layout: str = "NHWC") -> Callable[[Any], Any]:
    """A function ``images -> converted images`` (jitted; runs where the images are)."""
    spec = ConversionSpec(normalize, dtype, layout, input_layout, where="fastq.jax")
    if spec.layout == "channels_last":
        raise ValueError("fastq.jax: layout='channels_last' is PyTorch's memory format; XLA picks device layouts "
                         "itself: ask for NHWC or NCHW")

    def conv(x: Any) -> Any:
        if not spec.active:
            return x
        perm, c, axis = spec.plan(tuple(x.shape))
        if spec.casts and x.dtype != jnp.uint8:
            raise TypeError(f"fastq.jax: normalize/dtype on the device needs uint8 images, got {x.dtype}: build the "
                            f"Pipeline with dtype='uint8' and without ops.Normalize (the device does that)")
        table = _table(spec) if spec.casts else jnp.zeros((1,), jnp.float32)  # uncommitted: follows x
        return _jitted(perm, c, axis, spec.dtype or "uint8")(x, table)
    return conv


def convert(images: Any, normalize: Any = None, dtype: Any = None, layout: Optional[str] = None,
            input_layout: str = "NHWC") -> Any:
    """Convert a batch of uint8 images (a JAX array, or a numpy batch: put on the default
    device first) as :func:`device_put` does."""
    return converter(normalize, dtype, layout, input_layout)(images if hasattr(images, "devices")
                                                              else jax.device_put(images))


def device_put(batch: Sequence[np.ndarray], device: Any = None, *, normalize: Any = None, dtype: Any = None,
               layout: Optional[str] = None, input_layout: str = "NHWC") -> Tuple[Any, ...]:
    """``jax.device_put`` each array of a fastq batch to `device`, and convert the images
    (the first array) there.  Returns one JAX array per array of the batch."""
    conv = converter(normalize, dtype, layout, input_layout)
    # On a CPU device, device_put aliases a numpy array (even with may_alias=False in JAX 0.10)
    # and would hold the slot for the JAX array's whole life: copy on the host first, so the
    # slot is free once put, as after a transfer to an accelerator.
    plat = device.platform if hasattr(device, "platform") else jax.devices()[0].platform
    host_copy = plat == "cpu"
    outs = [jax.device_put(np.array(a) if host_copy else a, device) for a in batch]
    if outs:
        outs[0] = conv(outs[0])
    return tuple(outs)
