/* fq_io.h - small POSIX file helpers shared by the native dataset readers
 * (fq_tfrecord.c, fq_tfr_stream.c, fq_tar.c).
 *
 * Thread safety: both functions are reentrant (no shared state; pread does not
 * move the file offset), so workers may call them on one descriptor at once.
 */
#ifndef FQ_IO_H
#define FQ_IO_H

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets err to FQ_E_IO "<what> '<path>': <strerror(e)>" and returns FQ_E_IO. */
int fq_io_errno(fq_err *err, int e, const char *what, const char *path);

/* pread n bytes at off into dst, retrying short reads and EINTR.  *got is the
 * number of bytes read (< n at end of file).  Returns 0, or -1 with errno set. */
int fq_pread_full(int fd, uint8_t *dst, size_t n, uint64_t off, size_t *got);

/* Little-endian loads (the TFRecord framing). */
static inline uint32_t fq_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fq_le64(const uint8_t *p)
{
    return (uint64_t)fq_le32(p) | (uint64_t)fq_le32(p + 4) << 32;
}

#ifdef __cplusplus
}
#endif

#endif
