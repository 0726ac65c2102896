/* fq_image_targets.h - dense targets (boxes, keypoints, masks) that follow an image
 * through its op chain.
 *
 * Every random draw of a sample is in its explain record (fq_img_explain: per op the
 * in/out size, crop box, padding, flips, affine matrix, ...), so the targets of a sample
 * are a pure function of (explain record, targets): no second draw, the same draws by
 * construction.  Records are replayed in chain order (deferred flips included); they
 * are in full-resolution source coordinates even when the image was decoded by ROI /
 * DCT scaling (docs/ops.md), so targets are in source pixels.
 *
 * Conventions (docs/targets.md): continuous pixel coordinates, pixel (i, j) covers
 * [j, j+1) x [i, i+1); boxes float32 xyxy; keypoints float32 (x, y, visibility).
 * Each op kind has a target rule or is on the explicit list of pixel-only kinds; any
 * other kind (policies, unknown / future kinds) is refused with FQ_E_UNSUPPORTED.
 * Pure functions, thread-safe, no allocation other than OpenCV temporaries for masks. */
#ifndef FQ_IMAGE_TARGETS_H
#define FQ_IMAGE_TARGETS_H

#include <stdint.h>

#include "image/fq_image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a rule table says of an op kind. */
enum fq_tgt_rule {
    FQ_TGT_REFUSED = 0,   /* no rule: targets cannot follow it (policies, unknown kinds) */
    FQ_TGT_PIXEL = 1,     /* pixel-only: targets unchanged */
    FQ_TGT_GEOMETRIC = 2  /* has a geometric rule */
};
int fq_tgt_rule(int kind);

/* FQ_OK when every op of ex has a rule, else FQ_E_UNSUPPORTED naming the op. */
int fq_tgt_check(const fq_img_explain *ex, fq_err *err);
/* The same for a chain before any sample (at pipeline build time). */
int fq_tgt_check_ops(const fq_op *ops, int n_ops, fq_err *err);

typedef struct fq_tgt_box_opts {
    double min_area;       /* boxes whose clipped area (output px^2) is < min_area are dropped */
    double min_visibility; /* ... or whose clipped / unclipped transformed area is < this */
    int truncate;          /* more survivors than max_boxes: 1 keep the first max_boxes (count the
                              rest in *n_truncated), 0 fail with FQ_E_INVALID */
} fq_tgt_box_opts;

/* Move n boxes (n x 4 float32 xyxy in source pixels, classes[n] int32, may be NULL)
 * through ex.  Writes max_boxes x 4 boxes (zeros after the count), out_classes[max_boxes]
 * (-1 after the count), out_index[max_boxes] (which input box, -1 after; may be NULL),
 * *count survivors kept and *n_truncated (may be NULL).  Errors: FQ_E_INVALID (non-finite
 * coordinates, x1 < x0, y1 < y0, too many boxes without truncate), FQ_E_UNSUPPORTED. */
int fq_tgt_boxes(const fq_img_explain *ex, const float *boxes, const int32_t *classes, int n, int max_boxes,
                 const fq_tgt_box_opts *opts, float *out_boxes, int32_t *out_classes, int32_t *out_index,
                 int *count, int *n_truncated, fq_err *err);

/* Move n x k keypoints (float32 x, y, visibility) through ex in place of out (n x k x 3).
 * flip_index[k] (may be NULL: identity): on each applied horizontal flip, point j takes
 * the place of point flip_index[j] (left/right swap).  A point whose visibility is 0 stays
 * as given; a point that leaves the image of an op gets visibility 0 (and keeps its
 * coordinates).  Errors: FQ_E_INVALID (non-finite coordinates, bad flip_index),
 * FQ_E_UNSUPPORTED. */
int fq_tgt_keypoints(const fq_img_explain *ex, const float *kps, int n, int k, const int32_t *flip_index,
                     float *out, fq_err *err);

/* How a mask's resizes (Resize, ResizeShortestEdge, RandomResizedCrop, ScaleJitter) pick
 * their source pixel.  FQ_TGT_CENTER: the one under each output pixel's centre,
 * floor((x + 0.5) * in / out) in float32, bit for bit TensorFlow's
 * tf.image.resize(method="nearest"), and where the image's own resampling puts that pixel.
 * FQ_TGT_LEGACY: OpenCV's INTER_NEAREST, floor(x * in / out) (torch's legacy "nearest"),
 * which reads up-left of the centre, so that labels land up to half an output pixel down
 * and right of the image; for parity with such pipelines only.  Crops, pads, flips and the affine ops sample alike in both. */
enum { FQ_TGT_CENTER = 0, FQ_TGT_LEGACY = 1 };

/* Replay the geometric ops of ex on a mask / label map: h x w (the source size) of
 * elem_size 1 (uint8) or 2 (uint16), row stride in bytes; out is ex->out_h x ex->out_w,
 * contiguous.  Nearest neighbour everywhere, resizes sampled as `sampling` (FQ_TGT_*)
 * says; whatever comes from outside the image (padding, affine borders) is `fill`,
 * whatever the image's border mode.  Errors: FQ_E_INVALID (size differs from the source
 * size, bad elem_size or sampling), FQ_E_UNSUPPORTED, FQ_E_NOMEM. */
int fq_tgt_mask(const fq_img_explain *ex, const void *mask, int h, int w, int elem_size, size_t stride,
                unsigned fill, int sampling, void *out, fq_err *err);

/* Per-instance masks (fq_image_targets_inst.cpp; docs/targets.md "Instance masks").
 * Polygons: n_rings rings, ring r = points ring_off[r] .. ring_off[r + 1] of xy (float32
 * x, y pairs, source pixels); the vertices move with every geometric op's forward map (no
 * clipping) and each ring is rasterized at the output size (ex's last out_h x out_w) with
 * pycocotools' rleFrPoly; the rings' pixels are set to 1 in out (the caller zeroes it:
 * rings unite), then cleared where the output does not show the source (fq_tgt_valid).
 * Errors: FQ_E_INVALID (a ring of < 3 points, non-finite coordinates, a point more than
 * 1 px outside the source image), FQ_E_UNSUPPORTED, FQ_E_NOMEM. */
int fq_tgt_polygons(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings, uint8_t *out,
                    fq_err *err);
/* out (ex's last out_h x out_w, uint8) = 1 where the output shows the source image, 0 in
 * what the ops filled (padding, affine borders): fq_tgt_mask of an all-ones mask
 * (FQ_TGT_CENTER: where the image samples). */
int fq_tgt_valid(const fq_img_explain *ex, uint8_t *out, fq_err *err);
/* fq_tgt_polygons with the fq_tgt_valid plane given (computed once per sample). */
int fq_tgt_polygons_valid(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                          const uint8_t *valid, uint8_t *out, fq_err *err);
/* The same, the moved vertices then taken into box's frame (x0, y0, x1, y1, output pixels)
 * scaled to mh x mw, as detectron2's PolygonMasks.crop_and_resize: x' = (x - x0) * mw /
 * max(x1 - x0, 0.1), y' likewise; rasterized at mh x mw into out (zeroed by the caller). */
int fq_tgt_polygons_box(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                        const float box[4], int mh, int mw, uint8_t *out, fq_err *err);
/* box (x0, y0, x1, y1, finite) of src (h x w uint8) resampled to mh x mw, nearest: cell (i, j)
 * takes pixel (floor(y0 + (i + 0.5) (y1 - y0) / mh), floor(x0 + (j + 0.5) (x1 - x0) / mw)),
 * clamped into the image. */
void fq_tgt_mask_box(const uint8_t *src, int h, int w, const float box[4], int mh, int mw, uint8_t *out);
/* The checks of fq_tgt_polygons alone (nothing rasterized). */
int fq_tgt_polygons_check(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                          fq_err *err);
/* Run-length mask (COCO: m column-major runs starting with 0s) of an h x w mask at the
 * source size: decoded, then moved with fq_tgt_mask (nearest neighbour, fill 0, sampling
 * FQ_TGT_*) into out (output size, uint8 0 / 1).  Errors: FQ_E_INVALID (h x w is not the
 * source size, runs that do not cover h * w pixels, bad sampling), FQ_E_UNSUPPORTED,
 * FQ_E_NOMEM. */
int fq_tgt_rle(const fq_img_explain *ex, const uint32_t *counts, int64_t m, int h, int w, int sampling,
               uint8_t *out, fq_err *err);
/* The checks of fq_tgt_rle alone. */
int fq_tgt_rle_check(const fq_img_explain *ex, const uint32_t *counts, int64_t m, int h, int w, fq_err *err);

/* TF Model Garden's image_info, row-major 4 x 2: (original h, w), (scaled h, w),
 * (y scale, x scale), (y offset, x offset): out = src * scale - offset.  Flips are
 * ignored (as TF flips before resize_and_crop_image); ops with an affine map
 * (RandomAffine, Rotate, Shear*, Translate*) fail with FQ_E_UNSUPPORTED. */
int fq_tgt_image_info(const fq_img_explain *ex, double out[8], fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
