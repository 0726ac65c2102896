/* fq_epoch_shuffle.c - the epoch shuffle of fq_imgtask.h: fq_permutation(seed, epoch), a
 * Fisher-Yates shuffle over the stream FQ_RNG_SHUFFLE_INDEX of (seed, epoch). */
#include "task/fq_imgtask.h"

#include "core/fq_rng.h"

void fq_permutation(uint64_t seed, uint64_t epoch, int64_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    fq_rng r;
    fq_rng_init(&r, seed, epoch, FQ_RNG_SHUFFLE_INDEX);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)fq_rng_next_below(&r, (uint64_t)(i + 1));
        int64_t tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
}
