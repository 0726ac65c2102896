/* fq_image_resize.h - bicubic resize of 8-bit 3-channel images with AVX2, byte for byte what
 * the linked OpenCV 4.6.0 writes (fq_image_resize_cubic.cpp), called by Exec::resize_to. */
#ifndef FQ_IMAGE_RESIZE_H
#define FQ_IMAGE_RESIZE_H

#include <opencv2/core.hpp>

namespace fqi {

/* Resizes src (CV_8UC3, any step, at least 1x1) into dst (CV_8UC3, its size is the target
 * size, already allocated, not overlapping src) as cv::resize(src, dst, dst.size(), 0, 0,
 * INTER_CUBIC) does, and returns true.  Returns false and touches nothing where it does not
 * apply: not x86-64 with AVX2, another type, switched off (fq_img_simd_resize_set), or a linked
 * OpenCV whose bicubic resize may differ (not 4.6.0, a 256-bit or FMA baseline, IPP or a
 * custom HAL: fq_img_simd_resize_status says which).  Reentrant: all state is on the stack
 * or in the calling thread's vectors; may throw std::bad_alloc (Exec's callers catch it). */
bool resize_cubic_u8c3(const cv::Mat &src, cv::Mat &dst);

}  // namespace fqi

#endif
