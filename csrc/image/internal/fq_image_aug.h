/* fq_image_aug.h - private declarations shared by the augmentation primitives
 * (fq_image_aug.cpp) and the policies built on them (fq_image_aug_policy.cpp). */
#ifndef FQ_IMAGE_AUG_H
#define FQ_IMAGE_AUG_H

#include <cmath>

#include "image/internal/fq_image_stages.h"

namespace fqi {

struct AugGeom {     /* Rotate (degrees), ShearX/Y (level), TranslateX/Y (pixels) */
    double level[2]; /* drawn uniformly in [lo, hi] (no draw when lo == hi) */
    double fill[3];  /* per channel, 0..255 */
    double p;
};
struct AugCutout {   /* TF Model Garden cutout */
    double pad_size; /* half side of the square, integer >= 0 */
    double fill[3];
    double p;
};

inline bool aug_is_int(double v) { return std::isfinite(v) && v == std::floor(v); }
inline bool aug_valid_prob(double p) { return std::isfinite(p) && p >= 0 && p <= 1; }
inline bool aug_valid_level(const double *l) { return std::isfinite(l[0]) && std::isfinite(l[1]) && l[0] <= l[1]; }
/* the level of an applied op: U(lo, hi) when lo < hi (one draw), else lo (no draw) */
inline double aug_draw_level(fq_rng *rng, const double *level, int applied)
{
    if (applied && level[0] < level[1])
        return fq_rng_uniform_range(rng, level[0], level[1]);
    return level[0];
}

/* the usual plan of a primitive: applied if u < p (u drawn first, always), then the
 * level into r.factor[0] (aug_draw_level) */
inline void aug_plan_p_level(fq_rng *rng, double p, const double *level, fq_img_op_explain &r)
{
    r.applied = fq_rng_uniform(rng) < p ? 1 : 0;
    r.factor[0] = aug_draw_level(rng, level, r.applied);
}

/* fmaf(a, b, c) for the operands used here (a * b has at most 48 significant bits and
 * a * b + c spans less than 53): the double sum is exact, so one rounding to float is
 * the fused result, without a libm call (the build targets plain x86-64) */
inline float fma_exact(float a, float b, float c) { return (float)((double)a * (double)b + (double)c); }

/* ---- per-pixel definitions shared by the scalar loops and the tails of their AVX2
 * forms (fq_image_aug_simd.cpp), so both give the same bytes ------------------------- */

/* float32 in [0, 255] (clamped) -> uint8 by truncation, as torch's .to(torch.uint8) */
inline uint8_t aug_clamp_trunc(float v) { return (uint8_t)(v < 0.f ? 0.f : (v > 255.f ? 255.f : v)); }

/* nearbyint (half to even) for |v| < 2^22 without a libm call (plain x86-64 has no
 * roundss): adding and removing 1.5 * 2^23 rounds in the default rounding mode.  Larger
 * |v| (far outside any image) come back unchanged; NaN stays NaN (then: outside). */
inline float aug_round_even(float v)
{
    if (!(std::fabs(v) < 4194304.f))
        return v;
    return (v + 12582912.f) - 12582912.f; /* not folded: no -ffast-math; SSE float, no excess precision */
}

/* floor(0.2989 R + 0.587 G + 0.114 B) of one RGB pixel in float32 (torch's mul + two
 * FMA adds) */
inline float gray_value(const uint8_t *s)
{
    return std::floor(fma_exact((float)s[2], 0.114f, fma_exact((float)s[1], 0.587f, (float)s[0] * 0.2989f)));
}

/* torchvision's _blend(x, y, r) = x * r + y * (1 - r) in float32 (the add is an FMA in
 * torch's vectorised kernel) */
inline uint8_t aug_blend(float x, float y, float r, float one_minus_r)
{
    return aug_clamp_trunc(fma_exact(y, one_minus_r, x * r));
}

/* Color: one RGB pixel blended with its grey */
inline void color_pixel(const uint8_t *s, uint8_t *o, float f, float f1)
{
    const float g = gray_value(s);
    for (int k = 0; k < 3; k++)
        o[k] = aug_blend((float)s[k], g, f, f1);
}

/* Sharpness: element i of an interior row m (rows u above, b below, c channels):
 * x + (1 - f) * (round(blur) - x), blur = (sum of the 8 neighbours + 5 x) / 13 */
inline uint8_t sharpness_value(const uint8_t *u, const uint8_t *m, const uint8_t *b, int i, int c, float f1)
{
    int s = u[i - c] + u[i] + u[i + c] + m[i - c] + 5 * m[i] + m[i + c] + b[i - c] + b[i] + b[i + c];
    float bl = (float)((2 * s + 13) / 26); /* round(s / 13), s >= 0 */
    float x = (float)m[i];
    return aug_clamp_trunc(fma_exact(bl - x, f1, x));
}

/* the nearest-neighbour inverse map (torchvision's _affine_grid + grid_sample,
 * align_corners=False, in float32) of output pixel (x, y): centre (x - (W-1)/2,
 * y - (H-1)/2) mapped by t (the 2x3 matrix over half sizes), rounded half to even;
 * the source pixel read from src as if flipped by hf / vf; outside the image: fill */
inline void geom_pixel(const cv::Mat &src, uint8_t *o, int x, int y, const float t[6], bool hf, bool vf,
                       const uint8_t *fill)
{
    const int H = src.rows, W = src.cols, c = src.channels();
    const float sw = (float)W * 0.5f, ow = ((float)W - 1.f) * 0.5f, sh = (float)H * 0.5f, oh = ((float)H - 1.f) * 0.5f;
    const float xg = (float)x - ow, yg = (float)y - oh;
    float gx = xg * t[0] + yg * t[1] + t[2], gy = xg * t[3] + yg * t[4] + t[5];
    float ix = aug_round_even(fma_exact(gx, sw, ow)), iy = aug_round_even(fma_exact(gy, sh, oh));
    if (ix >= 0.f && ix < (float)W && iy >= 0.f && iy < (float)H) {
        const int sx = hf ? W - 1 - (int)ix : (int)ix, sy = vf ? H - 1 - (int)iy : (int)iy;
        const uint8_t *s = src.ptr<uint8_t>(sy) + (size_t)sx * c;
        for (int k = 0; k < c; k++)
            o[k] = s[k];
    } else {
        for (int k = 0; k < c; k++)
            o[k] = fill[k];
    }
}

/* The AVX2 forms (fq_image_aug_simd.cpp): false (nothing written) when the CPU lacks
 * AVX2 (or FASTQ_CPU masks it: core/fq_cpu.h), the SIMD switch is off or the image is not one they take; the caller then runs
 * the scalar loop.  Each writes the same bytes as the scalar definition above. */
bool aug_simd_ok();
bool geom_warp_simd(const cv::Mat &src, cv::Mat &dst, const float t[6], bool hf, bool vf, const uint8_t fill[3]);
bool sharpness_simd(const cv::Mat &src, cv::Mat &dst, float f1); /* interior rows only */
bool color_simd(const cv::Mat &src, cv::Mat &dst, float f, float f1);
bool gray_sum_simd(const cv::Mat &src, double *sum);
/* timm's ops with Pillow's semantics (fq_image_aug_timm_ops.cpp): Sharpness's interior rows
 * (W >= 3), Color (3 channels), the sum of Pillow's grey (3 channels) */
bool timm_sharpness_simd(const cv::Mat &src, cv::Mat &dst, float a);
bool timm_color_simd(const cv::Mat &src, cv::Mat &dst, float a);
bool timm_gray_sum_simd(const cv::Mat &src, int64_t *sum);
/* src through lut[k] for channel k (1 or 3 channels) into dst: AVX-512 VBMI */
bool lut_simd(const cv::Mat &src, cv::Mat &dst, const uint8_t *const lut[3]);

/* geometric ops, in this order from Rotate in the table (fq_image_aug_geom.cpp) */
enum GeomKind { G_ROTATE, G_SHEAR_X, G_SHEAR_Y, G_TRANSLATE_X, G_TRANSLATE_Y };
/* the inverse map of geometric op G at level *v (truncated for translations) for h x w */
void geom_matrix(int G, double *v, double h, double w, double *m);
const char *rotate_check(const fq_op &op);
const char *shear_check(const fq_op &op);
const char *translate_check(const fq_op &op);
int plan_rotate(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
int plan_shear_x(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
int plan_shear_y(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
int plan_translate_x(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
int plan_translate_y(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
void geom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *cutout_check(const fq_op &op);
int plan_cutout(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
void cutout_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

/* Gamma and Lighting (fq_image_aug_lut.cpp) */
struct AugGamma {
    double gamma[2]; /* drawn uniformly in [lo, hi] */
    double gain;
    double p;
};
struct AugLighting { /* AlexNet PCA noise (tensorpack imgaug.Lighting) */
    double std;
    double eigval[3];
    double eigvec[3][3];
    double p;
};
const char *gamma_check(const fq_op &op);
int plan_gamma(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
void gamma_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *lighting_check(const fq_op &op);
int plan_lighting(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
void lighting_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
/* e.cur through one table per channel (lut[k] for channel k) / one table for all, into
 * a fresh scratch buffer (cv::LUT; fq_image_aug.cpp) */
void apply_luts(Exec &e, const uint8_t (*lut)[256]);
void apply_lut(Exec &e, const uint8_t lut[256]);

/* GaussianBlur (fq_image_aug_filter.cpp) */
struct AugBlur {
    double ksize[2]; /* odd: x (width), y (height), torchvision's order */
    double sigma[2]; /* drawn uniformly in [lo, hi] */
    double p;
};
const char *blur_check(const fq_op &op);
int plan_blur(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
void blur_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

/* Run primitive op `kind` (Invert ... TranslateY) on e.cur at level `value`, in the
 * primitive's own terms (a factor, bits, a threshold, degrees, pixels), applied
 * unconditionally; geometric ops fill with fill[3].  Draws nothing. */
void aug_apply(Exec &e, int kind, double value, const double fill[3]);

/* RandAugment: num_ops (1..4) ops drawn uniformly from torchvision v2's 14, each at
 * bin `magnitude` of num_bins, signed ops negated with probability 1/2. */
struct AugRandAugment {
    double num_ops, magnitude, num_bins;
    double fill[3];
};
/* TrivialAugmentWide: one op, its bin drawn uniformly from num_bins. */
struct AugTrivialAugment {
    double num_bins;
    double fill[3];
};

/* AutoAugment: policy 0 = torchvision's AutoAugmentPolicy.IMAGENET */
struct AugAutoAugment {
    double policy;
    double fill[3];
};

const char *rand_augment_check(const fq_op &op);
const char *auto_augment_check(const fq_op &op);
int auto_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                      fq_err *err);
const char *trivial_augment_check(const fq_op &op);
int rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                      fq_err *err);
int trivial_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                         fq_err *err);
/* runs the r.applied ops of r.order (kinds, 0 = Identity) at magnitudes r.factor */
void policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

/* ---- RandomErasing (fq_image_aug_erase.cpp) ---------------------------------------- */

struct AugErase {      /* torchvision v2 RandomErasing, applied on the output values */
    double p;
    double scale[2];   /* area fraction range, 0 <= lo <= hi <= 1 */
    double ratio[2];   /* aspect (h/w) range, 0 < lo <= hi, drawn log-uniformly */
    double value[3];   /* per channel (RGB order), on the output scale; unused when random */
    double random;     /* 1: per-element standard normal values, 0: value */
};
constexpr fq_op_field kEraseFields[] = {FQ_FIELD(AugErase, p), FQ_FIELD(AugErase, scale), FQ_FIELD(AugErase, ratio),
                                        FQ_FIELD(AugErase, value), FQ_FIELD(AugErase, random)};
const char *erase_check(const fq_op &op);
int plan_erase(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
/* nothing: the final write erases the planned box (write_out reads the record) */
void erase_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
/* CustomOp / PyFunc (fq_image_custom.cpp): the user function of slot `slot` of the
 * spec's custom table, applied with probability p */
struct AugCustom {
    double slot;
    double p;
};
inline constexpr fq_op_field kCustomFields[] = {FQ_FIELD(AugCustom, slot), FQ_FIELD(AugCustom, p)};
const char *custom_check(const fq_op &op);
int custom_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
void custom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

/* ---- tensorpack: fbresnet_augmentor's crop and colour ops (fq_image_aug_tensorpack.cpp) ----- */

struct TpCrop {            /* imgaug.GoogleNetRandomCropAndResize */
    double size;           /* target_shape: output size x size */
    double area[2];        /* crop_area_fraction, 0 < lo <= hi <= 1 */
    double aspect[2];      /* aspect_ratio_range, 0 < lo <= hi (drawn uniformly) */
    double interp;         /* FQ_INTERP_* (not area) */
    double max_attempts;   /* 0 .. 1000 (0: always the fallback, no draw) */
    double short_edge;     /* the fallback's ResizeShortestEdge size, >= size (0: size) */
};
inline constexpr fq_op_field kTpCropFields[] = {FQ_FIELD(TpCrop, size), FQ_FIELD(TpCrop, area),
                                                FQ_FIELD(TpCrop, aspect), FQ_FIELD(TpCrop, interp),
                                                FQ_FIELD(TpCrop, max_attempts), FQ_FIELD(TpCrop, short_edge)};
struct TpColor {           /* ToFloat32, RandomOrderAug([BrightnessScale, Contrast, Saturation, Lighting]), ToUint8 */
    double brightness[2];  /* BrightnessScale range */
    double contrast[2];    /* Contrast factor_range */
    double saturation;     /* Saturation alpha, 0 <= alpha < 1 */
    double lighting_std;   /* Lighting std */
    double pca[3][3];      /* Lighting eigvec[i][j] * eigval[j] (tensorpack's channel order) */
    double bgr;            /* 1: tensorpack's channel i is fastq's (RGB) channel 2 - i */
};
inline constexpr fq_op_field kTpColorFields[] = {FQ_FIELD(TpColor, brightness), FQ_FIELD(TpColor, contrast),
                                                 FQ_FIELD(TpColor, saturation), FQ_FIELD(TpColor, lighting_std),
                                                 FQ_FIELD(TpColor, pca), FQ_FIELD(TpColor, bgr)};
const char *tp_crop_check(const fq_op &op);
int tp_crop_geometry(const fq_op &op, int *h, int *w);
int tp_crop_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
void tp_crop_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *tp_color_check(const fq_op &op);
int tp_color_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                  fq_err *err);
void tp_color_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
/* the JPEG decoder (fq_image_plan.cpp): true when op is a TensorpackCrop whose sampler found a box
 * (r0.applied), which is then decoded as RandomResizedCrop's (box + resize); *interp its interpolation */
bool tp_crop_box(const fq_op &op, const fq_img_op_explain &r0, int *interp);
/* ---- topic tfpolicy: GaussianNoise, TF Model Garden policies (fq_image_aug_model_garden*.cpp) ---- */
struct AugNoise {     /* torchvision v2 GaussianNoise on the [0, 1] scale */
    double mean, sigma;
    double clip;      /* 1: clip to [0, 1] (the uint8 result saturates either way) */
    double p;
};
inline constexpr fq_op_field kNoiseFields[] = {FQ_FIELD(AugNoise, mean), FQ_FIELD(AugNoise, sigma),
                                               FQ_FIELD(AugNoise, clip), FQ_FIELD(AugNoise, p)};
const char *noise_check(const fq_op &op);
int plan_noise(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
void noise_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

struct AugTFRandAugment {  /* TF Model Garden RandAugment */
    double num_layers, magnitude, cutout_const, translate_const;
    double prob_to_apply;     /* -1: None */
    double fill[3];           /* Cutout's replace (TF: 128) */
    double magnitude_std;     /* > 0: per op, level = clip(f32(magnitude) + N(0, 1), 0, 10) (TF 2.20) */
    double exclude;           /* bit o set: op o of TF's available_ops order left out */
};
struct AugTFAutoAugment {  /* TF Model Garden AutoAugment */
    double policy;            /* 0 v0, 1 reduced_imagenet, 2 simple, 3 reduced_cifar10, 4 svhn,
                                 5 panoptic_deeplab_policy, 6 vit, 7 test, 8 deit3_three_augment */
    double cutout_const, translate_const;
    double fill[3];
};
const char *tf_rand_augment_check(const fq_op &op);
const char *tf_auto_augment_check(const fq_op &op);
int tf_rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                         fq_err *err);
int tf_auto_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                         fq_err *err);
void tf_policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
/* one TF op: kind (the fastq op of that name; GaussianBlur: TF's Gaussian_Noise, a 3x3 blur),
 * TF's argument, Cutout's centre; draws nothing */
void tf_apply(Exec &e, int kind, double v, double extra, const double fill[3]);

/* ---- timm's policies (fq_image_aug_timm_policy.cpp; the sampler in geometry/fq_image_pil_affine.cpp) ---- */
struct AugTimmRandAugment { /* timm.data.auto_augment.RandAugment of AugmentOps sharing prob / magnitude / hparams */
    double num_layers;      /* 0..4 ops drawn with replacement */
    double magnitude;       /* AugmentOp.magnitude */
    double prob;            /* AugmentOp.prob: skipped if u > prob (prob < 1) */
    double magnitude_std;   /* 0: fixed; > 0: gauss(magnitude, std); -1: inf, uniform(0, magnitude) */
    double magnitude_max;   /* the clip's upper bound (timm: magnitude_max or 10) */
    double translate_pct;   /* TranslateXRel / YRel */
    double translate_const; /* TranslateX / Y (absolute pixels) */
    double interp;          /* 0 bilinear, 1 bicubic, 2 random (one of the two per op) */
    double fill[3];         /* hparams img_mean */
    double ops;             /* bit t: timm op t of kTimmNames is in the list */
    double weighted;        /* 1: timm's 'weights' table (_RAND_WEIGHTED_0), drawn without replacement */
};
struct AugTimmAutoAugment { /* timm.data.auto_augment.AutoAugment of a timm policy table */
    double policy;             /* 0 original, 1 originalr, 2 v0, 3 v0r, 4 3a */
    double magnitude_std, magnitude_max, translate_pct, translate_const, interp; /* as AugTimmRandAugment */
    double fill[3];
};
struct AugTimmAugMix {      /* timm.data.auto_augment.AugMixAugment (blended=False) */
    double magnitude;
    double width;              /* 1..4 chains */
    double depth;              /* 1..3, -1: U{1..3} per chain */
    double alpha;              /* Dirichlet / Beta concentration */
    double magnitude_std, magnitude_max, translate_pct, translate_const, interp; /* as AugTimmRandAugment */
    double fill[3];
    double ops;                /* bit mask over the timm ops (default timm's _AUGMIX_TRANSFORMS) */
};
const char *timm_augmix_check(const fq_op &op);
int timm_augmix_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                     fq_err *err);
void timm_augmix_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *timm_rand_augment_check(const fq_op &op);
const char *timm_auto_augment_check(const fq_op &op);
int timm_auto_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                           fq_err *err);
int timm_rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                           fq_err *err);
void timm_policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
/* Pillow's Image.transform(AFFINE, a, BILINEAR / BICUBIC, fillcolor=fill) of src into dst
 * (dst: its own buffer, any size; 1 or 3 channels) */
void pil_affine(const cv::Mat &src, cv::Mat &dst, const double a[6], bool bicubic, const uint8_t fill[3]);
/* the same for 3 channels with AVX2 (geometry/fq_image_pil_affine_avx2.cpp: the channels as
 * the lanes of the same double operations, the same bytes); checks no CPU feature:
 * pil_affine calls it only after fq_cpu_has(FQ_CPU_AVX2) */
void pil_affine_rgb_avx2(const cv::Mat &src, cv::Mat &dst, const double a[6], bool bicubic, const uint8_t fill[3]);

}  // namespace fqi

#endif
