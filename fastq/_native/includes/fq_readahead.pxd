# csrc/records/fq_readahead.h: read-ahead over a sample reader; whole files as a reader.
from libc.stdint cimport int64_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_sample_reader cimport fq_sample_reader

from fastq._native.includes.fq_spans cimport fq_spans

cdef extern from "records/fq_readahead.h" nogil:
    ctypedef struct fq_ra:
        pass
    ctypedef struct fq_ra_stats:
        int64_t ahead
        int64_t direct
    int fq_ra_create(const fq_sample_reader *inner, int64_t n_samples, int io_threads, int depth, fq_ra **out,
                     const fq_sample_reader **outer, fq_err *err)
    void fq_ra_free(fq_ra *ra)
    void fq_ra_get_stats(fq_ra *ra, fq_ra_stats *st)
    ctypedef struct fq_filereader:
        pass
    int fq_filereader_create(const char *const *paths, int64_t n, int delay_us, fq_filereader **out,
                             const fq_sample_reader **reader, fq_err *err)
    void fq_filereader_free(fq_filereader *r)
    void fq_filereader_set_spans(fq_filereader *r, fq_spans *spans)
