/* server/job: request hand-over between HTTP threads and the engine thread (see job.h). */
#include "server/job.h"
#include "server/respond.h"

#include <stdarg.h>
#include <stdio.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

mf_srv_job *mf_srv_job_new(mf_job_kind kind) {
    mf_srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->kind = kind;
    j->slot = -1;
    j->refs = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

mf_srv_job *mf_srv_job_ref(mf_srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    return j;
}

void mf_srv_job_fail(mf_srv_job *j, int status, const char *type, const char *fmt, ...) {
    mf_srv_err e = {.status = status, .type = type};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    char *json = mf_srv_error_json(&e);
    pthread_mutex_lock(&j->mu);
    bool streaming = j->started;
    pthread_mutex_unlock(&j->mu);
    if (streaming) {
        if (json) mf_srv_job_sse(j, json);
        free(json);
        mf_srv_job_finish(j, status, NULL);
    } else {
        mf_srv_job_finish(j, status, json);
    }
}

void mf_srv_job_unref(mf_srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    mf_srv_req_free(&j->req);
    mf_grammar_free(j->grammar);
    mf_srv_embed_req_free(&j->embed);
    mf_srv_rerank_req_free(&j->rerank);
    free(j->prompt);
    free(j->out);
    free(j->body);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static bool append_locked(mf_srv_job *j, const char *b, size_t n) {
    if (j->out_len + n + 1 > j->out_cap) {
        size_t cap = (j->out_len + n + 1) * 2;
        char *o = realloc(j->out, cap);
        if (!o) return false;
        j->out = o, j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, b, n);
    j->out_len += n;
    j->started = true;
    return true;
}

bool mf_srv_job_push(mf_srv_job *j, const char *bytes, size_t n) {
    pthread_mutex_lock(&j->mu);
    bool ok = !j->done && append_locked(j, bytes, n);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

bool mf_srv_job_sse(mf_srv_job *j, const char *json) {
    pthread_mutex_lock(&j->mu);
    bool ok = !j->done && append_locked(j, "data: ", 6) && append_locked(j, json, strlen(json)) &&
              append_locked(j, "\n\n", 2);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

bool mf_srv_job_finish(mf_srv_job *j, int status, char *body) {
    pthread_mutex_lock(&j->mu);
    bool first = !j->done;
    if (first) {
        j->done = true;
        j->status = status;
        j->body = body;
        j->body_len = body ? strlen(body) : 0;
        body = NULL;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    free(body);
    return first;
}

bool mf_srv_job_is_cancelled(mf_srv_job *j) {
    pthread_mutex_lock(&j->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

void mf_srv_job_cancel(mf_srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = true;
    pthread_mutex_unlock(&j->mu);
}

int mf_srv_queue_init(mf_srv_queue *q, int max_generate) {
    memset(q, 0, sizeof *q);
    q->cap = max_generate + 64; /* room for control jobs beyond the generate bound */
    if (!(q->items = calloc((size_t)q->cap, sizeof *q->items))) return -1;
    q->max_generate = max_generate;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    return 0;
}

void mf_srv_queue_destroy(mf_srv_queue *q) {
    for (int i = 0; i < q->n; i++) mf_srv_job_unref(q->items[(q->head + i) % q->cap]);
    free(q->items);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

/* the jobs --max-queue bounds: requests for the model (control jobs are not counted) */
static bool waits_for_slot(const mf_srv_job *j) {
    return j->kind == MF_JOB_GENERATE || j->kind == MF_JOB_EMBED || j->kind == MF_JOB_RERANK;
}

int mf_srv_queue_push(mf_srv_queue *q, mf_srv_job *j) {
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    bool gen = waits_for_slot(j);
    if (q->closed) rc = 2;
    else if ((gen && q->n_generate >= q->max_generate) || q->n >= q->cap) rc = 1;
    else {
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        q->items[(q->head + q->n) % q->cap] = j;
        q->n++;
        q->n_generate += gen;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

mf_srv_job *mf_srv_queue_pop(mf_srv_queue *q, int timeout_ms) {
    pthread_mutex_lock(&q->mu);
    if (q->n == 0 && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        while (q->n == 0 && !q->closed)
            if (pthread_cond_timedwait(&q->cv, &q->mu, &ts) == ETIMEDOUT) break;
    }
    mf_srv_job *j = NULL;
    if (q->n > 0) {
        j = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
        q->n_generate -= waits_for_slot(j);
    }
    pthread_mutex_unlock(&q->mu);
    return j;
}

void mf_srv_queue_unpop(mf_srv_queue *q, mf_srv_job *j) {
    pthread_mutex_lock(&q->mu);
    q->head = (q->head + q->cap - 1) % q->cap;
    q->items[q->head] = j;
    q->n++;
    q->n_generate += waits_for_slot(j);
    pthread_mutex_unlock(&q->mu);
}

int mf_srv_queue_depth(mf_srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    int n = q->n_generate;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void mf_srv_queue_close(mf_srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void mf_srv_queue_wake(mf_srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
