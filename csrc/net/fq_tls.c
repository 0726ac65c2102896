/* fq_tls.c - TLS for csrc/net through OpenSSL loaded at run time (net/internal/fq_tls.h;
 * fq_http_tls_load in net/fq_http.h).
 *
 * Nothing of OpenSSL is needed to build fastq: the few functions used are looked up with
 * dlsym in the libssl that fastq/sources/nethttp.py names, the one Python's own ssl module
 * runs on, so that fastq trusts what Python trusts (its default certificate paths,
 * SSL_CERT_FILE and SSL_CERT_DIR) and adds no copy of OpenSSL to the wheel.  Their
 * signatures and the constants below are OpenSSL's public ABI, the same in 1.1.1 and 3.x
 * (checked at load: 1.1.1 or later).  The types are opaque here (void *). */
#define _GNU_SOURCE
#include "net/internal/fq_tls.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/fq_http.h"

#define SSL_ERROR_SSL 1
#define SSL_ERROR_WANT_READ 2
#define SSL_ERROR_WANT_WRITE 3
#define SSL_ERROR_SYSCALL 5
#define SSL_ERROR_ZERO_RETURN 6
#define SSL_VERIFY_NONE 0
#define SSL_VERIFY_PEER 1
#define SSL_CTRL_SET_TLSEXT_HOSTNAME 55
#define TLSEXT_NAMETYPE_host_name 0
#define SSL_CTRL_SET_MIN_PROTO_VERSION 123
#define SSL_CTRL_SET_READ_AHEAD 41
#define READ_BUFFER (64 * 1024) /* what one read from the socket takes at most (read-ahead) */
#define TLS1_2_VERSION 0x0303
#define X509_V_OK 0
#define MIN_VERSION 0x10101000UL /* OpenSSL 1.1.1 */

static struct {
    const void *(*TLS_client_method)(void);
    void *(*SSL_CTX_new)(const void *);
    void (*SSL_CTX_free)(void *);
    long (*SSL_CTX_ctrl)(void *, int, long, void *);
    void (*SSL_CTX_set_verify)(void *, int, void *);
    int (*SSL_CTX_set_default_verify_paths)(void *);
    void *(*SSL_CTX_get_cert_store)(const void *);
    void *(*SSL_new)(void *);
    void (*SSL_free)(void *);
    int (*SSL_set_fd)(void *, int);
    long (*SSL_ctrl)(void *, int, long, void *);
    int (*SSL_connect)(void *);
    int (*SSL_read)(void *, void *, int);
    int (*SSL_write)(void *, const void *, int);
    int (*SSL_get_error)(const void *, int);
    int (*SSL_has_pending)(const void *);
    int (*SSL_CTX_set_ciphersuites)(void *, const char *);
    void (*SSL_CTX_set_default_read_buffer_len)(void *, size_t);
    long (*SSL_get_verify_result)(const void *);
    int (*SSL_set1_host)(void *, const char *);
    void *(*SSL_get0_param)(void *);
    unsigned long (*ERR_get_error)(void);
    void (*ERR_error_string_n)(unsigned long, char *, size_t);
    void (*ERR_clear_error)(void);
    const char *(*X509_verify_cert_error_string)(long);
    int (*X509_VERIFY_PARAM_set1_ip_asc)(void *, const char *);
    void *(*BIO_new_mem_buf)(const void *, int);
    int (*BIO_free)(void *);
    void *(*PEM_read_bio_X509)(void *, void **, void *, void *);
    int (*X509_STORE_add_cert)(void *, void *);
    void (*X509_free)(void *);
    unsigned long (*OpenSSL_version_num)(void);
    const char *(*OpenSSL_version)(int);
} ossl;

/* The names of ossl's members, in their order (looked up by name at load). */
static const char *const NAMES[] = {
    "TLS_client_method", "SSL_CTX_new", "SSL_CTX_free", "SSL_CTX_ctrl", "SSL_CTX_set_verify",
    "SSL_CTX_set_default_verify_paths", "SSL_CTX_get_cert_store", "SSL_new", "SSL_free", "SSL_set_fd",
    "SSL_ctrl", "SSL_connect", "SSL_read", "SSL_write", "SSL_get_error", "SSL_has_pending",
    "SSL_CTX_set_ciphersuites", "SSL_CTX_set_default_read_buffer_len",
    "SSL_get_verify_result", "SSL_set1_host", "SSL_get0_param", "ERR_get_error", "ERR_error_string_n",
    "ERR_clear_error", "X509_verify_cert_error_string", "X509_VERIFY_PARAM_set1_ip_asc", "BIO_new_mem_buf",
    "BIO_free", "PEM_read_bio_X509", "X509_STORE_add_cert", "X509_free", "OpenSSL_version_num",
    "OpenSSL_version",
};
#define N_FUNCS (sizeof(NAMES) / sizeof(NAMES[0]))
_Static_assert(sizeof(ossl) == N_FUNCS * sizeof(void (*)(void)), "one name per OpenSSL function");

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static void *lib;                 /* set once, under load_mu, when every function was found */
static char version[128];

int fq_http_tls_load(const char *const *candidates, int n, fq_err *err) {
    if (pthread_mutex_lock(&load_mu) != 0) return fq_set_err(err, FQ_E_SYS, "mutex lock failed");
    if (lib != NULL) {
        (void)pthread_mutex_unlock(&load_mu);
        return FQ_OK;
    }
    char tried[FQ_ERR_MSG_LEN] = "";
    size_t used = 0;
    for (int i = 0; i < n && lib == NULL; i++) {
        char why[256];
        void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            const char *e = dlerror();
            snprintf(why, sizeof(why), "%s", e ? e : candidates[i]);
        } else {
            void (*fns[N_FUNCS])(void);
            size_t k = 0;
            for (; k < N_FUNCS; k++) {
                void *s = dlsym(h, NAMES[k]);
                if (s == NULL) break;
                fns[k] = (void (*)(void))(uintptr_t)s;
            }
            __typeof__(ossl) f;
            unsigned long v = 0;
            if (k == N_FUNCS) {
                memcpy(&f, fns, sizeof(f));
                v = f.OpenSSL_version_num();
            }
            if (k < N_FUNCS) {
                snprintf(why, sizeof(why), "%s: no %s", candidates[i], NAMES[k]);
            } else if (v < MIN_VERSION) {
                snprintf(why, sizeof(why), "%s: OpenSSL %lx is older than 1.1.1", candidates[i], v);
            } else {
                ossl = f;
                snprintf(version, sizeof(version), "%s", ossl.OpenSSL_version(0));
                lib = h;
                break;
            }
            (void)dlclose(h);
        }
        int w = snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? "; " : "", why);
        if (w > 0 && (size_t)w < sizeof(tried) - used) used += (size_t)w;
    }
    int ok = lib != NULL;
    (void)pthread_mutex_unlock(&load_mu);
    if (!ok) return fq_set_err(err, FQ_E_UNSUPPORTED, "no usable OpenSSL (%s)", used ? tried : "no candidates");
    return FQ_OK;
}

const char *fq_http_tls_version(void) {
    pthread_mutex_lock(&load_mu);
    const char *v = lib != NULL ? version : NULL;
    pthread_mutex_unlock(&load_mu);
    return v;
}

/* The calling thread's oldest OpenSSL error as text (the queue emptied), or `fallback`. */
static void ssl_reason(char *out, size_t len, const char *fallback) {
    unsigned long e = ossl.ERR_get_error();
    if (e == 0) {
        snprintf(out, len, "%s", fallback);
    } else {
        ossl.ERR_error_string_n(e, out, len);
    }
    ossl.ERR_clear_error();
}

struct fq_tls_ctx {
    void *ctx;          /* SSL_CTX */
    char *server_name;
    int is_ip;          /* server_name is an address literal */
    int verify;
};

struct fq_tls_conn {
    void *ssl;          /* SSL */
};

void fq_tls_ctx_free(fq_tls_ctx *t) {
    if (t == NULL) return;
    if (t->ctx != NULL) ossl.SSL_CTX_free(t->ctx);
    free(t->server_name);
    free(t);
}

/* Adds every certificate of the PEM text to the context's store; FQ_OK, or why not. */
static int add_pem(void *ctx, const char *pem, fq_err *err) {
    size_t len = strlen(pem);
    if (len > INT_MAX) return fq_set_err(err, FQ_E_INVALID, "TLS: the CA certificates' text is too long");
    void *store = ossl.SSL_CTX_get_cert_store(ctx);
    void *bio = ossl.BIO_new_mem_buf(pem, (int)len);
    if (store == NULL || bio == NULL) {
        if (bio != NULL) (void)ossl.BIO_free(bio);
        return fq_set_err(err, FQ_E_NOMEM, "TLS: out of memory reading the CA certificates");
    }
    int added = 0, rc = FQ_OK;
    for (;;) {
        void *x = ossl.PEM_read_bio_X509(bio, NULL, NULL, NULL);
        if (x == NULL) break; /* the end of the text (or a block that is not a certificate) */
        if (ossl.X509_STORE_add_cert(store, x) != 1) {
            char why[256];
            ssl_reason(why, sizeof(why), "unknown error");
            rc = fq_set_err(err, FQ_E_INVALID, "TLS: CA certificate %d could not be added: %s", added + 1, why);
        }
        ossl.X509_free(x);
        if (rc != FQ_OK) break;
        added++;
    }
    ossl.ERR_clear_error(); /* PEM_read_bio_X509's "no start line" at the end */
    (void)ossl.BIO_free(bio);
    if (rc == FQ_OK && added == 0)
        rc = fq_set_err(err, FQ_E_INVALID, "TLS: no PEM certificate in the CA certificates given");
    return rc;
}

int fq_tls_ctx_new(const char *server_name, const char *ca_pem, int verify, fq_tls_ctx **out, fq_err *err) {
    *out = NULL;
    if (fq_http_tls_version() == NULL)
        return fq_set_err(err, FQ_E_UNSUPPORTED, "TLS: OpenSSL is not loaded (fq_http_tls_load)");
    if (server_name == NULL || server_name[0] == '\0')
        return fq_set_err(err, FQ_E_INVALID, "TLS: no server name");
    fq_tls_ctx *t = calloc(1, sizeof(*t));
    if (t == NULL || (t->server_name = strdup(server_name)) == NULL) {
        free(t);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    unsigned char addr[16];
    t->is_ip = inet_pton(AF_INET, server_name, addr) == 1 || inet_pton(AF_INET6, server_name, addr) == 1;
    t->verify = verify;
    ossl.ERR_clear_error();
    t->ctx = ossl.SSL_CTX_new(ossl.TLS_client_method());
    if (t->ctx == NULL) {
        char why[256];
        ssl_reason(why, sizeof(why), "unknown error");
        fq_tls_ctx_free(t);
        return fq_set_err(err, FQ_E_NOMEM, "TLS: SSL_CTX_new failed: %s", why);
    }
    if (ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL) != 1) {
        char why[256];
        ssl_reason(why, sizeof(why), "unknown error");
        fq_tls_ctx_free(t);
        return fq_set_err(err, FQ_E_SYS, "TLS: cannot require TLS 1.2 or later: %s", why);
    }
    /* TLS 1.3: AES-128-GCM first (OpenSSL's own order puts AES-256 first, at about 1.4 times
     * the CPU per byte; the server may still choose: nginx takes the client's order), and
     * reads of up to READ_BUFFER bytes from the socket instead of two per record (header,
     * then body): a 100 KB body in 2-3 reads, not 14.  Best effort: defaults otherwise. */
    (void)ossl.SSL_CTX_set_ciphersuites(t->ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                                 "TLS_CHACHA20_POLY1305_SHA256");
    ossl.SSL_CTX_set_default_read_buffer_len(t->ctx, READ_BUFFER);
    (void)ossl.SSL_CTX_ctrl(t->ctx, SSL_CTRL_SET_READ_AHEAD, 1, NULL);
    ossl.ERR_clear_error();
    if (verify) {
        /* the system's roots (as Python's ssl.create_default_context): a missing default
         * file is not an error here; a certificate nothing trusts fails the handshake */
        (void)ossl.SSL_CTX_set_default_verify_paths(t->ctx);
        ossl.ERR_clear_error();
        if (ca_pem != NULL) {
            int rc = add_pem(t->ctx, ca_pem, err);
            if (rc != FQ_OK) {
                fq_tls_ctx_free(t);
                return rc;
            }
        }
    }
    ossl.SSL_CTX_set_verify(t->ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    *out = t;
    return FQ_OK;
}

void fq_tls_conn_free(fq_tls_conn *s) {
    if (s == NULL) return;
    if (s->ssl != NULL) ossl.SSL_free(s->ssl);
    free(s);
}

/* The handshake on fd, non-blocking: each wait polls in 50 ms slices (so that *closing ends
 * it) and all of them together last at most timeout_s.  SSL_connect's result, or 0 with
 * *timed_out / *closed set. */
static int handshake(void *ssl, int fd, double timeout_s, const atomic_int *closing, int *timed_out, int *closed) {
    const uint64_t end = fq_now_ns() + (uint64_t)(timeout_s * 1e9);
    for (;;) {
        ossl.ERR_clear_error();
        errno = 0;
        int r = ossl.SSL_connect(ssl);
        if (r == 1) return 1;
        int e = ossl.SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return r;
        struct pollfd pfd = {fd, (short)(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
        for (;;) {
            if (atomic_load(closing)) {
                *closed = 1;
                return 0;
            }
            const uint64_t now = fq_now_ns();
            if (now >= end) {
                *timed_out = 1;
                return 0;
            }
            const uint64_t left_ms = (end - now + 999999u) / 1000000u;
            int n = poll(&pfd, 1, left_ms < 50 ? (int)left_ms : 50);
            if (n > 0) break;
            if (n < 0 && errno != EINTR) return -1; /* (reported as the socket's failure) */
        }
    }
}

int fq_tls_connect(const fq_tls_ctx *t, int fd, double timeout_s, const atomic_int *closing, fq_tls_conn **out,
                   char *msg, size_t msg_len) {
    *out = NULL;
    fq_tls_conn *s = calloc(1, sizeof(*s));
    ossl.ERR_clear_error();
    if (s == NULL || (s->ssl = ossl.SSL_new(t->ctx)) == NULL) {
        fq_tls_conn_free(s);
        snprintf(msg, msg_len, "TLS: out of memory");
        return FQ_E_NOMEM;
    }
    int ok = ossl.SSL_set_fd(s->ssl, fd) == 1;
    if (ok && !t->is_ip) /* SNI: a name, never an address (RFC 6066) */
        ok = ossl.SSL_ctrl(s->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, t->server_name) == 1;
    if (ok && t->verify) { /* the certificate must name the host (or the address) of the URL */
        ok = t->is_ip ? ossl.X509_VERIFY_PARAM_set1_ip_asc(ossl.SSL_get0_param(s->ssl), t->server_name) == 1
                      : ossl.SSL_set1_host(s->ssl, t->server_name) == 1;
    }
    if (!ok) {
        char why[200];
        ssl_reason(why, sizeof(why), "unknown error");
        snprintf(msg, msg_len, "TLS: setting up the connection to %s failed: %s", t->server_name, why);
        fq_tls_conn_free(s);
        return FQ_E_IO;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        snprintf(msg, msg_len, "fcntl: %s", strerror(errno));
        fq_tls_conn_free(s);
        return FQ_E_IO;
    }
    int timed_out = 0, closed = 0;
    int r = handshake(s->ssl, fd, timeout_s, closing, &timed_out, &closed);
    int sys = errno, e = r == 1 || timed_out || closed ? 0 : ossl.SSL_get_error(s->ssl, r);
    if (fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) { /* back to blocking reads with timeouts */
        snprintf(msg, msg_len, "fcntl: %s", strerror(errno));
        fq_tls_conn_free(s);
        return FQ_E_IO;
    }
    if (r == 1) {
        ossl.ERR_clear_error();
        *out = s;
        return FQ_OK;
    }
    int code = FQ_E_IO;
    long v = ossl.SSL_get_verify_result(s->ssl);
    if (closed) {
        snprintf(msg, msg_len, "the client closed");
        code = FQ_E_CLOSED;
    } else if (timed_out) {
        snprintf(msg, msg_len, "TLS handshake with %s timed out after %.3g s", t->server_name, timeout_s);
        code = FQ_E_TIMEOUT;
    } else if (t->verify && v != X509_V_OK) {
        snprintf(msg, msg_len, "TLS: the certificate of %s was refused: %s", t->server_name,
                 ossl.X509_verify_cert_error_string(v));
        code = FQ_E_INVALID;
    } else if (e == SSL_ERROR_SYSCALL && sys != 0) {
        snprintf(msg, msg_len, "TLS handshake with %s: %s", t->server_name, strerror(sys));
    } else {
        char why[200];
        ssl_reason(why, sizeof(why), "the server closed the connection");
        snprintf(msg, msg_len, "TLS handshake with %s: %s", t->server_name, why);
    }
    ossl.ERR_clear_error();
    fq_tls_conn_free(s);
    return code;
}

/* What SSL_read / SSL_write returning r <= 0 means, as recv()/send() would say it. */
static ssize_t io_result(fq_tls_conn *s, int r, char *why, size_t why_len) {
    int sys = errno;
    int e = ossl.SSL_get_error(s->ssl, r);
    switch (e) {
    case SSL_ERROR_ZERO_RETURN: /* the server's close_notify */
        ossl.ERR_clear_error();
        return 0;
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: /* the socket's timeout (a blocking socket wants nothing else) */
        ossl.ERR_clear_error();
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_SYSCALL:
        if (ossl.ERR_get_error() == 0 && sys != 0) {
            ossl.ERR_clear_error();
            errno = sys;
            return -1;
        }
        ossl.ERR_clear_error();
        if (r == 0) return 0; /* OpenSSL 1.1.1: the peer closed without close_notify */
        snprintf(why, why_len, "TLS: the connection failed");
        errno = EPROTO;
        return -1;
    default:
        ssl_reason(why, why_len, "TLS protocol error");
        errno = EPROTO;
        return -1;
    }
}

ssize_t fq_tls_recv(fq_tls_conn *s, void *buf, size_t n, char *why, size_t why_len) {
    ossl.ERR_clear_error();
    errno = 0;
    int r = ossl.SSL_read(s->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    return r > 0 ? (ssize_t)r : io_result(s, r, why, why_len);
}

ssize_t fq_tls_send(fq_tls_conn *s, const void *buf, size_t n, char *why, size_t why_len) {
    ossl.ERR_clear_error();
    errno = 0;
    int r = ossl.SSL_write(s->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0) return (ssize_t)r;
    ssize_t x = io_result(s, r, why, why_len);
    if (x == 0) { /* a close_notify answering a write: the connection is gone */
        errno = EPIPE;
        return -1;
    }
    return x;
}

int fq_tls_pending(const fq_tls_conn *s) {
    return ossl.SSL_has_pending(s->ssl) == 1;
}
