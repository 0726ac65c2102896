# Included at the end of fastq/_native/_image.pyx: the native sample task of an image
# Pipeline (csrc/task/fq_imgtask.h), handed to fastq._native._core.NativeRun as a pair of
# C pointers (task function, context).  Everything the context points into is
# kept alive by the ImageTask object, which NativeRun references until joined.
from libc.stdint cimport int32_t, uint32_t
from libc.stdlib cimport free, calloc
from fastq._native.includes.fq_image_targets cimport FQ_TGT_CENTER

# The types a native reader's int64 outputs can be delivered as (label_dtype of
# TFRecord / WebDataset labels): numpy name -> enum fq_num_type, read from the C table.
NUM_TYPES = {fq_num_name(k).decode(): k for k in range(FQ_NUM_AS_READ + 1, FQ_NUM_COUNT)}


def permutation(uint64_t seed, uint64_t epoch, int64_t n):
    """The deterministic shuffle of range(n) for (seed, epoch) (int64 array)."""
    out = np.empty(n, np.int64)
    cdef int64_t[::1] v = out
    if n > 0:
        with nogil:
            fq_permutation(seed, epoch, &v[0], n)
    return out


cdef class SampleReader:
    """Base of the native readers (_records.pxi: TFRecordReader, TarReader,
    FileReader, ReadAhead, TFRecordStreamReader): the C fq_sample_reader an
    ImageTask or a ReadAhead reads samples through.  A subclass points `sr` at
    the fq_sample_reader its C create function returned (every C reader hands
    out its own); `sr` stays valid while the object lives,
    and whoever uses it keeps a reference to the object."""
    cdef const fq_sample_reader *sr
    cdef readonly int64_t n

    def __len__(self):
        return self.n


cdef class ImageTask(TaskBase):
    """Native per-sample task over a source (files / encoded buffers / arrays).

    Created with ``workers`` worker scratch slots plus one private slot used by
    ``sample()`` (explain) so that it never races a running pool.
    """
    cdef fq_imgtask *t
    cdef readonly ImageSpec spec
    cdef readonly int workers
    cdef readonly int64_t n
    cdef object _keep          # Python objects the C source points into
    cdef object _order         # int64 array of the current epoch
    cdef const char **_paths
    cdef const uint8_t **_data
    cdef size_t *_lens
    cdef int32_t *_shape
    cdef size_t *_strides
    cdef const uint8_t **_masks
    cdef object _lock

    def __cinit__(self):
        self.t = NULL
        self._paths = NULL
        self._data = NULL
        self._lens = NULL
        self._shape = NULL
        self._strides = NULL
        self._masks = NULL

    def __init__(self, ImageSpec spec not None, str kind, items, labels=None, int workers=1, str on_error="raise",
                 int max_attempts=16, bint with_index=False, extra_types=None, targets=None, int sizes_op=-1):
        cdef fq_imgtask_source src
        cdef fq_imgtask_targets tg
        cdef fq_err err
        cdef int64_t i, n = len(items)
        cdef cnp.ndarray a
        cdef const uint8_t[::1] mv
        memset(&src, 0, sizeof(src))
        memset(&err, 0, sizeof(err))
        if n < 1:
            raise ValueError("the source has no samples")
        keep = []
        if kind == "files":
            src.kind = FQ_SRC_FILES
            self._paths = <const char **>calloc(n, sizeof(char *))
            if self._paths == NULL:
                raise MemoryError()
            for i in range(n):
                b = items[i]
                if not isinstance(b, bytes) or b"\0" in b:
                    raise ValueError(f"sample {i}: bad path {b!r}")
                keep.append(b)
                self._paths[i] = <const char *>b
            src.paths = self._paths
        elif kind == "bytes":
            src.kind = FQ_SRC_BYTES
            self._data = <const uint8_t **>calloc(n, sizeof(uint8_t *))
            self._lens = <size_t *>calloc(n, sizeof(size_t))
            if self._data == NULL or self._lens == NULL:
                raise MemoryError()
            for i in range(n):
                buf = items[i]
                keep.append(buf)
                self._lens[i] = len(buf)
                if len(buf):
                    mv = buf
                    self._data[i] = &mv[0]
            src.data = self._data
            src.lens = self._lens
        elif kind == "arrays":
            src.kind = FQ_SRC_ARRAYS
            self._data = <const uint8_t **>calloc(n, sizeof(uint8_t *))
            self._shape = <int32_t *>calloc(3 * n, sizeof(int32_t))
            self._strides = <size_t *>calloc(n, sizeof(size_t))
            if self._data == NULL or self._shape == NULL or self._strides == NULL:
                raise MemoryError()
            for i in range(n):
                a = items[i]
                if a.dtype != np.uint8 or a.ndim != 3 or a.strides[2] != 1 or a.strides[1] != a.shape[2]:
                    raise ValueError(f"sample {i}: needs a uint8 HxWxC array with packed pixels")
                keep.append(a)
                self._data[i] = <const uint8_t *>a.data
                self._shape[3 * i] = a.shape[0]
                self._shape[3 * i + 1] = a.shape[1]
                self._shape[3 * i + 2] = a.shape[2]
                self._strides[i] = a.strides[0]
            src.data = self._data
            src.shape = self._shape
            src.strides = self._strides
        elif kind == "reader":  # a native record reader (_records.pxi)
            if not isinstance(items, SampleReader) or (<SampleReader>items).sr == NULL:
                raise TypeError(f"kind 'reader' needs an initialized native reader, got {type(items).__name__}")
            src.kind = FQ_SRC_READER
            src.reader = (<SampleReader>items).sr
            keep.append(items)
            # extra_types: one NUM_TYPES code (0: as read) per reader output
            types = list(extra_types or [])
            if len(types) > src.reader.n_extra or len(types) > FQ_IMGTASK_MAX_EXTRA:
                raise ValueError(f"extra_types: {len(types)} given for {src.reader.n_extra} reader outputs")
            for i in range(len(types)):
                src.extra_type[i] = types[i]
        else:
            raise ValueError(f"unknown source kind {kind!r}")
        if extra_types and kind != "reader":
            raise ValueError("extra_types applies to a native reader's outputs only")
        src.n = n
        if labels is not None:
            a = labels
            if not a.flags.c_contiguous or a.shape[0] != n:
                raise ValueError("labels must be a C-contiguous array with one row per sample")
            keep.append(a)
            src.labels = <const uint8_t *>a.data
            src.label_bytes = a.strides[0] if a.ndim > 1 else a.itemsize
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if targets is not None:  # fastq.targets.Targets.task_args(): a dict of arrays and options
            memset(&tg, 0, sizeof(tg))
        if targets is not None and targets.get("from_reader"):  # fastq.targets.OdapiTargets: boxes from the reader
            if kind != "reader":
                raise ValueError("targets from the reader need a native record reader")
            tg.from_reader = 1
            tg.normalized = bool(targets["normalized"])
            tg.max_boxes = targets["max_boxes"]
            tg.opts.min_area, tg.opts.min_visibility = targets["min_area"], targets["min_visibility"]
            tg.opts.truncate = targets["truncate"]
            tg.with_image_info = bool(targets["image_info"])
            src.targets = &tg
        elif targets is not None:
            tb = np.ascontiguousarray(targets["boxes"], np.float32).reshape(-1, 4)
            tc = np.ascontiguousarray(targets["classes"], np.int32).reshape(-1)
            to = np.ascontiguousarray(targets["offsets"], np.int64).reshape(-1)
            if to.shape[0] != n + 1 or tc.shape[0] != tb.shape[0] or to[to.shape[0] - 1] != tb.shape[0]:
                raise ValueError("targets: offsets must have n + 1 entries ending at the number of boxes")
            keep += [tb, tc, to]
            a = tb
            tg.boxes = <const float *> a.data
            a = tc
            tg.classes = <const int32_t *> a.data
            a = to
            tg.offsets = <const int64_t *> a.data
            tg.normalized = bool(targets.get("normalized", False))
            tg.max_boxes = targets["max_boxes"]
            tg.opts.min_area, tg.opts.min_visibility = targets["min_area"], targets["min_visibility"]
            tg.opts.truncate = targets["truncate"]
            tg.with_image_info = bool(targets["image_info"])
            if targets.get("keypoints") is not None:
                tk = np.ascontiguousarray(targets["keypoints"], np.float32)
                if tk.ndim != 3 or tk.shape[0] != tb.shape[0] or tk.shape[2] != 3:
                    raise ValueError("targets: keypoints must be (number of boxes, K, 3)")
                keep.append(tk)
                a = tk
                tg.keypoints = <const float *> a.data
                tg.k = tk.shape[1]
                if targets.get("flip_index") is not None:
                    tf = np.ascontiguousarray(targets["flip_index"], np.int32).reshape(-1)
                    if tf.shape[0] != tg.k:
                        raise ValueError("targets: flip_index needs one entry per keypoint")
                    keep.append(tf)
                    a = tf
                    tg.flip_index = <const int32_t *> a.data
            tg.mask_sampling = targets.get("mask_sampling", FQ_TGT_CENTER)  # label maps and bitmap instances
            if targets.get("masks") is not None:
                ms = [np.ascontiguousarray(m) for m in targets["masks"]]
                if len(ms) != n or any(m.ndim != 2 or m.dtype != ms[0].dtype for m in ms) or \
                        ms[0].dtype not in (np.uint8, np.uint16):
                    raise ValueError("targets: masks must be one HxW uint8 or uint16 array per sample (one dtype)")
                hw = np.ascontiguousarray([m.shape for m in ms], np.int32).reshape(-1)
                keep += ms + [hw]
                self._masks = <const uint8_t **> calloc(n, sizeof(uint8_t *))
                if self._masks == NULL:
                    raise MemoryError()
                for i in range(n):
                    a = ms[i]
                    self._masks[i] = <const uint8_t *> a.data
                tg.masks = <const void *const *> self._masks
                a = hw
                tg.mask_hw = <const int32_t *> a.data
                tg.mask_elem = ms[0].itemsize
                tg.mask_fill = targets["mask_fill"]
            if targets.get("instances") is not None:  # per-instance masks: flat arrays (Targets._instances)
                inst = targets["instances"]
                arrs = [np.ascontiguousarray(inst[k], t) for k, t in (
                    ("kind", np.uint8), ("poly", np.int64), ("ring", np.int64), ("xy", np.float32),
                    ("rle", np.int64), ("counts", np.uint32), ("hw", np.int32))]
                nb = tb.shape[0]
                if (arrs[0].shape[0] != nb or arrs[1].shape[0] != nb + 1 or arrs[4].shape[0] != nb + 1 or
                        arrs[2].shape[0] != arrs[1][nb] + 1 or arrs[3].size != 2 * arrs[2][arrs[2].shape[0] - 1] or
                        arrs[5].shape[0] != arrs[4][nb] or arrs[6].size != 2 * n):
                    raise ValueError("targets: instance arrays of inconsistent lengths")
                keep += arrs
                a = arrs[0]
                tg.inst_kind = <const uint8_t *> a.data
                a = arrs[1]
                tg.inst_poly = <const int64_t *> a.data
                a = arrs[2]
                tg.inst_ring = <const int64_t *> a.data
                a = arrs[3]
                tg.inst_xy = <const float *> a.data
                a = arrs[4]
                tg.inst_rle = <const int64_t *> a.data
                a = arrs[5]
                tg.inst_counts = <const uint32_t *> a.data
                a = arrs[6]
                tg.inst_hw = <const int32_t *> a.data
                tg.inst_out_h, tg.inst_out_w = targets["instance_out_hw"]
                if targets.get("instance_mask_size") is not None:
                    tg.inst_mask_h, tg.inst_mask_w = targets["instance_mask_size"]
            src.targets = &tg
        if sizes_op >= 0:  # Pipeline(pad="batch"): the valid size of each sample, a last output
            src.with_sizes = 1
            src.sizes_op = sizes_op
        self._keep = keep
        self.spec = spec
        self.workers = workers
        self.n = n
        self._lock = threading.Lock()
        if fq_imgtask_create(spec.spec, &src, workers + 1, FQ_ON_ERROR_SKIP if on_error == "skip" else FQ_ON_ERROR_RAISE,
                             max_attempts, with_index, &self.t, &err) != 0:
            raise_fq_error(&err)
        self.fn = <fq_task_fn>fq_imgtask_run  # TaskBase: what _core.NativeRun runs
        self.ctx = self.t

    def __dealloc__(self):
        if self.t != NULL:
            fq_imgtask_free(self.t)
        free(self._paths)
        free(self._data)
        free(self._lens)
        free(self._shape)
        free(self._strides)
        free(self._masks)

    def set_epoch(self, order, uint64_t seed, uint64_t epoch):
        """Pool item i of the next run is sample order[i].  Must not be called
        while a pool runs on this task."""
        cdef fq_err err
        order = np.ascontiguousarray(order, dtype=np.int64)
        cdef int64_t[::1] v = order
        memset(&err, 0, sizeof(err))
        if fq_imgtask_set_epoch(self.t, &v[0] if len(order) else NULL, len(order), seed, epoch, &err) != 0:
            raise_fq_error(&err)
        self._order = order

    def sample(self, int64_t index, uint64_t seed, uint64_t epoch):
        """Produce one sample on this thread -> (ndarray, explain dict)."""
        out = np.empty(self.spec.out_shape, dtype=self.spec._np_dtype)
        cdef cnp.ndarray o = out
        cdef void *dst = o.data
        cdef fq_img_explain ex
        cdef fq_err err
        cdef int rc
        memset(&err, 0, sizeof(err))
        with self._lock:
            with nogil:
                rc = fq_imgtask_sample(self.t, self.workers, index, seed, epoch, dst, &ex, &err)
        if rc != 0:
            raise_fq_error(&err)
        return out, _explain(&ex)

    def stats(self):
        cdef fq_imgtask_stats st
        cdef char msg[512]
        fq_imgtask_get_stats(self.t, &st)
        reasons = {}
        last = {}
        for c in range(FQ_IMGTASK_MAX_CODES):
            if st.skipped_by_code[c]:
                name = fq_code_name(c).decode()
                reasons[name] = st.skipped_by_code[c]
                fq_imgtask_last_skip(self.t, c, msg, sizeof(msg))
                last[name] = msg.decode("utf-8", "replace")
        cdef fq_stage_times tm
        fq_imgtask_get_stage_times(self.t, &tm)
        return {"skipped": st.skipped, "skipped_by_reason": reasons, "last_skip_message": last,
                "failed_samples": st.failed, "bytes_read": st.bytes_read, "boxes_truncated": st.boxes_truncated,
                "stage_s": {"read": tm.read_ns / 1e9, "decode": tm.decode_ns / 1e9, "ops": tm.ops_ns / 1e9,
                            "write": tm.write_ns / 1e9},
                "timed_samples": tm.samples}
