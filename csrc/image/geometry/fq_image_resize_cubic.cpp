/* fq_image_resize_cubic.cpp - cv::resize(INTER_CUBIC) of CV_8UC3 images with AVX2, the same
 * bytes as OpenCV 4.6.0 (declared in internal/fq_image_resize.h).
 *
 * Why: OpenCV 4.6 runs the horizontal pass of its 8-bit bicubic resize as scalar C (HResizeCubic
 * in modules/imgproc/src/resize.cpp); on the tensorpack chain it is a third of a worker's CPU.
 *
 * What OpenCV computes (and so this file), for a source of sw x sh and a target of dw x dh:
 *  - per axis, scale = 1 / ((double)d / s); for each target position d, f = (float)((d + 0.5) *
 *    scale - 0.5), s = floor(f), f -= s, four float weights from interpolateCubic(f) (A = -0.75),
 *    each converted to a short as round-half-even(w * 2048);
 *  - horizontal pass, exact int32: row[d * 3 + c] = sum_k src[clamp(s - 1 + k) * 3 + c] * a_k
 *    (the taps outside the row are replaced by the edge pixel);
 *  - vertical pass over the rows clamp(s - 1 + k), k = 0..3: OpenCV's 128-bit universal
 *    intrinsics (VResizeCubicVec_32s8u) handle the first width - width % 8 elements in float32,
 *    t = r3 * b3, t = r2 * b2 + t, t = r1 * b1 + t, t = r0 * b0 + t with b_k = beta_k * 2^-22, one
 *    rounding per multiplication and per addition (no FMA in an SSE baseline), then
 *    round-half-even to int32, saturated to int16 then to uint8; the remaining elements in int32:
 *    (r0 b0 + r1 b1 + r2 b2 + r3 b3 + 2^21) >> 22 saturated to uint8 (FixedPtCast).
 * The vertical pass here is the same float operations 8 lanes at a time (separate mul and add
 * intrinsics; this file is compiled with contraction off, and the kernels' target is "avx2"
 * without "fma"), the integer tail the same integers.  The horizontal pass is integer, so any
 * order gives the same sums: two target pixels per 256-bit vector, each a 16-byte load of its
 * four source pixels shuffled into 16-bit (pixel, pixel) pairs per channel and multiplied by
 * (a0, a1) / (a2, a3) pairs with madd.
 *
 * When it applies: the variant above is the only one reproduced, so the path is on only where
 * the linked OpenCV is 4.6.0 with a 128-bit x86 baseline without FMA3 (Debian's and the wheel's
 * vendored build: "Baseline: ... SSE4_2"), without IPP or a custom HAL, on a CPU with AVX2.  A
 * 256-bit or FMA baseline would change the float/int split or the rounding of some pixels; such
 * a build gets cv::resize.  tests/image/test_resize_cubic.py compares both paths on thousands of sizes.
 *
 * Dispatch: hpass / vpass (target "avx2") check nothing; resize_cubic_u8c3, compiled for the
 * baseline, runs them only after fq_cpu_has(FQ_CPU_AVX2) (core/fq_cpu.h; FASTQ_CPU can mask it). */
#include "image/internal/fq_image_resize.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/fq_cpu.h"
#include "image/fq_image_prepare.h"
#include "image/internal/fq_image_switch.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace {

fqi::Switch g_simd_resize("FASTQ_SIMD_RESIZE");

}  // namespace

#if defined(__x86_64__)
#include <immintrin.h>

namespace {

/* Why the linked OpenCV's bicubic resize can be reproduced, or why not ("" when it can). */
std::string opencv_mismatch()
{
    const std::string ver = cv::getVersionString();
    if (ver != "4.6.0")
        return "the linked OpenCV is " + ver + ", not 4.6.0";
    const std::string info = cv::getBuildInformation();
    size_t at = 0;
    bool baseline = false;
    while (at < info.size()) {
        size_t end = info.find('\n', at);
        if (end == std::string::npos)
            end = info.size();
        const std::string line = info.substr(at, end - at);
        at = end + 1;
        if (line.find("Baseline:") != std::string::npos) {
            baseline = true;
            if (line.find("AVX") != std::string::npos || line.find("FMA") != std::string::npos)
                return "the linked OpenCV's CPU baseline is wider than SSE4.2 or has FMA (" + line + ")";
        }
        if (line.find("Intel IPP") != std::string::npos && line.find("NO") == std::string::npos)
            return "the linked OpenCV uses Intel IPP";
        if (line.find("Custom HAL:") != std::string::npos && line.find("NO") == std::string::npos)
            return "the linked OpenCV has a custom HAL";
    }
    if (!baseline)
        return "the linked OpenCV's build information names no CPU baseline";
    return "";
}

/* "" when the path can run now, else why not (the CPU check first: it is the one that can
 * change, through fq_cpu_set_level; OpenCV's build is looked at once, when first needed) */
const char *why_not()
{
    if (!fq_cpu_has(FQ_CPU_AVX2))
        return (fq_cpu_detected() & FQ_CPU_AVX2) ? "AVX2 is masked (FASTQ_CPU or set_cpu_level)"
                                                 : "the CPU has no AVX2 and FMA";
    static const std::string s = opencv_mismatch();
    return s.c_str();
}

constexpr int COEF_SCALE = 1 << 11; /* INTER_RESIZE_COEF_SCALE */
constexpr int VLANES = 8;           /* OpenCV's v_int16::nlanes with a 128-bit baseline */

/* interpolateCubic of OpenCV 4.6, the same expressions in the same order */
void cubic_weights(float x, float *c)
{
    const float A = -0.75f;
    c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
    c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = 1.f - c[0] - c[1] - c[2];
}

int16_t to_short(float v) /* saturate_cast<short>(float): cvRound then saturate */
{
    int r = _mm_cvtss_si32(_mm_set_ss(v));
    return (int16_t)std::min(std::max(r, -32768), 32767);
}

int floor_f(float v) /* cvFloor(float) */
{
    int i = (int)v;
    return i - (i > v);
}

/* Source positions s and the four 11-bit weights of each target position along one axis. */
void axis_table(int s_len, int d_len, std::vector<int> &ofs, std::vector<int16_t> &w)
{
    const double scale = 1. / ((double)d_len / s_len);
    ofs.resize((size_t)d_len);
    w.resize((size_t)d_len * 4);
    for (int d = 0; d < d_len; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        int s = floor_f(f);
        f -= s;
        float c[4];
        cubic_weights(f, c);
        ofs[(size_t)d] = s;
        for (int k = 0; k < 4; k++)
            w[(size_t)d * 4 + k] = to_short(c[k] * COEF_SCALE);
    }
}

struct Scratch {
    std::vector<int> xofs, yofs;
    std::vector<int16_t> xw, yw;
    std::vector<int16_t> pa, pb; /* per target pixel: (a0, a1) x 3 channels, 0, 0 / (a2, a3) ... */
    std::vector<int32_t> rows;   /* 4 horizontal rows of dw * 3 + 4 (the vector stores' overrun) */
};

/* One source row through the horizontal pass (exact int32, the taps clamped to the row). */
#define FQ_RS_AVX2 __attribute__((target("avx2")))

FQ_RS_AVX2 void hpass(const uint8_t *S, int sw, int dw, const Scratch &t, int lo, int hi, int32_t *D)
{
    const __m256i sha = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                         0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i shb = _mm256_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1,
                                         6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    const int *xofs = t.xofs.data();
    const int16_t *pa = t.pa.data(), *pb = t.pb.data();
    int dx = lo;
    /* [lo, hi): every tap inside the row and the 16-byte load too; pairs of target pixels.  The
     * second store of a pair writes one int past the pair (lane 3, zero weights): the next pair
     * or the scalar loop below overwrites it, the last one lands in the row's spare ints. */
    for (; dx + 2 <= hi; dx += 2) {
        const uint8_t *p0 = S + 3 * (xofs[dx] - 1), *p1 = S + 3 * (xofs[dx + 1] - 1);
        __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                            _mm_loadu_si128((const __m128i *)p1), 1);
        __m256i wa = _mm256_loadu_si256((const __m256i *)(pa + (size_t)dx * 8));
        __m256i wb = _mm256_loadu_si256((const __m256i *)(pb + (size_t)dx * 8));
        __m256i r = _mm256_add_epi32(_mm256_madd_epi16(_mm256_shuffle_epi8(v, sha), wa),
                                     _mm256_madd_epi16(_mm256_shuffle_epi8(v, shb), wb));
        _mm_storeu_si128((__m128i *)(D + 3 * dx), _mm256_castsi256_si128(r));
        _mm_storeu_si128((__m128i *)(D + 3 * dx + 3), _mm256_extracti128_si256(r, 1));
    }
    /* the pixels outside the vector range: [0, lo) and [dx, dw), taps clamped to the row */
    auto scalar = [&](int x0, int x1) {
        for (int x = x0; x < x1; x++) {
            const int s = xofs[x];
            const int16_t *a = t.xw.data() + (size_t)x * 4;
            int p[4];
            for (int k = 0; k < 4; k++)
                p[k] = 3 * std::min(std::max(s - 1 + k, 0), sw - 1);
            for (int c = 0; c < 3; c++)
                D[3 * x + c] = S[p[0] + c] * a[0] + S[p[1] + c] * a[1] + S[p[2] + c] * a[2] + S[p[3] + c] * a[3];
        }
    };
    scalar(0, lo);
    scalar(dx, dw);
}

uint8_t sat_u8(int v) { return (uint8_t)std::min(std::max(v, 0), 255); }

/* float32 lane of VResizeCubicVec_32s8u: mul, add, round-half-even, saturate */
uint8_t vfloat1(int32_t r0, int32_t r1, int32_t r2, int32_t r3, const float *b)
{
    float v = (float)r3 * b[3];
    v = (float)r2 * b[2] + v;
    v = (float)r1 * b[1] + v;
    v = (float)r0 * b[0] + v;
    return sat_u8(_mm_cvtss_si32(_mm_set_ss(v)));
}

FQ_RS_AVX2 void vpass(const int32_t *const R[4], const int16_t *beta, uint8_t *dst, int width)
{
    const float scale = 1.f / (COEF_SCALE * COEF_SCALE);
    const float bf[4] = {beta[0] * scale, beta[1] * scale, beta[2] * scale, beta[3] * scale};
    const __m256 b0 = _mm256_set1_ps(bf[0]), b1 = _mm256_set1_ps(bf[1]), b2 = _mm256_set1_ps(bf[2]),
                 b3 = _mm256_set1_ps(bf[3]);
    const int nf = width - width % VLANES;
    int x = 0;
    for (; x + 16 <= nf; x += 16) {
        __m256i q[2];
        for (int h = 0; h < 2; h++) {
            const int o = x + 8 * h;
            __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(R[3] + o))), b3);
            v = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(R[2] + o))), b2), v);
            v = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(R[1] + o))), b1), v);
            v = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(R[0] + o))), b0), v);
            q[h] = _mm256_cvtps_epi32(v);
        }
        __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
        _mm_storeu_si128((__m128i *)(dst + x),
                         _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
    }
    for (; x < nf; x++)
        dst[x] = vfloat1(R[0][x], R[1][x], R[2][x], R[3][x], bf);
    for (; x < width; x++) { /* FixedPtCast<int, uchar, 22>, int32 wrapping as OpenCV's int */
        uint32_t v = (uint32_t)R[0][x] * (uint32_t)beta[0] + (uint32_t)R[1][x] * (uint32_t)beta[1] +
                     (uint32_t)R[2][x] * (uint32_t)beta[2] + (uint32_t)R[3][x] * (uint32_t)beta[3];
        dst[x] = sat_u8((int32_t)(v + (1u << 21)) >> 22);
    }
}

void resize_all(const cv::Mat &src, cv::Mat &dst)
{
    thread_local Scratch t;
    const int sw = src.cols, sh = src.rows, dw = dst.cols, dh = dst.rows;
    axis_table(sw, dw, t.xofs, t.xw);
    axis_table(sh, dh, t.yofs, t.yw);
    t.pa.assign((size_t)dw * 8 + 8, 0);
    t.pb.assign((size_t)dw * 8 + 8, 0);
    int lo = dw, hi = dw; /* the vector range: 1 <= s and 3 (s - 1) + 16 <= 3 sw (so s + 2 < sw) */
    for (int x = dw - 1; x >= 0; x--) {
        const int s = t.xofs[(size_t)x];
        const int16_t *a = t.xw.data() + (size_t)x * 4;
        for (int c = 0; c < 3; c++) {
            t.pa[(size_t)x * 8 + 2 * c] = a[0], t.pa[(size_t)x * 8 + 2 * c + 1] = a[1];
            t.pb[(size_t)x * 8 + 2 * c] = a[2], t.pb[(size_t)x * 8 + 2 * c + 1] = a[3];
        }
        if (3 * s + 13 > 3 * sw)
            hi = x;
        if (s >= 1)
            lo = x;
    }
    if (lo > hi)
        lo = hi;
    const size_t stride = (size_t)dw * 3 + 8;
    t.rows.resize(stride * 4);
    int have[4] = {-1, -1, -1, -1}; /* source row held by each buffer */
    for (int y = 0; y < dh; y++) {
        int need[4]; /* the source rows of this target row, clamped (replicated edges) */
        for (int k = 0; k < 4; k++)
            need[k] = std::min(std::max(t.yofs[(size_t)y] - 1 + k, 0), sh - 1);
        auto held = [&](int row) {
            for (int j = 0; j < 4; j++)
                if (have[j] == row)
                    return j;
            return -1;
        };
        const int32_t *R[4];
        for (int k = 0; k < 4; k++) {
            int slot = held(need[k]);
            if (slot < 0) { /* reuse a buffer none of need[] is in: at most 3 of 4 are */
                slot = 0;
                while (slot < 3 && std::find(need, need + 4, have[slot]) != need + 4)
                    slot++;
                hpass(src.ptr<uint8_t>(need[k]), sw, dw, t, lo, hi, t.rows.data() + stride * (size_t)slot);
                have[slot] = need[k];
            }
            R[k] = t.rows.data() + stride * (size_t)slot;
        }
        vpass(R, t.yw.data() + (size_t)y * 4, dst.ptr<uint8_t>(y), dw * 3);
    }
}

}  // namespace

namespace fqi {

bool resize_cubic_u8c3(const cv::Mat &src, cv::Mat &dst)
{
    if (!g_simd_resize.get() || src.type() != CV_8UC3 || dst.type() != CV_8UC3 ||
        src.empty() || dst.empty() || *why_not())
        return false;
    resize_all(src, dst);
    return true;
}

}  // namespace fqi

extern "C" const char *fq_img_simd_resize_unavailable(void)
{
    return why_not();
}

#else /* not x86-64 */

namespace fqi {
bool resize_cubic_u8c3(const cv::Mat &, cv::Mat &) { return false; }
}  // namespace fqi

extern "C" const char *fq_img_simd_resize_unavailable(void)
{
    return "not an x86-64 build";
}

#endif

extern "C" {
void fq_img_simd_resize_set(int on) { g_simd_resize.set(on); }
int fq_img_simd_resize_enabled(void) { return g_simd_resize.get(); }
}
