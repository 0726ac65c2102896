# csrc/records/fq_tfr_stream.h: TFRecord read as a stream (no index; GZIP/ZLIB).
from libc.stdint cimport uint8_t, int64_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_sample_reader cimport fq_sample_reader
from fastq._native.includes.fq_example cimport fq_tfr_feature

cdef extern from "records/fq_tfr_stream.h" nogil:
    ctypedef struct fq_tfs_config:
        int n_shards
        const char *const *paths
        const uint8_t *const *mem
        const size_t *mem_len
        const char *const *tail_msg
        const int64_t *count
        const fq_tfr_feature *feats
        int n_feats
        int image
        const size_t *extra_offset
        int64_t hold_cap
        int gz
    ctypedef struct fq_tfs:
        pass
    ctypedef struct fq_tfs_stats:
        int64_t streamed
        int64_t random
        int64_t max_held
    int fq_tfr_count(const char *path, const uint8_t *mem, size_t mem_len, int gz, int64_t *n, fq_err *tail,
                     fq_err *err)
    int fq_tfs_create(const fq_tfs_config *cfg, fq_tfs **out, const fq_sample_reader **reader, fq_err *err)
    void fq_tfs_free(fq_tfs *t)
    void fq_tfs_get_stats(fq_tfs *t, fq_tfs_stats *st)
