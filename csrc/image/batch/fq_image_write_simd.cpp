/* fq_image_write_simd.cpp - vectorised uint8 -> float32 normalize write (NHWC) for the
 * fused final write of fq_image_write.cpp.
 *
 * The reference values are the spec's table lut_f32[c][v] = (float)((v/255 - mean)/std)
 * computed in double.  Here each value is (float)fma((double)v, a[c], b[c]) with
 * a = 1/(255 std), b = -mean/std in double (AVX2 + FMA, 4 doubles per instruction,
 * runtime dispatch).  That is a different double expression, so it is only used for a
 * spec when all 3 x 256 values were checked equal to the table at spec creation
 * (affine_init); otherwise, or without AVX2/FMA, the table loop runs.  The output is
 * therefore bit-identical to the table path in every case.
 *
 * Dispatch: the target("avx2,fma") functions check nothing; the entry points
 * write_f32_hwc_simd / write_u8_hwc_simd, compiled for the baseline, call them only after
 * fq_cpu_has(FQ_CPU_AVX2) (core/fq_cpu.h: AVX2 and FMA, unless FASTQ_CPU masks them).
 *
 * Thread safety: affine_init runs once per spec (before it is shared); the write only
 * reads the spec.
 */
#include "image/internal/fq_image_internal.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/fq_cpu.h"
#include "image/fq_image_prepare.h"
#include "image/internal/fq_image_switch.h"

static fqi::Switch g_simd_write("FASTQ_SIMD_WRITE");

extern "C" {
void fq_img_simd_write_set(int on) { g_simd_write.set(on); }
int fq_img_simd_write_enabled(void) { return g_simd_write.get(); }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FQ_HAVE_X86 1
#endif

namespace fqi {

void affine_init(F32Affine *k, const float (*lut)[256], const double *mean, const double *stdv, bool norm)
{
    k->exact = false;
    for (int c = 0; c < 3; c++) {
        double s = norm ? stdv[c] : 1.0, m = norm ? mean[c] : 0.0;
        k->a[c] = 1.0 / (255.0 * s);
        k->b[c] = -m / s;
        for (int v = 0; v < 256; v++) {
            float f = (float)std::fma((double)v, k->a[c], k->b[c]);
            if (std::memcmp(&f, &lut[c][v], sizeof f) != 0)
                return;
        }
    }
    k->exact = true;
}

#ifdef FQ_HAVE_X86

static bool cpu_ok() { return fq_cpu_has(FQ_CPU_AVX2); }

/* n values of p (output channel of element i = i % C, read through lut[sc(i % C)]: sc
 * reverses the channels when bgr) -> q.  lut for the tail. */
template <int C>
__attribute__((target("avx2,fma"))) static void row_avx2(const uint8_t *p, float *q, int n, const __m256d *A,
                                                         const __m256d *B, const float (*lut)[256], bool bgr)
{
    /* element i of a block of 8*C: lanes of the two 4-double halves of step j use
     * A[2j], A[2j+1] (period 8*C elements: 24 for RGB, 8 for gray) */
    int i = 0;
    for (; i + 8 * C <= n; i += 8 * C) {
        for (int j = 0; j < C; j++) {
            __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + i + 8 * j));
            __m256i v32 = _mm256_cvtepu8_epi32(b8);
            __m256d lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v32));
            __m256d hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v32, 1));
            __m128 flo = _mm256_cvtpd_ps(_mm256_fmadd_pd(lo, A[2 * j], B[2 * j]));
            __m128 fhi = _mm256_cvtpd_ps(_mm256_fmadd_pd(hi, A[2 * j + 1], B[2 * j + 1]));
            _mm256_storeu_ps(q + i + 8 * j, _mm256_set_m128(fhi, flo));
        }
    }
    for (; i < n; i++)
        q[i] = lut[bgr ? C - 1 - i % C : i % C][p[i]];
}

/* an RGB row of w pixels in BGR order into d; with hf also in reverse pixel order, which
 * is the whole row's bytes reversed */
__attribute__((target("avx2,fma"))) static void bgr_row(const uint8_t *p, int w, bool hf, uint8_t *d)
{
    const int n = 3 * w;
    int i = 0;
    if (hf) {
        const __m128i m = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        for (; i + 16 <= n; i += 16) {
            __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + (n - 16 - i)));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(d + i), _mm_shuffle_epi8(s, m));
        }
        for (; i < n; i++)
            d[i] = p[n - 1 - i];
        return;
    }
    /* 4 pixels (12 bytes) per shuffle of the 16 bytes that start with them */
    const __m128i m = _mm_setr_epi8(2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9, -1, -1, -1, -1);
    for (; i + 16 <= n; i += 12) {
        __m128i r = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i)), m);
        std::memcpy(d + i, &r, 12);
    }
    for (; i < n; i += 3)
        d[i] = p[i + 2], d[i + 1] = p[i + 1], d[i + 2] = p[i];
}

/* a row of w pixels of C channels in reverse pixel order (channel order kept) into d */
template <int C>
__attribute__((target("avx2,fma"))) static void reverse_row(const uint8_t *p, int w, uint8_t *d)
{
    int x = 0;
    if (C == 3) {
        /* 4 pixels (12 bytes) per shuffle of the 16 bytes that end with them
         * (the load starts 4 bytes early so it never reads past the row) */
        const __m128i m = _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, -1, -1, -1, -1);
        for (; x + 4 <= w && 3 * (w - 4 - x) >= 4; x += 4) {
            __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 3 * (w - 4 - x) - 4));
            __m128i r = _mm_shuffle_epi8(s, m);
            std::memcpy(d + 3 * x, &r, 12);
        }
    } else {
        const __m128i m = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        for (; x + 16 <= w; x += 16) {
            __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + (w - 16 - x)));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(d + x), _mm_shuffle_epi8(s, m));
        }
    }
    for (; x < w; x++)
        for (int c = 0; c < C; c++)
            d[x * C + c] = p[(w - 1 - x) * C + c];
}

template <int C>
__attribute__((target("avx2,fma"))) static void write_avx2(const F32Affine &k, const float (*lut)[256],
                                                           const cv::Mat &img, bool hf, bool vf, float *out,
                                                           uint8_t *rev, bool bgr)
{
    alignas(32) double a[8 * C], b[8 * C];
    for (int e = 0; e < 8 * C; e++) { /* output channel e % C is source channel sc */
        const int sc = bgr ? C - 1 - e % C : e % C;
        a[e] = k.a[sc], b[e] = k.b[sc];
    }
    __m256d A[2 * C], B[2 * C];
    for (int j = 0; j < 2 * C; j++)
        A[j] = _mm256_load_pd(a + 4 * j), B[j] = _mm256_load_pd(b + 4 * j);
    const int h = img.rows, w = img.cols, n = w * C;
    (void)n;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = img.ptr<uint8_t>(vf ? h - 1 - y : y);
        if (C == 3 && bgr) { /* the row in output channel order into rev */
            bgr_row(p, w, hf, rev);
            p = rev;
        } else if (hf) { /* reverse the pixel order of the row into rev */
            reverse_row<C>(p, w, rev);
            p = rev;
        }
        row_avx2<C>(p, out + (size_t)y * n, n, A, B, lut, bgr);
    }
}

bool write_f32_hwc_simd(const F32Affine &k, const float (*lut)[256], const cv::Mat &img, bool hf, bool vf,
                        float *out, bool bgr)
{
    const int C = img.channels();
    if (!k.exact || !g_simd_write.get() || !cpu_ok() || (C != 1 && C != 3) || img.depth() != CV_8U)
        return false;
    bgr = bgr && C == 3;
    std::vector<uint8_t> rev(hf || bgr ? (size_t)img.cols * C : 0); /* may throw: callers catch */
    if (C == 3)
        write_avx2<3>(k, lut, img, hf, vf, out, rev.data(), bgr);
    else
        write_avx2<1>(k, lut, img, hf, vf, out, rev.data(), false);
    return true;
}

bool write_u8_hwc_simd(const cv::Mat &img, bool hf, bool vf, bool bgr, uint8_t *out)
{
    const int C = img.channels();
    if (!g_simd_write.get() || !cpu_ok() || (C != 1 && C != 3) ||
        img.depth() != CV_8U || (bgr && C != 3))
        return false;
    const int h = img.rows, w = img.cols;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = img.ptr<uint8_t>(vf ? h - 1 - y : y);
        uint8_t *d = out + (size_t)y * w * C;
        if (bgr)
            bgr_row(p, w, hf, d);
        else if (hf && C == 3)
            reverse_row<3>(p, w, d);
        else if (hf)
            reverse_row<1>(p, w, d);
        else
            std::memcpy(d, p, (size_t)w * C);
    }
    return true;
}

#else

bool write_u8_hwc_simd(const cv::Mat &, bool, bool, bool, uint8_t *) { return false; }

bool write_f32_hwc_simd(const F32Affine &, const float (*)[256], const cv::Mat &, bool, bool, float *, bool)
{
    (void)g_simd_write;
    return false;
}

#endif

}  // namespace fqi
