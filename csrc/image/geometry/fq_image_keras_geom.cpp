/* fq_image_keras_geom.cpp - Keras 3's RandomZoom, RandomTranslation and RandomRotation
 * as native ops: the draws of their get_random_transformation (float32 values), the
 * output -> input matrix Keras builds (float32), and the sampling of TF's
 * ImageProjectiveTransformV3 (tensorflow/core/kernels/image/image_ops.h), which
 * keras.ops.image.affine_transform runs: pixel centres at integer coordinates, the
 * input coordinate of output pixel (x, y) computed in float32 as t0 x + t1 y + t2, the
 * fill mode's MapCoordinate on that coordinate (reflect / wrap / nearest clamp to
 * [0, len - 1]; constant keeps it), then nearest (std::round, half away from zero) or
 * bilinear with out-of-image neighbours read as fill_value.  fastq holds uint8 pixels:
 * the float32 result is rounded half to even (Keras outputs it as float32). */
#include "image/internal/fq_image_keras.h"
#include "image/internal/fq_image_aug.h" /* aug_round_even */

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace fqi {

namespace {

bool finite_range(const double *r, double lo, double hi)
{
    return std::isfinite(r[0]) && std::isfinite(r[1]) && lo <= r[0] && r[0] <= r[1] && r[1] <= hi;
}

const char *common_check(const KerasGeom &p)
{
    if (!(p.fill_mode == KF_REFLECT || p.fill_mode == KF_WRAP || p.fill_mode == KF_CONSTANT ||
          p.fill_mode == KF_NEAREST))
        return "fill_mode must be 0 (reflect), 1 (wrap), 2 (constant) or 3 (nearest)";
    if (!(std::isfinite(p.fill_value) && p.fill_value == std::floor(p.fill_value) && p.fill_value >= 0 &&
          p.fill_value <= 255))
        return "fill_value must be an integer in [0, 255]";
    if (!(p.interp == FQ_INTERP_NEAREST || p.interp == FQ_INTERP_BILINEAR))
        return "interpolation must be nearest or bilinear";
    if (!(p.same == 0 || p.same == 1))
        return "same must be 0 or 1";
    if (!(p.exact == 0 || p.exact == 1))
        return "exact must be 0 or 1";
    return nullptr;
}

/* MapCoordinate<Mode> of image_ops.h, term by term (DenseIndex = int64) */
inline float map_coord(float in, int64_t len, int mode)
{
    if (mode == KF_CONSTANT)
        return in;
    if (mode == KF_REFLECT) {
        if (in < 0) {
            if (len <= 1) {
                in = 0;
            } else {
                const int64_t sz2 = 2 * len;
                if (in < (float)sz2)
                    in = (float)(sz2 * (int64_t)(-in / (float)sz2)) + in;
                in = (in < (float)-len) ? in + (float)sz2 : -in - 1;
            }
        } else if (in > (float)(len - 1)) {
            if (len <= 1) {
                in = 0;
            } else {
                const int64_t sz2 = 2 * len;
                in -= (float)(sz2 * (int64_t)(in / (float)sz2));
                if (in >= (float)len)
                    in = (float)sz2 - in - 1;
            }
        }
    } else if (mode == KF_WRAP) {
        if (in < 0) {
            if (len <= 1) {
                in = 0;
            } else {
                const int64_t sz = len - 1;
                in += (float)(len * ((int64_t)(-in / (float)sz) + 1));
            }
        } else if (in > (float)(len - 1)) {
            if (len <= 1) {
                in = 0;
            } else {
                const int64_t sz = len - 1;
                in -= (float)(len * (int64_t)(in / (float)sz));
            }
        }
    }
    /* scalar_clamp_op<float>(0, len - 1) */
    const float hi = (float)(len - 1);
    return in < 0.f ? 0.f : (in > hi ? hi : in);
}

/* floor / std::round (half away from zero) of |v| < 2^31 without a libm call (plain x86-64
 * has no roundss): the coordinates here are within a few image sides (Keras's factors are
 * bounded), so the int conversions are exact */
inline int64_t floor_i(float v)
{
    const int64_t i = (int64_t)v; /* truncation */
    return (float)i > v ? i - 1 : i;
}
inline int64_t round_away_i(float v)
{
    const int64_t i = (int64_t)v;
    const float f = v - (float)i; /* exact */
    return f >= 0.5f ? i + 1 : (f <= -0.5f ? i - 1 : i);
}

/* one axis of a sample: the two neighbours (element offsets into the padded source, whose
 * last row / column hold the fill: outside the image reads the fill) and their weights
 * (ceil - v, v - floor); nearest: the one neighbour in i0, weight 1 (i1 = the fill, weight 0:
 * 0 * fill adds an exact zero) */
struct Tap {
    int64_t i0, i1;
    float w0, w1;
};

inline Tap make_tap(float v, int64_t len, int64_t step, bool nearest)
{
    Tap t;
    if (nearest) {
        const int64_t i = round_away_i(v);
        t.i0 = (i >= 0 && i < len ? i : len) * step;
        t.i1 = len * step, t.w0 = 1.f, t.w1 = 0.f;
        return t;
    }
    const int64_t i0 = floor_i(v), i1 = i0 + 1;
    const float f = (float)i0, c = f + 1;
    t.i0 = (i0 >= 0 && i0 < len ? i0 : len) * step;
    t.i1 = (i1 >= 0 && i1 < len ? i1 : len) * step;
    t.w0 = c - v, t.w1 = v - f;
    return t;
}

/* float32 in [0, 255] (a convex blend of such values) -> uint8, half to even
 * (fq_image_aug.h's aug_round_even: no libm call) */
inline uint8_t to_u8(float v)
{
    v = v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
    return (uint8_t)aug_round_even(v);
}

/* C channels of output pixel o from taps (ty rows, tx columns) of the padded source: the x
 * pair first, then y, as image_ops.h's bilinear_interpolation */
template <int C>
inline void sample_px(const uint8_t *P, size_t stride, const Tap &ty, const Tap &tx, uint8_t *o, int c)
{
    const uint8_t *r0 = P + (size_t)ty.i0 * stride, *r1 = P + (size_t)ty.i1 * stride;
    const int n = C > 0 ? C : c;
    for (int k = 0; k < n; k++) {
        const float vf = tx.w0 * (float)r0[tx.i0 + k] + tx.w1 * (float)r0[tx.i1 + k];
        const float vc = tx.w0 * (float)r1[tx.i0 + k] + tx.w1 * (float)r1[tx.i1 + k];
        o[k] = to_u8(ty.w0 * vf + ty.w1 * vc);
    }
}

/* one source row (offset ro into P) resampled at the column taps: line[x c + k] = the x pair
 * of bilinear_interpolation (w0 P(x0) + w1 P(x1)) for output column x */
template <int C>
void h_line(const uint8_t *P, int64_t ro, const Tap *tx, int W, int c, float *line)
{
    const uint8_t *r = P + ro;
    const int n = C > 0 ? C : c;
    for (int x = 0; x < W; x++, line += n) {
        const Tap &t = tx[x];
        for (int k = 0; k < n; k++)
            line[k] = t.w0 * (float)r[t.i0 + k] + t.w1 * (float)r[t.i1 + k];
    }
}

/* zoom / translation: x depends on the column only, y on the row (t1 = t3 = 0).  Each
 * output row is w0 * line(y0) + w1 * line(y1) (the y step of bilinear_interpolation), the
 * two lines being the source rows resampled horizontally, reused while rows repeat */
template <int C>
void warp_separable(Exec &e, const cv::Mat &P, cv::Mat &d, const float t[6], int mode, bool nearest)
{
    const int H = d.rows, W = d.cols, c = d.channels(), n = W * c;
    const uint8_t *base = P.ptr<uint8_t>(0);
    const size_t stride = P.step[0];
    std::vector<Tap> tx((size_t)W);
    for (int x = 0; x < W; x++) /* t0 x + 0 y + t2: the 0 y term adds an exact zero */
        tx[(size_t)x] = make_tap(map_coord(t[0] * (float)x + t[2], W, mode), W, c, nearest);
    cv::Mat lines = e.s->g2.mat(2, n, CV_32FC1);
    float *l0 = lines.ptr<float>(0), *l1 = lines.ptr<float>(1);
    int64_t have0 = -1, have1 = -1; /* the source row offsets l0, l1 hold */
    for (int y = 0; y < H; y++) {
        const Tap a = make_tap(map_coord(t[4] * (float)y + t[5], H, mode), H, (int64_t)stride, nearest);
        if (a.i0 == have1 && a.i0 != have0) { /* moving down: the old y1 line is the new y0 */
            std::swap(l0, l1);
            std::swap(have0, have1);
        }
        if (a.i0 != have0) {
            h_line<C>(base, a.i0, tx.data(), W, c, l0);
            have0 = a.i0;
        }
        if (a.i1 != have1) {
            h_line<C>(base, a.i1, tx.data(), W, c, l1);
            have1 = a.i1;
        }
        uint8_t *o = d.ptr<uint8_t>(y);
        const float w0 = a.w0, w1 = a.w1;
        for (int j = 0; j < n; j++)
            o[j] = to_u8(w0 * l0[j] + w1 * l1[j]);
    }
}

/* four floats (GCC / Clang vector extension: lane-wise IEEE float32 ops, as the scalar ones) */
typedef float v4f __attribute__((vector_size(16)));

typedef uint8_t v4u8 __attribute__((vector_size(4)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* bytes p[0..3] as floats: for an RGB pixel of the padded source, its three channels and
 * the next byte (the next pixel, or the fill column; always inside P) */
inline v4f px4(const uint8_t *p)
{
    v4u8 b;
    std::memcpy(&b, p, 4);
    return __builtin_convertvector(b, v4f);
}

/* to_u8 of lanes 0..2 into o[0..2] (clamp, round half to even by the 1.5 * 2^23 trick) */
inline void store3(v4f v, uint8_t *o)
{
    const v4f zero = {0.f, 0.f, 0.f, 0.f}, top = {255.f, 255.f, 255.f, 255.f};
    const v4f magic = {12582912.f, 12582912.f, 12582912.f, 12582912.f};
    v = v < zero ? zero : v;
    v = v > top ? top : v;
    v = (v + magic) - magic;
    const v4i i = __builtin_convertvector(v, v4i);
    o[0] = (uint8_t)i[0], o[1] = (uint8_t)i[1], o[2] = (uint8_t)i[2];
}

template <int C>
void warp_general(const cv::Mat &P, cv::Mat &d, const float t[6], int mode, bool nearest)
{
    const int H = d.rows, W = d.cols, c = d.channels();
    const int n = C > 0 ? C : c;
    const uint8_t *base = P.ptr<uint8_t>(0);
    const size_t stride = P.step[0];
    const float xmax = (float)(W - 1), ymax = (float)(H - 1);
    for (int y = 0; y < H; y++) {
        uint8_t *o = d.ptr<uint8_t>(y);
        const float fy = (float)y, ry0 = t[1] * fy, ry1 = t[4] * fy;
        for (int x = 0; x < W; x++, o += n) {
            const float fx = (float)x;
            const float ix = (t[0] * fx + ry0) + t[2], iy = (t[3] * fx + ry1) + t[5];
            if (!nearest && ix >= 0.f && ix < xmax && iy >= 0.f && iy < ymax) {
                /* inside: every fill mode maps the coordinate to itself, all four taps are pixels */
                const int xi = (int)ix, yi = (int)iy; /* floor: non-negative */
                const float wx1 = ix - (float)xi, wx0 = ((float)xi + 1) - ix;
                const float wy1 = iy - (float)yi, wy0 = ((float)yi + 1) - iy;
                const uint8_t *p0 = base + (size_t)yi * stride + (size_t)xi * n, *p1 = p0 + stride;
                if (C == 3) { /* the three channels in the lanes of one vector: the same float ops per lane */
                    const v4f vf = wx0 * px4(p0) + wx1 * px4(p0 + 3), vc = wx0 * px4(p1) + wx1 * px4(p1 + 3);
                    store3(wy0 * vf + wy1 * vc, o);
                    continue;
                }
                for (int k = 0; k < n; k++) {
                    const float vf = wx0 * (float)p0[k] + wx1 * (float)p0[k + n];
                    const float vc = wx0 * (float)p1[k] + wx1 * (float)p1[k + n];
                    o[k] = to_u8(wy0 * vf + wy1 * vc);
                }
                continue;
            }
            sample_px<C>(base, stride, make_tap(map_coord(iy, H, mode), H, 1, nearest),
                         make_tap(map_coord(ix, W, mode), W, c, nearest), o, c);
        }
    }
}

template <int C>
void warp_rows(Exec &e, const cv::Mat &P, cv::Mat &d, const float t[6], int mode, bool nearest)
{
    if (t[1] == 0.f && t[3] == 0.f)
        warp_separable<C>(e, P, d, t, mode, nearest);
    else
        warp_general<C>(P, d, t, mode, nearest);
}

}  // namespace

const char *keras_zoom_check(const fq_op &op)
{
    const KerasGeom &p = params<KerasGeom>(op);
    if (!finite_range(p.height, -1, 1) || !finite_range(p.width, -1, 1) || p.height[0] <= -1 || p.width[0] <= -1)
        return "height / width must be (min, max) ranges within (-1, 1] (Keras's)";
    return common_check(p);
}

const char *keras_translation_check(const fq_op &op)
{
    const KerasGeom &p = params<KerasGeom>(op);
    if (!finite_range(p.height, -1, 1) || !finite_range(p.width, -1, 1))
        return "height / width must be (min, max) ranges within [-1, 1]";
    if (p.same != 0)
        return "same must be 0";
    return common_check(p);
}

const char *keras_rotation_check(const fq_op &op)
{
    const KerasGeom &p = params<KerasGeom>(op);
    if (!finite_range(p.height, -1000, 1000))
        return "factor must be a (min, max) range within [-1000, 1000]";
    if (p.width[0] != 0 || p.width[1] != 0 || p.same != 0)
        return "width and same must be 0";
    return common_check(p);
}

/* Keras's uniform(minval, maxval) in float32 */
static float draw_f32(fq_rng *rng, const double *r) { return (float)fq_rng_uniform_range(rng, r[0], r[1]); }

int keras_zoom_plan(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const KerasGeom &p = params<KerasGeom>(op);
    const double hr[2] = {1.0 + p.height[0], 1.0 + p.height[1]}, wr[2] = {1.0 + p.width[0], 1.0 + p.width[1]};
    const float zh = draw_f32(rng, hr);
    const float zw = p.same != 0 ? zh : draw_f32(rng, wr);
    /* _get_zoom_matrix: x_offset = ((w - 1) / 2) * (1 - zw), in float32 */
    const float xo = (((float)*pw - 1.f) / 2.f) * (1.f - zw), yo = (((float)*ph - 1.f) / 2.f) * (1.f - zh);
    r.applied = 1;
    r.params[0] = zh, r.params[1] = zw;
    r.matrix[0] = zw, r.matrix[1] = 0, r.matrix[2] = xo;
    r.matrix[3] = 0, r.matrix[4] = zh, r.matrix[5] = yo;
    return FQ_OK;
}

int keras_translation_plan(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const KerasGeom &p = params<KerasGeom>(op);
    const float dy = draw_f32(rng, p.height) * (float)*ph; /* height first, as Keras */
    const float dx = draw_f32(rng, p.width) * (float)*pw;
    r.applied = 1;
    r.params[0] = dy, r.params[1] = dx;
    r.matrix[0] = 1, r.matrix[1] = 0, r.matrix[2] = -dx;
    r.matrix[3] = 0, r.matrix[4] = 1, r.matrix[5] = -dy;
    return FQ_OK;
}

int keras_rotation_plan(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const KerasGeom &p = params<KerasGeom>(op);
    const double deg[2] = {(double)(float)(p.height[0] * 360.0), (double)(float)(p.height[1] * 360.0)};
    const float angle = draw_f32(rng, deg);
    /* _compute_affine_matrix with centre 0.5, no translation / shear, scale 1, in float32 */
    const float rad = angle * (float)(3.14159265358979323846 / 180.0);
    const float c = std::cos(rad), s = std::sin(rad);
    const float cx = 0.5f * ((float)*pw - 1.f), cy = 0.5f * ((float)*ph - 1.f);
    const float a0 = 1.f * (c + 0.f * s), a1 = 1.f * (-s + 0.f * c);
    const float b0 = 1.f * (0.f * c + s), b1 = 1.f * (0.f * -s + c);
    r.applied = 1;
    r.params[0] = angle;
    r.matrix[0] = a0, r.matrix[1] = a1, r.matrix[2] = ((0.f + cx) - cx * a0) - cy * a1;
    r.matrix[3] = b0, r.matrix[4] = b1, r.matrix[5] = ((0.f + cy) - cx * b0) - cy * b1;
    return FQ_OK;
}

/* OpenCV's warpAffine maps every out-of-image tap through borderInterpolate, one pixel at a
 * time: with a reflect or replicate border, a rotation's corners cost twice the whole warp
 * (185 against 79 us for 224 x 224 x 3).  The same values, read from a copy of the image
 * with that border made around it (copyMakeBorder, the same borderInterpolate) deep enough
 * that no tap leaves it, and the matrix moved by the (integer) border: false when the
 * border would be deeper than MAX_PAD (then the caller warps as before). */
static bool warp_padded(Exec &e, const double *m, int border, cv::Mat &d)
{
    constexpr int MAX_PAD = 512;
    const int H = e.cur.rows, W = e.cur.cols;
    double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
    for (int cy = 0; cy < 2; cy++)
        for (int cx = 0; cx < 2; cx++) {
            const double x = cx ? W - 1 : 0, y = cy ? H - 1 : 0;
            const double sx = m[0] * x + m[1] * y + m[2], sy = m[3] * x + m[4] * y + m[5];
            x0 = std::min(x0, sx), x1 = std::max(x1, sx), y0 = std::min(y0, sy), y1 = std::max(y1, sy);
        }
    if (!(std::isfinite(x0) && std::isfinite(x1) && std::isfinite(y0) && std::isfinite(y1)))
        return false;
    /* bilinear taps floor(s) and floor(s) + 1, two more pixels of margin for the 1/32 quantization */
    const double l = std::max(0.0, -std::floor(x0) + 2), t = std::max(0.0, -std::floor(y0) + 2);
    const double rr = std::max(0.0, std::floor(x1) + 3 - W), b = std::max(0.0, std::floor(y1) + 3 - H);
    if (l > MAX_PAD || t > MAX_PAD || rr > MAX_PAD || b > MAX_PAD)
        return false;
    const int L = (int)l, T = (int)t, R = (int)rr, B = (int)b;
    cv::Mat P = e.s->g1.mat(H + T + B, W + L + R, e.cur.type());
    cv::copyMakeBorder(e.cur, P, T, B, L, R, border);
    const double mp[6] = {m[0], m[1], m[2] + L, m[3], m[4], m[5] + T};
    const cv::Mat M(2, 3, CV_64F, const_cast<double *>(mp));
    cv::warpAffine(P, d, M, cv::Size(W, H), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, border);
    return true;
}

void keras_geom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const KerasGeom &p = params<KerasGeom>(op);
    e.materialize_flips();
    const int H = e.cur.rows, W = e.cur.cols, C = e.cur.channels();
    const int mode = (int)p.fill_mode;
    const bool nearest = p.interp == FQ_INTERP_NEAREST;
    if (p.exact == 0 && !nearest && mode != KF_WRAP) {
        /* TF's reflect / nearest / constant read, for bilinear taps, what cv's BORDER_REFLECT /
           REPLICATE / CONSTANT read; OpenCV quantizes the coordinate to 1/32 pixel */
        const double m[6] = {(double)(float)r.matrix[0], (double)(float)r.matrix[1], (double)(float)r.matrix[2],
                             (double)(float)r.matrix[3], (double)(float)r.matrix[4], (double)(float)r.matrix[5]};
        const cv::Mat M(2, 3, CV_64F, const_cast<double *>(m));
        const int border = mode == KF_REFLECT ? cv::BORDER_REFLECT
                                              : (mode == KF_NEAREST ? cv::BORDER_REPLICATE : cv::BORDER_CONSTANT);
        const double fv = p.fill_value;
        cv::Mat d = e.next(H, W, e.cur.type());
        if (border != cv::BORDER_CONSTANT && warp_padded(e, m, border, d)) {
            e.set(d);
            return;
        }
        cv::warpAffine(e.cur, d, M, cv::Size(W, H), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, border,
                       cv::Scalar(fv, fv, fv, fv));
        e.set(d);
        return;
    }
    /* the source with one more row and column holding the fill: every tap reads memory */
    const double fv = p.fill_value;
    cv::Mat P = e.s->g1.mat(H + 1, W + 1, e.cur.type());
    cv::copyMakeBorder(e.cur, P, 0, 1, 0, 1, cv::BORDER_CONSTANT, cv::Scalar(fv, fv, fv, fv));
    cv::Mat d = e.next(H, W, e.cur.type());
    const float t[6] = {(float)r.matrix[0], (float)r.matrix[1], (float)r.matrix[2],
                        (float)r.matrix[3], (float)r.matrix[4], (float)r.matrix[5]};
    if (C == 3)
        warp_rows<3>(e, P, d, t, mode, nearest);
    else if (C == 1)
        warp_rows<1>(e, P, d, t, mode, nearest);
    else
        warp_rows<0>(e, P, d, t, mode, nearest);
    e.set(d);
}

}  // namespace fqi

/* ---- the records of this family, Keras 3's RandomZoom / RandomTranslation /
 * RandomRotation: kinds fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kKerasGeomRecords[] = {
    {52, "KerasRandomZoom", FQ_RULE_REFUSED, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_KERAS,
     FQ_PARAMS(fqi::KerasGeom, fqi::kKerasGeomFields), fqi::keras_zoom_check, fqi::keeps_size, fqi::keras_zoom_plan,
     fqi::keras_geom_exec},
    {53, "KerasRandomTranslation", FQ_RULE_REFUSED, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_KERAS,
     FQ_PARAMS(fqi::KerasGeom, fqi::kKerasGeomFields), fqi::keras_translation_check, fqi::keeps_size,
     fqi::keras_translation_plan, fqi::keras_geom_exec},
    {54, "KerasRandomRotation", FQ_RULE_REFUSED, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_KERAS,
     FQ_PARAMS(fqi::KerasGeom, fqi::kKerasGeomFields), fqi::keras_rotation_check, fqi::keeps_size,
     fqi::keras_rotation_plan, fqi::keras_geom_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsKerasGeom, kKerasGeomRecords)
