# Included by fastq/_native/_image.pyx before _records.pxi: the fq_spans table
# (csrc/records/fq_spans.h) through which remote sources lend fetched bytes to the
# native readers.  The fetcher (fastq/sources/fetch.py) owns every buffer it puts
# and keeps it until the token comes back from poll() or until reset().

from libc.stdlib cimport malloc


cdef class Spans:
    """Fetched byte ranges lent to the native readers (one per remote pipeline).

    put() lends a buffer (anything with the buffer protocol: obstore's Bytes, an
    mmap, bytes) for the sample indices it was fetched for; the caller keeps the
    buffer alive until poll() hands its token back (or until reset())."""
    cdef fq_spans *s
    cdef readonly int n_objects
    cdef readonly int64_t n_samples

    def __cinit__(self):
        self.s = NULL

    def __init__(self, int n_objects, int64_t n_samples):
        cdef fq_err err
        memset(&err, 0, sizeof(err))
        if fq_spans_create(n_objects, n_samples, &self.s, &err) != 0:
            raise_fq_error(&err)
        self.n_objects = n_objects
        self.n_samples = n_samples

    def __dealloc__(self):
        if self.s != NULL:
            fq_spans_free(self.s)

    def put(self, int obj, uint64_t off, buf, bint whole, uint64_t token, claims):
        """Lend buf as bytes [off, off + len(buf)) of object obj (whole: the whole
        object), fetched for the samples `claims`.  Returns the buffer's address."""
        cdef const uint8_t[::1] mv = memoryview(buf).cast("B")
        cdef const int64_t[::1] cl = np.ascontiguousarray(claims, np.int64)
        cdef fq_err err
        cdef int rc
        cdef uint64_t n = mv.shape[0]
        cdef const uint8_t *ptr = &mv[0] if n else <const uint8_t *>&cl[0] if cl.shape[0] else <const uint8_t *>self
        memset(&err, 0, sizeof(err))
        with nogil:
            rc = fq_spans_put(self.s, obj, off, n, whole, ptr, token, &cl[0] if cl.shape[0] else NULL,
                              <int>cl.shape[0], &err)
        if rc != 0:
            raise_fq_error(&err)
        return <size_t>ptr

    def fail(self, int obj, uint64_t off, uint64_t length, bint whole, str msg, claims):
        """[off, off + length) of obj (whole: all of it) cannot be had: reads
        covered by it fail with msg (FQ_E_IO)."""
        cdef const int64_t[::1] cl = np.ascontiguousarray(claims, np.int64)
        cdef bytes bmsg = msg.encode("utf-8", "replace")
        cdef fq_err err
        memset(&err, 0, sizeof(err))
        if fq_spans_fail(self.s, obj, off, length, whole, bmsg, &cl[0] if cl.shape[0] else NULL, <int>cl.shape[0],
                         &err) != 0:
            raise_fq_error(&err)

    def poll(self, int timeout_ms=0, int min_tokens=1):
        """Wait up to timeout_ms for a demand or min_tokens retired tokens (returning at
        once when they are queued already): (demanded sample indices, retired tokens),
        each a list, what was queued when the wait ended."""
        cdef int64_t dem[256]
        cdef uint64_t tok[1024]
        cdef int nd = 0, nt = 0, rc
        with nogil:
            rc = fq_spans_poll(self.s, timeout_ms, min_tokens, dem, 256, &nd, tok, 1024, &nt)
        if rc != 0:
            raise OSError("fq_spans_poll failed")
        return [dem[i] for i in range(nd)], [tok[i] for i in range(nt)]

    def get(self, int64_t idx, int obj, uint64_t off, length=None):
        """What a native reader gets for sample idx (tests): (address, length)
        of the borrowed bytes; length None: the whole object.  Held by this
        object until its next get() or reset()."""
        cdef const uint8_t *p = NULL
        cdef uint64_t got = 0
        cdef uint64_t ln = FQ_SPAN_WHOLE if length is None else <uint64_t>length
        cdef fq_err err
        cdef int rc
        memset(&err, 0, sizeof(err))
        with nogil:
            rc = fq_spans_get(self.s, <void *>self, idx, obj, off, ln, &p, &got, &err)
        if rc != 0:
            raise_fq_error(&err)
        return <size_t>p, got

    def interrupt(self):
        with nogil:
            fq_spans_interrupt(self.s)

    def abort(self, str msg):
        cdef bytes b = msg.encode("utf-8", "replace")
        cdef const char *c = b
        with nogil:
            fq_spans_abort(self.s, c)

    def reset(self):
        with nogil:
            fq_spans_reset(self.s)

    def wanted(self, int64_t idx):
        """Whether a reader still waits for sample idx (its demand not yet met)."""
        return fq_spans_wanted(self.s, idx) != 0

    def stats(self):
        cdef fq_spans_stats st
        fq_spans_get_stats(self.s, &st)
        return {"entries": st.entries, "bytes": st.bytes, "gets": st.gets, "waits": st.waits,
                "wait_s": st.wait_ns / 1e9, "demands": st.demands}
