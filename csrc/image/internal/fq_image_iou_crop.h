/* fq_image_iou_crop.h - private declarations of RandomIoUCrop (fq_image_iou_crop.cpp), the
 * SSD crop of torchvision v2 whose draw depends on the sample's boxes: make_plan
 * (fq_image_plan.cpp) calls iou_crop_plan with them instead of the record's plan.  Its
 * record (target rule FQ_RULE_IOU_CROP, applied by fq_image_targets.cpp) is at the end of
 * fq_image_iou_crop.cpp (family kOpsIouCrop).  Semantics: docs/ops.md, docs/targets.md. */
#ifndef FQ_IMAGE_IOU_CROP_H
#define FQ_IMAGE_IOU_CROP_H

#include "image/internal/fq_image_stages.h"

namespace fqi {

/* The most sampler options, and the most rounds (option draws) of one sample: torchvision
 * loops until a crop is found or an option >= 1 is drawn; fastq stops after kIouMaxRounds
 * rounds with no crop (applied = 0), which the default options reach with probability
 * (6/7)^1000 < 1e-66 and a sample whose boxes can never satisfy any option below 1 reaches
 * only when no option >= 1 is given. */
constexpr int kIouMaxOptions = 10;
constexpr int kIouMaxRounds = 1000;

/* RandomIoUCrop(min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, sampler_options,
 * trials) of torchvision v2; options[0 .. n_options) (0 after). */
struct IouCrop {
    double min_scale, max_scale;
    double min_aspect, max_aspect;
    double options[kIouMaxOptions];
    double n_options;
    double trials;
};
constexpr fq_op_field kIouCropFields[] = {FQ_FIELD(IouCrop, min_scale), FQ_FIELD(IouCrop, max_scale),
                                          FQ_FIELD(IouCrop, min_aspect), FQ_FIELD(IouCrop, max_aspect),
                                          FQ_FIELD(IouCrop, options),    FQ_FIELD(IouCrop, n_options),
                                          FQ_FIELD(IouCrop, trials)};

bool is_iou_crop(int kind);
const char *iou_crop_check(const fq_op &op);
int iou_crop_geometry(const fq_op &op, int *h, int *w);
/* the record's plan: without the sample's boxes, which it cannot draw; FQ_E_INVALID */
int iou_crop_plan_noboxes(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                          fq_err *err);
/* the plan of op i of pl (records 0 .. i-1 planned) for an *h x *w input of an H x W source,
 * from the sample's boxes bx (source pixels or normalized; nullptr / n < 0: FQ_E_INVALID) */
int iou_crop_plan(const fq_op &op, fq_rng *rng, const PlanBoxes *bx, int H, int W, const Plan &pl, int i, int *h,
                  int *w, fq_img_op_explain &r, fq_err *err);
void iou_crop_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
/* chain rule: every op before a RandomIoUCrop has a target rule (its boxes are moved to it
 * at plan time); FQ_OK or FQ_E_INVALID naming the op */
int iou_crop_chain_check(const fq_op *ops, int n_ops, fq_err *err);

}  // namespace fqi

#endif
