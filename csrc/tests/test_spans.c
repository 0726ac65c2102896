/* test_spans.c - stress test of the lending table (csrc/records/fq_spans.c) under
 * ASan+UBSan and TSan: one fetcher thread lends chunks of several samples each, in
 * a shuffled order, answers demands for samples it left out with single-sample
 * entries, fails a few ranges, and frees a buffer only when its token comes back;
 * reader threads take every sample once and check its bytes (a pattern of object
 * and offset) or its failure.  Checks: every byte right, every failing sample
 * fails with the fetcher's message, every token back exactly once, nothing freed
 * early (ASan), no race (TSan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records/fq_spans.h"

#define CHECK FQ_CHECK_ABORT
#include "fq_check.h"

enum { N_OBJ = 37, N_SAMPLES = 6000, SAMPLE_LEN = 48, PER_CHUNK = 5, READERS = 4 };

static fq_spans *S;
static _Atomic int64_t next_sample;
static _Atomic int64_t n_ok, n_failed;
static uint8_t **bufs;      /* by token - 1: the buffer lent under that token */
static _Atomic int *returned; /* by token - 1: times the token came back */

static int32_t obj_of(int64_t i) { return (int32_t)(i % N_OBJ); }
static uint64_t off_of(int64_t i) { return (uint64_t)(i / N_OBJ) * SAMPLE_LEN; }
static uint8_t pattern(int32_t o, uint64_t x) { return (uint8_t)((uint64_t)o * 131u + x * 7u + 3u); }
static int failing(int64_t i) { return i % 101 == 7; }  /* a failed range covers these samples alone */
static int left_out(int64_t i) { return i % 23 == 5 && !failing(i); } /* only ever demanded */

static void *reader(void *arg)
{
    (void)arg;
    int me; /* its address is this reader's holder key */
    int64_t i;
    while ((i = atomic_fetch_add(&next_sample, 1)) < N_SAMPLES) {
        const uint8_t *p = NULL;
        uint64_t got = 0;
        fq_err e;
        memset(&e, 0, sizeof e);
        int rc = fq_spans_get(S, &me, i, obj_of(i), off_of(i),
                              SAMPLE_LEN, &p, &got, &e);
        if (failing(i)) {
            CHECK(rc == FQ_E_IO && strstr(e.msg, "GET failed for the test") != NULL);
            atomic_fetch_add(&n_failed, 1);
            continue;
        }
        CHECK(rc == FQ_OK && got == SAMPLE_LEN);
        for (uint64_t k = 0; k < got; k++)
            CHECK(p[k] == pattern(obj_of(i), off_of(i) + k));
        atomic_fetch_add(&n_ok, 1);
    }
    return NULL;
}

static uint64_t next_token = 1;

static void lend(int64_t first, const int64_t *claims, int n)
{
    /* one buffer for samples claims[0..n) of one object, consecutive in the object */
    const int32_t o = obj_of(first);
    uint64_t lo = off_of(claims[0]), hi = off_of(claims[0]) + SAMPLE_LEN;
    for (int k = 1; k < n; k++) {
        if (off_of(claims[k]) < lo)
            lo = off_of(claims[k]);
        if (off_of(claims[k]) + SAMPLE_LEN > hi)
            hi = off_of(claims[k]) + SAMPLE_LEN;
    }
    uint8_t *b = malloc(hi - lo);
    CHECK(b != NULL);
    for (uint64_t x = lo; x < hi; x++)
        b[x - lo] = pattern(o, x);
    const uint64_t tok = next_token++;
    bufs[tok - 1] = b;
    fq_err e;
    memset(&e, 0, sizeof e);
    CHECK(fq_spans_put(S, o, lo, hi - lo, 0, b, tok, claims, n, &e) == FQ_OK);
}

static int take_tokens(int timeout_ms, int min_tok, int64_t *dem, int *nd)
{
    uint64_t tok[64];
    int nt = 0;
    CHECK(fq_spans_poll(S, timeout_ms, min_tok, dem, 64, nd, tok, 64, &nt) == FQ_OK);
    for (int k = 0; k < nt; k++) {
        CHECK(tok[k] >= 1 && tok[k] < next_token);
        CHECK(atomic_fetch_add(&returned[tok[k] - 1], 1) == 0);
        free(bufs[tok[k] - 1]);
        bufs[tok[k] - 1] = NULL;
    }
    return nt;
}

int main(void)
{
    fq_err e;
    memset(&e, 0, sizeof e);
    CHECK(fq_spans_create(N_OBJ, N_SAMPLES, &S, &e) == FQ_OK);
    bufs = calloc(N_SAMPLES + 1, sizeof *bufs);
    returned = calloc(N_SAMPLES + 1, sizeof *returned);
    CHECK(bufs && returned);
    pthread_t th[READERS];
    for (int r = 0; r < READERS; r++)
        CHECK(pthread_create(&th[r], NULL, reader, NULL) == 0);

    /* chunks: per object, PER_CHUNK consecutive samples (left-out ones excluded), lent
     * in a shuffled order; failing samples get a failed range of their own */
    int64_t (*chunks)[PER_CHUNK] = malloc(sizeof *chunks * N_SAMPLES);
    int *sizes = calloc(N_SAMPLES, sizeof *sizes);
    CHECK(chunks && sizes);
    int n_chunks = 0;
    for (int32_t o = 0; o < N_OBJ; o++) {
        int cur = -1;
        for (int64_t i = o; i < N_SAMPLES; i += N_OBJ) {
            if (left_out(i))
                continue;
            if (failing(i)) {
                memset(&e, 0, sizeof e);
                CHECK(fq_spans_fail(S, o, off_of(i), SAMPLE_LEN, 0, "GET failed for the test", &i, 1, &e) == FQ_OK);
                continue;
            }
            if (cur < 0 || sizes[cur] == PER_CHUNK) {
                cur = n_chunks++;
            }
            chunks[cur][sizes[cur]++] = i;
        }
    }
    unsigned seed = 12345;
    for (int k = n_chunks - 1; k > 0; k--) {
        int j = (int)(rand_r(&seed) % (unsigned)(k + 1));
        int64_t tmp[PER_CHUNK];
        memcpy(tmp, chunks[k], sizeof tmp);
        memcpy(chunks[k], chunks[j], sizeof tmp);
        memcpy(chunks[j], tmp, sizeof tmp);
        int ts = sizes[k];
        sizes[k] = sizes[j];
        sizes[j] = ts;
    }
    int64_t dem[64];
    int nd = 0;
    for (int c = 0; c < n_chunks; c++) {
        lend(chunks[c][0], chunks[c], sizes[c]);
        take_tokens(0, 1, dem, &nd);
        for (int k = 0; k < nd; k++)
            if (left_out(dem[k]))
                lend(dem[k], &dem[k], 1);
    }
    /* answer the remaining demands until every sample is read (tokens gathered 4 at a
     * time: a demand still wakes the wait at once, or the readers would stall 20 ms each) */
    while (atomic_load(&n_ok) + atomic_load(&n_failed) < N_SAMPLES) {
        take_tokens(20, 4, dem, &nd);
        for (int k = 0; k < nd; k++)
            if (left_out(dem[k]))
                lend(dem[k], &dem[k], 1);
    }
    for (int r = 0; r < READERS; r++)
        CHECK(pthread_join(th[r], NULL) == 0);
    /* tokens the readers gave back after the loop's last poll: take them all (at most
     * 64 a poll), so that only the readers' last holds are left for the reset */
    while (take_tokens(0, 1, dem, &nd) > 0)
        CHECK(nd == 0); /* every sample was read: nothing is demanded any more */
    fq_spans_stats st;
    fq_spans_get_stats(S, &st);
    CHECK(st.demands > 0);
    /* the readers' last holds go with the reset; every other token came back */
    fq_spans_reset(S);
    int held = 0;
    for (uint64_t t = 1; t < next_token; t++) {
        if (bufs[t - 1]) {
            held++;
            free(bufs[t - 1]);
        }
    }
    CHECK(held <= READERS);
    CHECK(atomic_load(&n_failed) == (N_SAMPLES - 1 - 7) / 101 + 1);
    fq_spans_free(S);
    free(chunks);
    free(sizes);
    free(bufs);
    free(returned);
    printf("spans: %lld samples read, %lld failed as lent, %llu buffers, %lld demands\n", (long long)n_ok,
           (long long)n_failed, (unsigned long long)(next_token - 1), (long long)st.demands);
    return 0;
}
