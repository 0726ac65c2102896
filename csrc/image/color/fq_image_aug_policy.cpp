/* fq_image_aug_policy.cpp - the automatic augmentation policies of torchvision v2
 * (RandAugment, TrivialAugmentWide) over the primitives of fq_image_aug.cpp: the op
 * lists, magnitude tables (torch.linspace in float32, reproduced here) and signs.  The
 * plan draws every choice; the explain record holds them (order[k] = the op's kind, 0
 * for Identity; factor[k] = torchvision's magnitude; params[k] = the bin).  Semantics:
 * docs/ops.md "Policies".  Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"

#include <cmath>
#include <cstring>

namespace {

/* torchvision v2's op list, in its dict order */
enum PolicyOp { P_IDENTITY, P_SHEAR_X, P_SHEAR_Y, P_TRANSLATE_X, P_TRANSLATE_Y, P_ROTATE, P_BRIGHTNESS, P_COLOR,
                P_CONTRAST, P_SHARPNESS, P_POSTERIZE, P_SOLARIZE, P_AUTOCONTRAST, P_EQUALIZE, P_COUNT,
                P_INVERT = P_COUNT /* AutoAugment only */ };

const char *const kNames[P_COUNT + 1] = {"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
                                     "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize",
                                     "AutoContrast", "Equalize", "Invert"};

/* torchvision v2 AutoAugment(AutoAugmentPolicy.IMAGENET): 25 sub-policies of two
 * (op, probability, bin of 10; -1: no magnitude) */
struct SubOp {
    int op;
    double p;
    int bin;
};
const SubOp kImageNet[25][2] = {
    {{P_POSTERIZE, 0.4, 8}, {P_ROTATE, 0.6, 9}},     {{P_SOLARIZE, 0.6, 5}, {P_AUTOCONTRAST, 0.6, -1}},
    {{P_EQUALIZE, 0.8, -1}, {P_EQUALIZE, 0.6, -1}},  {{P_POSTERIZE, 0.6, 7}, {P_POSTERIZE, 0.6, 6}},
    {{P_EQUALIZE, 0.4, -1}, {P_SOLARIZE, 0.2, 4}},   {{P_EQUALIZE, 0.4, -1}, {P_ROTATE, 0.8, 8}},
    {{P_SOLARIZE, 0.6, 3}, {P_EQUALIZE, 0.6, -1}},   {{P_POSTERIZE, 0.8, 5}, {P_EQUALIZE, 1.0, -1}},
    {{P_ROTATE, 0.2, 3}, {P_SOLARIZE, 0.6, 8}},      {{P_EQUALIZE, 0.6, -1}, {P_POSTERIZE, 0.4, 6}},
    {{P_ROTATE, 0.8, 8}, {P_COLOR, 0.4, 0}},         {{P_ROTATE, 0.4, 9}, {P_EQUALIZE, 0.6, -1}},
    {{P_EQUALIZE, 0.0, -1}, {P_EQUALIZE, 0.8, -1}},  {{P_INVERT, 0.6, -1}, {P_EQUALIZE, 1.0, -1}},
    {{P_COLOR, 0.6, 4}, {P_CONTRAST, 1.0, 8}},       {{P_ROTATE, 0.8, 8}, {P_COLOR, 1.0, 2}},
    {{P_COLOR, 0.8, 8}, {P_SOLARIZE, 0.8, 7}},       {{P_SHARPNESS, 0.4, 7}, {P_INVERT, 0.6, -1}},
    {{P_SHEAR_X, 0.6, 5}, {P_EQUALIZE, 1.0, -1}},    {{P_COLOR, 0.4, 0}, {P_EQUALIZE, 0.6, -1}},
    {{P_EQUALIZE, 0.4, -1}, {P_SOLARIZE, 0.2, 4}},   {{P_SOLARIZE, 0.6, 5}, {P_AUTOCONTRAST, 0.6, -1}},
    {{P_INVERT, 0.6, -1}, {P_EQUALIZE, 1.0, -1}},    {{P_COLOR, 0.6, 4}, {P_CONTRAST, 1.0, 8}},
    {{P_EQUALIZE, 0.8, -1}, {P_EQUALIZE, 0.6, -1}},
};

bool signed_op(int o) { return o >= P_SHEAR_X && o <= P_SHARPNESS; }
bool has_magnitude(int o) { return o >= P_SHEAR_X && o <= P_SOLARIZE; }

/* torch.linspace(start, end, steps)[i] in float32: from both ends, each value one
 * fused multiply-add (what torch's CPU kernel compiles to; checked against it for the
 * tables used here by tests/ops/test_policies.py) */
float linspace_f(double start, double end, int steps, int i)
{
    const float a = (float)start, b = (float)end;
    if (steps == 1)
        return a;
    const float step = (b - a) / (float)(steps - 1);
    return i < steps / 2 ? std::fmaf(step, (float)i, a) : std::fmaf(-step, (float)(steps - i - 1), b);
}

/* torchvision's magnitude of op o at bin i of n for an h x w image (wide: the
 * TrivialAugmentWide ranges) */
double magnitude(int o, int i, int n, int h, int w, bool wide)
{
    switch (o) {
    case P_SHEAR_X:
    case P_SHEAR_Y: return linspace_f(0.0, wide ? 0.99 : 0.3, n, i);
    case P_TRANSLATE_X: return linspace_f(0.0, wide ? 32.0 : 150.0 / 331.0 * w, n, i);
    case P_TRANSLATE_Y: return linspace_f(0.0, wide ? 32.0 : 150.0 / 331.0 * h, n, i);
    case P_ROTATE: return linspace_f(0.0, wide ? 135.0 : 30.0, n, i);
    case P_BRIGHTNESS:
    case P_COLOR:
    case P_CONTRAST:
    case P_SHARPNESS: return linspace_f(0.0, wide ? 0.99 : 0.9, n, i);
    case P_POSTERIZE: /* (8 - arange(n) / ((n - 1) / 4 or 6)).round().int() */
        return std::nearbyint(8.0f - (float)i / (float)((n - 1) / (wide ? 6.0 : 4.0)));
    case P_SOLARIZE: return linspace_f(1.0, 0.0, n, i);
    default: return 0.0;
    }
}

bool valid_fill(const double *f)
{
    for (int k = 0; k < 3; k++)
        if (!(std::isfinite(f[k]) && f[k] >= 0 && f[k] <= 255))
            return false;
    return true;
}

bool is_int(double v) { return std::isfinite(v) && v == std::floor(v); }

/* one op of the policy: choice, then (bin), then sign */
void draw_one(fq_rng *rng, int k, int bin, int n, int h, int w, bool wide, fq_img_op_explain &r)
{
    int o = (int)fq_rng_next_below(rng, P_COUNT);
    double m = 0.0;
    if (has_magnitude(o)) {
        if (bin < 0)
            bin = (int)fq_rng_next_below(rng, (uint64_t)n);
        m = magnitude(o, bin, n, h, w, wide);
        if (signed_op(o) && fq_rng_uniform(rng) <= 0.5)
            m = -m;
    }
    r.order[k] = o == P_IDENTITY ? 0 : fq_img_op_kind(kNames[o]);
    r.factor[k] = m;
    r.params[k] = has_magnitude(o) ? bin : 0;
}

}  // namespace

namespace fqi {

const char *auto_augment_check(const fq_op &op)
{
    const AugAutoAugment &q = params<AugAutoAugment>(op);
    if (q.policy != 0)
        return "policy must be 0 (imagenet)";
    return valid_fill(q.fill) ? nullptr : "fill must be 3 numbers in [0, 255]";
}

/* sub-policy U{0..24}; per op: applied if u <= p; then, signed ops, negated if u <= 0.5;
 * the ops applied are listed (r.applied of them); params[4] = the sub-policy */
int auto_augment_plan(const fq_op &, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    const int sp = (int)fq_rng_next_below(rng, 25);
    r.applied = 0;
    r.params[4] = sp;
    for (const SubOp &s : kImageNet[sp]) {
        if (!(fq_rng_uniform(rng) <= s.p))
            continue;
        double m = s.bin >= 0 ? magnitude(s.op, s.bin, 10, *h, *w, false) : 0.0;
        if (signed_op(s.op) && fq_rng_uniform(rng) <= 0.5)
            m = -m;
        const int k = r.applied++;
        r.order[k] = fq_img_op_kind(kNames[s.op]);
        r.factor[k] = m;
        r.params[k] = s.bin >= 0 ? s.bin : 0;
    }
    return FQ_OK;
}

const char *rand_augment_check(const fq_op &op)
{
    const AugRandAugment &q = params<AugRandAugment>(op);
    if (!(is_int(q.num_ops) && q.num_ops >= 0 && q.num_ops <= 4))
        return "num_ops must be an integer in [0, 4]";
    if (!(is_int(q.num_bins) && q.num_bins >= 2 && q.num_bins <= 1000))
        return "num_magnitude_bins must be an integer in [2, 1000]";
    if (!(is_int(q.magnitude) && q.magnitude >= 0 && q.magnitude < q.num_bins))
        return "magnitude must be an integer in [0, num_magnitude_bins)";
    return valid_fill(q.fill) ? nullptr : "fill must be 3 numbers in [0, 255]";
}

const char *trivial_augment_check(const fq_op &op)
{
    const AugTrivialAugment &q = params<AugTrivialAugment>(op);
    if (!(is_int(q.num_bins) && q.num_bins >= 2 && q.num_bins <= 1000))
        return "num_magnitude_bins must be an integer in [2, 1000]";
    return valid_fill(q.fill) ? nullptr : "fill must be 3 numbers in [0, 255]";
}

int rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    const AugRandAugment &q = params<AugRandAugment>(op);
    r.applied = (int)q.num_ops;
    for (int k = 0; k < r.applied; k++)
        draw_one(rng, k, (int)q.magnitude, (int)q.num_bins, *h, *w, false, r);
    return FQ_OK;
}

int trivial_augment_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    r.applied = 1;
    draw_one(rng, 0, -1, (int)params<AugTrivialAugment>(op).num_bins, *h, *w, true, r);
    return FQ_OK;
}

void policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    /* fill is the last field of both structs */
    const char *policy = fq_img_op_name(op.kind);
    const double *fill = !std::strcmp(policy, "RandAugment")          ? params<AugRandAugment>(op).fill
                         : !std::strcmp(policy, "TrivialAugmentWide") ? params<AugTrivialAugment>(op).fill
                                                                       : params<AugAutoAugment>(op).fill;
    for (int k = 0; k < r.applied && k < 4; k++) {
        const int kind = r.order[k];
        if (kind <= 0)
            continue; /* Identity */
        const double m = r.factor[k];
        const char *name = fq_img_op_name(kind);
        double v = m; /* shear, translate, rotate: as is; posterize: the bits */
        if (!std::strcmp(name, "Brightness") || !std::strcmp(name, "Color") || !std::strcmp(name, "Contrast") ||
            !std::strcmp(name, "Sharpness"))
            v = 1.0 + m;
        else if (!std::strcmp(name, "Solarize"))
            v = 255.0 * m;
        aug_apply(e, kind, v, fill);
    }
}

}  // namespace fqi

/* ---- the records of this family, torchvision's RandAugment / TrivialAugmentWide /
 * AutoAugment: kinds fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fq_op_field kRandAugmentFields[] = {
    FQ_FIELD(fqi::AugRandAugment, num_ops), FQ_FIELD(fqi::AugRandAugment, magnitude),
    FQ_FIELD(fqi::AugRandAugment, num_bins), FQ_FIELD(fqi::AugRandAugment, fill)};
constexpr fq_op_field kTrivialFields[] = {FQ_FIELD(fqi::AugTrivialAugment, num_bins),
                                          FQ_FIELD(fqi::AugTrivialAugment, fill)};
constexpr fq_op_field kAutoAugmentFields[] = {FQ_FIELD(fqi::AugAutoAugment, policy),
                                              FQ_FIELD(fqi::AugAutoAugment, fill)};

constexpr fqi::OpImpl kPolicyRecords[] = {
    {26, "RandAugment", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugRandAugment, kRandAugmentFields),
     fqi::rand_augment_check, fqi::keeps_size, fqi::rand_augment_plan, fqi::policy_exec},
    {27, "TrivialAugmentWide", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugTrivialAugment, kTrivialFields),
     fqi::trivial_augment_check, fqi::keeps_size, fqi::trivial_augment_plan, fqi::policy_exec},
    {31, "AutoAugment", FQ_RULE_REFUSED, FQ_EXPLAIN_POLICY, FQ_PARAMS(fqi::AugAutoAugment, kAutoAugmentFields),
     fqi::auto_augment_check, fqi::keeps_size, fqi::auto_augment_plan, fqi::policy_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsPolicy, kPolicyRecords)
