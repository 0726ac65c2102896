/* fq_image_targets_int.h - private declarations shared by the target rules
 * (fq_image_targets.cpp: table, boxes, keypoints, image_info; fq_image_targets_mask.cpp:
 * masks).  Not part of the C API (fq_image_targets.h). */
#ifndef FQ_IMAGE_TARGETS_INT_H
#define FQ_IMAGE_TARGETS_INT_H

#include "image/fq_image_targets.h"
#include "image/internal/fq_image_aug.h"

namespace fqt {

/* the rule of an op kind: R_REFUSED (no rule), R_PIXEL (targets unchanged), else how it moves */
enum Rule { R_REFUSED, R_PIXEL, R_RRC, R_RESIZE, R_CROP, R_RCROP, R_PAD, R_HFLIP, R_VFLIP, R_AFFINE, R_GEOM, R_SCALE_JITTER, R_ZOOM_OUT };

/* The rule of kind (by its name); *geom (may be NULL) = fqi::GeomKind for R_GEOM, else -1. */
int rule_of(int kind, int *geom);
/* FQ_OK when every op of ex has a rule and sane sizes. */
int check(const fq_img_explain *ex, fq_err *err);
/* The image size entering the chain (the source, full resolution). */
void src_size(const fq_img_explain *ex, int *h, int *w);
/* The forward map of record r in continuous pixel coordinates (x' = M0 x + M1 y + M2,
 * y' = M3 x + M4 y + M5); false when it moves nothing (pixel-only, flip not drawn). */
bool op_map(const fq_img_op_explain &r, double M[6]);

}  // namespace fqt

#endif
