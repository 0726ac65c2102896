/* fq_pool.h - native producer threads that fill a fq_ring.
 *
 * fq_pool_start() launches n_workers pthreads for the ring's current run
 * (the run id is taken at start: the pool never writes into a later run).
 * Each worker repeatedly claims the next item with one atomic fetch-add
 * (items 0 .. n_items-1, in order), acquires the item's slot row from the
 * ring (waiting while the ring is full), calls the task function to write the
 * sample straight into the row(s), and commits the row with the task's
 * status.  A failing task does not stop the pool: the error (code + message)
 * is recorded on that row and surfaces when the consumer reaches its batch.
 *
 * Workers never touch Python.  They start with every signal blocked, so
 * SIGINT & co. are delivered to the interpreter's main thread.
 *
 * Stopping: workers exit when the items are exhausted, or when the ring's run
 * is cancelled (fq_ring_cancel) or the ring is closed.  fq_pool_join() waits
 * for all of them and frees the pool; it must be called exactly once, by one
 * thread.  The task context and the ring must outlive the join.
 *
 * Scheduling (fq_pool_start_sched): each worker, as it starts, names itself
 * "fastq-worker" (what `top -H` and /proc/<pid>/task/<tid>/comm show) and applies
 * the fq_sched it was given to itself only: a scheduling policy (SCHED_BATCH or
 * SCHED_IDLE), a nice increment over the value it inherited, and a CPU set.  This
 * is how the producers yield to the training thread.  A setting the kernel refuses
 * (a container without the right, a CPU not in the process's mask) does not stop
 * the pool: the worker runs with what it has, and the first refusal is kept for
 * fq_pool_sched_error().  Workers are new threads at every fq_pool_start, so the
 * setting holds for exactly one run.
 *
 * Thread safety: fq_pool_stats() and fq_pool_sched_error() may be called from any
 * thread while running.
 */
#ifndef FQ_POOL_H
#define FQ_POOL_H

#include "core/fq_common.h"
#include "ring/fq_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write item `item` into rows[b] (one pointer per ring block, each
 * row_bytes(b) long).  `worker` is in [0, n_workers) and lets the task keep
 * per-thread scratch.  Return FQ_OK or an error code with err filled. */
typedef int (*fq_task_fn)(void *ctx, int worker, int64_t item, uint8_t *const *rows, fq_err *err);

typedef struct fq_pool fq_pool;

enum fq_sched_policy {
    FQ_SCHED_KEEP = 0,   /* keep the inherited policy (SCHED_OTHER for a normal process) */
    FQ_SCHED_BATCH = 1,  /* SCHED_BATCH: CPU-bound, never preempts another thread on wake-up */
    FQ_SCHED_IDLE = 2    /* SCHED_IDLE: runs only on CPU time nobody else wants */
};

#define FQ_SCHED_MAX_CPUS 4096

/* How the workers schedule themselves.  Read by fq_pool_start_sched only (copied;
 * `cpus` may be freed after it returns). */
typedef struct fq_sched {
    int policy;       /* enum fq_sched_policy */
    int nice;         /* added to each worker's inherited nice value (0..39; capped at 19) */
    int n_cpus;       /* 0: keep the inherited CPU mask; else the workers run on cpus[0..n_cpus) */
    const int *cpus;  /* CPU numbers in [0, FQ_SCHED_MAX_CPUS) */
} fq_sched;

typedef struct fq_pool_stats {
    int n_workers;
    int running;           /* workers not yet exited */
    int64_t items_done;    /* tasks finished (ok or failed) */
    int64_t items_failed;
    uint64_t task_ns;      /* total time spent inside the task function */
    int sched_applied;     /* workers that applied their whole fq_sched (all of them without one) */
} fq_pool_stats;

int fq_pool_start(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                  fq_pool **out, fq_err *err);
/* The same with a scheduling setting for the workers (NULL: as fq_pool_start). */
int fq_pool_start_sched(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                        const fq_sched *sched, fq_pool **out, fq_err *err);
/* Wait for every worker, then free the pool.  If a worker hit an internal
 * error (not a task error) it is returned here. */
int fq_pool_join(fq_pool *p, fq_err *err);
void fq_pool_get_stats(fq_pool *p, fq_pool_stats *st);
/* Copies the first scheduling setting a worker could not apply into *err and
 * returns its code; FQ_OK (and an empty err) if every worker applied all of it. */
int fq_pool_sched_error(fq_pool *p, fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
