/* fq_image_targets_mask.cpp - masks / label maps (uint8 or uint16) through the geometric
 * records of an explain record, nearest neighbour: crops and pads as the image (outside:
 * the fill value, whatever the image's border mode); resizes sample the source pixel under
 * each output pixel's centre, as the image's own resampling and TensorFlow's
 * tf.image.resize(method="nearest") do (FQ_TGT_CENTER, bit for bit TF's float32
 * arithmetic), or OpenCV's INTER_NEAREST, floor(x * in / out), with FQ_TGT_LEGACY (torch's
 * legacy "nearest"; half a pixel off the image); flips with cv::flip; RandomAffine with
 * cv::warpAffine INTER_NEAREST on the record's matrix (it rounds the inverse-mapped pixel
 * index: the centre convention already); the Rotate / Shear / Translate primitives with the
 * same float32 sampling as the image (fq_image_aug_geom.cpp), so a label stays on its
 * pixel.  docs/targets.md. */
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "image/internal/fq_image_targets_int.h"

namespace {

inline float round_even(float v) /* as fq_image_aug_geom.cpp */
{
    if (!(std::fabs(v) < 4194304.f))
        return v;
    return (v + 12582912.f) - 12582912.f;
}

/* box (x, y, w, h) of m, outside filled with fill */
cv::Mat crop_fill(const cv::Mat &m, const int box[4], unsigned fill)
{
    cv::Mat d(box[3], box[2], m.type(), cv::Scalar::all(fill));
    const int x0 = std::max(box[0], 0), y0 = std::max(box[1], 0);
    const int x1 = std::min(box[0] + box[2], m.cols), y1 = std::min(box[1] + box[3], m.rows);
    if (x1 > x0 && y1 > y0)
        m(cv::Rect(x0, y0, x1 - x0, y1 - y0)).copyTo(d(cv::Rect(x0 - box[0], y0 - box[1], x1 - x0, y1 - y0)));
    return d;
}

/* idx[x] for x < out: the source index under output pixel x's centre, as TensorFlow's
 * resize_nearest_neighbor with half_pixel_centers computes it (float32: scale = in / out,
 * floor((x + 0.5) * scale), at most in - 1) */
void centre_index(int in, int out, int *idx)
{
    const float scale = (float)in / (float)out;
    for (int x = 0; x < out; x++)
        idx[x] = std::min((int)std::floor(((float)x + 0.5f) * scale), in - 1);
}

/* d(y, x) = m(yi[y], xi[x]); an output row whose source row is the last one's is a copy */
template <class T>
void gather(const cv::Mat &m, cv::Mat &d, const int *xi, const int *yi)
{
    const size_t row = (size_t)d.cols * sizeof(T);
    for (int y = 0; y < d.rows; y++) {
        T *o = d.ptr<T>(y);
        if (y > 0 && yi[y] == yi[y - 1]) {
            std::memcpy(o, d.ptr<T>(y - 1), row);
            continue;
        }
        const T *s = m.ptr<T>(yi[y]);
        for (int x = 0; x < d.cols; x++)
            o[x] = s[xi[x]];
    }
}

/* m resized to ow x oh, nearest, sampled as `sampling` says (FQ_TGT_CENTER / _LEGACY) */
cv::Mat resize_nearest(const cv::Mat &m, int ow, int oh, int sampling)
{
    cv::Mat d;
    if (sampling == FQ_TGT_LEGACY) {
        cv::resize(m, d, cv::Size(ow, oh), 0, 0, cv::INTER_NEAREST);
        return d;
    }
    d.create(oh, ow, m.type());
    std::vector<int> xi((size_t)ow), yi((size_t)oh);
    centre_index(m.cols, ow, xi.data());
    centre_index(m.rows, oh, yi.data());
    if (m.depth() == CV_8U)
        gather<uint8_t>(m, d, xi.data(), yi.data());
    else
        gather<uint16_t>(m, d, xi.data(), yi.data());
    return d;
}

/* the image primitives' sampling (geom_exec) on one channel of T */
template <class T>
void geom_sample(const cv::Mat &src, cv::Mat &d, const double *m, unsigned fill)
{
    const int H = src.rows, W = src.cols;
    float t[6];
    for (int k = 0; k < 3; k++)
        t[k] = (float)m[k] / (float)(0.5 * W), t[3 + k] = (float)m[3 + k] / (float)(0.5 * H);
    const float sw = (float)W * 0.5f, ow = ((float)W - 1.f) * 0.5f, sh = (float)H * 0.5f, oh = ((float)H - 1.f) * 0.5f;
    for (int y = 0; y < H; y++) {
        const float yg = (float)y - oh;
        T *o = d.ptr<T>(y);
        for (int x = 0; x < W; x++) {
            const float xg = (float)x - ow;
            float gx = xg * t[0] + yg * t[1] + t[2], gy = xg * t[3] + yg * t[4] + t[5];
            float ix = round_even(fqi::fma_exact(gx, sw, ow)), iy = round_even(fqi::fma_exact(gy, sh, oh));
            if (ix >= 0.f && ix < (float)W && iy >= 0.f && iy < (float)H)
                o[x] = src.ptr<T>((int)iy)[(int)ix];
            else
                o[x] = (T)fill;
        }
    }
}

cv::Mat replay(const fq_img_op_explain &r, const cv::Mat &m, unsigned fill, int sampling)
{
    int geom = -1;
    switch (fqt::rule_of(r.kind, &geom)) {
    case FQ_RULE_RRC:
        return resize_nearest(m(cv::Rect(r.box[0], r.box[1], r.box[2], r.box[3])), r.out_w, r.out_h, sampling);
    case FQ_RULE_RESIZE:
        if (m.rows == r.out_h && m.cols == r.out_w)
            return m;
        return resize_nearest(m, r.out_w, r.out_h, sampling);
    case FQ_RULE_SCALE_JITTER: {
        const int b[4] = {r.box[0], r.box[1], r.out_w, r.out_h};
        return crop_fill(resize_nearest(m, r.box[2], r.box[3], sampling), b, fill);
    }
    case FQ_RULE_IOU_CROP:
        return r.applied ? crop_fill(m, r.box, fill) : m;
    case FQ_RULE_CROP:
        return crop_fill(m, r.box, fill);
    case FQ_RULE_RCROP: {
        const int b[4] = {r.box[0] - r.pad[0], r.box[1] - r.pad[1], r.box[2], r.box[3]};
        return crop_fill(m, b, fill);
    }
    case FQ_RULE_ZOOM_OUT: {
        if (!r.applied)
            return m;
        const int b[4] = {-r.pad[0], -r.pad[1], r.out_w, r.out_h};
        return crop_fill(m, b, fill);
    }
    case FQ_RULE_PAD: {
        const int b[4] = {0, 0, r.out_w, r.out_h};
        return crop_fill(m, b, fill);
    }
    case FQ_RULE_HFLIP:
    case FQ_RULE_VFLIP: {
        if (!r.applied)
            return m;
        cv::Mat d;
        cv::flip(m, d, fqt::rule_of(r.kind, nullptr) == FQ_RULE_HFLIP ? 1 : 0);
        return d;
    }
    case FQ_RULE_AFFINE: {
        cv::Mat d, M(2, 3, CV_64F, const_cast<double *>(r.matrix));
        cv::warpAffine(m, d, M, cv::Size(m.cols, m.rows), cv::INTER_NEAREST, cv::BORDER_CONSTANT,
                       cv::Scalar::all(fill));
        return d;
    }
    case FQ_RULE_GEOM: {
        if (!r.applied)
            return m;
        double v = r.factor[0], mat[6];
        fqi::geom_matrix(geom, &v, m.rows, m.cols, mat);
        cv::Mat d(m.rows, m.cols, m.type());
        if (m.depth() == CV_8U)
            geom_sample<uint8_t>(m, d, mat, fill);
        else
            geom_sample<uint16_t>(m, d, mat, fill);
        return d;
    }
    default:
        return m; /* pixel-only */
    }
}

}  // namespace

extern "C" int fq_tgt_mask(const fq_img_explain *ex, const void *mask, int h, int w, int elem_size, size_t stride,
                           unsigned fill, int sampling, void *out, fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (!mask || !out || h < 1 || w < 1 || (elem_size != 1 && elem_size != 2) || stride < (size_t)w * elem_size)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_mask: bad arguments (a uint8 or uint16 h x w mask)");
    if (sampling != FQ_TGT_CENTER && sampling != FQ_TGT_LEGACY)
        return fq_set_err(err, FQ_E_INVALID, "mask: sampling %d is neither FQ_TGT_CENTER nor FQ_TGT_LEGACY", sampling);
    if (fill > (elem_size == 1 ? 255u : 65535u))
        return fq_set_err(err, FQ_E_INVALID, "mask: fill %u does not fit the mask's dtype", fill);
    int H, W;
    fqt::src_size(ex, &H, &W);
    if (h != H || w != W)
        return fq_set_err(err, FQ_E_INVALID, "mask: a %dx%d mask for a %dx%d image (masks have the source's size)", w,
                          h, W, H);
    const int type = elem_size == 1 ? CV_8UC1 : CV_16UC1;
    try {
        cv::Mat cur(h, w, type, const_cast<void *>(mask), stride);
        for (int j = 0; j < ex->n_ops; j++) {
            const fq_img_op_explain &r = ex->ops[j];
            if (cur.rows != r.in_h || cur.cols != r.in_w)
                return fq_set_err(err, FQ_E_INVALID, "mask: op %d (%s) expects %dx%d, the chain gives %dx%d", j,
                                  fq_img_op_name(r.kind), r.in_w, r.in_h, cur.cols, cur.rows);
            cur = replay(r, cur, fill, sampling);
        }
        const int oh = ex->n_ops > 0 ? ex->ops[ex->n_ops - 1].out_h : h;
        const int ow = ex->n_ops > 0 ? ex->ops[ex->n_ops - 1].out_w : w;
        if (cur.rows != oh || cur.cols != ow)
            return fq_set_err(err, FQ_E_INVALID, "mask: the chain gives %dx%d, its record says %dx%d", cur.cols,
                              cur.rows, ow, oh);
        cv::Mat dst(oh, ow, type, out);
        cur.copyTo(dst);
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "mask: out of memory");
    } catch (const cv::Exception &e) {
        return fq_set_err(err, FQ_E_NOMEM, "mask: OpenCV: %s", e.what());
    }
    return FQ_OK;
}
