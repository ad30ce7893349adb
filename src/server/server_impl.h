/* server: state shared by the server's files (http.c, routes.c, engine.c, server.c).  Nothing outside
 * src/server includes this; the CLI sees only server/server.h. */
#ifndef MF_SERVER_IMPL_H
#define MF_SERVER_IMPL_H

#include "server/breakers.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/server.h"

#include <stdatomic.h>
#include <stddef.h>

enum { MF_SRV_MAX_BODY = 8 << 20 }; /* bytes; a larger body is answered 413 */

typedef struct mf_srv_engine mf_srv_engine;

typedef struct mf_server {
    mf_server_opts o;
    char model_name[256]; /* --alias, or the model file's name */
    /* set by the engine thread once loaded; read-only afterwards (HTTP threads tokenize with it) */
    mf_model *model;
    mf_model_info info;
    int32_t n_ctx;
    atomic_int state; /* 0 loading, 1 ready, 2 load failed, 3 shutting down */
    atomic_uint_fast64_t next_id;
    atomic_int http_active; /* requests between their first byte and the end of their answer */
    mf_srv_queue q;
    mf_srv_metrics *m;
    mf_srv_breakers *breakers; /* DRY sequence breakers resolved so far (any HTTP thread) */
    mf_infill_vocab *infill;   /* the infill sampler stage's view of the vocabulary (NULL: infill_why says why) */
    char infill_why[300];
    mf_srv_engine *eng;
    char load_error[400];
    char pooling_desc[96]; /* --embeddings: "embeddings, last pooling (the model's)", for the ready line */
    bool ranking;          /* --embeddings with rank pooling (--rerank): /v1/rerank served, not /v1/embeddings */
} mf_server;

enum { MF_SRV_LOADING = 0, MF_SRV_READY = 1, MF_SRV_FAILED = 2, MF_SRV_DRAINING = 3 };

/* engine.c: the one thread that owns the context.  Loads the model (state -> READY), then serves the
 * queue until mf_srv_engine_stop; returns when every admitted job has been answered. */
int mf_srv_engine_new(mf_server *s, mf_srv_engine **out, mf_error *err);
void *mf_srv_engine_main(void *server);
void mf_srv_engine_free(mf_srv_engine *e);
/* Slots busy now (for /health and /slots without the engine lock). */
int mf_srv_engine_busy(mf_srv_engine *e);

/* http.c */
typedef struct mf_srv_http mf_srv_http;
int mf_srv_http_start(mf_server *s, mf_srv_http **out, mf_error *err);
int mf_srv_http_port(const mf_srv_http *h);
void mf_srv_http_stop(mf_srv_http *h);

/* routes.c: one answer = status + content type + body (malloc'd) + optional extra header. */
typedef struct {
    int status;
    const char *ctype;
    char *body;
    size_t len;
    const char *hdr_name, *hdr_value; /* e.g. Retry-After, Allow */
} mf_srv_answer;

/* Answers a request that needs no engine step (or queues a job and waits for it).  `job_out`: a
 * generate job that streams; the HTTP layer then sends it chunk by chunk. */
void mf_srv_route(mf_server *s, const char *method, const char *url, const char *query_action, const char *body,
                  size_t len, int client_fd, mf_srv_answer *a, mf_srv_job **stream_job, const char **route_label);
/* JSON error answer with the OpenAI error shape. */
void mf_srv_answer_error(mf_srv_answer *a, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Waits on a job until it has bytes or is done, checking the client socket for a hang-up every 100 ms;
 * returns false when the client went away (the job is then cancelled). */
bool mf_srv_wait_job(mf_srv_job *j, int client_fd, bool for_stream);

#endif
