/* fq_image_aug_timm_ops.cpp - timm's ops with PIL semantics (ImageOps.autocontrast /
 * equalize / invert / posterize / solarize, timm's solarize_add, ImageEnhance Color /
 * Contrast / Brightness / Sharpness = Image.blend(degenerate, image, factor) in float32,
 * Image.transform(AFFINE) and Image.rotate with bilinear / bicubic and fillcolor,
 * ImageFilter.GaussianBlur), applied by the policy drivers of fq_image_aug_timm_policy.cpp
 * (timm.data.auto_augment, timm 1.0).  Semantics: docs/ops.md.  Pure functions of their
 * arguments. */
#include "image/color/fq_image_aug_timm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <opencv2/core.hpp>

namespace {

using fqi::Exec;
using namespace fqi::timm;

/* ---- the ops (PIL semantics) ------------------------------------------------------- */

void lut_op(Exec &e, int t, double v)
{
    uint8_t lut[256];
    if (t == M_POSTERIZE || t == M_POSTERIZE_INC || t == M_POSTERIZE_ORIG) {
        if (v >= 8)
            return; /* timm's posterize returns the image */
        /* bits 0: mask 0, all black (Pillow < 13; Pillow 13's ImageOps.posterize raises) */
        const int bits = v <= 0 ? 0 : (int)v, mask = ~((1 << (8 - bits)) - 1) & 0xff;
        for (int i = 0; i < 256; i++)
            lut[i] = (uint8_t)(i & mask);
    } else if (t == M_SOLARIZE || t == M_SOLARIZE_INC) {
        for (int i = 0; i < 256; i++)
            lut[i] = (double)i < v ? (uint8_t)i : (uint8_t)(255 - i);
    } else { /* SolarizeAdd, threshold 128 */
        for (int i = 0; i < 256; i++)
            lut[i] = i < 128 ? (uint8_t)std::fmin(255.0, i + v) : (uint8_t)i;
    }
    fqi::apply_lut(e, lut);
}

/* ImageOps.autocontrast(cutoff=0): per channel lo / hi present; lut = int(i * scale + offset) */
void pil_autocontrast(Exec &e)
{
    const int c = e.cur.channels();
    int hist[3][256] = {};
    for (int y = 0; y < e.cur.rows; y++) {
        const uint8_t *s = e.cur.ptr<uint8_t>(y);
        for (int x = 0; x < e.cur.cols * c; x += c)
            for (int k = 0; k < c; k++)
                hist[k][s[x + k]]++;
    }
    uint8_t lut[3][256];
    for (int k = 0; k < c; k++) {
        int lo = 0, hi = 255;
        while (lo < 255 && !hist[k][lo])
            lo++;
        while (hi > 0 && !hist[k][hi])
            hi--;
        if (hi <= lo) {
            for (int i = 0; i < 256; i++)
                lut[k][i] = (uint8_t)i;
            continue;
        }
        const double scale = 255.0 / (hi - lo), offset = -lo * scale;
        for (int i = 0; i < 256; i++) {
            const int v = (int)(i * scale + offset); /* python int(): truncation */
            lut[k][i] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
    fqi::apply_luts(e, lut);
}

void pil_enhance(Exec &e, int t, double factor)
{
    const float a = (float)factor;
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    if (a == 1.f)
        return; /* Image.blend with alpha 1: a copy of the image */
    if (t == M_BRIGHTNESS || t == M_BRIGHTNESS_INC) {
        uint8_t lut[256];
        for (int i = 0; i < 256; i++)
            lut[i] = blend(0, i, a);
        fqi::apply_lut(e, lut);
        return;
    }
    if (t == M_CONTRAST || t == M_CONTRAST_INC) { /* degenerate: int(mean of L + 0.5) */
        int64_t sum = 0;
        if (c != 3 || !fqi::timm_gray_sum_simd(e.cur, &sum)) /* AVX2: the same integer sum */
            for (int y = 0; y < H; y++) {
                const uint8_t *s = e.cur.ptr<uint8_t>(y);
                for (int x = 0; x < W; x++)
                    sum += c == 3 ? pil_gray(s + 3 * x) : s[x * c];
            }
        const int mean = (int)((double)sum / ((double)H * W) + 0.5);
        uint8_t lut[256];
        for (int i = 0; i < 256; i++)
            lut[i] = blend(mean, i, a);
        fqi::apply_lut(e, lut);
        return;
    }
    if (t == M_COLOR || t == M_COLOR_INC) { /* degenerate: L, back to RGB */
        if (c != 3)
            return; /* L: the degenerate is the image */
        cv::Mat d = e.next(H, W, e.cur.type());
        if (!fqi::timm_color_simd(e.cur, d, a)) /* AVX2: the same bytes */
            for (int y = 0; y < H; y++) {
                const uint8_t *s = e.cur.ptr<uint8_t>(y);
                uint8_t *o = d.ptr<uint8_t>(y);
                for (int x = 0; x < W; x++) {
                    const int g = pil_gray(s + 3 * x);
                    for (int k = 0; k < 3; k++)
                        o[3 * x + k] = blend(g, s[3 * x + k], a);
                }
            }
        e.set(d);
        return;
    }
    /* Sharpness: degenerate = SMOOTH (borders: the image's, which blend to themselves) */
    cv::Mat d = e.next(H, W, e.cur.type());
    /* AVX2: the interior (rows 1 .. H - 2, columns 1 .. W - 2), the same bytes */
    const bool simd = W >= 3 && fqi::timm_sharpness_simd(e.cur, d, a);
    for (int y = 0; y < H; y++) {
        const uint8_t *m = e.cur.ptr<uint8_t>(y);
        uint8_t *o = d.ptr<uint8_t>(y);
        if (y == 0 || y == H - 1 || W < 3) {
            for (int i = 0; i < W * c; i++)
                o[i] = blend(m[i], m[i], a);
            continue;
        }
        const uint8_t *u = e.cur.ptr<uint8_t>(y - 1), *b = e.cur.ptr<uint8_t>(y + 1);
        for (int i = 0; i < c; i++)
            o[i] = blend(m[i], m[i], a), o[(W - 1) * c + i] = blend(m[(W - 1) * c + i], m[(W - 1) * c + i], a);
        if (!simd)
            for (int i = c; i < (W - 1) * c; i++)
                o[i] = blend(pil_smooth(u, m, b, i, c), m[i], a);
    }
    e.set(d);
}

/* Pillow's ImageFilter.GaussianBlur(radius) (ImagingGaussianBlur: 3 box blurs per axis of
 * the fractional radius that matches the variance, float32 as Pillow; each box blur line in
 * 8.24 fixed point, the edges extended; rows first, then columns) */
float pil_box_radius(float radius, int passes)
{
    const float sigma2 = radius * radius / passes;
    const float L = (float)std::sqrt(12.0 * (double)sigma2 + 1.0);
    const float l = (float)std::floor(((double)L - 1.0) / 2.0);
    float a = (2 * l + 1) * (l * (l + 1) - 3 * sigma2);
    a /= 6 * (sigma2 - (l + 1) * (l + 1));
    return l + a;
}

/* one line of n values (in, out contiguous) */
void pil_box_line(const uint8_t *in, uint8_t *out, int n, int radius, uint32_t ww, uint32_t fw)
{
    const int last = n - 1;
    const int edgeA = radius + 1 < n ? radius + 1 : n, edgeB = n - radius - 1 > 0 ? n - radius - 1 : 0;
    uint32_t acc = (uint32_t)in[0] * (uint32_t)(radius + 1);
    for (int x = 0; x < edgeA - 1; x++)
        acc += in[x];
    acc += (uint32_t)in[last] * (uint32_t)(radius - edgeA + 1);
    auto step = [&](int x, int sub, int add, int left, int right) {
        acc += (uint32_t)((int)in[add] - (int)in[sub]);
        const uint32_t bulk = acc * ww + (uint32_t)(in[left] + in[right]) * fw;
        out[x] = (uint8_t)((bulk + (1u << 23)) >> 24);
    };
    if (edgeA <= edgeB) {
        for (int x = 0; x < edgeA; x++)
            step(x, 0, x + radius, 0, x + radius + 1);
        for (int x = edgeA; x < edgeB; x++)
            step(x, x - radius - 1, x + radius, x - radius - 1, x + radius + 1);
        for (int x = edgeB; x <= last; x++)
            step(x, x - radius - 1, last, x - radius - 1, last);
    } else {
        for (int x = 0; x < edgeB; x++)
            step(x, 0, x + radius, 0, x + radius + 1);
        for (int x = edgeB; x < edgeA; x++)
            step(x, 0, last, 0, last);
        for (int x = edgeA; x <= last; x++)
            step(x, x - radius - 1, last, x - radius - 1, last);
    }
}

void pil_gaussian_blur(Exec &e, double radius_d)
{
    if (radius_d == 0)
        return; /* GaussianBlur.filter: a copy */
    const float fr = pil_box_radius((float)radius_d, 3);
    if (fr == 0)
        return;
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    const int radius = (int)fr;
    const uint32_t ww = (uint32_t)((float)(1u << 24) / (fr * 2 + 1));
    const uint32_t fw = ((1u << 24) - (uint32_t)(radius * 2 + 1) * ww) / 2;
    cv::Mat d = e.next(H, W, e.cur.type());
    e.cur.copyTo(d);
    std::vector<uint8_t> a((size_t)(H > W ? H : W)), b(a.size());
    for (int pass = 0; pass < 6; pass++) { /* 3 along rows, 3 along columns */
        const bool rows = pass < 3;
        const int lines = rows ? H : W, n = rows ? W : H;
        for (int i = 0; i < lines; i++)
            for (int k = 0; k < c; k++) {
                for (int x = 0; x < n; x++)
                    a[x] = rows ? d.ptr<uint8_t>(i)[x * c + k] : d.ptr<uint8_t>(x)[i * c + k];
                pil_box_line(a.data(), b.data(), n, radius, ww, fw);
                for (int x = 0; x < n; x++)
                    (rows ? d.ptr<uint8_t>(i)[x * c + k] : d.ptr<uint8_t>(x)[i * c + k]) = b[x];
            }
    }
    e.set(d);
}

/* python's round(v, 15) (correctly rounded decimal, as CPython's dtoa) */
double round15(double v)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.15f", v);
    return std::strtod(buf, nullptr);
}

/* Image.rotate(deg, resample, fillcolor) (expand False, centre (w/2, h/2)) */
void pil_rotate(Exec &e, double deg, bool bicubic, const uint8_t fill[3])
{
    double ang = std::fmod(deg, 360.0); /* python's %: the sign of the divisor */
    if (ang < 0)
        ang += 360.0;
    if (ang == 0)
        return;
    const int H = e.cur.rows, W = e.cur.cols;
    cv::Mat d = e.next(H, W, e.cur.type());
    if (ang == 180 || ((ang == 90 || ang == 270) && W == H)) { /* Pillow transposes */
        const int c = e.cur.channels();
        for (int y = 0; y < H; y++) {
            uint8_t *o = d.ptr<uint8_t>(y);
            for (int x = 0; x < W; x++) {
                int sx, sy;
                if (ang == 180)
                    sx = W - 1 - x, sy = H - 1 - y;
                else if (ang == 90) /* counter-clockwise */
                    sx = W - 1 - y, sy = x;
                else
                    sx = y, sy = H - 1 - x;
                std::memcpy(o + (size_t)x * c, e.cur.ptr<uint8_t>(sy) + (size_t)sx * c, c);
            }
        }
        e.set(d);
        return;
    }
    const double cx = W / 2.0, cy = H / 2.0;
    const double r = -(ang * (3.141592653589793 / 180.0));
    double m[6] = {round15(std::cos(r)), round15(std::sin(r)), 0.0, round15(-std::sin(r)), round15(std::cos(r)), 0.0};
    m[2] = m[0] * -cx + m[1] * -cy + m[2];
    m[5] = m[3] * -cx + m[4] * -cy + m[5];
    m[2] += cx;
    m[5] += cy;
    fqi::pil_affine(e.cur, d, m, bicubic, fill);
    e.set(d);
}

void geometric_op(Exec &e, int t, double v, bool bicubic, const uint8_t fill[3])
{
    if (t == M_ROTATE) {
        pil_rotate(e, v, bicubic, fill);
        return;
    }
    double m[6] = {1, 0, 0, 0, 1, 0};
    switch (t) {
    case M_SHEAR_X: m[1] = v; break;
    case M_SHEAR_Y: m[3] = v; break;
    case M_TRANSLATE_X: m[2] = v; break;
    case M_TRANSLATE_Y: m[5] = v; break;
    case M_TRANSLATE_X_REL: m[2] = v * e.cur.cols; break;
    case M_TRANSLATE_Y_REL: m[5] = v * e.cur.rows; break;
    default: break;
    }
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    fqi::pil_affine(e.cur, d, m, bicubic, fill);
    e.set(d);
}

}  // namespace

namespace fqi {
namespace timm {

/* fq_image_aug_timm.h */
void timm_apply(Exec &e, int t, double v, double extra, const uint8_t fill[3])
{
    const bool bicubic = extra != 0;
    if (t == M_GAUSSIAN_BLUR_RAND) {
        pil_gaussian_blur(e, extra);
        return;
    }
    static const double nofill[3] = {0, 0, 0};
    switch (t) {
    case M_AUTOCONTRAST: pil_autocontrast(e); return;
    case M_EQUALIZE: fqi::aug_apply(e, fq_img_op_kind("Equalize"), 0, nofill); return; /* PIL's equalize */
    case M_INVERT: fqi::aug_apply(e, fq_img_op_kind("Invert"), 0, nofill); return;
    case M_POSTERIZE:
    case M_POSTERIZE_INC:
    case M_POSTERIZE_ORIG:
    case M_SOLARIZE:
    case M_SOLARIZE_INC:
    case M_SOLARIZE_ADD: lut_op(e, t, v); return;
    case M_COLOR:
    case M_COLOR_INC:
    case M_CONTRAST:
    case M_CONTRAST_INC:
    case M_BRIGHTNESS:
    case M_BRIGHTNESS_INC:
    case M_SHARPNESS:
    case M_SHARPNESS_INC: pil_enhance(e, t, v); return;
    case M_DESATURATE: pil_enhance(e, M_COLOR, std::fmin(1.0, std::fmax(0.0, 1.0 - v))); return;
    case M_GAUSSIAN_BLUR: pil_gaussian_blur(e, v); return;
    default: geometric_op(e, t, v, bicubic, fill); return;
    }
}

}  // namespace timm
}  // namespace fqi
