/* fq_image_info.cpp - see fq_image_info.h. */
#include "image/fq_image_info.h"

#include <dlfcn.h>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <jpeglib.h>
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>

#define FQ_STR2(x) #x
#define FQ_STR(x) FQ_STR2(x)

namespace {

void copy(char *dst, size_t cap, const std::string &s) { std::snprintf(dst, cap, "%s", s.c_str()); }

/* Resolved path of the shared object that holds `addr` ("" if unknown). */
void library_of(const void *addr, char *dst, size_t cap)
{
    dst[0] = '\0';
    Dl_info info;
    if (dladdr(addr, &info) == 0 || !info.dli_fname)
        return;
    char buf[PATH_MAX];
    const char *p = realpath(info.dli_fname, buf) ? buf : info.dli_fname;
    size_t n = strnlen(p, cap - 1); /* truncate a (very) long path */
    std::memcpy(dst, p, n);
    dst[n] = '\0';
}

}  // namespace

extern "C" int fq_img_libinfo_get(fq_img_libinfo *out)
{
    std::memset(out, 0, sizeof *out);
#ifdef LIBJPEG_TURBO_VERSION
    std::snprintf(out->jpeg_turbo_version, sizeof out->jpeg_turbo_version, "%s", FQ_STR(LIBJPEG_TURBO_VERSION));
#endif
    out->jpeg_lib_version = JPEG_LIB_VERSION;
    library_of(reinterpret_cast<const void *>(&jpeg_CreateDecompress), out->jpeg_library, sizeof out->jpeg_library);
    try {
        copy(out->opencv_version, sizeof out->opencv_version, cv::getVersionString());
        copy(out->opencv_build_version, sizeof out->opencv_build_version, CV_VERSION);
        library_of(reinterpret_cast<const void *>(&cv::getVersionString), out->opencv_library,
                   sizeof out->opencv_library);
        copy(out->opencv_cpu_features, sizeof out->opencv_cpu_features, cv::getCPUFeaturesLine());
        static const struct { int id; const char *name; } feats[] = {
            {CV_CPU_SSE2, "SSE2"}, {CV_CPU_SSE4_1, "SSE4_1"}, {CV_CPU_SSE4_2, "SSE4_2"}, {CV_CPU_AVX, "AVX"},
            {CV_CPU_AVX2, "AVX2"}, {CV_CPU_FMA3, "FMA3"}, {CV_CPU_AVX_512F, "AVX512F"}, {CV_CPU_NEON, "NEON"}};
        std::string simd;
        for (const auto &f : feats)
            if (cv::checkHardwareSupport(f.id))
                simd += (simd.empty() ? "" : " ") + std::string(f.name);
        copy(out->cpu_simd, sizeof out->cpu_simd, simd);
        out->opencv_optimized = cv::useOptimized() ? 1 : 0;
    } catch (const std::exception &) {
        /* leave the OpenCV fields empty: callers report "unknown" */
    }
    return 0;
}
