/* fq_common.h - error codes and the error record shared by every fastq C component.
 *
 * Every fallible fastq C function returns an int status (FQ_OK == 0 on success)
 * and, on failure, fills the caller-supplied fq_err with the same code and a
 * human-readable message.  The Cython layer turns (code, message) into a Python
 * exception in exactly one place (fastq/_native/_core.pyx: raise_fq_error, cimported by
 * the other extensions); a failed sample's index travels as err.index.
 *
 * No Python.h here or anywhere under csrc/.
 */
#ifndef FQ_COMMON_H
#define FQ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum fq_code {
    FQ_OK = 0,
    FQ_E_NOMEM = 1,       /* allocation failed */
    FQ_E_INVALID = 2,     /* bad argument / parameter */
    FQ_E_TIMEOUT = 3,     /* a blocking call hit its timeout */
    FQ_E_CLOSED = 4,      /* the ring/pool was closed */
    FQ_E_CANCELLED = 5,   /* the current run (epoch) was cancelled */
    FQ_E_IO = 6,          /* file could not be opened/read */
    FQ_E_EMPTY = 7,       /* empty input (0-byte file/buffer) */
    FQ_E_DECODE = 8,      /* corrupt / truncated image data */
    FQ_E_UNSUPPORTED = 9, /* unsupported image format or layout */
    FQ_E_TOO_LARGE = 10,  /* image exceeds max_pixels (decompression bomb guard) */
    FQ_E_SOURCE = 11,     /* error raised by a Python source (stored on the Python side) */
    FQ_E_STALLED = 12,    /* consumer holds every slot: producers cannot proceed */
    FQ_E_SYS = 13,        /* a system call (pthread etc.) failed */
    FQ_E_EOF = 14         /* no more batches in this run (not an error for callers) */
};

#define FQ_ERR_MSG_LEN 512

typedef struct fq_err {
    int code;
    char msg[FQ_ERR_MSG_LEN];
    int64_t index; /* the sample (index in its source) the error is about; -1: none */
} fq_err;

/* Fill err (if not NULL) with code and a printf-style message, index -1;
 * returns code.  A caller that knows the sample sets err->index after. */
int fq_set_err(fq_err *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Reset err to FQ_OK / empty message / index -1. */
void fq_clear_err(fq_err *err);

/* Short constant name of a code ("FQ_E_DECODE"...). */
const char *fq_code_name(int code);

/* Monotonic clock in nanoseconds. */
uint64_t fq_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
