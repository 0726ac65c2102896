/* fq_image_restart_crop.cpp - crop decode that entropy-decodes only the restart segments a crop
 * needs (docs/prepare.md).
 *
 * Huffman decoding cannot skip the columns left and right of a crop: libjpeg decodes
 * every MCU of every row it passes.  Restart segments are independently decodable
 * (byte-aligned, DC predictors reset), so when the restart interval divides the MCUs
 * per row each MCU row is tiled by whole segments, and a valid JPEG holding only the
 * segments of the crop's MCU columns and rows is:
 *     the original bytes from SOI up to and including SOS (all tables, DRI, APPn), with
 *     the SOF's height/width patched to the sub-image,
 *   + those segments in raster order with their RST markers renumbered 0..7, + EOI.
 * Decoding that "mini-JPEG" gives, away from its edges, exactly the pixels of a full
 * decode (same coefficients, same IDCT; upsampling context only reaches one chroma
 * sample over an edge).  Only the box the ops read plus kKeep pixels (T, inside the
 * ROI with its 16-pixel margin from fq_image_plan.cpp) is decoded from the mini-JPEG;
 * every mini edge is an MCU edge outside T or an edge of the image, and the rest of the
 * ROI is T's edge replicated (never read), so the pixels the ops read are identical to
 * the plain path's.
 *
 * Anything unusual declines (progressive, arithmetic, multi-scan, no DRI, interval not
 * dividing the row, RST markers missing/misnumbered, no EOI, ...) and the plain ROI
 * decode (fqi::jpeg_decode) runs instead, so errors and messages stay the plain path's.
 *
 * Buffers: the mini-JPEG and the segment table live in the per-thread scratch
 * (fq_img_scratch::rst_buf / rst_seg), reused across samples.  No libjpeg call is made
 * here directly; jpeg_header / jpeg_decode own the setjmp discipline.
 */
#include "image/internal/fq_image_internal.h"
#include "image/fq_image_prepare.h"
#include "image/internal/fq_image_switch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include <opencv2/core.hpp>

namespace {

fqi::Switch g_enabled("FASTQ_SEGMENT_DECODE");
std::atomic<uint64_t> g_count{0};

constexpr int kDeclined = -1;
/* Scaled pixels decoded exactly around the box the ops read: the widest resampling
 * support (Lanczos: 4 pixels, plus half a pixel of box rounding), plus the one pixel at
 * a mini-JPEG edge whose chroma upsampling context differs from a full decode, plus 1. */
constexpr int kKeep = 8;

inline unsigned be16(const uint8_t *p) { return ((unsigned)p[0] << 8) | p[1]; }

/* Walk the markers from SOI to the end of the first SOS.  Returns false for anything
 * but one baseline/extended Huffman SOF followed by an SOS. */
bool parse_header(const uint8_t *d, size_t n, size_t *sof_len_pos, size_t *sos_end)
{
    if (n < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return false;
    size_t p = 2;
    int nsof = 0;
    for (;;) {
        if (p >= n || d[p] != 0xFF)
            return false;
        while (p < n && d[p] == 0xFF) /* fill bytes */
            p++;
        if (p >= n)
            return false;
        unsigned m = d[p++];
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7))
            continue; /* standalone markers */
        if (m == 0xD8 || m == 0xD9 || m == 0x00)
            return false;
        if (p + 2 > n)
            return false;
        size_t seg = be16(d + p);
        if (seg < 2 || p + seg > n)
            return false;
        if (m == 0xC0 || m == 0xC1) {
            if (seg < 8)
                return false;
            *sof_len_pos = p;
            nsof++;
        } else if (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            return false; /* progressive, lossless, arithmetic SOFs */
        } else if (m == 0xCC || m == 0xDC) {
            return false; /* arithmetic conditioning, DNL */
        } else if (m == 0xDA) {
            *sos_end = p + seg;
            return nsof == 1;
        }
        p += seg;
    }
}

/* Scan the entropy-coded data from `start` for RST markers until the end of segment
 * need-1: seg[2k], seg[2k+1] = start and end (the marker's 0xFF) of segment k.  True
 * when those segments are found with correctly numbered RSTs (segment need-1 ending at
 * an RST, or at the EOI when need == total) and the file has an EOI after them (the
 * plain path's truncation rule: a file without one fails whatever the crop).  Like the
 * plain path, nothing after the last needed segment is validated further. */
bool find_segments(const uint8_t *d, size_t n, size_t start, size_t need, size_t total, std::vector<size_t> &seg)
{
    seg.resize(2 * need);
    const uint8_t *p = d + start, *end = d + n;
    size_t k = 0;
    seg[0] = start;
    for (;;) {
        const uint8_t *q = static_cast<const uint8_t *>(std::memchr(p, 0xFF, (size_t)(end - p)));
        if (!q || q + 1 >= end)
            return false; /* no EOI: truncated */
        unsigned b = q[1];
        if (b == 0x00) {
            p = q + 2;
        } else if (b == 0xFF) {
            p = q + 1; /* fill byte */
        } else if (b >= 0xD0 && b <= 0xD7) {
            if (b - 0xD0 != (unsigned)(k & 7) || k + 1 >= total)
                return false;
            seg[2 * k + 1] = (size_t)(q - d);
            if (++k == need)
                break;
            seg[2 * k] = (size_t)(q + 2 - d);
            p = q + 2;
        } else if (b == 0xD9) {
            if (k + 1 != total || need != total)
                return false;
            seg[2 * k + 1] = (size_t)(q - d);
            return true;
        } else {
            return false; /* DNL, another scan, ... */
        }
    }
    /* an EOI must follow somewhere (usually the last two bytes) */
    if (n >= 2 && d[n - 2] == 0xFF && d[n - 1] == 0xD9)
        return true;
    p = d + seg[2 * need - 1];
    return fqi::has_eoi(p, (size_t)(end - p));
}

inline int ceil_div(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

/* Try the segment path.  FQ_OK / error code when it decoded (or failed inside the mini
 * decode, with the original header re-read so the caller can fall back), kDeclined
 * when it did nothing (the original header is still loaded in s->cinfo). */
int try_segments(fq_img_scratch *s, const uint8_t *data, size_t len, const fqi::SrcInfo &si, int M, int idct, int x,
                 int y, int w, int h, const int *need, int oc, cv::Mat *out, int *scaled_h, int *scaled_w, fq_err *err)
{
    if (!g_enabled.get() || w <= 0 || h <= 0 || M < 1 || M > 8 || 8 % M)
        return kDeclined;
    const jpeg_decompress_struct &ci = s->cinfo;
    const int nc = ci.num_components;
    if (ci.progressive_mode || ci.arith_code || ci.restart_interval == 0 || ci.data_precision != 8 ||
        (nc != 1 && nc != 3) || ci.comps_in_scan != nc || si.channels != nc)
        return kDeclined;
    const int W = (int)ci.image_width, H = (int)ci.image_height;
    int mcu_w = 8, mcu_h = 8;
    if (nc == 3) {
        int mh = ci.max_h_samp_factor, mv = ci.max_v_samp_factor;
        if (mh < 1 || mh > 2 || mv < 1 || mv > 2)
            return kDeclined;
        for (int c = 0; c < nc; c++) {
            int hs = ci.comp_info[c].h_samp_factor, vs = ci.comp_info[c].v_samp_factor;
            if (hs < 1 || vs < 1 || mh % hs || mv % vs)
                return kDeclined;
        }
        mcu_w = 8 * mh, mcu_h = 8 * mv;
    }
    const int mcux = ceil_div(W, mcu_w), mcuy = ceil_div(H, mcu_h);
    const int ri = (int)ci.restart_interval;
    if (mcux % ri)
        return kDeclined;
    const int spr = mcux / ri; /* segments per MCU row */
    /* The pixels that have to be exact: the box the ops read (`need`) plus kKeep pixels,
     * inside the ROI.  The ROI's own margin (16 scaled pixels, fq_image_plan.cpp) is
     * what the plain path decodes; here only this tighter region T is decoded and the
     * rest of the ROI is filled by replicating T's edge pixels, which no op reads. */
    int tx0 = x, ty0 = y, tx1 = x + w, ty1 = y + h;
    if (need && need[2] > 0 && need[3] > 0) {
        tx0 = std::max(x, need[0] - kKeep), ty0 = std::max(y, need[1] - kKeep);
        tx1 = std::min(x + w, need[0] + need[2] + kKeep), ty1 = std::min(y + h, need[1] + need[3] + kKeep);
        if (tx0 >= tx1 || ty0 >= ty1)
            tx0 = x, ty0 = y, tx1 = x + w, ty1 = y + h;
    }
    /* T (scaled by M/8) -> source pixels -> MCU columns/rows -> segment columns */
    const int f = 8 / M;
    int sx0 = tx0 * f, sx1 = std::min(tx1 * f, W), sy0 = ty0 * f, sy1 = std::min(ty1 * f, H);
    if (sx0 >= sx1 || sy0 >= sy1)
        return kDeclined;
    int k0 = (sx0 / mcu_w) / ri, k1 = ceil_div(ceil_div(sx1, mcu_w), ri);
    int r0 = sy0 / mcu_h, r1 = ceil_div(sy1, mcu_h);
    if (k1 - k0 >= spr)
        return kDeclined; /* every segment of the rows is needed: nothing to skip */
    size_t sof_pos = 0, sos_end = 0;
    if (!parse_header(data, len, &sof_pos, &sos_end))
        return kDeclined;
    /* libjpeg must have stopped exactly where our walk did */
    if (ci.src == nullptr || ci.src->next_input_byte != data + sos_end)
        return kDeclined;
    std::vector<size_t> &seg = s->rst_seg;
    const size_t total = (size_t)spr * mcuy;
    if (!find_segments(data, len, sos_end, (size_t)(r1 - 1) * spr + k1, total, seg))
        return kDeclined;

    /* build the mini-JPEG */
    const int mc0 = k0 * ri, mc1 = k1 * ri;
    const int mini_w = mc1 == mcux ? W - mc0 * mcu_w : (mc1 - mc0) * mcu_w;
    const int mini_h = r1 == mcuy ? H - r0 * mcu_h : (r1 - r0) * mcu_h;
    size_t mini_len = sos_end + 2;
    for (int r = r0; r < r1; r++)
        for (int k = k0; k < k1; k++) {
            size_t i = (size_t)r * spr + k;
            mini_len += seg[2 * i + 1] - seg[2 * i] + 2;
        }
    std::vector<uint8_t> &buf = s->rst_buf;
    if (buf.size() < mini_len)
        buf.resize(mini_len); /* may throw std::bad_alloc: process_encoded catches */
    uint8_t *o = buf.data();
    std::memcpy(o, data, sos_end);
    /* SOF: length(2) precision(1) height(2) width(2) */
    o[sof_pos + 3] = (uint8_t)(mini_h >> 8), o[sof_pos + 4] = (uint8_t)mini_h;
    o[sof_pos + 5] = (uint8_t)(mini_w >> 8), o[sof_pos + 6] = (uint8_t)mini_w;
    size_t pos = sos_end;
    unsigned j = 0;
    for (int r = r0; r < r1; r++)
        for (int k = k0; k < k1; k++) {
            size_t i = (size_t)r * spr + k;
            if (j > 0) {
                o[pos++] = 0xFF;
                o[pos++] = (uint8_t)(0xD0 + ((j - 1) & 7));
            }
            size_t n = seg[2 * i + 1] - seg[2 * i];
            std::memcpy(o + pos, data + seg[2 * i], n);
            pos += n;
            j++;
        }
    o[pos++] = 0xFF;
    o[pos++] = 0xD9;

    /* decode it: T in mini coordinates */
    const int ox = mc0 * mcu_w / f, oy = r0 * mcu_h / f;
    fqi::jpeg_reset(s);
    fqi::SrcInfo msi;
    int rc = fqi::jpeg_header(s, o, pos, &msi, err);
    if (rc == FQ_OK && (msi.w != mini_w || msi.h != mini_h || msi.channels != si.channels)) {
        fqi::jpeg_reset(s);
        rc = FQ_E_DECODE;
    }
    int mh = 0, mw = 0;
    if (rc == FQ_OK)
        rc = fqi::jpeg_decode(s, msi, M, idct, tx0 - ox, ty0 - oy, tx1 - tx0, ty1 - ty0, oc, out, &mh, &mw, err);
    if (rc == FQ_OK && (mh != ceil_div((int64_t)mini_h * M, 8) || mw != ceil_div((int64_t)mini_w * M, 8)))
        rc = FQ_E_DECODE;
    if (rc != FQ_OK) {
        /* leave it to the plain path (its messages, its verdict): reload the original */
        fqi::SrcInfo again;
        int rc2 = fqi::jpeg_header(s, data, len, &again, err);
        return rc2 ? rc2 : kDeclined;
    }
    if (tx0 != x || ty0 != y || tx1 != x + w || ty1 != y + h) {
        /* the ROI the caller expects: T at its place, the margin replicated from T's edges */
        try {
            cv::Mat roi = s->tmp.mat(h, w, out->type());
            cv::copyMakeBorder(*out, roi, ty0 - y, y + h - ty1, tx0 - x, x + w - tx1, cv::BORDER_REPLICATE);
            *out = roi;
        } catch (const std::bad_alloc &) {
            return fq_set_err(err, FQ_E_NOMEM, "out of memory for a %dx%d decode buffer", w, h);
        } catch (const cv::Exception &e) {
            return fq_set_err(err, FQ_E_DECODE, "cannot place the segment decode: %s", e.what());
        }
    }
    *scaled_w = ceil_div((int64_t)W * M, 8);
    *scaled_h = ceil_div((int64_t)H * M, 8);
    g_count.fetch_add(1, std::memory_order_relaxed);
    return FQ_OK;
}

}  // namespace

namespace fqi {

int jpeg_decode_crop(fq_img_scratch *s, const uint8_t *data, size_t len, const SrcInfo &si, int scale_num, int idct, int x,
                     int y, int w, int h, const int *need, int out_channels, cv::Mat *out, int *scaled_h,
                     int *scaled_w, fq_err *err)
{
    int rc = try_segments(s, data, len, si, scale_num, idct, x, y, w, h, need, out_channels, out, scaled_h, scaled_w,
                          err);
    if (rc != kDeclined)
        return rc;
    return jpeg_decode(s, si, scale_num, idct, x, y, w, h, out_channels, out, scaled_h, scaled_w, err);
}

}  // namespace fqi

extern "C" {

void fq_img_segment_decode_set(int on) { g_enabled.set(on); }
int fq_img_segment_decode_enabled(void) { return g_enabled.get(); }
uint64_t fq_img_segment_decode_count(void) { return g_count.load(std::memory_order_relaxed); }

}  // extern "C"
