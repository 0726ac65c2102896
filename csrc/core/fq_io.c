/* fq_io.c - see fq_io.h. */
#define _POSIX_C_SOURCE 200809L
#include "core/fq_io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int fq_io_errno(fq_err *err, int e, const char *what, const char *path)
{
    char eb[128];
    if (strerror_r(e, eb, sizeof eb) != 0)
        snprintf(eb, sizeof eb, "errno %d", e);
    return fq_set_err(err, FQ_E_IO, "%s '%s': %s", what, path, eb);
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
