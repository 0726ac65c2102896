# csrc/records/fq_tar.h: tar shards (WebDataset).
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_sample_reader cimport fq_sample_reader

from fastq._native.includes.fq_spans cimport fq_spans

cdef extern from "records/fq_tar.h" nogil:
    ctypedef struct fq_tarset_config:
        int n_shards
        const char *const *paths
        int64_t n
        const int32_t *shard
        const uint64_t *img_off
        const uint64_t *img_size
        const uint64_t *lab_off
        const uint64_t *lab_size
        const int64_t *number
        const char *const *key
        const char *const *error
        int with_label
        fq_spans *spans
    ctypedef struct fq_tarset:
        pass
    int fq_tar_scan(const char *path, uint64_t **offsets, uint64_t **sizes, uint8_t **flags, char **names,
                    size_t *names_len, int64_t *n, fq_err *tail, fq_err *err)
    int fq_tarset_create(const fq_tarset_config *cfg, fq_tarset **out, const fq_sample_reader **reader, fq_err *err)
    void fq_tarset_free(fq_tarset *s)
    int fq_tar_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                    uint8_t *extra, uint64_t *nread, fq_err *err)
    void fq_tar_describe(void *ctx, int64_t idx, char *out, size_t len)
