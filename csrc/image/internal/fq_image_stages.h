/* fq_image_stages.h - private C++ declarations shared by the stages of the image path
 * (not installed, not part of the C API):
 *
 *   fq_image_spec.cpp    the immutable spec: chain rules, output tables, name tables
 *   fq_image_ops.cpp     one record per op kind: check / geometry / plan / execute / explain
 *   fq_image_aug.cpp     the same for the uint8 augmentation primitives (AutoContrast ...)
 *   fq_image_plan.cpp    make_plan (every random draw of a sample) and plan_decode (what
 *                        the JPEG decoder does of op 0: ROI, DCT scale, resampling)
 *   fq_image_exec.cpp    the ping-pong executor over the scratch buffers, exec_ops
 *   fq_image_write.cpp   the fused normalize / dtype / layout write of the output row
 *   fq_image_jpeg.cpp    the JPEG path: header, plan, ROI / DCT-scaled decode, first op
 *   fq_image_api.cpp     the C API entry points (arrays, encoded images, scratch)
 *
 * fq_image_decode.cpp (and fq_image_restart_crop.cpp) hold the decoders (fq_image_internal.h).
 * Semantics of every op: docs/ops.md. */
#ifndef FQ_IMAGE_STAGES_H
#define FQ_IMAGE_STAGES_H

#include <cstddef>
#include <type_traits>

#include "image/internal/fq_image_internal.h"
#include "core/fq_rng.h"

/* Immutable after fq_img_spec_create: shared read-only between threads. */
struct fq_img_spec {
    fq_op ops[FQ_IMG_MAX_OPS]; /* without the trailing Normalize */
    int n_ops;
    /* the tree of compositions (fq_image_compose.cpp): ops[i] and the span[i] - 1 ops after
     * it are op i's subtree (1 for a plain op); parent[i] is the composition op i is a
     * direct child of, -1 at top level */
    int span[FQ_IMG_MAX_OPS];
    int parent[FQ_IMG_MAX_OPS];
    fq_img_format fmt;
    int out_h, out_w, out_c;
    size_t row_bytes;
    float lut_f32[3][256];
    uint16_t lut_f16[3][256]; /* float16 or bfloat16 bits, as fmt.dtype says */
    fqi::F32Affine f32k;      /* SIMD form of lut_f32 (fq_image_write_simd.cpp) */
    int erase_at;             /* index in ops of the trailing RandomErasing, -1: none */
    /* the user functions of CustomOp / PyFunc ops, by slot (fq_image_custom.cpp; owned,
     * released by fq_img_spec_free) */
    struct fq_img_custom_slot *custom;
    int n_custom;
};

/* How an op moves detection targets (boxes, keypoints, masks, image_info; the rules:
 * fq_image_targets*.cpp, docs/targets.md).  Each record names its own: FQ_RULE_REFUSED
 * (no rule: a chain with it cannot carry targets), FQ_RULE_PIXEL (targets unchanged), else
 * the geometric rule that moves them.  fq_tgt_rule maps these to refused / pixel / geometric. */
enum TargetRule {
    FQ_RULE_REFUSED = 0,
    FQ_RULE_PIXEL,
    FQ_RULE_RRC,
    FQ_RULE_RESIZE,
    FQ_RULE_CROP,
    FQ_RULE_RCROP,
    FQ_RULE_PAD,
    FQ_RULE_HFLIP,
    FQ_RULE_VFLIP,
    FQ_RULE_AFFINE,
    FQ_RULE_GEOM, /* Rotate .. TranslateY: the GeomKind of the kind (aug_geom_kind) */
    FQ_RULE_SCALE_JITTER,
    FQ_RULE_ZOOM_OUT,
    FQ_RULE_IOU_CROP, /* a crop; boxes whose centre is outside it are dropped */
    FQ_RULE_COUNT
};

namespace fqi {

/* Every random draw of one sample, one explain record per op (fq_image_plan.cpp). */
struct Plan {
    int n;
    fq_img_op_explain r[FQ_IMG_MAX_OPS];
    int n_exec;               /* the plain ops to run, in order (compositions resolved) */
    int exec[FQ_IMG_MAX_OPS];
};

/* The image between ops: cur is a view into the scratch's ping-pong buffers a / b (or
 * into the decoder's output); flips are deferred to the final write when possible.
 * One per call, on the calling thread (fq_image_exec.cpp). */
struct Exec {
    fq_img_scratch *s;
    cv::Mat cur;
    const void *cur_buf = nullptr; /* which Buf holds cur (nullptr: not a/b) */
    bool hflip = false, vflip = false;
    /* the error channel of ops that can fail (CustomOp / PyFunc): an op sets rc (an FQ_E_*
     * code, via fail()) and the message into err; exec_ops stops at the first failure and
     * its caller returns rc.  sp: the spec being run (set by exec_ops). */
    const fq_img_spec *sp = nullptr;
    fq_err *err = nullptr;
    int rc = FQ_OK;

    /* an h x w buffer of type that does not alias cur (may throw std::bad_alloc) */
    cv::Mat next(int h, int w, int type);
    void set(const cv::Mat &m);
    void materialize_flips();
    void resize_to(const cv::Mat &src, int h, int w, int interp);
    /* crop box (x, y, w, h) of cur, padding what falls outside with border/fill */
    void crop_pad(const int box[4], int border, const double *fill);
};

/* What an op does to the image size. */
enum Geometry {
    GEOM_KEEP = 0,    /* output size = input size */
    GEOM_FIXED = 1,   /* a fixed h x w (given by geometry()) */
    GEOM_VARIABLE = 2 /* depends on the input size */
};

/* The whole implementation of one op kind: a new op is its parameter struct, its field
 * list and one record in its family's array (FQ_OP_FAMILY, below; plus its Python class
 * in fastq/ops/).  Its kind is written in the record and never changes. */
struct OpImpl {
    int kind;          /* its op kind: fixed forever (saved specs and packed chains hold it) */
    const char *name;  /* the Python class name */
    TargetRule rule;   /* its target rule (FQ_RULE_REFUSED: none, said explicitly) */
    unsigned explain;  /* FQ_EXPLAIN_* fields its explain record fills */
    size_t params_size;        /* sizeof its parameter struct */
    const fq_op_field *fields; /* the struct's fields, in order (FQ_FIELD) */
    int n_fields;
    /* nullptr when the parameters are valid, else the reason */
    const char *(*check)(const fq_op &op);
    /* GEOM_*; *h, *w for GEOM_FIXED */
    int (*geometry)(const fq_op &op, int *h, int *w);
    /* draw the op's random parameters for an *h x *w input into r and update *h, *w;
     * FQ_OK or an error (e.g. FQ_E_TOO_LARGE, FQ_E_INVALID) */
    int (*plan)(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                fq_err *err);
    /* run it on e.cur (r: its plan; may record computed values, e.g. contrast_mean) */
    void (*exec)(Exec &e, const fq_op &op, fq_img_op_explain &r);
};

/* The record of kind, or nullptr for an unknown kind (FQ_OP_NORMALIZE has one: it is
 * checked here and applied by the output tables). */
const OpImpl *op_impl(int kind);
/* Number of records (op kinds). */
int op_count();
/* The public descriptor of kind (fq_img_op_desc), nullptr for an unknown kind. */
const fq_op_desc *op_desc(int kind);

/* The GeomKind of kind for Rotate .. TranslateY (FQ_RULE_GEOM), else -1. */
int aug_geom_kind(int kind);

/* The parameters of op as its kind's struct P (a struct of doubles at the start of
 * fq_op.raw; the named union members of fq_op are the same memory). */
template <class P>
inline const P &params(const fq_op &op)
{
    static_assert(sizeof(P) <= sizeof op.raw && alignof(P) <= alignof(double), "op parameters must fit fq_op.raw");
    return *reinterpret_cast<const P *>(op.raw);
}

/* A field descriptor of member f of parameter struct S: FQ_FIELD(S, f).  Only doubles
 * (scalars and arrays of up to two dimensions) are parameters. */
template <class T>
constexpr fq_op_field make_field(const char *name, size_t offset)
{
    static_assert(std::is_same<typename std::remove_all_extents<T>::type, double>::value,
                  "op parameters are doubles (or arrays of doubles)");
    static_assert(std::rank<T>::value <= 2, "op parameter arrays have at most 2 dimensions");
    return fq_op_field{name, FQ_FIELD_F64, (int)std::rank<T>::value,
                       {(int)std::extent<T, 0>::value, (int)std::extent<T, 1>::value}, offset};
}
#define FQ_FIELD(S, f) fqi::make_field<decltype(S::f)>(#f, offsetof(S, f))

/* The fields of a record cover its parameter struct exactly, in order, without gaps
 * (checked at compile time over the whole table). */
constexpr bool fields_cover(const fq_op_field *f, int n, size_t size)
{
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (f[i].offset != at)
            return false;
        size_t count = 1;
        for (int d = 0; d < f[i].ndim; d++)
            count *= (size_t)f[i].shape[d];
        at += count * sizeof(double);
    }
    return at == size && size <= sizeof(((fq_op *)nullptr)->raw);
}

/* params_size, fields, n_fields of a record for parameter struct S */
#define FQ_PARAMS(S, fields) sizeof(S), fields, (int)(sizeof fields / sizeof fields[0])

/* the geometry of an op that keeps the size */
inline int keeps_size(const fq_op &, int *, int *) { return GEOM_KEEP; }

/* ---- op families ---------------------------------------------------------------------
 * Each family's records sit in its own source, beside the ops' code (FQ_OP_FAMILY); the
 * central table (fq_image_op_table.cpp: kFamilies) assembles them by kind when first used and
 * checks that the kinds of all families together are 1 .. op_count(), each once, and the
 * names unique.  Adding an op to a family is one record in that family's array. */
struct OpFamily {
    const char *name;
    const OpImpl *ops;
    int n;
};

constexpr bool name_eq(const char *a, const char *b) { return *a == *b && (*a == 0 || name_eq(a + 1, b + 1)); }

/* A family's compile-time check: kinds >= 1 and increasing (so each once), names unique,
 * rules valid, each field list covering its parameter struct in order. */
constexpr bool family_ok(const OpImpl *t, int n)
{
    for (int i = 0; i < n; i++) {
        if (t[i].kind < 1 || (i > 0 && t[i].kind <= t[i - 1].kind))
            return false;
        if (t[i].rule < FQ_RULE_REFUSED || t[i].rule >= FQ_RULE_COUNT)
            return false;
        if (!fields_cover(t[i].fields, t[i].n_fields, t[i].params_size))
            return false;
        for (int j = 0; j < i; j++)
            if (name_eq(t[i].name, t[j].name))
                return false;
    }
    return true;
}

/* The record of the family's op called name, nullptr when none (for static_asserts). */
constexpr const OpImpl *family_find(const OpImpl *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (name_eq(t[i].name, name))
            return &t[i];
    return nullptr;
}

/* Define family var (declared below) from the constexpr array records, at global scope. */
#define FQ_OP_FAMILY(var, records)                                                                                 \
    static_assert(fqi::family_ok(records, (int)(sizeof records / sizeof records[0])),                              \
                  #var ": kinds increasing, names unique, rules valid, fields covering the parameters");           \
    namespace fqi {                                                                                                \
    const OpFamily var = {#var, records, (int)(sizeof records / sizeof records[0])};                               \
    }

/* the families, each defined (FQ_OP_FAMILY) in the source named and listed in
 * fq_image_op_table.cpp */
extern const OpFamily kOpsTorchvision; /* api/fq_image_ops.cpp: the ten kinds of enum fq_op_kind */
extern const OpFamily kOpsAug; /* color/fq_image_aug.cpp: the colour primitives Invert .. Sharpness */
/* geometry/fq_image_aug_geom.cpp: the geometric primitives Rotate .. TranslateY and Cutout */
extern const OpFamily kOpsGeom;
extern const OpFamily kOpsLut; /* color/fq_image_aug_lut.cpp: Gamma / Lighting */
extern const OpFamily kOpsBlur; /* color/fq_image_aug_filter.cpp: GaussianBlur */
/* color/fq_image_aug_policy.cpp: torchvision's RandAugment / TrivialAugmentWide / AutoAugment */
extern const OpFamily kOpsPolicy;
extern const OpFamily kOpsErase; /* color/fq_image_aug_erase.cpp: RandomErasing */
extern const OpFamily kOpsCustom; /* api/fq_image_custom.cpp: CustomOp / PyFunc */
/* api/fq_image_compose.cpp: the compositions RandomApply / RandomChoice / RandomOrder */
extern const OpFamily kOpsCompose;
/* geometry/fq_image_detection.cpp: detection geometry: ResizeShortestEdge / Pad / ScaleJitter / RandomZoomOut */
extern const OpFamily kOpsDet;
extern const OpFamily kOpsIouCrop; /* geometry/fq_image_iou_crop.cpp: RandomIoUCrop */
/* color/fq_image_aug_tensorpack.cpp: tensorpack's fbresnet_augmentor crop and fused colour ops */
extern const OpFamily kOpsTensorpack;
extern const OpFamily kOpsNoise; /* color/fq_image_aug_model_garden.cpp: GaussianNoise (TF Model Garden's noise) */
/* color/fq_image_aug_model_garden_policy.cpp: TF Model Garden's RandAugment / AutoAugment */
extern const OpFamily kOpsModelGarden;
extern const OpFamily kOpsTimm; /* color/fq_image_aug_timm_policy.cpp: timm's RandAugment / AutoAugment / AugMix */
/* geometry/fq_image_keras_geom.cpp: Keras 3's RandomZoom / RandomTranslation / RandomRotation */
extern const OpFamily kOpsKerasGeom;
extern const OpFamily kOpsKerasColor; /* color/fq_image_keras_color.cpp: Keras 3's RandomContrast / RandomBrightness */

/* Draw every random parameter of sample (seed, epoch, index) for an H x W source.
 * Errors: FQ_E_TOO_LARGE, FQ_E_INVALID (op-specific, e.g. RandomCrop larger than the image). */
int make_plan(const fq_img_spec *sp, int H, int W, uint64_t seed, uint64_t epoch, uint64_t index, Plan *pl,
              fq_err *err, const PlanBoxes *boxes = nullptr); /* boxes: the sample's (RandomIoUCrop) */

/* How much of op 0 (already planned) the JPEG decoder does for an src_h x src_w JPEG. */
void plan_decode(const fq_img_spec *sp, const Plan &pl, int src_h, int src_w, fq_img_decode_plan *dp);

/* Run the plain ops of pl->exec (in that order) with index >= start on e.cur; stops at
 * the first op that sets e.rc (the caller returns e.rc, its message is in e.err). */
void exec_ops(const fq_img_spec *sp, Plan *pl, int start, Exec &e);

/* The fused final write of one sample (flips, normalize table, dtype, layout, channel
 * order, the RandomErasing box of pl). */
void write_out(const fq_img_spec *sp, const cv::Mat &img, bool hf, bool vf, void *out, const Plan &pl);

/* float32 -> IEEE binary16 / bfloat16 bits, round to nearest even (fq_image_spec.cpp) */
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);

/* The JPEG path of fq_img_process_encoded (explain fields of the source and decode). */
int process_jpeg(const fq_img_spec *sp, fq_img_scratch *s, const uint8_t *data, size_t len, uint64_t seed,
                 uint64_t epoch, uint64_t index, void *out_row, fq_img_explain *ex, fq_err *err);

/* Run the whole chain on a decoded full image, then write it. */
int run_full(const fq_img_spec *sp, fq_img_scratch *s, const cv::Mat &img, Plan &pl, void *out_row, fq_err *err);

/* Custom ops (fq_image_custom.cpp): load / check the user functions of a new spec
 * (FQ_OK or an error; on error what was loaded is released), and release them. */
int custom_bind(fq_img_spec *sp, const fq_img_custom_def *custom, int n_custom, fq_err *err);
void custom_release(fq_img_spec *sp);

/* Explain: reset (scale 8/8) and copy the plan + output shape into it (ex may be NULL). */
void init_explain(fq_img_explain *ex);
void fill_explain_tail(fq_img_explain *ex, const Plan &pl, const fq_img_spec *sp);

/* ---- compositions: RandomApply / RandomChoice / RandomOrder (fq_image_compose.cpp) ----
 * A composition is one record followed by its children's subtrees in the flat chain; its
 * first parameter is its number of direct children.  Its record's plan() draws only the
 * composition's own choice (n_run, run); make_plan then plans the children that run, in
 * the order they run, and marks the others applied = 0 without drawing anything. */
bool is_compose(int kind);
/* The number of direct children of composition op (its first parameter). */
int compose_n(const fq_op &op);
/* Fill span[] and parent[] of a chain of n valid ops, check the composition rules
 * (children inside the chain, no Normalize inside, size rules: the children of RandomApply
 * and RandomOrder keep the size, the alternatives of RandomChoice all keep it or all give
 * one fixed size); *geom / *h / *w: what top-level item i does (GEOM_*), per item start.
 * FQ_OK or FQ_E_INVALID with the op index and reason. */
int compose_tree(const fq_op *ops, int n, int *span, int *parent, int *geom, int *gh, int *gw, fq_err *err);
/* The compositions' functions (their records: family kOpsCompose, fq_image_compose.cpp) */
const char *random_apply_check(const fq_op &op);
const char *random_choice_check(const fq_op &op);
const char *random_order_check(const fq_op &op);
int random_apply_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                      fq_err *err);
int random_choice_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                       fq_err *err);
int random_order_plan(const fq_op &op, fq_rng *rng, int64_t max_pixels, int *h, int *w, fq_img_op_explain &r,
                      fq_err *err);
void compose_exec(Exec &e, const fq_op &op, fq_img_op_explain &r);
struct ComposeApply {  /* RandomApply */
    double n;          /* number of direct children, 1 .. FQ_IMG_MAX_OPS - 1 */
    double p;          /* probability of running them all (u < p) */
};
struct ComposeChoice { /* RandomChoice */
    double n;
    double p[FQ_IMG_MAX_OPS - 1]; /* probability of each child (n of them, sum 1), 0 after */
};
struct ComposeOrder {  /* RandomOrder */
    double n;
};
inline constexpr fq_op_field kComposeApplyFields[] = {FQ_FIELD(ComposeApply, n), FQ_FIELD(ComposeApply, p)};
inline constexpr fq_op_field kComposeChoiceFields[] = {FQ_FIELD(ComposeChoice, n), FQ_FIELD(ComposeChoice, p)};
inline constexpr fq_op_field kComposeOrderFields[] = {FQ_FIELD(ComposeOrder, n)};

/* FQ_BORDER_* -> cv::BORDER_* */
int cv_border(int b);

}  // namespace fqi

#endif
