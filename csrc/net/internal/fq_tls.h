/* fq_tls.h - TLS for the HTTP client's connections (private to csrc/net), through the
 * OpenSSL that fq_http_tls_load() found at run time (net/fq_http.h says which and why).
 *
 * A context (fq_tls_ctx) holds what every connection of one pool shares: the trusted
 * certificates, whether the server's certificate is verified, and the name it must carry.
 * It is made once per pool and read-only after: any thread may start connections on it.
 * A connection's TLS state (fq_tls_conn) belongs to the thread that uses the connection
 * (net/internal/fq_http_conn.h); OpenSSL's error queue is per thread, so the messages below
 * are the calling thread's. */
#ifndef FQ_TLS_H
#define FQ_TLS_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/fq_common.h"

typedef struct fq_tls_ctx fq_tls_ctx;
typedef struct fq_tls_conn fq_tls_conn;

/* A context for connections to `server_name` (a DNS name, or an IPv4/IPv6 literal: then no
 * SNI, and the certificate must name the address).  ca_pem: PEM text of CA certificates
 * trusted besides the system's (NULL: none); verify 0 accepts any certificate (the user's
 * allow_invalid_certificates).  FQ_E_UNSUPPORTED when OpenSSL is not loaded. */
int fq_tls_ctx_new(const char *server_name, const char *ca_pem, int verify, fq_tls_ctx **out, fq_err *err);
void fq_tls_ctx_free(fq_tls_ctx *t);

/* The TLS handshake on connected, blocking socket fd, within timeout_s in all (the socket
 * is non-blocking meanwhile, and blocking again after), given up when *closing is set.
 * FQ_OK and *out; FQ_E_INVALID when the server's certificate was refused (a retry cannot
 * help), FQ_E_TIMEOUT, FQ_E_CLOSED, FQ_E_IO or FQ_E_NOMEM otherwise, with msg (msg_len
 * bytes) saying why. */
int fq_tls_connect(const fq_tls_ctx *t, int fd, double timeout_s, const atomic_int *closing, fq_tls_conn **out,
                   char *msg, size_t msg_len);

/* Frees the state (the socket is the caller's to close; no close_notify is sent). */
void fq_tls_conn_free(fq_tls_conn *s);

/* As recv() and send() on the socket: > 0 bytes, 0 at the end of the stream (read), or -1
 * with errno: EAGAIN when the socket's timeout passed, the socket call's errno, or EPROTO
 * for a TLS failure, described in why (why_len bytes). */
ssize_t fq_tls_recv(fq_tls_conn *s, void *buf, size_t n, char *why, size_t why_len);
ssize_t fq_tls_send(fq_tls_conn *s, const void *buf, size_t n, char *why, size_t why_len);

/* Does OpenSSL hold bytes read from the socket and not yet returned (decrypted or not)?
 * (It reads ahead: the socket may then never get as many bytes as a body has left.) */
int fq_tls_pending(const fq_tls_conn *s);

#endif
