# Included at the end of fastq/_native/_image.pyx: custom ops (docs/custom_ops.md).
#
# CustomOp: a C function of a user library; the C core (csrc/image/api/fq_image_custom.cpp)
# loads it when a spec is created and calls it GIL-free from the native workers.
# PyFunc: a Python callable, run through _pyfunc_call, a C function of the custom-op
# ABI that takes the GIL around the call.  Both are bound to a spec by slot: the op's
# `slot` parameter is its place in the table given to fq_img_spec_create_custom.
import traceback as _traceback

from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from fastq._native.includes.fastq_custom_op cimport fq_custom_rng, FASTQ_CUSTOM_OP_ABI_VERSION

CUSTOM_OP_ABI_VERSION = FASTQ_CUSTOM_OP_ABI_VERSION
_K_CUSTOM = (OP_KINDS["CustomOp"], OP_KINDS["PyFunc"])
_K_COMPOSE = (OP_KINDS["RandomApply"], OP_KINDS["RandomChoice"], OP_KINDS["RandomOrder"])


def probe_custom(library, symbol):
    """Load ``symbol`` of ``library`` as a spec would and check its ABI version (no init);
    raises InvalidArgumentError naming what is missing."""
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    lib = library.encode() if isinstance(library, str) else bytes(library)
    sym = symbol.encode()
    if fq_img_custom_probe(lib, sym, &err) != 0:
        raise_fq_error(&err)


cdef int _copy_msg(str text, char *errmsg, size_t errmsg_len) noexcept:
    """text (UTF-8, cut at errmsg_len - 1 bytes) into errmsg, NUL-terminated."""
    if errmsg_len == 0:
        return 0
    b = text.encode("utf-8", "replace")[:errmsg_len - 1]
    memcpy(errmsg, <const char *> b, len(b))
    errmsg[len(b)] = 0
    return 0


cdef str _short_traceback(BaseException e):
    """The exception first (what a cut message must keep), then the traceback's frames
    innermost first, one line each."""
    head = "".join(_traceback.format_exception_only(type(e), e)).strip()
    frames = _traceback.extract_tb(e.__traceback__)[1:]  # [0] is _pyfunc_run itself
    where = "; ".join(f'File "{f.filename}", line {f.lineno}, in {f.name}' + (f": {f.line}" if f.line else "")
                      for f in reversed(frames))
    return f"{head} | Traceback (innermost first): {where}" if where else head


cdef int _pyfunc_run(object op, uint8_t *pixels, int h, int w, int c, size_t row_stride, fq_custom_rng *rng,
                     char *errmsg, size_t errmsg_len):
    """Call op.fn(view, numpy Generator) with the GIL held; 0 or 1 (message in errmsg)."""
    cdef cnp.npy_intp dims[3]
    cdef cnp.npy_intp strides[3]
    try:
        dims[0], dims[1], dims[2] = h, w, c
        strides[0], strides[1], strides[2] = <cnp.npy_intp> row_stride, c, 1
        view = cnp.PyArray_New(np.ndarray, 3, dims, cnp.NPY_UINT8, strides, pixels, 0,
                               cnp.NPY_ARRAY_WRITEABLE | cnp.NPY_ARRAY_ALIGNED, None)
        gen = np.random.default_rng(rng.next_u64(rng))
        out = op.fn(view, gen)
        if out is not None:
            if not isinstance(out, np.ndarray) or out.shape != view.shape or out.dtype != np.uint8:
                raise TypeError(f"{op.name} must return None (in place) or a uint8 array of shape {view.shape}, "
                                f"got {type(out).__name__}"
                                + (f" {out.dtype} {out.shape}" if isinstance(out, np.ndarray) else ""))
            if out.ctypes.data != view.ctypes.data:
                np.copyto(view, out)
        return 0
    except BaseException as e:
        _copy_msg(_short_traceback(e), errmsg, errmsg_len)
        return 1


cdef int _pyfunc_call(void *state, uint8_t *pixels, int h, int w, int c, size_t row_stride, const double *params,
                      int n_params, fq_custom_rng *rng, char *errmsg, size_t errmsg_len) noexcept nogil:
    with gil:
        return _pyfunc_run(<object> state, pixels, h, w, c, row_stride, rng, errmsg, errmsg_len)


cdef void _pyfunc_release(void *state) noexcept nogil:
    with gil:
        Py_DECREF(<object> state)


cdef int _spec_create(packed, tuple op_objs, const fq_img_format *fmt, fq_img_spec **out) except -1:
    """fq_img_spec_create_custom for packed ops whose CustomOp / PyFunc ops are op_objs[i]
    (fastq.ops objects, one per packed row; () when only packed ops are known: a custom op
    then fails with the C core's message).  Each custom op gets the next slot."""
    cdef fq_err err
    cdef cnp.ndarray a
    cdef int i, n, rc, n_custom = 0
    cdef fq_img_custom_def *defs = NULL
    cdef cnp.ndarray prm
    memset(&err, 0, sizeof(err))
    arr = packed
    keep = []
    customs = [i for i in range(len(arr)) if arr[i]["kind"] in _K_CUSTOM] if op_objs else []
    if customs:
        if len(op_objs) != len(arr):
            raise ValueError("ImageSpec: the op objects do not match the packed ops")
        arr = arr.copy()
        defs = <fq_img_custom_def *> malloc(len(customs) * sizeof(fq_img_custom_def))
        if defs == NULL:
            raise MemoryError()
        memset(defs, 0, len(customs) * sizeof(fq_img_custom_def))
    try:
        for slot, i in enumerate(customs):
            op = op_objs[i]
            arr[i]["f"][0] = slot
            if arr[i]["kind"] == OP_KINDS["CustomOp"]:
                lib = op.library.encode() if isinstance(op.library, str) else bytes(op.library)
                sym = op.symbol.encode()
                prm = np.ascontiguousarray(op.params, dtype=np.float64)
                keep += [lib, sym, prm]
                defs[slot].library = lib
                defs[slot].symbol = sym
                defs[slot].n_params = len(prm)
                defs[slot].params = <const double *> prm.data if len(prm) else NULL
            else:
                name = op.name.encode("utf-8", "replace")
                keep.append(name)
                defs[slot].fn = _pyfunc_call
                defs[slot].state = <void *> op
                defs[slot].release = _pyfunc_release
                defs[slot].name = name
                Py_INCREF(op)  # the spec's reference, dropped by _pyfunc_release
            n_custom += 1
        arr = np.ascontiguousarray(arr)
    except BaseException:
        # hand the references taken so far to the C core, which releases them on failure
        fq_img_spec_create_custom(NULL, 0, NULL, defs, n_custom, NULL, NULL)
        free(defs)
        raise
    a = arr
    n = len(arr)
    rc = fq_img_spec_create_custom(<const fq_op *> a.data if n > 0 else NULL, n, fmt, defs, n_custom, out, &err)
    free(defs)
    if rc != 0:
        raise_fq_error(&err)
    return 0
