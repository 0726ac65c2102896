/* fq_cuda.h - pin host memory with the CUDA runtime, loaded at run time.
 *
 * No CUDA header or library is needed to build fastq: libcudart is opened with
 * dlopen() the first time pinning is asked for, and only three entry points are
 * used (cudaGetDeviceCount, cudaHostRegister, cudaHostUnregister).  Without a
 * loadable runtime or a visible device, fq_cuda_register() fails with a reason.
 *
 * Thread safety: fq_cuda_load is serialised internally; the others may be
 * called from any thread once loaded.
 */
#ifndef FQ_CUDA_H
#define FQ_CUDA_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Try each of the n candidate library paths/names in order; FQ_OK when one
 * loads and exports what we need (err says why not otherwise). */
int fq_cuda_load(const char *const *candidates, int n, fq_err *err);
/* Number of CUDA devices (after a successful load), or -1 with err. */
int fq_cuda_device_count(fq_err *err);
/* cudaHostRegister(ptr, bytes, cudaHostRegisterDefault). */
int fq_cuda_register(void *ptr, size_t bytes, fq_err *err);
/* fq_ring_free_hook: cudaHostUnregister(arena) (errors ignored: memory is freed next). */
void fq_cuda_unregister_hook(void *ctx, void *arena, size_t bytes);
/* Registrations done / undone so far (for tests and stats). */
void fq_cuda_counts(int64_t *registered, int64_t *unregistered);

#ifdef __cplusplus
}
#endif
#endif
