/* fq_image_aug_model_garden_policy.cpp - TF Model Garden's RandAugment (magnitude_std, exclude_ops)
 * and AutoAugment (v0, reduced_imagenet, simple, reduced_cifar10, svhn,
 * panoptic_deeplab_policy, vit, test, deit3_three_augment) of official/vision/ops/augment.py
 * (tf-models-official 2.20) with TF's own op definitions where they differ from
 * torchvision's: blend, AutoContrast (float scale), Color (tf.image.rgb_to_grayscale),
 * Contrast (tf.image.adjust_contrast), Sharpness (truncated smooth, blend), SolarizeAdd
 * (threshold 128), Cutout, and the geometric ops (ImageProjectiveTransformV3, nearest,
 * fill_mode "reflect": the wrap / unwrap fill of 128 never triggers).  Invert, Equalize,
 * Posterize, Solarize and Brightness are the shared primitives.  The plan draws every
 * choice; the explain record holds them (order[k] = the op's kind, 0 for Identity;
 * factor[k] = TF's argument; matrix[k] = the level it came from; params[k] = Cutout's
 * centre cy * 65536 + cx; params[4] = AutoAugment's sub-policy).  Semantics: docs/ops.md.
 * Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"

#include <cmath>
#include <cstring>

#include <opencv2/core.hpp>

namespace {

using fqi::AugTFAutoAugment;
using fqi::AugTFRandAugment;
using fqi::Exec;
using fqi::params;

/* TF's RandAugment available_ops order */
enum TFOp { T_AUTOCONTRAST, T_EQUALIZE, T_INVERT, T_ROTATE, T_POSTERIZE, T_SOLARIZE, T_COLOR, T_CONTRAST,
            T_BRIGHTNESS, T_SHARPNESS, T_SHEAR_X, T_SHEAR_Y, T_TRANSLATE_X, T_TRANSLATE_Y, T_CUTOUT, T_SOLARIZE_ADD,
            T_COUNT,
            /* AutoAugment's deit3_three_augment only (fastq's op names: Grayscale, GaussianBlur) */
            T_GRAYSCALE = T_COUNT, T_GAUSSIAN_NOISE, T_ALL };
const char *const kTFNames[T_ALL] = {"AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize",
                                    "Color", "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY",
                                    "TranslateX", "TranslateY", "Cutout", "SolarizeAdd", "Grayscale",
                                    "GaussianBlur"};

struct SubOp {
    int op;
    double p, level;
};
/* AutoAugment.policy_v0() */
const SubOp kV0[][2] = {
    {{T_EQUALIZE, 0.8, 1}, {T_SHEAR_Y, 0.8, 4}},      {{T_COLOR, 0.4, 9}, {T_EQUALIZE, 0.6, 3}},
    {{T_COLOR, 0.4, 1}, {T_ROTATE, 0.6, 8}},          {{T_SOLARIZE, 0.8, 3}, {T_EQUALIZE, 0.4, 7}},
    {{T_SOLARIZE, 0.4, 2}, {T_SOLARIZE, 0.6, 2}},     {{T_COLOR, 0.2, 0}, {T_EQUALIZE, 0.8, 8}},
    {{T_EQUALIZE, 0.4, 8}, {T_SOLARIZE_ADD, 0.8, 3}}, {{T_SHEAR_X, 0.2, 9}, {T_ROTATE, 0.6, 8}},
    {{T_COLOR, 0.6, 1}, {T_EQUALIZE, 1.0, 2}},        {{T_INVERT, 0.4, 9}, {T_ROTATE, 0.6, 0}},
    {{T_EQUALIZE, 1.0, 9}, {T_SHEAR_Y, 0.6, 3}},      {{T_COLOR, 0.4, 7}, {T_EQUALIZE, 0.6, 0}},
    {{T_POSTERIZE, 0.4, 6}, {T_AUTOCONTRAST, 0.4, 7}}, {{T_SOLARIZE, 0.6, 8}, {T_COLOR, 0.6, 9}},
    {{T_SOLARIZE, 0.2, 4}, {T_ROTATE, 0.8, 9}},       {{T_ROTATE, 1.0, 7}, {T_TRANSLATE_Y, 0.8, 9}},
    {{T_SHEAR_X, 0.0, 0}, {T_SOLARIZE, 0.8, 4}},      {{T_SHEAR_Y, 0.8, 0}, {T_COLOR, 0.6, 4}},
    {{T_COLOR, 1.0, 0}, {T_ROTATE, 0.6, 2}},          {{T_EQUALIZE, 0.8, 4}, {T_EQUALIZE, 0.0, 8}},
    {{T_EQUALIZE, 1.0, 4}, {T_AUTOCONTRAST, 0.6, 2}}, {{T_SHEAR_Y, 0.4, 7}, {T_SOLARIZE_ADD, 0.6, 7}},
    {{T_POSTERIZE, 0.8, 2}, {T_SOLARIZE, 0.6, 10}},   {{T_SOLARIZE, 0.6, 8}, {T_EQUALIZE, 0.6, 1}},
    {{T_COLOR, 0.8, 6}, {T_ROTATE, 0.4, 5}},
};
/* AutoAugment.policy_reduced_imagenet() */
const SubOp kReducedImageNet[][2] = {
    {{T_POSTERIZE, 0.4, 8}, {T_ROTATE, 0.6, 9}},      {{T_SOLARIZE, 0.6, 5}, {T_AUTOCONTRAST, 0.6, 5}},
    {{T_EQUALIZE, 0.8, 8}, {T_EQUALIZE, 0.6, 3}},     {{T_POSTERIZE, 0.6, 7}, {T_POSTERIZE, 0.6, 6}},
    {{T_EQUALIZE, 0.4, 7}, {T_SOLARIZE, 0.2, 4}},     {{T_EQUALIZE, 0.4, 4}, {T_ROTATE, 0.8, 8}},
    {{T_SOLARIZE, 0.6, 3}, {T_EQUALIZE, 0.6, 7}},     {{T_POSTERIZE, 0.8, 5}, {T_EQUALIZE, 1.0, 2}},
    {{T_ROTATE, 0.2, 3}, {T_SOLARIZE, 0.6, 8}},       {{T_EQUALIZE, 0.6, 8}, {T_POSTERIZE, 0.4, 6}},
    {{T_ROTATE, 0.8, 8}, {T_COLOR, 0.4, 0}},          {{T_ROTATE, 0.4, 9}, {T_EQUALIZE, 0.6, 2}},
    {{T_EQUALIZE, 0.0, 7}, {T_EQUALIZE, 0.8, 8}},     {{T_INVERT, 0.6, 4}, {T_EQUALIZE, 1.0, 8}},
    {{T_COLOR, 0.6, 4}, {T_CONTRAST, 1.0, 8}},        {{T_ROTATE, 0.8, 8}, {T_COLOR, 1.0, 2}},
    {{T_COLOR, 0.8, 8}, {T_SOLARIZE, 0.8, 7}},        {{T_SHARPNESS, 0.4, 7}, {T_INVERT, 0.6, 8}},
    {{T_SHEAR_X, 0.6, 5}, {T_EQUALIZE, 1.0, 9}},      {{T_COLOR, 0.4, 0}, {T_EQUALIZE, 0.6, 3}},
    {{T_EQUALIZE, 0.4, 7}, {T_SOLARIZE, 0.2, 4}},     {{T_SOLARIZE, 0.6, 5}, {T_AUTOCONTRAST, 0.6, 5}},
    {{T_INVERT, 0.6, 4}, {T_EQUALIZE, 1.0, 8}},       {{T_COLOR, 0.6, 4}, {T_CONTRAST, 1.0, 8}},
    {{T_EQUALIZE, 0.8, 8}, {T_EQUALIZE, 0.6, 3}},
};
/* AutoAugment.policy_simple() */
const SubOp kSimple[][2] = {
    {{T_COLOR, 0.4, 9}, {T_EQUALIZE, 0.6, 3}},        {{T_SOLARIZE, 0.8, 3}, {T_EQUALIZE, 0.4, 7}},
    {{T_SOLARIZE, 0.4, 2}, {T_SOLARIZE, 0.6, 2}},     {{T_COLOR, 0.2, 0}, {T_EQUALIZE, 0.8, 8}},
    {{T_EQUALIZE, 0.4, 8}, {T_SOLARIZE_ADD, 0.8, 3}}, {{T_COLOR, 0.6, 1}, {T_EQUALIZE, 1.0, 2}},
    {{T_COLOR, 0.4, 7}, {T_EQUALIZE, 0.6, 0}},        {{T_POSTERIZE, 0.4, 6}, {T_AUTOCONTRAST, 0.4, 7}},
    {{T_SOLARIZE, 0.6, 8}, {T_COLOR, 0.6, 9}},        {{T_EQUALIZE, 0.8, 4}, {T_EQUALIZE, 0.0, 8}},
    {{T_EQUALIZE, 1.0, 4}, {T_AUTOCONTRAST, 0.6, 2}}, {{T_POSTERIZE, 0.8, 2}, {T_SOLARIZE, 0.6, 10}},
    {{T_SOLARIZE, 0.6, 8}, {T_EQUALIZE, 0.6, 1}},
};
/* AutoAugment.policy_reduced_cifar10() */
const SubOp kReducedCifar10[][2] = {
    {{T_INVERT, 0.1, 7}, {T_CONTRAST, 0.2, 6}},          {{T_ROTATE, 0.7, 2}, {T_TRANSLATE_X, 0.3, 9}},
    {{T_SHARPNESS, 0.8, 1}, {T_SHARPNESS, 0.9, 3}},      {{T_SHEAR_Y, 0.5, 8}, {T_TRANSLATE_Y, 0.7, 9}},
    {{T_AUTOCONTRAST, 0.5, 8}, {T_EQUALIZE, 0.9, 2}},    {{T_SHEAR_Y, 0.2, 7}, {T_POSTERIZE, 0.3, 7}},
    {{T_COLOR, 0.4, 3}, {T_BRIGHTNESS, 0.6, 7}},         {{T_SHARPNESS, 0.3, 9}, {T_BRIGHTNESS, 0.7, 9}},
    {{T_EQUALIZE, 0.6, 5}, {T_EQUALIZE, 0.5, 1}},        {{T_CONTRAST, 0.6, 7}, {T_SHARPNESS, 0.6, 5}},
    {{T_COLOR, 0.7, 7}, {T_TRANSLATE_X, 0.5, 8}},        {{T_EQUALIZE, 0.3, 7}, {T_AUTOCONTRAST, 0.4, 8}},
    {{T_TRANSLATE_Y, 0.4, 3}, {T_SHARPNESS, 0.2, 6}},    {{T_BRIGHTNESS, 0.9, 6}, {T_COLOR, 0.2, 8}},
    {{T_SOLARIZE, 0.5, 2}, {T_INVERT, 0.0, 3}},          {{T_EQUALIZE, 0.2, 0}, {T_AUTOCONTRAST, 0.6, 0}},
    {{T_EQUALIZE, 0.2, 8}, {T_EQUALIZE, 0.6, 4}},        {{T_COLOR, 0.9, 9}, {T_EQUALIZE, 0.6, 6}},
    {{T_AUTOCONTRAST, 0.8, 4}, {T_SOLARIZE, 0.2, 8}},    {{T_BRIGHTNESS, 0.1, 3}, {T_COLOR, 0.7, 0}},
    {{T_SOLARIZE, 0.4, 5}, {T_AUTOCONTRAST, 0.9, 3}},    {{T_TRANSLATE_Y, 0.9, 9}, {T_TRANSLATE_Y, 0.7, 9}},
    {{T_AUTOCONTRAST, 0.9, 2}, {T_SOLARIZE, 0.8, 3}},    {{T_EQUALIZE, 0.8, 8}, {T_INVERT, 0.1, 3}},
    {{T_TRANSLATE_Y, 0.7, 9}, {T_AUTOCONTRAST, 0.9, 1}},
};
/* AutoAugment.policy_svhn() */
const SubOp kSvhn[][2] = {
    {{T_SHEAR_X, 0.9, 4}, {T_INVERT, 0.2, 3}},       {{T_SHEAR_Y, 0.9, 8}, {T_INVERT, 0.7, 5}},
    {{T_EQUALIZE, 0.6, 5}, {T_SOLARIZE, 0.6, 6}},    {{T_INVERT, 0.9, 3}, {T_EQUALIZE, 0.6, 3}},
    {{T_EQUALIZE, 0.6, 1}, {T_ROTATE, 0.9, 3}},      {{T_SHEAR_X, 0.9, 4}, {T_AUTOCONTRAST, 0.8, 3}},
    {{T_SHEAR_Y, 0.9, 8}, {T_INVERT, 0.4, 5}},       {{T_SHEAR_Y, 0.9, 5}, {T_SOLARIZE, 0.2, 6}},
    {{T_INVERT, 0.9, 6}, {T_AUTOCONTRAST, 0.8, 1}},  {{T_EQUALIZE, 0.6, 3}, {T_ROTATE, 0.9, 3}},
    {{T_SHEAR_X, 0.9, 4}, {T_SOLARIZE, 0.3, 3}},     {{T_SHEAR_Y, 0.8, 8}, {T_INVERT, 0.7, 4}},
    {{T_EQUALIZE, 0.9, 5}, {T_TRANSLATE_Y, 0.6, 6}}, {{T_INVERT, 0.9, 4}, {T_EQUALIZE, 0.6, 7}},
    {{T_CONTRAST, 0.3, 3}, {T_ROTATE, 0.8, 4}},      {{T_INVERT, 0.8, 5}, {T_TRANSLATE_Y, 0.0, 2}},
    {{T_SHEAR_Y, 0.7, 6}, {T_SOLARIZE, 0.4, 8}},     {{T_INVERT, 0.6, 4}, {T_ROTATE, 0.8, 4}},
    {{T_SHEAR_Y, 0.3, 7}, {T_TRANSLATE_X, 0.9, 3}},  {{T_SHEAR_X, 0.1, 6}, {T_INVERT, 0.6, 5}},
    {{T_SOLARIZE, 0.7, 2}, {T_TRANSLATE_Y, 0.6, 7}}, {{T_SHEAR_Y, 0.8, 4}, {T_INVERT, 0.8, 8}},
    {{T_SHEAR_X, 0.7, 9}, {T_TRANSLATE_Y, 0.8, 3}},  {{T_SHEAR_Y, 0.8, 5}, {T_AUTOCONTRAST, 0.7, 3}},
    {{T_SHEAR_X, 0.7, 2}, {T_INVERT, 0.1, 5}},
};
/* AutoAugment.panoptic_deeplab_policy() */
const SubOp kPanoptic[][2] = {
    {{T_SHARPNESS, 0.4, 1.4}, {T_BRIGHTNESS, 0.2, 2.0}}, {{T_EQUALIZE, 0.0, 1.8}, {T_CONTRAST, 0.2, 2.0}},
    {{T_SHARPNESS, 0.2, 1.8}, {T_COLOR, 0.2, 1.8}},      {{T_SOLARIZE, 0.2, 1.4}, {T_EQUALIZE, 0.6, 1.8}},
    {{T_SHARPNESS, 0.2, 0.2}, {T_EQUALIZE, 0.2, 1.4}},
};
/* AutoAugment.vit() */
const SubOp kVit[][3] = {
    {{T_SHARPNESS, 0.4, 1.4}, {T_BRIGHTNESS, 0.2, 2.0}, {T_CUTOUT, 0.8, 8}},
    {{T_EQUALIZE, 0.0, 1.8}, {T_CONTRAST, 0.2, 2.0}, {T_CUTOUT, 0.8, 8}},
    {{T_SHARPNESS, 0.2, 1.8}, {T_COLOR, 0.2, 1.8}, {T_CUTOUT, 0.8, 8}},
    {{T_SOLARIZE, 0.2, 1.4}, {T_EQUALIZE, 0.6, 1.8}, {T_CUTOUT, 0.8, 8}},
    {{T_SHARPNESS, 0.2, 0.2}, {T_EQUALIZE, 0.2, 1.4}, {T_CUTOUT, 0.8, 8}},
    {{T_SHARPNESS, 0.4, 7}, {T_INVERT, 0.6, 8}, {T_CUTOUT, 0.8, 8}},
    {{T_INVERT, 0.6, 4}, {T_EQUALIZE, 1.0, 8}, {T_CUTOUT, 0.8, 8}},
    {{T_POSTERIZE, 0.6, 7}, {T_POSTERIZE, 0.6, 6}, {T_CUTOUT, 0.8, 8}},
    {{T_SOLARIZE, 0.6, 5}, {T_AUTOCONTRAST, 0.6, 5}, {T_CUTOUT, 0.8, 8}},
};
/* AutoAugment.deit3_three_augment() */
const SubOp kDeit3[][1] = {{{T_GRAYSCALE, 1.0, 0}}, {{T_SOLARIZE, 1.0, 5}}, {{T_GAUSSIAN_NOISE, 1.0, 1}}};
/* AutoAugment.policy_test() */
const SubOp kTest[][2] = {{{T_TRANSLATE_X, 1.0, 4}, {T_EQUALIZE, 1.0, 10}}};

struct Policy {
    const SubOp *ops; /* n sub-policies of `per` ops, row-major */
    int n, per;
};
#define FQ_POLICY(t) {&t[0][0], (int)(sizeof t / sizeof t[0]), (int)(sizeof t[0] / sizeof t[0][0])}
/* TFAutoAugment's policy field indexes this */
const Policy kPolicies[] = {FQ_POLICY(kV0),         FQ_POLICY(kReducedImageNet), FQ_POLICY(kSimple),
                            FQ_POLICY(kReducedCifar10), FQ_POLICY(kSvhn),      FQ_POLICY(kPanoptic),
                            FQ_POLICY(kVit),        FQ_POLICY(kTest),            FQ_POLICY(kDeit3)};
constexpr int kNumPolicies = (int)(sizeof kPolicies / sizeof kPolicies[0]);

bool signed_op(int o)
{
    return o == T_ROTATE || o == T_SHEAR_X || o == T_SHEAR_Y || o == T_TRANSLATE_X || o == T_TRANSLATE_Y;
}

/* level_to_arg with a python number as the level: python doubles (int() truncates) */
double tf_arg(int o, double level, double cutout_const, double translate_const)
{
    const double l = level / 10.0;
    switch (o) {
    case T_ROTATE: return l * 30.0;
    case T_SHEAR_X:
    case T_SHEAR_Y: return l * 0.3;
    case T_TRANSLATE_X:
    case T_TRANSLATE_Y: return l * translate_const;
    case T_COLOR:
    case T_CONTRAST:
    case T_BRIGHTNESS:
    case T_SHARPNESS: return l * 1.8 + 0.1;
    case T_POSTERIZE: return std::trunc(l * 4.0);
    case T_SOLARIZE: return std::trunc(l * 256.0);
    case T_SOLARIZE_ADD: return std::trunc(l * 110.0);
    case T_CUTOUT: return std::trunc(l * cutout_const);
    default: return 0.0;
    }
}

/* level_to_arg with a float32 tensor as the level (magnitude_std > 0): each step rounds to
 * float32, the python constants too (no FMA on the plain x86-64 target, so none is fused) */
double tf_arg_f32(int o, float level, double cutout_const, double translate_const)
{
    const float l = level / 10.0f;
    switch (o) {
    case T_ROTATE: return l * 30.0f;
    case T_SHEAR_X:
    case T_SHEAR_Y: return l * 0.3f;
    case T_TRANSLATE_X:
    case T_TRANSLATE_Y: return l * (float)translate_const;
    case T_COLOR:
    case T_CONTRAST:
    case T_BRIGHTNESS:
    case T_SHARPNESS: {
        const float m = l * 1.8f;
        return m + 0.1f;
    }
    case T_POSTERIZE: return std::trunc(l * 4.0f);
    case T_SOLARIZE: return std::trunc(l * 256.0f);
    case T_SOLARIZE_ADD: return std::trunc(l * 110.0f);
    case T_CUTOUT: return std::trunc(l * (float)cutout_const);
    default: return 0.0;
    }
}

/* one op into slot k: its argument (f32: the level is TF's float32 tensor), the sign
 * (_randomly_negate_tensor: negated if u < 0.5), Cutout's centre (row U{0..H-1}, then
 * column U{0..W-1}); matrix[k] = the level */
void draw_op(fq_rng *rng, int k, int o, double level, bool f32, double cc, double tc, int h, int w,
             fq_img_op_explain &r)
{
    double a = f32 ? tf_arg_f32(o, (float)level, cc, tc) : tf_arg(o, level, cc, tc);
    if (signed_op(o) && fq_rng_uniform(rng) < 0.5)
        a = -a;
    if (o == T_GAUSSIAN_NOISE) { /* sigma = np.random.uniform(level/10, translate_const * level/10) */
        const double lo = level / 10.0, hi = tc * lo;
        a = lo + (hi - lo) * fq_rng_uniform(rng);
    }
    r.order[k] = fq_img_op_kind(kTFNames[o]);
    r.factor[k] = a;
    r.params[k] = 0;
    r.matrix[k] = level;
    if (o == T_CUTOUT) {
        const double cy = (double)fq_rng_next_below(rng, (uint64_t)h), cx = (double)fq_rng_next_below(rng, (uint64_t)w);
        r.params[k] = cy * 65536.0 + cx;
    }
}

void set_identity(fq_img_op_explain &r, int k) { r.order[k] = 0, r.factor[k] = 0, r.params[k] = 0, r.matrix[k] = 0; }

/* _parse_policy_info with level_std > 0: level = clip(f32(magnitude) + z, 0, 10) in float32,
 * z standard normal (tf.random.normal's default stddev 1: TF 2.20 does not scale it by
 * magnitude_std); z by Box-Muller (cosine branch) from two uniforms */
float tf_noisy_level(fq_rng *rng, double magnitude)
{
    const double u1 = fq_rng_uniform(rng), u2 = fq_rng_uniform(rng);
    const float z = (float)(std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2));
    const float l = (float)magnitude + z;
    return l < 0.f ? 0.f : (l > 10.f ? 10.f : l);
}

bool valid_fill(const double *f)
{
    for (int k = 0; k < 3; k++)
        if (!(std::isfinite(f[k]) && f[k] >= 0 && f[k] <= 255 && f[k] == std::floor(f[k])))
            return false;
    return true;
}

}  // namespace

namespace fqi {

const char *tf_rand_augment_check(const fq_op &op)
{
    const AugTFRandAugment &q = params<AugTFRandAugment>(op);
    if (!(aug_is_int(q.num_layers) && q.num_layers >= 0 && q.num_layers <= 4))
        return "num_layers must be an integer in [0, 4]";
    if (!(std::isfinite(q.magnitude) && q.magnitude >= 0 && q.magnitude <= 10))
        return "magnitude must be in [0, 10]";
    if (!(std::isfinite(q.cutout_const) && q.cutout_const >= 0 && q.cutout_const <= 1e4))
        return "cutout_const must be in [0, 10000]";
    if (!(std::isfinite(q.translate_const) && q.translate_const >= 0 && q.translate_const <= 1e4))
        return "translate_const must be in [0, 10000]";
    if (!(q.prob_to_apply == -1 || aug_valid_prob(q.prob_to_apply)))
        return "prob_to_apply must be in [0, 1] (or -1: None)";
    if (!(std::isfinite(q.magnitude_std) && q.magnitude_std >= 0 && q.magnitude_std <= 10))
        return "magnitude_std must be in [0, 10]";
    if (!(aug_is_int(q.exclude) && q.exclude >= 0 && q.exclude < (1 << T_COUNT)))
        return "exclude must be a bit mask over the 16 ops (an integer in [0, 65535])";
    return valid_fill(q.fill) ? nullptr : "fill must be 3 integers in [0, 255]";
}

const char *tf_auto_augment_check(const fq_op &op)
{
    const AugTFAutoAugment &q = params<AugTFAutoAugment>(op);
    if (!(aug_is_int(q.policy) && q.policy >= 0 && q.policy < kNumPolicies))
        return "policy must be an integer in [0, 8] (v0, reduced_imagenet, simple, reduced_cifar10, svhn, "
               "panoptic_deeplab_policy, vit, test, deit3_three_augment)";
    if (!(std::isfinite(q.cutout_const) && q.cutout_const >= 0 && q.cutout_const <= 1e4))
        return "cutout_const must be in [0, 10000]";
    if (!(std::isfinite(q.translate_const) && q.translate_const >= 0 && q.translate_const <= 1e4))
        return "translate_const must be in [0, 10000]";
    return valid_fill(q.fill) ? nullptr : "fill must be 3 integers in [0, 255]";
}

/* per layer: op = U{0..n} over the n ops not excluded (n: TF's switch_case default,
 * identity); with magnitude_std > 0 its level (tf_noisy_level); its sign / centre; then,
 * when prob_to_apply is set, kept if u < prob_to_apply (else identity) */
int tf_rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    const AugTFRandAugment &q = params<AugTFRandAugment>(op);
    const unsigned exclude = (unsigned)q.exclude;
    int avail[T_COUNT], n = 0;
    for (int o = 0; o < T_COUNT; o++)
        if (!(exclude >> o & 1u))
            avail[n++] = o;
    const bool noisy = q.magnitude_std > 0;
    r.applied = (int)q.num_layers;
    for (int k = 0; k < r.applied; k++) {
        const int i = (int)fq_rng_next_below(rng, (uint64_t)n + 1);
        if (i == n) {
            set_identity(r, k);
        } else {
            const double level = noisy ? (double)tf_noisy_level(rng, q.magnitude) : q.magnitude;
            draw_op(rng, k, avail[i], level, noisy, q.cutout_const, q.translate_const, *h, *w, r);
        }
        if (q.prob_to_apply >= 0 && !(fq_rng_uniform(rng) < q.prob_to_apply))
            set_identity(r, k);
    }
    return FQ_OK;
}

/* sub-policy U{0..n-1}; per op: applied if u < p (TF: floor(u + p) != 0); the ops applied
 * are listed (r.applied of them, at most 3); params[4] = the sub-policy */
int tf_auto_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    const AugTFAutoAugment &q = params<AugTFAutoAugment>(op);
    const Policy &pol = kPolicies[(int)q.policy];
    const int sp = (int)fq_rng_next_below(rng, (uint64_t)pol.n);
    r.applied = 0;
    r.params[4] = sp;
    for (int j = 0; j < pol.per; j++) {
        const SubOp &s = pol.ops[sp * pol.per + j];
        if (!(fq_rng_uniform(rng) < s.p))
            continue;
        draw_op(rng, r.applied++, s.op, s.level, false, q.cutout_const, q.translate_const, *h, *w, r);
    }
    return FQ_OK;
}

void tf_policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const bool rand = !std::strcmp(fq_img_op_name(op.kind), "TFRandAugment");
    const double *fill = rand ? params<AugTFRandAugment>(op).fill : params<AugTFAutoAugment>(op).fill;
    for (int k = 0; k < r.applied && k < 4; k++) {
        const int kind = r.order[k];
        if (kind <= 0)
            continue; /* Identity */
        tf_apply(e, kind, r.factor[k], r.params[k], fill);
    }
}

}  // namespace fqi

/* ---- the records of this family, TF Model Garden's RandAugment / AutoAugment: kinds
 * fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fq_op_field kTFRandFields[] = {
    FQ_FIELD(fqi::AugTFRandAugment, num_layers), FQ_FIELD(fqi::AugTFRandAugment, magnitude),
    FQ_FIELD(fqi::AugTFRandAugment, cutout_const), FQ_FIELD(fqi::AugTFRandAugment, translate_const),
    FQ_FIELD(fqi::AugTFRandAugment, prob_to_apply), FQ_FIELD(fqi::AugTFRandAugment, fill),
    FQ_FIELD(fqi::AugTFRandAugment, magnitude_std), FQ_FIELD(fqi::AugTFRandAugment, exclude)};
constexpr fq_op_field kTFAutoFields[] = {FQ_FIELD(fqi::AugTFAutoAugment, policy),
                                         FQ_FIELD(fqi::AugTFAutoAugment, cutout_const),
                                         FQ_FIELD(fqi::AugTFAutoAugment, translate_const),
                                         FQ_FIELD(fqi::AugTFAutoAugment, fill)};

constexpr fqi::OpImpl kModelGardenRecords[] = {
    {46, "TFRandAugment", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugTFRandAugment, kTFRandFields),
     fqi::tf_rand_augment_check, fqi::keeps_size, fqi::tf_rand_augment_plan, fqi::tf_policy_exec},
    {47, "TFAutoAugment", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugTFAutoAugment, kTFAutoFields),
     fqi::tf_auto_augment_check, fqi::keeps_size, fqi::tf_auto_augment_plan, fqi::tf_policy_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsModelGarden, kModelGardenRecords)
