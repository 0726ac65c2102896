/* fq_io.h - small POSIX file helpers shared by the image task (task/fq_imgtask.c) and
 * the native dataset readers (records/: TFRecord, tar, read-ahead).
 *
 * Thread safety: every function is reentrant (no shared state; pread does not
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

/* Open path read-only (O_CLOEXEC) and check that it is a regular file: on FQ_OK *fd
 * is open (the caller closes it) and *size is its length in bytes.  On failure nothing
 * stays open and err is FQ_E_IO, worded for a shard (what = "tar shard"):
 *     "cannot open <what> '<path>': <reason>"   "<what> '<path>' is not a regular file"
 * or, with what == NULL, for a sample file whose caller names it in its own prefix:
 *     "cannot open: <reason>"   "not a regular file"                                   */
int fq_open_regular(const char *path, const char *what, int *fd, uint64_t *size, fq_err *err);

/* pread n bytes at off into dst, retrying short reads and EINTR.  *got is the
 * number of bytes read (< n at end of file).  Returns 0, or -1 with errno set. */
int fq_pread_full(int fd, uint8_t *dst, size_t n, uint64_t off, size_t *got);

/* Read the whole regular file at path into *buf (malloc'ed; grown with realloc to hold
 * the file, *cap its capacity; the caller frees it with free(), also after an error):
 * FQ_OK and *len = the bytes read (fewer than the size fstat gave if the file shrank
 * meanwhile: the decoder reports the truncation).  Errors, worded for a caller that
 * names the file in its own prefix: FQ_E_IO "cannot open: <reason>", "not a regular
 * file", "read failed after <got> of <size> bytes (errno <e>)", "close failed (errno
 * <e>)"; FQ_E_EMPTY "empty file (0 bytes)"; FQ_E_NOMEM.  Used by the image task's FILES
 * source and, through fastq's C API table, by the TensorFlow kernel's file mode. */
int fq_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len, fq_err *err);

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
