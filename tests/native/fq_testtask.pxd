# csrc/tests/fq_testtask.h: the test-only pattern task (extern only; cimported by _testing.pyx).
from libc.stdint cimport int64_t, uint64_t, uint8_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_ring cimport fq_ring

cdef extern from "fq_testtask.h" nogil:
    ctypedef struct fq_pattern_ctx:
        int n_blocks
        size_t row_bytes[16]
        int64_t fail_item
        uint64_t work_ns
        uint64_t seed
    int fq_pattern_task(void *ctx, int worker, int64_t item, uint8_t **rows, fq_err *err)
    uint8_t fq_pattern_byte(uint64_t seed, int64_t item, int block, size_t off)
    int fq_pattern_drain(fq_ring *r, const fq_pattern_ctx *c, int verify, int64_t *batches, int64_t *rows,
                         int64_t *bad_rows, fq_err *err)
