/* test_http_pool.c - a stress test of csrc/net (the HTTP client's pool and channels), built
 * with ASan+UBSan and with TSan by run_sanitizers.sh.
 *
 * A small server in this process (a thread per connection) answers GET /keep/<n> with n
 * bytes on a kept-alive connection and GET /close/<n> with "Connection: close", after a
 * short sleep, so that requests overlap, connections are reused, closed by the server and
 * opened anew (the pool's new-connection slots and the waiters' order).  Two channels share
 * one pool of 16 threads; every result is checked byte for byte and every id comes back once.
 * Then one channel is closed with requests queued and in flight while the other goes on, and
 * the pool is closed with requests in flight: neither may hang, leak or race. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/fq_http.h"
#include "tests/fq_check.h"

#define CHECK FQ_CHECK_ABORT
#define N_MAIN 400
#define N_MORE 120

static int g_listen = -1;
static atomic_int g_stop;

static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 + 3); }

/* one connection: requests until the client closes it or a /close/ answer */
static void *serve_conn(void *arg) {
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    size_t have = 0;
    for (;;) {
        char *end = NULL;
        while ((end = memmem(buf, have, "\r\n\r\n", 4)) == NULL) {
            if (have == sizeof(buf)) goto done;
            ssize_t n = recv(fd, buf + have, sizeof(buf) - have, 0);
            if (n <= 0) goto done;
            have += (size_t)n;
        }
        char kind[16] = {0};
        unsigned long len = 0;
        if (sscanf(buf, "GET /%15[a-z]/%lu", kind, &len) != 2 || len > (1u << 20)) goto done;
        int closes = strcmp(kind, "close") == 0;
        usleep(1000 + (unsigned)(len % 3) * 500);
        char head[256];
        int hn = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %lu\r\nETag: \"e%lu\"\r\n%s\r\n",
                          len, len, closes ? "Connection: close\r\n" : "");
        uint8_t *body = malloc(len + (size_t)hn);
        CHECK(body != NULL);
        memcpy(body, head, (size_t)hn);
        for (size_t i = 0; i < len; i++) body[(size_t)hn + i] = pattern(i);
        size_t off = 0, total = len + (size_t)hn;
        while (off < total) {
            ssize_t n = send(fd, body + off, total - off, MSG_NOSIGNAL);
            if (n <= 0) break;
            off += (size_t)n;
        }
        free(body);
        if (closes || off < total) goto done;
        size_t used = (size_t)(end + 4 - buf);
        memmove(buf, buf + used, have - used);
        have -= used;
    }
done:
    close(fd);
    return NULL;
}

static void *accept_loop(void *arg) {
    (void)arg;
    while (!atomic_load(&g_stop)) {
        int fd = accept(g_listen, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            break; /* the listening socket was shut down */
        }
        pthread_t th;
        pthread_attr_t at;
        CHECK(pthread_attr_init(&at) == 0);
        CHECK(pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0);
        if (pthread_create(&th, &at, serve_conn, (void *)(intptr_t)fd) != 0) close(fd);
        pthread_attr_destroy(&at);
    }
    return NULL;
}

static size_t size_of(uint64_t id) { return (size_t)(id * 997 % 70000); }

static void submit(fq_http_chan *ch, uint64_t id) {
    char target[64];
    int n = snprintf(target, sizeof(target), "/%s/%zu", id % 3 == 0 ? "close" : "keep", size_of(id));
    fq_err err;
    memset(&err, 0, sizeof(err));
    CHECK(fq_http_submit(ch, id, target, (size_t)n, "X-Test: 1\r\n", 11, &err) == FQ_OK);
}

/* Collect results of the channels until want[c] of each came (ids from base[c]). */
static void collect(fq_http_chan **ch, int nch, const int *want, char *seen, uint64_t seen_len) {
    int got[2] = {0, 0};
    for (;;) {
        int done = 1;
        for (int c = 0; c < nch; c++) done &= got[c] >= want[c];
        if (done) return;
        struct pollfd pf[2];
        for (int c = 0; c < nch; c++) pf[c] = (struct pollfd){fq_http_chan_fd(ch[c]), POLLIN, 0};
        int pr = poll(pf, (nfds_t)nch, 20000);
        CHECK(pr > 0); /* 20 s without a result: a hang */
        for (int c = 0; c < nch; c++) {
            for (fq_http_result *r = fq_http_chan_take(ch[c]), *next; r != NULL; r = next) {
                next = r->next;
                CHECK(r->id < seen_len && !seen[r->id]);
                seen[r->id] = 1;
                if (r->code != FQ_OK) fprintf(stderr, "request %llu: %s\n", (unsigned long long)r->id, r->msg);
                CHECK(r->code == FQ_OK && r->status == 200);
                size_t n = size_of(r->id);
                CHECK(r->body_len == n && r->content_length == (int64_t)n);
                for (size_t i = 0; i < n; i++) CHECK(r->body[i] == pattern(i));
                char etag[32];
                snprintf(etag, sizeof(etag), "\"e%zu\"", n);
                CHECK(strcmp(r->etag, etag) == 0);
                fq_http_result_free(r);
                got[c]++;
            }
        }
    }
}

int main(void) {
    g_listen = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(g_listen >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(g_listen, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(listen(g_listen, 128) == 0);
    socklen_t al = sizeof(a);
    CHECK(getsockname(g_listen, (struct sockaddr *)&a, &al) == 0);
    pthread_t acc;
    CHECK(pthread_create(&acc, NULL, accept_loop, NULL) == 0);

    fq_http_pool *pool = NULL;
    fq_err err;
    memset(&err, 0, sizeof(err));
    CHECK(fq_http_pool_create("127.0.0.1", ntohs(a.sin_port), "127.0.0.1", 16, 5.0, 10.0, &pool, &err) == FQ_OK);
    fq_http_chan *ch[2];
    CHECK(fq_http_chan_create(pool, &ch[0], &err) == FQ_OK);
    CHECK(fq_http_chan_create(pool, &ch[1], &err) == FQ_OK);

    /* both channels, every request answered and checked */
    static char seen[N_MAIN + 2 * N_MORE];
    for (uint64_t id = 0; id < N_MAIN; id++) submit(ch[id % 2], id);
    int want[2] = {N_MAIN / 2, N_MAIN / 2};
    collect(ch, 2, want, seen, sizeof(seen));
    printf("test_http_pool: %d requests on 2 channels answered\n", N_MAIN);

    /* channel 1 closed with requests queued and in flight; channel 0 goes on */
    for (uint64_t id = N_MAIN; id < N_MAIN + 2 * N_MORE; id++) submit(ch[id % 2], id);
    usleep(5000);
    fq_http_chan_close(ch[1]);
    int want0[1] = {N_MORE};
    collect(ch, 1, want0, seen, sizeof(seen));
    printf("test_http_pool: a channel closed with requests in flight; the other's %d answered\n", N_MORE);

    /* the pool closed with requests in flight */
    for (uint64_t id = 0; id < 40; id++) submit(ch[0], id);
    usleep(3000);
    fq_http_chan_close(ch[0]);
    fq_http_pool_close(pool);
    printf("test_http_pool: closed with requests in flight\n");

    atomic_store(&g_stop, 1);
    shutdown(g_listen, SHUT_RDWR);
    CHECK(pthread_join(acc, NULL) == 0);
    close(g_listen);
    usleep(20000); /* the connection threads see their clients gone */
    printf("test_http_pool: ok\n");
    return 0;
}
