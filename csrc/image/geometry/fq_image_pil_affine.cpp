/* fq_image_pil_affine.cpp - Pillow's affine transform with its bilinear and bicubic
 * filters (Image.transform(size, AFFINE, data, resample, fillcolor) on an RGB / L image,
 * no antialiasing), written from Pillow's documented semantics and checked against Pillow
 * 13 by tests/ops/test_timm_policies.py: output pixel (x, y) samples the input at
 * (a0 (x + .5) + a1 (y + .5) + a2, a3 (x + .5) + a4 (y + .5) + a5) in doubles; a point
 * outside [0, W) x [0, H) takes the fill colour; inside, the point less half a pixel is
 * split into its floor and fraction, columns are clamped to the image, and a row past
 * the bottom repeats the row before it (the first row read is clamped); bilinear:
 * a + (b - a) d per axis (x first), truncated; bicubic: Pillow's cubic with a = -1
 * (p1 = v2, p2 = v3 - v1, p3 = 2 (v1 - v2) + v3 - v4, p4 = v2 - v1 + v4 - v3, Horner in
 * d), clamped to [0, 255] and truncated.  Where the fraction of one axis is 0 (every pixel
 * of ShearX / TranslateX: dy; of ShearY / TranslateY: dx) the cubic along that axis is its
 * second sample exactly (v2 + 0 (p2 + ...) = v2 in doubles: finite p's, no -0 sums), so
 * only one row (column) is sampled, with the same bytes.  Scalar, and for 3 channels an AVX2 copy
 * (fq_image_pil_affine_avx2.cpp) where fq_cpu_has(FQ_CPU_AVX2); pure function of its
 * arguments. */
#include "image/internal/fq_image_aug.h"

#include <cmath>

#include "core/fq_cpu.h"

namespace {

inline int pil_floor(double v) { return v < 0.0 ? (int)std::floor(v) : (int)v; }
inline int clampi(int v, int n) { return v < 0 ? 0 : (v < n ? v : n - 1); }

inline double lerp(double a, double b, double d) { return a + (b - a) * d; }

/* the cubic of four uint8 samples: its coefficients are exact integers */
inline double cubic8(int v1, int v2, int v3, int v4, double d)
{
    const int p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
    return (double)v2 + d * ((double)p2 + d * ((double)p3 + d * (double)p4));
}

inline double cubic(double v1, double v2, double v3, double v4, double d)
{
    const double p1 = v2;
    const double p2 = -v1 + v3;
    const double p3 = 2 * (v1 - v2) + v3 - v4;
    const double p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
}

/* the c channels of the source at floor (x, y) + (dx, dy): bilinear into o (truncated) */
inline void bilinear_px(const cv::Mat &s, int c, int x, int y, double dx, double dy, uint8_t *o)
{
    const int W = s.cols, H = s.rows;
    const int x0 = clampi(x, W) * c, x1 = clampi(x + 1, W) * c;
    const uint8_t *r0 = s.ptr<uint8_t>(clampi(y, H));
    const uint8_t *r1 = y + 1 >= 0 && y + 1 < H ? s.ptr<uint8_t>(y + 1) : nullptr;
    for (int k = 0; k < c; k++) {
        const double v1 = lerp(r0[x0 + k], r0[x1 + k], dx);
        const double v2 = r1 ? lerp(r1[x0 + k], r1[x1 + k], dx) : v1;
        o[k] = (uint8_t)lerp(v1, v2, dy);
    }
}

/* bicubic from the 4 x 4 block whose top-left is (x, y) (clamped as Pillow), clamped to
 * [0, 255] and truncated into o */
inline void bicubic_px(const cv::Mat &s, int c, int x, int y, double dx, double dy, uint8_t *o)
{
    const int W = s.cols, H = s.rows;
    int xs[4];
    for (int j = 0; j < 4; j++)
        xs[j] = clampi(x + j, W) * c;
    const uint8_t *rows[4];
    rows[0] = s.ptr<uint8_t>(clampi(y, H));
    for (int j = 1; j < 4; j++) /* nullptr: repeat the value of the row before */
        rows[j] = y + j >= 0 && y + j < H ? s.ptr<uint8_t>(y + j) : nullptr;
    for (int k = 0; k < c; k++) {
        double v[4];
        v[0] = cubic8(rows[0][xs[0] + k], rows[0][xs[1] + k], rows[0][xs[2] + k], rows[0][xs[3] + k], dx);
        for (int j = 1; j < 4; j++) {
            const uint8_t *r = rows[j];
            v[j] = r ? cubic8(r[xs[0] + k], r[xs[1] + k], r[xs[2] + k], r[xs[3] + k], dx) : v[j - 1];
        }
        const double t = cubic(v[0], v[1], v[2], v[3], dy);
        o[k] = t <= 0.0 ? 0 : (t >= 255.0 ? 255 : (uint8_t)t);
    }
}

/* bicubic where dy is 0 (the point less half a pixel on row y): the cubic over rows gives
 * its second sample exactly (v2 + 0 (...) = v2), which is row y's, y in the image */
inline void bicubic_row(const cv::Mat &s, int c, int x, int y, double dx, uint8_t *o)
{
    const int W = s.cols;
    int xs[4];
    for (int j = 0; j < 4; j++)
        xs[j] = clampi(x + j, W) * c;
    const uint8_t *r = s.ptr<uint8_t>(y);
    for (int k = 0; k < c; k++) {
        const double t = cubic8(r[xs[0] + k], r[xs[1] + k], r[xs[2] + k], r[xs[3] + k], dx);
        o[k] = t <= 0.0 ? 0 : (t >= 255.0 ? 255 : (uint8_t)t);
    }
}

/* bicubic where dx is 0 (column x in the image): each row's cubic is its sample at x
 * exactly, and the cubic over rows of those integers is cubic8's */
inline void bicubic_col(const cv::Mat &s, int c, int x, int y, double dy, uint8_t *o)
{
    const int H = s.rows;
    const uint8_t *rows[4];
    rows[0] = s.ptr<uint8_t>(clampi(y, H)) + (size_t)x * c;
    for (int j = 1; j < 4; j++) /* outside: the row before */
        rows[j] = y + j >= 0 && y + j < H ? s.ptr<uint8_t>(y + j) + (size_t)x * c : rows[j - 1];
    for (int k = 0; k < c; k++) {
        const double t = cubic8(rows[0][k], rows[1][k], rows[2][k], rows[3][k], dy);
        o[k] = t <= 0.0 ? 0 : (t >= 255.0 ? 255 : (uint8_t)t);
    }
}

}  // namespace

namespace fqi {

void pil_affine(const cv::Mat &src, cv::Mat &dst, const double a[6], bool bicubic, const uint8_t fill[3])
{
    const int H = src.rows, W = src.cols, c = src.channels();
#if defined(__x86_64__) || defined(__i386__) /* the AVX2 copy exists on x86 only */
    if (c == 3 && fq_cpu_has(FQ_CPU_AVX2)) { /* the same bytes (fq_image_pil_affine_avx2.cpp) */
        pil_affine_rgb_avx2(src, dst, a, bicubic, fill);
        return;
    }
#endif
    for (int y = 0; y < dst.rows; y++) {
        uint8_t *o = dst.ptr<uint8_t>(y);
        const double yc = y + 0.5;
        for (int x = 0; x < dst.cols; x++, o += c) {
            const double xc = x + 0.5;
            double xin = a[0] * xc + a[1] * yc + a[2];
            double yin = a[3] * xc + a[4] * yc + a[5];
            if (!(xin >= 0.0 && xin < W && yin >= 0.0 && yin < H)) { /* NaN: outside too */
                for (int k = 0; k < c; k++)
                    o[k] = fill[k];
                continue;
            }
            xin -= 0.5, yin -= 0.5;
            int xi = pil_floor(xin), yi = pil_floor(yin);
            const double dx = xin - xi, dy = yin - yi;
            if (!bicubic)
                bilinear_px(src, c, xi, yi, dx, dy, o);
            else if (dy == 0.0) /* ShearX, TranslateX: every pixel */
                bicubic_row(src, c, xi - 1, yi, dx, o);
            else if (dx == 0.0) /* ShearY, TranslateY */
                bicubic_col(src, c, xi, yi - 1, dy, o);
            else
                bicubic_px(src, c, xi - 1, yi - 1, dx, dy, o);
        }
    }
}

}  // namespace fqi
