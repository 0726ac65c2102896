/* fq_image_pil_affine_avx2.cpp - Pillow's affine bilinear / bicubic sampler of
 * fq_image_pil_affine.cpp for 3-channel images with AVX2: the same double operations in
 * the same order, the three channels as three of four lanes (IEEE double addition,
 * subtraction and multiplication round the same in a vector lane; no FMA: the target is
 * "avx2" alone, and each product and sum is its own instruction), so the same bytes.
 * The coordinates are the scalar code's expressions; the integer cubic coefficients are
 * computed in int32 lanes (exact) and converted, as the scalar code converts them.  The
 * scalar code's one-axis shortcuts (a fraction of 0: one row or one column) are kept.
 * Compiled with target("avx2"), checking no CPU feature (core/fq_cpu.h): pil_affine calls
 * it only after fq_cpu_has(FQ_CPU_AVX2). */
#if defined(__x86_64__) || defined(__i386__) /* an AVX2 kernel: nothing to compile on other architectures */
#include "image/internal/fq_image_aug.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#define FQ_AVX2 __attribute__((target("avx2")))

namespace {

inline int clampi(int v, int n) { return v < 0 ? 0 : (v < n ? v : n - 1); }

/* the 3 bytes at p as int32 lanes 0..2 (lane 3: 0); never reads past p[2] */
FQ_AVX2 inline __m128i px3(const uint8_t *p)
{
    return _mm_setr_epi32(p[0], p[1], p[2], 0);
}

/* the 3 bytes at p as int32 lanes 0..2 from a 4-byte load; only where p[3] is still in the
 * image's memory (not the last column) */
FQ_AVX2 inline __m128i px4(const uint8_t *p)
{
    int32_t u;
    std::memcpy(&u, p, 4);
    return _mm_cvtepu8_epi32(_mm_cvtsi32_si128(u)); /* lane 3: the next byte, never stored */
}

/* pixel j of the 16 bytes at a row's pixel x (x + j's 3 bytes as int32 lanes 0..2) */
FQ_AVX2 inline __m128i pxj(__m128i row, int j)
{
    const char z = (char)-128, b = (char)(3 * j);
    return _mm_shuffle_epi8(row, _mm_setr_epi8(b, z, z, z, (char)(b + 1), z, z, z, (char)(b + 2), z, z, z, z, z, z, z));
}

/* v2 + d (p2 + d (p3 + d p4)) of four integer samples, the coefficients exact in int32 */
FQ_AVX2 inline __m256d cubic8(__m128i v1, __m128i v2, __m128i v3, __m128i v4, __m256d d)
{
    const __m128i p2 = _mm_sub_epi32(v3, v1);
    const __m128i p3 = _mm_sub_epi32(_mm_add_epi32(_mm_slli_epi32(_mm_sub_epi32(v1, v2), 1), v3), v4);
    const __m128i p4 = _mm_add_epi32(_mm_sub_epi32(_mm_sub_epi32(v2, v1), v3), v4);
    __m256d t = _mm256_mul_pd(d, _mm256_cvtepi32_pd(p4));
    t = _mm256_mul_pd(d, _mm256_add_pd(_mm256_cvtepi32_pd(p3), t));
    t = _mm256_mul_pd(d, _mm256_add_pd(_mm256_cvtepi32_pd(p2), t));
    return _mm256_add_pd(_mm256_cvtepi32_pd(v2), t);
}

/* the scalar cubic of doubles: p2 = -v1 + v3, p3 = 2 (v1 - v2) + v3 - v4,
 * p4 = -v1 + v2 - v3 + v4, left to right (-a + b is b - a exactly) */
FQ_AVX2 inline __m256d cubic(__m256d v1, __m256d v2, __m256d v3, __m256d v4, __m256d d)
{
    const __m256d p2 = _mm256_sub_pd(v3, v1);
    const __m256d v12 = _mm256_sub_pd(v1, v2);
    const __m256d p3 = _mm256_sub_pd(_mm256_add_pd(_mm256_add_pd(v12, v12), v3), v4);
    const __m256d p4 = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(v2, v1), v3), v4);
    __m256d t = _mm256_mul_pd(d, p4);
    t = _mm256_mul_pd(d, _mm256_add_pd(p3, t));
    t = _mm256_mul_pd(d, _mm256_add_pd(p2, t));
    return _mm256_add_pd(v2, t);
}

/* truncated to int32 lanes, the low 3 stored as bytes (values in [0, 255]) */
FQ_AVX2 inline void store3(__m256d v, uint8_t *o)
{
    const __m128i i = _mm256_cvttpd_epi32(v);
    const __m128i b = _mm_packus_epi16(_mm_packs_epi32(i, i), i);
    const uint32_t u = (uint32_t)_mm_cvtsi128_si32(b);
    o[0] = (uint8_t)u, o[1] = (uint8_t)(u >> 8), o[2] = (uint8_t)(u >> 16);
}

FQ_AVX2 inline __m256d lerp(__m256d a, __m256d b, __m256d d)
{
    return _mm256_add_pd(a, _mm256_mul_pd(_mm256_sub_pd(b, a), d));
}

FQ_AVX2 void bilinear_px(const cv::Mat &s, int x, int y, double dx, double dy, uint8_t *o)
{
    const int W = s.cols, H = s.rows;
    const int x0 = clampi(x, W) * 3, x1 = clampi(x + 1, W) * 3;
    const uint8_t *r0 = s.ptr<uint8_t>(clampi(y, H));
    const uint8_t *r1 = y + 1 >= 0 && y + 1 < H ? s.ptr<uint8_t>(y + 1) : nullptr;
    const __m256d vx = _mm256_set1_pd(dx);
    __m256d v1, v2;
    if (x >= 0 && (size_t)x * 3 + 8 <= (size_t)W * 3) { /* both pixels in one 8-byte load */
        const __m128i q0 = _mm_loadl_epi64((const __m128i *)(r0 + x0));
        v1 = lerp(_mm256_cvtepi32_pd(pxj(q0, 0)), _mm256_cvtepi32_pd(pxj(q0, 1)), vx);
        if (r1) {
            const __m128i q1 = _mm_loadl_epi64((const __m128i *)(r1 + x0));
            v2 = lerp(_mm256_cvtepi32_pd(pxj(q1, 0)), _mm256_cvtepi32_pd(pxj(q1, 1)), vx);
        } else {
            v2 = v1;
        }
    } else {
        v1 = lerp(_mm256_cvtepi32_pd(px3(r0 + x0)), _mm256_cvtepi32_pd(px3(r0 + x1)), vx);
        v2 = r1 ? lerp(_mm256_cvtepi32_pd(px3(r1 + x0)), _mm256_cvtepi32_pd(px3(r1 + x1)), vx) : v1;
    }
    store3(lerp(v1, v2, _mm256_set1_pd(dy)), o);
}

FQ_AVX2 void bicubic_px(const cv::Mat &s, int x, int y, double dx, double dy, uint8_t *o)
{
    const int W = s.cols, H = s.rows;
    int xs[4];
    for (int j = 0; j < 4; j++)
        xs[j] = clampi(x + j, W) * 3;
    const __m256d vx = _mm256_set1_pd(dx);
    /* row 0 clamped; a later row outside the image repeats the one before; the 4-byte loads
     * stay in the image but at the last column */
    const bool edge = xs[3] == (W - 1) * 3;
    /* the 4 pixels side by side and 16 bytes readable in the row: one load */
    const bool inside = x >= 0 && (size_t)x * 3 + 16 <= (size_t)W * 3;
    const uint8_t *r = s.ptr<uint8_t>(clampi(y, H));
    __m256d v[4];
    for (int j = 0; j < 4; j++) {
        if (j > 0)
            r = y + j >= 0 && y + j < H ? s.ptr<uint8_t>(y + j) : nullptr;
        if (!r) {
            v[j] = v[j - 1];
        } else if (inside) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(r + xs[0]));
            v[j] = cubic8(pxj(q, 0), pxj(q, 1), pxj(q, 2), pxj(q, 3), vx);
        } else if (!edge) {
            v[j] = cubic8(px4(r + xs[0]), px4(r + xs[1]), px4(r + xs[2]), px4(r + xs[3]), vx);
        } else {
            v[j] = cubic8(px3(r + xs[0]), px3(r + xs[1]), px3(r + xs[2]), px3(r + xs[3]), vx);
        }
    }
    const __m256d t = cubic(v[0], v[1], v[2], v[3], _mm256_set1_pd(dy));
    /* t <= 0 -> 0, t >= 255 -> 255, else truncated: the same after clamping */
    store3(_mm256_min_pd(_mm256_max_pd(t, _mm256_setzero_pd()), _mm256_set1_pd(255.0)), o);
}

/* dy 0 (row y in the image): the cubic over rows is row y's sample exactly (as the scalar
 * bicubic_row) */
FQ_AVX2 void bicubic_row(const cv::Mat &s, int x, int y, double dx, uint8_t *o)
{
    const int W = s.cols;
    const uint8_t *r = s.ptr<uint8_t>(y);
    const __m256d vx = _mm256_set1_pd(dx);
    __m256d v;
    if (x >= 0 && (size_t)x * 3 + 16 <= (size_t)W * 3) {
        const __m128i q = _mm_loadu_si128((const __m128i *)(r + (size_t)x * 3));
        v = cubic8(pxj(q, 0), pxj(q, 1), pxj(q, 2), pxj(q, 3), vx);
    } else {
        int xs[4];
        for (int j = 0; j < 4; j++)
            xs[j] = clampi(x + j, W) * 3;
        if (xs[3] != (W - 1) * 3)
            v = cubic8(px4(r + xs[0]), px4(r + xs[1]), px4(r + xs[2]), px4(r + xs[3]), vx);
        else
            v = cubic8(px3(r + xs[0]), px3(r + xs[1]), px3(r + xs[2]), px3(r + xs[3]), vx);
    }
    store3(_mm256_min_pd(_mm256_max_pd(v, _mm256_setzero_pd()), _mm256_set1_pd(255.0)), o);
}

/* dx 0 (column x in the image): the cubic over rows of the column's samples (as the scalar
 * bicubic_col) */
FQ_AVX2 void bicubic_col(const cv::Mat &s, int x, int y, double dy, uint8_t *o)
{
    const int W = s.cols, H = s.rows;
    const size_t off = (size_t)x * 3;
    const uint8_t *r[4];
    r[0] = s.ptr<uint8_t>(clampi(y, H)) + off;
    for (int j = 1; j < 4; j++) /* outside: the row before */
        r[j] = y + j >= 0 && y + j < H ? s.ptr<uint8_t>(y + j) + off : r[j - 1];
    __m256d v;
    if (x + 1 < W)
        v = cubic8(px4(r[0]), px4(r[1]), px4(r[2]), px4(r[3]), _mm256_set1_pd(dy));
    else
        v = cubic8(px3(r[0]), px3(r[1]), px3(r[2]), px3(r[3]), _mm256_set1_pd(dy));
    store3(_mm256_min_pd(_mm256_max_pd(v, _mm256_setzero_pd()), _mm256_set1_pd(255.0)), o);
}

/* four pixels side by side in lanes: the 16 bytes at p[i] (pixel i's 4 taps, 3 bytes each)
 * -> per channel c the horizontal cubic of pixel i in lane i (cubic8 lane-wise: each lane
 * the scalar code's operations on its own samples and fraction) */
FQ_AVX2 inline void row_cubic4(const uint8_t *const p[4], __m256d dx, __m256d out[3])
{
    const char z = (char)-128;
    const __m128i m = _mm_setr_epi8(0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11, z, z, z, z);
    __m128i q[4];
    for (int i = 0; i < 4; i++) /* dword c: channel c of taps 0..3 */
        q[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p[i]), m);
    const __m128i t0 = _mm_unpacklo_epi32(q[0], q[1]), t1 = _mm_unpacklo_epi32(q[2], q[3]);
    const __m128i t2 = _mm_unpackhi_epi32(q[0], q[1]), t3 = _mm_unpackhi_epi32(q[2], q[3]);
    const __m128i ch[3] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1), _mm_unpacklo_epi64(t2, t3)};
    const __m128i m0 = _mm_setr_epi8(0, z, z, z, 4, z, z, z, 8, z, z, z, 12, z, z, z);
    const __m128i m1 = _mm_setr_epi8(1, z, z, z, 5, z, z, z, 9, z, z, z, 13, z, z, z);
    const __m128i m2 = _mm_setr_epi8(2, z, z, z, 6, z, z, z, 10, z, z, z, 14, z, z, z);
    const __m128i m3 = _mm_setr_epi8(3, z, z, z, 7, z, z, z, 11, z, z, z, 15, z, z, z);
    for (int c = 0; c < 3; c++) /* tap t of the 4 pixels as int32 lanes */
        out[c] = cubic8(_mm_shuffle_epi8(ch[c], m0), _mm_shuffle_epi8(ch[c], m1), _mm_shuffle_epi8(ch[c], m2),
                        _mm_shuffle_epi8(ch[c], m3), dx);
}

/* channels c of 4 pixels (lanes), clamped to [0, 255] and truncated -> 12 bytes RGBRGB..
 * at o; `wide`: 16 bytes may be written (the last 4 are the next pixels', written later) */
FQ_AVX2 inline void store4px(const __m256d v[3], uint8_t *o, bool wide)
{
    const __m256d lo = _mm256_setzero_pd(), hi = _mm256_set1_pd(255.0);
    __m128i c[3];
    for (int k = 0; k < 3; k++)
        c[k] = _mm256_cvttpd_epi32(_mm256_min_pd(_mm256_max_pd(v[k], lo), hi));
    const __m128i b = _mm_packus_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[2]));
    const char z = (char)-128;
    const __m128i rgb = _mm_shuffle_epi8(b, _mm_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, z, z, z, z));
    if (wide) {
        _mm_storeu_si128((__m128i *)o, rgb);
    } else {
        _mm_storel_epi64((__m128i *)o, rgb);
        const uint32_t u = (uint32_t)_mm_extract_epi32(rgb, 2);
        std::memcpy(o + 8, &u, 4);
    }
}

}  // namespace

namespace fqi {

FQ_AVX2 void pil_affine_rgb_avx2(const cv::Mat &src, cv::Mat &dst, const double a[6], bool bicubic,
                                 const uint8_t fill[3])
{
    const int H = src.rows, W = src.cols, OW = dst.cols;
    const size_t step = src.step[0];
    const uint8_t *data = src.ptr<uint8_t>(0);
    /* one output row's source points, 4 at a time: the scalar code's double expressions
     * (a0 xc + a1 yc + a2 left to right, xc = x + 0.5 exact), its bounds test, then floor and
     * fraction of the point less half a pixel (the scalar pil_floor is a floor; xin - (double)floor is
     * the scalar xin - xi) */
    const size_t n4 = ((size_t)OW + 3) & ~(size_t)3;
    thread_local std::vector<double> fbuf;
    thread_local std::vector<int32_t> ibuf;
    if (fbuf.size() < 2 * n4)
        fbuf.resize(2 * n4);
    if (ibuf.size() < 3 * n4)
        ibuf.resize(3 * n4);
    thread_local std::vector<uint8_t> bbuf; /* per block of 4: the lanes path applies */
    if (bbuf.size() < n4 / 4)
        bbuf.resize(n4 / 4);
    uint8_t *blk = bbuf.data();
    double *fdx = fbuf.data(), *fdy = fdx + n4;
    int32_t *ixi = ibuf.data(), *iyi = ixi + n4, *iin = iyi + n4;
    const __m256d A0 = _mm256_set1_pd(a[0]), A2 = _mm256_set1_pd(a[2]), A3 = _mm256_set1_pd(a[3]),
                  A5 = _mm256_set1_pd(a[5]), WD = _mm256_set1_pd((double)W), HD = _mm256_set1_pd((double)H),
                  HALF = _mm256_set1_pd(0.5), Z = _mm256_setzero_pd(), OFF = _mm256_setr_pd(0.5, 1.5, 2.5, 3.5),
                  ONE = _mm256_set1_pd(1.0), WM5 = _mm256_set1_pd((double)W - 5.0);
    for (int y = 0; y < dst.rows; y++) {
        uint8_t *o = dst.ptr<uint8_t>(y);
        const double yc = y + 0.5;
        const __m256d C1 = _mm256_set1_pd(a[1] * yc), C4 = _mm256_set1_pd(a[4] * yc);
        for (size_t x = 0; x < n4; x += 4) {
            const __m256d xc = _mm256_add_pd(_mm256_set1_pd((double)x), OFF);
            __m256d xin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(A0, xc), C1), A2);
            __m256d yin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(A3, xc), C4), A5);
            const __m256d in = _mm256_and_pd(
                _mm256_and_pd(_mm256_cmp_pd(xin, Z, _CMP_GE_OQ), _mm256_cmp_pd(xin, WD, _CMP_LT_OQ)),
                _mm256_and_pd(_mm256_cmp_pd(yin, Z, _CMP_GE_OQ), _mm256_cmp_pd(yin, HD, _CMP_LT_OQ)));
            xin = _mm256_sub_pd(xin, HALF), yin = _mm256_sub_pd(yin, HALF);
            const __m256d fx = _mm256_and_pd(_mm256_floor_pd(xin), in), fy = _mm256_and_pd(_mm256_floor_pd(yin), in);
            _mm256_storeu_pd(fdx + x, _mm256_sub_pd(xin, fx));
            _mm256_storeu_pd(fdy + x, _mm256_sub_pd(yin, fy));
            _mm_storeu_si128((__m128i *)(ixi + x), _mm256_cvttpd_epi32(fx)); /* outside: 0, unused */
            _mm_storeu_si128((__m128i *)(iyi + x), _mm256_cvttpd_epi32(fy));
            const __m256i m64 = _mm256_castpd_si256(in);
            _mm_storeu_si128((__m128i *)(iin + x),
                             _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(m64, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0))));
            /* the block's 4 pixels inside, every dy 0, 1 <= xi <= W - 5 */
            const __m256d row = _mm256_and_pd(_mm256_and_pd(in, _mm256_cmp_pd(_mm256_sub_pd(yin, fy), Z, _CMP_EQ_OQ)),
                                              _mm256_and_pd(_mm256_cmp_pd(fx, ONE, _CMP_GE_OQ), _mm256_cmp_pd(fx, WM5, _CMP_LE_OQ)));
            blk[x >> 2] = x + 4 <= (size_t)OW && _mm256_movemask_pd(row) == 15;
        }
        for (int x = 0; x < OW; x++, o += 3) {
            /* bicubic, a block of 4 pixels inside whose dy are all 0 (ShearX, TranslateX) and
             * whose 4 taps are one 16-byte load (1 <= xi <= W - 5): lanes = pixels */
            if (bicubic && (x & 3) == 0 && blk[x >> 2]) {
                const uint8_t *p[4];
                for (int i = 0; i < 4; i++)
                    p[i] = data + (size_t)iyi[x + i] * step + (size_t)(ixi[x + i] - 1) * 3;
                __m256d v[3];
                row_cubic4(p, _mm256_loadu_pd(fdx + x), v);
                store4px(v, o, x + 6 <= OW);
                x += 3, o += 9; /* and the loop's own step */
                continue;
            }
            if (!iin[x]) { /* NaN: outside too */
                o[0] = fill[0], o[1] = fill[1], o[2] = fill[2];
                continue;
            }
            const int xi = ixi[x], yi = iyi[x];
            const double dx = fdx[x], dy = fdy[x];
            if (!bicubic) {
                bilinear_px(src, xi, yi, dx, dy, o);
            } else if (dy == 0.0) { /* ShearX, TranslateX */
                bicubic_row(src, xi - 1, yi, dx, o);
            } else if (dx == 0.0) { /* ShearY, TranslateY */
                if (yi >= 1 && yi + 2 < H && xi + 1 < W) { /* 4 rows inside, a 4-byte load in each */
                    const uint8_t *r = data + (size_t)(yi - 1) * step + (size_t)xi * 3;
                    const __m256d t = cubic8(px4(r), px4(r + step), px4(r + 2 * step), px4(r + 3 * step),
                                             _mm256_set1_pd(dy));
                    store3(_mm256_min_pd(_mm256_max_pd(t, _mm256_setzero_pd()), _mm256_set1_pd(255.0)), o);
                } else {
                    bicubic_col(src, xi, yi - 1, dy, o);
                }
            } else if (xi >= 1 && (size_t)(xi - 1) * 3 + 16 <= (size_t)W * 3 && yi >= 1 && yi + 2 < H) {
                /* the 4 x 4 block inside the image, each row's 4 pixels in one 16-byte load */
                const uint8_t *r = data + (size_t)(yi - 1) * step + (size_t)(xi - 1) * 3;
                const __m256d vx = _mm256_set1_pd(dx);
                __m256d v[4];
                for (int j = 0; j < 4; j++, r += step) {
                    const __m128i q = _mm_loadu_si128((const __m128i *)r);
                    v[j] = cubic8(pxj(q, 0), pxj(q, 1), pxj(q, 2), pxj(q, 3), vx);
                }
                const __m256d t = cubic(v[0], v[1], v[2], v[3], _mm256_set1_pd(dy));
                store3(_mm256_min_pd(_mm256_max_pd(t, _mm256_setzero_pd()), _mm256_set1_pd(255.0)), o);
            } else {
                bicubic_px(src, xi - 1, yi - 1, dx, dy, o);
            }
        }
    }
}

}  // namespace fqi
#endif /* x86 */
