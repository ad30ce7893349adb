/* server/metrics: Prometheus text exposition (see metrics.h). */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ROUTE_STATUS = 96, N_BUCKETS = 14 };

/* Seconds; one ladder for all four histograms (latencies from sub-millisecond steps to minutes). */
static const double k_bounds[N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                           0.25,  0.5,    1,     2.5,  5,     10,  60};

typedef struct {
    uint64_t bucket[N_BUCKETS]; /* non-cumulative here, cumulated when rendered */
    uint64_t count;
    double sum;
} hist;

struct mf_srv_metrics {
    pthread_mutex_t mu;
    struct {
        char route[32];
        int status;
        uint64_t n;
    } req[MAX_ROUTE_STATUS];
    int n_req;
    uint64_t counter[MF_SRV_C_COUNT];
    int64_t gauge[MF_SRV_G_COUNT];
    hist h[MF_SRV_H_COUNT];
};

static const struct {
    const char *name, *help;
} k_counters[MF_SRV_C_COUNT] = {
    [MF_SRV_C_PROMPT_TOKENS] = {"minfer_prompt_tokens_total", "Prompt tokens of admitted requests."},
    [MF_SRV_C_PREFILLED_TOKENS] = {"minfer_prompt_tokens_prefilled_total",
                                   "Prompt tokens run through the model (the rest came from cached cells)."},
    [MF_SRV_C_REUSED_TOKENS] = {"minfer_prompt_tokens_reused_total",
                                "Prompt tokens served from cached cells (prefix reuse)."},
    [MF_SRV_C_SHIFTED_TOKENS] = {"minfer_prompt_tokens_shifted_total",
                                 "Of the reused prompt tokens, those moved to a new position (--cache-reuse)."},
    [MF_SRV_C_GENERATED_TOKENS] = {"minfer_generated_tokens_total", "Tokens generated."},
    [MF_SRV_C_JOBS_ADMITTED] = {"minfer_jobs_admitted_total", "Requests admitted into a slot."},
    [MF_SRV_C_JOBS_DROPPED] = {"minfer_jobs_dropped_total",
                               "Requests ended without finishing (failed forward, stalled worker, client gone)."},
    [MF_SRV_C_CLIENT_GONE] = {"minfer_client_disconnects_total",
                              "Requests whose client disconnected before the answer was complete."},
    [MF_SRV_C_WORKER_STALLED] = {"minfer_worker_stalled_total",
                                 "Times the stall guard found the engine making no progress and stopped it."},
    [MF_SRV_C_STEPS] = {"minfer_engine_steps_total", "Forwards run by the engine thread."},
    [MF_SRV_C_DRAFT_TOKENS] = {"minfer_draft_tokens_total", "Tokens proposed by the draft model (-md) and verified."},
    [MF_SRV_C_DRAFT_ACCEPTED] = {"minfer_draft_accepted_tokens_total",
                                 "Drafted tokens the model's own sampling agreed with (committed)."},
};

static const struct {
    const char *name, *help;
} k_gauges[MF_SRV_G_COUNT] = {
    [MF_SRV_G_SLOTS_BUSY] = {"minfer_slots_busy", "Slots serving a request now."},
    [MF_SRV_G_SLOTS_TOTAL] = {"minfer_slots_total", "Slots (--parallel)."},
    [MF_SRV_G_QUEUE_DEPTH] = {"minfer_queue_depth", "Requests waiting for a slot."},
    [MF_SRV_G_KV_USED] = {"minfer_kv_cells_used", "KV cells holding a token (cached prefixes included)."},
    [MF_SRV_G_KV_TOTAL] = {"minfer_kv_cells_total", "KV cells in the pool (--ctx-size)."},
};

static const struct {
    const char *name, *help;
} k_hists[MF_SRV_H_COUNT] = {
    [MF_SRV_H_TTFT] = {"minfer_time_to_first_token_seconds", "From arrival to the first generated token."},
    [MF_SRV_H_ITL] = {"minfer_inter_token_latency_seconds", "Between consecutive generated tokens of a request."},
    [MF_SRV_H_E2E] = {"minfer_request_duration_seconds", "From arrival to the last byte of the answer."},
    [MF_SRV_H_QUEUE_WAIT] = {"minfer_queue_wait_seconds", "From arrival to admission into a slot."},
};

mf_srv_metrics *mf_srv_metrics_new(void) {
    mf_srv_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void mf_srv_metrics_free(mf_srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void mf_srv_metrics_request(mf_srv_metrics *m, const char *route, int status) {
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->n_req && !(m->req[i].status == status && !strcmp(m->req[i].route, route))) i++;
    if (i == m->n_req && m->n_req < MAX_ROUTE_STATUS) {
        snprintf(m->req[i].route, sizeof m->req[i].route, "%s", route);
        m->req[i].status = status;
        m->n_req++;
    }
    if (i < m->n_req) m->req[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void mf_srv_metrics_add(mf_srv_metrics *m, mf_srv_counter c, uint64_t n) {
    pthread_mutex_lock(&m->mu);
    m->counter[c] += n;
    pthread_mutex_unlock(&m->mu);
}

void mf_srv_metrics_set(mf_srv_metrics *m, mf_srv_gauge g, int64_t v) {
    pthread_mutex_lock(&m->mu);
    m->gauge[g] = v;
    pthread_mutex_unlock(&m->mu);
}

void mf_srv_metrics_observe(mf_srv_metrics *m, mf_srv_hist h, double s) {
    pthread_mutex_lock(&m->mu);
    hist *x = &m->h[h];
    int b = 0;
    while (b < N_BUCKETS && s > k_bounds[b]) b++;
    if (b < N_BUCKETS) x->bucket[b]++;
    x->count++;
    x->sum += s;
    pthread_mutex_unlock(&m->mu);
}

uint64_t mf_srv_metrics_get(mf_srv_metrics *m, mf_srv_counter c) {
    pthread_mutex_lock(&m->mu);
    uint64_t v = m->counter[c];
    pthread_mutex_unlock(&m->mu);
    return v;
}

int64_t mf_srv_metrics_gauge(mf_srv_metrics *m, mf_srv_gauge g) {
    pthread_mutex_lock(&m->mu);
    int64_t v = m->gauge[g];
    pthread_mutex_unlock(&m->mu);
    return v;
}

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = cap;
    }
}

char *mf_srv_metrics_render(mf_srv_metrics *m, size_t *len) {
    sbuf b = {malloc(4096), 0, 4096, 0};
    if (!b.s) return NULL;
    b.s[0] = 0;
    pthread_mutex_lock(&m->mu);
    put(&b, "# HELP minfer_requests_total HTTP requests answered, by route and status code.\n"
            "# TYPE minfer_requests_total counter\n");
    for (int i = 0; i < m->n_req; i++)
        put(&b, "minfer_requests_total{route=\"%s\",status=\"%d\"} %llu\n", m->req[i].route, m->req[i].status,
            (unsigned long long)m->req[i].n);
    for (int c = 0; c < MF_SRV_C_COUNT; c++)
        put(&b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", k_counters[c].name, k_counters[c].help,
            k_counters[c].name, k_counters[c].name, (unsigned long long)m->counter[c]);
    for (int g = 0; g < MF_SRV_G_COUNT; g++)
        put(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", k_gauges[g].name, k_gauges[g].help, k_gauges[g].name,
            k_gauges[g].name, (long long)m->gauge[g]);
    for (int h = 0; h < MF_SRV_H_COUNT; h++) {
        const hist *x = &m->h[h];
        const char *nm = k_hists[h].name;
        put(&b, "# HELP %s %s\n# TYPE %s histogram\n", nm, k_hists[h].help, nm);
        uint64_t cum = 0;
        for (int i = 0; i < N_BUCKETS; i++) {
            cum += x->bucket[i];
            put(&b, "%s_bucket{le=\"%g\"} %llu\n", nm, k_bounds[i], (unsigned long long)cum);
        }
        put(&b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", nm, (unsigned long long)x->count, nm,
            x->sum, nm, (unsigned long long)x->count);
    }
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    *len = b.n;
    return b.s;
}
