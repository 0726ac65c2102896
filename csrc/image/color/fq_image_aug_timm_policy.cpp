/* fq_image_aug_timm_policy.cpp - timm's policy drivers: RandAugment, AutoAugment
 * (original, originalr, v0, v0r, 3a) and AugMix (basic mode) (timm.data.auto_augment,
 * timm 1.0) over timm's own ops (PIL semantics: fq_image_aug_timm_ops.cpp) and timm's
 * level functions.  The plan draws every choice from the sample's stream; the
 * explain record holds them: order[k] = t + 1 (t: the op's index in kTimmNames; negative:
 * drawn but skipped by its prob), factor[k] = the op's argument (signed), matrix[k] = the
 * magnitude it came from (after the noise and the clip), params[k] = 1 when the geometric
 * op resampled bicubic; AutoAugment: params[4] = the sub-policy; AugMix: see
 * timm_augmix_plan.  Semantics: docs/ops.md.  Pure functions of their arguments. */
#include "image/color/fq_image_aug_timm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <opencv2/core.hpp>

namespace {

using fqi::AugTimmAugMix;
using fqi::AugTimmAutoAugment;
using fqi::AugTimmRandAugment;
using fqi::Exec;
using fqi::params;
using namespace fqi::timm;

/* timm's _randomly_negate: -v if random() > 0.5 */
double negate(fq_rng *rng, double v) { return fq_rng_uniform(rng) > 0.5 ? -v : v; }

/* LEVEL_TO_ARG[name](level, hparams) (python doubles; int() truncates) */
/* the hparams an AugmentOp reads */
struct Hp {
    double magnitude_std, magnitude_max, translate_pct, translate_const, interp;
};

double level_to_arg(fq_rng *rng, int t, double level, const Hp &q)
{
    const double l = level / 10.0;
    switch (t) {
    case M_ROTATE: return negate(rng, l * 30.0);
    case M_POSTERIZE: return std::trunc(l * 4);
    case M_POSTERIZE_INC: return 4 - std::trunc(l * 4);
    case M_POSTERIZE_ORIG: return std::trunc(l * 4) + 4;
    case M_SOLARIZE: return std::fmin(256.0, std::trunc(l * 256));
    case M_SOLARIZE_INC: return 256 - std::fmin(256.0, std::trunc(l * 256));
    case M_SOLARIZE_ADD: return std::fmin(128.0, std::trunc(l * 110));
    case M_COLOR:
    case M_CONTRAST:
    case M_BRIGHTNESS:
    case M_SHARPNESS: return l * 1.8 + 0.1;
    case M_COLOR_INC:
    case M_CONTRAST_INC:
    case M_BRIGHTNESS_INC:
    case M_SHARPNESS_INC: return std::fmax(0.1, 1.0 + negate(rng, l * .9));
    case M_SHEAR_X:
    case M_SHEAR_Y: return negate(rng, l * 0.3);
    case M_TRANSLATE_X:
    case M_TRANSLATE_Y: return negate(rng, l * q.translate_const);
    case M_TRANSLATE_X_REL:
    case M_TRANSLATE_Y_REL: return negate(rng, l * q.translate_pct);
    /* _minmax_level_to_arg(level, min_val, max_val): min + (max - min) * l, clamped */
    case M_DESATURATE: return std::fmax(0.5, std::fmin(1.0, 0.5 + (1.0 - 0.5) * l));
    case M_GAUSSIAN_BLUR: return std::fmax(0.1, std::fmin(2.0, 0.1 + (2.0 - 0.1) * l));
    case M_GAUSSIAN_BLUR_RAND: return std::fmax(0.0, std::fmin(1.0, 0.0 + (1.0 - 0.0) * l));
    default: return 0.0; /* AutoContrast, Equalize, Invert: no argument */
    }
}


/* AugmentOp.__call__ into slot k of the record: skipped if prob < 1 and u > prob; the
 * magnitude: gauss(M, std) (Box-Muller, cosine branch) or uniform(0, M) (std inf: -1),
 * clipped to [0, magnitude_max]; the level function (its sign draw); bilinear / bicubic
 * drawn for a geometric op when interp is random */
void draw_op(fq_rng *rng, int k, int t, double prob, double magnitude, const Hp &q, fq_img_op_explain &r)
{
    r.order[k] = -(t + 1), r.factor[k] = 0, r.params[k] = 0, r.matrix[k] = 0;
    if (prob < 1.0 && fq_rng_uniform(rng) > prob)
        return;
    double m = magnitude;
    if (q.magnitude_std == -1) {
        m = m * fq_rng_uniform(rng);
    } else if (q.magnitude_std > 0) {
        const double u1 = fq_rng_uniform(rng), u2 = fq_rng_uniform(rng);
        m += q.magnitude_std * std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
    }
    m = std::fmax(0.0, std::fmin(m, q.magnitude_max));
    r.order[k] = t + 1;
    r.matrix[k] = m;
    r.factor[k] = level_to_arg(rng, t, m, q);
    if (geometric(t))
        r.params[k] = q.interp == 2 ? (double)fq_rng_next_below(rng, 2) : q.interp;
    if (t == M_GAUSSIAN_BLUR_RAND) /* the op's random.uniform(0.1, 2.0 * factor) */
        r.params[k] = 0.1 + (2.0 * r.factor[k] - 0.1) * fq_rng_uniform(rng);
}

struct SubOp {
    int op;
    double p, m;
};
/* timm's auto_augment_policy_v0 / v0r / original / originalr (25 two-op sub-policies) */
#define V0_TABLE(POST)                                                                                             \
    {{{M_EQUALIZE, 0.8, 1}, {M_SHEAR_Y, 0.8, 4}},          {{M_COLOR, 0.4, 9}, {M_EQUALIZE, 0.6, 3}},             \
     {{M_COLOR, 0.4, 1}, {M_ROTATE, 0.6, 8}},              {{M_SOLARIZE, 0.8, 3}, {M_EQUALIZE, 0.4, 7}},          \
     {{M_SOLARIZE, 0.4, 2}, {M_SOLARIZE, 0.6, 2}},         {{M_COLOR, 0.2, 0}, {M_EQUALIZE, 0.8, 8}},             \
     {{M_EQUALIZE, 0.4, 8}, {M_SOLARIZE_ADD, 0.8, 3}},     {{M_SHEAR_X, 0.2, 9}, {M_ROTATE, 0.6, 8}},             \
     {{M_COLOR, 0.6, 1}, {M_EQUALIZE, 1.0, 2}},            {{M_INVERT, 0.4, 9}, {M_ROTATE, 0.6, 0}},              \
     {{M_EQUALIZE, 1.0, 9}, {M_SHEAR_Y, 0.6, 3}},          {{M_COLOR, 0.4, 7}, {M_EQUALIZE, 0.6, 0}},             \
     {{POST, 0.4, 6}, {M_AUTOCONTRAST, 0.4, 7}},           {{M_SOLARIZE, 0.6, 8}, {M_COLOR, 0.6, 9}},             \
     {{M_SOLARIZE, 0.2, 4}, {M_ROTATE, 0.8, 9}},           {{M_ROTATE, 1.0, 7}, {M_TRANSLATE_Y_REL, 0.8, 9}},     \
     {{M_SHEAR_X, 0.0, 0}, {M_SOLARIZE, 0.8, 4}},          {{M_SHEAR_Y, 0.8, 0}, {M_COLOR, 0.6, 4}},              \
     {{M_COLOR, 1.0, 0}, {M_ROTATE, 0.6, 2}},              {{M_EQUALIZE, 0.8, 4}, {M_EQUALIZE, 0.0, 8}},          \
     {{M_EQUALIZE, 1.0, 4}, {M_AUTOCONTRAST, 0.6, 2}},     {{M_SHEAR_Y, 0.4, 7}, {M_SOLARIZE_ADD, 0.6, 7}},       \
     {{POST, 0.8, 2}, {M_SOLARIZE, 0.6, 10}},              {{M_SOLARIZE, 0.6, 8}, {M_EQUALIZE, 0.6, 1}},          \
     {{M_COLOR, 0.8, 6}, {M_ROTATE, 0.4, 5}}}
#define ORIGINAL_TABLE(POST)                                                                                       \
    {{{POST, 0.4, 8}, {M_ROTATE, 0.6, 9}},                 {{M_SOLARIZE, 0.6, 5}, {M_AUTOCONTRAST, 0.6, 5}},      \
     {{M_EQUALIZE, 0.8, 8}, {M_EQUALIZE, 0.6, 3}},         {{POST, 0.6, 7}, {POST, 0.6, 6}},                      \
     {{M_EQUALIZE, 0.4, 7}, {M_SOLARIZE, 0.2, 4}},         {{M_EQUALIZE, 0.4, 4}, {M_ROTATE, 0.8, 8}},            \
     {{M_SOLARIZE, 0.6, 3}, {M_EQUALIZE, 0.6, 7}},         {{POST, 0.8, 5}, {M_EQUALIZE, 1.0, 2}},                \
     {{M_ROTATE, 0.2, 3}, {M_SOLARIZE, 0.6, 8}},           {{M_EQUALIZE, 0.6, 8}, {POST, 0.4, 6}},                \
     {{M_ROTATE, 0.8, 8}, {M_COLOR, 0.4, 0}},              {{M_ROTATE, 0.4, 9}, {M_EQUALIZE, 0.6, 2}},            \
     {{M_EQUALIZE, 0.0, 7}, {M_EQUALIZE, 0.8, 8}},         {{M_INVERT, 0.6, 4}, {M_EQUALIZE, 1.0, 8}},            \
     {{M_COLOR, 0.6, 4}, {M_CONTRAST, 1.0, 8}},            {{M_ROTATE, 0.8, 8}, {M_COLOR, 1.0, 2}},               \
     {{M_COLOR, 0.8, 8}, {M_SOLARIZE, 0.8, 7}},            {{M_SHARPNESS, 0.4, 7}, {M_INVERT, 0.6, 8}},           \
     {{M_SHEAR_X, 0.6, 5}, {M_EQUALIZE, 1.0, 9}},          {{M_COLOR, 0.4, 0}, {M_EQUALIZE, 0.6, 3}},             \
     {{M_EQUALIZE, 0.4, 7}, {M_SOLARIZE, 0.2, 4}},         {{M_SOLARIZE, 0.6, 5}, {M_AUTOCONTRAST, 0.6, 5}},      \
     {{M_INVERT, 0.6, 4}, {M_EQUALIZE, 1.0, 8}},           {{M_COLOR, 0.6, 4}, {M_CONTRAST, 1.0, 8}},             \
     {{M_EQUALIZE, 0.8, 8}, {M_EQUALIZE, 0.6, 3}}}
/* TimmAutoAugment's policy field indexes this: 0 original, 1 originalr, 2 v0, 3 v0r */
const SubOp kTimmAA[4][25][2] = {ORIGINAL_TABLE(M_POSTERIZE_ORIG), ORIGINAL_TABLE(M_POSTERIZE_INC),
                                 V0_TABLE(M_POSTERIZE), V0_TABLE(M_POSTERIZE_INC)};
/* policy 4: timm's auto_augment_policy_3a (DeiT III's 3-Augment: three one-op sub-policies) */
const SubOp kTimmAA3a[3] = {{M_SOLARIZE, 1.0, 5}, {M_DESATURATE, 1.0, 10}, {M_GAUSSIAN_BLUR_RAND, 1.0, 10}};

Hp rand_hp(const AugTimmRandAugment &q)
{
    return {q.magnitude_std, q.magnitude_max, q.translate_pct, q.translate_const, q.interp};
}

bool valid_hp(const Hp &q, const char **why)
{
    if (!(q.magnitude_std == -1 || (std::isfinite(q.magnitude_std) && q.magnitude_std >= 0 && q.magnitude_std <= 1000)))
        return *why = "magnitude_std must be in [0, 1000] (or -1: inf, uniform)", false;
    if (!(std::isfinite(q.magnitude_max) && q.magnitude_max > 0 && q.magnitude_max <= 1000))
        return *why = "magnitude_max must be in (0, 1000]", false;
    if (!(std::isfinite(q.translate_pct) && std::fabs(q.translate_pct) <= 100))
        return *why = "translate_pct must be in [-100, 100]", false;
    if (!(std::isfinite(q.translate_const) && std::fabs(q.translate_const) <= 1e5))
        return *why = "translate_const must be in [-1e5, 1e5]", false;
    if (!(q.interp == 0 || q.interp == 1 || q.interp == 2))
        return *why = "interp must be 0 (bilinear), 1 (bicubic) or 2 (random)", false;
    return true;
}

const char *fill_check(const double *fill)
{
    for (int k = 0; k < 3; k++)
        if (!(fqi::aug_is_int(fill[k]) && fill[k] >= 0 && fill[k] <= 255))
            return "fill must be 3 integers in [0, 255]";
    return nullptr;
}

/* ---- AugMix ------------------------------------------------------------------------ */

double std_normal(fq_rng *rng)
{
    const double u1 = fq_rng_uniform(rng), u2 = fq_rng_uniform(rng);
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
}

/* Gamma(a, 1): a == 1 exponential (-log(1 - u)); else Marsaglia-Tsang (a < 1: boosted by
 * u^(1/a)) */
double gamma_draw(fq_rng *rng, double a)
{
    if (a == 1.0)
        return -std::log(1.0 - fq_rng_uniform(rng));
    if (a < 1.0) {
        const double g = gamma_draw(rng, a + 1.0);
        return g * std::pow(1.0 - fq_rng_uniform(rng), 1.0 / a);
    }
    const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
        const double x = std_normal(rng), t = 1.0 + c * x;
        if (t <= 0)
            continue;
        const double v = t * t * t, u = fq_rng_uniform(rng);
        if (u < 1.0 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v)))
            return d * v;
    }
}

/* chain j's code in order[j]: depth (2 bits) | op k (5 bits each, from bit 2 + 5 k) */
int chain_depth(int code) { return code & 3; }
int chain_op(int code, int k) { return code >> (2 + 5 * k) & 31; }

/* timm's _RAND_WEIGHTED_0 by op (0: not in the table) */
double weight0(int t)
{
    switch (t) {
    case M_ROTATE: return 3;
    case M_SHEAR_X:
    case M_SHEAR_Y: return 2;
    case M_TRANSLATE_X_REL:
    case M_TRANSLATE_Y_REL: return 1;
    case M_COLOR_INC:
    case M_SHARPNESS_INC:
    case M_AUTOCONTRAST: return .25;
    case M_SOLARIZE_INC:
    case M_SOLARIZE_ADD:
    case M_CONTRAST_INC:
    case M_BRIGHTNESS_INC:
    case M_EQUALIZE:
    case M_POSTERIZE_INC:
    case M_INVERT: return .05;
    default: return 0;
    }
}

}  // namespace

namespace fqi {

const char *timm_rand_augment_check(const fq_op &op)
{
    const AugTimmRandAugment &q = params<AugTimmRandAugment>(op);
    if (!(aug_is_int(q.num_layers) && q.num_layers >= 0 && q.num_layers <= 4))
        return "num_layers must be an integer in [0, 4]";
    if (!(std::isfinite(q.magnitude) && q.magnitude >= 0 && q.magnitude <= 1000))
        return "magnitude must be in [0, 1000]";
    if (!aug_valid_prob(q.prob))
        return "prob must be in [0, 1]";
    const char *why = nullptr;
    if (!valid_hp(rand_hp(q), &why))
        return why;
    if (const char *f = fill_check(q.fill))
        return f;
    if (!(aug_is_int(q.ops) && q.ops >= 1 && q.ops < (double)(1 << M_COUNT)))
        return "ops must be a non-empty bit mask over the 27 timm ops";
    if (!(q.weighted == 0 || q.weighted == 1))
        return "weighted must be 0 or 1";
    if (q.weighted) {
        int nw = 0;
        for (int t = 0; t < M_COUNT; t++)
            nw += ((uint32_t)q.ops >> t & 1u) && weight0(t) > 0;
        if (nw < q.num_layers)
            return "weighted: fewer ops of timm's 'weights' table than num_layers (drawn without replacement)";
    }
    return nullptr;
}

const char *timm_auto_augment_check(const fq_op &op)
{
    const AugTimmAutoAugment &q = params<AugTimmAutoAugment>(op);
    if (!(aug_is_int(q.policy) && q.policy >= 0 && q.policy <= 4))
        return "policy must be an integer in [0, 4] (original, originalr, v0, v0r, 3a)";
    const char *why = nullptr;
    if (!valid_hp({q.magnitude_std, q.magnitude_max, q.translate_pct, q.translate_const, q.interp}, &why))
        return why;
    return fill_check(q.fill);
}

/* per layer: op = U{0..n-1} over the ops of the mask (np.random.choice, replace=True); with
 * `weighted`, np.random.choice(p=w, replace=False): successive draws, each proportional to
 * the weights of the ops not drawn yet (numpy's batched redraw of repeats has this
 * distribution); then AugmentOp's draws (draw_op) */
int timm_rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugTimmRandAugment &q = params<AugTimmRandAugment>(op);
    const uint32_t mask = (uint32_t)q.ops;
    int avail[M_COUNT], n = 0;
    for (int t = 0; t < M_COUNT; t++)
        if (mask >> t & 1u)
            avail[n++] = t;
    const Hp hp = rand_hp(q);
    r.applied = (int)q.num_layers;
    double w[M_COUNT];
    for (int i = 0; i < n; i++)
        w[i] = q.weighted ? weight0(avail[i]) : 1.0;
    for (int k = 0; k < r.applied; k++) {
        int i = 0;
        if (!q.weighted) {
            i = (int)fq_rng_next_below(rng, (uint64_t)n);
        } else {
            double total = 0;
            for (int j = 0; j < n; j++)
                total += w[j];
            const double u = fq_rng_uniform(rng) * total;
            double cum = 0;
            i = -1;
            for (int j = 0; j < n; j++) {
                if (w[j] <= 0)
                    continue;
                cum += w[j];
                i = j; /* the last one left when rounding leaves u at the top */
                if (u < cum)
                    break;
            }
            if (i < 0) { /* fewer weighted ops than layers (the check refuses it) */
                r.applied = k;
                break;
            }
            w[i] = 0;
        }
        draw_op(rng, k, avail[i], q.prob, q.magnitude, hp, r);
    }
    return FQ_OK;
}

/* sub-policy U{0..24} (random.choice; 3a: U{0..2}), then its AugmentOps in order (two; 3a:
 * one); params[4] = the sub-policy */
int timm_auto_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugTimmAutoAugment &q = params<AugTimmAutoAugment>(op);
    const Hp hp{q.magnitude_std, q.magnitude_max, q.translate_pct, q.translate_const, q.interp};
    const bool three_a = q.policy == 4;
    const int sp = (int)fq_rng_next_below(rng, three_a ? 3 : 25);
    const SubOp *s = three_a ? &kTimmAA3a[sp] : kTimmAA[(int)q.policy][sp];
    r.applied = three_a ? 1 : 2;
    r.params[4] = sp;
    for (int k = 0; k < r.applied; k++)
        draw_op(rng, k, s[k].op, s[k].p, s[k].m, hp, r);
    return FQ_OK;
}

const char *timm_augmix_check(const fq_op &op)
{
    const AugTimmAugMix &q = params<AugTimmAugMix>(op);
    if (!(std::isfinite(q.magnitude) && q.magnitude >= 0 && q.magnitude <= 1000))
        return "magnitude must be in [0, 1000]";
    if (!(aug_is_int(q.width) && q.width >= 1 && q.width <= 4))
        return "width must be an integer in [1, 4]";
    if (!(q.depth == -1 || (aug_is_int(q.depth) && q.depth >= 1 && q.depth <= 3)))
        return "depth must be -1 (random 1..3) or an integer in [1, 3]";
    if (!(std::isfinite(q.alpha) && q.alpha >= 0.05 && q.alpha <= 100))
        return "alpha must be in [0.05, 100]";
    const char *why = nullptr;
    if (!valid_hp({q.magnitude_std, q.magnitude_max, q.translate_pct, q.translate_const, q.interp}, &why))
        return why;
    if (const char *f = fill_check(q.fill))
        return f;
    if (!(aug_is_int(q.ops) && q.ops >= 1 && q.ops < (double)(1 << M_COUNT)))
        return "ops must be a non-empty bit mask over the 27 timm ops";
    return nullptr;
}

/* AugMixAugment.__call__ (basic mode): weights = float32(Dirichlet([alpha] * width)) (gammas
 * normalised) into factor[0..width-1], m = float32(Beta(alpha, alpha)) (X / (X + Y)) into
 * contrast_mean; per chain its depth (U{1..3} when depth is -1) and ops (U over the mask,
 * with replacement) into order[j]; the key of the stream the ops' magnitudes, signs and
 * resamples are drawn from (at exec) in params[0], params[1] */
int timm_augmix_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugTimmAugMix &q = params<AugTimmAugMix>(op);
    const int width = (int)q.width;
    double g[4], sum = 0;
    for (int j = 0; j < width; j++)
        sum += g[j] = gamma_draw(rng, q.alpha);
    for (int j = 0; j < 4; j++)
        r.factor[j] = j < width ? (double)(float)(g[j] / sum) : 0.0;
    const double x = gamma_draw(rng, q.alpha), y = gamma_draw(rng, q.alpha);
    r.contrast_mean = (double)(float)(x / (x + y));
    const uint32_t mask = (uint32_t)q.ops;
    int avail[M_COUNT], n = 0;
    for (int t = 0; t < M_COUNT; t++)
        if (mask >> t & 1u)
            avail[n++] = t;
    r.applied = width;
    for (int j = 0; j < 4; j++) {
        r.order[j] = 0;
        if (j >= width)
            continue;
        const int depth = q.depth > 0 ? (int)q.depth : 1 + (int)fq_rng_next_below(rng, 3);
        int code = depth;
        for (int k = 0; k < depth; k++)
            code |= avail[fq_rng_next_below(rng, (uint64_t)n)] << (2 + 5 * k);
        r.order[j] = code;
    }
    const uint64_t key = fq_rng_next_u64(rng);
    r.params[0] = (double)(key >> 32), r.params[1] = (double)(key & 0xFFFFFFFFu);
    return FQ_OK;
}

/* mixed = sum_j w_j * float32(chain_j(image)) (float32: product, then sum, as numpy),
 * clipped to [0, 255] and truncated to uint8; out = Image.blend(image, mixed, m) */
void timm_augmix_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const AugTimmAugMix &q = params<AugTimmAugMix>(op);
    const Hp hp{q.magnitude_std, q.magnitude_max, q.translate_pct, q.translate_const, q.interp};
    const uint8_t fill[3] = {(uint8_t)q.fill[0], (uint8_t)q.fill[1], (uint8_t)q.fill[2]};
    e.materialize_flips();
    const cv::Mat orig = e.cur.clone();
    const int H = orig.rows, W = orig.cols, c = orig.channels(), n = W * c;
    cv::Mat mixed(H, W, CV_32FC(c), cv::Scalar::all(0));
    fq_rng g{((uint64_t)r.params[0] << 32) | (uint64_t)r.params[1]};
    for (int j = 0; j < r.applied && j < 4; j++) {
        e.set(orig);
        const int code = r.order[j];
        for (int k = 0; k < chain_depth(code); k++) {
            fq_img_op_explain one;
            std::memset(&one, 0, sizeof one);
            draw_op(&g, 0, chain_op(code, k), 1.0, q.magnitude, hp, one);
            timm_apply(e, one.order[0] - 1, one.factor[0], one.params[0], fill);
        }
        const float w = (float)r.factor[j];
        for (int y = 0; y < H; y++) {
            const uint8_t *s = e.cur.ptr<uint8_t>(y);
            float *m = mixed.ptr<float>(y);
            for (int i = 0; i < n; i++) {
                const float p = w * (float)s[i];
                m[i] = m[i] + p;
            }
        }
    }
    const float m = (float)r.contrast_mean;
    cv::Mat d = e.next(H, W, orig.type());
    for (int y = 0; y < H; y++) {
        const uint8_t *s = orig.ptr<uint8_t>(y);
        const float *mx = mixed.ptr<float>(y);
        uint8_t *o = d.ptr<uint8_t>(y);
        for (int i = 0; i < n; i++) {
            const float v = mx[i] < 0.f ? 0.f : (mx[i] > 255.f ? 255.f : mx[i]);
            const int b = (int)(uint8_t)v;
            o[i] = m == 0.f ? s[i] : (m == 1.f ? (uint8_t)b : blend(s[i], b, m));
        }
    }
    e.set(d);
}

void timm_policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const double *f = !std::strcmp(fq_img_op_name(op.kind), "TimmRandAugment") ? params<AugTimmRandAugment>(op).fill
                                                                                : params<AugTimmAutoAugment>(op).fill;
    const uint8_t fill[3] = {(uint8_t)f[0], (uint8_t)f[1], (uint8_t)f[2]};
    bool flips_done = false;
    for (int k = 0; k < r.applied && k < 4; k++) {
        if (r.order[k] <= 0)
            continue; /* skipped (prob) */
        if (!flips_done) { /* the geometric ops and Sharpness read positions */
            e.materialize_flips();
            flips_done = true;
        }
        timm_apply(e, r.order[k] - 1, r.factor[k], r.params[k], fill);
    }
}

}  // namespace fqi

/* ---- the records of this family, timm's RandAugment / AutoAugment / AugMix: kinds fixed
 * forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fq_op_field kTimmRandFields[] = {
    FQ_FIELD(fqi::AugTimmRandAugment, num_layers), FQ_FIELD(fqi::AugTimmRandAugment, magnitude),
    FQ_FIELD(fqi::AugTimmRandAugment, prob), FQ_FIELD(fqi::AugTimmRandAugment, magnitude_std),
    FQ_FIELD(fqi::AugTimmRandAugment, magnitude_max), FQ_FIELD(fqi::AugTimmRandAugment, translate_pct),
    FQ_FIELD(fqi::AugTimmRandAugment, translate_const), FQ_FIELD(fqi::AugTimmRandAugment, interp),
    FQ_FIELD(fqi::AugTimmRandAugment, fill), FQ_FIELD(fqi::AugTimmRandAugment, ops),
    FQ_FIELD(fqi::AugTimmRandAugment, weighted)};
constexpr fq_op_field kTimmAutoFields[] = {
    FQ_FIELD(fqi::AugTimmAutoAugment, policy), FQ_FIELD(fqi::AugTimmAutoAugment, magnitude_std),
    FQ_FIELD(fqi::AugTimmAutoAugment, magnitude_max), FQ_FIELD(fqi::AugTimmAutoAugment, translate_pct),
    FQ_FIELD(fqi::AugTimmAutoAugment, translate_const), FQ_FIELD(fqi::AugTimmAutoAugment, interp),
    FQ_FIELD(fqi::AugTimmAutoAugment, fill)};
constexpr fq_op_field kTimmAugMixFields[] = {
    FQ_FIELD(fqi::AugTimmAugMix, magnitude), FQ_FIELD(fqi::AugTimmAugMix, width), FQ_FIELD(fqi::AugTimmAugMix, depth),
    FQ_FIELD(fqi::AugTimmAugMix, alpha), FQ_FIELD(fqi::AugTimmAugMix, magnitude_std),
    FQ_FIELD(fqi::AugTimmAugMix, magnitude_max), FQ_FIELD(fqi::AugTimmAugMix, translate_pct),
    FQ_FIELD(fqi::AugTimmAugMix, translate_const), FQ_FIELD(fqi::AugTimmAugMix, interp),
    FQ_FIELD(fqi::AugTimmAugMix, fill), FQ_FIELD(fqi::AugTimmAugMix, ops)};

constexpr fqi::OpImpl kTimmRecords[] = {
    {49, "TimmRandAugment", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugTimmRandAugment, kTimmRandFields),
     fqi::timm_rand_augment_check, fqi::keeps_size, fqi::timm_rand_augment_plan, fqi::timm_policy_exec},
    {50, "TimmAutoAugment", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugTimmAutoAugment, kTimmAutoFields),
     fqi::timm_auto_augment_check, fqi::keeps_size, fqi::timm_auto_augment_plan, fqi::timm_policy_exec},
    {51, "TimmAugMix", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugTimmAugMix, kTimmAugMixFields),
     fqi::timm_augmix_check, fqi::keeps_size, fqi::timm_augmix_plan, fqi::timm_augmix_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsTimm, kTimmRecords)
