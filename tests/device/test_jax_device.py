"""fastq.jax: uint8 batches put on a JAX device and converted there equal fastq's host-side
Normalize bit for bit (JAX's CPU device stands in for an accelerator here).  Issue 28."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="fastq.jax needs JAX (requirements-dev.txt)")

import fastq  # noqa: E402
import fastq.jax as fjax  # noqa: E402
from fastq import ops  # noqa: E402


def batches(layout, dtype, normalize=None, n=16):
    rng = np.random.default_rng(2)
    imgs = np.repeat(rng.integers(0, 256, (n, 10, 12, 3), dtype=np.uint8), 3, axis=1)
    chain = [ops.RandomResizedCrop((18, 22)), ops.HorizontalFlip()] + ([normalize] if normalize else [])
    with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(n)), batch_size=8, queue_size=3, workers=2,
                        ops=chain, dtype=dtype, layout=layout, seed=4, shuffle=True, pin_memory=False) as p:
        return [tuple(np.array(a) for a in b) for b in p]


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype.itemsize == 2 else a


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("normalize", [ops.Normalize(), ops.Normalize((0.3, 0.3, 0.6), (0.1, 0.5, 0.2)), None])
def test_device_put_equals_the_hosts_normalize(dtype, layout, normalize):
    u8 = batches("NHWC", "uint8")
    want = batches(layout, dtype, normalize)
    for (x, lab), (ref, ref_lab) in zip(u8, want):
        gx, gl = fjax.device_put((x, lab), jax.devices()[0], normalize=normalize, dtype=dtype, layout=layout)
        assert gx.shape == ref.shape and str(gx.dtype) == dtype
        np.testing.assert_array_equal(bits(np.asarray(gx)), bits(ref))
        np.testing.assert_array_equal(np.asarray(gl), ref_lab.astype(np.asarray(gl).dtype))


def test_layout_only_and_nchw_input():
    u8_nhwc = batches("NHWC", "uint8")[0][0]
    u8_nchw = batches("NCHW", "uint8")[0][0]
    np.testing.assert_array_equal(np.asarray(fjax.convert(u8_nhwc, layout="NCHW")), u8_nchw)
    ref = batches("NCHW", "float32", ops.Normalize())[0][0]
    np.testing.assert_array_equal(np.asarray(fjax.convert(u8_nchw, True, input_layout="NCHW")), ref)


def test_clear_errors():
    with pytest.raises(ValueError, match="channels_last"):
        fjax.converter(True, layout="channels_last")
    with pytest.raises(TypeError, match="needs uint8 images"):
        fjax.convert(np.zeros((1, 4, 4, 3), np.float32), True)
    with pytest.raises(ValueError, match="1 or 3 channels"):
        fjax.convert(np.zeros((1, 4, 4, 2), np.uint8), True)


def test_put_arrays_survive_the_slot_being_reused():
    """jax.device_put either copies or keeps the host array (hence the slot) alive: after the
    producers have refilled the ring many times, every array still holds its own batch."""
    n = 64
    imgs = np.stack([np.full((4, 4, 3), i, np.uint8) for i in range(n)])
    outs = []
    with fastq.Pipeline(fastq.sources.Arrays(imgs, np.arange(n)), batch_size=4, queue_size=2, workers=2,
                        dtype="uint8", pin_memory=False, stall_timeout=10) as p:
        for batch in p:
            outs.append(fjax.device_put(batch, normalize=True))
            del batch
    t = ops.normalize_table(ops.Normalize())
    for k, (x, y) in enumerate(outs):
        want = np.arange(4 * k, 4 * k + 4)
        np.testing.assert_array_equal(np.asarray(y), want.astype(np.asarray(y).dtype))
        np.testing.assert_array_equal(np.asarray(x)[:, 0, 0, :], t[:, want].T)
