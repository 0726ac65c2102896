/* fuzz_records.c - mutation fuzzing of the native dataset readers, meant to run
 * under ASan+UBSan (csrc/tests/run_records_fuzz.sh):
 *   - fq_tfr_parse_example on mutated tf.train.Example bytes,
 *   - fq_tfr_scan (file and memory) + fq_tfr_read on mutated TFRecord shards,
 *   - fq_tar_scan + fq_tar_read on mutated tar shards (seed: argv[1], any tar).
 * Checks: no sanitizer report, every returned pointer/offset inside its input,
 * and every record the reader hands on passed both CRCs.
 * Usage: fuzz_records <seed.tar> [iterations]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "records/fq_crc32c.h"
#include "records/fq_tar.h"
#include "records/fq_tfrecord.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

#include "fq_check.h"
#define CHECK FQ_CHECK_ABORT

/* protobuf writer helpers */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}
static size_t put_ld(uint8_t *p, int field, const uint8_t *d, size_t n)
{
    size_t k = put_varint(p, (uint64_t)field << 3 | 2);
    k += put_varint(p + k, n);
    memcpy(p + k, d, n);
    return k + n;
}

/* Example{features{feature{"image/encoded": bytes}, {"label": int64 7}, {"box": float 2}}} */
static size_t make_example(uint8_t *out)
{
    uint8_t a[256], b[256], c[512], feats[1024];
    size_t nf = 0, n, m;
    /* image */
    n = put_ld(a, 1, (const uint8_t *)"\xff\xd8jpegdata\xff\xd9", 13);     /* BytesList.value */
    m = put_ld(b, 1, a, n);                                                 /* Feature.bytes_list */
    n = put_ld(c, 1, (const uint8_t *)"image/encoded", 13);
    n += put_ld(c + n, 2, b, m);
    nf += put_ld(feats + nf, 1, c, n);
    /* label: packed int64 */
    uint8_t v[16];
    size_t nv = put_varint(v, 7);
    n = put_ld(a, 1, v, nv);
    m = put_ld(b, 3, a, n);
    n = put_ld(c, 1, (const uint8_t *)"label", 5);
    n += put_ld(c + n, 2, b, m);
    nf += put_ld(feats + nf, 1, c, n);
    /* box: packed floats */
    float f[2] = {0.25f, -3.5f};
    n = put_ld(a, 1, (const uint8_t *)f, 8);
    m = put_ld(b, 2, a, n);
    n = put_ld(c, 1, (const uint8_t *)"box", 3);
    n += put_ld(c + n, 2, b, m);
    nf += put_ld(feats + nf, 1, c, n);
    return put_ld(out, 1, feats, nf);
}

static size_t mutate(uint8_t *b, size_t n, size_t cap)
{
    int k = 1 + (int)(rnd() % 4);
    for (int i = 0; i < k && n; i++) {
        size_t pos = rnd() % n;
        switch (rnd() % 4) {
        case 0:
            b[pos] ^= (uint8_t)(1 + rnd() % 255);
            break;
        case 1:
            n = pos;
            break;
        case 2:
            if (n + 4 <= cap) {
                memmove(b + pos + 4, b + pos, n - pos);
                for (int j = 0; j < 4; j++)
                    b[pos + j] = (uint8_t)rnd();
                n += 4;
            }
            break;
        default: {
            size_t d = 1 + rnd() % 4;
            if (pos + d > n)
                d = n - pos;
            memmove(b + pos, b + pos + d, n - pos - d);
            n -= d;
        }
        }
    }
    return n;
}

static const fq_tfr_feature FEATS[3] = {
    {"image/encoded", 13, FQ_TFR_BYTES, 1, 0}, {"label", 5, FQ_TFR_INT64, 1, 0}, {"box", 3, FQ_TFR_FLOAT, 2, 0}};
/* the same keys as variable-length lists (box: at most 1 value, the rest truncated) */
static const fq_tfr_feature FEATS_VL[3] = {{"image/encoded", 13, FQ_TFR_BYTES, 1, 0},
                                           {"label", 5, FQ_TFR_INT64, 3, FQ_TFR_VARLEN},
                                           {"box", 3, FQ_TFR_FLOAT, 1, FQ_TFR_VARLEN | FQ_TFR_TRUNCATE}};

static void fuzz_parse(const uint8_t *seed, size_t sn, int iters)
{
    uint8_t *b = malloc(sn + 64);
    int ok = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(b, seed, sn);
        size_t n = it ? mutate(b, sn, sn + 64) : sn;
        uint8_t *exact = malloc(n ? n : 1); /* exact-size copy: ASan catches any overread */
        memcpy(exact, b, n);
        fq_tfr_value vals[3];
        int64_t lab = 0;
        float box[2];
        void *dst[3] = {NULL, &lab, box};
        fq_err err;
        if (fq_tfr_parse_example(exact, n, FEATS, 3, vals, dst, &err) == FQ_OK) {
            ok++;
            CHECK(vals[0].ptr >= exact && vals[0].ptr + vals[0].len <= exact + n);
        }
        uint8_t vl_lab[8 + 3 * 8], vl_box[8 + 4]; /* exact sizes: ASan catches an overrun */
        void *vdst[3] = {NULL, vl_lab, vl_box};
        if (fq_tfr_parse_example(exact, n, FEATS_VL, 3, vals, vdst, &err) == FQ_OK) {
            int64_t nl, nb;
            memcpy(&nl, vl_lab, 8);
            memcpy(&nb, vl_box, 8);
            CHECK(nl >= 0 && nl <= 3 && nb >= 0 && (size_t)nb <= n);
        }
        free(exact);
    }
    free(b);
    printf("parse: %d iterations, %d parsed\n", iters, ok);
}

static size_t frame(uint8_t *out, const uint8_t *d, size_t n)
{
    uint8_t h[8];
    for (int i = 0; i < 8; i++)
        h[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t c1 = fq_crc32c_mask(fq_crc32c(h, 8)), c2 = fq_crc32c_mask(fq_crc32c(d, n));
    memcpy(out, h, 8);
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(c1 >> (8 * i));
    memcpy(out + 12, d, n);
    for (int i = 0; i < 4; i++)
        out[12 + n + i] = (uint8_t)(c2 >> (8 * i));
    return n + 16;
}

static void write_file(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(fwrite(d, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

static void fuzz_tfrecord(const uint8_t *ex, size_t en, const char *tmp, int iters)
{
    uint8_t seed[4096];
    size_t sn = 0;
    for (int r = 0; r < 5; r++)
        sn += frame(seed + sn, ex, en);
    uint8_t *b = malloc(sizeof seed + 64);
    long good = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(b, seed, sn);
        size_t n = it ? mutate(b, sn, sn + 64) : sn;
        write_file(tmp, b, n);
        for (int use_mem = 0; use_mem < 2; use_mem++) {
            uint64_t *offs, *lens;
            int64_t cnt;
            fq_err tail, err;
            CHECK(fq_tfr_scan(tmp, use_mem ? b : NULL, n, &offs, &lens, &cnt, &tail, &err) == FQ_OK);
            for (int64_t i = 0; i < cnt; i++)
                CHECK(offs[i] + 16 + lens[i] <= n);
            if (cnt > 0) {
                int32_t *shard = calloc((size_t)cnt, sizeof *shard);
                int64_t *num = malloc((size_t)cnt * sizeof *num);
                CHECK(shard && num);
                for (int64_t i = 0; i < cnt; i++)
                    num[i] = i;
                const char *paths[1] = {tmp}, *tails[1] = {""};
                const uint8_t *mem[1] = {b};
                size_t mem_len[1] = {n};
                size_t xoff[3] = {0, 0, 8};
                fq_tfr_config cfg = {1, paths, use_mem ? mem : NULL, mem_len, tails, cnt, shard, offs, lens, num,
                                     FEATS, 3, 0, xoff, NULL};
                fq_tfr *r;
                const fq_sample_reader *sr;
                CHECK(fq_tfr_create(&cfg, &r, &sr, &err) == FQ_OK);
                CHECK(sr->reader == r && sr->n_extra == 2 && sr->extra_sizes[0] == 8 && sr->extra_sizes[1] == 8);
                uint8_t *buf = NULL, extra[16];
                size_t cap = 0;
                for (int64_t i = 0; i < cnt; i++) {
                    const uint8_t *data;
                    size_t len;
                    uint64_t nread;
                    if (sr->read(sr->reader, i, &buf, &cap, &data, &len, extra, &nread, &err) == FQ_OK) {
                        good++;
                        /* only records whose bytes still match the seed's CRCs get here */
                        const uint8_t *base = use_mem ? b + offs[i] : buf;
                        CHECK(fq_crc32c_mask(fq_crc32c(base + 12, (size_t)lens[i])) ==
                              (uint32_t)(base[12 + lens[i]] | base[13 + lens[i]] << 8 | base[14 + lens[i]] << 16 |
                                         (uint32_t)base[15 + lens[i]] << 24));
                    }
                }
                free(buf);
                fq_tfr_free(r);
                free(shard);
                free(num);
            }
            free(offs);
            free(lens);
        }
    }
    free(b);
    printf("tfrecord: %d iterations, %ld records read\n", iters, good);
}

static void fuzz_tar(const char *seed_path, const char *tmp, int iters)
{
    FILE *f = fopen(seed_path, "rb");
    CHECK(f);
    static uint8_t seed[1 << 20];
    size_t sn = fread(seed, 1, sizeof seed, f);
    CHECK(fclose(f) == 0 && sn > 0);
    uint8_t *b = malloc(sn + 64);
    long members = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(b, seed, sn);
        size_t n = it ? mutate(b, sn, sn + 64) : sn;
        if (it % 3 == 1) /* aim at the headers too: flips in the first blocks */
            b[rnd() % (n < 1536 ? (n ? n : 1) : 1536)] ^= (uint8_t)(1 + rnd() % 255);
        write_file(tmp, b, n);
        uint64_t *offs, *sizes;
        uint8_t *flags;
        char *names;
        size_t nl;
        int64_t cnt;
        fq_err tail, err;
        CHECK(fq_tar_scan(tmp, &offs, &sizes, &flags, &names, &nl, &cnt, &tail, &err) == FQ_OK);
        for (int64_t i = 0; i < cnt; i++)
            CHECK(offs[i] + sizes[i] <= n);
        if (cnt > 0) {
            int32_t *shard = calloc((size_t)cnt, sizeof *shard);
            int64_t *num = malloc((size_t)cnt * sizeof *num);
            uint64_t *lo = malloc((size_t)cnt * sizeof *lo), *ls = calloc((size_t)cnt, sizeof *ls);
            const char **keys = malloc((size_t)cnt * sizeof *keys), **errs = calloc((size_t)cnt, sizeof *errs);
            CHECK(shard && num && lo && ls && keys && errs);
            for (int64_t i = 0; i < cnt; i++) {
                num[i] = i;
                lo[i] = offs[i]; /* the member itself as the "label": exercises parse_label */
                ls[i] = sizes[i];
                keys[i] = "k";
            }
            const char *paths[1] = {tmp};
            fq_tarset_config cfg = {1, paths, cnt, shard, offs, sizes, lo, ls, num, keys, errs, 1, NULL};
            fq_tarset *s;
            const fq_sample_reader *sr;
            CHECK(fq_tarset_create(&cfg, &s, &sr, &err) == FQ_OK);
            CHECK(sr->reader == s && sr->n_extra == 1 && sr->extra_sizes[0] == 8);
            uint8_t *buf = NULL, extra[8];
            size_t cap = 0;
            for (int64_t i = 0; i < cnt; i++) {
                const uint8_t *data;
                size_t len;
                uint64_t nread;
                char where[256];
                (void)sr->read(sr->reader, i, &buf, &cap, &data, &len, extra, &nread, &err);
                sr->describe(sr->reader, i, where, sizeof where);
            }
            members += cnt;
            free(buf);
            fq_tarset_free(s);
            free(shard);
            free(num);
            free(lo);
            free(ls);
            free(keys);
            free(errs);
        }
        free(offs);
        free(sizes);
        free(flags);
        free(names);
    }
    free(b);
    printf("tar: %d iterations, %ld members listed\n", iters, members);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s seed.tar [iterations]\n", argv[0]);
        return 2;
    }
    int iters = argc > 2 ? atoi(argv[2]) : 3000;
    char tmp[] = "/tmp/fq_fuzz_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    CHECK(close(fd) == 0);
    uint8_t ex[2048];
    size_t en = make_example(ex);
    fq_tfr_value vals[3];
    int64_t lab = 0;
    float box[2] = {0, 0};
    void *dst[3] = {NULL, &lab, box};
    fq_err err;
    CHECK(fq_tfr_parse_example(ex, en, FEATS, 3, vals, dst, &err) == FQ_OK);
    CHECK(lab == 7 && box[0] == 0.25f && box[1] == -3.5f && vals[0].len == 13);
    uint8_t vl_lab[8 + 3 * 8], vl_box[8 + 4];
    void *vdst[3] = {NULL, vl_lab, vl_box};
    CHECK(fq_tfr_parse_example(ex, en, FEATS_VL, 3, vals, vdst, &err) == FQ_OK);
    int64_t nl, nb, l0;
    float b0;
    memcpy(&nl, vl_lab, 8), memcpy(&l0, vl_lab + 8, 8), memcpy(&nb, vl_box, 8), memcpy(&b0, vl_box + 8, 4);
    CHECK(nl == 1 && l0 == 7 && nb == 2 && b0 == 0.25f); /* box: 2 values, 1 kept */
    fuzz_parse(ex, en, iters * 10);
    fuzz_tfrecord(ex, en, tmp, iters);
    fuzz_tar(argv[1], tmp, iters);
    CHECK(unlink(tmp) == 0);
    printf("OK\n");
    return 0;
}
