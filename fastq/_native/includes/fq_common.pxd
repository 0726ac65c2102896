# csrc/core/fq_common.h: error codes, the error record, the clock.
from libc.stdint cimport int64_t, uint64_t

cdef extern from "core/fq_common.h" nogil:
    enum:
        FQ_OK
        FQ_E_NOMEM
        FQ_E_INVALID
        FQ_E_TIMEOUT
        FQ_E_CLOSED
        FQ_E_CANCELLED
        FQ_E_IO
        FQ_E_EMPTY
        FQ_E_DECODE
        FQ_E_UNSUPPORTED
        FQ_E_TOO_LARGE
        FQ_E_SOURCE
        FQ_E_STALLED
        FQ_E_SYS
        FQ_E_EOF
        FQ_ERR_MSG_LEN
    ctypedef struct fq_err:
        int code
        char msg[512]
        int64_t index
    int fq_set_err(fq_err *err, int code, const char *fmt, ...)
    void fq_clear_err(fq_err *err)
    const char *fq_code_name(int code)
    uint64_t fq_now_ns()
