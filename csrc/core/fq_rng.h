/* fq_rng.h - header-only, counter-based random numbers keyed by (seed, epoch, index).
 *
 * Every sample gets its own stream: fq_rng_init(&r, seed, epoch, index) hashes the
 * three keys into a 64-bit starting counter, and the stream is SplitMix64 from there
 * (counter += golden gamma, output = 64-bit finalizer of the counter).  A stream is a
 * pure function of the keys, so what a sample draws never depends on which thread
 * runs it or on what other samples drew.  For a fixed (seed, epoch) the map
 * index -> starting counter is a bijection (each step is invertible), so two indices
 * never share a start; streams of different keys start at pseudo-random points of
 * the 2^64 cycle, and the short streams a sample uses (tens of draws) overlap with
 * negligible probability.
 *
 * The same generator serves the shuffle permutation: key it with (seed, epoch,
 * FQ_RNG_SHUFFLE_INDEX) or any index outside the sample range.
 *
 * Plain C (C11 and C++17), no globals, no allocation: an fq_rng is a value.
 */
#ifndef FQ_RNG_H
#define FQ_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fq_rng {
    uint64_t state;
} fq_rng;

/* An index no sample uses: key for per-epoch draws such as the shuffle. */
#define FQ_RNG_SHUFFLE_INDEX UINT64_C(0xFFFFFFFFFFFFFFFF)

#define FQ_RNG_GAMMA UINT64_C(0x9E3779B97F4A7C15)

/* SplitMix64 / Stafford "mix13" finalizer: a bijection on 64-bit words. */
static inline uint64_t fq_rng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline void fq_rng_init(fq_rng *r, uint64_t seed, uint64_t epoch, uint64_t index)
{
    /* Chain of bijections: for fixed (seed, epoch), index -> state is one-to-one. */
    uint64_t h = fq_rng_mix64(seed ^ UINT64_C(0x6A09E667F3BCC909));
    h = fq_rng_mix64(h + epoch * FQ_RNG_GAMMA + UINT64_C(0xBB67AE8584CAA73B));
    h = fq_rng_mix64(h ^ index);
    r->state = h;
}

/* Next 64 uniformly distributed bits. */
static inline uint64_t fq_rng_next_u64(fq_rng *r)
{
    r->state += FQ_RNG_GAMMA;
    return fq_rng_mix64(r->state);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double fq_rng_uniform(fq_rng *r)
{
    return (double)(fq_rng_next_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform double in [lo, hi) (returns lo when hi <= lo). */
static inline double fq_rng_uniform_range(fq_rng *r, double lo, double hi)
{
    double u = fq_rng_uniform(r);
    if (!(hi > lo))
        return lo;
    double v = lo + (hi - lo) * u;
    return v < hi ? v : lo; /* guard against rounding up to hi */
}

/* Unbiased integer in [0, n); returns 0 when n == 0. */
static inline uint64_t fq_rng_next_below(fq_rng *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
    for (;;) {
        uint64_t x = fq_rng_next_u64(r);
        if (x >= threshold)
            return x % n;
    }
}

#ifdef __cplusplus
}
#endif
#endif
