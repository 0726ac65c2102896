# csrc/core/fq_stage_times.h: where a worker's time goes, per stage.
from libc.stdint cimport uint64_t

cdef extern from "core/fq_stage_times.h" nogil:
    ctypedef struct fq_stage_times:
        uint64_t read_ns, decode_ns, ops_ns, write_ns, samples
