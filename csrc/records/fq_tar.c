/* fq_tar.c - see fq_tar.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_tar.h"
#include "core/fq_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 512
#define MAX_META (1u << 20) /* pax / GNU long-name payloads larger than this are refused */

/* Numeric header field: octal (NUL/space padded) or GNU base-256. -1 if malformed. */
static int parse_num(const uint8_t *f, int len, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* negative or too large */
        for (int i = 1; i < len; i++) {
            if (v >> 56)
                return -1;
            v = (v << 8) | f[i];
        }
        *out = v;
        return 0;
    }
    int i = 0, digits = 0;
    while (i < len && f[i] == ' ')
        i++;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v >> 60)
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < len; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    if (!digits)
        return -1;
    *out = v;
    return 0;
}

static int checksum_ok(const uint8_t *h)
{
    uint64_t stored;
    if (parse_num(h + 148, 8, &stored) != 0)
        return 0;
    uint64_t usum = 0;
    int64_t ssum = 0;
    for (int i = 0; i < BLOCK; i++) {
        uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
        usum += c;
        ssum += (int8_t)c;
    }
    return stored == usum || (int64_t)stored == ssum;
}

static int all_zero(const uint8_t *h)
{
    for (int i = 0; i < BLOCK; i++)
        if (h[i])
            return 0;
    return 1;
}

static int unsafe_name(const char *s)
{
    if (s[0] == '/' || s[0] == '\0')
        return 1;
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* Parse pax records "<len> <key>=<value>\n" for path and size. */
static int parse_pax(const uint8_t *d, size_t n, char **path, uint64_t *size, int *has_size)
{
    size_t pos = 0;
    while (pos < n) {
        size_t len = 0, i = pos;
        while (i < n && d[i] >= '0' && d[i] <= '9') {
            len = len * 10 + (size_t)(d[i] - '0');
            if (len > n)
                return -1;
            i++;
        }
        if (i == pos || i >= n || d[i] != ' ' || len < 5 || pos + len > n || d[pos + len - 1] != '\n')
            return -1;
        const uint8_t *kv = d + i + 1, *end = d + pos + len - 1;
        const uint8_t *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return -1;
        size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            char *p = malloc(vlen + 1);
            if (!p)
                return -2;
            memcpy(p, eq + 1, vlen);
            p[vlen] = '\0';
            if (strlen(p) != vlen) {
                free(p);
                return -1;
            }
            free(*path);
            *path = p;
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t v = 0;
            if (vlen == 0 || vlen > 19)
                return -1;
            for (size_t k = 0; k < vlen; k++) {
                uint8_t c = eq[1 + k];
                if (c < '0' || c > '9')
                    return -1;
                v = v * 10 + (uint64_t)(c - '0');
            }
            *size = v;
            *has_size = 1;
        }
        pos += len;
    }
    return 0;
}

typedef struct members {
    uint64_t *off, *size;
    uint8_t *flags;
    int64_t n, cap;
    char *names;
    size_t nlen, ncap;
} members;

static int add_member(members *m, uint64_t off, uint64_t size, const char *name)
{
    if (m->n == m->cap) {
        int64_t nc = m->cap ? m->cap * 2 : 256;
        uint64_t *a = realloc(m->off, (size_t)nc * sizeof *a);
        if (!a)
            return -1;
        m->off = a;
        uint64_t *b = realloc(m->size, (size_t)nc * sizeof *b);
        if (!b)
            return -1;
        m->size = b;
        uint8_t *c = realloc(m->flags, (size_t)nc);
        if (!c)
            return -1;
        m->flags = c;
        m->cap = nc;
    }
    size_t l = strlen(name) + 1;
    if (m->nlen + l > m->ncap) {
        size_t nc = (m->ncap + l) * 2;
        char *p = realloc(m->names, nc);
        if (!p)
            return -1;
        m->names = p;
        m->ncap = nc;
    }
    memcpy(m->names + m->nlen, name, l);
    m->nlen += l;
    m->off[m->n] = off;
    m->size[m->n] = size;
    m->flags[m->n] = (uint8_t)(unsafe_name(name) ? FQ_TAR_UNSAFE_NAME : 0);
    m->n++;
    return 0;
}

int fq_tar_scan(const char *path, uint64_t **offsets, uint64_t **sizes, uint8_t **flags, char **names,
                size_t *names_len, int64_t *n, fq_err *tail, fq_err *err)
{
    *offsets = *sizes = NULL;
    *flags = NULL;
    *names = NULL;
    *names_len = 0;
    *n = 0;
    fq_clear_err(tail);
    int fd;
    uint64_t fsize, pos = 0;
    int orc = fq_open_regular(path, "tar shard", &fd, &fsize, err);
    if (orc != FQ_OK)
        return orc;
    members m;
    memset(&m, 0, sizeof m);
    char *pending_name = NULL, *meta = NULL;
    uint64_t pending_size = 0;
    int has_pending_size = 0, rc = FQ_OK;
    char name[BLOCK];
    uint8_t h[BLOCK];
    while (1) {
        if (pos == fsize)
            break; /* no end-of-archive blocks: tolerated, like Python's tarfile */
        size_t got;
        if (fsize - pos < BLOCK) {
            fq_set_err(tail, FQ_E_IO, "truncated tar: a %llu-byte partial header at offset %llu",
                       (unsigned long long)(fsize - pos), (unsigned long long)pos);
            break;
        }
        if (fq_pread_full(fd, h, BLOCK, pos, &got) != 0) {
            rc = fq_io_errno(err, errno, "read failed in tar shard", path);
            break;
        }
        if (got != BLOCK) {
            rc = fq_set_err(err, FQ_E_IO, "tar shard '%s' shrank while read", path);
            break;
        }
        if (all_zero(h))
            break;
        if (!checksum_ok(h)) {
            fq_set_err(tail, FQ_E_IO, "bad tar header checksum at offset %llu", (unsigned long long)pos);
            break;
        }
        uint64_t sz;
        if (parse_num(h + 124, 12, &sz) != 0) {
            fq_set_err(tail, FQ_E_IO, "bad size field in the tar header at offset %llu", (unsigned long long)pos);
            break;
        }
        char type = (char)h[156];
        int regular = type == '0' || type == '\0' || type == '7';
        if (regular && has_pending_size)
            sz = pending_size;
        uint64_t data = pos + BLOCK;
        if (sz > fsize - data) {
            fq_set_err(tail, FQ_E_IO, "truncated tar member at offset %llu: %llu of its %llu bytes are there",
                       (unsigned long long)pos, (unsigned long long)(fsize - data), (unsigned long long)sz);
            break;
        }
        if (type == 'x' || type == 'L') {
            if (sz > MAX_META) {
                fq_set_err(tail, FQ_E_IO, "tar metadata header at offset %llu too large (%llu bytes)",
                           (unsigned long long)pos, (unsigned long long)sz);
                break;
            }
            free(meta);
            meta = malloc((size_t)sz + 1);
            if (!meta) {
                rc = fq_set_err(err, FQ_E_NOMEM, "out of memory reading '%s'", path);
                break;
            }
            if (fq_pread_full(fd, (uint8_t *)meta, (size_t)sz, data, &got) != 0) {
                rc = fq_io_errno(err, errno, "read failed in tar shard", path);
                break;
            }
            if (got != sz) {
                rc = fq_set_err(err, FQ_E_IO, "tar shard '%s' shrank while read", path);
                break;
            }
            meta[sz] = '\0';
            if (type == 'L') {
                free(pending_name);
                pending_name = strdup(meta); /* NUL-terminated long name */
                if (!pending_name) {
                    rc = fq_set_err(err, FQ_E_NOMEM, "out of memory");
                    break;
                }
            } else {
                int pr = parse_pax((const uint8_t *)meta, (size_t)sz, &pending_name, &pending_size, &has_pending_size);
                if (pr == -2) {
                    rc = fq_set_err(err, FQ_E_NOMEM, "out of memory");
                    break;
                }
                if (pr != 0) {
                    fq_set_err(tail, FQ_E_IO, "malformed pax header at offset %llu", (unsigned long long)pos);
                    break;
                }
            }
        } else if (regular) {
            const char *nm = pending_name;
            if (!nm) {
                size_t k = 0;
                if (memcmp(h + 257, "ustar", 5) == 0 && h[345]) {
                    size_t pl = strnlen((const char *)h + 345, 155);
                    memcpy(name, h + 345, pl);
                    name[pl] = '/';
                    k = pl + 1;
                }
                size_t nl = strnlen((const char *)h, 100);
                memcpy(name + k, h, nl);
                name[k + nl] = '\0';
                nm = name;
            }
            if (add_member(&m, data, sz, nm) != 0) {
                rc = fq_set_err(err, FQ_E_NOMEM, "out of memory indexing '%s'", path);
                break;
            }
        }
        if (type != 'x' && type != 'L' && type != 'g') {
            free(pending_name);
            pending_name = NULL;
            has_pending_size = 0;
        }
        pos = data + ((sz + BLOCK - 1) / BLOCK) * BLOCK;
        if (pos > fsize)
            pos = fsize; /* last member's padding missing: the next loop ends */
    }
    free(pending_name);
    free(meta);
    if (close(fd) != 0 && rc == FQ_OK)
        rc = fq_io_errno(err, errno, "close failed on", path);
    if (rc != FQ_OK) {
        free(m.off);
        free(m.size);
        free(m.flags);
        free(m.names);
        return rc;
    }
    *offsets = m.off;
    *sizes = m.size;
    *flags = m.flags;
    *names = m.names;
    *names_len = m.nlen;
    *n = m.n;
    return FQ_OK;
}

struct fq_tarset {
    fq_tarset_config c;
    fq_sample_reader sr;
};

int fq_tarset_create(const fq_tarset_config *cfg, fq_tarset **out, const fq_sample_reader **reader, fq_err *err)
{
    *out = NULL;
    *reader = NULL;
    if (cfg->n_shards < 1 || !cfg->paths || cfg->n < 0 ||
        (cfg->n > 0 && (!cfg->shard || !cfg->img_off || !cfg->img_size || !cfg->lab_off || !cfg->lab_size ||
                        !cfg->number || !cfg->key || !cfg->error)))
        return fq_set_err(err, FQ_E_INVALID, "bad tar sample index");
    for (int64_t i = 0; i < cfg->n; i++)
        if (cfg->shard[i] < 0 || cfg->shard[i] >= cfg->n_shards)
            return fq_set_err(err, FQ_E_INVALID, "sample %lld names shard %d", (long long)i, cfg->shard[i]);
    fq_tarset *s = calloc(1, sizeof *s);
    if (!s)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    s->c = *cfg;
    s->sr.read = fq_tar_read;
    s->sr.describe = fq_tar_describe;
    s->sr.reader = s;
    s->sr.n_extra = cfg->with_label ? 1 : 0; /* the label, an int64 */
    s->sr.extra_sizes[0] = 8;
    *out = s;
    *reader = &s->sr;
    return FQ_OK;
}

void fq_tarset_free(fq_tarset *s)
{
    free(s);
}

void fq_tar_describe(void *ctx, int64_t idx, char *out, size_t len)
{
    const fq_tarset *s = ctx;
    if (idx < 0 || idx >= s->c.n) {
        snprintf(out, len, "sample ?");
        return;
    }
    snprintf(out, len, "shard '%s', sample %lld (key '%s')", s->c.paths[s->c.shard[idx]],
             (long long)s->c.number[idx], s->c.key[idx]);
}

static int read_member(int fd, const char *path, uint8_t *dst, uint64_t off, uint64_t size, fq_err *err)
{
    size_t got;
    if (fq_pread_full(fd, dst, (size_t)size, off, &got) != 0)
        return fq_io_errno(err, errno, "read failed in", path);
    if (got != size)
        return fq_set_err(err, FQ_E_IO, "truncated member at offset %llu: %zu of %llu bytes (shard changed?)",
                          (unsigned long long)off, got, (unsigned long long)size);
    return FQ_OK;
}

/* A label member: optional ASCII whitespace, an optional sign, decimal digits (any
 * number of leading zeros), as Python's int() reads it; the whole int64 range. */
static int parse_label(const uint8_t *p, size_t n, int64_t *out, fq_err *err)
{
    size_t i = 0, e = n;
    while (i < e && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    while (e > i && (p[e - 1] == ' ' || p[e - 1] == '\t' || p[e - 1] == '\n' || p[e - 1] == '\r'))
        e--;
    int neg = 0;
    if (i < e && (p[i] == '-' || p[i] == '+')) {
        neg = p[i] == '-';
        i++;
    }
    if (i == e)
        return fq_set_err(err, FQ_E_DECODE, "label member is not a decimal integer");
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (; i < e; i++) {
        if (p[i] < '0' || p[i] > '9')
            return fq_set_err(err, FQ_E_DECODE, "label member is not a decimal integer");
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (limit - d) / 10)
            return fq_set_err(err, FQ_E_DECODE, "label member is outside the int64 range");
        v = v * 10 + d;
    }
    /* -2^63 has no positive int64 counterpart: negate in unsigned arithmetic */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return FQ_OK;
}

/* A remote shard: one borrowed range covering the image and label members (no copy). */
static int tar_read_spans(const fq_tarset *s, int64_t idx, uint8_t **holder, const uint8_t **data, size_t *len,
                          uint8_t *extra, uint64_t *nread, fq_err *err)
{
    uint64_t io = s->c.img_off[idx], isz = s->c.img_size[idx], lo = io, hi = io + isz;
    int lab = s->c.with_label && s->c.lab_off[idx] != FQ_TAR_NONE;
    if (s->c.with_label && !lab)
        return fq_set_err(err, FQ_E_DECODE, "the sample has no label member");
    if (lab && s->c.lab_size[idx] > 64)
        return fq_set_err(err, FQ_E_DECODE, "label member too long (%llu bytes)", (unsigned long long)s->c.lab_size[idx]);
    if (lab) {
        uint64_t l0 = s->c.lab_off[idx], l1 = l0 + s->c.lab_size[idx];
        lo = l0 < lo ? l0 : lo;
        hi = l1 > hi ? l1 : hi;
    }
    const uint8_t *p;
    uint64_t got;
    int rc = fq_spans_get(s->c.spans, holder, idx, s->c.shard[idx], lo, hi - lo, &p, &got, err);
    if (rc != FQ_OK)
        return rc;
    if (lab) {
        int64_t v = 0;
        if ((rc = parse_label(p + (s->c.lab_off[idx] - lo), (size_t)s->c.lab_size[idx], &v, err)) != FQ_OK)
            return rc;
        memcpy(extra, &v, sizeof v);
    }
    *nread = got;
    *data = p + (io - lo);
    *len = (size_t)isz;
    return FQ_OK;
}

int fq_tar_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                uint8_t *extra, uint64_t *nread, fq_err *err)
{
    const fq_tarset *s = ctx;
    *nread = 0;
    if (idx < 0 || idx >= s->c.n)
        return fq_set_err(err, FQ_E_INVALID, "sample index %lld out of range", (long long)idx);
    if (s->c.error[idx])
        return fq_set_err(err, FQ_E_IO, "%s", s->c.error[idx]);
    const char *path = s->c.paths[s->c.shard[idx]];
    uint64_t isz = s->c.img_size[idx];
    if (s->c.spans)
        return tar_read_spans(s, idx, buf, data, len, extra, nread, err);
    if (isz > (uint64_t)SIZE_MAX / 2)
        return fq_set_err(err, FQ_E_IO, "member too large (%llu bytes)", (unsigned long long)isz);
    if (isz > *cap) {
        size_t nc = (size_t)isz + (size_t)isz / 4 + 4096;
        uint8_t *nb = realloc(*buf, nc);
        if (!nb)
            return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes for a member", nc);
        *buf = nb;
        *cap = nc;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fq_io_errno(err, errno, "cannot open", path);
    int rc = read_member(fd, path, *buf, s->c.img_off[idx], isz, err);
    if (rc == FQ_OK && s->c.with_label) {
        uint8_t lab[64];
        int64_t v = 0;
        if (s->c.lab_off[idx] == FQ_TAR_NONE)
            rc = fq_set_err(err, FQ_E_DECODE, "the sample has no label member");
        else if (s->c.lab_size[idx] > sizeof lab)
            rc = fq_set_err(err, FQ_E_DECODE, "label member too long (%llu bytes)",
                            (unsigned long long)s->c.lab_size[idx]);
        else if ((rc = read_member(fd, path, lab, s->c.lab_off[idx], s->c.lab_size[idx], err)) == FQ_OK &&
                 (rc = parse_label(lab, (size_t)s->c.lab_size[idx], &v, err)) == FQ_OK)
            memcpy(extra, &v, sizeof v);
    }
    if (close(fd) != 0 && rc == FQ_OK)
        rc = fq_io_errno(err, errno, "close failed on", path);
    if (rc != FQ_OK)
        return rc;
    *nread = isz + (s->c.with_label ? s->c.lab_size[idx] : 0);
    *data = *buf;
    *len = (size_t)isz;
    return FQ_OK;
}
