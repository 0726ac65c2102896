/* fq_ring_slots.c - see fq_ring.h for the contract: the slot protocol of the
 * producers (acquire, commit) and of the consumer (next, slot_error, slot_seq,
 * release), and the counters (get_stats). */
#define _POSIX_C_SOURCE 200809L
#include "ring/internal/fq_ring_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    return fq_ring_next_run(r, -1, timeout_ns, slot, n_rows, err);
}

int fq_ring_next_run(fq_ring *r, int64_t run_id, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err)
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
        if (run_id >= 0 && r->run_id != run_id) {
            rc = fq_set_err(err, FQ_E_CANCELLED, "run %lld was superseded by run %lld", (long long)run_id,
                            (long long)r->run_id);
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
