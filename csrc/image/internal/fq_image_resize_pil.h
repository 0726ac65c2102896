/* fq_image_resize_pil.h - Pillow's 8-bit Image.resize, bit for bit (fq_image_resize_pil.cpp),
 * called by Exec::resize_to for the pil_* interpolations (FQ_INTERP_PIL_*). */
#ifndef FQ_IMAGE_RESIZE_PIL_H
#define FQ_IMAGE_RESIZE_PIL_H

#include <opencv2/core.hpp>

#include "image/fq_image.h"

namespace fqi {

/* interp is one of the pil_* interpolations (a resize only: no warp takes them) */
inline bool is_pil_interp(int interp) { return interp >= FQ_INTERP_PIL_NEAREST && interp < FQ_INTERP_END; }

/* Resizes src (CV_8U, 1 to 4 channels, any step, at least 1x1) into dst (the same type, its
 * size is the target size, already allocated, not overlapping src) as Pillow's
 * Image.resize(dst size, resample) does on an 8-bit image of that many bands ("L", "RGB"):
 * FQ_INTERP_PIL_NEAREST (Pillow's NEAREST: the scale-affine sampler, source index
 * int(0.5 s + x s) accumulated in double), _BILINEAR, _BICUBIC (a = -0.5), _LANCZOS (3 lobes),
 * _BOX, _HAMMING: the separable antialiasing convolution of Pillow's Resample.c (support
 * scaled by the downscale factor, coefficients normalised in double then rounded to 22-bit
 * fixed point, horizontal pass first over the rows the vertical pass needs, each pass rounded
 * and clipped to 8 bits).  Returns true, or false touching nothing where it does not apply
 * (another depth or channel count, an empty image, interp not pil_*).  Plain C++; all state
 * in the calling thread's buffers; may throw std::bad_alloc (Exec's callers catch it). */
bool resize_pil_u8(const cv::Mat &src, cv::Mat &dst, int interp);

/* The two convolution passes with AVX2 (fq_image_resize_pil_avx2.cpp), the same sums as
 * the scalar passes: compiled for AVX2 and checking nothing, called by resize_pil_u8 only
 * after fq_cpu_has(FQ_CPU_AVX2).  A window of an axis: out index i reads len[i] taps from
 * source index start[i] with the 22-bit weights k[i * ksize ...].
 * horizontal: rows rows of C (1 to 4) channels, in_w pixels wide -> out_w pixels;
 * vertical: out_h rows of n bytes, each the window's rows of src. */
void resize_pil_h_avx2(const uint8_t *src, size_t sstep, int rows, int C, int in_w, const int *start,
                       const int *len, const int32_t *k, int ksize, int out_w, uint8_t *dst, size_t dstep);
void resize_pil_v_avx2(const uint8_t *src, size_t sstep, size_t n, const int *start, const int *len,
                       const int32_t *k, int ksize, int out_h, uint8_t *dst, size_t dstep);

}  // namespace fqi

#endif
