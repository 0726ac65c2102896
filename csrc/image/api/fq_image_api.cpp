/* fq_image_api.cpp - the C API entry points of the per-sample image path: arrays and
 * encoded images (JPEG through fq_image_jpeg.cpp, the other formats through OpenCV),
 * the per-thread scratch, and the explain record.  No C++ exception leaves this file:
 * guarded() turns them into fq_err codes. */
#include "image/internal/fq_image_stages.h"

#include <cstdio>
#include <cstring>
#include <new>

#include <opencv2/imgproc.hpp>

namespace fqi {

void fill_explain_tail(fq_img_explain *ex, const Plan &pl, const fq_img_spec *sp)
{
    if (!ex)
        return;
    ex->n_ops = pl.n;
    for (int i = 0; i < pl.n; i++) {
        ex->ops[i] = pl.r[i];
        if (pl.r[i].applied) { /* the summary flags of the explain record */
            if (pl.r[i].kind == FQ_OP_HFLIP) ex->hflip = 1;
            if (pl.r[i].kind == FQ_OP_VFLIP) ex->vflip = 1;
            if (pl.r[i].kind == FQ_OP_GRAYSCALE) ex->grayscale = 1;
        }
    }
    if (pl.n > 0) {
        int k = pl.r[0].kind;
        if (k == FQ_OP_RANDOM_RESIZED_CROP || k == FQ_OP_CENTER_CROP ||
            (k == FQ_OP_RANDOM_CROP && !pl.r[0].pad[0] && !pl.r[0].pad[1])) {
            ex->has_crop = 1;
            std::memcpy(ex->crop_src, pl.r[0].box, sizeof ex->crop_src);
        }
    }
    ex->out_h = sp->out_h, ex->out_w = sp->out_w, ex->out_c = sp->out_c;
}

void init_explain(fq_img_explain *ex)
{
    if (!ex)
        return;
    std::memset(ex, 0, sizeof *ex);
    ex->scale_num = 8, ex->scale_denom = 8;
}

}  // namespace fqi

namespace {

template <typename F>
int guarded(fq_err *err, F &&fn)
{
    try {
        return fn();
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "out of memory while processing an image");
    } catch (const cv::Exception &e) {
        return fq_set_err(err, FQ_E_INVALID, "OpenCV error: %s", e.what());
    } catch (const std::exception &e) {
        return fq_set_err(err, FQ_E_INVALID, "internal error: %s", e.what());
    }
}

}  // namespace

extern "C" {

fq_img_scratch *fq_img_scratch_new(void) { return new (std::nothrow) fq_img_scratch(); }

void fq_img_scratch_free(fq_img_scratch *s)
{
    if (!s)
        return;
    if (s->jpeg_ready)
        jpeg_destroy_decompress(&s->cinfo);
    delete s;
}

void fq_img_set_opencv_threads(int n) { cv::setNumThreads(n); }

void fq_img_scratch_last_times(const fq_img_scratch *s, fq_stage_times *out) { *out = s->times; }

int fq_img_process_encoded(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *data, size_t len,
                           uint64_t seed, uint64_t epoch, uint64_t index, void *out_row, fq_img_explain *ex,
                           fq_err *err)
{
    fqi::init_explain(ex);
    if (!spec || !s || !out_row || (len > 0 && !data))
        return fq_set_err(err, FQ_E_INVALID, "fq_img_process_encoded: NULL argument");
    s->times = fq_stage_times{};
    if (len == 0)
        return fq_set_err(err, FQ_E_EMPTY, "empty input (0 bytes)");
    int fmt = fqi::sniff_format(data, len);
    if (fmt == FQ_FMT_UNKNOWN) {
        char hex[3 * 8 + 1] = {0};
        for (size_t i = 0; i < len && i < 8; i++)
            std::snprintf(hex + 3 * i, 4, "%02x ", data[i]);
        return fq_set_err(err, FQ_E_DECODE, "unrecognized image data (not JPEG/PNG/BMP/TIFF/WebP/PNM); first bytes: %s",
                          hex);
    }
    return guarded(err, [&]() -> int {
        if (fmt == FQ_FMT_JPEG) {
            int rc = fqi::process_jpeg(spec, s, data, len, seed, epoch, index, out_row, ex, err);
            if (rc)
                fqi::jpeg_reset(s);
            return rc;
        }
        cv::Mat img;
        fqi::SrcInfo si;
        const uint64_t t_dec = fq_now_ns();
        int rc = fqi::cv_decode(s, data, len, fmt, spec->out_c, spec->fmt.max_pixels, &img, &si, err);
        s->times.decode_ns = fq_now_ns() - t_dec;
        if (ex) {
            ex->src_format = fmt;
            ex->src_h = si.h, ex->src_w = si.w, ex->src_channels = si.channels, ex->src_bits = si.bits;
            ex->decoded_h = si.h, ex->decoded_w = si.w;
            ex->roi[2] = si.w, ex->roi[3] = si.h;
        }
        if (rc)
            return rc;
        fqi::Plan pl;
        rc = fqi::make_plan(spec, img.rows, img.cols, seed, epoch, index, &pl, err, &s->boxes);
        if (rc)
            return rc;
        rc = fqi::run_full(spec, s, img, pl, out_row, err);
        fqi::fill_explain_tail(ex, pl, spec);
        return rc;
    });
}

int fq_img_process_array(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *pixels, int h, int w, int c,
                         size_t row_stride, uint64_t seed, uint64_t epoch, uint64_t index, void *out_row,
                         fq_img_explain *ex, fq_err *err)
{
    fqi::init_explain(ex);
    if (!spec || !s || !out_row || !pixels)
        return fq_set_err(err, FQ_E_INVALID, "fq_img_process_array: NULL argument");
    s->times = fq_stage_times{};
    if (h <= 0 || w <= 0)
        return fq_set_err(err, FQ_E_EMPTY, "empty array image (%dx%d)", w, h);
    if (c != 1 && c != 3 && c != 4)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "array images need 1, 3 or 4 channels, got %d", c);
    if (row_stride < (size_t)w * c)
        return fq_set_err(err, FQ_E_INVALID, "row_stride %zu < width * channels (%d)", row_stride, w * c);
    if (ex) {
        ex->src_format = FQ_FMT_ARRAY;
        ex->src_h = h, ex->src_w = w, ex->src_channels = c, ex->src_bits = 8;
        ex->decoded_h = h, ex->decoded_w = w;
        ex->roi[2] = w, ex->roi[3] = h;
    }
    return guarded(err, [&]() -> int {
        cv::Mat src(h, w, CV_MAKETYPE(CV_8U, c), const_cast<uint8_t *>(pixels), row_stride);
        cv::Mat img = src;
        if (c != spec->out_c) {
            img = s->dec.mat(h, w, CV_MAKETYPE(CV_8U, spec->out_c));
            fqi::to_channels(src, spec->out_c, /*bgr=*/false, img);
        }
        fqi::Plan pl;
        int rc = fqi::make_plan(spec, h, w, seed, epoch, index, &pl, err, &s->boxes);
        if (rc)
            return rc;
        rc = fqi::run_full(spec, s, img, pl, out_row, err);
        fqi::fill_explain_tail(ex, pl, spec);
        return rc;
    });
}

}  // extern "C"
