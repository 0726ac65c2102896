/* fq_image_aug_filter.cpp - GaussianBlur (torchvision v2 gaussian_blur on uint8): the
 * kernel as torchvision builds it in float32 (linspace, softmax), a separable float32
 * convolution with reflect-101 borders, rounded half to even.  Its record is in the table
 * of fq_image_aug.cpp.  Semantics: docs/ops.md "Augmentation primitives". */
#include "image/internal/fq_image_aug.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

namespace fqi {

namespace {

/* torchvision _get_gaussian_kernel1d: x = linspace(-lim, lim, k) (float32, one FMA per
 * value), lim = (k - 1) / (2 sqrt 2); softmax(-(x / sigma)^2) in float32 */
void gaussian_kernel(int k, float sigma, float *out)
{
    const double lim = (k - 1) / (2.0 * std::sqrt(2.0));
    const float a = (float)-lim, b = (float)lim;
    const float step = k > 1 ? (b - a) / (float)(k - 1) : 0.f;
    float mx = -INFINITY;
    for (int i = 0; i < k; i++) {
        float x = k == 1 ? a : (i < k / 2 ? std::fmaf(step, (float)i, a) : std::fmaf(-step, (float)(k - i - 1), b));
        float t = x / sigma;
        out[i] = -(t * t);
        mx = std::max(mx, out[i]);
    }
    float sum = 0.f;
    for (int i = 0; i < k; i++)
        sum += (out[i] = std::exp(out[i] - mx));
    for (int i = 0; i < k; i++)
        out[i] /= sum;
}

}  // namespace

const char *blur_check(const fq_op &op)
{
    const AugBlur &q = params<AugBlur>(op);
    for (double k : q.ksize)
        if (!(aug_is_int(k) && k >= 1 && k <= 255 && std::fmod(k, 2.0) == 1.0))
            return "kernel_size must be odd integers in [1, 255]";
    if (!aug_valid_level(q.sigma) || !(q.sigma[0] > 0) || q.sigma[1] > 1e3)
        return "sigma must satisfy 0 < min <= max <= 1000";
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

int plan_blur(const fq_op &op, fq_rng *rng, int64_t, int *, int *, fq_img_op_explain &r, fq_err *)
{
    const AugBlur &q = params<AugBlur>(op);
    aug_plan_p_level(rng, q.p, q.sigma, r);
    return FQ_OK;
}

void blur_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const AugBlur &q = params<AugBlur>(op);
    const int kx = (int)q.ksize[0], ky = (int)q.ksize[1];
    /* torch's reflect padding needs the image larger than half the kernel */
    if (e.cur.cols <= kx / 2 || e.cur.rows <= ky / 2)
        return;
    float kxv[255], kyv[255];
    gaussian_kernel(kx, (float)r.factor[0], kxv);
    gaussian_kernel(ky, (float)r.factor[0], kyv);
    cv::Mat f = e.s->g1.mat(e.cur.rows, e.cur.cols, CV_32FC(e.cur.channels()));
    e.cur.convertTo(f, CV_32F);
    cv::Mat g = e.s->g2.mat(e.cur.rows, e.cur.cols, CV_32FC(e.cur.channels()));
    cv::sepFilter2D(f, g, CV_32F, cv::Mat(1, kx, CV_32F, kxv), cv::Mat(ky, 1, CV_32F, kyv), cv::Point(-1, -1), 0,
                    cv::BORDER_REFLECT_101);
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    g.convertTo(d, d.type()); /* cvRound: half to even, saturated */
    e.set(d);
}

}  // namespace fqi

/* ---- the records of this family, GaussianBlur: kinds fixed forever;
 * fq_image_op_table.cpp assembles the families */
namespace {

constexpr fq_op_field kBlurFields[] = {FQ_FIELD(fqi::AugBlur, ksize), FQ_FIELD(fqi::AugBlur, sigma),
                                       FQ_FIELD(fqi::AugBlur, p)};

constexpr fqi::OpImpl kBlurRecords[] = {
    {32, "GaussianBlur", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugBlur, kBlurFields),
     fqi::blur_check, fqi::keeps_size, fqi::plan_blur, fqi::blur_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsBlur, kBlurRecords)
