/* fq_image_aug_tensorpack.cpp - tensorpack's fbresnet_augmentor (examples/ImageNetModels/imagenet_utils.py)
 * as two ops: TensorpackCrop (imgaug.GoogleNetRandomCropAndResize) and TensorpackColor
 * (ToFloat32, RandomOrderAug([BrightnessScale, Contrast(rgb=False), Saturation(rgb=False),
 * Lighting]) with tensorpack's default clip=True, ToUint8).  Their records are at the end of
 * this file (family kOpsTensorpack); semantics and the measured differences: docs/ops.md.  Every
 * draw comes from the sample's fq_rng; pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"
#include "image/color/fq_image_aug_tensorpack.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <opencv2/imgproc.hpp>

/* the float32 steps below are tensorpack's roundings: never fused into FMAs (GCC: off in the
 * ISO -std= modes setup.py uses; clang contracts within an expression unless told) */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace fqi {

/* ---- TensorpackCrop ------------------------------------------------------------------ */

const char *tp_crop_check(const fq_op &op)
{
    const TpCrop &q = params<TpCrop>(op);
    if (!(aug_is_int(q.size) && q.size >= 1 && q.size <= FQ_IMG_MAX_SIDE))
        return "size must be a positive integer <= 32768";
    if (!(q.area[0] > 0 && q.area[0] <= q.area[1] && q.area[1] <= 1))
        return "crop_area_fraction must satisfy 0 < min <= max <= 1";
    if (!(q.aspect[0] > 0 && q.aspect[0] <= q.aspect[1] && std::isfinite(q.aspect[1])))
        return "aspect_ratio_range must satisfy 0 < min <= max";
    if (!(aug_is_int(q.interp) && q.interp >= 0 && q.interp < FQ_INTERP_END && q.interp != FQ_INTERP_AREA))
        return "bad interpolation";
    if (!(aug_is_int(q.max_attempts) && q.max_attempts >= 0 && q.max_attempts <= 1000))
        return "max_attempts must be an integer in [0, 1000]";
    const bool edge_ok = q.short_edge == 0 || (q.short_edge >= q.size && q.short_edge <= FQ_IMG_MAX_SIDE);
    if (!(aug_is_int(q.short_edge) && edge_ok))
        return "short_edge must be 0 or an integer in [size, 32768]";
    return nullptr;
}

int tp_crop_geometry(const fq_op &op, int *h, int *w)
{
    *h = *w = (int)params<TpCrop>(op).size;
    return GEOM_FIXED;
}

/* GoogleNetRandomCropAndResize.get_transform: per try targetArea = U(area) * H * W, aspectR =
 * U(aspect), ww = int(sqrt(targetArea * aspectR) + 0.5), hh = int(sqrt(targetArea / aspectR) + 0.5),
 * swapped when U(0, 1) < 0.5; accepted if hh <= H and ww <= W (and both >= 1), then x0 = U{0..W-ww},
 * y0 = U{0..H-hh}.  Fallback: ResizeShortestEdge(size) (the other side int(scale * side + 0.5)),
 * then CenterCrop(size) at int((side - size) * 0.5); short_edge > size: ResizeShortestEdge(short_edge)
 * + CenterCrop(size), with max_attempts = 0 the validation chain. */
int tp_crop_plan(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *err)
{
    const TpCrop &q = params<TpCrop>(op);
    const int H = *ph, W = *pw, S = (int)q.size;
    const double area = (double)H * W;
    const int tries = (int)q.max_attempts;
    r.applied = 0;
    for (int t = 0; t < tries; t++) {
        double target = fq_rng_uniform_range(rng, q.area[0], q.area[1]) * area;
        double ar = fq_rng_uniform_range(rng, q.aspect[0], q.aspect[1]);
        int64_t ww = (int64_t)(std::sqrt(target * ar) + 0.5), hh = (int64_t)(std::sqrt(target / ar) + 0.5);
        if (fq_rng_uniform(rng) < 0.5)
            std::swap(ww, hh);
        r.params[0] = t + 1;
        if (hh <= H && ww <= W && hh >= 1 && ww >= 1) {
            int x = (int)fq_rng_next_below(rng, (uint64_t)(W - ww + 1));
            int y = (int)fq_rng_next_below(rng, (uint64_t)(H - hh + 1));
            r.box[0] = x, r.box[1] = y, r.box[2] = (int)ww, r.box[3] = (int)hh;
            r.applied = 1;
            break;
        }
    }
    if (!r.applied) {
        const int E = q.short_edge > 0 ? (int)q.short_edge : S;
        const double scale = E * 1.0 / std::min(H, W);
        int64_t nh, nw;
        if (H < W)
            nh = E, nw = (int64_t)(scale * W + 0.5);
        else
            nh = (int64_t)(scale * H + 0.5), nw = E;
        if (nh > FQ_IMG_MAX_SIDE || nw > FQ_IMG_MAX_SIDE)
            return fq_set_err(err, FQ_E_INVALID, "TensorpackCrop: resizing %dx%d to a shortest edge of %d gives "
                              "a side over 32768", W, H, E);
        r.params[1] = (double)nh, r.params[2] = (double)nw;
        r.box[0] = (int)((nw - S) * 0.5), r.box[1] = (int)((nh - S) * 0.5), r.box[2] = S, r.box[3] = S;
    }
    *ph = *pw = S;
    return FQ_OK;
}

void tp_crop_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const int S = (int)params<TpCrop>(op).size, interp = (int)params<TpCrop>(op).interp;
    e.materialize_flips();
    const cv::Rect box(r.box[0], r.box[1], r.box[2], r.box[3]);
    if (r.applied) {
        e.resize_to(e.cur(box), S, S, interp);
        return;
    }
    e.resize_to(e.cur, (int)r.params[1], (int)r.params[2], interp);
    e.set(e.cur(box));
}

bool tp_crop_box(const fq_op &op, const fq_img_op_explain &r0, int *interp)
{
    const OpImpl *impl = op_impl(op.kind);
    if (!impl || impl->exec != tp_crop_exec || !r0.applied)
        return false;
    *interp = (int)params<TpCrop>(op).interp;
    return true;
}

/* ---- TensorpackColor ----------------------------------------------------------------- */

const char *tp_color_check(const fq_op &op)
{
    const TpColor &q = params<TpColor>(op);
    if (!aug_valid_level(q.brightness) || q.brightness[0] < 0 || q.brightness[1] > 1e3)
        return "brightness must satisfy 0 <= min <= max <= 1000";
    if (!aug_valid_level(q.contrast) || q.contrast[0] < 0 || q.contrast[1] > 1e3)
        return "contrast must satisfy 0 <= min <= max <= 1000";
    if (!(std::isfinite(q.saturation) && q.saturation >= 0 && q.saturation < 1))
        return "saturation must be in [0, 1)";
    if (!(std::isfinite(q.lighting_std) && q.lighting_std >= 0 && q.lighting_std <= 1e3))
        return "lighting_std must be in [0, 1000]";
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (!std::isfinite(q.pca[i][j]) || std::fabs(q.pca[i][j]) > 1e6)
                return "eigvec * eigval must be finite";
    return (q.bgr == 0 || q.bgr == 1) ? nullptr : "bgr must be 0 or 1";
}

/* RandomOrderAug.get_transform: the permutation first (Fisher-Yates on the sample's stream),
 * then the parameters of the four in list order: brightness U(lo, hi), contrast U(lo, hi),
 * saturation 1 + U(-alpha, alpha), lighting alpha_k = float32(N(0, 1) * std) (Box-Muller, two
 * uniforms each, as Lighting's). */
int tp_color_plan(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const TpColor &q = params<TpColor>(op);
    r.applied = 1;
    for (int k = 0; k < 4; k++)
        r.order[k] = k;
    for (int k = 3; k > 0; k--)
        std::swap(r.order[k], r.order[(int)fq_rng_next_below(rng, (uint64_t)(k + 1))]);
    r.factor[0] = fq_rng_uniform_range(rng, q.brightness[0], q.brightness[1]);
    r.factor[1] = fq_rng_uniform_range(rng, q.contrast[0], q.contrast[1]);
    r.factor[2] = 1 + fq_rng_uniform_range(rng, -q.saturation, q.saturation);
    for (int k = 0; k < 3; k++) {
        double u1 = fq_rng_uniform(rng), u2 = fq_rng_uniform(rng);
        double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
        r.params[k] = (float)(z * q.lighting_std);
    }
    return FQ_OK;
}

namespace {

/* cv2.cvtColor(float32 BGR, COLOR_BGR2GRAY): (b * 0.114f + g * 0.587f) + r * 0.299f in float32 */
inline float tp_gray(float r, float g, float b)
{
    float s = b * 0.114f;
    s = s + g * 0.587f;
    return s + r * 0.299f;
}

inline float clip255(float v) { return v < 0.f ? 0.f : (v > 255.f ? 255.f : v); }

/* one step on the float image x (n pixels of c channels, fastq's channel order) */
void tp_step(int which, float *x, size_t n, int c, const fq_img_op_explain &r, const float inc[3])
{
    const size_t m = n * (size_t)c;
    if (which == 0) { /* BrightnessScale: img *= v (float32), clip */
        const float v = (float)r.factor[0];
        for (size_t i = 0; i < m; i++)
            x[i] = clip255(x[i] * v);
    } else if (which == 1 || which == 2) {
        const double fct = r.factor[which];
        const float a = (float)fct, b = (float)(1.0 - fct);
        if (c != 3) { /* gray: the pixel is its own grey level */
            double sum = 0;
            for (size_t i = 0; i < m; i++)
                sum += x[i];
            const float mean = which == 1 ? (float)(m ? sum / (double)m : 0.0) : 0.f;
            for (size_t i = 0; i < m; i++)
                x[i] = clip255(x[i] * a + (which == 1 ? mean : x[i]) * b);
            return;
        }
        if (which == 1) { /* Contrast(rgb=False): mean of the grey image (float32, as np.mean) */
            double sum = 0;
            for (size_t i = 0; i < n; i++)
                sum += tp_gray(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
            const float mb = (float)(n ? sum / (double)n : 0.0) * b;
            for (size_t i = 0; i < m; i++)
                x[i] = clip255(x[i] * a + mb);
        } else { /* Saturation(rgb=False): img * v + grey * (1 - v) per pixel */
            for (size_t i = 0; i < n; i++) {
                float *p = x + 3 * i;
                const float gb = tp_gray(p[0], p[1], p[2]) * b;
                for (int k = 0; k < 3; k++)
                    p[k] = clip255(p[k] * a + gb);
            }
        }
    } else { /* Lighting: img + inc (float32), clip */
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < c; k++)
                x[i * c + k] = clip255(x[i * c + k] + inc[k]);
    }
}

}  // namespace

/* Float32 throughout from the uint8 input (ToFloat32 is exact), each step clipped to [0, 255]
 * (tensorpack's clip=True), ToUint8 = trunc.  Grey levels are those of the image tensorpack sees
 * (BGR2GRAY of a BGR image = the same luminance weights on fastq's RGB channels). */
void tp_color_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const TpColor &q = params<TpColor>(op);
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    /* inc = eigvec @ (alpha * eigval) in tensorpack's channel order, float32 */
    float inc_tp[3];
    for (int i = 0; i < 3; i++) {
        float s = 0.f;
        for (int j = 0; j < 3; j++)
            s = s + (float)q.pca[i][j] * (float)r.params[j];
        inc_tp[i] = s;
    }
    float inc[3];
    for (int k = 0; k < 3; k++)
        inc[k] = q.bgr != 0 ? inc_tp[2 - k] : inc_tp[k];
    if (c == 3) { /* the vectorized path (fq_image_aug_tensorpack_simd.cpp): the same bytes */
        cv::Mat d = e.next(H, W, e.cur.type());
        const float ca = (float)r.factor[1], cb = (float)(1.0 - r.factor[1]);
        const float sa = (float)r.factor[2], sb = (float)(1.0 - r.factor[2]);
        if (tp_color_simd(e.cur, d, r.order, (float)r.factor[0], ca, cb, sa, sb, inc, &r.contrast_mean)) {
            e.set(d);
            return;
        }
    }
    cv::Mat f(H, W, CV_32FC(c));
    e.cur.convertTo(f, CV_32F);
    float *x = f.ptr<float>(0);
    const size_t n = (size_t)H * W;
    double mean_before = 0;
    for (int k = 0; k < 4; k++) {
        if (r.order[k] == 1 && c == 3) { /* record the mean contrast used */
            double s = 0;
            for (size_t i = 0; i < n; i++)
                s += tp_gray(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
            mean_before = n ? s / (double)n : 0.0;
        }
        tp_step(r.order[k], x, n, c, r, inc);
    }
    r.contrast_mean = mean_before;
    cv::Mat d = e.next(H, W, e.cur.type());
    uint8_t *o = d.ptr<uint8_t>(0);
    for (size_t i = 0; i < n * (size_t)c; i++)
        o[i] = (uint8_t)x[i]; /* values are in [0, 255]: truncation, as astype(uint8) */
    e.set(d);
}

}  // namespace fqi

/* ---- the records of this family, tensorpack's fbresnet_augmentor crop and fused colour
 * ops: kinds fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kTensorpackRecords[] = {
    {43, "TensorpackCrop", FQ_RULE_REFUSED, FQ_EXPLAIN_BOX | FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_TENSORPACK,
     FQ_PARAMS(fqi::TpCrop, fqi::kTpCropFields), fqi::tp_crop_check, fqi::tp_crop_geometry, fqi::tp_crop_plan,
     fqi::tp_crop_exec},
    {44, "TensorpackColor", FQ_RULE_PIXEL, FQ_EXPLAIN_TENSORPACK, FQ_PARAMS(fqi::TpColor, fqi::kTpColorFields),
     fqi::tp_color_check, fqi::keeps_size, fqi::tp_color_plan, fqi::tp_color_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsTensorpack, kTensorpackRecords)
