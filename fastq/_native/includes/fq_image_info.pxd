# csrc/image/fq_image_info.h: versions of the native libraries.

cdef extern from "image/fq_image_info.h" nogil:
    ctypedef struct fq_img_libinfo:
        char jpeg_turbo_version[32]
        int jpeg_lib_version
        char jpeg_library[512]
        char opencv_version[32]
        char opencv_build_version[32]
        char opencv_library[512]
        char opencv_cpu_features[512]
        char cpu_simd[256]
        int opencv_optimized
    int fq_img_libinfo_get(fq_img_libinfo *out)
