/* server/embed: embeddings on a server started with --embeddings (docs/EMBEDDINGS.md).  POST /v1/embeddings
 * answers in OpenAI's shape; /embedding and /embeddings in llama-server's native one.  The HTTP thread parses
 * and tokenizes (mf_srv_embed_parse); the engine thread, which owns the context, embeds every input
 * (mf_srv_embed_run). */
#ifndef MF_SERVER_EMBED_H
#define MF_SERVER_EMBED_H

#include "server/request.h"
#include "server/think.h" /* mf_srv_buf */

#include "minfer.h"

#include <stdbool.h>
#include <stddef.h>

enum { MF_SRV_EMBED_MAX_INPUTS = 2048 }; /* OpenAI's limit per request */
enum { MF_SRV_EMBED_GROUP = 64 };        /* inputs per mf_embed_batch call: cancellation is checked between */

typedef struct {
    mf_token **ids; /* the inputs' tokens */
    int32_t *n_ids;
    int32_t n;
    int32_t n_tokens; /* all of them: usage.prompt_tokens */
    bool oai;         /* OpenAI's answer shape, else llama-server's native [{"index", "embedding": [[...]]}] */
    bool base64;      /* encoding_format "base64": each vector as the base64 of its little-endian float32s */
    int normalize;    /* embd_normalize (mf_embed_normalize); OpenAI's route: always 2 */
    int32_t dims;     /* 'dimensions': the vectors' first dims floats, normalised (0: all of them) */
} mf_srv_embed_req;

/* What a request is checked against: the server's context, pooling and --matryoshka. */
typedef struct {
    int32_t n_ctx;
    mf_pooling pooling;
    bool matryoshka;
} mf_srv_embed_limits;

/* Parses body (OpenAI: input, model, encoding_format, dimensions, user; native: content or input,
 * embd_normalize, dimensions) and tokenizes every text with the model.  An input is a string, an array of
 * strings, an array of token ids or an array of such arrays.  Refused with 400 naming the field: an empty
 * input or text, a token id outside the vocabulary, more than MF_SRV_EMBED_MAX_INPUTS inputs, an input longer
 * than n_ctx tokens, dimensions mf_embed_dims_check refuses, an unknown encoding_format. */
int mf_srv_embed_parse(const mf_model *model, const mf_srv_embed_limits *lim, bool oai, const char *body,
                       size_t len, mf_srv_embed_req *out, mf_srv_err *e);
void mf_srv_embed_req_free(mf_srv_embed_req *r);

struct cJSON;
/* The start of both parsers: the body must be UTF-8 without a NUL byte and a JSON object.  The object
 * (cJSON_Delete it), or NULL after a 400 in *e. */
struct cJSON *mf_srv_embed_body(const char *body, size_t len, mf_srv_err *e);

/* Takes a group's vectors: inputs first .. first + k - 1, dim floats each (writable); false is out of memory. */
typedef bool (*mf_srv_embed_take)(void *arg, int32_t first, int32_t k, float *v, int32_t dim);

/* One request of a shared run: several queued requests are embedded together, their inputs packed into the
 * same forwards (each vector is still bitwise the input's alone: mf_embed_batch). */
typedef struct {
    const mf_srv_embed_req *req;  /* in: the inputs */
    bool (*cancelled)(void *);    /* in: asked between groups (may be NULL) */
    void *user;
    mf_srv_embed_take take;       /* in: where the vectors go, in input order */
    void *arg;
    int status;                   /* out: 200, 499 (cancelled), or an error's status with err filled */
    mf_srv_err err;
    char *body;                   /* out: the answer on 200 (malloc'd), from mf_srv_embed_run / _rerank_run */
} mf_srv_pooled;

/* Engine thread: the inputs of parts p[0..n) in order through mf_embed_batch with pooling from sequence seq on,
 * MF_SRV_EMBED_GROUP inputs a call whichever request they belong to; each part's run of a group is handed to
 * its take.  A part that is cancelled, or whose take fails, drops out; a group that fails is run again one
 * request at a time, so an error is only its own request's ("WHAT a..b: why", naming param; NULL: "input" on
 * OpenAI's route).  Sets every p[i].status (callers start them at 200). */
void mf_srv_embed_groups(mf_context *ctx, mf_seq_id seq, mf_pooling pooling, mf_srv_pooled *p, int n,
                         const char *what, const char *param);
/* Ends an answer built in b: on 200 b's text NUL-terminated into *body (malloc'd) and 200; otherwise b is
 * freed and the status returned (a 500 without a message says out of memory). */
int mf_srv_embed_answer(int status, mf_srv_buf *b, char **body, mf_srv_err *e);
/* s as a JSON string literal appended to b; false: out of memory. */
bool mf_srv_buf_add_json_str(mf_srv_buf *b, const char *s);

/* Engine thread: embeds every input of the n requests p[i].req with pooling (mf_srv_embed_groups: packed
 * across requests), then writes each answer (p[i].body).  Sets p[i].status: 200, 499 without a body (cancelled),
 * or an error's status with p[i].err.  p[i].take and arg are its own.  Pooling none (the parser took such
 * requests on the native route only, normalize -1): each input alone through mf_embed_tokens, every token's raw
 * vector in the native shape. */
void mf_srv_embed_run(mf_context *ctx, mf_seq_id seq, mf_pooling pooling, mf_srv_pooled *p, int n,
                      const char *model_name);

#endif
