/* fq_image_aug.h - private declarations shared by the augmentation primitives
 * (fq_image_aug.cpp) and the policies built on them (fq_image_aug_policy.cpp). */
#ifndef FQ_IMAGE_AUG_H
#define FQ_IMAGE_AUG_H

#include "image/internal/fq_image_stages.h"

namespace fqi {

/* Run primitive op `kind` (Invert ... TranslateY) on e.cur at level `value`, in the
 * primitive's own terms (a factor, bits, a threshold, degrees, pixels), applied
 * unconditionally; geometric ops fill with fill[3].  Draws nothing. */
void aug_apply(Exec &e, int kind, double value, const double fill[3]);

/* RandAugment: num_ops (1..4) ops drawn uniformly from torchvision v2's 14, each at
 * bin `magnitude` of num_bins, signed ops negated with probability 1/2. */
struct AugRandAugment {
    double num_ops, magnitude, num_bins;
    double fill[3];
};
/* TrivialAugmentWide: one op, its bin drawn uniformly from num_bins. */
struct AugTrivialAugment {
    double num_bins;
    double fill[3];
};

const char *rand_augment_check(const fq_op &op);
const char *trivial_augment_check(const fq_op &op);
int rand_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                      fq_err *err);
int trivial_augment_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                         fq_err *err);
/* runs the r.applied ops of r.order (kinds, 0 = Identity) at magnitudes r.factor */
void policy_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

}  // namespace fqi

#endif
