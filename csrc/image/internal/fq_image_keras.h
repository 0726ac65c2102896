/* fq_image_keras.h - Keras 3 preprocessing layers as native ops, with Keras's own draws
 * and arithmetic (keras/src/layers/preprocessing/image_preprocessing/): RandomZoom,
 * RandomTranslation, RandomRotation (fq_image_keras_geom.cpp: TF's
 * ImageProjectiveTransformV3 sampling, fill modes and pixel centres) and RandomContrast,
 * RandomBrightness (fq_image_keras_color.cpp).  docs/ops.md, "Keras layers". */
#ifndef FQ_IMAGE_KERAS_H
#define FQ_IMAGE_KERAS_H

#include "image/internal/fq_image_stages.h"

namespace fqi {

/* Keras's fill_mode names, in this order */
enum KerasFill { KF_REFLECT = 0, KF_WRAP = 1, KF_CONSTANT = 2, KF_NEAREST = 3, KF_END };

struct KerasGeom {      /* KerasRandomZoom / KerasRandomTranslation / KerasRandomRotation */
    double height[2];   /* zoom: the height factor range (zoom = 1 + U); translation: fraction of
                           the height; rotation: the factor range (angle = U * 360 degrees) */
    double width[2];    /* zoom / translation: the width range (rotation: unused, 0) */
    double same;        /* zoom: 1 = the width zoom is the height draw (width_factor=None) */
    double fill_mode;   /* KerasFill */
    double fill_value;  /* constant fill, 0..255 */
    double interp;      /* FQ_INTERP_NEAREST or FQ_INTERP_BILINEAR */
    double exact;       /* 1: TF's float32 sampling (byte-equal to TF's result rounded); 0: bilinear with
                           reflect / nearest / constant runs cv::warpAffine on the same matrix (OpenCV's
                           1/32-pixel fixed point; wrap and nearest interpolation stay exact) */
};
inline constexpr fq_op_field kKerasGeomFields[] = {
    FQ_FIELD(KerasGeom, height), FQ_FIELD(KerasGeom, width), FQ_FIELD(KerasGeom, same),
    FQ_FIELD(KerasGeom, fill_mode), FQ_FIELD(KerasGeom, fill_value), FQ_FIELD(KerasGeom, interp),
    FQ_FIELD(KerasGeom, exact)};

struct KerasColor {      /* KerasRandomContrast / KerasRandomBrightness */
    double factor[2];    /* contrast: the factor is U(factor[0], factor[1]) (Keras: 1 - lower,
                            1 + upper); brightness: delta = U(factor) * (value_range[1] - value_range[0]) */
    double value_range[2]; /* the clip range, integers 0 <= lo < hi <= 255 */
};
inline constexpr fq_op_field kKerasColorFields[] = {FQ_FIELD(KerasColor, factor), FQ_FIELD(KerasColor, value_range)};

const char *keras_zoom_check(const fq_op &op);
const char *keras_translation_check(const fq_op &op);
const char *keras_rotation_check(const fq_op &op);
int keras_zoom_plan(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
int keras_translation_plan(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
int keras_rotation_plan(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
/* the warp of r.matrix (Keras's output -> input map, float32 values) */
void keras_geom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

const char *keras_color_check(const fq_op &op);
int keras_color_plan(const fq_op &, fq_rng *, int64_t, int *, int *, fq_img_op_explain &, fq_err *);
void keras_contrast_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
void keras_brightness_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);

}  // namespace fqi

#endif
