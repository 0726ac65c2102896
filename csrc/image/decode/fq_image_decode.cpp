/* fq_image_decode.cpp - decoding: JPEG through libjpeg-turbo's libjpeg API (ROI crop +
 * DCT scaling, corrupt-data warnings are errors), everything else through
 * cv::imdecode, with channel/bit-depth conversion to 8-bit gray or RGB.
 *
 * setjmp/longjmp discipline: every function that calls into libjpeg sets the jump
 * buffer itself and holds only trivially destructible locals between setjmp and the
 * libjpeg calls, so a longjmp never skips a C++ destructor.
 */
#include "image/internal/fq_image_internal.h"

#include <cstring>
#include <new>

#include <jerror.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace fqi {

cv::Mat Buf::mat(int h, int w, int type, size_t step)
{
    size_t es = CV_ELEM_SIZE(type);
    if (step == 0)
        step = (size_t)w * es;
    size_t need = step * (size_t)h;
    if (need == 0)
        need = 1;
    if (v.size() < need)
        v.resize(need); /* may throw std::bad_alloc: callers catch */
    return cv::Mat(h, w, type, v.data(), step);
}

/* ---- libjpeg ------------------------------------------------------------- */

extern "C" {
static void fq_jpeg_error_exit(j_common_ptr c)
{
    JpegErr *e = reinterpret_cast<JpegErr *>(c->err);
    (*c->err->format_message)(c, e->msg);
    e->code = (c->err->msg_code == JERR_OUT_OF_MEMORY) ? FQ_E_NOMEM : FQ_E_DECODE;
    std::longjmp(e->jb, 1);
}

static void fq_jpeg_emit_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return; /* trace messages */
    int code = c->err->msg_code;
    /* Benign warnings: unknown JFIF revision, unknown Adobe transform, bad ICC marker. */
    if (code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC) {
        c->err->num_warnings++;
        return;
    }
    /* Corrupt-data warning (truncated file, bad Huffman code, ...): libjpeg would go
     * on and fill with grey; we stop here and report it. */
    JpegErr *e = reinterpret_cast<JpegErr *>(c->err);
    (*c->err->format_message)(c, e->msg);
    e->code = FQ_E_DECODE;
    std::longjmp(e->jb, 1);
}

static void fq_jpeg_output_message(j_common_ptr) {}
}

static void jpeg_init(fq_img_scratch *s)
{
    if (s->jpeg_ready)
        return;
    std::memset(&s->cinfo, 0, sizeof s->cinfo);
    s->cinfo.err = jpeg_std_error(&s->jerr.pub);
    s->jerr.pub.error_exit = fq_jpeg_error_exit;
    s->jerr.pub.emit_message = fq_jpeg_emit_message;
    s->jerr.pub.output_message = fq_jpeg_output_message;
    s->jerr.code = 0;
    s->jerr.msg[0] = '\0';
    /* jpeg_create_decompress only fails on out-of-memory, through error_exit */
    if (setjmp(s->jerr.jb)) {
        return; /* jpeg_ready stays false; the caller reports NOMEM */
    }
    jpeg_create_decompress(&s->cinfo);
    s->jpeg_ready = true;
}

void jpeg_reset(fq_img_scratch *s)
{
    if (s->jpeg_ready)
        jpeg_abort_decompress(&s->cinfo);
}

static int jpeg_fail(fq_img_scratch *s, const char *what, fq_err *err)
{
    jpeg_abort_decompress(&s->cinfo);
    if (s->jerr.code == FQ_E_NOMEM)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory while %s JPEG: %s", what, s->jerr.msg);
    return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data (%s): %s", what, s->jerr.msg);
}

/* Sampling layouts libjpeg-turbo decodes correctly: every component's factors divide
 * the first (luma) component's, by 1, 2 or 4 horizontally and 1 or 2 vertically (4:4:4,
 * 4:2:2, 4:2:0, 4:4:0, 4:1:1, 4:1:0 and YCCK/CMYK with K like Y).  Others (e.g. Y h2v1
 * with Cr h1v4) make it emit rows it never wrote.  Returns false and describes the
 * layout in `what` ("Y h2v1, Cb h1v1, Cr h1v4") otherwise. */
static bool sampling_supported(j_decompress_ptr ci, char *what, size_t n)
{
    if (ci->num_components < 2)
        return true;
    const jpeg_component_info *c0 = &ci->comp_info[0];
    bool ok = true;
    for (int i = 0; i < ci->num_components; i++) {
        const jpeg_component_info *c = &ci->comp_info[i];
        if (c0->h_samp_factor % c->h_samp_factor != 0 || c0->v_samp_factor % c->v_samp_factor != 0) {
            ok = false;
            break;
        }
        int rh = c0->h_samp_factor / c->h_samp_factor, rv = c0->v_samp_factor / c->v_samp_factor;
        if ((rh != 1 && rh != 2 && rh != 4) || (rv != 1 && rv != 2)) {
            ok = false;
            break;
        }
    }
    if (ok)
        return true;
    static const char *const ycc[] = {"Y", "Cb", "Cr", "K"}, *const rgb[] = {"R", "G", "B"},
                              *const cmyk[] = {"C", "M", "Y", "K"};
    const char *const *names = ci->jpeg_color_space == JCS_RGB ? rgb : ci->jpeg_color_space == JCS_CMYK ? cmyk : ycc;
    size_t used = 0;
    what[0] = '\0';
    for (int i = 0; i < ci->num_components && i < (names == rgb ? 3 : 4) && used < n; i++) {
        const jpeg_component_info *c = &ci->comp_info[i];
        int k = std::snprintf(what + used, n - used, "%s%s h%dv%d", i ? ", " : "", names[i],
                              c->h_samp_factor, c->v_samp_factor);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    return false;
}

int jpeg_header(fq_img_scratch *s, const uint8_t *data, size_t len, SrcInfo *si, fq_err *err)
{
    /* A fresh decompressor for every image: libjpeg keeps quantisation and Huffman
     * tables across images (for abbreviated streams), so a JPEG without DQT/DHT would
     * otherwise decode with whatever tables this worker saw last.  Fresh, a missing
     * DHT gets libjpeg-turbo's standard tables (as Motion-JPEG implies) and a missing
     * DQT is an error.  Costs a few small allocations per image. */
    if (s->jpeg_ready) {
        jpeg_destroy_decompress(&s->cinfo);
        s->jpeg_ready = false;
    }
    jpeg_init(s);
    if (!s->jpeg_ready)
        return fq_set_err(err, FQ_E_NOMEM, "cannot create a JPEG decoder");
    j_decompress_ptr ci = &s->cinfo;
    s->jerr.code = 0;
    if (setjmp(s->jerr.jb))
        return jpeg_fail(s, "reading header", err);
    jpeg_mem_src(ci, data, (unsigned long)len);
    int r = jpeg_read_header(ci, TRUE);
    if (r != JPEG_HEADER_OK) {
        jpeg_abort_decompress(ci);
        return fq_set_err(err, FQ_E_DECODE, "JPEG has no image (tables-only datastream)");
    }
    char layout[96];
    if (!sampling_supported(ci, layout, sizeof layout)) {
        jpeg_abort_decompress(ci);
        return fq_set_err(err, FQ_E_UNSUPPORTED, "unsupported JPEG sampling factors (%s)", layout);
    }
    si->format = FQ_FMT_JPEG;
    si->w = (int)ci->image_width;
    si->h = (int)ci->image_height;
    si->channels = ci->num_components;
    si->bits = 8;
    si->jpeg_cs = ci->jpeg_color_space;
    return FQ_OK;
}

/* Phase 1: scale, colour space, start, horizontal crop. Only POD locals. */
static int jpeg_start(fq_img_scratch *s, int scale_num, int want_cs, int idct, int x, int w, unsigned *xoff,
                      unsigned *cw, int *full_h, int *full_w, fq_err *err)
{
    j_decompress_ptr ci = &s->cinfo;
    if (setjmp(s->jerr.jb))
        return jpeg_fail(s, "starting decompression", err);
    ci->scale_num = (unsigned)scale_num;
    ci->scale_denom = 8;
    ci->out_color_space = (J_COLOR_SPACE)want_cs;
    ci->dct_method = idct == FQ_IDCT_FAST ? JDCT_IFAST : JDCT_ISLOW; /* scaled IDCTs have one method */
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
    *full_w = (int)ci->output_width; /* jpeg_crop_scanline changes output_width */
    *full_h = (int)ci->output_height;
    *xoff = 0;
    *cw = ci->output_width;
    if (w > 0 && (x > 0 || (unsigned)w < ci->output_width)) {
        JDIMENSION xo = (JDIMENSION)x, ww = (JDIMENSION)w;
        jpeg_crop_scanline(ci, &xo, &ww);
        *xoff = xo;
        *cw = ww;
    }
    return FQ_OK;
}

/* Is there an EOI marker (FF D9) in p[0, n)? */
bool has_eoi(const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    while (p < end) {
        const uint8_t *q = static_cast<const uint8_t *>(std::memchr(p, 0xFF, (size_t)(end - p)));
        if (!q || q + 1 >= end)
            return false;
        if (q[1] == 0xD9)
            return true;
        p = q + 1;
    }
    return false;
}

/* Phase 2: skip y rows, read h rows into buf (stride bytes per row). */
static int jpeg_rows(fq_img_scratch *s, int y, int h, uint8_t *buf, size_t stride, fq_err *err)
{
    j_decompress_ptr ci = &s->cinfo;
    if (setjmp(s->jerr.jb))
        return jpeg_fail(s, "decoding", err);
    if (y > 0) {
        JDIMENSION skipped = jpeg_skip_scanlines(ci, (JDIMENSION)y);
        if (skipped != (JDIMENSION)y) {
            jpeg_abort_decompress(ci);
            return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data: could not skip to row %d", y);
        }
    }
    int done = 0;
    while (done < h) {
        JSAMPROW row = buf + (size_t)done * stride;
        JDIMENSION n = jpeg_read_scanlines(ci, &row, 1);
        if (n != 1) {
            jpeg_abort_decompress(ci);
            return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data: decoder stopped at row %d of %d",
                              y + done, (int)ci->output_height);
        }
        done++;
    }
    /* We stop after the rows we need, so libjpeg never sees a truncation past them.
     * Require the end-of-image marker after the consumed data so that a truncated
     * file fails whatever region a sample decodes (progressive files were read
     * completely by jpeg_start_decompress, which reports truncation itself). */
    bool complete = ci->progressive_mode || ci->unread_marker == 0xD9 ||
                    has_eoi(ci->src->next_input_byte, ci->src->bytes_in_buffer);
    jpeg_abort_decompress(ci); /* the rest of the image is not needed */
    if (!complete)
        return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data: truncated (no end-of-image marker)");
    return FQ_OK;
}

/* Adobe (inverted) CMYK -> RGB, same formula as OpenCV's JPEG reader. */
static void cmyk_to_rgb(const cv::Mat &src, cv::Mat &dst)
{
    for (int y = 0; y < src.rows; y++) {
        const uint8_t *p = src.ptr<uint8_t>(y);
        uint8_t *q = dst.ptr<uint8_t>(y);
        for (int x = 0; x < src.cols; x++, p += 4, q += 3) {
            int c = p[0], m = p[1], yy = p[2], k = p[3];
            q[0] = (uint8_t)(k - (((255 - c) * k) >> 8));
            q[1] = (uint8_t)(k - (((255 - m) * k) >> 8));
            q[2] = (uint8_t)(k - (((255 - yy) * k) >> 8));
        }
    }
}

int jpeg_decode(fq_img_scratch *s, const SrcInfo &si, int scale_num, int idct, int x, int y, int w, int h,
                int out_channels, cv::Mat *out, int *scaled_h, int *scaled_w, fq_err *err)
{
    bool cmyk = (si.jpeg_cs == JCS_CMYK || si.jpeg_cs == JCS_YCCK);
    int want_cs = cmyk ? JCS_CMYK : (out_channels == 1 ? JCS_GRAYSCALE : JCS_EXT_RGB);
    int nc = cmyk ? 4 : out_channels;
    if (!cmyk && si.channels != 1 && si.channels != 3) {
        jpeg_reset(s);
        return fq_set_err(err, FQ_E_UNSUPPORTED, "unsupported JPEG with %d components (colour space %d)",
                          si.channels, si.jpeg_cs);
    }
    unsigned xoff = 0, cw = 0;
    int rc = jpeg_start(s, scale_num, want_cs, idct, x, w, &xoff, &cw, scaled_h, scaled_w, err);
    if (rc)
        return rc;
    if (w <= 0) {
        x = 0;
        y = 0;
        w = *scaled_w;
        h = *scaled_h;
    }
    if (x < 0 || y < 0 || w <= 0 || h <= 0 || (unsigned)x < xoff || (unsigned)(x + w) > xoff + cw ||
        y + h > *scaled_h) {
        jpeg_reset(s);
        return fq_set_err(err, FQ_E_INVALID, "internal: bad JPEG region %d,%d %dx%d of %dx%d", x, y, w, h,
                          *scaled_w, *scaled_h);
    }
    cv::Mat buf;
    try {
        buf = s->dec.mat(h, (int)cw, CV_MAKETYPE(CV_8U, nc));
    } catch (const std::bad_alloc &) {
        jpeg_reset(s);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory for a %ux%d decode buffer", cw, h);
    }
    rc = jpeg_rows(s, y, h, buf.data, buf.step[0], err);
    if (rc)
        return rc;
    cv::Mat view = buf(cv::Rect((int)(x - (int)xoff), 0, w, h));
    if (cmyk) {
        try {
            cv::Mat rgb = s->tmp2.mat(h, w, CV_8UC3);
            cmyk_to_rgb(view, rgb);
            if (out_channels == 1) {
                cv::Mat g = s->tmp.mat(h, w, CV_8UC1);
                cv::cvtColor(rgb, g, cv::COLOR_RGB2GRAY);
                view = g;
            } else {
                view = rgb;
            }
        } catch (const std::bad_alloc &) {
            return fq_set_err(err, FQ_E_NOMEM, "out of memory converting CMYK");
        }
    }
    *out = view;
    return FQ_OK;
}

/* ---- OpenCV ------------------------------------------------------------- */

void to_channels(const cv::Mat &src, int out_channels, bool bgr, cv::Mat &dst)
{
    int c = src.channels();
    if (out_channels == 1) {
        if (c == 1)
            src.copyTo(dst);
        else if (c == 3)
            cv::cvtColor(src, dst, bgr ? cv::COLOR_BGR2GRAY : cv::COLOR_RGB2GRAY);
        else
            cv::cvtColor(src, dst, bgr ? cv::COLOR_BGRA2GRAY : cv::COLOR_RGBA2GRAY);
    } else {
        if (c == 1)
            cv::cvtColor(src, dst, cv::COLOR_GRAY2RGB);
        else if (c == 3) {
            if (bgr)
                cv::cvtColor(src, dst, cv::COLOR_BGR2RGB);
            else
                src.copyTo(dst);
        } else
            cv::cvtColor(src, dst, bgr ? cv::COLOR_BGRA2RGB : cv::COLOR_RGBA2RGB);
    }
}

int cv_decode(fq_img_scratch *s, const uint8_t *data, size_t len, int fmt, int out_channels,
              int64_t max_pixels, cv::Mat *out, SrcInfo *si, fq_err *err)
{
    int64_t ph = 0, pw = 0;
    if (peek_dims(data, len, fmt, &ph, &pw)) {
        if (ph <= 0 || pw <= 0)
            return fq_set_err(err, FQ_E_DECODE, "%s header declares an empty image (%lldx%lld)",
                              format_name(fmt), (long long)pw, (long long)ph);
        if (pw > max_pixels / ph) /* (not ph * pw: two 32-bit header fields can overflow it) */
            return fq_set_err(err, FQ_E_TOO_LARGE, "%s image %lldx%lld exceeds max_pixels=%lld",
                              format_name(fmt), (long long)pw, (long long)ph, (long long)max_pixels);
    }
    if (fmt == FQ_FMT_GIF)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "GIF is not supported by this OpenCV build");
    /* JPEG 2000, OpenEXR, Radiance HDR, Sun raster: refused in every build.  OpenCV
     * decodes some of them through a temporary file, and its JPEG 2000 decoder leaks
     * that file's descriptor on malformed input (found by csrc/tests/run_fuzz.sh: the
     * process ran out of descriptors). */
    if (fmt == FQ_FMT_OTHER)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "this image format (JPEG 2000, OpenEXR, Radiance HDR or Sun "
                          "raster) is not supported; fastq reads JPEG, PNG, WebP, BMP, PNM and TIFF");
    if (len > (size_t)INT32_MAX)
        return fq_set_err(err, FQ_E_TOO_LARGE, "encoded image of %zu bytes is too large", len);
    try {
        cv::Mat raw(1, (int)len, CV_8UC1, const_cast<uint8_t *>(data));
        s->cv_decoded = cv::imdecode(raw, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception &e) {
        return fq_set_err(err, FQ_E_DECODE, "corrupt %s data: OpenCV: %s", format_name(fmt), e.what());
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "out of memory decoding %s", format_name(fmt));
    }
    cv::Mat &m = s->cv_decoded;
    if (m.empty())
        return fq_set_err(err, FQ_E_DECODE, "corrupt or unreadable %s data (OpenCV could not decode it)",
                          format_name(fmt));
    si->format = fmt;
    si->h = m.rows;
    si->w = m.cols;
    si->channels = m.channels();
    si->bits = (int)(8 * m.elemSize1());
    if ((int64_t)m.rows * m.cols > max_pixels)
        return fq_set_err(err, FQ_E_TOO_LARGE, "%s image %dx%d exceeds max_pixels=%lld", format_name(fmt),
                          m.cols, m.rows, (long long)max_pixels);
    int depth = m.depth();
    if (depth != CV_8U && depth != CV_16U)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "unsupported %s sample type (depth %d; only 8/16-bit integer)",
                          format_name(fmt), depth);
    int c = m.channels();
    if (c != 1 && c != 2 && c != 3 && c != 4)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "unsupported %s with %d channels", format_name(fmt), c);
    try {
        cv::Mat m8 = m;
        if (depth == CV_16U) { /* 16 -> 8 bit: keep the high byte (v >> 8) */
            m8 = s->tmp2.mat(m.rows, m.cols, CV_MAKETYPE(CV_8U, c));
            for (int yy = 0; yy < m.rows; yy++) {
                const uint16_t *p = m.ptr<uint16_t>(yy);
                uint8_t *q = m8.ptr<uint8_t>(yy);
                for (int i = 0; i < m.cols * c; i++)
                    q[i] = (uint8_t)(p[i] >> 8);
            }
        }
        if (c == 2) { /* gray + alpha: keep gray */
            cv::Mat g = s->tmp.mat(m.rows, m.cols, CV_8UC1);
            int from_to[] = {0, 0};
            cv::mixChannels(&m8, 1, &g, 1, from_to, 1);
            m8 = g;
        }
        if (m8.channels() == out_channels && out_channels == 1) {
            *out = m8;
        } else {
            cv::Mat dst = s->dec.mat(m.rows, m.cols, CV_MAKETYPE(CV_8U, out_channels));
            to_channels(m8, out_channels, /*bgr=*/true, dst);
            *out = dst;
        }
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "out of memory converting %s", format_name(fmt));
    } catch (const cv::Exception &e) {
        return fq_set_err(err, FQ_E_DECODE, "cannot convert %s image: %s", format_name(fmt), e.what());
    }
    return FQ_OK;
}

}  // namespace fqi
