/* fq_batch_pad.h - Pipeline(pad="batch"): repack a batch of padded samples, in place, to the
 * batch's own size.
 *
 * In that mode every sample of a slot is written at the slot's capacity: plane p of the block
 * (an HWC image, a CHW image's channel, a mask) is cap_h x cap_w pixels of px bytes, the image at
 * the top-left and the rest already the fill (fastq appends Pad(size=capacity) to the chain, so
 * the worker writes the padding).  fq_batch_pad_compact moves the top-left h x w window of every
 * plane (h <= cap_h, w <= cap_w: the batch's largest image rounded up to pad_multiple) so that the
 * block starts with n_planes x h x w contiguous pixels: the batch as one (B, h, w, C) array.
 *
 * In place and forward: line y of plane p goes from ((p cap_h + y) cap_w) px to ((p h + y) w) px,
 * which is never after its source, and lines are moved in increasing order, so a line's source
 * is read before any later move can reach it (memmove handles the overlap of a line with itself).
 * The window's pixels are exactly those of the fixed-capacity sample (no pixel is computed).
 *
 * Thread safety: a pure function of its arguments; it writes only the block.  The caller holds
 * the slot (a leased batch that no worker writes) and hands out views of the result only.
 */
#ifndef FQ_BATCH_PAD_H
#define FQ_BATCH_PAD_H

#include <stddef.h>
#include <stdint.h>

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FQ_E_INVALID: a NULL block, a negative count, a window larger than the capacity, a size < 1. */
int fq_batch_pad_compact(void *block, int64_t n_planes, int cap_h, int cap_w, int h, int w, size_t px,
                         fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
