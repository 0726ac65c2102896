/* fq_image_detection.h - private declarations of the detection geometry ops
 * (fq_image_detection.cpp): ResizeShortestEdge and Pad; their records are at the
 * end of fq_image_detection.cpp (family kOpsDet).  Semantics: docs/ops.md, docs/targets.md. */
#ifndef FQ_IMAGE_DET_H
#define FQ_IMAGE_DET_H

#include "image/internal/fq_image_stages.h"

namespace fqi {

/* ResizeShortestEdge: the shorter side becomes one of sizes[0 .. n_sizes) (drawn uniformly
 * when n_sizes > 1), the longer side capped at max_size (0: no cap); detectron2 /
 * tensorpack CustomResize rounding int(x + 0.5). */
struct DetResizeShortestEdge {
    double sizes[8];
    double n_sizes;
    double max_size;
    double interp;
};
/* Pad: the image at the top-left of an out_h x out_w canvas (size), or of the next
 * multiple of `multiple` (out_h = out_w = 0); fill per channel. */
struct DetPad {
    double out_h, out_w;
    double multiple;
    double fill[3];
};

/* ScaleJitter (TF Model Garden resize_and_crop_image): a random scale of out, the image
 * resized to fit it (aspect kept), a random window of out_h x out_w cut from it, padded
 * bottom/right with fill.  Explain: box = (x offset, y offset, scaled w, scaled h),
 * factor[0] = the random scale. */
struct DetScaleJitter {
    double out_h, out_w;
    double scale[2];
    double interp;
    double fill[3];
};

/* RandomZoomOut (torchvision v2): with probability p the image is placed on a canvas
 * r times its size, r ~ U(side_range), at a random offset; fill elsewhere.  Explain: pad =
 * (left, top, right, bottom), applied. */
struct DetZoomOut {
    double fill[3];
    double side_range[2];
    double p;
};

constexpr fq_op_field kDetRseFields[] = {FQ_FIELD(DetResizeShortestEdge, sizes), FQ_FIELD(DetResizeShortestEdge, n_sizes),
                                         FQ_FIELD(DetResizeShortestEdge, max_size),
                                         FQ_FIELD(DetResizeShortestEdge, interp)};
constexpr fq_op_field kDetScaleJitterFields[] = {FQ_FIELD(DetScaleJitter, out_h), FQ_FIELD(DetScaleJitter, out_w),
                                                 FQ_FIELD(DetScaleJitter, scale), FQ_FIELD(DetScaleJitter, interp),
                                                 FQ_FIELD(DetScaleJitter, fill)};
constexpr fq_op_field kDetZoomOutFields[] = {FQ_FIELD(DetZoomOut, fill), FQ_FIELD(DetZoomOut, side_range),
                                             FQ_FIELD(DetZoomOut, p)};
constexpr fq_op_field kDetPadFields[] = {FQ_FIELD(DetPad, out_h), FQ_FIELD(DetPad, out_w), FQ_FIELD(DetPad, multiple),
                                         FQ_FIELD(DetPad, fill)};

const char *rse_check(const fq_op &op);
int rse_geometry(const fq_op &op, int *h, int *w);
int rse_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
void rse_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *pad_check(const fq_op &op);
int pad_geometry(const fq_op &op, int *h, int *w);
int pad_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
void pad_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *sj_check(const fq_op &op);
int sj_geometry(const fq_op &op, int *h, int *w);
int sj_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r, fq_err *err);
void sj_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
const char *zoom_out_check(const fq_op &op);
int zoom_out_geometry(const fq_op &op, int *h, int *w);
int zoom_out_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                  fq_err *err);
void zoom_out_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

}  // namespace fqi

#endif
