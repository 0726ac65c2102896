/* fq_image_aug_model_garden.cpp - GaussianNoise (torchvision 0.29 v2 gaussian_noise, its uint8
 * kernel) and the ops of TF Model Garden's policies where TF's definitions differ from the
 * shared primitives (tf_apply; fq_image_aug_model_garden_policy.cpp draws them).  Semantics:
 * docs/ops.md.  Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <opencv2/core.hpp>

namespace fqi {

/* ---- GaussianNoise ------------------------------------------------------------------ */

const char *noise_check(const fq_op &op)
{
    const AugNoise &q = params<AugNoise>(op);
    if (!(std::isfinite(q.mean) && std::fabs(q.mean) <= 10))
        return "mean must be a finite number in [-10, 10]";
    if (!(std::isfinite(q.sigma) && q.sigma >= 0 && q.sigma <= 10))
        return "sigma must be in [0, 10]";
    if (!(q.clip == 0 || q.clip == 1))
        return "clip must be 0 or 1";
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

/* u < p decides; when applied, one u64 from the sample's stream is the key of the noise
 * stream (params[0], params[1]: its high and low 32 bits, as CustomOp) */
int plan_noise(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugNoise &q = params<AugNoise>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    r.factor[0] = q.sigma;
    if (r.applied) {
        const uint64_t key = fq_rng_next_u64(rng);
        r.params[0] = (double)(key >> 32), r.params[1] = (double)(key & 0xFFFFFFFFu);
    }
    return FQ_OK;
}

/* torchvision 0.29 gaussian_noise_image on uint8: element i (row-major over rows, columns,
 * channels of the current image) takes u1, u2 (fq_rng_uniform, two per element) from the
 * stream {state = key}; z = float32(sqrt(-2 ln(1 - u1)) cos(2 pi u2)) (Box-Muller, cosine
 * branch); noise = int16(trunc(float32(mean * 255) + z * float32(sigma * 255))) (two float32
 * roundings: torch's mul then add); out = x + noise, clamped to [0, 255] when clip, else
 * wrapped modulo 256 (torch's int16 -> uint8) */
void noise_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    e.materialize_flips();
    const AugNoise &q = params<AugNoise>(op);
    const float m = (float)(q.mean * 255), sd = (float)(q.sigma * 255);
    fq_rng g{((uint64_t)r.params[0] << 32) | (uint64_t)r.params[1]};
    const int H = e.cur.rows, W = e.cur.cols * e.cur.channels();
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    for (int y = 0; y < H; y++) {
        const uint8_t *s = e.cur.ptr<uint8_t>(y);
        uint8_t *o = d.ptr<uint8_t>(y);
        for (int x = 0; x < W; x++) {
            const double u1 = fq_rng_uniform(&g), u2 = fq_rng_uniform(&g);
            const float z = (float)(std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2));
            const float t = z * sd;
            const int n = (int)(m + t); /* |n| < 2^15: mean and sigma <= 10, |z| < 8.6 */
            const int v = s[x] + n;
            o[x] = q.clip != 0 ? (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v)) : (uint8_t)(v & 0xFF);
        }
    }
    e.set(d);
}

/* ---- TF Model Garden ops (augment.py, tf-models-official 2.20) ---------------------- */

namespace {

inline uint8_t sat_trunc(float v) { return (uint8_t)(v < 0.f ? 0.f : (v > 255.f ? 255.f : v)); }

/* blend(image1, image2, f) = uint8(clip(image1 + f32(f) * (image2 - image1))) in float32 */
inline uint8_t tf_blend(float a, float b, float f) { return sat_trunc(a + f * (b - a)); }

/* per channel: lo, hi; hi > lo: trunc(clip(x * s + o)), s = 255 / (hi - lo), o = -lo * s (float32) */
void tf_autocontrast(Exec &e)
{
    const int c = e.cur.channels();
    int lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (int y = 0; y < e.cur.rows; y++) {
        const uint8_t *s = e.cur.ptr<uint8_t>(y);
        for (int x = 0; x < e.cur.cols * c; x += c)
            for (int k = 0; k < c; k++)
                lo[k] = std::min(lo[k], (int)s[x + k]), hi[k] = std::max(hi[k], (int)s[x + k]);
    }
    uint8_t lut[3][256];
    for (int k = 0; k < c; k++) {
        const float l = (float)lo[k], sc = 255.0f / ((float)hi[k] - l), off = -l * sc;
        for (int v = 0; v < 256; v++) {
            if (hi[k] <= lo[k]) {
                lut[k][v] = (uint8_t)v;
                continue;
            }
            const float t = (float)v * sc;
            lut[k][v] = sat_trunc(t + off);
        }
    }
    apply_luts(e, lut);
}

/* tf.image.rgb_to_grayscale on uint8: g = x * f32(1/255) per channel, gray = (R w0 + G w1)
 * + B w2 (float32), uint8(trunc(gray * 255.5)) */
inline uint8_t tf_gray(const uint8_t *p)
{
    const float s = (float)(1.0 / 255.0);
    const float g = (float)p[0] * s * 0.2989f + (float)p[1] * s * 0.5870f + (float)p[2] * s * 0.1140f;
    return (uint8_t)(g * 255.5f);
}

/* px(s, o) on every RGB pixel of the current image into a new buffer (no-op unless 3 channels) */
template <class F> void tf_per_pixel(Exec &e, F px)
{
    if (e.cur.channels() != 3)
        return;
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    for (int y = 0; y < e.cur.rows; y++) {
        const uint8_t *s = e.cur.ptr<uint8_t>(y);
        uint8_t *o = d.ptr<uint8_t>(y);
        for (int x = 0; x < e.cur.cols * 3; x += 3)
            px(s + x, o + x);
    }
    e.set(d);
}

void tf_color(Exec &e, float f)
{
    tf_per_pixel(e, [f](const uint8_t *s, uint8_t *o) {
        const float g = (float)tf_gray(s);
        for (int k = 0; k < 3; k++)
            o[k] = tf_blend(g, (float)s[k], f);
    });
}

/* tf.image.adjust_contrast on uint8: x = v * f32(1/255); m = per-channel mean (double sum,
 * float32); y = (x - m) * f + m; uint8 = trunc(clip(y * 255.5, 0, 255)) */
void tf_contrast(Exec &e, float f)
{
    const int c = e.cur.channels();
    double sum[3] = {0, 0, 0};
    const float s = (float)(1.0 / 255.0);
    for (int y = 0; y < e.cur.rows; y++) {
        const uint8_t *p = e.cur.ptr<uint8_t>(y);
        for (int x = 0; x < e.cur.cols * c; x += c)
            for (int k = 0; k < c; k++)
                sum[k] += (float)p[x + k] * s;
    }
    uint8_t lut[3][256];
    for (int k = 0; k < c; k++) {
        const float m = (float)(sum[k] / ((double)e.cur.rows * e.cur.cols));
        for (int v = 0; v < 256; v++) {
            const float t = ((float)v * s - m) * f + m;
            lut[k][v] = sat_trunc(t * 255.5f);
        }
    }
    apply_luts(e, lut);
}

/* interior: d = trunc(clip(conv([[1 1 1] [1 5 1] [1 1 1]] / 13))) (float32); border: x;
 * out = blend(d, x, f) */
void tf_sharpness(Exec &e, float f)
{
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    if (H <= 2 || W <= 2) /* no interior: blend(x, x) = x */
        return;
    cv::Mat d = e.next(H, W, e.cur.type());
    e.cur.copyTo(d);
    const float w1 = 1.0f / 13.0f, w5 = 5.0f / 13.0f;
    for (int y = 1; y < H - 1; y++) {
        const uint8_t *u = e.cur.ptr<uint8_t>(y - 1), *m = e.cur.ptr<uint8_t>(y), *b = e.cur.ptr<uint8_t>(y + 1);
        uint8_t *o = d.ptr<uint8_t>(y);
        for (int i = c; i < (W - 1) * c; i++) {
            float t = u[i - c] * w1 + u[i] * w1 + u[i + c] * w1 + m[i - c] * w1 + m[i] * w5 + m[i + c] * w1 +
                      b[i - c] * w1 + b[i] * w1 + b[i + c] * w1;
            o[i] = tf_blend((float)sat_trunc(t), (float)m[i], f);
        }
    }
    e.set(d);
}

/* grayscale(image) = grayscale_to_rgb(rgb_to_grayscale(image)) */
void tf_grayscale(Exec &e)
{
    tf_per_pixel(e, [](const uint8_t *s, uint8_t *o) { o[0] = o[1] = o[2] = tf_gray(s); });
}

/* gaussian_filter2d(image, [3, 3], sigma) (TF's Gaussian_Noise), float32: 1-D kernel
 * softmax(-[1, 0, 1] / (2 sigma^2)) (exp, sum, times the sum's reciprocal, as Eigen), 2-D
 * kernel ky[i] * kx[j]; tf.pad REFLECT (-1 -> 1, n -> n - 2); the 9 products accumulated row
 * by row with fused multiply-adds (as TF's depthwise conv: on flat images a plain sum rounds
 * 76.99999 up to 77); uint8 by truncation */
void tf_gaussian_filter(Exec &e, float sigma)
{
    e.materialize_flips();
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    const float den = 2.0f * (sigma * sigma), side = std::exp(-1.0f / den);
    const float inv = 1.0f / ((side + 1.0f) + side), k1[3] = {side * inv, inv, side * inv};
    float k[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            k[i][j] = k1[i] * k1[j];
    auto refl = [](int v, int n) { return n <= 1 ? 0 : (v < 0 ? -v : (v >= n ? 2 * n - 2 - v : v)); };
    cv::Mat d = e.next(H, W, e.cur.type());
    for (int y = 0; y < H; y++) {
        const uint8_t *rows[3] = {e.cur.ptr<uint8_t>(refl(y - 1, H)), e.cur.ptr<uint8_t>(y),
                                  e.cur.ptr<uint8_t>(refl(y + 1, H))};
        uint8_t *o = d.ptr<uint8_t>(y);
        for (int x = 0; x < W; x++) {
            const int xs[3] = {refl(x - 1, W) * c, x * c, refl(x + 1, W) * c};
            for (int ch = 0; ch < c; ch++) {
                float t = 0.f;
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 3; j++)
                        t = fma_exact(k[i][j], (float)rows[i][xs[j] + ch], t);
                o[x * c + ch] = sat_trunc(t);
            }
        }
    }
    e.set(d);
}

/* ImageProjectiveTransformV3 fill_mode REFLECT (MapCoordinate) */
inline float tf_reflect(float in, int len)
{
    if (in < 0) {
        if (len <= 1) {
            in = 0;
        } else {
            const int64_t sz2 = 2 * (int64_t)len;
            if (in < sz2)
                in = (float)(sz2 * (int64_t)(-in / sz2)) + in;
            in = in < -len ? in + sz2 : -in - 1;
        }
    } else if (in > len - 1) {
        if (len <= 1) {
            in = 0;
        } else {
            const int64_t sz2 = 2 * (int64_t)len;
            in -= (float)(sz2 * (int64_t)(in / sz2));
            if (in >= len)
                in = sz2 - in - 1;
        }
    }
    return in < 0.f ? 0.f : (in > (float)(len - 1) ? (float)(len - 1) : in);
}

/* output (x, y) reads input (round(a0 x + a1 y + a2), round(b0 x + b1 y + b2)) after
 * reflection (float32; std::round: half away from zero) */
void tf_transform(Exec &e, const float t[6])
{
    e.materialize_flips();
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    cv::Mat d = e.next(H, W, e.cur.type());
    for (int y = 0; y < H; y++) {
        uint8_t *o = d.ptr<uint8_t>(y);
        for (int x = 0; x < W; x++) {
            const float fx = (float)x, fy = (float)y;
            const float ix = tf_reflect(t[0] * fx + t[1] * fy + t[2], W);
            const float iy = tf_reflect(t[3] * fx + t[4] * fy + t[5], H);
            const uint8_t *s = e.cur.ptr<uint8_t>((int)std::round(iy)) + (int)std::round(ix) * c;
            for (int k = 0; k < c; k++)
                o[x * c + k] = s[k];
        }
    }
    e.set(d);
}

}  // namespace

/* one TF op (kind: fastq's kind of the same name) with TF's argument v; extra: Cutout's
 * centre (cy * 65536 + cx) */
void tf_apply(Exec &e, int kind, double v, double extra, const double fill[3])
{
    const char *n = fq_img_op_name(kind);
    const float f = (float)v;
    const int H = e.cur.rows, W = e.cur.cols;
    if (!std::strcmp(n, "AutoContrast")) {
        tf_autocontrast(e);
    } else if (!std::strcmp(n, "Color")) {
        tf_color(e, f);
    } else if (!std::strcmp(n, "Contrast")) {
        tf_contrast(e, f);
    } else if (!std::strcmp(n, "Sharpness")) {
        tf_sharpness(e, f);
    } else if (!std::strcmp(n, "SolarizeAdd")) { /* threshold 128 */
        uint8_t lut[256];
        for (int x = 0; x < 256; x++) {
            const int a = x + (int)v;
            lut[x] = x < 128 ? (uint8_t)(a < 0 ? 0 : (a > 255 ? 255 : a)) : (uint8_t)x;
        }
        apply_lut(e, lut);
    } else if (!std::strcmp(n, "Rotate")) { /* radians = f32(f32(degrees) * f32(pi / 180)) */
        const float rad = f * (float)(3.14159265358979323846 / 180.0), cs = std::cos(rad), sn = std::sin(rad);
        const float w1 = (float)(W - 1), h1 = (float)(H - 1);
        const float t[6] = {cs, -sn, (w1 - (cs * w1 - sn * h1)) / 2.0f, sn, cs, (h1 - (sn * w1 + cs * h1)) / 2.0f};
        tf_transform(e, t);
    } else if (!std::strcmp(n, "ShearX")) {
        const float t[6] = {1, f, 0, 0, 1, 0};
        tf_transform(e, t);
    } else if (!std::strcmp(n, "ShearY")) {
        const float t[6] = {1, 0, 0, f, 1, 0};
        tf_transform(e, t);
    } else if (!std::strcmp(n, "TranslateX")) { /* translate(image, [-pixels, 0]): input x = x + pixels */
        const float t[6] = {1, 0, f, 0, 1, 0};
        tf_transform(e, t);
    } else if (!std::strcmp(n, "TranslateY")) {
        const float t[6] = {1, 0, 0, 0, 1, f};
        tf_transform(e, t);
    } else if (!std::strcmp(n, "Cutout")) { /* rows [cy - pad, cy + pad) x cols [cx - pad, cx + pad), clipped */
        e.materialize_flips();
        const int pad = (int)v, cy = (int)(extra / 65536.0), cx = (int)(extra - cy * 65536.0);
        const int y0 = std::max(0, cy - pad), y1 = std::min(H, cy + pad), x0 = std::max(0, cx - pad),
                  x1 = std::min(W, cx + pad);
        if (y1 <= y0 || x1 <= x0)
            return;
        cv::Mat d = e.next(H, W, e.cur.type());
        e.cur.copyTo(d);
        const int c = e.cur.channels();
        for (int y = y0; y < y1; y++) {
            uint8_t *o = d.ptr<uint8_t>(y);
            for (int x = x0; x < x1; x++)
                for (int k = 0; k < c; k++)
                    o[x * c + k] = (uint8_t)fill[k];
        }
        e.set(d);
    } else if (!std::strcmp(n, "Grayscale")) {
        tf_grayscale(e);
    } else if (!std::strcmp(n, "GaussianBlur")) {
        tf_gaussian_filter(e, f);
    } else if (!std::strcmp(n, "Posterize")) { /* shift 8 - bits: TF's bitwise shifts clamp it to 7 (bits 0 = 1) */
        aug_apply(e, kind, std::max(v, 1.0), fill);
    } else if (!std::strcmp(n, "Solarize")) { /* TF compares with the threshold cast to uint8: 256 -> 0 */
        aug_apply(e, kind, std::fmod(v, 256.0), fill);
    } else { /* Invert, Equalize, Brightness (factor) */
        aug_apply(e, kind, v, fill);
    }
}

}  // namespace fqi

/* ---- the records of this family, GaussianNoise (TF Model Garden's noise): kinds fixed
 * forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kNoiseRecords[] = {
    {45, "GaussianNoise", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE | FQ_EXPLAIN_CUSTOM,
     FQ_PARAMS(fqi::AugNoise, fqi::kNoiseFields), fqi::noise_check, fqi::keeps_size, fqi::plan_noise, fqi::noise_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsNoise, kNoiseRecords)
