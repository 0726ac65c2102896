# cython: language_level=3
"""fastq._native._image - the per-sample image path (csrc/image/fq_image.h) for tests and ``explain``.

``ImageSpec`` wraps an immutable ``fq_img_spec``; ``process_encoded`` / ``process_array``
run one sample with the GIL released and return ``(array, explain_dict)``.
"""
import threading

import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint8_t, int64_t, uint64_t
from libc.string cimport memset

from fastq.errors import error_for_code  # noqa: F401 - _records.pxi
from fastq._native._core cimport fq_task_fn, raise_fq_error, TaskBase
# the C API (one extern-only .pxd per header of csrc/, see fastq/_native/includes/)
from fastq._native.includes.fq_common cimport *
from fastq._native.includes.fq_image cimport *
from fastq._native.includes.fq_image_info cimport *
from fastq._native.includes.fq_image_prepare cimport *
from fastq._native.includes.fq_stage_times cimport *
from fastq._native.includes.fq_sample_reader cimport *
from fastq._native.includes.fq_imgtask cimport *
from fastq._native.includes.fq_capi cimport fastq_capi_v1
from fastq._native.includes.fq_crc32c cimport *
from fastq._native.includes.fq_cpu cimport *
from fastq._native.includes.fq_example cimport *
from fastq._native.includes.fq_tfrecord cimport *
from fastq._native.includes.fq_tar cimport *
from fastq._native.includes.fq_readahead cimport *
from fastq._native.includes.fq_tfr_stream cimport *
from fastq._native.includes.fq_spans cimport *

cnp.import_array()

# ---- constants of the C core (csrc/image/fq_image.h), exported for fastq.ops ---------------
DEFAULT_MAX_PIXELS = FQ_IMG_DEFAULT_MAX_PIXELS
MAX_OPS = FQ_IMG_MAX_OPS
MAX_SIDE = FQ_IMG_MAX_SIDE  # largest size / crop / padding of an op, per side
# op class name -> enum fq_op_kind
OP_KINDS = {fq_img_op_name(k).decode(): k for k in range(1, fq_img_op_count() + 1)}
# interpolation name -> enum fq_interp; border name -> enum fq_border
INTERPOLATIONS = {fq_img_interp_name(i).decode(): i for i in range(FQ_INTERP_END)}
BORDERS = {fq_img_border_name(i).decode(): i for i in range(FQ_BORDER_END)}
# output dtype names, in enum fq_dtype order
DTYPES = tuple(fq_img_dtype_name(i).decode() for i in range(FQ_DT_END))

_NP_DTYPES = {"uint8": np.uint8, "float32": np.float32, "float16": np.float16, "bfloat16": None}
_DTYPES = {name: (code, _NP_DTYPES[name]) for code, name in enumerate(DTYPES)}


def numpy_dtype(name):
    """The numpy dtype of output dtype `name`; bfloat16 is ml_dtypes' (the type
    TensorFlow and JAX use), imported only when asked for."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError("dtype='bfloat16' needs the ml_dtypes package (installed with TensorFlow "
                              "and JAX; or pip install ml_dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_DTYPES[name][1])
# fq_img_format.idct by index (FQ_IDCT_ACCURATE, FQ_IDCT_FAST): the JPEG decoder's inverse DCT
IDCTS = ("accurate", "fast")
_LAYOUTS = {"NHWC": FQ_LAYOUT_HWC, "HWC": FQ_LAYOUT_HWC, "NCHW": FQ_LAYOUT_CHW, "CHW": FQ_LAYOUT_CHW}
# enum fq_img_source_format -> the name explain() reports
FORMATS = {i: fq_img_format_name(i).decode().lower() for i in range(FQ_FMT_END)}
_JITTER = ("brightness", "contrast", "saturation", "hue")

# numpy mirror of struct fq_op (static_assert-ed in fq_image_spec.cpp): kind, padding, and
# the union of parameter structs as its flat view of 16 doubles ("f")
# The ABI version of the exported C API table (csrc/image/fq_capi.h) that the TensorFlow
# kernel binds to; reading it here also links the table into this module.
CAPI_ABI_VERSION = fastq_capi_v1.abi_version

FQ_OP_DTYPE = np.dtype([("kind", "<i4"), ("_pad", "<i4"), ("f", "<f8", (16,))], align=True)
assert FQ_OP_DTYPE.itemsize == sizeof(fq_op)


cdef dict _op_descriptors():
    """{kind: (name, params_size, {field: (shape, offset)})} from the C op table
    (fq_img_op_desc): the one declaration of every op's parameters."""
    cdef const fq_op_desc *d
    cdef const fq_op_field *f
    out = {}
    for kind in range(1, fq_img_op_count() + 1):
        d = fq_img_op_desc(kind)
        fields = {}
        for i in range(d.n_fields):
            f = &d.fields[i]
            if f.type != FQ_FIELD_F64:  # the only type today; a new one needs a branch in _put
                raise ImportError(f"{d.name.decode()}.{f.name.decode()}: unknown field type {f.type}")
            fields[f.name.decode()] = (tuple(f.shape[j] for j in range(f.ndim)), f.offset)
        out[kind] = (d.name.decode(), d.params_size, fields)
    return out


_OPS = _op_descriptors()
# op class name -> {field name: shape} (() for a scalar): every field is a float64
OP_FIELDS = {name: {f: shape for f, (shape, _) in fields.items()} for name, _, fields in _OPS.values()}


cdef int _put(double *dst, value, tuple shape, str field) except -1:
    """Write `value` (a number, or nested sequences of `shape`) row-major at dst."""
    cdef Py_ssize_t i, n, step = 1
    if not shape:
        try:
            dst[0] = value
        except TypeError:
            raise TypeError(f"{field}: expected a number, got {value!r}") from None
        return 0
    try:
        n = len(value)
    except TypeError:
        raise TypeError(f"{field}: expected a sequence of shape {shape}, got {value!r}") from None
    if n != shape[0]:
        raise ValueError(f"{field}: expected {shape[0]} values, got {n}")
    for d in shape[1:]:
        step *= <Py_ssize_t> d
    for i in range(n):
        _put(dst + i * step, value[i], shape[1:], field)
    return 0


cdef int _fill_op(fq_op *o, int kind, dict p) except -1:
    """Set o to op `kind` with the parameters `p`, a dict keyed by the field names of
    that kind's descriptor (fq_img_op_desc; a missing or unknown name raises)."""
    memset(o, 0, sizeof(fq_op))
    o.kind = kind
    desc = _OPS.get(kind)
    if desc is None:
        raise ValueError(f"?: unknown op kind {kind}")
    name, _, fields = desc
    missing = set(fields) - set(p)
    if missing:
        raise ValueError(f"{name}: missing parameters {sorted(missing)}")
    extra = set(p) - set(fields)
    if extra:
        raise ValueError(f"{name}: unknown parameters {sorted(extra)}")
    try:
        for field, (shape, offset) in fields.items():
            _put(<double *> (<char *> o.raw + <size_t> offset), p[field], shape, field)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: {e}") from None
    return 0


def pack_ops(ops):
    """An ``FQ_OP_DTYPE`` array from ``(kind, params)`` pairs, ``params`` a dict keyed by
    the field names of that kind's descriptor in the C op table (``OP_FIELDS``)."""
    rows = list(ops)
    arr = np.zeros(len(rows), dtype=FQ_OP_DTYPE)
    cdef cnp.ndarray a = arr
    cdef fq_op *o = <fq_op *> a.data
    for i, (kind, params) in enumerate(rows):
        _fill_op(&o[i], kind, dict(params))
    return arr


def _as_op_array(packed_ops):
    """packed_ops: an FQ_OP_DTYPE array, or (kind, params) pairs with params either a
    dict of named fields (pack_ops) or the raw flat view (<= 16 floats, for tests)."""
    if isinstance(packed_ops, np.ndarray) and packed_ops.dtype == FQ_OP_DTYPE:
        arr = packed_ops
    else:
        rows = list(packed_ops)
        if all(isinstance(p, dict) for _, p in rows):
            return pack_ops(rows)
        arr = np.zeros(len(rows), dtype=FQ_OP_DTYPE)
        for i, (kind, params) in enumerate(rows):
            params = list(params)
            if len(params) > 16:
                raise ValueError(f"op {i}: at most 16 parameters")
            arr[i]["kind"] = kind
            arr[i]["f"][: len(params)] = params
    return np.ascontiguousarray(arr)


def check_chain(packed_ops, dtype="float32"):
    """The chain rules of the C core (fq_img_chain_check, the one place they are
    written) on packed ops.  Returns ``{"out_size": (h, w) or None, "keeps_size": bool,
    "normalize": bool, "error": None or the reason}``: it does not raise, so that the
    caller can say in its own words what to do (see fastq.ops.compile_ops)."""
    arr = _as_op_array(packed_ops)
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {list(DTYPES)}, got {dtype!r}")
    cdef cnp.ndarray a = arr
    cdef int n = len(arr)
    cdef fq_img_chain_info info
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    rc = fq_img_chain_check(<const fq_op *> a.data if n > 0 else NULL, n, _DTYPES[dtype][0], &info, &err)
    return {"out_size": (info.out_h, info.out_w) if info.out_h > 0 else None, "keeps_size": bool(info.keeps_size),
            "normalize": bool(info.normalize), "error": err.msg.decode("utf-8", "replace") if rc != 0 else None}


cdef dict _op_explain(const fq_img_op_explain *r):
    name = fq_img_op_name(r.kind).decode()
    d = {"op": name, "in_shape": (r.in_h, r.in_w), "out_shape": (r.out_h, r.out_w)}
    cdef unsigned fields = fq_img_op_explain_fields(r.kind)  # from the op's record in C
    if fields & FQ_EXPLAIN_BOX:
        d["box"] = (r.box[0], r.box[1], r.box[2], r.box[3])
    if fields & FQ_EXPLAIN_PAD:
        d["pad"] = (r.pad[0], r.pad[1], r.pad[2], r.pad[3])
    if fields & FQ_EXPLAIN_APPLIED:
        d["applied"] = bool(r.applied)
    if fields & FQ_EXPLAIN_JITTER:
        d["order"] = [_JITTER[r.order[i]] for i in range(4) if r.order[i] >= 0]
        for i in range(4):
            d[_JITTER[i]] = r.factor[i]
        d["contrast_mean"] = r.contrast_mean
    if fields & FQ_EXPLAIN_AFFINE:
        d["angle"] = r.params[0]
        d["translate"] = (r.params[1], r.params[2])
        d["scale"] = r.params[3]
        d["shear"] = (r.params[4], r.shear_y)
        d["matrix"] = [[r.matrix[0], r.matrix[1], r.matrix[2]], [r.matrix[3], r.matrix[4], r.matrix[5]]]
    if fields & FQ_EXPLAIN_MAGNITUDE:
        d["magnitude"] = r.factor[0]
    if fields & FQ_EXPLAIN_ERASE:  # RandomErasing: the value (RGB order) or "random", tries drawn
        d["value"] = "random" if r.params[2] != 0 else (r.factor[0], r.factor[1], r.factor[2])
        d["tries"] = int(r.params[1])
    if fields & FQ_EXPLAIN_LIGHTING and r.applied:
        d["alpha"] = (r.factor[0], r.factor[1], r.factor[2])
        d["increment"] = (r.params[0], r.params[1], r.params[2])
    if fields & FQ_EXPLAIN_CUSTOM and r.applied:  # CustomOp / PyFunc: the key of the op's stream
        d["rng_key"] = (<uint64_t> r.params[0] << 32) | <uint64_t> r.params[1]
    if fields & FQ_EXPLAIN_POLICY and name == "TimmAugMix":  # weights, blend, chains, the key of their draws
        w = min(r.applied, 4)
        d["weights"] = [r.factor[j] for j in range(w)]
        d["m"] = r.contrast_mean
        d["chains"] = [[TIMM_OPS[(r.order[j] >> (2 + 5 * k)) & 31] for k in range(r.order[j] & 3)] for j in range(w)]
        d["rng_key"] = (<uint64_t> r.params[0] << 32) | <uint64_t> r.params[1]
    elif fields & FQ_EXPLAIN_POLICY and name in ("TimmRandAugment", "TimmAutoAugment"):  # timm's names, args, ...
        d["policy"] = [_timm_explain(r, k) for k in range(min(r.applied, 4))]
        if name == "TimmAutoAugment":
            d["subpolicy"] = int(r.params[4])
    elif fields & FQ_EXPLAIN_POLICY:  # the ops a policy drew: torchvision's names and magnitudes
        d["policy"] = [{"op": "Identity" if r.order[k] == 0 else fq_img_op_name(r.order[k]).decode(),
                        "magnitude": r.factor[k], "bin": int(r.params[k])} for k in range(min(r.applied, 4))]
        if d["op"] in ("TFRandAugment", "TFAutoAugment"):  # TF's level (0..10) each argument came from
            for k in range(min(r.applied, 4)):
                d["policy"][k]["level"] = r.matrix[k]
        if d["op"] in ("AutoAugment", "TFAutoAugment"):
            d["subpolicy"] = int(r.params[4])
    if fields & FQ_EXPLAIN_TENSORPACK:  # tensorpack: what fastq.tensorpack replays through imgaug
        _tensorpack_explain(r, d)
    if fields & FQ_EXPLAIN_KERAS:  # Keras layers: the draws, Keras's output -> input matrix
        _keras_explain(r, d)
    if fields & FQ_EXPLAIN_IOU_CROP:  # RandomIoUCrop: magnitude = the min IoU option that ended the draw
        d["rounds"], d["trials"], d["iou"] = int(r.params[0]), int(r.params[1]), r.params[2]
    return d


# timm's op names of TimmRandAugment (csrc/image/color/fq_image_aug_timm.h TimmOp order)
TIMM_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "PosterizeIncreasing", "PosterizeOriginal",
            "Solarize", "SolarizeIncreasing", "SolarizeAdd", "Color", "ColorIncreasing", "Contrast",
            "ContrastIncreasing", "Brightness", "BrightnessIncreasing", "Sharpness", "SharpnessIncreasing", "ShearX",
            "ShearY", "TranslateX", "TranslateY", "TranslateXRel", "TranslateYRel", "Desaturate", "GaussianBlur",
            "GaussianBlurRand")
_TIMM_GEOM = frozenset(("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "TranslateXRel", "TranslateYRel"))


cdef dict _timm_explain(const fq_img_op_explain *r, int k):
    """one layer of TimmRandAugment: the op drawn, whether its prob let it run, timm's argument
    (signed), the magnitude it came from (noise and clip applied), the resample of a geometric op"""
    t = abs(r.order[k]) - 1
    d = {"op": TIMM_OPS[t], "applied": r.order[k] > 0}
    if r.order[k] > 0:
        d["magnitude"] = r.factor[k]
        d["level"] = r.matrix[k]
        if TIMM_OPS[t] in _TIMM_GEOM:
            d["resample"] = "bicubic" if r.params[k] != 0 else "bilinear"
        elif TIMM_OPS[t] == "GaussianBlurRand":  # the radius the op drew
            d["radius"] = r.params[k]
    return d

cdef _keras_explain(const fq_img_op_explain *r, dict d):
    n = d["op"]
    if n == "KerasRandomContrast":
        d["factor"] = r.factor[0]
        d["mean"] = tuple(r.params[k] for k in range(3))
        return
    if n == "KerasRandomBrightness":
        d["factor"], d["delta"] = r.factor[0], r.params[0]
        return
    if n == "KerasRandomZoom":
        d["zoom"] = (r.params[0], r.params[1])  # height, width
    elif n == "KerasRandomTranslation":
        d["translation"] = (r.params[0], r.params[1])  # dy, dx (pixels)
    else:
        d["angle"] = r.params[0]
    d["transform"] = [[r.matrix[0], r.matrix[1], r.matrix[2]], [r.matrix[3], r.matrix[4], r.matrix[5]]]


_TP_COLOR = ("brightness", "contrast", "saturation", "lighting")


cdef _tensorpack_explain(const fq_img_op_explain *r, dict d):
    if d["op"] == "TensorpackCrop":  # applied: the sampler found a box; else the fallback
        d["tries"] = int(r.params[0])
        d["resized_shape"] = None if r.applied else (int(r.params[1]), int(r.params[2]))
    else:  # TensorpackColor: the order run, the factors, the lighting alphas (tensorpack's order)
        d["order"] = [_TP_COLOR[r.order[i]] for i in range(4)]
        d["brightness"], d["contrast"], d["saturation"] = r.factor[0], r.factor[1], r.factor[2]
        d["alpha"] = (r.params[0], r.params[1], r.params[2])
        d["contrast_mean"] = r.contrast_mean


cdef dict _explain(const fq_img_explain *ex):
    ops = [_op_explain(&ex.ops[i]) for i in range(ex.n_ops)]
    d = {
        "format": FORMATS.get(ex.src_format, "unknown"),
        "src_shape": (ex.src_h, ex.src_w),
        "src_channels": ex.src_channels,
        "src_bits": ex.src_bits,
        "decode_scale": (ex.scale_num, ex.scale_denom),
        "decoded_shape": (ex.decoded_h, ex.decoded_w),
        "roi": (ex.roi[0], ex.roi[1], ex.roi[2], ex.roi[3]),
        "roi_used": bool(ex.roi_used),
        "crop_src": (ex.crop_src[0], ex.crop_src[1], ex.crop_src[2], ex.crop_src[3]) if ex.has_crop else None,
        "hflip": bool(ex.hflip),
        "vflip": bool(ex.vflip),
        "grayscale": bool(ex.grayscale),
        "ops": ops,
        "out_shape": (ex.out_h, ex.out_w, ex.out_c),
    }
    for o in ops:
        if o["op"] == "ColorJitter" and "jitter" not in d:
            d["jitter"] = {k: o[k] for k in ("order",) + _JITTER}
        if o["op"] == "RandomAffine" and "affine" not in d:
            d["affine"] = o["matrix"]
    if any(ex.ops[i].parent >= 0 for i in range(ex.n_ops)):
        _compose_explain(ex, d)  # compose
    return d


# ---- compose: what the compositions (RandomApply / RandomChoice / RandomOrder) drew ----
cdef _compose_explain(const fq_img_explain *ex, dict d):
    """Add to an explain dict whose chain has compositions: per composition ``children``
    (op indices of its direct children), ``ran`` (those that ran, in the order run),
    RandomChoice ``chosen`` / RandomOrder ``order`` (positions among the children); per op
    under a composition ``parent`` and ``skipped`` (it did not run and drew nothing); and
    ``exec_order``: the plain ops that ran, in the order they ran."""
    cdef int n = ex.n_ops
    parent = [ex.ops[i].parent for i in range(n)]
    comp = [bool(fq_img_op_explain_fields(ex.ops[i].kind) & FQ_EXPLAIN_COMPOSE) for i in range(n)]
    runs = [[ex.ops[i].run[k] for k in range(ex.ops[i].n_run)] for i in range(n)]
    _compose_fill(d, parent, comp, runs)


def _compose_fill(d, parent, comp, runs):
    n = len(parent)
    children = {i: [j for j in range(n) if parent[j] == i] for i in range(n)}
    ran, order = set(), []
    stack = [i for i in reversed(range(n)) if parent[i] < 0]
    while stack:  # depth first, in the order run
        i = stack.pop()
        ran.add(i)
        if comp[i]:
            stack.extend(children[i][k] for k in reversed(runs[i]))
        else:
            order.append(i)
    for i, o in enumerate(d["ops"]):
        if comp[i]:
            o["children"] = children[i]
            o["ran"] = [children[i][k] for k in runs[i]]
            if o["op"] == "RandomChoice":
                o["chosen"] = runs[i][0] if runs[i] else None
            elif o["op"] == "RandomOrder":
                o["order"] = runs[i]
        if parent[i] >= 0:
            o["parent"] = parent[i]
            o["skipped"] = i not in ran
    d["exec_order"] = order


def native_versions():
    """The native libraries this module runs with (csrc/image/fq_image_info.h): libjpeg-turbo's
    build version and the loaded library file, OpenCV's own run-time version call and
    library file, OpenCV's CPU feature line and the SIMD features it found."""
    cdef fq_img_libinfo li
    fq_img_libinfo_get(&li)
    s = lambda b: b.decode("utf-8", "replace")
    return {"libjpeg_turbo": s(li.jpeg_turbo_version), "jpeg_lib_version": li.jpeg_lib_version,
            "libjpeg_library": s(li.jpeg_library), "opencv": s(li.opencv_version),
            "opencv_build": s(li.opencv_build_version), "opencv_library": s(li.opencv_library),
            "opencv_cpu_features": s(li.opencv_cpu_features), "cpu_simd": s(li.cpu_simd).split(),
            "opencv_optimized": bool(li.opencv_optimized)}


def set_opencv_threads(int n):
    """cv::setNumThreads(n) of the OpenCV library fastq links (not pip's cv2).

    A process-global setting that stays until changed: it applies to every
    pipeline and every thread of the process.  Building a Pipeline over an
    image source calls set_opencv_threads(1) (fastq's workers are the
    parallelism; OpenCV's own thread pool inside them would oversubscribe the
    cores)."""
    fq_img_set_opencv_threads(n)


def set_segment_decode(bint on):
    """Process-wide switch of the restart-segment crop decode (docs/prepare.md); on by
    default unless FASTQ_SEGMENT_DECODE=0 was set when the library loaded.  Output is
    the same either way: the switch exists for tests and benchmarks."""
    fq_img_segment_decode_set(1 if on else 0)


def segment_decode_enabled():
    return bool(fq_img_segment_decode_enabled())


def segment_decode_count():
    """How many crop decodes went through a restart-segment mini-JPEG since load."""
    return fq_img_segment_decode_count()


def set_simd_write(bint on):
    """Process-wide switch of the AVX2 float32 write (bit-identical to the table write;
    for tests and benchmarks)."""
    fq_img_simd_write_set(1 if on else 0)


def set_simd_tp(bint on):
    """Process-wide switch of TensorpackColor's AVX2 path (bit-identical to its scalar
    path; for tests and benchmarks).  Returns the previous setting."""
    cdef int was = fq_img_simd_tp_enabled()
    fq_img_simd_tp_set(1 if on else 0)
    return bool(was)


def set_simd_resize(bint on):
    """Process-wide switch of the AVX2 bicubic resize of 8-bit 3-channel images (byte for
    byte cv::resize(INTER_CUBIC) of the linked OpenCV 4.6.0; for tests and benchmarks).
    Returns the previous setting."""
    cdef int was = fq_img_simd_resize_enabled()
    fq_img_simd_resize_set(1 if on else 0)
    return bool(was)


def simd_resize_status():
    """``"on"``, ``"off"`` (switched off) or ``"unavailable: <why>"`` (no AVX2, not x86-64,
    or a linked OpenCV whose bicubic resize this path does not reproduce)."""
    why = fq_img_simd_resize_unavailable().decode()
    if why:
        return "unavailable: " + why
    return "on" if fq_img_simd_resize_enabled() else "off"


def _cpu_names(unsigned features):
    cdef char buf[128]
    return fq_cpu_feature_names(features, buf, sizeof(buf)).decode().split()


_CPU_LEVELS = ("baseline", "avx2", "avx512")


def set_cpu_level(str level):
    """Process-wide mask of the instruction-set extensions fastq's kernels may use
    (csrc/core/fq_cpu.h), as FASTQ_CPU sets it at load: ``"baseline"``, ``"avx2"``,
    ``"avx512"``, or ``"native"`` (everything the CPU has, the default).  A level above the
    CPU's gives what the CPU has.  Every kernel gives the same bytes as the baseline code:
    the mask exists for tests, benchmarks and CPUs that misreport.  Returns the previous
    level's name."""
    cdef int lv = fq_cpu_level_parse(level.encode())
    if lv < 0 or not level:
        raise ValueError(f"set_cpu_level: {level!r} is not one of {', '.join(_CPU_LEVELS)}, native")
    return fq_cpu_level_name(fq_cpu_set_level(lv)).decode()


def cpu_dispatch():
    """Which of fastq's CPU-specific kernels run in this process: the mask (``mask``: the
    FASTQ_CPU level or the last set_cpu_level; ``env``: FASTQ_CPU as read at load, None when
    unset; ``env_error``: why it was not understood, else ""), the extensions the CPU has
    (``detected``) and those in effect (``effective``), the highest level in effect
    (``level``: baseline / avx2 / avx512) and, per kernel family, the code it runs
    (``kernels``; a family's own switch, set_simd_*, can also turn it to the baseline)."""
    cdef unsigned eff = fq_cpu_effective()
    simd = bool(fq_img_simd_write_enabled())
    resize = simd_resize_status()

    def pick(bint on, str fast, str slow="baseline"):
        return fast if on else slow
    kernels = {
        "color_lut": pick(simd and (eff & FQ_CPU_AVX512VBMI), "AVX-512 VBMI"),
        "augment": pick(simd and (eff & FQ_CPU_AVX2), "AVX2"),
        "write_float32": pick(simd and (eff & FQ_CPU_AVX2), "AVX2+FMA"),
        "tensorpack_color": pick(fq_img_simd_tp_enabled() and (eff & FQ_CPU_AVX2), "AVX2"),
        "resize_cubic": "AVX2" if resize == "on" else "baseline (cv::resize: " + resize + ")",
        "resize_pil": pick(eff & FQ_CPU_AVX2, "AVX2"),
        "pil_affine": pick(eff & FQ_CPU_AVX2, "AVX2 (RGB)"),
        "mix_float16": pick(eff & FQ_CPU_F16C, "F16C"),
        "crc32c": pick(eff & FQ_CPU_SSE42, "SSE4.2"),
    }
    level = "avx512" if eff & FQ_CPU_AVX512VBMI else "avx2" if eff & FQ_CPU_AVX2 else "baseline"
    return {"mask": fq_cpu_level_name(fq_cpu_level()).decode(), "env": _CPU_ENV,
            "env_error": fq_cpu_env_error().decode(), "detected": _cpu_names(fq_cpu_detected()),
            "effective": _cpu_names(eff), "level": level, "kernels": kernels}


def _cpu_env_check():
    """FASTQ_CPU as read at load; a warning when it was not understood."""
    import os
    err = fq_cpu_env_error().decode()
    if err:
        import warnings
        warnings.warn("fastq: " + err, RuntimeWarning, stacklevel=2)
    return os.environ.get("FASTQ_CPU")


_CPU_ENV = _cpu_env_check()


cdef _prepared(int rc, fq_err *err, uint8_t *out, fq_prepare_info *info):
    """``(new_bytes or None, info dict)`` of fq_jpeg_prepare / fq_jpeg_downscale; frees
    ``out``; raises the C error."""
    if rc != 0:
        raise_fq_error(err)
    d = {"status": "rewritten" if info.status == FQ_PREP_REWRITTEN else "kept",
         "width": info.width, "height": info.height, "mcus_per_row": info.mcus_per_row,
         "restart_interval": info.restart_interval, "old_restart_interval": info.old_restart_interval,
         "in_bytes": info.in_bytes, "out_bytes": info.out_bytes,
         "why": info.why.decode("utf-8", "replace")}
    if out == NULL:
        return None, d
    try:
        result = (<char *> out)[:info.out_bytes]
    finally:
        fq_jpeg_prepare_free(out)
    return result, d


def prepare_jpeg(data, int target_mcus=4):
    """Losslessly re-encode one JPEG with a restart marker every ~target_mcus MCUs that
    tiles each MCU row (GIL released).  Returns ``(new_bytes or None, info)``; ``None``
    means keep the input as it is (``info["why"]`` says why).  Corrupt JPEGs raise
    fastq.errors.DecodeError."""
    cdef const uint8_t[::1] buf = memoryview(data).cast("B") if len(data) else b"\0"
    cdef size_t n = len(data)
    cdef uint8_t *out = NULL
    cdef fq_prepare_info info
    cdef fq_err err
    cdef int rc
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_jpeg_prepare(&buf[0], n, target_mcus, &out, &info, &err)
    return _prepared(rc, &err, out, &info)


def downscale_jpeg(data, int max_side=0, long long max_pixels=0, int quality=90, int target_mcus=4):
    """Training-resolution copy of one JPEG (lossy; GIL released): when its longer side
    exceeds ``max_side`` or it has more than ``max_pixels`` pixels (0: no limit), decode,
    shrink (INTER_AREA, same aspect) and encode at ``quality`` with restart markers
    (csrc/image/fq_image_prepare.h, fq_jpeg_downscale).  Returns ``(new_bytes or None,
    info)`` like :func:`prepare_jpeg`; ``None``: within the limits or not decodable to
    8-bit gray/RGB (``info["why"]``).  Corrupt JPEGs raise fastq.errors.DecodeError."""
    cdef const uint8_t[::1] buf = memoryview(data).cast("B") if len(data) else b"\0"
    cdef size_t n = len(data)
    cdef uint8_t *out = NULL
    cdef fq_prepare_info info
    cdef fq_err err
    cdef int rc
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_jpeg_downscale(&buf[0], n, max_side, max_pixels, quality, target_mcus, &out, &info, &err)
    return _prepared(rc, &err, out, &info)


def _flat_ops(ops):
    """The fastq.ops objects of a chain in packed-row order: a composition (RandomApply,
    RandomChoice, RandomOrder) then its children, depth first (fastq.ops._compose._rows)."""
    for op in ops:
        yield op
        if op.kind in _K_COMPOSE:
            yield from _flat_ops(op.transforms)


cdef class ImageSpec:
    """An immutable, thread-shareable op chain + output format.

    ``ImageSpec(compiled)`` with the result of ``fastq.ops.compile_ops``, or
    ``ImageSpec(packed_ops, channels=3, dtype="float32", layout="NHWC",
    max_pixels=1<<26, dct_scaling=True, idct="accurate")`` with packed ops (an ``FQ_OP_DTYPE`` array or
    ``(kind, params)`` pairs).
    """
    cdef fq_img_spec *spec
    cdef fq_img_scratch *scratch
    cdef object _lock
    cdef object _np_dtype
    cdef readonly tuple out_shape
    cdef readonly str dtype
    cdef readonly str layout
    cdef readonly int channels
    cdef readonly object max_pixels
    cdef readonly bint dct_scaling
    cdef readonly str idct
    cdef readonly str channel_order

    def __cinit__(self):
        self.spec = NULL
        self.scratch = NULL

    def __init__(self, packed_ops, channels=3, dtype="float32", layout="NHWC", max_pixels=None,
                 dct_scaling=True, idct="accurate"):
        op_objs = ()  # the fastq.ops objects, when known: CustomOp / PyFunc bind through them
        if hasattr(packed_ops, "packed_ops"):  # fastq.ops.CompiledOps
            c = packed_ops
            op_objs = tuple(_flat_ops(c.ops))  # one per packed row: compositions flattened
            packed_ops, channels, dtype, layout = c.packed_ops, c.channels, c.dtype, c.layout
            max_pixels, dct_scaling, idct = c.max_pixels, c.dct_scaling, getattr(c, "idct", "accurate")
            channels = getattr(c, "channel_order", "RGB") if c.channels == 3 else 1
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {sorted(_LAYOUTS)}, got {layout!r}")
        if idct not in IDCTS:
            raise ValueError(f"idct must be one of {', '.join(map(repr, IDCTS))}, got {idct!r}")
        arr = _as_op_array(packed_ops)
        cdef fq_img_format fmt
        # channels: 3 / "RGB", "BGR" (the output channels reversed), 1 / "gray"
        order = FQ_ORDER_RGB
        if isinstance(channels, str):
            key = channels.upper()
            if key not in ("RGB", "BGR", "GRAY"):
                raise ValueError(f"channels must be 3, 1, 'RGB', 'BGR' or 'gray', got {channels!r}")
            channels = 1 if key == "GRAY" else 3
            order = FQ_ORDER_BGR if key == "BGR" else FQ_ORDER_RGB
        fmt.channels = channels
        fmt.channel_order = order
        fmt.dtype = _DTYPES[dtype][0]
        fmt.layout = _LAYOUTS[layout]
        fmt.max_pixels = DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels
        fmt.dct_scaling = 1 if dct_scaling else 0
        fmt.idct = IDCTS.index(idct)  # FQ_IDCT_ACCURATE, FQ_IDCT_FAST
        _spec_create(arr, op_objs, &fmt, &self.spec)  # _custom.pxi
        self.scratch = fq_img_scratch_new()
        if self.scratch == NULL:
            raise MemoryError()
        cdef int h = 0, w = 0, ch = 0
        fq_img_spec_out_shape(self.spec, &h, &w, &ch)
        self.out_shape = (h, w, ch) if fmt.layout == FQ_LAYOUT_HWC else (ch, h, w)
        self.dtype = dtype
        self.layout = "NHWC" if fmt.layout == FQ_LAYOUT_HWC else "NCHW"
        self.channels = ch
        self.max_pixels = fmt.max_pixels
        self.dct_scaling = bool(dct_scaling)
        self.idct = idct
        self.channel_order = "BGR" if order == FQ_ORDER_BGR else "RGB"
        self._np_dtype = numpy_dtype(dtype)
        self._lock = threading.Lock()

    def __dealloc__(self):
        if self.scratch != NULL:
            fq_img_scratch_free(self.scratch)
        if self.spec != NULL:
            fq_img_spec_free(self.spec)

    @property
    def row_bytes(self):
        return fq_img_spec_row_bytes(self.spec)

    def plan_decode(self, int src_h, int src_w, uint64_t seed=0, uint64_t epoch=0, uint64_t index=0):
        """What the JPEG decoder does of op 0 for sample (seed, epoch, index) of an
        src_h x src_w JPEG (fq_img_plan_decode; no pixels touched): boxes are (x, y, w, h)."""
        cdef fq_img_decode_plan dp
        cdef fq_err err
        memset(&err, 0, sizeof(err))
        if fq_img_plan_decode(self.spec, src_h, src_w, seed, epoch, index, &dp, &err) != 0:
            raise_fq_error(&err)
        return {"first_op": fq_img_op_name(dp.first_kind).decode() if dp.first_kind else None,
                "box_op": bool(dp.box_op), "resize_after": bool(dp.resize_after),
                "box": (dp.box[0], dp.box[1], dp.box[2], dp.box[3]), "out_shape": (dp.out_h, dp.out_w),
                "interp": fq_img_interp_name(dp.interp).decode() if dp.interp >= 0 else None,
                "scale": (dp.scale_num, 8), "scaled_shape": (dp.scaled_h, dp.scaled_w),
                "scaled_box": (dp.sbox[0], dp.sbox[1], dp.sbox[2], dp.sbox[3]),
                "roi": (dp.roi[0], dp.roi[1], dp.roi[2], dp.roi[3]), "roi_used": bool(dp.roi_used)}

    cdef fq_img_scratch *_take(self, bint *own):
        # the object's scratch when free, else a temporary one (calls from several threads)
        if self._lock.acquire(False):
            own[0] = False
            return self.scratch
        own[0] = True
        return fq_img_scratch_new()

    cdef _give(self, fq_img_scratch *s, bint own):
        if own:
            fq_img_scratch_free(s)
        else:
            self._lock.release()

    cdef tuple _process(self, bint encoded, const uint8_t *src, size_t n, int h, int w, int c,
                        size_t stride, uint64_t seed, uint64_t epoch, uint64_t index, boxes=None):
        """Run one sample on this thread (GIL released) -> (ndarray, explain).  boxes: the
        sample's (n, 4) xyxy source pixels, which RandomIoUCrop draws from (None: none)."""
        cdef cnp.ndarray bx = np.ascontiguousarray(np.asarray(boxes, np.float32).reshape(-1, 4)) \
            if boxes is not None else np.zeros((0, 4), np.float32)
        cdef const float *bp = <const float *> bx.data
        cdef int nb = bx.shape[0] if boxes is not None else -1
        out = np.empty(self.out_shape, dtype=self._np_dtype)
        cdef cnp.ndarray o = out
        cdef void *dst = o.data
        cdef fq_img_explain ex
        cdef fq_err err
        cdef int rc
        cdef bint own = False
        cdef fq_img_scratch *s = self._take(&own)
        if s == NULL:
            raise MemoryError()
        memset(&err, 0, sizeof(err))
        try:
            with nogil:
                fq_img_scratch_set_boxes(s, bp, bp + 1, bp + 2, bp + 3, 4, nb, 0)
                if encoded:
                    rc = fq_img_process_encoded(self.spec, s, src, n, seed, epoch, index, dst, &ex, &err)
                else:
                    rc = fq_img_process_array(self.spec, s, src, h, w, c, stride, seed, epoch, index, dst,
                                              &ex, &err)
        finally:
            self._give(s, own)
        if rc != 0:
            raise_fq_error(&err)
        return out, _explain(&ex)

    def process_encoded(self, data, uint64_t seed=0, uint64_t epoch=0, uint64_t index=0, boxes=None):
        """Decode + augment one encoded image -> (ndarray out_shape, explain dict).  ``boxes``:
        the sample's (n, 4) xyxy source pixels, which RandomIoUCrop draws its crop from."""
        cdef const uint8_t[::1] buf = memoryview(data).cast("B") if len(data) else b"\0"
        return self._process(True, &buf[0], len(data), 0, 0, 0, 0, seed, epoch, index, boxes)

    def process_array(self, pixels, uint64_t seed=0, uint64_t epoch=0, uint64_t index=0, boxes=None):
        """Augment one HxWxC (C = 1, 3 RGB, 4 RGBA) or HxW uint8 array -> (ndarray, explain)
        (``boxes`` as process_encoded)."""
        arr = np.asarray(pixels)
        if arr.dtype != np.uint8:
            raise TypeError(f"process_array needs uint8 pixels, got {arr.dtype}")
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3:
            raise ValueError(f"process_array needs an HxWxC array, got shape {arr.shape}")
        if arr.strides[2] != 1 or arr.strides[1] != arr.shape[2]:
            arr = np.ascontiguousarray(arr)
        cdef cnp.ndarray a = arr
        cdef size_t stride = arr.strides[0] if arr.shape[0] > 0 else 0
        return self._process(False, <const uint8_t *> a.data, 0, arr.shape[0], arr.shape[1], arr.shape[2],
                             stride, seed, epoch, index, boxes)
include "_imgtask.pxi"
include "_spans.pxi"
include "_records.pxi"
include "_mix.pxi"
include "_custom.pxi"
include "_targets.pxi"
include "_batchpad.pxi"
