/* fq_cpu.c - see fq_cpu.h.  CPUID and XGETBV directly (not __builtin_cpu_supports: that
 * needs libgcc's __cpu_model, which zig's compiler_rt lacks, and clang's knows no "f16c"). */
#include "core/fq_cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#define FQ_CPU_X86 1
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static unsigned g_detected;         /* written once, in init */
static atomic_int g_level;          /* FQ_CPU_LEVEL_* */
static char g_env_error[256];       /* written once, in init */

#ifdef FQ_CPU_X86
static unsigned long long xgetbv0(void)
{
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static unsigned detect(void)
{
    unsigned a = 0, b = 0, c = 0, d = 0, f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    const unsigned c1 = c;
    if (c1 & (1u << 20))
        f |= FQ_CPU_SSE42;
    /* AVX-class instructions need the OS to save the YMM registers (OSXSAVE, XCR0 bits 1-2) */
    if (!(c1 & (1u << 27)))
        return f;
    const unsigned long long xcr0 = xgetbv0();
    const int ymm = (xcr0 & 6u) == 6u, zmm = ymm && (xcr0 & 0xe0u) == 0xe0u; /* + opmask, ZMM 0-15 hi, 16-31 */
    const int avx = ymm && (c1 & (1u << 28));
    if (avx && (c1 & (1u << 29)))
        f |= FQ_CPU_F16C;
    if (__get_cpuid_max(0, NULL) < 7)
        return f;
    a = b = c = d = 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (avx && (b & (1u << 5)) && (c1 & (1u << 12))) /* AVX2 and FMA */
        f |= FQ_CPU_AVX2;
    if (zmm && (f & FQ_CPU_AVX2) && (b & (1u << 16)) && (b & (1u << 30)) && (c & (1u << 1)))
        f |= FQ_CPU_AVX512VBMI; /* AVX512F, AVX512BW, AVX512VBMI */
    return f;
}
#else
static unsigned detect(void) { return 0; }
#endif

static unsigned level_mask(int level)
{
    switch (level) {
    case FQ_CPU_LEVEL_BASELINE:
        return 0;
    case FQ_CPU_LEVEL_AVX2:
        return FQ_CPU_SSE42 | FQ_CPU_F16C | FQ_CPU_AVX2;
    default:
        return FQ_CPU_ALL;
    }
}

static const char *const NAMES[] = {"baseline", "avx2", "avx512", "native"};

const char *fq_cpu_level_name(int level)
{
    return level >= 0 && level <= FQ_CPU_LEVEL_NATIVE ? NAMES[level] : NULL;
}

int fq_cpu_level_parse(const char *name)
{
    if (!name || !*name)
        return FQ_CPU_LEVEL_NATIVE;
    for (int i = 0; i <= FQ_CPU_LEVEL_NATIVE; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

static void init(void)
{
    g_detected = detect();
    const char *e = getenv("FASTQ_CPU");
    int level = fq_cpu_level_parse(e);
    if (level < 0) {
        int n = snprintf(g_env_error, sizeof g_env_error,
                         "FASTQ_CPU=%.64s is not one of baseline, avx2, avx512 (unset: all the CPU has); "
                         "using baseline",
                         e);
        if (n < 0) /* cannot happen with this format; keep a message anyway */
            strcpy(g_env_error, "FASTQ_CPU is not one of baseline, avx2, avx512; using baseline");
        level = FQ_CPU_LEVEL_BASELINE;
    }
    atomic_store_explicit(&g_level, level, memory_order_relaxed);
}

/* pthread_once fails only on invalid arguments; should it ever, no optional kernel runs */
static int ready(void) { return pthread_once(&g_once, init) == 0; }

unsigned fq_cpu_detected(void) { return ready() ? g_detected : 0u; }

unsigned fq_cpu_effective(void)
{
    if (!ready())
        return 0;
    return g_detected & level_mask(atomic_load_explicit(&g_level, memory_order_relaxed));
}

int fq_cpu_has(unsigned features) { return features != 0 && (fq_cpu_effective() & features) == features; }

int fq_cpu_level(void)
{
    if (!ready())
        return FQ_CPU_LEVEL_BASELINE;
    return atomic_load_explicit(&g_level, memory_order_relaxed);
}

int fq_cpu_set_level(int level)
{
    if (!fq_cpu_level_name(level) || !ready())
        return -1;
    return atomic_exchange_explicit(&g_level, level, memory_order_relaxed);
}

char *fq_cpu_feature_names(unsigned features, char *buf, unsigned long cap)
{
    static const char *const F[] = {"sse4.2", "f16c", "avx2", "avx512vbmi"};
    if (!buf || cap == 0)
        return buf;
    buf[0] = '\0';
    size_t used = 0;
    for (unsigned i = 0; i < sizeof F / sizeof F[0]; i++) {
        if (!(features & (1u << i)))
            continue;
        int n = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", F[i]);
        if (n < 0 || (size_t)n >= cap - used) { /* truncated: keep what fits */
            buf[cap - 1] = '\0';
            break;
        }
        used += (size_t)n;
    }
    return buf;
}

const char *fq_cpu_env_error(void) { return ready() ? g_env_error : "fastq: the CPU features could not be read"; }
