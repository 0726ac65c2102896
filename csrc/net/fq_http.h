/* fq_http.h - a small HTTP/1.1 client for http:// and https:// GETs, for remote sources.
 *
 * A pool serves one host:port; a channel is where one event loop collects its results.
 * Requests are queued with fq_http_submit(pool, chan, ...); native worker threads (at most
 * max_conns, started as the queue needs them, each ending after about a second idle) each take
 * a request, take an idle keep-alive connection (or open one: connect_timeout_s), send the
 * request and read the response with blocking socket I/O, then put the result on the
 * request's channel and make the channel's descriptor (an eventfd) readable.  The caller
 * (an event loop, with add_reader) drains the channel with fq_http_chan_take().  Connections
 * are the pool's: they outlive channels and idle threads.
 *
 * Connections: kept open after a response unless the server said "Connection: close", sent
 * an HTTP/1.0 response without keep-alive, or delimited the body by closing.  A request sent
 * on a reused connection that fails before any byte of the response arrived (the server
 * closed an idle connection: keepalive_timeout, keepalive_requests) is sent again, once, on
 * a fresh connection.  At most 4 new connections wait for their first response byte at
 * once: a worker that needs another waits (or takes a connection that went idle meanwhile),
 * so that a burst of handshakes cannot overflow a server's short listen queue, whose dropped
 * handshakes TCP resends only after a second (internal/fq_http_pool.h, MAX_UNCONFIRMED).  The
 * waiters are served first come, first served, so the oldest requests go first.  A server
 * that closes every connection therefore has at most 4 requests waiting for an answer.
 *
 * Timeouts: timeout_s bounds the request as a whole: each read waits at most what is left of
 * it (SO_RCVTIMEO, lowered as the deadline nears, with a slack of an eighth), so a server
 * that stalls, or sends a byte now and then, fails the request with FQ_E_TIMEOUT within about
 * 1.125 * timeout_s (sending the request waits at most timeout_s, SO_SNDTIMEO).
 *
 * Bodies: a Content-Length body is read straight into one malloc'd buffer of that size; a
 * chunked body (Transfer-Encoding: chunked) or one delimited by the connection's close is
 * read into a buffer that grows.  The result owns the buffer (fq_http_result.body) until the
 * caller takes it (sets body to NULL and frees it with free() later) or frees the result.
 *
 * Thread safety: every function may be called from any thread, concurrently, except that a
 * channel is closed once and not used after, and the pool is closed once, after its
 * channels, and not used after.  fq_http_chan_close() drops the channel's queued requests,
 * resets the connections of its requests in flight (a server that has not answered yet drops
 * them) and frees the results nobody took; fq_http_pool_close() interrupts everything, waits
 * for every worker thread to end and frees the pool.  Neither waits for a server.
 */
#ifndef FQ_HTTP_H
#define FQ_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_HTTP_ETAG_LEN 256
#define FQ_HTTP_MSG_LEN 256

typedef struct fq_http_pool fq_http_pool;
typedef struct fq_http_chan fq_http_chan;

/* One finished request. */
typedef struct fq_http_result {
    uint64_t id;             /* the id given to fq_http_submit */
    int code;                /* FQ_OK: a response arrived (any status); FQ_E_TIMEOUT, FQ_E_IO (connection
                                refused / reset / closed early, malformed response), FQ_E_NOMEM,
                                FQ_E_CLOSED (the pool closed first): msg says what happened */
    int status;              /* the HTTP status (0 without a response) */
    uint8_t *body;           /* malloc'd body (NULL when empty or not FQ_OK) */
    size_t body_len;
    int64_t content_length;  /* the Content-Length header, -1 without one */
    int64_t range_first, range_last, range_total; /* Content-Range: bytes first-last/total, -1 when absent */
    char etag[FQ_HTTP_ETAG_LEN]; /* the ETag header as sent (quotes kept), "" when absent */
    char msg[FQ_HTTP_MSG_LEN];
    struct fq_http_result *next;
} fq_http_result;

/* A pool for host:port.  host_header is the Host header's value.  max_conns >= 1: worker
 * threads (and connections in use) at most.  Timeouts in seconds (> 0). */
int fq_http_pool_create(const char *host, int port, const char *host_header, int max_conns,
                        double connect_timeout_s, double timeout_s, fq_http_pool **out, fq_err *err);

/* https: every connection of p speaks TLS to server_name (the URL's host: its certificate
 * must name it; sent as SNI unless it is an address).  ca_pem: PEM text of CA certificates
 * trusted besides the system's (NULL: the system's only); verify 0 accepts any certificate.
 * Called once, after fq_http_pool_create and before the first request; needs
 * fq_http_tls_load first.  A certificate refused fails a request with FQ_E_INVALID. */
int fq_http_pool_set_tls(fq_http_pool *p, const char *server_name, const char *ca_pem, int verify, fq_err *err);

/* Loads OpenSSL (1.1.1 or later) from the first of the candidate libssl paths or sonames
 * that dlopen finds with every function needed; once per process, later calls return
 * FQ_OK.  FQ_E_UNSUPPORTED with what each candidate lacked.  Nothing of OpenSSL is linked
 * into fastq (csrc/net/fq_tls.c says why).  Thread-safe. */
int fq_http_tls_load(const char *const *candidates, int n, fq_err *err);

/* The loaded OpenSSL's version text, or NULL before fq_http_tls_load succeeded. */
const char *fq_http_tls_version(void);

/* Interrupts everything and waits for the worker threads to end; frees the pool.  Its
 * channels must be closed first. */
void fq_http_pool_close(fq_http_pool *p);

/* A channel of pool p (an eventfd, readable while results wait). */
int fq_http_chan_create(fq_http_pool *p, fq_http_chan **out, fq_err *err);
int fq_http_chan_fd(const fq_http_chan *c);

/* Every finished result of c, oldest first (NULL: none), and c's descriptor drained.  The
 * caller frees each with fq_http_result_free. */
fq_http_result *fq_http_chan_take(fq_http_chan *c);

/* See the top of this file; c is freed once its last request in flight ends. */
void fq_http_chan_close(fq_http_chan *c);

/* Queue "GET <target> HTTP/1.1" with the Host header and `headers` (complete header lines,
 * each ending in \r\n; may be empty), its result for channel c.  Both are copied.
 * FQ_E_CLOSED after close started; FQ_E_SYS when no worker thread could be started. */
int fq_http_submit(fq_http_chan *c, uint64_t id, const char *target, size_t target_len, const char *headers,
                   size_t headers_len, fq_err *err);

void fq_http_result_free(fq_http_result *r);

#ifdef __cplusplus
}
#endif
#endif
