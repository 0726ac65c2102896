/* fq_image_iou_crop.cpp - RandomIoUCrop: torchvision v2's SSD crop (transforms.v2.RandomIoUCrop,
 * torchvision 0.29 make_params), drawn from the sample's boxes as they enter the op.
 *
 * Draw order on the sample's stream (fq_rng.h), per round: the option index
 * (fq_rng_next_below(n_options), torch.randint); an option >= 1 ends with no crop; else up to
 * `trials` trials, each: u0, u1 (torch.rand(2): the scales of w and h), and only when the
 * aspect ratio passes, u2, u3 (torch.rand(2): left, top).  Each u is a float32 in [0, 1) with
 * 24 random bits (the top 24 of one 64-bit draw), as torch.rand's float32; the arithmetic is
 * torch's float32: r = (float)min + u * (float)(max - min), new_w = int(W * r), left = int((W -
 * new_w) * u2); IoU as torchvision.ops.box_iou in float32, compared with (float)option.  A trial
 * with new_w or new_h 0 fails (torchvision divides by zero).  No boxes (none given for the
 * sample, or all dropped by an earlier RandomIoUCrop): no crop, nothing drawn (torchvision can
 * only end by drawing an option >= 1, leaving the input unchanged).  At most kIouMaxRounds
 * rounds (torchvision: unbounded), then no crop.  Pure functions (thread-safe). */
#include "image/internal/fq_image_iou_crop.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "image/internal/fq_image_targets_int.h"

namespace fqi {

namespace {

bool is_int(double v) { return std::isfinite(v) && v == std::floor(v); }

/* torch.rand's float32: 24 random bits */
inline float u24(fq_rng *rng) { return (float)(fq_rng_next_u64(rng) >> 40) * (1.0f / 16777216.0f); }

struct FBox {
    float x0, y0, x1, y1;
};

/* the sample's boxes as they enter op i of pl, float32 (torchvision's dtype) */
int entering_boxes(const PlanBoxes &bx, int H, int W, const Plan &pl, int i, std::vector<FBox> *out, fq_err *err)
{
    out->reserve((size_t)bx.n);
    for (int k = 0; k < bx.n; k++) {
        const size_t o = (size_t)k * bx.stride;
        float v[4]; /* memcpy: a reader's lists may be unaligned */
        std::memcpy(&v[0], bx.x0 + o, sizeof(float)), std::memcpy(&v[1], bx.y0 + o, sizeof(float));
        std::memcpy(&v[2], bx.x1 + o, sizeof(float)), std::memcpy(&v[3], bx.y1 + o, sizeof(float));
        if (bx.normalized) /* as fq_imgtask_reader_boxes: (float)((double)v * size) */
            for (int c = 0; c < 4; c++)
                v[c] = (float)((double)v[c] * (c % 2 ? H : W));
        if (!(std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]) && std::isfinite(v[3])))
            return fq_set_err(err, FQ_E_INVALID, "RandomIoUCrop: box %d: coordinates must be finite", k);
        if (v[2] < v[0] || v[3] < v[1])
            return fq_set_err(err, FQ_E_INVALID, "RandomIoUCrop: box %d: (%g, %g, %g, %g) is not x0 <= x1, y0 <= y1",
                              k, (double)v[0], (double)v[1], (double)v[2], (double)v[3]);
        /* clipped to the source, then moved as fq_tgt_boxes moves it */
        double b[4] = {std::min(std::max((double)v[0], 0.0), (double)W), std::min(std::max((double)v[1], 0.0), (double)H),
                       std::min(std::max((double)v[2], 0.0), (double)W), std::min(std::max((double)v[3], 0.0), (double)H)};
        const int rc = fqt::box_through(pl.r, i, b);
        if (rc < 0)
            return fq_set_err(err, FQ_E_UNSUPPORTED, "RandomIoUCrop: an op before it has no target rule");
        if (rc > 0)
            out->push_back(FBox{(float)b[0], (float)b[1], (float)b[2], (float)b[3]});
    }
    return FQ_OK;
}

/* torchvision: the boxes whose centre is strictly inside the crop; the largest IoU of those
 * with it (float32, box_iou's order of operations); -1 when there is none */
float best_iou(const std::vector<FBox> &boxes, int left, int top, int right, int bottom)
{
    const float fl = (float)left, ft = (float)top, fr = (float)right, fb = (float)bottom;
    const float area2 = (fr - fl) * (fb - ft);
    float best = -1.f;
    for (const FBox &b : boxes) {
        const float cx = 0.5f * (b.x0 + b.x1), cy = 0.5f * (b.y0 + b.y1);
        if (!(fl < cx && cx < fr && ft < cy && cy < fb))
            continue;
        const float area1 = (b.x1 - b.x0) * (b.y1 - b.y0);
        float wx = std::min(b.x1, fr) - std::max(b.x0, fl), wy = std::min(b.y1, fb) - std::max(b.y0, ft);
        wx = wx < 0.f ? 0.f : wx, wy = wy < 0.f ? 0.f : wy;
        const float inter = wx * wy;
        const float uni = (area1 + area2) - inter;
        const float iou = inter / uni;
        best = iou > best ? iou : best;
    }
    return best;
}

}  // namespace

bool is_iou_crop(int kind)
{
    static const int k = fq_img_op_kind("RandomIoUCrop");
    return kind == k && k != FQ_OP_NONE;
}

const char *iou_crop_check(const fq_op &op)
{
    const IouCrop &q = params<IouCrop>(op);
    if (!(std::isfinite(q.min_scale) && std::isfinite(q.max_scale) && q.min_scale > 0 && q.min_scale <= q.max_scale &&
          q.max_scale <= 1))
        return "scale must satisfy 0 < min_scale <= max_scale <= 1";
    if (!(std::isfinite(q.min_aspect) && std::isfinite(q.max_aspect) && q.min_aspect > 0 &&
          q.min_aspect <= q.max_aspect))
        return "aspect ratio must satisfy 0 < min_aspect_ratio <= max_aspect_ratio";
    if (!(is_int(q.n_options) && q.n_options >= 1 && q.n_options <= kIouMaxOptions))
        return "1 to 10 sampler_options";
    for (int k = 0; k < kIouMaxOptions; k++)
        if (k < (int)q.n_options ? !(std::isfinite(q.options[k]) && q.options[k] >= 0) : q.options[k] != 0)
            return "sampler_options must be finite numbers >= 0 (unused slots 0)";
    if (!(is_int(q.trials) && q.trials >= 1 && q.trials <= 1000))
        return "trials must be an integer in [1, 1000]";
    return nullptr;
}

int iou_crop_geometry(const fq_op &, int *, int *) { return GEOM_VARIABLE; }

int iou_crop_plan_noboxes(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *err)
{
    return fq_set_err(err, FQ_E_INVALID, "RandomIoUCrop needs targets with boxes (its crop is drawn from them)");
}

int iou_crop_plan(const fq_op &op, fq_rng *rng, const PlanBoxes *bx, int H, int W, const Plan &pl, int i, int *h,
                  int *w, fq_img_op_explain &r, fq_err *err)
{
    const IouCrop &q = params<IouCrop>(op);
    const int ih = *h, iw = *w;
    r.applied = 0; /* no crop: the box is the whole image */
    r.box[0] = 0, r.box[1] = 0, r.box[2] = iw, r.box[3] = ih;
    if (!bx || bx->n < 0)
        return iou_crop_plan_noboxes(op, rng, 0, h, w, r, err);
    std::vector<FBox> boxes;
    if (int rc = entering_boxes(*bx, H, W, pl, i, &boxes, err))
        return rc;
    if (boxes.empty())
        return FQ_OK;
    const float smin = (float)q.min_scale, sd = (float)(q.max_scale - q.min_scale);
    const int n_opt = (int)q.n_options, n_trials = (int)q.trials;
    int trials = 0;
    for (int round = 1; round <= kIouMaxRounds; round++) {
        const double opt = q.options[fq_rng_next_below(rng, (uint64_t)n_opt)];
        r.factor[0] = opt, r.params[0] = round;
        if (opt >= 1.0)
            return FQ_OK;
        for (int t = 0; t < n_trials; t++) {
            r.params[1] = ++trials;
            const float u0 = u24(rng), u1 = u24(rng);
            const float s0 = u0 * sd, s1 = u1 * sd;
            const float r0 = s0 + smin, r1 = s1 + smin;
            const int new_w = (int)((float)iw * r0), new_h = (int)((float)ih * r1);
            if (new_w < 1 || new_h < 1)
                continue;
            const double aspect = (double)new_w / new_h;
            if (!(q.min_aspect <= aspect && aspect <= q.max_aspect))
                continue;
            const float u2 = u24(rng), u3 = u24(rng);
            const int left = (int)((float)(iw - new_w) * u2), top = (int)((float)(ih - new_h) * u3);
            const float best = best_iou(boxes, left, top, left + new_w, top + new_h);
            if (best < 0.f || best < (float)opt)
                continue;
            r.applied = 1;
            r.box[0] = left, r.box[1] = top, r.box[2] = new_w, r.box[3] = new_h;
            r.params[2] = best;
            *h = new_h, *w = new_w;
            return FQ_OK;
        }
    }
    return FQ_OK; /* kIouMaxRounds rounds without a crop */
}

void iou_crop_exec(Exec &e, const fq_op &, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    e.materialize_flips();
    e.crop_pad(r.box, FQ_BORDER_CONSTANT, nullptr);
}

int iou_crop_chain_check(const fq_op *ops, int n_ops, fq_err *err)
{
    for (int i = 0; i < n_ops; i++) {
        if (!is_iou_crop(ops[i].kind))
            continue;
        for (int j = 0; j < i; j++)
            if (fqt::rule_of(ops[j].kind, nullptr) == FQ_RULE_REFUSED)
                return fq_set_err(err, FQ_E_INVALID,
                                  "op %d (RandomIoUCrop): op %d (%s) before it has no target rule; RandomIoUCrop "
                                  "draws its crop from the boxes as they enter it, so every op before it must "
                                  "move boxes (docs/targets.md)",
                                  i, j, fq_img_op_name(ops[j].kind));
    }
    return FQ_OK;
}

}  // namespace fqi

extern "C" {

void fq_img_scratch_set_boxes(fq_img_scratch *s, const float *x0, const float *y0, const float *x1, const float *y1,
                              size_t stride, int n, int normalized)
{
    if (!s)
        return;
    const bool ok = n == 0 || (n > 0 && x0 && y0 && x1 && y1);
    s->boxes.x0 = x0, s->boxes.y0 = y0, s->boxes.x1 = x1, s->boxes.y1 = y1;
    s->boxes.stride = stride;
    s->boxes.n = ok ? n : -1;
    s->boxes.normalized = normalized ? 1 : 0;
}

int fq_img_spec_needs_boxes(const fq_img_spec *spec)
{
    for (int i = 0; spec && i < spec->n_ops; i++)
        if (fqi::is_iou_crop(spec->ops[i].kind))
            return 1;
    return 0;
}

}  // extern "C"

/* ---- the records of this family, RandomIoUCrop: kinds fixed forever;
 * fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kIouCropRecords[] = {
    {48, "RandomIoUCrop", FQ_RULE_IOU_CROP,
     FQ_EXPLAIN_BOX | FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE | FQ_EXPLAIN_IOU_CROP,
     FQ_PARAMS(fqi::IouCrop, fqi::kIouCropFields), fqi::iou_crop_check, fqi::iou_crop_geometry,
     fqi::iou_crop_plan_noboxes, fqi::iou_crop_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsIouCrop, kIouCropRecords)
