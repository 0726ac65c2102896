/* fq_imgtask_instance_masks.c - per-instance masks of an image task's targets (fq_imgtask.h,
 * fq_imgtask_targets.inst_*): each sample's instances are checked, and those of its kept
 * boxes rasterized (polygons) or decoded and moved (RLE) into the batch slot, in the
 * worker that made the image, from its explain record.  docs/targets.md. */
#include <stdlib.h>
#include <string.h>

#include "task/fq_imgtask.h"

static int non_decreasing(const int64_t *off, int64_t n)
{
    if (off[0] != 0)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (off[i + 1] < off[i])
            return 0;
    return 1;
}

int fq_imgtask_inst_check(const fq_imgtask_targets *g, int64_t n, fq_err *err)
{
    if (!g->inst_kind)
        return FQ_OK;
    if (!g->inst_poly || !g->inst_ring || !g->inst_rle || !g->inst_hw || g->max_boxes < 1 || g->from_reader ||
        g->inst_out_h < 1 || g->inst_out_w < 1)
        return fq_set_err(err, FQ_E_INVALID, "targets: bad instance mask arrays (they need boxes, max_boxes >= 1)");
    const int64_t nb = g->offsets[n];
    if (!non_decreasing(g->inst_poly, nb) || !non_decreasing(g->inst_ring, g->inst_poly[nb]) ||
        !non_decreasing(g->inst_rle, nb) || (g->inst_ring[g->inst_poly[nb]] > 0 && !g->inst_xy) ||
        (g->inst_rle[nb] > 0 && !g->inst_counts))
        return fq_set_err(err, FQ_E_INVALID, "targets: instance offsets must start at 0 and be non-decreasing");
    for (int64_t j = 0; j < nb; j++)
        if (g->inst_kind[j] > FQ_INST_RLE)
            return fq_set_err(err, FQ_E_INVALID, "targets: box %lld: unknown instance kind %d", (long long)j,
                              (int)g->inst_kind[j]);
    if (g->inst_mask_h < 0 || g->inst_mask_w < 0 || (g->inst_mask_h > 0) != (g->inst_mask_w > 0) ||
        g->inst_mask_h > 65536 || g->inst_mask_w > 65536)
        return fq_set_err(err, FQ_E_INVALID, "targets: bad instance mask size %dx%d", g->inst_mask_w,
                          g->inst_mask_h);
    if ((uint64_t)g->max_boxes * (uint64_t)g->inst_out_h * (uint64_t)g->inst_out_w > ((uint64_t)1 << 40))
        return fq_set_err(err, FQ_E_INVALID, "targets: instance masks of %d x %d x %d bytes per sample",
                          g->max_boxes, g->inst_out_h, g->inst_out_w);
    return FQ_OK;
}

/* box j (global row) of sample idx: checked, and rasterized into out when out != NULL (in
 * box at the instance mask size when box != NULL; scratch: an output-size plane for RLE;
 * valid: where the output shows the source, made on the first polygon at the output size) */
static int one(const fq_imgtask_targets *g, int64_t idx, int64_t j, const fq_img_explain *ex, const float *box,
               uint8_t *scratch, uint8_t **valid, uint8_t *out, fq_err *e)
{
    switch (g->inst_kind[j]) {
    case FQ_INST_POLYGONS: {
        const int64_t r0 = g->inst_poly[j], nr = g->inst_poly[j + 1] - r0;
        if (nr > INT32_MAX)
            return fq_set_err(e, FQ_E_INVALID, "%lld polygons", (long long)nr);
        if (out && box)
            return fq_tgt_polygons_box(ex, g->inst_xy, g->inst_ring + r0, (int)nr, box, g->inst_mask_h,
                                       g->inst_mask_w, out, e);
        if (!out)
            return fq_tgt_polygons_check(ex, g->inst_xy, g->inst_ring + r0, (int)nr, e);
        if (!*valid) {
            if (!(*valid = malloc((size_t)g->inst_out_h * (size_t)g->inst_out_w)))
                return fq_set_err(e, FQ_E_NOMEM, "out of memory");
            int rc = fq_tgt_valid(ex, *valid, e);
            if (rc != FQ_OK) {
                free(*valid);
                *valid = NULL;
                return rc;
            }
        }
        return fq_tgt_polygons_valid(ex, g->inst_xy, g->inst_ring + r0, (int)nr, *valid, out, e);
    }
    case FQ_INST_RLE: {
        int h = g->inst_hw[2 * idx], w = g->inst_hw[2 * idx + 1];
        if (h == 0 && w == 0)
            h = ex->n_ops > 0 ? ex->ops[0].in_h : ex->src_h, w = ex->n_ops > 0 ? ex->ops[0].in_w : ex->src_w;
        const uint32_t *c = g->inst_counts + g->inst_rle[j];
        const int64_t m = g->inst_rle[j + 1] - g->inst_rle[j];
        if (!out)
            return fq_tgt_rle_check(ex, c, m, h, w, e);
        int rc = fq_tgt_rle(ex, c, m, h, w, g->mask_sampling, box ? scratch : out, e);
        if (rc == FQ_OK && box)
            fq_tgt_mask_box(scratch, g->inst_out_h, g->inst_out_w, box, g->inst_mask_h, g->inst_mask_w, out);
        return rc;
    }
    default:
        return FQ_OK; /* no mask: an empty one */
    }
}

int fq_imgtask_inst_masks(const fq_imgtask_targets *g, int64_t idx, int64_t off, int n, const fq_img_explain *ex,
                          const int32_t *index, const float *kept_boxes, int count, uint8_t *row, fq_err *err)
{
    const int oh = ex->n_ops > 0 ? ex->ops[ex->n_ops - 1].out_h : ex->src_h;
    const int ow = ex->n_ops > 0 ? ex->ops[ex->n_ops - 1].out_w : ex->src_w;
    if (oh != g->inst_out_h || ow != g->inst_out_w)
        return fq_set_err(err, FQ_E_INVALID, "instance masks: the chain gives %dx%d, the output is %dx%d", ow, oh,
                          g->inst_out_w, g->inst_out_h);
    const int in_box = g->inst_mask_h > 0;
    const size_t plane = in_box ? (size_t)g->inst_mask_h * (size_t)g->inst_mask_w : (size_t)oh * (size_t)ow;
    memset(row, 0, plane * (size_t)g->max_boxes);
    fq_err e;
    for (int i = 0; i < n; i++) { /* every instance is checked, kept or not */
        fq_clear_err(&e);
        int rc = one(g, idx, off + i, ex, NULL, NULL, NULL, NULL, &e);
        if (rc != FQ_OK)
            return fq_set_err(err, rc, "instance %d: %s", i, e.msg);
    }
    uint8_t *scratch = NULL, *valid = NULL;
    if (in_box && count > 0 && !(scratch = malloc((size_t)oh * (size_t)ow)))
        return fq_set_err(err, FQ_E_NOMEM, "instance masks: out of memory");
    int rc = FQ_OK;
    for (int i = 0; i < count && rc == FQ_OK; i++) {
        if (index[i] < 0 || index[i] >= n) {
            rc = fq_set_err(err, FQ_E_INVALID, "instance masks: kept box %d is row %d of %d", i, index[i], n);
            break;
        }
        fq_clear_err(&e);
        rc = one(g, idx, off + index[i], ex, in_box ? kept_boxes + 4 * i : NULL, scratch, &valid,
                 row + plane * (size_t)i, &e);
        if (rc != FQ_OK)
            fq_set_err(err, rc, "instance %d: %s", index[i], e.msg);
    }
    free(valid);
    free(scratch);
    return rc;
}
