# Included at the end of fastq/_native/_image.pyx (after _imgtask.pxi): native record
# readers (csrc/records/fq_tfrecord.h) exposed as fq_sample_reader objects for an
# ImageTask of kind "reader".  Each reader object owns every buffer its C
# struct points into; the ImageTask keeps the reader alive until it is freed.

import os
from libc.stdint cimport uint32_t, int32_t

TFR_KINDS = {"bytes": FQ_TFR_BYTES, "float32": FQ_TFR_FLOAT, "int64": FQ_TFR_INT64}
TFR_BROKEN = 0xFFFFFFFFFFFFFFFF


def masked_crc32c(data):
    """TFRecord's masked CRC-32C of a bytes-like object."""
    cdef const uint8_t[::1] v = memoryview(data).cast("B")
    cdef uint32_t c
    with nogil:
        c = fq_crc32c_mask(fq_crc32c(&v[0] if v.shape[0] else NULL, v.shape[0]))
    return c


def tfrecord_scan(path, data=None):
    """Index one TFRecord shard (a file, or its contents in `data`).

    Returns (offsets uint64, lengths uint64, tail) where tail is None or the
    (code, message) of the framing error that ended the walk early."""
    cdef bytes bpath = os.fsencode(path)
    cdef const char *cpath = bpath
    cdef const uint8_t[::1] mv
    cdef const uint8_t *mem = NULL
    cdef size_t mem_len = 0
    cdef uint64_t *offs = NULL
    cdef uint64_t *lens = NULL
    cdef int64_t n = 0, i
    cdef fq_err tail, err
    cdef int rc
    memset(&err, 0, sizeof(err))
    memset(&tail, 0, sizeof(tail))
    if data is not None:
        mv = memoryview(data).cast("B")
        mem_len = mv.shape[0]
        mem = &mv[0] if mem_len else <const uint8_t *>cpath  # any non-NULL pointer: 0 bytes are read
    with nogil:
        rc = fq_tfr_scan(cpath, mem, mem_len, &offs, &lens, &n, &tail, &err)
    if rc != 0:
        raise_fq_error(&err)
    o = np.empty(n, np.uint64)
    l = np.empty(n, np.uint64)
    cdef uint64_t[::1] ov = o
    cdef uint64_t[::1] lv = l
    for i in range(n):
        ov[i] = offs[i]
        lv[i] = lens[i]
    free(offs)
    free(lens)
    t = None if tail.code == 0 else (tail.code, tail.msg.decode("utf-8", "replace"))
    return o, l, t


cdef int _fill_features(list features, fq_tfr_feature *feats, list keep) except -1:
    """features: [(key bytes, kind str, count[, flags])] -> feats[]; flags: 0, or
    TFR_VARLEN [| TFR_TRUNCATE] (at most count values, fq_example.h)."""
    if len(features) > FQ_TFR_MAX_FEATURES:
        raise ValueError(f"at most {FQ_TFR_MAX_FEATURES} features")
    for k, f in enumerate(features):
        key, kind, count = f[:3]
        bkey = key.encode() if isinstance(key, str) else bytes(key)
        keep.append(bkey)
        feats[k].key = <const char *>bkey
        feats[k].key_len = len(bkey)
        feats[k].kind = TFR_KINDS[kind]
        feats[k].count = count
        feats[k].flags = f[3] if len(f) > 3 else 0
        if feats[k].flags & FQ_TFR_VARLEN and not 0 <= count <= FQ_TFR_MAX_VARLEN:
            raise ValueError(f"feature {key!r}: a variable-length list holds at most {FQ_TFR_MAX_VARLEN} values")
    return 0


TFR_VARLEN = FQ_TFR_VARLEN
TFR_TRUNCATE = FQ_TFR_TRUNCATE


def _feature_bytes(f):
    """Bytes of one non-image feature in the reader's extra area (fq_tfr_extra_sizes)."""
    n = f[2] * (4 if f[1] == "float32" else 8)
    return n + (8 if len(f) > 3 and f[3] & FQ_TFR_VARLEN else 0)


def parse_example(data, features):
    """Parse one serialized tf.train.Example with the native parser (for tests
    and tools).  features: [(key, "bytes" | "float32" | "int64", count[, flags])];
    returns one value per feature (bytes, or a numpy array of count values; with
    flags TFR_VARLEN: (the values kept, the number the record holds))."""
    cdef fq_tfr_feature feats[16]
    cdef fq_tfr_value vals[16]
    cdef void *dst[16]
    cdef fq_err err
    cdef const uint8_t[::1] mv = memoryview(bytes(data)).cast("B")
    cdef cnp.ndarray a
    cdef int rc, n = len(features)
    keep = []
    _fill_features(list(features), feats, keep)
    outs = []
    for k, f in enumerate(features):
        if f[1] == "bytes":
            dst[k] = NULL
            outs.append(None)
        else:
            a = np.zeros(_feature_bytes(f), np.uint8)
            dst[k] = <void *>a.data
            outs.append(a)
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_tfr_parse_example(&mv[0] if mv.shape[0] else <const uint8_t *>dst, mv.shape[0], feats, n, vals,
                                  dst, &err)
    if rc != 0:
        raise_fq_error(&err)
    for k, f in enumerate(features):
        if f[1] == "bytes":
            outs[k] = bytes((<const char *>vals[k].ptr)[:vals[k].len]) if vals[k].len else b""
        elif len(f) > 3 and f[3] & FQ_TFR_VARLEN:
            got = int(outs[k][:8].view(np.int64)[0])
            outs[k] = (outs[k][8:].view(np.float32 if f[1] == "float32" else np.int64)[:min(got, f[2])].copy(), got)
        else:
            outs[k] = outs[k].view(np.float32 if f[1] == "float32" else np.int64)
    return outs


cdef class TFRecordReader(SampleReader):
    """The native reader over an indexed set of TFRecord shards (see
    fastq.sources.TFRecord, which builds the index)."""
    cdef fq_tfr *r
    cdef fq_tfr_feature feats[16]
    cdef size_t extra_offset[16]
    cdef const char **_paths
    cdef const char **_tails
    cdef const uint8_t **_mem
    cdef size_t *_mem_len
    cdef object _keep

    def __cinit__(self):
        self.r = NULL
        self._paths = NULL
        self._tails = NULL
        self._mem = NULL
        self._mem_len = NULL

    cdef object _spans

    def __init__(self, list paths, list mems, list tails, shard, offset, length, number, list features,
                 int image, Spans spans=None):
        """paths: shard paths (bytes); mems: per shard None or its decompressed
        contents; tails: per shard b"" or its framing error message; shard /
        offset / length / number: the record index; features: [(key, kind,
        count)] with features[image] the encoded image."""
        cdef fq_tfr_config cfg
        cdef fq_err err
        cdef int s, ns = len(paths)
        cdef const uint8_t[::1] mv
        cdef size_t off = 0
        memset(&cfg, 0, sizeof(cfg))
        memset(&err, 0, sizeof(err))
        keep = []
        self._paths = <const char **>calloc(ns, sizeof(char *))
        self._tails = <const char **>calloc(ns, sizeof(char *))
        self._mem = <const uint8_t **>calloc(ns, sizeof(uint8_t *))
        self._mem_len = <size_t *>calloc(ns, sizeof(size_t))
        if self._paths == NULL or self._tails == NULL or self._mem == NULL or self._mem_len == NULL:
            raise MemoryError()
        for s in range(ns):
            keep.append(paths[s])
            self._paths[s] = <const char *>paths[s]
            keep.append(tails[s])
            self._tails[s] = <const char *>tails[s]
            if mems[s] is not None:
                mv = memoryview(mems[s]).cast("B")
                keep.append(mv)
                self._mem_len[s] = mv.shape[0]
                self._mem[s] = &mv[0] if mv.shape[0] else <const uint8_t *>self._paths[s]
        arrs = [np.ascontiguousarray(shard, np.int32), np.ascontiguousarray(offset, np.uint64),
                np.ascontiguousarray(length, np.uint64), np.ascontiguousarray(number, np.int64)]
        keep += arrs
        _fill_features(features, self.feats, keep)
        for k, f in enumerate(features):  # the C reader's extra sizes, in this order
            self.extra_offset[k] = off
            if k != image:
                off += _feature_bytes(f)
        cfg.n_shards = ns
        cfg.paths = self._paths
        cfg.mem = self._mem
        cfg.mem_len = self._mem_len
        cfg.tail_msg = self._tails
        cfg.n = len(arrs[0])
        cfg.shard = <const int32_t *>(<cnp.ndarray>arrs[0]).data
        cfg.offset = <const uint64_t *>(<cnp.ndarray>arrs[1]).data
        cfg.length = <const uint64_t *>(<cnp.ndarray>arrs[2]).data
        cfg.number = <const int64_t *>(<cnp.ndarray>arrs[3]).data
        cfg.feats = self.feats
        cfg.n_feats = len(features)
        cfg.image = image
        cfg.extra_offset = self.extra_offset
        cfg.spans = spans.s if spans is not None else NULL
        self._spans = spans  # borrowed by the C reader
        self._keep = keep
        if fq_tfr_create(&cfg, &self.r, &self.sr, &err) != 0:
            raise_fq_error(&err)
        self.n = cfg.n

    def __dealloc__(self):
        if self.r != NULL:
            fq_tfr_free(self.r)
        free(self._paths)
        free(self._tails)
        free(self._mem)
        free(self._mem_len)




# ------------------------------------------------------------------ tar shards

TAR_NONE = 0xFFFFFFFFFFFFFFFF


def tar_scan(path):
    """List the regular-file members of a tar shard (headers and checksums
    verified).  Returns (names [str], offsets uint64, sizes uint64, unsafe bool
    array, tail) with tail None or the (code, message) of the framing error that
    ended the walk early."""
    cdef bytes bpath = os.fsencode(path)
    cdef const char *cpath = bpath
    cdef uint64_t *offs = NULL
    cdef uint64_t *sizes = NULL
    cdef uint8_t *flags = NULL
    cdef char *names = NULL
    cdef size_t names_len = 0
    cdef int64_t n = 0, i
    cdef fq_err tail, err
    cdef int rc
    memset(&err, 0, sizeof(err))
    memset(&tail, 0, sizeof(tail))
    with nogil:
        rc = fq_tar_scan(cpath, &offs, &sizes, &flags, &names, &names_len, &n, &tail, &err)
    if rc != 0:
        raise_fq_error(&err)
    try:
        o = np.empty(n, np.uint64)
        s = np.empty(n, np.uint64)
        u = np.empty(n, np.bool_)
        for i in range(n):
            o[i] = offs[i]
            s[i] = sizes[i]
            u[i] = flags[i] != 0
        blob = names[:names_len] if names_len else b""
        lst = [os.fsdecode(x) for x in blob.split(b"\0")[:n]]
    finally:
        free(offs)
        free(sizes)
        free(flags)
        free(names)
    t = None if tail.code == 0 else (tail.code, tail.msg.decode("utf-8", "replace"))
    return lst, o, s, u, t


cdef class TarReader(SampleReader):
    """The native reader over an index of tar samples (see
    fastq.sources.WebDataset, which builds the index)."""
    cdef fq_tarset *s
    cdef const char **_paths
    cdef const char **_keys
    cdef const char **_errors
    cdef object _keep

    def __cinit__(self):
        self.s = NULL
        self._paths = NULL
        self._keys = NULL
        self._errors = NULL

    cdef object _spans

    def __init__(self, list paths, shard, img_off, img_size, lab_off, lab_size, number, list keys, list errors,
                 bint with_label, Spans spans=None):
        cdef fq_tarset_config cfg
        cdef fq_err err
        cdef int64_t i, n = len(keys)
        memset(&cfg, 0, sizeof(cfg))
        memset(&err, 0, sizeof(err))
        keep = []
        self._paths = <const char **>calloc(len(paths), sizeof(char *))
        self._keys = <const char **>calloc(max(n, 1), sizeof(char *))
        self._errors = <const char **>calloc(max(n, 1), sizeof(char *))
        if self._paths == NULL or self._keys == NULL or self._errors == NULL:
            raise MemoryError()
        for i in range(len(paths)):
            keep.append(paths[i])
            self._paths[i] = <const char *>paths[i]
        for i in range(n):
            keep.append(keys[i])
            self._keys[i] = <const char *>keys[i]
            if errors[i] is not None:
                keep.append(errors[i])
                self._errors[i] = <const char *>errors[i]
        arrs = [np.ascontiguousarray(shard, np.int32)] + [np.ascontiguousarray(a, np.uint64) for a in
                                                          (img_off, img_size, lab_off, lab_size)] + \
               [np.ascontiguousarray(number, np.int64)]
        keep += arrs
        cfg.n_shards = len(paths)
        cfg.paths = self._paths
        cfg.n = n
        cfg.shard = <const int32_t *>(<cnp.ndarray>arrs[0]).data
        cfg.img_off = <const uint64_t *>(<cnp.ndarray>arrs[1]).data
        cfg.img_size = <const uint64_t *>(<cnp.ndarray>arrs[2]).data
        cfg.lab_off = <const uint64_t *>(<cnp.ndarray>arrs[3]).data
        cfg.lab_size = <const uint64_t *>(<cnp.ndarray>arrs[4]).data
        cfg.number = <const int64_t *>(<cnp.ndarray>arrs[5]).data
        cfg.key = self._keys
        cfg.error = self._errors
        cfg.with_label = with_label
        cfg.spans = spans.s if spans is not None else NULL
        self._spans = spans  # borrowed by the C reader
        self._keep = keep
        if fq_tarset_create(&cfg, &self.s, &self.sr, &err) != 0:
            raise_fq_error(&err)
        self.n = n

    def __dealloc__(self):
        if self.s != NULL:
            fq_tarset_free(self.s)
        free(self._paths)
        free(self._keys)
        free(self._errors)




# --------------------------------------------------- stream (encoded buffers)

cdef class Decoder:
    """Decode + augment one encoded image into a caller's array, GIL released.
    One Decoder per thread (its scratch is not shared); the spec is shared."""
    cdef ImageSpec spec
    cdef fq_img_scratch *scratch

    def __cinit__(self):
        self.scratch = NULL

    def __init__(self, ImageSpec spec not None):
        self.spec = spec
        self.scratch = fq_img_scratch_new()
        if self.scratch == NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self.scratch != NULL:
            fq_img_scratch_free(self.scratch)

    def decode_into(self, data, cnp.ndarray out, uint64_t seed, uint64_t epoch, uint64_t index):
        """Sample `index` of (seed, epoch) from encoded `data` into `out` (an
        array of the spec's output shape/dtype, C-contiguous)."""
        cdef const uint8_t[::1] mv = memoryview(data).cast("B")
        cdef size_t n = mv.shape[0]
        cdef fq_err err
        cdef int rc
        if not out.flags.c_contiguous or out.nbytes != fq_img_spec_row_bytes(self.spec.spec):
            raise ValueError("out must be a C-contiguous array of the spec's output size")
        if n == 0:
            raise error_for_code(7, "empty buffer (0 bytes)")
        cdef void *dst = out.data
        memset(&err, 0, sizeof(err))
        with nogil:
            rc = fq_img_process_encoded(self.spec.spec, self.scratch, &mv[0], n, seed, epoch, index, dst, NULL,
                                        &err)
        if rc != 0:
            raise_fq_error(&err)


# ------------------------------------------------------------------ read-ahead

cdef class FileReader(SampleReader):
    """Whole files as samples (the Files read path) as a native reader, so that
    a ReadAhead can wrap it.  delay_us: sleep before each read (benchmarks)."""
    cdef fq_filereader *r
    cdef const char **_paths
    cdef object _keep

    def __cinit__(self):
        self.r = NULL
        self._paths = NULL

    cdef object _spans

    def __init__(self, list paths, int delay_us=0, Spans spans=None):
        cdef fq_err err
        cdef int64_t i, n = len(paths)
        memset(&err, 0, sizeof(err))
        self._paths = <const char **>calloc(max(n, 1), sizeof(char *))
        if self._paths == NULL:
            raise MemoryError()
        for i in range(n):
            if not isinstance(paths[i], bytes) or b"\0" in paths[i]:
                raise ValueError(f"sample {i}: bad path {paths[i]!r}")
            self._paths[i] = <const char *>paths[i]
        self._keep = paths
        if fq_filereader_create(self._paths, n, delay_us, &self.r, &self.sr, &err) != 0:
            raise_fq_error(&err)
        if spans is not None:  # sample i is object i of spans (remote Files)
            if spans.n_objects != n:
                raise ValueError(f"FileReader: spans has {spans.n_objects} objects for {n} samples")
            fq_filereader_set_spans(self.r, spans.s)
            self._spans = spans
        self.n = n

    def __dealloc__(self):
        if self.r != NULL:
            fq_filereader_free(self.r)
        free(self._paths)




cdef class ReadAhead(SampleReader):
    """`io_threads` threads reading up to `depth` samples of the epoch order
    ahead of the decoding workers (csrc/records/fq_readahead.h).  One per ImageTask:
    it follows that task's epoch order."""
    cdef fq_ra *ra
    cdef object inner
    cdef object __weakref__

    def __cinit__(self):
        self.ra = NULL

    def __init__(self, SampleReader inner not None, int io_threads, int depth):
        cdef fq_err err
        cdef const fq_sample_reader *inner_sr = inner.sr
        cdef int64_t n = inner.n
        memset(&err, 0, sizeof(err))
        self.inner = inner
        with nogil:
            rc = fq_ra_create(inner_sr, n, io_threads, depth, &self.ra, &self.sr, &err)
        if rc != 0:
            raise_fq_error(&err)
        self.n = n

    def __dealloc__(self):
        if self.ra != NULL:
            with nogil:
                fq_ra_free(self.ra)



    def stats(self):
        cdef fq_ra_stats st
        fq_ra_get_stats(self.ra, &st)
        return {"read_ahead": st.ahead, "read_direct": st.direct}


# ------------------------------------------------- TFRecord as a stream (no index)

def tfrecord_count(path, data=None, int gz=0):
    """Records in one TFRecord shard (a file, or its contents in `data`; gz:
    31 / 15 for a GZIP / ZLIB file, inflated as a stream): the framing is
    walked (length CRCs verified), no offsets are kept.  Returns
    (count, tail) with tail None or the (code, message) of the framing error
    that ended the walk early."""
    cdef bytes bpath = os.fsencode(path)
    cdef const char *cpath = bpath
    cdef const uint8_t[::1] mv
    cdef const uint8_t *mem = NULL
    cdef size_t mem_len = 0
    cdef int64_t n = 0
    cdef fq_err tail, err
    cdef int rc
    memset(&err, 0, sizeof(err))
    memset(&tail, 0, sizeof(tail))
    if data is not None:
        mv = memoryview(data).cast("B")
        mem_len = mv.shape[0]
        mem = &mv[0] if mem_len else <const uint8_t *>cpath
    with nogil:
        rc = fq_tfr_count(cpath, mem, mem_len, gz, &n, &tail, &err)
    if rc != 0:
        raise_fq_error(&err)
    return n, (None if tail.code == 0 else (tail.code, tail.msg.decode("utf-8", "replace")))


def shuffle_buffer_apply(stream, fill_draws, drain_draws):
    """The shuffle-buffer walk over `stream` (int64) with a buffer of
    B = len(drain_draws) records: fill it with the first B; then for each later
    record t emit buf[fill_draws[t]] and put the record in its place; then
    drain: emit buf[drain_draws[k]] and move the last record into its place.
    Returns the emitted order (int64)."""
    cdef const int64_t[::1] st = np.ascontiguousarray(stream, np.int64)
    cdef const int64_t[::1] fd = np.ascontiguousarray(fill_draws, np.int64)
    cdef const int64_t[::1] dd = np.ascontiguousarray(drain_draws, np.int64)
    cdef int64_t n = st.shape[0], b = dd.shape[0], i, j, m, o = 0
    if b > n or fd.shape[0] != n - b or (n > 0 and b < 1):
        raise ValueError("shuffle_buffer_apply: inconsistent sizes")
    out = np.empty(n, np.int64)
    buf = np.empty(max(b, 1), np.int64)
    cdef int64_t[::1] ov = out
    cdef int64_t[::1] bv = buf
    with nogil:
        for i in range(b):
            bv[i] = st[i]
        for i in range(n - b):
            j = fd[i]
            if j < 0 or j >= b:
                o = -1
                break
            ov[i] = bv[j]
            bv[j] = st[b + i]
        if o == 0:
            for i in range(b):
                m = b - i
                j = dd[i]
                if j < 0 or j >= m:
                    o = -1
                    break
                ov[n - b + i] = bv[j]
                bv[j] = bv[m - 1]
    if o != 0:
        raise ValueError("shuffle_buffer_apply: a draw is out of range")
    return out


cdef class TFRecordStreamReader(SampleReader):
    """The native stream reader over TFRecord shards without a record index
    (csrc/records/fq_tfr_stream.h; see fastq.sources.TFRecord(index=False))."""
    cdef fq_tfs *t
    cdef fq_tfr_feature feats[16]
    cdef size_t extra_offset[16]
    cdef const char **_paths
    cdef const char **_tails
    cdef const uint8_t **_mem
    cdef size_t *_mem_len
    cdef object _keep
    cdef object __weakref__

    def __cinit__(self):
        self.t = NULL
        self._paths = NULL
        self._tails = NULL
        self._mem = NULL
        self._mem_len = NULL

    def __init__(self, list paths, list mems, list tails, counts, list features, int image, int64_t hold_cap,
                 int gz=0):
        """paths (bytes), mems (None or in-memory contents), tails (b"" or the
        framing error) per shard; counts: samples per shard (records, + 1 when
        the shard has a framing error); features: [(key, kind, count)] with
        features[image] the encoded image; hold_cap: most records held; gz:
        0, or 31 / 15 for GZIP / ZLIB shards inflated as a stream."""
        cdef fq_tfs_config cfg
        cdef fq_err err
        cdef int s, ns = len(paths)
        cdef const uint8_t[::1] mv
        cdef size_t off = 0
        cdef int rc
        memset(&cfg, 0, sizeof(cfg))
        memset(&err, 0, sizeof(err))
        if len(mems) != ns or len(tails) != ns or len(counts) != ns:
            raise ValueError("TFRecordStreamReader: one mem, tail and count per shard")
        keep = []
        self._paths = <const char **>calloc(max(ns, 1), sizeof(char *))
        self._tails = <const char **>calloc(max(ns, 1), sizeof(char *))
        self._mem = <const uint8_t **>calloc(max(ns, 1), sizeof(uint8_t *))
        self._mem_len = <size_t *>calloc(max(ns, 1), sizeof(size_t))
        if self._paths == NULL or self._tails == NULL or self._mem == NULL or self._mem_len == NULL:
            raise MemoryError()
        for s in range(ns):
            keep.append(paths[s])
            self._paths[s] = <const char *>paths[s]
            keep.append(tails[s])
            self._tails[s] = <const char *>tails[s]
            if mems[s] is not None:
                mv = memoryview(mems[s]).cast("B")
                keep.append(mv)
                self._mem_len[s] = mv.shape[0]
                self._mem[s] = &mv[0] if mv.shape[0] else <const uint8_t *>self._paths[s]
        carr = np.ascontiguousarray(counts, np.int64)
        keep.append(carr)
        _fill_features(features, self.feats, keep)
        for k, f in enumerate(features):
            self.extra_offset[k] = off
            if k != image:
                off += _feature_bytes(f)
        cfg.n_shards = ns
        cfg.paths = self._paths
        cfg.mem = self._mem
        cfg.mem_len = self._mem_len
        cfg.tail_msg = self._tails
        cfg.count = <const int64_t *>(<cnp.ndarray>carr).data
        cfg.feats = self.feats
        cfg.n_feats = len(features)
        cfg.image = image
        cfg.extra_offset = self.extra_offset
        cfg.hold_cap = hold_cap
        cfg.gz = gz
        self._keep = keep
        with nogil:
            rc = fq_tfs_create(&cfg, &self.t, &self.sr, &err)
        if rc != 0:
            raise_fq_error(&err)
        self.n = int(carr.sum())

    def __dealloc__(self):
        if self.t != NULL:
            with nogil:
                fq_tfs_free(self.t)
        free(self._paths)
        free(self._tails)
        free(self._mem)
        free(self._mem_len)



    def set_order(self, order):
        """Start a run over `order` (what fq_imgtask_set_epoch does for a reader
        it holds directly; needed when a ReadAhead wraps this reader).  Never
        while reads of this reader's pipeline run."""
        cdef const int64_t[::1] ov = np.ascontiguousarray(order, np.int64)
        cdef int64_t n = ov.shape[0]
        cdef int64_t dummy = 0
        cdef fq_err err
        cdef int rc
        memset(&err, 0, sizeof(err))
        rc = self.sr.set_order(self.sr.reader, &ov[0] if n else &dummy, n, &err)  # O(n), no I/O
        if rc != 0:
            raise_fq_error(&err)

    def stats(self):
        """{"streamed": records served by the sequential cursors / hold table,
        "random": records read by walking a shard from its start,
        "max_held": most records held at once}."""
        cdef fq_tfs_stats st
        fq_tfs_get_stats(self.t, &st)
        return {"streamed": st.streamed, "random": st.random, "max_held": st.max_held}
