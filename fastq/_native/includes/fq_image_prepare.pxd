# csrc/image/fq_image_prepare.h: lossless restart-marker re-encode; process-wide switches.
from libc.stdint cimport int64_t, uint8_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "image/fq_image_prepare.h" nogil:
    void fq_img_segment_decode_set(int on)
    int fq_img_segment_decode_enabled()
    uint64_t fq_img_segment_decode_count()
    void fq_img_simd_write_set(int on)
    int fq_img_simd_write_enabled()
    void fq_img_simd_tp_set(int on)
    int fq_img_simd_tp_enabled()
    void fq_img_simd_resize_set(int on)
    int fq_img_simd_resize_enabled()
    const char *fq_img_simd_resize_unavailable()

    ctypedef struct fq_prepare_info:
        int status
        int width, height
        int mcus_per_row
        int restart_interval
        int old_restart_interval
        size_t in_bytes, out_bytes
        char why[160]

    enum:
        FQ_PREP_REWRITTEN
        FQ_PREP_KEPT

    int fq_jpeg_prepare(const uint8_t *data, size_t len, int target_mcus, uint8_t **out, fq_prepare_info *info,
                        fq_err *err)
    void fq_jpeg_prepare_free(uint8_t *buf)
    int fq_jpeg_downscale(const uint8_t *data, size_t len, int max_side, int64_t max_pixels, int quality,
                          int target_mcus, uint8_t **out, fq_prepare_info *info, fq_err *err)
