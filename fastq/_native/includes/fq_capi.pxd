# csrc/image/fq_capi.h: the image C API as one versioned, exported table (fastq_capi_v1),
# for the TensorFlow kernel (csrc/tf/) that finds it with dlsym in the loaded fastq._native._image.
from libc.stdint cimport uint32_t

cdef extern from "image/fq_capi.h" nogil:
    ctypedef struct fq_capi_v1:
        uint32_t abi_version
        uint32_t struct_size
    const fq_capi_v1 fastq_capi_v1
