# csrc/ring/fq_ring_capi.h: the ring's consumer API as one versioned, exported table
# (fastq_ring_capi_v1), for the TensorFlow dataset kernel (csrc/tf/) that finds it with
# dlsym in the loaded fastq._native._core.
from libc.stdint cimport uint32_t

cdef extern from "ring/fq_ring_capi.h" nogil:
    ctypedef struct fq_ring_capi_v1:
        uint32_t abi_version
        uint32_t struct_size
    const fq_ring_capi_v1 fastq_ring_capi_v1
