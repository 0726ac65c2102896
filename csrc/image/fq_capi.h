/* fq_capi.h - fastq's per-sample image C API (fq_image.h) as ONE versioned table of
 * function pointers, for native code that is not linked with fastq.
 *
 * Why a table: the wheel's extension modules export nothing but PyInit_* (a linker
 * version script; fastq links OpenCV and libjpeg-turbo statically and hides them), so a
 * TensorFlow kernel library built on the user's machine (csrc/tf/fq_tf_kernel.cc) cannot
 * link against fastq's functions.  fastq._native._image exports exactly one more symbol,
 * FQ_CAPI_SYMBOL, a const fq_capi_v1; the kernel finds it with
 * dlopen(<fastq._native._image's file>, RTLD_NOLOAD | RTLD_NOW) + dlsym, so it calls the very
 * code (and OpenCV instance) the Pipeline runs, and needs no OpenCV headers itself.
 *
 * ABI rules: abi_version changes when a field changes meaning; new fields are only ever
 * appended (struct_size says how many a library has); the sizeof_* fields let a caller
 * compiled against other headers refuse a mismatch instead of corrupting memory.
 * The table is immutable static data: any thread may read it at any time.
 * The functions keep the contracts of fq_image.h (fq_img_spec shared read-only,
 * fq_img_scratch one per thread at a time).
 */
#ifndef FQ_CAPI_H
#define FQ_CAPI_H

#include <stddef.h>
#include <stdint.h>

#include "core/fq_common.h"
#include "image/fq_batch_mix.h"
#include "image/fq_batch_pad.h"
#include "image/fq_image.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_CAPI_ABI_VERSION 1u
#define FQ_CAPI_SYMBOL "fastq_capi_v1"

typedef struct fq_capi_v1 {
    uint32_t abi_version;          /* FQ_CAPI_ABI_VERSION of the library */
    uint32_t struct_size;          /* sizeof(fq_capi_v1) of the library */
    uint32_t sizeof_fq_op;         /* sizeof(fq_op): 136 */
    uint32_t sizeof_fq_err;        /* sizeof(fq_err) */
    uint32_t sizeof_fq_img_format; /* sizeof(fq_img_format) */
    uint32_t max_ops;              /* FQ_IMG_MAX_OPS */
    int (*spec_create)(const fq_op *ops, int n_ops, const fq_img_format *fmt, fq_img_spec **out, fq_err *err);
    void (*spec_free)(fq_img_spec *spec);
    int (*spec_out_shape)(const fq_img_spec *spec, int *h, int *w, int *c);
    size_t (*spec_row_bytes)(const fq_img_spec *spec);
    fq_img_scratch *(*scratch_new)(void);
    void (*scratch_free)(fq_img_scratch *s);
    int (*process_encoded)(const fq_img_spec *spec, fq_img_scratch *s, const uint8_t *data, size_t len,
                           uint64_t seed, uint64_t epoch, uint64_t index, void *out_row, fq_img_explain *ex,
                           fq_err *err);
    const char *(*code_name)(int code);
    void (*set_opencv_threads)(int n);
    /* appended for the TensorFlow dataset kernel (fastq.tf.dataset): what a Pipeline's
     * consumer does to a leased batch with mix= (fq_batch_mix.h) and pad="batch"
     * (fq_batch_pad.h) */
    uint32_t sizeof_fq_mix_params;
    uint32_t sizeof_fq_mix_draw;
    int (*mix_check)(const fq_mix_params *p, fq_err *err);
    int (*mix_draw_count)(const fq_mix_params *p, int n);
    int (*mix_draw_batch)(const fq_mix_params *p, uint64_t seed, uint64_t epoch, uint64_t batch, int n, int h,
                          int w, fq_mix_draw *draws, fq_err *err);
    int (*mix_apply)(const fq_mix_params *p, const fq_mix_draw *draws, void *images, int dtype, int layout, int n,
                     int h, int w, int c, const void *labels, int ltype, float *soft, void *tmp, fq_err *err);
    int (*batch_pad_compact)(void *block, int64_t n_planes, int cap_h, int cap_w, int h, int w, size_t px,
                             fq_err *err);
    /* appended for the kernel's file mode (fastq.tf.ops.decode_augment_files): the FILES
     * source's whole-file read (core/fq_io.h fq_read_file; *buf grows with realloc) and
     * the free() that matches it */
    int (*read_file)(const char *path, uint8_t **buf, size_t *cap, size_t *len, fq_err *err);
    void (*buf_free)(void *buf);
} fq_capi_v1;

/* The table itself: the one symbol fastq._native._image exports besides PyInit__image. */
__attribute__((visibility("default"))) extern const fq_capi_v1 fastq_capi_v1;

#ifdef __cplusplus
}
#endif
#endif
