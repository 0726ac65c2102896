/* fq_image_spec.cpp - the immutable spec: the chain rules (fq_img_chain_check, the one
 * place they are written), the output tables (Normalize or x/255 per channel, per
 * dtype), and the name tables of the C API.  A spec is read-only once created. */
#include "image/internal/fq_image_aug.h"
#include "image/internal/fq_image_iou_crop.h"

#include <cstring>
#include <new>

static_assert(sizeof(fq_op) == 136, "fq_op layout must match fastq._native._image.FQ_OP_DTYPE");
static_assert(offsetof(fq_op, raw) == 8, "fq_op layout must match fastq._native._image.FQ_OP_DTYPE");
static_assert(sizeof(fq_op_random_affine) <= sizeof(double[16]) && sizeof(fq_op_color_jitter) <= sizeof(double[16]) &&
                  sizeof(fq_op_random_crop) <= sizeof(double[16]),
              "op parameters must fit the 16 doubles of FQ_OP_DTYPE");

namespace {

uint16_t float_to_half(float f)
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mant = x & 0x7FFFFFu;
    int exp = (int)((x >> 23) & 0xFF);
    if (exp == 0xFF) /* inf / nan */
        return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0u));
    int e = exp - 127 + 15;
    if (e >= 0x1F)
        return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent: still correct (rounds to inf at the top) */
    return (uint16_t)(sign | h);
}

/* float32 -> bfloat16 bits, round to nearest even (NaN stays a quiet NaN) */
uint16_t float_to_bfloat16(float f)
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u); /* may carry into the exponent: rounds to inf at the top */
    return (uint16_t)(x >> 16);
}

}  // namespace

namespace fqi {
uint16_t f32_to_f16(float f) { return float_to_half(f); }
uint16_t f32_to_bf16(float f) { return float_to_bfloat16(f); }
}  // namespace fqi

extern "C" {

int fq_img_chain_check(const fq_op *ops, int n_ops, int dtype, fq_img_chain_info *info, fq_err *err)
{
    fq_img_chain_info tmp;
    if (!info)
        info = &tmp;
    std::memset(info, 0, sizeof *info);
    info->keeps_size = 1;
    if (n_ops > 0 && !ops)
        return fq_set_err(err, FQ_E_INVALID, "fq_img_chain_check: NULL argument");
    if (n_ops < 0 || n_ops > FQ_IMG_MAX_OPS)
        return fq_set_err(err, FQ_E_INVALID, "an op chain has 0..%d ops (each op inside a composition counts), got %d", FQ_IMG_MAX_OPS, n_ops);
    int first_norm = -1;
    /* RandomErasing: at most once and last (after Normalize: it erases output values) */
    static const int kErase = fq_img_op_kind("RandomErasing");
    const int tail = (n_ops > 0 && ops[n_ops - 1].kind == kErase) ? n_ops - 1 : n_ops;
    for (int i = 0; i < tail; i++)
        if (ops[i].kind == kErase)
            return fq_set_err(err, FQ_E_INVALID,
                              "RandomErasing must be the last op (after Normalize; it is op %d of %d)", i, n_ops);
    for (int i = 0; i < n_ops; i++) {
        const fqi::OpImpl *impl = fqi::op_impl(ops[i].kind);
        if (!impl)
            return fq_set_err(err, FQ_E_INVALID, "op %d: unknown op kind %d", i, ops[i].kind);
        if (const char *why = impl->check(ops[i]))
            return fq_set_err(err, FQ_E_INVALID, "op %d (%s): %s", i, impl->name, why);
        int h = 0, w = 0;
        switch (impl->geometry(ops[i], &h, &w)) {
        case fqi::GEOM_FIXED:
            info->out_h = h, info->out_w = w, info->keeps_size = 0;
            break;
        case fqi::GEOM_VARIABLE:
            info->out_h = info->out_w = 0, info->keeps_size = 0;
            break;
        default:
            break;
        }
        if (ops[i].kind == FQ_OP_NORMALIZE && first_norm < 0)
            first_norm = i;
    }
    if (first_norm >= 0 && first_norm != tail - 1)
        return fq_set_err(err, FQ_E_INVALID,
                          "Normalize must be the last op (only RandomErasing may follow it; it is op %d of %d)",
                          first_norm, n_ops);
    info->normalize = first_norm >= 0;
    /* compose: the compositions' structure and size rules (fq_image_compose.cpp).  Given
     * them, the loop above gave the chain's geometry: a composition's record keeps the size
     * and the alternatives of a RandomChoice all give the one size the loop saw */
    int span[FQ_IMG_MAX_OPS], parent[FQ_IMG_MAX_OPS], geom[FQ_IMG_MAX_OPS], gh[FQ_IMG_MAX_OPS], gw[FQ_IMG_MAX_OPS];
    if (int rc = fqi::compose_tree(ops, n_ops, span, parent, geom, gh, gw, err))
        return rc;
    if (int rc = fqi::iou_crop_chain_check(ops, n_ops, err)) /* boxes can reach it */
        return rc;
    if (!info->out_h)
        return fq_set_err(err, FQ_E_INVALID,
                          "the op chain does not give a fixed output size: it needs a crop or an exact "
                          "Resize((h, w)) after any Resize(shorter_side)");
    if (info->normalize && dtype == FQ_DT_UINT8)
        return fq_set_err(err, FQ_E_INVALID, "Normalize needs a float dtype (float32, float16 or bfloat16), not uint8");
    return FQ_OK;
}

/* the spec without its custom ops (fq_img_spec_create_custom binds them) */
static int spec_create_base(const fq_op *ops, int n_ops, const fq_img_format *fmt, fq_img_spec **out, fq_err *err)
{
    if (!out || !fmt || (n_ops > 0 && !ops))
        return fq_set_err(err, FQ_E_INVALID, "fq_img_spec_create: NULL argument");
    *out = nullptr;
    if (fmt->channels != 1 && fmt->channels != 3)
        return fq_set_err(err, FQ_E_INVALID, "channels must be 1 or 3, got %d", fmt->channels);
    if (fmt->dtype < 0 || fmt->dtype >= FQ_DT_END)
        return fq_set_err(err, FQ_E_INVALID, "unknown dtype %d", fmt->dtype);
    if (fmt->layout != FQ_LAYOUT_HWC && fmt->layout != FQ_LAYOUT_CHW)
        return fq_set_err(err, FQ_E_INVALID, "unknown layout %d", fmt->layout);
    if (fmt->channel_order != FQ_ORDER_RGB && (fmt->channel_order != FQ_ORDER_BGR || fmt->channels != 3))
        return fq_set_err(err, FQ_E_INVALID, "channel_order must be RGB (0) or, with 3 channels, BGR (1), got %d",
                          fmt->channel_order);
    if (fmt->idct != FQ_IDCT_ACCURATE && fmt->idct != FQ_IDCT_FAST)
        return fq_set_err(err, FQ_E_INVALID, "idct must be accurate (0) or fast (1), got %d", fmt->idct);
    fq_img_chain_info info;
    int rc = fq_img_chain_check(ops, n_ops, fmt->dtype, &info, err);
    if (rc)
        return rc;
    const int h = info.out_h, w = info.out_w;
    const fq_op *norm = nullptr;
    for (int i = 0; i < n_ops; i++)
        if (ops[i].kind == FQ_OP_NORMALIZE)
            norm = &ops[i];
    const int erase_kind = fq_img_op_kind("RandomErasing");
    if (fmt->channels == 1 && n_ops > 0 && ops[n_ops - 1].kind == erase_kind) {
        const fqi::AugErase &q = fqi::params<fqi::AugErase>(ops[n_ops - 1]);
        if (!q.random && (q.value[1] != q.value[0] || q.value[2] != q.value[0]))
            return fq_set_err(err, FQ_E_INVALID,
                              "op %d (RandomErasing): channels=1 needs a single value, got (%g, %g, %g)", n_ops - 1,
                              q.value[0], q.value[1], q.value[2]);
    }
    fq_img_spec *sp = new (std::nothrow) fq_img_spec;
    if (!sp)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    std::memset(sp, 0, sizeof *sp);
    sp->n_ops = 0;
    sp->erase_at = -1;
    for (int i = 0; i < n_ops; i++)
        if (ops[i].kind != FQ_OP_NORMALIZE) {
            if (ops[i].kind == erase_kind)
                sp->erase_at = sp->n_ops;
            sp->ops[sp->n_ops++] = ops[i];
        }
    sp->fmt = *fmt;
    if (sp->fmt.max_pixels <= 0)
        sp->fmt.max_pixels = FQ_IMG_DEFAULT_MAX_PIXELS;
    sp->out_h = h, sp->out_w = w, sp->out_c = fmt->channels;
    size_t es = fmt->dtype == FQ_DT_UINT8 ? 1 : (fmt->dtype == FQ_DT_FLOAT32 ? 4 : 2);
    sp->row_bytes = (size_t)h * w * sp->out_c * es;
    for (int c = 0; c < 3; c++) {
        for (int v = 0; v < 256; v++) {
            float val;
            if (norm) /* computed in double, rounded once to float */
                val = (float)(((double)v / 255.0 - norm->normalize.mean[c]) / norm->normalize.std[c]);
            else
                val = (float)((double)v / 255.0);
            sp->lut_f32[c][v] = val;
            sp->lut_f16[c][v] = fmt->dtype == FQ_DT_BFLOAT16 ? float_to_bfloat16(val) : float_to_half(val);
        }
    }
    fqi::affine_init(&sp->f32k, sp->lut_f32, norm ? norm->normalize.mean : nullptr, norm ? norm->normalize.std : nullptr, norm != nullptr);
    /* compose: the tree of the ops kept (Normalize is never inside a composition) */
    int geom[FQ_IMG_MAX_OPS], gh[FQ_IMG_MAX_OPS], gw[FQ_IMG_MAX_OPS];
    rc = fqi::compose_tree(sp->ops, sp->n_ops, sp->span, sp->parent, geom, gh, gw, err);
    if (rc) {
        delete sp;
        return rc;
    }
    *out = sp;
    return FQ_OK;
}

int fq_img_spec_create(const fq_op *ops, int n_ops, const fq_img_format *fmt, fq_img_spec **out, fq_err *err)
{
    return fq_img_spec_create_custom(ops, n_ops, fmt, nullptr, 0, out, err);
}

int fq_img_spec_create_custom(const fq_op *ops, int n_ops, const fq_img_format *fmt,
                              const fq_img_custom_def *custom, int n_custom, fq_img_spec **out, fq_err *err)
{
    fq_img_spec *sp = nullptr;
    int rc = spec_create_base(ops, n_ops, fmt, &sp, err);
    if (rc == FQ_OK)
        rc = fqi::custom_bind(sp, custom, n_custom, err);
    else
        fqi::custom_bind(nullptr, custom, n_custom, nullptr); /* only releases what custom hands over */
    if (rc) {
        fq_img_spec_free(sp);
        return rc;
    }
    *out = sp;
    return FQ_OK;
}

void fq_img_spec_free(fq_img_spec *spec)
{
    if (spec)
        fqi::custom_release(spec);
    delete spec;
}

int fq_img_spec_out_shape(const fq_img_spec *spec, int *h, int *w, int *c)
{
    if (!spec)
        return FQ_E_INVALID;
    if (h) *h = spec->out_h;
    if (w) *w = spec->out_w;
    if (c) *c = spec->out_c;
    return FQ_OK;
}

size_t fq_img_spec_row_bytes(const fq_img_spec *spec) { return spec ? spec->row_bytes : 0; }

/* ---- name tables ------------------------------------------------------------ */

const char *fq_img_op_name(int kind)
{
    const fqi::OpImpl *impl = fqi::op_impl(kind);
    return impl ? impl->name : "?";
}

int fq_img_op_count(void) { return fqi::op_count(); }

const fq_op_desc *fq_img_op_desc(int kind) { return fqi::op_desc(kind); }

int fq_img_op_kind(const char *name)
{
    for (int k = 1; name && k <= fqi::op_count(); k++)
        if (std::strcmp(fqi::op_impl(k)->name, name) == 0)
            return k;
    return FQ_OP_NONE;
}

unsigned fq_img_op_explain_fields(int kind)
{
    const fqi::OpImpl *impl = fqi::op_impl(kind);
    return impl ? impl->explain : 0u;
}

const char *fq_img_interp_name(int interp)
{
    static const char *const kNames[FQ_INTERP_END] = {"nearest",     "bilinear",    "bicubic",     "area",
                                                      "lanczos",     "pil_nearest", "pil_bilinear", "pil_bicubic",
                                                      "pil_lanczos", "pil_box",     "pil_hamming"};
    return interp >= 0 && interp < FQ_INTERP_END ? kNames[interp] : "?";
}

const char *fq_img_border_name(int border)
{
    static const char *const kNames[FQ_BORDER_END] = {"constant", "replicate", "reflect", "symmetric"};
    return border >= 0 && border < FQ_BORDER_END ? kNames[border] : "?";
}

const char *fq_img_format_name(int fmt) { return fmt >= 0 && fmt < FQ_FMT_END ? fqi::format_name(fmt) : "?"; }

const char *fq_img_dtype_name(int dtype)
{
    static const char *const kNames[FQ_DT_END] = {"uint8", "float32", "float16", "bfloat16"};
    return dtype >= 0 && dtype < FQ_DT_END ? kNames[dtype] : "?";
}

}  // extern "C"
