/* fq_image_detection.cpp - detection geometry ops: ResizeShortestEdge (detectron2 / tensorpack
 * CustomResize) and Pad (top-left, to a fixed size or a multiple).  Their records (with
 * their target rules) are at the end of this file (family kOpsDet).
 * ScaleJitter: TF Model Garden resize_and_crop_image.  Semantics: docs/ops.md.  Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_detection.h"

#include <cmath>

namespace fqi {

namespace {

bool is_int(double v) { return std::isfinite(v) && v == std::floor(v); }
bool valid_side(double v) { return is_int(v) && v >= 1 && v <= FQ_IMG_MAX_SIDE; }

}  // namespace

/* ---- ResizeShortestEdge --------------------------------------------------------- */

const char *rse_check(const fq_op &op)
{
    const DetResizeShortestEdge &q = params<DetResizeShortestEdge>(op);
    if (!(is_int(q.n_sizes) && q.n_sizes >= 1 && q.n_sizes <= 8))
        return "1 to 8 shorter-side sizes";
    for (int k = 0; k < 8; k++)
        if (k < (int)q.n_sizes ? !valid_side(q.sizes[k]) : q.sizes[k] != 0)
            return "sizes must be positive integers <= 32768 (unused slots 0)";
    if (!(q.max_size == 0 || valid_side(q.max_size)))
        return "max_size must be 0 (none) or a positive integer <= 32768";
    if (!(is_int(q.interp) && q.interp >= 0 && q.interp < FQ_INTERP_END))
        return "bad interpolation";
    return nullptr;
}

int rse_geometry(const fq_op &, int *, int *) { return GEOM_VARIABLE; }

/* scale = s / min(h, w); the longer side capped at max_size; int(x + 0.5) */
int rse_plan(const fq_op &op, fq_rng *rng, int64_t maxpx, int *ph, int *pw, fq_img_op_explain &r, fq_err *err)
{
    const DetResizeShortestEdge &q = params<DetResizeShortestEdge>(op);
    const int n = (int)q.n_sizes;
    const double s = q.sizes[n > 1 ? (int)fq_rng_next_below(rng, (uint64_t)n) : 0];
    const double h = *ph, w = *pw;
    const double scale = s / std::min(h, w);
    double nh, nw;
    if (h < w)
        nh = s, nw = scale * w;
    else
        nh = scale * h, nw = s;
    if (q.max_size > 0 && std::max(nh, nw) > q.max_size) {
        const double k = q.max_size / std::max(nh, nw);
        nh *= k, nw *= k;
    }
    const int64_t oh = std::max<int64_t>(1, (int64_t)(nh + 0.5)), ow = std::max<int64_t>(1, (int64_t)(nw + 0.5));
    if (oh * ow > maxpx || oh > FQ_IMG_MAX_SIDE * 4 || ow > FQ_IMG_MAX_SIDE * 4)
        return fq_set_err(err, FQ_E_TOO_LARGE, "ResizeShortestEdge(%g) of a %dx%d image gives %lldx%lld, over max_pixels",
                          s, *pw, *ph, (long long)ow, (long long)oh);
    r.factor[0] = s;
    *ph = (int)oh, *pw = (int)ow;
    return FQ_OK;
}

void rse_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    e.materialize_flips();
    e.resize_to(e.cur, r.out_h, r.out_w, (int)params<DetResizeShortestEdge>(op).interp);
}

/* ---- Pad ------------------------------------------------------------------------ */

const char *pad_check(const fq_op &op)
{
    const DetPad &q = params<DetPad>(op);
    if (q.multiple == 0) {
        if (!valid_side(q.out_h) || !valid_side(q.out_w))
            return "size must be positive integers <= 32768";
    } else if (!(is_int(q.multiple) && q.multiple >= 1 && q.multiple <= 4096) || q.out_h != 0 || q.out_w != 0) {
        return "multiple must be an integer in [1, 4096] (and size 0, 0)";
    }
    for (double f : q.fill)
        if (!(std::isfinite(f) && f >= 0 && f <= 255))
            return "fill must be 3 numbers in [0, 255]";
    return nullptr;
}

int pad_geometry(const fq_op &op, int *h, int *w)
{
    const DetPad &q = params<DetPad>(op);
    if (q.multiple != 0)
        return GEOM_VARIABLE;
    *h = (int)q.out_h, *w = (int)q.out_w;
    return GEOM_FIXED;
}

int pad_plan(const fq_op &op, fq_rng *, int64_t maxpx, int *ph, int *pw, fq_img_op_explain &r, fq_err *err)
{
    const DetPad &q = params<DetPad>(op);
    const int h = *ph, w = *pw;
    int64_t oh, ow;
    if (q.multiple == 0) {
        oh = (int64_t)q.out_h, ow = (int64_t)q.out_w;
        if (h > oh || w > ow)
            return fq_set_err(err, FQ_E_INVALID,
                              "Pad: the image (%dx%d) is larger than size %lldx%lld (Pad never crops; resize first, "
                              "e.g. ResizeShortestEdge(max_size=...))",
                              w, h, (long long)ow, (long long)oh);
    } else {
        const int64_t m = (int64_t)q.multiple;
        oh = (h + m - 1) / m * m, ow = (w + m - 1) / m * m;
        if (oh * ow > maxpx)
            return fq_set_err(err, FQ_E_TOO_LARGE, "Pad: %lldx%lld is over max_pixels", (long long)ow, (long long)oh);
    }
    r.pad[0] = 0, r.pad[1] = 0, r.pad[2] = (int)(ow - w), r.pad[3] = (int)(oh - h);
    *ph = (int)oh, *pw = (int)ow;
    return FQ_OK;
}

void pad_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    e.materialize_flips(); /* the deferred flips are of the image, not of the canvas */
    const int box[4] = {0, 0, r.out_w, r.out_h};
    e.crop_pad(box, FQ_BORDER_CONSTANT, params<DetPad>(op).fill);
}

/* ---- ScaleJitter ---------------------------------------------------------------- */

const char *sj_check(const fq_op &op)
{
    const DetScaleJitter &q = params<DetScaleJitter>(op);
    if (!valid_side(q.out_h) || !valid_side(q.out_w))
        return "output_size must be positive integers <= 32768";
    if (!(std::isfinite(q.scale[0]) && std::isfinite(q.scale[1]) && q.scale[0] > 0 && q.scale[0] <= q.scale[1] &&
          q.scale[1] <= 100))
        return "scale must satisfy 0 < min <= max <= 100";
    if (!(is_int(q.interp) && q.interp >= 0 && q.interp < FQ_INTERP_END))
        return "bad interpolation";
    for (double f : q.fill)
        if (!(std::isfinite(f) && f >= 0 && f <= 255))
            return "fill must be 3 numbers in [0, 255]";
    return nullptr;
}

int sj_geometry(const fq_op &op, int *h, int *w)
{
    *h = (int)params<DetScaleJitter>(op).out_h, *w = (int)params<DetScaleJitter>(op).out_w;
    return GEOM_FIXED;
}

/* TF: jitter unless scale == (1, 1): s ~ U(scale), target round(s * out) (half to even);
 * scale = min(target_h / h, target_w / w); scaled = round(size * scale); offset =
 * int(max(scaled - out, 0) * U(0, 1)), y then x; no jitter: target = out, offset 0 */
int sj_plan(const fq_op &op, fq_rng *rng, int64_t maxpx, int *ph, int *pw, fq_img_op_explain &r, fq_err *err)
{
    const DetScaleJitter &q = params<DetScaleJitter>(op);
    const bool jitter = q.scale[0] != 1.0 || q.scale[1] != 1.0;
    const double s = jitter ? fq_rng_uniform_range(rng, q.scale[0], q.scale[1]) : 1.0;
    const double th = jitter ? std::nearbyint(s * q.out_h) : q.out_h, tw = jitter ? std::nearbyint(s * q.out_w) : q.out_w;
    const double h = *ph, w = *pw, k = std::min(th / h, tw / w);
    const int64_t nh = std::max<int64_t>(1, (int64_t)std::nearbyint(h * k)), nw = std::max<int64_t>(1, (int64_t)std::nearbyint(w * k));
    if (nh * nw > maxpx || nh > FQ_IMG_MAX_SIDE * 4 || nw > FQ_IMG_MAX_SIDE * 4)
        return fq_set_err(err, FQ_E_TOO_LARGE, "ScaleJitter: a %dx%d image scaled to %lldx%lld, over max_pixels", *pw,
                          *ph, (long long)nw, (long long)nh);
    int oy = 0, ox = 0;
    if (jitter) {
        const double my = std::max<double>(0, (double)nh - q.out_h), mx = std::max<double>(0, (double)nw - q.out_w);
        oy = (int)(my * fq_rng_uniform(rng));
        ox = (int)(mx * fq_rng_uniform(rng));
    }
    r.factor[0] = s;
    r.box[0] = ox, r.box[1] = oy, r.box[2] = (int)nw, r.box[3] = (int)nh;
    *ph = (int)q.out_h, *pw = (int)q.out_w;
    return FQ_OK;
}

void sj_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    const DetScaleJitter &q = params<DetScaleJitter>(op);
    e.materialize_flips();
    e.resize_to(e.cur, r.box[3], r.box[2], (int)q.interp);
    const int box[4] = {r.box[0], r.box[1], r.out_w, r.out_h};
    e.crop_pad(box, FQ_BORDER_CONSTANT, q.fill);
}

/* ---- RandomZoomOut ------------------------------------------------------------------ */

const char *zoom_out_check(const fq_op &op)
{
    const DetZoomOut &q = params<DetZoomOut>(op);
    for (double f : q.fill)
        if (!(std::isfinite(f) && f >= 0 && f <= 255))
            return "fill must be 3 numbers in [0, 255]";
    if (!(std::isfinite(q.side_range[0]) && std::isfinite(q.side_range[1]) && q.side_range[0] >= 1 &&
          q.side_range[0] <= q.side_range[1] && q.side_range[1] <= 64))
        return "side_range must satisfy 1 <= min <= max <= 64";
    return std::isfinite(q.p) && q.p >= 0 && q.p <= 1 ? nullptr : "p must be in [0, 1]";
}

int zoom_out_geometry(const fq_op &op, int *, int *)
{
    const DetZoomOut &q = params<DetZoomOut>(op);
    return q.p == 0 || q.side_range[1] == 1 ? GEOM_KEEP : GEOM_VARIABLE;
}

/* torchvision: u >= p: skip; r = lo + U (hi - lo); canvas int(W r) x int(H r); left =
 * int((cw - W) U), top = int((ch - H) U) (x first) */
int zoom_out_plan(const fq_op &op, fq_rng *rng, int64_t maxpx, int *ph, int *pw, fq_img_op_explain &r, fq_err *err)
{
    const DetZoomOut &q = params<DetZoomOut>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    if (!r.applied)
        return FQ_OK;
    const double s = q.side_range[0] + fq_rng_uniform(rng) * (q.side_range[1] - q.side_range[0]);
    const int64_t cw = (int64_t)(*pw * s), ch = (int64_t)(*ph * s);
    if (cw * ch > maxpx)
        return fq_set_err(err, FQ_E_TOO_LARGE, "RandomZoomOut: a %lldx%lld canvas is over max_pixels", (long long)cw,
                          (long long)ch);
    const double u0 = fq_rng_uniform(rng), u1 = fq_rng_uniform(rng);
    const int left = (int)((double)(cw - *pw) * u0), top = (int)((double)(ch - *ph) * u1);
    r.factor[0] = s;
    r.pad[0] = left, r.pad[1] = top, r.pad[2] = (int)cw - left - *pw, r.pad[3] = (int)ch - top - *ph;
    *ph = (int)ch, *pw = (int)cw;
    return FQ_OK;
}

void zoom_out_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    e.materialize_flips();
    const int box[4] = {-r.pad[0], -r.pad[1], r.out_w, r.out_h};
    e.crop_pad(box, FQ_BORDER_CONSTANT, params<DetZoomOut>(op).fill);
}

}  // namespace fqi

/* ---- the records of this family, * detection geometry, ResizeShortestEdge / Pad /
 * ScaleJitter / RandomZoomOut: kinds fixed forever; fq_image_op_table.cpp assembles the
 * families */
namespace {

constexpr fqi::OpImpl kDetRecords[] = {
    {39, "ResizeShortestEdge", FQ_RULE_RESIZE, FQ_EXPLAIN_MAGNITUDE,
     FQ_PARAMS(fqi::DetResizeShortestEdge, fqi::kDetRseFields), fqi::rse_check, fqi::rse_geometry, fqi::rse_plan,
     fqi::rse_exec},
    {40, "Pad", FQ_RULE_PAD, FQ_EXPLAIN_PAD, FQ_PARAMS(fqi::DetPad, fqi::kDetPadFields), fqi::pad_check,
     fqi::pad_geometry, fqi::pad_plan, fqi::pad_exec},
    {41, "ScaleJitter", FQ_RULE_SCALE_JITTER, FQ_EXPLAIN_BOX | FQ_EXPLAIN_MAGNITUDE,
     FQ_PARAMS(fqi::DetScaleJitter, fqi::kDetScaleJitterFields), fqi::sj_check, fqi::sj_geometry, fqi::sj_plan,
     fqi::sj_exec},
    {42, "RandomZoomOut", FQ_RULE_ZOOM_OUT, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE | FQ_EXPLAIN_PAD,
     FQ_PARAMS(fqi::DetZoomOut, fqi::kDetZoomOutFields), fqi::zoom_out_check, fqi::zoom_out_geometry,
     fqi::zoom_out_plan, fqi::zoom_out_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsDet, kDetRecords)
