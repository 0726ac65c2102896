/* fq_image_targets_inst.cpp - per-instance masks (Mask R-CNN targets).
 *
 * Polygons (COCO polygon segmentations): the vertices move with the same forward maps
 * as boxes and keypoints (every geometric record in chain order, flips included; no
 * clipping), then each ring is rasterized at the OUTPUT size with pycocotools'
 * algorithm (rleFrPoly: the boundary traced on a 5x finer grid, the rows where it
 * crosses each pixel column's centre toggle the column-major mask), rings united.
 * Exact for any affine map, costs O(perimeter) per ring, no resampling of a raster.
 * At the output size the mask is then kept only where the image shows the source
 * (fq_tgt_valid): a part cut off by a crop does not come back in a later op's padding.
 *
 * Run-length masks (COCO RLE, column-major runs starting with 0s, at the source size):
 * decoded, then moved with fq_tgt_mask (nearest neighbour, fill 0, the caller's
 * sampling).  docs/targets.md. */
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "image/internal/fq_image_targets_int.h"

namespace {

const double kScale = 5.0; /* pycocotools' upsampling of the boundary */
/* vertices beyond this (output pixels) would overflow the 5x integer grid; the trace of
 * an edge costs one step per 1/5 px, so this also bounds the work */
const double kMaxCoord = 1 << 24;
const int64_t kMaxSteps = (int64_t)1 << 28;

/* C's (int) conversion of a double as x86-64 does it: toward zero; NaN or out of range
 * gives INT_MIN (cvttsd2si), which pycocotools' rleFrPoly relies on for 0/0 slopes */
inline int trunc_int(double v)
{
    if (!(v > -2147483649.0 && v < 2147483648.0))
        return INT_MIN;
    return (int)v;
}

/* the toggle positions (column-major, x * h + y) of one ring of k points (x[k] = x[0])
 * at h x w, in the order rleFrPoly finds them; FQ_E_INVALID when the trace is too long */
int ring_toggles(const int *x, const int *y, int k, int h, int w, std::vector<int64_t> &pos, fq_err *err)
{
    int64_t steps = 0;
    for (int j = 0; j < k; j++)
        steps += std::max(std::abs((int64_t)x[j] - x[j + 1]), std::abs((int64_t)y[j] - y[j + 1])) + 1;
    if (steps > kMaxSteps)
        return fq_set_err(err, FQ_E_INVALID, "polygon: a boundary of %lld steps (1/5 px) is too long",
                          (long long)steps);
    bool have = false;
    int pu = 0, pv = 0;
    auto point = [&](int u, int v) {
        if (have && u != pu) {
            double xd = (double)(u < pu ? u : u - 1);
            xd = (xd + .5) / kScale - .5;
            if (std::floor(xd) == xd && xd >= 0 && xd <= w - 1) {
                double yd = (double)(v < pv ? v : pv);
                yd = (yd + .5) / kScale - .5;
                yd = std::ceil(yd < 0 ? 0 : (yd > h ? h : yd));
                pos.push_back((int64_t)xd * h + (int64_t)yd);
            }
        }
        have = true, pu = u, pv = v;
    };
    for (int j = 0; j < k; j++) {
        int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
        const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
        const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
        if (flip)
            std::swap(xs, xe), std::swap(ys, ye);
        if (dx >= dy) {
            const double s = dx ? (double)(ye - ys) / dx : NAN; /* 0/0 as in C: NaN */
            for (int d = 0; d <= dx; d++) {
                const int t = flip ? dx - d : d;
                point(t + xs, trunc_int(ys + s * t + .5));
            }
        } else {
            const double s = (double)(xe - xs) / dy;
            for (int d = 0; d <= dy; d++) {
                const int t = flip ? dy - d : d;
                point(trunc_int(xs + s * t + .5), t + ys);
            }
        }
    }
    return FQ_OK;
}

/* set to 1 the pixels of out (h x w, row-major) whose column-major index is in [s, e) */
void fill_run(uint8_t *out, int h, int w, int64_t s, int64_t e)
{
    while (s < e) {
        const int64_t x = s / h, y0 = s % h, y1 = std::min<int64_t>(h, y0 + (e - s));
        for (int64_t y = y0; y < y1; y++)
            out[y * w + x] = 1;
        s += y1 - y0;
    }
}

/* the mask of the toggles: rleFrPoly's runs (positions sorted; a run of zero length
 * merges its neighbours, i.e. a position counts by its parity) */
void fill_toggles(std::vector<int64_t> &pos, uint8_t *out, int h, int w)
{
    std::sort(pos.begin(), pos.end());
    const int64_t end = (int64_t)h * w;
    bool on = false;
    int64_t start = 0;
    for (size_t i = 0; i < pos.size();) {
        size_t j = i;
        while (j < pos.size() && pos[j] == pos[i])
            j++;
        if ((j - i) % 2) {
            const int64_t p = std::min(pos[i], end);
            if (on)
                fill_run(out, h, w, start, p);
            on = !on, start = p;
        }
        i = j;
    }
    if (on)
        fill_run(out, h, w, start, end);
}

void out_size(const fq_img_explain *ex, int *oh, int *ow)
{
    int h, w;
    fqt::src_size(ex, &h, &w);
    *oh = ex->n_ops > 0 ? ex->ops[ex->n_ops - 1].out_h : h;
    *ow = ex->n_ops > 0 ? ex->ops[ex->n_ops - 1].out_w : w;
}

}  // namespace

extern "C" {

int fq_tgt_polygons_check(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                          fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (n_rings < 0 || (n_rings > 0 && (!xy || !ring_off)))
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_polygons: bad arguments");
    int H, W;
    fqt::src_size(ex, &H, &W);
    const double tol = 1.0;
    for (int r = 0; r < n_rings; r++) {
        const int64_t a = ring_off[r], b = ring_off[r + 1];
        if (b - a < 3 || b - a > INT_MAX / 2)
            return fq_set_err(err, FQ_E_INVALID, "polygon %d has %lld points, needs at least 3", r,
                              (long long)(b - a));
        for (int64_t p = a; p < b; p++) {
            const double x = xy[2 * p], y = xy[2 * p + 1];
            if (!(std::isfinite(x) && std::isfinite(y)))
                return fq_set_err(err, FQ_E_INVALID, "polygon %d, point %lld: coordinates must be finite, got "
                                  "(%g, %g)", r, (long long)(p - a), x, y);
            if (x < -tol || y < -tol || x > W + tol || y > H + tol)
                return fq_set_err(err, FQ_E_INVALID, "polygon %d, point %lld: (%g, %g) lies outside the %dx%d "
                                  "source image (x, y in source pixels)", r, (long long)(p - a), x, y, W, H);
        }
    }
    return FQ_OK;
}

}  // extern "C"

namespace {

/* fq_tgt_polygons at oh x ow; box (x0, y0, x1, y1 output pixels, may be NULL): then the
 * vertices are also moved into the box's frame scaled to oh x ow (detectron2's
 * crop_and_resize: (x - x0) * ow / max(x1 - x0, 0.1)).  span (may be NULL): the pixel
 * rectangle x0, y0, x1, y1 (end exclusive, inside oh x ow) outside which nothing was set */
int polygons_at(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings, const float *box,
                int oh, int ow, uint8_t *out, int *span, fq_err *err)
{
    if (int rc = fq_tgt_polygons_check(ex, xy, ring_off, n_rings, err))
        return rc;
    if (!out || oh < 1 || ow < 1)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_polygons: bad output");
    double maps[FQ_IMG_MAX_OPS][6], bx = 0, by = 0, rx = 1, ry = 1;
    int n_maps = 0;
    for (int j = 0; j < ex->n_ops; j++)
        if (fqt::op_map(ex->ops[j], maps[n_maps]))
            n_maps++;
    if (box) {
        if (!(std::isfinite(box[0]) && std::isfinite(box[1]) && std::isfinite(box[2]) && std::isfinite(box[3])))
            return fq_set_err(err, FQ_E_INVALID, "polygon: the box must be finite");
        bx = box[0], by = box[1];
        rx = ow / std::max((double)box[2] - box[0], 0.1), ry = oh / std::max((double)box[3] - box[1], 0.1);
    }
    double lo_x = HUGE_VAL, lo_y = HUGE_VAL, hi_x = -HUGE_VAL, hi_y = -HUGE_VAL;
    try {
        std::vector<int> x, y;
        std::vector<int64_t> pos;
        for (int r = 0; r < n_rings; r++) {
            const int64_t a = ring_off[r];
            const int k = (int)(ring_off[r + 1] - a);
            x.resize((size_t)k + 1), y.resize((size_t)k + 1);
            for (int p = 0; p < k; p++) {
                double px = xy[2 * (a + p)], py = xy[2 * (a + p) + 1];
                for (int j = 0; j < n_maps; j++) {
                    const double *M = maps[j];
                    const double nx = M[0] * px + M[1] * py + M[2], ny = M[3] * px + M[4] * py + M[5];
                    px = nx, py = ny;
                }
                if (box)
                    px = (px - bx) * rx, py = (py - by) * ry;
                if (!(std::fabs(px) < kMaxCoord && std::fabs(py) < kMaxCoord))
                    return fq_set_err(err, FQ_E_INVALID, "polygon %d, point %d: moved to (%g, %g), too far "
                                      "outside the %dx%d output", r, p, px, py, ow, oh);
                x[p] = trunc_int(kScale * px + .5), y[p] = trunc_int(kScale * py + .5);
                lo_x = std::min(lo_x, px), hi_x = std::max(hi_x, px);
                lo_y = std::min(lo_y, py), hi_y = std::max(hi_y, py);
            }
            x[k] = x[0], y[k] = y[0];
            pos.clear();
            if (int rc = ring_toggles(x.data(), y.data(), k, oh, ow, pos, err))
                return rc;
            fill_toggles(pos, out, oh, ow);
        }
    } catch (const std::bad_alloc &) {
        return fq_set_err(err, FQ_E_NOMEM, "polygon: out of memory");
    }
    if (span) { /* pixel centres inside the vertices' bounding box, with a pixel to spare */
        const double m = 1 << 30; /* |coordinates| < kMaxCoord: no overflow */
        span[0] = (int)std::min(std::max(std::floor(lo_x) - 1, 0.0), m);
        span[1] = (int)std::min(std::max(std::floor(lo_y) - 1, 0.0), m);
        span[2] = (int)std::max(std::min(std::ceil(hi_x) + 1, (double)ow), 0.0);
        span[3] = (int)std::max(std::min(std::ceil(hi_y) + 1, (double)oh), 0.0);
    }
    return FQ_OK;
}

/* the polygons at the output size, kept where valid (out_h x out_w, 0 / 1) is 1: only the
 * rectangle the rings span is visited (a sample's many small instances on a large output) */
int polygons_valid(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                   const uint8_t *valid, uint8_t *out, fq_err *err)
{
    int oh, ow, span[4] = {0, 0, 0, 0};
    out_size(ex, &oh, &ow);
    if (int rc = polygons_at(ex, xy, ring_off, n_rings, nullptr, oh, ow, out, span, err))
        return rc;
    for (int y = span[1]; y < span[3]; y++) {
        uint8_t *o = out + (size_t)y * (size_t)ow;
        const uint8_t *v = valid + (size_t)y * (size_t)ow;
        for (int x = span[0]; x < span[2]; x++)
            o[x] &= v[x];
    }
    return FQ_OK;
}

}  // namespace

extern "C" {

int fq_tgt_valid(const fq_img_explain *ex, uint8_t *out, fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (!out)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_valid: NULL output");
    int h, w;
    fqt::src_size(ex, &h, &w);
    if (h < 1 || w < 1)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_valid: a %dx%d source", w, h);
    uint8_t *ones = (uint8_t *)std::malloc((size_t)h * (size_t)w);
    if (!ones)
        return fq_set_err(err, FQ_E_NOMEM, "shown region: out of memory for a %dx%d plane", w, h);
    std::memset(ones, 1, (size_t)h * (size_t)w);
    const int rc = fq_tgt_mask(ex, ones, h, w, 1, (size_t)w, 0, FQ_TGT_CENTER, out, err);
    std::free(ones);
    return rc;
}

int fq_tgt_polygons_valid(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                          const uint8_t *valid, uint8_t *out, fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (!valid)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_polygons_valid: NULL valid plane");
    return polygons_valid(ex, xy, ring_off, n_rings, valid, out, err);
}

int fq_tgt_polygons(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings, uint8_t *out,
                    fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    int oh, ow;
    out_size(ex, &oh, &ow);
    uint8_t *valid = (uint8_t *)std::malloc((size_t)oh * (size_t)ow);
    if (!valid)
        return fq_set_err(err, FQ_E_NOMEM, "polygon: out of memory for a %dx%d plane", ow, oh);
    int rc = fq_tgt_valid(ex, valid, err);
    if (rc == FQ_OK)
        rc = polygons_valid(ex, xy, ring_off, n_rings, valid, out, err);
    std::free(valid);
    return rc;
}

int fq_tgt_polygons_box(const fq_img_explain *ex, const float *xy, const int64_t *ring_off, int n_rings,
                        const float box[4], int mh, int mw, uint8_t *out, fq_err *err)
{
    if (!box)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_polygons_box: NULL box");
    return polygons_at(ex, xy, ring_off, n_rings, box, mh, mw, out, nullptr, err);
}

void fq_tgt_mask_box(const uint8_t *src, int h, int w, const float box[4], int mh, int mw, uint8_t *out)
{
    const double x0 = box[0], y0 = box[1], sx = (box[2] - x0) / mw, sy = (box[3] - y0) / mh;
    for (int i = 0; i < mh; i++) {
        const int y = (int)std::min(std::max(std::floor(y0 + (i + 0.5) * sy), 0.0), (double)(h - 1));
        for (int j = 0; j < mw; j++) {
            const int x = (int)std::min(std::max(std::floor(x0 + (j + 0.5) * sx), 0.0), (double)(w - 1));
            out[(size_t)i * mw + j] = src[(size_t)y * w + x];
        }
    }
}

int fq_tgt_rle_check(const fq_img_explain *ex, const uint32_t *counts, int64_t m, int h, int w, fq_err *err)
{
    if (int rc = fqt::check(ex, err))
        return rc;
    if (m < 0 || (m > 0 && !counts))
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_rle: bad arguments");
    int H, W;
    fqt::src_size(ex, &H, &W);
    if (h != H || w != W)
        return fq_set_err(err, FQ_E_INVALID, "RLE of a %dx%d mask for a %dx%d image (RLE masks have the source's "
                          "size)", w, h, W, H);
    uint64_t total = 0; /* at most 2^32 runs of < 2^32: no overflow */
    for (int64_t i = 0; i < m; i++)
        total += counts[i];
    if (total != (uint64_t)h * (uint64_t)w)
        return fq_set_err(err, FQ_E_INVALID, "RLE runs cover %llu pixels, the %dx%d mask has %llu",
                          (unsigned long long)total, w, h, (unsigned long long)h * (unsigned long long)w);
    return FQ_OK;
}

int fq_tgt_rle(const fq_img_explain *ex, const uint32_t *counts, int64_t m, int h, int w, int sampling, uint8_t *out,
               fq_err *err)
{
    if (int rc = fq_tgt_rle_check(ex, counts, m, h, w, err))
        return rc;
    if (!out)
        return fq_set_err(err, FQ_E_INVALID, "fq_tgt_rle: NULL output");
    uint8_t *src = (uint8_t *)std::calloc((size_t)h * (size_t)w, 1);
    if (!src)
        return fq_set_err(err, FQ_E_NOMEM, "RLE: out of memory decoding a %dx%d mask", w, h);
    int64_t p = 0;
    for (int64_t i = 0; i < m; p += counts[i], i++)
        if (i % 2)
            fill_run(src, h, w, p, p + counts[i]);
    const int rc = fq_tgt_mask(ex, src, h, w, 1, (size_t)w, 0, sampling, out, err);
    std::free(src);
    return rc;
}

}  // extern "C"
