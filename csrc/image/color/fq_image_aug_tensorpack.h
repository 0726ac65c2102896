/* fq_image_aug_tensorpack.h - TensorpackColor's vectorized colour path (fq_image_aug_tensorpack_simd.cpp),
 * called by tp_color_exec (fq_image_aug_tensorpack.cpp). */
#ifndef FQ_IMAGE_AUG_TENSORPACK_H
#define FQ_IMAGE_AUG_TENSORPACK_H

#include <opencv2/core.hpp>

namespace fqi {

/* The four float32 steps of TensorpackColor in the order ord[] (0 brightness x * bv, 1
 * contrast x * ca + mean * cb, 2 saturation x * sa + grey * sb, 3 lighting x + inc[ch],
 * each clipped to [0, 255]) on the 3-channel uint8 image src (fastq's channel order: grey =
 * (ch2 * 0.114f + ch1 * 0.587f) + ch0 * 0.299f), then truncated into dst (same size, type
 * and order).  *mean gets the contrast step's grey mean (sum in double / n).  Same float
 * operations in the same order as the scalar path of fq_image_aug_tensorpack.cpp, so the same bytes.
 * Returns false (and touches nothing) where it does not apply: not x86-64 with AVX2, not 3
 * channels, or switched off (fq_img_simd_tp_set). */
bool tp_color_simd(const cv::Mat &src, cv::Mat &dst, const int ord[4], float bv, float ca, float cb, float sa,
                   float sb, const float inc[3], double *mean);

}  // namespace fqi

#endif
