/* fq_image_targets.cpp - the target rules (each op's record names its own, OpImpl::rule:
 * which op kinds move targets, which are pixel-only) and the box / keypoint / image_info
 * rules: every geometric record of an explain record is turned into a forward 2x3 map in
 * continuous pixel coordinates (op_map); boxes and keypoints are moved by it, clipped to the op's output after every
 * op (torchvision v2's clamp).  Masks: fq_image_targets_mask.cpp.  Rules: docs/targets.md. */
#include "image/fq_image_targets.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "image/internal/fq_image_targets_int.h"

namespace fqt {

/* the rule lives in the op's own record: a record without one says FQ_RULE_REFUSED */
int rule_of(int kind, int *geom)
{
    const fqi::OpImpl *impl = fqi::op_impl(kind);
    if (geom)
        *geom = -1;
    if (!impl)
        return FQ_RULE_REFUSED;
    if (geom && impl->rule == FQ_RULE_GEOM)
        *geom = fqi::aug_geom_kind(kind);
    return impl->rule;
}

int check(const fq_img_explain *ex, fq_err *err)
{
    if (!ex)
        return fq_set_err(err, FQ_E_INVALID, "targets: NULL explain record");
    if (ex->n_ops < 0 || ex->n_ops > FQ_IMG_MAX_OPS)
        return fq_set_err(err, FQ_E_INVALID, "targets: explain record with %d ops", ex->n_ops);
    for (int i = 0; i < ex->n_ops; i++) {
        const fq_img_op_explain &r = ex->ops[i];
        if (rule_of(r.kind, nullptr) == FQ_RULE_REFUSED)
            return fq_set_err(err, FQ_E_UNSUPPORTED,
                              "targets: op %d (%s) has no target rule (policies may draw geometric ops; "
                              "boxes, keypoints and masks cannot follow it)",
                              i, fq_img_op_name(r.kind));
        if (r.in_h < 1 || r.in_w < 1 || r.out_h < 1 || r.out_w < 1)
            return fq_set_err(err, FQ_E_INVALID, "targets: op %d (%s): bad sizes in the explain record", i,
                              fq_img_op_name(r.kind));
    }
    return FQ_OK;
}

void src_size(const fq_img_explain *ex, int *h, int *w)
{
    if (ex->n_ops > 0)
        *h = ex->ops[0].in_h, *w = ex->ops[0].in_w;
    else
        *h = ex->src_h, *w = ex->src_w;
}

/* forward map in continuous coordinates; false when the op moves nothing */
bool op_map(const fq_img_op_explain &r, double M[6])
{
    int geom = -1;
    const int rule = rule_of(r.kind, &geom);
    const double iw = r.in_w, ih = r.in_h, ow = r.out_w, oh = r.out_h;
    M[0] = 1, M[1] = 0, M[2] = 0, M[3] = 0, M[4] = 1, M[5] = 0;
    switch (rule) {
    case FQ_RULE_RRC:
        M[0] = ow / r.box[2], M[2] = -r.box[0] * M[0];
        M[4] = oh / r.box[3], M[5] = -r.box[1] * M[4];
        return true;
    case FQ_RULE_RESIZE:
        M[0] = ow / iw, M[4] = oh / ih;
        return true;
    case FQ_RULE_SCALE_JITTER: /* box = (x offset, y offset, scaled w, scaled h) */
        M[0] = r.box[2] / iw, M[2] = -r.box[0];
        M[4] = r.box[3] / ih, M[5] = -r.box[1];
        return true;
    case FQ_RULE_IOU_CROP:
        if (!r.applied)
            return false;
        M[2] = -r.box[0], M[5] = -r.box[1];
        return true;
    case FQ_RULE_CROP:
        M[2] = -r.box[0], M[5] = -r.box[1];
        return true;
    case FQ_RULE_RCROP:
        M[2] = -(r.box[0] - r.pad[0]), M[5] = -(r.box[1] - r.pad[1]);
        return true;
    case FQ_RULE_PAD:
        return true; /* top-left: coordinates kept, only the canvas grows */
    case FQ_RULE_ZOOM_OUT:
        if (!r.applied)
            return false;
        M[2] = r.pad[0], M[5] = r.pad[1];
        return true;
    case FQ_RULE_HFLIP:
        if (!r.applied)
            return false;
        M[0] = -1, M[2] = iw;
        return true;
    case FQ_RULE_VFLIP:
        if (!r.applied)
            return false;
        M[4] = -1, M[5] = ih;
        return true;
    case FQ_RULE_AFFINE: {
        /* r.matrix maps pixel indices (centres at integers) forward; continuous = index + 0.5 */
        const double *m = r.matrix;
        M[0] = m[0], M[1] = m[1], M[2] = m[2] + 0.5 - 0.5 * (m[0] + m[1]);
        M[3] = m[3], M[4] = m[4], M[5] = m[5] + 0.5 - 0.5 * (m[3] + m[4]);
        return true;
    }
    case FQ_RULE_GEOM: {
        if (!r.applied)
            return false;
        /* the inverse map in centred coordinates (u = x - W/2), recomputed from the level
         * exactly as planned; forward = its inverse */
        double v = r.factor[0], m[6];
        fqi::geom_matrix(geom, &v, ih, iw, m);
        const double det = m[0] * m[4] - m[1] * m[3];
        const double b0 = m[4] / det, b1 = -m[1] / det, b3 = -m[3] / det, b4 = m[0] / det;
        const double c0 = -(b0 * m[2] + b1 * m[5]), c1 = -(b3 * m[2] + b4 * m[5]);
        const double cx = iw * 0.5, cy = ih * 0.5;
        M[0] = b0, M[1] = b1, M[2] = cx + c0 - (b0 * cx + b1 * cy);
        M[3] = b3, M[4] = b4, M[5] = cy + c1 - (b3 * cx + b4 * cy);
        return true;
    }
    default:
        return false;
    }
}

}  // namespace fqt

namespace {

struct Box {
    double x0, y0, x1, y1;
    double area() const { return std::max(0.0, x1 - x0) * std::max(0.0, y1 - y0); }
};

/* the axis-aligned box of the 4 transformed corners */
Box map_box(const double M[6], const Box &b)
{
    const double xs[4] = {b.x0, b.x1, b.x0, b.x1}, ys[4] = {b.y0, b.y0, b.y1, b.y1};
    Box o{INFINITY, INFINITY, -INFINITY, -INFINITY};
    for (int k = 0; k < 4; k++) {
        double x = M[0] * xs[k] + M[1] * ys[k] + M[2], y = M[3] * xs[k] + M[4] * ys[k] + M[5];
        o.x0 = std::min(o.x0, x), o.x1 = std::max(o.x1, x);
        o.y0 = std::min(o.y0, y), o.y1 = std::max(o.y1, y);
    }
    return o;
}

Box clip_box(Box b, double w, double h)
{
    b.x0 = std::min(std::max(b.x0, 0.0), w), b.x1 = std::min(std::max(b.x1, 0.0), w);
    b.y0 = std::min(std::max(b.y0, 0.0), h), b.y1 = std::min(std::max(b.y1, 0.0), h);
    return b;
}

}  // namespace

namespace fqt {

bool iou_crop_keeps(const fq_img_op_explain &r, double x0, double y0, double x1, double y1)
{
    if (!r.applied)
        return true;
    /* torchvision: cx = 0.5 * (x0 + x1) on float32 boxes, compared with the integer crop edges */
    const float cx = 0.5f * ((float)x0 + (float)x1), cy = 0.5f * ((float)y0 + (float)y1);
    return (float)r.box[0] < cx && cx < (float)(r.box[0] + r.box[2]) && (float)r.box[1] < cy &&
           cy < (float)(r.box[1] + r.box[3]);
}

int box_through(const fq_img_op_explain *ops, int n, double b[4])
{
    Box cur{b[0], b[1], b[2], b[3]};
    for (int j = 0; j < n; j++) {
        const int rule = rule_of(ops[j].kind, nullptr);
        if (rule == FQ_RULE_REFUSED)
            return -1;
        if (rule == FQ_RULE_IOU_CROP && !iou_crop_keeps(ops[j], cur.x0, cur.y0, cur.x1, cur.y1))
            return 0;
        double M[6];
        if (op_map(ops[j], M))
            cur = clip_box(map_box(M, cur), ops[j].out_w, ops[j].out_h);
    }
    b[0] = cur.x0, b[1] = cur.y0, b[2] = cur.x1, b[3] = cur.y1;
    return 1;
}

}  // namespace fqt

extern "C" {

int fq_tgt_rule(int kind)
{
    const int r = fqt::rule_of(kind, nullptr);
    return r == FQ_RULE_REFUSED ? FQ_TGT_REFUSED : (r == FQ_RULE_PIXEL ? FQ_TGT_PIXEL : FQ_TGT_GEOMETRIC);
}

int fq_tgt_check(const fq_img_explain *ex, fq_err *err) { return fqt::check(ex, err); }

int fq_tgt_check_ops(const fq_op *ops, int n_ops, fq_err *err)
{
    if (n_ops < 0 || (n_ops > 0 && !ops))
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_check_ops: bad arguments");
    for (int i = 0; i < n_ops; i++)
        if (fqt::rule_of(ops[i].kind, nullptr) == FQ_RULE_REFUSED)
            return fq_set_err(err, FQ_E_UNSUPPORTED,
                              "targets: op %d (%s) has no target rule (policies may draw geometric ops; "
                              "boxes, keypoints and masks cannot follow it)",
                              i, fq_img_op_name(ops[i].kind));
    return FQ_OK;
}

int fq_tgt_boxes(const fq_img_explain *ex, const float *boxes, const int32_t *classes, int n, int max_boxes,
                 const fq_tgt_box_opts *opts, float *out_boxes, int32_t *out_classes, int32_t *out_index,
                 int *count, int *n_truncated, fq_err *err)
{
    if (count)
        *count = 0;
    if (n_truncated)
        *n_truncated = 0;
    if (int rc = fqt::check(ex, err))
        return rc;
    if (n < 0 || max_boxes < 0 || (n > 0 && !boxes) || (max_boxes > 0 && (!out_boxes || !out_classes)) || !count)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_boxes: bad arguments");
    fq_tgt_box_opts o{0.0, 0.0, 1};
    if (opts)
        o = *opts;
    if (!(std::isfinite(o.min_area) && o.min_area >= 0) || !(o.min_visibility >= 0 && o.min_visibility <= 1))
        return fq_set_err(err, FQ_E_INVALID, "boxes: min_area must be >= 0 and min_visibility in [0, 1]");
    int H, W;
    fqt::src_size(ex, &H, &W);
    for (int i = 0; i < max_boxes; i++) {
        for (int k = 0; k < 4; k++)
            out_boxes[4 * i + k] = 0.f;
        out_classes[i] = -1;
        if (out_index)
            out_index[i] = -1;
    }
    double maps[FQ_IMG_MAX_OPS][6];
    bool moves[FQ_IMG_MAX_OPS];
    for (int j = 0; j < ex->n_ops; j++)
        moves[j] = fqt::op_map(ex->ops[j], maps[j]);
    bool iou[FQ_IMG_MAX_OPS]; /* RandomIoUCrop records: the centre rule first */
    for (int j = 0; j < ex->n_ops; j++)
        iou[j] = fqt::rule_of(ex->ops[j].kind, nullptr) == FQ_RULE_IOU_CROP;
    int kept = 0, dropped_over = 0;
    for (int i = 0; i < n; i++) {
        const float *b = boxes + 4 * i;
        if (!(std::isfinite(b[0]) && std::isfinite(b[1]) && std::isfinite(b[2]) && std::isfinite(b[3])))
            return fq_set_err(err, FQ_E_INVALID, "box %d: coordinates must be finite, got (%g, %g, %g, %g)", i,
                              (double)b[0], (double)b[1], (double)b[2], (double)b[3]);
        if (b[2] < b[0] || b[3] < b[1])
            return fq_set_err(err, FQ_E_INVALID, "box %d: (%g, %g, %g, %g) is not x0 <= x1, y0 <= y1 (xyxy)", i,
                              (double)b[0], (double)b[1], (double)b[2], (double)b[3]);
        const double tol = 1.0;
        if (b[0] < -tol || b[1] < -tol || b[2] > W + tol || b[3] > H + tol)
            return fq_set_err(err, FQ_E_INVALID,
                              "box %d: (%g, %g, %g, %g) lies outside the %dx%d source image (xyxy in source pixels)",
                              i, (double)b[0], (double)b[1], (double)b[2], (double)b[3], W, H);
        Box cur = clip_box(Box{b[0], b[1], b[2], b[3]}, W, H), full = cur;
        bool centre_out = false;
        for (int j = 0; j < ex->n_ops && !centre_out; j++) {
            if (iou[j] && !fqt::iou_crop_keeps(ex->ops[j], cur.x0, cur.y0, cur.x1, cur.y1))
                centre_out = true;
            if (!moves[j] || centre_out)
                continue;
            cur = clip_box(map_box(maps[j], cur), ex->ops[j].out_w, ex->ops[j].out_h);
            full = map_box(maps[j], full);
        }
        const double a = cur.area(), af = full.area();
        if (centre_out || !(cur.x1 > cur.x0 && cur.y1 > cur.y0) || a < o.min_area || (af > 0 ? a / af : 0.0) < o.min_visibility)
            continue;
        if (kept == max_boxes) {
            if (!o.truncate)
                return fq_set_err(err, FQ_E_INVALID,
                                  "boxes: more than max_boxes=%d boxes survive (box %d of %d); raise max_boxes "
                                  "or allow truncation",
                                  max_boxes, i, n);
            dropped_over++;
            continue;
        }
        float *ob = out_boxes + 4 * kept;
        ob[0] = (float)cur.x0, ob[1] = (float)cur.y0, ob[2] = (float)cur.x1, ob[3] = (float)cur.y1;
        out_classes[kept] = classes ? classes[i] : 0;
        if (out_index)
            out_index[kept] = i;
        kept++;
    }
    *count = kept;
    if (n_truncated)
        *n_truncated = dropped_over;
    return FQ_OK;
}

int fq_tgt_keypoints(const fq_img_explain *ex, const float *kps, int n, int k, const int32_t *flip_index, float *out,
                     fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (n < 0 || k < 0 || ((int64_t)n * k > 0 && (!kps || !out)) || k > 4096)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_keypoints: bad arguments");
    if (flip_index)
        for (int j = 0; j < k; j++)
            if (flip_index[j] < 0 || flip_index[j] >= k || flip_index[flip_index[j]] != j)
                return fq_set_err(err, FQ_E_INVALID,
                                  "keypoints: flip_index must be a permutation of 0..%d that is its own inverse "
                                  "(flip_index[%d] = %d)",
                                  k - 1, j, (int)flip_index[j]);
    int H, W;
    fqt::src_size(ex, &H, &W);
    for (int64_t i = 0; i < (int64_t)n * k; i++) {
        const float *p = kps + 3 * i;
        if (!(std::isfinite(p[0]) && std::isfinite(p[1]) && std::isfinite(p[2])))
            return fq_set_err(err, FQ_E_INVALID, "keypoint %lld of instance %lld: values must be finite",
                              (long long)(i % k), (long long)(i / k));
        float *q = out + 3 * i;
        q[0] = p[0], q[1] = p[1], q[2] = p[2];
        if (q[2] > 0 && !(p[0] >= 0 && p[0] <= W && p[1] >= 0 && p[1] <= H))
            q[2] = 0;
    }
    float tmp[3 * 4096];
    for (int j = 0; j < ex->n_ops; j++) {
        double M[6];
        if (!fqt::op_map(ex->ops[j], M))
            continue;
        const double ow = ex->ops[j].out_w, oh = ex->ops[j].out_h;
        for (int64_t i = 0; i < (int64_t)n * k; i++) {
            float *q = out + 3 * i;
            const double x = q[0], y = q[1];
            const double nx = M[0] * x + M[1] * y + M[2], ny = M[3] * x + M[4] * y + M[5];
            q[0] = (float)nx, q[1] = (float)ny;
            if (!(nx >= 0 && nx <= ow && ny >= 0 && ny <= oh))
                q[2] = 0;
        }
        if (flip_index && fqt::rule_of(ex->ops[j].kind, nullptr) == FQ_RULE_HFLIP)
            for (int i = 0; i < n; i++) {
                float *row = out + (int64_t)3 * k * i;
                std::memcpy(tmp, row, sizeof(float) * 3 * k);
                for (int t = 0; t < k; t++)
                    std::memcpy(row + 3 * t, tmp + 3 * flip_index[t], sizeof(float) * 3);
            }
    }
    return FQ_OK;
}

int fq_tgt_image_info(const fq_img_explain *ex, double out[8], fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (!out)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_image_info: NULL argument");
    int H, W;
    fqt::src_size(ex, &H, &W);
    double sy = 1, sx = 1, oy = 0, ox = 0; /* out = src * s - o */
    for (int j = 0; j < ex->n_ops; j++) {
        const fq_img_op_explain &r = ex->ops[j];
        const int rule = fqt::rule_of(r.kind, nullptr);
        if (rule == FQ_RULE_HFLIP || rule == FQ_RULE_VFLIP || rule == FQ_RULE_PIXEL)
            continue;
        if ((rule == FQ_RULE_AFFINE) || (rule == FQ_RULE_GEOM && r.applied))
            return fq_set_err(err, FQ_E_UNSUPPORTED,
                              "image_info: op %d (%s) is not a resize / crop / pad (no scale + offset form)", j,
                              fq_img_op_name(r.kind));
        double M[6];
        if (!fqt::op_map(r, M))
            continue;
        sx *= M[0], ox = ox * M[0] - M[2];
        sy *= M[4], oy = oy * M[4] - M[5];
    }
    out[0] = H, out[1] = W, out[2] = H * sy, out[3] = W * sx, out[4] = sy, out[5] = sx, out[6] = oy, out[7] = ox;
    return FQ_OK;
}

}  // extern "C"
