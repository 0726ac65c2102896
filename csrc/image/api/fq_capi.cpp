/* fq_capi.cpp - the one exported table of fastq's image C API (see fq_capi.h).
 * Linked into the fastq._native._image extension module (setup.py lists this file among that
 * module's sources, so the object is always linked, and names the symbol in the
 * version script, so it is exported).  Static const data: no initialization order, no
 * locking. */
#include "image/fq_capi.h"

#include <cstdlib>

#include "core/fq_io.h"

extern "C" {

const fq_capi_v1 fastq_capi_v1 = {
    FQ_CAPI_ABI_VERSION,
    (uint32_t)sizeof(fq_capi_v1),
    (uint32_t)sizeof(fq_op),
    (uint32_t)sizeof(fq_err),
    (uint32_t)sizeof(fq_img_format),
    (uint32_t)FQ_IMG_MAX_OPS,
    fq_img_spec_create,
    fq_img_spec_free,
    fq_img_spec_out_shape,
    fq_img_spec_row_bytes,
    fq_img_scratch_new,
    fq_img_scratch_free,
    fq_img_process_encoded,
    fq_code_name,
    fq_img_set_opencv_threads,
    (uint32_t)sizeof(fq_mix_params),
    (uint32_t)sizeof(fq_mix_draw),
    fq_mix_check,
    fq_mix_draw_count,
    fq_mix_draw_batch,
    fq_mix_apply,
    fq_batch_pad_compact,
    fq_read_file,
    std::free,
};

}  // extern "C"
