# csrc/image/fastq_custom_op.h: the public C ABI of a user op (CustomOp; the PyFunc trampoline).
from libc.stdint cimport uint8_t, uint64_t

cdef extern from "image/fastq_custom_op.h" nogil:
    unsigned FASTQ_CUSTOM_OP_ABI_VERSION
    ctypedef struct fq_custom_rng:
        unsigned abi_version
        uint64_t (*next_u64)(fq_custom_rng *rng)
        double (*uniform)(fq_custom_rng *rng)
    ctypedef int (*fq_custom_op_fn)(void *state, uint8_t *pixels, int h, int w, int c, size_t row_stride,
                                    const double *params, int n_params, fq_custom_rng *rng, char *errmsg,
                                    size_t errmsg_len)
