/* fq_image_aug_tf.cpp - GaussianNoise (torchvision 0.29 v2 gaussian_noise, its uint8
 * kernel).  Semantics: docs/ops.md.  Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"

#include <cmath>
#include <cstring>

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

}  // namespace fqi
