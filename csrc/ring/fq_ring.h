/* fq_ring.h - a bounded ring of batch slots.
 *
 * The ring owns one arena allocated once at creation.  It is divided into
 * `capacity` slots; each slot holds one whole batch: `n_blocks` blocks (one per
 * output, e.g. images and labels), each block `batch_size` rows of
 * `row_bytes[b]` bytes.  Every block starts on a 64-byte boundary; the arena
 * itself is an anonymous mapping of its own (pre-faulted, zeroed, unmapped when
 * the last owner lets go, so closing a pipeline gives its memory back to the
 * system), page-aligned and aligned to arena_align where that is larger (at most
 * 1 GiB); page alignment makes it registrable as pinned host memory.
 *
 * Sequencing.  Batches carry a global sequence number `seq` that only grows.
 * Work is addressed by *item*: item i of the current run belongs to batch
 * base_seq + i / batch_size, row i % batch_size.  Producers acquire the slot
 * for an item, write their row in place without any lock, then commit the
 * row.  When every expected row of a batch is committed the slot is READY.
 * The consumer takes batches strictly in seq order (LEASED) and releases each
 * one when the last reference to it dies (FREE again).
 *
 * Slot mapping.  A batch is not tied to one slot: the first producer of batch
 * `seq` takes any FREE slot, provided seq < next_seq + (capacity - leased),
 * where next_seq is the next batch the consumer takes and `leased` the number
 * of slots the consumer holds.  That window is what keeps the ring
 * deadlock-free: the batches that hold FILLING/READY slots all lie in it, so
 * while the consumer waits for next_seq at least one slot is FREE for it.
 * Hence a batch the consumer keeps reduces the usable depth by exactly one:
 * with k slots leased the producers still run up to capacity - k batches
 * ahead, and the consumer can only stall (FQ_E_STALLED) when it holds every
 * slot.  Which slot a batch lands in never changes its content or its order.
 *
 * Slot states: FREE -> FILLING -> READY -> LEASED -> FREE.
 *
 * Runs.  A run is one pass (an epoch).  fq_ring_begin_run() starts one; the
 * number of items may be given up front (fq_ring_set_end) or discovered later
 * (a Python iterator that stops).  fq_ring_cancel() aborts the run: blocked
 * producers and the consumer return FQ_E_CANCELLED.  Slots still LEASED when a
 * new run begins stay leased until released; the new run's producers simply
 * wait for them.
 *
 * Every run has an id (returned by fq_ring_begin_run).  Producers pass it to
 * fq_ring_acquire/fq_ring_commit; a call carrying a stale id is refused with
 * FQ_E_CANCELLED and touches nothing, so a producer that was stuck in user
 * code while its run was cancelled cannot write into a later run.
 *
 * Thread safety: every function except create/destroy may be called
 * concurrently from any thread.  A single mutex guards the slot table; it is
 * held only for O(1) bookkeeping (never while copying rows, never while
 * waiting - condition variables release it).  Blocking calls take a timeout
 * (CLOCK_MONOTONIC, in ns; negative = wait forever) and never spin.
 *
 * Lifetime: fq_ring_destroy() may only be called when no thread is inside a
 * ring call, no worker pool is running on it, and no slot is leased.  Owners
 * that outlive one another share the ring by reference count instead:
 * fq_ring_create returns it with one reference, fq_ring_retain adds one,
 * fq_ring_unref drops one and destroys the ring (free hook included) with the
 * last.  The Python Ring object holds one (every Python lease keeps that object
 * alive); fastq's TensorFlow kernel holds one per live epoch and one per batch
 * it hands to TensorFlow, so a TF tensor that aliases a slot keeps the arena
 * valid after the Python objects are gone.  The count is atomic: retain/unref
 * may be called from any thread; the last unref must come after the owner's
 * last ring call (then no thread is inside one).
 */
#ifndef FQ_RING_H
#define FQ_RING_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_RING_MAX_BLOCKS 16

typedef struct fq_ring fq_ring;

enum fq_slot_state { FQ_SLOT_FREE = 0, FQ_SLOT_FILLING = 1, FQ_SLOT_READY = 2, FQ_SLOT_LEASED = 3 };

typedef struct fq_ring_stats {
    int capacity;
    int batch_size;
    int n_free, n_filling, n_ready, n_leased;
    uint64_t producer_wait_ns;   /* total time producers waited for a free slot */
    uint64_t consumer_wait_ns;   /* total time the consumer waited for a ready batch */
    uint64_t batches_delivered;  /* batches handed to the consumer (fq_ring_next) */
    uint64_t samples_delivered;  /* rows in those batches */
    uint64_t rows_committed;
    uint64_t rows_failed;        /* rows committed with an error code */
    int64_t base_seq;            /* first seq of the current run */
    int64_t next_seq;            /* next seq the consumer will take */
} fq_ring_stats;

int fq_ring_create(int capacity, int batch_size, int n_blocks, const size_t *row_bytes,
                   size_t arena_align, fq_ring **out, fq_err *err);
void fq_ring_destroy(fq_ring *r);
/* Reference counting (see Lifetime above).  unref(NULL) does nothing. */
void fq_ring_retain(fq_ring *r);
void fq_ring_unref(fq_ring *r);
/* Called by fq_ring_destroy with the arena just before it is freed (e.g. to
 * unregister pinned memory).  Set once, before any other thread uses the ring. */
typedef void (*fq_ring_free_hook)(void *ctx, void *arena, size_t bytes);
void fq_ring_set_free_hook(fq_ring *r, fq_ring_free_hook hook, void *ctx);

int fq_ring_capacity(const fq_ring *r);
int fq_ring_batch_size(const fq_ring *r);
int fq_ring_n_blocks(const fq_ring *r);
size_t fq_ring_row_bytes(const fq_ring *r, int block);
/* Base address of block `block` in slot `slot` (row 0). */
uint8_t *fq_ring_block_ptr(const fq_ring *r, int slot, int block);
/* Whole arena (for pinning). */
uint8_t *fq_ring_arena(const fq_ring *r, size_t *bytes);

/* Start a new run.  Caller guarantees no producer of the previous run is
 * still inside fq_ring_acquire/commit (join them first).  drop_remainder:
 * a final partial batch is dropped (unless set_end says keep_partial). */
int fq_ring_begin_run(fq_ring *r, int drop_remainder, int64_t *run_id, fq_err *err);
/* Id of the current run (what producers pass to acquire/commit). */
int fq_ring_run_id(fq_ring *r, int64_t *run_id, fq_err *err);
/* The current run has exactly n_items items.  keep_partial forces delivery of
 * a final partial batch even with drop_remainder (used when the last item
 * carries an error that the consumer must see). */
int fq_ring_set_end(fq_ring *r, int64_t n_items, int keep_partial, fq_err *err);
/* Abort the current run: wake every waiter with FQ_E_CANCELLED. */
void fq_ring_cancel(fq_ring *r);
/* The same, only if the current run is `run_id` (a consumer abandoning its own
 * epoch must not cancel a newer one); run_id < 0: whatever run is current. */
void fq_ring_cancel_run(fq_ring *r, int64_t run_id);
/* Close for good: every current and future blocking call returns FQ_E_CLOSED.
 * (cancel/close only fail if the mutex is broken, which a default pthread
 * mutex cannot report; they then do nothing.) */
void fq_ring_close(fq_ring *r);
/* 1 if closed (or the mutex cannot be taken), else 0. */
int fq_ring_is_closed(fq_ring *r);

/* Producer side.  Waits until the slot of `item`'s batch can take it.
 * On FQ_OK, *slot and *row say where to write. */
int fq_ring_acquire(fq_ring *r, int64_t run_id, int64_t item, int64_t timeout_ns, int *slot, int *row, fq_err *err);
/* Row written (failure NULL or failure->code == FQ_OK) or failed (failure
 * says why: code, message, sample index; copied, so the caller's record may
 * be reused at once; the lowest failed row of a batch is what the consumer
 * sees). */
int fq_ring_commit(fq_ring *r, int64_t run_id, int slot, int row, const fq_err *failure, fq_err *err);

/* Consumer side.  Waits for the next batch in seq order and leases it.
 * Returns FQ_OK (slot leased, *n_rows rows valid), FQ_E_EOF (run finished),
 * FQ_E_TIMEOUT, FQ_E_STALLED (timed out while the consumer side leases every
 * slot, so the producers have nowhere to write), FQ_E_CANCELLED or
 * FQ_E_CLOSED. */
int fq_ring_next(fq_ring *r, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err);
/* The same for a consumer of run `run_id` only: FQ_E_CANCELLED as soon as
 * another run has begun (a consumer that was superseded never takes a batch of
 * a later run); run_id < 0: any run (= fq_ring_next). */
int fq_ring_next_run(fq_ring *r, int64_t run_id, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err);
/* Error recorded on a leased slot: *row = lowest failed row (-1 if none),
 * *failure (if not NULL) = that row's record as committed (code, message,
 * sample index; code FQ_OK when *row is -1).  Returns FQ_OK, or an error
 * (bad slot, lock failure) - never mistake a failure for "no error". */
int fq_ring_slot_error(fq_ring *r, int slot, int *row, fq_err *failure, fq_err *err);
/* Batch held by a leased slot, counted from the start of the current run. */
int fq_ring_slot_seq(fq_ring *r, int slot, int64_t *seq, fq_err *err);
/* Give a leased slot back to the producers. */
int fq_ring_release(fq_ring *r, int slot, fq_err *err);

int fq_ring_get_stats(fq_ring *r, fq_ring_stats *st, fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
