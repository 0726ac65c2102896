/* fq_tfrecord.c - see fq_tfrecord.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_tfrecord.h"
#include "core/fq_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "records/internal/fq_tfr_frame.h"

/* ------------------------------------------------------------------ index */

typedef struct scan_acc {
    const char *path;
    uint64_t *offs, *lens;
    int64_t n, cap;
} scan_acc;

static int scan_one(void *ctx, uint64_t pos, uint64_t len, fq_err *err)
{
    scan_acc *a = ctx;
    if (a->n == a->cap) {
        int64_t nc = a->cap ? a->cap * 2 : 1024;
        uint64_t *no = realloc(a->offs, (size_t)nc * sizeof *no);
        if (no)
            a->offs = no;
        uint64_t *nl = no ? realloc(a->lens, (size_t)nc * sizeof *nl) : NULL;
        if (nl)
            a->lens = nl;
        if (!no || !nl)
            return fq_set_err(err, FQ_E_NOMEM, "out of memory indexing '%s'", a->path);
        a->cap = nc;
    }
    a->offs[a->n] = pos;
    a->lens[a->n] = len;
    a->n++;
    return FQ_OK;
}

int fq_tfr_scan(const char *path, const uint8_t *mem, size_t mem_len, uint64_t **offsets, uint64_t **lengths,
                int64_t *n, fq_err *tail, fq_err *err)
{
    *offsets = NULL;
    *lengths = NULL;
    *n = 0;
    scan_acc a = {path, NULL, NULL, 0, 0};
    int rc = fq_tfr_walk(path, mem, mem_len, 0, scan_one, &a, tail, err);
    if (rc != FQ_OK) {
        free(a.offs);
        free(a.lens);
        return rc;
    }
    *offsets = a.offs;
    *lengths = a.lens;
    *n = a.n;
    return FQ_OK;
}

/* ------------------------------------------------------------------- reader */

struct fq_tfr {
    fq_tfr_config c;
    fq_sample_reader sr;
};

int fq_tfr_create(const fq_tfr_config *cfg, fq_tfr **out, const fq_sample_reader **reader, fq_err *err)
{
    *out = NULL;
    *reader = NULL;
    if (cfg->n_shards < 1 || !cfg->paths || !cfg->tail_msg)
        return fq_set_err(err, FQ_E_INVALID, "TFRecord reader without shards");
    if (cfg->n < 0 || (cfg->n > 0 && (!cfg->shard || !cfg->offset || !cfg->length || !cfg->number)))
        return fq_set_err(err, FQ_E_INVALID, "TFRecord reader without an index");
    if (fq_tfr_check_features(cfg->feats, cfg->n_feats, cfg->image, cfg->extra_offset, err) != FQ_OK)
        return err->code;
    for (int64_t i = 0; i < cfg->n; i++)
        if (cfg->shard[i] < 0 || cfg->shard[i] >= cfg->n_shards)
            return fq_set_err(err, FQ_E_INVALID, "index entry %lld names shard %d", (long long)i, cfg->shard[i]);
    fq_tfr *r = calloc(1, sizeof *r);
    if (!r)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    r->c = *cfg;
    fq_tfr_extra_sizes(cfg->feats, cfg->n_feats, cfg->image, r->sr.extra_sizes, &r->sr.n_extra);
    r->sr.read = fq_tfr_read;
    r->sr.describe = fq_tfr_describe;
    r->sr.reader = r;
    *out = r;
    *reader = &r->sr;
    return FQ_OK;
}

void fq_tfr_free(fq_tfr *r)
{
    free(r);
}

void fq_tfr_describe(void *ctx, int64_t idx, char *out, size_t len)
{
    const fq_tfr *r = ctx;
    if (idx < 0 || idx >= r->c.n) {
        snprintf(out, len, "record ?");
        return;
    }
    snprintf(out, len, "shard '%s', record %lld", r->c.paths[r->c.shard[idx]], (long long)r->c.number[idx]);
}

int fq_tfr_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                uint8_t *extra, uint64_t *nread, fq_err *err)
{
    const fq_tfr *r = ctx;
    *nread = 0;
    if (idx < 0 || idx >= r->c.n)
        return fq_set_err(err, FQ_E_INVALID, "record index %lld out of range", (long long)idx);
    int s = r->c.shard[idx];
    const char *path = r->c.paths[s];
    uint64_t off = r->c.offset[idx], dlen = r->c.length[idx];
    if (dlen == FQ_TFR_BROKEN)
        return fq_set_err(err, FQ_E_IO, "%s", r->c.tail_msg[s]);
    if (dlen > (uint64_t)SIZE_MAX - 64)
        return fq_set_err(err, FQ_E_IO, "record length %llu too large", (unsigned long long)dlen);
    size_t need = (size_t)dlen + 16;
    const uint8_t *rec;
    if (r->c.spans) {
        uint64_t got;
        int rc = fq_spans_get(r->c.spans, buf, idx, s, off, need, &rec, &got, err);
        if (rc != FQ_OK)
            return rc;
        *nread = got;
    } else if (r->c.mem && r->c.mem[s]) {
        if (off > r->c.mem_len[s] || r->c.mem_len[s] - off < need)
            return fq_set_err(err, FQ_E_IO, "truncated shard: record at offset %llu needs %zu bytes",
                              (unsigned long long)off, need);
        rec = r->c.mem[s] + off;
    } else {
        if (need > *cap) {
            size_t nc = need + need / 4 + 4096;
            uint8_t *nb = realloc(*buf, nc);
            if (!nb)
                return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes for a record", nc);
            *buf = nb;
            *cap = nc;
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return fq_io_errno(err, errno, "cannot open", path);
        size_t got;
        int rr = fq_pread_full(fd, *buf, need, off, &got);
        int e = errno;
        if (close(fd) != 0 && rr == 0)
            return fq_io_errno(err, errno, "close failed on", path);
        if (rr != 0)
            return fq_io_errno(err, e, "read failed in", path);
        *nread = got;
        if (got < need)
            return fq_set_err(err, FQ_E_IO, "truncated shard: record at offset %llu needs %zu bytes, only %zu there",
                              (unsigned long long)off, need, got);
        rec = *buf;
    }
    int rc = fq_tfr_check_frame(rec, off, dlen, err);
    if (rc != FQ_OK)
        return rc;
    return fq_tfr_parse_sample(rec + 12, (size_t)dlen, r->c.feats, r->c.n_feats, r->c.image, r->c.extra_offset,
                               extra, data, len, err);
}
