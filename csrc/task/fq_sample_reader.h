/* fq_sample_reader.h - the interface between a native record reader (csrc/records/)
 * and the image task (task/fq_imgtask.h): a table of functions and the reader they
 * run on.  Every reader's create function hands out its own (fq_tfr_create,
 * fq_tfs_create, fq_tarset_create, fq_filereader_create, fq_ra_create), owned by the
 * reader and valid until it is freed; bindings only pass it on.
 * Includes go one way: records/ include this header, never the image task's.
 */
#ifndef FQ_SAMPLE_READER_H
#define FQ_SAMPLE_READER_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_READER_MAX_EXTRA 16 /* most outputs after the image */

/* A native record reader (records/: fq_tfrecord, fq_tfr_stream, fq_tar, fq_readahead),
 * the source of an image task of kind FQ_SRC_READER.  read() fetches
 * sample idx into the worker's growable buffer (*buf, *cap: owned by the task,
 * realloc'd by the reader), points *data, *len at its encoded image (valid until
 * the worker's next read) and writes the sample's other outputs (extra_sizes[k]
 * bytes each, concatenated) into extra; *nread = bytes read from storage.
 * describe() names the sample's location ("shard '...', record N") for error
 * messages.  Both are called concurrently from all workers: reader must be
 * safe for that. */
typedef struct fq_sample_reader {
    int (*read)(void *reader, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                uint8_t *extra, uint64_t *nread, fq_err *err);
    void (*describe)(void *reader, int64_t idx, char *out, size_t len);
    void *reader;
    /* optional (NULL): told each epoch's order by fq_imgtask_set_epoch (read-ahead) */
    int (*set_order)(void *reader, const int64_t *order, int64_t n_items, fq_err *err);
    int n_extra;                                  /* outputs after the image (labels etc.) */
    size_t extra_sizes[FQ_READER_MAX_EXTRA];
} fq_sample_reader;

#ifdef __cplusplus
}
#endif
#endif
