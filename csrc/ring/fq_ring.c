/* fq_ring.c - see fq_ring.h for the contract: create / destroy, the layout
 * accessors and the run control (begin_run, set_end, cancel, close).  The slot
 * protocol (acquire, commit, next, release, stats) is fq_ring_slots.c. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "ring/internal/fq_ring_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The arena is mapped, not malloc'ed: glibc raises its mmap threshold to the size
 * of the largest mmapped chunk freed (up to 32 MB), after which an arena of that
 * size comes from the heap and can stay resident after it is freed (a CI run saw
 * one 16 MB arena kept over 10 create/close cycles).  A pipeline's close must give
 * its memory back, so the arena is an anonymous mapping of its own, unmapped on
 * destroy.  Alignment above the page size: map more, unmap the ends. */
static uint8_t *arena_map(size_t bytes, size_t align)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    size_t extra = align > page ? align - page : 0;
    void *m = mmap(NULL, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uintptr_t base = (uintptr_t)m;
    uintptr_t start = (base + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - base, tail = extra - head;
    if (head && munmap(m, head) != 0) {
        int e = errno;
        (void)munmap(m, bytes + extra);
        errno = e;
        return NULL;
    }
    if (tail && munmap((void *)(start + bytes), tail) != 0) {
        int e = errno;
        (void)munmap((void *)start, bytes + tail);
        errno = e;
        return NULL;
    }
    /* Touch every page now so workers never page-fault on first write (memset,
     * not MAP_POPULATE, which qemu-user does not honour). */
    memset((void *)start, 0, bytes);
    return (uint8_t *)start;
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
    if (arena_align > ((size_t)1 << 30))
        return fq_set_err(err, FQ_E_INVALID, "arena alignment %zu is above 1 GiB", arena_align);

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
    r->arena = arena_map(r->arena_bytes, arena_align);
    if (!r->arena) {
        size_t want = r->arena_bytes;
        int e = errno;
        free(r);
        return fq_set_err(err, FQ_E_NOMEM, "cannot map %zu bytes for %d batch slots: %s", want, capacity,
                          strerror(e));
    }
    r->slots = calloc((size_t)capacity, sizeof *r->slots);
    r->free_stack = calloc((size_t)capacity, sizeof *r->free_stack);
    r->pending = calloc((size_t)capacity, sizeof *r->pending);
    if (!r->slots || !r->free_stack || !r->pending) {
        free(r->slots);
        free(r->free_stack);
        free(r->pending);
        (void)munmap(r->arena, r->arena_bytes);
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
    r->refs = 1;
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
    (void)munmap(r->arena, r->arena_bytes);
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
    (void)munmap(r->arena, r->arena_bytes);
    free(r);
}

void fq_ring_retain(fq_ring *r)
{
    (void)__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
}

void fq_ring_unref(fq_ring *r)
{
    if (!r)
        return;
    /* acq_rel: every owner's writes (slot releases) happen before the destroy */
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0)
        fq_ring_destroy(r);
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
    fq_ring_cancel_run(r, -1);
}

void fq_ring_cancel_run(fq_ring *r, int64_t run_id)
{
    if (lock(r) != 0)
        return;
    if (run_id >= 0 && r->run_id != run_id) {
        unlock(r); /* a newer run began: it is not ours to cancel */
        return;
    }
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
