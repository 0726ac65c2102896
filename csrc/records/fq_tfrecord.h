/* fq_tfrecord.h - TFRecord shards of tf.train.Example records, read natively.
 *
 * Framing of one record (all little-endian):
 *     uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
 * Both CRCs are verified on every read; a record is never handed on unverified.
 *
 * Random access goes through a record index: per record its shard, the offset
 * of its length field and its data length.  fq_tfr_scan() builds one shard's
 * index by walking the framing (length CRC checked; the data is skipped, its
 * CRC is checked when the record is read).  A framing error stops the walk:
 * the records before it are indexed and the error is returned separately so
 * that the caller can turn the broken tail into one failing sample (the rest
 * of such a shard cannot be located: TFRecord has no resync marker).
 *
 * fq_tfr_parse_example() is a bounds-checked parser of the tf.train.Example
 * protobuf for the requested keys only (bytes / float / int64 lists), with
 * protobuf's merge rules (a later map entry for a key replaces an earlier one;
 * repeated occurrences of the same list concatenate; unknown fields skipped).
 *
 * Thread safety: an fq_tfr is immutable after fq_tfr_create(); fq_tfr_read()
 * may run concurrently from any number of threads, each with its own buffer.
 * Lifetime: the arrays and strings passed to fq_tfr_create() are borrowed and
 * must outlive the fq_tfr.  No Python here.
 */
#ifndef FQ_TFRECORD_H
#define FQ_TFRECORD_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum fq_tfr_kind { FQ_TFR_BYTES = 1, FQ_TFR_FLOAT = 2, FQ_TFR_INT64 = 3 };

#define FQ_TFR_MAX_FEATURES 16
#define FQ_TFR_BROKEN UINT64_MAX /* length of an index entry that stands for a framing error */

typedef struct fq_tfr_feature {
    const char *key; /* borrowed, key_len bytes (not necessarily NUL-terminated) */
    size_t key_len;
    int kind;        /* FQ_TFR_* */
    int64_t count;   /* values expected (BYTES: must be 1) */
} fq_tfr_feature;

/* Per requested feature: for BYTES the value (ptr into the record, len);
 * numeric values are written to dst. */
typedef struct fq_tfr_value {
    const uint8_t *ptr;
    size_t len;
} fq_tfr_value;

/* The feature list of a reader (both the indexed and the stream reader): at most
 * FQ_TFR_MAX_FEATURES, feats[image] is the one bytes feature (count 1), counts >= 0,
 * extra_offset given.  FQ_OK or FQ_E_INVALID. */
int fq_tfr_check_features(const fq_tfr_feature *feats, int n_feats, int image, const size_t *extra_offset,
                          fq_err *err);

/* Parse one serialized Example.  dst[k] (for FLOAT: float[count], INT64:
 * int64_t[count]; NULL for BYTES) receives the values of feature k.  Errors
 * (FQ_E_DECODE): malformed protobuf, a key missing, a wrong list type, a wrong
 * number of values.  The message names the key. */
int fq_tfr_parse_example(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats,
                         fq_tfr_value *vals, void *const *dst, fq_err *err);

/* Index one shard, from a file (mem == NULL) or a buffer (mem, mem_len: a
 * decompressed GZIP shard).  On FQ_OK: *offsets / *lengths (malloc'd, caller
 * frees with free()) hold *n records; tail->code != FQ_OK when a framing error
 * (truncation, bad length CRC) ended the walk early at record number *n, with
 * the message naming its offset.  Returns an error only for I/O failures or
 * out of memory. */
int fq_tfr_scan(const char *path, const uint8_t *mem, size_t mem_len, uint64_t **offsets, uint64_t **lengths,
                int64_t *n, fq_err *tail, fq_err *err);

typedef struct fq_tfr_config {
    int n_shards;
    const char *const *paths;      /* shard paths (for reading and messages) */
    const uint8_t *const *mem;     /* NULL, or per shard NULL / in-memory shard contents */
    const size_t *mem_len;
    const char *const *tail_msg;   /* per shard: message of its framing error ("" if none) */
    int64_t n;                     /* records */
    const int32_t *shard;          /* n: shard of each record */
    const uint64_t *offset;        /* n: offset of its length field */
    const uint64_t *length;        /* n: data length, or FQ_TFR_BROKEN */
    const int64_t *number;         /* n: record number inside its shard */
    const fq_tfr_feature *feats;   /* feats[image]: the encoded image (BYTES) */
    int n_feats;
    int image;
    const size_t *extra_offset;    /* n_feats: byte offset of feature k in the extras row (unused for image) */
} fq_tfr_config;

typedef struct fq_tfr fq_tfr;

int fq_tfr_create(const fq_tfr_config *cfg, fq_tfr **out, fq_err *err);
void fq_tfr_free(fq_tfr *r);

/* Read, verify and parse record idx.  *buf / *cap: the caller's growable buffer
 * (realloc'd as needed; owned by the caller).  On FQ_OK *data / *len point at
 * the encoded image inside *buf (or inside the in-memory shard), the other
 * features are written at their extra_offset in extra, and *nread is the
 * number of bytes read from storage.  Messages do not name the record: ask
 * fq_tfr_describe(). */
int fq_tfr_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                uint8_t *extra, uint64_t *nread, fq_err *err);
/* "shard '<path>', record <number>" */
void fq_tfr_describe(void *ctx, int64_t idx, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
