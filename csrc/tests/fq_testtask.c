/* fq_testtask.c - see fq_testtask.h. */
#include "fq_testtask.h"

#include <string.h>

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t word(uint64_t seed, int64_t item, int block, size_t w)
{
    return mix64(seed ^ mix64((uint64_t)item * 0x100000001B3ull + (uint64_t)block * 0x51ull) ^ (uint64_t)w);
}

uint8_t fq_pattern_byte(uint64_t seed, int64_t item, int block, size_t off)
{
    return (uint8_t)(word(seed, item, block, off / 8) >> (8 * (off % 8)));
}

static void fill(const fq_pattern_ctx *c, int64_t item, int block, uint8_t *row)
{
    size_t n = c->row_bytes[block];
    size_t w = 0;
    for (; (w + 1) * 8 <= n; w++) {
        uint64_t v = word(c->seed, item, block, w);
        memcpy(row + w * 8, &v, 8); /* little-endian machines: byte k of v == fq_pattern_byte */
    }
    for (size_t off = w * 8; off < n; off++)
        row[off] = fq_pattern_byte(c->seed, item, block, off);
}

int fq_pattern_task(void *ctx, int worker, int64_t item, uint8_t *const *rows, fq_err *err)
{
    (void)worker;
    const fq_pattern_ctx *c = ctx;
    if (item == c->fail_item) {
        fq_set_err(err, FQ_E_DECODE, "sample %lld: injected failure", (long long)item);
        err->index = item;
        return FQ_E_DECODE;
    }
    if (c->work_ns) {
        uint64_t end = fq_now_ns() + c->work_ns;
        while (fq_now_ns() < end) {
        }
    }
    for (int b = 0; b < c->n_blocks; b++)
        fill(c, item, b, rows[b]);
    return FQ_OK;
}

int fq_pattern_check(const fq_pattern_ctx *c, int64_t item, int block, const uint8_t *row)
{
    size_t n = c->row_bytes[block];
    size_t w = 0;
    for (; (w + 1) * 8 <= n; w++) {
        uint64_t v = word(c->seed, item, block, w), got;
        memcpy(&got, row + w * 8, 8);
        if (v != got)
            return 0;
    }
    for (size_t off = w * 8; off < n; off++)
        if (row[off] != fq_pattern_byte(c->seed, item, block, off))
            return 0;
    return 1;
}

int fq_pattern_drain(fq_ring *r, const fq_pattern_ctx *c, int verify, int64_t *batches, int64_t *rows,
                     int64_t *bad_rows, fq_err *err)
{
    int64_t nb = 0, nr = 0, bad = 0;
    int bs = fq_ring_batch_size(r);
    int rc;
    for (;;) {
        int slot, n;
        rc = fq_ring_next(r, -1, &slot, &n, err);
        if (rc != FQ_OK)
            break;
        if (verify) {
            int64_t seq = 0;
            rc = fq_ring_slot_seq(r, slot, &seq, err);
            if (rc != FQ_OK)
                break;
            for (int row = 0; row < n; row++) {
                int64_t item = seq * bs + row;
                for (int b = 0; b < c->n_blocks; b++) {
                    const uint8_t *p = fq_ring_block_ptr(r, slot, b) + (size_t)row * c->row_bytes[b];
                    if (item != c->fail_item && !fq_pattern_check(c, item, b, p)) {
                        bad++;
                        break;
                    }
                }
            }
        }
        nb++;
        nr += n;
        rc = fq_ring_release(r, slot, err);
        if (rc != FQ_OK)
            break;
    }
    if (batches)
        *batches = nb;
    if (rows)
        *rows = nr;
    if (bad_rows)
        *bad_rows = bad;
    if (rc == FQ_E_EOF) {
        fq_clear_err(err);
        return FQ_OK;
    }
    return rc;
}
