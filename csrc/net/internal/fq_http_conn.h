/* fq_http_conn.h - one HTTP/1.1 connection of csrc/net (private to the component).
 *
 * A connection is used by one worker thread at a time (the pool hands it over under its
 * mutex); nothing here locks. */
#ifndef FQ_HTTP_CONN_H
#define FQ_HTTP_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "net/fq_http.h"
#include "net/internal/fq_tls.h"

#define FQ_HTTP_RBUF 16384

typedef struct fq_http_conn {
    int fd;
    fq_tls_conn *tls;           /* https: the TLS state over fd (NULL: plain HTTP) */
    char tls_why[FQ_HTTP_MSG_LEN / 2]; /* the last TLS failure (errno EPROTO from fq_tls_*) */
    size_t rpos, rlen;          /* unread bytes of rbuf: [rpos, rlen) */
    uint64_t deadline_ns;       /* the request's end (fq_now_ns clock) */
    uint64_t rcvtimeo_ns;       /* the socket's SO_RCVTIMEO now: timeout_s, lowered as the
                                   request's deadline nears (fq_http_conn_begin restores it) */
    int got_any;                /* a byte of the current response arrived */
    int lowat_raised;           /* SO_RCVLOWAT is above 1 (wait_for_rest could not put it
                                   back): the connection is not reused */
    /* called once, at the connection's first response byte (then cleared): the pool counts
       connections the server may not have accepted yet (fq_http_pool.h, MAX_UNCONFIRMED) */
    void (*first_byte)(void *arg, struct fq_http_conn *c);
    void *first_byte_arg;
    int unconfirmed;            /* the pool counts it as not yet answered (the pool's field) */
    uint64_t idle_since_ns;     /* when it went back to the pool */
    uint8_t rbuf[FQ_HTTP_RBUF];
    struct fq_http_conn *next;  /* the pool's idle list */
} fq_http_conn;

/* Open a TCP connection to host:port within connect_timeout_s (polled in short slices, so
 * that *closing set by another thread ends the wait); reads and writes then wait at most
 * timeout_s each.  FQ_OK and *fd, or an error code with msg (FQ_HTTP_MSG_LEN) filled. */
int fq_http_connect(const char *host, int port, double connect_timeout_s, double timeout_s,
                    const atomic_int *closing, int *fd, char *msg);

/* Start a request on c: its deadline timeout_s from now, and the socket's read timeout back
 * at timeout_s if the last request lowered it. */
void fq_http_conn_begin(fq_http_conn *c, double timeout_s);

/* Has the server closed (or reset) this idle connection?  One non-blocking peek. */
int fq_http_conn_closed(const fq_http_conn *c);

/* Send req on c and read one response into r (status, headers, body).  FQ_OK, or an error
 * code with r->msg; c->got_any tells whether any of the response arrived.  *keep: the
 * connection may carry another request. */
int fq_http_exchange(fq_http_conn *c, const char *req, size_t req_len, fq_http_result *r, int *keep);

#endif
