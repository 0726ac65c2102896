/* fq_image_aug_tensorpack_simd.cpp - TensorpackColor with AVX2 (declared in fq_image_aug_tensorpack.h).
 *
 * Bit-identical to the scalar steps of fq_image_aug_tensorpack.cpp: every value goes through the same
 * float32 multiplications and additions in the same order (separate mul/add intrinsics, no FMA:
 * the functions are compiled for "avx2" only, so no contraction is possible), clips are
 * max(v, 0) then min(v, 255) (the same value as the scalar clip; at most the sign of a zero
 * differs, which no later step or the truncation can see), ToUint8 truncates.
 *
 * Blocking: 16 pixels at a time stay in registers (6 vectors of 8 floats, planar R, G, B after
 * a byte shuffle) through all four steps, so the image is read as uint8 and written as uint8
 * once per phase, never as float.  Phase 1 runs the steps before the contrast and sums the
 * grey levels; phase 2 recomputes them (cheaper than storing a float image), applies the
 * contrast with that mean and the steps after it, and stores.
 *
 * The grey sum: the scalar path adds the float32 grey levels one by one in double.  Here they
 * are added in 8 double lanes, which gives the same double when every addition is exact: all
 * levels are in [0, 256], so when every non-zero level is >= T = 2^23 q they are all multiples
 * of q, and when 256 n <= 2^53 q every partial sum, in any order, is a multiple of q below 2^53 q,
 * hence exact.  q is picked from n; a level outside (0 < v < T or v > 256) is flagged and the
 * sum is redone in the scalar order (rare: a contrast or lighting step landing just above 0).
 *
 * Dispatch: the FQ_TP_AVX2 functions check nothing; tp_color_simd, compiled for the baseline,
 * calls them only after fq_cpu_has(FQ_CPU_AVX2) (core/fq_cpu.h; FASTQ_CPU can mask it). */
#include "image/color/fq_image_aug_tensorpack.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/fq_cpu.h"
#include "image/fq_image_prepare.h"
#include "image/internal/fq_image_switch.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace {

fqi::Switch g_simd_tp("FASTQ_SIMD_TP");

}  // namespace

extern "C" {
void fq_img_simd_tp_set(int on) { g_simd_tp.set(on); }
int fq_img_simd_tp_enabled(void) { return g_simd_tp.get(); }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace fqi {
namespace {

bool cpu_ok() { return fq_cpu_has(FQ_CPU_AVX2); }

/* byte shuffles between 48 interleaved bytes (3 x 16: a, b, c) and 16 bytes per channel */
struct Masks {
    alignas(16) int8_t de[3][3][16];  /* [channel][source vector]: byte j of the channel */
    alignas(16) int8_t in[3][3][16];  /* [output vector][channel]: byte l of the output */
    Masks()
    {
        for (int ch = 0; ch < 3; ch++)
            for (int s = 0; s < 3; s++)
                for (int j = 0; j < 16; j++) {
                    int g = 3 * j + ch;
                    de[ch][s][j] = (int8_t)(g / 16 == s ? g % 16 : -128);
                }
        for (int o = 0; o < 3; o++)
            for (int ch = 0; ch < 3; ch++)
                for (int l = 0; l < 16; l++) {
                    int g = 16 * o + l;
                    in[o][ch][l] = (int8_t)(g % 3 == ch ? g / 3 : -128);
                }
    }
};

const Masks &masks()
{
    static const Masks m;
    return m;
}

#define FQ_TP_AVX2 __attribute__((target("avx2")))

struct Px { /* 16 pixels, planar: v[ch][half] */
    __m256 v[3][2];
};

struct Consts {
    __m256 zero, top, w0, w1, w2;  /* clip bounds; grey weights of channel 0 (0.299), 1, 2 */
    __m256 bv, ca, mb, sa, sb, inc[3];
    __m256 tiny, big;
};

FQ_TP_AVX2 inline __m256 clip(__m256 v, const Consts &k)
{
    return _mm256_min_ps(_mm256_max_ps(v, k.zero), k.top);
}

/* ((ch2 * 0.114f) + ch1 * 0.587f) + ch0 * 0.299f */
FQ_TP_AVX2 inline __m256 grey(const Px &p, int h, const Consts &k)
{
    __m256 s = _mm256_mul_ps(p.v[2][h], k.w2);
    s = _mm256_add_ps(s, _mm256_mul_ps(p.v[1][h], k.w1));
    return _mm256_add_ps(s, _mm256_mul_ps(p.v[0][h], k.w0));
}

FQ_TP_AVX2 inline void load(const uint8_t *q, Px &p, const Masks &m)
{
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(q));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 32));
    for (int ch = 0; ch < 3; ch++) {
        const __m128i *d = reinterpret_cast<const __m128i *>(m.de[ch]);
        __m128i x = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, _mm_load_si128(d)),
                                              _mm_shuffle_epi8(b, _mm_load_si128(d + 1))),
                                 _mm_shuffle_epi8(c, _mm_load_si128(d + 2)));
        p.v[ch][0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x));
        p.v[ch][1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8)));
    }
}

/* Pixels x .. x + cnt - 1 of an RGB row (cnt <= 16): the last group of a row, whose
 * 48-byte load would read past the row, goes through the zero-padded `tail`. */
FQ_TP_AVX2 inline void load_group(const uint8_t *row, int x, int cnt, uint8_t (&tail)[48], Px &p, const Masks &m)
{
    if (cnt == 16) {
        load(row + 3 * x, p, m);
        return;
    }
    std::memset(tail, 0, sizeof tail);
    std::memcpy(tail, row + 3 * x, 3 * (size_t)cnt);
    load(tail, p, m);
}

FQ_TP_AVX2 inline void store(uint8_t *q, const Px &p, const Masks &m)
{
    __m128i c8[3];
    for (int ch = 0; ch < 3; ch++) {
        __m256i i0 = _mm256_cvttps_epi32(p.v[ch][0]), i1 = _mm256_cvttps_epi32(p.v[ch][1]); /* trunc */
        __m128i w0 = _mm_packus_epi32(_mm256_castsi256_si128(i0), _mm256_extracti128_si256(i0, 1));
        __m128i w1 = _mm_packus_epi32(_mm256_castsi256_si128(i1), _mm256_extracti128_si256(i1, 1));
        c8[ch] = _mm_packus_epi16(w0, w1);
    }
    for (int o = 0; o < 3; o++) {
        const __m128i *d = reinterpret_cast<const __m128i *>(m.in[o]);
        __m128i x = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(c8[0], _mm_load_si128(d)),
                                              _mm_shuffle_epi8(c8[1], _mm_load_si128(d + 1))),
                                 _mm_shuffle_epi8(c8[2], _mm_load_si128(d + 2)));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(q + 16 * o), x);
    }
}

FQ_TP_AVX2 inline void step(int which, Px &p, const Consts &k)
{
    for (int h = 0; h < 2; h++) {
        switch (which) {
        case 0: /* BrightnessScale */
            for (int ch = 0; ch < 3; ch++)
                p.v[ch][h] = clip(_mm256_mul_ps(p.v[ch][h], k.bv), k);
            break;
        case 1: /* Contrast: x * a + mean * (1 - a) */
            for (int ch = 0; ch < 3; ch++)
                p.v[ch][h] = clip(_mm256_add_ps(_mm256_mul_ps(p.v[ch][h], k.ca), k.mb), k);
            break;
        case 2: { /* Saturation: x * a + grey * (1 - a) */
            const __m256 gb = _mm256_mul_ps(grey(p, h, k), k.sb);
            for (int ch = 0; ch < 3; ch++)
                p.v[ch][h] = clip(_mm256_add_ps(_mm256_mul_ps(p.v[ch][h], k.sa), gb), k);
            break;
        }
        default: /* Lighting */
            for (int ch = 0; ch < 3; ch++)
                p.v[ch][h] = clip(_mm256_add_ps(p.v[ch][h], k.inc[ch]), k);
        }
    }
}

/* phase 1 on every row: the steps ord[0..kc) and the grey sum.  exact: 8 double lanes, and
 * *flag set when a level breaks the exactness condition; else the scalar order. */
template <bool EXACT>
FQ_TP_AVX2 double grey_sum(const cv::Mat &src, const int *ord, int kc, const Consts &k, bool *flag)
{
    const Masks &m = masks();
    const int W = src.cols;
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    __m256 bad = _mm256_setzero_ps();
    double serial = 0;
    alignas(32) uint8_t tail[48];
    alignas(32) float g8[16];
    for (int y = 0; y < src.rows; y++) {
        const uint8_t *row = src.ptr<uint8_t>(y);
        for (int x = 0; x < W; x += 16) {
            const int cnt = W - x < 16 ? W - x : 16;
            Px p;
            load_group(row, x, cnt, tail, p, m);
            for (int s = 0; s < kc; s++)
                step(ord[s], p, k);
            for (int h = 0; h < 2; h++) {
                __m256 g = grey(p, h, k);
                const int valid = cnt - 8 * h; /* lanes of this half that are pixels */
                if (valid < 8) {
                    alignas(32) int32_t lane[8];
                    for (int i = 0; i < 8; i++)
                        lane[i] = i < valid ? -1 : 0;
                    g = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<__m256i *>(lane))));
                }
                if (EXACT) {
                    acc[2 * h] = _mm256_add_pd(acc[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(g)));
                    acc[2 * h + 1] = _mm256_add_pd(acc[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1)));
                    const __m256 lo = _mm256_and_ps(_mm256_cmp_ps(g, k.zero, _CMP_GT_OQ),
                                                    _mm256_cmp_ps(g, k.tiny, _CMP_LT_OQ));
                    bad = _mm256_or_ps(bad, _mm256_or_ps(lo, _mm256_cmp_ps(g, k.big, _CMP_GT_OQ)));
                } else {
                    _mm256_store_ps(g8 + 8 * h, g);
                }
            }
            if (!EXACT)
                for (int i = 0; i < cnt; i++)
                    serial += (double)g8[i];
        }
    }
    if (!EXACT)
        return serial;
    *flag = _mm256_movemask_ps(bad) != 0;
    alignas(32) double d[4];
    _mm256_store_pd(d, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
    return (d[0] + d[1]) + (d[2] + d[3]);
}

/* f: brightness, contrast a, saturation a, saturation 1 - a */
FQ_TP_AVX2 void run(const cv::Mat &src, cv::Mat &dst, const int *ord, const float *f, const float *inc, float cb,
                    double *mean)
{
    const Masks &m = masks();
    Consts k;
    k.zero = _mm256_setzero_ps();
    k.top = _mm256_set1_ps(255.f);
    k.mb = k.zero; /* set after phase 1, which stops before the contrast */
    k.w0 = _mm256_set1_ps(0.299f);
    k.w1 = _mm256_set1_ps(0.587f);
    k.w2 = _mm256_set1_ps(0.114f);
    k.bv = _mm256_set1_ps(f[0]);
    k.ca = _mm256_set1_ps(f[1]);
    k.sa = _mm256_set1_ps(f[2]);
    k.sb = _mm256_set1_ps(f[3]);
    for (int c = 0; c < 3; c++)
        k.inc[c] = _mm256_set1_ps(inc[c]);
    int kc = 0;
    while (kc < 4 && ord[kc] != 1)
        kc++;
    const double n = (double)src.rows * src.cols;
    /* exactness: q with 256 n <= 2^53 q (from 2^-29, the ulp of floats >= 2^-6), T = 2^23 q */
    double q = 1.0 / 536870912.0;
    while (256.0 * n > 9007199254740992.0 * q)
        q *= 2;
    k.tiny = _mm256_set1_ps((float)(q * 8388608.0));
    k.big = _mm256_set1_ps(256.f);
    double sum = 0;
    if (kc < 4) {
        bool flag = false;
        sum = grey_sum<true>(src, ord, kc, k, &flag);
        if (flag)
            sum = grey_sum<false>(src, ord, kc, k, &flag);
    }
    *mean = n > 0 ? sum / n : 0.0;
    k.mb = _mm256_set1_ps((float)*mean * cb);
    const int W = src.cols;
    alignas(32) uint8_t tail[48];
    for (int y = 0; y < src.rows; y++) {
        const uint8_t *row = src.ptr<uint8_t>(y);
        uint8_t *out = dst.ptr<uint8_t>(y);
        for (int x = 0; x < W; x += 16) {
            const int cnt = W - x < 16 ? W - x : 16;
            Px p;
            load_group(row, x, cnt, tail, p, m);
            for (int s = 0; s < 4; s++)
                step(ord[s], p, k);
            if (cnt == 16) {
                store(out + 3 * x, p, m);
            } else {
                store(tail, p, m);
                std::memcpy(out + 3 * x, tail, 3 * (size_t)cnt);
            }
        }
    }
}

}  // namespace

bool tp_color_simd(const cv::Mat &src, cv::Mat &dst, const int ord[4], float bv, float ca, float cb, float sa,
                   float sb, const float inc[3], double *mean)
{
    if (src.channels() != 3 || src.depth() != CV_8U || !fq_img_simd_tp_enabled() || !cpu_ok())
        return false;
    const float f[6] = {bv, ca, sa, sb, 0.f, 0.f};
    run(src, dst, ord, f, inc, cb, mean);
    return true;
}

}  // namespace fqi

#else

namespace fqi {

bool tp_color_simd(const cv::Mat &, cv::Mat &, const int *, float, float, float, float, float, const float *,
                   double *)
{
    return false;
}

}  // namespace fqi

#endif
