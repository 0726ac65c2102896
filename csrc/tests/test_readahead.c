/* test_readahead.c - fq_readahead under TSan / ASan (csrc/tests/run_records_fuzz.sh):
 * consumer threads take the positions of a shuffled order concurrently (plus
 * out-of-order "replacement" reads and early-stopped epochs) while I/O threads read
 * ahead; every sample must come back with its own bytes, whichever path served it.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "records/fq_readahead.h"

#define N 200
#define CONSUMERS 4

#include "fq_check.h"
#define CHECK FQ_CHECK_ABORT

static const fq_sample_reader *reader;
static int64_t orders[2][N]; /* alternating buffers (the read-ahead copies the order anyway) */
static int64_t *order;
static int64_t n_items;
static _Atomic int64_t next_pos;

static size_t size_of(int64_t i)
{
    return 100 + (size_t)(i * 37 % 900);
}

static void *consumer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (;;) {
        int64_t p = atomic_fetch_add(&next_pos, 1);
        if (p >= n_items)
            break;
        int64_t idx = order[p];
        if (rand_r(&seed) % 10 == 0) /* a replacement read of some other sample */
            idx = rand_r(&seed) % N;
        const uint8_t *data;
        size_t len;
        uint64_t nread;
        uint8_t extra[1];
        fq_err err;
        CHECK(reader->read(reader->reader, idx, &buf, &cap, &data, &len, extra, &nread, &err) == FQ_OK);
        CHECK(len == size_of(idx) && nread == len);
        for (size_t k = 0; k < len; k++)
            CHECK(data[k] == (uint8_t)(idx + k));
    }
    free(buf);
    return NULL;
}

/* Two workers asking for the same sample while its slot is still loading (a skip
 * replacement can do that): each must get the bytes in its own buffer.  The slow
 * inner reader keeps position 0 loading while both wait on it. */
static void *same_sample(void *arg)
{
    uint8_t **bufp = arg, *buf = NULL;
    size_t cap = 0, len;
    const uint8_t *data;
    uint64_t nread;
    uint8_t extra[1];
    fq_err err;
    int64_t idx = order[0];
    CHECK(reader->read(reader->reader, idx, &buf, &cap, &data, &len, extra, &nread, &err) == FQ_OK);
    CHECK(len == size_of(idx) && data >= buf && data + len <= buf + cap);
    for (size_t k = 0; k < len; k++)
        CHECK(data[k] == (uint8_t)(idx + k));
    *bufp = buf;
    return NULL;
}

int main(void)
{
    char dir[] = "/tmp/fq_ra_XXXXXX";
    CHECK(mkdtemp(dir));
    static char names[N][64];
    const char *paths[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%s/%d", dir, i);
        paths[i] = names[i];
        FILE *f = fopen(names[i], "wb");
        CHECK(f);
        for (size_t k = 0; k < size_of(i); k++)
            CHECK(fputc((uint8_t)(i + k), f) != EOF);
        CHECK(fclose(f) == 0);
    }
    fq_filereader *fr;
    const fq_sample_reader *inner;
    fq_err err;
    CHECK(fq_filereader_create(paths, N, 0, &fr, &inner, &err) == FQ_OK);
    fq_ra *ra;
    CHECK(fq_ra_create(inner, N, 3, 5, &ra, &reader, &err) == FQ_OK);
    unsigned seed = 1;
    for (int epoch = 0; epoch < 12; epoch++) {
        order = orders[epoch % 2];
        for (int i = 0; i < N; i++)
            order[i] = i;
        for (int i = N - 1; i > 0; i--) {
            int j = rand_r(&seed) % (i + 1);
            int64_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        n_items = epoch % 3 == 2 ? N / 2 : N; /* some epochs use half the order */
        CHECK(reader->set_order(reader->reader, order, n_items, &err) == FQ_OK);
        atomic_store(&next_pos, epoch % 4 == 3 ? n_items / 3 : 0); /* some start mid-way (a resume) */
        pthread_t th[CONSUMERS];
        for (int c = 0; c < CONSUMERS; c++)
            CHECK(pthread_create(&th[c], NULL, consumer, (void *)(uintptr_t)(epoch * 16 + c + 1)) == 0);
        for (int c = 0; c < CONSUMERS; c++)
            CHECK(pthread_join(th[c], NULL) == 0);
    }
    fq_ra_stats st;
    fq_ra_get_stats(ra, &st);
    printf("read-ahead: %lld served by I/O threads, %lld direct\n", (long long)st.ahead, (long long)st.direct);
    CHECK(st.ahead > 0);
    fq_ra_free(ra);
    fq_filereader_free(fr);

    CHECK(fq_filereader_create(paths, N, 200000, &fr, &inner, &err) == FQ_OK); /* 200 ms per read */
    CHECK(fq_ra_create(inner, N, 1, 2, &ra, &reader, &err) == FQ_OK);
    order = orders[0];
    CHECK(reader->set_order(reader->reader, order, 4, &err) == FQ_OK);
    nanosleep(&(struct timespec){0, 20000000}, NULL); /* the I/O thread is now loading position 0 */
    uint8_t *bufs[2] = {NULL, NULL};
    pthread_t tw[2];
    for (int c = 0; c < 2; c++)
        CHECK(pthread_create(&tw[c], NULL, same_sample, &bufs[c]) == 0);
    for (int c = 0; c < 2; c++)
        CHECK(pthread_join(tw[c], NULL) == 0);
    CHECK(bufs[0] != bufs[1]);
    free(bufs[0]);
    free(bufs[1]);
    fq_ra_free(ra);
    fq_filereader_free(fr);
    for (int i = 0; i < N; i++)
        CHECK(unlink(names[i]) == 0);
    CHECK(rmdir(dir) == 0);
    printf("OK\n");
    return 0;
}
