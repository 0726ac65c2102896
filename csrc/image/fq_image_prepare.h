/* fq_image_prepare.h - restart-segment decoding switches and the lossless "prepare"
 * re-encode (csrc/image/decode/fq_image_restart_crop.cpp, csrc/image/decode/fq_image_prepare.cpp).  C API, no Python.h.
 *
 * Segment decoding: for a baseline Huffman JPEG with a restart interval that divides
 * the MCUs per row, the crop decode builds a small JPEG holding only the restart
 * segments that cover the crop and decodes that (docs/prepare.md).  Output is
 * bit-identical to the plain ROI decode; anything else falls back to it.
 *
 * Thread safety: fq_img_segment_decode_set / _enabled / _count use atomics and may be
 * called from any thread; fq_jpeg_prepare is reentrant (its own libjpeg objects).
 */
#ifndef FQ_IMAGE_PREPARE_H
#define FQ_IMAGE_PREPARE_H

#include <stddef.h>
#include <stdint.h>

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turn segment decoding on (1) or off (0) for the whole process (default: on unless the
 * environment variable FASTQ_SEGMENT_DECODE is "0" when the library loads). */
void fq_img_segment_decode_set(int on);
int fq_img_segment_decode_enabled(void);
/* Number of crop decodes that went through a segment mini-JPEG since load. */
uint64_t fq_img_segment_decode_count(void);

/* Turn the SIMD float32 write (csrc/image/batch/fq_image_write_simd.cpp) on/off for the process
 * (default on unless FASTQ_SIMD_WRITE is "0" at load).  It is bit-identical to the
 * table write; the switch is for tests and benchmarks. */
void fq_img_simd_write_set(int on);
int fq_img_simd_write_enabled(void);
/* The same for TensorpackColor's AVX2 path (csrc/image/color/fq_image_aug_tensorpack_simd.cpp; FASTQ_SIMD_TP),
 * bit-identical to its scalar path. */
void fq_img_simd_tp_set(int on);
int fq_img_simd_tp_enabled(void);
/* The same for the AVX2 bicubic resize of 8-bit 3-channel images (csrc/image/geometry/fq_image_resize_cubic.cpp;
 * FASTQ_SIMD_RESIZE), byte for byte cv::resize(INTER_CUBIC) of OpenCV 4.6.0.
 * fq_img_simd_resize_unavailable() is "" where the path can run, else why not (no AVX2, another
 * OpenCV version or CPU baseline, not x86-64); a static string. */
void fq_img_simd_resize_set(int on);
int fq_img_simd_resize_enabled(void);
const char *fq_img_simd_resize_unavailable(void);

/* Result of fq_jpeg_prepare. */
typedef struct fq_prepare_info {
    int status;             /* FQ_PREP_* */
    int width, height;      /* of the image (0 when not a JPEG) */
    int mcus_per_row;       /* of the (single, interleaved) scan */
    int restart_interval;   /* chosen, in MCUs (0 when not rewritten) */
    int old_restart_interval;
    size_t in_bytes, out_bytes;
    char why[160];          /* for FQ_PREP_KEPT: why the file is kept as it is */
} fq_prepare_info;

enum {
    FQ_PREP_REWRITTEN = 1, /* *out holds a re-encoded JPEG */
    FQ_PREP_KEPT = 2       /* keep the input unchanged (not a JPEG, progressive, ...) */
};

/* Losslessly re-encode the JPEG in data[0, len) (jpeg_read_coefficients ->
 * jpeg_write_coefficients: same quantized coefficients; single-scan baseline Huffman
 * with optimized tables; APPn/COM markers copied) with a restart marker every
 * `interval` MCUs, where interval is the divisor of the MCUs per row nearest to
 * target_mcus (>= 1) on a log scale that leaves at least 2 segments per row.
 * Progressive, multi-scan and arithmetic-coded files are converted too.  Status
 * FQ_PREP_KEPT (with info->why) for non-JPEGs, lossless/hierarchical or non-8-bit
 * JPEGs, CMYK and other than 1 or 3 components, sampling factors above 2, images
 * narrower than 2 segments, and files that already have restart segments that tile
 * each MCU row.  On FQ_PREP_REWRITTEN, *out is a malloc'ed buffer of info->out_bytes
 * bytes that the caller frees with fq_jpeg_prepare_free.  Errors (corrupt JPEG data,
 * which is never re-encoded with grey fill; out of memory): nonzero return with err
 * set.  Needs no GIL (pure C++); safe to call from several threads at once. */
int fq_jpeg_prepare(const uint8_t *data, size_t len, int target_mcus, uint8_t **out, fq_prepare_info *info,
                    fq_err *err);
void fq_jpeg_prepare_free(uint8_t *buf);

/* Training-resolution copy (opt-in, lossy: `fastq prepare --max-side/--max-pixels`):
 * when the JPEG in data[0, len) has its longer side above max_side (0: no limit) or
 * more than max_pixels pixels (0: no limit), decode it fully (libjpeg, 8-bit, gray
 * stays gray, everything else to RGB), shrink it with cv::resize INTER_AREA keeping
 * the aspect (new side = max(1, round(side * s)), s the largest factor within both
 * limits), and encode it at `quality` (1-100; 4:2:0 chroma, optimized Huffman
 * tables) with restart markers that tile each MCU row as fq_jpeg_prepare would
 * choose them for target_mcus (none when fewer than 2 segments per row fit).  No
 * APPn/COM markers are written: the copy is EXIF- and ICC-free; EXIF orientation is
 * not applied (fastq's decoder ignores it, so the copy's pixels are oriented as
 * fastq decodes the original).  Status FQ_PREP_REWRITTEN with *out (free with
 * fq_jpeg_prepare_free) and info->width/height the new size; FQ_PREP_KEPT with
 * info->why when the image is within the limits or cannot be decoded to 8-bit gray
 * or RGB by libjpeg (CMYK, 12-bit, lossless: the caller keeps the lossless path).
 * Corrupt data (any libjpeg warning included) and out of memory: nonzero return with
 * err set.  Reentrant; needs no GIL. */
int fq_jpeg_downscale(const uint8_t *data, size_t len, int max_side, int64_t max_pixels, int quality,
                      int target_mcus, uint8_t **out, fq_prepare_info *info, fq_err *err);

#ifdef __cplusplus
}
#endif

#endif
