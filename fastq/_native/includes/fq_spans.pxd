# csrc/records/fq_spans.h: bytes fetched from object storage, lent to the native readers.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "records/fq_spans.h" nogil:
    uint64_t FQ_SPAN_WHOLE
    ctypedef struct fq_spans:
        pass
    ctypedef struct fq_spans_stats:
        int64_t entries
        int64_t bytes
        int64_t gets
        int64_t waits
        int64_t wait_ns
        int64_t demands
    int fq_spans_create(int32_t n_objects, int64_t n_samples, fq_spans **out, fq_err *err)
    void fq_spans_free(fq_spans *s)
    int fq_spans_put(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const uint8_t *ptr,
                     uint64_t token, const int64_t *claims, int n_claims, fq_err *err)
    int fq_spans_fail(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const char *msg,
                      const int64_t *claims, int n_claims, fq_err *err)
    int fq_spans_poll(fq_spans *s, int timeout_ms, int min_tok, int64_t *dem, int max_dem, int *n_dem, uint64_t *tok,
                      int max_tok, int *n_tok)
    int fq_spans_get(fq_spans *s, const void *holder, int64_t idx, int32_t obj, uint64_t off, uint64_t len,
                     const uint8_t **p, uint64_t *got, fq_err *err)
    void fq_spans_interrupt(fq_spans *s)
    void fq_spans_abort(fq_spans *s, const char *msg)
    void fq_spans_reset(fq_spans *s)
    void fq_spans_get_stats(fq_spans *s, fq_spans_stats *st)
    int fq_spans_wanted(fq_spans *s, int64_t idx)
