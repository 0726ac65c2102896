/* fq_tfr_stream.c - see fq_tfr_stream.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_tfr_stream.h"
#include "core/fq_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "records/fq_crc32c.h"


/* One shard opened for framing walks: a file (fd, size), a buffer, or a
 * compressed file inflated incrementally (gz: zlib window bits, 31 for GZIP,
 * 15 for ZLIB; only forward reads: pos >= upos). */
#define GZ_IN 65536
typedef struct shard_src {
    const char *path;
    const uint8_t *mem;
    int fd;
    uint64_t size; /* UINT64_MAX for a compressed shard (unknown) */
    int gz;
    z_stream zs;
    int zinit, in_eof, ended;
    uint64_t in_off, upos;
    uint8_t *in;
    char zerr[96]; /* "" or why the compressed stream stopped early */
} shard_src;

static int src_open(shard_src *s, const char *path, const uint8_t *mem, size_t mem_len, int gz, fq_err *err)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->mem = mem;
    s->fd = -1;
    s->size = mem_len;
    if (mem)
        return FQ_OK;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0)
        return fq_io_errno(err, errno, "cannot open TFRecord shard", path);
    struct stat st;
    if (fstat(s->fd, &st) != 0) {
        int e = errno;
        (void)close(s->fd);
        s->fd = -1;
        return fq_io_errno(err, e, "cannot stat TFRecord shard", path);
    }
    s->size = (uint64_t)st.st_size;
#ifdef POSIX_FADV_SEQUENTIAL
    (void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* advisory only */
#endif
    if (gz) {
        s->gz = gz;
        s->size = UINT64_MAX;
        s->in = malloc(GZ_IN);
        if (!s->in || inflateInit2(&s->zs, gz) != Z_OK) {
            free(s->in);
            s->in = NULL;
            (void)close(s->fd);
            s->fd = -1;
            return fq_set_err(err, FQ_E_NOMEM, "cannot start inflating '%s'", path);
        }
        s->zinit = 1;
    }
    return FQ_OK;
}

static int src_close(shard_src *s, fq_err *err)
{
    int rc = FQ_OK;
    if (s->zinit)
        (void)inflateEnd(&s->zs);
    s->zinit = 0;
    free(s->in);
    s->in = NULL;
    if (s->fd >= 0 && close(s->fd) != 0)
        rc = fq_io_errno(err, errno, "close failed on", s->path);
    s->fd = -1;
    return rc;
}

/* When the compressed input is used up (and the file is not at its end), read the
 * next GZ_IN bytes of it.  Errors: I/O only. */
static int gz_refill(shard_src *s, fq_err *err)
{
    if (s->zs.avail_in != 0 || s->in_eof)
        return FQ_OK;
    ssize_t r;
    do {
        r = pread(s->fd, s->in, GZ_IN, (off_t)s->in_off);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return fq_io_errno(err, errno, "read failed in TFRecord shard", s->path);
    s->in_off += (uint64_t)r;
    s->in_eof = r == 0;
    s->zs.next_in = s->in;
    s->zs.avail_in = (uInt)r;
    return FQ_OK;
}

/* Inflate the next n bytes into out (NULL: discard).  *got < n at the end of
 * the data: s->ended for a clean end, s->zerr set for a truncated or corrupt
 * compressed stream.  Errors: I/O only. */
static int gz_next(shard_src *s, uint8_t *out, size_t n, size_t *got, fq_err *err)
{
    uint8_t scratch[16384];
    size_t done = 0;
    while (done < n && !s->ended && !s->zerr[0]) {
        if (gz_refill(s, err) != FQ_OK)
            return err->code;
        if (s->zs.avail_in == 0 && s->in_eof) {
            snprintf(s->zerr, sizeof s->zerr, "truncated %s stream", s->gz == 31 ? "GZIP" : "ZLIB");
            break;
        }
        size_t want = n - done;
        uint8_t *dst = out ? out + done : scratch;
        if (!out && want > sizeof scratch)
            want = sizeof scratch;
        if (want > (1u << 30))
            want = 1u << 30;
        s->zs.next_out = dst;
        s->zs.avail_out = (uInt)want;
        int zr = inflate(&s->zs, Z_NO_FLUSH);
        size_t made = want - s->zs.avail_out;
        done += made;
        s->upos += made;
        if (zr == Z_STREAM_END) {
            if (s->gz != 31) {
                s->ended = 1;
                break;
            }
            /* GZIP: another member may follow (as TF's reader accepts) */
            if (gz_refill(s, err) != FQ_OK)
                return err->code;
            if (s->zs.avail_in == 0) {
                s->ended = 1;
                break;
            }
            if (inflateReset(&s->zs) != Z_OK) {
                snprintf(s->zerr, sizeof s->zerr, "corrupt GZIP stream (reset failed)");
                break;
            }
        } else if (zr != Z_OK && !(zr == Z_BUF_ERROR && s->zs.avail_in == 0)) {
            snprintf(s->zerr, sizeof s->zerr, "corrupt %s stream: %s", s->gz == 31 ? "GZIP" : "ZLIB",
                     s->zs.msg ? s->zs.msg : "inflate failed");
            break;
        }
    }
    *got = done;
    return FQ_OK;
}

/* n bytes at uncompressed offset pos (>= upos) of a compressed shard. */
static int gz_at(shard_src *s, uint64_t pos, uint8_t *out, size_t n, size_t *got, fq_err *err)
{
    *got = 0;
    if (pos < s->upos)
        return fq_set_err(err, FQ_E_INVALID, "compressed shard '%s' read backwards", s->path);
    while (s->upos < pos) {
        uint64_t skip = pos - s->upos;
        size_t g;
        int rc = gz_next(s, NULL, skip > (1u << 30) ? (1u << 30) : (size_t)skip, &g, err);
        if (rc != FQ_OK)
            return rc;
        if (g == 0)
            return FQ_OK;
    }
    return gz_next(s, out, n, got, err);
}

/* The header of the record at pos: FQ_OK with *len (length CRC verified and
 * the record within the shard); FQ_E_IO for a framing error (message names the
 * offset); an I/O error otherwise.  *framing: the error is a framing error. */
static int src_header(shard_src *s, uint64_t pos, uint64_t *len, int *framing, fq_err *err)
{
    uint8_t h[12];
    *framing = 1;
    if (s->gz) {
        size_t got;
        *framing = 0;
        int rc = gz_at(s, pos, h, 12, &got, err);
        if (rc != FQ_OK)
            return rc;
        *framing = 1;
        if (got < 12) {
            if (s->zerr[0])
                return fq_set_err(err, FQ_E_IO, "%s (at uncompressed offset %llu)", s->zerr, (unsigned long long)pos);
            return fq_set_err(err, FQ_E_IO, "truncated shard: a %zu-byte partial record header at offset %llu", got,
                              (unsigned long long)pos);
        }
    } else if (pos > s->size || s->size - pos < 12) {
        return fq_set_err(err, FQ_E_IO, "truncated shard: a %llu-byte partial record header at offset %llu",
                          (unsigned long long)(pos > s->size ? 0 : s->size - pos), (unsigned long long)pos);
    } else if (s->mem) {
        memcpy(h, s->mem + pos, 12);
    } else {
        size_t got;
        if (fq_pread_full(s->fd, h, 12, pos, &got) != 0) {
            *framing = 0;
            return fq_io_errno(err, errno, "read failed in TFRecord shard", s->path);
        }
        if (got < 12)
            return fq_set_err(err, FQ_E_IO, "truncated shard: the shard shrank (offset %llu)",
                              (unsigned long long)pos);
    }
    uint64_t l = fq_le64(h);
    if (fq_crc32c_mask(fq_crc32c(h, 8)) != fq_le32(h + 8))
        return fq_set_err(err, FQ_E_IO, "length CRC mismatch at offset %llu (corrupt length field)",
                          (unsigned long long)pos);
    if (l > s->size - pos - 12 || s->size - pos - 12 - l < 4)
        return fq_set_err(err, FQ_E_IO,
                          "truncated shard: the record at offset %llu has %llu data bytes but only %llu bytes follow "
                          "its header (need %llu with the data CRC)",
                          (unsigned long long)pos, (unsigned long long)l, (unsigned long long)(s->size - pos - 12),
                          (unsigned long long)l + 4);
    if (l > (uint64_t)SIZE_MAX - 64)
        return fq_set_err(err, FQ_E_IO, "record length %llu too large", (unsigned long long)l);
    *len = l;
    return FQ_OK;
}

/* Compressed shard: skip the record's data + CRC (count walk). */
static int gz_skip_data(shard_src *s, uint64_t pos, uint64_t len, fq_err *tail, fq_err *err)
{
    uint64_t end = pos + 12 + len + 4;
    while (s->upos < end) {
        uint64_t left = end - s->upos;
        size_t g;
        int rc = gz_next(s, NULL, left > (1u << 30) ? (1u << 30) : (size_t)left, &g, err);
        if (rc != FQ_OK)
            return rc;
        if (g == 0) {
            if (s->zerr[0])
                fq_set_err(tail, FQ_E_IO, "%s (inside the record at uncompressed offset %llu)", s->zerr,
                           (unsigned long long)pos);
            else
                fq_set_err(tail, FQ_E_IO,
                           "truncated shard: the record at offset %llu has %llu data bytes but the shard ends first",
                           (unsigned long long)pos, (unsigned long long)len);
            return FQ_E_IO;
        }
    }
    return FQ_OK;
}

/* Data + data CRC (len + 4 bytes) of the record whose header is at pos into
 * *buf (grown as needed). */
static int src_data(shard_src *s, uint64_t pos, uint64_t len, uint8_t **buf, size_t *cap, uint64_t *nread,
                    fq_err *err)
{
    size_t need = (size_t)len + 4;
    if (need > *cap) {
        size_t nc = need + need / 4 + 4096;
        uint8_t *nb = realloc(*buf, nc);
        if (!nb)
            return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes for a record", nc);
        *buf = nb;
        *cap = nc;
    }
    if (s->mem) {
        memcpy(*buf, s->mem + pos + 12, need);
        return FQ_OK;
    }
    size_t got;
    if (s->gz) {
        int rc = gz_at(s, pos + 12, *buf, need, &got, err);
        if (rc != FQ_OK)
            return rc;
        *nread += got + 12;
        if (got < need)
            return fq_set_err(err, FQ_E_IO, "%s in the record at uncompressed offset %llu",
                              s->zerr[0] ? s->zerr : "the shard ends", (unsigned long long)pos);
        return FQ_OK;
    }
    if (fq_pread_full(s->fd, *buf, need, pos + 12, &got) != 0)
        return fq_io_errno(err, errno, "read failed in TFRecord shard", s->path);
    *nread += got + 12;
    if (got < need)
        return fq_set_err(err, FQ_E_IO, "truncated shard: the shard shrank (record at offset %llu)",
                          (unsigned long long)pos);
    return FQ_OK;
}

int fq_tfr_count(const char *path, const uint8_t *mem, size_t mem_len, int gz, int64_t *n, fq_err *tail,
                 fq_err *err)
{
    *n = 0;
    fq_clear_err(tail);
    shard_src s;
    int rc = src_open(&s, path, mem, mem_len, gz, err);
    if (rc != FQ_OK)
        return rc;
    uint64_t pos = 0;
    int64_t cnt = 0;
    while (pos < s.size) {
        uint64_t len;
        fq_err e;
        int framing;
        fq_clear_err(&e);
        int hr = src_header(&s, pos, &len, &framing, &e);
        if (hr != FQ_OK && framing) {
            if (s.gz && s.ended && !s.zerr[0] && s.upos == pos)
                break; /* clean end of the compressed data exactly at a record boundary */
            *tail = e;
            break;
        }
        if (hr != FQ_OK) {
            *err = e;
            rc = hr;
            break;
        }
        if (s.gz && gz_skip_data(&s, pos, len, tail, err) != FQ_OK) {
            if (tail->code == FQ_OK)
                rc = err->code;
            break;
        }
        cnt++;
        pos += 12 + len + 4;
    }
    fq_err ce;
    if (src_close(&s, &ce) != FQ_OK && rc == FQ_OK) {
        *err = ce;
        rc = ce.code;
    }
    *n = cnt;
    return rc;
}

/* ------------------------------------------------------------------ reader */

typedef struct held {
    int64_t idx; /* -1: empty slot */
    uint8_t *buf;
    size_t cap;
    uint64_t len; /* data length (buf holds len + 4 bytes: data and data CRC) */
} held;

typedef struct cursor {
    shard_src src;
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
            (void)src_close(&t->cur[s].src, &e); /* read-only fd: nothing to lose */
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
        int o = src_open(&c->src, t->c.paths[s], t->c.mem ? t->c.mem[s] : NULL, t->c.mem_len ? t->c.mem_len[s] : 0,
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
        int h = src_header(&c->src, c->pos, &len, &framing, err);
        if (h == FQ_OK && (want || keep)) {
            if (want) {
                h = src_data(&c->src, c->pos, len, buf, cap, nread, err);
            } else {
                held *e = tab_insert(t, g);
                h = src_data(&c->src, c->pos, len, &e->buf, &e->cap, nread, err);
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
    shard_src src;
    int rc = src_open(&src, t->c.paths[s], t->c.mem ? t->c.mem[s] : NULL, t->c.mem_len ? t->c.mem_len[s] : 0,
                      t->c.gz, err);
    if (rc != FQ_OK)
        return rc;
    uint64_t pos = 0, len = 0;
    for (int64_t i = 0; i <= r; i++) {
        int framing;
        rc = src_header(&src, pos, &len, &framing, err);
        if (rc != FQ_OK)
            break;
        *nread += 12;
        if (i < r)
            pos += 12 + len + 4;
    }
    if (rc == FQ_OK)
        rc = src_data(&src, pos, len, buf, cap, nread, err);
    fq_err ce;
    if (src_close(&src, &ce) != FQ_OK && rc == FQ_OK) {
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
    if (fq_crc32c_mask(fq_crc32c(rec, (size_t)dlen)) != fq_le32(rec + dlen))
        return fq_set_err(err, FQ_E_IO, "data CRC mismatch (corrupt record)");
    fq_tfr_value vals[FQ_TFR_MAX_FEATURES];
    void *dst[FQ_TFR_MAX_FEATURES];
    for (int k = 0; k < t->c.n_feats; k++)
        dst[k] = k == t->c.image ? NULL : extra + t->c.extra_offset[k];
    rc = fq_tfr_parse_example(rec, (size_t)dlen, t->c.feats, t->c.n_feats, vals, dst, err);
    if (rc != FQ_OK)
        return rc;
    *data = vals[t->c.image].ptr;
    *len = vals[t->c.image].len;
    return FQ_OK;
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
    if (cfg->n_extra < 0 || cfg->n_extra > FQ_IMGTASK_MAX_EXTRA)
        return fq_set_err(err, FQ_E_INVALID, "bad TFRecord extra outputs");
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
    t->sr.n_extra = cfg->n_extra;
    memcpy(t->sr.extra_sizes, cfg->extra_sizes, sizeof t->sr.extra_sizes);
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
