/* fq_testtask.h - a native sample task that needs no Python and no images.
 *
 * It fills each row with a pattern derived from (item, block, byte offset) so
 * that a consumer can verify that every sample arrived exactly once, in the
 * right row and untorn.  Used by the C stress test (csrc/tests/test_ring.c),
 * the Python tests (through the test-only extension fastq._native._testing, built
 * from tests/native/_testing.pyx when FASTQ_TESTING=1) and the ring microbenchmark.
 */
#ifndef FQ_TESTTASK_H
#define FQ_TESTTASK_H

#include "ring/fq_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fq_pattern_ctx {
    int n_blocks;
    size_t row_bytes[FQ_RING_MAX_BLOCKS];
    int64_t fail_item;      /* this item returns FQ_E_DECODE (-1: none) */
    uint64_t work_ns;       /* busy-wait this long per item to simulate work (0: none) */
    uint64_t seed;          /* varies the pattern */
} fq_pattern_ctx;

/* fq_task_fn for fq_pool_start; ctx is a fq_pattern_ctx*. */
int fq_pattern_task(void *ctx, int worker, int64_t item, uint8_t *const *rows, fq_err *err);
/* Byte `off` of block `block` for `item`. */
uint8_t fq_pattern_byte(uint64_t seed, int64_t item, int block, size_t off);
/* 1 if `row` holds exactly item's pattern for `block`. */
int fq_pattern_check(const fq_pattern_ctx *c, int64_t item, int block, const uint8_t *row);

/* A C consumer: takes batches from the ring until EOF (or error), optionally
 * verifies them against the pattern (first item of the run = 0), releases
 * each, and reports how many batches/rows it saw and how many rows were bad. */
int fq_pattern_drain(fq_ring *r, const fq_pattern_ctx *c, int verify, int64_t *batches, int64_t *rows,
                     int64_t *bad_rows, fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
