/* fq_image_resize_pil_avx2.cpp - the two convolution passes of Pillow's resize
 * (fq_image_resize_pil.cpp) with AVX2, giving the same bytes.
 *
 * The scalar pass sums pixel * k in int32 with k a 22-bit fixed-point weight (it may be
 * negative, |k| < 2^23), which does not fit the 16-bit multiply-add Pillow-SIMD uses (it
 * rounds its weights to fewer bits, hence other bytes).  Here each weight is split as
 * k = kh 2^15 + kl with kh = k >> 15 (signed, |kh| <= 2^8) and kl = k & 0x7fff (0..32767),
 * both int16, and two _mm256_madd_epi16 over interleaved pixel pairs give sum p kh and
 * sum p kl; (sum p kh) 2^15 + sum p kl + 2^21 is the scalar sum exactly (modulo 2^32, which
 * the scalar sum fits), then the same arithmetic shift by 22 and clip to [0, 255]
 * (packs_epi32, packus_epi16 saturate to the same values).
 *
 * horizontal: one row per 128-bit lane, two taps per step: 8 bytes at the pair's first
 * pixel, shuffled to (c of pixel 0, c of pixel 1) int16 pairs for each channel c < C (four
 * taps per step from one 16-byte load, two shuffles, while the window's 16-byte loads stay
 * in the row); a window whose 8-byte loads would pass the row's end (the last few of a
 * row) is summed in scalar.  vertical: two source rows per step, 32 (then 16) bytes at a time, the rest
 * of a row in scalar.
 *
 * Compiled with target("avx2") and checking no CPU feature (core/fq_cpu.h): called by
 * resize_pil_u8 only after fq_cpu_has(FQ_CPU_AVX2). */
#if defined(__x86_64__) || defined(__i386__) /* an AVX2 kernel: nothing to compile on other architectures */
#include "image/internal/fq_image_resize_pil.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#define FQ_AVX2 __attribute__((target("avx2")))

namespace fqi {
namespace {

constexpr int kBits = 22;

inline uint8_t clip8(int32_t v)
{
    const int32_t s = v >> kBits;
    return (uint8_t)(s < 0 ? 0 : (s > 255 ? 255 : s));
}

/* the int16 pairs (kh0, kh1) and (kl0, kl1) of two weights, as int32 for a broadcast */
inline int32_t pair_hi(int32_t k0, int32_t k1)
{
    return (int32_t)(((uint32_t)(k0 >> 15) & 0xffffu) | ((uint32_t)(k1 >> 15) << 16));
}
inline int32_t pair_lo(int32_t k0, int32_t k1)
{
    return (int32_t)(((uint32_t)k0 & 0x7fffu) | (((uint32_t)k1 & 0x7fffu) << 16));
}

/* (acc_hi << 15) + acc_lo + 2^21, >> 22: 8 int32 sums */
FQ_AVX2 inline __m256i finish(__m256i hi, __m256i lo)
{
    const __m256i rnd = _mm256_set1_epi32(1 << (kBits - 1));
    return _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 15), lo), rnd), kBits);
}

/* rows r, r + 1 (lanes 0, 1): 8 bytes at each */
FQ_AVX2 inline __m256i load2(const uint8_t *a, const uint8_t *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)a)),
                                   _mm_loadl_epi64((const __m128i *)b), 1);
}

/* rows r, r + 1 (lanes 0, 1): 16 bytes at each */
FQ_AVX2 inline __m256i load2x16(const uint8_t *a, const uint8_t *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* the C channel sums of rows 0, 1 (v01: lanes 0, 1) and 2, 3 (v23) -> C bytes of the nr rows
 * at d; as one 4-byte store each unless `exact` (the window's 4 bytes would pass the row:
 * elsewhere the bytes past the pixel are the next windows', written after this one) */
template <int C>
FQ_AVX2 inline void store4(__m256i v01, __m256i v23, uint8_t *d, size_t dstep, int nr, bool exact)
{
    const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(v01, v23), v01);
    const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
    const uint32_t u[4] = {(uint32_t)_mm_cvtsi128_si32(lo), (uint32_t)_mm_cvtsi128_si32(hi),
                           (uint32_t)_mm_extract_epi32(lo, 1), (uint32_t)_mm_extract_epi32(hi, 1)};
    if (!exact) {
        for (int r = 0; r < nr; r++)
            std::memcpy(d + (size_t)r * dstep, &u[r], 4);
    } else {
        for (int r = 0; r < nr; r++)
            std::memcpy(d + (size_t)r * dstep, &u[r], (size_t)C);
    }
}

/* one window of one row in scalar */
inline void h_scalar(const uint8_t *row, int C, int start, int n, const int32_t *k, uint8_t *d)
{
    for (int c = 0; c < C; c++) {
        int32_t acc = 1 << (kBits - 1);
        for (int x = 0; x < n; x++)
            acc += (int32_t)row[(size_t)(start + x) * C + c] * k[x];
        d[c] = clip8(acc);
    }
}

/* rows r0 .. r0 + 3 (or fewer: nr), every output pixel; kp: per window, per tap pair, its
 * (hi, lo) int16 pairs */
template <int C>
FQ_AVX2 void h_rows(const uint8_t *src, size_t sstep, int nr, int in_w, const int *start, const int *len,
                    const int32_t *k, int ksize, const int32_t *kp, int out_w, uint8_t *dst, size_t dstep,
                    __m256i shuf, __m256i shuf2)
{
    const int np = (ksize + 1) / 2;
    const uint8_t *s0 = src, *s1 = src + (nr > 1 ? sstep : 0), *s2 = src + (size_t)(nr > 2 ? 2 : 0) * sstep,
                  *s3 = src + (size_t)(nr > 3 ? 3 : 0) * sstep;
    const size_t rowbytes = (size_t)in_w * C, outbytes = (size_t)out_w * C;
    for (int xx = 0; xx < out_w; xx++) {
        const int32_t *kx = k + (size_t)xx * ksize;
        const int st = start[xx], n = len[xx];
        uint8_t *d = dst + (size_t)xx * C;
        const int last = n > 0 ? ((n - 1) & ~1) : 0; /* the last pair's first tap */
        if (n <= 0 || (size_t)(st + last) * C + 8 > rowbytes) {
            for (int r = 0; r < nr; r++)
                h_scalar(src + (size_t)r * sstep, C, st, n, kx, d + (size_t)r * dstep);
            continue;
        }
        __m256i h01 = _mm256_setzero_si256(), l01 = h01, h23 = h01, l23 = h01;
        const size_t off = (size_t)st * C;
        const int32_t *kpx = kp + (size_t)xx * np * 2;
        int x = 0;
        /* two pairs per step from one 16-byte load per row, where the window's last such
         * load stays in the row */
        const int groups = n >= 3 ? (n - 3) / 4 + 1 : 0; /* steps x = 0, 4, .. with x + 2 < n */
        if (groups > 0 && (size_t)(st + 4 * (groups - 1)) * C + 16 <= rowbytes)
            for (; x + 2 < n; x += 4, kpx += 4) {
                const __m256i kh0 = _mm256_set1_epi32(kpx[0]), kl0 = _mm256_set1_epi32(kpx[1]);
                const __m256i kh1 = _mm256_set1_epi32(kpx[2]), kl1 = _mm256_set1_epi32(kpx[3]);
                const size_t o = off + (size_t)x * C;
                const __m256i a01 = load2x16(s0 + o, s1 + o), a23 = load2x16(s2 + o, s3 + o);
                const __m256i p01 = _mm256_shuffle_epi8(a01, shuf), q01 = _mm256_shuffle_epi8(a01, shuf2);
                const __m256i p23 = _mm256_shuffle_epi8(a23, shuf), q23 = _mm256_shuffle_epi8(a23, shuf2);
                h01 = _mm256_add_epi32(h01, _mm256_add_epi32(_mm256_madd_epi16(p01, kh0), _mm256_madd_epi16(q01, kh1)));
                l01 = _mm256_add_epi32(l01, _mm256_add_epi32(_mm256_madd_epi16(p01, kl0), _mm256_madd_epi16(q01, kl1)));
                h23 = _mm256_add_epi32(h23, _mm256_add_epi32(_mm256_madd_epi16(p23, kh0), _mm256_madd_epi16(q23, kh1)));
                l23 = _mm256_add_epi32(l23, _mm256_add_epi32(_mm256_madd_epi16(p23, kl0), _mm256_madd_epi16(q23, kl1)));
            }
        for (; x < n; x += 2, kpx += 2) {
            const __m256i kh = _mm256_set1_epi32(kpx[0]), kl = _mm256_set1_epi32(kpx[1]);
            const size_t o = off + (size_t)x * C;
            const __m256i p01 = _mm256_shuffle_epi8(load2(s0 + o, s1 + o), shuf);
            const __m256i p23 = _mm256_shuffle_epi8(load2(s2 + o, s3 + o), shuf);
            h01 = _mm256_add_epi32(h01, _mm256_madd_epi16(p01, kh));
            l01 = _mm256_add_epi32(l01, _mm256_madd_epi16(p01, kl));
            h23 = _mm256_add_epi32(h23, _mm256_madd_epi16(p23, kh));
            l23 = _mm256_add_epi32(l23, _mm256_madd_epi16(p23, kl));
        }
        store4<C>(finish(h01, l01), finish(h23, l23), d, dstep, nr, (size_t)xx * C + 4 > outbytes);
    }
}

}  // namespace

FQ_AVX2 void resize_pil_h_avx2(const uint8_t *src, size_t sstep, int rows, int C, int in_w, const int *start,
                               const int *len, const int32_t *k, int ksize, int out_w, uint8_t *dst,
                               size_t dstep)
{
    /* per lane, channel c -> int16 pair (byte c, byte c + C), channels >= C zero */
    alignas(32) int8_t m[32];
    for (int c = 0; c < 4; c++) {
        m[4 * c] = c < C ? (int8_t)c : (int8_t)-128;
        m[4 * c + 1] = -128;
        m[4 * c + 2] = c < C ? (int8_t)(c + C) : (int8_t)-128;
        m[4 * c + 3] = -128;
    }
    std::memcpy(m + 16, m, 16);
    const __m256i shuf = _mm256_load_si256((const __m256i *)m);
    /* the same for the pair 2 pixels on (taps 2, 3: 2C bytes further) */
    alignas(32) int8_t m2[32];
    for (int i = 0; i < 32; i++)
        m2[i] = m[i] < 0 ? m[i] : (int8_t)(m[i] + 2 * C);
    const __m256i shuf2 = _mm256_load_si256((const __m256i *)m2);
    /* the pairs of weights, split: per window np pairs (hi, lo), past the window's taps 0 */
    thread_local std::vector<int32_t> pairs;
    const int np = (ksize + 1) / 2;
    pairs.assign((size_t)out_w * np * 2, 0);
    for (int xx = 0; xx < out_w; xx++) {
        const int32_t *kx = k + (size_t)xx * ksize;
        int32_t *p = &pairs[(size_t)xx * np * 2];
        for (int x = 0; x < len[xx]; x += 2, p += 2) {
            const int32_t k0 = kx[x], k1 = x + 1 < len[xx] ? kx[x + 1] : 0;
            p[0] = pair_hi(k0, k1), p[1] = pair_lo(k0, k1);
        }
    }
    const int32_t *kp = pairs.data();
    for (int y = 0; y < rows; y += 4) {
        const int nr = rows - y < 4 ? rows - y : 4;
        const uint8_t *s = src + (size_t)y * sstep;
        uint8_t *d = dst + (size_t)y * dstep;
        switch (C) {
        case 1: h_rows<1>(s, sstep, nr, in_w, start, len, k, ksize, kp, out_w, d, dstep, shuf, shuf2); break;
        case 2: h_rows<2>(s, sstep, nr, in_w, start, len, k, ksize, kp, out_w, d, dstep, shuf, shuf2); break;
        case 3: h_rows<3>(s, sstep, nr, in_w, start, len, k, ksize, kp, out_w, d, dstep, shuf, shuf2); break;
        default: h_rows<4>(s, sstep, nr, in_w, start, len, k, ksize, kp, out_w, d, dstep, shuf, shuf2); break;
        }
    }
}

FQ_AVX2 void resize_pil_v_avx2(const uint8_t *src, size_t sstep, size_t n, const int *start, const int *len,
                               const int32_t *k, int ksize, int out_h, uint8_t *dst, size_t dstep)
{
    const __m256i zero = _mm256_setzero_si256();
    thread_local std::vector<int32_t> kpv;
    kpv.resize((size_t)ksize + 1);
    int32_t *kp = kpv.data();
    for (int yy = 0; yy < out_h; yy++) {
        const int32_t *ky = k + (size_t)yy * ksize;
        const uint8_t *base = src + (size_t)start[yy] * sstep;
        const int taps = len[yy];
        uint8_t *d = dst + (size_t)yy * dstep;
        /* the weight pairs, split (hi, lo) at kp[y], kp[y + 1] for taps y, y + 1 */
        for (int y = 0; y < taps; y += 2) {
            const int32_t k0 = ky[y], k1 = y + 1 < taps ? ky[y + 1] : 0;
            kp[y] = pair_hi(k0, k1), kp[y + 1] = pair_lo(k0, k1);
        }
        size_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m256i h0 = zero, h1 = zero, l0 = zero, l1 = zero;
            const uint8_t *r = base + i;
            for (int y = 0; y < taps; y += 2, r += 2 * sstep) {
                const __m256i kh = _mm256_set1_epi32(kp[y]), kl = _mm256_set1_epi32(kp[y + 1]);
                const __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)r));
                const __m256i b = y + 1 < taps ? _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(r + sstep)))
                                               : zero;
                /* bytes 0-3, 8-11 and 4-7, 12-15 as (row y, row y + 1) pairs */
                const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
                h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(lo, kh));
                l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(lo, kl));
                h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(hi, kh));
                l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(hi, kl));
            }
            /* packs_epi32 per lane puts 0-3, 4-7 | 8-11, 12-15 back in order */
            const __m256i w = _mm256_packs_epi32(finish(h0, l0), finish(h1, l1));
            const __m256i b8 = _mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0x08);
            _mm_storeu_si128((__m128i *)(d + i), _mm256_castsi256_si128(b8));
        }
        for (; i < n; i++) {
            int32_t acc = 1 << (kBits - 1);
            for (int y = 0; y < taps; y++)
                acc += (int32_t)base[(size_t)y * sstep + i] * ky[y];
            d[i] = clip8(acc);
        }
    }
}

}  // namespace fqi
#endif /* x86 */
