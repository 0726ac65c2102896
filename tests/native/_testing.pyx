# cython: language_level=3
"""fastq._native._testing - native helpers for fastq's own tests; never shipped.

setup.py builds this module (as fastq._native._testing, from tests/native/) only when
FASTQ_TESTING=1; the development set-up (scripts/setup.sh) and the sanitizer
leg (scripts/test_asan.sh) set it, the wheel build does not.  It reaches the
ring only through the typed cdef methods of fastq._native._core.Ring.

  * PatternTask: a native sample task that needs no images (csrc/tests/fq_testtask.h),
    for the ring/pool tests and the ring microbenchmark;
  * arena_address(ring): where the ring's arena starts (Ring has no integer address);
  * block_address(ring, slot, block): where a slot's output block starts, for
    the tests that prove a batch or a TF tensor aliases slot memory;
  * write_row(ring, slot, row, arrays): copy one sample into a row by hand.

This module links its own copy of the C ring functions (fq_pattern_drain calls
them); they keep no state outside the fq_ring struct, and both copies come from
the same build, so they operate on fastq._native._core's rings correctly.
"""
from libc.stdint cimport int64_t, uint64_t, uint8_t
from libc.string cimport memcpy, memset
cimport numpy as cnp

import numpy as np

from fastq._native._core cimport Ring, TaskBase, raise_fq_error
from fastq._native.includes.fq_common cimport fq_err, fq_now_ns
from fastq._native.includes.fq_ring cimport fq_ring, fq_ring_block_ptr, FQ_RING_MAX_BLOCKS
from fastq._native.includes.fq_pool cimport fq_task_fn
from fq_testtask cimport fq_pattern_ctx, fq_pattern_task, fq_pattern_byte, fq_pattern_drain

cnp.import_array()

cdef class PatternTask(TaskBase):
    """Fills rows with a pattern of (seed, item, output, offset); item
    `fail_item` fails with a decode error; each item takes `work_us` of work."""
    cdef fq_pattern_ctx c

    def __cinit__(self, Ring ring not None, int64_t fail_item=-1, double work_us=0.0, uint64_t seed=0):
        cdef int b
        memset(&self.c, 0, sizeof(self.c))
        self.c.n_blocks = ring.n_blocks
        for b in range(ring.n_blocks):
            self.c.row_bytes[b] = <size_t>ring.row_bytes(b)
        self.c.fail_item = fail_item
        self.c.work_ns = <uint64_t>(work_us * 1000.0)
        self.c.seed = seed
        self.fn = <fq_task_fn>fq_pattern_task
        self.ctx = &self.c

    def expected(self, int64_t item, int block):
        """The bytes item's row of `block` must hold (numpy uint8 array)."""
        if not 0 <= block < self.c.n_blocks:
            raise IndexError("block out of range")
        cdef size_t n = self.c.row_bytes[block], off
        out = np.empty(n, np.uint8)
        cdef uint8_t[::1] v = out
        for off in range(n):
            v[off] = fq_pattern_byte(self.c.seed, item, block, off)
        return out

    def drain(self, Ring ring not None, bint verify=True):
        """Consume the whole run in C (no Python per batch).  Returns
        (batches, rows, bad_rows, seconds)."""
        cdef int64_t nb = 0, nr = 0, bad = 0
        cdef fq_err err
        cdef int rc
        cdef fq_ring *r = ring.handle()
        cdef uint64_t t0 = fq_now_ns()
        with nogil:
            rc = fq_pattern_drain(r, &self.c, verify, &nb, &nr, &bad, &err)
        cdef uint64_t t1 = fq_now_ns()
        if rc != 0:
            raise_fq_error(&err)
        return nb, nr, bad, (t1 - t0) / 1e9


def arena_address(Ring ring not None):
    """Address of the ring's slot arena (tests only: fastq's public API hands out no
    integer addresses).  Raises ForkedPipelineError in a forked child."""
    cdef size_t n
    return <size_t>ring.arena(&n)


def block_address(Ring ring not None, int slot, int block):
    """Address of the first byte of `block` in `slot`."""
    cdef fq_ring *r = ring.handle()
    if not 0 <= slot < ring.capacity or not 0 <= block < ring.n_blocks:
        raise IndexError("slot or block out of range")
    return <size_t>fq_ring_block_ptr(r, slot, block)


def slot_addresses(Ring ring not None, int block):
    """The start of `block` in every slot (a set of addresses)."""
    return {block_address(ring, s, block) for s in range(ring.capacity)}


def write_row(Ring ring not None, int slot, int row, arrays):
    """Copy one sample (C-contiguous arrays of the blocks' row sizes) into
    (slot, row); the copy runs without the GIL."""
    cdef uint8_t *src[FQ_RING_MAX_BLOCKS]
    cdef uint8_t *dst[FQ_RING_MAX_BLOCKS]
    cdef size_t nbytes[FQ_RING_MAX_BLOCKS]
    cdef int b, nb = ring.n_blocks
    cdef cnp.ndarray a
    cdef fq_ring *r = ring.handle()
    if len(arrays) != nb:
        raise ValueError(f"sample has {len(arrays)} fields, expected {nb}")
    if not 0 <= slot < ring.capacity or not 0 <= row < ring.batch_size:
        raise IndexError("slot or row out of range")
    for b in range(nb):
        a = arrays[b]
        nbytes[b] = <size_t>ring.row_bytes(b)
        if not cnp.PyArray_IS_C_CONTIGUOUS(a) or <size_t>cnp.PyArray_NBYTES(a) != nbytes[b]:
            raise ValueError(f"field {b}: expected {nbytes[b]} contiguous bytes")
        src[b] = <uint8_t *>cnp.PyArray_DATA(a)
        dst[b] = fq_ring_block_ptr(r, slot, b) + <size_t>row * nbytes[b]
    with nogil:
        for b in range(nb):
            memcpy(dst[b], src[b], nbytes[b])
