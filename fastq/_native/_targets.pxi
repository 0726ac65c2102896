# Included at the end of fastq/_native/_image.pyx: dense targets through an explain record
# (csrc/image/fq_image_targets.h).  The explain dict of process_*/explain() is turned
# back into a C fq_img_explain; every function runs with the GIL released.

from libc.stdint cimport int32_t, uint16_t
from fastq._native.includes.fq_image_targets cimport *


cdef int _explain_from_dict(d, fq_img_explain *ex) except -1:
    memset(ex, 0, sizeof(ex[0]))
    try:
        ops = d["ops"]
        ex.src_h, ex.src_w = d["src_shape"]
        ex.out_h, ex.out_w, ex.out_c = d["out_shape"]
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError(f"targets: need an explain record (a dict from process_* / Pipeline.explain), got {type(d).__name__}") from e
    if len(ops) > 16:
        raise ValueError(f"targets: an explain record has at most 16 ops, got {len(ops)}")
    ex.n_ops = len(ops)
    cdef fq_img_op_explain *r
    for i, o in enumerate(ops):
        r = &ex.ops[i]
        r.kind = fq_img_op_kind(str(o["op"]).encode())
        if r.kind == 0:
            raise ValueError(f"targets: op {i}: unknown op {o['op']!r}")
        r.in_h, r.in_w = o["in_shape"]
        r.out_h, r.out_w = o["out_shape"]
        if "box" in o:
            for k in range(4):
                r.box[k] = o["box"][k]
        if "pad" in o:
            for k in range(4):
                r.pad[k] = o["pad"][k]
        r.applied = 1 if o.get("applied", True) else 0
        if "magnitude" in o:
            r.factor[0] = o["magnitude"]
        if "matrix" in o:
            for k in range(6):
                r.matrix[k] = o["matrix"][k // 3][k % 3]
    return 0


def targets_rule(kind):
    """0 refused, 1 pixel-only, 2 geometric (fq_tgt_rule)."""
    return fq_tgt_rule(kind)


def targets_check_ops(packed_ops):
    """Raise for the first op of a packed chain without a target rule."""
    arr = _as_op_array(packed_ops)
    cdef cnp.ndarray a = arr
    cdef int n = len(arr)
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    if fq_tgt_check_ops(<const fq_op *> a.data if n > 0 else NULL, n, &err) != 0:
        raise_fq_error(&err)


def targets_boxes(explain, boxes, classes, int max_boxes, double min_area, double min_visibility, bint truncate):
    cdef fq_img_explain ex
    _explain_from_dict(explain, &ex)
    b = np.ascontiguousarray(np.asarray(boxes, dtype=np.float32).reshape(-1, 4) if np.size(boxes) else
                             np.zeros((0, 4), np.float32))
    cdef int n = b.shape[0]
    c = None
    if classes is not None:
        c = np.ascontiguousarray(np.asarray(classes).reshape(-1))
        if c.shape[0] != n:
            raise ValueError(f"boxes: {n} boxes but {c.shape[0]} classes")
        if c.dtype.kind not in "iu" and c.size:
            raise TypeError(f"boxes: classes must be integers, got {c.dtype}")
        c = c.astype(np.int32)
    if max_boxes < 0:
        raise ValueError("boxes: max_boxes must be >= 0")
    ob = np.zeros((max_boxes, 4), np.float32)
    oc = np.full((max_boxes,), -1, np.int32)
    oi = np.full((max_boxes,), -1, np.int32)
    cdef fq_tgt_box_opts o
    o.min_area, o.min_visibility, o.truncate = min_area, min_visibility, truncate
    cdef cnp.ndarray ab = b, aob = ob, aoc = oc, aoi = oi
    cdef cnp.ndarray ac
    cdef const int32_t *cp = NULL
    if c is not None:
        ac = c
        cp = <const int32_t *> ac.data
    cdef int count = 0, ntr = 0, rc
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_tgt_boxes(&ex, <const float *> ab.data, cp, n, max_boxes, &o, <float *> aob.data,
                          <int32_t *> aoc.data, <int32_t *> aoi.data, &count, &ntr, &err)
    if rc != 0:
        raise_fq_error(&err)
    return ob, oc, oi, count, ntr


def targets_keypoints(explain, keypoints, flip_index):
    cdef fq_img_explain ex
    _explain_from_dict(explain, &ex)
    k = np.ascontiguousarray(np.asarray(keypoints, dtype=np.float32))
    if k.ndim != 3 or k.shape[2] != 3:
        raise ValueError(f"keypoints: need an (N, K, 3) array of x, y, visibility, got shape {k.shape}")
    cdef int n = k.shape[0], kk = k.shape[1]
    out = np.empty_like(k)
    cdef cnp.ndarray ak = k, ao = out
    cdef cnp.ndarray af
    cdef const int32_t *fp = NULL
    if flip_index is not None:
        f = np.ascontiguousarray(np.asarray(flip_index).astype(np.int32).reshape(-1))
        if f.shape[0] != kk:
            raise ValueError(f"keypoints: flip_index has {f.shape[0]} entries for {kk} keypoints")
        af = f
        fp = <const int32_t *> af.data
    cdef int rc
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_tgt_keypoints(&ex, <const float *> ak.data, n, kk, fp, <float *> ao.data, &err)
    if rc != 0:
        raise_fq_error(&err)
    return out


def targets_mask(explain, mask, unsigned fill, int sampling=FQ_TGT_CENTER):
    cdef fq_img_explain ex
    _explain_from_dict(explain, &ex)
    m = np.asarray(mask)
    if m.dtype not in (np.uint8, np.uint16) or m.ndim != 2:
        raise TypeError(f"mask: need an HxW uint8 or uint16 array, got {m.dtype} {m.shape}")
    if m.strides[1] != m.itemsize or m.strides[0] < 0:
        m = np.ascontiguousarray(m)
    n_ops = ex.n_ops
    oh = ex.ops[n_ops - 1].out_h if n_ops else m.shape[0]
    ow = ex.ops[n_ops - 1].out_w if n_ops else m.shape[1]
    out = np.empty((oh, ow), m.dtype)
    cdef cnp.ndarray am = m, ao = out
    cdef int h = m.shape[0], w = m.shape[1], es = m.itemsize, rc
    cdef size_t stride = m.strides[0]
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_tgt_mask(&ex, <const void *> am.data, h, w, es, stride, fill, sampling, <void *> ao.data, &err)
    if rc != 0:
        raise_fq_error(&err)
    return out


def targets_image_info(explain):
    cdef fq_img_explain ex
    _explain_from_dict(explain, &ex)
    cdef double v[8]
    cdef int rc
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_tgt_image_info(&ex, v, &err)
    if rc != 0:
        raise_fq_error(&err)
    return np.array([v[i] for i in range(8)], np.float32).reshape(4, 2)


cdef _out_hw(fq_img_explain *ex):
    if ex.n_ops:
        return ex.ops[ex.n_ops - 1].out_h, ex.ops[ex.n_ops - 1].out_w
    return ex.src_h, ex.src_w


def targets_polygons(explain, rings, box=None, size=None):
    """One instance's polygon rings (a list of (P, 2) float arrays) -> out_h x out_w uint8, or
    with box (x0, y0, x1, y1 output pixels) and size (mh, mw): in the box at mh x mw."""
    cdef fq_img_explain ex
    _explain_from_dict(explain, &ex)
    rs = [np.asarray(r, np.float32).reshape(-1, 2) for r in rings]
    xy = np.ascontiguousarray(np.concatenate(rs) if rs else np.zeros((0, 2), np.float32))
    off = np.zeros(len(rs) + 1, np.int64)
    np.cumsum([len(r) for r in rs], out=off[1:])
    oh, ow = _out_hw(&ex) if box is None else size
    out = np.zeros((oh, ow), np.uint8)
    bx = np.ascontiguousarray(np.zeros(4) if box is None else box, np.float32).reshape(4)
    cdef cnp.ndarray axy = xy, aoff = off, ao = out, abx = bx
    cdef int nr = len(rs), rc, mh = oh, mw = ow
    cdef bint with_box = box is not None
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    with nogil:
        if with_box:
            rc = fq_tgt_polygons_box(&ex, <const float *> axy.data, <const int64_t *> aoff.data, nr,
                                     <const float *> abx.data, mh, mw, <uint8_t *> ao.data, &err)
        else:
            rc = fq_tgt_polygons(&ex, <const float *> axy.data, <const int64_t *> aoff.data, nr,
                                 <uint8_t *> ao.data, &err)
    if rc != 0:
        raise_fq_error(&err)
    return out


def targets_rle(explain, counts, int h, int w, int sampling=FQ_TGT_CENTER):
    """One instance's run lengths (COCO order) of an h x w source mask -> out_h x out_w uint8."""
    cdef fq_img_explain ex
    _explain_from_dict(explain, &ex)
    c = np.asarray(counts)
    if c.size and (c.dtype.kind not in "iu" or c.min() < 0 or c.max() > 0xFFFFFFFF):
        raise ValueError("RLE: run lengths must be integers in [0, 2**32)")
    c = np.ascontiguousarray(c.reshape(-1), np.uint32)
    oh, ow = _out_hw(&ex)
    out = np.zeros((oh, ow), np.uint8)
    cdef cnp.ndarray ac = c, ao = out
    cdef int64_t m = c.shape[0]
    cdef int rc
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_tgt_rle(&ex, <const uint32_t *> ac.data, m, h, w, sampling, <uint8_t *> ao.data, &err)
    if rc != 0:
        raise_fq_error(&err)
    return out


def targets_mask_box(mask, box, size):
    """box (x0, y0, x1, y1) of an HxW uint8 mask sampled to size (mh, mw), nearest (fq_tgt_mask_box)."""
    m = np.ascontiguousarray(mask, np.uint8)
    bx = np.ascontiguousarray(box, np.float32).reshape(4)
    if m.ndim != 2 or not np.isfinite(bx).all() or min(size) < 1:
        raise ValueError("mask box: need an HxW mask, a finite box and a size >= 1")
    out = np.zeros(tuple(size), np.uint8)
    cdef cnp.ndarray am = m, abx = bx, ao = out
    cdef int h = m.shape[0], w = m.shape[1], mh = size[0], mw = size[1]
    with nogil:
        fq_tgt_mask_box(<const uint8_t *> am.data, h, w, <const float *> abx.data, mh, mw, <uint8_t *> ao.data)
    return out
