/* server: `minfer serve`'s process — start the engine thread (it loads the model; /health answers 503
 * until then) and libmicrohttpd, wait for SIGINT/SIGTERM, drain, stop.  See server.h. */
#include "server/server_impl.h"

#include "core/core.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

mf_server_opts mf_server_default_opts(void) {
    return (mf_server_opts){.draft = mf_draft_default_params(),
                            .host = "127.0.0.1",
                            .port = 8080,
                            .n_parallel = 4,
                            .n_batch = 512,
                            .type_k = MF_KV_TYPE_F16,
                            .type_v = MF_KV_TYPE_F16,
                            .timeout_s = 600,
                            .max_queue = 64,
                            .drain_ms = 30000,
                            .pooling = MF_POOLING_MODEL,
                            .rope = mf_context_default_params().rope,
                            .sampler = mf_sampler_default_params(),
                            .n_dry_breakers = -1};
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static const char *kv_name(uint32_t t) { return t == MF_KV_TYPE_F16 ? "f16" : t == MF_KV_TYPE_F32 ? "f32" : "q8_0"; }

/* "f16" or "K f16 V q8_0" */
static const char *kv_names(const mf_server_opts *o, char *buf, size_t n) {
    if (o->type_k == o->type_v) snprintf(buf, n, "%s", kv_name(o->type_k));
    else snprintf(buf, n, "K %s V %s", kv_name(o->type_k), kv_name(o->type_v));
    return buf;
}

/* Waits for SIGINT/SIGTERM (blocked in every thread, so only this wait sees them), or for the model to
 * fail to load.  Returns the signal, or 0 when the load failed. */
static int wait_signal(mf_server *s, const sigset_t *set) {
    for (;;) {
        struct timespec ts = {0, 100 * 1000000L};
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig > 0) return sig;
        if (atomic_load(&s->state) == MF_SRV_FAILED) return 0;
    }
}

int mf_server_run(const mf_server_opts *o, mf_error *err) {
    if (o->n_batch < o->n_parallel)
        return mf_err(err, MF_E_INVAL,
                      "-b/--batch-size %d is smaller than -np/--parallel %d: every slot needs a row per step (raise "
                      "-b or lower -np)", o->n_batch, o->n_parallel);
    mf_server *s = calloc(1, sizeof *s);
    if (!s) return mf_err(err, MF_E_NOMEM, "out of memory starting the server");
    s->o = *o;
    snprintf(s->model_name, sizeof s->model_name, "%s", o->alias ? o->alias : base_name(o->model_path));
    atomic_init(&s->state, MF_SRV_LOADING);
    atomic_init(&s->next_id, 1);
    int rc = 0;
    mf_srv_http *http = NULL;
    bool engine_started = false;
    pthread_t engine;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by every thread started below */
    signal(SIGPIPE, SIG_IGN);
    if (!(s->m = mf_srv_metrics_new()) || mf_srv_queue_init(&s->q, o->max_queue) ||
        mf_srv_breakers_new(&s->breakers, NULL)) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory starting the server");
        goto out;
    }
    if ((rc = mf_srv_engine_new(s, &s->eng, err))) goto out;
    if ((rc = mf_srv_http_start(s, &http, err))) goto out;
    if (pthread_create(&engine, NULL, mf_srv_engine_main, s)) {
        rc = mf_err(err, MF_E_NOMEM, "cannot start the engine thread");
        goto out;
    }
    engine_started = true;
    char kvb[32];
    fprintf(stderr, "[server] listening on http://%s:%d (slots %d, KV type %s, batch %d, queue %d%s); loading %s\n",
            o->host, mf_srv_http_port(http), o->n_parallel, kv_names(o, kvb, sizeof kvb), o->n_batch, o->max_queue,
            o->api_key ? ", API key required" : "", o->model_path);
    /* the ready line comes from this thread once the engine says so, so tests can wait for it */
    for (;;) {
        int st = atomic_load(&s->state);
        if (st != MF_SRV_LOADING) break;
        struct timespec ts = {0, 20 * 1000000L};
        if (sigtimedwait(&set, NULL, &ts) > 0) {
            atomic_store(&s->state, MF_SRV_DRAINING);
            break;
        }
    }
    if (atomic_load(&s->state) == MF_SRV_READY && o->embeddings)
        fprintf(stderr, "[server] ready: model %s, %s, context %d cells, KV type %s, batch %d\n", s->model_name,
                s->pooling_desc, s->n_ctx, kv_names(o, kvb, sizeof kvb), o->n_batch);
    else if (atomic_load(&s->state) == MF_SRV_READY)
        fprintf(stderr, "[server] ready: model %s, context %d cells shared by %d slots, KV type %s, batch %d\n",
                s->model_name, s->n_ctx, o->n_parallel, kv_names(o, kvb, sizeof kvb), o->n_batch);
    if (atomic_load(&s->state) == MF_SRV_READY) {
        int sig = wait_signal(s, &set);
        if (sig) {
            fprintf(stderr, "[server] %s: no new requests; letting in-flight ones finish (up to %d ms)\n",
                    sig == SIGINT ? "SIGINT" : "SIGTERM", o->drain_ms);
            atomic_store(&s->state, MF_SRV_DRAINING);
        }
    }
    if (atomic_load(&s->state) == MF_SRV_FAILED) rc = mf_err(err, MF_E_IO, "%s", s->load_error);
out:
    if (engine_started) pthread_join(engine, NULL);
    mf_srv_queue_close(&s->q);
    mf_srv_http_stop(http); /* waits for the connection threads: every job has been answered */
    if (s->q.items) mf_srv_queue_destroy(&s->q);
    mf_srv_engine_free(s->eng);
    mf_infill_vocab_free(s->infill); /* it points into the model's vocabulary */
    mf_model_free(s->model);
    mf_srv_metrics_free(s->m);
    mf_srv_breakers_free(s->breakers);
    free(s);
    if (!rc) fprintf(stderr, "[server] stopped\n");
    return rc;
}
