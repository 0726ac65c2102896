/* fq_tfr_stream.c - see fq_tfr_stream.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_tfr_stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records/internal/fq_tfr_frame.h"

static int count_one(void *ctx, uint64_t pos, uint64_t len, fq_err *err)
{
    (void)pos, (void)len, (void)err;
    ++*(int64_t *)ctx;
    return FQ_OK;
}

int fq_tfr_count(const char *path, const uint8_t *mem, size_t mem_len, int gz, int64_t *n, fq_err *tail,
                 fq_err *err)
{
    *n = 0;
    return fq_tfr_walk(path, mem, mem_len, gz, count_one, n, tail, err);
}

/* ------------------------------------------------------------------ reader */

typedef struct held {
    int64_t idx; /* -1: empty slot */
    uint8_t *buf;
    size_t cap;
    uint64_t len; /* data length (buf holds len + 4 bytes: data and data CRC) */
} held;

typedef struct cursor {
    fq_tfr_src src;
    int open;
    int dead;     /* an error stopped it: every later read of its shard walks from the start */
    uint64_t pos; /* offset of the next record's header */
    int64_t next; /* its record number */
} cursor;

struct fq_tfs {
    fq_tfs_config c;
    fq_sample_reader sr;
    int64_t n;
    int64_t *base; /* n_shards + 1 */
    cursor *cur;
    uint8_t *need, *taken; /* bitmaps over samples */
    held *tab;
    size_t tab_mask;
    int64_t held_n;
    fq_tfs_stats st;
    pthread_mutex_t mu;
};

static int bit(const uint8_t *m, int64_t i)
{
    return (m[i >> 3] >> (i & 7)) & 1;
}

static void set_bit(uint8_t *m, int64_t i)
{
    m[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static size_t slot_of(const fq_tfs *t, int64_t idx)
{
    uint64_t h = (uint64_t)idx * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & t->tab_mask;
}

static held *tab_find(fq_tfs *t, int64_t idx)
{
    for (size_t i = slot_of(t, idx);; i = (i + 1) & t->tab_mask) {
        if (t->tab[i].idx == idx)
            return &t->tab[i];
        if (t->tab[i].idx < 0)
            return NULL;
    }
}

/* Remove entry h (linear probing, backward-shift deletion); its buffer must
 * have been taken already. */
static void tab_remove(fq_tfs *t, held *h)
{
    size_t i = (size_t)(h - t->tab);
    t->tab[i].idx = -1;
    t->tab[i].buf = NULL;
    t->tab[i].cap = 0;
    for (size_t j = (i + 1) & t->tab_mask; t->tab[j].idx >= 0; j = (j + 1) & t->tab_mask) {
        size_t home = slot_of(t, t->tab[j].idx);
        /* move j into the hole i if its home is not in (i, j] cyclically */
        if (((j - home) & t->tab_mask) >= ((j - i) & t->tab_mask)) {
            t->tab[i] = t->tab[j];
            t->tab[j].idx = -1;
            t->tab[j].buf = NULL;
            t->tab[j].cap = 0;
            i = j;
        }
    }
    t->held_n--;
}

static held *tab_insert(fq_tfs *t, int64_t idx)
{
    size_t i = slot_of(t, idx);
    while (t->tab[i].idx >= 0)
        i = (i + 1) & t->tab_mask;
    t->tab[i].idx = idx;
    t->held_n++;
    if (t->held_n > t->st.max_held)
        t->st.max_held = t->held_n;
    return &t->tab[i];
}

static void tab_clear(fq_tfs *t)
{
    for (size_t i = 0; i <= t->tab_mask; i++) {
        free(t->tab[i].buf);
        t->tab[i].buf = NULL;
        t->tab[i].cap = 0;
        t->tab[i].idx = -1;
    }
    t->held_n = 0;
}

static void cursors_reset(fq_tfs *t)
{
    for (int s = 0; s < t->c.n_shards; s++) {
        fq_err e;
        if (t->cur[s].open)
            (void)fq_tfr_src_close(&t->cur[s].src, &e); /* read-only fd: nothing to lose */
        memset(&t->cur[s], 0, sizeof t->cur[s]);
        t->cur[s].src.fd = -1;
    }
}

static int shard_of(const fq_tfs *t, int64_t idx)
{
    int lo = 0, hi = t->c.n_shards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->base[mid] <= idx)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int tfs_set_order(void *ctx, const int64_t *order, int64_t n_items, fq_err *err)
{
    fq_tfs *t = ctx;
    for (int64_t i = 0; i < n_items; i++)
        if (order[i] < 0 || order[i] >= t->n)
            return fq_set_err(err, FQ_E_INVALID, "order[%lld] = %lld is not a record", (long long)i,
                              (long long)order[i]);
    if (pthread_mutex_lock(&t->mu) != 0)
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_lock failed");
    size_t nb = (size_t)(t->n + 7) / 8;
    memset(t->need, 0, nb);
    memset(t->taken, 0, nb);
    for (int64_t i = 0; i < n_items; i++)
        set_bit(t->need, order[i]);
    tab_clear(t);
    cursors_reset(t);
    (void)pthread_mutex_unlock(&t->mu);
    return FQ_OK;
}

static void tfs_describe(void *ctx, int64_t idx, char *out, size_t len)
{
    const fq_tfs *t = ctx;
    if (idx < 0 || idx >= t->n) {
        snprintf(out, len, "record ?");
        return;
    }
    int s = shard_of(t, idx);
    snprintf(out, len, "shard '%s', record %lld", t->c.paths[s], (long long)(idx - t->base[s]));
}

/* Under t->mu: advance shard s's cursor to record r, holding the needed
 * records it passes.  1: record r's data is in *buf (*dlen); 0: not reachable
 * this way (hold table full, cursor past it or dead); <0 never (errors: rc). */
static int cursor_take(fq_tfs *t, int s, int64_t r, uint8_t **buf, size_t *cap, uint64_t *dlen, uint64_t *nread,
                       int *rc, fq_err *err)
{
    cursor *c = &t->cur[s];
    *rc = FQ_OK;
    if (c->dead || c->next > r)
        return 0;
    if (!c->open) {
        int o = fq_tfr_src_open(&c->src, t->c.paths[s], t->c.mem ? t->c.mem[s] : NULL, t->c.mem_len ? t->c.mem_len[s] : 0,
                         t->c.gz, err);
        if (o != FQ_OK) {
            c->dead = 1;
            *rc = o;
            return 0;
        }
        c->open = 1;
    }
    while (c->next <= r) {
        int64_t g = t->base[s] + c->next;
        int want = c->next == r;
        int keep = !want && bit(t->need, g) && !bit(t->taken, g);
        if (keep && t->held_n >= t->c.hold_cap)
            return 0; /* bounded: the caller reads r by random access */
        uint64_t len;
        int framing;
        int h = fq_tfr_src_header(&c->src, c->pos, &len, &framing, err);
        if (h == FQ_OK && (want || keep)) {
            if (want) {
                h = fq_tfr_src_data(&c->src, c->pos, len, buf, cap, nread, err);
            } else {
                held *e = tab_insert(t, g);
                h = fq_tfr_src_data(&c->src, c->pos, len, &e->buf, &e->cap, nread, err);
                e->len = len;
                if (h != FQ_OK) { /* not kept: its own read reports the error */
                    free(e->buf);
                    e->buf = NULL;
                    e->cap = 0;
                    tab_remove(t, e);
                }
            }
        }
        if (h != FQ_OK) {
            c->dead = 1;
            if (want) {
                *rc = h;
                return 0;
            }
            fq_clear_err(err);
            return 0;
        }
        c->pos += 12 + len + 4;
        c->next++;
        if (want) {
            *dlen = len;
            return 1;
        }
    }
    return 0;
}

/* Record r of shard s by walking the framing from the shard's start. */
static int random_read(fq_tfs *t, int s, int64_t r, uint8_t **buf, size_t *cap, uint64_t *dlen, uint64_t *nread,
                       fq_err *err)
{
    fq_tfr_src src;
    int rc = fq_tfr_src_open(&src, t->c.paths[s], t->c.mem ? t->c.mem[s] : NULL, t->c.mem_len ? t->c.mem_len[s] : 0,
                      t->c.gz, err);
    if (rc != FQ_OK)
        return rc;
    uint64_t pos = 0, len = 0;
    for (int64_t i = 0; i <= r; i++) {
        int framing;
        rc = fq_tfr_src_header(&src, pos, &len, &framing, err);
        if (rc != FQ_OK)
            break;
        *nread += 12;
        if (i < r)
            pos += 12 + len + 4;
    }
    if (rc == FQ_OK)
        rc = fq_tfr_src_data(&src, pos, len, buf, cap, nread, err);
    fq_err ce;
    if (fq_tfr_src_close(&src, &ce) != FQ_OK && rc == FQ_OK) {
        *err = ce;
        rc = ce.code;
    }
    *dlen = len;
    return rc;
}

static int tfs_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                    uint8_t *extra, uint64_t *nread, fq_err *err)
{
    fq_tfs *t = ctx;
    *nread = 0;
    if (idx < 0 || idx >= t->n)
        return fq_set_err(err, FQ_E_INVALID, "record index %lld out of range", (long long)idx);
    int s = shard_of(t, idx);
    int64_t r = idx - t->base[s];
    if (t->c.tail_msg[s][0] && r == t->c.count[s] - 1)
        return fq_set_err(err, FQ_E_IO, "%s", t->c.tail_msg[s]);
    uint64_t dlen = 0;
    int got = 0, rc = FQ_OK;
    if (pthread_mutex_lock(&t->mu) != 0)
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_lock failed");
    if (bit(t->need, idx) && !bit(t->taken, idx)) {
        held *h = tab_find(t, idx);
        if (h) {
            free(*buf); /* the caller's buffer is replaced by the held one (no copy) */
            *buf = h->buf;
            *cap = h->cap;
            dlen = h->len;
            h->buf = NULL;
            tab_remove(t, h);
            got = 1;
        } else {
            got = cursor_take(t, s, r, buf, cap, &dlen, nread, &rc, err);
        }
        if (got)
            set_bit(t->taken, idx);
        if (got)
            t->st.streamed++;
    }
    if (!got && rc == FQ_OK)
        t->st.random++;
    (void)pthread_mutex_unlock(&t->mu);
    if (rc != FQ_OK)
        return rc;
    if (!got) {
        rc = random_read(t, s, r, buf, cap, &dlen, nread, err);
        if (rc != FQ_OK)
            return rc;
    }
    const uint8_t *rec = *buf;
    if (!fq_tfr_data_crc_ok(rec, dlen))
        return fq_set_err(err, FQ_E_IO, "data CRC mismatch (corrupt record)");
    return fq_tfr_parse_sample(rec, (size_t)dlen, t->c.feats, t->c.n_feats, t->c.image, t->c.extra_offset, extra,
                               data, len, err);
}

/* The reader's own arrays and the reader itself (its mutex is the caller's business). */
static void tfs_free_arrays(fq_tfs *t)
{
    free(t->tab);
    free(t->need);
    free(t->taken);
    free(t->base);
    free(t->cur);
    free(t);
}

int fq_tfs_create(const fq_tfs_config *cfg, fq_tfs **out, const fq_sample_reader **reader, fq_err *err)
{
    *out = NULL;
    *reader = NULL;
    if (cfg->n_shards < 1 || !cfg->paths || !cfg->tail_msg || !cfg->count || cfg->hold_cap < 1)
        return fq_set_err(err, FQ_E_INVALID, "TFRecord stream reader without shards");
    if (cfg->gz != 0 && cfg->gz != 15 && cfg->gz != 31)
        return fq_set_err(err, FQ_E_INVALID, "bad compression (zlib window bits %d)", cfg->gz);
    if (fq_tfr_check_features(cfg->feats, cfg->n_feats, cfg->image, cfg->extra_offset, err) != FQ_OK)
        return err->code;
    fq_tfs *t = calloc(1, sizeof *t);
    if (!t)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    t->c = *cfg;
    t->base = calloc((size_t)cfg->n_shards + 1, sizeof *t->base);
    t->cur = calloc((size_t)cfg->n_shards, sizeof *t->cur);
    if (!t->base || !t->cur) {
        tfs_free_arrays(t);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    for (int s = 0; s < cfg->n_shards; s++) {
        if (cfg->count[s] < 0 || t->base[s] > INT64_MAX / 2) {
            tfs_free_arrays(t);
            return fq_set_err(err, FQ_E_INVALID, "bad record count for shard %d", s);
        }
        t->base[s + 1] = t->base[s] + cfg->count[s];
        t->cur[s].src.fd = -1;
    }
    t->n = t->base[cfg->n_shards];
    size_t tab_n = 16;
    while ((int64_t)tab_n < 2 * cfg->hold_cap + 2)
        tab_n *= 2;
    t->tab_mask = tab_n - 1;
    t->tab = calloc(tab_n, sizeof *t->tab);
    t->need = calloc((size_t)(t->n + 7) / 8 + 1, 1);
    t->taken = calloc((size_t)(t->n + 7) / 8 + 1, 1);
    int mu = pthread_mutex_init(&t->mu, NULL);
    if (!t->tab || !t->need || !t->taken || mu != 0) {
        if (mu == 0)
            (void)pthread_mutex_destroy(&t->mu);
        tfs_free_arrays(t);
        return fq_set_err(err, mu ? FQ_E_SYS : FQ_E_NOMEM, "cannot create the TFRecord stream reader");
    }
    for (size_t i = 0; i < tab_n; i++)
        t->tab[i].idx = -1;
    fq_tfr_extra_sizes(cfg->feats, cfg->n_feats, cfg->image, t->sr.extra_sizes, &t->sr.n_extra);
    t->sr.read = tfs_read;
    t->sr.describe = tfs_describe;
    t->sr.set_order = tfs_set_order;
    t->sr.reader = t;
    *out = t;
    *reader = &t->sr;
    return FQ_OK;
}

void fq_tfs_free(fq_tfs *t)
{
    if (!t)
        return;
    tab_clear(t);
    cursors_reset(t);
    (void)pthread_mutex_destroy(&t->mu);
    tfs_free_arrays(t);
}

void fq_tfs_get_stats(fq_tfs *t, fq_tfs_stats *st)
{
    memset(st, 0, sizeof *st);
    if (pthread_mutex_lock(&t->mu) != 0)
        return;
    *st = t->st;
    (void)pthread_mutex_unlock(&t->mu);
}
