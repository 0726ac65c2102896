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
 * The framing walk and its checks are records/internal/fq_tfr_frame.h (shared with
 * the stream reader, fq_tfr_stream.h); the Example parser is records/fq_example.h.
 *
 * Thread safety: an fq_tfr is immutable after fq_tfr_create(); fq_tfr_read()
 * may run concurrently from any number of threads, each with its own buffer.
 * Lifetime: the arrays and strings passed to fq_tfr_create() are borrowed and
 * must outlive the fq_tfr.  No Python here.
 */
#ifndef FQ_TFRECORD_H
#define FQ_TFRECORD_H

#include "core/fq_common.h"
#include "records/fq_example.h"
#include "records/fq_spans.h"
#include "task/fq_sample_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_TFR_BROKEN UINT64_MAX /* length of an index entry that stands for a framing error */

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
    fq_spans *spans;               /* NULL: read the shard files (or mem); else borrow each framed
                                    * record from it (paths are then URLs, for messages) */
} fq_tfr_config;

typedef struct fq_tfr fq_tfr;

/* *reader: the fq_sample_reader to hand to an image task (owned by the fq_tfr; its
 * outputs after the image are the non-image features, fq_tfr_extra_sizes). */
int fq_tfr_create(const fq_tfr_config *cfg, fq_tfr **out, const fq_sample_reader **reader, fq_err *err);
void fq_tfr_free(fq_tfr *r);

/* fq_sample_reader.read: read, verify and parse record idx.  *buf / *cap: the caller's growable buffer
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
