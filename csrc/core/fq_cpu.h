/* fq_cpu.h - the one place that decides which instruction-set extensions fastq's kernels
 * may use.
 *
 * A kernel compiled with __attribute__((target("..."))) may hold instructions the CPU
 * lacks from its first byte on (a compiler is free to use them in the prologue: ASan's
 * stack poisoning in an AVX-512 function is a vmovdqu8).  So no such function checks the
 * CPU itself: the caller, compiled for the baseline, asks fq_cpu_has() and only then
 * calls it.
 *
 * The features are levels of fastq's own kernels, each the set of CPUID bits (and OS
 * register-state bits) its kernels need:
 *   FQ_CPU_SSE42       crc32 (records/fq_crc32c.c)
 *   FQ_CPU_F16C        AVX + F16C, YMM state saved by the OS (image/batch/fq_batch_mix.cpp)
 *   FQ_CPU_AVX2        AVX2 + FMA, YMM state (the uint8 augmentation kernels, the float32
 *                      write, TensorpackColor, the bicubic resize)
 *   FQ_CPU_AVX512VBMI  AVX-512 F + BW + VBMI, ZMM and opmask state (the table lookup of
 *                      the colour ops, image/color/fq_image_aug_simd.cpp)
 *
 * What may be used is what the CPU has AND a mask.  The mask comes from the environment
 * variable FASTQ_CPU, read once on first use:
 *   unset or ""  everything the CPU has
 *   baseline     none of the above (the x86-64 baseline code only)
 *   avx2         SSE42, F16C and AVX2 (no AVX-512)
 *   avx512       all of them
 * A level above the CPU's gives what the CPU has.  Any other value selects baseline and
 * is reported by fq_cpu_env_error() (the Python module warns with it).
 * fq_cpu_set_level() changes the mask at run time (tests, benchmarks); each kernel
 * call reads it once, and every kernel gives the same bytes as the scalar code, so no
 * ordering with other threads is needed.
 *
 * Not x86-64: no feature is ever present; the names still parse. */
#ifndef FQ_CPU_H
#define FQ_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FQ_CPU_SSE42 = 1u << 0,
    FQ_CPU_F16C = 1u << 1,
    FQ_CPU_AVX2 = 1u << 2,
    FQ_CPU_AVX512VBMI = 1u << 3,
    FQ_CPU_ALL = (1u << 4) - 1u
};

/* levels of the mask (FASTQ_CPU and fq_cpu_set_level) */
enum { FQ_CPU_LEVEL_BASELINE = 0, FQ_CPU_LEVEL_AVX2 = 1, FQ_CPU_LEVEL_AVX512 = 2, FQ_CPU_LEVEL_NATIVE = 3 };

/* 1 when every bit of `features` (non-zero) is on this CPU and not masked, else 0 (also
 * for 0).  Thread-safe; a relaxed load after the first call. */
int fq_cpu_has(unsigned features);
/* the bits the CPU (and the OS) support, before the mask */
unsigned fq_cpu_detected(void);
/* the bits in effect: detected & mask */
unsigned fq_cpu_effective(void);
/* the mask's level (FQ_CPU_LEVEL_*) as requested: by FASTQ_CPU, or the last set_level */
int fq_cpu_level(void);
/* the name of a level: "baseline", "avx2", "avx512", "native"; NULL for another value */
const char *fq_cpu_level_name(int level);
/* the level a name means (the FASTQ_CPU values, and "native" / "" for the default), or -1 */
int fq_cpu_level_parse(const char *name);
/* set the mask; returns the previous level, or -1 (nothing changed) for an unknown level */
int fq_cpu_set_level(int level);
/* the names of the bits in `features`, space separated ("sse4.2 f16c avx2 avx512vbmi");
 * writes at most `cap` bytes with the NUL; returns `buf` */
char *fq_cpu_feature_names(unsigned features, char *buf, unsigned long cap);
/* "" when FASTQ_CPU was unset or valid, else a message naming the variable, the value and
 * the accepted values */
const char *fq_cpu_env_error(void);

#ifdef __cplusplus
}
#endif

#endif
