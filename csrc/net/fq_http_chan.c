/* fq_http_chan.c - the channels of net/fq_http.h: submitting requests, collecting their
 * results, closing.  The state is the pool's (net/internal/fq_http_pool.h), under its mutex. */
#define _GNU_SOURCE
#include "net/fq_http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/internal/fq_http_pool.h"

void fq_http_chan_unref_locked(fq_http_chan *c) {
    if (--c->refs > 0) return;
    while (c->done != NULL) {
        fq_http_result *r = c->done;
        c->done = r->next;
        fq_http_result_free(r);
    }
    close(c->efd);
    free(c);
}

/* r to c's results (dropped if c was closed) -> whether c's reader must be woken, by
 * fq_http_chan_wake_reader() after unlocking (a write under the mutex would make every thread that wants
 * it wait through the syscall and the reader's wake-up); the request keeps its reference to
 * c, and with it c's eventfd, until then. */
int fq_http_chan_finish_locked(fq_http_chan *c, fq_http_result *r) {
    if (c->closed) {
        fq_http_result_free(r);
        return 0;
    }
    int was_empty = c->done == NULL;
    r->next = c->done;
    c->done = r;
    return was_empty;
}

void fq_http_chan_wake_reader(const fq_http_chan *c) {
    uint64_t one = 1;
    /* an eventfd write fails only on counter overflow, when the reader is already woken */
    ssize_t n = write(c->efd, &one, sizeof(one));
    (void)n;
}

int fq_http_chan_create(fq_http_pool *p, fq_http_chan **out, fq_err *err) {
    *out = NULL;
    fq_http_chan *c = calloc(1, sizeof(*c));
    if (c == NULL) return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->efd < 0) {
        int e = errno;
        free(c);
        return fq_set_err(err, FQ_E_SYS, "eventfd: %s", strerror(e));
    }
    c->pool = p;
    c->refs = 1;
    *out = c;
    return FQ_OK;
}

int fq_http_chan_fd(const fq_http_chan *c) { return c->efd; }

int fq_http_submit(fq_http_chan *c, uint64_t id, const char *target, size_t target_len, const char *headers,
                   size_t headers_len, fq_err *err) {
    fq_http_pool *p = c->pool;
    request *q = malloc(sizeof(*q));
    size_t cap = target_len + headers_len + strlen(p->host_header) + 64;
    char *text = malloc(cap);
    if (q == NULL || text == NULL) {
        free(q);
        free(text);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    int n = snprintf(text, cap, "GET %.*s HTTP/1.1\r\nHost: %s\r\n%.*s\r\n", (int)target_len, target,
                     p->host_header, (int)headers_len, headers);
    if (n < 0 || (size_t)n >= cap) {
        free(q);
        free(text);
        return fq_set_err(err, FQ_E_INVALID, "fq_http_submit: the request does not fit");
    }
    q->id = id;
    q->seq = 0; /* (set under the mutex below) */
    q->chan = c;
    q->text = text;
    q->len = (size_t)n;
    q->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (atomic_load(&p->closing) || c->closed) {
        pthread_mutex_unlock(&p->mu);
        fq_http_request_free(q);
        return fq_set_err(err, FQ_E_CLOSED, "the HTTP client is closed");
    }
    int rc = p->idle_workers == 0 && p->live < p->max_conns ? fq_http_pool_spawn_locked(p, err) : FQ_OK;
    if (rc == FQ_OK) {
        c->refs++;
        q->seq = p->next_seq++;
        if (p->tail) p->tail->next = q;
        else p->head = q;
        p->tail = q;
        q = NULL;
    }
    int signal = rc == FQ_OK && p->idle_workers > 0;
    pthread_mutex_unlock(&p->mu);
    /* after unlocking: the worker woken does not then wait for the mutex (a waiter re-checks
     * the queue under it, so the wake-up cannot be lost) */
    if (signal) pthread_cond_signal(&p->cv);
    if (q != NULL) fq_http_request_free(q);
    return rc;
}

fq_http_result *fq_http_chan_take(fq_http_chan *c) {
    fq_http_pool *p = c->pool;
    pthread_mutex_lock(&p->mu);
    fq_http_result *r = c->done;
    c->done = NULL;
    uint64_t v;
    ssize_t n = read(c->efd, &v, sizeof(v)); /* EAGAIN when nothing was signalled: fine */
    (void)n;
    pthread_mutex_unlock(&p->mu);
    fq_http_result *fifo = NULL; /* reversed: oldest first */
    while (r != NULL) {
        fq_http_result *next = r->next;
        r->next = fifo;
        fifo = r;
        r = next;
    }
    return fifo;
}

void fq_http_result_free(fq_http_result *r) {
    if (r == NULL) return;
    free(r->body);
    free(r);
}

void fq_http_chan_close(fq_http_chan *c) {
    if (c == NULL) return;
    fq_http_pool *p = c->pool;
    request *drop = NULL;
    pthread_mutex_lock(&p->mu);
    c->closed = 1;
    request **link = &p->head; /* its queued requests leave the queue */
    p->tail = NULL;
    while (*link != NULL) {
        request *q = *link;
        if (q->chan == c) {
            *link = q->next;
            q->next = drop;
            drop = q;
            c->refs--;
        } else {
            p->tail = q;
            link = &q->next;
        }
    }
    for (int i = 0; i < p->max_conns; i++) /* SHUT_RD wakes a recv and sends nothing; the worker resets it */
        if (p->workers[i].used && p->workers[i].chan == c && p->workers[i].fd >= 0)
            (void)shutdown(p->workers[i].fd, SHUT_RD);
    fq_http_pool_wake_waiters_locked(p); /* a worker of c waiting to connect gives up */
    fq_http_chan_unref_locked(c);
    pthread_mutex_unlock(&p->mu);
    while (drop != NULL) {
        request *q = drop;
        drop = q->next;
        fq_http_request_free(q);
    }
}
