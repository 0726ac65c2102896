/* fq_image_write.cpp - the fused last step: flips still pending, the Normalize / x/255
 * table of the spec, the output dtype and layout, in one pass over the image into the
 * caller's row.  Pure function of its arguments (thread-safe). */
#include "image/internal/fq_image_stages.h"

#include <cstring>

namespace {

template <typename T, int C>
void write_rows(const cv::Mat &img, bool hf, bool vf, int layout, const T (*lut)[256], void *out)
{
    const int h = img.rows, w = img.cols;
    T *o = static_cast<T *>(out);
    const size_t plane = (size_t)h * w;
    for (int y = 0; y < h; y++) {
        const uint8_t *p = img.ptr<uint8_t>(vf ? h - 1 - y : y);
        if (layout == FQ_LAYOUT_HWC) {
            T *q = o + (size_t)y * w * C;
            if (!hf) {
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < C; c++)
                        q[x * C + c] = lut[c][p[x * C + c]];
            } else {
                for (int x = 0; x < w; x++) {
                    const uint8_t *pp = p + (size_t)(w - 1 - x) * C;
                    for (int c = 0; c < C; c++)
                        q[x * C + c] = lut[c][pp[c]];
                }
            }
        } else {
            for (int c = 0; c < C; c++) {
                T *q = o + c * plane + (size_t)y * w;
                const T *l = lut[c];
                if (!hf)
                    for (int x = 0; x < w; x++)
                        q[x] = l[p[x * C + c]];
                else
                    for (int x = 0; x < w; x++)
                        q[x] = l[p[(w - 1 - x) * C + c]];
            }
        }
    }
}

template <typename T>
void write_any(const cv::Mat &img, bool hf, bool vf, int layout, const T (*lut)[256], void *out)
{
    if (img.channels() == 3)
        write_rows<T, 3>(img, hf, vf, layout, lut, out);
    else
        write_rows<T, 1>(img, hf, vf, layout, lut, out);
}

struct IdLut {
    uint8_t t[3][256];
    IdLut()
    {
        for (int c = 0; c < 3; c++)
            for (int v = 0; v < 256; v++)
                t[c][v] = (uint8_t)v;
    }
};
const IdLut g_id_lut; /* constant, initialized at load time */

}  // namespace

namespace fqi {

void write_out(const fq_img_spec *sp, const cv::Mat &img, bool hf, bool vf, void *out)
{
    const int layout = sp->fmt.layout;
    switch (sp->fmt.dtype) {
    case FQ_DT_UINT8:
        if (!hf && !vf && (layout == FQ_LAYOUT_HWC || img.channels() == 1)) {
            size_t rb = (size_t)img.cols * img.channels();
            for (int y = 0; y < img.rows; y++)
                std::memcpy(static_cast<uint8_t *>(out) + y * rb, img.ptr<uint8_t>(y), rb);
        } else {
            write_any<uint8_t>(img, hf, vf, layout, g_id_lut.t, out);
        }
        break;
    case FQ_DT_FLOAT32:
        if (layout == FQ_LAYOUT_HWC &&
            fqi::write_f32_hwc_simd(sp->f32k, sp->lut_f32, img, hf, vf, static_cast<float *>(out)))
            break;
        write_any<float>(img, hf, vf, layout, sp->lut_f32, out);
        break;
    default: /* FQ_DT_FLOAT16, FQ_DT_BFLOAT16: 16-bit codes from lut_f16 */
        write_any<uint16_t>(img, hf, vf, layout, sp->lut_f16, out);
        break;
    }
}

}  // namespace fqi
