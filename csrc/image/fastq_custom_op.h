/* fastq_custom_op.h - the C ABI of a user op that runs inside fastq's native workers
 * (fastq.ops.CustomOp).  Installed with the package: compile against it with
 *     cc -O2 -shared -fPIC -I"$(python -c 'import fastq; print(fastq.get_include())')" \
 *        myop.c -o libmyop.so
 * Plain C99, no other fastq header needed.  Full guide: docs/custom_ops.md.
 *
 * A library exports, for an op named NAME (the `symbol` given to CustomOp):
 *
 *   int NAME(void *state, uint8_t *pixels, int h, int w, int c, size_t row_stride,
 *            const double *params, int n_params, fq_custom_rng *rng,
 *            char *errmsg, size_t errmsg_len);                         required
 *   unsigned NAME_abi_version(void);   required: returns FASTQ_CUSTOM_OP_ABI_VERSION
 *                                      (write FASTQ_CUSTOM_OP_DECLARE_ABI(NAME) once)
 *   int NAME_init(const double *params, int n_params, void **state,
 *                 char *errmsg, size_t errmsg_len);                     optional
 *   void NAME_free(void *state);                                        optional
 *
 * NAME: the image, h x w x c uint8 (c = 1 or 3, RGB), rows row_stride bytes apart
 *   (row_stride >= w * c; pixels of a row are packed), modified IN PLACE; the size
 *   does not change.  Return 0, or non-zero after writing a NUL-terminated reason into
 *   errmsg (at most errmsg_len bytes, errmsg_len >= 1): that sample then fails with an
 *   error naming it and the op, and the pipeline's on_error policy applies.
 * Buffer lifetime: pixels, params and rng are valid only during the call.
 * Thread safety: NAME is called CONCURRENTLY from every worker thread, each call
 *   with its own buffer and rng; state (from NAME_init) is shared READ-ONLY between
 *   them.  NAME must not call back into Python; the calls run without the GIL.
 * NAME_init runs once per spec (each Pipeline / ImageSpec builds one) when it is
 *   created, before any call of NAME; non-zero fails the spec creation with errmsg.
 *   NAME_free(state) runs once when that spec is freed, after the last call.
 * Determinism: draw randomness ONLY from rng.  Its stream is a pure function of the
 *   sample's (seed, epoch, index) and the op's place in the chain, so the output is
 *   bit-identical for any number of workers and across resume.
 */
#ifndef FASTQ_CUSTOM_OP_H
#define FASTQ_CUSTOM_OP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a type or a rule of this header changes incompatibly; fastq refuses
 * a library whose NAME_abi_version() returns another number. */
#define FASTQ_CUSTOM_OP_ABI_VERSION 1u

/* The sample's random stream (filled by fastq; read the function pointers only). */
typedef struct fq_custom_rng fq_custom_rng;
struct fq_custom_rng {
    unsigned abi_version;                      /* FASTQ_CUSTOM_OP_ABI_VERSION */
    uint64_t (*next_u64)(fq_custom_rng *rng);  /* 64 uniformly distributed bits */
    double (*uniform)(fq_custom_rng *rng);     /* uniform double in [0, 1), 53 random bits */
    uint64_t priv[2];                          /* fastq's state: do not touch */
};

static inline uint64_t fq_custom_rng_u64(fq_custom_rng *rng) { return rng->next_u64(rng); }
static inline double fq_custom_rng_uniform(fq_custom_rng *rng) { return rng->uniform(rng); }

typedef int (*fq_custom_op_fn)(void *state, uint8_t *pixels, int h, int w, int c, size_t row_stride,
                               const double *params, int n_params, fq_custom_rng *rng, char *errmsg,
                               size_t errmsg_len);
typedef int (*fq_custom_op_init_fn)(const double *params, int n_params, void **state, char *errmsg,
                                    size_t errmsg_len);
typedef void (*fq_custom_op_free_fn)(void *state);
typedef unsigned (*fq_custom_op_abi_fn)(void);

/* Put FASTQ_CUSTOM_OP_API before each exported definition (C linkage, visible). */
#if defined(__cplusplus)
#define FASTQ_CUSTOM_OP_LINKAGE extern "C"
#else
#define FASTQ_CUSTOM_OP_LINKAGE
#endif
#if defined(_WIN32)
#define FASTQ_CUSTOM_OP_API FASTQ_CUSTOM_OP_LINKAGE __declspec(dllexport)
#else
#define FASTQ_CUSTOM_OP_API FASTQ_CUSTOM_OP_LINKAGE __attribute__((visibility("default")))
#endif

/* Defines NAME_abi_version() for op NAME. */
#define FASTQ_CUSTOM_OP_DECLARE_ABI(NAME) \
    FASTQ_CUSTOM_OP_API unsigned NAME##_abi_version(void) { return FASTQ_CUSTOM_OP_ABI_VERSION; }

#ifdef __cplusplus
}
#endif
#endif
