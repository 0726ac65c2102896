/* fq_ring.c - see fq_ring.h for the contract. */
#define _POSIX_C_SOURCE 200809L
#include "ring/fq_ring.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static int lock(fq_ring *r) { return pthread_mutex_lock(&r->mu); }
static void unlock(fq_ring *r) { (void)pthread_mutex_unlock(&r->mu); }

/* Absolute CLOCK_MONOTONIC deadline for a relative timeout. */
static struct timespec deadline_after(int64_t timeout_ns)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + timeout_ns % 1000000000LL;
    ts.tv_sec += (time_t)(timeout_ns / 1000000000LL) + (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

/* Wait on cv; returns 0 when woken, ETIMEDOUT at deadline, other = error. */
static int cv_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t timeout_ns, const struct timespec *dl)
{
    if (timeout_ns < 0)
        return pthread_cond_wait(cv, mu);
    return pthread_cond_timedwait(cv, mu, dl);
}

int fq_ring_create(int capacity, int batch_size, int n_blocks, const size_t *row_bytes,
                   size_t arena_align, fq_ring **out, fq_err *err)
{
    if (!out)
        return fq_set_err(err, FQ_E_INVALID, "fq_ring_create: out is NULL");
    *out = NULL;
    if (capacity < 1 || capacity > (1 << 20))
        return fq_set_err(err, FQ_E_INVALID, "queue_size must be in [1, 1048576], got %d", capacity);
    if (batch_size < 1 || batch_size > (1 << 24))
        return fq_set_err(err, FQ_E_INVALID, "batch_size must be in [1, 16777216], got %d", batch_size);
    if (n_blocks < 1 || n_blocks > FQ_RING_MAX_BLOCKS)
        return fq_set_err(err, FQ_E_INVALID, "number of outputs must be in [1, %d], got %d",
                          FQ_RING_MAX_BLOCKS, n_blocks);
    if (arena_align < FQ_ALIGN)
        arena_align = FQ_ALIGN;
    if ((arena_align & (arena_align - 1)) != 0)
        return fq_set_err(err, FQ_E_INVALID, "arena alignment %zu is not a power of two", arena_align);

    fq_ring *r = calloc(1, sizeof *r);
    if (!r)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory allocating the ring");
    r->capacity = capacity;
    r->batch_size = batch_size;
    r->n_blocks = n_blocks;
    size_t off = 0;
    for (int b = 0; b < n_blocks; b++) {
        if (row_bytes[b] == 0 || row_bytes[b] > ((size_t)1 << 40) / (size_t)batch_size) {
            free(r);
            return fq_set_err(err, FQ_E_INVALID, "output %d: row size %zu bytes is invalid", b, row_bytes[b]);
        }
        r->row_bytes[b] = row_bytes[b];
        r->block_off[b] = off;
        off = align_up(off + row_bytes[b] * (size_t)batch_size, FQ_ALIGN);
    }
    r->slot_stride = off;
    if (r->slot_stride > ((size_t)1 << 44) / (size_t)capacity) {
        free(r);
        return fq_set_err(err, FQ_E_INVALID, "ring too large: %d slots of %zu bytes", capacity, off);
    }
    r->arena_bytes = align_up(r->slot_stride * (size_t)capacity, arena_align);
    void *mem = NULL;
    int rc = posix_memalign(&mem, arena_align, r->arena_bytes);
    if (rc != 0 || !mem) {
        size_t want = r->arena_bytes;
        free(r);
        return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes for %d batch slots", want, capacity);
    }
    /* Touch every page now so workers never page-fault on first write. */
    memset(mem, 0, r->arena_bytes);
    r->arena = mem;
    r->slots = calloc((size_t)capacity, sizeof *r->slots);
    r->free_stack = calloc((size_t)capacity, sizeof *r->free_stack);
    r->pending = calloc((size_t)capacity, sizeof *r->pending);
    if (!r->slots || !r->free_stack || !r->pending) {
        free(r->slots);
        free(r->free_stack);
        free(r->pending);
        free(r->arena);
        free(r);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory allocating slot table");
    }
    for (int k = 0; k < capacity; k++) {
        r->slots[k].state = FQ_SLOT_FREE;
        r->slots[k].seq = -1;
        r->slots[k].err_row = -1;
        r->pending[k] = -1;
        r->free_stack[k] = capacity - 1 - k; /* slot 0 is taken first */
    }
    r->n_free = capacity;

    pthread_condattr_t ca;
    int ok_attr = 0, ok_mu = 0, ok_free = 0, ok_ready = 0;
    if (pthread_condattr_init(&ca) == 0) {
        ok_attr = 1;
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0)
            goto fail;
    } else {
        goto fail;
    }
    if (pthread_mutex_init(&r->mu, NULL) != 0)
        goto fail;
    ok_mu = 1;
    if (pthread_cond_init(&r->free_cv, &ca) != 0)
        goto fail;
    ok_free = 1;
    if (pthread_cond_init(&r->ready_cv, &ca) != 0)
        goto fail;
    ok_ready = 1;
    (void)pthread_condattr_destroy(&ca);
    r->end_items = -1;
    r->n_batches = -1;
    r->drop_remainder = 1;
    *out = r;
    return FQ_OK;

fail:
    if (ok_ready)
        (void)pthread_cond_destroy(&r->ready_cv);
    if (ok_free)
        (void)pthread_cond_destroy(&r->free_cv);
    if (ok_mu)
        (void)pthread_mutex_destroy(&r->mu);
    if (ok_attr)
        (void)pthread_condattr_destroy(&ca);
    free(r->slots);
    free(r->free_stack);
    free(r->pending);
    free(r->arena);
    free(r);
    return fq_set_err(err, FQ_E_SYS, "pthread initialisation failed");
}

void fq_ring_set_free_hook(fq_ring *r, fq_ring_free_hook hook, void *ctx)
{
    r->free_hook = hook;
    r->free_hook_ctx = ctx;
}

void fq_ring_destroy(fq_ring *r)
{
    if (!r)
        return;
    if (r->free_hook)
        r->free_hook(r->free_hook_ctx, r->arena, r->arena_bytes);
    (void)pthread_cond_destroy(&r->ready_cv);
    (void)pthread_cond_destroy(&r->free_cv);
    (void)pthread_mutex_destroy(&r->mu);
    free(r->slots);
    free(r->free_stack);
    free(r->pending);
    free(r->arena);
    free(r);
}

int fq_ring_capacity(const fq_ring *r) { return r->capacity; }
int fq_ring_batch_size(const fq_ring *r) { return r->batch_size; }
int fq_ring_n_blocks(const fq_ring *r) { return r->n_blocks; }
size_t fq_ring_row_bytes(const fq_ring *r, int block) { return r->row_bytes[block]; }

uint8_t *fq_ring_block_ptr(const fq_ring *r, int slot, int block)
{
    return r->arena + (size_t)slot * r->slot_stride + r->block_off[block];
}

uint8_t *fq_ring_arena(const fq_ring *r, size_t *bytes)
{
    if (bytes)
        *bytes = r->arena_bytes;
    return r->arena;
}

/* Rows the batch `seq` of the current run must receive (end may be unknown). */
static int rows_expected_locked(const fq_ring *r, int64_t seq)
{
    if (r->end_items < 0)
        return r->batch_size;
    int64_t first = (seq - r->base_seq) * (int64_t)r->batch_size;
    int64_t left = r->end_items - first;
    if (left >= r->batch_size)
        return r->batch_size;
    return left > 0 ? (int)left : 0;
}

static void mark_ready_if_done_locked(fq_ring *r, fq_slot *s)
{
    if (s->state == FQ_SLOT_FILLING && s->rows_done >= s->rows_expected) {
        s->state = FQ_SLOT_READY;
        (void)pthread_cond_broadcast(&r->ready_cv);
    }
}

/* Slot holding the unconsumed batch `seq` (FILLING or READY), or -1. */
static int pending_slot_locked(const fq_ring *r, int64_t seq)
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
static int in_window_locked(const fq_ring *r, int64_t seq)
{
    return seq >= r->next_seq && seq < r->next_seq + (int64_t)(r->capacity - r->n_leased);
}

int fq_ring_begin_run(fq_ring *r, int drop_remainder, int64_t *run_id, fq_err *err)
{
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    if (r->closed) {
        unlock(r);
        return fq_set_err(err, FQ_E_CLOSED, "pipeline is closed");
    }
    int64_t base = r->seq_hwm > r->next_seq ? r->seq_hwm : r->next_seq;
    /* Slots still leased (e.g. the last batch of the previous epoch, still
     * bound to the consumer's loop variable) stay leased; the others are free. */
    r->n_free = 0;
    for (int k = r->capacity - 1; k >= 0; k--) {
        fq_slot *s = &r->slots[k];
        r->pending[k] = -1;
        if (s->state != FQ_SLOT_LEASED) {
            s->state = FQ_SLOT_FREE;
            s->seq = -1;
            r->free_stack[r->n_free++] = k;
        }
    }
    r->base_seq = base;
    r->next_seq = base;
    r->seq_hwm = base;
    r->end_items = -1;
    r->n_batches = -1;
    r->cancelled = 0;
    r->drop_remainder = drop_remainder ? 1 : 0;
    r->run_id++;
    if (run_id)
        *run_id = r->run_id;
    (void)pthread_cond_broadcast(&r->free_cv);
    (void)pthread_cond_broadcast(&r->ready_cv);
    unlock(r);
    return FQ_OK;
}

int fq_ring_set_end(fq_ring *r, int64_t n_items, int keep_partial, fq_err *err)
{
    if (n_items < 0)
        return fq_set_err(err, FQ_E_INVALID, "negative item count");
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    r->end_items = n_items;
    int64_t full = n_items / r->batch_size;
    int partial = (n_items % r->batch_size) != 0;
    r->n_batches = full + ((partial && (!r->drop_remainder || keep_partial)) ? 1 : 0);
    if (partial) {
        int64_t seq = r->base_seq + full;
        int k = pending_slot_locked(r, seq);
        fq_slot *s = k >= 0 ? &r->slots[k] : NULL;
        if (s && s->state == FQ_SLOT_FILLING) {
            s->rows_expected = rows_expected_locked(r, seq);
            mark_ready_if_done_locked(r, s);
        }
    }
    (void)pthread_cond_broadcast(&r->ready_cv);
    (void)pthread_cond_broadcast(&r->free_cv);
    unlock(r);
    return FQ_OK;
}

void fq_ring_cancel(fq_ring *r)
{
    if (lock(r) != 0)
        return;
    r->cancelled = 1;
    (void)pthread_cond_broadcast(&r->free_cv);
    (void)pthread_cond_broadcast(&r->ready_cv);
    unlock(r);
}

void fq_ring_close(fq_ring *r)
{
    if (lock(r) != 0)
        return;
    r->closed = 1;
    r->cancelled = 1;
    (void)pthread_cond_broadcast(&r->free_cv);
    (void)pthread_cond_broadcast(&r->ready_cv);
    unlock(r);
}

int fq_ring_is_closed(fq_ring *r)
{
    if (lock(r) != 0)
        return 1;
    int c = r->closed;
    unlock(r);
    return c;
}

int fq_ring_run_id(fq_ring *r, int64_t *run_id, fq_err *err)
{
    if (!run_id)
        return fq_set_err(err, FQ_E_INVALID, "fq_ring_run_id: run_id is NULL");
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    *run_id = r->run_id;
    unlock(r);
    return FQ_OK;
}

int fq_ring_acquire(fq_ring *r, int64_t run_id, int64_t item, int64_t timeout_ns, int *slot, int *row, fq_err *err)
{
    if (item < 0)
        return fq_set_err(err, FQ_E_INVALID, "negative item index");
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    int64_t seq = r->base_seq + item / r->batch_size;
    struct timespec dl = deadline_after(timeout_ns > 0 ? timeout_ns : 0);
    uint64_t t0 = 0;
    int rc = FQ_OK, k = -1;
    for (;;) {
        if (r->closed) {
            rc = fq_set_err(err, FQ_E_CLOSED, "pipeline is closed");
            break;
        }
        if (r->cancelled || r->run_id != run_id) {
            rc = fq_set_err(err, FQ_E_CANCELLED, "run cancelled");
            break;
        }
        if (r->end_items >= 0 && item >= r->end_items) {
            rc = fq_set_err(err, FQ_E_EOF, "item %lld is past the end of the run", (long long)item);
            break;
        }
        if (seq < r->next_seq) {
            rc = fq_set_err(err, FQ_E_INVALID, "item %lld: its batch was already delivered", (long long)item);
            break;
        }
        k = pending_slot_locked(r, seq);
        if (k >= 0) {
            if (r->slots[k].state == FQ_SLOT_FILLING)
                break; /* another row of a batch being filled */
            rc = fq_set_err(err, FQ_E_INVALID, "item %lld: its batch is already complete", (long long)item);
            break;
        }
        if (r->n_free > 0 && in_window_locked(r, seq)) {
            k = r->free_stack[--r->n_free];
            fq_slot *s = &r->slots[k];
            s->state = FQ_SLOT_FILLING;
            s->seq = seq;
            s->rows_done = 0;
            s->rows_expected = rows_expected_locked(r, seq);
            s->err_row = -1;
            fq_clear_err(&s->failure);
            r->pending[seq % r->capacity] = k;
            if (seq + 1 > r->seq_hwm)
                r->seq_hwm = seq + 1;
            /* producers of the batch's other rows may be waiting: they join it now */
            (void)pthread_cond_broadcast(&r->free_cv);
            break;
        }
        if (!t0)
            t0 = fq_now_ns();
        int w = cv_wait(&r->free_cv, &r->mu, timeout_ns, &dl);
        if (w == ETIMEDOUT) {
            rc = fq_set_err(err, FQ_E_TIMEOUT, "timed out waiting for a free slot for batch %lld",
                            (long long)(seq - r->base_seq));
            break;
        } else if (w != 0) {
            rc = fq_set_err(err, FQ_E_SYS, "condition wait failed (%d)", w);
            break;
        }
    }
    if (t0)
        r->producer_wait_ns += fq_now_ns() - t0;
    if (rc == FQ_OK) {
        *slot = k;
        *row = (int)(item % r->batch_size);
    }
    unlock(r);
    return rc;
}

int fq_ring_commit(fq_ring *r, int64_t run_id, int slot, int row, const fq_err *failure, fq_err *err)
{
    if (slot < 0 || slot >= r->capacity || row < 0 || row >= r->batch_size)
        return fq_set_err(err, FQ_E_INVALID, "commit: slot %d row %d out of range", slot, row);
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    if (r->run_id != run_id) {
        unlock(r);
        return fq_set_err(err, FQ_E_CANCELLED, "run cancelled");
    }
    fq_slot *s = &r->slots[slot];
    if (s->state != FQ_SLOT_FILLING) {
        unlock(r);
        return fq_set_err(err, FQ_E_INVALID, "commit: slot %d is not being filled", slot);
    }
    s->rows_done++;
    r->rows_committed++;
    if (failure && failure->code != FQ_OK) {
        r->rows_failed++;
        if (s->err_row < 0 || row < s->err_row) {
            s->err_row = row;
            s->failure = *failure;
            s->failure.msg[sizeof s->failure.msg - 1] = '\0';
        }
    }
    mark_ready_if_done_locked(r, s);
    unlock(r);
    return FQ_OK;
}

int fq_ring_next(fq_ring *r, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err)
{
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    struct timespec dl = deadline_after(timeout_ns > 0 ? timeout_ns : 0);
    uint64_t t0 = 0;
    int rc = FQ_OK;
    for (;;) {
        int64_t seq = r->next_seq;
        if (r->closed) {
            rc = fq_set_err(err, FQ_E_CLOSED, "pipeline is closed");
            break;
        }
        if (r->cancelled) {
            rc = fq_set_err(err, FQ_E_CANCELLED, "run cancelled");
            break;
        }
        if (r->n_batches >= 0 && seq >= r->base_seq + r->n_batches) {
            rc = FQ_E_EOF;
            fq_set_err(err, FQ_E_EOF, "end of run");
            break;
        }
        int k = pending_slot_locked(r, seq);
        fq_slot *s = k >= 0 ? &r->slots[k] : NULL;
        if (s && s->state == FQ_SLOT_FILLING && s->rows_expected > 0 && s->rows_done >= s->rows_expected)
            mark_ready_if_done_locked(r, s);
        if (s && s->state == FQ_SLOT_READY) {
            s->state = FQ_SLOT_LEASED;
            r->pending[seq % r->capacity] = -1;
            r->n_leased++;
            r->next_seq = seq + 1;
            r->batches_delivered++;
            r->samples_delivered += (uint64_t)s->rows_expected;
            *slot = k;
            *n_rows = s->rows_expected;
            break;
        }
        if (!t0)
            t0 = fq_now_ns();
        int w = cv_wait(&r->ready_cv, &r->mu, timeout_ns, &dl);
        if (w == ETIMEDOUT) {
            if (r->n_leased >= r->capacity)
                rc = fq_set_err(err, FQ_E_STALLED,
                                "batch %lld cannot be produced: the consumer holds %d batches "
                                "(all %d slots are leased)", (long long)(seq - r->base_seq), r->n_leased,
                                r->capacity);
            else
                rc = fq_set_err(err, FQ_E_TIMEOUT, "timed out waiting for batch %lld",
                                (long long)(seq - r->base_seq));
            break;
        } else if (w != 0) {
            rc = fq_set_err(err, FQ_E_SYS, "condition wait failed (%d)", w);
            break;
        }
    }
    if (t0)
        r->consumer_wait_ns += fq_now_ns() - t0;
    unlock(r);
    return rc;
}

int fq_ring_slot_error(fq_ring *r, int slot, int *row, fq_err *failure, fq_err *err)
{
    if (slot < 0 || slot >= r->capacity)
        return fq_set_err(err, FQ_E_INVALID, "slot_error: slot %d out of range", slot);
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    fq_slot *s = &r->slots[slot];
    if (row)
        *row = s->err_row;
    if (failure)
        *failure = s->failure;
    unlock(r);
    return FQ_OK;
}

int fq_ring_slot_seq(fq_ring *r, int slot, int64_t *seq, fq_err *err)
{
    if (slot < 0 || slot >= r->capacity || !seq)
        return fq_set_err(err, FQ_E_INVALID, "slot_seq: slot %d out of range", slot);
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    if (r->slots[slot].state != FQ_SLOT_LEASED) {
        unlock(r);
        return fq_set_err(err, FQ_E_INVALID, "slot_seq: slot %d is not leased", slot);
    }
    *seq = r->slots[slot].seq - r->base_seq;
    unlock(r);
    return FQ_OK;
}

int fq_ring_release(fq_ring *r, int slot, fq_err *err)
{
    if (slot < 0 || slot >= r->capacity)
        return fq_set_err(err, FQ_E_INVALID, "release: slot %d out of range", slot);
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    fq_slot *s = &r->slots[slot];
    if (s->state != FQ_SLOT_LEASED) {
        unlock(r);
        return fq_set_err(err, FQ_E_INVALID, "release: slot %d is not leased", slot);
    }
    s->state = FQ_SLOT_FREE;
    s->seq = -1;
    r->free_stack[r->n_free++] = slot;
    r->n_leased--;
    /* a free slot, and the producers' window grew by one */
    (void)pthread_cond_broadcast(&r->free_cv);
    /* A stalled consumer must re-check as well. */
    (void)pthread_cond_broadcast(&r->ready_cv);
    unlock(r);
    return FQ_OK;
}

int fq_ring_get_stats(fq_ring *r, fq_ring_stats *st, fq_err *err)
{
    memset(st, 0, sizeof *st);
    if (lock(r) != 0)
        return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    st->capacity = r->capacity;
    st->batch_size = r->batch_size;
    for (int k = 0; k < r->capacity; k++) {
        switch (r->slots[k].state) {
        case FQ_SLOT_FREE: st->n_free++; break;
        case FQ_SLOT_FILLING: st->n_filling++; break;
        case FQ_SLOT_READY: st->n_ready++; break;
        default: st->n_leased++; break;
        }
    }
    st->producer_wait_ns = r->producer_wait_ns;
    st->consumer_wait_ns = r->consumer_wait_ns;
    st->batches_delivered = r->batches_delivered;
    st->samples_delivered = r->samples_delivered;
    st->rows_committed = r->rows_committed;
    st->rows_failed = r->rows_failed;
    st->base_seq = r->base_seq;
    st->next_seq = r->next_seq;
    unlock(r);
    return FQ_OK;
}
