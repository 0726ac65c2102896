# csrc/records/fq_tfrecord.h: indexed TFRecord reader + the Example parser.
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t

from fastq.includes.fq_common cimport fq_err

cdef extern from "records/fq_tfrecord.h" nogil:
    enum:
        FQ_TFR_BYTES
        FQ_TFR_FLOAT
        FQ_TFR_INT64
        FQ_TFR_MAX_FEATURES
    ctypedef struct fq_tfr_feature:
        const char *key
        size_t key_len
        int kind
        int64_t count
    ctypedef struct fq_tfr_value:
        const uint8_t *ptr
        size_t len
    ctypedef struct fq_tfr_config:
        int n_shards
        const char *const *paths
        const uint8_t *const *mem
        const size_t *mem_len
        const char *const *tail_msg
        int64_t n
        const int32_t *shard
        const uint64_t *offset
        const uint64_t *length
        const int64_t *number
        const fq_tfr_feature *feats
        int n_feats
        int image
        const size_t *extra_offset
    ctypedef struct fq_tfr:
        pass
    int fq_tfr_parse_example(const uint8_t *data, size_t len, const fq_tfr_feature *feats, int n_feats,
                             fq_tfr_value *vals, void *const *dst, fq_err *err)
    int fq_tfr_scan(const char *path, const uint8_t *mem, size_t mem_len, uint64_t **offsets, uint64_t **lengths,
                    int64_t *n, fq_err *tail, fq_err *err)
    int fq_tfr_create(const fq_tfr_config *cfg, fq_tfr **out, fq_err *err)
    void fq_tfr_free(fq_tfr *r)
    int fq_tfr_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                    uint8_t *extra, uint64_t *nread, fq_err *err)
    void fq_tfr_describe(void *ctx, int64_t idx, char *out, size_t len)
