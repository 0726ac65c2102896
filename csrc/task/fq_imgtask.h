/* fq_imgtask.h - the native sample task of an image pipeline.
 *
 * Glue between the worker pool (fq_pool) and the per-sample image path
 * (fq_image): for pool item i it takes sample order[i] of the source (a file,
 * an encoded buffer or a decoded array), reads it, runs the op chain and
 * writes the result straight into the slot row; the label (if any) goes to
 * the next output and the sample index (if asked) to the one after.
 *
 * Bad samples: with FQ_ON_ERROR_RAISE the row is committed with the error
 * (code + message naming the file/sample), which the consumer raises when it
 * reaches that batch.  With FQ_ON_ERROR_SKIP the sample is replaced by another
 * sample chosen deterministically from (seed, epoch, index, attempt); the
 * batch keeps its shape and the skip is counted per reason.
 *
 * Thread safety: the task (fq_imgtask) is shared by all workers; each worker
 * uses only its own scratch (indexed by worker id).  fq_imgtask_set_epoch()
 * must not be called while a pool runs on the task.  The source arrays
 * (paths, buffers, pixels, labels) and the order array are borrowed: the
 * caller keeps them alive until the pool is joined.
 */
#ifndef FQ_IMGTASK_H
#define FQ_IMGTASK_H

#include "core/fq_common.h"
#include "image/fq_image.h"
#include "image/fq_image_targets.h"
#include "task/fq_sample_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

enum fq_src_kind { FQ_SRC_FILES = 0, FQ_SRC_BYTES = 1, FQ_SRC_ARRAYS = 2, FQ_SRC_READER = 3 };
enum fq_on_error { FQ_ON_ERROR_RAISE = 0, FQ_ON_ERROR_SKIP = 1 };

#define FQ_IMGTASK_MAX_CODES 16
#define FQ_IMGTASK_MAX_EXTRA FQ_READER_MAX_EXTRA

/* READER: the type an extra output is delivered as (fq_imgtask_source.extra_type).
 * FQ_NUM_AS_READ copies the reader's bytes; any other type needs an output of int64
 * values (extra_sizes[k] a multiple of 8), which each worker converts to that type
 * after reading the sample.  Integers must fit exactly; floats take the nearest
 * value.  A value that does not fit fails the sample (FQ_E_DECODE, naming the
 * record), which the on_error policy then handles like any bad sample. */
enum fq_num_type {
    FQ_NUM_AS_READ = 0,
    FQ_NUM_I8, FQ_NUM_I16, FQ_NUM_I32, FQ_NUM_I64,
    FQ_NUM_U8, FQ_NUM_U16, FQ_NUM_U32, FQ_NUM_U64,
    FQ_NUM_F32, FQ_NUM_F64,
    FQ_NUM_COUNT
};

/* Bytes per value of an fq_num_type (0 for FQ_NUM_AS_READ or an unknown type) and
 * its numpy name ("int8", ...; "" likewise). */
size_t fq_num_size(int type);
const char *fq_num_name(int type);

/* Dense targets that follow each sample's draws (image/fq_image_targets.h): sample i's
 * boxes are rows offsets[i] .. offsets[i+1] of boxes (xyxy float32, source pixels) with
 * classes (int32).  Outputs after the reader's (before the index): boxes max_boxes x 4
 * float32, classes max_boxes int32, num_boxes int32 (none of the three when max_boxes is
 * 0: masks only, which needs no boxes and no keypoints), then image_info 4 x 2 float32 when
 * with_image_info, keypoints when given, the mask when given.  A sample whose targets fail (bad box, too many boxes without
 * truncation, an op without a target rule) fails like a bad image (on_error applies). */
typedef struct fq_imgtask_targets {
    const float *boxes;
    const int32_t *classes;
    const int64_t *offsets; /* n + 1, non-decreasing */
    int max_boxes;
    fq_tgt_box_opts opts;
    int with_image_info;
    /* keypoints of each box (rows aligned with boxes: n_boxes x k x 3 float32), NULL: none;
     * output max_boxes x k x 3 float32 of the kept boxes (zeros after the count) */
    const float *keypoints;
    int k;
    const int32_t *flip_index; /* k entries or NULL */
    /* one mask per sample (mask_hw[2 i], mask_hw[2 i + 1]: its h, w, the source's size),
     * elements of mask_elem bytes (1 or 2), rows contiguous; NULL: none.  Output out_h x
     * out_w of that type; outside the image mask_fill. */
    const void *const *masks;
    const int32_t *mask_hw;
    int mask_elem;
    unsigned mask_fill;
    /* how the mask's and the bitmap instances' resizes sample: FQ_TGT_CENTER (0, the
     * image's pixel centres) or FQ_TGT_LEGACY (OpenCV's INTER_NEAREST); fq_image_targets.h */
    int mask_sampling;
    /* READER sources only (0: off): the sample's boxes come from the reader with each read
     * instead of boxes / classes / offsets (NULL then; no keypoints, no masks).  The LAST five
     * reader extras are VARLEN features (records/fq_example.h:
     * int64 n, then the values) xmin, ymin, xmax, ymax (float32) and the class (int64); they are
     * read into the worker's extra buffer (valid until that worker's next read, touched only by
     * that worker) and are not outputs.  The five counts must agree and every class fit int32;
     * normalized: coordinates are in [0, 1] of the image and are multiplied by the SOURCE
     * width / height (the explain record's src_w / src_h) in float32 before the ops' rules, as
     * fastq.annotations.load_odapi does.  Boxes the reader left out (more than its capacity,
     * FQ_TFR_TRUNCATE) are counted in fq_imgtask_stats.boxes_truncated. */
    int from_reader;
    int normalized; /* also without from_reader: the boxes array holds fractions (fq_imgtask_scaled_boxes) */
    /* per-instance masks of each box (fq_imgtask_instance_masks.c), rows aligned with boxes; NULL
     * inst_kind: none.  Output max_boxes x inst_out_h x inst_out_w uint8 (0 / 1) of the kept
     * boxes, gathered by their index like keypoints, zeros after the count; after the mask.
     * Box j (global row): inst_kind[j] FQ_INST_NONE (an empty mask), FQ_INST_POLYGONS (rings
     * inst_poly[j] .. inst_poly[j + 1], ring r = points inst_ring[r] .. inst_ring[r + 1] of
     * inst_xy, x, y float32 source pixels) or FQ_INST_RLE (runs inst_rle[j] .. inst_rle[j + 1]
     * of inst_counts, an inst_hw[2 i] x inst_hw[2 i + 1] mask of sample i, 0 x 0: the
     * source's size).  Every instance of a sample is checked, the kept ones rasterized. */
    const uint8_t *inst_kind;
    const int64_t *inst_poly;
    const int64_t *inst_ring;
    const float *inst_xy;
    const int64_t *inst_rle;
    const uint32_t *inst_counts;
    const int32_t *inst_hw;
    int inst_out_h, inst_out_w;
    /* 0: masks at the output size; else each kept instance's mask in its output box at
     * inst_mask_h x inst_mask_w (Mask R-CNN targets): polygons moved into the box's frame
     * (fq_tgt_polygons_box), bitmaps sampled (fq_tgt_mask_box); the row is max_boxes x
     * inst_mask_h x inst_mask_w */
    int inst_mask_h, inst_mask_w;
} fq_imgtask_targets;

enum fq_inst_kind { FQ_INST_NONE = 0, FQ_INST_POLYGONS = 1, FQ_INST_RLE = 2 };

typedef struct fq_imgtask_source {
    int kind;                   /* FQ_SRC_* */
    int64_t n;                  /* samples in the source */
    const char *const *paths;   /* FILES: NUL-terminated paths */
    const uint8_t *const *data; /* BYTES: encoded buffers; ARRAYS: pixel data */
    const size_t *lens;         /* BYTES: buffer lengths */
    const int32_t *shape;       /* ARRAYS: n x 3 (h, w, c) */
    const size_t *strides;      /* ARRAYS: row stride in bytes */
    const uint8_t *labels;      /* n x label_bytes, or NULL */
    size_t label_bytes;
    const fq_sample_reader *reader; /* READER (borrowed); its outputs follow `labels` (if any) */
    int extra_type[FQ_IMGTASK_MAX_EXTRA]; /* READER: enum fq_num_type of each extra output (0: as read) */
    const fq_imgtask_targets *targets;    /* NULL: none; copied at create, its arrays borrowed */
    /* Pipeline(pad="batch") (fastq/batchpad.py): with_sizes 1 adds one more output after every
     * other (after the index), int32 (h, w): the sample's valid size, the input size of op record
     * sizes_op (0 .. FQ_IMG_MAX_OPS - 1) of its explain record (the Pad to the slot's capacity
     * that fastq appends to the chain).  0: no such output. */
    int with_sizes;
    int sizes_op;
} fq_imgtask_source;

typedef struct fq_imgtask fq_imgtask;

int fq_imgtask_create(const fq_img_spec *spec, const fq_imgtask_source *src, int n_workers,
                      int on_error, int max_attempts, int with_index, fq_imgtask **out, fq_err *err);
void fq_imgtask_free(fq_imgtask *t);

/* The next run: pool item i is sample order[i] (i < n_items). */
int fq_imgtask_set_epoch(fq_imgtask *t, const int64_t *order, int64_t n_items, uint64_t seed,
                         uint64_t epoch, fq_err *err);

/* fq_task_fn: ctx is the fq_imgtask. */
int fq_imgtask_run(void *ctx, int worker, int64_t item, uint8_t *const *rows, fq_err *err);

/* Produce sample `index` of the source for (seed, epoch) into out (row bytes
 * of the spec) with its explain record, on the calling thread (uses worker
 * scratch slot `worker`, which must not be in use by a running pool). */
int fq_imgtask_sample(fq_imgtask *t, int worker, int64_t index, uint64_t seed, uint64_t epoch, void *out,
                      fq_img_explain *ex, fq_err *err);

typedef struct fq_imgtask_stats {
    int64_t skipped;                          /* samples replaced (SKIP policy) */
    int64_t skipped_by_code[FQ_IMGTASK_MAX_CODES];
    int64_t failed;                           /* samples reported as errors (RAISE, or SKIP out of attempts) */
    int64_t bytes_read;                       /* file bytes read */
    int64_t boxes_truncated;                  /* targets: boxes left out by truncation (max_boxes, reader) */
} fq_imgtask_stats;
void fq_imgtask_get_stats(fq_imgtask *t, fq_imgtask_stats *st);
/* Stage times (core/fq_stage_times.h) summed over all workers since the task was created. */
void fq_imgtask_get_stage_times(fq_imgtask *t, fq_stage_times *out);
/* Last skip message for a code ("" if none): copied into msg. */
void fq_imgtask_last_skip(fq_imgtask *t, int code, char *msg, size_t len);

/* Internal (fq_imgtask_reader_boxes.c): the boxes of a from_reader sample.  block: its five VARLEN
 * extras (sizes[5] bytes each); boxes xyxy (denormalized with src_h, src_w when normalized) and
 * classes malloc'd (the caller frees both), *n_out of them, *left_out the ones the reader did
 * not keep.  FQ_E_DECODE: counts that differ, a class beyond int32. */
int fq_imgtask_reader_boxes(const uint8_t *block, const size_t *sizes, int normalized, int src_h, int src_w,
                            float **boxes, int32_t **classes, int *n_out, int64_t *left_out, fq_err *err);

/* Internal: checks of a from_reader source at create; *block_off: where the five start in
 * the worker's extra buffer. */
int fq_imgtask_reader_boxes_check(const fq_imgtask_source *src, size_t *block_off, fq_err *err);

/* Internal (fq_imgtask_boxes.c): point the worker's scratch at sample idx's boxes, which
 * RandomIoUCrop's plan draws from (fq_img_scratch_set_boxes): g NULL (no targets): none; the
 * targets' arrays; from_reader: the five lists of block (as fq_imgtask_reader_boxes; block
 * NULL: not read yet, none), at most the reader's capacity, normalized as g says. */
void fq_imgtask_plan_boxes(fq_img_scratch *s, const fq_imgtask_targets *g, int64_t idx, const uint8_t *block,
                           const size_t *sizes);
/* Internal (fq_imgtask_boxes.c): in-memory boxes given as fractions of the source image
 * (g->normalized, not from_reader): rows off .. off + n - 1 times the source width / height
 * (float64 product rounded to float32, as fq_imgtask_reader_boxes) into *out, malloc'd (the
 * caller frees it).  FQ_E_NOMEM. */
int fq_imgtask_scaled_boxes(const fq_imgtask_targets *g, int64_t off, int n, int src_h, int src_w, float **out,
                            fq_err *err);
/* Internal (fq_imgtask_instance_masks.c): the instance masks of sample idx (its n boxes start at
 * global row off) into row (max_boxes planes): the kept boxes' (index[0 .. count - 1],
 * kept_boxes: their output boxes, count x 4).
 * Errors name the instance ("instance 1: ..."). */
int fq_imgtask_inst_masks(const fq_imgtask_targets *g, int64_t idx, int64_t off, int n, const fq_img_explain *ex,
                          const int32_t *index, const float *kept_boxes, int count, uint8_t *row, fq_err *err);
/* Internal: checks of the instance arrays at create (n samples). */
int fq_imgtask_inst_check(const fq_imgtask_targets *g, int64_t n, fq_err *err);

/* Deterministic permutation of 0..n-1 (Fisher-Yates on the (seed, epoch) stream). */
void fq_permutation(uint64_t seed, uint64_t epoch, int64_t *out, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
