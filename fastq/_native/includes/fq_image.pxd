# csrc/image/fq_image.h: the per-sample image path (public C API).
from libc.stdint cimport uint8_t, int64_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_stage_times cimport fq_stage_times
from fastq._native.includes.fastq_custom_op cimport fq_custom_rng

cdef extern from "image/fq_image.h" nogil:
    # struct fq_op: kind + the parameters (raw: the flat view of the union).  Which
    # fields a kind has is read from its descriptor (fq_img_op_desc), never mirrored here.
    ctypedef struct fq_op:
        int kind
        double raw[16]

    enum:
        FQ_FIELD_F64
    ctypedef struct fq_op_field:
        const char *name
        int type
        int ndim
        int shape[2]
        size_t offset
    ctypedef struct fq_op_desc:
        int kind
        const char *name
        size_t params_size
        int n_fields
        const fq_op_field *fields
    int fq_img_op_count()
    const fq_op_desc *fq_img_op_desc(int kind)
    int fq_img_op_kind(const char *name)

    ctypedef struct fq_img_format:
        int channels
        int dtype
        int layout
        int64_t max_pixels
        int dct_scaling
        int channel_order
        int idct

    ctypedef struct fq_img_spec:
        pass
    ctypedef struct fq_img_scratch:
        pass

    enum:
        FQ_IMG_MAX_OPS
        FQ_IMG_DEFAULT_MAX_PIXELS
        FQ_IMG_MAX_SIDE
        FQ_DT_UINT8
        FQ_DT_FLOAT32
        FQ_DT_FLOAT16
        FQ_DT_BFLOAT16
        FQ_DT_END
        FQ_LAYOUT_HWC
        FQ_LAYOUT_CHW
        FQ_INTERP_END
        FQ_BORDER_END
        FQ_FMT_END
        FQ_EXPLAIN_BOX
        FQ_EXPLAIN_PAD
        FQ_EXPLAIN_APPLIED
        FQ_EXPLAIN_JITTER
        FQ_EXPLAIN_AFFINE
        FQ_EXPLAIN_MAGNITUDE
        FQ_EXPLAIN_POLICY
        FQ_EXPLAIN_LIGHTING
        FQ_EXPLAIN_ERASE
        FQ_ORDER_RGB
        FQ_ORDER_BGR
        FQ_EXPLAIN_COMPOSE  # compositions (RandomApply / RandomChoice / RandomOrder)
        FQ_EXPLAIN_TENSORPACK  # tensorpack: TensorpackCrop / TensorpackColor
        FQ_EXPLAIN_IOU_CROP  # RandomIoUCrop: rounds, trials, the IoU reached
        FQ_EXPLAIN_KERAS  # Keras layers: the draws and Keras's matrix

    ctypedef struct fq_img_op_explain:
        int kind
        int applied
        int in_h, in_w, out_h, out_w
        int box[4]
        int pad[4]
        double factor[4]
        int order[4]
        double contrast_mean
        double params[5]
        double shear_y
        double matrix[6]
        int parent  # compositions
        int n_run
        int run[16]

    ctypedef struct fq_img_explain:
        int src_format
        int src_h, src_w
        int src_channels
        int src_bits
        int scale_num, scale_denom
        int decoded_h, decoded_w
        int roi[4]
        int roi_used
        int has_crop
        int crop_src[4]
        int hflip, vflip, grayscale
        int n_ops
        fq_img_op_explain ops[16]
        int out_h, out_w, out_c

    int fq_img_spec_create(const fq_op *ops, int n_ops, const fq_img_format *fmt, fq_img_spec **out,
                           fq_err *err)
    void fq_img_spec_free(fq_img_spec *spec)
    int fq_img_spec_out_shape(const fq_img_spec *spec, int *h, int *w, int *c)
    size_t fq_img_spec_row_bytes(const fq_img_spec *spec)
    fq_img_scratch *fq_img_scratch_new()
    void fq_img_scratch_free(fq_img_scratch *s)
    void fq_img_scratch_set_boxes(fq_img_scratch *s, const float *x0, const float *y0, const float *x1,
                                  const float *y1, size_t stride, int n, int normalized)
    int fq_img_spec_needs_boxes(const fq_img_spec *spec)
    int fq_img_process_encoded(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *data, size_t len,
                               uint64_t seed, uint64_t epoch, uint64_t index, void *out_row,
                               fq_img_explain *ex, fq_err *err)
    int fq_img_process_array(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *pixels, int h, int w,
                             int c, size_t row_stride, uint64_t seed, uint64_t epoch, uint64_t index,
                             void *out_row, fq_img_explain *ex, fq_err *err)
    void fq_img_set_opencv_threads(int n)
    const char *fq_img_op_name(int kind)

    ctypedef struct fq_img_chain_info:
        int out_h, out_w
        int keeps_size
        int normalize
    int fq_img_chain_check(const fq_op *ops, int n_ops, int dtype, fq_img_chain_info *info, fq_err *err)

    ctypedef struct fq_img_decode_plan:
        int first_kind
        int box_op
        int resize_after
        int box[4]
        int out_h, out_w
        int interp
        int scale_num
        int scaled_h, scaled_w
        int sbox[4]
        int roi[4]
        int roi_used
    int fq_img_plan_decode(const fq_img_spec *spec, int src_h, int src_w, uint64_t seed, uint64_t epoch,
                           uint64_t index, fq_img_decode_plan *out, fq_err *err)

    unsigned fq_img_op_explain_fields(int kind)
    const char *fq_img_interp_name(int interp)
    const char *fq_img_border_name(int border)
    const char *fq_img_format_name(int fmt)
    const char *fq_img_dtype_name(int dtype)

    # custom ops: CustomOp / PyFunc (fq_image_custom.cpp)
    enum:
        FQ_EXPLAIN_CUSTOM
    ctypedef struct fq_img_custom_def:
        const char *library
        const char *symbol
        const double *params
        int n_params
        int (*fn)(void *state, uint8_t *pixels, int h, int w, int c, size_t row_stride, const double *params,
                  int n_params, fq_custom_rng *rng, char *errmsg, size_t errmsg_len)
        void *state
        void (*release)(void *state)
        const char *name
    int fq_img_spec_create_custom(const fq_op *ops, int n_ops, const fq_img_format *fmt,
                                  const fq_img_custom_def *custom, int n_custom, fq_img_spec **out, fq_err *err)
    int fq_img_custom_probe(const char *library, const char *symbol, fq_err *err)
