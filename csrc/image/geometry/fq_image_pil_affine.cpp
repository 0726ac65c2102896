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
 * d), clamped to [0, 255] and truncated.  Scalar; pure function of its arguments. */
#include "image/internal/fq_image_aug.h"

#include <cmath>

namespace {

inline int pil_floor(double v) { return v < 0.0 ? (int)std::floor(v) : (int)v; }
inline int clampi(int v, int n) { return v < 0 ? 0 : (v < n ? v : n - 1); }

inline double lerp(double a, double b, double d) { return a + (b - a) * d; }

inline double cubic(double v1, double v2, double v3, double v4, double d)
{
    const double p1 = v2;
    const double p2 = -v1 + v3;
    const double p3 = 2 * (v1 - v2) + v3 - v4;
    const double p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
}

/* one channel k of the c-channel source at (x, y) .. bilinear; x, y the floors */
inline double bilinear_at(const cv::Mat &s, int c, int k, int x, int y, double dx, double dy)
{
    const int W = s.cols, H = s.rows;
    const int x0 = clampi(x, W) * c + k, x1 = clampi(x + 1, W) * c + k;
    const uint8_t *r = s.ptr<uint8_t>(clampi(y, H));
    const double v1 = lerp(r[x0], r[x1], dx);
    double v2 = v1;
    if (y + 1 >= 0 && y + 1 < H) {
        r = s.ptr<uint8_t>(y + 1);
        v2 = lerp(r[x0], r[x1], dx);
    }
    return lerp(v1, v2, dy);
}

inline double bicubic_at(const cv::Mat &s, int c, int k, int x, int y, double dx, double dy)
{
    const int W = s.cols, H = s.rows;
    int xs[4];
    for (int j = 0; j < 4; j++)
        xs[j] = clampi(x + j, W) * c + k;
    const uint8_t *r = s.ptr<uint8_t>(clampi(y, H));
    double v[4];
    v[0] = cubic(r[xs[0]], r[xs[1]], r[xs[2]], r[xs[3]], dx);
    for (int j = 1; j < 4; j++) {
        if (y + j >= 0 && y + j < H) {
            r = s.ptr<uint8_t>(y + j);
            v[j] = cubic(r[xs[0]], r[xs[1]], r[xs[2]], r[xs[3]], dx);
        } else {
            v[j] = v[j - 1];
        }
    }
    return cubic(v[0], v[1], v[2], v[3], dy);
}

}  // namespace

namespace fqi {

void pil_affine(const cv::Mat &src, cv::Mat &dst, const double a[6], bool bicubic, const uint8_t fill[3])
{
    const int H = src.rows, W = src.cols, c = src.channels();
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
            if (!bicubic) {
                for (int k = 0; k < c; k++)
                    o[k] = (uint8_t)bilinear_at(src, c, k, xi, yi, dx, dy);
            } else {
                for (int k = 0; k < c; k++) {
                    const double v = bicubic_at(src, c, k, xi - 1, yi - 1, dx, dy);
                    o[k] = v <= 0.0 ? 0 : (v >= 255.0 ? 255 : (uint8_t)v);
                }
            }
        }
    }
}

}  // namespace fqi
