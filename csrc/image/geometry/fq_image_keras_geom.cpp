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

#include <cmath>
#include <cstring>
#include <vector>

#include <opencv2/core.hpp>

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
    if (!(std::isfinite(p.fill_value) && p.fill_value >= 0 && p.fill_value <= 255))
        return "fill_value must be in [0, 255]";
    if (!(p.interp == FQ_INTERP_NEAREST || p.interp == FQ_INTERP_BILINEAR))
        return "interpolation must be nearest or bilinear";
    if (!(p.same == 0 || p.same == 1))
        return "same must be 0 or 1";
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

/* one axis of a sample: the two neighbours (element offsets, -1 = outside: fill) and
 * their weights (ceil - v, v - floor), or for nearest the one neighbour in i0 */
struct Tap {
    int64_t i0, i1;
    float w0, w1;
};

inline Tap make_tap(float v, int64_t len, int64_t step, bool nearest)
{
    Tap t;
    if (nearest) {
        const int64_t i = (int64_t)std::round(v);
        t.i0 = (i >= 0 && i < len) ? i * step : -1;
        t.i1 = -1, t.w0 = 1.f, t.w1 = 0.f;
        return t;
    }
    const float f = std::floor(v), c = f + 1;
    const int64_t i0 = (int64_t)f, i1 = (int64_t)c;
    t.i0 = (i0 >= 0 && i0 < len) ? i0 * step : -1;
    t.i1 = (i1 >= 0 && i1 < len) ? i1 * step : -1;
    t.w0 = c - v, t.w1 = v - f;
    return t;
}

/* float32 (in range up to rounding) -> uint8, half to even */
inline uint8_t to_u8(float v)
{
    if (!(v > 0.f))
        return 0;
    if (v >= 255.f)
        return 255;
    return (uint8_t)std::nearbyint(v);
}

/* the value at (ty rows, tx columns) of channel k: bilinear as image_ops.h (the x pair,
 * then y); nearest: w0 = 1, i1 = -1 (a 0 * fill term, as TF's is never formed: exact) */
inline float sample(const uint8_t *base, size_t stride, const Tap &ty, const Tap &tx, int k, float fill,
                    bool nearest)
{
    auto rd = [&](int64_t yo, int64_t xo) -> float {
        return (yo >= 0 && xo >= 0) ? (float)base[(size_t)yo * stride + (size_t)xo + (size_t)k] : fill;
    };
    if (nearest)
        return rd(ty.i0, tx.i0);
    const float vf = tx.w0 * rd(ty.i0, tx.i0) + tx.w1 * rd(ty.i0, tx.i1);
    const float vc = tx.w0 * rd(ty.i1, tx.i0) + tx.w1 * rd(ty.i1, tx.i1);
    return ty.w0 * vf + ty.w1 * vc;
}

}  // namespace

const char *keras_zoom_check(const fq_op &op)
{
    const KerasGeom &p = params<KerasGeom>(op);
    if (!finite_range(p.height, -1, 1e6) || !finite_range(p.width, -1, 1e6))
        return "height / width must be (min, max) ranges with -1 <= min <= max";
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
    if (!finite_range(p.height, -1e6, 1e6))
        return "factor must be a (min, max) range";
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

void keras_geom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const KerasGeom &p = params<KerasGeom>(op);
    e.materialize_flips();
    const cv::Mat src = e.cur;
    const int H = src.rows, W = src.cols, C = src.channels();
    cv::Mat d = e.next(H, W, src.type());
    const float t[6] = {(float)r.matrix[0], (float)r.matrix[1], (float)r.matrix[2],
                        (float)r.matrix[3], (float)r.matrix[4], (float)r.matrix[5]};
    const int mode = (int)p.fill_mode;
    const bool nearest = p.interp == FQ_INTERP_NEAREST;
    const float fill = (float)p.fill_value;
    const uint8_t *base = src.ptr<uint8_t>(0);
    const size_t stride = src.step[0];
    if (t[1] == 0.f && t[3] == 0.f) { /* zoom / translation: x depends on the column only, y on the row */
        std::vector<Tap> tx((size_t)W), ty((size_t)H);
        for (int x = 0; x < W; x++) /* t0 x + 0 y + t2: the 0 y term adds an exact zero */
            tx[(size_t)x] = make_tap(map_coord(t[0] * (float)x + t[2], W, mode), W, C, nearest);
        for (int y = 0; y < H; y++)
            ty[(size_t)y] = make_tap(map_coord(t[4] * (float)y + t[5], H, mode), H, 1, nearest);
        for (int y = 0; y < H; y++) {
            uint8_t *o = d.ptr<uint8_t>(y);
            const Tap &a = ty[(size_t)y];
            for (int x = 0; x < W; x++)
                for (int k = 0; k < C; k++)
                    *o++ = to_u8(sample(base, stride, a, tx[(size_t)x], k, fill, nearest));
        }
    } else {
        for (int y = 0; y < H; y++) {
            uint8_t *o = d.ptr<uint8_t>(y);
            const float fy = (float)y;
            for (int x = 0; x < W; x++) {
                const float fx = (float)x;
                const float ix = map_coord((t[0] * fx + t[1] * fy) + t[2], W, mode);
                const float iy = map_coord((t[3] * fx + t[4] * fy) + t[5], H, mode);
                const Tap a = make_tap(iy, H, 1, nearest), b = make_tap(ix, W, C, nearest);
                for (int k = 0; k < C; k++)
                    *o++ = to_u8(sample(base, stride, a, b, k, fill, nearest));
            }
        }
    }
    e.set(d);
}

}  // namespace fqi
