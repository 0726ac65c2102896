/* fq_image_internal.h - private C++ declarations shared by fq_image*.cpp (not installed,
 * not part of the C API). */
#ifndef FQ_IMAGE_INTERNAL_H
#define FQ_IMAGE_INTERNAL_H

#ifndef __cplusplus
#error "fq_image_internal.h is C++ only"
#endif

#include <csetjmp>
#include <cstdio> /* jpeglib.h needs FILE */
#include <vector>

#include <jpeglib.h>
#include <opencv2/core.hpp>

#include "image/fq_image.h"
#include "core/fq_stage_times.h"

namespace fqi {

/* libjpeg error manager: error_exit / corrupt-data warnings longjmp back here. */
struct JpegErr {
    struct jpeg_error_mgr pub;
    std::jmp_buf jb;
    int code;
    char msg[JMSG_LENGTH_MAX];
};

/* A growable byte buffer that cv::Mat headers are laid over (no per-sample malloc
 * once the buffer reached its high-water mark). */
struct Buf {
    std::vector<uint8_t> v;
    /* Mat header of h x w x type over this buffer; may throw std::bad_alloc. */
    cv::Mat mat(int h, int w, int type, size_t step = 0);
};

/* The boxes a sample's plan may draw from (fq_img_scratch_set_boxes; n < 0: none given). */
struct PlanBoxes {
    const float *x0 = nullptr, *y0 = nullptr, *x1 = nullptr, *y1 = nullptr;
    size_t stride = 4;
    int n = -1;
    int normalized = 0;
};

}  // namespace fqi

struct fq_img_scratch {
    bool jpeg_ready = false;
    struct jpeg_decompress_struct cinfo;
    fqi::JpegErr jerr;
    fqi::Buf dec, tmp, tmp2; /* decoder output and its conversions */
    fqi::Buf a, b, g1, g2;   /* op ping-pong buffers and op temporaries */
    cv::Mat cv_decoded; /* owned by OpenCV (imdecode result) */
    fq_stage_times times{}; /* the last call's decode/ops/write ns (fq_stage_times.h) */
    std::vector<uint8_t> rst_buf; /* segment decode: the mini-JPEG (fq_image_restart_crop.cpp) */
    std::vector<size_t> rst_seg;  /* segment decode: (start, end) of each restart segment */
    fqi::PlanBoxes boxes;         /* the next samples' boxes, for RandomIoUCrop's plan */
};

namespace fqi {

struct SrcInfo {
    int format = FQ_FMT_UNKNOWN;
    int h = 0, w = 0;
    int channels = 0; /* as stored */
    int bits = 8;
    int jpeg_cs = 0;  /* J_COLOR_SPACE of a JPEG */
};

/* Identify the container from its first bytes (FQ_FMT_UNKNOWN if none matches). */
int sniff_format(const uint8_t *data, size_t len);
/* An EOI marker (FF D9) somewhere in p[0, n). */
bool has_eoi(const uint8_t *p, size_t n);

/* Read a JPEG header into the scratch decoder; fills si.  Errors: FQ_E_DECODE. */
int jpeg_header(fq_img_scratch *s, const uint8_t *data, size_t len, SrcInfo *si, fq_err *err);

/* Decode the JPEG whose header jpeg_header() read, at scale num/8 with the inverse DCT
 * idct (fq_idct: FQ_IDCT_ACCURATE / FQ_IDCT_FAST; only full scale has two), the region
 * [x, x+w) x [y, y+h) of the scaled image (w <= 0: the whole image), to out_channels
 * (1 gray, 3 RGB).  *out is a view of exactly that region in s->dec.
 * *scaled_h/w get the full scaled size.  Always leaves the decoder reset. */
int jpeg_decode(fq_img_scratch *s, const SrcInfo &si, int scale_num, int idct, int x, int y, int w, int h,
                int out_channels, cv::Mat *out, int *scaled_h, int *scaled_w, fq_err *err);

/* jpeg_decode of a crop ROI, through a mini-JPEG of the restart segments that cover
 * it when data (the bytes jpeg_header read) allows (fq_image_restart_crop.cpp), else exactly
 * jpeg_decode.  Same contract and output as jpeg_decode, except that only the pixels
 * of `need` (x, y, w, h: the box the ops read, scaled; NULL: the whole ROI) plus 8
 * pixels around it are guaranteed to be the decoded ones. */
int jpeg_decode_crop(fq_img_scratch *s, const uint8_t *data, size_t len, const SrcInfo &si, int scale_num, int idct, int x,
                     int y, int w, int h, const int *need, int out_channels, cv::Mat *out, int *scaled_h,
                     int *scaled_w, fq_err *err);

/* Reset the scratch decoder after a header was read but no decode followed. */
void jpeg_reset(fq_img_scratch *s);

/* Read width/height from a non-JPEG header without decoding (PNG, BMP, GIF, PNM, TIFF,
 * WebP), from the same fields OpenCV's readers take, so that max_pixels is checked
 * before OpenCV allocates; returns 1 if known. */
int peek_dims(const uint8_t *data, size_t len, int fmt, int64_t *h, int64_t *w);

/* Decode a non-JPEG image with cv::imdecode and convert it to out_channels uint8
 * (gray / RGB).  *out may be a view into s->cv_decoded or s->dec. */
int cv_decode(fq_img_scratch *s, const uint8_t *data, size_t len, int fmt, int out_channels,
              int64_t max_pixels, cv::Mat *out, SrcInfo *si, fq_err *err);

/* Convert a uint8 image with c = 1, 3 (RGB) or 4 (RGBA) channels to out_channels. */
void to_channels(const cv::Mat &src, int out_channels, bool bgr, cv::Mat &dst);

const char *format_name(int fmt);

/* uint8 -> float32 as a per-channel affine map in double (fq_image_write_simd.cpp). */
struct F32Affine {
    double a[3], b[3];
    bool exact; /* (float)fma(v, a, b) == lut[c][v] for all c, v: the SIMD write may run */
};

/* Fill k for the table lut (Normalize mean/std when norm, else v/255) and check it. */
void affine_init(F32Affine *k, const float (*lut)[256], const double *mean, const double *stdv, bool norm);

/* NHWC float32 write of img (1 or 3 channels) with optional flips, bit-identical to
 * the table lookup; returns false (nothing written) when it does not apply (no
 * AVX2/FMA, k not exact).  May throw std::bad_alloc. */
bool write_f32_hwc_simd(const F32Affine &k, const float (*lut)[256], const cv::Mat &img, bool hf, bool vf,
                        float *out, bool bgr = false);
/* NHWC uint8 write of a 1- or 3-channel img with optional flips, in BGR order when bgr
 * (3 channels; SSSE3 shuffles); false (nothing written) without AVX2 or when the SIMD
 * write is off. */
bool write_u8_hwc_simd(const cv::Mat &img, bool hf, bool vf, bool bgr, uint8_t *out);

}  // namespace fqi

#endif
