/* fq_readahead.h - read-ahead for native readers on slow storage.
 *
 * Wraps an fq_sample_reader: `io_threads` threads read the samples of the
 * current epoch order ahead of the decoding workers, at most `depth` positions
 * ahead of the oldest position not yet taken, each into a slot buffer.  A
 * worker asking for the sample at position p takes slot p % depth if it holds
 * p (waiting only while that read is in flight) and gets the slot's buffer by
 * swapping it with its own (no copy); in every other case (position not
 * loaded yet, a skip replacement, explain) it reads directly through the inner
 * reader and marks the position done so that the I/O threads skip it.  Reads
 * are pure functions of the sample index, so which path served a sample never
 * changes the bytes: results stay deterministic for any thread counts.
 *
 * fq_ra_set_order() starts an epoch (called by fq_imgtask_set_epoch through
 * fq_sample_reader.set_order; never while a pool runs on the task).  Threads
 * are started by fq_ra_create and joined by fq_ra_free.  The inner reader is
 * borrowed (it must outlive the fq_ra); the order is copied.
 */
#ifndef FQ_READAHEAD_H
#define FQ_READAHEAD_H

#include "records/fq_spans.h"
#include "task/fq_sample_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fq_ra fq_ra;

/* n_samples: the inner reader's sample count.  *outer: a reader to give to the
 * image task (owned by the fq_ra). */
int fq_ra_create(const fq_sample_reader *inner, int64_t n_samples, int io_threads, int depth, fq_ra **out,
                 const fq_sample_reader **outer, fq_err *err);
void fq_ra_free(fq_ra *ra);

typedef struct fq_ra_stats {
    int64_t ahead;  /* samples served from a read-ahead slot */
    int64_t direct; /* samples read directly by a worker */
} fq_ra_stats;
void fq_ra_get_stats(fq_ra *ra, fq_ra_stats *st);

/* A plain file reader (the Files source's read path as an fq_sample_reader):
 * sample i is the whole file paths[i].  delay_us > 0 sleeps that long before
 * every read (a stand-in for network storage latency in benchmarks/tests). */
typedef struct fq_filereader fq_filereader;
int fq_filereader_create(const char *const *paths, int64_t n, int delay_us, fq_filereader **out,
                         const fq_sample_reader **reader, fq_err *err);
/* Sample i is then object i of spans, borrowed whole (paths are URLs, for messages).
 * Before the reader is used. */
void fq_filereader_set_spans(fq_filereader *r, fq_spans *spans);
void fq_filereader_free(fq_filereader *r);

#ifdef __cplusplus
}
#endif
#endif
