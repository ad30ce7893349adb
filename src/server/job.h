/* server/job: one request's life between an HTTP thread and the engine thread.
 *
 * The HTTP thread makes a job (a parsed request and its prompt tokens), queues it, and waits on it; the
 * engine thread admits it into slots, appends its answer (SSE frames while streaming, or one final body)
 * and finishes it exactly once.  Either side may let go first: the job is reference-counted, and a
 * client that disconnects sets `cancelled`, which the engine reads between forwards to free the slot.
 * Control jobs (slot save/restore/erase, /slots) travel the same queue so only the engine thread ever
 * touches the context. */
#ifndef MF_SERVER_JOB_H
#define MF_SERVER_JOB_H

#include "server/embed.h"
#include "server/rerank.h"
#include "server/request.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
    MF_JOB_GENERATE,
    MF_JOB_SLOTS,        /* GET /slots */
    MF_JOB_SLOT_SAVE,    /* POST /slots/{id}?action=save */
    MF_JOB_SLOT_RESTORE, /* ... restore */
    MF_JOB_SLOT_ERASE,   /* ... erase */
    MF_JOB_EMBED,        /* POST /v1/embeddings, /embedding(s) on a --embeddings server */
    MF_JOB_RERANK,       /* POST /v1/rerank and its aliases on a --rerank server */
} mf_job_kind;

typedef struct mf_srv_job {
    mf_job_kind kind;
    mf_srv_req req;
    mf_token *prompt; /* tokenized by the HTTP thread (the model is read-only) */
    int32_t n_prompt;
    char id[40];      /* "chatcmpl-..." / "cmpl-..." */
    const char *model_name;
    int64_t created;
    double t_arrival; /* mf_time_now() */
    int32_t slot;     /* control jobs: the slot; generate: id_slot */
    char filename[256];
    mf_grammar *grammar; /* the request's constraint compiled (NULL: none); every choice's generator follows it */
    bool think_first;    /* the grammar holds after a <think> ... </think> block the model may open with */
    mf_srv_embed_req embed; /* MF_JOB_EMBED: the inputs, tokenized */
    mf_srv_rerank_req rerank; /* MF_JOB_RERANK: the pairs, tokenized */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out; /* bytes ready for the client (streaming) */
    size_t out_len, out_cap, out_sent;
    bool started; /* the engine produced the first byte of a stream */
    bool done;    /* the answer is complete (no more bytes will come) */
    int status;   /* HTTP status when done without streaming (or before the first stream byte) */
    char *body;   /* the final body (non-streaming, or an error before streaming began) */
    size_t body_len;
    bool cancelled; /* the client went away */
    int refs;
} mf_srv_job;

mf_srv_job *mf_srv_job_new(mf_job_kind kind);
mf_srv_job *mf_srv_job_ref(mf_srv_job *j);
void mf_srv_job_unref(mf_srv_job *j); /* frees at the last reference */
/* A failure answer: an SSE error frame when the stream has begun, else status + the JSON error. */
void mf_srv_job_fail(mf_srv_job *j, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Engine side (each takes the job's lock and wakes the waiter). */
bool mf_srv_job_push(mf_srv_job *j, const char *bytes, size_t n); /* false: out of memory */
/* Streaming: append "data: <json>\n\n". */
bool mf_srv_job_sse(mf_srv_job *j, const char *json);
/* Completes the job with a status and a body (takes ownership of body); the second call is ignored, so
 * "answered exactly once" holds even if two paths race to finish it.  Returns true for the first. */
bool mf_srv_job_finish(mf_srv_job *j, int status, char *body);
bool mf_srv_job_is_cancelled(mf_srv_job *j);

/* HTTP side. */
void mf_srv_job_cancel(mf_srv_job *j);

/* A bounded FIFO of jobs (the engine's inbox). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mf_srv_job **items;
    int cap, head, n;
    int n_generate;   /* generate, embed and rerank jobs waiting (what --max-queue bounds) */
    int max_generate; /* --max-queue */
    bool closed;      /* shutting down: no new jobs */
} mf_srv_queue;

int mf_srv_queue_init(mf_srv_queue *q, int max_generate);
void mf_srv_queue_destroy(mf_srv_queue *q);
/* 0 ok; 1 full (503 + Retry-After); 2 closed (503 shutting down).  Takes a reference on success. */
int mf_srv_queue_push(mf_srv_queue *q, mf_srv_job *j);
/* Pops the oldest job, or NULL when empty; waits up to timeout_ms when wait is set. */
mf_srv_job *mf_srv_queue_pop(mf_srv_queue *q, int timeout_ms);
/* Puts a popped job back at the front (no slot free for it yet). */
void mf_srv_queue_unpop(mf_srv_queue *q, mf_srv_job *j);
int mf_srv_queue_depth(mf_srv_queue *q);
void mf_srv_queue_close(mf_srv_queue *q);
void mf_srv_queue_wake(mf_srv_queue *q);

#endif
