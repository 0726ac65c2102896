# csrc/records/fq_example.h: the tf.train.Example parser of the record readers.
from libc.stdint cimport uint8_t, int64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "records/fq_example.h" nogil:
    enum:
        FQ_TFR_BYTES
        FQ_TFR_FLOAT
        FQ_TFR_INT64
        FQ_TFR_MAX_FEATURES
        FQ_TFR_VARLEN
        FQ_TFR_TRUNCATE
        FQ_TFR_MAX_VARLEN
    ctypedef struct fq_tfr_feature:
        const char *key
        size_t key_len
        int kind
        int64_t count
        int flags
    ctypedef struct fq_tfr_value:
        const uint8_t *ptr
        size_t len
    int fq_tfr_parse_example(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats,
                             fq_tfr_value *vals, void *const *dst, fq_err *err)
