/* fq_ring_capi.c - the one exported table of the ring's consumer API (see fq_ring_capi.h).
 * Part of libfastq_ring.a; fastq._native._core references the table (fastq/_native/_core.pyx reads its ABI
 * version), so the object is linked there, and setup.py's version script exports it.
 * Static const data: no initialization order, no locking. */
#include "ring/fq_ring_capi.h"

const fq_ring_capi_v1 fastq_ring_capi_v1 = {
    FQ_RING_CAPI_ABI_VERSION,
    (uint32_t)sizeof(fq_ring_capi_v1),
    (uint32_t)sizeof(fq_err),
    (uint32_t)FQ_RING_MAX_BLOCKS,
    fq_ring_retain,
    fq_ring_unref,
    fq_ring_next_run,
    fq_ring_slot_error,
    fq_ring_release,
    fq_ring_block_ptr,
    fq_ring_cancel_run,
    fq_ring_is_closed,
    fq_ring_n_blocks,
    fq_ring_row_bytes,
    fq_ring_capacity,
    fq_ring_batch_size,
    fq_code_name,
};
