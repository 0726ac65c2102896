# csrc/records/fq_tfrecord.h: the indexed TFRecord reader.
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_example cimport fq_tfr_feature
from fastq._native.includes.fq_sample_reader cimport fq_sample_reader

from fastq._native.includes.fq_spans cimport fq_spans

cdef extern from "records/fq_tfrecord.h" nogil:
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
        fq_spans *spans
    ctypedef struct fq_tfr:
        pass
    int fq_tfr_scan(const char *path, const uint8_t *mem, size_t mem_len, uint64_t **offsets, uint64_t **lengths,
                    int64_t *n, fq_err *tail, fq_err *err)
    int fq_tfr_create(const fq_tfr_config *cfg, fq_tfr **out, const fq_sample_reader **reader, fq_err *err)
    void fq_tfr_free(fq_tfr *r)
    int fq_tfr_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                    uint8_t *extra, uint64_t *nread, fq_err *err)
    void fq_tfr_describe(void *ctx, int64_t idx, char *out, size_t len)
