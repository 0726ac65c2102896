/* fq_spans.h - bytes fetched from object storage, lent to the native readers.
 *
 * A remote source's fetcher (Python: fastq/sources/fetch.py) downloads byte
 * ranges of objects - whole objects (Files) or chunks of a shard that hold several
 * samples (TFRecord, WebDataset) - and puts each buffer here as an *entry*: object,
 * offset, length, pointer, a token naming the buffer, and the samples it was
 * fetched for (its claims).  A native reader configured with a fq_spans (fq_tfr,
 * fq_tarset, fq_filereader) borrows the bytes of one sample with fq_spans_get(),
 * which waits until an entry covers them, and hands the pointer to the decoder:
 * no copy between the network buffer and the decoder.
 *
 * Lifetime.  An entry's memory belongs to the fetcher (a Python buffer it keeps
 * under the entry's token).  A get holds the entry until the same holder's next
 * get (a worker passes the address of its own buffer variable, which is unique
 * and stable per worker) or until fq_spans_reset().  An entry retires when no
 * holder has it and each of its claims has been read once; its token is then
 * handed to the fetcher by fq_spans_poll(), and only then may the fetcher free
 * the buffer.
 *
 * Demands.  A get that finds no entry posts the sample index as a demand (once
 * per wait) and waits.  The fetcher decides what a demand means (a planned
 * request to bring forward, one in flight to wait for, or a new single-sample
 * request for a sample read again, e.g. a skip replacement).  A demand met
 * before the fetcher takes it (the bytes arrived meanwhile) is dropped.
 *
 * Failures.  fq_spans_fail() stores a failing range with the same claim rule:
 * a get covered by it returns FQ_E_IO with its message (which names the URL).
 * fq_spans_interrupt() makes every get return at once (a run being stopped);
 * fq_spans_reset() (no get running) retires every entry and clears the state.
 *
 * Thread safety: every function may be called from any thread (one mutex).
 * No Python here.
 */
#ifndef FQ_SPANS_H
#define FQ_SPANS_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_SPAN_WHOLE UINT64_MAX /* get: the whole object, whatever its length */

typedef struct fq_spans fq_spans;

int fq_spans_create(int32_t n_objects, int64_t n_samples, fq_spans **out, fq_err *err);
/* Only when no thread uses it any more; entries still held are dropped (their
 * tokens are lost: the fetcher frees its buffers itself after this). */
void fq_spans_free(fq_spans *s);

/* Fetcher: lend [off, off + len) of object obj at ptr (whole: the entire object,
 * off must be 0), fetched for the samples claims[0..n_claims).  The claims are copied. */
int fq_spans_put(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const uint8_t *ptr,
                 uint64_t token, const int64_t *claims, int n_claims, fq_err *err);
/* Fetcher: [off, off + len) of obj (whole: all of it) cannot be had; gets covered
 * by it fail with FQ_E_IO and msg.  Retires like an entry (token 0: nothing to free). */
int fq_spans_fail(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const char *msg,
                  const int64_t *claims, int n_claims, fq_err *err);
/* Fetcher: wait up to timeout_ms for a demand or min_tok (>= 1) retired tokens, and take
 * what is queued (at most max_dem / max_tok each; the rest stay queued).  Tokens come
 * first: a demand posted after an entry retired is always seen with, or after, its token.
 * Returns at once when a demand, or min_tok tokens, are queued already; an interrupt ends
 * a wait under way.  min_tok > 1 gathers freed buffers into fewer wake-ups of the fetcher
 * (a demand, which a reader waits on, still wakes it at once). */
int fq_spans_poll(fq_spans *s, int timeout_ms, int min_tok, int64_t *dem, int max_dem, int *n_dem, uint64_t *tok,
                  int max_tok, int *n_tok);

/* Reader: borrow the bytes of sample idx: [off, off + len) of object obj, or the
 * whole object (len FQ_SPAN_WHOLE).  *p, *got valid until holder's next get or a
 * reset.  Waits for the fetcher; FQ_E_IO for a failed range, FQ_E_CANCELLED after
 * fq_spans_interrupt (or FQ_E_IO with the fetcher's message after fq_spans_abort). */
int fq_spans_get(fq_spans *s, const void *holder, int64_t idx, int32_t obj, uint64_t off, uint64_t len,
                 const uint8_t **p, uint64_t *got, fq_err *err);

/* Wake every get with FQ_E_CANCELLED (abort: FQ_E_IO naming msg) until fq_spans_reset. */
void fq_spans_interrupt(fq_spans *s);
void fq_spans_abort(fq_spans *s, const char *msg);
/* No get may run: drop every hold, entry, demand, queued token and the interrupt.
 * Afterwards no pointer given to put is referenced: the fetcher frees them all. */
void fq_spans_reset(fq_spans *s);

typedef struct fq_spans_stats {
    int64_t entries;     /* live entries */
    int64_t bytes;       /* bytes of the live entries (what the fetcher still holds for them) */
    int64_t gets;        /* gets served */
    int64_t waits;       /* gets that had to wait for the fetcher */
    int64_t wait_ns;     /* total time gets waited */
    int64_t demands;     /* demands posted */
} fq_spans_stats;
void fq_spans_get_stats(fq_spans *s, fq_spans_stats *st);

/* Fetcher: whether a reader still waits for sample idx (a demand not yet met).  A demand the
 * fetcher took may be met before it acts on it (its request's bytes or failure arrived
 * meanwhile): acting on it then would fetch those bytes a second time. */
int fq_spans_wanted(fq_spans *s, int64_t idx);

#ifdef __cplusplus
}
#endif
#endif
