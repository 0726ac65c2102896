/* fq_ring_capi.h - the consumer side of the slot ring (fq_ring.h) as ONE versioned table
 * of function pointers, for native code that is not linked with fastq: fastq's TensorFlow
 * dataset kernel (csrc/tf/), which takes batches from a Pipeline's ring without Python.
 *
 * Why a table: fastq's extension modules export nothing but PyInit_* and these tables (a
 * linker version script), and the kernel is compiled on the user's machine against the
 * installed TensorFlow, so it cannot link fastq.  fastq._native._core (the module that owns every
 * Ring) exports FQ_RING_CAPI_SYMBOL, a const fq_ring_capi_v1; the kernel finds it with
 * dlopen(<fastq._native._core's file>, RTLD_NOLOAD | RTLD_NOW) + dlsym, exactly as it finds the
 * image table (image/fq_capi.h) in fastq._native._image, so it runs on the very ring objects the
 * Python layer created.
 *
 * ABI rules (as fq_capi.h): abi_version changes when a field changes meaning; new fields
 * are only appended (struct_size says how many a library has); sizeof_fq_err lets a caller
 * compiled against other headers refuse a mismatch.  The table is immutable static data:
 * any thread may read it at any time.  The functions keep the contracts of fq_ring.h
 * (thread-safe except create/destroy; a ring is kept alive by its reference count).
 */
#ifndef FQ_RING_CAPI_H
#define FQ_RING_CAPI_H

#include <stddef.h>
#include <stdint.h>

#include "core/fq_common.h"
#include "ring/fq_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_RING_CAPI_ABI_VERSION 1u
#define FQ_RING_CAPI_SYMBOL "fastq_ring_capi_v1"

typedef struct fq_ring_capi_v1 {
    uint32_t abi_version;   /* FQ_RING_CAPI_ABI_VERSION of the library */
    uint32_t struct_size;   /* sizeof(fq_ring_capi_v1) of the library */
    uint32_t sizeof_fq_err; /* sizeof(fq_err) */
    uint32_t max_blocks;    /* FQ_RING_MAX_BLOCKS */
    void (*retain)(fq_ring *r);
    void (*unref)(fq_ring *r);
    int (*next_run)(fq_ring *r, int64_t run_id, int64_t timeout_ns, int *slot, int *n_rows, fq_err *err);
    int (*slot_error)(fq_ring *r, int slot, int *row, fq_err *failure, fq_err *err);
    int (*release)(fq_ring *r, int slot, fq_err *err);
    uint8_t *(*block_ptr)(const fq_ring *r, int slot, int block);
    void (*cancel_run)(fq_ring *r, int64_t run_id);
    int (*is_closed)(fq_ring *r);
    int (*n_blocks)(const fq_ring *r);
    size_t (*row_bytes)(const fq_ring *r, int block);
    int (*capacity)(const fq_ring *r);
    int (*batch_size)(const fq_ring *r);
    const char *(*code_name)(int code);
} fq_ring_capi_v1;

/* The table itself: exported by fastq._native._core (besides PyInit__core). */
__attribute__((visibility("default"))) extern const fq_ring_capi_v1 fastq_ring_capi_v1;

#ifdef __cplusplus
}
#endif
#endif
