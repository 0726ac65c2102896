# Declarations of the C core (csrc/) and of the cdef classes other extensions
# (fastq._image, fastq._cuda, the test-only fastq._testing) cimport.
from libc.stdint cimport int64_t, uint64_t, uint8_t
cimport numpy as cnp

cdef extern from "fq_common.h" nogil:
    enum:
        FQ_OK
        FQ_E_NOMEM
        FQ_E_INVALID
        FQ_E_TIMEOUT
        FQ_E_CLOSED
        FQ_E_CANCELLED
        FQ_E_IO
        FQ_E_EMPTY
        FQ_E_DECODE
        FQ_E_UNSUPPORTED
        FQ_E_TOO_LARGE
        FQ_E_SOURCE
        FQ_E_STALLED
        FQ_E_SYS
        FQ_E_EOF
        FQ_ERR_MSG_LEN
    ctypedef struct fq_err:
        int code
        char msg[512]
        int64_t index
    int fq_set_err(fq_err *err, int code, const char *fmt, ...)
    void fq_clear_err(fq_err *err)
    const char *fq_code_name(int code)
    uint64_t fq_now_ns()

cdef extern from "fq_ring.h" nogil:
    enum:
        FQ_RING_MAX_BLOCKS
    ctypedef struct fq_ring:
        pass
    ctypedef struct fq_ring_stats:
        int capacity
        int batch_size
        int n_free, n_filling, n_ready, n_leased
        uint64_t producer_wait_ns
        uint64_t consumer_wait_ns
        uint64_t batches_delivered
        uint64_t samples_delivered
        uint64_t rows_committed
        uint64_t rows_failed
        int64_t base_seq
        int64_t next_seq
    int fq_ring_create(int capacity, int batch_size, int n_blocks, const size_t *row_bytes,
                       size_t arena_align, fq_ring **out, fq_err *err)
    void fq_ring_destroy(fq_ring *r)
    ctypedef void (*fq_ring_free_hook)(void *ctx, void *arena, size_t nbytes)
    void fq_ring_set_free_hook(fq_ring *r, fq_ring_free_hook hook, void *ctx)
    int fq_ring_capacity(const fq_ring *r)
    int fq_ring_batch_size(const fq_ring *r)
    int fq_ring_n_blocks(const fq_ring *r)
    size_t fq_ring_row_bytes(const fq_ring *r, int block)
    uint8_t *fq_ring_block_ptr(const fq_ring *r, int slot, int block)
    uint8_t *fq_ring_arena(const fq_ring *r, size_t *nbytes)
    int fq_ring_begin_run(fq_ring *r, int drop_remainder, int64_t *run_id, fq_err *err)
    int fq_ring_run_id(fq_ring *r, int64_t *run_id, fq_err *err)
    int fq_ring_set_end(fq_ring *r, int64_t n_items, int keep_partial, fq_err *err)
    void fq_ring_cancel(fq_ring *r)
    void fq_ring_close(fq_ring *r)
    int fq_ring_is_closed(fq_ring *r)
    int fq_ring_acquire(fq_ring *r, int64_t run_id, int64_t item, int64_t timeout_ns, int *slot, int *row, fq_err *err)
    int fq_ring_commit(fq_ring *r, int64_t run_id, int slot, int row, const fq_err *failure, fq_err *err)
    int fq_ring_next(fq_ring *r, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err)
    int fq_ring_slot_error(fq_ring *r, int slot, int *row, fq_err *failure, fq_err *err)
    int fq_ring_slot_seq(fq_ring *r, int slot, int64_t *seq, fq_err *err)
    int fq_ring_release(fq_ring *r, int slot, fq_err *err)
    int fq_ring_get_stats(fq_ring *r, fq_ring_stats *st, fq_err *err)

cdef extern from "fq_pool.h" nogil:
    ctypedef int (*fq_task_fn)(void *ctx, int worker, int64_t item, uint8_t **rows, fq_err *err)
    ctypedef struct fq_pool:
        pass
    ctypedef struct fq_pool_stats:
        int n_workers
        int running
        int64_t items_done
        int64_t items_failed
        uint64_t task_ns
    int fq_pool_start(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                      fq_pool **out, fq_err *err)
    int fq_pool_join(fq_pool *p, fq_err *err)
    void fq_pool_get_stats(fq_pool *p, fq_pool_stats *st)

# The one path from a C error record to a Python exception; _image and _cuda
# cimport it.  sample=True: the record is a failed sample's (err.index is the
# sample's index in its source); otherwise err.index is not read.
cdef int raise_fq_error(fq_err *err, bint sample=*) except -1


# A native per-sample task for NativeRun: a C function plus the context it
# reads.  Subclasses (fastq._image's ImageTask; the test-only PatternTask) set fn and
# ctx and keep alive whatever ctx points into.
cdef class TaskBase:
    cdef fq_task_fn fn
    cdef void *ctx


cdef class Lease


# The ring of batch slots.  Other extensions reach the C ring only through these
# typed methods (never through integer addresses), so the ring code lives in
# fastq._core alone.
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
    # per ring); `owner` is kept alive as long as the ring.
    cdef int install_free_hook(self, fq_ring_free_hook hook, void *ctx, object owner) except -1
    cdef tuple _arrays(self, Lease lease, int slot, int n)


cdef class Lease:
    cdef readonly Ring ring
    cdef readonly int slot
    cdef readonly bint released
    cdef readonly int64_t seq
    cdef readonly int n_rows
    cdef int _release(self) except -1
