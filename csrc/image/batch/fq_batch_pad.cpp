/* fq_batch_pad.cpp - see fq_batch_pad.h. */
#include "image/fq_batch_pad.h"

#include <cstring>

extern "C" int fq_batch_pad_compact(void *block, int64_t n_planes, int cap_h, int cap_w, int h, int w, size_t px,
                                    fq_err *err)
{
    if (!block || n_planes < 0 || px < 1)
        return fq_set_err(err, FQ_E_INVALID, "fq_batch_pad_compact: bad arguments");
    if (h < 1 || w < 1 || h > cap_h || w > cap_w)
        return fq_set_err(err, FQ_E_INVALID, "fq_batch_pad_compact: window %dx%d outside the capacity %dx%d", h, w,
                          cap_h, cap_w);
    if (h == cap_h && w == cap_w)
        return FQ_OK; /* already the layout */
    uint8_t *base = static_cast<uint8_t *>(block);
    const size_t line = (size_t)w * px, src_line = (size_t)cap_w * px;
    const size_t plane = (size_t)h * line, src_plane = (size_t)cap_h * src_line;
    for (int64_t p = 0; p < n_planes; p++) {
        uint8_t *dst = base + (size_t)p * plane;
        const uint8_t *src = base + (size_t)p * src_plane;
        for (int y = 0; y < h; y++, dst += line, src += src_line)
            if (dst != src)
                std::memmove(dst, src, line);
    }
    return FQ_OK;
}
