/* fq_image_aug_lut.cpp - the augmentation primitives that are one lookup table per
 * channel with a drawn parameter: Gamma (torchvision v2 adjust_gamma) and Lighting
 * (tensorpack's AlexNet PCA noise).  Their records end this file (family kOpsLut);
 * semantics: docs/ops.md.  Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"

#include <algorithm>
#include <cmath>

namespace fqi {

const char *gamma_check(const fq_op &op)
{
    const AugGamma &q = params<AugGamma>(op);
    if (!aug_valid_level(q.gamma) || q.gamma[0] < 0 || q.gamma[1] > 1e3)
        return "gamma must satisfy 0 <= min <= max <= 1000";
    if (!(std::isfinite(q.gain) && q.gain >= 0 && q.gain <= 1e3))
        return "gain must be in [0, 1000]";
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

int plan_gamma(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugGamma &q = params<AugGamma>(op);
    aug_plan_p_level(rng, q.p, q.gamma, r);
    return FQ_OK;
}

/* torchvision v2 adjust_gamma on uint8: x * f32(1/255), ^gamma (float32), * gain clamped to
 * [0, 1] when gain != 1, back to uint8 as to_dtype_image: trunc(v * 255.999) */
void gamma_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const float g = (float)r.factor[0], gain = (float)params<AugGamma>(op).gain;
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) {
        float t = std::pow((float)v * (float)(1.0 / 255.0), g);
        if (gain != 1.f)
            t = std::min(std::max(t * gain, 0.f), 1.f);
        lut[v] = (uint8_t)(t * (float)(255.0 + 1.0 - 1e-3));
    }
    apply_lut(e, lut);
}

const char *lighting_check(const fq_op &op)
{
    const AugLighting &q = params<AugLighting>(op);
    if (!(std::isfinite(q.std) && q.std >= 0 && q.std <= 1e3))
        return "std must be in [0, 1000]";
    for (int k = 0; k < 3; k++) {
        if (!std::isfinite(q.eigval[k]) || std::fabs(q.eigval[k]) > 1e4)
            return "eigval must be 3 finite numbers";
        for (int j = 0; j < 3; j++)
            if (!std::isfinite(q.eigvec[k][j]) || std::fabs(q.eigvec[k][j]) > 1e4)
                return "eigvec must be 3 x 3 finite numbers";
    }
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

/* alpha_k = float32(N(0, 1) * std), N by Box-Muller from two uniforms each (k = 0, 1, 2);
 * the increment of channel c is sum_j eigvec[c][j] * alpha_j * eigval[j] (double) */
int plan_lighting(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugLighting &q = params<AugLighting>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    if (!r.applied)
        return FQ_OK;
    for (int k = 0; k < 3; k++) {
        double u1 = fq_rng_uniform(rng), u2 = fq_rng_uniform(rng);
        double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
        r.factor[k] = (float)(z * q.std);
    }
    for (int c = 0; c < 3; c++) {
        double inc = 0;
        for (int j = 0; j < 3; j++)
            inc += q.eigvec[c][j] * (r.factor[j] * q.eigval[j]);
        r.params[c] = inc;
    }
    return FQ_OK;
}

/* trunc(clip(x + inc[c], 0, 255)) per channel (1 channel: inc[0]) */
void lighting_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            double t = v + r.params[c];
            lut[c][v] = (uint8_t)(t < 0 ? 0 : (t > 255 ? 255 : t));
        }
    apply_luts(e, lut);
}

}  // namespace fqi

/* ---- the records of this family, Gamma / Lighting: kinds fixed forever;
 * fq_image_op_table.cpp assembles the families */
namespace {

constexpr fq_op_field kGammaFields[] = {FQ_FIELD(fqi::AugGamma, gamma), FQ_FIELD(fqi::AugGamma, gain),
                                        FQ_FIELD(fqi::AugGamma, p)};
constexpr fq_op_field kLightingFields[] = {FQ_FIELD(fqi::AugLighting, std), FQ_FIELD(fqi::AugLighting, eigval),
                                           FQ_FIELD(fqi::AugLighting, eigvec), FQ_FIELD(fqi::AugLighting, p)};

constexpr fqi::OpImpl kLutRecords[] = {
    {28, "Gamma", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugGamma, kGammaFields),
     fqi::gamma_check, fqi::keeps_size, fqi::plan_gamma, fqi::gamma_exec},
    {30, "Lighting", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_LIGHTING,
     FQ_PARAMS(fqi::AugLighting, kLightingFields), fqi::lighting_check, fqi::keeps_size, fqi::plan_lighting,
     fqi::lighting_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsLut, kLutRecords)
