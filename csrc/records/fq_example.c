/* fq_example.c - see fq_example.h. */
#include "records/fq_example.h"

#include <string.h>

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
    const int varlen = (ft->flags & FQ_TFR_VARLEN) != 0;
    if (varlen && kind == 0) { /* an empty Feature: no values (as TF's VarLenFeature) */
        if (dst) {
            int64_t zero = 0;
            memcpy(dst, &zero, sizeof zero);
        }
        return FQ_OK;
    }
    if (kind != ft->kind)
        return fq_set_err(err, FQ_E_DECODE, "feature '%.*s' holds %s, expected %s", (int)ft->key_len, ft->key,
                          kind_name(kind), kind_name(ft->kind));
    uint8_t *vdst = dst ? (uint8_t *)dst + (varlen ? 8 : 0) : NULL; /* VARLEN: the int64 n comes first */
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
                        if (vdst && got < ft->count)
                            memcpy(vdst + 4 * (size_t)got, pl.p + o, 4);
                }
            } else {
                if (lwt == 0) {
                    if (vdst && got < ft->count) {
                        int64_t x = (int64_t)v;
                        memcpy(vdst + 8 * (size_t)got, &x, 8);
                    }
                    got++;
                } else if (lwt == 2) {
                    pb pk = pl;
                    while (pk.p < pk.end) {
                        uint64_t x;
                        if (pb_varint(&pk, &x) != 0)
                            return MALFORMED("bad varint in a packed int64 list");
                        if (vdst && got < ft->count) {
                            int64_t y = (int64_t)x;
                            memcpy(vdst + 8 * (size_t)got, &y, 8);
                        }
                        got++;
                    }
                }
            }
        }
    }
    if (varlen) {
        if (got > ft->count && !(ft->flags & FQ_TFR_TRUNCATE))
            return fq_set_err(err, FQ_E_DECODE, "feature '%.*s' has %lld values, at most %lld allowed",
                              (int)ft->key_len, ft->key, (long long)got, (long long)ft->count);
        if (dst)
            memcpy(dst, &got, sizeof got);
        return FQ_OK;
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
        /* Features: map<string, Feature> feature = 1.  As strict as TensorFlow's own fast
         * parser (example_proto_fast_parsing.cc), so that whatever fastq accepts,
         * tf.io.parse_single_example accepts too: every field of Features is a map entry,
         * and an entry is exactly two fields, key (1) and value (2) in either order (a
         * repeated one: the later wins), nothing else. */
        while (fs.p < fs.end) {
            pb entry;
            if (pb_field(&fs, &field, &wt, &entry, &v) != 0)
                return MALFORMED("bad field in Features");
            if (field != 1 || wt != 2)
                return MALFORMED("a field of Features that is not a map entry");
            pb key = {NULL, NULL}, value = {NULL, NULL};
            int has_key = 0;
            for (int n = 0; n < 2; n++) {
                pb pl;
                if (entry.p >= entry.end)
                    return MALFORMED("a map entry without its key or value");
                if (pb_field(&entry, &field, &wt, &pl, &v) != 0)
                    return MALFORMED("bad field in a map entry");
                if (field == 1 && wt == 2) {
                    key = pl;
                    has_key = 1;
                } else if (field == 2 && wt == 2) {
                    value = pl;
                } else {
                    return MALFORMED("a map entry field that is neither its key nor its value");
                }
            }
            if (entry.p != entry.end)
                return MALFORMED("a map entry with more than a key and a value");
            size_t klen = has_key ? (size_t)(key.end - key.p) : 0;
            for (int k = 0; k < n_feats; k++)
                if (feats[k].key_len == klen && (klen == 0 || memcmp(feats[k].key, key.p, klen) == 0)) {
                    loc[k] = value; /* a later entry replaces an earlier one */
                    found[k] = 1;
                }
        }
    }
    for (int k = 0; k < n_feats; k++) {
        if (!found[k] && (feats[k].flags & FQ_TFR_VARLEN)) { /* a missing VarLenFeature: no values */
            found[k] = 1;
            loc[k].p = loc[k].end = NULL;
        }
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
        else if (feats[k].flags & ~(FQ_TFR_VARLEN | FQ_TFR_TRUNCATE) ||
                 (feats[k].flags && (!(feats[k].flags & FQ_TFR_VARLEN) || feats[k].kind == FQ_TFR_BYTES ||
                                     feats[k].count > FQ_TFR_MAX_VARLEN)))
            return fq_set_err(err, FQ_E_INVALID, "feature %d: bad flags %d (count %lld)", k, feats[k].flags,
                              (long long)feats[k].count);
    return FQ_OK;
}

int fq_tfr_parse_sample(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats, int image,
                        const size_t *extra_offset, uint8_t *extra, const uint8_t **img, size_t *img_len,
                        fq_err *err)
{
    fq_tfr_value vals[FQ_TFR_MAX_FEATURES];
    void *dst[FQ_TFR_MAX_FEATURES];
    for (int k = 0; k < n_feats && k < FQ_TFR_MAX_FEATURES; k++)
        dst[k] = k == image ? NULL : extra + extra_offset[k];
    int rc = fq_tfr_parse_example(data, len, feats, n_feats, vals, dst, err);
    if (rc != FQ_OK)
        return rc;
    *img = vals[image].ptr;
    *img_len = vals[image].len;
    return FQ_OK;
}

void fq_tfr_extra_sizes(const fq_tfr_feature *feats, int n_feats, int image, size_t *sizes, int *n_extra)
{
    int n = 0;
    for (int k = 0; k < n_feats && k < FQ_TFR_MAX_FEATURES; k++)
        if (k != image)
            sizes[n++] = (size_t)feats[k].count * (feats[k].kind == FQ_TFR_FLOAT ? 4 : 8) +
                         (feats[k].flags & FQ_TFR_VARLEN ? 8 : 0);
    *n_extra = n;
}
