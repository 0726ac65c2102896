# csrc/image/fq_batch_pad.h: Pipeline(pad="batch")'s in-place repacking of a batch.
from libc.stdint cimport int64_t

from fastq._native.includes.fq_common cimport fq_err

cdef extern from "image/fq_batch_pad.h" nogil:
    int fq_batch_pad_compact(void *block, int64_t n_planes, int cap_h, int cap_w, int h, int w, size_t px,
                             fq_err *err)
