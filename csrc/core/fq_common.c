/* fq_common.c - error record helpers and clock. */
#define _POSIX_C_SOURCE 200809L
#include "core/fq_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int fq_set_err(fq_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        err->index = -1;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n < 0)
            err->msg[0] = '\0';
    }
    return code;
}

void fq_clear_err(fq_err *err)
{
    if (err) {
        err->code = FQ_OK;
        err->msg[0] = '\0';
        err->index = -1;
    }
}

const char *fq_code_name(int code)
{
    switch (code) {
    case FQ_OK: return "FQ_OK";
    case FQ_E_NOMEM: return "FQ_E_NOMEM";
    case FQ_E_INVALID: return "FQ_E_INVALID";
    case FQ_E_TIMEOUT: return "FQ_E_TIMEOUT";
    case FQ_E_CLOSED: return "FQ_E_CLOSED";
    case FQ_E_CANCELLED: return "FQ_E_CANCELLED";
    case FQ_E_IO: return "FQ_E_IO";
    case FQ_E_EMPTY: return "FQ_E_EMPTY";
    case FQ_E_DECODE: return "FQ_E_DECODE";
    case FQ_E_UNSUPPORTED: return "FQ_E_UNSUPPORTED";
    case FQ_E_TOO_LARGE: return "FQ_E_TOO_LARGE";
    case FQ_E_SOURCE: return "FQ_E_SOURCE";
    case FQ_E_STALLED: return "FQ_E_STALLED";
    case FQ_E_SYS: return "FQ_E_SYS";
    case FQ_E_EOF: return "FQ_E_EOF";
    default: return "FQ_E_UNKNOWN";
    }
}

uint64_t fq_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
