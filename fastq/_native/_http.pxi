# Included by fastq/_native/_core.pyx: the HTTP(S) client (csrc/net/fq_http.h) that
# fastq/sources/nethttp.py drives from an event loop.  Bodies are HttpBody objects: the
# malloc'd buffer the C client read the body into, lent through the buffer protocol and
# freed when the last reference (a memoryview, a Spans entry's owner) is gone.

from cpython.buffer cimport PyBuffer_FillInfo
from fastq._native.includes.fq_http cimport *


cdef class HttpBody:
    """A response body: a read-only buffer (len(), memoryview(), bytes()) that owns the
    C client's malloc'd bytes."""
    cdef uint8_t *data
    cdef Py_ssize_t n

    def __cinit__(self):
        self.data = NULL
        self.n = 0

    def __dealloc__(self):
        free(self.data)

    def __len__(self):
        return self.n

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, <void *>(self.data if self.data != NULL else <uint8_t *>b""), self.n, 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef HttpBody _take_body(fq_http_result *r):
    cdef HttpBody b = HttpBody.__new__(HttpBody)
    b.data = r.body
    b.n = <Py_ssize_t>r.body_len
    r.body = NULL
    return b


def http_tls_load(candidates):
    """Load OpenSSL for https:// from the first of `candidates` (libssl paths or sonames)
    that has what the client needs; once per process.  Returns OpenSSL's version text;
    raises FastqError (UNSUPPORTED) saying what each candidate lacked."""
    cdef fq_err err
    cdef list bs = [os.fsencode(c) for c in candidates]
    cdef int n = len(bs), i
    cdef const char **arr = <const char **>malloc(max(n, 1) * sizeof(char *))
    if arr == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            arr[i] = <const char *>(<bytes>bs[i])
        memset(&err, 0, sizeof(err))
        if fq_http_tls_load(arr, n, &err) != 0:
            raise_fq_error(&err)
    finally:
        free(arr)
    return fq_http_tls_version().decode("utf-8", "replace")


cdef class HttpPool:
    """Worker threads doing blocking GETs on keep-alive connections to one host:port
    (csrc/net/fq_http.h); requests go through an HttpChannel.  close() (also on collection,
    which the channels' references put off until they are gone) interrupts what is in flight
    and waits for the threads to end."""
    cdef fq_http_pool *p

    def __cinit__(self):
        self.p = NULL

    def __init__(self, str host, int port, str host_header, int max_conns, double connect_timeout_s, double timeout_s,
                 bint tls=False, str ca_pem=None, bint verify=True):
        cdef fq_err err
        cdef bytes bhost = host.encode("idna" if not host.isascii() else "ascii")
        cdef bytes bhh = host_header.encode("ascii")
        cdef bytes bca = ca_pem.encode("ascii") if ca_pem is not None else None
        cdef const char *ca = NULL
        if bca is not None:
            ca = bca
        memset(&err, 0, sizeof(err))
        if fq_http_pool_create(bhost, port, bhh, max_conns, connect_timeout_s, timeout_s, &self.p, &err) != 0:
            raise_fq_error(&err)
        if tls and fq_http_pool_set_tls(self.p, bhost, ca, verify, &err) != 0:
            self.close()
            raise_fq_error(&err)

    def __dealloc__(self):
        if self.p != NULL:
            with nogil:
                fq_http_pool_close(self.p)
            self.p = NULL

    def close(self):
        """Interrupt the requests in flight, wait for the threads, free everything
        (idempotent; close the channels first)."""
        cdef fq_http_pool *p = self.p
        self.p = NULL
        if p != NULL:
            with nogil:
                fq_http_pool_close(p)


cdef class HttpChannel:
    """Where one event loop submits requests to a pool and collects their results.
    submit() queues a request; fileno() becomes readable when results wait; take() returns
    them as tuples (id, code, status, body, content_length, etag, content_range, message):
    code 0 when a response arrived (any status), else a CODES value (TIMEOUT, IO, NOMEM,
    CLOSED); body an HttpBody (None on error); content_length -1 and etag "" when absent;
    content_range (first, last, total) or None.  close() drops what is queued and resets the
    connections of what is in flight."""
    cdef fq_http_chan *c
    cdef readonly HttpPool pool

    def __cinit__(self):
        self.c = NULL

    def __init__(self, HttpPool pool):
        cdef fq_err err
        if pool.p == NULL:
            raise ValueError("the HTTP pool is closed")
        memset(&err, 0, sizeof(err))
        if fq_http_chan_create(pool.p, &self.c, &err) != 0:
            raise_fq_error(&err)
        self.pool = pool

    def __dealloc__(self):
        if self.c != NULL:
            fq_http_chan_close(self.c)
            self.c = NULL

    def fileno(self):
        if self.c == NULL:
            raise ValueError("the HTTP channel is closed")
        return fq_http_chan_fd(self.c)

    def submit(self, uint64_t rid, bytes target, bytes headers):
        cdef fq_err err
        if self.c == NULL:
            raise ValueError("the HTTP channel is closed")
        err.code = 0
        if fq_http_submit(self.c, rid, target, len(target), headers, len(headers), &err) != 0:
            raise_fq_error(&err)

    def take(self):
        cdef fq_http_result *r
        cdef fq_http_result *nxt
        out = []
        if self.c == NULL:
            return out
        r = fq_http_chan_take(self.c)
        while r != NULL:
            nxt = r.next
            out.append((r.id, r.code, r.status, _take_body(r) if r.code == 0 else None, r.content_length,
                        r.etag.decode("latin-1"),
                        (r.range_first, r.range_last, r.range_total) if r.range_first >= 0 else None,
                        r.msg.decode("utf-8", "replace")))
            fq_http_result_free(r)
            r = nxt
        return out

    def close(self):
        if self.c != NULL:
            fq_http_chan_close(self.c)
            self.c = NULL
