/* fq_tfr_frame.c - see records/internal/fq_tfr_frame.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/internal/fq_tfr_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fq_io.h"
#include "records/fq_crc32c.h"

int fq_tfr_src_open(fq_tfr_src *s, const char *path, const uint8_t *mem, size_t mem_len, int gz, fq_err *err)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->mem = mem;
    s->fd = -1;
    s->size = mem_len;
    if (mem)
        return FQ_OK;
    uint64_t size;
    int rc = fq_open_regular(path, "TFRecord shard", &s->fd, &size, err);
    if (rc != FQ_OK)
        return rc;
    s->size = size;
#ifdef POSIX_FADV_SEQUENTIAL
    (void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* advisory only */
#endif
    if (gz) {
        s->gz = gz;
        s->size = UINT64_MAX;
        s->in = malloc(FQ_TFR_GZ_IN);
        if (!s->in || inflateInit2(&s->zs, gz) != Z_OK) {
            free(s->in);
            s->in = NULL;
            (void)close(s->fd);
            s->fd = -1;
            return fq_set_err(err, FQ_E_NOMEM, "cannot start inflating '%s'", path);
        }
        s->zinit = 1;
    }
    return FQ_OK;
}

int fq_tfr_src_close(fq_tfr_src *s, fq_err *err)
{
    int rc = FQ_OK;
    if (s->zinit)
        (void)inflateEnd(&s->zs);
    s->zinit = 0;
    free(s->in);
    s->in = NULL;
    if (s->fd >= 0 && close(s->fd) != 0)
        rc = fq_io_errno(err, errno, "close failed on", s->path);
    s->fd = -1;
    return rc;
}

/* When the compressed input is used up (and the file is not at its end), read the
 * next FQ_TFR_GZ_IN bytes of it.  Errors: I/O only. */
static int gz_refill(fq_tfr_src *s, fq_err *err)
{
    if (s->zs.avail_in != 0 || s->in_eof)
        return FQ_OK;
    ssize_t r;
    do {
        r = pread(s->fd, s->in, FQ_TFR_GZ_IN, (off_t)s->in_off);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return fq_io_errno(err, errno, "read failed in TFRecord shard", s->path);
    s->in_off += (uint64_t)r;
    s->in_eof = r == 0;
    s->zs.next_in = s->in;
    s->zs.avail_in = (uInt)r;
    return FQ_OK;
}

/* Inflate the next n bytes into out (NULL: discard).  *got < n at the end of
 * the data: s->ended for a clean end, s->zerr set for a truncated or corrupt
 * compressed stream.  Errors: I/O only. */
static int gz_next(fq_tfr_src *s, uint8_t *out, size_t n, size_t *got, fq_err *err)
{
    uint8_t scratch[16384];
    size_t done = 0;
    while (done < n && !s->ended && !s->zerr[0]) {
        if (gz_refill(s, err) != FQ_OK)
            return err->code;
        if (s->zs.avail_in == 0 && s->in_eof) {
            snprintf(s->zerr, sizeof s->zerr, "truncated %s stream", s->gz == 31 ? "GZIP" : "ZLIB");
            break;
        }
        size_t want = n - done;
        uint8_t *dst = out ? out + done : scratch;
        if (!out && want > sizeof scratch)
            want = sizeof scratch;
        if (want > (1u << 30))
            want = 1u << 30;
        s->zs.next_out = dst;
        s->zs.avail_out = (uInt)want;
        int zr = inflate(&s->zs, Z_NO_FLUSH);
        size_t made = want - s->zs.avail_out;
        done += made;
        s->upos += made;
        if (zr == Z_STREAM_END) {
            if (s->gz != 31) {
                s->ended = 1;
                break;
            }
            /* GZIP: another member may follow (as TF's reader accepts) */
            if (gz_refill(s, err) != FQ_OK)
                return err->code;
            if (s->zs.avail_in == 0) {
                s->ended = 1;
                break;
            }
            if (inflateReset(&s->zs) != Z_OK) {
                snprintf(s->zerr, sizeof s->zerr, "corrupt GZIP stream (reset failed)");
                break;
            }
        } else if (zr != Z_OK && !(zr == Z_BUF_ERROR && s->zs.avail_in == 0)) {
            snprintf(s->zerr, sizeof s->zerr, "corrupt %s stream: %s", s->gz == 31 ? "GZIP" : "ZLIB",
                     s->zs.msg ? s->zs.msg : "inflate failed");
            break;
        }
    }
    *got = done;
    return FQ_OK;
}

/* n bytes at uncompressed offset pos (>= upos) of a compressed shard. */
static int gz_at(fq_tfr_src *s, uint64_t pos, uint8_t *out, size_t n, size_t *got, fq_err *err)
{
    *got = 0;
    if (pos < s->upos)
        return fq_set_err(err, FQ_E_INVALID, "compressed shard '%s' read backwards", s->path);
    while (s->upos < pos) {
        uint64_t skip = pos - s->upos;
        size_t g;
        int rc = gz_next(s, NULL, skip > (1u << 30) ? (1u << 30) : (size_t)skip, &g, err);
        if (rc != FQ_OK)
            return rc;
        if (g == 0)
            return FQ_OK;
    }
    return gz_next(s, out, n, got, err);
}

/* The header of the record at pos: FQ_OK with *len (length CRC verified and
 * the record within the shard); FQ_E_IO for a framing error (message names the
 * offset); an I/O error otherwise.  *framing: the error is a framing error. */
int fq_tfr_src_header(fq_tfr_src *s, uint64_t pos, uint64_t *len, int *framing, fq_err *err)
{
    uint8_t h[12];
    *framing = 1;
    if (s->gz) {
        size_t got;
        *framing = 0;
        int rc = gz_at(s, pos, h, 12, &got, err);
        if (rc != FQ_OK)
            return rc;
        *framing = 1;
        if (got < 12) {
            if (s->zerr[0])
                return fq_set_err(err, FQ_E_IO, "%s (at uncompressed offset %llu)", s->zerr, (unsigned long long)pos);
            return fq_set_err(err, FQ_E_IO, "truncated shard: a %zu-byte partial record header at offset %llu", got,
                              (unsigned long long)pos);
        }
    } else if (pos > s->size || s->size - pos < 12) {
        return fq_set_err(err, FQ_E_IO, "truncated shard: a %llu-byte partial record header at offset %llu",
                          (unsigned long long)(pos > s->size ? 0 : s->size - pos), (unsigned long long)pos);
    } else if (s->mem) {
        memcpy(h, s->mem + pos, 12);
    } else {
        size_t got;
        if (fq_pread_full(s->fd, h, 12, pos, &got) != 0) {
            *framing = 0;
            return fq_io_errno(err, errno, "read failed in TFRecord shard", s->path);
        }
        if (got < 12)
            return fq_set_err(err, FQ_E_IO, "truncated shard: the shard shrank (offset %llu)",
                              (unsigned long long)pos);
    }
    uint64_t l = fq_le64(h);
    if (fq_crc32c_mask(fq_crc32c(h, 8)) != fq_le32(h + 8))
        return fq_set_err(err, FQ_E_IO, "length CRC mismatch at offset %llu (corrupt length field)",
                          (unsigned long long)pos);
    if (l > s->size - pos - 12 || s->size - pos - 12 - l < 4)
        return fq_set_err(err, FQ_E_IO,
                          "truncated shard: the record at offset %llu has %llu data bytes but only %llu bytes follow "
                          "its header (need %llu with the data CRC)",
                          (unsigned long long)pos, (unsigned long long)l, (unsigned long long)(s->size - pos - 12),
                          (unsigned long long)l + 4);
    if (l > (uint64_t)SIZE_MAX - 64)
        return fq_set_err(err, FQ_E_IO, "record length %llu too large", (unsigned long long)l);
    *len = l;
    return FQ_OK;
}

/* Compressed shard: skip the record's data + CRC (count walk). */
int fq_tfr_src_skip_data(fq_tfr_src *s, uint64_t pos, uint64_t len, fq_err *tail, fq_err *err)
{
    uint64_t end = pos + 12 + len + 4;
    while (s->upos < end) {
        uint64_t left = end - s->upos;
        size_t g;
        int rc = gz_next(s, NULL, left > (1u << 30) ? (1u << 30) : (size_t)left, &g, err);
        if (rc != FQ_OK)
            return rc;
        if (g == 0) {
            if (s->zerr[0])
                fq_set_err(tail, FQ_E_IO, "%s (inside the record at uncompressed offset %llu)", s->zerr,
                           (unsigned long long)pos);
            else
                fq_set_err(tail, FQ_E_IO,
                           "truncated shard: the record at offset %llu has %llu data bytes but the shard ends first",
                           (unsigned long long)pos, (unsigned long long)len);
            return FQ_E_IO;
        }
    }
    return FQ_OK;
}

/* Data + data CRC (len + 4 bytes) of the record whose header is at pos into
 * *buf (grown as needed). */
int fq_tfr_src_data(fq_tfr_src *s, uint64_t pos, uint64_t len, uint8_t **buf, size_t *cap, uint64_t *nread,
                    fq_err *err)
{
    size_t need = (size_t)len + 4;
    if (need > *cap) {
        size_t nc = need + need / 4 + 4096;
        uint8_t *nb = realloc(*buf, nc);
        if (!nb)
            return fq_set_err(err, FQ_E_NOMEM, "cannot allocate %zu bytes for a record", nc);
        *buf = nb;
        *cap = nc;
    }
    if (s->mem) {
        memcpy(*buf, s->mem + pos + 12, need);
        return FQ_OK;
    }
    size_t got;
    if (s->gz) {
        int rc = gz_at(s, pos + 12, *buf, need, &got, err);
        if (rc != FQ_OK)
            return rc;
        *nread += got + 12;
        if (got < need)
            return fq_set_err(err, FQ_E_IO, "%s in the record at uncompressed offset %llu",
                              s->zerr[0] ? s->zerr : "the shard ends", (unsigned long long)pos);
        return FQ_OK;
    }
    if (fq_pread_full(s->fd, *buf, need, pos + 12, &got) != 0)
        return fq_io_errno(err, errno, "read failed in TFRecord shard", s->path);
    *nread += got + 12;
    if (got < need)
        return fq_set_err(err, FQ_E_IO, "truncated shard: the shard shrank (record at offset %llu)",
                          (unsigned long long)pos);
    return FQ_OK;
}

int fq_tfr_walk(const char *path, const uint8_t *mem, size_t mem_len, int gz, fq_tfr_each_fn each, void *ctx,
                fq_err *tail, fq_err *err)
{
    fq_clear_err(tail);
    fq_tfr_src s;
    int rc = fq_tfr_src_open(&s, path, mem, mem_len, gz, err);
    if (rc != FQ_OK)
        return rc;
    uint64_t pos = 0;
    while (pos < s.size) {
        uint64_t len;
        fq_err e;
        int framing;
        fq_clear_err(&e);
        int hr = fq_tfr_src_header(&s, pos, &len, &framing, &e);
        if (hr != FQ_OK && framing) {
            if (s.gz && s.ended && !s.zerr[0] && s.upos == pos)
                break; /* clean end of the compressed data exactly at a record boundary */
            *tail = e;
            break;
        }
        if (hr != FQ_OK) {
            *err = e;
            rc = hr;
            break;
        }
        if (s.gz && fq_tfr_src_skip_data(&s, pos, len, tail, err) != FQ_OK) {
            if (tail->code == FQ_OK)
                rc = err->code;
            break;
        }
        rc = each(ctx, pos, len, err);
        if (rc != FQ_OK)
            break;
        pos += 12 + len + 4;
    }
    fq_err ce;
    if (fq_tfr_src_close(&s, &ce) != FQ_OK && rc == FQ_OK) {
        *err = ce;
        rc = ce.code;
    }
    return rc;
}

int fq_tfr_data_crc_ok(const uint8_t *data, uint64_t len)
{
    return fq_crc32c_mask(fq_crc32c(data, (size_t)len)) == fq_le32(data + len);
}

int fq_tfr_check_frame(const uint8_t *rec, uint64_t off, uint64_t dlen, fq_err *err)
{
    if (fq_le64(rec) != dlen)
        return fq_set_err(err, FQ_E_IO, "length field %llu at offset %llu does not match the index (%llu)",
                          (unsigned long long)fq_le64(rec), (unsigned long long)off, (unsigned long long)dlen);
    if (fq_crc32c_mask(fq_crc32c(rec, 8)) != fq_le32(rec + 8))
        return fq_set_err(err, FQ_E_IO, "length CRC mismatch at offset %llu", (unsigned long long)off);
    if (!fq_tfr_data_crc_ok(rec + 12, dlen))
        return fq_set_err(err, FQ_E_IO, "data CRC mismatch (corrupt record at offset %llu)", (unsigned long long)off);
    return FQ_OK;
}
