/* fq_http_pool.c - the worker threads, the idle connections and the pool's life of
 * net/fq_http.h (the channels are in fq_http_chan.c).  One mutex (pool->mu) guards all of a
 * pool's state, its channels' included (net/internal/fq_http_pool.h). */
#define _GNU_SOURCE
#include "net/fq_http.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/internal/fq_http_pool.h"

#define IDLE_EXIT_S 1 /* a worker thread with nothing to do for this long ends */

/* abort: reset the connection (SO_LINGER 0: an RST, not a FIN), so that a server that has
 * not yet read or answered a request given up on drops it at once */
static void conn_free(fq_http_conn *c, int abort) {
    if (c == NULL) return;
    fq_tls_conn_free(c->tls); /* (NULL: plain HTTP) */
    if (c->fd >= 0) {
        if (abort) {
            struct linger lg = {1, 0};
            (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)); /* best effort */
        }
        close(c->fd);
    }
    free(c);
}

/* Is w's request given up on (the pool or its channel closed)?  Under the mutex. */
static int abandoned_locked(const fq_http_pool *p, const worker *w) {
    return atomic_load(&p->closing) || (w->chan != NULL && w->chan->closed);
}

/* Waiting for a connection is first come, first served: a slot or an idle connection that
 * frees up is handed to the waiter with the oldest request (and only it is woken; the FIFO
 * is kept in the order of the requests' submission), so that a worker coming
 * back for its next request cannot take it first.  Without that order a waiter (holding an
 * older request, the one a batch waits for) lost every race to the workers that had just
 * finished: at a server that closes every connection it waited 100-200 ms, in 50 ms slices,
 * while newer requests went by (a batch a second late at moto's S3 server). */
static void wait_unlink_locked(fq_http_pool *p, worker *w) {
    worker **link = &p->wait_head;
    while (*link != NULL && *link != w) link = &(*link)->wait_next;
    if (*link == NULL) return;
    *link = w->wait_next;
    w->wait_next = NULL;
    w->waiting = 0;
}

/* The closes: every waiter looks at once whether its request was given up on. */
void fq_http_pool_wake_waiters_locked(fq_http_pool *p) {
    for (worker *w = p->wait_head; w != NULL; w = w->wait_next) pthread_cond_signal(&w->cv);
}

/* New-connection slots free: to the oldest waiters. */
static void grant_slots_locked(fq_http_pool *p) {
    while (p->wait_head != NULL && p->unconfirmed < MAX_UNCONFIRMED) {
        worker *w = p->wait_head;
        wait_unlink_locked(p, w);
        w->granted = 1;
        p->unconfirmed++;
        pthread_cond_signal(&w->cv);
    }
}

/* An idle connection: to the oldest waiter that can use one, else to the idle list. */
static void give_idle_locked(fq_http_pool *p, fq_http_conn *c) {
    c->idle_since_ns = fq_now_ns(); /* (a waiter handed it then skips the stale check) */
    worker *w = p->wait_head;
    while (w != NULL && w->fresh) w = w->wait_next;
    if (w != NULL) {
        wait_unlink_locked(p, w);
        w->handed = c;
        pthread_cond_signal(&w->cv);
        return;
    }
    c->next = p->idle;
    p->idle = c;
}

/* The connection's first response byte (fq_http_conn.first_byte), or its end before one:
 * it no longer counts as unanswered. */
static void release_unconfirmed(void *arg, fq_http_conn *c) {
    fq_http_pool *p = arg;
    if (!c->unconfirmed) return; /* (only the worker using c reads or writes its field) */
    pthread_mutex_lock(&p->mu);
    if (c->unconfirmed) {
        c->unconfirmed = 0;
        p->unconfirmed--;
        grant_slots_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
}

/* An idle connection (unless fresh is set), or a new one; *reused tells which.  The
 * worker's fd is published for the closes under the mutex.  A connection idle for more
 * than STALE_CHECK_NS is first checked for the server's close (keepalive_timeout): one
 * syscall, and a request not sent into a closed connection.  A new connection waits while
 * MAX_UNCONFIRMED others are unanswered, in the FIFO of waiters (which an idle connection
 * that comes back meanwhile also serves). */
#define STALE_CHECK_NS 500000000ull

/* An idle connection w was given (w->fd published), outside the mutex: still open (1), or
 * closed by the server and freed (0). */
static int still_open(fq_http_pool *p, worker *w, fq_http_conn *c) {
    if (fq_now_ns() - c->idle_since_ns < STALE_CHECK_NS || !fq_http_conn_closed(c)) return 1;
    pthread_mutex_lock(&p->mu);
    w->fd = -1;
    pthread_mutex_unlock(&p->mu);
    conn_free(c, 0);
    return 0;
}

static int conn_get(fq_http_pool *p, worker *w, int fresh, fq_http_conn **out, int *reused, char *msg) {
    fq_http_conn *c = w->handed;
    if (c != NULL) { /* taken with the request on its first attempt (worker_main); w is not waiting */
        w->handed = NULL;
        if (still_open(p, w, c)) {
            *reused = 1;
            *out = c;
            return FQ_OK;
        }
    }
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (abandoned_locked(p, w)) {
            if (w->waiting) wait_unlink_locked(p, w);
            if (w->granted) { /* the slot goes on to the next waiter */
                w->granted = 0;
                p->unconfirmed--;
                grant_slots_locked(p);
            }
            fq_http_conn *h = w->handed;
            w->handed = NULL;
            if (h != NULL && !atomic_load(&p->closing)) give_idle_locked(p, h);
            else if (h != NULL) conn_free(h, 0);
            pthread_mutex_unlock(&p->mu);
            snprintf(msg, FQ_HTTP_MSG_LEN, "the client closed");
            return FQ_E_CLOSED;
        }
        if (w->granted) {
            w->granted = 0; /* the slot is counted in p->unconfirmed already */
            break;
        }
        if (w->handed == NULL && !w->waiting && !fresh && p->idle != NULL) {
            w->handed = p->idle;
            p->idle = w->handed->next;
        }
        if (w->handed != NULL) {
            c = w->handed;
            w->handed = NULL;
            w->fd = c->fd;
            pthread_mutex_unlock(&p->mu);
            if (still_open(p, w, c)) {
                *reused = 1;
                *out = c;
                return FQ_OK;
            }
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (!w->waiting) {
            if (p->wait_head == NULL && p->unconfirmed < MAX_UNCONFIRMED) {
                p->unconfirmed++;
                break;
            }
            /* in the order of the requests' submission: a worker that took its request
             * earlier but reached this point later (the scheduler's doing) keeps its turn */
            w->waiting = 1;
            w->fresh = fresh;
            worker **link = &p->wait_head;
            while (*link != NULL && (*link)->seq < w->seq) link = &(*link)->wait_next;
            w->wait_next = *link;
            *link = w;
        }
        /* a timed wait: the closes' checks above run at least every 50 ms */
        struct timespec until;
        if (clock_gettime(CLOCK_MONOTONIC, &until) != 0) continue; /* cannot fail on Linux */
        until.tv_nsec += 50000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        (void)pthread_cond_timedwait(&w->cv, &p->mu, &until); /* ETIMEDOUT: look again */
    }
    pthread_mutex_unlock(&p->mu);
    c = malloc(sizeof(*c));
    if (c == NULL) {
        pthread_mutex_lock(&p->mu);
        p->unconfirmed--;
        grant_slots_locked(p);
        pthread_mutex_unlock(&p->mu);
        snprintf(msg, FQ_HTTP_MSG_LEN, "out of memory");
        return FQ_E_NOMEM;
    }
    c->fd = -1;
    c->tls = NULL;
    c->rpos = c->rlen = 0;
    c->lowat_raised = 0;
    c->next = NULL;
    c->unconfirmed = 1;
    c->first_byte = release_unconfirmed;
    c->first_byte_arg = p;
    c->rcvtimeo_ns = (uint64_t)(p->timeout_s * 1e9); /* fq_http_connect sets it so */
    int rc = fq_http_connect(p->host, p->port, p->connect_timeout_s, p->timeout_s, &p->closing, &c->fd, msg);
    if (rc != FQ_OK) {
        release_unconfirmed(p, c);
        free(c);
        return rc;
    }
    pthread_mutex_lock(&p->mu);
    w->fd = c->fd;
    int gone = abandoned_locked(p, w);
    if (gone) w->fd = -1; /* (closed below: no close may shut down a number reused meanwhile) */
    pthread_mutex_unlock(&p->mu);
    if (gone) { /* a close may have looked at w->fd before it was set */
        release_unconfirmed(p, c);
        conn_free(c, 1);
        snprintf(msg, FQ_HTTP_MSG_LEN, "the client closed");
        return FQ_E_CLOSED;
    }
    if (p->tls != NULL) { /* https: the handshake, part of connecting (connect_timeout_s) */
        rc = fq_tls_connect(p->tls, c->fd, p->connect_timeout_s, &p->closing, &c->tls, msg, FQ_HTTP_MSG_LEN);
        pthread_mutex_lock(&p->mu);
        gone = abandoned_locked(p, w);
        if (rc != FQ_OK || gone) w->fd = -1;
        pthread_mutex_unlock(&p->mu);
        if (rc == FQ_OK && gone) {
            rc = FQ_E_CLOSED;
            snprintf(msg, FQ_HTTP_MSG_LEN, "the client closed");
        }
        release_unconfirmed(p, c); /* the server answered the handshake: it took the connection */
        if (rc != FQ_OK) {
            conn_free(c, 1);
            return gone ? FQ_E_CLOSED : rc;
        }
    }
    *reused = 0;
    *out = c;
    return FQ_OK;
}

/* The worker is done with c: kept (to a waiter or the idle list), or returned for the
 * caller to conn_free(c, *gone) after unlocking.  *gone: w's request was given up on. */
static fq_http_conn *conn_put_locked(fq_http_pool *p, worker *w, fq_http_conn *c, int keep, int *gone) {
    w->fd = -1;
    *gone = abandoned_locked(p, w);
    if (keep && !*gone) {
        give_idle_locked(p, c);
        return NULL;
    }
    return c;
}

/* Runs q into r.  On success the connection is left to the caller (*used, *keep), which
 * puts it back in the same critical section as it finishes the request (fewer lock
 * round trips per request: each one that collides is a futex call, and 64 threads
 * share the mutex); on failure it is put back here. */
static void run_request(fq_http_pool *p, worker *w, request *q, fq_http_result *r, fq_http_conn **used,
                        int *keep_used) {
    *used = NULL;
    for (int attempt = 0;; attempt++) {
        fq_http_conn *c = NULL;
        int reused = 0, keep = 0;
        int rc = conn_get(p, w, attempt > 0, &c, &reused, r->msg);
        if (rc != FQ_OK) {
            r->code = rc;
            return;
        }
        fq_http_conn_begin(c, p->timeout_s);
        rc = fq_http_exchange(c, q->text, q->len, r, &keep);
        int got_any = c->got_any;
        release_unconfirmed(p, c); /* (no answer: it ends here; answered: released already) */
        if (rc == FQ_OK) {
            r->code = FQ_OK;
            *used = c;
            *keep_used = keep;
            return;
        }
        int gone;
        pthread_mutex_lock(&p->mu);
        c = conn_put_locked(p, w, c, 0, &gone);
        pthread_mutex_unlock(&p->mu);
        conn_free(c, gone);
        if (gone) {
            r->code = FQ_E_CLOSED;
            snprintf(r->msg, FQ_HTTP_MSG_LEN, "the client closed");
            return;
        }
        /* the server closed a kept-alive connection before answering: once more, afresh */
        if (rc == FQ_E_IO && reused && !got_any && attempt == 0) {
            r->status = 0;
            continue;
        }
        r->code = rc;
        return;
    }
}

void fq_http_request_free(request *q) {
    free(q->text);
    free(q);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    fq_http_pool *p = w->pool;
    (void)pthread_setname_np(pthread_self(), "fastq-http"); /* informative only (top, perf) */
    /* OpenSSL writes with write(), not send(MSG_NOSIGNAL): a server that closed would raise
     * SIGPIPE; blocked here, it stays pending on this thread and is dropped when it ends
     * (the write fails with EPIPE as the plain path's send does) */
    sigset_t pipe;
    if (sigemptyset(&pipe) == 0 && sigaddset(&pipe, SIGPIPE) == 0)
        (void)pthread_sigmask(SIG_BLOCK, &pipe, NULL); /* cannot fail with a valid set */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int timed_out = 0;
        while (p->head == NULL && !atomic_load(&p->closing) && !timed_out) {
            struct timespec until;
            if (clock_gettime(CLOCK_MONOTONIC, &until) != 0) break; /* cannot fail on Linux */
            until.tv_sec += IDLE_EXIT_S;
            p->idle_workers++;
            timed_out = pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT;
            p->idle_workers--;
        }
        if (atomic_load(&p->closing) || p->head == NULL) break;
        request *q = p->head;
        p->head = q->next;
        if (p->head == NULL) p->tail = NULL;
        w->chan = q->chan;
        w->seq = q->seq;
        if (p->wait_head == NULL && p->idle != NULL) { /* an idle connection with the request (conn_get) */
            w->handed = p->idle;
            p->idle = w->handed->next;
            w->fd = w->handed->fd;
        }
        pthread_mutex_unlock(&p->mu);

        fq_http_chan *chan = q->chan;
        fq_http_conn *used = NULL;
        int keep = 0;
        fq_http_result *r = calloc(1, sizeof(*r));
        if (r != NULL) {
            r->id = q->id;
            r->content_length = r->range_first = r->range_last = r->range_total = -1;
            run_request(p, w, q, r, &used, &keep);
        } else if (w->handed != NULL) { /* (nobody else touches it while w is not waiting) */
            used = w->handed;
            w->handed = NULL;
        }
        fq_http_request_free(q);
        /* two critical sections per request at its end, none for its connection when an
         * idle one came with it: each lock that collides costs futex calls, and the pool's
         * threads all share this mutex */
        pthread_mutex_lock(&p->mu);
        int gone = 0, wake = 0;
        if (used != NULL) used = conn_put_locked(p, w, used, keep, &gone);
        w->chan = NULL;
        if (r != NULL) wake = fq_http_chan_finish_locked(chan, r); /* (r NULL, no memory: the request is lost, its
                                                        * future pending until the loop ends) */
        pthread_mutex_unlock(&p->mu);
        if (wake) fq_http_chan_wake_reader(chan);
        conn_free(used, gone); /* one not kept (NULL: nothing) */
        pthread_mutex_lock(&p->mu);
        fq_http_chan_unref_locked(chan);
    }
    w->used = 0;
    p->live--;
    pthread_cond_broadcast(&p->exit_cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Starts a worker thread (under the mutex, live < max_conns).  FQ_OK, also when it could
 * not start while others run (they take the request); an error when none runs. */
int fq_http_pool_spawn_locked(fq_http_pool *p, fq_err *err) {
    worker *w = NULL;
    for (int i = 0; i < p->max_conns && w == NULL; i++)
        if (!p->workers[i].used) w = &p->workers[i];
    /* live < max_conns: a slot is free */
    w->pool = p;
    w->fd = -1;
    w->chan = NULL;
    pthread_attr_t attr;
    pthread_t th;
    int e = pthread_attr_init(&attr);
    if (e == 0) {
        e = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (e == 0) e = pthread_create(&th, &attr, worker_main, w);
        pthread_attr_destroy(&attr);
    }
    if (e == 0) {
        w->used = 1;
        p->live++;
    } else if (p->live == 0) { /* nobody would ever take it */
        return fq_set_err(err, FQ_E_SYS, "cannot start an HTTP worker thread: %s", strerror(e));
    }
    return FQ_OK;
}

static void pool_free(fq_http_pool *p, int sync) {
    if (p->have_worker_cvs)
        for (int i = 0; i < p->max_conns; i++) pthread_cond_destroy(&p->workers[i].cv);
    if (sync) {
        pthread_cond_destroy(&p->exit_cv);
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
    fq_tls_ctx_free(p->tls);
    free(p->workers);
    free(p->host);
    free(p->host_header);
    free(p);
}

int fq_http_pool_create(const char *host, int port, const char *host_header, int max_conns,
                        double connect_timeout_s, double timeout_s, fq_http_pool **out, fq_err *err) {
    *out = NULL;
    if (host == NULL || host_header == NULL || port <= 0 || port > 65535 || max_conns < 1 ||
        !(connect_timeout_s > 0) || !(timeout_s > 0))
        return fq_set_err(err, FQ_E_INVALID, "fq_http_pool_create: bad argument");
    fq_http_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    p->host = strdup(host);
    p->host_header = strdup(host_header);
    p->workers = calloc((size_t)max_conns, sizeof(worker));
    if (p->host == NULL || p->host_header == NULL || p->workers == NULL) {
        pool_free(p, 0);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    p->port = port;
    p->max_conns = max_conns;
    p->connect_timeout_s = connect_timeout_s;
    p->timeout_s = timeout_s;
    atomic_init(&p->closing, 0);
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0, have_cv = 0, worker_cvs = 0;
    if (ok) {
        ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && (have_cv = pthread_cond_init(&p->cv, &ca) == 0);
        while (ok && worker_cvs < max_conns && pthread_cond_init(&p->workers[worker_cvs].cv, &ca) == 0) worker_cvs++;
        ok = ok && worker_cvs == max_conns;
        pthread_condattr_destroy(&ca);
    }
    if (!ok) {
        if (have_cv) pthread_cond_destroy(&p->cv);
        for (int i = 0; i < worker_cvs; i++) pthread_cond_destroy(&p->workers[i].cv);
        pool_free(p, 0);
        return fq_set_err(err, FQ_E_SYS, "pthread_cond_init failed");
    }
    p->have_worker_cvs = 1;
    if (pthread_cond_init(&p->exit_cv, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        pool_free(p, 0);
        return fq_set_err(err, FQ_E_SYS, "pthread_cond_init failed");
    }
    /* adaptive: a thread that finds the mutex taken spins a little before it sleeps (the
     * critical sections are a few list operations; sleeping costs two futex calls) */
    pthread_mutexattr_t ma;
    int mu_ok = pthread_mutexattr_init(&ma) == 0;
    if (mu_ok) {
#ifdef __GLIBC__
        (void)pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP); /* best effort: a plain one otherwise */
#endif
        mu_ok = pthread_mutex_init(&p->mu, &ma) == 0;
        pthread_mutexattr_destroy(&ma);
    }
    if (!mu_ok) {
        pthread_cond_destroy(&p->exit_cv);
        pthread_cond_destroy(&p->cv);
        pool_free(p, 0);
        return fq_set_err(err, FQ_E_SYS, "pthread_mutex_init failed");
    }
    *out = p;
    return FQ_OK;
}

int fq_http_pool_set_tls(fq_http_pool *p, const char *server_name, const char *ca_pem, int verify, fq_err *err) {
    pthread_mutex_lock(&p->mu);
    int started = p->live > 0 || p->head != NULL || p->tls != NULL;
    pthread_mutex_unlock(&p->mu);
    if (started) return fq_set_err(err, FQ_E_INVALID, "fq_http_pool_set_tls: the pool is in use already");
    return fq_tls_ctx_new(server_name, ca_pem, verify, &p->tls, err);
}

void fq_http_pool_close(fq_http_pool *p) {
    if (p == NULL) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->closing, 1);
    for (int i = 0; i < p->max_conns; i++)
        if (p->workers[i].used && p->workers[i].fd >= 0) (void)shutdown(p->workers[i].fd, SHUT_RD);
    pthread_cond_broadcast(&p->cv);
    fq_http_pool_wake_waiters_locked(p);
    while (p->live > 0) pthread_cond_wait(&p->exit_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    while (p->head != NULL) { /* left by channels not closed first: their results are lost */
        request *q = p->head;
        p->head = q->next;
        fq_http_request_free(q);
    }
    while (p->idle != NULL) {
        fq_http_conn *c = p->idle;
        p->idle = c->next;
        conn_free(c, 0);
    }
    pool_free(p, 1);
}
