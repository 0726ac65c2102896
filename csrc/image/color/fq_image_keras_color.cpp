/* fq_image_keras_color.cpp - Keras 3's RandomContrast and RandomBrightness as native ops
 * (keras/src/layers/preprocessing/image_preprocessing/random_contrast.py,
 * random_brightness.py), per image:
 *   contrast:   f ~ U(1 - lower, 1 + upper) (float32); m_c = the mean of channel c over
 *               the image; out = clip((x - m_c) * f + m_c, value_range), in float32;
 *   brightness: delta = U(factor) * (value_range[1] - value_range[0]) (float32);
 *               out = clip(x + delta, value_range).
 * fastq holds uint8 pixels: the float32 result is rounded half to even (Keras outputs it
 * as float32).  Both are one table per channel (cv::LUT / apply_luts). */
#include "image/internal/fq_image_keras.h"
#include "image/internal/fq_image_aug.h" /* apply_lut(s) */

#include <cmath>

#include <opencv2/core.hpp>

namespace fqi {

namespace {

inline uint8_t clip_round(float v, float lo, float hi)
{
    v = v < lo ? lo : (v > hi ? hi : v);
    return (uint8_t)std::nearbyint(v); /* lo, hi are integers in [0, 255] */
}

}  // namespace

const char *keras_color_check(const fq_op &op)
{
    const KerasColor &p = params<KerasColor>(op);
    if (!(std::isfinite(p.factor[0]) && std::isfinite(p.factor[1]) && p.factor[0] <= p.factor[1] &&
          std::fabs(p.factor[0]) <= 1e6 && std::fabs(p.factor[1]) <= 1e6))
        return "factor must be a finite (min, max) range";
    const double lo = p.value_range[0], hi = p.value_range[1];
    if (!(std::isfinite(lo) && std::isfinite(hi) && lo == std::floor(lo) && hi == std::floor(hi) && 0 <= lo &&
          lo < hi && hi <= 255))
        return "value_range must be integers 0 <= min < max <= 255";
    return nullptr;
}

int keras_color_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const KerasColor &p = params<KerasColor>(op);
    r.applied = 1;
    r.factor[0] = (float)fq_rng_uniform_range(rng, p.factor[0], p.factor[1]);
    return FQ_OK;
}

void keras_contrast_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const KerasColor &p = params<KerasColor>(op);
    const float f = (float)r.factor[0], lo = (float)p.value_range[0], hi = (float)p.value_range[1];
    const cv::Scalar mean = cv::mean(e.cur); /* exact sums of integers / count, then float32 */
    uint8_t lut[3][256] = {};
    const int c = e.cur.channels();
    for (int k = 0; k < c && k < 3; k++) {
        const float m = (float)mean[k];
        r.params[k] = m;
        for (int v = 0; v < 256; v++)
            lut[k][v] = clip_round(((float)v - m) * f + m, lo, hi);
    }
    apply_luts(e, lut);
}

void keras_brightness_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const KerasColor &p = params<KerasColor>(op);
    const float lo = (float)p.value_range[0], hi = (float)p.value_range[1];
    const float delta = (float)r.factor[0] * (hi - lo);
    r.params[0] = delta;
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = clip_round((float)v + delta, lo, hi);
    apply_lut(e, lut);
}

}  // namespace fqi

/* ---- the records of this family, Keras 3's RandomContrast / RandomBrightness: kinds
 * fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kKerasColorRecords[] = {
    {55, "KerasRandomContrast", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_KERAS,
     FQ_PARAMS(fqi::KerasColor, fqi::kKerasColorFields), fqi::keras_color_check, fqi::keeps_size, fqi::keras_color_plan,
     fqi::keras_contrast_exec},
    {56, "KerasRandomBrightness", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_KERAS,
     FQ_PARAMS(fqi::KerasColor, fqi::kKerasColorFields), fqi::keras_color_check, fqi::keeps_size, fqi::keras_color_plan,
     fqi::keras_brightness_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsKerasColor, kKerasColorRecords)
