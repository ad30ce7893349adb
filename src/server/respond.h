/* server/respond: the JSON bodies minfer answers with, in OpenAI's (and llama-server's) exact shapes.
 * Every function returns a malloc'd NUL-terminated string (NULL only when out of memory). */
#ifndef MF_SERVER_RESPOND_H
#define MF_SERVER_RESPOND_H

#include "server/request.h"
#include "server/toolcall.h"

#include <stdint.h>

/* {"error":{"message","type","param","code"}} (param null when empty). */
char *mf_srv_error_json(const mf_srv_err *e);

typedef struct {
    int32_t prompt_tokens, completion_tokens, cached_tokens;
    bool draft;                        /* the server drafts: timings.draft_n / draft_n_accepted are added */
    int32_t draft_n, draft_n_accepted; /* drafted tokens verified for this request, and those committed */
    /* llama-server's timings: the prompt's tokens computed (not reused) and the time from admission to the
     * first token, the tokens generated and the time from the first token on */
    bool timings;
    int32_t prompt_n, predicted_n;
    double prompt_ms, predicted_ms;
} mf_srv_usage;

/* One position's log-probability: the chosen token and its top alternatives (with post_sampling_probs: their
 * probabilities after the sampler chain). */
typedef struct {
    char *token; /* the token's piece as it is: it may be part of a character (the JSON's "token" then
                  * shows U+FFFD, its "bytes" the piece) */
    mf_token id;
    float logprob;
    int32_t n_top;
    char **top_token;
    float *top_logprob;
    mf_token *top_id;
} mf_srv_logprob;

/* Tool calls [from, to) of a choice; their ids are call_<id, 16 hex digits>_<index>. */
typedef struct {
    const mf_srv_tool_call *calls;
    int32_t from, to;
    uint64_t id;
} mf_srv_calls;

/* llama-server's /completion fields of one result. */
typedef struct {
    const mf_token *tokens; /* the generated ids (return_tokens), n_tokens of them */
    int32_t n_tokens;
    int32_t n_gen;              /* tokens_predicted */
    const char *stop_type;      /* "eos" | "word" | "limit" */
    const char *stopping_word;  /* the stop string that ended it, "" */
    bool truncated, has_new_line; /* ended by a full context; the text holds a newline */
} mf_srv_native;

typedef struct {
    char *content, *reasoning; /* reasoning: Qwen3's thinking, NULL when none */
    const char *finish_reason; /* "stop" | "length" | "tool_calls" */
    mf_srv_logprob *lp;        /* NULL when not asked */
    int32_t n_lp;
    mf_srv_calls calls;        /* chat: the answer's tool calls (content is null when it made calls only) */
    mf_srv_native nat;         /* /completion's own fields */
} mf_srv_choice;

typedef struct {
    mf_srv_kind kind;
    const char *id, *model;
    int64_t created;
    /* /completion's answer shape: the request's return_tokens, response_fields, and the lead slot; streamed:
     * the final chunk of a stream (its text and tokens went out before) */
    bool return_tokens, streamed;
    bool post_probs; /* completion_probabilities hold the chain's probabilities: "prob", "top_probs" */
    char *const *fields;
    int32_t n_fields;
    bool fields_given;
    int32_t id_slot;
} mf_srv_head;

/* The non-streaming answer: chat.completion or text_completion (or /completion's native shape). */
char *mf_srv_final_json(const mf_srv_head *h, const mf_srv_choice *ch, int32_t n_choices, const mf_srv_usage *u);

/* One streaming chunk for choice `index`: role on the first chunk of a chat choice, text and/or reasoning
 * deltas, the tool calls completed since the last chunk (calls may be NULL), finish_reason (NULL while
 * running).  lp: this chunk's positions (may be NULL). */
char *mf_srv_chunk_json(const mf_srv_head *h, int32_t index, bool first, const char *content, const char *reasoning,
                        const mf_srv_calls *calls, const char *finish_reason, const mf_srv_logprob *lp, int32_t n_lp);
/* /completion's streamed chunk: the text, its tokens, the count so far, timings when u is not NULL
 * (timings_per_token), completion_probabilities when lp is not NULL.  The last chunk is mf_srv_final_json's
 * with h->streamed. */
char *mf_srv_native_chunk_json(const mf_srv_head *h, const char *content, const mf_token *toks, int32_t n_toks,
                               int32_t n_gen, const mf_srv_usage *u, const mf_srv_logprob *lp, int32_t n_lp);
/* The final usage chunk of stream_options.include_usage ("choices": []). */
char *mf_srv_usage_chunk_json(const mf_srv_head *h, const mf_srv_usage *u);

#endif
