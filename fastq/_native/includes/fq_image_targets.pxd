# csrc/image/fq_image_targets.h: dense targets (boxes, keypoints, masks) through an explain record.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_image cimport fq_img_explain, fq_op

cdef extern from "image/fq_image_targets.h" nogil:
    enum:
        FQ_TGT_REFUSED
        FQ_TGT_PIXEL
        FQ_TGT_GEOMETRIC
    enum:
        FQ_TGT_CENTER
        FQ_TGT_LEGACY
    int fq_tgt_rule(int kind)
    int fq_tgt_check(const fq_img_explain *ex, fq_err *err)
    int fq_tgt_check_ops(const fq_op *ops, int n_ops, fq_err *err)
    ctypedef struct fq_tgt_box_opts:
        double min_area
        double min_visibility
        int truncate
    int fq_tgt_boxes(const fq_img_explain *ex, const float *boxes, const int32_t *classes, int n, int max_boxes,
                     const fq_tgt_box_opts *opts, float *out_boxes, int32_t *out_classes, int32_t *out_index,
                     int *count, int *n_truncated, fq_err *err)
    int fq_tgt_keypoints(const fq_img_explain *ex, const float *kps, int n, int k, const int32_t *flip_index,
                         float *out, fq_err *err)
    int fq_tgt_mask(const fq_img_explain *ex, const void *mask, int h, int w, int elem_size, size_t stride,
                    unsigned fill, int sampling, void *out, fq_err *err)
    int fq_tgt_image_info(const fq_img_explain *ex, double out[8], fq_err *err)
    int fq_tgt_polygons(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                        uint8_t *out, fq_err *err)
    int fq_tgt_polygons_check(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                              fq_err *err)
    int fq_tgt_rle(const fq_img_explain *ex, const uint32_t *counts, int64_t m, int h, int w, int sampling,
                   uint8_t *out, fq_err *err)
    int fq_tgt_rle_check(const fq_img_explain *ex, const uint32_t *counts, int64_t m, int h, int w, fq_err *err)
    int fq_tgt_polygons_box(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                            const float *box, int mh, int mw, uint8_t *out, fq_err *err)
    void fq_tgt_mask_box(const uint8_t *src, int h, int w, const float *box, int mh, int mw, uint8_t *out)
