/* fq_ring_impl.h - the ring's private state and the helpers its two source files share
 * (fq_ring.c: create / destroy / run control; fq_ring_slots.c: the slot protocol of
 * producers and the consumer).  The locking rules are fq_ring.h's: the layout
 * (capacity .. arena_bytes) is immutable after create, the rest is read and written
 * under mu (the *_locked helpers expect it held).  Private to csrc/ring/.
 */
#ifndef FQ_RING_IMPL_H
#define FQ_RING_IMPL_H

#include <pthread.h>
#include <time.h>

#include "ring/fq_ring.h"

#define FQ_ALIGN 64

typedef struct fq_slot {
    int state;
    int64_t seq;        /* batch held (FILLING/READY/LEASED), -1 when FREE */
    int rows_expected;
    int rows_done;
    int err_row;        /* lowest failed row, -1 if none */
    fq_err failure;     /* that row's error (code, message, sample index) */
} fq_slot;

struct fq_ring {
    pthread_mutex_t mu;
    pthread_cond_t free_cv;   /* a slot became free / run state changed */
    pthread_cond_t ready_cv;  /* a slot became ready / run state changed */
    int capacity, batch_size, n_blocks;
    size_t row_bytes[FQ_RING_MAX_BLOCKS];
    size_t block_off[FQ_RING_MAX_BLOCKS];
    size_t slot_stride;
    uint8_t *arena;
    size_t arena_bytes;
    fq_slot *slots;
    int *free_stack;      /* indices of the FREE slots, n_free of them */
    int n_free;
    int *pending;         /* pending[seq % capacity]: slot of unconsumed batch seq, or -1 */
    int n_leased;         /* slots LEASED by the consumer */
    fq_ring_free_hook free_hook;
    void *free_hook_ctx;
    int refs;             /* owners (fq_ring_retain / fq_ring_unref); atomic builtins, not mu */

    /* run state */
    int closed;
    int cancelled;
    int drop_remainder;
    int64_t run_id;
    int64_t base_seq;
    int64_t end_items;    /* -1: unknown */
    int64_t n_batches;    /* -1: unknown */
    int64_t next_seq;     /* consumer */
    int64_t seq_hwm;      /* 1 + highest seq ever acquired */

    /* stats */
    uint64_t producer_wait_ns, consumer_wait_ns;
    uint64_t batches_delivered, samples_delivered, rows_committed, rows_failed;
};

static inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static inline int lock(fq_ring *r) { return pthread_mutex_lock(&r->mu); }
static inline void unlock(fq_ring *r) { (void)pthread_mutex_unlock(&r->mu); }

/* Absolute CLOCK_MONOTONIC deadline for a relative timeout. */
static inline struct timespec deadline_after(int64_t timeout_ns)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + timeout_ns % 1000000000LL;
    ts.tv_sec += (time_t)(timeout_ns / 1000000000LL) + (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

/* Wait on cv; returns 0 when woken, ETIMEDOUT at deadline, other = error. */
static inline int cv_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t timeout_ns, const struct timespec *dl)
{
    if (timeout_ns < 0)
        return pthread_cond_wait(cv, mu);
    return pthread_cond_timedwait(cv, mu, dl);
}

/* Rows the batch `seq` of the current run must receive (end may be unknown). */
static inline int rows_expected_locked(const fq_ring *r, int64_t seq)
{
    if (r->end_items < 0)
        return r->batch_size;
    int64_t first = (seq - r->base_seq) * (int64_t)r->batch_size;
    int64_t left = r->end_items - first;
    if (left >= r->batch_size)
        return r->batch_size;
    return left > 0 ? (int)left : 0;
}

static inline void mark_ready_if_done_locked(fq_ring *r, fq_slot *s)
{
    if (s->state == FQ_SLOT_FILLING && s->rows_done >= s->rows_expected) {
        s->state = FQ_SLOT_READY;
        (void)pthread_cond_broadcast(&r->ready_cv);
    }
}

/* Slot holding the unconsumed batch `seq` (FILLING or READY), or -1. */
static inline int pending_slot_locked(const fq_ring *r, int64_t seq)
{
    if (seq < r->next_seq)
        return -1;
    int k = r->pending[seq % r->capacity];
    if (k < 0)
        return -1;
    const fq_slot *s = &r->slots[k];
    if (s->seq != seq || (s->state != FQ_SLOT_FILLING && s->state != FQ_SLOT_READY))
        return -1;
    return k;
}

/* May batch `seq` take a free slot now?  Only inside the window
 * [next_seq, next_seq + capacity - n_leased): see "Slot mapping" in fq_ring.h. */
static inline int in_window_locked(const fq_ring *r, int64_t seq)
{
    return seq >= r->next_seq && seq < r->next_seq + (int64_t)(r->capacity - r->n_leased);
}

#endif
