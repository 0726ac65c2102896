/* fq_tfr_frame.h - the TFRecord framing, written once: a shard opened for walks (a
 * file, an in-memory buffer, or a GZIP / ZLIB file inflated as a stream), the header
 * check of a record (length CRC, the record within the shard), its data, the framing
 * walk that both fq_tfr_scan (the index) and fq_tfr_count (the stream reader) run,
 * and the checks of a whole frame read at once.  Private to csrc/records/.
 *
 * Framing of one record (all little-endian):
 *     uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
 *
 * Thread safety: an fq_tfr_src is used by one thread at a time (the stream reader
 * keeps its cursors under its mutex); the other functions are reentrant.
 */
#ifndef FQ_TFR_FRAME_H
#define FQ_TFR_FRAME_H

#include <stdint.h>

#include <zlib.h>

#include "core/fq_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One shard opened for framing walks: a file (fd, size), a buffer, or a
 * compressed file inflated incrementally (gz: zlib window bits, 31 for GZIP,
 * 15 for ZLIB; only forward reads: pos >= upos). */
#define FQ_TFR_GZ_IN 65536
typedef struct fq_tfr_src {
    const char *path;
    const uint8_t *mem;
    int fd;
    uint64_t size; /* UINT64_MAX for a compressed shard (unknown) */
    int gz;
    z_stream zs;
    int zinit, in_eof, ended;
    uint64_t in_off, upos;
    uint8_t *in;
    char zerr[96]; /* "" or why the compressed stream stopped early */
} fq_tfr_src;

/* Open a shard: a buffer (mem != NULL, mem_len bytes), else the regular file path
 * (gz: 0, or 31 / 15 to inflate a GZIP / ZLIB file as a stream).  FQ_E_IO / FQ_E_NOMEM. */
int fq_tfr_src_open(fq_tfr_src *s, const char *path, const uint8_t *mem, size_t mem_len, int gz, fq_err *err);
/* Close it (idempotent); FQ_E_IO if close() failed. */
int fq_tfr_src_close(fq_tfr_src *s, fq_err *err);

/* The header of the record at pos: FQ_OK with *len (length CRC verified and the
 * record within the shard); FQ_E_IO for a framing error (message names the offset;
 * *framing = 1); an I/O error otherwise (*framing = 0). */
int fq_tfr_src_header(fq_tfr_src *s, uint64_t pos, uint64_t *len, int *framing, fq_err *err);
/* Compressed shard: skip the data + CRC of the record at pos (a count walk).  A
 * truncated or corrupt stream is a framing error in *tail (FQ_E_IO returned). */
int fq_tfr_src_skip_data(fq_tfr_src *s, uint64_t pos, uint64_t len, fq_err *tail, fq_err *err);
/* Data + data CRC (len + 4 bytes) of the record whose header is at pos into *buf
 * (grown as needed); *nread += bytes read from storage. */
int fq_tfr_src_data(fq_tfr_src *s, uint64_t pos, uint64_t len, uint8_t **buf, size_t *cap, uint64_t *nread,
                    fq_err *err);

/* Called by fq_tfr_walk for each record (header at pos, len data bytes); a code
 * other than FQ_OK ends the walk with that error (err filled). */
typedef int (*fq_tfr_each_fn)(void *ctx, uint64_t pos, uint64_t len, fq_err *err);

/* THE framing walk of one shard (fq_tfr_src_open's arguments): every record's header
 * is checked and handed to each(); the data is skipped (its CRC is checked when the
 * record is read).  A framing error ends the walk early: tail->code != FQ_OK with the
 * message naming the offset, FQ_OK returned.  Errors: I/O, or each()'s. */
int fq_tfr_walk(const char *path, const uint8_t *mem, size_t mem_len, int gz, fq_tfr_each_fn each, void *ctx,
                fq_err *tail, fq_err *err);

/* 1 if the data CRC that follows data[len] matches. */
int fq_tfr_data_crc_ok(const uint8_t *data, uint64_t len);

/* A whole frame read at once (rec: header + data + data CRC, dlen data bytes, from
 * offset off): its length field is dlen and both CRCs match.  FQ_OK or FQ_E_IO. */
int fq_tfr_check_frame(const uint8_t *rec, uint64_t off, uint64_t dlen, fq_err *err);

#ifdef __cplusplus
}
#endif
#endif
