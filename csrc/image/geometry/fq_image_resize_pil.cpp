/* fq_image_resize_pil.cpp - Pillow's Image.resize of 8-bit images (modes "L" / "RGB"), the
 * same bytes, for the pil_* interpolations (torchvision's resize of PIL images; its uint8
 * tensor resize with antialias=True follows the same scheme).
 *
 * The scheme (Pillow, src/libImaging/Resample.c and Geometry.c; written here from its
 * description, verified against the installed Pillow by tests/image/test_resize_pil.py):
 *
 *   convolution filters (bilinear, bicubic a = -0.5, lanczos 3, box, hamming): per output
 *   index i of an axis, scale s = in / out, fs = max(s, 1), support = filter support * fs,
 *   centre c = (i + 0.5) s; taps j from (int)(c - support + 0.5) (>= 0) to
 *   (int)(c + support + 0.5) (<= in), weight filter((j - c + 0.5) / fs), normalised by their
 *   sum in double, then rounded half away from zero to 22-bit fixed point
 *   (PRECISION_BITS = 32 - 8 - 2).  A pixel is (2^21 + sum pixel * weight) >> 22 clipped to
 *   [0, 255].  A pass runs only when its side changes; with both, the first pass writes an
 *   8-bit image (rounded, clipped) the second reads: horizontal first over only the rows the
 *   vertical pass reads, or vertical first where Pillow 13 does that (vertical_first).
 *
 *   nearest: Pillow's scale-affine sampler: x0 = 0.5 s, the source index of output x is
 *   (int) of x0 + s + s + ... (x additions, in double; not floor((x + 0.5) s), which differs
 *   on some sizes), per axis.
 *
 * The coefficient arithmetic must round as Pillow's C does: double throughout, no
 * fused multiply-add (GCC does not contract in -std=c++17, and the x86-64 baseline has no
 * FMA).  The passes are plain integer C++ (the vertical pass accumulates a row at a time,
 * which the compiler vectorises; integer sums are the same in any order).  State lives in
 * thread-local buffers: reentrant, one resize at a time per thread. */
#include "image/internal/fq_image_resize_pil.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fq_cpu.h"

namespace fqi {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr double kPi = 3.14159265358979323846; /* M_PI */

double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double bilinear_filter(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_filter(double x)
{
    if (x < 0.0)
        x = -x;
    if (x == 0.0)
        return 1.0;
    if (x >= 1.0)
        return 0.0;
    x = x * kPi;
    /* Pillow writes the window's constants as floats (0.54f, 0.46f): kept */
    return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double bicubic_filter(double x)
{
    constexpr double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

double sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x = x * kPi;
    return std::sin(x) / x;
}

double lanczos_filter(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0; }

struct Filter {
    double (*f)(double);
    double support;
};

bool filter_of(int interp, Filter *out)
{
    switch (interp) {
    case FQ_INTERP_PIL_BOX: *out = {box_filter, 0.5}; return true;
    case FQ_INTERP_PIL_BILINEAR: *out = {bilinear_filter, 1.0}; return true;
    case FQ_INTERP_PIL_HAMMING: *out = {hamming_filter, 1.0}; return true;
    case FQ_INTERP_PIL_BICUBIC: *out = {bicubic_filter, 2.0}; return true;
    case FQ_INTERP_PIL_LANCZOS: *out = {lanczos_filter, 3.0}; return true;
    default: return false;
    }
}

/* One axis: out_size windows of ksize fixed-point weights; window i starts at source index
 * start[i] and has len[i] taps (the rest of its ksize slots are 0). */
struct Axis {
    int ksize = 0;
    std::vector<int> start, len;
    std::vector<int32_t> k;
    std::vector<double> w; /* one window's double weights */
};

void make_axis(int in_size, int out_size, const Filter &flt, Axis &ax)
{
    /* Pillow: scale = (double)(in1 - in0) / out with the box as floats; the box is the
     * whole axis here (in0 = 0, in1 = in_size exactly, in_size <= 2^24) */
    const double scale = (double)in_size / out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = flt.support * filterscale;
    /* support <= 3 * in_size / out_size <= 3 * 2^17: no overflow */
    const int ksize = (int)std::ceil(support) * 2 + 1;
    ax.ksize = ksize;
    ax.start.resize((size_t)out_size);
    ax.len.resize((size_t)out_size);
    ax.k.assign((size_t)out_size * ksize, 0);
    ax.w.resize((size_t)ksize);
    const double ss = 1.0 / filterscale;
    for (int i = 0; i < out_size; i++) {
        const double center = 0.0 + (i + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        if (xmax > ksize) /* cannot happen (the window is at most 2 support + 1 wide); kept safe */
            xmax = ksize;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            const double wt = flt.f((x + xmin - center + 0.5) * ss);
            ax.w[(size_t)x] = wt;
            ww += wt;
        }
        int32_t *k = &ax.k[(size_t)i * ksize];
        for (int x = 0; x < xmax; x++) {
            double wt = ax.w[(size_t)x];
            if (ww != 0.0)
                wt /= ww;
            k[x] = wt < 0 ? (int32_t)(-0.5 + wt * (1 << kPrecisionBits))
                          : (int32_t)(0.5 + wt * (1 << kPrecisionBits));
        }
        ax.start[(size_t)i] = xmin;
        ax.len[(size_t)i] = xmax < 0 ? 0 : xmax;
    }
}

inline uint8_t clip8(int32_t v)
{
    const int32_t s = v >> kPrecisionBits; /* arithmetic shift: floor, as Pillow's table index */
    return (uint8_t)(s < 0 ? 0 : (s > 255 ? 255 : s));
}

/* rows [0, rows) of src (already offset to the first needed row) -> dst, width by ax.  R rows
 * at a time share each window's bounds and weight loads (R independent sums per weight). */
template <int C, int R>
void horizontal_rows(const uint8_t *src, size_t sstep, const Axis &ax, int out_w, uint8_t *dst, size_t dstep)
{
    const int ksize = ax.ksize;
    for (int xx = 0; xx < out_w; xx++) {
        const int32_t *k = &ax.k[(size_t)xx * ksize];
        const size_t off = (size_t)ax.start[(size_t)xx] * C;
        const int n = ax.len[(size_t)xx];
        int32_t acc[R][C];
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++)
                acc[r][c] = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < n; x++) {
            const int32_t kx = k[x];
            for (int r = 0; r < R; r++) {
                const uint8_t *p = src + (size_t)r * sstep + off + (size_t)x * C;
                for (int c = 0; c < C; c++)
                    acc[r][c] += (int32_t)p[c] * kx;
            }
        }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++)
                dst[(size_t)r * dstep + (size_t)xx * C + c] = clip8(acc[r][c]);
    }
}

template <int C>
void horizontal(const uint8_t *src, size_t sstep, int rows, const Axis &ax, int out_w, uint8_t *dst, size_t dstep)
{
    int y = 0;
    for (; y + 4 <= rows; y += 4)
        horizontal_rows<C, 4>(src + (size_t)y * sstep, sstep, ax, out_w, dst + (size_t)y * dstep, dstep);
    for (; y < rows; y++)
        horizontal_rows<C, 1>(src + (size_t)y * sstep, sstep, ax, out_w, dst + (size_t)y * dstep, dstep);
}

void horizontal_any(int C, const uint8_t *src, size_t sstep, int rows, const Axis &ax, int out_w, uint8_t *dst,
                    size_t dstep, int in_w, bool avx2)
{
#if defined(__x86_64__) || defined(__i386__) /* the AVX2 passes exist on x86 only; elsewhere avx2 is always false */
    if (avx2) {
        resize_pil_h_avx2(src, sstep, rows, C, in_w, ax.start.data(), ax.len.data(), ax.k.data(), ax.ksize, out_w,
                          dst, dstep);
        return;
    }
#else
    (void)avx2, (void)in_w;
#endif
    switch (C) {
    case 1: horizontal<1>(src, sstep, rows, ax, out_w, dst, dstep); break;
    case 2: horizontal<2>(src, sstep, rows, ax, out_w, dst, dstep); break;
    case 3: horizontal<3>(src, sstep, rows, ax, out_w, dst, dstep); break;
    default: horizontal<4>(src, sstep, rows, ax, out_w, dst, dstep); break;
    }
}

/* src rows indexed by ax.start (relative to src) -> out_h rows of dst; n = bytes per row */
void vertical(const uint8_t *src, size_t sstep, size_t n, const Axis &ax, int out_h, uint8_t *dst, size_t dstep,
              std::vector<int32_t> &acc, bool avx2)
{
#if defined(__x86_64__) || defined(__i386__)
    if (avx2) {
        resize_pil_v_avx2(src, sstep, n, ax.start.data(), ax.len.data(), ax.k.data(), ax.ksize, out_h, dst, dstep);
        return;
    }
#else
    (void)avx2;
#endif
    acc.resize(n);
    int32_t *a = acc.data();
    for (int yy = 0; yy < out_h; yy++) {
        const int32_t *k = &ax.k[(size_t)yy * ax.ksize];
        const int y0 = ax.start[(size_t)yy], len = ax.len[(size_t)yy];
        for (size_t i = 0; i < n; i++)
            a[i] = 1 << (kPrecisionBits - 1);
        for (int y = 0; y < len; y++) {
            const uint8_t *row = src + (size_t)(y0 + y) * sstep;
            const int32_t ky = k[y];
            for (size_t i = 0; i < n; i++)
                a[i] += (int32_t)row[i] * ky;
        }
        uint8_t *d = dst + (size_t)yy * dstep;
        for (size_t i = 0; i < n; i++)
            d[i] = clip8(a[i]);
    }
}

/* Pillow's NEAREST: per axis the accumulated double source coordinate */
void nearest_table(int in_size, int out_size, std::vector<int> &t)
{
    t.resize((size_t)out_size);
    const double s = (double)in_size / out_size;
    double xo = 0.0 + s * 0.5;
    for (int x = 0; x < out_size; x++) {
        int xin = xo < 0.0 ? -1 : (int)xo;
        /* Pillow leaves an out-of-range index's pixel as it was; it cannot occur for these
         * tables (the last coordinate is about in - s / 2) */
        t[(size_t)x] = std::min(std::max(xin, 0), in_size - 1);
        xo += s;
    }
}

void nearest(const cv::Mat &src, cv::Mat &dst, int C, std::vector<int> &tx, std::vector<int> &ty)
{
    nearest_table(src.cols, dst.cols, tx);
    nearest_table(src.rows, dst.rows, ty);
    for (int y = 0; y < dst.rows; y++) {
        const uint8_t *s = src.ptr<uint8_t>(ty[(size_t)y]);
        uint8_t *d = dst.ptr<uint8_t>(y);
        if (C == 3) {
            for (int x = 0; x < dst.cols; x++) {
                const uint8_t *p = s + (size_t)tx[(size_t)x] * 3;
                d[3 * x] = p[0], d[3 * x + 1] = p[1], d[3 * x + 2] = p[2];
            }
        } else if (C == 1) {
            for (int x = 0; x < dst.cols; x++)
                d[x] = s[tx[(size_t)x]];
        } else {
            for (int x = 0; x < dst.cols; x++)
                std::memcpy(d + (size_t)x * C, s + (size_t)tx[(size_t)x] * C, (size_t)C);
        }
    }
}

/* Which pass runs first where both run.  Pillow's published Resample.c (through 12.x) always
 * runs the horizontal one first; the installed Pillow 13.0.0 runs the vertical one first when
 * the height shrinks by more than twice as many pixels as the width does, max(in_h - out_h, 0)
 * > 2 max(in_w - out_w, 0) (inferred from its output: it reproduces every both-axes case
 * tests/image/test_resize_pil.py draws; the two orders round the intermediate image
 * differently).  fastq follows 13.0.0, the version its tests compare with. */
bool vertical_first(int in_h, int in_w, int out_h, int out_w)
{
    const int64_t dy = std::max(in_h - out_h, 0), dx = std::max(in_w - out_w, 0);
    return dy > 2 * dx;
}

struct Scratch {
    Axis h, v;
    std::vector<uint8_t> tmp;
    std::vector<int32_t> acc;
    std::vector<int> tx, ty;
};

}  // namespace

bool resize_pil_u8(const cv::Mat &src, cv::Mat &dst, int interp)
{
    if (!is_pil_interp(interp) || src.depth() != CV_8U || src.channels() < 1 || src.channels() > 4 ||
        dst.type() != src.type() || src.dims != 2 || dst.dims != 2 || src.empty() || dst.empty())
        return false;
    thread_local Scratch sc;
    const int C = src.channels();
    if (interp == FQ_INTERP_PIL_NEAREST) {
        nearest(src, dst, C, sc.tx, sc.ty);
        return true;
    }
    Filter flt;
    if (!filter_of(interp, &flt))
        return false;
    const int in_w = src.cols, in_h = src.rows, out_w = dst.cols, out_h = dst.rows;
    const bool need_h = out_w != in_w, need_v = out_h != in_h;
    if (!need_h && !need_v) { /* Pillow copies (Exec::resize_to never asks) */
        src.copyTo(dst);
        return true;
    }
    /* the AVX2 passes (fq_image_resize_pil_avx2.cpp) give the same bytes; asked once per call */
    const bool avx2 = fq_cpu_has(FQ_CPU_AVX2) != 0;
    make_axis(in_h, out_h, flt, sc.v);
    if (need_h && need_v && vertical_first(in_h, in_w, out_h, out_w)) {
        make_axis(in_w, out_w, flt, sc.h);
        const size_t row = (size_t)in_w * C;
        sc.tmp.resize(row * (size_t)out_h);
        vertical(src.data, src.step[0], row, sc.v, out_h, sc.tmp.data(), row, sc.acc, avx2);
        horizontal_any(C, sc.tmp.data(), row, out_h, sc.h, out_w, dst.data, dst.step[0], in_w, avx2);
        return true;
    }
    const int first = sc.v.start[0];
    const int last = sc.v.start[(size_t)out_h - 1] + sc.v.len[(size_t)out_h - 1];
    const uint8_t *vsrc = src.data;
    size_t vstep = src.step[0];
    if (need_h) {
        make_axis(in_w, out_w, flt, sc.h);
        if (!need_v) { /* every row, straight into dst */
            horizontal_any(C, src.data, src.step[0], in_h, sc.h, out_w, dst.data, dst.step[0], in_w, avx2);
            return true;
        }
        const uint8_t *hsrc = src.ptr<uint8_t>(first);
        const size_t row = (size_t)out_w * C;
        sc.tmp.resize(row * (size_t)(last - first));
        horizontal_any(C, hsrc, src.step[0], last - first, sc.h, out_w, sc.tmp.data(), row, in_w, avx2);
        for (int &s : sc.v.start)
            s -= first;
        vsrc = sc.tmp.data(), vstep = row;
    }
    vertical(vsrc, vstep, (size_t)dst.cols * C, sc.v, out_h, dst.data, dst.step[0], sc.acc, avx2);
    return true;
}

}  // namespace fqi
