/* fq_image.h - the per-sample image path: decode -> augment -> normalize/layout/dtype.
 *
 * C API (no Python.h), implemented in C++17 (fq_image*.cpp) with libjpeg-turbo's
 * libjpeg API and OpenCV.  Thread safety:
 *   - fq_img_spec is immutable after fq_img_spec_create(): share it between threads.
 *   - fq_img_scratch holds per-thread reusable buffers and a libjpeg decoder: one per
 *     thread, never used by two threads at once.
 * Determinism: every random parameter of a sample is a pure function of
 * (seed, epoch, index, source image size); the output bytes do not depend on the
 * thread, the scratch object or what ran before.
 * Nothing here calls exit(), prints, or touches global state other than OpenCV's
 * own (see fq_img_set_opencv_threads).
 *
 * The exact semantics of every op are written down in docs/ops.md.
 */
#ifndef FQ_IMAGE_H
#define FQ_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/fq_common.h"
#include "core/fq_stage_times.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops ---------------------------------------------------------------- */

/* Op kinds are 1 .. fq_img_op_count(), each written in its op's record (the one place an
 * op is declared in C: its family's array, assembled by image/api/fq_image_op_table.cpp).  The names below are
 * those of the first ten kinds, for C callers; any kind is found by its name with
 * fq_img_op_kind(), and its parameters are described by fq_img_op_desc(). */
enum fq_op_kind {
    FQ_OP_NONE = 0,
    FQ_OP_RANDOM_RESIZED_CROP = 1,
    FQ_OP_RESIZE = 2,
    FQ_OP_CENTER_CROP = 3,
    FQ_OP_RANDOM_CROP = 4,
    FQ_OP_HFLIP = 5,
    FQ_OP_VFLIP = 6,
    FQ_OP_COLOR_JITTER = 7,
    FQ_OP_RANDOM_AFFINE = 8,
    FQ_OP_GRAYSCALE = 9,
    FQ_OP_NORMALIZE = 10 /* must be the last op; fused into the output write */
};

/* Parameters of each op, by name.  Every field is a double (integer-valued where the
 * name says so: sizes, paddings, flags, enum values) laid out from the start of
 * fq_op.raw, the flat array of 16 doubles that fastq._native._image.FQ_OP_DTYPE mirrors ("f");
 * the C core validates every field (integers, ranges) in fq_img_spec_create.  The
 * structs below are those of the first ten kinds (C callers fill them by name); an
 * op's field descriptor (fq_img_op_desc) says the same for every kind, and is what
 * the Python side packs by. */
typedef struct fq_op_rrc {       /* FQ_OP_RANDOM_RESIZED_CROP */
    double out_h, out_w;         /* output size */
    double scale_lo, scale_hi;   /* area fraction range, 0 < lo <= hi <= 1 */
    double ratio_lo, ratio_hi;   /* aspect (w/h) range, 0 < lo <= hi */
    double interp;               /* FQ_INTERP_* */
    double max_attempts;         /* tries of the sampler, 1 .. 1000; 0 means 10 (torchvision's) */
} fq_op_rrc;

typedef struct fq_op_resize {    /* FQ_OP_RESIZE */
    double out_h, out_w;         /* exact size (> 0) when shorter_side == 0, else 0, 0 */
    double shorter_side;         /* > 0: the shorter side becomes this, aspect kept */
    double interp;               /* FQ_INTERP_* */
} fq_op_resize;

typedef struct fq_op_center_crop { /* FQ_OP_CENTER_CROP: zero padding when the image is smaller */
    double out_h, out_w;
} fq_op_center_crop;

typedef struct fq_op_random_crop { /* FQ_OP_RANDOM_CROP */
    double out_h, out_w;
    double pad_left, pad_top, pad_right, pad_bottom;
    double pad_if_needed;        /* 0 or 1 */
    double border;               /* FQ_BORDER_* */
    double fill[3];              /* per channel, for FQ_BORDER_CONSTANT */
} fq_op_random_crop;

typedef struct fq_op_prob {      /* FQ_OP_HFLIP, FQ_OP_VFLIP, FQ_OP_GRAYSCALE */
    double p;                    /* probability of applying the op */
} fq_op_prob;

enum fq_jitter { FQ_JITTER_BRIGHTNESS = 0, FQ_JITTER_CONTRAST = 1, FQ_JITTER_SATURATION = 2, FQ_JITTER_HUE = 3 };

typedef struct fq_op_color_jitter { /* FQ_OP_COLOR_JITTER, indexed by FQ_JITTER_* */
    double range[4][2];          /* factor ranges; hue: fraction of a full turn in [-0.5, 0.5] */
    double enabled[4];           /* 0 / 1 */
} fq_op_color_jitter;

typedef struct fq_op_random_affine { /* FQ_OP_RANDOM_AFFINE */
    double degrees[2];           /* range, counter-clockwise positive */
    double translate[2];         /* max translation: fraction of width (x), of height (y) */
    double scale[2];             /* range */
    double shear_x[2], shear_y[2]; /* ranges, degrees */
    double border;               /* FQ_BORDER_* */
    double fill[3];              /* per channel */
    double interp;               /* nearest / bilinear / bicubic / lanczos */
} fq_op_random_affine;

typedef struct fq_op_normalize { /* FQ_OP_NORMALIZE: out = (x/255 - mean[c]) / std[c] */
    double mean[3], std[3];
} fq_op_normalize;

/* One op of a chain: kind (the tag) + the parameters of that kind.  Layout is fixed
 * (136 bytes: int kind, 4 bytes padding, 16 doubles) so that the Python side can build
 * an array of them with a numpy structured dtype (fastq._native._image.FQ_OP_DTYPE); raw is
 * that flat view, for packing and fuzzing only, never for reading a parameter. */
typedef struct fq_op {
    int kind; /* FQ_OP_* */
    union {
        fq_op_rrc rrc;
        fq_op_resize resize;
        fq_op_center_crop center_crop;
        fq_op_random_crop random_crop;
        fq_op_prob hflip, vflip, grayscale;
        fq_op_color_jitter color_jitter;
        fq_op_random_affine random_affine;
        fq_op_normalize normalize;
        double raw[16];
    };
} fq_op;

/* ---- op descriptors: what each kind's parameters are, for bindings ------- */

enum fq_op_field_type { FQ_FIELD_F64 = 1 /* double */ };

/* One parameter field of an op: `name` (static string), a double scalar (ndim 0) or
 * array of shape[0] (ndim 1) or shape[0] x shape[1] (ndim 2), row-major, at byte
 * `offset` from the start of fq_op.raw. */
typedef struct fq_op_field {
    const char *name;
    int type;     /* FQ_FIELD_* */
    int ndim;     /* 0, 1 or 2 */
    int shape[2]; /* unused dims 0 */
    size_t offset;
} fq_op_field;

/* The parameter layout of one op kind: its fields cover params_size bytes
 * (<= sizeof fq_op.raw) in order, without gaps.  Static data: share freely. */
typedef struct fq_op_desc {
    int kind;
    const char *name;   /* the Python class name, e.g. "RandomResizedCrop" */
    size_t params_size; /* bytes of its parameter struct */
    int n_fields;
    const fq_op_field *fields;
} fq_op_desc;

/* Number of op kinds (kinds are 1 .. fq_img_op_count()). */
int fq_img_op_count(void);
/* The descriptor of kind, NULL outside 1 .. fq_img_op_count(). */
const fq_op_desc *fq_img_op_desc(int kind);
/* The kind named `name` (fq_img_op_name's spelling), or FQ_OP_NONE. */
int fq_img_op_kind(const char *name);

/* 0 .. 4: the same numbers as OpenCV's INTER_* flags (cv::resize, cv::warpAffine).
 * FQ_INTERP_PIL_*: Pillow's 8-bit Image.resize, bit for bit (Resampling.NEAREST, BILINEAR,
 * BICUBIC, LANCZOS, BOX, HAMMING; fq_image_resize_pil.cpp): resizes only (Resize,
 * RandomResizedCrop, ResizeShortestEdge, ScaleJitter, TensorpackCrop), never a warp, and a
 * JPEG op 0 with one of them is never DCT-scaled. */
enum fq_interp {
    FQ_INTERP_NEAREST = 0,
    FQ_INTERP_BILINEAR = 1,
    FQ_INTERP_BICUBIC = 2,
    FQ_INTERP_AREA = 3,
    FQ_INTERP_LANCZOS = 4,
    FQ_INTERP_PIL_NEAREST = 5,
    FQ_INTERP_PIL_BILINEAR = 6,
    FQ_INTERP_PIL_BICUBIC = 7,
    FQ_INTERP_PIL_LANCZOS = 8,
    FQ_INTERP_PIL_BOX = 9,
    FQ_INTERP_PIL_HAMMING = 10,
    FQ_INTERP_END
};

enum fq_border {
    FQ_BORDER_CONSTANT = 0,  /* fill value */
    FQ_BORDER_REPLICATE = 1, /* aaa|abc|ccc  (torchvision "edge") */
    FQ_BORDER_REFLECT = 2,   /* cb|abc|ba    (torchvision "reflect", cv BORDER_REFLECT_101) */
    FQ_BORDER_SYMMETRIC = 3, /* ba|abc|cb    (torchvision "symmetric", cv BORDER_REFLECT) */
    FQ_BORDER_END
};

/* ---- output format ------------------------------------------------------ */

/* FQ_DT_FLOAT16 is IEEE binary16; FQ_DT_BFLOAT16 is the top 16 bits of a float32 (rounded to
 * nearest even from the float32 value).  Both are written from a 256-entry table per channel. */
enum fq_dtype { FQ_DT_UINT8 = 0, FQ_DT_FLOAT32 = 1, FQ_DT_FLOAT16 = 2, FQ_DT_BFLOAT16 = 3, FQ_DT_END };
enum fq_layout { FQ_LAYOUT_HWC = 0, FQ_LAYOUT_CHW = 1 };

/* The largest size, crop or padding an op may ask for, per side. */
#define FQ_IMG_MAX_SIDE 32768

/* Default decompression-bomb guard: 2^26 = 67,108,864 pixels (e.g. 8192 x 8192). */
#define FQ_IMG_DEFAULT_MAX_PIXELS ((int64_t)1 << 26)

typedef struct fq_img_format {
    int channels;       /* 1 (gray) or 3 (RGB) */
    int dtype;          /* FQ_DT_* ; float outputs are x/255 unless Normalize says otherwise */
    int layout;         /* FQ_LAYOUT_* */
    int64_t max_pixels; /* encoded images whose header declares more pixels fail with
                           FQ_E_TOO_LARGE before any pixel buffer is allocated; <= 0: default */
    int dct_scaling;    /* allow JPEG DCT-domain downscaling (approximate; see docs/ops.md) */
    int channel_order;  /* FQ_ORDER_RGB (0, also for channels == 1) or FQ_ORDER_BGR: an index
                           permutation of the output channel in the final write; Normalize's
                           mean/std (given in RGB order) follow their channel */
    int idct;           /* the JPEG decoder's inverse DCT at full scale: FQ_IDCT_ACCURATE (0,
                           libjpeg's JDCT_ISLOW, what PIL and OpenCV decode with) or
                           FQ_IDCT_FAST (JDCT_IFAST, tf.io.decode_jpeg's default); appended
                           last: a zeroed struct keeps the accurate transform */
} fq_img_format;

/* fq_img_format.idct */
enum fq_idct { FQ_IDCT_ACCURATE = 0, FQ_IDCT_FAST = 1 };

/* Output channel order of fq_img_format.channel_order. */
enum fq_channel_order { FQ_ORDER_RGB = 0, FQ_ORDER_BGR = 1 };

typedef struct fq_img_spec fq_img_spec;
struct fq_custom_rng; /* image/fastq_custom_op.h */

/* Validate the chain and build an immutable spec.  Errors: FQ_E_INVALID (with the
 * op index and the reason; besides the chain rules: the format's fields, and one
 * RandomErasing value for channels == 1), FQ_E_NOMEM. */
int fq_img_spec_create(const fq_op *ops, int n_ops, const fq_img_format *fmt, fq_img_spec **out,
                       fq_err *err);
void fq_img_spec_free(fq_img_spec *spec);
/* Output shape of one sample as h, w, c (whatever the layout). */
int fq_img_spec_out_shape(const fq_img_spec *spec, int *h, int *w, int *c);
/* Bytes of one output sample (h * w * c * dtype size). */
size_t fq_img_spec_row_bytes(const fq_img_spec *spec);

/* ---- per-thread scratch ------------------------------------------------- */

typedef struct fq_img_scratch fq_img_scratch;
fq_img_scratch *fq_img_scratch_new(void); /* NULL on allocation failure */
void fq_img_scratch_free(fq_img_scratch *s);
/* The decode/ops/write times of the scratch's last fq_img_process_* call
 * (read_ns and samples are 0).  Same thread as the call. */
void fq_img_scratch_last_times(const fq_img_scratch *s, fq_stage_times *out);

/* The boxes of the samples this scratch processes next, for the ops that draw from them
 * (RandomIoUCrop, fq_image_iou_crop.cpp): n boxes, box k = (x0[k * stride], y0[k * stride],
 * x1[k * stride], y1[k * stride]), float32 xyxy in source pixels, or (normalized) fractions
 * of the source width / height, each taken as (float)((double)v * size).  Borrowed until
 * the next call.  n < 0: none given (a chain with RandomIoUCrop then fails, FQ_E_INVALID);
 * n == 0: a sample without boxes. */
void fq_img_scratch_set_boxes(fq_img_scratch *s, const float *x0, const float *y0, const float *x1, const float *y1,
                              size_t stride, int n, int normalized);
/* 1 if the spec's chain draws from the sample's boxes (RandomIoUCrop), else 0. */
int fq_img_spec_needs_boxes(const fq_img_spec *spec);

/* ---- explain: everything sampled / chosen for one sample ---------------- */

#define FQ_IMG_MAX_OPS 16

enum fq_img_source_format {
    FQ_FMT_UNKNOWN = 0,
    FQ_FMT_ARRAY = 1,
    FQ_FMT_JPEG = 2,
    FQ_FMT_PNG = 3,
    FQ_FMT_BMP = 4,
    FQ_FMT_TIFF = 5,
    FQ_FMT_WEBP = 6,
    FQ_FMT_GIF = 7,
    FQ_FMT_PNM = 8,
    FQ_FMT_OTHER = 9,
    FQ_FMT_END
};

/* Per-op record.  Coordinates are those of the op's input image in the exact
 * (full-resolution) pipeline: replaying the records on a full decode of the source
 * reproduces the output (exactly, or within the documented decode tolerance when
 * the first op was served by ROI / DCT-scaled decoding). */
typedef struct fq_img_op_explain {
    int kind;           /* FQ_OP_* */
    int applied;        /* flips / grayscale: 1 if drawn; ColorJitter: number of factors used;
                           geometric ops: 1 */
    int in_h, in_w;     /* image size entering the op */
    int out_h, out_w;   /* image size leaving the op */
    int box[4];         /* crops: x, y, w, h in input coordinates (RandomCrop: in padded
                           coordinates; CenterCrop: may be negative = zero padding) */
    int pad[4];         /* RandomCrop: padding left, top, right, bottom actually applied */
    double factor[4];   /* ColorJitter: brightness, contrast, saturation, hue factors;
                           augmentation primitives: factor[0] = the level used */
    int order[4];       /* ColorJitter: indices into factor in the order applied, -1 = none */
    double contrast_mean; /* ColorJitter: mean gray level used by contrast (computed) */
    double params[5];   /* RandomAffine: angle, tx, ty, scale, shear_x; */
    double shear_y;     /* RandomAffine: shear_y */
    double matrix[6];   /* RandomAffine: forward 2x3 matrix (dst = M [x y 1]^T); TF policies: matrix[k] = the level of op k */
    /* compositions (RandomApply / RandomChoice / RandomOrder, FQ_EXPLAIN_COMPOSE) */
    int parent;         /* every op: index of the composition it is a child of, -1 at top level */
    int n_run;          /* a composition: how many of its children ran */
    int run[FQ_IMG_MAX_OPS]; /* a composition: the children that ran, as positions (0-based) among
                           its direct children, in the order run; a child that did not run (or
                           any op under a composition that did not run) has applied = 0 and made
                           no draws */
} fq_img_op_explain;

typedef struct fq_img_explain {
    int src_format;      /* FQ_FMT_* */
    int src_h, src_w;    /* full source size */
    int src_channels;    /* channels as stored: 1 gray, 2 gray+alpha, 3, 4 (RGBA or CMYK) */
    int src_bits;        /* bits per sample as stored (8 or 16) */
    int scale_num, scale_denom; /* DCT scale used for decoding (8/8 = none) */
    int decoded_h, decoded_w;   /* full image size at that scale */
    int roi[4];          /* x, y, w, h of the region actually decoded, in scaled coords */
    int roi_used;        /* 1 if only part of the image was decoded */
    int has_crop;        /* 1 if the first op was a crop */
    int crop_src[4];     /* that crop's x, y, w, h in SOURCE pixel coordinates */
    int hflip, vflip, grayscale; /* 1 if any op of that kind was applied */
    int n_ops;
    fq_img_op_explain ops[FQ_IMG_MAX_OPS];
    int out_h, out_w, out_c;
} fq_img_explain;

/* Decode an encoded image (JPEG via libjpeg; PNG/BMP/TIFF/WebP/... via OpenCV), run
 * the chain, write one sample into out_row (fq_img_spec_row_bytes bytes).
 * Returns FQ_OK or an error code with err->msg giving the reason (the caller adds
 * the file name): FQ_E_EMPTY, FQ_E_DECODE, FQ_E_UNSUPPORTED, FQ_E_TOO_LARGE,
 * FQ_E_INVALID (e.g. RandomCrop larger than the image), FQ_E_NOMEM.
 * On error out_row content is unspecified.  ex may be NULL. */
int fq_img_process_encoded(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *data,
                           size_t len, uint64_t seed, uint64_t epoch, uint64_t index,
                           void *out_row, fq_img_explain *ex, fq_err *err);

/* Same for decoded pixels: h x w x c uint8, c = 1 (gray), 3 (RGB) or 4 (RGBA, alpha
 * dropped); row_stride in bytes (>= w * c).  max_pixels is not applied to arrays. */
int fq_img_process_array(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *pixels,
                         int h, int w, int c, size_t row_stride, uint64_t seed, uint64_t epoch,
                         uint64_t index, void *out_row, fq_img_explain *ex, fq_err *err);

/* ---- chain rules, planning and names (also for bindings and tests) ------- */

/* What a chain gives, from fq_img_chain_check. */
typedef struct fq_img_chain_info {
    int out_h, out_w; /* fixed output size (0, 0 when the chain does not give one) */
    int keeps_size;   /* 1 if no op changes the image size (the output is the input size) */
    int normalize;    /* 1 if the chain ends with Normalize */
} fq_img_chain_info;

/* The rules of an op chain, the one place they are written: every op's parameters are
 * valid, at most FQ_IMG_MAX_OPS ops, Normalize at most once and last (only RandomErasing
 * may follow it) and only with a float dtype (dtype: FQ_DT_*), RandomErasing at most once
 * and last, and the chain gives a fixed output size.  info (may be
 * NULL) is filled as far as known even when a rule fails.  FQ_OK or FQ_E_INVALID with
 * the reason.  fq_img_spec_create applies exactly these rules. */
int fq_img_chain_check(const fq_op *ops, int n_ops, int dtype, fq_img_chain_info *info, fq_err *err);

/* What the JPEG decoder does of op 0 for one sample (see docs/ops.md "Decoding"). */
typedef struct fq_img_decode_plan {
    int first_kind;       /* FQ_OP_* of op 0, FQ_OP_NONE for an empty chain */
    int box_op;           /* op 0 is a crop whose box lies inside the image */
    int resize_after;     /* op 0 resizes its box (the whole image for Resize) to out_h x out_w */
    int box[4];           /* x, y, w, h of that box in source pixels (whole image if no box) */
    int out_h, out_w;     /* op 0's output size */
    int interp;           /* op 0's interpolation (FQ_INTERP_*) when resize_after, else -1 */
    int scale_num;        /* DCT scale scale_num / 8 (8: full size) */
    int scaled_h, scaled_w; /* full image size at that scale: ceil(src * scale_num / 8) */
    int sbox[4];          /* the box in scaled coordinates, rounded, clamped, >= 1 pixel */
    int roi[4];           /* the region decoded, in scaled coordinates (sbox + 16 px margin) */
    int roi_used;         /* 1 if roi is less than the whole scaled image */
} fq_img_decode_plan;

/* Plan sample (seed, epoch, index) of an src_h x src_w JPEG and report the decode
 * plan of op 0 (no pixels are touched).  Errors as make_plan: FQ_E_TOO_LARGE, FQ_E_INVALID. */
int fq_img_plan_decode(const fq_img_spec *spec, int src_h, int src_w, uint64_t seed, uint64_t epoch,
                       uint64_t index, fq_img_decode_plan *out, fq_err *err);

/* Which fields of fq_img_op_explain an op kind fills (besides kind, in/out size). */
enum fq_img_explain_fields {
    FQ_EXPLAIN_BOX = 1,     /* box */
    FQ_EXPLAIN_PAD = 2,     /* pad */
    FQ_EXPLAIN_APPLIED = 4, /* applied (drawn with probability p) */
    FQ_EXPLAIN_JITTER = 8,  /* factor, order, contrast_mean */
    FQ_EXPLAIN_AFFINE = 16, /* params, shear_y, matrix */
    FQ_EXPLAIN_MAGNITUDE = 32, /* factor[0]: the level used (fq_image_aug.cpp ops) */
    FQ_EXPLAIN_POLICY = 64,    /* applied ops: order[k] kind (0 Identity), factor[k] magnitude,
                                  params[k] bin (fq_image_aug_policy.cpp) */
    FQ_EXPLAIN_LIGHTING = 128, /* Lighting: factor[0..2] alpha drawn, params[0..2] increment per channel */
    FQ_EXPLAIN_ERASE = 256,    /* RandomErasing: box (output coordinates), factor[0..2] value (RGB order),
                                  params[0] key of the "random" value stream, params[1] tries drawn,
                                  params[2] 1 when the values are "random" */
    FQ_EXPLAIN_CUSTOM = 512,   /* CustomOp / PyFunc: params[0], params[1] the high and low 32 bits of the
                                  op's rng key (its stream starts there; fq_image_custom.cpp) */
    FQ_EXPLAIN_COMPOSE = 1024  /* a composition: the first parameter is its number of direct children
                                  (the op subtrees that follow it); n_run, run (fq_image_compose.cpp) */
    /* tensorpack (fq_image_aug_tensorpack.cpp): TensorpackCrop: applied (1: the sampler found a box, 0: the
       fallback), params[0] tries drawn, params[1], params[2] the fallback's resized h, w (box: its
       centre crop in those coordinates); TensorpackColor: order[k] (0 brightness, 1 contrast,
       2 saturation, 3 lighting), factor[0..2] the brightness, contrast, saturation factors,
       params[0..2] the lighting alphas (float32, tensorpack's draw order), contrast_mean */
    , FQ_EXPLAIN_TENSORPACK = 2048
    /* RandomIoUCrop (fq_image_iou_crop.cpp): factor[0] the min IoU option that ended the draw,
       params[0] rounds (option draws), params[1] trials drawn in all, params[2] the largest IoU of
       the crop with a box whose centre is inside it (float32; 0 when there is no crop) */
    , FQ_EXPLAIN_IOU_CROP = 4096
    /* Keras layers (fq_image_keras_*.cpp): KerasRandomZoom params[0], params[1] the height and width
       zooms, KerasRandomTranslation params[0], params[1] dy, dx in pixels, KerasRandomRotation
       params[0] the angle (degrees), each with matrix = Keras's output -> input 2x3 map (float32
       values); KerasRandomContrast factor[0] the factor, params[0..c-1] the channel means;
       KerasRandomBrightness factor[0] the drawn factor, params[0] the delta added */
    , FQ_EXPLAIN_KERAS = 8192
};
unsigned fq_img_op_explain_fields(int kind);

/* Names (static strings; "?" when out of range): interpolations as fastq.ops spells
 * them ("nearest", "bilinear", "bicubic", "area", "lanczos", "pil_nearest", "pil_bilinear",
 * "pil_bicubic", "pil_lanczos", "pil_box", "pil_hamming"), borders ("constant",
 * "replicate", "reflect", "symmetric"), source formats ("JPEG", "PNG", ...; FQ_FMT_*)
 * and output dtypes ("uint8", "float32", "float16", "bfloat16"). */
const char *fq_img_interp_name(int interp);
const char *fq_img_border_name(int border);
const char *fq_img_format_name(int fmt);
const char *fq_img_dtype_name(int dtype);

/* Number of threads OpenCV itself may use inside one call (cv::setNumThreads; global to
 * the OpenCV library).  A worker pool should set 1 so its threads don't oversubscribe. */
void fq_img_set_opencv_threads(int n);

/* Name of an op kind ("RandomResizedCrop", ...) or "?" */
const char *fq_img_op_name(int kind);

/* ---- custom ops: CustomOp and PyFunc (fq_image_custom.cpp) --------------- */

/* A user function bound to a spec: the ops CustomOp and PyFunc name one by its place in
 * the `custom` array of fq_img_spec_create_custom (their parameter `slot`).  The ABI
 * a library implements is image/fastq_custom_op.h (installed; docs/custom_ops.md). */
typedef struct fq_img_custom_def {
    /* a shared library: dlopen(library, RTLD_NOW | RTLD_LOCAL), then the symbols
     * `symbol`, `symbol`_abi_version (must return FASTQ_CUSTOM_OP_ABI_VERSION) and the
     * optional `symbol`_init / `symbol`_free; params (n_params doubles, copied) go to
     * init and to every call */
    const char *library;
    const char *symbol;
    const double *params;
    int n_params;
    /* or (library == NULL) a function given directly (bindings: the PyFunc trampoline),
     * with its state and release(state), called exactly once: when the spec is freed, or
     * before fq_img_spec_create_custom returns an error; name is used in messages */
    int (*fn)(void *state, uint8_t *pixels, int h, int w, int c, size_t row_stride, const double *params,
              int n_params, struct fq_custom_rng *rng, char *errmsg, size_t errmsg_len);
    void *state;
    void (*release)(void *state);
    const char *name;
} fq_img_custom_def;

/* fq_img_spec_create with the user functions the chain's CustomOp / PyFunc ops name: the
 * spec loads and owns them (init now, free with the spec).  fq_img_spec_create is this
 * with none: a chain with a CustomOp / PyFunc then fails with FQ_E_INVALID.  Errors:
 * FQ_E_INVALID (op i names a missing slot; library, symbol or ABI version not found,
 * init failed: the message names library and symbol), FQ_E_NOMEM. */
int fq_img_spec_create_custom(const fq_op *ops, int n_ops, const fq_img_format *fmt,
                              const fq_img_custom_def *custom, int n_custom, fq_img_spec **out, fq_err *err);

/* Load library + symbol as fq_img_spec_create_custom would, check the ABI version,
 * unload (init is not run).  FQ_OK or FQ_E_INVALID naming what is missing. */
int fq_img_custom_probe(const char *library, const char *symbol, fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
