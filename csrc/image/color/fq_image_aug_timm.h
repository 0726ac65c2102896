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

/* op t at timm's argument v on e.cur; extra: the resample (1 bicubic) of a geometric op,
 * the radius drawn by GaussianBlurRand; fill: the geometric ops' fillcolor */
void timm_apply(Exec &e, int t, double v, double extra, const uint8_t fill[3]);

}  // namespace timm
}  // namespace fqi

#endif
