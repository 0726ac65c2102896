# csrc/task/fq_imgtask.h: the image task.
from libc.stdint cimport uint8_t, int32_t, int64_t, uint32_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_stage_times cimport fq_stage_times
from fastq._native.includes.fq_image cimport fq_img_spec, fq_img_explain
from fastq._native.includes.fq_sample_reader cimport fq_sample_reader
from fastq._native.includes.fq_image_targets cimport fq_tgt_box_opts

cdef extern from "task/fq_imgtask.h" nogil:
    enum:
        FQ_SRC_FILES
        FQ_SRC_BYTES
        FQ_SRC_ARRAYS
        FQ_SRC_READER
        FQ_ON_ERROR_RAISE
        FQ_ON_ERROR_SKIP
        FQ_IMGTASK_MAX_CODES
        FQ_IMGTASK_MAX_EXTRA
        FQ_NUM_AS_READ
        FQ_NUM_COUNT
        FQ_INST_NONE
        FQ_INST_POLYGONS
        FQ_INST_RLE
    size_t fq_num_size(int type)
    const char *fq_num_name(int type)
    ctypedef struct fq_imgtask_targets:
        const float *boxes
        const int32_t *classes
        const int64_t *offsets
        int max_boxes
        fq_tgt_box_opts opts
        int with_image_info
        const float *keypoints
        int k
        const int32_t *flip_index
        const void *const *masks
        const int32_t *mask_hw
        int mask_elem
        unsigned mask_fill
        int mask_sampling
        int from_reader
        int normalized
        const uint8_t *inst_kind
        const int64_t *inst_poly
        const int64_t *inst_ring
        const float *inst_xy
        const int64_t *inst_rle
        const uint32_t *inst_counts
        const int32_t *inst_hw
        int inst_out_h
        int inst_out_w
        int inst_mask_h
        int inst_mask_w
    ctypedef struct fq_imgtask_source:
        int kind
        int64_t n
        const char *const *paths
        const uint8_t *const *data
        const size_t *lens
        const int32_t *shape
        const size_t *strides
        const uint8_t *labels
        size_t label_bytes
        const fq_sample_reader *reader
        int extra_type[16]
        const fq_imgtask_targets *targets
        int with_sizes
        int sizes_op
    ctypedef struct fq_imgtask:
        pass
    ctypedef struct fq_imgtask_stats:
        int64_t skipped
        int64_t skipped_by_code[16]
        int64_t failed
        int64_t bytes_read
        int64_t boxes_truncated
    int fq_imgtask_create(const fq_img_spec *spec, const fq_imgtask_source *src, int n_workers,
                          int on_error, int max_attempts, int with_index, fq_imgtask **out, fq_err *err)
    void fq_imgtask_free(fq_imgtask *t)
    int fq_imgtask_set_epoch(fq_imgtask *t, const int64_t *order, int64_t n_items, uint64_t seed,
                             uint64_t epoch, fq_err *err)
    int fq_imgtask_run(void *ctx, int worker, int64_t item, uint8_t **rows, fq_err *err)
    int fq_imgtask_sample(fq_imgtask *t, int worker, int64_t index, uint64_t seed, uint64_t epoch, void *out,
                          fq_img_explain *ex, fq_err *err)
    void fq_imgtask_get_stats(fq_imgtask *t, fq_imgtask_stats *st)
    void fq_imgtask_last_skip(fq_imgtask *t, int code, char *msg, size_t len)
    void fq_permutation(uint64_t seed, uint64_t epoch, int64_t *out, int64_t n)
    void fq_imgtask_get_stage_times(fq_imgtask *t, fq_stage_times *out)
