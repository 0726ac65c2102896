/* fq_imgtask_boxes.c - each sample's boxes for its plan, which RandomIoUCrop draws its crop
 * from (fq_imgtask_plan_boxes; image/fq_image.h fq_img_scratch_set_boxes). */
#include "task/fq_imgtask.h"

#include <stdlib.h>
#include <string.h>

void fq_imgtask_plan_boxes(fq_img_scratch *s, const fq_imgtask_targets *g, int64_t idx, const uint8_t *block,
                           const size_t *sizes)
{
    if (!g) {
        fq_img_scratch_set_boxes(s, NULL, NULL, NULL, NULL, 0, -1, 0);
        return;
    }
    if (!g->from_reader) {
        const int64_t off = g->offsets[idx], n = g->offsets[idx + 1] - off;
        const float *b = n > 0 ? g->boxes + 4 * off : NULL;
        fq_img_scratch_set_boxes(s, b, b ? b + 1 : NULL, b ? b + 2 : NULL, b ? b + 3 : NULL, 4, (int)n,
                                 g->normalized);
        return;
    }
    if (!block) { /* not read yet: none until produce_read sets them */
        fq_img_scratch_set_boxes(s, NULL, NULL, NULL, NULL, 0, -1, 0);
        return;
    }
    /* the five VARLEN lists (int64 count, then the values): xmin, ymin, xmax, ymax, class; the
     * counts are checked to agree when the targets are written (fq_imgtask_reader_boxes) */
    const float *v[4];
    int64_t n = (int64_t)((sizes[0] - 8) / 4); /* the reader's capacity */
    size_t off = 0;
    for (int k = 0; k < 4; k++) {
        int64_t c;
        memcpy(&c, block + off, sizeof c);
        n = c < n ? c : n;
        v[k] = (const float *)(const void *)(block + off + 8); /* read with memcpy: may be unaligned */
        off += sizes[k];
    }
    fq_img_scratch_set_boxes(s, v[0], v[1], v[2], v[3], 1, (int)(n > 0 ? n : 0), g->normalized);
}

int fq_imgtask_scaled_boxes(const fq_imgtask_targets *g, int64_t off, int n, int src_h, int src_w, float **out,
                            fq_err *err)
{
    const double scale[4] = {src_w, src_h, src_w, src_h};
    float *b = malloc(sizeof(float) * 4 * (size_t)(n > 0 ? n : 1));
    if (!b)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    for (int i = 0; i < 4 * n; i++) /* as fq_imgtask_reader_boxes: float64 product, rounded to float32 */
        b[i] = (float)((double)g->boxes[4 * off + i] * scale[i % 4]);
    *out = b;
    return FQ_OK;
}
