/* fq_image_plan.cpp - planning: every random draw of a sample (make_plan), and what the
 * JPEG decoder does of op 0 (plan_decode: region, DCT scale, resampling).  Pure
 * functions of (spec, source size, seed, epoch, index): thread-safe. */
#include "image/internal/fq_image_aug.h" /* tensorpack: tp_crop_box */
#include "image/internal/fq_image_iou_crop.h"
#include "image/internal/fq_image_resize_pil.h"
#include "image/internal/fq_image_stages.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fqi {

namespace {

struct Planner {
    const fq_img_spec *sp;
    fq_rng rng;
    Plan *pl;
    fq_err *err;
    const PlanBoxes *boxes; /* the sample's boxes (RandomIoUCrop), may be nullptr */
    int H, W;               /* the source size */
};

/* the subtree at i does not run: every record in it says so, nothing is drawn */
void skip_subtree(Planner &P, int i, int h, int w)
{
    for (int j = i; j < i + P.sp->span[i]; j++) {
        fq_img_op_explain &r = P.pl->r[j];
        r.applied = 0;
        r.in_h = r.out_h = h, r.in_w = r.out_w = w;
    }
}

/* draw the subtree at i for an *h x *w input: the op's own draws, then (a composition)
 * the children that run, in the order they run; the others are skipped */
int plan_subtree(Planner &P, int i, int *h, int *w)
{
    const fq_op &op = P.sp->ops[i];
    fq_img_op_explain &r = P.pl->r[i];
    r.in_h = *h, r.in_w = *w;
    r.applied = 1;
    /* the spec holds only checked ops: op_impl is never nullptr here */
    int rc = is_iou_crop(op.kind) /* draws from the sample's boxes */
                 ? iou_crop_plan(op, &P.rng, P.boxes, P.H, P.W, *P.pl, i, h, w, r, P.err)
                 : op_impl(op.kind)->plan(op, &P.rng, P.sp->fmt.max_pixels, h, w, r, P.err);
    if (rc)
        return rc;
    if (!is_compose(op.kind)) {
        P.pl->exec[P.pl->n_exec++] = i;
    } else {
        int child[FQ_IMG_MAX_OPS], ran[FQ_IMG_MAX_OPS] = {0};
        const int n = compose_n(op);
        for (int k = 0, c = i + 1; k < n; c += P.sp->span[c], k++)
            child[k] = c;
        const int h0 = *h, w0 = *w;
        for (int k = 0; k < r.n_run; k++) {
            ran[r.run[k]] = 1;
            if ((rc = plan_subtree(P, child[r.run[k]], h, w)))
                return rc;
        }
        for (int k = 0; k < n; k++)
            if (!ran[k])
                skip_subtree(P, child[k], h0, w0);
    }
    r.out_h = *h, r.out_w = *w;
    return FQ_OK;
}

}  // namespace

int make_plan(const fq_img_spec *sp, int H, int W, uint64_t seed, uint64_t epoch, uint64_t index, Plan *pl,
              fq_err *err, const PlanBoxes *boxes)
{
    Planner P{sp, {}, pl, err, boxes, H, W};
    fq_rng_init(&P.rng, seed, epoch, index);
    pl->n = sp->n_ops;
    pl->n_exec = 0;
    for (int i = 0; i < sp->n_ops; i++) {
        fq_img_op_explain &r = pl->r[i];
        std::memset(&r, 0, sizeof r);
        r.kind = sp->ops[i].kind;
        r.parent = sp->parent[i];
        for (int k = 0; k < 4; k++)
            r.order[k] = -1;
    }
    int h = H, w = W;
    for (int i = 0; i < sp->n_ops; i += sp->span[i]) {
        int rc = plan_subtree(P, i, &h, &w);
        if (rc)
            return rc;
    }
    return FQ_OK;
}

namespace {

/* Which of op 0 is a box the decoder can restrict itself to, and whether op 0 resizes. */
void first_op_box(const fq_img_spec *sp, const Plan &pl, int src_h, int src_w, fq_img_decode_plan *dp)
{
    const fq_img_op_explain &r0 = pl.r[0];
    dp->box[0] = 0, dp->box[1] = 0, dp->box[2] = src_w, dp->box[3] = src_h;
    if (dp->first_kind == FQ_OP_RANDOM_RESIZED_CROP) {
        dp->box_op = dp->resize_after = 1;
        dp->interp = (int)sp->ops[0].rrc.interp;
    } else if (fqi::tp_crop_box(sp->ops[0], r0, &dp->interp)) { /* tensorpack: a sampled box, as RRC's */
        dp->box_op = dp->resize_after = 1;
    } else if ((dp->first_kind == FQ_OP_CENTER_CROP || dp->first_kind == FQ_OP_RANDOM_CROP) && r0.pad[0] == 0 &&
               r0.pad[1] == 0 && r0.box[0] >= 0 && r0.box[1] >= 0 && r0.box[0] + r0.box[2] <= src_w &&
               r0.box[1] + r0.box[3] <= src_h) {
        dp->box_op = 1; /* a crop whose box lies inside the image */
    } else if (dp->first_kind == FQ_OP_RESIZE) {
        dp->resize_after = 1;
        dp->interp = (int)sp->ops[0].resize.interp;
    }
    if (dp->box_op)
        std::memcpy(dp->box, r0.box, sizeof dp->box);
}

/* Smallest DCT scale m/8 that keeps the box at least as large as the resize target. */
int dct_scale(const fq_img_spec *sp, const fq_img_decode_plan *dp)
{
    if (!dp->resize_after || !sp->fmt.dct_scaling)
        return 8;
    /* the pil_* resizes reproduce Pillow's resize of the fully decoded image: never scaled */
    if (fqi::is_pil_interp(dp->interp))
        return 8;
    /* only 1/8, 1/4, 1/2: libjpeg-turbo has SIMD IDCTs for these; the other M/8
     * (generic scalar IDCTs) measured slower than a full-size decode */
    static const int kScales[] = {1, 2, 4};
    for (int m : kScales)
        if ((int64_t)dp->box[2] * m >= (int64_t)dp->out_w * 8 && (int64_t)dp->box[3] * m >= (int64_t)dp->out_h * 8)
            return m;
    return 8;
}

/* The box in scaled coordinates and the region to decode around it. */
void scaled_region(fq_img_decode_plan *dp, int src_h, int src_w)
{
    const int M = dp->scale_num;
    const int sw = (int)(((int64_t)src_w * M + 7) / 8), sh = (int)(((int64_t)src_h * M + 7) / 8);
    const int bx = dp->box[0], by = dp->box[1], bw = dp->box[2], bh = dp->box[3];
    int x0 = (int)std::lround(bx * M / 8.0), y0 = (int)std::lround(by * M / 8.0);
    int x1 = (int)std::lround((bx + bw) * M / 8.0), y1 = (int)std::lround((by + bh) * M / 8.0);
    x0 = std::min(std::max(x0, 0), sw - 1), y0 = std::min(std::max(y0, 0), sh - 1);
    x1 = std::min(std::max(x1, x0 + 1), sw), y1 = std::min(std::max(y1, y0 + 1), sh);
    /* decode a margin around the box so chroma upsampling sees the same neighbours as a
     * full decode (keeps ROI decoding bit-exact) */
    const int margin = 16;
    int rx0 = 0, ry0 = 0, rx1 = sw, ry1 = sh;
    if (dp->box_op) {
        rx0 = std::max(x0 - margin, 0), ry0 = std::max(y0 - margin, 0);
        rx1 = std::min(x1 + margin, sw), ry1 = std::min(y1 + margin, sh);
    }
    dp->scaled_h = sh, dp->scaled_w = sw;
    dp->sbox[0] = x0, dp->sbox[1] = y0, dp->sbox[2] = x1 - x0, dp->sbox[3] = y1 - y0;
    dp->roi_used = (rx0 > 0 || ry0 > 0 || rx1 < sw || ry1 < sh) ? 1 : 0;
    dp->roi[0] = rx0, dp->roi[1] = ry0, dp->roi[2] = rx1 - rx0, dp->roi[3] = ry1 - ry0;
}

}  // namespace

void plan_decode(const fq_img_spec *sp, const Plan &pl, int src_h, int src_w, fq_img_decode_plan *dp)
{
    std::memset(dp, 0, sizeof *dp);
    dp->first_kind = pl.n > 0 ? pl.r[0].kind : FQ_OP_NONE;
    dp->interp = -1;
    dp->out_h = pl.n > 0 ? pl.r[0].out_h : src_h;
    dp->out_w = pl.n > 0 ? pl.r[0].out_w : src_w;
    first_op_box(sp, pl, src_h, src_w, dp);
    /* TensorpackCrop (parity with cv2.imread + cv2.resize): full-scale region decode only; the
     * DCT-scaled path (warpAffine) is approximate and measured slower for it */
    int tp_interp;
    const bool tp_box = pl.n > 0 && fqi::tp_crop_box(sp->ops[0], pl.r[0], &tp_interp);
    dp->scale_num = tp_box ? 8 : dct_scale(sp, dp);
    scaled_region(dp, src_h, src_w);
}

}  // namespace fqi

extern "C" int fq_img_plan_decode(const fq_img_spec *spec, int src_h, int src_w, uint64_t seed, uint64_t epoch,
                                  uint64_t index, fq_img_decode_plan *out, fq_err *err)
{
    if (!spec || !out)
        return fq_set_err(err, FQ_E_INVALID, "fq_img_plan_decode: NULL argument");
    if (src_h <= 0 || src_w <= 0 || src_h > FQ_IMG_MAX_SIDE * 4 || src_w > FQ_IMG_MAX_SIDE * 4)
        return fq_set_err(err, FQ_E_INVALID, "fq_img_plan_decode: bad source size %dx%d", src_w, src_h);
    fqi::Plan pl;
    int rc = fqi::make_plan(spec, src_h, src_w, seed, epoch, index, &pl, err);
    if (rc)
        return rc;
    fqi::plan_decode(spec, pl, src_h, src_w, out);
    return FQ_OK;
}
