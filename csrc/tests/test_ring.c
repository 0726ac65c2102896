/* test_ring.c - stress and edge-case tests for fq_ring + fq_pool, no Python.
 *
 * Built and run by csrc/tests/run_sanitizers.sh under AddressSanitizer+UBSan and ThreadSanitizer:
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -Icsrc $(find csrc/core csrc/ring -name '*.c') \
 *       csrc/tests/fq_testtask.c csrc/tests/test_ring.c -o test_ring -pthread && ./test_ring
 * Exit status 0 and a final "N passed, 0 failed" line mean success.
 */
#define _GNU_SOURCE /* sched_getaffinity, SCHED_BATCH, gettid for the scheduling test */
#include "ring/fq_pool.h"
#include "ring/fq_ring.h"
#include "fq_testtask.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int n_pass, n_fail;
#include "fq_check.h"
#define CHECK FQ_CHECK_RET

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static fq_ring *make_ring(int cap, int bs, fq_pattern_ctx *c)
{
    fq_ring *r = NULL;
    fq_err e;
    if (fq_ring_create(cap, bs, c->n_blocks, c->row_bytes, 4096, &r, &e) != FQ_OK) {
        fprintf(stderr, "ring create: %s\n", e.msg);
        exit(2);
    }
    return r;
}

/* Many producers, a consumer with random delays: every sample once, in order, untorn. */
static int stress(int cap, int bs, int workers, int64_t n_items, int drop, unsigned seed)
{
    fq_pattern_ctx c = {.n_blocks = 2, .row_bytes = {13, 200}, .fail_item = -1, .seed = seed};
    fq_ring *r = make_ring(cap, bs, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, drop, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, n_items, 0, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, workers, n_items, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    srand(seed);
    int64_t expect_seq = 0, rows_seen = 0;
    for (;;) {
        int slot, n;
        int rc = fq_ring_next(r, 5000000000LL, &slot, &n, &e);
        if (rc == FQ_E_EOF)
            break;
        CHECK(rc == FQ_OK, "next: %s", e.msg);
        int64_t seq = -1;
        CHECK(fq_ring_slot_seq(r, slot, &seq, &e) == FQ_OK, "%s", e.msg);
        CHECK(seq == expect_seq, "got batch %lld, expected %lld", (long long)seq, (long long)expect_seq);
        for (int row = 0; row < n; row++)
            for (int b = 0; b < 2; b++)
                CHECK(fq_pattern_check(&c, seq * bs + row, b,
                                       fq_ring_block_ptr(r, slot, b) + (size_t)row * c.row_bytes[b]),
                      "torn row %d of batch %lld", row, (long long)seq);
        if (rand() % 4 == 0)
            sleep_us(rand() % 200);
        rows_seen += n;
        expect_seq++;
        CHECK(fq_ring_release(r, slot, &e) == FQ_OK, "%s", e.msg);
    }
    int64_t want = drop ? n_items / bs * bs : n_items;
    CHECK(rows_seen == want, "rows %lld want %lld", (long long)rows_seen, (long long)want);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    fq_ring_stats st;
    CHECK(fq_ring_get_stats(r, &st, &e) == FQ_OK, "%s", e.msg);
    CHECK(st.samples_delivered == (uint64_t)want, "stats samples %llu", (unsigned long long)st.samples_delivered);
    CHECK(st.n_leased == 0, "leased %d", st.n_leased);
    fq_ring_destroy(r);
    return 0;
}

static int failing_item(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {32}, .fail_item = 37, .seed = 1};
    fq_ring *r = make_ring(2, 8, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 80, 0, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 3, 80, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int errors = 0;
    for (int64_t b = 0;; b++) {
        int slot, n;
        fq_err f;
        int rc = fq_ring_next(r, 5000000000LL, &slot, &n, &e);
        if (rc == FQ_E_EOF)
            break;
        CHECK(rc == FQ_OK, "%s", e.msg);
        int row = -2;
        CHECK(fq_ring_slot_error(r, slot, &row, &f, &e) == FQ_OK, "%s", e.msg);
        if (b == 4) {
            CHECK(row == 5 && f.code == FQ_E_DECODE && f.index == 37 && strstr(f.msg, "sample 37"),
                  "row %d code %d index %lld msg %s", row, f.code, (long long)f.index, f.msg);
            errors++;
        } else {
            CHECK(row == -1, "unexpected error in batch %lld", (long long)b);
        }
        CHECK(fq_ring_release(r, slot, &e) == FQ_OK, "%s", e.msg);
    }
    CHECK(errors == 1, "errors %d", errors);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    fq_ring_destroy(r);
    return 0;
}

/* Ring full, consumer absent: cancel wakes every blocked producer; a new run works,
 * and a slot leased across runs is waited for, then reused. */
static int cancel_and_rerun(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {64}, .fail_item = -1, .seed = 9};
    fq_ring *r = make_ring(3, 4, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 1000, 0, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 4, 1000, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int held, n;
    CHECK(fq_ring_next(r, 5000000000LL, &held, &n, &e) == FQ_OK, "%s", e.msg);
    sleep_us(20000); /* producers fill the other slots and block */
    fq_pool_stats ps;
    fq_pool_get_stats(p, &ps);
    CHECK(ps.running == 4, "running %d", ps.running);
    uint64_t t0 = fq_now_ns();
    fq_ring_cancel(r);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_now_ns() - t0 < 2000000000ull, "join took too long");
    int s2;
    CHECK(fq_ring_next(r, 1000000, &s2, &n, &e) == FQ_E_CANCELLED, "consumer not cancelled");

    /* New run while `held` is still leased. */
    c.seed = 10;
    CHECK(fq_ring_begin_run(r, 0, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 30, 0, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_pool_start(r, 2, 30, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int64_t batches = 0, rows = 0, bad = 0;
    /* the old run's batch stays leased for the whole new run: the other two
     * slots carry it (a held slot only reduces the usable depth by one) */
    CHECK(fq_pattern_drain(r, &c, 1, &batches, &rows, &bad, &e) == FQ_OK, "%s", e.msg);
    CHECK(batches == 8 && rows == 30 && bad == 0, "batches %lld rows %lld bad %lld", (long long)batches,
          (long long)rows, (long long)bad);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_release(r, held, &e) == FQ_OK, "%s", e.msg);
    fq_ring_destroy(r);
    return 0;
}

/* A consumer bound to its run (fq_ring_next_run): refused as soon as a newer run began;
 * fq_ring_cancel_run cancels only the run it names. */
static int runs_are_scoped(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {32}, .fail_item = -1, .seed = 21};
    fq_ring *r = make_ring(3, 2, &c);
    fq_err e;
    int64_t run1 = 0, run2 = 0;
    CHECK(fq_ring_begin_run(r, 1, &run1, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 8, 0, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 2, 8, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int slot, n;
    CHECK(fq_ring_next_run(r, run1, 5000000000LL, &slot, &n, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_release(r, slot, &e) == FQ_OK, "%s", e.msg);
    fq_ring_cancel_run(r, run1 + 1); /* not the current run: nothing happens */
    CHECK(fq_ring_next_run(r, run1, 5000000000LL, &slot, &n, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_release(r, slot, &e) == FQ_OK, "%s", e.msg);
    fq_ring_cancel_run(r, run1);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_next_run(r, run1, 1000000, &slot, &n, &e) == FQ_E_CANCELLED, "run 1 not cancelled");
    CHECK(fq_ring_begin_run(r, 1, &run2, &e) == FQ_OK && run2 > run1, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 6, 0, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_pool_start(r, 2, 6, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    /* run 1's consumer never takes a batch of run 2 */
    CHECK(fq_ring_next_run(r, run1, 1000000, &slot, &n, &e) == FQ_E_CANCELLED && strstr(e.msg, "superseded"),
          "stale consumer: %s", e.msg);
    fq_ring_cancel_run(r, run1); /* stale: run 2 goes on */
    int64_t batches = 0;
    for (;;) {
        int rc = fq_ring_next_run(r, run2, 5000000000LL, &slot, &n, &e);
        if (rc == FQ_E_EOF)
            break;
        CHECK(rc == FQ_OK, "run 2: %s", e.msg);
        CHECK(fq_ring_release(r, slot, &e) == FQ_OK, "%s", e.msg);
        batches++;
    }
    CHECK(batches == 3, "run 2 delivered %lld batches", (long long)batches);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    fq_ring_destroy(r);
    return 0;
}

/* Owners in other threads keep the ring (and a leased slot) valid; the last unref frees it
 * (ASan: no leak, no use after free; TSan: the count and the release race-free). */
struct holder {
    fq_ring *r;
    int slot;
};
static void *release_later(void *arg)
{
    struct holder *h = arg;
    fq_err e;
    sleep_us(20000);
    uint8_t *row = fq_ring_block_ptr(h->r, h->slot, 0);
    row[0] ^= 1; /* still ours: the arena outlived the creator's reference */
    if (fq_ring_release(h->r, h->slot, &e) != FQ_OK)
        fprintf(stderr, "release: %s\n", e.msg);
    fq_ring_unref(h->r);
    return NULL;
}

static int refcount_outlives_the_creator(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {48}, .fail_item = -1, .seed = 22};
    fq_ring *r = make_ring(2, 3, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 3, 0, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 1, 3, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    struct holder h = {r, -1};
    int n = 0;
    CHECK(fq_ring_next(r, 5000000000LL, &h.slot, &n, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    fq_ring_retain(r); /* the lease's reference (as the TF kernel's batch) */
    fq_ring_retain(r); /* an owner that only drops its reference */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, release_later, &h) == 0, "thread");
    fq_ring_close(r);
    fq_ring_unref(r); /* the creator's reference: the ring lives on */
    fq_ring_unref(r);
    CHECK(pthread_join(t, NULL) == 0, "join"); /* the thread dropped the last one */
    fq_ring_unref(NULL);
    return 0;
}

struct closer {
    fq_ring *r;
    long delay_us;
};
static void *close_later(void *arg)
{
    struct closer *cl = arg;
    sleep_us(cl->delay_us);
    fq_ring_close(cl->r);
    return NULL;
}

static int close_wakes_everyone(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {16}, .fail_item = -1, .seed = 3};
    fq_ring *r = make_ring(2, 2, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 3, 1000000, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int slot, n;
    CHECK(fq_ring_next(r, 5000000000LL, &slot, &n, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_next(r, 5000000000LL, &slot, &n, &e) == FQ_OK, "%s", e.msg);
    /* both slots leased: consumer would stall */
    CHECK(fq_ring_next(r, 20000000, &slot, &n, &e) == FQ_E_STALLED, "expected stall, got %s", e.msg);
    pthread_t t;
    struct closer cl = {r, 30000};
    CHECK(pthread_create(&t, NULL, close_later, &cl) == 0, "pthread_create");
    CHECK(fq_ring_next(r, -1, &slot, &n, &e) == FQ_E_CLOSED, "expected closed");
    CHECK(pthread_join(t, NULL) == 0, "join");
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    fq_ring_destroy(r);
    return 0;
}

static int timeouts_and_args(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {8}, .fail_item = -1};
    fq_ring *r = make_ring(1, 2, &c);
    fq_err e;
    int slot, row, n;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    uint64_t t0 = fq_now_ns();
    CHECK(fq_ring_next(r, 20000000, &slot, &n, &e) == FQ_E_TIMEOUT, "expected timeout");
    CHECK(fq_now_ns() - t0 >= 19000000ull, "returned early");
    int64_t id = -1;
    CHECK(fq_ring_run_id(r, &id, &e) == FQ_OK && id >= 1, "run id %lld", (long long)id);
    CHECK(fq_ring_acquire(r, id, 0, 0, &slot, &row, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_acquire(r, id, 2, 10000000, &slot, &row, &e) == FQ_E_TIMEOUT, "expected producer timeout");
    CHECK(fq_ring_commit(r, id, 0, 5, NULL, &e) == FQ_E_INVALID, "bad row accepted");
    CHECK(fq_ring_release(r, 0, &e) == FQ_E_INVALID, "release of unleased slot accepted");
    int64_t sq;
    int erow;
    CHECK(fq_ring_slot_seq(r, 0, &sq, &e) == FQ_E_INVALID, "seq of an unleased slot");
    CHECK(fq_ring_slot_seq(r, 7, &sq, &e) == FQ_E_INVALID, "seq of slot 7");
    CHECK(fq_ring_slot_error(r, -1, &erow, NULL, &e) == FQ_E_INVALID, "error of slot -1");
    /* a stale run id is refused and touches nothing */
    int64_t old = id;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_acquire(r, old, 0, 0, &slot, &row, &e) == FQ_E_CANCELLED, "stale acquire accepted");
    CHECK(fq_ring_commit(r, old, 0, 0, NULL, &e) == FQ_E_CANCELLED, "stale commit accepted");
    fq_ring_destroy(r);
    fq_ring *bad = NULL;
    size_t zero = 0;
    CHECK(fq_ring_create(0, 4, 1, c.row_bytes, 64, &bad, &e) == FQ_E_INVALID && bad == NULL, "capacity 0");
    CHECK(fq_ring_create(2, 4, 1, &zero, 64, &bad, &e) == FQ_E_INVALID && bad == NULL, "row 0");
    CHECK(fq_ring_create(2, 4, 1, c.row_bytes, 100, &bad, &e) == FQ_E_INVALID && bad == NULL, "align 100");
    return 0;
}

/* The consumer keeps k batches (k < capacity) leased for a whole run, in
 * several patterns (the first k, every other one, the last k of a sliding
 * window), while 3 workers produce: the run completes in order, untorn, and
 * the ring never has more than capacity - k batches in flight. */
static int hold_k_for_a_run(int cap, int k, int pattern, unsigned seed)
{
    fq_pattern_ctx c = {.n_blocks = 2, .row_bytes = {24, 40}, .fail_item = -1, .seed = seed};
    const int bs = 3;
    const int64_t n_items = bs * 200 + 1;
    fq_ring *r = make_ring(cap, bs, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 0, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, n_items, 0, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 3, n_items, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int held[64], n_held = 0, slot, n;
    int64_t seq_expect = 0, rows = 0;
    srand(seed);
    for (;;) {
        int rc = fq_ring_next(r, 5000000000LL, &slot, &n, &e);
        if (rc == FQ_E_EOF)
            break;
        CHECK(rc == FQ_OK, "k=%d pattern %d: next: %s", k, pattern, e.msg);
        int64_t seq;
        CHECK(fq_ring_slot_seq(r, slot, &seq, &e) == FQ_OK, "%s", e.msg);
        CHECK(seq == seq_expect, "got batch %lld, expected %lld", (long long)seq, (long long)seq_expect);
        for (int i = 0; i < n_held; i++)
            CHECK(held[i] != slot, "slot %d handed out while leased", slot);
        for (int row = 0; row < n; row++)
            for (int b = 0; b < 2; b++)
                CHECK(fq_pattern_check(&c, seq * bs + row, b,
                                       fq_ring_block_ptr(r, slot, b) + (size_t)row * c.row_bytes[b]),
                      "torn row %d of batch %lld", row, (long long)seq);
        fq_ring_stats st;
        CHECK(fq_ring_get_stats(r, &st, &e) == FQ_OK, "%s", e.msg);
        CHECK(st.n_leased == n_held + 1 && st.n_free + st.n_filling + st.n_ready == cap - n_held - 1,
              "%d leased, %d free, %d filling, %d ready with %d held of %d", st.n_leased, st.n_free,
              st.n_filling, st.n_ready, n_held, cap);
        int keep = 0;
        if (pattern == 0)
            keep = n_held < k; /* the first k batches, for the whole run */
        else if (pattern == 1)
            keep = (seq % 2 == 0) && n_held < k; /* some, then stop */
        else {
            /* sliding: keep the newest k, release the oldest */
            if (n_held == k) {
                CHECK(fq_ring_release(r, held[0], &e) == FQ_OK, "%s", e.msg);
                memmove(held, held + 1, sizeof(int) * (size_t)(k - 1));
                n_held--;
            }
            keep = 1;
        }
        if (rand() % 3 == 0)
            sleep_us(rand() % 100);
        if (keep)
            held[n_held++] = slot;
        else
            CHECK(fq_ring_release(r, slot, &e) == FQ_OK, "%s", e.msg);
        rows += n;
        seq_expect++;
    }
    CHECK(rows == n_items, "rows %lld", (long long)rows);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    /* the next run works around the same held slots */
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, bs * 20, 0, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_pool_start(r, 2, bs * 20, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int64_t nb = 0, nr = 0, bad = 0;
    CHECK(fq_pattern_drain(r, &c, 1, &nb, &nr, &bad, &e) == FQ_OK, "%s", e.msg);
    CHECK(nb == 20 && nr == bs * 20 && bad == 0, "second run: %lld batches %lld bad", (long long)nb, (long long)bad);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    for (int i = 0; i < n_held; i++)
        CHECK(fq_ring_release(r, held[i], &e) == FQ_OK, "%s", e.msg);
    fq_ring_stats st;
    CHECK(fq_ring_get_stats(r, &st, &e) == FQ_OK, "%s", e.msg);
    CHECK(st.n_free == cap, "free %d of %d", st.n_free, cap);
    fq_ring_destroy(r);
    return 0;
}

/* Holding every slot is the only stall, and its message says how many. */
static int stall_only_when_all_held(void)
{
    fq_pattern_ctx c = {.n_blocks = 1, .row_bytes = {8}, .fail_item = -1, .seed = 5};
    fq_ring *r = make_ring(3, 1, &c);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    fq_pool *p = NULL;
    CHECK(fq_pool_start(r, 2, 1000000, fq_pattern_task, &c, &p, &e) == FQ_OK, "%s", e.msg);
    int s[3], n;
    for (int i = 0; i < 3; i++)
        CHECK(fq_ring_next(r, 5000000000LL, &s[i], &n, &e) == FQ_OK, "%s", e.msg);
    int x;
    CHECK(fq_ring_next(r, 20000000, &x, &n, &e) == FQ_E_STALLED, "expected a stall, got %d", e.code);
    CHECK(strstr(e.msg, "holds 3 batches") != NULL, "message: %s", e.msg);
    CHECK(fq_ring_release(r, s[1], &e) == FQ_OK, "%s", e.msg); /* a middle one */
    CHECK(fq_ring_next(r, 5000000000LL, &x, &n, &e) == FQ_OK, "%s", e.msg);
    CHECK(x == s[1], "the only free slot is %d, got %d", s[1], x);
    fq_ring_cancel(r);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    for (int i = 0; i < 3; i++)
        CHECK(fq_ring_release(r, i == 1 ? x : s[i], &e) == FQ_OK, "%s", e.msg);
    fq_ring_destroy(r);
    return 0;
}

/* Each worker of fq_pool_start_sched runs under the policy, nice and CPU set it was
 * given (read back by the task from the thread itself), and still produces every item. */
typedef struct sched_probe {
    fq_pattern_ctx pat;
    _Atomic int wrong_policy, wrong_nice, wrong_cpus, seen;
    int want_policy, want_nice, want_cpu;
} sched_probe;

static int probe_task(void *ctx, int worker, int64_t item, uint8_t *const *rows, fq_err *err)
{
    sched_probe *sp = ctx;
    if (sched_getscheduler(0) != sp->want_policy)
        atomic_fetch_add(&sp->wrong_policy, 1);
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (errno != 0 || nice_now != sp->want_nice)
        atomic_fetch_add(&sp->wrong_nice, 1);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1 || !CPU_ISSET(sp->want_cpu, &set))
        atomic_fetch_add(&sp->wrong_cpus, 1);
    atomic_fetch_add(&sp->seen, 1);
    return fq_pattern_task(&sp->pat, worker, item, rows, err);
}

static int sched_applies(void)
{
    cpu_set_t mine;
    CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0, "sched_getaffinity");
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &mine))
            cpu = c;
    errno = 0;
    int base_nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    CHECK(errno == 0, "getpriority");
    sched_probe sp = {.pat = {.n_blocks = 1, .row_bytes = {16}, .fail_item = -1, .seed = 3},
                      .want_policy = SCHED_BATCH, .want_nice = base_nice + 5 > 19 ? 19 : base_nice + 5,
                      .want_cpu = cpu};
    fq_ring *r = make_ring(2, 4, &sp.pat);
    fq_err e;
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_ring_set_end(r, 40, 0, &e) == FQ_OK, "%s", e.msg);
    int cpus[1] = {cpu};
    fq_sched s = {.policy = FQ_SCHED_BATCH, .nice = 5, .n_cpus = 1, .cpus = cpus};
    fq_pool *p = NULL;
    CHECK(fq_pool_start_sched(r, 3, 40, probe_task, &sp, &s, &p, &e) == FQ_OK, "%s", e.msg);
    int64_t batches = 0, rows = 0, bad = 0;
    CHECK(fq_pattern_drain(r, &sp.pat, 1, &batches, &rows, &bad, &e) == FQ_OK, "%s", e.msg);
    /* every worker applies its settings as it starts, which may be after the others have
     * done all 40 items (a loaded machine): wait for the three, up to 10 s */
    fq_pool_stats st;
    fq_err se;
    fq_pool_get_stats(p, &st);
    for (int k = 0; k < 1000 && st.sched_applied < 3 && fq_pool_sched_error(p, &se) == FQ_OK; k++) {
        sleep_us(10000);
        fq_pool_get_stats(p, &st);
    }
    int serr = fq_pool_sched_error(p, &se);
    CHECK(fq_pool_join(p, &e) == FQ_OK, "%s", e.msg);
    CHECK(rows == 40 && bad == 0, "rows %lld bad %lld", (long long)rows, (long long)bad);
    CHECK(serr == FQ_OK && st.sched_applied == 3, "applied %d: %s", st.sched_applied, se.msg);
    CHECK(atomic_load(&sp.seen) == 40, "seen %d", atomic_load(&sp.seen));
    CHECK(atomic_load(&sp.wrong_policy) == 0 && atomic_load(&sp.wrong_nice) == 0 && atomic_load(&sp.wrong_cpus) == 0,
          "policy %d nice %d cpus %d items ran with the wrong setting", atomic_load(&sp.wrong_policy),
          atomic_load(&sp.wrong_nice), atomic_load(&sp.wrong_cpus));
    /* the creating thread keeps its own setting */
    CHECK(sched_getscheduler(0) == SCHED_OTHER, "the caller's policy changed");
    /* bad settings are the caller's error, before any thread starts */
    fq_sched bad_nice = {.policy = FQ_SCHED_BATCH, .nice = -1};
    CHECK(fq_ring_begin_run(r, 1, NULL, &e) == FQ_OK, "%s", e.msg);
    CHECK(fq_pool_start_sched(r, 1, 4, probe_task, &sp, &bad_nice, &p, &e) == FQ_E_INVALID && p == NULL,
          "negative nice accepted");
    int bad_cpu[1] = {FQ_SCHED_MAX_CPUS};
    fq_sched bad_cpus = {.policy = FQ_SCHED_KEEP, .n_cpus = 1, .cpus = bad_cpu};
    CHECK(fq_pool_start_sched(r, 1, 4, probe_task, &sp, &bad_cpus, &p, &e) == FQ_E_INVALID && p == NULL,
          "out-of-range CPU accepted");
    fq_ring_close(r);
    fq_ring_destroy(r);
    return 0;
}

#define RUN(t)                                   \
    do {                                         \
        if ((t) == 0) {                          \
            n_pass++;                            \
            printf("ok   %s\n", #t);             \
        } else {                                 \
            n_fail++;                            \
            printf("FAIL %s\n", #t);             \
        }                                        \
        fflush(stdout);                          \
    } while (0)

int main(void)
{
    RUN(stress(3, 7, 4, 7 * 300 + 3, 0, 11));
    RUN(stress(3, 7, 4, 7 * 300 + 3, 1, 12));
    RUN(stress(1, 1, 3, 500, 1, 13));
    RUN(stress(8, 64, 2, 64 * 20, 1, 14));
    RUN(failing_item());
    RUN(cancel_and_rerun());
    RUN(runs_are_scoped());
    RUN(refcount_outlives_the_creator());
    RUN(close_wakes_everyone());
    RUN(timeouts_and_args());
    RUN(stall_only_when_all_held());
    RUN(sched_applies());
    for (int cap = 2; cap <= 5; cap++)
        for (int k = 1; k < cap; k++)
            for (int pattern = 0; pattern < 3; pattern++)
                RUN(hold_k_for_a_run(cap, k, pattern, (unsigned)(100 * cap + 10 * k + pattern)));
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
