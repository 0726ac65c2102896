/* fq_crc32c.h - CRC-32C (Castagnoli), as used by the TFRecord framing.
 *
 * Software slicing-by-8 tables, or the SSE4.2 crc32 instruction when the CPU has
 * it (checked once at run time).  Thread-safe: the tables are built by the first
 * call under pthread_once and only read afterwards.
 */
#ifndef FQ_CRC32C_H
#define FQ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of data[0..len). */
uint32_t fq_crc32c(const void *data, size_t len);

/* TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
static inline uint32_t fq_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + UINT32_C(0xa282ead8);
}

#ifdef __cplusplus
}
#endif
#endif
