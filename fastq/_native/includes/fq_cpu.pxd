# csrc/core/fq_cpu.h: which instruction-set extensions the kernels may use (CPU & FASTQ_CPU mask).

cdef extern from "core/fq_cpu.h" nogil:
    enum:
        FQ_CPU_SSE42
        FQ_CPU_F16C
        FQ_CPU_AVX2
        FQ_CPU_AVX512VBMI
        FQ_CPU_ALL
    enum:
        FQ_CPU_LEVEL_BASELINE
        FQ_CPU_LEVEL_AVX2
        FQ_CPU_LEVEL_AVX512
        FQ_CPU_LEVEL_NATIVE
    int fq_cpu_has(unsigned features)
    unsigned fq_cpu_detected()
    unsigned fq_cpu_effective()
    int fq_cpu_level()
    const char *fq_cpu_level_name(int level)
    int fq_cpu_level_parse(const char *name)
    int fq_cpu_set_level(int level)
    char *fq_cpu_feature_names(unsigned features, char *buf, unsigned long cap)
    const char *fq_cpu_env_error()
