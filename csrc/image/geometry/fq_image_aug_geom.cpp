/* fq_image_aug_geom.cpp - the geometric augmentation primitives (Rotate, ShearX/Y,
 * TranslateX/Y: torchvision v2's affine with nearest sampling and fill) and Cutout (TF
 * Model Garden); their records are in the table of fq_image_aug.cpp.  Semantics:
 * docs/ops.md "Augmentation primitives".  Pure functions of their arguments. */
#include "image/internal/fq_image_aug.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>

namespace fqi {


const char *geom_check_range(const fq_op &op, double lim, const char *why)
{
    const AugGeom &q = fqi::params<AugGeom>(op);
    if (!aug_valid_level(q.level) || q.level[0] < -lim || q.level[1] > lim)
        return why;
    for (double f : q.fill)
        if (!(std::isfinite(f) && f >= 0 && f <= 255))
            return "fill must be 3 numbers in [0, 255]";
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

const char *rotate_check(const fq_op &op)
{
    return geom_check_range(op, 1e6, "angle range must be finite, min <= max");
}
const char *shear_check(const fq_op &op)
{
    return geom_check_range(op, 100, "level range must satisfy -100 <= min <= max <= 100");
}
const char *translate_check(const fq_op &op)
{
    return geom_check_range(op, FQ_IMG_MAX_SIDE, "pixels range must satisfy -32768 <= min <= max <= 32768");
}

/* torchvision's _get_inverse_affine_matrix (angle, translate, shear in degrees, scale 1)
 * about centre (cx, cy) given relative to the image centre; the 2x3 inverse map of
 * centred output coordinates to centred input coordinates, into r.matrix. */
void inverse_affine(double angle, double tx, double ty, double shx, double shy, double cx, double cy, double *m)
{
    const double d2r = 3.14159265358979323846 / 180.0;
    double rot = angle * d2r, sx = shx * d2r, sy = shy * d2r;
    double cos_sy = std::cos(sy), tan_sx = std::tan(sx);
    double a = std::cos(rot - sy) / cos_sy;
    double b = -(a * tan_sx + std::sin(rot));
    double c = std::sin(rot - sy) / cos_sy;
    double d = std::cos(rot) - c * tan_sx;
    m[0] = d, m[1] = -b, m[2] = 0, m[3] = -c, m[4] = a, m[5] = 0;
    m[2] += cx - m[0] * (cx + tx) - m[1] * (cy + ty);
    m[5] += cy - m[3] * (cx + tx) - m[4] * (cy + ty);
}


/* the inverse map of geometric op kind G (GeomKind) at level v (trunc'ed for the
 * translations, as torchvision's int()) for an h x w image, into m */
/* Rotate .. TranslateY are aug records 10 .. 14, in GeomKind order (static_assert in
 * fq_image_aug.cpp) */
int aug_geom_kind(int kind)
{
    const int g = kind - FQ_OP_NORMALIZE - 1 - 10;
    return g >= G_ROTATE && g <= G_TRANSLATE_Y ? g : -1;
}

void geom_matrix(int G, double *v, double h, double w, double *m)
{
    const double r2d = 180.0 / 3.14159265358979323846;
    switch (G) {
    case G_ROTATE: /* F.rotate(angle): counter-clockwise, about the centre */
        inverse_affine(-*v, 0, 0, 0, 0, 0, 0, m);
        break;
    case G_SHEAR_X: /* F.affine(shear=[degrees(atan(v)), 0], center=[0, 0]) */
        inverse_affine(0, 0, 0, std::atan(*v) * r2d, 0, -w * 0.5, -h * 0.5, m);
        break;
    case G_SHEAR_Y:
        inverse_affine(0, 0, 0, 0, std::atan(*v) * r2d, -w * 0.5, -h * 0.5, m);
        break;
    case G_TRANSLATE_X: /* F.affine(translate=[int(v), 0]) */
        *v = std::trunc(*v);
        inverse_affine(0, *v, 0, 0, 0, 0, 0, m);
        break;
    default:
        *v = std::trunc(*v);
        inverse_affine(0, 0, *v, 0, 0, 0, 0, m);
        break;
    }
}

int plan_geom(int G, const fq_op &op, fq_rng *rng, int *ph, int *pw, fq_img_op_explain &r)
{
    const AugGeom &q = fqi::params<AugGeom>(op);
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    double v = aug_draw_level(rng, q.level, r.applied);
    geom_matrix(G, &v, *ph, *pw, r.matrix);
    r.factor[0] = v;
    return FQ_OK;
}

/* Nearest-neighbour inverse mapping as torchvision's _affine_grid + grid_sample
 * (align_corners=False) in float32: geom_pixel (fq_image_aug.h) per output pixel, the
 * pending flips folded into the source read (no flipped copy); AVX2 form:
 * geom_warp_simd. */
void geom_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied)
        return;
    const AugGeom &q = fqi::params<AugGeom>(op);
    const int H = e.cur.rows, W = e.cur.cols, c = e.cur.channels();
    float t[6];
    for (int k = 0; k < 3; k++)
        t[k] = (float)r.matrix[k] / (float)(0.5 * W), t[3 + k] = (float)r.matrix[3 + k] / (float)(0.5 * H);
    uint8_t fill[3];
    for (int k = 0; k < 3; k++)
        fill[k] = (uint8_t)std::nearbyint(q.fill[k]);
    const bool hf = e.hflip, vf = e.vflip;
    cv::Mat d = e.next(H, W, e.cur.type());
    if (!geom_warp_simd(e.cur, d, t, hf, vf, fill)) {
        /* geom_pixel's computation with the invariants in locals (the byte stores could
         * alias a cv::Mat's fields) */
        const float sw = (float)W * 0.5f, ow = ((float)W - 1.f) * 0.5f, sh = (float)H * 0.5f, oh = ((float)H - 1.f) * 0.5f;
        const uint8_t *base = e.cur.ptr<uint8_t>(0);
        const size_t step = e.cur.step[0];
        const float t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5];
        for (int y = 0; y < H; y++) {
            uint8_t *o = d.ptr<uint8_t>(y);
            const float yg = (float)y - oh;
            for (int x = 0; x < W; x++, o += c) {
                const float xg = (float)x - ow;
                float gx = xg * t0 + yg * t1 + t2, gy = xg * t3 + yg * t4 + t5;
                float ix = aug_round_even(fma_exact(gx, sw, ow)), iy = aug_round_even(fma_exact(gy, sh, oh));
                if (ix >= 0.f && ix < (float)W && iy >= 0.f && iy < (float)H) {
                    const int sx = hf ? W - 1 - (int)ix : (int)ix, sy = vf ? H - 1 - (int)iy : (int)iy;
                    const uint8_t *sp = base + (size_t)sy * step + (size_t)sx * c;
                    for (int k = 0; k < c; k++)
                        o[k] = sp[k];
                } else {
                    for (int k = 0; k < c; k++)
                        o[k] = fill[k];
                }
            }
        }
    }
    e.hflip = e.vflip = false;
    e.set(d);
}

const char *cutout_check(const fq_op &op)
{
    const AugCutout &q = fqi::params<AugCutout>(op);
    if (!(aug_is_int(q.pad_size) && q.pad_size >= 0 && q.pad_size <= FQ_IMG_MAX_SIDE))
        return "pad_size must be an integer in [0, 32768]";
    for (double f : q.fill)
        if (!(std::isfinite(f) && f >= 0 && f <= 255))
            return "fill must be 3 numbers in [0, 255]";
    return aug_valid_prob(q.p) ? nullptr : "p must be in [0, 1]";
}

/* centre row ~ U{0..H-1}, then column ~ U{0..W-1}; the square [c - pad, c + pad) clipped */
int plan_cutout(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)
{
    const AugCutout &q = fqi::params<AugCutout>(op);
    const int H = *ph, W = *pw, pad = (int)q.pad_size;
    r.applied = fq_rng_uniform(rng) < q.p ? 1 : 0;
    if (!r.applied)
        return FQ_OK;
    int cy = (int)fq_rng_next_below(rng, (uint64_t)H), cx = (int)fq_rng_next_below(rng, (uint64_t)W);
    int y0 = std::max(0, cy - pad), y1 = std::min(H, cy + pad), x0 = std::max(0, cx - pad), x1 = std::min(W, cx + pad);
    r.box[0] = x0, r.box[1] = y0, r.box[2] = x1 - x0, r.box[3] = y1 - y0;
    return FQ_OK;
}

void cutout_exec(Exec &e, const fq_op &op, fq_img_op_explain &r)
{
    if (!r.applied || r.box[2] <= 0 || r.box[3] <= 0)
        return;
    e.materialize_flips();
    const AugCutout &q = fqi::params<AugCutout>(op);
    cv::Mat d = e.next(e.cur.rows, e.cur.cols, e.cur.type());
    e.cur.copyTo(d);
    d(cv::Rect(r.box[0], r.box[1], r.box[2], r.box[3]))
        .setTo(cv::Scalar(std::nearbyint(q.fill[0]), std::nearbyint(q.fill[1]), std::nearbyint(q.fill[2])));
    e.set(d);
}


#define FQ_GEOM_PLAN(fn, G)                                                                                        \
    int fn(const fq_op &op, fq_rng *rng, int64_t, int *ph, int *pw, fq_img_op_explain &r, fq_err *)               \
    {                                                                                                              \
        return plan_geom(G, op, rng, ph, pw, r);                                                                   \
    }
FQ_GEOM_PLAN(plan_rotate, G_ROTATE)
FQ_GEOM_PLAN(plan_shear_x, G_SHEAR_X)
FQ_GEOM_PLAN(plan_shear_y, G_SHEAR_Y)
FQ_GEOM_PLAN(plan_translate_x, G_TRANSLATE_X)
FQ_GEOM_PLAN(plan_translate_y, G_TRANSLATE_Y)

}  // namespace fqi

/* ---- the records of this family, the geometric primitives Rotate .. TranslateY and
 * Cutout: kinds fixed forever; fq_image_op_table.cpp assembles the families */
namespace {

constexpr fq_op_field kGeomFields[] = {FQ_FIELD(fqi::AugGeom, level), FQ_FIELD(fqi::AugGeom, fill),
                                       FQ_FIELD(fqi::AugGeom, p)};
constexpr fq_op_field kCutoutFields[] = {FQ_FIELD(fqi::AugCutout, pad_size), FQ_FIELD(fqi::AugCutout, fill),
                                         FQ_FIELD(fqi::AugCutout, p)};

constexpr fqi::OpImpl kGeomRecords[] = {
    {21, "Rotate", FQ_RULE_GEOM, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugGeom, kGeomFields),
     fqi::rotate_check, fqi::keeps_size, fqi::plan_rotate, fqi::geom_exec},
    {22, "ShearX", FQ_RULE_GEOM, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugGeom, kGeomFields),
     fqi::shear_check, fqi::keeps_size, fqi::plan_shear_x, fqi::geom_exec},
    {23, "ShearY", FQ_RULE_GEOM, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugGeom, kGeomFields),
     fqi::shear_check, fqi::keeps_size, fqi::plan_shear_y, fqi::geom_exec},
    {24, "TranslateX", FQ_RULE_GEOM, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugGeom, kGeomFields),
     fqi::translate_check, fqi::keeps_size, fqi::plan_translate_x, fqi::geom_exec},
    {25, "TranslateY", FQ_RULE_GEOM, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_MAGNITUDE, FQ_PARAMS(fqi::AugGeom, kGeomFields),
     fqi::translate_check, fqi::keeps_size, fqi::plan_translate_y, fqi::geom_exec},
    {29, "Cutout", FQ_RULE_PIXEL, FQ_EXPLAIN_APPLIED | FQ_EXPLAIN_BOX, FQ_PARAMS(fqi::AugCutout, kCutoutFields),
     fqi::cutout_check, fqi::keeps_size, fqi::plan_cutout, fqi::cutout_exec},
};

}  // namespace

FQ_OP_FAMILY(kOpsGeom, kGeomRecords)
static_assert(fqi::family_find(kGeomRecords, 6, "Rotate")->kind == FQ_OP_NORMALIZE + 1 + 10 &&
                  fqi::family_find(kGeomRecords, 6, "ShearX")->kind == FQ_OP_NORMALIZE + 1 + 11 &&
                  fqi::family_find(kGeomRecords, 6, "ShearY")->kind == FQ_OP_NORMALIZE + 1 + 12 &&
                  fqi::family_find(kGeomRecords, 6, "TranslateX")->kind == FQ_OP_NORMALIZE + 1 + 13 &&
                  fqi::family_find(kGeomRecords, 6, "TranslateY")->kind == FQ_OP_NORMALIZE + 1 + 14,
              "aug_geom_kind maps kinds FQ_OP_NORMALIZE + 11 .. 15 to GeomKind, in order");
