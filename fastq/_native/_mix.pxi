# Batch-level MixUp / CutMix (csrc/image/fq_batch_mix.h), included by _image.pyx.
# fastq/mix.py holds the policy (which output is the label, the soft-label output,
# explain_batch); these functions only check buffers and run the C code without the GIL.
from fastq._native.includes.fq_batch_mix cimport *
from libc.stdlib cimport malloc, free

MIX_DTYPES = {"uint8": FQ_MIX_U8, "float32": FQ_MIX_F32, "float16": FQ_MIX_F16, "bfloat16": FQ_MIX_BF16}
MIX_LABEL_TYPES = {"int64": FQ_MIX_L_I64, "int32": FQ_MIX_L_I32, "uint8": FQ_MIX_L_U8, "int16": FQ_MIX_L_I16,
                   "uint16": FQ_MIX_L_U16, "int8": FQ_MIX_L_I8, "uint32": FQ_MIX_L_U32, "uint64": FQ_MIX_L_U64}
_MIX_KINDS = {FQ_MIX_NONE: None, FQ_MIX_MIXUP: "mixup", FQ_MIX_CUTMIX: "cutmix"}


cdef int _mix_params(tuple params, fq_mix_params *p) except -1:
    """params: (mixup_alpha, cutmix_alpha, switch_prob, prob, label_smoothing, num_classes, mode
    [, correct_lam [, cutmix_minmax]]): mode FQ_MIX_BATCH / ELEM / PAIR = 0 / 1 / 2 (False / True: batch / elem),
    correct_lam True by default, cutmix_minmax None or (min, max)."""
    cdef fq_err err
    p.mixup_alpha, p.cutmix_alpha, p.switch_prob, p.prob, p.label_smoothing = params[:5]
    p.num_classes = params[5]
    p.mode = int(params[6])
    p.correct_lam = 1 if len(params) < 8 or params[7] else 0
    minmax = params[8] if len(params) > 8 else None
    p.minmax = 0 if minmax is None else 1
    p.cutmix_min, p.cutmix_max = (0.0, 0.0) if minmax is None else minmax
    if fq_mix_check(p, &err) != FQ_OK:
        raise_fq_error(&err)
    return 0


def mix_check(tuple params):
    """ValueError (FastqError) when the parameters are bad."""
    cdef fq_mix_params p
    _mix_params(params, &p)


cdef list _mix_draw_dicts(fq_mix_draw *d, int count):
    out = []
    for i in range(count):
        box = (d[i].x0, d[i].y0, d[i].x1, d[i].y1) if d[i].kind == FQ_MIX_CUTMIX else None
        drawn = None if d[i].lam_drawn != d[i].lam_drawn else d[i].lam_drawn  # NaN: a minmax box, no Beta draw
        out.append({"mode": _MIX_KINDS[d[i].kind], "lam": d[i].lam, "lam_drawn": drawn, "box": box})
    return out


def mix_draws(tuple params, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h, int w):
    """The draws of batch `batch` (n rows of h x w): a list of 1 (batch mode), n (elem
    mode) or n / 2 (pair mode) dicts {mode: None | "mixup" | "cutmix", lam, lam_drawn
    (None for a cutmix_minmax box), box (x0, y0, x1, y1) | None}."""
    cdef fq_mix_params p
    cdef fq_err err
    cdef int rc
    _mix_params(params, &p)
    cdef fq_mix_draw *d = <fq_mix_draw *>malloc(sizeof(fq_mix_draw) * (n if n > 0 else 1))
    if d == NULL:
        raise MemoryError()
    try:
        with nogil:
            rc = fq_mix_draw_batch(&p, seed, epoch, batch, n, h, w, d, &err)
        if rc != FQ_OK:
            raise_fq_error(&err)
        return _mix_draw_dicts(d, fq_mix_draw_count(&p, n))
    finally:
        free(d)


def mix_apply(tuple params, uint64_t seed, uint64_t epoch, uint64_t batch, cnp.ndarray images, int dtype,
              int layout, cnp.ndarray labels, int ltype, cnp.ndarray soft):
    """Draw batch `batch`'s parameters and mix `images` (n rows, C-contiguous, rank 4,
    written in place) and write `soft` (float32 n x num_classes) from the integer
    `labels` (n values), all with the GIL released.  Returns the row of a label out of
    range (-1 when all are in range; then nothing is written) and the message."""
    cdef fq_mix_params p
    cdef fq_err err
    cdef int rc, n, h, w, c
    _mix_params(params, &p)
    if images.ndim != 4 or not cnp.PyArray_IS_C_CONTIGUOUS(images) or not images.flags.writeable:
        raise ValueError("mix: images must be a writeable C-contiguous rank-4 array")
    n = <int>images.shape[0]
    if layout == FQ_MIX_NHWC:
        h, w, c = images.shape[1], images.shape[2], images.shape[3]
    else:
        c, h, w = images.shape[1], images.shape[2], images.shape[3]
    if labels.shape[0] != n or labels.size != n or not cnp.PyArray_IS_C_CONTIGUOUS(labels):
        raise ValueError(f"mix: need one contiguous label per row, got {labels.size} labels for {n} rows")
    if (soft.dtype != np.float32 or soft.ndim != 2 or soft.shape[0] != n or soft.shape[1] != p.num_classes
            or not cnp.PyArray_IS_C_CONTIGUOUS(soft)):
        raise ValueError(f"mix: soft labels must be float32 ({n}, {p.num_classes}) C-contiguous")
    if n == 0:
        return -1, ""
    cdef size_t row_bytes = <size_t>cnp.PyArray_NBYTES(images) // <size_t>n
    cdef fq_mix_draw *d = <fq_mix_draw *>malloc(sizeof(fq_mix_draw) * n)
    cdef void *tmp = malloc(row_bytes)
    cdef void *img = cnp.PyArray_DATA(images)
    cdef const void *lab = cnp.PyArray_DATA(labels)
    cdef float *out = <float *>cnp.PyArray_DATA(soft)
    if d == NULL or tmp == NULL:
        free(d)
        free(tmp)
        raise MemoryError()
    try:
        with nogil:
            rc = fq_mix_draw_batch(&p, seed, epoch, batch, n, h, w, d, &err)
            if rc == FQ_OK:
                rc = fq_mix_apply(&p, d, img, dtype, layout, n, h, w, c, lab, ltype, out, tmp, &err)
        if rc != FQ_OK:
            if err.index >= 0:
                return int(err.index), err.msg.decode("utf-8", "replace")
            raise_fq_error(&err)
        return -1, ""
    finally:
        free(d)
        free(tmp)


def mix_beta_samples(uint64_t seed, double a, int64_t n):
    """n Beta(a, a) draws of the MixUp/CutMix sampler (stream keyed (seed, 0, 0))."""
    cdef fq_err err
    cdef int rc
    out = np.empty(n, dtype=np.float64)
    cdef double *o = <double *>cnp.PyArray_DATA(out)
    with nogil:
        rc = fq_mix_beta_samples(seed, a, n, o, &err)
    if rc != FQ_OK:
        raise_fq_error(&err)
    return out
