/* fq_pool.c - see fq_pool.h. */
#define _GNU_SOURCE /* SCHED_BATCH/IDLE, cpu_set_t, pthread_setaffinity_np, pthread_setname_np */
#include "ring/fq_pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

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
    _Atomic int sched_applied;
    pthread_mutex_t err_mu;
    fq_err internal;   /* first internal (non-task) error, guarded by err_mu */
    fq_err sched_err;  /* first scheduling setting a worker could not apply, guarded by err_mu */
    fq_worker *workers;
    int has_sched;     /* the fields below are set (immutable while workers run) */
    int sched_policy;
    int sched_nice;
#if defined(__linux__)
    cpu_set_t *cpus;   /* NULL: keep the inherited mask */
    size_t cpus_size;
#endif
};

static void record_internal(fq_pool *p, const fq_err *e)
{
    if (pthread_mutex_lock(&p->err_mu) != 0)
        return;
    if (p->internal.code == FQ_OK)
        p->internal = *e;
    (void)pthread_mutex_unlock(&p->err_mu);
}

static void record_sched(fq_pool *p, int code, const char *what, int e)
{
    if (pthread_mutex_lock(&p->err_mu) != 0)
        return;
    if (p->sched_err.code == FQ_OK) {
        char buf[128];
        const char *m = strerror_r(e, buf, sizeof buf); /* GNU strerror_r (_GNU_SOURCE) */
        fq_set_err(&p->sched_err, code, "%s: %s (errno %d)", what, m, e);
    }
    (void)pthread_mutex_unlock(&p->err_mu);
}

/* Applies the pool's scheduling setting to the calling worker thread; returns 1 if
 * all of it took effect (a refusal is recorded, never fatal). */
static int apply_sched(fq_pool *p)
{
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), "fastq-worker"); /* informative only */
    if (!p->has_sched)
        return 1;
    int ok = 1;
    if (p->sched_policy != FQ_SCHED_KEEP) {
        struct sched_param sp;
        memset(&sp, 0, sizeof sp);
        int pol = p->sched_policy == FQ_SCHED_IDLE ? SCHED_IDLE : SCHED_BATCH;
        int c = pthread_setschedparam(pthread_self(), pol, &sp);
        if (c != 0) {
            record_sched(p, FQ_E_SYS, p->sched_policy == FQ_SCHED_IDLE ? "SCHED_IDLE refused" : "SCHED_BATCH refused", c);
            ok = 0;
        }
    }
    if (p->sched_nice > 0) {
        /* On Linux, nice is per thread: PRIO_PROCESS with a thread id sets that thread's. */
        id_t tid = (id_t)syscall(SYS_gettid);
        errno = 0;
        int cur = getpriority(PRIO_PROCESS, tid);
        if (cur == -1 && errno != 0) {
            record_sched(p, FQ_E_SYS, "getpriority failed", errno);
            ok = 0;
        } else {
            int want = cur + p->sched_nice;
            if (want > 19)
                want = 19;
            if (setpriority(PRIO_PROCESS, tid, want) != 0) {
                record_sched(p, FQ_E_SYS, "setpriority (nice) refused", errno);
                ok = 0;
            }
        }
    }
    if (p->cpus != NULL) {
        int c = pthread_setaffinity_np(pthread_self(), p->cpus_size, p->cpus);
        if (c != 0) {
            record_sched(p, FQ_E_SYS, "pthread_setaffinity_np refused the CPU set", c);
            ok = 0;
        }
    }
    return ok;
#else
    if (!p->has_sched)
        return 1;
    record_sched(p, FQ_E_UNSUPPORTED, "worker scheduling settings", ENOSYS);
    return 0;
#endif
}

static void *worker_main(void *arg)
{
    fq_worker *w = arg;
    fq_pool *p = w->pool;
    if (apply_sched(p))
        atomic_fetch_add(&p->sched_applied, 1);
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

static void free_pool(fq_pool *p)
{
#if defined(__linux__)
    if (p->cpus)
        CPU_FREE(p->cpus);
#endif
    free(p->workers);
    free(p);
}

/* Copies *s into the pool (validated: a bad setting is the caller's error, not a refusal). */
static int set_sched(fq_pool *p, const fq_sched *s, fq_err *err)
{
    if (s->policy != FQ_SCHED_KEEP && s->policy != FQ_SCHED_BATCH && s->policy != FQ_SCHED_IDLE)
        return fq_set_err(err, FQ_E_INVALID, "unknown worker scheduling policy %d", s->policy);
    if (s->nice < 0 || s->nice > 39)
        return fq_set_err(err, FQ_E_INVALID, "worker nice increment must be in [0, 39], got %d (lowering "
                          "nice needs privileges fastq does not ask for)", s->nice);
    if (s->n_cpus < 0 || s->n_cpus > FQ_SCHED_MAX_CPUS || (s->n_cpus > 0 && !s->cpus))
        return fq_set_err(err, FQ_E_INVALID, "bad worker CPU list (%d CPUs)", s->n_cpus);
    for (int i = 0; i < s->n_cpus; i++)
        if (s->cpus[i] < 0 || s->cpus[i] >= FQ_SCHED_MAX_CPUS)
            return fq_set_err(err, FQ_E_INVALID, "worker CPU %d out of range [0, %d)", s->cpus[i],
                              FQ_SCHED_MAX_CPUS);
    p->has_sched = 1;
    p->sched_policy = s->policy;
    p->sched_nice = s->nice;
#if defined(__linux__)
    if (s->n_cpus > 0) {
        p->cpus = CPU_ALLOC(FQ_SCHED_MAX_CPUS);
        if (!p->cpus)
            return fq_set_err(err, FQ_E_NOMEM, "out of memory allocating the worker CPU set");
        p->cpus_size = CPU_ALLOC_SIZE(FQ_SCHED_MAX_CPUS);
        CPU_ZERO_S(p->cpus_size, p->cpus);
        for (int i = 0; i < s->n_cpus; i++)
            CPU_SET_S((size_t)s->cpus[i], p->cpus_size, p->cpus);
    }
#endif
    return FQ_OK;
}

int fq_pool_start(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                  fq_pool **out, fq_err *err)
{
    return fq_pool_start_sched(ring, n_workers, n_items, fn, ctx, NULL, out, err);
}

int fq_pool_start_sched(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                        const fq_sched *sched, fq_pool **out, fq_err *err)
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
    if (sched) {
        int src = set_sched(p, sched, err);
        if (src != FQ_OK) {
            free_pool(p);
            return src;
        }
    }
    int64_t run_id = 0;
    int rrc = fq_ring_run_id(ring, &run_id, err);
    if (rrc != FQ_OK) {
        free_pool(p);
        return rrc;
    }
    if (pthread_mutex_init(&p->err_mu, NULL) != 0) {
        free_pool(p);
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_init failed");
    }
    fq_clear_err(&p->sched_err);
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
    atomic_init(&p->sched_applied, 0);

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
        free_pool(p);
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
    free_pool(p);
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
    st->sched_applied = atomic_load(&p->sched_applied);
}

int fq_pool_sched_error(fq_pool *p, fq_err *err)
{
    fq_clear_err(err);
    if (!p || pthread_mutex_lock(&p->err_mu) != 0)
        return FQ_OK;
    *err = p->sched_err;
    (void)pthread_mutex_unlock(&p->err_mu);
    return err->code;
}
