/* fq_io.c - see fq_io.h. */
#define _POSIX_C_SOURCE 200809L
#include "core/fq_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fq_io_errno(fq_err *err, int e, const char *what, const char *path)
{
    char eb[128];
    if (strerror_r(e, eb, sizeof eb) != 0)
        snprintf(eb, sizeof eb, "errno %d", e);
    return fq_set_err(err, FQ_E_IO, "%s '%s': %s", what, path, eb);
}

/* "<strerror(e)>" or "errno <e>" into eb */
static void reason(int e, char *eb, size_t len)
{
    if (strerror_r(e, eb, len) != 0)
        snprintf(eb, len, "errno %d", e);
}

int fq_open_regular(const char *path, const char *what, int *fd, uint64_t *size, fq_err *err)
{
    char eb[128];
    *fd = -1;
    *size = 0;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        reason(errno, eb, sizeof eb);
        if (what)
            return fq_set_err(err, FQ_E_IO, "cannot open %s '%s': %s", what, path, eb);
        return fq_set_err(err, FQ_E_IO, "cannot open: %s", eb);
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        (void)close(f); /* read-only and unused: nothing to lose */
        reason(e, eb, sizeof eb);
        if (what)
            return fq_set_err(err, FQ_E_IO, "cannot stat %s '%s': %s", what, path, eb);
        return fq_set_err(err, FQ_E_IO, "cannot stat: %s", eb);
    }
    if (!S_ISREG(st.st_mode)) {
        (void)close(f);
        if (what)
            return fq_set_err(err, FQ_E_IO, "%s '%s' is not a regular file", what, path);
        return fq_set_err(err, FQ_E_IO, "not a regular file");
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return FQ_OK;
}

int fq_pread_full(int fd, uint8_t *dst, size_t n, uint64_t off, size_t *got)
{
    size_t g = 0;
    while (g < n) {
        ssize_t r = pread(fd, dst + g, n - g, (off_t)(off + g));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *got = g;
            return -1;
        }
        if (r == 0)
            break;
        g += (size_t)r;
    }
    *got = g;
    return 0;
}

int fq_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len, fq_err *err)
{
    int fd;
    uint64_t fsize;
    *len = 0;
    int rc = fq_open_regular(path, NULL, &fd, &fsize, err);
    if (rc != FQ_OK)
        return rc;
    size_t want = (size_t)fsize;
    if (want == 0) {
        (void)close(fd);
        return fq_set_err(err, FQ_E_EMPTY, "empty file (0 bytes)");
    }
    if (want > *cap || !*buf) {
        size_t c = want + want / 4 + 4096;
        uint8_t *nb = realloc(*buf, c);
        if (!nb) {
            (void)close(fd);
            return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes to read the file", c);
        }
        *buf = nb;
        *cap = c;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, *buf + got, want - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            (void)close(fd);
            return fq_set_err(err, FQ_E_IO, "read failed after %zu of %zu bytes (errno %d)", got, want, e);
        }
        if (r == 0)
            break; /* the file shrank: decode what is there, the decoder reports truncation */
        got += (size_t)r;
    }
    if (close(fd) != 0)
        return fq_set_err(err, FQ_E_IO, "close failed (errno %d)", errno);
    if (got == 0)
        return fq_set_err(err, FQ_E_EMPTY, "empty file (0 bytes read)");
    *len = got;
    return FQ_OK;
}
