# csrc/records/fq_crc32c.h: CRC-32C and TFRecord's mask.
from libc.stdint cimport uint32_t

cdef extern from "records/fq_crc32c.h" nogil:
    uint32_t fq_crc32c(const void *data, size_t len)
    uint32_t fq_crc32c_mask(uint32_t crc)
