/* fq_image_decode.cpp - decoding: JPEG through libjpeg-turbo's libjpeg API (ROI crop +
 * DCT scaling, corrupt-data warnings are errors), everything else through
 * cv::imdecode, with channel/bit-depth conversion to 8-bit gray or RGB.
 *
 * setjmp/longjmp discipline: every function that calls into libjpeg sets the jump
 * buffer itself and holds only trivially destructible locals between setjmp and the
 * libjpeg calls, so a longjmp never skips a C++ destructor.
 */
#include "image/internal/fq_image_internal.h"

#include <algorithm>
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

const char *format_name(int fmt)
{
    switch (fmt) {
    case FQ_FMT_ARRAY: return "array";
    case FQ_FMT_JPEG: return "JPEG";
    case FQ_FMT_PNG: return "PNG";
    case FQ_FMT_BMP: return "BMP";
    case FQ_FMT_TIFF: return "TIFF";
    case FQ_FMT_WEBP: return "WebP";
    case FQ_FMT_GIF: return "GIF";
    case FQ_FMT_PNM: return "PNM";
    case FQ_FMT_OTHER: return "other";
    default: return "unknown";
    }
}

int sniff_format(const uint8_t *d, size_t n)
{
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
        return FQ_FMT_JPEG;
    if (n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return FQ_FMT_PNG;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return FQ_FMT_BMP;
    if (n >= 4 && (std::memcmp(d, "II*\0", 4) == 0 || std::memcmp(d, "MM\0*", 4) == 0))
        return FQ_FMT_TIFF;
    if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0)
        return FQ_FMT_WEBP;
    if (n >= 6 && (std::memcmp(d, "GIF87a", 6) == 0 || std::memcmp(d, "GIF89a", 6) == 0))
        return FQ_FMT_GIF;
    if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6')
        return FQ_FMT_PNM;
    /* JPEG 2000 (codestream / jp2 box), OpenEXR, Radiance HDR, Sun raster: OpenCV may know */
    if ((n >= 4 && std::memcmp(d, "\xFF\x4F\xFF\x51", 4) == 0) ||
        (n >= 12 && std::memcmp(d, "\0\0\0\x0CjP  \r\n\x87\n", 12) == 0) ||
        (n >= 4 && std::memcmp(d, "\x76\x2F\x31\x01", 4) == 0) ||
        (n >= 10 && std::memcmp(d, "#?RADIANCE", 10) == 0) ||
        (n >= 4 && std::memcmp(d, "\x59\xA6\x6A\x95", 4) == 0))
        return FQ_FMT_OTHER;
    return FQ_FMT_UNKNOWN;
}

static uint32_t be32(const uint8_t *p) { return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]; }
static uint32_t le32(const uint8_t *p) { return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0]; }
static uint32_t le16(const uint8_t *p) { return ((uint32_t)p[1] << 8) | p[0]; }

/* PNM header number as OpenCV's PxM reader takes it: blanks and '#' comments (to the
 * end of the line) before it, then decimal digits, then one byte whatever it is (OpenCV
 * reads the byte that ends the number and moves on: "3000Z 300250" is 3000 by 300250).
 * Saturates instead of overflowing: a number OpenCV refuses as too large is reported
 * as too large here. */
static int pnm_number(const uint8_t *d, size_t n, size_t *pos, int64_t *out)
{
    size_t i = *pos;
    for (;;) {
        if (i >= n)
            return 0;
        if (d[i] == '#') {
            while (i < n && d[i] != '\n' && d[i] != '\r')
                i++;
            i++;
        } else if (d[i] == ' ' || (d[i] >= '\t' && d[i] <= '\r')) {
            i++;
        } else {
            break;
        }
    }
    if (d[i] < '0' || d[i] > '9')
        return 0;
    int64_t v = 0;
    while (i < n && d[i] >= '0' && d[i] <= '9') {
        if (v < ((int64_t)1 << 40))
            v = v * 10 + (d[i] - '0');
        i++;
    }
    *pos = i + 1;
    *out = v;
    return 1;
}

/* TIFF: the largest ImageWidth (256) and ImageLength (257) in the first directory, in
 * either byte order.  The largest, not the first: libtiff reads a repeated tag more
 * than once, and the guard must hold whichever copy it keeps.  (BigTIFF is not
 * recognised by sniff_format, so it never reaches OpenCV.) */
static int tiff_dims(const uint8_t *d, size_t n, int64_t *h, int64_t *w)
{
    if (n < 8)
        return 0;
    const bool be = d[0] == 'M';
    auto u16 = [&](size_t o) -> uint32_t { return be ? ((uint32_t)d[o] << 8) | d[o + 1] : ((uint32_t)d[o + 1] << 8) | d[o]; };
    auto u32 = [&](size_t o) -> uint32_t { return be ? (u16(o) << 16) | u16(o + 2) : (u16(o + 2) << 16) | u16(o); };
    const uint64_t ifd = u32(4);
    if (ifd > n || n - ifd < 2)
        return 0;
    const uint32_t count = u16(ifd);
    int64_t ww = -1, hh = -1;
    for (uint32_t k = 0; k < count; k++) {
        const uint64_t o = ifd + 2 + 12 * (uint64_t)k;
        if (o > n || n - o < 12)
            break;
        const uint32_t tag = u16(o), type = u16(o + 2), cnt = u32(o + 4);
        if ((tag != 256 && tag != 257) || cnt != 1)
            continue;
        int64_t v;
        switch (type) { /* the value sits in the entry, left-justified */
        case 1: case 6: v = d[o + 8]; break;   /* (S)BYTE */
        case 3: case 8: v = u16(o + 8); break; /* (S)SHORT */
        case 4: case 9: v = u32(o + 8); break; /* (S)LONG; a negative SLONG reads as huge */
        default: continue;
        }
        if (tag == 256)
            ww = std::max(ww, v);
        else
            hh = std::max(hh, v);
    }
    if (ww < 0 || hh < 0)
        return 0; /* libtiff refuses a first directory without both */
    *w = ww;
    *h = hh;
    return 1;
}

int peek_dims(const uint8_t *d, size_t n, int fmt, int64_t *h, int64_t *w)
{
    switch (fmt) {
    case FQ_FMT_PNG: /* signature, IHDR length, "IHDR", width, height */
        if (n >= 24 && std::memcmp(d + 12, "IHDR", 4) == 0) {
            *w = be32(d + 16);
            *h = be32(d + 20);
            return 1;
        }
        return 0;
    case FQ_FMT_BMP: {
        /* The same fields OpenCV's reader takes: 32-bit width/height after an info
         * header of 36 bytes or more, 16-bit ones after the 12-byte OS/2 header; it
         * refuses every other header size.  (Not ">= 40": a 39-byte header slipped past
         * the guard and made OpenCV allocate 2.7 GB for a 52-byte file; found by
         * csrc/tests/run_fuzz.sh in CI.) */
        if (n < 18)
            return 0;
        uint32_t hs = le32(d + 14);
        if (hs >= 36 && n >= 26) {
            *w = (int32_t)le32(d + 18);
            int64_t hh = (int32_t)le32(d + 22);
            *h = hh < 0 ? -hh : hh;
            if (*w < 0)
                *w = -*w;
            return 1;
        }
        if (hs == 12 && n >= 22) {
            *w = le16(d + 18);
            *h = le16(d + 20);
            return 1;
        }
        return 0;
    }
    case FQ_FMT_PNM: { /* "P1".."P6", width, height */
        size_t pos = 2;
        return pnm_number(d, n, &pos, w) && pnm_number(d, n, &pos, h);
    }
    case FQ_FMT_TIFF:
        return tiff_dims(d, n, h, w);
    case FQ_FMT_GIF:
        if (n >= 10) {
            *w = le16(d + 6);
            *h = le16(d + 8);
            return 1;
        }
        return 0;
    case FQ_FMT_WEBP: /* lossy VP8 / lossless VP8L / extended VP8X */
        if (n >= 30 && std::memcmp(d + 12, "VP8X", 4) == 0) {
            *w = 1 + (int64_t)(d[24] | (d[25] << 8) | (d[26] << 16));
            *h = 1 + (int64_t)(d[27] | (d[28] << 8) | (d[29] << 16));
            return 1;
        }
        if (n >= 30 && std::memcmp(d + 12, "VP8 ", 4) == 0) {
            *w = le16(d + 26) & 0x3FFF;
            *h = le16(d + 28) & 0x3FFF;
            return 1;
        }
        if (n >= 25 && std::memcmp(d + 12, "VP8L", 4) == 0) {
            uint32_t b = le32(d + 21);
            *w = 1 + (b & 0x3FFF);
            *h = 1 + ((b >> 14) & 0x3FFF);
            return 1;
        }
        return 0;
    default:
        return 0;
    }
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
