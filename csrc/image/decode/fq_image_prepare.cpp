/* fq_image_prepare.cpp - lossless JPEG re-encode with restart markers that tile each MCU
 * row, so that fq_image_restart_crop.cpp can entropy-decode only the segments a crop needs
 * (docs/prepare.md).  The quantized DCT coefficients are copied unchanged
 * (jpeg_read_coefficients -> jpeg_write_coefficients, like `jpegtran -restart N`): every
 * decoder gives the same pixels for the prepared file as for the original.
 *
 * Reentrant: each call owns its libjpeg objects and output buffer; nothing global.
 * setjmp discipline: prepare_impl() holds only trivially destructible locals between its
 * setjmp and the libjpeg calls.
 */
#include "image/fq_image_prepare.h"

#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <jerror.h>
#include <jpeglib.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace {

struct PrepErr {
    struct jpeg_error_mgr pub;
    std::jmp_buf jb;
    int code;
    char msg[JMSG_LENGTH_MAX];
};

extern "C" {
static void prep_error_exit(j_common_ptr c)
{
    PrepErr *e = reinterpret_cast<PrepErr *>(c->err);
    (*c->err->format_message)(c, e->msg);
    e->code = (c->err->msg_code == JERR_OUT_OF_MEMORY) ? FQ_E_NOMEM : FQ_E_DECODE;
    std::longjmp(e->jb, 1);
}

static void prep_emit_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return;
    int code = c->err->msg_code;
    if (code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC) {
        c->err->num_warnings++;
        return;
    }
    /* corrupt data: never write a file built from grey-filled coefficients */
    PrepErr *e = reinterpret_cast<PrepErr *>(c->err);
    (*c->err->format_message)(c, e->msg);
    e->code = FQ_E_DECODE;
    std::longjmp(e->jb, 1);
}

static void prep_output_message(j_common_ptr) {}
}

/* Growable malloc'ed output (we own it, so it is freed on every error path). */
struct MemDest {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap;
};

extern "C" {
static void md_init(j_compress_ptr c)
{
    MemDest *d = reinterpret_cast<MemDest *>(c->dest);
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}

static boolean md_empty(j_compress_ptr c)
{
    MemDest *d = reinterpret_cast<MemDest *>(c->dest);
    size_t ncap = d->cap * 2;
    uint8_t *nb = static_cast<uint8_t *>(std::realloc(d->buf, ncap));
    if (!nb)
        ERREXIT1(c, JERR_OUT_OF_MEMORY, 10);
    d->buf = nb;
    d->pub.next_output_byte = nb + d->cap; /* empty_output_buffer: the whole buffer was full */
    d->pub.free_in_buffer = ncap - d->cap;
    d->cap = ncap;
    return TRUE;
}

static void md_term(j_compress_ptr) {}
}

/* Allocate md's first cap bytes and make it c's destination (the buffer grows in
 * md_empty; md.buf is freed by the caller's state on every path). */
int attach_mem_dest(j_compress_ptr c, MemDest *md, size_t cap, fq_err *err)
{
    md->cap = cap;
    md->buf = static_cast<uint8_t *>(std::malloc(cap));
    if (!md->buf)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory for a %zu-byte JPEG", cap);
    md->pub.init_destination = md_init;
    md->pub.empty_output_buffer = md_empty;
    md->pub.term_destination = md_term;
    c->dest = &md->pub;
    return FQ_OK;
}

/* Interval (in MCUs) that divides mcux into at least 2 segments and is nearest to
 * target on a log scale (ties: the smaller one); mcux itself when mcux < 2. */
int pick_interval(int mcux, int target)
{
    int best = mcux;
    double bd = 1e300;
    for (int d = 1; 2 * d <= mcux; d++) {
        if (mcux % d)
            continue;
        double r = d > target ? (double)d / target : (double)target / d;
        if (r < bd) {
            bd = r;
            best = d;
        }
    }
    return best;
}

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* The first SOF's marker and sample precision (0, 0 when none is found before SOS or
 * the end: libjpeg then reports what is wrong). */
void first_sof(const uint8_t *d, size_t n, unsigned *marker, unsigned *precision)
{
    *marker = *precision = 0;
    size_t p = 2;
    while (p + 4 <= n && d[p] == 0xFF) {
        unsigned m = d[p + 1];
        if (m == 0xFF) {
            p++;
            continue;
        }
        if (m == 0xD8 || m == 0xD9 || m == 0xDA || m == 0x01 || (m >= 0xD0 && m <= 0xD7))
            return;
        size_t len = ((size_t)d[p + 2] << 8) | d[p + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            *marker = m;
            *precision = p + 4 < n ? d[p + 4] : 0;
            return;
        }
        p += 2 + len;
    }
}

int keep(fq_prepare_info *info, const char *why)
{
    info->status = FQ_PREP_KEPT;
    std::snprintf(info->why, sizeof info->why, "%s", why);
    return FQ_OK;
}

struct State {
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    PrepErr jerr;
    MemDest md;
    bool src_ready, dst_ready;
};

/* The error of a libjpeg failure that longjmp'ed back (prep_error_exit recorded it). */
int libjpeg_failure(const PrepErr &e, fq_err *err)
{
    if (e.code == FQ_E_NOMEM)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory re-encoding JPEG: %s", e.msg);
    return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data: %s", e.msg);
}

int prepare_impl(State *st, const uint8_t *data, size_t len, int target, fq_prepare_info *info, fq_err *err)
{
    if (setjmp(st->jerr.jb))
        return libjpeg_failure(st->jerr, err);
    jpeg_create_decompress(&st->src);
    st->src_ready = true;
    jpeg_mem_src(&st->src, data, (unsigned long)len);
    jpeg_save_markers(&st->src, JPEG_COM, 0xFFFF);
    for (int m = 0; m < 16; m++)
        jpeg_save_markers(&st->src, JPEG_APP0 + m, 0xFFFF);
    if (jpeg_read_header(&st->src, TRUE) != JPEG_HEADER_OK)
        return keep(info, "JPEG without an image (tables only)");
    j_decompress_ptr s = &st->src;
    info->width = (int)s->image_width, info->height = (int)s->image_height;
    info->old_restart_interval = (int)s->restart_interval;
    const int nc = s->num_components;
    if (nc != 1 && nc != 3)
        return keep(info, "not a 1- or 3-component JPEG (segment decoding does not apply)");
    int mcu_w = 8;
    if (nc == 3) {
        int mh = s->max_h_samp_factor, mv = s->max_v_samp_factor;
        if (mh > 2 || mv > 2)
            return keep(info, "sampling factors above 2 (segment decoding does not apply)");
        for (int c = 0; c < nc; c++)
            if (mh % s->comp_info[c].h_samp_factor || mv % s->comp_info[c].v_samp_factor)
                return keep(info, "fractional chroma sampling (segment decoding does not apply)");
        mcu_w = 8 * mh;
    }
    const int mcux = ceil_div((int)s->image_width, mcu_w);
    info->mcus_per_row = mcux;
    const int ri = pick_interval(mcux, target);
    if (mcux / ri < 2)
        return keep(info, "too narrow for two restart segments per MCU row");
    bool single_scan = !s->progressive_mode && s->comps_in_scan == nc;
    if (single_scan && !s->arith_code && s->restart_interval > 0 && mcux % (int)s->restart_interval == 0 &&
        (int)s->restart_interval <= 2 * target)
        return keep(info, "already has restart segments that tile each MCU row");
    jvirt_barray_ptr *coef = jpeg_read_coefficients(s);
    if (!coef)
        return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data: no coefficients");

    jpeg_create_compress(&st->dst);
    st->dst_ready = true;
    j_compress_ptr d = &st->dst;
    jpeg_copy_critical_parameters(s, d);
    d->restart_interval = (unsigned)ri;
    d->restart_in_rows = 0;
    d->optimize_coding = TRUE; /* per-image Huffman tables: offsets most of the RST cost */
    d->arith_code = FALSE;
    if (int rc = attach_mem_dest(d, &st->md, len + len / 8 + 4096, err))
        return rc;
    jpeg_write_coefficients(d, coef);
    /* the markers jpegtran copies with -copy all, except the JFIF/Adobe ones the
     * compressor writes itself */
    for (jpeg_saved_marker_ptr m = s->marker_list; m; m = m->next) {
        const uint8_t *p = m->data;
        if (d->write_JFIF_header && m->marker == JPEG_APP0 && m->data_length >= 5 && std::memcmp(p, "JFIF", 5) == 0)
            continue;
        if (d->write_Adobe_marker && m->marker == JPEG_APP0 + 14 && m->data_length >= 5 &&
            std::memcmp(p, "Adobe", 5) == 0)
            continue;
        jpeg_write_marker(d, m->marker, m->data, m->data_length);
    }
    jpeg_finish_compress(d);
    jpeg_finish_decompress(s);
    info->restart_interval = ri;
    info->out_bytes = st->md.cap - st->md.pub.free_in_buffer;
    info->status = FQ_PREP_REWRITTEN;
    return FQ_OK;
}

/* Decompression-bomb guard of the downscale's full decode (1 GiB of RGB). */
const int64_t FQ_DOWNSCALE_MAX_PIXELS = (int64_t)1 << 28;

/* State of one downscale: the decoded and the shrunk pixels live in malloc'ed buffers
 * (not cv::Mat) so that nothing with a destructor spans the setjmp. */
struct DownState : State {
    uint8_t *pix, *small;
};

void free_pixels(State *) {}
void free_pixels(DownState *st)
{
    std::free(st->pix);
    std::free(st->small);
}

/* The shrink itself, outside the setjmp frame (OpenCV may throw). */
int shrink(const uint8_t *pix, int w, int h, int nc, uint8_t *small, int nw, int nh, fq_err *err)
{
    try {
        cv::Mat a(h, w, nc == 1 ? CV_8UC1 : CV_8UC3, const_cast<uint8_t *>(pix));
        cv::Mat b(nh, nw, nc == 1 ? CV_8UC1 : CV_8UC3, small);
        cv::resize(a, b, cv::Size(nw, nh), 0, 0, cv::INTER_AREA);
        if (b.data != small)
            return fq_set_err(err, FQ_E_UNSUPPORTED, "cv::resize reallocated its output");
    } catch (const cv::Exception &e) {
        return fq_set_err(err, FQ_E_UNSUPPORTED, "cv::resize failed: %s", e.what());
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "out of memory shrinking a %dx%d image", w, h);
    }
    return FQ_OK;
}

int downscale_impl(DownState *st, const uint8_t *data, size_t len, int max_side, int64_t max_pixels, int quality,
                   int target, fq_prepare_info *info, fq_err *err)
{
    if (setjmp(st->jerr.jb))
        return libjpeg_failure(st->jerr, err);
    jpeg_create_decompress(&st->src);
    st->src_ready = true;
    jpeg_mem_src(&st->src, data, (unsigned long)len);
    if (jpeg_read_header(&st->src, TRUE) != JPEG_HEADER_OK)
        return keep(info, "JPEG without an image (tables only)");
    j_decompress_ptr s = &st->src;
    const int w = (int)s->image_width, h = (int)s->image_height;
    info->width = w, info->height = h;
    info->old_restart_interval = (int)s->restart_interval;
    double f = 1.0;
    if (max_side > 0 && (w > max_side || h > max_side))
        f = (double)max_side / (w > h ? w : h);
    if (max_pixels > 0 && (double)w * h > (double)max_pixels)
        f = std::fmin(f, std::sqrt((double)max_pixels / ((double)w * h)));
    if (f >= 1.0)
        return keep(info, "within the size limit");
    if ((double)w * h > (double)FQ_DOWNSCALE_MAX_PIXELS)
        return fq_set_err(err, FQ_E_TOO_LARGE, "%dx%d image: more than %lld pixels, not decoded for a copy", w, h,
                          (long long)FQ_DOWNSCALE_MAX_PIXELS);
    int nw = (int)std::lround(w * f), nh = (int)std::lround(h * f);
    nw = nw < 1 ? 1 : nw;
    nh = nh < 1 ? 1 : nh;
    /* rounding must not break the limits */
    while (max_side > 0 && (nw > max_side || nh > max_side)) {
        nw = nw > max_side ? max_side : nw;
        nh = nh > max_side ? max_side : nh;
    }
    while (max_pixels > 0 && (int64_t)nw * nh > max_pixels && (nw > 1 || nh > 1)) {
        if (nw >= nh)
            nw--;
        else
            nh--;
    }
    int nc;
    if (s->jpeg_color_space == JCS_GRAYSCALE && s->num_components == 1) {
        s->out_color_space = JCS_GRAYSCALE;
        nc = 1;
    } else if (s->num_components == 3 &&
               (s->jpeg_color_space == JCS_YCbCr || s->jpeg_color_space == JCS_RGB)) {
        s->out_color_space = JCS_RGB;
        nc = 3;
    } else {
        return keep(info, "not a gray or YCbCr/RGB JPEG (kept on the lossless path)");
    }
    jpeg_start_decompress(s);
    if ((int)s->output_width != w || (int)s->output_height != h || s->output_components != nc)
        return fq_set_err(err, FQ_E_DECODE, "libjpeg output %ux%ux%d, expected %dx%dx%d", s->output_width,
                          s->output_height, s->output_components, w, h, nc);
    const size_t stride = (size_t)w * nc;
    st->pix = static_cast<uint8_t *>(std::malloc(stride * (size_t)h));
    st->small = static_cast<uint8_t *>(std::malloc((size_t)nw * nh * nc));
    if (!st->pix || !st->small)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory for a %dx%d image", w, h);
    while (s->output_scanline < s->output_height) {
        JSAMPROW row = st->pix + stride * s->output_scanline;
        if (jpeg_read_scanlines(s, &row, 1) != 1)
            return fq_set_err(err, FQ_E_DECODE, "corrupt JPEG data: no scanline %u", s->output_scanline);
    }
    jpeg_finish_decompress(s);
    int rc = shrink(st->pix, w, h, nc, st->small, nw, nh, err);
    if (rc != FQ_OK)
        return rc;

    jpeg_create_compress(&st->dst);
    st->dst_ready = true;
    j_compress_ptr d = &st->dst;
    d->image_width = (JDIMENSION)nw, d->image_height = (JDIMENSION)nh;
    d->input_components = nc;
    d->in_color_space = nc == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(d); /* YCbCr 4:2:0 for RGB input */
    jpeg_set_quality(d, quality, TRUE);
    d->optimize_coding = TRUE;
    const int mcux = ceil_div(nw, nc == 1 ? 8 : 16);
    const int ri = pick_interval(mcux, target);
    d->restart_interval = mcux / ri >= 2 ? (unsigned)ri : 0;
    d->restart_in_rows = 0;
    if (int rc = attach_mem_dest(d, &st->md, (size_t)nw * nh * nc / 4 + 4096, err))
        return rc;
    jpeg_start_compress(d, TRUE);
    const size_t nstride = (size_t)nw * nc;
    while (d->next_scanline < d->image_height) {
        JSAMPROW row = st->small + nstride * d->next_scanline;
        if (jpeg_write_scanlines(d, &row, 1) != 1)
            return fq_set_err(err, FQ_E_UNSUPPORTED, "jpeg_write_scanlines wrote no row");
    }
    jpeg_finish_compress(d);
    info->width = nw, info->height = nh;
    info->mcus_per_row = mcux;
    info->restart_interval = (int)d->restart_interval;
    info->out_bytes = st->md.cap - st->md.pub.free_in_buffer;
    info->status = FQ_PREP_REWRITTEN;
    return FQ_OK;
}

/* What both entry points do around their work: a file that is not an 8-bit baseline or
 * progressive JPEG is "kept" (info->why says why); otherwise the state is allocated with
 * libjpeg's error handlers installed, `work(st)` runs, and everything is freed except a
 * rewritten result, which goes to *out (the caller frees it with fq_jpeg_prepare_free). */
template <class S, class Work>
int run_rewrite(const uint8_t *data, size_t len, uint8_t **out, fq_prepare_info *info, fq_err *err, Work work)
{
    if (len < 4 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF)
        return keep(info, "not a JPEG");
    unsigned sof = 0, prec = 0;
    first_sof(data, len, &sof, &prec);
    if (sof != 0 && !(sof == 0xC0 || sof == 0xC1 || sof == 0xC2 || sof == 0xC9 || sof == 0xCA))
        return keep(info, "lossless or hierarchical JPEG (not re-encoded)");
    if (sof != 0 && prec != 8)
        return keep(info, "not an 8-bit JPEG (not re-encoded)");
    S *st = static_cast<S *>(std::calloc(1, sizeof(S)));
    if (!st)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    st->src.err = jpeg_std_error(&st->jerr.pub);
    st->dst.err = &st->jerr.pub;
    st->jerr.pub.error_exit = prep_error_exit;
    st->jerr.pub.emit_message = prep_emit_message;
    st->jerr.pub.output_message = prep_output_message;
    int rc = work(st);
    if (st->dst_ready)
        jpeg_destroy_compress(&st->dst);
    if (st->src_ready)
        jpeg_destroy_decompress(&st->src);
    free_pixels(st);
    if (rc == FQ_OK && info->status == FQ_PREP_REWRITTEN) {
        *out = st->md.buf;
    } else {
        std::free(st->md.buf);
        info->out_bytes = info->status == FQ_PREP_KEPT ? len : 0;
    }
    std::free(st);
    return rc;
}

}  // namespace

extern "C" {

int fq_jpeg_downscale(const uint8_t *data, size_t len, int max_side, int64_t max_pixels, int quality,
                      int target_mcus, uint8_t **out, fq_prepare_info *info, fq_err *err)
{
    if (!info || !out || (len && !data))
        return fq_set_err(err, FQ_E_INVALID, "fq_jpeg_downscale: NULL argument");
    std::memset(info, 0, sizeof *info);
    *out = nullptr;
    info->in_bytes = len;
    if (target_mcus < 1)
        return fq_set_err(err, FQ_E_INVALID, "restart interval target must be >= 1 MCU, got %d", target_mcus);
    if (max_side < 0 || max_pixels < 0 || (max_side == 0 && max_pixels == 0))
        return fq_set_err(err, FQ_E_INVALID, "fq_jpeg_downscale: need max_side > 0 and/or max_pixels > 0");
    if (quality < 1 || quality > 100)
        return fq_set_err(err, FQ_E_INVALID, "JPEG quality must be 1-100, got %d", quality);
    return run_rewrite<DownState>(data, len, out, info, err, [&](DownState *st) {
        return downscale_impl(st, data, len, max_side, max_pixels, quality, target_mcus, info, err);
    });
}

int fq_jpeg_prepare(const uint8_t *data, size_t len, int target_mcus, uint8_t **out, fq_prepare_info *info,
                    fq_err *err)
{
    if (!info || !out || (len && !data))
        return fq_set_err(err, FQ_E_INVALID, "fq_jpeg_prepare: NULL argument");
    std::memset(info, 0, sizeof *info);
    *out = nullptr;
    info->in_bytes = len;
    if (target_mcus < 1)
        return fq_set_err(err, FQ_E_INVALID, "restart interval target must be >= 1 MCU, got %d", target_mcus);
    return run_rewrite<State>(data, len, out, info, err,
                              [&](State *st) { return prepare_impl(st, data, len, target_mcus, info, err); });
}

void fq_jpeg_prepare_free(uint8_t *buf) { std::free(buf); }

}  // extern "C"
