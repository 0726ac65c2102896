/* test_imgtask.c - the native image pipeline (fq_imgtask + fq_pool + fq_ring +
 * fq_image) under threads, with no Python: built with ThreadSanitizer and with
 * ASan+UBSan by csrc/tests/run_sanitizers.sh.
 *
 * Usage: test_imgtask FILE.jpg [FILE.jpg ...]   (at least 8 JPEGs)
 * For each of two epochs, 4 workers produce every sample of a shuffled order
 * through a 3-slot ring; every row must equal the same sample produced on the
 * calling thread (fq_imgtask_sample).  A missing file must surface as an
 * FQ_E_IO error on exactly its row.  Ends with "N passed, M failed".
 */
#define _POSIX_C_SOURCE 200809L
#include "image/fq_image.h"
#include "task/fq_imgtask.h"
#include "ring/fq_pool.h"
#include "ring/fq_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_pass, n_fail;
#include "fq_check.h"
#define CHECK FQ_CHECK_RET

static fq_img_spec *make_spec(void)
{
    fq_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].kind = FQ_OP_RANDOM_RESIZED_CROP;
    ops[0].rrc = (fq_op_rrc){.out_h = 48, .out_w = 48, .scale_lo = 0.08, .scale_hi = 1.0, .ratio_lo = 0.75,
                             .ratio_hi = 4.0 / 3.0, .interp = FQ_INTERP_BILINEAR};
    ops[1].kind = FQ_OP_HFLIP;
    ops[1].hflip.p = 0.5;
    ops[2].kind = FQ_OP_NORMALIZE;
    ops[2].normalize = (fq_op_normalize){.mean = {0.485, 0.456, 0.406}, .std = {0.229, 0.224, 0.225}};
    fq_img_format fmt = {3, FQ_DT_FLOAT32, FQ_LAYOUT_HWC, 0, 1, FQ_ORDER_RGB, FQ_IDCT_ACCURATE};
    fq_img_spec *spec = NULL;
    fq_err e;
    if (fq_img_spec_create(ops, 3, &fmt, &spec, &e) != FQ_OK) {
        fprintf(stderr, "spec: %s\n", e.msg);
        exit(2);
    }
    return spec;
}

static int run(char **paths, int n, int bad_at)
{
    fq_img_spec *spec = make_spec();
    size_t rb = fq_img_spec_row_bytes(spec);
    int64_t *labels = malloc(sizeof(int64_t) * (size_t)n);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    uint8_t *ref = malloc(rb);
    CHECK(labels && order && ref, "malloc");
    for (int i = 0; i < n; i++)
        labels[i] = 1000 + i;
    fq_imgtask_source src = {.kind = FQ_SRC_FILES, .n = n, .paths = (const char *const *)paths,
                             .labels = (const uint8_t *)labels, .label_bytes = sizeof(int64_t)};
    const int workers = 4, bs = 3;
    fq_imgtask *task = NULL;
    fq_err e;
    CHECK(fq_imgtask_create(spec, &src, workers + 1, FQ_ON_ERROR_RAISE, 4, 1, &task, &e) == FQ_OK, "%s", e.msg);
    size_t rows[3] = {rb, sizeof(int64_t), sizeof(int64_t)};
    fq_ring *ring = NULL;
    CHECK(fq_ring_create(3, bs, 3, rows, 4096, &ring, &e) == FQ_OK, "%s", e.msg);
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        fq_permutation(7, epoch, order, n);
        CHECK(fq_imgtask_set_epoch(task, order, n, 7, epoch, &e) == FQ_OK, "%s", e.msg);
        CHECK(fq_ring_begin_run(ring, 0, NULL, &e) == FQ_OK, "%s", e.msg);
        CHECK(fq_ring_set_end(ring, n, 0, &e) == FQ_OK, "%s", e.msg);
        fq_pool *pool = NULL;
        CHECK(fq_pool_start(ring, workers, n, fq_imgtask_run, task, &pool, &e) == FQ_OK, "%s", e.msg);
        int64_t item = 0;
        for (;;) {
            int slot, nr;
            int rc = fq_ring_next(ring, 30000000000LL, &slot, &nr, &e);
            if (rc == FQ_E_EOF)
                break;
            CHECK(rc == FQ_OK, "next: %s", e.msg);
            fq_err f;
            int erow = -1;
            CHECK(fq_ring_slot_error(ring, slot, &erow, &f, &e) == FQ_OK, "%s", e.msg);
            for (int r = 0; r < nr; r++, item++) {
                int64_t idx = order[item];
                if (idx == bad_at) {
                    CHECK(erow == r && f.code == FQ_E_IO && f.index == idx && strstr(f.msg, paths[idx]),
                          "bad row %d: %d %lld %s", erow, f.code, (long long)f.index, f.msg);
                    continue;
                }
                const uint8_t *img = fq_ring_block_ptr(ring, slot, 0) + (size_t)r * rb;
                int64_t lab, got_idx;
                memcpy(&lab, fq_ring_block_ptr(ring, slot, 1) + (size_t)r * 8, 8);
                memcpy(&got_idx, fq_ring_block_ptr(ring, slot, 2) + (size_t)r * 8, 8);
                CHECK(got_idx == idx && lab == 1000 + idx, "row %d: index %lld label %lld, want %lld", r,
                      (long long)got_idx, (long long)lab, (long long)idx);
                CHECK(fq_imgtask_sample(task, workers, idx, 7, epoch, ref, NULL, &e) == FQ_OK, "%s", e.msg);
                CHECK(memcmp(img, ref, rb) == 0, "sample %lld differs from the single-thread result", (long long)idx);
            }
            CHECK(fq_ring_release(ring, slot, &e) == FQ_OK, "%s", e.msg);
        }
        CHECK(item == n, "saw %lld of %d items", (long long)item, n);
        CHECK(fq_pool_join(pool, &e) == FQ_OK, "%s", e.msg);
    }
    fq_ring_destroy(ring);
    fq_imgtask_free(task);
    fq_img_spec_free(spec);
    free(labels);
    free(order);
    free(ref);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 9) {
        fprintf(stderr, "usage: %s FILE.jpg x8+\n", argv[0]);
        return 2;
    }
    fq_img_set_opencv_threads(1);
    int n = argc - 1;
    char **paths = argv + 1;
    if (run(paths, n, -1) == 0) {
        n_pass++;
        printf("ok   all samples identical to the single-thread path\n");
    } else {
        n_fail++;
    }
    /* the same with one path replaced by a missing file */
    char **with_bad = malloc(sizeof(char *) * (size_t)n);
    if (!with_bad)
        return 2;
    memcpy(with_bad, paths, sizeof(char *) * (size_t)n);
    char missing[] = "/nonexistent/fastq-missing.jpg";
    with_bad[n / 2] = missing;
    if (run(with_bad, n, n / 2) == 0) {
        n_pass++;
        printf("ok   a missing file fails exactly its row\n");
    } else {
        n_fail++;
    }
    free(with_bad);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
