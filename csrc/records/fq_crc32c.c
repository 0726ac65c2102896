/* fq_crc32c.c - see fq_crc32c.h. */
#include "records/fq_crc32c.h"

#include "core/fq_cpu.h"

#include <pthread.h>
#include <string.h>

#define POLY UINT32_C(0x82f63b78) /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++)
            table[s][i] = (table[s - 1][i] >> 8) ^ table[0][table[s - 1][i] & 0xff];
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len && ((uintptr_t)p & 7u)) {
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc; /* little-endian hosts only (x86-64, aarch64) */
        crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
              table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
              table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* checks nothing: fq_crc32c calls it after fq_cpu_has(FQ_CPU_SSE42) */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t fq_crc32c(const void *data, size_t len)
{
    uint32_t crc = UINT32_C(0xffffffff);
#if defined(__x86_64__) && defined(__GNUC__)
    if (fq_cpu_has(FQ_CPU_SSE42))
        return ~crc_hw(crc, (const uint8_t *)data, len);
#endif
    if (pthread_once(&table_once, init_tables) != 0) { /* only on invalid arguments: bit by bit then */
        const uint8_t *p = (const uint8_t *)data;
        for (size_t i = 0; i < len; i++) {
            crc ^= p[i];
            for (int k = 0; k < 8; k++)
                crc = (crc >> 1) ^ (POLY & (0u - (crc & 1u)));
        }
        return ~crc;
    }
    return ~crc_sw(crc, (const uint8_t *)data, len);
}
