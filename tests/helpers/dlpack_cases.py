"""PyTorch and JAX (CPU) through DLPack: the tensor views the slot (same address),
the slot stays leased while the tensor lives and is not reused for another batch,
and goes back when the tensor is freed (issue 13).  torch and jax[cpu] from PyPI
are test requirements (requirements-dev.txt).

Run by tests/device/test_dlpack.py in a separate pytest process: JAX starts threads that
would make the suite's fork() tests unsafe in the same process."""
import gc

import numpy as np
import pytest

import jax
import jax.numpy as jnp  # noqa: F401
import torch

import fastq
import fastq.ops
from helpers.native_helpers import slot_addresses  # noqa: E402

IMGS = np.random.RandomState(0).randint(0, 256, (24, 8, 8, 3), np.uint8)


def pipe(**kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("queue_size", 3)
    kw.setdefault("workers", 1)
    kw.setdefault("stall_timeout", 20.0)
    return fastq.Pipeline(fastq.sources.Arrays(IMGS, np.arange(24)), **kw)




def leased(p):
    return p.stats()["slots_leased"]


def torch_import(a):
    return torch.from_dlpack(a), lambda t: t.data_ptr()


def jax_import(a):
    return jax.dlpack.from_dlpack(a), lambda t: t.unsafe_buffer_pointer()


@pytest.mark.parametrize("importer", [torch_import, jax_import], ids=["torch", "jax"])
def test_tensor_aliases_the_slot_and_holds_its_lease(importer):
    p = pipe()
    it = iter(p)
    x, y = next(it)
    t, addr = importer(x)
    a0 = x.ctypes.data
    assert addr(t) == a0 and a0 in slot_addresses(p, 0)   # no copy
    saved = np.array(x)
    del x, y
    gc.collect()
    assert leased(p) == 1                                 # the tensor alone holds the slot
    others = []
    for _ in range(2):                                    # the other two slots turn while t lives
        x, y = next(it)
        others.append(x.ctypes.data)
        del x, y
    assert a0 not in others                               # the held slot was not reused
    np.testing.assert_array_equal(np.asarray(t), saved)   # nor written
    assert leased(p) == 1
    del t
    gc.collect()
    assert leased(p) == 0                                 # released with the tensor
    assert len(list(b[0].shape for b in it)) == 3         # and the epoch goes on through it
    p.close()


def test_jax_int64_labels_copy_without_x64_and_int32_labels_alias():
    p = pipe()
    x, y = next(iter(p))
    j = jax.dlpack.from_dlpack(y)
    assert y.dtype == np.int64 and j.dtype == jnp.int32   # JAX without x64 has no int64: a copy
    assert j.unsafe_buffer_pointer() != y.ctypes.data
    assert np.asarray(j).tolist() == [0, 1, 2, 3]
    with jax.enable_x64(True):                            # with x64, int64 aliases too
        j64 = jax.dlpack.from_dlpack(y)
        assert j64.dtype == jnp.int64 and j64.unsafe_buffer_pointer() == y.ctypes.data
    del x, y, j, j64
    p.close()

    p = pipe(label_dtype="int32")
    x, y = next(iter(p))
    j = jax.dlpack.from_dlpack(y)
    assert j.dtype == jnp.int32 and j.unsafe_buffer_pointer() == y.ctypes.data  # zero copy
    assert y.ctypes.data in slot_addresses(p, 1)
    del x, y
    gc.collect()
    assert leased(p) == 1
    del j
    gc.collect()
    assert leased(p) == 0
    p.close()


def test_torch_sees_every_output_dtype_without_copies():
    p = pipe(dtype="float16", layout="NCHW", return_index=True)
    x, y, idx = next(iter(p))
    for a, want in ((x, torch.float16), (y, torch.int64), (idx, torch.int64)):
        t = torch.from_dlpack(a)
        assert t.dtype == want and t.data_ptr() == a.ctypes.data
    assert tuple(torch.from_dlpack(x).shape) == (4, 3, 8, 8)
    del t, x, y, idx, a
    p.close()


def test_bfloat16_batches_through_their_16_bit_view():
    p = pipe(dtype="bfloat16", ops=[fastq.ops.Normalize()])
    x, _ = next(iter(p))
    with pytest.raises(BufferError):          # numpy cannot export ml_dtypes' bfloat16
        x.__dlpack__()
    want = x.astype(np.float32)
    t = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    assert t.data_ptr() == x.ctypes.data       # zero copy
    np.testing.assert_array_equal(t.float().numpy(), want)
    j = jax.lax.bitcast_convert_type(jax.dlpack.from_dlpack(x.view(np.uint16)), jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(j.astype(jnp.float32)), want)
    del x, t, j
    p.close()
