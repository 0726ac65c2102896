"""fastq.tf.dataset's native feed: the tf.data source op ``FastqDataset``.

The op (csrc/tf/fq_tf_dataset.cc, built into fastq's TensorFlow kernel library by
fastq.tf.ops) reads a Pipeline's ring in C++: per batch it takes the next slot of its epoch,
applies what the Python consumer applies (MixUp/CutMix, pad="batch" repacking) and returns
tensors that alias the slot through a refcounted TensorBuffer - no Python, no GIL, no copy.
The slot goes back to the producers when the last tensor that views it is freed.

Python runs once per epoch, through ctypes callbacks the kernel calls from the TF
thread that drives the iterator (csrc/tf/fq_tf_feed.h):

* ``_begin``: claims the pipeline (one live tf.data iteration per pipeline), resumes a
  checkpointed position (``load_state_dict``), starts the epoch (``Pipeline._begin_epoch``
  with :class:`_NativeEpochIterator`) and fills the epoch descriptor, including a ring
  reference the kernel then owns;
* ``_end``: the epoch is over (all batches taken, iterator destroyed mid-epoch, pipeline
  closed): stops the producers, releases the claim;
* ``_fail``: a batch carries a failed sample, MixUp refused a batch, the consumer stalled or
  the run was superseded: builds the exception the Python feed would raise (class, message,
  file of the sample), ends the epoch, and returns TensorFlow's error code and the text;
* ``_peek``: an iterator that has not begun its epoch is being checkpointed: the epoch and
  position its first element would begin at, so that the checkpoint restores exactly there.

A Pipeline is registered under a ``feed_id`` (the op's attribute) and reached through a
weak reference: the dataset objects hold the strong one (as with from_generator).
"""
import atexit
import ctypes
import itertools
import logging
import os
import re
import threading
import weakref
from typing import Any, Dict, Optional, Tuple, cast

import numpy as np

from fastq._native import _core
from fastq.errors import FastqError, PipelineClosedError, StalledError, SupersededIterationError
from fastq.pipeline import Pipeline, _EpochIterator

log = logging.getLogger("fastq.tf")

MAX_OUTPUTS = 16
MAX_DIMS = 8
END_DONE, END_ABANDONED, END_CLOSED = 0, 1, 2
FAIL_SAMPLE, FAIL_MIX, FAIL_RING, FAIL_COUNT = 0, 1, 2, 3
_FQ_E_CANCELLED, _FQ_E_STALLED = 5, 12
# absl::StatusCode
_UNKNOWN, _INVALID_ARGUMENT, _OUT_OF_RANGE, _FAILED_PRECONDITION = 2, 3, 11, 9
_RESOURCE_EXHAUSTED, _UNIMPLEMENTED = 8, 12


class ConcurrentIterationError(FastqError):
    """A tf.data iterator tried to read a Pipeline that another live tf.data
    iterator is already reading."""


# -- one live tf.data iteration per pipeline (both feeds of fastq.tf) --------------------

class _Claims:
    """Which tf.data iteration, if any, is reading each pipeline."""

    def __init__(self):
        self._lock = threading.Lock()
        self._owner = weakref.WeakKeyDictionary()  # Pipeline -> description
        self._count = 0

    def claim(self, pipeline):
        with self._lock:
            held = self._owner.get(pipeline)
            if held is not None:
                raise ConcurrentIterationError(
                    f"this fastq Pipeline is already being read by another live tf.data iterator ({held}). "
                    f"A Pipeline runs one epoch at a time: finish or delete the other iterator first "
                    f"(del it; for Keras, let fit/evaluate return), or build a second Pipeline for a "
                    f"second stream.")
            self._count += 1
            token = f"tf.data iteration #{self._count}, pipeline epoch {pipeline.epoch}"
            self._owner[pipeline] = token
            return token

    def release(self, pipeline, token):
        with self._lock:
            if self._owner.get(pipeline) == token:
                del self._owner[pipeline]


_CLAIMS = _Claims()


class Unsupported(Exception):
    """The pipeline uses something the native feed does not do (the reason is the message)."""


# -- the descriptor of csrc/tf/fq_tf_feed.h ------------------------------------------

class _Output(ctypes.Structure):
    _fields_ = [("block", ctypes.c_int32), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("pad_hdim", ctypes.c_int32), ("dims", ctypes.c_int64 * MAX_DIMS),
                ("pad_planes", ctypes.c_int64), ("pad_px", ctypes.c_int64)]


_I32 = ctypes.c_int32
_F64 = ctypes.c_double


class _Epoch(ctypes.Structure):
    _fields_ = cast(Any, [("struct_size", ctypes.c_uint64), ("ring", ctypes.c_void_p), ("run_id", ctypes.c_int64),
                 ("epoch", ctypes.c_int64), ("position", ctypes.c_int64), ("stall_timeout_ns", ctypes.c_int64),
                 ("position_out", ctypes.c_void_p), ("n_outputs", _I32), ("pinned", _I32),
                 ("pad", _I32), ("pad_sizes_block", _I32), ("pad_multiple", _I32), ("pad_cap_h", _I32),
                 ("pad_cap_w", _I32), ("mix", _I32)]
                + [(f"mix_{n}", _F64) for n in ("mixup_alpha", "cutmix_alpha", "switch_prob", "prob",
                                                 "label_smoothing", "cutmix_min", "cutmix_max")]
                + [("mix_num_classes", ctypes.c_int64)]
                + [(f"mix_{n}", _I32) for n in ("mode", "correct_lam", "minmax", "dtype", "layout", "ltype",
                                                 "image_block", "label_block", "soft_block", "h", "w", "c")]
                + [("mix_seed", ctypes.c_uint64), ("out", _Output * MAX_OUTPUTS)])


def _layout():
    """What fastq_tf_feed_layout reports, computed from the ctypes mirror."""
    E, O = _Epoch, _Output
    return [ctypes.sizeof(E), ctypes.sizeof(O), E.ring.offset, E.position_out.offset, E.n_outputs.offset,
            E.pad.offset, E.mix.offset, E.mix_mixup_alpha.offset, E.mix_num_classes.offset, E.mix_mode.offset,
            E.mix_seed.offset, E.out.offset, O.dims.offset, O.pad_planes.offset, O.pad_px.offset]


_BEGIN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(_Epoch),
                          ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_size_t)
_END = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int, ctypes.c_int64)
_FAIL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_char_p,
                         ctypes.c_void_p, ctypes.c_size_t)
_PEEK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64),
                         ctypes.c_void_p, ctypes.c_size_t)


# -- what the kernel does to each batch of a pipeline ------------------------------------

def plan(pipeline: Pipeline) -> Dict[str, Any]:
    """The per-pipeline part of the epoch descriptor: outputs (ring block, TF dtype,
    per-sample shape), pad="batch" and mix parameters.  Raises :class:`Unsupported`."""
    import tensorflow as tf
    specs = [(tuple(s), np.dtype(d)) for s, d in pipeline._backend.output_spec()]
    mixer = pipeline._mixer()
    ring_specs = mixer.ring_spec(specs) if mixer is not None else specs
    public = pipeline.output_spec
    if mixer is not None and not mixer.in_ring:
        raise Unsupported("mix= over a Python iterable source (its soft labels are made outside the ring)")
    if len(public) > MAX_OUTPUTS:
        raise Unsupported(f"{len(public)} outputs (the native feed takes at most {MAX_OUTPUTS})")
    outputs = []
    for k in range(len(public)):
        block = len(ring_specs) - 1 if mixer is not None and k == mixer.LABEL else k
        shape, dtype = ring_specs[block]
        if len(shape) > MAX_DIMS:
            raise Unsupported(f"output {k} has {len(shape)} dimensions per sample (the native feed takes "
                              f"at most {MAX_DIMS})")
        try:
            tf_dtype = tf.as_dtype(dtype).as_datatype_enum
        except TypeError as e:
            raise Unsupported(f"output {k}: dtype {dtype} has no TensorFlow dtype ({e})") from None
        outputs.append({"block": block, "dtype": tf_dtype, "dims": shape, "pad_hdim": -1, "planes": 0, "px": 0})
    out: Dict[str, Any] = {"outputs": outputs, "pad": None, "mix": None}
    bp = pipeline._batch_pad
    if bp is not None:
        for k, shape, dt in bp.outputs:
            h0 = bp._hdim(k, shape)
            outputs[k].update(pad_hdim=h0, planes=int(np.prod(shape[:h0], dtype=np.int64)),
                              px=int(np.prod(shape[h0 + 2:], dtype=np.int64)) * np.dtype(dt).itemsize)
        out["pad"] = {"sizes_block": bp.sizes_index, "multiple": bp.multiple, "cap": bp.cap}
    if mixer is not None:
        (ishape, _), n_blocks = specs[0], len(ring_specs)
        c = ishape[2] if mixer.layout == "NHWC" else ishape[0]
        p = mixer.params
        minmax = p[8] if len(p) > 8 else None
        out["mix"] = {"mixup_alpha": p[0], "cutmix_alpha": p[1], "switch_prob": p[2], "prob": p[3],
                      "label_smoothing": p[4], "num_classes": p[5], "mode": int(p[6]),
                      "correct_lam": 1 if len(p) < 8 or p[7] else 0, "minmax": 0 if minmax is None else 1,
                      "cutmix_min": 0.0 if minmax is None else minmax[0],
                      "cutmix_max": 0.0 if minmax is None else minmax[1],
                      "dtype": mixer.dtype_code, "layout": mixer.layout_code, "ltype": mixer.ltype,
                      "image_block": 0, "label_block": mixer.LABEL, "soft_block": n_blocks - 1,
                      "h": mixer.hw[0], "w": mixer.hw[1], "c": c, "seed": mixer.seed}
    return out


def _fill(ep: _Epoch, p: Pipeline, it: "_NativeEpochIterator", pl: Dict[str, Any]) -> None:
    ep.struct_size = ctypes.sizeof(_Epoch)
    ep.run_id = it.run_id
    ep.epoch = it.epoch
    ep.position = it.position
    ep.stall_timeout_ns = int(p.stall_timeout * 1e9) if p.stall_timeout >= 0 else -1
    ep.position_out = it._cell.ctypes.data
    ep.pinned = 1 if p._pin_status.get("pinned") else 0
    ep.n_outputs = len(pl["outputs"])
    for k, o in enumerate(pl["outputs"]):
        d = ep.out[k]
        d.block, d.dtype, d.ndim, d.pad_hdim = o["block"], o["dtype"], len(o["dims"]), o["pad_hdim"]
        for i, v in enumerate(o["dims"]):
            d.dims[i] = v
        d.pad_planes, d.pad_px = o["planes"], o["px"]
    pad = pl["pad"]
    if pad is not None:
        ep.pad, ep.pad_sizes_block, ep.pad_multiple = 1, pad["sizes_block"], pad["multiple"]
        ep.pad_cap_h, ep.pad_cap_w = pad["cap"]
    mix = pl["mix"]
    if mix is not None:
        ep.mix = 1
        for name, v in mix.items():
            setattr(ep, f"mix_{name}", v)


# -- one epoch read by the kernel ---------------------------------------------------------

class _NativeEpochIterator(_EpochIterator):
    """The Pipeline's epoch iterator while fastq's TensorFlow kernel takes its batches: the
    producers, state_dict() and stats() work as for a Python loop; ``position`` is the
    kernel's count of batches taken (one int64 it stores after each batch)."""

    def __init__(self, pipeline, ring, epoch, producers):
        self._cell = np.zeros(1, np.int64)
        self._start = 0  # the position this iteration began at (a resume)
        super().__init__(pipeline, ring, epoch, producers)
        # read under the pipeline's lock (Pipeline._begin_epoch): this epoch's run
        self.run_id = ring.run_id if ring is not None else -1

    @property
    def position(self):
        return int(self._cell[0])

    @position.setter
    def position(self, value):
        self._cell[0] = value

    def __next__(self):
        raise TypeError("this epoch is being read by a tf.data iterator (fastq.tf.dataset)")


class _Feeds:
    """feed_id -> (weak Pipeline, plan); live epochs: token -> (iterator, pipeline, claim)."""

    # feed ids carry a per-process key in their high bits, so that a graph run in another
    # process (tf.data service, a saved graph) gets a clear error, never another pipeline
    _KEY_SHIFT = 24

    def __init__(self):
        self.lock = threading.Lock()
        self.key = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        self._ids = (self.key << self._KEY_SHIFT | i for i in itertools.count(1))
        self._tokens = itertools.count(1)
        self.feeds: Dict[int, Tuple[Any, Dict[str, Any]]] = {}
        self.live: Dict[int, Tuple[_NativeEpochIterator, Pipeline, str]] = {}

    def register(self, pipeline, pl):
        with self.lock:
            fid = next(self._ids)

            def gone(_, fid=fid, feeds=self.feeds):
                feeds.pop(fid, None)

            self.feeds[fid] = (weakref.ref(pipeline, gone), pl)
            return fid

    def pipeline(self, fid):
        """The live Pipeline of feed `fid`, or PipelineClosedError saying why there is none."""
        entry = self.feeds.get(fid)
        p = entry[0]() if entry is not None else None
        if p is not None:
            return p, entry[1]
        if fid >> self._KEY_SHIFT != self.key:
            raise PipelineClosedError(
                "this FastqDataset was made by fastq.tf.dataset in another process: it reads a Pipeline of that "
                "process (tf.data service workers and saved dataset graphs cannot run it; use "
                "fastq.tf.ops.decode_augment_files or decode_augment there)")
        raise PipelineClosedError("the fastq Pipeline of this dataset was closed and garbage-collected")


FEEDS = _Feeds()


def _write(buf, size, text):
    data = text.encode("utf-8", "replace")[: max(0, size - 1)]
    ctypes.memmove(buf, data + b"\0", len(data) + 1)


def _tf_code(exc):
    """TensorFlow's code for a Python exception, as TF's py_func maps them."""
    if isinstance(exc, (ValueError, TypeError)):
        return _INVALID_ARGUMENT
    if isinstance(exc, MemoryError):
        return _RESOURCE_EXHAUSTED
    if isinstance(exc, NotImplementedError):
        return _UNIMPLEMENTED
    return _UNKNOWN


def _describe(exc):
    return f"{type(exc).__name__}: {exc}"


def _begin(feed_id, epoch, position, ep_ptr, token_ptr, msg, msglen):
    try:
        p, pl = FEEDS.pipeline(feed_id)
        if p.closed:
            raise PipelineClosedError("this Pipeline is closed")
        claim = _CLAIMS.claim(p)
        it = None
        try:
            if epoch >= 0:  # a restored checkpoint: resume (epoch, position)
                sd = p.state_dict()
                sd.update(epoch=int(epoch), position=int(position))
                p.load_state_dict(sd)
            it = p._begin_epoch(_NativeEpochIterator)
            it._start = it.position
            ep = ep_ptr[0]
            if it._ring is None:  # an empty epoch
                it.close()
                _CLAIMS.release(p, claim)
                ep.ring = None
                token_ptr[0] = -1
                return 0
            _fill(ep, p, it, pl)
            ring = it._ring.retain_native()  # the kernel owns this reference once we return
            with FEEDS.lock:
                token = next(FEEDS._tokens)
                FEEDS.live[token] = (it, p, claim)
            ep.ring = ring
            token_ptr[0] = token
            return 0
        except BaseException:
            if it is not None:
                it.close()  # the epoch's producers stop
            _CLAIMS.release(p, claim)
            raise
    except BaseException as e:  # noqa: BLE001 - everything goes back to TF as an error status
        _write(msg, msglen, _describe(e))
        return _tf_code(e)


def _take(token):
    with FEEDS.lock:
        return FEEDS.live.pop(token, None)


def _finish(entry):
    it, p, claim = entry
    try:
        it.close()  # stops the producers if this epoch is still the pipeline's
    finally:
        _CLAIMS.release(p, claim)


def _end(token, reason, position):
    try:
        entry = _take(token)
        if entry is None:
            return
        if reason == END_CLOSED:
            log.warning("fastq.tf.dataset: the Pipeline was closed while tf.data was reading it; the iteration "
                        "ended after %d batch(es) of epoch %d", position, entry[0].epoch)
        _finish(entry)
    except BaseException:  # noqa: BLE001 - a ctypes callback must not raise
        log.exception("fastq.tf.dataset: ending an epoch failed")


def _fail_exception(kind, code, index, detail, it, p):
    if kind == FAIL_SAMPLE:
        exc = _core.make_error(code, detail, index=index if index >= 0 else None)
        return p._backend.sample_error(exc, it._producers)
    if kind == FAIL_MIX:
        mixer = p._mixer()
        m = re.search(r"a batch of (\d+) rows", detail)
        if index < 0 and m is not None:  # mode="pair" and an odd batch: the Python consumer's check
            try:
                mixer._check_rows(int(m.group(1)), it.epoch, it.position)
            except ValueError as e:
                return e
        m = re.search(r"label (-?\d+)", detail)
        if index >= 0 and m is not None:
            name = mixer._name(it.epoch, it.position, int(index))
            return ValueError(f"MixUpCutMix: label {m.group(1)} of {name} is outside [0, num_classes="
                              f"{mixer.mix.num_classes}) (batch {it.position} of epoch {it.epoch}, row {index})")
        return _core.make_error(code, detail)
    if kind == FAIL_COUNT:
        card = int(detail)  # tf.data's assert_cardinality words it the same way
        return _CountError(f"Input dataset was expected to contain {card} elements but contained "
                           f"{'only ' if index < card else ''}{index} elements (fastq: epoch {it.epoch}"
                           f"{f', resumed at batch {it._start}' if it._start else ''})")
    if code == _FQ_E_STALLED:
        return StalledError(_core.stall_message(p.stall_timeout, detail, p.queue_size))
    if code == _FQ_E_CANCELLED:
        if p.closed:  # Pipeline.close() cancels the run before it closes the ring: the iteration ends
            return None
        return SupersededIterationError(
            f"epoch {it.epoch}'s iterator was used after a newer iteration of the same Pipeline started; a "
            f"Pipeline runs one epoch at a time (create two Pipelines to read twice)")
    return _core.make_error(code, detail)


class _CountError(Exception):
    pass


def _fail(token, kind, code, index, detail, msg, msglen):
    try:
        entry = _take(token)
        text = (detail or b"").decode("utf-8", "replace")
        if entry is None:
            exc = _core.make_error(code, text)
        else:
            it, p, _ = entry
            try:
                exc = _fail_exception(kind, code, index, text, it, p)
            finally:
                _finish(entry)
            if exc is None:
                log.warning("fastq.tf.dataset: the Pipeline was closed while tf.data was reading it; the iteration "
                            "ended after %d batch(es) of epoch %d", it.position, it.epoch)
                return 0
        _write(msg, msglen, _describe(exc) if not isinstance(exc, _CountError) else str(exc))
        return _FAILED_PRECONDITION if isinstance(exc, _CountError) else _tf_code(exc)
    except BaseException as e:  # noqa: BLE001 - a ctypes callback must not raise
        _write(msg, msglen, f"fastq.tf.dataset: {code}: {detail!r} ({_describe(e)})")
        return _UNKNOWN


def resume_point(p: Pipeline) -> Tuple[int, int]:
    """(epoch, position) where the pipeline's next iteration begins: its next epoch and the
    position a load_state_dict left pending.  TypeError for a source that cannot be rewound
    (a checkpoint of it could not be restored: better to say so when it is written)."""
    if p.closed:
        raise PipelineClosedError("this Pipeline is closed")
    if p._backend.batches_per_epoch() is None:
        raise TypeError("a tf.data iterator over this fastq Pipeline cannot be checkpointed: its source is a "
                        "Python iterable, which cannot be rewound to a position (use a native source: Files, "
                        "Bytes, Arrays, TFRecord...)")
    with p._state.lock:
        return int(p._epoch), int(p._resume_position)


def _peek(feed_id, epoch_ptr, position_ptr, msg, msglen):
    try:
        p, _ = FEEDS.pipeline(feed_id)
        epoch_ptr[0], position_ptr[0] = resume_point(p)
        return 0
    except BaseException as e:  # noqa: BLE001 - a ctypes callback must not raise
        _write(msg, msglen, f"fastq.tf.dataset checkpoint: {_describe(e)}")
        return _tf_code(e) if not isinstance(e, PipelineClosedError) else _FAILED_PRECONDITION


# -- the library --------------------------------------------------------------------

_LIB: Dict[str, Any] = {}
_LIB_LOCK = threading.Lock()


def library():
    """(op module, ctypes library) with the callbacks installed; raises KernelBuildError
    (or another exception saying why) when the kernel cannot be built or loaded."""
    with _LIB_LOCK:
        if "lib" in _LIB:
            return _LIB["mod"], _LIB["lib"]
        from fastq.tf import ops as tf_ops
        mod = tf_ops.load()
        lib = tf_ops._LOADED["lib"]
        n = len(_layout())
        got = (ctypes.c_uint64 * n)()
        lib.fastq_tf_feed_layout.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.fastq_tf_feed_layout.restype = ctypes.c_int
        count = lib.fastq_tf_feed_layout(got, n)
        if count != n or list(got) != _layout():
            raise tf_ops.KernelBuildError(f"fastq's TensorFlow kernel lays out its epoch descriptor as {list(got)}, "
                                          f"fastq.tf expects {_layout()}: the kernel cache is stale; delete "
                                          f"{tf_ops.cache_dir()} and load again")
        # kept alive here as long as installed; they look the handlers up at each call
        cbs = (_BEGIN(lambda *a: _begin(*a)), _END(lambda *a: _end(*a)), _FAIL(lambda *a: _fail(*a)),
               _PEEK(lambda *a: _peek(*a)))
        lib.fastq_tf_feed_set_callbacks.argtypes = [_BEGIN, _END, _FAIL, _PEEK]
        lib.fastq_tf_feed_set_callbacks.restype = None
        lib.fastq_tf_feed_set_callbacks(*cbs)
        _LIB.update(mod=mod, lib=lib, callbacks=cbs)
        atexit.register(_unset)
        return mod, lib


def _unset():
    """At exit: no callback into Python any more (a call in flight finishes first: this
    ctypes call releases the GIL while the library waits for it)."""
    lib = _LIB.get("lib")
    if lib is not None:
        lib.fastq_tf_feed_set_callbacks(_BEGIN(), _END(), _FAIL(), _PEEK())


def _dataset_class():
    from tensorflow.python.data.ops import dataset_ops

    class FastqDataset(dataset_ops.DatasetSource):
        """A tf.data source over the FastqDataset op (its element_spec is the pipeline's)."""

        def __init__(self, variant, spec):
            self._spec = spec
            super().__init__(variant)

        @property
        def element_spec(self):
            return self._spec

    return FastqDataset


def dataset(pipeline: Pipeline, spec: Tuple[Any, ...], cardinality: Optional[int]) -> Any:
    """The FastqDataset op over `pipeline` (a tf.data.Dataset); raises Unsupported or the
    kernel's build/load error."""
    fid = pipeline._tf_feed_id  # one registration per pipeline, however many datasets
    pl = plan(pipeline) if fid is None else None   # (before the build: says why without a compiler too)
    mod, _ = library()
    cls = _LIB.get("dataset_class")
    if cls is None:
        cls = _LIB["dataset_class"] = _dataset_class()
    if fid is None:
        fid = pipeline._tf_feed_id = FEEDS.register(pipeline, pl)
    variant = mod.fastq_dataset(feed_id=fid, cardinality=-2 if cardinality is None else int(cardinality),
                                output_types=[s.dtype for s in spec], output_shapes=[s.shape for s in spec])
    return cls(variant, spec)
