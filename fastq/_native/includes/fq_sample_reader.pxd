# csrc/task/fq_sample_reader.h: the interface of a native record reader to the image task.
from libc.stdint cimport uint8_t, int64_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "task/fq_sample_reader.h" nogil:
    enum:
        FQ_READER_MAX_EXTRA
    ctypedef int (*fq_read_fn)(void *reader, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data,
                               size_t *len, uint8_t *extra, uint64_t *nread, fq_err *err)
    ctypedef void (*fq_describe_fn)(void *reader, int64_t idx, char *out, size_t len)
    ctypedef struct fq_sample_reader:
        fq_read_fn read
        fq_describe_fn describe
        void *reader
        int (*set_order)(void *reader, const int64_t *order, int64_t n_items, fq_err *err)
        int n_extra
        size_t extra_sizes[16]
