/* fq_image.cpp - spec validation, per-sample planning (all random draws), op execution
 * with OpenCV on uint8 images, and the fused normalize/dtype/layout write.
 * Semantics: docs/ops.md. */
#include "fq_image_internal.h"

#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "fq_rng.h"

static_assert(sizeof(fq_op) == 136, "fq_op layout must match fastq.ops.FQ_OP_DTYPE");
static_assert(offsetof(fq_op, raw) == 8, "fq_op layout must match fastq.ops.FQ_OP_DTYPE");
static_assert(sizeof(fq_op_random_affine) <= sizeof(double[16]) && sizeof(fq_op_color_jitter) <= sizeof(double[16]) &&
                  sizeof(fq_op_random_crop) <= sizeof(double[16]),
              "op parameters must fit the 16 doubles of FQ_OP_DTYPE");

#define FQ_IMG_MAX_SIDE 32768

struct fq_img_spec {
    fq_op ops[FQ_IMG_MAX_OPS]; /* without the trailing Normalize */
    int n_ops;
    fq_img_format fmt;
    int out_h, out_w, out_c;
    size_t row_bytes;
    float lut_f32[3][256];
    uint16_t lut_f16[3][256]; /* float16 or bfloat16 bits, as fmt.dtype says */
    fqi::F32Affine f32k; /* SIMD form of lut_f32 (fq_image_write_simd.cpp) */
};

namespace {

/* ---- helpers ------------------------------------------------------------- */

uint16_t float_to_half(float f)
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mant = x & 0x7FFFFFu;
    int exp = (int)((x >> 23) & 0xFF);
    if (exp == 0xFF) /* inf / nan */
        return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0u));
    int e = exp - 127 + 15;
    if (e >= 0x1F)
        return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent: still correct (rounds to inf at the top) */
    return (uint16_t)(sign | h);
}

/* float32 -> bfloat16 bits, round to nearest even (NaN stays a quiet NaN) */
uint16_t float_to_bfloat16(float f)
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u); /* may carry into the exponent: rounds to inf at the top */
    return (uint16_t)(x >> 16);
}

bool is_int(double v) { return std::isfinite(v) && v == std::floor(v); }
bool valid_side(double v) { return is_int(v) && v >= 1 && v <= FQ_IMG_MAX_SIDE; }
bool valid_pad(double v) { return is_int(v) && v >= 0 && v <= FQ_IMG_MAX_SIDE; }
bool valid_prob(double p) { return std::isfinite(p) && p >= 0 && p <= 1; }
bool valid_range(double lo, double hi) { return std::isfinite(lo) && std::isfinite(hi) && lo <= hi; }
bool valid_interp(double v, bool allow_area)
{
    return is_int(v) && v >= 0 && v <= 4 && (allow_area || v != FQ_INTERP_AREA);
}
bool valid_border(double v) { return is_int(v) && v >= 0 && v <= 3; }

int cv_border(int b)
{
    switch (b) {
    case FQ_BORDER_REPLICATE: return cv::BORDER_REPLICATE;
    case FQ_BORDER_REFLECT: return cv::BORDER_REFLECT_101;
    case FQ_BORDER_SYMMETRIC: return cv::BORDER_REFLECT;
    default: return cv::BORDER_CONSTANT;
    }
}

int bad_op(fq_err *err, int i, const fq_op &op, const char *why)
{
    return fq_set_err(err, FQ_E_INVALID, "op %d (%s): %s", i, fq_img_op_name(op.kind), why);
}

int check_op(int i, const fq_op &op, fq_err *err)
{
    switch (op.kind) {
    case FQ_OP_RANDOM_RESIZED_CROP: {
        const fq_op_rrc &p = op.rrc;
        if (!valid_side(p.out_h) || !valid_side(p.out_w))
            return bad_op(err, i, op, "size must be positive integers <= 32768");
        if (!(p.scale_lo > 0 && p.scale_lo <= p.scale_hi && p.scale_hi <= 1))
            return bad_op(err, i, op, "scale must satisfy 0 < min <= max <= 1");
        if (!(p.ratio_lo > 0 && p.ratio_lo <= p.ratio_hi && std::isfinite(p.ratio_hi)))
            return bad_op(err, i, op, "ratio must satisfy 0 < min <= max");
        if (!valid_interp(p.interp, true))
            return bad_op(err, i, op, "bad interpolation");
        return FQ_OK;
    }
    case FQ_OP_RESIZE: {
        const fq_op_resize &p = op.resize;
        if (p.shorter_side != 0) {
            if (!valid_side(p.shorter_side) || p.out_h != 0 || p.out_w != 0)
                return bad_op(err, i, op, "shorter side must be a positive integer <= 32768 (and h = w = 0)");
        } else if (!valid_side(p.out_h) || !valid_side(p.out_w)) {
            return bad_op(err, i, op, "size must be positive integers <= 32768");
        }
        if (!valid_interp(p.interp, true))
            return bad_op(err, i, op, "bad interpolation");
        return FQ_OK;
    }
    case FQ_OP_CENTER_CROP:
        if (!valid_side(op.center_crop.out_h) || !valid_side(op.center_crop.out_w))
            return bad_op(err, i, op, "size must be positive integers <= 32768");
        return FQ_OK;
    case FQ_OP_RANDOM_CROP: {
        const fq_op_random_crop &p = op.random_crop;
        if (!valid_side(p.out_h) || !valid_side(p.out_w))
            return bad_op(err, i, op, "size must be positive integers <= 32768");
        if (!valid_pad(p.pad_left) || !valid_pad(p.pad_top) || !valid_pad(p.pad_right) || !valid_pad(p.pad_bottom))
            return bad_op(err, i, op, "padding must be integers in [0, 32768]");
        if (p.pad_if_needed != 0 && p.pad_if_needed != 1)
            return bad_op(err, i, op, "pad_if_needed must be 0 or 1");
        if (!valid_border(p.border))
            return bad_op(err, i, op, "bad padding mode");
        return FQ_OK;
    }
    case FQ_OP_HFLIP:
    case FQ_OP_VFLIP:
    case FQ_OP_GRAYSCALE:
        if (!valid_prob(op.hflip.p))
            return bad_op(err, i, op, "p must be in [0, 1]");
        return FQ_OK;
    case FQ_OP_COLOR_JITTER: {
        const fq_op_color_jitter &p = op.color_jitter;
        for (int k = FQ_JITTER_BRIGHTNESS; k <= FQ_JITTER_SATURATION; k++)
            if (p.enabled[k] != 0 && !(valid_range(p.range[k][0], p.range[k][1]) && p.range[k][0] >= 0))
                return bad_op(err, i, op, "brightness/contrast/saturation ranges must satisfy 0 <= min <= max");
        const double *hue = p.range[FQ_JITTER_HUE];
        if (p.enabled[FQ_JITTER_HUE] != 0 && !(valid_range(hue[0], hue[1]) && hue[0] >= -0.5 && hue[1] <= 0.5))
            return bad_op(err, i, op, "hue range must satisfy -0.5 <= min <= max <= 0.5");
        return FQ_OK;
    }
    case FQ_OP_RANDOM_AFFINE: {
        const fq_op_random_affine &p = op.random_affine;
        if (!valid_range(p.degrees[0], p.degrees[1]) || !valid_range(p.scale[0], p.scale[1]) ||
            !valid_range(p.shear_x[0], p.shear_x[1]) || !valid_range(p.shear_y[0], p.shear_y[1]))
            return bad_op(err, i, op, "ranges must satisfy min <= max");
        if (!(p.translate[0] >= 0 && p.translate[0] <= 1 && p.translate[1] >= 0 && p.translate[1] <= 1))
            return bad_op(err, i, op, "translate fractions must be in [0, 1]");
        if (!(p.scale[0] > 0))
            return bad_op(err, i, op, "scale must be > 0");
        if (!(p.shear_x[0] > -90 && p.shear_x[1] < 90 && p.shear_y[0] > -90 && p.shear_y[1] < 90))
            return bad_op(err, i, op, "shear must be within (-90, 90) degrees");
        if (!valid_border(p.border))
            return bad_op(err, i, op, "bad border mode");
        if (!valid_interp(p.interp, false))
            return bad_op(err, i, op, "bad interpolation (area is not available for affine)");
        return FQ_OK;
    }
    case FQ_OP_NORMALIZE:
        for (int k = 0; k < 3; k++)
            if (!std::isfinite(op.normalize.mean[k]) || !std::isfinite(op.normalize.std[k]) || op.normalize.std[k] == 0)
                return bad_op(err, i, op, "mean must be finite and std finite and non-zero");
        return FQ_OK;
    default:
        return fq_set_err(err, FQ_E_INVALID, "op %d: unknown op kind %d", i, op.kind);
    }
}

/* ---- planning: every random draw of a sample ------------------------------- */

struct Plan {
    int n;
    fq_img_op_explain r[FQ_IMG_MAX_OPS];
};

void rrc_params(fq_rng *rng, const fq_op_rrc &p, int H, int W, int box[4])
{
    double area = (double)H * W;
    double lr0 = std::log(p.ratio_lo), lr1 = std::log(p.ratio_hi);
    for (int t = 0; t < 10; t++) {
        double target = area * fq_rng_uniform_range(rng, p.scale_lo, p.scale_hi);
        double ar = std::exp(fq_rng_uniform_range(rng, lr0, lr1));
        int w = (int)std::nearbyint(std::sqrt(target * ar));
        int h = (int)std::nearbyint(std::sqrt(target / ar));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            int y = (int)fq_rng_next_below(rng, (uint64_t)(H - h + 1));
            int x = (int)fq_rng_next_below(rng, (uint64_t)(W - w + 1));
            box[0] = x, box[1] = y, box[2] = w, box[3] = h;
            return;
        }
    }
    /* fallback: central crop clamped to the ratio range */
    double in_ratio = (double)W / H;
    int w, h;
    if (in_ratio < p.ratio_lo) {
        w = W;
        h = (int)std::nearbyint(w / p.ratio_lo);
    } else if (in_ratio > p.ratio_hi) {
        h = H;
        w = (int)std::nearbyint(h * p.ratio_hi);
    } else {
        w = W;
        h = H;
    }
    if (w < 1) w = 1;
    if (h < 1) h = 1;
    if (w > W) w = W;
    if (h > H) h = H;
    box[0] = (W - w) / 2, box[1] = (H - h) / 2, box[2] = w, box[3] = h;
}

int make_plan(const fq_img_spec *sp, int H, int W, uint64_t seed, uint64_t epoch, uint64_t index, Plan *pl,
              fq_err *err)
{
    fq_rng rng;
    fq_rng_init(&rng, seed, epoch, index);
    int h = H, w = W;
    int64_t maxpx = sp->fmt.max_pixels;
    pl->n = sp->n_ops;
    for (int i = 0; i < sp->n_ops; i++) {
        const fq_op &op = sp->ops[i];
        fq_img_op_explain &r = pl->r[i];
        std::memset(&r, 0, sizeof r);
        r.kind = op.kind;
        r.in_h = h, r.in_w = w;
        r.applied = 1;
        for (int k = 0; k < 4; k++)
            r.order[k] = -1;
        switch (op.kind) {
        case FQ_OP_RANDOM_RESIZED_CROP:
            rrc_params(&rng, op.rrc, h, w, r.box);
            h = (int)op.rrc.out_h, w = (int)op.rrc.out_w;
            break;
        case FQ_OP_RESIZE:
            if (op.resize.shorter_side != 0) {
                int side = (int)op.resize.shorter_side;
                int64_t nh, nw;
                if (w <= h) {
                    nw = side;
                    nh = (int64_t)((double)side * h / w);
                } else {
                    nh = side;
                    nw = (int64_t)((double)side * w / h);
                }
                if (nh < 1) nh = 1;
                if (nw < 1) nw = 1;
                if (nh * nw > maxpx || nh > INT32_MAX / 4 || nw > INT32_MAX / 4)
                    return fq_set_err(err, FQ_E_TOO_LARGE,
                                      "Resize(shorter_side=%d) of a %dx%d image gives %lldx%lld, over max_pixels=%lld",
                                      side, w, h, (long long)nw, (long long)nh, (long long)maxpx);
                h = (int)nh, w = (int)nw;
            } else {
                h = (int)op.resize.out_h, w = (int)op.resize.out_w;
            }
            break;
        case FQ_OP_CENTER_CROP: {
            int th = (int)op.center_crop.out_h, tw = (int)op.center_crop.out_w;
            r.box[0] = tw > w ? -((tw - w) / 2) : (int)std::nearbyint((w - tw) / 2.0);
            r.box[1] = th > h ? -((th - h) / 2) : (int)std::nearbyint((h - th) / 2.0);
            r.box[2] = tw, r.box[3] = th;
            h = th, w = tw;
            break;
        }
        case FQ_OP_RANDOM_CROP: {
            const fq_op_random_crop &p = op.random_crop;
            int th = (int)p.out_h, tw = (int)p.out_w;
            int pl_ = (int)p.pad_left, pt = (int)p.pad_top, pr = (int)p.pad_right, pb = (int)p.pad_bottom;
            int ph = h + pt + pb, pw = w + pl_ + pr;
            if (p.pad_if_needed != 0 && pw < tw) {
                int d = tw - pw;
                pl_ += d, pr += d;
                pw += 2 * d;
            }
            if (p.pad_if_needed != 0 && ph < th) {
                int d = th - ph;
                pt += d, pb += d;
                ph += 2 * d;
            }
            if (ph < th || pw < tw)
                return fq_set_err(err, FQ_E_INVALID,
                                  "RandomCrop: crop %dx%d is larger than the (padded) image %dx%d "
                                  "(use pad_if_needed=True)", tw, th, pw, ph);
            r.pad[0] = pl_, r.pad[1] = pt, r.pad[2] = pr, r.pad[3] = pb;
            int y = 0, x = 0;
            if (!(ph == th && pw == tw)) {
                y = (int)fq_rng_next_below(&rng, (uint64_t)(ph - th + 1));
                x = (int)fq_rng_next_below(&rng, (uint64_t)(pw - tw + 1));
            }
            r.box[0] = x, r.box[1] = y, r.box[2] = tw, r.box[3] = th;
            h = th, w = tw;
            break;
        }
        case FQ_OP_HFLIP:
            r.applied = fq_rng_uniform(&rng) < op.hflip.p ? 1 : 0;
            break;
        case FQ_OP_VFLIP:
            r.applied = fq_rng_uniform(&rng) < op.vflip.p ? 1 : 0;
            break;
        case FQ_OP_GRAYSCALE:
            r.applied = fq_rng_uniform(&rng) < op.grayscale.p ? 1 : 0;
            break;
        case FQ_OP_COLOR_JITTER: {
            int perm[4] = {0, 1, 2, 3};
            for (int k = 3; k > 0; k--) {
                int j = (int)fq_rng_next_below(&rng, (uint64_t)(k + 1));
                int t = perm[k];
                perm[k] = perm[j];
                perm[j] = t;
            }
            r.factor[0] = r.factor[1] = r.factor[2] = 1.0;
            r.factor[3] = 0.0;
            const fq_op_color_jitter &p = op.color_jitter;
            for (int k = 0; k < 4; k++)
                if (p.enabled[k] != 0)
                    r.factor[k] = fq_rng_uniform_range(&rng, p.range[k][0], p.range[k][1]);
            int n = 0;
            for (int k = 0; k < 4; k++)
                if (p.enabled[perm[k]] != 0)
                    r.order[n++] = perm[k];
            r.applied = n;
            break;
        }
        case FQ_OP_RANDOM_AFFINE: {
            const fq_op_random_affine &p = op.random_affine;
            double angle = fq_rng_uniform_range(&rng, p.degrees[0], p.degrees[1]);
            double mx = p.translate[0] * w, my = p.translate[1] * h;
            double tx = std::nearbyint(fq_rng_uniform_range(&rng, -mx, mx));
            double ty = std::nearbyint(fq_rng_uniform_range(&rng, -my, my));
            double sc = fq_rng_uniform_range(&rng, p.scale[0], p.scale[1]);
            double shx = fq_rng_uniform_range(&rng, p.shear_x[0], p.shear_x[1]);
            double shy = fq_rng_uniform_range(&rng, p.shear_y[0], p.shear_y[1]);
            r.params[0] = angle, r.params[1] = tx, r.params[2] = ty, r.params[3] = sc, r.params[4] = shx;
            r.shear_y = shy;
            const double d2r = 3.14159265358979323846 / 180.0;
            double a = angle * d2r, ca = std::cos(a), sa = std::sin(a);
            double kx = std::tan(shx * d2r), ky = std::tan(shy * d2r);
            /* A = R * Sh * s; R = [[c, s], [-s, c]] (counter-clockwise on screen, y down) */
            double a00 = sc * (ca + sa * ky), a01 = sc * (ca * kx + sa);
            double a10 = sc * (-sa + ca * ky), a11 = sc * (-sa * kx + ca);
            double cx = (w - 1) * 0.5, cy = (h - 1) * 0.5;
            r.matrix[0] = a00, r.matrix[1] = a01, r.matrix[2] = cx + tx - (a00 * cx + a01 * cy);
            r.matrix[3] = a10, r.matrix[4] = a11, r.matrix[5] = cy + ty - (a10 * cx + a11 * cy);
            break;
        }
        default:
            break;
        }
        r.out_h = h, r.out_w = w;
    }
    return FQ_OK;
}

/* ---- execution ------------------------------------------------------------ */

struct Exec {
    fq_img_scratch *s;
    cv::Mat cur;
    const void *cur_buf = nullptr; /* which Buf holds cur (nullptr: not a/b) */
    bool hflip = false, vflip = false;

    cv::Mat next(int h, int w, int type)
    {
        fqi::Buf *b = (cur_buf == &s->a) ? &s->b : &s->a;
        cv::Mat m = b->mat(h, w, type);
        return m;
    }
    void set(const cv::Mat &m)
    {
        cur = m;
        if (!m.empty() && m.datastart >= s->a.v.data() && m.datastart < s->a.v.data() + s->a.v.size())
            cur_buf = &s->a;
        else if (!m.empty() && m.datastart >= s->b.v.data() && m.datastart < s->b.v.data() + s->b.v.size())
            cur_buf = &s->b;
        else
            cur_buf = nullptr;
    }
    void materialize_flips()
    {
        if (!hflip && !vflip)
            return;
        cv::Mat d = next(cur.rows, cur.cols, cur.type());
        cv::flip(cur, d, hflip && vflip ? -1 : (hflip ? 1 : 0));
        set(d);
        hflip = vflip = false;
    }
    void resize_to(const cv::Mat &src, int h, int w, int interp)
    {
        if (src.rows == h && src.cols == w) {
            set(src);
            return;
        }
        cv::Mat d = next(h, w, src.type());
        cv::resize(src, d, cv::Size(w, h), 0, 0, interp);
        set(d);
    }
    /* crop box (x, y, w, h) of cur, padding what falls outside with border/fill */
    void crop_pad(const int box[4], int border, const double *fill)
    {
        int x0 = box[0], y0 = box[1], x1 = box[0] + box[2], y1 = box[1] + box[3];
        if (x0 >= 0 && y0 >= 0 && x1 <= cur.cols && y1 <= cur.rows) {
            set(cur(cv::Rect(x0, y0, box[2], box[3])));
            return;
        }
        int ix0 = std::max(x0, 0), iy0 = std::max(y0, 0);
        int ix1 = std::min(x1, cur.cols), iy1 = std::min(y1, cur.rows);
        cv::Mat d = next(box[3], box[2], cur.type());
        cv::Scalar fv = fill ? cv::Scalar(fill[0], fill[1], fill[2]) : cv::Scalar::all(0);
        if (ix1 <= ix0 || iy1 <= iy0) {
            d.setTo(fv);
        } else {
            cv::copyMakeBorder(cur(cv::Rect(ix0, iy0, ix1 - ix0, iy1 - iy0)), d, iy0 - y0, y1 - iy1, ix0 - x0,
                               x1 - ix1, cv_border(border), fv);
        }
        set(d);
    }
};

void apply_lut(Exec &e, const uint8_t lut[256])
{
    cv::Mat lm(1, 256, CV_8U, const_cast<uint8_t *>(lut));
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    cv::LUT(e.cur, lm, d);
    e.set(d);
}

void color_jitter(Exec &e, fq_img_op_explain &r)
{
    fq_img_scratch *s = e.s;
    const int c = e.cur.channels();
    for (int k = 0; k < 4; k++) {
        int which = r.order[k];
        if (which < 0)
            break;
        double fct = r.factor[which];
        if (which == 0) { /* brightness: x * f */
            uint8_t lut[256];
            for (int v = 0; v < 256; v++)
                lut[v] = cv::saturate_cast<uint8_t>(v * fct);
            apply_lut(e, lut);
        } else if (which == 1) { /* contrast: f * x + (1 - f) * mean(gray) */
            double mean;
            if (c == 3) {
                cv::Mat g = s->g1.mat(e.cur.rows, e.cur.cols, CV_8UC1);
                cv::cvtColor(e.cur, g, cv::COLOR_RGB2GRAY);
                mean = cv::mean(g)[0];
            } else {
                mean = cv::mean(e.cur)[0];
            }
            r.contrast_mean = mean;
            uint8_t lut[256];
            for (int v = 0; v < 256; v++)
                lut[v] = cv::saturate_cast<uint8_t>(fct * v + (1.0 - fct) * mean);
            apply_lut(e, lut);
        } else if (which == 2) { /* saturation: f * x + (1 - f) * gray(x) */
            if (c != 3)
                continue;
            cv::Mat g = s->g1.mat(e.cur.rows, e.cur.cols, CV_8UC1);
            cv::Mat g3 = s->g2.mat(e.cur.rows, e.cur.cols, CV_8UC3);
            cv::cvtColor(e.cur, g, cv::COLOR_RGB2GRAY);
            cv::cvtColor(g, g3, cv::COLOR_GRAY2RGB);
            cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
            cv::addWeighted(e.cur, fct, g3, 1.0 - fct, 0.0, d);
            e.set(d);
        } else { /* hue: rotate H of RGB2HSV_FULL (0..255 = full turn) */
            if (c != 3)
                continue;
            int shift = ((int)std::lround(fct * 256.0) % 256 + 256) % 256;
            if (shift == 0)
                continue;
            cv::Mat hsv = s->g2.mat(e.cur.rows, e.cur.cols, CV_8UC3);
            cv::cvtColor(e.cur, hsv, cv::COLOR_RGB2HSV_FULL);
            for (int y = 0; y < hsv.rows; y++) {
                uint8_t *p = hsv.ptr<uint8_t>(y);
                for (int x = 0; x < hsv.cols; x++)
                    p[3 * x] = (uint8_t)((p[3 * x] + shift) & 255);
            }
            cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
            cv::cvtColor(hsv, d, cv::COLOR_HSV2RGB_FULL);
            e.set(d);
        }
    }
}

/* Run ops [start, n) on e.cur. */
void exec_ops(const fq_img_spec *sp, Plan *pl, int start, Exec &e)
{
    for (int i = start; i < pl->n; i++) {
        const fq_op &op = sp->ops[i];
        fq_img_op_explain &r = pl->r[i];
        switch (r.kind) {
        case FQ_OP_RANDOM_RESIZED_CROP:
            e.materialize_flips();
            e.resize_to(e.cur(cv::Rect(r.box[0], r.box[1], r.box[2], r.box[3])), r.out_h, r.out_w, (int)op.rrc.interp);
            break;
        case FQ_OP_RESIZE:
            e.materialize_flips();
            e.resize_to(e.cur, r.out_h, r.out_w, (int)op.resize.interp);
            break;
        case FQ_OP_CENTER_CROP:
            e.materialize_flips();
            e.crop_pad(r.box, FQ_BORDER_CONSTANT, nullptr);
            break;
        case FQ_OP_RANDOM_CROP: {
            e.materialize_flips();
            /* box is in padded coordinates: shift to the unpadded image */
            int b[4] = {r.box[0] - r.pad[0], r.box[1] - r.pad[1], r.box[2], r.box[3]};
            e.crop_pad(b, (int)op.random_crop.border, op.random_crop.fill);
            break;
        }
        case FQ_OP_HFLIP:
            if (r.applied)
                e.hflip = !e.hflip;
            break;
        case FQ_OP_VFLIP:
            if (r.applied)
                e.vflip = !e.vflip;
            break;
        case FQ_OP_GRAYSCALE:
            if (r.applied && e.cur.channels() == 3) {
                cv::Mat g = e.s->g1.mat(e.cur.rows, e.cur.cols, CV_8UC1);
                cv::cvtColor(e.cur, g, cv::COLOR_RGB2GRAY);
                cv::Mat d = e.next(e.cur.rows, e.cur.cols, CV_8UC3);
                cv::cvtColor(g, d, cv::COLOR_GRAY2RGB);
                e.set(d);
            }
            break;
        case FQ_OP_COLOR_JITTER:
            color_jitter(e, r);
            break;
        case FQ_OP_RANDOM_AFFINE: {
            e.materialize_flips();
            const fq_op_random_affine &p = op.random_affine;
            cv::Mat M(2, 3, CV_64F, r.matrix);
            cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
            cv::warpAffine(e.cur, d, M, cv::Size(e.cur.cols, e.cur.rows), (int)p.interp, cv_border((int)p.border),
                           cv::Scalar(p.fill[0], p.fill[1], p.fill[2]));
            e.set(d);
            break;
        }
        default:
            break;
        }
    }
}

/* ---- the fused final write ------------------------------------------------- */

template <typename T, int C>
void write_rows(const cv::Mat &img, bool hf, bool vf, int layout, const T (*lut)[256], void *out)
{
    const int h = img.rows, w = img.cols;
    T *o = static_cast<T *>(out);
    const size_t plane = (size_t)h * w;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = img.ptr<uint8_t>(vf ? h - 1 - y : y);
        if (layout == FQ_LAYOUT_HWC) {
            T *q = o + (size_t)y * w * C;
            if (!hf) {
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < C; c++)
                        q[x * C + c] = lut[c][p[x * C + c]];
            } else {
                for (int x = 0; x < w; x++) {
                    const uint8_t *pp = p + (size_t)(w - 1 - x) * C;
                    for (int c = 0; c < C; c++)
                        q[x * C + c] = lut[c][pp[c]];
                }
            }
        } else {
            for (int c = 0; c < C; c++) {
                T *q = o + c * plane + (size_t)y * w;
                const T *l = lut[c];
                if (!hf)
                    for (int x = 0; x < w; x++)
                        q[x] = l[p[x * C + c]];
                else
                    for (int x = 0; x < w; x++)
                        q[x] = l[p[(w - 1 - x) * C + c]];
            }
        }
    }
}

template <typename T>
void write_any(const cv::Mat &img, bool hf, bool vf, int layout, const T (*lut)[256], void *out)
{
    if (img.channels() == 3)
        write_rows<T, 3>(img, hf, vf, layout, lut, out);
    else
        write_rows<T, 1>(img, hf, vf, layout, lut, out);
}

struct IdLut {
    uint8_t t[3][256];
    IdLut()
    {
        for (int c = 0; c < 3; c++)
            for (int v = 0; v < 256; v++)
                t[c][v] = (uint8_t)v;
    }
};
const IdLut g_id_lut; /* constant, initialized at load time */

void write_out(const fq_img_spec *sp, const cv::Mat &img, bool hf, bool vf, void *out)
{
    const int layout = sp->fmt.layout;
    switch (sp->fmt.dtype) {
    case FQ_DT_UINT8:
        if (!hf && !vf && (layout == FQ_LAYOUT_HWC || img.channels() == 1)) {
            size_t rb = (size_t)img.cols * img.channels();
            for (int y = 0; y < img.rows; y++)
                std::memcpy(static_cast<uint8_t *>(out) + y * rb, img.ptr<uint8_t>(y), rb);
        } else {
            write_any<uint8_t>(img, hf, vf, layout, g_id_lut.t, out);
        }
        break;
    case FQ_DT_FLOAT32:
        if (layout == FQ_LAYOUT_HWC &&
            fqi::write_f32_hwc_simd(sp->f32k, sp->lut_f32, img, hf, vf, static_cast<float *>(out)))
            break;
        write_any<float>(img, hf, vf, layout, sp->lut_f32, out);
        break;
    default: /* FQ_DT_FLOAT16, FQ_DT_BFLOAT16: 16-bit codes from lut_f16 */
        write_any<uint16_t>(img, hf, vf, layout, sp->lut_f16, out);
        break;
    }
}

void fill_explain_tail(fq_img_explain *ex, const Plan &pl, const fq_img_spec *sp)
{
    if (!ex)
        return;
    ex->n_ops = pl.n;
    for (int i = 0; i < pl.n; i++) {
        ex->ops[i] = pl.r[i];
        if (pl.r[i].applied) {
            if (pl.r[i].kind == FQ_OP_HFLIP) ex->hflip = 1;
            if (pl.r[i].kind == FQ_OP_VFLIP) ex->vflip = 1;
            if (pl.r[i].kind == FQ_OP_GRAYSCALE) ex->grayscale = 1;
        }
    }
    if (pl.n > 0) {
        int k = pl.r[0].kind;
        if (k == FQ_OP_RANDOM_RESIZED_CROP || k == FQ_OP_CENTER_CROP ||
            (k == FQ_OP_RANDOM_CROP && !pl.r[0].pad[0] && !pl.r[0].pad[1])) {
            ex->has_crop = 1;
            std::memcpy(ex->crop_src, pl.r[0].box, sizeof ex->crop_src);
        }
    }
    ex->out_h = sp->out_h, ex->out_w = sp->out_w, ex->out_c = sp->out_c;
}

void init_explain(fq_img_explain *ex)
{
    if (!ex)
        return;
    std::memset(ex, 0, sizeof *ex);
    ex->scale_num = 8, ex->scale_denom = 8;
}

/* Run the whole chain on a decoded full image (array or non-JPEG or generic JPEG). */
int run_full(const fq_img_spec *sp, fq_img_scratch *s, const cv::Mat &img, Plan &pl, void *out_row)
{
    Exec e;
    e.s = s;
    e.set(img);
    uint64_t t0 = fq_now_ns();
    exec_ops(sp, &pl, 0, e);
    uint64_t t1 = fq_now_ns();
    write_out(sp, e.cur, e.hflip, e.vflip, out_row);
    s->times.ops_ns = t1 - t0, s->times.write_ns = fq_now_ns() - t1;
    return FQ_OK;
}

int process_jpeg(const fq_img_spec *sp, fq_img_scratch *s, const uint8_t *data, size_t len, uint64_t seed,
                 uint64_t epoch, uint64_t index, void *out_row, fq_img_explain *ex, fq_err *err)
{
    const uint64_t t_dec = fq_now_ns();
    fqi::SrcInfo si;
    int rc = fqi::jpeg_header(s, data, len, &si, err);
    if (rc)
        return rc;
    if (ex) {
        ex->src_format = FQ_FMT_JPEG;
        ex->src_h = si.h, ex->src_w = si.w, ex->src_channels = si.channels, ex->src_bits = 8;
    }
    if (si.h <= 0 || si.w <= 0) {
        fqi::jpeg_reset(s);
        return fq_set_err(err, FQ_E_DECODE, "JPEG header declares an empty image (%dx%d)", si.w, si.h);
    }
    if ((int64_t)si.h * si.w > sp->fmt.max_pixels) {
        fqi::jpeg_reset(s);
        return fq_set_err(err, FQ_E_TOO_LARGE, "JPEG image %dx%d exceeds max_pixels=%lld", si.w, si.h,
                          (long long)sp->fmt.max_pixels);
    }
    Plan pl;
    rc = make_plan(sp, si.h, si.w, seed, epoch, index, &pl, err);
    if (rc) {
        fqi::jpeg_reset(s);
        return rc;
    }
    const int oc = sp->out_c;
    /* How much of op 0 the decoder can do. */
    int k0 = pl.n > 0 ? pl.r[0].kind : FQ_OP_NONE;
    const fq_img_op_explain &r0 = pl.r[0];
    bool box_op = false;      /* op 0 is a crop whose box lies inside the image */
    bool resize_after = false; /* op 0 resizes the box to (out_h, out_w) */
    int bx = 0, by = 0, bw = si.w, bh = si.h;
    if (k0 == FQ_OP_RANDOM_RESIZED_CROP) {
        box_op = resize_after = true;
        bx = r0.box[0], by = r0.box[1], bw = r0.box[2], bh = r0.box[3];
    } else if ((k0 == FQ_OP_CENTER_CROP || k0 == FQ_OP_RANDOM_CROP) && r0.pad[0] == 0 && r0.pad[1] == 0 &&
               r0.box[0] >= 0 && r0.box[1] >= 0 && r0.box[0] + r0.box[2] <= si.w && r0.box[1] + r0.box[3] <= si.h) {
        box_op = true;
        bx = r0.box[0], by = r0.box[1], bw = r0.box[2], bh = r0.box[3];
    } else if (k0 == FQ_OP_RESIZE) {
        resize_after = true;
    }
    int M = 8;
    if (resize_after && sp->fmt.dct_scaling) {
        int th = r0.out_h, tw = r0.out_w;
        /* only 1/8, 1/4, 1/2: libjpeg-turbo has SIMD IDCTs for these; the other M/8
         * (generic scalar IDCTs) measured slower than a full-size decode */
        static const int kScales[] = {1, 2, 4};
        for (int m : kScales)
            if ((int64_t)bw * m >= (int64_t)tw * 8 && (int64_t)bh * m >= (int64_t)th * 8) {
                M = m;
                break;
            }
    }
    /* box in scaled coordinates (exact when M == 8) */
    int sw = (int)(((int64_t)si.w * M + 7) / 8), shh = (int)(((int64_t)si.h * M + 7) / 8);
    int x0 = (int)std::lround(bx * M / 8.0), y0 = (int)std::lround(by * M / 8.0);
    int x1 = (int)std::lround((bx + bw) * M / 8.0), y1 = (int)std::lround((by + bh) * M / 8.0);
    x0 = std::min(std::max(x0, 0), sw - 1), y0 = std::min(std::max(y0, 0), shh - 1);
    x1 = std::min(std::max(x1, x0 + 1), sw), y1 = std::min(std::max(y1, y0 + 1), shh);
    /* decode a margin around the box so chroma upsampling sees the same neighbours as a
     * full decode (keeps ROI decoding bit-exact) */
    const int margin = 16;
    int rx0 = box_op ? std::max(x0 - margin, 0) : 0, ry0 = box_op ? std::max(y0 - margin, 0) : 0;
    int rx1 = box_op ? std::min(x1 + margin, sw) : sw, ry1 = box_op ? std::min(y1 + margin, shh) : shh;
    bool roi = box_op && (rx0 > 0 || ry0 > 0 || rx1 < sw || ry1 < shh);
    cv::Mat dec;
    int dh = 0, dw = 0;
    if (roi)
        rc = fqi::jpeg_decode_crop(s, data, len, si, M, rx0, ry0, rx1 - rx0, ry1 - ry0, oc, &dec, &dh, &dw, err);
    else
        rc = fqi::jpeg_decode(s, si, M, 0, 0, 0, 0, oc, &dec, &dh, &dw, err);
    if (rc)
        return rc;
    const uint64_t t_ops = fq_now_ns();
    s->times.decode_ns = t_ops - t_dec;
    if (dh != shh || dw != sw)
        return fq_set_err(err, FQ_E_DECODE, "internal: JPEG scaled size %dx%d, expected %dx%d", dw, dh, sw, shh);
    if (!roi)
        rx0 = ry0 = 0, rx1 = sw, ry1 = shh;
    if (ex) {
        ex->scale_num = M, ex->scale_denom = 8;
        ex->decoded_h = shh, ex->decoded_w = sw;
        ex->roi[0] = rx0, ex->roi[1] = ry0, ex->roi[2] = rx1 - rx0, ex->roi[3] = ry1 - ry0;
        ex->roi_used = roi ? 1 : 0;
    }
    Exec e;
    e.s = s;
    e.set(dec);
    int start = 0;
    if (box_op || resize_after) {
        cv::Mat view = dec(cv::Rect(x0 - rx0, y0 - ry0, x1 - x0, y1 - y0));
        int interp = (int)(k0 == FQ_OP_RESIZE ? sp->ops[0].resize.interp : sp->ops[0].rrc.interp);
        if (resize_after && M < 8 && interp != FQ_INTERP_AREA) {
            /* DCT-scaled: map output pixel centres onto the exact (sub-pixel) box in
             * the scaled image; scaled pixel i is centred on source (i + 0.5) * 8 / M */
            double ax = (double)bw * M / (8.0 * r0.out_w), ay = (double)bh * M / (8.0 * r0.out_h);
            double bxs = (bx + 0.5 * bw / r0.out_w) * M / 8.0 - 0.5 - rx0;
            double bys = (by + 0.5 * bh / r0.out_h) * M / 8.0 - 0.5 - ry0;
            double inv[6] = {ax, 0, bxs, 0, ay, bys};
            cv::Mat Mi(2, 3, CV_64F, inv);
            cv::Mat d = e.next(r0.out_h, r0.out_w, dec.type());
            cv::warpAffine(dec, d, Mi, cv::Size(r0.out_w, r0.out_h), interp | cv::WARP_INVERSE_MAP,
                           cv::BORDER_REPLICATE);
            e.set(d);
        } else if (resize_after) {
            e.resize_to(view, r0.out_h, r0.out_w, interp);
        } else {
            e.set(view);
        }
        start = 1;
    }
    exec_ops(sp, &pl, start, e);
    const uint64_t t_write = fq_now_ns();
    write_out(sp, e.cur, e.hflip, e.vflip, out_row);
    s->times.ops_ns = t_write - t_ops, s->times.write_ns = fq_now_ns() - t_write;
    fill_explain_tail(ex, pl, sp);
    return FQ_OK;
}

template <typename F>
int guarded(fq_err *err, F &&fn)
{
    try {
        return fn();
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "out of memory while processing an image");
    } catch (const cv::Exception &e) {
        return fq_set_err(err, FQ_E_INVALID, "OpenCV error: %s", e.what());
    } catch (const std::exception &e) {
        return fq_set_err(err, FQ_E_INVALID, "internal error: %s", e.what());
    }
}

}  // namespace

/* ---- C API --------------------------------------------------------------- */

extern "C" {

const char *fq_img_op_name(int kind)
{
    switch (kind) {
    case FQ_OP_RANDOM_RESIZED_CROP: return "RandomResizedCrop";
    case FQ_OP_RESIZE: return "Resize";
    case FQ_OP_CENTER_CROP: return "CenterCrop";
    case FQ_OP_RANDOM_CROP: return "RandomCrop";
    case FQ_OP_HFLIP: return "HorizontalFlip";
    case FQ_OP_VFLIP: return "VerticalFlip";
    case FQ_OP_COLOR_JITTER: return "ColorJitter";
    case FQ_OP_RANDOM_AFFINE: return "RandomAffine";
    case FQ_OP_GRAYSCALE: return "Grayscale";
    case FQ_OP_NORMALIZE: return "Normalize";
    default: return "?";
    }
}

int fq_img_spec_create(const fq_op *ops, int n_ops, const fq_img_format *fmt, fq_img_spec **out, fq_err *err)
{
    if (!out || !fmt || (n_ops > 0 && !ops))
        return fq_set_err(err, FQ_E_INVALID, "fq_img_spec_create: NULL argument");
    *out = nullptr;
    if (n_ops < 0 || n_ops > FQ_IMG_MAX_OPS)
        return fq_set_err(err, FQ_E_INVALID, "an op chain has 0..%d ops, got %d", FQ_IMG_MAX_OPS, n_ops);
    if (fmt->channels != 1 && fmt->channels != 3)
        return fq_set_err(err, FQ_E_INVALID, "channels must be 1 or 3, got %d", fmt->channels);
    if (fmt->dtype != FQ_DT_UINT8 && fmt->dtype != FQ_DT_FLOAT32 && fmt->dtype != FQ_DT_FLOAT16 &&
        fmt->dtype != FQ_DT_BFLOAT16)
        return fq_set_err(err, FQ_E_INVALID, "unknown dtype %d", fmt->dtype);
    if (fmt->layout != FQ_LAYOUT_HWC && fmt->layout != FQ_LAYOUT_CHW)
        return fq_set_err(err, FQ_E_INVALID, "unknown layout %d", fmt->layout);
    int fixed = 0, h = 0, w = 0;
    const fq_op *norm = nullptr;
    for (int i = 0; i < n_ops; i++) {
        int rc = check_op(i, ops[i], err);
        if (rc)
            return rc;
        const fq_op &op = ops[i];
        switch (op.kind) {
        case FQ_OP_RANDOM_RESIZED_CROP:
            fixed = 1, h = (int)op.rrc.out_h, w = (int)op.rrc.out_w;
            break;
        case FQ_OP_CENTER_CROP:
            fixed = 1, h = (int)op.center_crop.out_h, w = (int)op.center_crop.out_w;
            break;
        case FQ_OP_RANDOM_CROP:
            fixed = 1, h = (int)op.random_crop.out_h, w = (int)op.random_crop.out_w;
            break;
        case FQ_OP_RESIZE:
            if (op.resize.shorter_side != 0)
                fixed = 0;
            else
                fixed = 1, h = (int)op.resize.out_h, w = (int)op.resize.out_w;
            break;
        case FQ_OP_NORMALIZE:
            if (i != n_ops - 1)
                return fq_set_err(err, FQ_E_INVALID, "op %d: Normalize must be the last op", i);
            norm = &ops[i];
            break;
        default:
            break;
        }
    }
    if (!fixed)
        return fq_set_err(err, FQ_E_INVALID,
                          "the op chain does not give a fixed output size: it needs a crop or an exact "
                          "Resize((h, w)) after any Resize(shorter_side)");
    if (norm && fmt->dtype == FQ_DT_UINT8)
        return fq_set_err(err, FQ_E_INVALID, "Normalize needs a float dtype (float32, float16 or bfloat16), not uint8");
    fq_img_spec *sp = new (std::nothrow) fq_img_spec;
    if (!sp)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    std::memset(sp, 0, sizeof *sp);
    sp->n_ops = 0;
    for (int i = 0; i < n_ops; i++)
        if (ops[i].kind != FQ_OP_NORMALIZE)
            sp->ops[sp->n_ops++] = ops[i];
    sp->fmt = *fmt;
    if (sp->fmt.max_pixels <= 0)
        sp->fmt.max_pixels = FQ_IMG_DEFAULT_MAX_PIXELS;
    sp->out_h = h, sp->out_w = w, sp->out_c = fmt->channels;
    size_t es = fmt->dtype == FQ_DT_UINT8 ? 1 : (fmt->dtype == FQ_DT_FLOAT32 ? 4 : 2);
    sp->row_bytes = (size_t)h * w * sp->out_c * es;
    for (int c = 0; c < 3; c++) {
        for (int v = 0; v < 256; v++) {
            float val;
            if (norm) /* computed in double, rounded once to float */
                val = (float)(((double)v / 255.0 - norm->normalize.mean[c]) / norm->normalize.std[c]);
            else
                val = (float)((double)v / 255.0);
            sp->lut_f32[c][v] = val;
            sp->lut_f16[c][v] = fmt->dtype == FQ_DT_BFLOAT16 ? float_to_bfloat16(val) : float_to_half(val);
        }
    }
    fqi::affine_init(&sp->f32k, sp->lut_f32, norm ? norm->normalize.mean : nullptr, norm ? norm->normalize.std : nullptr, norm != nullptr);
    *out = sp;
    return FQ_OK;
}

void fq_img_spec_free(fq_img_spec *spec) { delete spec; }

int fq_img_spec_out_shape(const fq_img_spec *spec, int *h, int *w, int *c)
{
    if (!spec)
        return FQ_E_INVALID;
    if (h) *h = spec->out_h;
    if (w) *w = spec->out_w;
    if (c) *c = spec->out_c;
    return FQ_OK;
}

size_t fq_img_spec_row_bytes(const fq_img_spec *spec) { return spec ? spec->row_bytes : 0; }

fq_img_scratch *fq_img_scratch_new(void) { return new (std::nothrow) fq_img_scratch(); }

void fq_img_scratch_free(fq_img_scratch *s)
{
    if (!s)
        return;
    if (s->jpeg_ready)
        jpeg_destroy_decompress(&s->cinfo);
    delete s;
}

void fq_img_set_opencv_threads(int n) { cv::setNumThreads(n); }

void fq_img_scratch_last_times(const fq_img_scratch *s, fq_stage_times *out) { *out = s->times; }

int fq_img_process_encoded(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *data, size_t len,
                           uint64_t seed, uint64_t epoch, uint64_t index, void *out_row, fq_img_explain *ex,
                           fq_err *err)
{
    init_explain(ex);
    if (!spec || !s || !out_row || (len > 0 && !data))
        return fq_set_err(err, FQ_E_INVALID, "fq_img_process_encoded: NULL argument");
    s->times = fq_stage_times{};
    if (len == 0)
        return fq_set_err(err, FQ_E_EMPTY, "empty input (0 bytes)");
    int fmt = fqi::sniff_format(data, len);
    if (fmt == FQ_FMT_UNKNOWN) {
        char hex[3 * 8 + 1] = {0};
        for (size_t i = 0; i < len && i < 8; i++)
            std::snprintf(hex + 3 * i, 4, "%02x ", data[i]);
        return fq_set_err(err, FQ_E_DECODE, "unrecognized image data (not JPEG/PNG/BMP/TIFF/WebP/PNM); first bytes: %s",
                          hex);
    }
    return guarded(err, [&]() -> int {
        if (fmt == FQ_FMT_JPEG) {
            int rc = process_jpeg(spec, s, data, len, seed, epoch, index, out_row, ex, err);
            if (rc)
                fqi::jpeg_reset(s);
            return rc;
        }
        cv::Mat img;
        fqi::SrcInfo si;
        const uint64_t t_dec = fq_now_ns();
        int rc = fqi::cv_decode(s, data, len, fmt, spec->out_c, spec->fmt.max_pixels, &img, &si, err);
        s->times.decode_ns = fq_now_ns() - t_dec;
        if (ex) {
            ex->src_format = fmt;
            ex->src_h = si.h, ex->src_w = si.w, ex->src_channels = si.channels, ex->src_bits = si.bits;
            ex->decoded_h = si.h, ex->decoded_w = si.w;
            ex->roi[2] = si.w, ex->roi[3] = si.h;
        }
        if (rc)
            return rc;
        Plan pl;
        rc = make_plan(spec, img.rows, img.cols, seed, epoch, index, &pl, err);
        if (rc)
            return rc;
        rc = run_full(spec, s, img, pl, out_row);
        fill_explain_tail(ex, pl, spec);
        return rc;
    });
}

int fq_img_process_array(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *pixels, int h, int w, int c,
                         size_t row_stride, uint64_t seed, uint64_t epoch, uint64_t index, void *out_row,
                         fq_img_explain *ex, fq_err *err)
{
    init_explain(ex);
    if (!spec || !s || !out_row || !pixels)
        return fq_set_err(err, FQ_E_INVALID, "fq_img_process_array: NULL argument");
    s->times = fq_stage_times{};
    if (h <= 0 || w <= 0)
        return fq_set_err(err, FQ_E_EMPTY, "empty array image (%dx%d)", w, h);
    if (c != 1 && c != 3 && c != 4)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "array images need 1, 3 or 4 channels, got %d", c);
    if (row_stride < (size_t)w * c)
        return fq_set_err(err, FQ_E_INVALID, "row_stride %zu < width * channels (%d)", row_stride, w * c);
    if (ex) {
        ex->src_format = FQ_FMT_ARRAY;
        ex->src_h = h, ex->src_w = w, ex->src_channels = c, ex->src_bits = 8;
        ex->decoded_h = h, ex->decoded_w = w;
        ex->roi[2] = w, ex->roi[3] = h;
    }
    return guarded(err, [&]() -> int {
        cv::Mat src(h, w, CV_MAKETYPE(CV_8U, c), const_cast<uint8_t *>(pixels), row_stride);
        cv::Mat img = src;
        if (c != spec->out_c) {
            img = s->dec.mat(h, w, CV_MAKETYPE(CV_8U, spec->out_c));
            fqi::to_channels(src, spec->out_c, /*bgr=*/false, img);
        }
        Plan pl;
        int rc = make_plan(spec, h, w, seed, epoch, index, &pl, err);
        if (rc)
            return rc;
        rc = run_full(spec, s, img, pl, out_row);
        fill_explain_tail(ex, pl, spec);
        return rc;
    });
}

}  // extern "C"
