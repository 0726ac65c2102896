/* fq_batch_mix.cpp - see fq_batch_mix.h. */
#include "image/fq_batch_mix.h"

#include <cmath>
#include <cstring>

#include "core/fq_cpu.h"
#include "core/fq_rng.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FQ_MIX_X86 1
#else
#define FQ_MIX_X86 0
#endif

namespace {

/* ---- Beta(a, a) from the uniform stream -------------------------------------- */

/* Standard normal by Box-Muller (the cosine branch; one normal per two uniforms). */
double normal(fq_rng *r)
{
    double u1 = 1.0 - fq_rng_uniform(r); /* (0, 1]: log never sees 0 */
    double u2 = fq_rng_uniform(r);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/* log of a Gamma(a, 1) draw, a >= 1: Marsaglia & Tsang (2000). */
double log_gamma_ge1(fq_rng *r, double a)
{
    const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = 1.0 - fq_rng_uniform(r); /* (0, 1] */
        double x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2)
            return std::log(d * v);
        if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v)))
            return std::log(d * v);
    }
}

/* log of a Gamma(a, 1) draw, a > 0 (a < 1: Gamma(a + 1) * U^(1/a), in logs). */
double log_gamma(fq_rng *r, double a)
{
    if (a >= 1.0)
        return log_gamma_ge1(r, a);
    double lg = log_gamma_ge1(r, a + 1.0);
    double u = 1.0 - fq_rng_uniform(r);
    return lg + std::log(u) / a;
}

double beta(fq_rng *r, double a)
{
    double lx = log_gamma(r, a), ly = log_gamma(r, a);
    /* X / (X + Y) = 1 / (1 + exp(ly - lx)); exp overflow gives 0, underflow 1 */
    return 1.0 / (1.0 + std::exp(ly - lx));
}

/* One draw (batch or row) in the documented order. */
void draw_one(const fq_mix_params *p, fq_rng *r, int h, int w, fq_mix_draw *d)
{
    std::memset(d, 0, sizeof *d);
    d->kind = FQ_MIX_NONE;
    d->lam_drawn = 1.0;
    d->lam = 1.0;
    double u_apply = fq_rng_uniform(r);
    double u_switch = fq_rng_uniform(r);
    if (!(u_apply < p->prob))
        return;
    bool cut;
    if (p->mixup_alpha > 0.0 && p->cutmix_alpha > 0.0)
        cut = u_switch < p->switch_prob;
    else
        cut = p->cutmix_alpha > 0.0;
    if (cut && p->minmax) {
        /* timm's rand_bbox_minmax: no Beta draw, lambda is always the area's */
        d->kind = FQ_MIX_CUTMIX;
        d->lam_drawn = std::nan("");
        int64_t hlo = (int64_t)(h * p->cutmix_min), hhi = (int64_t)(h * p->cutmix_max);
        int64_t wlo = (int64_t)(w * p->cutmix_min), whi = (int64_t)(w * p->cutmix_max);
        int64_t ch = hlo + (int64_t)fq_rng_next_below(r, (uint64_t)(hhi - hlo));
        int64_t cw = wlo + (int64_t)fq_rng_next_below(r, (uint64_t)(whi - wlo));
        int64_t y0 = (int64_t)fq_rng_next_below(r, (uint64_t)(h - ch + 1));
        int64_t x0 = (int64_t)fq_rng_next_below(r, (uint64_t)(w - cw + 1));
        d->x0 = (int32_t)x0;
        d->y0 = (int32_t)y0;
        d->x1 = (int32_t)(x0 + cw);
        d->y1 = (int32_t)(y0 + ch);
        d->lam = 1.0 - (double)(cw * ch) / ((double)w * (double)h);
        return;
    }
    double lam = beta(r, cut ? p->cutmix_alpha : p->mixup_alpha);
    d->lam_drawn = lam;
    if (!cut) {
        d->kind = FQ_MIX_MIXUP;
        d->lam = lam;
        return;
    }
    d->kind = FQ_MIX_CUTMIX;
    /* torchvision.transforms.v2.CutMix.make_params */
    int64_t rx = (int64_t)fq_rng_next_below(r, (uint64_t)w);
    int64_t ry = (int64_t)fq_rng_next_below(r, (uint64_t)h);
    double rr = 0.5 * std::sqrt(1.0 - lam);
    int64_t rw = (int64_t)(rr * w), rh = (int64_t)(rr * h);
    int64_t x0 = rx - rw < 0 ? 0 : rx - rw, y0 = ry - rh < 0 ? 0 : ry - rh;
    int64_t x1 = rx + rw > w ? w : rx + rw, y1 = ry + rh > h ? h : ry + rh;
    d->x0 = (int32_t)x0;
    d->y0 = (int32_t)y0;
    d->x1 = (int32_t)x1;
    d->y1 = (int32_t)y1;
    d->lam = p->correct_lam ? 1.0 - (double)((x1 - x0) * (y1 - y0)) / ((double)w * (double)h) : lam;
}

/* Row i's partner and draw. */
int partner_of(const fq_mix_params *p, int i, int n)
{
    if (p->mode == FQ_MIX_PAIR)
        return n - 1 - i;
    return i == 0 ? n - 1 : i - 1;
}

const fq_mix_draw *draw_of(const fq_mix_params *p, const fq_mix_draw *draws, int i, int n)
{
    if (p->mode == FQ_MIX_ELEM)
        return &draws[i];
    if (p->mode == FQ_MIX_PAIR)
        return &draws[i < n - 1 - i ? i : n - 1 - i];
    return &draws[0];
}

/* ---- element conversions ------------------------------------------------------ */

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, bits;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f); /* exact */
        return sign ? -v : v;
    }
    if (e == 31)
        bits = sign | 0x7F800000u | (m << 13);
    else
        bits = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_f16(float f) /* round to nearest even */
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u)
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
    if (ax >= 0x477FF000u) /* >= 65520: rounds to infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half (or the smallest normal) */
        float v;
        std::memcpy(&v, &ax, 4);
        return (uint16_t)(sign | (uint32_t)std::nearbyint(v * 16777216.0f));
    }
    uint32_t rnd = ax + 0xC8000FFFu + ((ax >> 13) & 1u); /* rebias exponent, round half to even */
    return (uint16_t)(sign | (rnd >> 13));
}

float bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_bf16(float f) /* round to nearest even */
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t nan = (uint32_t)((x & 0x7FFFFFFFu) > 0x7F800000u); /* branch-free: the loop vectorizes */
    uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16, quiet = (x >> 16) | 0x40u;
    return (uint16_t)(nan ? quiet : rounded);
}

#if FQ_MIX_X86
/* a = b * m + a * l on whole groups of 8 float16 values; returns how many were done.
 * Two products and a sum (no FMA) and round-to-nearest-even stores: bit-identical
 * to the scalar loop.  No CPU check here: mix_row calls it after fq_cpu_has(FQ_CPU_F16C). */
__attribute__((target("avx,f16c"))) size_t mix_f16_f16c(uint16_t *a, const uint16_t *b, size_t count, float l,
                                                         float m)
{
    const __m256 vl = _mm256_set1_ps(l), vm = _mm256_set1_ps(m);
    size_t k = 0;
    for (; k + 8 <= count; k += 8) {
        __m256 va = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + k)));
        __m256 vb = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + k)));
        __m256 v = _mm256_add_ps(_mm256_mul_ps(vb, vm), _mm256_mul_ps(va, vl));
        _mm_storeu_si128((__m128i *)(a + k), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return k;
}
#endif

size_t elem_size(int dtype) { return dtype == FQ_MIX_U8 ? 1 : dtype == FQ_MIX_F32 ? 4 : 2; }

/* a = lam * a + (1 - lam) * b over count elements (b may be the saved copy). */
void mix_row(int dtype, void *a, const void *b, size_t count, double lam)
{
    const float l = (float)lam, m = (float)(1.0 - lam);
    switch (dtype) {
    case FQ_MIX_F32: {
        float *__restrict pa = (float *)a;
        const float *pb = (const float *)b;
        for (size_t k = 0; k < count; k++)
            pa[k] = pb[k] * m + pa[k] * l;
        break;
    }
    case FQ_MIX_U8: {
        uint8_t *__restrict pa = (uint8_t *)a;
        const uint8_t *pb = (const uint8_t *)b;
        for (size_t k = 0; k < count; k++) {
            /* v >= 0 (l, m >= 0), so truncation is floor(v + 0.5); vectorizes, floorf does not */
            int v = (int)((float)pb[k] * m + (float)pa[k] * l + 0.5f);
            pa[k] = (uint8_t)(v > 255 ? 255 : v);
        }
        break;
    }
    case FQ_MIX_F16: {
        uint16_t *__restrict pa = (uint16_t *)a;
        const uint16_t *__restrict pb = (const uint16_t *)b;
        size_t k = 0;
#if FQ_MIX_X86
        if (fq_cpu_has(FQ_CPU_F16C))
            k = mix_f16_f16c(pa, pb, count, l, m); /* the same roundings, 8 at a time */
#endif
        for (; k < count; k++)
            pa[k] = f32_to_f16(f16_to_f32(pb[k]) * m + f16_to_f32(pa[k]) * l);
        break;
    }
    default: {
        uint16_t *__restrict pa = (uint16_t *)a;
        const uint16_t *__restrict pb = (const uint16_t *)b;
        for (size_t k = 0; k < count; k++)
            pa[k] = f32_to_bf16(bf16_to_f32(pb[k]) * m + bf16_to_f32(pa[k]) * l);
        break;
    }
    }
}

/* a[box] = b[box] for one image of h x w x c (NHWC) or c x h x w (NCHW). */
void cut_row(size_t es, int layout, uint8_t *a, const uint8_t *b, int h, int w, int c, const fq_mix_draw *d)
{
    if (d->x1 <= d->x0 || d->y1 <= d->y0)
        return;
    if (layout == FQ_MIX_NHWC) {
        size_t line = (size_t)w * (size_t)c * es, seg = (size_t)(d->x1 - d->x0) * (size_t)c * es;
        for (int y = d->y0; y < d->y1; y++) {
            size_t off = (size_t)y * line + (size_t)d->x0 * (size_t)c * es;
            std::memcpy(a + off, b + off, seg);
        }
        return;
    }
    size_t line = (size_t)w * es, plane = (size_t)h * line, seg = (size_t)(d->x1 - d->x0) * es;
    for (int ch = 0; ch < c; ch++)
        for (int y = d->y0; y < d->y1; y++) {
            size_t off = (size_t)ch * plane + (size_t)y * line + (size_t)d->x0 * es;
            std::memcpy(a + off, b + off, seg);
        }
}

/* Swap a[box] and b[box] (mode pair's CutMix); tmp holds one box line. */
void swap_box(size_t es, int layout, uint8_t *a, uint8_t *b, uint8_t *tmp, int h, int w, int c,
              const fq_mix_draw *d)
{
    if (d->x1 <= d->x0 || d->y1 <= d->y0)
        return;
    size_t line, plane, seg, x0;
    int planes;
    if (layout == FQ_MIX_NHWC) {
        line = (size_t)w * (size_t)c * es;
        seg = (size_t)(d->x1 - d->x0) * (size_t)c * es;
        x0 = (size_t)d->x0 * (size_t)c * es;
        plane = 0;
        planes = 1;
    } else {
        line = (size_t)w * es;
        seg = (size_t)(d->x1 - d->x0) * es;
        x0 = (size_t)d->x0 * es;
        plane = (size_t)h * line;
        planes = c;
    }
    for (int ch = 0; ch < planes; ch++)
        for (int y = d->y0; y < d->y1; y++) {
            size_t off = (size_t)ch * plane + (size_t)y * line + x0;
            std::memcpy(tmp, a + off, seg);
            std::memcpy(a + off, b + off, seg);
            std::memcpy(b + off, tmp, seg);
        }
}

bool read_label(const void *labels, int ltype, int i, int64_t *out)
{
    switch (ltype) {
    case FQ_MIX_L_I64: *out = ((const int64_t *)labels)[i]; return true;
    case FQ_MIX_L_I32: *out = ((const int32_t *)labels)[i]; return true;
    case FQ_MIX_L_U8: *out = ((const uint8_t *)labels)[i]; return true;
    case FQ_MIX_L_I16: *out = ((const int16_t *)labels)[i]; return true;
    case FQ_MIX_L_U16: *out = ((const uint16_t *)labels)[i]; return true;
    case FQ_MIX_L_I8: *out = ((const int8_t *)labels)[i]; return true;
    case FQ_MIX_L_U32: *out = ((const uint32_t *)labels)[i]; return true;
    case FQ_MIX_L_U64: {
        uint64_t v = ((const uint64_t *)labels)[i];
        *out = v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
        return true;
    }
    default: return false;
    }
}

} // namespace

extern "C" {

int fq_mix_check(const fq_mix_params *p, fq_err *err)
{
    if (!(p->mixup_alpha >= 0.0) || !(p->cutmix_alpha >= 0.0) || !std::isfinite(p->mixup_alpha) ||
        !std::isfinite(p->cutmix_alpha))
        return fq_set_err(err, FQ_E_INVALID, "mix: alphas must be finite and >= 0 (got mixup_alpha=%g, "
                          "cutmix_alpha=%g)", p->mixup_alpha, p->cutmix_alpha);
    if (!(p->mixup_alpha > 0.0) && !(p->cutmix_alpha > 0.0))
        return fq_set_err(err, FQ_E_INVALID, "mix: mixup_alpha or cutmix_alpha must be > 0");
    if (!(p->switch_prob >= 0.0 && p->switch_prob <= 1.0) || !(p->prob >= 0.0 && p->prob <= 1.0))
        return fq_set_err(err, FQ_E_INVALID, "mix: switch_prob and prob must be in [0, 1] (got %g, %g)",
                          p->switch_prob, p->prob);
    if (!(p->label_smoothing >= 0.0 && p->label_smoothing < 1.0))
        return fq_set_err(err, FQ_E_INVALID, "mix: label_smoothing must be in [0, 1) (got %g)", p->label_smoothing);
    if (p->num_classes < 1)
        return fq_set_err(err, FQ_E_INVALID, "mix: num_classes must be >= 1 (got %lld)", (long long)p->num_classes);
    if (p->mode != FQ_MIX_BATCH && p->mode != FQ_MIX_ELEM && p->mode != FQ_MIX_PAIR)
        return fq_set_err(err, FQ_E_INVALID, "mix: unknown mode %d", p->mode);
    if (p->minmax && !(p->cutmix_min >= 0.0 && p->cutmix_min < p->cutmix_max && p->cutmix_max <= 1.0))
        return fq_set_err(err, FQ_E_INVALID, "mix: cutmix_minmax must have 0 <= min < max <= 1 (got %g, %g)",
                          p->cutmix_min, p->cutmix_max);
    if (p->minmax && !(p->cutmix_alpha > 0.0))
        return fq_set_err(err, FQ_E_INVALID, "mix: cutmix_minmax needs cutmix_alpha > 0 (timm sets it to 1)");
    return FQ_OK;
}

int fq_mix_beta_samples(uint64_t seed, double a, int64_t n, double *out, fq_err *err)
{
    if (!(a > 0.0) || !std::isfinite(a) || n < 0)
        return fq_set_err(err, FQ_E_INVALID, "mix: Beta(a, a) needs a finite a > 0 (got %g)", a);
    fq_rng r;
    fq_rng_init(&r, seed, 0, 0);
    for (int64_t i = 0; i < n; i++)
        out[i] = beta(&r, a);
    return FQ_OK;
}

int fq_mix_draw_count(const fq_mix_params *p, int n)
{
    return p->mode == FQ_MIX_ELEM ? n : p->mode == FQ_MIX_PAIR ? n / 2 : 1;
}

int fq_mix_draw_batch(const fq_mix_params *p, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h, int w,
                      fq_mix_draw *draws, fq_err *err)
{
    int rc = fq_mix_check(p, err);
    if (rc != FQ_OK)
        return rc;
    if (n < 1 || h < 1 || w < 1)
        return fq_set_err(err, FQ_E_INVALID, "mix: a batch of %d rows of %d x %d", n, h, w);
    if (p->mode == FQ_MIX_PAIR && n % 2 != 0)
        return fq_set_err(err, FQ_E_INVALID, "mix: mode 'pair' needs an even number of rows (got %d)", n);
    if (p->minmax && ((int64_t)(h * p->cutmix_min) >= (int64_t)(h * p->cutmix_max) ||
                      (int64_t)(w * p->cutmix_min) >= (int64_t)(w * p->cutmix_max)))
        return fq_set_err(err, FQ_E_INVALID, "mix: cutmix_minmax (%g, %g) gives no box size for %d x %d images "
                          "(int(size * min) must be < int(size * max))", p->cutmix_min, p->cutmix_max, h, w);
    fq_rng r;
    fq_rng_init(&r, seed, epoch, FQ_MIX_RNG_INDEX(batch));
    int count = fq_mix_draw_count(p, n);
    for (int i = 0; i < count; i++)
        draw_one(p, &r, h, w, &draws[i]);
    return FQ_OK;
}

int fq_mix_apply(const fq_mix_params *p, const fq_mix_draw *draws, void *images, int dtype, int layout, int n,
                 int h, int w, int c, const void *labels, int ltype, float *soft, void *tmp, fq_err *err)
{
    if (dtype < FQ_MIX_U8 || dtype > FQ_MIX_BF16 || (layout != FQ_MIX_NHWC && layout != FQ_MIX_NCHW) || n < 1 ||
        h < 1 || w < 1 || c < 1)
        return fq_set_err(err, FQ_E_INVALID, "mix: bad image batch (dtype %d, layout %d, %d x %d x %d x %d)", dtype,
                          layout, n, h, w, c);
    const int64_t K = p->num_classes;
    /* labels first: a bad one leaves the images untouched */
    for (int i = 0; i < n; i++) {
        int64_t l = 0;
        if (!read_label(labels, ltype, i, &l))
            return fq_set_err(err, FQ_E_INVALID, "mix: unknown label type %d", ltype);
        if (l < 0 || l >= K) {
            fq_set_err(err, FQ_E_INVALID, "mix: label %lld of batch row %d is outside [0, num_classes=%lld)",
                       (long long)l, i, (long long)K);
            err->index = i;
            return FQ_E_INVALID;
        }
    }
    if (p->mode == FQ_MIX_PAIR && n % 2 != 0)
        return fq_set_err(err, FQ_E_INVALID, "mix: mode 'pair' needs an even number of rows (got %d)", n);
    const double off = p->label_smoothing / (double)K, on = 1.0 - p->label_smoothing + off;
    for (int i = 0; i < n; i++) {
        const fq_mix_draw *d = draw_of(p, draws, i, n);
        int pi = partner_of(p, i, n);
        int64_t li = 0, lp = 0;
        read_label(labels, ltype, i, &li);
        read_label(labels, ltype, pi, &lp);
        float *row = soft + (size_t)i * (size_t)K;
        for (int64_t k = 0; k < K; k++)
            row[k] = (float)off;
        if (li == lp)
            row[li] = (float)on;
        else {
            row[li] = (float)(d->lam * on + (1.0 - d->lam) * off);
            row[lp] = (float)((1.0 - d->lam) * on + d->lam * off);
        }
    }
    const size_t es = elem_size(dtype), count = (size_t)h * (size_t)w * (size_t)c, rb = count * es;
    uint8_t *base = (uint8_t *)images;
    bool any = false;
    for (int i = 0; i < fq_mix_draw_count(p, n); i++)
        any = any || draws[i].kind != FQ_MIX_NONE;
    if (!any)
        return FQ_OK;
    if (p->mode == FQ_MIX_PAIR) {
        /* rows i and j = n - 1 - i read each other: keep row i's original in tmp */
        for (int i = 0; i < n / 2; i++) {
            const fq_mix_draw *d = &draws[i];
            uint8_t *a = base + (size_t)i * rb, *b = base + (size_t)(n - 1 - i) * rb;
            if (d->kind == FQ_MIX_MIXUP) {
                std::memcpy(tmp, a, rb);
                mix_row(dtype, a, b, count, d->lam);
                mix_row(dtype, b, tmp, count, d->lam);
            } else if (d->kind == FQ_MIX_CUTMIX) {
                swap_box(es, layout, a, b, (uint8_t *)tmp, h, w, c, d);
            }
        }
        return FQ_OK;
    }
    /* row i reads the original row i - 1, so go from the last row down,
     * row 0 reading the saved copy of the original last row */
    std::memcpy(tmp, base + (size_t)(n - 1) * rb, rb);
    for (int i = n - 1; i >= 0; i--) {
        const fq_mix_draw *d = draw_of(p, draws, i, n);
        uint8_t *a = base + (size_t)i * rb;
        const uint8_t *b = i == 0 ? (const uint8_t *)tmp : base + (size_t)(i - 1) * rb;
        if (d->kind == FQ_MIX_MIXUP)
            mix_row(dtype, a, b, count, d->lam);
        else if (d->kind == FQ_MIX_CUTMIX)
            cut_row(es, layout, a, b, h, w, c, d);
    }
    return FQ_OK;
}

} // extern "C"
