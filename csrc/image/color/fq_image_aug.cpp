/* fq_image_aug.cpp - the uint8 colour primitives Invert .. Sharpness (kinds
 * FQ_OP_NORMALIZE + 1 .. + 10) and RandomChannelPermutation: their parameter structs, field lists, check / plan /
 * exec and their records (family kOpsAug; fq_image_op_table.cpp assembles the
 * families), and the shared LUT helpers (apply_lut{,s}, aug_apply).  The geometric
 * primitives and Cutout: fq_image_aug_geom.cpp.  Semantics: torchvision.transforms.v2.functional on uint8 tensors
 * (SolarizeAdd: TF Model Garden), computed in float32 as torch does; the exact
 * definitions and the measured differences are in docs/ops.md.  Pure functions of
 * their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"
#include "image/internal/fq_image_detection.h" /* targets: detection geometry ops */
#include "image/internal/fq_image_iou_crop.h"
#include "image/internal/fq_image_keras.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <opencv2/imgproc.hpp>

namespace {

using fqi::apply_lut;
using fqi::apply_luts;
using fqi::Exec;
using fqi::fma_exact;
using fqi::geom_exec;
using fqi::GEOM_KEEP;

/* ---- parameter structs (doubles only; FQ_FIELD lists below) ------------------- */

struct AugProb {     /* Invert, AutoContrast, Equalize */
    double p;        /* probability of applying the op */
};
struct AugPosterize {
    double bits;     /* 0..8: keep the top `bits` bits */
    double p;
};
struct AugLevel {    /* Solarize (threshold), Brightness/Color/Contrast/Sharpness (factor) */
    double level[2]; /* drawn uniformly in [lo, hi] (no draw when lo == hi) */
    double p;
};
struct AugSolarizeAdd {
    double addition; /* integer in [-255, 255] added to pixels below threshold, clipped */
    double threshold;
    double p;
};

bool is_int(double v) { return std::isfinite(v) && v == std::floor(v); }
bool valid_prob(double p) { return std::isfinite(p) && p >= 0 && p <= 1; }
bool valid_level(const double *l) { return std::isfinite(l[0]) && std::isfinite(l[1]) && l[0] <= l[1]; }

const char *prob_check(const fq_op &op)
{
    return valid_prob(fqi::params<AugProb>(op).p) ? nullptr : "p must be in [0, 1]";
}

const char *posterize_check(const fq_op &op)
{
    const AugPosterize &q = fqi::params<AugPosterize>(op);
    if (!(is_int(q.bits) && q.bits >= 0 && q.bits <= 8))
        return "bits must be an integer in [0, 8]";
    return valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

const char *level_check(const AugLevel &q, double lo, double hi, const char *why)
{
    if (!valid_level(q.level) || q.level[0] < lo || q.level[1] > hi)
        return why;
    return valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

const char *solarize_check(const fq_op &op)
{
    return level_check(fqi::params<AugLevel>(op), 0, 256, "threshold must satisfy 0 <= min <= max <= 256");
}

const char *factor_check(const fq_op &op)
{
    return level_check(fqi::params<AugLevel>(op), 0, 1e6, "factor must satisfy 0 <= min <= max (finite)");
}

const char *solarize_add_check(const fq_op &op)
{
    const AugSolarizeAdd &q = fqi::params<AugSolarizeAdd>(op);
    if (!(is_int(q.addition) && q.addition >= -255 && q.addition <= 255))
        return "addition must be an integer in [-255, 255]";
    if (!(std::isfinite(q.threshold) && q.threshold >= 0 && q.threshold <= 256))
        return "threshold must be in [0, 256]";
    return valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

using fqi::keeps_size;

/* ---- planning: u < p decides; then the level (if a range) --------------------------- */

int plan_prob(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    r.applied = fq_rng_uniform(rng) < fqi::params<AugProb>(op).p ? 1 : 0;
    return FQ_OK;
}

int plan_posterize(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugPosterize &q = fqi::params<AugPosterize>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    r.factor[0] = q.bits;
    return FQ_OK;
}

int plan_level(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugLevel &q = fqi::params<AugLevel>(op);
    fqi::aug_plan_p_level(rng, q.p, q.level, r);
    return FQ_OK;
}

int plan_solarize_add(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugSolarizeAdd &q = fqi::params<AugSolarizeAdd>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    r.factor[0] = q.addition;
    return FQ_OK;
}

/* ---- execution helpers ------------------------------------------------------------ */

using fqi::aug_blend;
using fqi::aug_clamp_trunc;

/* the sum of the floored grey values (gray_value; the single channel of a grey image):
 * integers, so the double sum is exact in any order (AVX2: gray_sum_simd) */
double gray_sum(const cv::Mat &m)
{
    double sum = 0;
    if (m.channels() == 3 && fqi::gray_sum_simd(m, &sum))
        return sum;
    const int c = m.channels();
    for (int y = 0; y < m.rows; y++) {
        const uint8_t *s = m.ptr<uint8_t>(y);
        for (int x = 0; x < m.cols; x++, s += c)
            sum += c == 1 ? (float)s[0] : fqi::gray_value(s);
    }
    return sum;
}

/* ---- pixel ops ---------------------------------------------------------------------- */

void invert_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = (uint8_t)(255 - v);
    apply_lut(e, lut);
}

/* RandomChannelPermutation (torchvision v2): u < p, then, when applied, a permutation of
 * the 3 channels by Fisher-Yates (k = 2, 1: j ~ U{0..k}, swap perm[k], perm[j]; 2 draws,
 * also for a 1-channel image, where it changes nothing); output channel c is input channel
 * perm[c].  Explain: magnitude = 100 perm[0] + 10 perm[1] + perm[2]. */
int plan_channel_permutation(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    r.applied = fq_rng_uniform(rng) < fqi::params<AugProb>(op).p ? 1 : 0;
    int perm[3] = {0, 1, 2};
    if (r.applied)
        for (int k = 2; k > 0; k--)
            std::swap(perm[k], perm[(int)fq_rng_next_below(rng, (uint64_t)(k + 1))]);
    r.factor[0] = 100 * perm[0] + 10 * perm[1] + perm[2];
    return FQ_OK;
}

void channel_permutation_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    const int code = (int)r.factor[0];
    if (!r.applied || e.cur.channels() != 3 || code == 12) /* 012: the identity */
        return;
    const int from_to[6] = {code / 100, 0, code / 10 % 10, 1, code % 10, 2};
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    cv::mixChannels(&e.cur, 1, &d, 1, from_to, 3);
    e.set(d);
}

void posterize_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied || r.factor[0] >= 8)
        return;
    const int bits = (int)r.factor[0];
    const uint8_t mask = (uint8_t)(((1 << bits) - 1) << (8 - bits));
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = (uint8_t)(v & mask);
    apply_lut(e, lut);
}

void solarize_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const float t = (float)r.factor[0];
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = (float)v >= t ? (uint8_t)(255 - v) : (uint8_t)v;
    apply_lut(e, lut);
}

void solarize_add_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const AugSolarizeAdd &q = fqi::params<AugSolarizeAdd>(op);
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) {
        int a = v + (int)q.addition;
        lut[v] = (double)v < q.threshold ? (uint8_t)(a < 0 ? 0 : (a > 255 ? 255 : a)) : (uint8_t)v;
    }
    apply_lut(e, lut);
}

/* per channel counts; RGB pixels alternate between two sets of tables (fewer stalls on
 * repeated values), summed at the end */
void channel_histograms(const cv::Mat &m, int hist[3][256])
{
    const int c = m.channels();
    std::memset(hist, 0, sizeof(int) * 3 * 256);
    if (c == 3) {
        int h2[3][256];
        std::memset(h2, 0, sizeof h2);
        for (int y = 0; y < m.rows; y++) {
            const uint8_t *s = m.ptr<uint8_t>(y);
            int x = 0;
            for (; x + 2 <= m.cols; x += 2, s += 6) {
                hist[0][s[0]]++, hist[1][s[1]]++, hist[2][s[2]]++;
                h2[0][s[3]]++, h2[1][s[4]]++, h2[2][s[5]]++;
            }
            if (x < m.cols)
                hist[0][s[0]]++, hist[1][s[1]]++, hist[2][s[2]]++;
        }
        for (int k = 0; k < 3; k++)
            for (int v = 0; v < 256; v++)
                hist[k][v] += h2[k][v];
        return;
    }
    for (int y = 0; y < m.rows; y++) {
        const uint8_t *s = m.ptr<uint8_t>(y);
        for (int x = 0; x < m.cols * c; x += c)
            for (int k = 0; k < c; k++)
                hist[k][s[x + k]]++;
    }
}

void autocontrast_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    int hist[3][256];
    channel_histograms(e.cur, hist);
    uint8_t lut[3][256];
    for (int k = 0; k < e.cur.channels(); k++) {
        int lo = 0, hi = 255;
        while (lo < 255 && hist[k][lo] == 0)
            lo++;
        while (hi > 0 && hist[k][hi] == 0)
            hi--;
        float mn = (float)lo, inv = (float)(hi - lo) * (float)(1.0 / 255.0);
        if (hi <= lo)
            mn = 0.f, inv = 1.f;
        for (int v = 0; v < 256; v++)
            lut[k][v] = aug_clamp_trunc(((float)v - mn) / inv);
    }
    apply_luts(e, lut);
}

/* torchvision v2 equalize_image (PIL's ImageOps.equalize): per channel, step = (N - count
 * of the largest value present) // 255; step 0: unchanged; lut[0] = 0, lut[k] =
 * min((cum[k-1] + step // 2) // step, 255) */
void equalize_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    int hist[3][256];
    channel_histograms(e.cur, hist);
    const int64_t n = (int64_t)e.cur.rows * e.cur.cols;
    uint8_t lut[3][256];
    for (int k = 0; k < e.cur.channels(); k++) {
        int top = 255;
        while (top > 0 && hist[k][top] == 0)
            top--;
        int64_t step = (n - hist[k][top]) / 255;
        int64_t cum = 0;
        lut[k][0] = 0;
        for (int v = 0; v < 256; v++) {
            if (step == 0) {
                lut[k][v] = (uint8_t)v;
                continue;
            }
            if (v > 0) {
                int64_t q = (cum + step / 2) / step;
                lut[k][v] = (uint8_t)(q > 255 ? 255 : q);
            }
            cum += hist[k][v];
        }
    }
    apply_luts(e, lut);
}

void brightness_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const float f = (float)r.factor[0];
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = aug_clamp_trunc((float)v * f);
    apply_lut(e, lut);
}

void contrast_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const float mean = (float)(gray_sum(e.cur) / ((double)e.cur.rows * e.cur.cols));
    r.contrast_mean = mean;
    const float f = (float)r.factor[0], f1 = (float)(1.0 - r.factor[0]);
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = aug_blend((float)v, mean, f, f1);
    apply_lut(e, lut);
}

void color_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied || e.cur.channels() != 3)
        return;
    const float f = (float)r.factor[0], f1 = (float)(1.0 - r.factor[0]);
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    if (!fqi::color_simd(e.cur, d, f, f1)) { /* a grey row, then the blends (color_pixel's values) */
        float *g = e.s->g1.mat(1, e.cur.cols, CV_32FC1).ptr<float>(0);
        for (int y = 0; y < e.cur.rows; y++) {
            const uint8_t *s = e.cur.ptr<uint8_t>(y);
            uint8_t *o = d.ptr<uint8_t>(y);
            for (int x = 0; x < e.cur.cols; x++)
                g[x] = fqi::gray_value(s + 3 * x);
            for (int x = 0; x < e.cur.cols; x++)
                for (int k = 0; k < 3; k++)
                    o[3 * x + k] = aug_blend((float)s[3 * x + k], g[x], f, f1);
        }
    }
    e.set(d);
}

/* interior: sharpness_value (fq_image_aug.h; never a tie: 13 is odd); the 1-pixel border
 * is kept */
void sharpness_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    if (!r.applied || H <= 2 || W <= 2)
        return;
    const float f1 = (float)(1.0 - r.factor[0]);
    cv::Mat d = e.next(H, W, e.cur.type());
    const size_t rb = (size_t)W * c;
    std::memcpy(d.ptr<uint8_t>(0), e.cur.ptr<uint8_t>(0), rb);
    std::memcpy(d.ptr<uint8_t>(H - 1), e.cur.ptr<uint8_t>(H - 1), rb);
    for (int y = 1; y < H - 1; y++) {
        const uint8_t *m = e.cur.ptr<uint8_t>(y);
        uint8_t *o = d.ptr<uint8_t>(y);
        std::memcpy(o, m, c);
        std::memcpy(o + rb - c, m + rb - c, c);
    }
    if (!fqi::sharpness_simd(e.cur, d, f1))
        for (int y = 1; y < H - 1; y++) {
            const uint8_t *u = e.cur.ptr<uint8_t>(y - 1), *m = e.cur.ptr<uint8_t>(y), *b = e.cur.ptr<uint8_t>(y + 1);
            uint8_t *o = d.ptr<uint8_t>(y);
            for (int i = c; i < (W - 1) * c; i++)
                o[i] = fqi::sharpness_value(u, m, b, i, c, f1);
        }
    e.set(d);
}

/* ---- the records of this family (kOpsAug) ---------------------------------------- */

constexpr fq_op_field kProbFields[] = {FQ_FIELD(AugProb, p)};
constexpr fq_op_field kPosterizeFields[] = {FQ_FIELD(AugPosterize, bits), FQ_FIELD(AugPosterize, p)};
constexpr fq_op_field kLevelFields[] = {FQ_FIELD(AugLevel, level), FQ_FIELD(AugLevel, p)};
constexpr fq_op_field kSolarizeAddFields[] = {FQ_FIELD(AugSolarizeAdd, addition), FQ_FIELD(AugSolarizeAdd, threshold),
                                              FQ_FIELD(AugSolarizeAdd, p)};

constexpr unsigned kAM = FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE;

/* kinds are part of packed chains and saved specs: a record's kind never changes */
constexpr fqi::OpImpl kAugOps[] = {
    {11, "Invert", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED, FQ_PARAMS(AugProb, kProbFields), prob_check, keeps_size,
     plan_prob, invert_exec},
    {12, "AutoContrast", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED, FQ_PARAMS(AugProb, kProbFields), prob_check, keeps_size,
     plan_prob, autocontrast_exec},
    {13, "Equalize", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED, FQ_PARAMS(AugProb, kProbFields), prob_check, keeps_size,
     plan_prob, equalize_exec},
    {14, "Posterize", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugPosterize, kPosterizeFields), posterize_check, keeps_size,
     plan_posterize, posterize_exec},
    {15, "Solarize", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugLevel, kLevelFields), solarize_check, keeps_size, plan_level,
     solarize_exec},
    {16, "SolarizeAdd", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugSolarizeAdd, kSolarizeAddFields), solarize_add_check,
     keeps_size, plan_solarize_add, solarize_add_exec},
    {17, "Brightness", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugLevel, kLevelFields), factor_check, keeps_size, plan_level,
     brightness_exec},
    {18, "Color", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugLevel, kLevelFields), factor_check, keeps_size, plan_level,
     color_exec},
    {19, "Contrast", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugLevel, kLevelFields), factor_check, keeps_size, plan_level,
     contrast_exec},
    {20, "Sharpness", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugLevel, kLevelFields), factor_check, keeps_size, plan_level,
     sharpness_exec},
    {57, "RandomChannelPermutation", FQ_RULE_PIXEL, kAM, FQ_PARAMS(AugProb, kProbFields), prob_check, keeps_size,
     plan_channel_permutation, channel_permutation_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsAug, kAugOps)

namespace fqi {

/* one table per channel (lut[k] for channel k of c), into a fresh buffer (lut_simd, else
 * cv::LUT) */
void apply_luts(Exec &e, const uint8_t (*lut)[256])
{
    const int c = e.cur.channels();
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    const uint8_t *const l3[3] = {lut[0], c == 3 ? lut[1] : lut[0], c == 3 ? lut[2] : lut[0]};
    if (!lut_simd(e.cur, d, l3)) {
        uint8_t inter[256 * 3];
        for (int v = 0; v < 256; v++)
            for (int k = 0; k < c; k++)
                inter[v * c + k] = lut[k][v];
        cv::Mat lm(1, 256, CV_8UC(c), inter);
        cv::LUT(e.cur, lm, d);
    }
    e.set(d);
}

void apply_lut(Exec &e, const uint8_t lut[256])
{
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    const uint8_t *const l3[3] = {lut, lut, lut};
    cv::Mat flat = e.cur.reshape(1), dflat = d.reshape(1); /* one table: channels do not matter */
    if (!lut_simd(flat, dflat, l3)) {
        cv::Mat lm(1, 256, CV_8U, const_cast<uint8_t *>(lut));
        cv::LUT(e.cur, lm, d);
    }
    e.set(d);
}


void aug_apply(Exec &e, int kind, double value, const double fill[3])
{
    const OpImpl *impl = op_impl(kind);
    if (!impl)
        return;
    fq_op op;
    std::memset(&op, 0, sizeof op);
    op.kind = kind;
    fqi::AugGeom q{{value, value}, {fill[0], fill[1], fill[2]}, 1.0};
    std::memcpy(op.raw, &q, sizeof q);
    fq_img_op_explain r;
    std::memset(&r, 0, sizeof r);
    r.kind = kind, r.applied = 1;
    r.in_h = r.out_h = e.cur.rows, r.in_w = r.out_w = e.cur.cols;
    const int g = aug_geom_kind(kind);
    if (g >= 0)
        geom_matrix(g, &value, e.cur.rows, e.cur.cols, r.matrix);
    r.factor[0] = value;
    impl->exec(e, op, r);
}

}  // namespace fqi
