/* fq_image_aug_tf_policy.cpp - TF Model Garden's RandAugment and AutoAugment ("v0",
 * "reduced_imagenet") of official/vision/ops/augment.py (tf-models-official 2.20) with
 * TF's own op definitions where they differ from torchvision's: blend, AutoContrast
 * (float scale), Color (tf.image.rgb_to_grayscale), Contrast (tf.image.adjust_contrast),
 * Sharpness (truncated smooth, blend), SolarizeAdd (threshold 128), Cutout, and the
 * geometric ops (ImageProjectiveTransformV3, nearest, fill_mode "reflect": the wrap /
 * unwrap fill of 128 never triggers).  Invert, Equalize, Posterize, Solarize and
 * Brightness are the shared primitives.  The plan draws every choice; the explain record
 * holds them (order[k] = the op's kind, 0 for Identity; factor[k] = TF's argument;
 * params[k] = Cutout's centre cy * 65536 + cx; params[4] = AutoAugment's sub-policy).
 * Semantics: docs/ops.md.  Pure functions of their arguments (thread-safe). */
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
            T_COUNT };
const char *const kTFNames[T_COUNT] = {"AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize",
                                      "Color", "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY",
                                      "TranslateX", "TranslateY", "Cutout", "SolarizeAdd"};

struct SubOp {
    int op;
    double p;
    int level;
};
/* AutoAugment.policy_v0() */
const SubOp kV0[25][2] = {
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
const SubOp kReducedImageNet[25][2] = {
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

bool signed_op(int o)
{
    return o == T_ROTATE || o == T_SHEAR_X || o == T_SHEAR_Y || o == T_TRANSLATE_X || o == T_TRANSLATE_Y;
}

/* level_to_arg (python doubles; int() truncates) */
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

/* one op into slot k: its argument, the sign (_randomly_negate_tensor: negated if u < 0.5),
 * Cutout's centre (row U{0..H-1}, then column U{0..W-1}) */
void draw_op(fq_rng *rng, int k, int o, double level, double cc, double tc, int h, int w, fq_img_op_explain &r)
{
    double a = tf_arg(o, level, cc, tc);
    if (signed_op(o) && fq_rng_uniform(rng) < 0.5)
        a = -a;
    r.order[k] = fq_img_op_kind(kTFNames[o]);
    r.factor[k] = a;
    r.params[k] = 0;
    if (o == T_CUTOUT) {
        const double cy = (double)fq_rng_next_below(rng, (uint64_t)h), cx = (double)fq_rng_next_below(rng, (uint64_t)w);
        r.params[k] = cy * 65536.0 + cx;
    }
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
    return valid_fill(q.fill) ? nullptr : "fill must be 3 integers in [0, 255]";
}

const char *tf_auto_augment_check(const fq_op &op)
{
    const AugTFAutoAugment &q = params<AugTFAutoAugment>(op);
    if (!(q.policy == 0 || q.policy == 1))
        return "policy must be 0 (v0) or 1 (reduced_imagenet)";
    if (!(std::isfinite(q.cutout_const) && q.cutout_const >= 0 && q.cutout_const <= 1e4))
        return "cutout_const must be in [0, 10000]";
    if (!(std::isfinite(q.translate_const) && q.translate_const >= 0 && q.translate_const <= 1e4))
        return "translate_const must be in [0, 10000]";
    return valid_fill(q.fill) ? nullptr : "fill must be 3 integers in [0, 255]";
}

/* per layer: op = U{0..16} (16: identity, TF's switch_case default); its sign / centre;
 * then, when prob_to_apply is set, kept if u < prob_to_apply (else identity) */
int tf_rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    const AugTFRandAugment &q = params<AugTFRandAugment>(op);
    r.applied = (int)q.num_layers;
    for (int k = 0; k < r.applied; k++) {
        const int o = (int)fq_rng_next_below(rng, T_COUNT + 1);
        if (o == T_COUNT) {
            r.order[k] = 0, r.factor[k] = 0, r.params[k] = 0;
        } else {
            draw_op(rng, k, o, q.magnitude, q.cutout_const, q.translate_const, *h, *w, r);
        }
        if (q.prob_to_apply >= 0 && !(fq_rng_uniform(rng) < q.prob_to_apply))
            r.order[k] = 0, r.factor[k] = 0, r.params[k] = 0;
    }
    return FQ_OK;
}

/* sub-policy U{0..24}; per op: applied if u < p (TF: floor(u + p) != 0); the ops applied
 * are listed (r.applied of them); params[4] = the sub-policy */
int tf_auto_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    const AugTFAutoAugment &q = params<AugTFAutoAugment>(op);
    const int sp = (int)fq_rng_next_below(rng, 25);
    r.applied = 0;
    r.params[4] = sp;
    for (const SubOp &s : (q.policy == 0 ? kV0 : kReducedImageNet)[sp]) {
        if (!(fq_rng_uniform(rng) < s.p))
            continue;
        draw_op(rng, r.applied++, s.op, s.level, q.cutout_const, q.translate_const, *h, *w, r);
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
