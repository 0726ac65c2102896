# Included at the end of fastq/_native/_image.pyx: Pipeline(pad="batch")'s in-place repacking
# (csrc/image/fq_batch_pad.h), called by fastq.batchpad on the consumer's thread.
from fastq._native.includes.fq_batch_pad cimport fq_batch_pad_compact


def batch_pad_compact(cnp.ndarray block not None, int64_t n_planes, int cap_h, int cap_w, int h, int w, size_t px):
    """Repack the n_planes cap_h x cap_w planes of px-byte pixels at the start of `block`
    (C-contiguous, writable) in place so that the block starts with n_planes h x w planes:
    the top-left window of each (fq_batch_pad.h).  The GIL is released."""
    if not block.flags.c_contiguous or not block.flags.writeable:
        raise ValueError("batch_pad_compact: the block must be C-contiguous and writable")
    if n_planes < 0 or <size_t>block.nbytes < <size_t>n_planes * <size_t>cap_h * <size_t>cap_w * px:
        raise ValueError(f"batch_pad_compact: {n_planes} planes of {cap_h}x{cap_w}x{px} bytes do not fit "
                         f"the block ({block.nbytes} bytes)")
    cdef void *p = block.data
    cdef fq_err err
    cdef int rc
    memset(&err, 0, sizeof(err))
    with nogil:
        rc = fq_batch_pad_compact(p, n_planes, cap_h, cap_w, h, w, px, &err)
    if rc != 0:
        raise_fq_error(&err)
