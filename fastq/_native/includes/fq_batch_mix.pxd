# csrc/image/fq_batch_mix.h: batch-level MixUp / CutMix, in place.
from libc.stdint cimport int32_t, int64_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "image/fq_batch_mix.h" nogil:
    enum:
        FQ_MIX_NONE
        FQ_MIX_MIXUP
        FQ_MIX_CUTMIX
        FQ_MIX_BATCH
        FQ_MIX_ELEM
        FQ_MIX_PAIR
        FQ_MIX_NHWC
        FQ_MIX_NCHW
        FQ_MIX_U8
        FQ_MIX_F32
        FQ_MIX_F16
        FQ_MIX_BF16
        FQ_MIX_L_I64
        FQ_MIX_L_I32
        FQ_MIX_L_U8
        FQ_MIX_L_I16
        FQ_MIX_L_U16
        FQ_MIX_L_I8
        FQ_MIX_L_U32
        FQ_MIX_L_U64

    ctypedef struct fq_mix_params:
        double mixup_alpha
        double cutmix_alpha
        double switch_prob
        double prob
        double label_smoothing
        int64_t num_classes
        int mode
        int correct_lam
        int minmax
        double cutmix_min, cutmix_max

    ctypedef struct fq_mix_draw:
        int kind
        double lam_drawn
        double lam
        int32_t x0, y0, x1, y1

    int fq_mix_check(const fq_mix_params *p, fq_err *err)
    int fq_mix_beta_samples(uint64_t seed, double a, int64_t n, double *out, fq_err *err)
    int fq_mix_draw_count(const fq_mix_params *p, int n)
    int fq_mix_draw_batch(const fq_mix_params *p, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h,
                          int w, fq_mix_draw *draws, fq_err *err)
    int fq_mix_apply(const fq_mix_params *p, const fq_mix_draw *draws, void *images, int dtype, int layout, int n,
                     int h, int w, int c, const void *labels, int ltype, float *soft, void *tmp, fq_err *err)
