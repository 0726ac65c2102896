/* fq_tf_feed.h - what passes between fastq's Python layer (fastq/tf/__init__.py) and the dataset op
 * FastqDataset (fq_tf_dataset.cc) of the TensorFlow kernel library.
 *
 * The op reads a Pipeline's ring in C++: per batch it takes the next slot of its epoch's run
 * (fq_ring_capi.h), checks the slot's error record, applies what the Pipeline's own consumer
 * applies (MixUp/CutMix, pad="batch" repacking: fq_capi.h) and hands TensorFlow tensors that
 * alias the slot, with no Python and no GIL.  Python runs once per epoch, through three
 * callbacks the loader installs with fastq_tf_feed_set_callbacks():
 *
 *   begin  at an iterator's first element: claims the pipeline for this iteration (one at a
 *          time), resumes a checkpointed position if asked, starts the epoch's producers and
 *          fills one fq_tf_epoch (below) - including a ring reference the kernel then owns;
 *   end    when the epoch is over (all batches taken, iterator destroyed mid-epoch, pipeline
 *          closed): stops the producers, releases the claim;
 *   fail   when a batch carries an error, the consumer stalls or the run was superseded:
 *          builds the exception the Python path would raise (its class and message, the
 *          sample's file), ends the epoch and returns a TensorFlow error code + message;
 *   peek   when an iterator that has not begun its epoch is checkpointed: the (epoch,
 *          position) its first element would begin at (the pipeline's next epoch and pending
 *          resume position), so that the checkpoint names that point and not "whatever epoch
 *          comes next" (which is another epoch once batches were taken after the save).
 *
 * The callbacks are ctypes functions: they take the GIL themselves, from the TF thread that
 * calls them.  fastq unsets them at interpreter exit; the kernel then ends epochs natively
 * (cancels the run) and refuses to begin new ones.
 *
 * Layout: plain C, fixed-size fields; fastq/tf/__init__.py mirrors it with ctypes and checks the
 * sizes and offsets the library reports (fastq_tf_feed_layout) before the first use.
 */
#ifndef FQ_TF_FEED_H
#define FQ_TF_FEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_TF_MAX_OUTPUTS 16
#define FQ_TF_MAX_DIMS 8

/* One element component (tensor) of the dataset. */
typedef struct fq_tf_output {
    int32_t block;      /* ring block that holds it */
    int32_t dtype;      /* TensorFlow DataType enum value (tf.DType.as_datatype_enum) */
    int32_t ndim;       /* per-sample dimensions (<= FQ_TF_MAX_DIMS) */
    int32_t pad_hdim;   /* pad="batch": index in dims of the height (the width follows); -1: none */
    int64_t dims[FQ_TF_MAX_DIMS]; /* per-sample shape in the ring (pad: the capacity) */
    int64_t pad_planes; /* pad: planes per sample before the height (product of dims[:pad_hdim]) */
    int64_t pad_px;     /* pad: bytes per pixel (product of dims after the width, x itemsize) */
} fq_tf_output;

/* One epoch (run of the ring) as begin() hands it to the kernel.  An empty epoch (a source
 * with no samples) comes back with ring NULL: the iteration ends at once. */
typedef struct fq_tf_epoch {
    uint64_t struct_size;      /* sizeof(fq_tf_epoch) as Python laid it out */
    void *ring;                /* fq_ring *: one reference, owned by the kernel from now on */
    int64_t run_id;            /* the ring run of this epoch (fq_ring_next_run) */
    int64_t epoch;             /* the pipeline epoch */
    int64_t position;          /* batches of the epoch already taken before this iteration (a resume) */
    int64_t stall_timeout_ns;  /* StalledError after this long with every slot leased; < 0: never */
    int64_t *position_out;     /* the kernel stores the position here after each batch (state_dict reads it) */
    int32_t n_outputs;
    int32_t pinned;            /* 1: the arena is registered as pinned host memory */
    /* pad="batch" */
    int32_t pad;
    int32_t pad_sizes_block;   /* the image_sizes output: (B, 2) int32 valid (h, w) per row */
    int32_t pad_multiple;
    int32_t pad_cap_h, pad_cap_w;
    /* mix=MixUpCutMix (fq_batch_mix.h's fq_mix_params, field by field) */
    int32_t mix;
    double mix_mixup_alpha, mix_cutmix_alpha, mix_switch_prob, mix_prob, mix_label_smoothing;
    double mix_cutmix_min, mix_cutmix_max;
    int64_t mix_num_classes;
    int32_t mix_mode, mix_correct_lam, mix_minmax;
    int32_t mix_dtype, mix_layout, mix_ltype; /* enum fq_mix_dtype / fq_mix_layout / fq_mix_ltype */
    int32_t mix_image_block, mix_label_block, mix_soft_block;
    int32_t mix_h, mix_w, mix_c;
    uint64_t mix_seed;
    fq_tf_output out[FQ_TF_MAX_OUTPUTS];
} fq_tf_epoch;

/* Why an epoch ended (end callback). */
enum fq_tf_end_reason { FQ_TF_END_DONE = 0, FQ_TF_END_ABANDONED = 1, FQ_TF_END_CLOSED = 2 };
/* What failed (fail callback). */
enum fq_tf_fail_kind {
    FQ_TF_FAIL_SAMPLE = 0, /* the batch's slot carries a failed sample: code, index, detail from its record */
    FQ_TF_FAIL_MIX = 1,    /* MixUp/CutMix refused the batch: index = its row (-1: none), detail */
    FQ_TF_FAIL_RING = 2,   /* a ring condition: FQ_E_STALLED, FQ_E_CANCELLED (superseded), other codes */
    FQ_TF_FAIL_COUNT = 3   /* the iteration yielded another number of batches than the dataset's
                            * cardinality says (minus a resumed position): index = the number,
                            * detail = the expected number in decimal */
};

/* 0, or a TensorFlow error code (absl::StatusCode) and a message in msg. */
typedef int (*fq_tf_begin_fn)(int64_t feed_id, int64_t epoch, int64_t position, fq_tf_epoch *ep, int64_t *token,
                              char *msg, size_t msglen);
typedef void (*fq_tf_end_fn)(int64_t token, int reason, int64_t position);
/* Returns the TensorFlow error code (0: not an error - the pipeline was closed meanwhile -
 * and the iteration ends); the epoch is over when it returns. */
typedef int (*fq_tf_fail_fn)(int64_t token, int kind, int code, int64_t index, const char *detail, char *msg,
                             size_t msglen);
/* 0 and *epoch, *position; or a TensorFlow error code and a message in msg (a closed pipeline,
 * a source that cannot be rewound). */
typedef int (*fq_tf_peek_fn)(int64_t feed_id, int64_t *epoch, int64_t *position, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
