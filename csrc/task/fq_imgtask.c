/* fq_imgtask.c - see fq_imgtask.h. */
#define _POSIX_C_SOURCE 200809L
#include "task/fq_imgtask.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fq_io.h"
#include "core/fq_rng.h"
#include "core/fq_stage_times.h"

typedef struct fq_worker_buf {
    fq_img_scratch *scratch;
    uint8_t *buf;
    size_t cap;
    uint64_t last_read_ns;          /* this worker's last file read (own thread only) */
    int processed;                  /* the last produce() reached fq_img_process_* (own thread only) */
    _Atomic uint64_t stage_ns[5];   /* read, decode, ops, write, samples (fq_stage_times.h) */
    uint8_t *extra; /* READER: the outputs after the image of the last sample read */
    int32_t hw[2];  /* with_sizes: the valid size of the last sample produced (own thread only) */
} fq_worker_buf;

struct fq_imgtask {
    const fq_img_spec *spec;
    fq_imgtask_source src;
    int n_workers;
    int on_error;
    int max_attempts;
    int with_index;
    size_t row_bytes;
    size_t extra_out[FQ_IMGTASK_MAX_EXTRA]; /* READER: bytes of extra output k in the row */
    int has_tg;                             /* targets: outputs after the reader's */
    int n_out_extra;                        /* READER: extras that are outputs (not from_reader boxes) */
    size_t rd_off;                          /* from_reader: the box lists in the worker's extra buffer */
    fq_imgtask_targets tg;
    const int64_t *order;
    int64_t n_items;
    uint64_t seed, epoch;
    fq_worker_buf *w;
    _Atomic int64_t skipped;
    _Atomic int64_t skipped_by_code[FQ_IMGTASK_MAX_CODES];
    _Atomic int64_t failed;
    _Atomic int64_t bytes_read;
    _Atomic int64_t boxes_truncated;
    pthread_mutex_t msg_mu;
    char last_skip[FQ_IMGTASK_MAX_CODES][FQ_ERR_MSG_LEN];
};

static int reader_ok(const fq_imgtask_source *src)
{
    const fq_sample_reader *r = src->reader;
    return r && r->read && r->describe && r->n_extra >= 0 && r->n_extra <= FQ_IMGTASK_MAX_EXTRA;
}

/* Extra output k's value v as `type` at dst; FQ_E_DECODE when an integer type cannot
 * hold it.  dst may overlap the value's own 8 bytes (v is already loaded). */
static int store_num(int type, int64_t v, uint8_t *dst, fq_err *err)
{
    static const int64_t lo[FQ_NUM_COUNT] = {0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0, 0, 0, 0, 0, 0};
    static const int64_t hi[FQ_NUM_COUNT] = {0,         INT8_MAX,   INT16_MAX, INT32_MAX, INT64_MAX, UINT8_MAX,
                                             UINT16_MAX, UINT32_MAX, INT64_MAX, 0,         0};
    if (type != FQ_NUM_F32 && type != FQ_NUM_F64 && (v < lo[type] || v > hi[type]))
        return fq_set_err(err, FQ_E_DECODE, "label %lld does not fit in label_dtype %s", (long long)v,
                          fq_num_name(type));
    switch (type) {
    case FQ_NUM_I8: { int8_t x = (int8_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_I16: { int16_t x = (int16_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_I32: { int32_t x = (int32_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_I64: memcpy(dst, &v, sizeof v); break;
    case FQ_NUM_U8: { uint8_t x = (uint8_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_U16: { uint16_t x = (uint16_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_U32: { uint32_t x = (uint32_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_U64: { uint64_t x = (uint64_t)v; memcpy(dst, &x, sizeof x); break; }
    case FQ_NUM_F32: { float x = (float)v; memcpy(dst, &x, sizeof x); break; }
    default: { double x = (double)v; memcpy(dst, &x, sizeof x); break; }
    }
    return FQ_OK;
}

/* READER: convert the extras the worker just read to their output types, in place:
 * value i of output k moves from off_k + 8 i to off_k + size i (never forwards). */
static int convert_extras(const fq_imgtask *t, uint8_t *extra, fq_err *err)
{
    const fq_sample_reader *r = t->src.reader;
    size_t off = 0;
    for (int k = 0; k < r->n_extra; off += r->extra_sizes[k], k++) {
        int type = t->src.extra_type[k];
        if (type == FQ_NUM_AS_READ)
            continue;
        size_t size = fq_num_size(type);
        for (size_t i = 0; i < r->extra_sizes[k] / 8; i++) {
            int64_t v;
            memcpy(&v, extra + off + 8 * i, sizeof v);
            int rc = store_num(type, v, extra + off + size * i, err);
            if (rc != FQ_OK)
                return rc;
        }
    }
    return FQ_OK;
}

static size_t extra_bytes(const fq_imgtask_source *src)
{
    size_t n = 0;
    if (src->kind == FQ_SRC_READER)
        for (int k = 0; k < src->reader->n_extra; k++)
            n += src->reader->extra_sizes[k];
    return n;
}

int fq_imgtask_create(const fq_img_spec *spec, const fq_imgtask_source *src, int n_workers,
                      int on_error, int max_attempts, int with_index, fq_imgtask **out, fq_err *err)
{
    if (!out || !spec || !src)
        return fq_set_err(err, FQ_E_INVALID, "fq_imgtask_create: NULL argument");
    *out = NULL;
    if (n_workers < 1)
        return fq_set_err(err, FQ_E_INVALID, "workers must be >= 1");
    if (src->n < 1)
        return fq_set_err(err, FQ_E_INVALID, "the source has no samples");
    if (src->kind == FQ_SRC_FILES && !src->paths)
        return fq_set_err(err, FQ_E_INVALID, "file source without paths");
    if ((src->kind == FQ_SRC_BYTES && (!src->data || !src->lens)) ||
        (src->kind == FQ_SRC_ARRAYS && (!src->data || !src->shape || !src->strides)))
        return fq_set_err(err, FQ_E_INVALID, "source without data");
    if (src->kind == FQ_SRC_READER && !reader_ok(src))
        return fq_set_err(err, FQ_E_INVALID, "bad native reader");
    for (int k = 0; src->kind == FQ_SRC_READER && k < src->reader->n_extra; k++) {
        int type = src->extra_type[k];
        if (type < FQ_NUM_AS_READ || type >= FQ_NUM_COUNT)
            return fq_set_err(err, FQ_E_INVALID, "extra output %d: unknown type %d", k, type);
        if (type != FQ_NUM_AS_READ && src->reader->extra_sizes[k] % 8 != 0)
            return fq_set_err(err, FQ_E_INVALID, "extra output %d: converting needs int64 values (%zu bytes)", k,
                              src->reader->extra_sizes[k]);
    }
    if (src->kind < FQ_SRC_FILES || src->kind > FQ_SRC_READER)
        return fq_set_err(err, FQ_E_INVALID, "unknown source kind %d", src->kind);
    if (src->with_sizes && (src->sizes_op < 0 || src->sizes_op >= FQ_IMG_MAX_OPS))
        return fq_set_err(err, FQ_E_INVALID, "sizes_op %d out of range", src->sizes_op);
    if (on_error != FQ_ON_ERROR_RAISE && on_error != FQ_ON_ERROR_SKIP)
        return fq_set_err(err, FQ_E_INVALID, "unknown on_error policy %d", on_error);
    size_t rd_off = 0;
    if (src->targets && src->targets->from_reader) {
        if (fq_imgtask_reader_boxes_check(src, &rd_off, err) != FQ_OK)
            return err->code;
    } else if (src->targets) {
        const fq_imgtask_targets *g = src->targets;
        if (!g->offsets || g->max_boxes < 0 || g->offsets[0] != 0 || (g->offsets[src->n] > 0 && !g->boxes) ||
            (g->keypoints && (g->k < 1 || g->k > 4096)) || (g->masks && (!g->mask_hw || (g->mask_elem != 1 &&
                                                                                      g->mask_elem != 2))))
            return fq_set_err(err, FQ_E_INVALID, "targets: bad arrays");
        if (g->mask_sampling != FQ_TGT_CENTER && g->mask_sampling != FQ_TGT_LEGACY)
            return fq_set_err(err, FQ_E_INVALID, "targets: unknown mask sampling %d", g->mask_sampling);
        if (g->max_boxes == 0 && (g->offsets[src->n] > 0 || g->keypoints))
            return fq_set_err(err, FQ_E_INVALID, "targets: max_boxes 0 (no box outputs) with boxes or keypoints");
        for (int64_t i = 0; i < src->n; i++)
            if (g->offsets[i + 1] < g->offsets[i] || g->offsets[i + 1] - g->offsets[i] > INT32_MAX)
                return fq_set_err(err, FQ_E_INVALID, "targets: offsets must be non-decreasing");
        if (fq_imgtask_inst_check(g, src->n, err) != FQ_OK)
            return err->code;
    }
    fq_imgtask *t = calloc(1, sizeof *t);
    if (!t)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    t->w = calloc((size_t)n_workers, sizeof *t->w);
    if (!t->w || pthread_mutex_init(&t->msg_mu, NULL) != 0) {
        free(t->w);
        free(t);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_workers; i++) {
        t->w[i].scratch = fq_img_scratch_new();
        t->w[i].extra = calloc(1, extra_bytes(src) + 1);
        if (!t->w[i].scratch || !t->w[i].extra) {
            t->n_workers = i;
            fq_imgtask_free(t);
            return fq_set_err(err, FQ_E_NOMEM, "out of memory allocating decoder scratch");
        }
    }
    t->spec = spec;
    t->src = *src;
    for (int k = 0; src->kind == FQ_SRC_READER && k < src->reader->n_extra; k++)
        t->extra_out[k] = src->extra_type[k] == FQ_NUM_AS_READ
                              ? src->reader->extra_sizes[k]
                              : src->reader->extra_sizes[k] / 8 * fq_num_size(src->extra_type[k]);
    t->n_out_extra = src->kind != FQ_SRC_READER ? 0
                     : src->reader->n_extra - (src->targets && src->targets->from_reader ? 5 : 0);
    t->rd_off = rd_off;
    if (src->targets) {
        t->has_tg = 1;
        t->tg = *src->targets;
        t->src.targets = &t->tg;
    }
    t->n_workers = n_workers;
    t->on_error = on_error;
    t->max_attempts = max_attempts < 1 ? 1 : max_attempts;
    t->with_index = with_index;
    t->row_bytes = fq_img_spec_row_bytes(spec);
    *out = t;
    return FQ_OK;
}

void fq_imgtask_free(fq_imgtask *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_workers; i++) {
        fq_img_scratch_free(t->w[i].scratch);
        free(t->w[i].buf);
        free(t->w[i].extra);
    }
    (void)pthread_mutex_destroy(&t->msg_mu);
    free(t->w);
    free(t);
}

int fq_imgtask_set_epoch(fq_imgtask *t, const int64_t *order, int64_t n_items, uint64_t seed,
                         uint64_t epoch, fq_err *err)
{
    if (n_items < 0 || (n_items > 0 && !order))
        return fq_set_err(err, FQ_E_INVALID, "bad epoch order");
    for (int64_t i = 0; i < n_items; i++)
        if (order[i] < 0 || order[i] >= t->src.n)
            return fq_set_err(err, FQ_E_INVALID, "order[%lld] = %lld is not a sample index", (long long)i,
                              (long long)order[i]);
    if (t->src.kind == FQ_SRC_READER && t->src.reader->set_order &&
        t->src.reader->set_order(t->src.reader->reader, order, n_items, err) != FQ_OK)
        return err ? err->code : FQ_E_SYS;
    t->order = order;
    t->n_items = n_items;
    t->seed = seed;
    t->epoch = epoch;
    return FQ_OK;
}

/* Read a whole file into the worker's buffer (fq_read_file), counting the bytes. */
static int read_file(fq_imgtask *t, fq_worker_buf *w, const char *path, size_t *len, fq_err *err)
{
    int rc = fq_read_file(path, &w->buf, &w->cap, len, err);
    if (rc == FQ_OK)
        atomic_fetch_add(&t->bytes_read, (int64_t)*len);
    return rc;
}

/* READER: read sample idx, decode it; errors name the sample and its location. */
static int produce_read(fq_imgtask *t, fq_worker_buf *w, int64_t idx, uint64_t seed, uint64_t epoch, void *out,
                        fq_img_explain *ex, fq_err *err)
{
    const fq_sample_reader *r = t->src.reader;
    const uint8_t *data = NULL;
    size_t len = 0;
    uint64_t nread = 0;
    fq_err e;
    fq_clear_err(&e);
    int rc = r->read(r->reader, idx, &w->buf, &w->cap, &data, &len, w->extra, &nread, &e);
    atomic_fetch_add(&t->bytes_read, (int64_t)nread);
    if (rc == FQ_OK && len == 0)
        rc = fq_set_err(&e, FQ_E_EMPTY, "empty image (0 bytes)");
    if (rc == FQ_OK)
        rc = convert_extras(t, w->extra, &e);
    if (rc == FQ_OK && t->has_tg) /* RandomIoUCrop draws from the boxes just read */
        fq_imgtask_plan_boxes(w->scratch, &t->tg, idx, w->extra + t->rd_off, r->extra_sizes + t->n_out_extra);
    if (rc == FQ_OK)
        rc = fq_img_process_encoded(t->spec, w->scratch, data, len, seed, epoch, (uint64_t)idx, out, ex, &e);
    if (rc != FQ_OK) {
        char where[FQ_ERR_MSG_LEN / 2];
        r->describe(r->reader, idx, where, sizeof where);
        fq_set_err(err, rc, "sample %lld, %s: %s", (long long)idx, where, e.msg);
        err->index = idx;
        return rc;
    }
    return FQ_OK;
}

/* Produce sample idx into out (image row); on failure the message names the sample. */
static int produce(fq_imgtask *t, int worker, int64_t idx, uint64_t seed, uint64_t epoch, void *out,
                   fq_img_explain *ex, fq_err *err)
{
    fq_worker_buf *w = &t->w[worker];
    int rc;
    fq_err e;
    fq_clear_err(&e);
    fq_imgtask_plan_boxes(w->scratch, t->has_tg ? &t->tg : NULL, idx, NULL, NULL); /* RandomIoUCrop's */
    w->processed = !(t->src.kind == FQ_SRC_BYTES && t->src.lens[idx] == 0); /* FILES: cleared below on a read error */
    switch (t->src.kind) {
    case FQ_SRC_FILES: {
        size_t len = 0;
        uint64_t t0 = fq_now_ns();
        rc = read_file(t, w, t->src.paths[idx], &len, &e);
        w->last_read_ns = fq_now_ns() - t0;
        w->processed = rc == FQ_OK;
        if (rc == FQ_OK)
            rc = fq_img_process_encoded(t->spec, w->scratch, w->buf, len, seed, epoch, (uint64_t)idx, out, ex, &e);
        if (rc != FQ_OK) {
            fq_set_err(err, rc, "sample %lld, file '%s': %s", (long long)idx, t->src.paths[idx], e.msg);
            err->index = idx;
            return rc;
        }
        return FQ_OK;
    }
    case FQ_SRC_READER:
        return produce_read(t, w, idx, seed, epoch, out, ex, err);
    case FQ_SRC_BYTES:
        if (t->src.lens[idx] == 0)
            rc = fq_set_err(&e, FQ_E_EMPTY, "empty buffer (0 bytes)");
        else
            rc = fq_img_process_encoded(t->spec, w->scratch, t->src.data[idx], t->src.lens[idx], seed, epoch,
                                        (uint64_t)idx, out, ex, &e);
        break;
    default: {
        const int32_t *s = t->src.shape + 3 * idx;
        rc = fq_img_process_array(t->spec, w->scratch, t->src.data[idx], s[0], s[1], s[2], t->src.strides[idx],
                                  seed, epoch, (uint64_t)idx, out, ex, &e);
        break;
    }
    }
    if (rc != FQ_OK) {
        fq_set_err(err, rc, "sample %lld: %s", (long long)idx, e.msg);
        err->index = idx;
        return rc;
    }
    return FQ_OK;
}

/* the row of the first targets output: after the image, the labels and the reader's */
static int first_target_row(const fq_imgtask *t)
{
    return 1 + (t->src.labels ? 1 : 0) + t->n_out_extra;
}

static int n_target_rows(const fq_imgtask_targets *g)
{
    return (g->max_boxes > 0 ? 3 : 0) + (g->with_image_info ? 1 : 0) + (g->keypoints ? 1 : 0) + (g->masks ? 1 : 0) +
           (g->inst_kind ? 1 : 0);
}

/* the targets of sample idx from its explain record into rows[b ...] */
static int write_targets(fq_imgtask *t, int worker, int64_t idx, const fq_img_explain *ex, uint8_t *const *rows,
                         int b, fq_err *e)
{
    const fq_imgtask_targets *g = &t->tg;
    int64_t off = g->from_reader ? 0 : g->offsets[idx], left = 0;
    int n = g->from_reader ? 0 : (int)(g->offsets[idx + 1] - off), count = 0, n_trunc = 0, rc;
    float *rb = NULL, *kp = NULL; /* rb, rcl: from_reader, this sample's boxes and classes */
    int32_t *rcl = NULL, *index = NULL;
    const float *kept = g->max_boxes > 0 ? (const float *)rows[b] : NULL; /* the boxes output (instance masks) */
    if (g->from_reader &&
        (rc = fq_imgtask_reader_boxes(t->w[worker].extra + t->rd_off, t->src.reader->extra_sizes + t->n_out_extra,
                                      g->normalized, ex->src_h, ex->src_w, &rb, &rcl, &n, &left, e)) != FQ_OK)
        return rc;
    if (!g->from_reader && g->normalized && g->max_boxes > 0 &&
        (rc = fq_imgtask_scaled_boxes(g, off, n, ex->src_h, ex->src_w, &rb, e)) != FQ_OK)
        return rc;
    if (g->keypoints || g->inst_kind) {
        index = malloc(sizeof(int32_t) * (size_t)(g->max_boxes + 1));
        kp = malloc(sizeof(float) * 3 * (size_t)(g->k + 1) * (size_t)(n + 1));
        if (!index || !kp) {
            free(index), free(kp), free(rb), free(rcl);
            return fq_set_err(e, FQ_E_NOMEM, "out of memory");
        }
    }
    rc = FQ_OK;
    if (g->max_boxes > 0) /* else no box outputs (no boxes: checked at create) */
        rc = fq_tgt_boxes(ex, rb ? rb : g->boxes ? g->boxes + 4 * off : NULL, rcl ? rcl : g->classes ? g->classes + off
                          : NULL, n, g->max_boxes, &g->opts, (float *)rows[b], (int32_t *)rows[b + 1], index, &count,
                          &n_trunc, e);
    free(rb), free(rcl);
    if (rc == FQ_OK && g->max_boxes > 0) {
        int32_t c32 = count;
        memcpy(rows[b + 2], &c32, sizeof c32);
        atomic_fetch_add(&t->boxes_truncated, left + n_trunc);
        b += 3;
    }
    if (rc == FQ_OK && g->with_image_info) {
        double v[8];
        float f[8];
        rc = fq_tgt_image_info(ex, v, e);
        for (int k = 0; k < 8; k++)
            f[k] = (float)v[k];
        if (rc == FQ_OK)
            memcpy(rows[b++], f, sizeof f);
    }
    if (rc == FQ_OK && g->keypoints) {
        const size_t per = sizeof(float) * 3 * (size_t)g->k;
        rc = fq_tgt_keypoints(ex, g->keypoints + 3 * (size_t)g->k * (size_t)off, n, g->k, g->flip_index, kp, e);
        if (rc == FQ_OK) {
            memset(rows[b], 0, per * (size_t)g->max_boxes);
            for (int i = 0; i < count; i++)
                memcpy(rows[b] + per * (size_t)i, (const uint8_t *)kp + per * (size_t)index[i], per);
            b++;
        }
    }
    free(kp);
    if (rc == FQ_OK && g->masks) {
        const int h = g->mask_hw[2 * idx], w = g->mask_hw[2 * idx + 1];
        rc = fq_tgt_mask(ex, g->masks[idx], h, w, g->mask_elem, (size_t)w * (size_t)g->mask_elem, g->mask_fill,
                         g->mask_sampling, rows[b++], e);
    }
    if (rc == FQ_OK && g->inst_kind) /* per-instance masks of the kept boxes: fq_imgtask_instance_masks.c */
        rc = fq_imgtask_inst_masks(g, idx, off, n, ex, index, kept, count, rows[b++], e);
    free(index);
    return rc;
}

/* produce() and, with targets, the sample's targets from its explain record */
static int produce_all(fq_imgtask *t, int worker, int64_t idx, uint8_t *const *rows, fq_err *err)
{
    fq_img_explain ex;
    int rc = produce(t, worker, idx, t->seed, t->epoch, rows[0], t->has_tg || t->src.with_sizes ? &ex : NULL, err);
    if (rc == FQ_OK && t->src.with_sizes && t->src.sizes_op >= ex.n_ops)
        rc = fq_set_err(err, FQ_E_INVALID, "sizes_op %d, but the chain has %d ops", t->src.sizes_op, ex.n_ops);
    else if (rc == FQ_OK && t->src.with_sizes) /* the input of the Pad to the capacity (fastq/batchpad.py) */
        t->w[worker].hw[0] = ex.ops[t->src.sizes_op].in_h, t->w[worker].hw[1] = ex.ops[t->src.sizes_op].in_w;
    if (rc != FQ_OK || !t->has_tg)
        return rc;
    fq_err e;
    fq_clear_err(&e);
    rc = write_targets(t, worker, idx, &ex, rows, first_target_row(t), &e);
    if (rc != FQ_OK) {
        char where[FQ_ERR_MSG_LEN / 2] = "";
        if (t->src.kind == FQ_SRC_READER)
            t->src.reader->describe(t->src.reader->reader, idx, where, sizeof where);
        fq_set_err(err, rc, "sample %lld%s%s: targets: %s", (long long)idx, where[0] ? ", " : "", where, e.msg);
        err->index = idx;
    }
    return rc;
}

static void write_extras(fq_imgtask *t, int worker, int64_t idx, uint8_t *const *rows)
{
    int b = 1;
    if (t->src.labels) {
        memcpy(rows[b], t->src.labels + (size_t)idx * t->src.label_bytes, t->src.label_bytes);
        b++;
    }
    if (t->src.kind == FQ_SRC_READER) { /* after the labels, as in the output spec */
        size_t off = 0;
        for (int k = 0; k < t->n_out_extra; k++, b++) {
            memcpy(rows[b], t->w[worker].extra + off, t->extra_out[k]); /* converted in place */
            off += t->src.reader->extra_sizes[k];
        }
    }
    if (t->has_tg) /* written by produce_all */
        b += n_target_rows(&t->tg);
    if (t->with_index)
        memcpy(rows[b], &idx, sizeof idx);
    if (t->src.with_sizes) /* the last output */
        memcpy(rows[b + (t->with_index ? 1 : 0)], t->w[worker].hw, sizeof t->w[worker].hw);
}

/* The replacement for sample idx at attempt a (1-based): another sample. */
static int64_t replacement(const fq_imgtask *t, int64_t idx, int attempt)
{
    int64_t n = t->src.n;
    if (n < 2)
        return idx;
    fq_rng r;
    fq_rng_init(&r, t->seed ^ UINT64_C(0x5EED5EED5EED5EED), t->epoch, (uint64_t)idx * 64u + (uint64_t)attempt);
    return (idx + 1 + (int64_t)fq_rng_next_below(&r, (uint64_t)(n - 1))) % n;
}

/* Add the sample just produced by `worker` to its stage accumulators. */
static void account(fq_worker_buf *w)
{
    fq_stage_times st = {0, 0, 0, 0, 0};
    if (w->processed)
        fq_img_scratch_last_times(w->scratch, &st);
    const uint64_t v[5] = {w->last_read_ns, st.decode_ns, st.ops_ns, st.write_ns, 1};
    for (int i = 0; i < 5; i++)
        atomic_fetch_add_explicit(&w->stage_ns[i], v[i], memory_order_relaxed);
    w->last_read_ns = 0;
}

void fq_imgtask_get_stage_times(struct fq_imgtask *t, fq_stage_times *out)
{
    uint64_t v[5] = {0, 0, 0, 0, 0};
    for (int k = 0; k < t->n_workers; k++)
        for (int i = 0; i < 5; i++)
            v[i] += atomic_load_explicit(&t->w[k].stage_ns[i], memory_order_relaxed);
    out->read_ns = v[0], out->decode_ns = v[1], out->ops_ns = v[2], out->write_ns = v[3], out->samples = v[4];
}

int fq_imgtask_run(void *ctx, int worker, int64_t item, uint8_t *const *rows, fq_err *err)
{
    fq_imgtask *t = ctx;
    if (item < 0 || item >= t->n_items || worker < 0 || worker >= t->n_workers)
        return fq_set_err(err, FQ_E_INVALID, "item %lld / worker %d out of range", (long long)item, worker);
    int64_t idx = t->order[item];
    int rc = produce_all(t, worker, idx, rows, err);
    account(&t->w[worker]);
    if (rc == FQ_OK) {
        write_extras(t, worker, idx, rows);
        return FQ_OK;
    }
    if (t->on_error != FQ_ON_ERROR_SKIP || rc == FQ_E_NOMEM) {
        atomic_fetch_add(&t->failed, 1);
        return rc;
    }
    int code = rc < FQ_IMGTASK_MAX_CODES ? rc : 0;
    atomic_fetch_add(&t->skipped, 1);
    atomic_fetch_add(&t->skipped_by_code[code], 1);
    if (pthread_mutex_lock(&t->msg_mu) == 0) {
        snprintf(t->last_skip[code], sizeof t->last_skip[code], "%s", err->msg);
        (void)pthread_mutex_unlock(&t->msg_mu);
    }
    fq_err first = *err;
    for (int a = 1; a <= t->max_attempts; a++) {
        int64_t alt = replacement(t, idx, a);
        fq_err e2;
        fq_clear_err(&e2);
        int rc2 = produce_all(t, worker, alt, rows, &e2);
        account(&t->w[worker]);
        if (rc2 == FQ_OK) {
            write_extras(t, worker, alt, rows);
            fq_clear_err(err);
            return FQ_OK;
        }
    }
    atomic_fetch_add(&t->failed, 1);
    return fq_set_err(err, first.code, "%.400s (and %d replacement samples failed too)", first.msg, t->max_attempts);
}

int fq_imgtask_sample(fq_imgtask *t, int worker, int64_t index, uint64_t seed, uint64_t epoch, void *out,
                      fq_img_explain *ex, fq_err *err)
{
    if (index < 0 || index >= t->src.n)
        return fq_set_err(err, FQ_E_INVALID, "sample index %lld out of range [0, %lld)", (long long)index,
                          (long long)t->src.n);
    if (worker < 0 || worker >= t->n_workers)
        return fq_set_err(err, FQ_E_INVALID, "worker %d out of range", worker);
    return produce(t, worker, index, seed, epoch, out, ex, err);
}

void fq_imgtask_get_stats(fq_imgtask *t, fq_imgtask_stats *st)
{
    memset(st, 0, sizeof *st);
    st->skipped = atomic_load(&t->skipped);
    for (int i = 0; i < FQ_IMGTASK_MAX_CODES; i++)
        st->skipped_by_code[i] = atomic_load(&t->skipped_by_code[i]);
    st->failed = atomic_load(&t->failed);
    st->bytes_read = atomic_load(&t->bytes_read);
    st->boxes_truncated = atomic_load(&t->boxes_truncated);
}

void fq_imgtask_last_skip(fq_imgtask *t, int code, char *msg, size_t len)
{
    if (!msg || !len)
        return;
    msg[0] = '\0';
    if (code < 0 || code >= FQ_IMGTASK_MAX_CODES || pthread_mutex_lock(&t->msg_mu) != 0)
        return;
    snprintf(msg, len, "%s", t->last_skip[code]);
    (void)pthread_mutex_unlock(&t->msg_mu);
}
