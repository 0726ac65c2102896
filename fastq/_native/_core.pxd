# The cdef classes and functions of fastq._native._core that other extensions
# (fastq._native._image, fastq._native._cuda, the test-only fastq._native._testing) cimport.
from libc.stdint cimport int64_t, uint64_t, uint8_t
cimport numpy as cnp

# The C declarations live in fastq/_native/includes/ (one extern-only .pxd per C header).
from fastq._native.includes.fq_common cimport *
from fastq._native.includes.fq_ring cimport *
from fastq._native.includes.fq_pool cimport *


# The one path from a C error record to a Python exception; _image and _cuda
# cimport it.  sample=True: the record is a failed sample's (err.index is the
# sample's index in its source); otherwise err.index is not read.
cdef int raise_fq_error(fq_err *err, bint sample=*) except -1


# A native per-sample task for NativeRun: a C function plus the context it
# reads.  Subclasses (fastq._native._image's ImageTask; the test-only PatternTask) set fn and
# ctx and keep alive whatever ctx points into.
cdef class TaskBase:
    cdef fq_task_fn fn
    cdef void *ctx


cdef class Lease


# The ring of batch slots.  Other extensions reach the C ring only through these
# typed methods (never through integer addresses), so the ring code lives in
# fastq._native._core alone.
cdef class Ring:
    cdef fq_ring *r
    cdef readonly int pid
    cdef readonly int capacity
    cdef readonly int batch_size
    cdef readonly int n_blocks
    cdef readonly tuple dtypes       # numpy dtype of each block
    cdef readonly tuple row_shapes   # per-row shape of each block
    cdef cnp.npy_intp _row_bytes[16]
    cdef object _hook_owner
    cdef object __weakref__          # lets tests see when the arena is freed

    # Raises ForkedPipelineError in a forked child.
    cdef int _check(self) except -1
    # The C ring (after the fork check); valid while this object lives.
    cdef fq_ring *handle(self) except NULL
    # The slot arena and its size in bytes (after the fork check).
    cdef uint8_t *arena(self, size_t *nbytes) except NULL
    # Install the function fq_ring_destroy calls just before the arena is freed (one
    # per ring); `owner` is kept alive as long as this object.  The hook runs with the
    # ring's last reference, which fastq's TensorFlow kernel may hold after this object
    # is gone (retain_native): the hook and its ctx must not need `owner` or Python.
    cdef int install_free_hook(self, fq_ring_free_hook hook, void *ctx, object owner) except -1
    cdef tuple _arrays(self, Lease lease, int slot, int n)


cdef class Lease:
    cdef readonly Ring ring
    cdef readonly int slot
    cdef readonly bint released
    cdef readonly int64_t seq
    cdef readonly int n_rows
    cdef int _release(self) except -1
