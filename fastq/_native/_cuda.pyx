# cython: language_level=3
"""fastq._native._cuda - pinning the slot arena with a CUDA runtime loaded at run time."""
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset

from fastq._native._core cimport raise_fq_error, Ring
from fastq._native.includes.fq_common cimport fq_err
from fastq._native.includes.fq_cuda cimport *

def load(candidates):
    """Load the first loadable CUDA runtime of `candidates` (paths or sonames)."""
    cdef fq_err err
    enc = [c.encode() if isinstance(c, str) else bytes(c) for c in candidates]
    cdef int n = len(enc), i
    cdef const char **arr = <const char **>malloc(sizeof(char *) * (n if n else 1))
    if arr == NULL:
        raise MemoryError()
    memset(&err, 0, sizeof(err))
    try:
        for i in range(n):
            arr[i] = <const char *>enc[i]
        if fq_cuda_load(arr, n, &err) != 0:
            raise_fq_error(&err)
    finally:
        free(arr)


def device_count():
    cdef fq_err err
    memset(&err, 0, sizeof(err))
    cdef int n = fq_cuda_device_count(&err)
    if n < 0:
        raise_fq_error(&err)
    return n


def pin(Ring ring not None):
    """Register `ring`'s slot arena with cudaHostRegister and make the ring
    unregister it just before the arena is freed.  Returns the bytes pinned."""
    cdef fq_err err
    cdef size_t n = 0
    cdef void *p = ring.arena(&n)
    if ring._hook_owner is not None:
        raise ValueError("this ring's arena is already pinned (or has another free hook)")
    memset(&err, 0, sizeof(err))
    if fq_cuda_register(p, n, &err) != 0:
        raise_fq_error(&err)
    # The hook is a function of this extension, which Python never unloads.
    ring.install_free_hook(fq_cuda_unregister_hook, NULL, None)
    return n


def counts():
    cdef int64_t r = 0, u = 0
    fq_cuda_counts(&r, &u)
    return r, u
