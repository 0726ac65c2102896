/* fq_stage_times.h - where an image worker's time goes, per stage.
 *
 * The image path times each sample with the monotonic clock (fq_now_ns):
 *   read    open/read/close of the file (file sources only)
 *   decode  header + (ROI / DCT-scaled) decode, or cv::imdecode for non-JPEG
 *   ops     the op chain (crop/resize/flip/jitter/affine ...)
 *   write   the fused normalize/layout/dtype write into the slot row
 * fq_img_process_* record the last sample's decode/ops/write in the scratch
 * (fq_img_scratch_last_times, read by the same thread).  fq_imgtask adds each
 * sample's times to per-worker accumulators (relaxed atomics, so that
 * fq_imgtask_get_stage_times may be called from any thread while the pool runs;
 * the sum may then lag by the samples in flight).  Explain / sample() calls are
 * not counted.
 *
 * Only the record lives here (core); fq_img_scratch_last_times is declared in
 * image/fq_image.h and fq_imgtask_get_stage_times in task/fq_imgtask.h, so that
 * the include graph points one way (core <- image <- task).
 */
#ifndef FQ_STAGE_TIMES_H
#define FQ_STAGE_TIMES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fq_stage_times {
    uint64_t read_ns;
    uint64_t decode_ns;
    uint64_t ops_ns;
    uint64_t write_ns;
    uint64_t samples; /* samples (attempts, with replacements under on_error="skip") timed */
} fq_stage_times;

#ifdef __cplusplus
}
#endif
#endif
