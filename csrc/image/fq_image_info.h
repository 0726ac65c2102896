/* fq_image_info.h - which native libraries the image module actually runs with.
 *
 * For `fastq info` and bug reports: the libjpeg-turbo version fastq was built
 * against (libjpeg's API has no run-time version call) and the shared library
 * the dynamic linker actually loaded for it; OpenCV's own run-time version call
 * (cv::getVersionString) and its build flags; the CPU SIMD features OpenCV
 * detected and uses.  Thread-safe (read-only queries); no allocation the caller
 * must free.
 */
#ifndef FQ_IMAGE_INFO_H
#define FQ_IMAGE_INFO_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fq_img_libinfo {
    char jpeg_turbo_version[32];   /* LIBJPEG_TURBO_VERSION at build time, e.g. "2.1.5" */
    int jpeg_lib_version;          /* JPEG_LIB_VERSION (the libjpeg ABI, e.g. 62) */
    char jpeg_library[512];        /* file of the loaded library that defines jpeg_CreateDecompress */
    char opencv_version[32];       /* cv::getVersionString() of the loaded OpenCV */
    char opencv_build_version[32]; /* CV_VERSION fastq was compiled against */
    char opencv_library[512];      /* file of the loaded library that defines cv::getVersionString */
    char opencv_cpu_features[512]; /* cv::getCPUFeaturesLine(): baseline, "*"= dispatched, "?" = unavailable */
    char cpu_simd[256];            /* features cv::checkHardwareSupport() finds on this CPU */
    int opencv_optimized;          /* cv::useOptimized() */
} fq_img_libinfo;

/* Fill *out.  Returns 0 (FQ_OK); fields that cannot be found are "". */
int fq_img_libinfo_get(fq_img_libinfo *out);

#ifdef __cplusplus
}
#endif
#endif
