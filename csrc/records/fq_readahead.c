/* fq_readahead.c - see fq_readahead.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_readahead.h"
#include "core/fq_io.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { SLOT_FREE = 0, SLOT_LOADING = 1, SLOT_DONE = 2 };

typedef struct ra_slot {
    int64_t pos;     /* position held (valid unless FREE) */
    int state;
    int rc;          /* DONE: result of the read */
    fq_err err;
    uint8_t *buf;
    size_t cap;
    const uint8_t *data;
    size_t len;
    uint64_t nread;
    uint8_t *extra;
} ra_slot;

struct fq_ra {
    fq_sample_reader inner, outer;
    int64_t n_samples;
    int n_threads, depth;
    size_t extra_bytes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t *threads;
    int started;
    int stop;
    uint64_t gen;
    int64_t *order;    /* a copy of the current epoch order (owned) */
    int64_t n_items;
    int64_t next_pos;  /* next position an I/O thread loads */
    int64_t *pos_of;   /* sample -> position in the current order, -1 if none */
    uint8_t *taken;    /* per position: consumed (served or read directly) */
    ra_slot *slots;
    int64_t ahead, direct;
};

static int ra_set_order(void *ctx, const int64_t *order, int64_t n_items, fq_err *err);
static int ra_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                   uint8_t *extra, uint64_t *nread, fq_err *err);

static void ra_describe(void *ctx, int64_t idx, char *out, size_t len)
{
    fq_ra *ra = ctx;
    ra->inner.describe(ra->inner.reader, idx, out, len);
}

/* Under mu: the next position to load into a free slot, or -1. */
static int64_t next_job(fq_ra *ra)
{
    while (ra->next_pos < ra->n_items && ra->taken[ra->next_pos])
        ra->next_pos++; /* already read directly by a worker */
    if (ra->next_pos >= ra->n_items)
        return -1;
    ra_slot *s = &ra->slots[ra->next_pos % ra->depth];
    if (s->state == SLOT_LOADING)
        return -1;
    if (s->state == SLOT_DONE && !ra->taken[s->pos])
        return -1; /* still waiting for its consumer */
    return ra->next_pos++;
}

static void *io_main(void *arg)
{
    fq_ra *ra = arg;
    if (pthread_mutex_lock(&ra->mu) != 0)
        return NULL;
    while (!ra->stop) {
        int64_t p = next_job(ra);
        if (p < 0) {
            (void)pthread_cond_wait(&ra->cv, &ra->mu);
            continue;
        }
        ra_slot *s = &ra->slots[p % ra->depth];
        s->pos = p;
        s->state = SLOT_LOADING;
        int64_t idx = ra->order[p];
        (void)pthread_mutex_unlock(&ra->mu);
        fq_clear_err(&s->err);
        s->nread = 0;
        s->rc = ra->inner.read(ra->inner.reader, idx, &s->buf, &s->cap, &s->data, &s->len, s->extra, &s->nread,
                               &s->err);
        if (pthread_mutex_lock(&ra->mu) != 0)
            return NULL;
        s->state = SLOT_DONE;
        (void)pthread_cond_broadcast(&ra->cv);
    }
    (void)pthread_mutex_unlock(&ra->mu);
    return NULL;
}

int fq_ra_create(const fq_sample_reader *inner, int64_t n_samples, int io_threads, int depth, fq_ra **out,
                 const fq_sample_reader **outer, fq_err *err)
{
    *out = NULL;
    if (!inner || !inner->read || !inner->describe || n_samples < 1 || io_threads < 1 || io_threads > 256 ||
        depth < 1 || depth > (1 << 20))
        return fq_set_err(err, FQ_E_INVALID, "read-ahead: need io_threads in [1, 256] and depth in [1, 2^20]");
    fq_ra *ra = calloc(1, sizeof *ra);
    if (!ra)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    ra->inner = *inner;
    ra->n_samples = n_samples;
    ra->n_threads = io_threads;
    ra->depth = depth;
    for (int k = 0; k < inner->n_extra; k++)
        ra->extra_bytes += inner->extra_sizes[k];
    ra->slots = calloc((size_t)depth, sizeof *ra->slots);
    ra->pos_of = malloc((size_t)n_samples * sizeof *ra->pos_of);
    ra->threads = calloc((size_t)io_threads, sizeof *ra->threads);
    if (!ra->slots || !ra->pos_of || !ra->threads) {
        fq_ra_free(ra);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < depth; i++)
        if (!(ra->slots[i].extra = calloc(1, ra->extra_bytes + 1))) {
            fq_ra_free(ra);
            return fq_set_err(err, FQ_E_NOMEM, "out of memory");
        }
    for (int64_t i = 0; i < n_samples; i++)
        ra->pos_of[i] = -1;
    if (pthread_mutex_init(&ra->mu, NULL) != 0) {
        fq_ra_free(ra);
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_init failed");
    }
    if (pthread_cond_init(&ra->cv, NULL) != 0) {
        (void)pthread_mutex_destroy(&ra->mu);
        fq_ra_free(ra);
        return fq_set_err(err, FQ_E_SYS, "pthread_cond_init failed");
    }
    ra->started = -1; /* mutex + cond exist */
    for (int i = 0; i < io_threads; i++) {
        int rc = pthread_create(&ra->threads[i], NULL, io_main, ra);
        if (rc != 0) {
            ra->started = i;
            fq_ra_free(ra);
            return fq_set_err(err, FQ_E_SYS, "cannot start an I/O thread (error %d)", rc);
        }
    }
    ra->started = io_threads;
    ra->outer = ra->inner;
    ra->outer.read = ra_read;
    ra->outer.describe = ra_describe;
    ra->outer.set_order = ra_set_order;
    ra->outer.reader = ra;
    *out = ra;
    *outer = &ra->outer;
    return FQ_OK;
}

void fq_ra_free(fq_ra *ra)
{
    if (!ra)
        return;
    if (ra->started != 0) {
        int n = ra->started < 0 ? 0 : ra->started;
        if (pthread_mutex_lock(&ra->mu) == 0) {
            ra->stop = 1;
            (void)pthread_cond_broadcast(&ra->cv);
            (void)pthread_mutex_unlock(&ra->mu);
        }
        for (int i = 0; i < n; i++)
            (void)pthread_join(ra->threads[i], NULL);
        (void)pthread_cond_destroy(&ra->cv);
        (void)pthread_mutex_destroy(&ra->mu);
    }
    if (ra->slots)
        for (int i = 0; i < ra->depth; i++) {
            free(ra->slots[i].buf);
            free(ra->slots[i].extra);
        }
    free(ra->slots);
    free(ra->pos_of);
    free(ra->taken);
    free(ra->order);
    free(ra->threads);
    free(ra);
}

static int ra_set_order(void *ctx, const int64_t *order, int64_t n_items, fq_err *err)
{
    fq_ra *ra = ctx;
    uint8_t *taken = calloc((size_t)(n_items > 0 ? n_items : 1), 1);
    int64_t *copy = malloc((size_t)(n_items > 0 ? n_items : 1) * sizeof *copy);
    if (!taken || !copy) {
        free(taken);
        free(copy);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    if (n_items > 0)
        memcpy(copy, order, (size_t)n_items * sizeof *copy);
    if (pthread_mutex_lock(&ra->mu) != 0) {
        free(taken);
        free(copy);
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_lock failed");
    }
    for (;;) { /* let reads of the previous order finish: their slots are reused */
        int busy = 0;
        for (int i = 0; i < ra->depth; i++)
            busy |= ra->slots[i].state == SLOT_LOADING;
        if (!busy)
            break;
        (void)pthread_cond_wait(&ra->cv, &ra->mu);
    }
    for (int64_t p = 0; p < ra->n_items; p++)
        ra->pos_of[ra->order[p]] = -1;
    for (int i = 0; i < ra->depth; i++)
        ra->slots[i].state = SLOT_FREE;
    free(ra->taken);
    free(ra->order);
    ra->taken = taken;
    ra->order = copy;
    ra->n_items = n_items;
    ra->next_pos = 0;
    for (int64_t p = 0; p < n_items; p++)
        ra->pos_of[copy[p]] = p;
    ra->gen++;
    (void)pthread_cond_broadcast(&ra->cv);
    (void)pthread_mutex_unlock(&ra->mu);
    return FQ_OK;
}

static int ra_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                   uint8_t *extra, uint64_t *nread, fq_err *err)
{
    fq_ra *ra = ctx;
    if (idx < 0 || idx >= ra->n_samples)
        return fq_set_err(err, FQ_E_INVALID, "sample %lld out of range", (long long)idx);
    if (pthread_mutex_lock(&ra->mu) != 0)
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_lock failed");
    int64_t p = ra->pos_of[idx];
    if (p >= 0 && !ra->taken[p]) {
        ra_slot *s = &ra->slots[p % ra->depth];
        while (s->state == SLOT_LOADING && s->pos == p)
            (void)pthread_cond_wait(&ra->cv, &ra->mu);
        /* Another worker asking for the same sample (a skip replacement) may have
         * taken the slot while this one waited: then the slot's buffer is already
         * theirs, and this worker reads the sample itself. */
        if (!ra->taken[p] && s->state == SLOT_DONE && s->pos == p) {
            ra->taken[p] = 1;
            int rc = s->rc;
            if (rc == FQ_OK) { /* hand the slot's buffer to the worker, take the worker's in exchange */
                uint8_t *b = *buf;
                size_t c = *cap;
                *buf = s->buf;
                *cap = s->cap;
                s->buf = b;
                s->cap = c;
                *data = s->data;
                *len = s->len;
                *nread = s->nread;
                memcpy(extra, s->extra, ra->extra_bytes);
            } else {
                *err = s->err;
            }
            ra->ahead++;
            (void)pthread_cond_broadcast(&ra->cv); /* the slot is free for p + depth */
            (void)pthread_mutex_unlock(&ra->mu);
            return rc;
        }
        if (!ra->taken[p]) {
            ra->taken[p] = 1; /* not loaded yet: read it here; the I/O threads skip it */
            (void)pthread_cond_broadcast(&ra->cv);
        }
    }
    ra->direct++;
    (void)pthread_mutex_unlock(&ra->mu);
    return ra->inner.read(ra->inner.reader, idx, buf, cap, data, len, extra, nread, err);
}

void fq_ra_get_stats(fq_ra *ra, fq_ra_stats *st)
{
    memset(st, 0, sizeof *st);
    if (pthread_mutex_lock(&ra->mu) != 0)
        return;
    st->ahead = ra->ahead;
    st->direct = ra->direct;
    (void)pthread_mutex_unlock(&ra->mu);
}

/* ------------------------------------------------------------- file reader */

struct fq_filereader {
    fq_sample_reader sr;
    const char *const *paths;
    int64_t n;
    int delay_us;
    fq_spans *spans; /* NULL: local files; else remote objects (fq_filereader_set_spans) */
};

static void fr_describe(void *ctx, int64_t idx, char *out, size_t len)
{
    fq_filereader *r = ctx;
    snprintf(out, len, "%s '%s'", r->spans ? "object" : "file", idx >= 0 && idx < r->n ? r->paths[idx] : "?");
}

static int fr_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                   uint8_t *extra, uint64_t *nread, fq_err *err)
{
    fq_filereader *r = ctx;
    (void)extra;
    *nread = 0;
    if (idx < 0 || idx >= r->n)
        return fq_set_err(err, FQ_E_INVALID, "sample %lld out of range", (long long)idx);
    if (r->spans) {
        const uint8_t *p;
        uint64_t got;
        int rc = fq_spans_get(r->spans, buf, idx, (int32_t)idx, 0, FQ_SPAN_WHOLE, &p, &got, err);
        if (rc != FQ_OK)
            return rc;
        if (got == 0)
            return fq_set_err(err, FQ_E_EMPTY, "empty object (0 bytes)");
        *nread = got;
        *data = p;
        *len = (size_t)got;
        return FQ_OK;
    }
    if (r->delay_us > 0) {
        struct timespec ts = {r->delay_us / 1000000, (long)(r->delay_us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    int fd;
    uint64_t fsize;
    int orc = fq_open_regular(r->paths[idx], NULL, &fd, &fsize, err);
    if (orc != FQ_OK)
        return orc;
    size_t want = (size_t)fsize;
    if (want == 0) {
        (void)close(fd);
        return fq_set_err(err, FQ_E_EMPTY, "empty file (0 bytes)");
    }
    if (want > *cap) {
        size_t nc = want + want / 4 + 4096;
        uint8_t *nb = realloc(*buf, nc);
        if (!nb) {
            (void)close(fd);
            return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes to read the file", nc);
        }
        *buf = nb;
        *cap = nc;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t k = pread(fd, *buf + got, want - got, (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            (void)close(fd);
            return fq_set_err(err, FQ_E_IO, "read failed after %zu of %zu bytes (errno %d)", got, want, e);
        }
        if (k == 0)
            break; /* the file shrank: the decoder reports the truncation */
        got += (size_t)k;
    }
    if (close(fd) != 0)
        return fq_set_err(err, FQ_E_IO, "close failed (errno %d)", errno);
    if (got == 0)
        return fq_set_err(err, FQ_E_EMPTY, "empty file (0 bytes read)");
    *nread = got;
    *data = *buf;
    *len = got;
    return FQ_OK;
}

int fq_filereader_create(const char *const *paths, int64_t n, int delay_us, fq_filereader **out,
                         const fq_sample_reader **reader, fq_err *err)
{
    *out = NULL;
    if (!paths || n < 1 || delay_us < 0)
        return fq_set_err(err, FQ_E_INVALID, "file reader: bad arguments");
    fq_filereader *r = calloc(1, sizeof *r);
    if (!r)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    r->paths = paths;
    r->n = n;
    r->delay_us = delay_us;
    r->sr.read = fr_read;
    r->sr.describe = fr_describe;
    r->sr.reader = r;
    *out = r;
    *reader = &r->sr;
    return FQ_OK;
}

void fq_filereader_set_spans(fq_filereader *r, fq_spans *spans)
{
    r->spans = spans;
}

void fq_filereader_free(fq_filereader *r)
{
    free(r);
}
