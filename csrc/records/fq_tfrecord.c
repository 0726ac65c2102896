/* fq_tfrecord.c - see fq_tfrecord.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_tfrecord.h"
#include "core/fq_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "records/fq_crc32c.h"

/* ---------------------------------------------------------------- protobuf */

typedef struct pb {
    const uint8_t *p, *end;
} pb;

/* 0 on success; -1 on a truncated or over-long varint. */
static int pb_varint(pb *b, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (b->p >= b->end)
            return -1;
        uint8_t c = *b->p++;
        if (shift == 63 && c > 1)
            return -1;
        r |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* One field: tag and, for wire type 2, its payload; for the others the value
 * is skipped (varint value returned in *v).  0, or -1 on malformed input. */
static int pb_field(pb *b, uint32_t *field, int *wt, pb *payload, uint64_t *v)
{
    uint64_t tag;
    if (pb_varint(b, &tag) != 0)
        return -1;
    if ((tag >> 3) == 0 || (tag >> 3) > UINT32_C(0x1fffffff))
        return -1;
    *field = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    switch (*wt) {
    case 0:
        return pb_varint(b, v);
    case 1:
        if (b->end - b->p < 8)
            return -1;
        payload->p = b->p;
        payload->end = b->p + 8;
        b->p += 8;
        return 0;
    case 2: {
        uint64_t n;
        if (pb_varint(b, &n) != 0 || n > (uint64_t)(b->end - b->p))
            return -1;
        payload->p = b->p;
        payload->end = b->p + n;
        b->p += n;
        return 0;
    }
    case 5:
        if (b->end - b->p < 4)
            return -1;
        payload->p = b->p;
        payload->end = b->p + 4;
        b->p += 4;
        return 0;
    default: /* groups (3, 4) and reserved wire types: not in tf.train.Example */
        return -1;
    }
}

static const char *kind_name(int kind)
{
    return kind == FQ_TFR_BYTES ? "a bytes_list" : kind == FQ_TFR_FLOAT ? "a float_list"
         : kind == FQ_TFR_INT64 ? "an int64_list" : "no value list";
}

#define MALFORMED(what) fq_set_err(err, FQ_E_DECODE, "malformed tf.train.Example protobuf (%s)", what)

/* Values of one Feature message (`f`) that must be of kind `want` with
 * `count` values. */
static int parse_feature(pb f, const fq_tfr_feature *ft, fq_tfr_value *val, void *dst, fq_err *err)
{
    /* oneof: the last kind set wins; repeated occurrences of that kind after
     * the last other kind merge (their lists concatenate). */
    int kind = 0;
    const uint8_t *start = f.p;
    pb b = f;
    while (b.p < b.end) {
        const uint8_t *at = b.p;
        uint32_t field;
        int wt;
        pb pl;
        uint64_t v;
        if (pb_field(&b, &field, &wt, &pl, &v) != 0)
            return MALFORMED("bad field in a Feature");
        if (field >= 1 && field <= 3 && wt == 2 && (int)field != kind) {
            kind = (int)field;
            start = at;
        }
    }
    if (kind != ft->kind)
        return fq_set_err(err, FQ_E_DECODE, "feature '%.*s' holds %s, expected %s", (int)ft->key_len, ft->key,
                          kind_name(kind), kind_name(ft->kind));
    int64_t got = 0;
    b.p = start;
    b.end = f.end;
    while (b.p < b.end) {
        uint32_t field;
        int wt;
        pb list;
        uint64_t v;
        if (pb_field(&b, &field, &wt, &list, &v) != 0)
            return MALFORMED("bad field in a Feature");
        if ((int)field != kind || wt != 2)
            continue;
        while (list.p < list.end) {
            pb pl;
            uint32_t lf;
            int lwt;
            if (pb_field(&list, &lf, &lwt, &pl, &v) != 0)
                return MALFORMED("bad field in a value list");
            if (lf != 1)
                continue;
            if (kind == FQ_TFR_BYTES) {
                if (lwt != 2)
                    continue;
                if (got == 0) {
                    val->ptr = pl.p;
                    val->len = (size_t)(pl.end - pl.p);
                }
                got++;
            } else if (kind == FQ_TFR_FLOAT) {
                if (lwt == 5 || lwt == 2) {
                    size_t nb = (size_t)(pl.end - pl.p);
                    if (lwt == 2 && nb % 4 != 0)
                        return MALFORMED("packed float list length not a multiple of 4");
                    for (size_t o = 0; o < nb; o += 4, got++)
                        if (dst && got < ft->count)
                            memcpy((float *)dst + got, pl.p + o, 4);
                }
            } else {
                if (lwt == 0) {
                    if (dst && got < ft->count)
                        ((int64_t *)dst)[got] = (int64_t)v;
                    got++;
                } else if (lwt == 2) {
                    pb pk = pl;
                    while (pk.p < pk.end) {
                        uint64_t x;
                        if (pb_varint(&pk, &x) != 0)
                            return MALFORMED("bad varint in a packed int64 list");
                        if (dst && got < ft->count)
                            ((int64_t *)dst)[got] = (int64_t)x;
                        got++;
                    }
                }
            }
        }
    }
    if (got != ft->count)
        return fq_set_err(err, FQ_E_DECODE, "feature '%.*s' has %lld values, expected %lld", (int)ft->key_len,
                          ft->key, (long long)got, (long long)ft->count);
    return FQ_OK;
}

int fq_tfr_parse_example(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats,
                         fq_tfr_value *vals, void *const *dst, fq_err *err)
{
    if (n_feats < 0 || n_feats > FQ_TFR_MAX_FEATURES)
        return fq_set_err(err, FQ_E_INVALID, "too many features (%d)", n_feats);
    pb loc[FQ_TFR_MAX_FEATURES];
    int found[FQ_TFR_MAX_FEATURES] = {0};
    pb ex = {data, data + len};
    while (ex.p < ex.end) {
        uint32_t field;
        int wt;
        pb fs;
        uint64_t v;
        if (pb_field(&ex, &field, &wt, &fs, &v) != 0)
            return MALFORMED("bad field in Example");
        if (field != 1 || wt != 2)
            continue;
        while (fs.p < fs.end) { /* Features: map<string, Feature> feature = 1 */
            pb entry;
            if (pb_field(&fs, &field, &wt, &entry, &v) != 0)
                return MALFORMED("bad field in Features");
            if (field != 1 || wt != 2)
                continue;
            pb key = {NULL, NULL}, value = {NULL, NULL};
            int has_key = 0;
            while (entry.p < entry.end) {
                pb pl;
                if (pb_field(&entry, &field, &wt, &pl, &v) != 0)
                    return MALFORMED("bad field in a map entry");
                if (field == 1 && wt == 2) {
                    key = pl;
                    has_key = 1;
                } else if (field == 2 && wt == 2) {
                    value = pl;
                }
            }
            size_t klen = has_key ? (size_t)(key.end - key.p) : 0;
            for (int k = 0; k < n_feats; k++)
                if (feats[k].key_len == klen && (klen == 0 || memcmp(feats[k].key, key.p, klen) == 0)) {
                    loc[k] = value; /* a later entry replaces an earlier one */
                    found[k] = 1;
                }
        }
    }
    for (int k = 0; k < n_feats; k++) {
        if (!found[k])
            return fq_set_err(err, FQ_E_DECODE, "feature '%.*s' is missing", (int)feats[k].key_len, feats[k].key);
        vals[k].ptr = NULL;
        vals[k].len = 0;
        if (loc[k].p == NULL) { /* entry without a value: an empty Feature */
            loc[k].p = data;
            loc[k].end = data;
        }
        int rc = parse_feature(loc[k], &feats[k], &vals[k], dst ? dst[k] : NULL, err);
        if (rc != FQ_OK)
            return rc;
    }
    return FQ_OK;
}

int fq_tfr_check_features(const fq_tfr_feature *feats, int n_feats, int image, const size_t *extra_offset,
                          fq_err *err)
{
    if (!feats || n_feats < 1 || n_feats > FQ_TFR_MAX_FEATURES || image < 0 || image >= n_feats ||
        feats[image].kind != FQ_TFR_BYTES || feats[image].count != 1 || !extra_offset)
        return fq_set_err(err, FQ_E_INVALID, "bad TFRecord feature list");
    for (int k = 0; k < n_feats; k++)
        if (feats[k].count < 0 || (k != image && feats[k].kind == FQ_TFR_BYTES))
            return fq_set_err(err, FQ_E_INVALID, "feature %d: only the image may be a bytes feature", k);
    return FQ_OK;
}

/* ------------------------------------------------------------------ framing */


static int grow(uint64_t **a, uint64_t **b, int64_t *cap)
{
    int64_t nc = *cap ? *cap * 2 : 1024;
    uint64_t *na = realloc(*a, (size_t)nc * sizeof **a);
    if (!na)
        return -1;
    *a = na;
    uint64_t *nb = realloc(*b, (size_t)nc * sizeof **b);
    if (!nb)
        return -1;
    *b = nb;
    *cap = nc;
    return 0;
}

int fq_tfr_scan(const char *path, const uint8_t *mem, size_t mem_len, uint64_t **offsets, uint64_t **lengths,
                int64_t *n, fq_err *tail, fq_err *err)
{
    *offsets = NULL;
    *lengths = NULL;
    *n = 0;
    fq_clear_err(tail);
    int fd = -1;
    uint64_t size = mem_len;
    if (!mem) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return fq_io_errno(err, errno, "cannot open TFRecord shard", path);
        struct stat st;
        if (fstat(fd, &st) != 0) {
            int e = errno;
            (void)close(fd);
            return fq_io_errno(err, e, "cannot stat TFRecord shard", path);
        }
        if (!S_ISREG(st.st_mode)) {
            (void)close(fd);
            return fq_set_err(err, FQ_E_IO, "TFRecord shard '%s' is not a regular file", path);
        }
        size = (uint64_t)st.st_size;
#ifdef POSIX_FADV_SEQUENTIAL
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* advisory only */
#endif
    }
    uint64_t *offs = NULL, *lens = NULL;
    int64_t cnt = 0, cap = 0;
    uint64_t pos = 0;
    int rc = FQ_OK;
    while (pos < size) {
        uint8_t h[12];
        if (size - pos < 12) {
            fq_set_err(tail, FQ_E_IO, "truncated shard: a %llu-byte partial record header at offset %llu",
                       (unsigned long long)(size - pos), (unsigned long long)pos);
            break;
        }
        if (mem) {
            memcpy(h, mem + pos, 12);
        } else {
            size_t got;
            if (fq_pread_full(fd, h, 12, pos, &got) != 0) {
                rc = fq_io_errno(err, errno, "read failed in TFRecord shard", path);
                break;
            }
            if (got < 12) {
                fq_set_err(tail, FQ_E_IO, "truncated shard: the shard shrank while indexed (offset %llu)",
                           (unsigned long long)pos);
                break;
            }
        }
        uint64_t len = fq_le64(h);
        if (fq_crc32c_mask(fq_crc32c(h, 8)) != fq_le32(h + 8)) {
            fq_set_err(tail, FQ_E_IO, "length CRC mismatch at offset %llu (corrupt length field)",
                       (unsigned long long)pos);
            break;
        }
        if (len > size - pos - 12 || size - pos - 12 - len < 4) {
            fq_set_err(tail, FQ_E_IO,
                       "truncated shard: the record at offset %llu has %llu data bytes but only %llu bytes follow "
                       "its header (need %llu with the data CRC)",
                       (unsigned long long)pos, (unsigned long long)len,
                       (unsigned long long)(size - pos - 12), (unsigned long long)len + 4);
            break;
        }
        if (cnt == cap && grow(&offs, &lens, &cap) != 0) {
            rc = fq_set_err(err, FQ_E_NOMEM, "out of memory indexing '%s'", path);
            break;
        }
        offs[cnt] = pos;
        lens[cnt] = len;
        cnt++;
        pos += 12 + len + 4;
    }
    if (fd >= 0 && close(fd) != 0 && rc == FQ_OK)
        rc = fq_io_errno(err, errno, "close failed on", path);
    if (rc != FQ_OK) {
        free(offs);
        free(lens);
        return rc;
    }
    *offsets = offs;
    *lengths = lens;
    *n = cnt;
    return FQ_OK;
}

/* ------------------------------------------------------------------- reader */

struct fq_tfr {
    fq_tfr_config c;
};

int fq_tfr_create(const fq_tfr_config *cfg, fq_tfr **out, fq_err *err)
{
    *out = NULL;
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
    *out = r;
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
    if (r->c.mem && r->c.mem[s]) {
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
    if (fq_le64(rec) != dlen)
        return fq_set_err(err, FQ_E_IO, "length field %llu at offset %llu does not match the index (%llu)",
                          (unsigned long long)fq_le64(rec), (unsigned long long)off, (unsigned long long)dlen);
    if (fq_crc32c_mask(fq_crc32c(rec, 8)) != fq_le32(rec + 8))
        return fq_set_err(err, FQ_E_IO, "length CRC mismatch at offset %llu", (unsigned long long)off);
    if (fq_crc32c_mask(fq_crc32c(rec + 12, (size_t)dlen)) != fq_le32(rec + 12 + dlen))
        return fq_set_err(err, FQ_E_IO, "data CRC mismatch (corrupt record at offset %llu)", (unsigned long long)off);
    fq_tfr_value vals[FQ_TFR_MAX_FEATURES];
    void *dst[FQ_TFR_MAX_FEATURES];
    for (int k = 0; k < r->c.n_feats; k++)
        dst[k] = k == r->c.image ? NULL : extra + r->c.extra_offset[k];
    int rc = fq_tfr_parse_example(rec + 12, (size_t)dlen, r->c.feats, r->c.n_feats, vals, dst, err);
    if (rc != FQ_OK)
        return rc;
    *data = vals[r->c.image].ptr;
    *len = vals[r->c.image].len;
    return FQ_OK;
}
