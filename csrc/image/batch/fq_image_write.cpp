/* fq_image_write.cpp - the fused last step: flips still pending, the Normalize / x/255
 * table of the spec, the output dtype, layout and channel order, in one pass over the
 * image into the caller's row; then the RandomErasing box of the plan is written over
 * the output values of that row (the box only).  Pure function of its arguments
 * (thread-safe).
 *
 * Channel order: output channel oc of a BGR spec is source (RGB) channel 2 - oc, read
 * through that source channel's table (Normalize's mean/std are given in RGB order and
 * follow their channel). */
#include "image/internal/fq_image_aug.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

template <typename T, int C, bool BGR>
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
                    for (int c = 0; c < C; c++) {
                        const int sc = BGR ? C - 1 - c : c;
                        q[x * C + c] = lut[sc][p[x * C + sc]];
                    }
            } else {
                for (int x = 0; x < w; x++) {
                    const uint8_t *pp = p + (size_t)(w - 1 - x) * C;
                    for (int c = 0; c < C; c++) {
                        const int sc = BGR ? C - 1 - c : c;
                        q[x * C + c] = lut[sc][pp[sc]];
                    }
                }
            }
        } else {
            for (int oc = 0; oc < C; oc++) {
                const int c = BGR ? C - 1 - oc : oc; /* the source channel */
                T *q = o + oc * plane + (size_t)y * w;
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
void write_any(const cv::Mat &img, bool hf, bool vf, int layout, bool bgr, const T (*lut)[256], void *out)
{
    if (img.channels() == 3 && bgr)
        write_rows<T, 3, true>(img, hf, vf, layout, lut, out);
    else if (img.channels() == 3)
        write_rows<T, 3, false>(img, hf, vf, layout, lut, out);
    else
        write_rows<T, 1, false>(img, hf, vf, layout, lut, out);
}

/* one output element from a value on the output scale: float32 as is; float16 /
 * bfloat16 from its float32 rounding; uint8 rounded half to even and clipped to 0..255 */
template <typename T>
T out_value(double v, int dtype);
template <>
float out_value<float>(double v, int) { return (float)v; }
template <>
uint16_t out_value<uint16_t>(double v, int dtype)
{
    return dtype == FQ_DT_BFLOAT16 ? fqi::f32_to_bf16((float)v) : fqi::f32_to_f16((float)v);
}
template <>
uint8_t out_value<uint8_t>(double v, int)
{
    double r = std::nearbyint(v);
    return (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
}

/* standard normal values for "random" erasing: Box-Muller on pairs of fq_rng uniforms
 * of a stream keyed by the plan's key, z0 = sqrt(-2 ln(1 - u1)) cos(2 pi u2), then
 * z1 = ... sin(2 pi u2), in that order */
struct Normal {
    fq_rng g;
    double spare = 0;
    bool has = false;
    explicit Normal(double key) { g.state = fq_rng_mix64((uint64_t)key ^ UINT64_C(0x52414E444F4D4552)); }
    double next()
    {
        if (has) {
            has = false;
            return spare;
        }
        const double u1 = fq_rng_uniform(&g), u2 = fq_rng_uniform(&g);
        const double rad = std::sqrt(-2.0 * std::log(1.0 - u1)), th = 2.0 * 3.14159265358979323846 * u2;
        spare = rad * std::sin(th), has = true;
        return rad * std::cos(th);
    }
};

/* write r's box over the output row: value[c] of source (RGB) channel c, or the
 * per-element normal values drawn in the order (row, column, source channel) of the
 * box (the same values whatever the layout or channel order) */
template <typename T>
void erase_box(const fq_img_spec *sp, const fq_img_op_explain &r, void *out)
{
    const int H = sp->out_h, W = sp->out_w, C = sp->out_c;
    const int x0 = r.box[0], y0 = r.box[1], bw = r.box[2], bh = r.box[3];
    if (bw <= 0 || bh <= 0 || x0 < 0 || y0 < 0 || x0 + bw > W || y0 + bh > H)
        return;
    const bool bgr = sp->fmt.channel_order == FQ_ORDER_BGR && C == 3, chw = sp->fmt.layout == FQ_LAYOUT_CHW;
    T *o = static_cast<T *>(out);
    const size_t plane = (size_t)H * W;
    if (r.params[2] == 0) { /* constant: one value per output channel */
        T pix[3];
        for (int c = 0; c < C; c++)
            pix[bgr ? C - 1 - c : c] = out_value<T>(r.factor[c], sp->fmt.dtype);
        for (int y = y0; y < y0 + bh; y++) {
            if (chw) {
                for (int oc = 0; oc < C; oc++)
                    std::fill_n(o + (size_t)oc * plane + (size_t)y * W + x0, bw, pix[oc]);
            } else {
                T *q = o + ((size_t)y * W + x0) * C;
                for (int x = 0; x < bw; x++)
                    for (int oc = 0; oc < C; oc++)
                        q[x * C + oc] = pix[oc];
            }
        }
        return;
    }
    Normal nrm(r.params[0]);
    for (int y = y0; y < y0 + bh; y++)
        for (int x = x0; x < x0 + bw; x++)
            for (int c = 0; c < C; c++) {
                const int oc = bgr ? C - 1 - c : c;
                const T v = out_value<T>(nrm.next(), sp->fmt.dtype);
                if (chw)
                    o[(size_t)oc * plane + (size_t)y * W + x] = v;
                else
                    o[((size_t)y * W + x) * C + oc] = v;
            }
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

void write_out(const fq_img_spec *sp, const cv::Mat &img, bool hf, bool vf, void *out, const Plan &pl)
{
    const int layout = sp->fmt.layout;
    const bool bgr = sp->fmt.channel_order == FQ_ORDER_BGR && img.channels() == 3;
    const fq_img_op_explain *er = sp->erase_at >= 0 && sp->erase_at < pl.n && pl.r[sp->erase_at].applied
                                      ? &pl.r[sp->erase_at]
                                      : nullptr;
    switch (sp->fmt.dtype) {
    case FQ_DT_UINT8:
        if (!hf && !vf && !bgr && (layout == FQ_LAYOUT_HWC || img.channels() == 1)) {
            size_t rb = (size_t)img.cols * img.channels();
            for (int y = 0; y < img.rows; y++)
                std::memcpy(static_cast<uint8_t *>(out) + y * rb, img.ptr<uint8_t>(y), rb);
        } else if (!((layout == FQ_LAYOUT_HWC || img.channels() == 1) &&
                     fqi::write_u8_hwc_simd(img, hf, vf, bgr, static_cast<uint8_t *>(out)))) {
            write_any<uint8_t>(img, hf, vf, layout, bgr, g_id_lut.t, out);
        }
        if (er)
            erase_box<uint8_t>(sp, *er, out);
        break;
    case FQ_DT_FLOAT32:
        if (!(layout == FQ_LAYOUT_HWC &&
              fqi::write_f32_hwc_simd(sp->f32k, sp->lut_f32, img, hf, vf, static_cast<float *>(out), bgr)))
            write_any<float>(img, hf, vf, layout, bgr, sp->lut_f32, out);
        if (er)
            erase_box<float>(sp, *er, out);
        break;
    default: /* FQ_DT_FLOAT16, FQ_DT_BFLOAT16: 16-bit codes from lut_f16 */
        write_any<uint16_t>(img, hf, vf, layout, bgr, sp->lut_f16, out);
        if (er)
            erase_box<uint16_t>(sp, *er, out);
        break;
    }
}

}  // namespace fqi
