/* fq_http_conn.c - connecting, sending a request and parsing one HTTP/1.1 response
 * (status line, headers, a Content-Length, chunked or close-delimited body).
 * See net/fq_http.h for the behaviour and net/internal/fq_http_conn.h for the interface. */
#define _GNU_SOURCE
#include "net/internal/fq_http_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_HEADER_BYTES (64 * 1024)
#define MAX_ERROR_BODY (1 << 20) /* a non-2xx body longer than this closes the connection instead */
#define LOWAT_MAX (4 << 20)      /* bodies up to this are waited for in one wake-up (wait_for_rest) */

static void set_rcvtimeo(int fd, uint64_t ns) {
    struct timeval tv;
    tv.tv_sec = (time_t)(ns / 1000000000u);
    tv.tv_usec = (suseconds_t)((ns % 1000000000u) / 1000u);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
    /* best effort: without it a read still ends at the timeout set before */
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

void fq_http_conn_begin(fq_http_conn *c, double timeout_s) {
    const uint64_t t = (uint64_t)(timeout_s * 1e9);
    c->deadline_ns = fq_now_ns() + t;
    if (c->rcvtimeo_ns != t) {
        set_rcvtimeo(c->fd, t);
        c->rcvtimeo_ns = t;
    }
}

static void set_timeouts(int fd, double timeout_s) {
    struct timeval tv;
    tv.tv_sec = (time_t)timeout_s;
    tv.tv_usec = (suseconds_t)((timeout_s - (double)tv.tv_sec) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
    /* best effort: without them the request's deadline still ends a stall after the next byte */
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Non-blocking connect to one address, waited for in 50 ms slices. */
static int connect_one(const struct addrinfo *ai, double connect_timeout_s, const atomic_int *closing, int *fd_out,
                       char *msg) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
        snprintf(msg, FQ_HTTP_MSG_LEN, "socket: %s", strerror(errno));
        return FQ_E_IO;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            snprintf(msg, FQ_HTTP_MSG_LEN, "connect: %s", strerror(errno));
            close(fd);
            return FQ_E_IO;
        }
        uint64_t end = fq_now_ns() + (uint64_t)(connect_timeout_s * 1e9);
        for (;;) {
            if (atomic_load(closing)) {
                snprintf(msg, FQ_HTTP_MSG_LEN, "the client closed");
                close(fd);
                return FQ_E_CLOSED;
            }
            struct pollfd pfd = {fd, POLLOUT, 0};
            int n = poll(&pfd, 1, 50);
            if (n > 0) break;
            if (n < 0 && errno != EINTR) {
                snprintf(msg, FQ_HTTP_MSG_LEN, "poll: %s", strerror(errno));
                close(fd);
                return FQ_E_IO;
            }
            if (fq_now_ns() >= end) {
                snprintf(msg, FQ_HTTP_MSG_LEN, "connect timed out after %.3g s", connect_timeout_s);
                close(fd);
                return FQ_E_TIMEOUT;
            }
        }
        int soerr = 0;
        socklen_t len = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
        if (soerr != 0) {
            snprintf(msg, FQ_HTTP_MSG_LEN, "connect: %s", strerror(soerr));
            close(fd);
            return FQ_E_IO;
        }
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        snprintf(msg, FQ_HTTP_MSG_LEN, "fcntl: %s", strerror(errno));
        close(fd);
        return FQ_E_IO;
    }
    *fd_out = fd;
    return FQ_OK;
}

int fq_http_connect(const char *host, int port, double connect_timeout_s, double timeout_s,
                    const atomic_int *closing, int *fd, char *msg) {
    struct addrinfo hints, *res = NULL;
    char portstr[16];
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%d", port);
    int g = getaddrinfo(host, portstr, &hints, &res);
    if (g != 0) {
        snprintf(msg, FQ_HTTP_MSG_LEN, "cannot resolve %s: %s", host, gai_strerror(g));
        return FQ_E_IO;
    }
    int rc = FQ_E_IO;
    snprintf(msg, FQ_HTTP_MSG_LEN, "no address for %s", host);
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        rc = connect_one(ai, connect_timeout_s, closing, fd, msg);
        if (rc == FQ_OK || rc == FQ_E_CLOSED) break;
    }
    freeaddrinfo(res);
    if (rc != FQ_OK) return rc;
    int one = 1;
    (void)setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* best effort: latency only */
    set_timeouts(*fd, timeout_s);
    return FQ_OK;
}

/* -- reading ---------------------------------------------------------------- */

static int io_error(fq_http_conn *c, fq_http_result *r, const char *what, int e) {
    if (e == EAGAIN || e == EWOULDBLOCK) {
        snprintf(r->msg, FQ_HTTP_MSG_LEN, "timed out (stalled connection?) %s", what);
        return FQ_E_TIMEOUT;
    }
    const char *why = e == 0 ? "the server closed the connection" : (e == EPROTO && c->tls) ? c->tls_why : strerror(e);
    snprintf(r->msg, FQ_HTTP_MSG_LEN, "%s: %s", what, why);
    return FQ_E_IO;
}

/* recv() / send() on the connection, through TLS for https (same results and errno). */
static ssize_t conn_recv(fq_http_conn *c, void *buf, size_t n) {
    if (c->tls != NULL) return fq_tls_recv(c->tls, buf, n, c->tls_why, sizeof(c->tls_why));
    return recv(c->fd, buf, n, 0);
}

static ssize_t conn_send(fq_http_conn *c, const void *buf, size_t n) {
    if (c->tls != NULL) return fq_tls_send(c->tls, buf, n, c->tls_why, sizeof(c->tls_why));
    return send(c->fd, buf, n, MSG_NOSIGNAL);
}

static int check_deadline(fq_http_conn *c, fq_http_result *r) {
    if (fq_now_ns() > c->deadline_ns) {
        snprintf(r->msg, FQ_HTTP_MSG_LEN, "timed out (stalled connection?)");
        return FQ_E_TIMEOUT;
    }
    return FQ_OK;
}

/* recv into dst (at most cap bytes); 0 bytes is an error (the peer closed) unless eof_ok. */
static int recv_some(fq_http_conn *c, fq_http_result *r, uint8_t *dst, size_t cap, size_t *got, int eof_ok) {
    for (;;) {
        /* a read waits at most what is left of the request's time (plus an eighth of it, so
         * that a request going well lowers the socket's timeout a few times at most, not
         * before every read): a server sending a byte now and then cannot stretch the
         * request past about timeout_s */
        const uint64_t now = fq_now_ns();
        if (now >= c->deadline_ns) {
            snprintf(r->msg, FQ_HTTP_MSG_LEN, "timed out (stalled connection?)");
            return FQ_E_TIMEOUT;
        }
        const uint64_t left = c->deadline_ns - now;
        if (left + left / 8 < c->rcvtimeo_ns) {
            set_rcvtimeo(c->fd, left);
            c->rcvtimeo_ns = left;
        }
        ssize_t n = conn_recv(c, dst, cap);
        if (n > 0) {
            c->got_any = 1;
            if (c->first_byte != NULL) {
                void (*fn)(void *, fq_http_conn *) = c->first_byte;
                c->first_byte = NULL;
                fn(c->first_byte_arg, c);
            }
            *got = (size_t)n;
            return check_deadline(c, r);
        }
        if (n == 0) {
            *got = 0;
            return eof_ok ? FQ_OK : io_error(c, r, "reading the response", 0);
        }
        if (errno == EINTR) continue;
        return io_error(c, r, "reading the response", errno);
    }
}

/* Make rbuf hold at least one unread byte (compacting it first). */
static int fill(fq_http_conn *c, fq_http_result *r, int eof_ok, size_t *got) {
    if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    if (c->rlen == FQ_HTTP_RBUF) {
        snprintf(r->msg, FQ_HTTP_MSG_LEN, "malformed response: a line longer than %d bytes", FQ_HTTP_RBUF);
        return FQ_E_IO;
    }
    int rc = recv_some(c, r, c->rbuf + c->rlen, FQ_HTTP_RBUF - c->rlen, got, eof_ok);
    if (rc == FQ_OK) c->rlen += *got;
    return rc;
}

/* Wait until the `left` bytes still to come of a body are all in the socket, in one wake-up
 * of the thread: the socket's low-water mark (SO_RCVLOWAT) is raised to `left` and poll()
 * reports it readable only then, or at the peer's FIN, an error, or the kernel's own limits
 * (the mark is capped at half the largest receive buffer; a full window or memory pressure
 * wakes it early).  A blocking recv() reading part of the body, then sleeping, wakes at each
 * segment (a 100 KB body came in 2-3 wake-ups on loopback, more over a real network's 1.5 KB
 * segments).  Not recv() with the mark raised: recv copies what is there before it sleeps,
 * and the kernel wakes it only when `left` more bytes are in, which may never come.  The
 * mark is put back to 1 before the bytes are read (recv_some).  Best effort: if a call fails
 * the body is read as before.  The request's deadline bounds the wait (a timeout is reported
 * by recv_some, which sees the deadline passed). */
static void wait_for_rest(fq_http_conn *c, size_t left) {
    if (left < 2 || left > LOWAT_MAX) return;
    /* TLS: the bytes still to come are more than `left` on the wire (record headers and
     * tags), so `left` is still a mark the socket reaches; but not when OpenSSL holds some
     * of them already (it reads ahead): the socket may then never get `left` more */
    if (c->tls != NULL && fq_tls_pending(c->tls)) return;
    int avail = 0;
    if (ioctl(c->fd, FIONREAD, &avail) != 0 || avail < 0 || (size_t)avail >= left) return;
    int v = (int)left;
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) != 0) return;
    c->lowat_raised = 1;
    for (;;) {
        const uint64_t now = fq_now_ns();
        if (now >= c->deadline_ns) break;
        const uint64_t ms = (c->deadline_ns - now + 999999u) / 1000000u;
        struct pollfd pf = {c->fd, POLLIN, 0};
        if (poll(&pf, 1, ms > INT_MAX ? INT_MAX : (int)ms) < 0 && errno == EINTR) continue;
        break; /* ready, timed out, or failed: recv_some reads what there is, or reports */
    }
    int one = 1;
    /* left raised, the next response's first read would wait for that many bytes: then the
     * connection is dropped after this response instead (fq_http_exchange) */
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)) == 0) c->lowat_raised = 0;
}

/* Copy n bytes of the stream into dst: the buffered ones, then straight from the socket. */
static int read_exact(fq_http_conn *c, fq_http_result *r, uint8_t *dst, size_t n) {
    size_t have = c->rlen - c->rpos;
    size_t take = have < n ? have : n;
    if (take) memcpy(dst, c->rbuf + c->rpos, take);
    c->rpos += take;
    if (take < n) wait_for_rest(c, n - take);
    for (size_t done = take; done < n;) {
        size_t got = 0;
        int rc = recv_some(c, r, dst + done, n - done, &got, 0);
        if (rc != FQ_OK) return rc;
        done += got;
    }
    return FQ_OK;
}

/* The next line (CRLF or LF ended, terminator cut off, NUL-terminated in place). */
static int read_line(fq_http_conn *c, fq_http_result *r, char **line) {
    for (;;) {
        uint8_t *start = c->rbuf + c->rpos;
        uint8_t *nl = memchr(start, '\n', c->rlen - c->rpos);
        if (nl != NULL) {
            size_t len = (size_t)(nl - start);
            if (len > 0 && start[len - 1] == '\r') len--;
            start[len] = '\0';
            c->rpos += (size_t)(nl - start) + 1;
            *line = (char *)start;
            return FQ_OK;
        }
        size_t got = 0;
        int rc = fill(c, r, 0, &got);
        if (rc != FQ_OK) return rc;
    }
}

static int grow(fq_http_result *r, size_t *cap, size_t need) {
    if (need <= *cap) return FQ_OK;
    size_t ncap = *cap ? *cap : 65536;
    while (ncap < need) ncap *= 2;
    uint8_t *nb = realloc(r->body, ncap);
    if (nb == NULL) {
        snprintf(r->msg, FQ_HTTP_MSG_LEN, "out of memory for a %zu-byte body", need);
        return FQ_E_NOMEM;
    }
    r->body = nb;
    *cap = ncap;
    return FQ_OK;
}

static int read_chunked(fq_http_conn *c, fq_http_result *r) {
    size_t cap = 0;
    for (;;) {
        char *line = NULL, *end = NULL;
        int rc = read_line(c, r, &line);
        if (rc != FQ_OK) return rc;
        errno = 0;
        unsigned long long n = strtoull(line, &end, 16);
        if (end == line || errno != 0 || n > ((unsigned long long)1 << 40)) {
            snprintf(r->msg, FQ_HTTP_MSG_LEN, "malformed chunked body (chunk size line)");
            return FQ_E_IO;
        }
        if (n == 0) break;
        if ((rc = grow(r, &cap, r->body_len + (size_t)n)) != FQ_OK) return rc;
        if ((rc = read_exact(c, r, r->body + r->body_len, (size_t)n)) != FQ_OK) return rc;
        r->body_len += (size_t)n;
        if ((rc = read_line(c, r, &line)) != FQ_OK) return rc;
        if (line[0] != '\0') {
            snprintf(r->msg, FQ_HTTP_MSG_LEN, "malformed chunked body (no CRLF after a chunk)");
            return FQ_E_IO;
        }
    }
    for (;;) { /* trailers, up to the empty line */
        char *line = NULL;
        int rc = read_line(c, r, &line);
        if (rc != FQ_OK) return rc;
        if (line[0] == '\0') return FQ_OK;
    }
}

static int read_to_close(fq_http_conn *c, fq_http_result *r) {
    size_t cap = 0;
    size_t have = c->rlen - c->rpos;
    int rc;
    if ((rc = grow(r, &cap, have + 1)) != FQ_OK) return rc;
    memcpy(r->body, c->rbuf + c->rpos, have);
    r->body_len = have;
    c->rpos = c->rlen;
    for (;;) {
        if ((rc = grow(r, &cap, r->body_len + 65536)) != FQ_OK) return rc;
        size_t got = 0;
        if ((rc = recv_some(c, r, r->body + r->body_len, cap - r->body_len, &got, 1)) != FQ_OK) return rc;
        if (got == 0) return FQ_OK;
        r->body_len += got;
    }
}

static int header_is(const char *line, const char *name, const char **value) {
    size_t n = strlen(name);
    if (strncasecmp(line, name, n) != 0 || line[n] != ':') return 0;
    const char *v = line + n + 1;
    while (*v == ' ' || *v == '\t') v++;
    *value = v;
    return 1;
}

static int has_token(const char *v, const char *token) {
    size_t n = strlen(token);
    for (const char *p = v; *p; p++) {
        if (strncasecmp(p, token, n) == 0 && (p == v || p[-1] == ' ' || p[-1] == ',') &&
            (p[n] == '\0' || p[n] == ' ' || p[n] == ',' || p[n] == '\t'))
            return 1;
    }
    return 0;
}

/* Status line and headers (1xx responses skipped). */
static int read_head(fq_http_conn *c, fq_http_result *r, int *chunked, int *keep) {
    size_t total = 0;
    for (;;) {
        char *line = NULL;
        int rc = read_line(c, r, &line);
        if (rc != FQ_OK) return rc;
        int minor = 0, status = 0;
        if (sscanf(line, "HTTP/1.%d %d", &minor, &status) != 2 || status < 100 || status > 999) {
            snprintf(r->msg, FQ_HTTP_MSG_LEN, "malformed response (status line %.60s)", line);
            return FQ_E_IO;
        }
        r->status = status;
        *keep = minor >= 1;
        *chunked = 0;
        r->content_length = -1;
        r->range_first = r->range_last = r->range_total = -1;
        r->etag[0] = '\0';
        for (;;) {
            if ((rc = read_line(c, r, &line)) != FQ_OK) return rc;
            total += strlen(line) + 2;
            if (total > MAX_HEADER_BYTES) {
                snprintf(r->msg, FQ_HTTP_MSG_LEN, "malformed response: headers over %d bytes", MAX_HEADER_BYTES);
                return FQ_E_IO;
            }
            if (line[0] == '\0') break;
            const char *v = NULL;
            if (header_is(line, "Content-Length", &v)) {
                char *end = NULL;
                errno = 0;
                long long n = strtoll(v, &end, 10);
                if (end == v || errno != 0 || n < 0) {
                    snprintf(r->msg, FQ_HTTP_MSG_LEN, "malformed Content-Length %.40s", v);
                    return FQ_E_IO;
                }
                r->content_length = n;
            } else if (header_is(line, "Transfer-Encoding", &v)) {
                *chunked = has_token(v, "chunked");
            } else if (header_is(line, "Connection", &v)) {
                if (has_token(v, "close")) *keep = 0;
                else if (has_token(v, "keep-alive")) *keep = 1;
            } else if (header_is(line, "ETag", &v)) {
                snprintf(r->etag, FQ_HTTP_ETAG_LEN, "%s", v);
            } else if (header_is(line, "Content-Range", &v)) {
                long long a = -1, b = -1, t = -1;
                if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) >= 2) {
                    r->range_first = a;
                    r->range_last = b;
                    r->range_total = t;
                }
            }
        }
        if (status >= 200) return FQ_OK;
        total = 0; /* 1xx: the real response follows */
    }
}

static int send_all(fq_http_conn *c, fq_http_result *r, const char *req, size_t len) {
    while (len > 0) {
        ssize_t n = conn_send(c, req, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_error(c, r, "sending the request", errno);
        }
        req += n;
        len -= (size_t)n;
    }
    return FQ_OK;
}

int fq_http_conn_closed(const fq_http_conn *c) {
    uint8_t b;
    for (;;) {
        ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        /* EAGAIN: open and quiet; 0: the server's FIN; > 0: bytes nobody asked for (out of step) */
        return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
}

int fq_http_exchange(fq_http_conn *c, const char *req, size_t req_len, fq_http_result *r, int *keep) {
    int chunked = 0, rc;
    *keep = 0;
    c->got_any = 0;
    if ((rc = send_all(c, r, req, req_len)) != FQ_OK) return rc;
    if ((rc = read_head(c, r, &chunked, keep)) != FQ_OK) return rc;
    int ok = r->status >= 200 && r->status < 300;
    if (r->status == 204 || r->status == 304) return FQ_OK; /* no body */
    if (chunked) {
        rc = read_chunked(c, r);
    } else if (r->content_length >= 0) {
        if (!ok && r->content_length > MAX_ERROR_BODY) { /* not worth reading: drop the connection */
            *keep = 0;
            return FQ_OK;
        }
        size_t n = (size_t)r->content_length;
        r->body = malloc(n ? n : 1);
        if (r->body == NULL) {
            snprintf(r->msg, FQ_HTTP_MSG_LEN, "out of memory for a %zu-byte body", n);
            return FQ_E_NOMEM;
        }
        rc = read_exact(c, r, r->body, n);
        if (rc == FQ_OK) r->body_len = n;
    } else {
        *keep = 0;
        rc = read_to_close(c, r);
    }
    if (rc != FQ_OK) {
        free(r->body);
        r->body = NULL;
        r->body_len = 0;
        return rc;
    }
    if (c->rpos != c->rlen) *keep = 0; /* bytes beyond the response: out of step, not reused */
    if (c->tls != NULL && fq_tls_pending(c->tls)) *keep = 0; /* (the same, read ahead by OpenSSL) */
    if (c->lowat_raised) *keep = 0;     /* (wait_for_rest) */
    return FQ_OK;
}
