/* fq_pool.c - see fq_pool.h. */
#define _POSIX_C_SOURCE 200809L
#include "ring/fq_pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct fq_worker {
    struct fq_pool *pool;
    int id;
    pthread_t tid;
    int started;
} fq_worker;

struct fq_pool {
    fq_ring *ring;
    int64_t run_id;
    fq_task_fn fn;
    void *ctx;
    int n_workers;
    int64_t n_items;
    _Atomic int64_t next_item;
    _Atomic int64_t items_done;
    _Atomic int64_t items_failed;
    _Atomic uint64_t task_ns;
    _Atomic int running;
    pthread_mutex_t err_mu;
    fq_err internal;   /* first internal (non-task) error, guarded by err_mu */
    fq_worker *workers;
};

static void record_internal(fq_pool *p, const fq_err *e)
{
    if (pthread_mutex_lock(&p->err_mu) != 0)
        return;
    if (p->internal.code == FQ_OK)
        p->internal = *e;
    (void)pthread_mutex_unlock(&p->err_mu);
}

static void *worker_main(void *arg)
{
    fq_worker *w = arg;
    fq_pool *p = w->pool;
    fq_ring *r = p->ring;
    int nb = fq_ring_n_blocks(r);
    uint8_t *rows[FQ_RING_MAX_BLOCKS];
    fq_err err, cerr;
    for (;;) {
        int64_t item = atomic_fetch_add(&p->next_item, 1);
        if (item >= p->n_items)
            break;
        int slot, row;
        fq_clear_err(&err);
        int rc = fq_ring_acquire(r, p->run_id, item, -1, &slot, &row, &err);
        if (rc != FQ_OK) {
            if (rc != FQ_E_CANCELLED && rc != FQ_E_CLOSED && rc != FQ_E_EOF) {
                /* The item is lost: make sure nobody waits for it forever. */
                record_internal(p, &err);
                fq_ring_cancel(r);
            }
            break;
        }
        for (int b = 0; b < nb; b++)
            rows[b] = fq_ring_block_ptr(r, slot, b) + (size_t)row * fq_ring_row_bytes(r, b);
        fq_clear_err(&err);
        uint64_t t0 = fq_now_ns();
        rc = p->fn(p->ctx, w->id, item, rows, &err);
        atomic_fetch_add(&p->task_ns, fq_now_ns() - t0);
        if (rc != FQ_OK) {
            atomic_fetch_add(&p->items_failed, 1);
            if (err.code == FQ_OK)
                fq_set_err(&err, rc, "sample failed (%s)", fq_code_name(rc));
            err.code = rc;
        }
        atomic_fetch_add(&p->items_done, 1);
        fq_clear_err(&cerr);
        int crc = fq_ring_commit(r, p->run_id, slot, row, rc == FQ_OK ? NULL : &err, &cerr);
        if (crc == FQ_E_CANCELLED || crc == FQ_E_CLOSED)
            break;
        if (crc != FQ_OK) {
            record_internal(p, &cerr);
            fq_ring_cancel(r);
            break;
        }
    }
    atomic_fetch_sub(&p->running, 1);
    return NULL;
}

int fq_pool_start(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                  fq_pool **out, fq_err *err)
{
    if (!out || !ring || !fn)
        return fq_set_err(err, FQ_E_INVALID, "fq_pool_start: NULL argument");
    *out = NULL;
    if (n_workers < 1 || n_workers > 1024)
        return fq_set_err(err, FQ_E_INVALID, "workers must be in [1, 1024], got %d", n_workers);
    if (n_items < 0)
        return fq_set_err(err, FQ_E_INVALID, "negative item count");
    fq_pool *p = calloc(1, sizeof *p);
    if (!p)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory allocating the worker pool");
    p->workers = calloc((size_t)n_workers, sizeof *p->workers);
    if (!p->workers) {
        free(p);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory allocating the worker pool");
    }
    int64_t run_id = 0;
    int rrc = fq_ring_run_id(ring, &run_id, err);
    if (rrc != FQ_OK) {
        free(p->workers);
        free(p);
        return rrc;
    }
    if (pthread_mutex_init(&p->err_mu, NULL) != 0) {
        free(p->workers);
        free(p);
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_init failed");
    }
    p->ring = ring;
    p->run_id = run_id;
    p->fn = fn;
    p->ctx = ctx;
    p->n_workers = n_workers;
    p->n_items = n_items;
    atomic_init(&p->next_item, 0);
    atomic_init(&p->items_done, 0);
    atomic_init(&p->items_failed, 0);
    atomic_init(&p->task_ns, 0);
    atomic_init(&p->running, n_workers);

    /* Workers inherit this mask: block everything so signals go to the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    int mrc = pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = FQ_OK;
    int i;
    for (i = 0; i < n_workers; i++) {
        p->workers[i].pool = p;
        p->workers[i].id = i;
        int c = pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]);
        if (c != 0) {
            rc = fq_set_err(err, FQ_E_SYS, "could not start worker thread %d of %d (error %d)", i, n_workers, c);
            break;
        }
        p->workers[i].started = 1;
    }
    if (mrc == 0)
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != FQ_OK) {
        /* Threads never started will not decrement `running`. */
        atomic_fetch_sub(&p->running, n_workers - i);
        fq_ring_cancel(ring);
        for (int j = 0; j < i; j++)
            (void)pthread_join(p->workers[j].tid, NULL);
        (void)pthread_mutex_destroy(&p->err_mu);
        free(p->workers);
        free(p);
        return rc;
    }
    *out = p;
    return FQ_OK;
}

int fq_pool_join(fq_pool *p, fq_err *err)
{
    if (!p)
        return FQ_OK;
    int rc = FQ_OK;
    for (int i = 0; i < p->n_workers; i++) {
        if (!p->workers[i].started)
            continue;
        int c = pthread_join(p->workers[i].tid, NULL);
        if (c != 0 && rc == FQ_OK)
            rc = fq_set_err(err, FQ_E_SYS, "pthread_join failed (%d)", c);
    }
    if (rc == FQ_OK && p->internal.code != FQ_OK) {
        rc = p->internal.code;
        if (err)
            *err = p->internal;
    }
    (void)pthread_mutex_destroy(&p->err_mu);
    free(p->workers);
    free(p);
    return rc;
}

void fq_pool_get_stats(fq_pool *p, fq_pool_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!p)
        return;
    st->n_workers = p->n_workers;
    st->running = atomic_load(&p->running);
    st->items_done = atomic_load(&p->items_done);
    st->items_failed = atomic_load(&p->items_failed);
    st->task_ns = atomic_load(&p->task_ns);
}
