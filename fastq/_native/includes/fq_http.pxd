# csrc/net/fq_http.h: the HTTP client (http:// and https://) of remote sources (fastq/sources/nethttp.py).
from libc.stdint cimport int64_t, uint8_t, uint64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "net/fq_http.h" nogil:
    enum:
        FQ_HTTP_ETAG_LEN
        FQ_HTTP_MSG_LEN
    ctypedef struct fq_http_pool:
        pass
    ctypedef struct fq_http_result:
        uint64_t id
        int code
        int status
        uint8_t *body
        size_t body_len
        int64_t content_length
        int64_t range_first
        int64_t range_last
        int64_t range_total
        char etag[FQ_HTTP_ETAG_LEN]
        char msg[FQ_HTTP_MSG_LEN]
        fq_http_result *next
    ctypedef struct fq_http_chan:
        pass
    int fq_http_pool_create(const char *host, int port, const char *host_header, int max_conns,
                            double connect_timeout_s, double timeout_s, fq_http_pool **out, fq_err *err)
    int fq_http_pool_set_tls(fq_http_pool *p, const char *server_name, const char *ca_pem, int verify, fq_err *err)
    int fq_http_tls_load(const char *const *candidates, int n, fq_err *err)
    const char *fq_http_tls_version()
    void fq_http_pool_close(fq_http_pool *p)
    int fq_http_chan_create(fq_http_pool *p, fq_http_chan **out, fq_err *err)
    int fq_http_chan_fd(const fq_http_chan *c)
    fq_http_result *fq_http_chan_take(fq_http_chan *c)
    void fq_http_chan_close(fq_http_chan *c)
    int fq_http_submit(fq_http_chan *c, uint64_t id, const char *target, size_t target_len, const char *headers,
                       size_t headers_len, fq_err *err)
    void fq_http_result_free(fq_http_result *r)
