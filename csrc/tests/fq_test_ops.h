/* fq_test_ops.h - build an fq_op from its named parameter struct (C++ test drivers only).
 * Give every field with a designated initializer: a missing one is a -Wextra warning,
 * a wrong name or order a compile error. */
#ifndef FQ_TEST_OPS_H
#define FQ_TEST_OPS_H

#include <cstring>

#include "image/fq_image.h"

static inline fq_op fq_op_new(int kind)
{
    fq_op o;
    std::memset(&o, 0, sizeof o);
    o.kind = kind;
    return o;
}
static inline fq_op op_rrc(const fq_op_rrc &p) { fq_op o = fq_op_new(FQ_OP_RANDOM_RESIZED_CROP); o.rrc = p; return o; }
static inline fq_op op_resize(const fq_op_resize &p) { fq_op o = fq_op_new(FQ_OP_RESIZE); o.resize = p; return o; }
static inline fq_op op_center_crop(double h, double w)
{
    fq_op o = fq_op_new(FQ_OP_CENTER_CROP);
    o.center_crop.out_h = h, o.center_crop.out_w = w;
    return o;
}
static inline fq_op op_random_crop(const fq_op_random_crop &p) { fq_op o = fq_op_new(FQ_OP_RANDOM_CROP); o.random_crop = p; return o; }
static inline fq_op op_hflip(double p) { fq_op o = fq_op_new(FQ_OP_HFLIP); o.hflip.p = p; return o; }
static inline fq_op op_vflip(double p) { fq_op o = fq_op_new(FQ_OP_VFLIP); o.vflip.p = p; return o; }
static inline fq_op op_grayscale(double p) { fq_op o = fq_op_new(FQ_OP_GRAYSCALE); o.grayscale.p = p; return o; }
static inline fq_op op_color_jitter(const fq_op_color_jitter &p) { fq_op o = fq_op_new(FQ_OP_COLOR_JITTER); o.color_jitter = p; return o; }
static inline fq_op op_random_affine(const fq_op_random_affine &p) { fq_op o = fq_op_new(FQ_OP_RANDOM_AFFINE); o.random_affine = p; return o; }
static inline fq_op op_normalize(const fq_op_normalize &p) { fq_op o = fq_op_new(FQ_OP_NORMALIZE); o.normalize = p; return o; }

#endif
