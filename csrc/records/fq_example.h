/* fq_example.h - the one tf.train.Example parser of the native record readers (the
 * indexed TFRecord reader fq_tfrecord.h and the stream reader fq_tfr_stream.h).
 *
 * fq_tfr_parse_example() is a bounds-checked parser of the tf.train.Example
 * protobuf for the requested keys only (bytes / float / int64 lists), with
 * protobuf's merge rules (a later map entry for a key replaces an earlier one;
 * repeated occurrences of the same list concatenate; unknown fields skipped).
 *
 * Thread safety: pure functions of their arguments (reentrant).  No Python here.
 */
#ifndef FQ_EXAMPLE_H
#define FQ_EXAMPLE_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum fq_tfr_kind { FQ_TFR_BYTES = 1, FQ_TFR_FLOAT = 2, FQ_TFR_INT64 = 3 };

#define FQ_TFR_MAX_FEATURES 16

typedef struct fq_tfr_feature {
    const char *key; /* borrowed, key_len bytes (not necessarily NUL-terminated) */
    size_t key_len;
    int kind;        /* FQ_TFR_* */
    int64_t count;   /* values expected (BYTES: must be 1); FQ_TFR_VARLEN: the most values */
    int flags;       /* 0 (a fixed count) or FQ_TFR_VARLEN [| FQ_TFR_TRUNCATE] (numeric kinds only) */
} fq_tfr_feature;

/* fq_tfr_feature.flags.  FQ_TFR_VARLEN: a variable-length float / int64 list of at most
 * `count` values (TF's VarLenFeature; a missing key or an empty Feature is 0 values).
 * Its destination is an int64 n (the number of values the record holds) followed by
 * room for `count` values; the first min(n, count) are written.  More than `count`
 * values fail the record (FQ_E_DECODE, naming the key) unless FQ_TFR_TRUNCATE is set
 * (then n > count tells how many were left out).  Sizes: fq_tfr_extra_sizes. */
#define FQ_TFR_VARLEN 1
#define FQ_TFR_TRUNCATE 2
#define FQ_TFR_MAX_VARLEN (1 << 24) /* the largest count of a VARLEN feature */

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
 * int64_t[count]; NULL for BYTES; VARLEN: int64 n then count values; unaligned is fine)
 * receives the values of feature k.  Errors
 * (FQ_E_DECODE): malformed protobuf, a key missing, a wrong list type, a wrong
 * number of values.  The message names the key. */
int fq_tfr_parse_example(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats,
                         fq_tfr_value *vals, void *const *dst, fq_err *err);

/* The sample of a reader: parse one Example, write every non-image feature k at
 * extra + extra_offset[k], and point *img / *img_len at the image bytes (inside data). */
int fq_tfr_parse_sample(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats, int image,
                        const size_t *extra_offset, uint8_t *extra, const uint8_t **img, size_t *img_len,
                        fq_err *err);

/* The reader outputs after the image: one per non-image feature, in feature order,
 * count values of 4 (float32) or 8 (int64) bytes (VARLEN: 8 more for the int64 n before
 * them); *n_extra of them (<= FQ_TFR_MAX_FEATURES). */
void fq_tfr_extra_sizes(const fq_tfr_feature *feats, int n_feats, int image, size_t *sizes, int *n_extra);

#ifdef __cplusplus
}
#endif
#endif
