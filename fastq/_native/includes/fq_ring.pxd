# csrc/ring/fq_ring.h: the bounded ring of batch slots.
from libc.stdint cimport int64_t, uint64_t, uint8_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "ring/fq_ring.h" nogil:
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
    void fq_ring_retain(fq_ring *r)
    void fq_ring_unref(fq_ring *r)
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
    void fq_ring_cancel_run(fq_ring *r, int64_t run_id)
    void fq_ring_close(fq_ring *r)
    int fq_ring_is_closed(fq_ring *r)
    int fq_ring_acquire(fq_ring *r, int64_t run_id, int64_t item, int64_t timeout_ns, int *slot, int *row, fq_err *err)
    int fq_ring_commit(fq_ring *r, int64_t run_id, int slot, int row, const fq_err *failure, fq_err *err)
    int fq_ring_next(fq_ring *r, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err)
    int fq_ring_next_run(fq_ring *r, int64_t run_id, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err)
    int fq_ring_slot_error(fq_ring *r, int slot, int *row, fq_err *failure, fq_err *err)
    int fq_ring_slot_seq(fq_ring *r, int slot, int64_t *seq, fq_err *err)
    int fq_ring_release(fq_ring *r, int slot, fq_err *err)
    int fq_ring_get_stats(fq_ring *r, fq_ring_stats *st, fq_err *err)
