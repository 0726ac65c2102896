/* fq_tfr_stream.h - TFRecord shards read as a stream (no record index).
 *
 * For data too large to index: the only per-shard state is its record count
 * (fq_tfr_count walks the framing once, verifying every length CRC, and keeps
 * no offsets).  Sample idx is record (idx - base[s]) of shard s, where base is
 * the prefix sum of the counts.  The epoch order (shards permuted, records in
 * shard order, a bounded shuffle buffer: computed by the caller) is given with
 * fq_sample_reader.set_order; the reader then follows it with one sequential
 * cursor per shard:
 *
 *   read(idx) of a record that the current order still needs: if it was read
 *   ahead it is taken from the hold table (its buffer is swapped into the
 *   caller's, no copy); otherwise the cursor of its shard advances to it,
 *   keeping the needed records it passes in the hold table and skipping the
 *   others (header reads only).  Records held are at most `hold_cap`; a read
 *   that would exceed it, a record the cursor has passed, a record the order
 *   does not need (explain, a skip replacement) or a repeated read take the
 *   random-access path: walk that shard's framing from its start (O(records
 *   before it) header reads).  Which path served a record never changes its
 *   bytes, so results stay deterministic for any worker count.
 *
 * Memory: hold_cap buffered records (the shuffle buffer's records plus the
 * records workers claimed out of order), two bits per record (needed / taken
 * in the current order), and O(shards).  The cursor I/O runs under one mutex
 * (one sequential reader per pipeline, GIL-free); the data CRC check and the
 * Example parse run on the calling worker, outside the lock.
 *
 * Thread safety: fq_tfs_read / describe from any number of threads;
 * set_order never while reads run (fq_imgtask_set_epoch's contract).
 * Lifetime: the config's arrays and strings are borrowed and must outlive the
 * fq_tfs; the order given to set_order is not kept.
 */
#ifndef FQ_TFR_STREAM_H
#define FQ_TFR_STREAM_H

#include "task/fq_sample_reader.h"
#include "records/fq_tfrecord.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records in one shard (a file, or a buffer when mem != NULL, or with gz = 31
 * (GZIP) / 15 (ZLIB) a compressed file inflated as a stream), framing walked
 * and length CRCs verified, nothing kept.  Like fq_tfr_scan: a framing error
 * ends the walk (tail->code != FQ_OK, *n = records before it); an I/O failure
 * is an error. */
int fq_tfr_count(const char *path, const uint8_t *mem, size_t mem_len, int gz, int64_t *n, fq_err *tail,
                 fq_err *err);

typedef struct fq_tfs_config {
    int n_shards;
    const char *const *paths;
    const uint8_t *const *mem;   /* NULL, or per shard NULL / in-memory shard contents */
    const size_t *mem_len;
    const char *const *tail_msg; /* per shard "" or its framing error: then its last sample is the break */
    const int64_t *count;        /* per shard: samples (records, + 1 for a framing break) */
    const fq_tfr_feature *feats;
    int n_feats;
    int image;
    const size_t *extra_offset;
    int64_t hold_cap;            /* most records held read-ahead (>= 1) */
    int gz;                      /* 0, or zlib window bits: 31 GZIP / 15 ZLIB shards, inflated as a stream */
} fq_tfs_config;

typedef struct fq_tfs fq_tfs;

typedef struct fq_tfs_stats {
    int64_t streamed;    /* records served through a cursor or the hold table */
    int64_t random;      /* records served by the random-access path */
    int64_t max_held;    /* most records held at once (since create) */
} fq_tfs_stats;

/* *reader: the fq_sample_reader to hand to an image task (owned by the fq_tfs; its
 * outputs after the image are the non-image features, fq_tfr_extra_sizes). */
int fq_tfs_create(const fq_tfs_config *cfg, fq_tfs **out, const fq_sample_reader **reader, fq_err *err);
void fq_tfs_free(fq_tfs *t);
void fq_tfs_get_stats(fq_tfs *t, fq_tfs_stats *st);

#ifdef __cplusplus
}
#endif
#endif
