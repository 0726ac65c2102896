/* fq_image_aug_timm.h - timm's ops (fq_image_aug_timm_ops.cpp: PIL semantics), shared
 * with the policy drivers that draw them (fq_image_aug_timm_policy.cpp: RandAugment,
 * AutoAugment, AugMix).  Private to the color stage. */
#ifndef FQ_IMAGE_AUG_TIMM_H
#define FQ_IMAGE_AUG_TIMM_H

#include <cstdint>

#include "image/internal/fq_image_aug.h"

namespace fqi {
namespace timm {

/* timm's NAME_TO_OP names that fastq implements; the Python list TIMM_OPS has this order */
enum TimmOp { M_AUTOCONTRAST, M_EQUALIZE, M_INVERT, M_ROTATE, M_POSTERIZE, M_POSTERIZE_INC, M_POSTERIZE_ORIG,
              M_SOLARIZE, M_SOLARIZE_INC, M_SOLARIZE_ADD, M_COLOR, M_COLOR_INC, M_CONTRAST, M_CONTRAST_INC,
              M_BRIGHTNESS, M_BRIGHTNESS_INC, M_SHARPNESS, M_SHARPNESS_INC, M_SHEAR_X, M_SHEAR_Y, M_TRANSLATE_X,
              M_TRANSLATE_Y, M_TRANSLATE_X_REL, M_TRANSLATE_Y_REL, M_DESATURATE, M_GAUSSIAN_BLUR,
              M_GAUSSIAN_BLUR_RAND, M_COUNT };

inline bool geometric(int t) { return t == M_ROTATE || (t >= M_SHEAR_X && t <= M_TRANSLATE_Y_REL); }

/* Image.blend(degenerate, image, alpha) (Pillow's Blend.c: float32 alpha; a + alpha (b - a)) */
inline uint8_t blend(int d, int i, float a)
{
    const float t = (float)d + a * (float)(i - d);
    if (a >= 0.f && a <= 1.f)
        return (uint8_t)t;
    return t <= 0.f ? 0 : (t >= 255.f ? 255 : (uint8_t)t);
}

/* Pillow's RGB -> L (ITU-R 601-2, 16-bit fixed point, rounded) */
inline int pil_gray(const uint8_t *s) { return (s[0] * 19595 + s[1] * 38470 + s[2] * 7471 + 0x8000) >> 16; }

/* Pillow's SMOOTH (3x3, 1 1 1 / 1 5 1 / 1 1 1, / 13) of element i of interior row m:
 * float32, rows below, middle, above (Filter.c's order), + 0.5, truncated */
inline uint8_t pil_smooth(const uint8_t *u, const uint8_t *m, const uint8_t *b, int i, int c)
{
    const float k1 = (float)(1.0 / 13.0), k5 = (float)(5.0 / 13.0);
    float ss = 0.5f;
    ss += (float)b[i - c] * k1 + (float)b[i] * k1 + (float)b[i + c] * k1;
    ss += (float)m[i - c] * k1 + (float)m[i] * k5 + (float)m[i + c] * k1;
    ss += (float)u[i - c] * k1 + (float)u[i] * k1 + (float)u[i + c] * k1;
    return ss <= 0.f ? 0 : (ss >= 255.f ? 255 : (uint8_t)ss);
}

/* op t at timm's argument v on e.cur; extra: the resample (1 bicubic) of a geometric op,
 * the radius drawn by GaussianBlurRand; fill: the geometric ops' fillcolor */
void timm_apply(Exec &e, int t, double v, double extra, const uint8_t fill[3]);

}  // namespace timm
}  // namespace fqi

#endif
