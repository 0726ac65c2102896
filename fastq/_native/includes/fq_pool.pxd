# csrc/ring/fq_pool.h: the worker pool.
from libc.stdint cimport int64_t, uint64_t, uint8_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_ring cimport fq_ring

cdef extern from "ring/fq_pool.h" nogil:
    ctypedef int (*fq_task_fn)(void *ctx, int worker, int64_t item, uint8_t **rows, fq_err *err)
    ctypedef struct fq_pool:
        pass
    ctypedef struct fq_pool_stats:
        int n_workers
        int running
        int64_t items_done
        int64_t items_failed
        uint64_t task_ns
        int sched_applied
    enum:
        FQ_SCHED_KEEP
        FQ_SCHED_BATCH
        FQ_SCHED_IDLE
        FQ_SCHED_MAX_CPUS
    ctypedef struct fq_sched:
        int policy
        int nice
        int n_cpus
        const int *cpus
    int fq_pool_start(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                      fq_pool **out, fq_err *err)
    int fq_pool_start_sched(fq_ring *ring, int n_workers, int64_t n_items, fq_task_fn fn, void *ctx,
                            const fq_sched *sched, fq_pool **out, fq_err *err)
    int fq_pool_sched_error(fq_pool *p, fq_err *err)
    int fq_pool_join(fq_pool *p, fq_err *err)
    void fq_pool_get_stats(fq_pool *p, fq_pool_stats *st)
