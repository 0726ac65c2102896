/* fq_spans.c - see fq_spans.h. */
#define _POSIX_C_SOURCE 200809L
#include "records/fq_spans.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct sp_entry {
    struct sp_entry *next;  /* the object's list */
    int32_t obj;
    int whole;
    uint64_t off, len;
    const uint8_t *ptr;     /* NULL: a failure */
    char *msg;              /* a failure's message */
    uint64_t token;
    int64_t *claims;
    uint8_t *used;          /* per claim: read once already */
    int n_claims, n_left;
    int refs;               /* holders that borrow it */
} sp_entry;

typedef struct sp_holder {
    const void *key;
    sp_entry *held;
} sp_holder;

struct fq_spans {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* gets wait here for entries */
    pthread_cond_t cv_poll; /* the fetcher waits here for demands / tokens */
    int32_t n_obj;
    int64_t n_samples;
    sp_entry **by_obj;
    uint8_t *demanded;      /* per sample: a demand is posted and not yet met */
    sp_holder *holders;
    int n_holders, cap_holders;
    int64_t *dem;           /* queued demands */
    int n_dem, cap_dem;
    uint64_t *tok;          /* queued retired tokens */
    int n_tok, cap_tok;
    int poll_min_tok;       /* the waiting fetcher wants waking at this many tokens (1 when none waits) */
    int interrupted;        /* 1: cancelled, 2: aborted with abort_msg */
    unsigned interrupts;    /* interrupt / abort calls so far (each ends the fetcher's wait under way) */
    char abort_msg[FQ_ERR_MSG_LEN / 2];
    fq_spans_stats st;
};

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

int fq_spans_create(int32_t n_objects, int64_t n_samples, fq_spans **out, fq_err *err)
{
    *out = NULL;
    if (n_objects < 1 || n_samples < 1)
        return fq_set_err(err, FQ_E_INVALID, "spans: need at least one object and one sample");
    fq_spans *s = calloc(1, sizeof *s);
    if (!s)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    s->n_obj = n_objects;
    s->n_samples = n_samples;
    s->poll_min_tok = 1;
    s->by_obj = calloc((size_t)n_objects, sizeof *s->by_obj);
    s->demanded = calloc((size_t)n_samples, 1);
    if (!s->by_obj || !s->demanded) {
        free(s->by_obj);
        free(s->demanded);
        free(s);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    int rc = pthread_mutex_init(&s->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&s->cv, NULL)) != 0)
        pthread_mutex_destroy(&s->mu);
    if (rc == 0 && (rc = pthread_cond_init(&s->cv_poll, NULL)) != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
    }
    if (rc != 0) {
        free(s->by_obj);
        free(s->demanded);
        free(s);
        return fq_set_err(err, FQ_E_SYS, "spans: pthread init failed (%d)", rc);
    }
    *out = s;
    return FQ_OK;
}

static void entry_free(sp_entry *e)
{
    free(e->claims);
    free(e->used);
    free(e->msg);
    free(e);
}

/* Under mu: unlink e from its object's list, queue its token, free it. */
static void retire(fq_spans *s, sp_entry *e)
{
    sp_entry **pp = &s->by_obj[e->obj];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp)
        *pp = e->next;
    if (e->ptr) {
        s->st.entries--;
        s->st.bytes -= (int64_t)e->len;
    }
    if (e->token) {
        if (grow((void **)&s->tok, &s->cap_tok, s->n_tok + 1, sizeof *s->tok) == 0)
            s->tok[s->n_tok++] = e->token;
        /* else: out of memory for the queue; the fetcher frees the buffer at reset
         * (it keeps every token it has not been handed back) */
        if (s->n_tok >= s->poll_min_tok)
            pthread_cond_signal(&s->cv_poll);
    }
    entry_free(e);
}

static void maybe_retire(fq_spans *s, sp_entry *e)
{
    if (e->refs == 0 && e->n_left == 0)
        retire(s, e);
}

void fq_spans_free(fq_spans *s)
{
    if (!s)
        return;
    for (int32_t o = 0; o < s->n_obj; o++) {
        sp_entry *e = s->by_obj[o];
        while (e) {
            sp_entry *n = e->next;
            entry_free(e);
            e = n;
        }
    }
    pthread_cond_destroy(&s->cv_poll);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->by_obj);
    free(s->demanded);
    free(s->holders);
    free(s->dem);
    free(s->tok);
    free(s);
}

static int add_entry(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const uint8_t *ptr,
                     const char *msg, uint64_t token, const int64_t *claims, int n_claims, fq_err *err)
{
    if (obj < 0 || obj >= s->n_obj)
        return fq_set_err(err, FQ_E_INVALID, "spans: object %d out of range", (int)obj);
    if (n_claims < 0 || (n_claims > 0 && !claims))
        return fq_set_err(err, FQ_E_INVALID, "spans: bad claims");
    if (whole && off != 0)
        return fq_set_err(err, FQ_E_INVALID, "spans: a whole object starts at offset 0");
    if (!whole && len > UINT64_MAX - off)
        return fq_set_err(err, FQ_E_INVALID, "spans: range overflows");
    for (int k = 0; k < n_claims; k++)
        if (claims[k] < 0 || claims[k] >= s->n_samples)
            return fq_set_err(err, FQ_E_INVALID, "spans: claim %lld out of range", (long long)claims[k]);
    sp_entry *e = calloc(1, sizeof *e);
    if (!e)
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    e->obj = obj;
    e->whole = whole;
    e->off = off;
    e->len = len;
    e->ptr = ptr;
    e->token = token;
    e->n_claims = e->n_left = n_claims;
    if (n_claims) {
        e->claims = malloc((size_t)n_claims * sizeof *e->claims);
        e->used = calloc((size_t)n_claims, 1);
        if (!e->claims || !e->used) {
            entry_free(e);
            return fq_set_err(err, FQ_E_NOMEM, "out of memory");
        }
        memcpy(e->claims, claims, (size_t)n_claims * sizeof *claims);
    }
    if (msg && !(e->msg = strdup(msg))) {
        entry_free(e);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    int rc = pthread_mutex_lock(&s->mu);
    if (rc != 0) {
        entry_free(e);
        return fq_set_err(err, FQ_E_SYS, "spans: lock failed (%d)", rc);
    }
    e->next = s->by_obj[obj];
    s->by_obj[obj] = e;
    if (ptr) {
        s->st.entries++;
        s->st.bytes += (int64_t)len;
    }
    if (e->n_left == 0)
        retire(s, e); /* nothing will read it: hand it straight back */
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return FQ_OK;
}

int fq_spans_put(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const uint8_t *ptr,
                 uint64_t token, const int64_t *claims, int n_claims, fq_err *err)
{
    if (!ptr)
        return fq_set_err(err, FQ_E_INVALID, "spans: NULL buffer");
    return add_entry(s, obj, off, len, whole, ptr, NULL, token, claims, n_claims, err);
}

int fq_spans_fail(fq_spans *s, int32_t obj, uint64_t off, uint64_t len, int whole, const char *msg,
                  const int64_t *claims, int n_claims, fq_err *err)
{
    return add_entry(s, obj, off, len, whole, NULL, msg ? msg : "remote read failed", 0, claims, n_claims, err);
}

/* Under mu: the entry of obj covering the request; one that claims idx first. */
static sp_entry *find(fq_spans *s, int64_t idx, int32_t obj, uint64_t off, uint64_t len, int *claim)
{
    sp_entry *any = NULL;
    int any_claim = -1;
    for (sp_entry *e = s->by_obj[obj]; e; e = e->next) {
        int covers;
        if (len == FQ_SPAN_WHOLE)
            covers = e->whole;
        else
            covers = (e->whole || e->off <= off) && (e->whole ? off <= e->len && len <= e->len - off
                                                              : off - e->off <= e->len && len <= e->len - (off - e->off));
        if (!covers)
            continue;
        for (int k = 0; k < e->n_claims; k++)
            if (e->claims[k] == idx && !e->used[k]) {
                *claim = k;
                return e;
            }
        if (!any) {
            any = e;
            any_claim = -1;
        }
    }
    *claim = any_claim;
    return any;
}

/* Under mu: the holder record of key (created on first use), or NULL (no memory). */
static sp_holder *holder_of(fq_spans *s, const void *key)
{
    for (int i = 0; i < s->n_holders; i++)
        if (s->holders[i].key == key)
            return &s->holders[i];
    if (grow((void **)&s->holders, &s->cap_holders, s->n_holders + 1, sizeof *s->holders) != 0)
        return NULL;
    sp_holder *h = &s->holders[s->n_holders++];
    h->key = key;
    h->held = NULL;
    return h;
}

static void release(fq_spans *s, sp_holder *h)
{
    sp_entry *e = h->held;
    h->held = NULL;
    if (e) {
        e->refs--;
        maybe_retire(s, e);
    }
}

int fq_spans_get(fq_spans *s, const void *holder, int64_t idx, int32_t obj, uint64_t off, uint64_t len,
                 const uint8_t **p, uint64_t *got, fq_err *err)
{
    *p = NULL;
    *got = 0;
    if (idx < 0 || idx >= s->n_samples || obj < 0 || obj >= s->n_obj)
        return fq_set_err(err, FQ_E_INVALID, "spans: sample %lld / object %d out of range", (long long)idx, (int)obj);
    int rc = pthread_mutex_lock(&s->mu);
    if (rc != 0)
        return fq_set_err(err, FQ_E_SYS, "spans: lock failed (%d)", rc);
    sp_holder *h = holder_of(s, holder);
    if (!h) {
        pthread_mutex_unlock(&s->mu);
        return fq_set_err(err, FQ_E_NOMEM, "out of memory");
    }
    release(s, h); /* the holder's previous sample is done with */
    int claim = -1, waited = 0;
    uint64_t t0 = 0;
    sp_entry *e;
    rc = FQ_OK;
    while (!(e = find(s, idx, obj, off, len, &claim))) {
        if (s->interrupted) {
            rc = s->interrupted == 2 ? fq_set_err(err, FQ_E_IO, "%s", s->abort_msg)
                                     : fq_set_err(err, FQ_E_CANCELLED, "remote read interrupted: the run was stopped");
            break;
        }
        if (!waited) {
            waited = 1;
            t0 = fq_now_ns();
            s->st.waits++;
        }
        if (!s->demanded[idx]) {
            if (grow((void **)&s->dem, &s->cap_dem, s->n_dem + 1, sizeof *s->dem) != 0) {
                rc = fq_set_err(err, FQ_E_NOMEM, "out of memory");
                break;
            }
            s->dem[s->n_dem++] = idx;
            s->demanded[idx] = 1;
            s->st.demands++;
            pthread_cond_signal(&s->cv_poll);
        }
        /* timed: a lost wake-up can only delay, never hang (interrupt is re-checked) */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int w = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        if (w != 0 && w != ETIMEDOUT) {
            rc = fq_set_err(err, FQ_E_SYS, "spans: wait failed (%d)", w);
            break;
        }
    }
    if (waited)
        s->st.wait_ns += (int64_t)(fq_now_ns() - t0);
    if (e) {
        s->demanded[idx] = 0;
        if (claim >= 0) {
            e->used[claim] = 1;
            e->n_left--;
        }
        if (!e->ptr) {
            rc = fq_set_err(err, FQ_E_IO, "%s", e->msg);
            maybe_retire(s, e);
        } else {
            e->refs++;
            h->held = e;
            s->st.gets++;
            if (len == FQ_SPAN_WHOLE) {
                *p = e->ptr;
                *got = e->len;
            } else {
                *p = e->ptr + (off - (e->whole ? 0 : e->off));
                *got = len;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int fq_spans_poll(fq_spans *s, int timeout_ms, int min_tok, int64_t *dem, int max_dem, int *n_dem, uint64_t *tok,
                  int max_tok, int *n_tok)
{
    *n_dem = *n_tok = 0;
    if (min_tok < 1)
        min_tok = 1;
    int rc = pthread_mutex_lock(&s->mu);
    if (rc != 0)
        return FQ_E_SYS;
    if (s->n_dem == 0 && s->n_tok < min_tok && timeout_ms > 0) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
            pthread_mutex_unlock(&s->mu);
            return FQ_E_SYS;
        }
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        /* retire() signals once min_tok tokens wait; a demand and an interrupt at once.
         * An interrupt ends the wait under way, not the next ones (the fetcher polls until
         * it stops: it must not spin meanwhile). */
        const unsigned interrupts = s->interrupts;
        s->poll_min_tok = min_tok;
        do {
            if (pthread_cond_timedwait(&s->cv_poll, &s->mu, &ts) != 0) /* ETIMEDOUT: take what is queued */
                break;
        } while (s->n_dem == 0 && s->n_tok < min_tok && s->interrupts == interrupts);
        s->poll_min_tok = 1;
    }
    int nt = s->n_tok < max_tok ? s->n_tok : max_tok;
    if (nt > 0) { /* (s->tok is NULL until the first token: no memcpy from it) */
        memcpy(tok, s->tok, (size_t)nt * sizeof *tok);
        memmove(s->tok, s->tok + nt, (size_t)(s->n_tok - nt) * sizeof *tok);
    }
    s->n_tok -= nt;
    *n_tok = nt;
    if (s->n_tok == 0) { /* demands only after every queued token (see the header) */
        /* a demand met since it was queued (its sample found its bytes: demanded[] was
         * cleared) is stale: dropped, or the fetcher would fetch those bytes again */
        int taken = 0, nd = 0;
        while (taken < s->n_dem && nd < max_dem) {
            const int64_t i = s->dem[taken++];
            if (s->demanded[i])
                dem[nd++] = i;
        }
        if (taken > 0)
            memmove(s->dem, s->dem + taken, (size_t)(s->n_dem - taken) * sizeof *dem);
        s->n_dem -= taken;
        *n_dem = nd;
    }
    pthread_mutex_unlock(&s->mu);
    return FQ_OK;
}

static void set_interrupt(fq_spans *s, int how, const char *msg)
{
    if (pthread_mutex_lock(&s->mu) != 0)
        return;
    if (how == 2 || !s->interrupted) {
        s->interrupted = how;
        if (msg)
            snprintf(s->abort_msg, sizeof s->abort_msg, "%s", msg);
    }
    s->interrupts++;
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->cv_poll);
    pthread_mutex_unlock(&s->mu);
}

void fq_spans_interrupt(fq_spans *s)
{
    set_interrupt(s, 1, NULL);
}

void fq_spans_abort(fq_spans *s, const char *msg)
{
    set_interrupt(s, 2, msg ? msg : "remote reads aborted");
}

void fq_spans_reset(fq_spans *s)
{
    if (pthread_mutex_lock(&s->mu) != 0)
        return;
    for (int i = 0; i < s->n_holders; i++)
        s->holders[i].held = NULL;
    s->n_holders = 0;
    for (int32_t o = 0; o < s->n_obj; o++)
        while (s->by_obj[o])
            retire(s, s->by_obj[o]);
    memset(s->demanded, 0, (size_t)s->n_samples);
    s->n_dem = 0;
    s->n_tok = 0; /* the fetcher frees every buffer it still holds after a reset */
    s->interrupted = 0;
    s->abort_msg[0] = 0;
    pthread_mutex_unlock(&s->mu);
}

void fq_spans_get_stats(fq_spans *s, fq_spans_stats *st)
{
    if (pthread_mutex_lock(&s->mu) != 0) {
        memset(st, 0, sizeof *st);
        return;
    }
    *st = s->st;
    pthread_mutex_unlock(&s->mu);
}

int fq_spans_wanted(fq_spans *s, int64_t idx)
{
    if (idx < 0 || idx >= s->n_samples)
        return 0;
    if (pthread_mutex_lock(&s->mu) != 0)
        return 1; /* (cannot tell: fetching again is the safe answer) */
    const int w = s->demanded[idx];
    pthread_mutex_unlock(&s->mu);
    return w;
}
