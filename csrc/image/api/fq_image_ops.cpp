/* fq_image_ops.cpp - one implementation record per op kind: parameter check, output
 * geometry, planning (every random draw, in chain order) and execution on uint8
 * images with OpenCV.  Semantics: docs/ops.md; parameters: the fq_op_* structs of
 * fq_image.h.  Everything here is a pure function of its arguments (thread-safe). */
#include "image/internal/fq_image_stages.h"
#include "image/internal/fq_image_aug.h" /* apply_lut */
#include "image/internal/fq_image_resize_pil.h"

#include <cmath>
#include <cstring>

#include <opencv2/imgproc.hpp>

namespace {

using fqi::Exec;
using fqi::GEOM_FIXED;
using fqi::GEOM_KEEP;
using fqi::GEOM_VARIABLE;

/* ---- parameter checks ------------------------------------------------------ */

bool is_int(double v) { return std::isfinite(v) && v == std::floor(v); }
bool valid_side(double v) { return is_int(v) && v >= 1 && v <= FQ_IMG_MAX_SIDE; }
bool valid_pad(double v) { return is_int(v) && v >= 0 && v <= FQ_IMG_MAX_SIDE; }
bool valid_prob(double p) { return std::isfinite(p) && p >= 0 && p <= 1; }
bool valid_range(double lo, double hi) { return std::isfinite(lo) && std::isfinite(hi) && lo <= hi; }
/* allow_area: a resize (area and the pil_* resizes are for cv::resize-like ops only); else
 * a warp (cv::warpAffine): nearest, bilinear, bicubic, lanczos */
bool valid_interp(double v, bool allow_area)
{
    if (!(is_int(v) && v >= 0 && v < FQ_INTERP_END))
        return false;
    return allow_area || (v != FQ_INTERP_AREA && !fqi::is_pil_interp((int)v));
}
bool valid_border(double v) { return is_int(v) && v >= 0 && v < FQ_BORDER_END; }

const char *const kBadSize = "size must be positive integers <= 32768";

int fixed_size(double h, double w, int *oh, int *ow)
{
    *oh = (int)h, *ow = (int)w;
    return GEOM_FIXED;
}

using fqi::keeps_size;

/* ---- RandomResizedCrop ------------------------------------------------------ */

const char *rrc_check(const fq_op &op)
{
    const fq_op_rrc &p = op.rrc;
    if (!valid_side(p.out_h) || !valid_side(p.out_w))
        return kBadSize;
    if (!(p.scale_lo > 0 && p.scale_lo <= p.scale_hi && p.scale_hi <= 1))
        return "scale must satisfy 0 < min <= max <= 1";
    if (!(p.ratio_lo > 0 && p.ratio_lo <= p.ratio_hi && std::isfinite(p.ratio_hi)))
        return "ratio must satisfy 0 < min <= max";
    if (!valid_interp(p.interp, true))
        return "bad interpolation";
    if (!(is_int(p.max_attempts) && p.max_attempts >= 0 && p.max_attempts <= 1000))
        return "max_attempts must be an integer in [1, 1000] (0: 10)";
    return nullptr;
}

int rrc_geometry(const fq_op &op, int *h, int *w) { return fixed_size(op.rrc.out_h, op.rrc.out_w, h, w); }

/* torchvision's get_params: max_attempts tries (0: 10), then a central crop clamped to the ratio range */
void rrc_box(fq_rng *rng, const fq_op_rrc &p, int H, int W, int box[4])
{
    double area = (double)H * W;
    double lr0 = std::log(p.ratio_lo), lr1 = std::log(p.ratio_hi);
    const int tries = p.max_attempts == 0 ? 10 : (int)p.max_attempts;
    for (int t = 0; t < tries; t++) {
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

int rrc_plan(const fq_op &op, fq_rng *rng, int64_t, int *h, int *w, fq_img_op_explain &r, fq_err *)
{
    rrc_box(rng, op.rrc, *h, *w, r.box);
    *h = (int)op.rrc.out_h, *w = (int)op.rrc.out_w;
    return FQ_OK;
}

void rrc_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    e.materialize_flips();
    e.resize_to(e.cur(cv::Rect(r.box[0], r.box[1], r.box[2], r.box[3])), r.out_h, r.out_w, (int)op.rrc.interp);
}

/* ---- Resize ----------------------------------------------------------------- */

const char *resize_check(const fq_op &op)
{
    const fq_op_resize &p = op.resize;
    if (p.shorter_side != 0) {
        if (!valid_side(p.shorter_side) || p.out_h != 0 || p.out_w != 0)
            return "shorter side must be a positive integer <= 32768 (and h = w = 0)";
    } else if (!valid_side(p.out_h) || !valid_side(p.out_w)) {
        return kBadSize;
    }
    if (!valid_interp(p.interp, true))
        return "bad interpolation";
    return nullptr;
}

int resize_geometry(const fq_op &op, int *h, int *w)
{
    if (op.resize.shorter_side != 0)
        return GEOM_VARIABLE;
    return fixed_size(op.resize.out_h, op.resize.out_w, h, w);
}

int resize_plan(const fq_op &op, fq_rng *, int64_t maxpx, int *ph, int *pw, fq_img_op_explain &, fq_err *err)
{
    const int h = *ph, w = *pw;
    if (op.resize.shorter_side == 0) {
        *ph = (int)op.resize.out_h, *pw = (int)op.resize.out_w;
        return FQ_OK;
    }
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
                          "Resize(shorter_side=%d) of a %dx%d image gives %lldx%lld, over max_pixels=%lld", side, w,
                          h, (long long)nw, (long long)nh, (long long)maxpx);
    *ph = (int)nh, *pw = (int)nw;
    return FQ_OK;
}

void resize_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    e.materialize_flips();
    e.resize_to(e.cur, r.out_h, r.out_w, (int)op.resize.interp);
}

/* ---- CenterCrop -------------------------------------------------------------- */

const char *center_crop_check(const fq_op &op)
{
    return valid_side(op.center_crop.out_h) && valid_side(op.center_crop.out_w) ? nullptr : kBadSize;
}

int center_crop_geometry(const fq_op &op, int *h, int *w)
{
    return fixed_size(op.center_crop.out_h, op.center_crop.out_w, h, w);
}

int center_crop_plan(const fq_op &op, fq_rng *, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const int h = *ph, w = *pw;
    int th = (int)op.center_crop.out_h, tw = (int)op.center_crop.out_w;
    r.box[0] = tw > w ? -((tw - w) / 2) : (int)std::nearbyint((w - tw) / 2.0);
    r.box[1] = th > h ? -((th - h) / 2) : (int)std::nearbyint((h - th) / 2.0);
    r.box[2] = tw, r.box[3] = th;
    *ph = th, *pw = tw;
    return FQ_OK;
}

void center_crop_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    e.materialize_flips();
    e.crop_pad(r.box, FQ_BORDER_CONSTANT, nullptr);
}

/* ---- RandomCrop --------------------------------------------------------------- */

const char *random_crop_check(const fq_op &op)
{
    const fq_op_random_crop &p = op.random_crop;
    if (!valid_side(p.out_h) || !valid_side(p.out_w))
        return kBadSize;
    if (!valid_pad(p.pad_left) || !valid_pad(p.pad_top) || !valid_pad(p.pad_right) || !valid_pad(p.pad_bottom))
        return "padding must be integers in [0, 32768]";
    if (p.pad_if_needed != 0 && p.pad_if_needed != 1)
        return "pad_if_needed must be 0 or 1";
    if (!valid_border(p.border))
        return "bad padding mode";
    return nullptr;
}

int random_crop_geometry(const fq_op &op, int *h, int *w)
{
    return fixed_size(op.random_crop.out_h, op.random_crop.out_w, h, w);
}

int random_crop_plan(const fq_op &op, fq_rng *rng, int64_t, int *ph_, int *pw_, fq_img_op_explain &r, fq_err *err)
{
    const fq_op_random_crop &p = op.random_crop;
    const int h = *ph_, w = *pw_;
    int th = (int)p.out_h, tw = (int)p.out_w;
    int pl = (int)p.pad_left, pt = (int)p.pad_top, pr = (int)p.pad_right, pb = (int)p.pad_bottom;
    int ph = h + pt + pb, pw = w + pl + pr;
    if (p.pad_if_needed != 0 && pw < tw) {
        int d = tw - pw;
        pl += d, pr += d;
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
    r.pad[0] = pl, r.pad[1] = pt, r.pad[2] = pr, r.pad[3] = pb;
    int y = 0, x = 0;
    if (!(ph == th && pw == tw)) {
        y = (int)fq_rng_next_below(rng, (uint64_t)(ph - th + 1));
        x = (int)fq_rng_next_below(rng, (uint64_t)(pw - tw + 1));
    }
    r.box[0] = x, r.box[1] = y, r.box[2] = tw, r.box[3] = th;
    *ph_ = th, *pw_ = tw;
    return FQ_OK;
}

void random_crop_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    e.materialize_flips();
    /* box is in padded coordinates: shift to the unpadded image */
    int b[4] = {r.box[0] - r.pad[0], r.box[1] - r.pad[1], r.box[2], r.box[3]};
    e.crop_pad(b, (int)op.random_crop.border, op.random_crop.fill);
}

/* ---- HorizontalFlip, VerticalFlip, Grayscale: applied with probability p ------- */

const char *prob_check(const fq_op &op)
{
    /* hflip, vflip and grayscale share fq_op_prob at the same place of the union */
    static_assert(offsetof(fq_op, hflip) == offsetof(fq_op, vflip) && offsetof(fq_op, hflip) == offsetof(fq_op, grayscale),
                  "fq_op_prob members must alias");
    return valid_prob(op.hflip.p) ? nullptr : "p must be in [0, 1]";
}

int prob_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    r.applied = fq_rng_uniform(rng) < op.hflip.p ? 1 : 0;
    return FQ_OK;
}

void hflip_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (r.applied)
        e.hflip = !e.hflip;
}

void vflip_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (r.applied)
        e.vflip = !e.vflip;
}

void grayscale_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied || e.cur.channels() != 3)
        return;
    cv::Mat g = e.s->g1.mat(e.cur.rows, e.cur.cols, CV_8UC1);
    cv::cvtColor(e.cur, g, cv::COLOR_RGB2GRAY);
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, CV_8UC3);
    cv::cvtColor(g, d, cv::COLOR_GRAY2RGB);
    e.set(d);
}

/* ---- ColorJitter --------------------------------------------------------------- */

const char *color_jitter_check(const fq_op &op)
{
    const fq_op_color_jitter &p = op.color_jitter;
    for (int k = FQ_JITTER_BRIGHTNESS; k <= FQ_JITTER_SATURATION; k++)
        if (p.enabled[k] != 0 && !(valid_range(p.range[k][0], p.range[k][1]) && p.range[k][0] >= 0))
            return "brightness/contrast/saturation ranges must satisfy 0 <= min <= max";
    const double *hue = p.range[FQ_JITTER_HUE];
    if (p.enabled[FQ_JITTER_HUE] != 0 && !(valid_range(hue[0], hue[1]) && hue[0] >= -0.5 && hue[1] <= 0.5))
        return "hue range must satisfy -0.5 <= min <= max <= 0.5";
    return nullptr;
}

int color_jitter_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const fq_op_color_jitter &p = op.color_jitter;
    int perm[4] = {0, 1, 2, 3};
    for (int k = 3; k > 0; k--) {
        int j = (int)fq_rng_next_below(rng, (uint64_t)(k + 1));
        int t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
    r.factor[FQ_JITTER_BRIGHTNESS] = r.factor[FQ_JITTER_CONTRAST] = r.factor[FQ_JITTER_SATURATION] = 1.0;
    r.factor[FQ_JITTER_HUE] = 0.0;
    for (int k = 0; k < 4; k++)
        if (p.enabled[k] != 0)
            r.factor[k] = fq_rng_uniform_range(rng, p.range[k][0], p.range[k][1]);
    int n = 0;
    for (int k = 0; k < 4; k++)
        if (p.enabled[perm[k]] != 0)
            r.order[n++] = perm[k];
    r.applied = n;
    return FQ_OK;
}

void color_jitter_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    fq_img_scratch *s = e.s;
    const int c = e.cur.channels();
    for (int k = 0; k < 4; k++) {
        int which = r.order[k];
        if (which < 0)
            break;
        double fct = r.factor[which];
        if (which == FQ_JITTER_BRIGHTNESS) { /* x * f */
            uint8_t lut[256];
            for (int v = 0; v < 256; v++)
                lut[v] = cv::saturate_cast<uint8_t>(v * fct);
            fqi::apply_lut(e, lut); /* AVX-512 VBMI lookup, else cv::LUT */
        } else if (which == FQ_JITTER_CONTRAST) { /* f * x + (1 - f) * mean(gray) */
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
            fqi::apply_lut(e, lut); /* AVX-512 VBMI lookup, else cv::LUT */
        } else if (which == FQ_JITTER_SATURATION) { /* f * x + (1 - f) * gray(x) */
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

/* ---- RandomAffine ----------------------------------------------------------------- */

const char *random_affine_check(const fq_op &op)
{
    const fq_op_random_affine &p = op.random_affine;
    if (!valid_range(p.degrees[0], p.degrees[1]) || !valid_range(p.scale[0], p.scale[1]) ||
        !valid_range(p.shear_x[0], p.shear_x[1]) || !valid_range(p.shear_y[0], p.shear_y[1]))
        return "ranges must satisfy min <= max";
    if (!(p.translate[0] >= 0 && p.translate[0] <= 1 && p.translate[1] >= 0 && p.translate[1] <= 1))
        return "translate fractions must be in [0, 1]";
    if (!(p.scale[0] > 0))
        return "scale must be > 0";
    if (!(p.shear_x[0] > -90 && p.shear_x[1] < 90 && p.shear_y[0] > -90 && p.shear_y[1] < 90))
        return "shear must be within (-90, 90) degrees";
    if (!valid_border(p.border))
        return "bad border mode";
    if (!valid_interp(p.interp, false))
        return "bad interpolation (area and the pil_* resizes are not available for affine)";
    return nullptr;
}

int random_affine_plan(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const fq_op_random_affine &p = op.random_affine;
    const int h = *ph, w = *pw;
    double angle = fq_rng_uniform_range(rng, p.degrees[0], p.degrees[1]);
    double mx = p.translate[0] * w, my = p.translate[1] * h;
    double tx = std::nearbyint(fq_rng_uniform_range(rng, -mx, mx));
    double ty = std::nearbyint(fq_rng_uniform_range(rng, -my, my));
    double sc = fq_rng_uniform_range(rng, p.scale[0], p.scale[1]);
    double shx = fq_rng_uniform_range(rng, p.shear_x[0], p.shear_x[1]);
    double shy = fq_rng_uniform_range(rng, p.shear_y[0], p.shear_y[1]);
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
    return FQ_OK;
}

void random_affine_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const fq_op_random_affine &p = op.random_affine;
    e.materialize_flips();
    cv::Mat M(2, 3, CV_64F, r.matrix);
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    cv::warpAffine(e.cur, d, M, cv::Size(e.cur.cols, e.cur.rows), (int)p.interp, fqi::cv_border((int)p.border),
                   cv::Scalar(p.fill[0], p.fill[1], p.fill[2]));
    e.set(d);
}

/* ---- Normalize: applied by the spec's output tables (fq_image_spec.cpp) ----------- */

const char *normalize_check(const fq_op &op)
{
    for (int k = 0; k < 3; k++)
        if (!std::isfinite(op.normalize.mean[k]) || !std::isfinite(op.normalize.std[k]) || op.normalize.std[k] == 0)
            return "mean must be finite and std finite and non-zero";
    return nullptr;
}

int no_draw(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *) { return FQ_OK; }

void no_exec(Exec &, const fq_op &, fq_img_op_explain &) {}

/* ---- the table ------------------------------------------------------------------ */

/* Each op's parameter fields, in struct order: what fastq._native._image.pack_ops fills by name
 * (fq_img_op_desc).  fields_cover (below) refuses a list that misses or reorders one. */
constexpr fq_op_field kRrcFields[] = {
    FQ_FIELD(fq_op_rrc, out_h),    FQ_FIELD(fq_op_rrc, out_w),    FQ_FIELD(fq_op_rrc, scale_lo),
    FQ_FIELD(fq_op_rrc, scale_hi), FQ_FIELD(fq_op_rrc, ratio_lo), FQ_FIELD(fq_op_rrc, ratio_hi),
    FQ_FIELD(fq_op_rrc, interp),   FQ_FIELD(fq_op_rrc, max_attempts)};
constexpr fq_op_field kResizeFields[] = {FQ_FIELD(fq_op_resize, out_h), FQ_FIELD(fq_op_resize, out_w),
                                         FQ_FIELD(fq_op_resize, shorter_side), FQ_FIELD(fq_op_resize, interp)};
constexpr fq_op_field kCenterCropFields[] = {FQ_FIELD(fq_op_center_crop, out_h), FQ_FIELD(fq_op_center_crop, out_w)};
constexpr fq_op_field kRandomCropFields[] = {
    FQ_FIELD(fq_op_random_crop, out_h),         FQ_FIELD(fq_op_random_crop, out_w),
    FQ_FIELD(fq_op_random_crop, pad_left),      FQ_FIELD(fq_op_random_crop, pad_top),
    FQ_FIELD(fq_op_random_crop, pad_right),     FQ_FIELD(fq_op_random_crop, pad_bottom),
    FQ_FIELD(fq_op_random_crop, pad_if_needed), FQ_FIELD(fq_op_random_crop, border),
    FQ_FIELD(fq_op_random_crop, fill)};
constexpr fq_op_field kProbFields[] = {FQ_FIELD(fq_op_prob, p)};
constexpr fq_op_field kColorJitterFields[] = {FQ_FIELD(fq_op_color_jitter, range),
                                              FQ_FIELD(fq_op_color_jitter, enabled)};
constexpr fq_op_field kRandomAffineFields[] = {
    FQ_FIELD(fq_op_random_affine, degrees), FQ_FIELD(fq_op_random_affine, translate),
    FQ_FIELD(fq_op_random_affine, scale),   FQ_FIELD(fq_op_random_affine, shear_x),
    FQ_FIELD(fq_op_random_affine, shear_y), FQ_FIELD(fq_op_random_affine, border),
    FQ_FIELD(fq_op_random_affine, fill),    FQ_FIELD(fq_op_random_affine, interp)};
constexpr fq_op_field kNormalizeFields[] = {FQ_FIELD(fq_op_normalize, mean), FQ_FIELD(fq_op_normalize, std)};


/* One record per op kind, in kind order: kind k is kOps[k - 1] (the names of enum
 * fq_op_kind are those of the first ten; a new op is appended). */
constexpr fqi::OpImpl kOps[] = {
    {FQ_OP_RANDOM_RESIZED_CROP, "RandomResizedCrop", FQ_RULE_RRC, FQ_EXPLAIN_BOX, FQ_PARAMS(fq_op_rrc, kRrcFields),
     rrc_check, rrc_geometry, rrc_plan, rrc_exec},
    {FQ_OP_RESIZE, "Resize", FQ_RULE_RESIZE, 0, FQ_PARAMS(fq_op_resize, kResizeFields), resize_check, resize_geometry,
     resize_plan, resize_exec},
    {FQ_OP_CENTER_CROP, "CenterCrop", FQ_RULE_CROP, FQ_EXPLAIN_BOX, FQ_PARAMS(fq_op_center_crop, kCenterCropFields),
     center_crop_check, center_crop_geometry, center_crop_plan, center_crop_exec},
    {FQ_OP_RANDOM_CROP, "RandomCrop", FQ_RULE_RCROP, FQ_EXPLAIN_BOX | FQ_EXPLAIN_PAD,
     FQ_PARAMS(fq_op_random_crop, kRandomCropFields), random_crop_check, random_crop_geometry, random_crop_plan,
     random_crop_exec},
    {FQ_OP_HFLIP, "HorizontalFlip", FQ_RULE_HFLIP, FQ_EXPLAIN_APPLIED, FQ_PARAMS(fq_op_prob, kProbFields), prob_check,
     keeps_size, prob_plan, hflip_exec},
    {FQ_OP_VFLIP, "VerticalFlip", FQ_RULE_VFLIP, FQ_EXPLAIN_APPLIED, FQ_PARAMS(fq_op_prob, kProbFields), prob_check,
     keeps_size, prob_plan, vflip_exec},
    {FQ_OP_COLOR_JITTER, "ColorJitter", FQ_RULE_PIXEL, FQ_EXPLAIN_JITTER,
     FQ_PARAMS(fq_op_color_jitter, kColorJitterFields), color_jitter_check, keeps_size, color_jitter_plan,
     color_jitter_exec},
    {FQ_OP_RANDOM_AFFINE, "RandomAffine", FQ_RULE_AFFINE, FQ_EXPLAIN_AFFINE,
     FQ_PARAMS(fq_op_random_affine, kRandomAffineFields), random_affine_check, keeps_size, random_affine_plan,
     random_affine_exec},
    {FQ_OP_GRAYSCALE, "Grayscale", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED, FQ_PARAMS(fq_op_prob, kProbFields), prob_check,
     keeps_size, prob_plan, grayscale_exec},
    {FQ_OP_NORMALIZE, "Normalize", FQ_RULE_PIXEL, 0, FQ_PARAMS(fq_op_normalize, kNormalizeFields), normalize_check,
     keeps_size, no_draw, no_exec},
};
constexpr int kNumOps = (int)(sizeof kOps / sizeof kOps[0]);
static_assert(kNumOps == FQ_OP_NORMALIZE && kOps[kNumOps - 1].kind == FQ_OP_NORMALIZE,
              "the named kinds of enum fq_op_kind have records here");

}  // namespace

FQ_OP_FAMILY(kOpsTorchvision, kOps)

namespace fqi {

int cv_border(int b)
{
    switch (b) {
    case FQ_BORDER_REPLICATE: return cv::BORDER_REPLICATE;
    case FQ_BORDER_REFLECT: return cv::BORDER_REFLECT_101;
    case FQ_BORDER_SYMMETRIC: return cv::BORDER_REFLECT;
    default: return cv::BORDER_CONSTANT;
    }
}

}  // namespace fqi
