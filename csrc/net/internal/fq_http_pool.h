/* fq_http_pool.h - the pool's and channels' state, shared by fq_http_pool.c (worker threads,
 * connections, the pool's life) and fq_http_chan.c (channels, submitting, results); private
 * to the component.
 *
 * One mutex (fq_http_pool.mu) guards all of a pool's state, its channels' included; the
 * functions named *_locked are called with it held. */
#ifndef FQ_HTTP_POOL_H
#define FQ_HTTP_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "net/fq_http.h"
#include "net/internal/fq_http_conn.h"

/* New connections the server has not answered on yet, at most (a worker that needs another
 * waits for one of them to answer, or for an idle connection).  A connection is complete
 * once the server's kernel answers the handshake, before the server's accept() takes it; a
 * burst of them overflows a short listen queue (Python's http.server: 5), and the server
 * drops what does not fit, which TCP sends again only after 1, 3, 7... s: the batch waiting
 * for those requests stalls.  A first response byte proves the connection was accepted.  At
 * most 4 unanswered keeps a listen queue of 5 from overflowing however fast requests come;
 * a pool still grows by 4 connections per round trip (64 in 16 of them). */
#define MAX_UNCONFIRMED 4

struct fq_http_chan {
    fq_http_pool *pool;
    int efd;
    int refs;               /* 1 (the owner, until close) + requests queued or in flight */
    int closed;
    fq_http_result *done;   /* finished, newest first */
};

typedef struct request {
    uint64_t id;
    uint64_t seq;  /* the order of submission (the pool's), which the waiters for a connection keep */
    fq_http_chan *chan;
    char *text; /* the whole request, "GET ... \r\n\r\n" */
    size_t len;
    struct request *next;
} request;

typedef struct worker {
    fq_http_pool *pool;
    int used;            /* a thread runs in this slot */
    int fd;              /* the socket in use (-1: none), for the closes to interrupt */
    fq_http_chan *chan;  /* the channel of the request in flight (NULL: none) */
    uint64_t seq;        /* its request's seq */
    /* waiting for a connection (conn_get), in the pool's FIFO of waiters: */
    pthread_cond_t cv;   /* signalled when something is handed over (CLOCK_MONOTONIC) */
    int waiting;         /* in the FIFO */
    int fresh;           /* wants a new connection: an idle one will not do */
    int granted;         /* handed a new-connection slot (counted in unconfirmed) */
    fq_http_conn *handed;  /* handed an idle connection */
    struct worker *wait_next;
} worker;

struct fq_http_pool {
    char *host;
    char *host_header;
    int port;
    fq_tls_ctx *tls;          /* https (fq_http_pool_set_tls); NULL: plain HTTP */
    int max_conns;
    double connect_timeout_s, timeout_s;
    atomic_int closing;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* work queued / closing (CLOCK_MONOTONIC) */
    pthread_cond_t exit_cv;   /* a worker ended */
    int unconfirmed;          /* new connections not answered yet (MAX_UNCONFIRMED) */
    worker *wait_head;        /* workers waiting for a connection, by their requests' seq */
    int have_worker_cvs;      /* workers[i].cv initialised (pool_free destroys them) */
    request *head, *tail;     /* queued requests */
    uint64_t next_seq;        /* request.seq of the next request submitted */
    int idle_workers;
    int live;                 /* worker threads running */
    worker *workers;          /* max_conns slots */
    fq_http_conn *idle;       /* idle keep-alive connections */
};

/* fq_http_chan.c */
void fq_http_chan_unref_locked(fq_http_chan *c);
int fq_http_chan_finish_locked(fq_http_chan *c, fq_http_result *r);
void fq_http_chan_wake_reader(const fq_http_chan *c);

/* fq_http_pool.c */
int fq_http_pool_spawn_locked(fq_http_pool *p, fq_err *err);
void fq_http_pool_wake_waiters_locked(fq_http_pool *p);
void fq_http_request_free(request *q);

#endif
