/* fq_image_targets_int.h - private declarations shared by the target rules
 * (fq_image_targets.cpp: table, boxes, keypoints, image_info; fq_image_targets_mask.cpp:
 * masks).  Not part of the C API (fq_image_targets.h). */
#ifndef FQ_IMAGE_TARGETS_INT_H
#define FQ_IMAGE_TARGETS_INT_H

#include "image/fq_image_targets.h"
#include "image/internal/fq_image_aug.h"

namespace fqt {

/* The target rule of kind, from its record (OpImpl::rule; FQ_RULE_REFUSED for an
 * unknown kind); *geom (may be NULL) = fqi::GeomKind for FQ_RULE_GEOM, else -1. */
int rule_of(int kind, int *geom);
/* FQ_OK when every op of ex has a rule and sane sizes. */
int check(const fq_img_explain *ex, fq_err *err);
/* The image size entering the chain (the source, full resolution). */
void src_size(const fq_img_explain *ex, int *h, int *w);
/* The forward map of record r in continuous pixel coordinates (x' = M0 x + M1 y + M2,
 * y' = M3 x + M4 y + M5); false when it moves nothing (pixel-only, flip not drawn). */
bool op_map(const fq_img_op_explain &r, double M[6]);
/* RandomIoUCrop's box rule (torchvision): a box (xyxy, as it enters the op) is kept when the
 * crop was not applied or its centre, in float32, lies strictly inside the crop box. */
bool iou_crop_keeps(const fq_img_op_explain &r, double x0, double y0, double x1, double y1);
/* Move b (xyxy source pixels, clipped to the source) through records ops[0 .. n) exactly as
 * fq_tgt_boxes does (map, clip to each op's output): 1, or 0 when a RandomIoUCrop among them
 * drops it, -1 when one of them has no target rule. */
int box_through(const fq_img_op_explain *ops, int n, double b[4]);

}  // namespace fqt

#endif
