/* fq_image_aug_simd.cpp - AVX2 forms of the costly uint8 augmentation primitives (the
 * nearest-neighbour warp of Rotate / ShearX/Y / TranslateX/Y, Sharpness, Color and
 * Contrast's grey mean; fq_image_aug.cpp and fq_image_aug_geom.cpp hold the scalar forms,
 * which stay the definition; and the Pillow forms of timm's Sharpness, Color and Contrast's
 * grey sum, whose scalar forms are in fq_image_aug_timm_ops.cpp).
 *
 * Exactness: every lane runs the scalar form's IEEE operations in the same order and
 * precision (float products and sums; fma_exact as a double product plus a double sum,
 * then one rounding to float; round_even as the add / subtract of 1.5 * 2^23; floor; the
 * clamp and truncation), so each output byte equals the scalar one.  The integer parts
 * are exact by construction (Sharpness's round(s / 13) as a 16-bit multiply-high, checked
 * for every s the op can produce by a static_assert below).  tests/image/test_aug_simd.py
 * compares the two forms (set_simd_write(False) turns these kernels off too).
 *
 * Dispatch (core/fq_cpu.h): the kernels (*_avx2, lut_vbmi) are compiled for their ISA
 * and check nothing; the entry points at the end of the file (geom_warp_simd, ...),
 * compiled for the baseline, call them only when fq_cpu_has() says the CPU has the
 * extension (and FASTQ_CPU does not mask it) and the SIMD switch (fq_img_simd_write_set)
 * is on; they return false otherwise and the callers run the scalar form.  Pure
 * functions of their arguments. */
#include "image/internal/fq_image_aug.h"

#include <cstring>

#include "core/fq_cpu.h"
#include "image/color/fq_image_aug_timm.h"
#include "image/fq_image_prepare.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FQ_AUG_X86 1
/* LLVM 18+ (zig 0.13's clang, which builds the manylinux wheel) splits 512-bit vectors
 * out of AVX-512 into the "evex512" feature and refuses __m512i without it; GCC 12 and
 * clang 14 do not know that feature name. */
#if defined(__clang__) && __clang_major__ >= 18
#define FQ_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,evex512")))
#else
#define FQ_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#endif
#endif

namespace fqi {

namespace {

/* floor((s + 6) * 5042 / 2^16) == floor((s + 6) / 13) == round(s / 13) (13 odd: no tie)
 * for every 0 <= s <= 13 * 255 */
constexpr bool mulhi13_exact_all()
{
    for (int s = 0; s <= 13 * 255; s++)
        if (((s + 6) * 5042) >> 16 != (s + 6) / 13 || (2 * s + 13) / 26 != (s + 6) / 13)
            return false;
    return true;
}
static_assert(mulhi13_exact_all(), "Sharpness: (s + 6) * 5042 >> 16 must be round(s / 13)");

}  // namespace

#ifdef FQ_AUG_X86

bool aug_simd_ok() { return fq_img_simd_write_enabled() && fq_cpu_has(FQ_CPU_AVX2); }

namespace {

/* fma_exact on 8 lanes: (float)((double)a * (double)b + (double)c) */
__attribute__((target("avx2"))) inline __m256 fma_exact8(__m256 a, __m256d b, __m256 c)
{
    __m256d lo = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), b),
                               _mm256_cvtps_pd(_mm256_castps256_ps128(c)));
    __m256d hi = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), b),
                               _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)));
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

/* round_even of fq_image_aug_geom.cpp on 8 lanes (|v| >= 2^22 and NaN: unchanged) */
__attribute__((target("avx2"))) inline __m256 round_even8(__m256 v)
{
    const __m256 big = _mm256_set1_ps(12582912.f);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 r = _mm256_sub_ps(_mm256_add_ps(v, big), big);
    __m256 small = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), _mm256_set1_ps(4194304.f), _CMP_LT_OQ);
    return _mm256_blendv_ps(v, r, small);
}

/* clamp to [0, 255] and truncate 8 floats (never NaN here) to int32 */
__attribute__((target("avx2"))) inline __m256i clamp_trunc8(__m256 v)
{
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.f));
    return _mm256_cvttps_epi32(v);
}

/* 16 int32 in 0..255 (elements 0..7 in a, 8..15 in b) -> 16 bytes */
__attribute__((target("avx2"))) inline __m128i pack16(__m256i a, __m256i b)
{
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

/* 16 bytes -> 16 uint16 */
__attribute__((target("avx2"))) inline __m256i ld(const uint8_t *p)
{
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

/* 8 bytes -> 8 floats */
__attribute__((target("avx2"))) inline __m256 load8f(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))));
}

/* 8 RGB pixels as three interleaved float vectors (s0 = elements 0..7, ...) -> planar */
__attribute__((target("avx2"))) inline void deinterleave8(__m256 s0, __m256 s1, __m256 s2, __m256 &r, __m256 &g,
                                                          __m256 &b)
{
    const __m256i r0 = _mm256_setr_epi32(0, 3, 6, 0, 0, 0, 0, 0), r1 = _mm256_setr_epi32(0, 0, 0, 1, 4, 7, 0, 0),
                  r2 = _mm256_setr_epi32(0, 0, 0, 0, 0, 0, 2, 5);
    const __m256i g0 = _mm256_setr_epi32(1, 4, 7, 0, 0, 0, 0, 0), g1 = _mm256_setr_epi32(0, 0, 0, 2, 5, 0, 0, 0),
                  g2 = _mm256_setr_epi32(0, 0, 0, 0, 0, 0, 3, 6);
    const __m256i b0 = _mm256_setr_epi32(2, 5, 0, 0, 0, 0, 0, 0), b1 = _mm256_setr_epi32(0, 0, 0, 3, 6, 0, 0, 0),
                  b2 = _mm256_setr_epi32(0, 0, 0, 0, 0, 1, 4, 7);
    r = _mm256_blend_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(s0, r0), _mm256_permutevar8x32_ps(s1, r1), 0x38),
                        _mm256_permutevar8x32_ps(s2, r2), 0xC0);
    g = _mm256_blend_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(s0, g0), _mm256_permutevar8x32_ps(s1, g1), 0x18),
                        _mm256_permutevar8x32_ps(s2, g2), 0xE0);
    b = _mm256_blend_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(s0, b0), _mm256_permutevar8x32_ps(s1, b1), 0x1C),
                        _mm256_permutevar8x32_ps(s2, b2), 0xE0);
}

/* gray_floor of fq_image_aug.cpp: floor(fma(b, .114, fma(g, .587, r * .2989))) */
__attribute__((target("avx2"))) inline __m256 gray8(__m256 r, __m256 g, __m256 b)
{
    const __m256d kg = _mm256_set1_pd((double)0.587f), kb = _mm256_set1_pd((double)0.114f);
    __m256 t = fma_exact8(g, kg, _mm256_mul_ps(r, _mm256_set1_ps(0.2989f)));
    return _mm256_floor_ps(fma_exact8(b, kb, t));
}

/* geom_exec's loop (fq_image_aug_geom.cpp) for 3 channels: per output pixel the source
 * pixel found by the same float operations, read with a masked 32-bit gather (fill where
 * outside).  The 4-byte read of the image's very last pixel would pass its end: that
 * pixel is taken from a register instead. */
__attribute__((target("avx2"))) void geom_warp_avx2(const cv::Mat &src, cv::Mat &dst, const float t[6], bool hf,
                                                    bool vf, const uint8_t fill[3])
{
    const int H = src.rows, W = src.cols;
    const float sw = (float)W * 0.5f, ow = ((float)W - 1.f) * 0.5f, sh = (float)H * 0.5f, oh = ((float)H - 1.f) * 0.5f;
    const int step = (int)src.step[0];
    const uint8_t *base = src.ptr<uint8_t>(0);
    const int last = (H - 1) * step + (W - 1) * 3;
    const uint8_t *lp = base + last;
    const __m256i lastv = _mm256_set1_epi32(lp[0] | lp[1] << 8 | lp[2] << 16);
    const __m256i fillv = _mm256_set1_epi32(fill[0] | fill[1] << 8 | fill[2] << 16);
    const __m256 T0 = _mm256_set1_ps(t[0]), T2 = _mm256_set1_ps(t[2]), T3 = _mm256_set1_ps(t[3]),
                 T5 = _mm256_set1_ps(t[5]), OW = _mm256_set1_ps(ow), OH = _mm256_set1_ps(oh),
                 WF = _mm256_set1_ps((float)W), HF = _mm256_set1_ps((float)H), Z = _mm256_setzero_ps();
    const __m256d SWd = _mm256_set1_pd((double)sw), SHd = _mm256_set1_pd((double)sh);
    const __m256 OWs = OW, OHs = OH;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), STEP = _mm256_set1_epi32(step),
                  THREE = _mm256_set1_epi32(3), LAST = _mm256_set1_epi32(last),
                  WM1 = _mm256_set1_epi32(W - 1), HM1 = _mm256_set1_epi32(H - 1);
    const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (int y = 0; y < H; y++) {
        const float yg = (float)y - oh;
        const __m256 C1 = _mm256_set1_ps(yg * t[1]), C4 = _mm256_set1_ps(yg * t[4]);
        uint8_t *o = dst.ptr<uint8_t>(y);
        int x = 0;
        for (; x + 8 <= W; x += 8) {
            __m256 xg = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32(x), lanes)), OW);
            __m256 gx = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(xg, T0), C1), T2);
            __m256 gy = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(xg, T3), C4), T5);
            __m256 ix = round_even8(fma_exact8(gx, SWd, OWs)), iy = round_even8(fma_exact8(gy, SHd, OHs));
            __m256 in = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(ix, Z, _CMP_GE_OQ), _mm256_cmp_ps(ix, WF, _CMP_LT_OQ)),
                                      _mm256_and_ps(_mm256_cmp_ps(iy, Z, _CMP_GE_OQ), _mm256_cmp_ps(iy, HF, _CMP_LT_OQ)));
            __m256i inm = _mm256_castps_si256(in);
            __m256i sx = _mm256_cvttps_epi32(_mm256_and_ps(ix, in)), sy = _mm256_cvttps_epi32(_mm256_and_ps(iy, in));
            if (hf)
                sx = _mm256_sub_epi32(WM1, sx);
            if (vf)
                sy = _mm256_sub_epi32(HM1, sy);
            __m256i off = _mm256_and_si256(
                _mm256_add_epi32(_mm256_mullo_epi32(sy, STEP), _mm256_mullo_epi32(sx, THREE)), inm);
            __m256i at_last = _mm256_and_si256(_mm256_cmpeq_epi32(off, LAST), inm);
            __m256i v = _mm256_mask_i32gather_epi32(fillv, reinterpret_cast<const int *>(base), off,
                                                    _mm256_andnot_si256(at_last, inm), 1);
            v = _mm256_blendv_epi8(v, lastv, at_last);
            __m128i a = _mm_shuffle_epi8(_mm256_castsi256_si128(v), pack);
            __m128i b = _mm_shuffle_epi8(_mm256_extracti128_si256(v, 1), pack);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o + 3 * x), a); /* bytes 12..15 rewritten next */
            std::memcpy(o + 3 * x + 12, &b, 12);
        }
        for (; x < W; x++)
            geom_pixel(src, o + 3 * x, x, y, t, hf, vf, fill);
    }
}

/* sharpness_exec's interior rows (fq_image_aug.cpp): dst row y, elements [c, (W-1) c) */
__attribute__((target("avx2"))) void sharpness_avx2(const cv::Mat &src, cv::Mat &dst, float f1)
{
    const int H = src.rows, c = src.channels(), n = (src.cols - 1) * c;
    const __m256d F1 = _mm256_set1_pd((double)f1);
    const __m256i K6 = _mm256_set1_epi16(6), K13 = _mm256_set1_epi16(5042);
    for (int y = 1; y < H - 1; y++) {
        const uint8_t *u = src.ptr<uint8_t>(y - 1), *m = src.ptr<uint8_t>(y), *b = src.ptr<uint8_t>(y + 1);
        uint8_t *o = dst.ptr<uint8_t>(y);
        int i = c;
        for (; i + 16 <= n; i += 16) { /* reads [i - c, i + 16 + c): inside the rows */
            __m256i mc = ld(m + i);
            __m256i s = _mm256_add_epi16(_mm256_add_epi16(ld(u + i - c), ld(u + i)), _mm256_add_epi16(ld(u + i + c), ld(m + i - c)));
            s = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_add_epi16(ld(m + i + c), ld(b + i - c)),
                                                     _mm256_add_epi16(ld(b + i), ld(b + i + c))));
            s = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_slli_epi16(mc, 2), mc));
            __m256i bl = _mm256_mulhi_epu16(_mm256_add_epi16(s, K6), K13);
            __m256i d = _mm256_sub_epi16(bl, mc);
            __m256 d0 = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(d)));
            __m256 d1 = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(d, 1)));
            __m256 x0 = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(mc)));
            __m256 x1 = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(mc, 1)));
            __m128i r = pack16(clamp_trunc8(fma_exact8(d0, F1, x0)), clamp_trunc8(fma_exact8(d1, F1, x1)));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o + i), r);
        }
        for (; i < n; i++)
            o[i] = sharpness_value(u, m, b, i, c, f1);
    }
}

/* ---- timm's ops on Pillow's semantics (fq_image_aug_timm_ops.cpp's pil_enhance) ---- */

/* Image.blend(degenerate, image, a) of fq_image_aug_timm.h on 8 lanes: d + a (i - d) in
 * float32 (i - d an exact integer), then clamped and truncated (for a in [0, 1] the sum
 * lies in [0, 255] already, so the clamp changes nothing, as the scalar form skips it) */
__attribute__((target("avx2"))) inline __m256i pil_blend8(__m256 d, __m256 i, __m256 a)
{
    return clamp_trunc8(_mm256_add_ps(d, _mm256_mul_ps(a, _mm256_sub_ps(i, d))));
}

/* Pillow's RGB -> L of 8 pixels: (r 19595 + g 38470 + b 7471 + 2^15) >> 16; every partial
 * sum is an integer below 2^24, exact in float32, and the shift a floor of an exact
 * scaling by 2^-16 */
__attribute__((target("avx2"))) inline __m256 pil_gray8(__m256 r, __m256 g, __m256 b)
{
    __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(r, _mm256_set1_ps(19595.f)),
                                           _mm256_mul_ps(g, _mm256_set1_ps(38470.f))),
                             _mm256_mul_ps(b, _mm256_set1_ps(7471.f)));
    t = _mm256_add_ps(t, _mm256_set1_ps(32768.f));
    return _mm256_floor_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.f / 65536.f)));
}

/* pil_enhance's Sharpness, interior rows y in [1, H - 1), elements [c, (W - 1) c): Pillow's
 * SMOOTH (pil_smooth: the float32 products and sums in its order, + 0.5, clamped,
 * truncated), then the blend with the image */
__attribute__((target("avx2"))) void timm_sharpness_avx2(const cv::Mat &src, cv::Mat &dst, float a)
{
    const int H = src.rows, c = src.channels(), n = (src.cols - 1) * c;
    const __m256 k1 = _mm256_set1_ps((float)(1.0 / 13.0)), k5 = _mm256_set1_ps((float)(5.0 / 13.0)),
                 half = _mm256_set1_ps(0.5f), A = _mm256_set1_ps(a);
    for (int y = 1; y < H - 1; y++) {
        const uint8_t *u = src.ptr<uint8_t>(y - 1), *m = src.ptr<uint8_t>(y), *b = src.ptr<uint8_t>(y + 1);
        uint8_t *o = dst.ptr<uint8_t>(y);
        int i = c;
        for (; i + 16 <= n; i += 16) { /* reads [i - c, i + 16 + c): inside the rows */
            __m256i r[2];
            for (int h = 0; h < 2; h++) {
                const int j = i + 8 * h;
                const __m256 mc = load8f(m + j);
                __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(load8f(b + j - c), k1), _mm256_mul_ps(load8f(b + j), k1)),
                                         _mm256_mul_ps(load8f(b + j + c), k1));
                __m256 ss = _mm256_add_ps(half, t);
                t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(load8f(m + j - c), k1), _mm256_mul_ps(mc, k5)),
                                  _mm256_mul_ps(load8f(m + j + c), k1));
                ss = _mm256_add_ps(ss, t);
                t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(load8f(u + j - c), k1), _mm256_mul_ps(load8f(u + j), k1)),
                                  _mm256_mul_ps(load8f(u + j + c), k1));
                ss = _mm256_add_ps(ss, t);
                const __m256 sm = _mm256_cvtepi32_ps(clamp_trunc8(ss));
                r[h] = pil_blend8(sm, mc, A);
            }
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o + i), pack16(r[0], r[1]));
        }
        for (; i < n; i++)
            o[i] = timm::blend(timm::pil_smooth(u, m, b, i, c), m[i], a);
    }
}

/* ---- one grey-and-blend loop for both colour rules ----
 * A grey rule G: G::vec (8 pixels, float32 lanes holding integers) and G::pixel (one pixel).
 * A blend rule B: B::vec (grey, channel lanes -> int32 results) and B::pixel (one pixel). */

struct OpenCvGrey { /* gray_floor of fq_image_aug.cpp */
    __attribute__((target("avx2"))) static __m256 vec(__m256 r, __m256 g, __m256 b) { return gray8(r, g, b); }
    static int pixel(const uint8_t *p) { return (int)gray_value(p); } /* a floored integer in a float */
};

struct PillowGrey { /* Pillow's RGB -> L */
    __attribute__((target("avx2"))) static __m256 vec(__m256 r, __m256 g, __m256 b) { return pil_gray8(r, g, b); }
    static int pixel(const uint8_t *p) { return timm::pil_gray(p); }
};

struct TorchvisionBlend { /* color_exec's blend(s, grey, f, f1) */
    float f, f1;
    __attribute__((target("avx2"))) __m256i vec(__m256 gr, __m256 s) const
    {
        return clamp_trunc8(fma_exact8(gr, _mm256_set1_pd((double)f1), _mm256_mul_ps(s, _mm256_set1_ps(f))));
    }
    void pixel(const uint8_t *s, uint8_t *o) const { color_pixel(s, o, f, f1); }
};

struct PillowBlend { /* Image.blend(grey, image, a) */
    float a;
    __attribute__((target("avx2"))) __m256i vec(__m256 gr, __m256 s) const
    {
        return pil_blend8(gr, s, _mm256_set1_ps(a));
    }
    void pixel(const uint8_t *s, uint8_t *o) const
    {
        const int gv = timm::pil_gray(s);
        for (int k = 0; k < 3; k++)
            o[k] = timm::blend(gv, s[k], a);
    }
};

/* every RGB pixel blended with its own grey (3 channels) */
template <class G, class B>
__attribute__((target("avx2"))) void grey_blend_rgb_avx2(const cv::Mat &src, cv::Mat &dst, const B &blend)
{
    const int W = src.cols;
    const __m256i e0 = _mm256_setr_epi32(0, 0, 0, 1, 1, 1, 2, 2), e1 = _mm256_setr_epi32(2, 3, 3, 3, 4, 4, 4, 5),
                  e2 = _mm256_setr_epi32(5, 5, 6, 6, 6, 7, 7, 7);
    for (int y = 0; y < src.rows; y++) {
        const uint8_t *s = src.ptr<uint8_t>(y);
        uint8_t *o = dst.ptr<uint8_t>(y);
        int x = 0;
        for (; x + 8 <= W; x += 8) {
            const uint8_t *p = s + 3 * x;
            __m256 s0 = load8f(p), s1 = load8f(p + 8), s2 = load8f(p + 16), r, g, b;
            deinterleave8(s0, s1, s2, r, g, b);
            const __m256 gr = G::vec(r, g, b);
            const __m256i o0 = blend.vec(_mm256_permutevar8x32_ps(gr, e0), s0);
            const __m256i o1 = blend.vec(_mm256_permutevar8x32_ps(gr, e1), s1);
            const __m256i o2 = blend.vec(_mm256_permutevar8x32_ps(gr, e2), s2);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(o + 3 * x), pack16(o0, o1));
            __m128i t = pack16(o2, o2);
            std::memcpy(o + 3 * x + 16, &t, 8);
        }
        for (; x < W; x++)
            blend.pixel(s + 3 * x, o + 3 * x);
    }
}

/* the sum of G's grey over an RGB image (integers: exact in any order) */
template <class G> __attribute__((target("avx2"))) int64_t grey_sum_avx2(const cv::Mat &src)
{
    const int W = src.cols;
    int64_t total = 0;
    for (int y = 0; y < src.rows; y++) {
        const uint8_t *s = src.ptr<uint8_t>(y);
        __m256i acc = _mm256_setzero_si256();
        int x = 0;
        for (; x + 8 <= W; x += 8) { /* per lane <= 255 W / 8 per row: no overflow */
            const uint8_t *p = s + 3 * x;
            __m256 r, g, b;
            deinterleave8(load8f(p), load8f(p + 8), load8f(p + 16), r, g, b);
            acc = _mm256_add_epi32(acc, _mm256_cvttps_epi32(G::vec(r, g, b)));
        }
        alignas(32) int32_t l[8];
        _mm256_store_si256(reinterpret_cast<__m256i *>(l), acc);
        for (int k = 0; k < 8; k++)
            total += l[k];
        for (; x < W; x++)
            total += G::pixel(s + 3 * x);
    }
    return total;
}

/* color_exec's blend (fq_image_aug.cpp) for 3 channels: per pixel the floored grey, then
 * blend(s, grey, f, f1) per channel */
__attribute__((target("avx2"))) void color_avx2(const cv::Mat &src, cv::Mat &dst, float f, float f1)
{
    grey_blend_rgb_avx2<OpenCvGrey>(src, dst, TorchvisionBlend{f, f1});
}

/* the sum of gray_floor over an RGB image */
__attribute__((target("avx2"))) double gray_sum_avx2(const cv::Mat &src)
{
    return (double)grey_sum_avx2<OpenCvGrey>(src);
}

/* pil_enhance's Color for 3 channels: per pixel Pillow's grey, blended with each channel */
__attribute__((target("avx2"))) void timm_color_avx2(const cv::Mat &src, cv::Mat &dst, float a)
{
    grey_blend_rgb_avx2<PillowGrey>(src, dst, PillowBlend{a});
}

/* the sum of Pillow's grey over an RGB image */
__attribute__((target("avx2"))) int64_t timm_gray_sum_avx2(const cv::Mat &src)
{
    return grey_sum_avx2<PillowGrey>(src);
}

/* one 256-entry table as four 64-byte quarters */
struct Lut512 {
    __m512i q[4];
};

FQ_VBMI_TARGET inline Lut512 load_lut(const uint8_t *t)
{
    return Lut512{{_mm512_loadu_si512(t), _mm512_loadu_si512(t + 64), _mm512_loadu_si512(t + 128),
                   _mm512_loadu_si512(t + 192)}};
}

/* t[x] for 64 bytes: two 128-entry permutes, chosen by bit 7 of x */
FQ_VBMI_TARGET inline __m512i lookup64(const Lut512 &t, __m512i x)
{
    __m512i lo = _mm512_permutex2var_epi8(t.q[0], x, t.q[1]), hi = _mm512_permutex2var_epi8(t.q[2], x, t.q[3]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi);
}

/* apply_lut / apply_luts (fq_image_aug.cpp) with AVX-512 VBMI byte permutes: element i
 * of a row of c channels through lut[i % c] (c = 1 or 3) */
FQ_VBMI_TARGET void lut_vbmi(const cv::Mat &src, cv::Mat &dst, const uint8_t *const lut[3])
{
    const int c = src.channels();
    const int n = src.cols * c;
    Lut512 t[3];
    for (int k = 0; k < c; k++)
        t[k] = load_lut(lut[k]);
    /* lanes of channel 1 / channel 2 of a vector starting at element phase p (mod 3) */
    __mmask64 m1[3] = {0, 0, 0}, m2[3] = {0, 0, 0};
    for (int p = 0; p < 3; p++)
        for (int l = 0; l < 64; l++) {
            if ((p + l) % 3 == 1)
                m1[p] |= (__mmask64)1 << l;
            if ((p + l) % 3 == 2)
                m2[p] |= (__mmask64)1 << l;
        }
    for (int y = 0; y < src.rows; y++) {
        const uint8_t *s = src.ptr<uint8_t>(y);
        uint8_t *o = dst.ptr<uint8_t>(y);
        int p = 0;
        for (int i = 0; i < n; i += 64, p = p == 2 ? 0 : p + 1) {
            const __mmask64 live = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
            __m512i x = _mm512_maskz_loadu_epi8(live, s + i);
            __m512i r = lookup64(t[0], x);
            if (c == 3) {
                r = _mm512_mask_blend_epi8(m1[p], r, lookup64(t[1], x));
                r = _mm512_mask_blend_epi8(m2[p], r, lookup64(t[2], x));
            }
            _mm512_mask_storeu_epi8(o + i, live, r);
        }
    }
}

}  // namespace

/* The entry points, compiled for the baseline: the CPU check (fq_cpu_has) and the SIMD
 * switch come first, the kernels above run only after them and check nothing. */

bool geom_warp_simd(const cv::Mat &src, cv::Mat &dst, const float t[6], bool hf, bool vf, const uint8_t fill[3])
{
    const int H = src.rows, W = src.cols;
    if (!aug_simd_ok() || src.channels() != 3 || src.depth() != CV_8U || W < 8 || src.step[0] > (size_t)1 << 30 ||
        (size_t)H * src.step[0] > (size_t)1 << 30)
        return false;
    geom_warp_avx2(src, dst, t, hf, vf, fill);
    return true;
}

bool sharpness_simd(const cv::Mat &src, cv::Mat &dst, float f1)
{
    if (!aug_simd_ok() || src.depth() != CV_8U)
        return false;
    sharpness_avx2(src, dst, f1);
    return true;
}

bool color_simd(const cv::Mat &src, cv::Mat &dst, float f, float f1)
{
    if (!aug_simd_ok() || src.channels() != 3 || src.depth() != CV_8U)
        return false;
    color_avx2(src, dst, f, f1);
    return true;
}

bool gray_sum_simd(const cv::Mat &src, double *sum)
{
    if (!aug_simd_ok() || src.channels() != 3 || src.depth() != CV_8U)
        return false;
    *sum = gray_sum_avx2(src);
    return true;
}

bool timm_sharpness_simd(const cv::Mat &src, cv::Mat &dst, float a)
{
    if (!aug_simd_ok() || src.depth() != CV_8U || src.cols < 3)
        return false;
    timm_sharpness_avx2(src, dst, a);
    return true;
}

bool timm_color_simd(const cv::Mat &src, cv::Mat &dst, float a)
{
    if (!aug_simd_ok() || src.channels() != 3 || src.depth() != CV_8U)
        return false;
    timm_color_avx2(src, dst, a);
    return true;
}

bool timm_gray_sum_simd(const cv::Mat &src, int64_t *sum)
{
    if (!aug_simd_ok() || src.channels() != 3 || src.depth() != CV_8U)
        return false;
    *sum = timm_gray_sum_avx2(src);
    return true;
}

bool lut_simd(const cv::Mat &src, cv::Mat &dst, const uint8_t *const lut[3])
{
    const int c = src.channels();
    if (!fq_img_simd_write_enabled() || !fq_cpu_has(FQ_CPU_AVX512VBMI) || (c != 1 && c != 3) ||
        src.depth() != CV_8U)
        return false;
    lut_vbmi(src, dst, lut);
    return true;
}

#else

bool aug_simd_ok() { return false; }
bool geom_warp_simd(const cv::Mat &, cv::Mat &, const float *, bool, bool, const uint8_t *) { return false; }
bool sharpness_simd(const cv::Mat &, cv::Mat &, float) { return false; }
bool color_simd(const cv::Mat &, cv::Mat &, float, float) { return false; }
bool gray_sum_simd(const cv::Mat &, double *) { return false; }
bool timm_sharpness_simd(const cv::Mat &, cv::Mat &, float) { return false; }
bool timm_color_simd(const cv::Mat &, cv::Mat &, float) { return false; }
bool timm_gray_sum_simd(const cv::Mat &, int64_t *) { return false; }
bool lut_simd(const cv::Mat &, cv::Mat &, const uint8_t *const *) { return false; }

#endif

}  // namespace fqi
