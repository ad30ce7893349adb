/* server/metrics: the counters, gauges and histograms behind GET /metrics (Prometheus text format 0.0.4).
 * Every family is minfer_-prefixed and documented by its # HELP line; docs/SERVER.md lists them.
 * Updated from HTTP threads and the engine thread: one mutex, never held across I/O or a forward. */
#ifndef MF_SERVER_METRICS_H
#define MF_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct mf_srv_metrics mf_srv_metrics;

typedef enum {
    MF_SRV_H_TTFT,       /* time to first token */
    MF_SRV_H_ITL,        /* inter-token latency */
    MF_SRV_H_E2E,        /* request end to end */
    MF_SRV_H_QUEUE_WAIT, /* from arrival to admission into a slot */
    MF_SRV_H_COUNT
} mf_srv_hist;

typedef enum {
    MF_SRV_C_PROMPT_TOKENS,    /* prompt tokens of finished requests */
    MF_SRV_C_PREFILLED_TOKENS, /* prompt tokens actually run through the model */
    MF_SRV_C_REUSED_TOKENS,    /* prompt tokens served from cached cells */
    MF_SRV_C_SHIFTED_TOKENS,   /* of them: moved to new positions by --cache-reuse */
    MF_SRV_C_GENERATED_TOKENS,
    MF_SRV_C_JOBS_ADMITTED,
    MF_SRV_C_JOBS_DROPPED, /* answered without finishing: failed forward, stall, client gone */
    MF_SRV_C_CLIENT_GONE,  /* of those: the client disconnected */
    MF_SRV_C_WORKER_STALLED,
    MF_SRV_C_STEPS, /* engine forwards */
    MF_SRV_C_DRAFT_TOKENS,    /* tokens a draft model proposed and the target verified */
    MF_SRV_C_DRAFT_ACCEPTED,  /* of them: committed */
    MF_SRV_C_COUNT
} mf_srv_counter;

typedef enum {
    MF_SRV_G_SLOTS_BUSY,
    MF_SRV_G_SLOTS_TOTAL,
    MF_SRV_G_QUEUE_DEPTH,
    MF_SRV_G_KV_USED,
    MF_SRV_G_KV_TOTAL,
    MF_SRV_G_COUNT
} mf_srv_gauge;

mf_srv_metrics *mf_srv_metrics_new(void);
void mf_srv_metrics_free(mf_srv_metrics *m);

void mf_srv_metrics_request(mf_srv_metrics *m, const char *route, int status); /* one answered request */
void mf_srv_metrics_add(mf_srv_metrics *m, mf_srv_counter c, uint64_t n);
void mf_srv_metrics_set(mf_srv_metrics *m, mf_srv_gauge g, int64_t v);
void mf_srv_metrics_observe(mf_srv_metrics *m, mf_srv_hist h, double seconds);
uint64_t mf_srv_metrics_get(mf_srv_metrics *m, mf_srv_counter c);
int64_t mf_srv_metrics_gauge(mf_srv_metrics *m, mf_srv_gauge g);

/* The whole exposition text; malloc'd, *len set. */
char *mf_srv_metrics_render(mf_srv_metrics *m, size_t *len);

#endif
