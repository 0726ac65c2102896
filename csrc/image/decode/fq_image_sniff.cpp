/* fq_image_sniff.cpp - what an encoded image's first bytes say before any decoding: its
 * container (sniff_format) and, for the formats OpenCV decodes, its declared size
 * (peek_dims), read from the same fields OpenCV's readers take so that max_pixels is
 * checked before OpenCV allocates the image (cv_decode, fq_image_decode.cpp).
 *
 * Pure functions of the bytes: no state, safe from any thread.
 */
#include "image/internal/fq_image_internal.h"

#include <algorithm>
#include <cstring>

namespace fqi {

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

}  // namespace fqi
