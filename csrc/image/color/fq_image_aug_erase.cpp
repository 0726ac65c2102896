/* fq_image_aug_erase.cpp - RandomErasing (torchvision.transforms.v2.RandomErasing): the
 * check and the plan (every draw, at plan time, in chain order).  The op changes no
 * pixel while the chain runs: the erased box is written by the fused final write
 * (fq_image_write.cpp, erase_box) over the output values, i.e. after Normalize.
 * Pure functions of their arguments (thread-safe). */
#include "image/internal/fq_image_aug.h"

#include <cmath>

namespace fqi {

const char *erase_check(const fq_op &op)
{
    const AugErase &q = params<AugErase>(op);
    if (!aug_valid_prob(q.p))
        return "p must be in [0, 1]";
    if (!(aug_valid_level(q.scale) && q.scale[0] >= 0 && q.scale[1] <= 1))
        return "scale must satisfy 0 <= min <= max <= 1";
    if (!(aug_valid_level(q.ratio) && q.ratio[0] > 0 && q.ratio[1] <= 1e6))
        return "ratio must satisfy 0 < min <= max <= 1e6";
    if (!(q.random == 0 || q.random == 1))
        return "random must be 0 or 1";
    for (int c = 0; c < 3; c++)
        if (!(std::isfinite(q.value[c]) && std::fabs(q.value[c]) <= 1e30))
            return "value must be finite numbers (|v| <= 1e30)";
    return nullptr;
}

/* u < p decides; then up to 10 tries of torchvision's make_params: area = H W U(scale),
 * r = exp(U(log ratio)), h = round(sqrt(area r)), w = round(sqrt(area / r)) (half to
 * even, as Python's round), accepted when h < H and w < W; then, for "random" values, a
 * 52-bit key of their stream; then top ~ U{0..H-h}, left ~ U{0..W-w}.  No accepted try:
 * applied = 0 (nothing is erased, as torchvision). */
int plan_erase(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const AugErase &q = params<AugErase>(op);
    const int H = *ph, W = *pw;
    for (int c = 0; c < 3; c++)
        r.factor[c] = q.value[c];
    r.params[2] = q.random;
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    if (!r.applied)
        return FQ_OK;
    r.applied = 0;
    const double area = (double)H * (double)W;
    const double lr0 = std::log(q.ratio[0]), lr1 = std::log(q.ratio[1]);
    for (int t = 1; t <= 10; t++) {
        r.params[1] = t;
        const double ea = area * fq_rng_uniform_range(rng, q.scale[0], q.scale[1]);
        const double ar = std::exp(fq_rng_uniform_range(rng, lr0, lr1));
        const double hd = std::nearbyint(std::sqrt(ea * ar)), wd = std::nearbyint(std::sqrt(ea / ar));
        if (!(hd < H && wd < W))
            continue;
        const int h = (int)hd, w = (int)wd;
        if (q.random)
            r.params[0] = (double)(fq_rng_next_u64(rng) >> 12); /* exact in a double */
        const int top = (int)fq_rng_next_below(rng, (uint64_t)(H - h + 1));
        const int left = (int)fq_rng_next_below(rng, (uint64_t)(W - w + 1));
        r.box[0] = left, r.box[1] = top, r.box[2] = w, r.box[3] = h;
        r.applied = 1;
        break;
    }
    return FQ_OK;
}

void erase_exec(Exec &, const fq_op &, fq_img_op_explain &) {}

}  // namespace fqi

/* ---- the records of this family, RandomErasing: kinds fixed forever;
 * fq_image_op_table.cpp assembles the families */
namespace {

constexpr fqi::OpImpl kEraseRecords[] = {
    {33, "RandomErasing", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_BOX | FQ_EXPLAIN_ERASE,
     FQ_PARAMS(fqi::AugErase, fqi::kEraseFields), fqi::erase_check, fqi::keeps_size, fqi::plan_erase, fqi::erase_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsErase, kEraseRecords)
