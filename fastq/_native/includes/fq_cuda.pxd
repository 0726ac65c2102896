# csrc/cuda/fq_cuda.h: pin / unpin host memory through a dlopen'ed CUDA runtime.
from libc.stdint cimport int64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "cuda/fq_cuda.h" nogil:
    int fq_cuda_load(const char *const *candidates, int n, fq_err *err)
    int fq_cuda_device_count(fq_err *err)
    int fq_cuda_register(void *ptr, size_t nbytes, fq_err *err)
    void fq_cuda_unregister_hook(void *ctx, void *arena, size_t nbytes)
    void fq_cuda_counts(int64_t *registered, int64_t *unregistered)
