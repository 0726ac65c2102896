/* fq_imgtask_reader_boxes.c - the boxes of a READER sample from the five variable-length
 * features its reader delivered (fq_imgtask.h: fq_imgtask_targets.from_reader). */
#include "task/fq_imgtask.h"

#include <stdlib.h>
#include <string.h>

int fq_imgtask_reader_boxes(const uint8_t *block, const size_t *sizes, int normalized, int src_h, int src_w,
                            float **boxes, int32_t **classes, int *n_out, int64_t *left_out, fq_err *err)
{
    static const char *const names[5] = {"xmin", "ymin", "xmax", "ymax", "class/label"};
    int64_t cnt[5];
    const uint8_t *val[5];
    size_t off = 0;
    *boxes = NULL;
    *classes = NULL;
    *n_out = 0;
    *left_out = 0;
    for (int k = 0; k < 5; k++) {
        memcpy(&cnt[k], block + off, sizeof cnt[k]);
        val[k] = block + off + 8;
        off += sizes[k];
    }
    for (int k = 1; k < 5; k++)
        if (cnt[k] != cnt[0])
            return fq_set_err(err, FQ_E_DECODE,
                              "the object lists differ in length: bbox/xmin %lld, bbox/ymin %lld, bbox/xmax %lld, "
                              "bbox/ymax %lld, class/label %lld (first different: %s)", (long long)cnt[0], (long long)cnt[1],
                              (long long)cnt[2], (long long)cnt[3], (long long)cnt[4], names[k]);
    const int64_t cap = (int64_t)((sizes[0] - 8) / 4);
    if (cnt[0] < 0)
        return fq_set_err(err, FQ_E_DECODE, "negative object count %lld", (long long)cnt[0]);
    const int64_t n = cnt[0] < cap ? cnt[0] : cap; /* the reader kept at most cap (FQ_TFR_TRUNCATE) */
    float *b = malloc(sizeof(float) * 4 * (size_t)(n + 1));
    int32_t *c = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!b || !c) {
        free(b), free(c);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    const double scale[4] = {src_w, src_h, src_w, src_h};
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++) {
            float v;
            memcpy(&v, val[k] + 4 * (size_t)i, sizeof v);
            b[4 * i + k] = normalized ? (float)((double)v * scale[k]) : v; /* as load_odapi (float64, rounded) */
        }
        int64_t cl;
        memcpy(&cl, val[4] + 8 * (size_t)i, sizeof cl);
        if (cl < INT32_MIN || cl > INT32_MAX) {
            free(b), free(c);
            return fq_set_err(err, FQ_E_DECODE, "object %lld: class %lld does not fit int32", (long long)i,
                              (long long)cl);
        }
        c[i] = (int32_t)cl;
    }
    *boxes = b;
    *classes = c;
    *n_out = (int)n;
    *left_out = cnt[0] - n;
    return FQ_OK;
}

int fq_imgtask_reader_boxes_check(const fq_imgtask_source *src, size_t *block_off, fq_err *err)
{
    const fq_imgtask_targets *g = src->targets;
    const fq_sample_reader *r = src->reader;
    if (src->kind != FQ_SRC_READER || !r || r->n_extra < 5 || r->n_extra > FQ_IMGTASK_MAX_EXTRA ||
        g->max_boxes < 1 || g->boxes || g->classes || g->offsets || g->keypoints || g->masks)
        return fq_set_err(err, FQ_E_INVALID, "targets from the reader: need a native reader with the box lists, "
                                             "max_boxes >= 1, no box arrays, keypoints or masks");
    const size_t *s = r->extra_sizes + r->n_extra - 5;
    if (s[0] < 8 || (s[0] - 8) % 4 != 0 || s[1] != s[0] || s[2] != s[0] || s[3] != s[0] ||
        s[4] != 8 + (s[0] - 8) * 2)
        return fq_set_err(err, FQ_E_INVALID, "targets from the reader: the last five reader outputs are not "
                                             "four float lists and an int64 list of one capacity");
    for (int k = r->n_extra - 5; k < r->n_extra; k++)
        if (src->extra_type[k] != FQ_NUM_AS_READ)
            return fq_set_err(err, FQ_E_INVALID, "targets from the reader: the box lists cannot be converted");
    *block_off = 0;
    for (int k = 0; k < r->n_extra - 5; k++)
        *block_off += r->extra_sizes[k];
    return FQ_OK;
}
