/* fq_tar.h - tar shards (WebDataset layout), read natively.
 *
 * fq_tar_scan() walks a tar archive's 512-byte headers (ustar, POSIX pax 'x'
 * extended headers for path/size, GNU 'L' long names; 'g' global headers
 * ignored), verifies every header checksum and lists the regular-file members
 * with their data offset and size.  A member whose name is absolute or has a
 * '..' component is listed with FQ_TAR_UNSAFE_NAME (never read).  A framing
 * error (bad checksum, truncated header or member data, bad size field) ends
 * the walk: the members before it are listed and the error comes back in
 * `tail`.  Two zero blocks (or one at EOF) end the archive.
 *
 * fq_tar_read() is an fq_sample_reader read function over an index of samples
 * (image member + optional label member of one shard), built by the caller
 * from the scan.  The label member must hold a decimal integer (WebDataset's
 * .cls), surrounding whitespace allowed.
 *
 * Thread safety: an fq_tarset is immutable after creation; fq_tar_read() may
 * run concurrently from any number of threads, each with its own buffer.  The
 * config's arrays and strings are borrowed and must outlive the fq_tarset.
 */
#ifndef FQ_TAR_H
#define FQ_TAR_H

#include "core/fq_common.h"
#include "records/fq_spans.h"
#include "task/fq_sample_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FQ_TAR_UNSAFE_NAME 1
#define FQ_TAR_NONE UINT64_MAX /* no label member */

/* On FQ_OK: *offsets, *sizes, *flags (malloc'd) hold *n members; *names
 * (malloc'd) holds their names, each NUL-terminated, in order.  Caller frees
 * all four with free(). */
int fq_tar_scan(const char *path, uint64_t **offsets, uint64_t **sizes, uint8_t **flags, char **names,
                size_t *names_len, int64_t *n, fq_err *tail, fq_err *err);

typedef struct fq_tarset_config {
    int n_shards;
    const char *const *paths;
    int64_t n;                   /* samples */
    const int32_t *shard;        /* n */
    const uint64_t *img_off, *img_size;
    const uint64_t *lab_off, *lab_size; /* lab_off[i] == FQ_TAR_NONE: no label */
    const int64_t *number;       /* sample number inside its shard */
    const char *const *key;      /* sample key (for messages) */
    const char *const *error;    /* NULL, or why this sample cannot be read */
    int with_label;              /* write an int64 label into extra */
    fq_spans *spans;             /* NULL: read the shard files; else borrow each sample's bytes
                                  * (image and label members, one covering range) from it:
                                  * paths are then URLs, used in messages only */
} fq_tarset_config;

typedef struct fq_tarset fq_tarset;

/* *reader: the fq_sample_reader to hand to an image task (owned by the fq_tarset;
 * one output after the image, the int64 label, when with_label). */
int fq_tarset_create(const fq_tarset_config *cfg, fq_tarset **out, const fq_sample_reader **reader, fq_err *err);
void fq_tarset_free(fq_tarset *s);
int fq_tar_read(void *ctx, int64_t idx, uint8_t **buf, size_t *cap, const uint8_t **data, size_t *len,
                uint8_t *extra, uint64_t *nread, fq_err *err);
void fq_tar_describe(void *ctx, int64_t idx, char *out, size_t len);

#ifdef __cplusplus
}
#endif
#endif
