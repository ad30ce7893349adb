/* server/request: one HTTP request body (JSON) -> a validated generation request.
 *
 * Pure: no engine, no sockets, so every rule is unit-tested and fuzzed.  Field names and meanings follow
 * OpenAI's chat/completions and completions APIs plus llama-server's extras.  The rules:
 *   - a body that is not UTF-8, not JSON, or not an object is refused (400);
 *   - a known field with the wrong type or an out-of-range value is refused, naming the field and value;
 *   - an unknown field is ignored (as OpenAI does);
 *   - a known field the engine cannot honour (images, a JSON Schema keyword the grammar compiler lacks, ...)
 *     is refused, never silently dropped. */
#ifndef MF_SERVER_REQUEST_H
#define MF_SERVER_REQUEST_H

#include "minfer.h"
#include "server/utf8.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MF_SRV_CHAT,       /* POST /v1/chat/completions */
    MF_SRV_COMPLETION, /* POST /v1/completions */
    MF_SRV_NATIVE,     /* POST /completion (llama-server's own shape) */
    MF_SRV_INFILL,     /* POST /infill (llama-server's fill-in-the-middle; answered as /completion) */
} mf_srv_kind;

/* The shape a kind is answered in: /infill's is /completion's. */
static inline mf_srv_kind mf_srv_shape(mf_srv_kind k) {
    return k == MF_SRV_INFILL ? MF_SRV_NATIVE : k;
}

enum { MF_SRV_MAX_STOP = 16, MF_SRV_MAX_N = 16, MF_SRV_MAX_TOP_LOGPROBS = 20, MF_SRV_MAX_RESPONSE_FIELDS = 64 };
/* dry_sequence_breakers: at most this many strings, each at most MF_SRV_MAX_BREAKER_BYTES bytes (llama.cpp
 * cuts longer ones at 40; minfer refuses them) */
enum { MF_SRV_MAX_BREAKERS = 64, MF_SRV_MAX_BREAKER_BYTES = 40 };

/* One logit_bias entry as sent: a token id (text NULL), or a text each of whose tokens gets the bias
 * (llama-server's string keys).  bias is -INFINITY for a ban (false). */
typedef struct {
    int64_t token;
    char *text;
    float bias;
} mf_srv_bias;

/* One input_extra chunk of /infill: a file of the repository (filename "tmp" when not given). */
typedef struct {
    char *filename, *text;
} mf_srv_extra;

typedef struct {
    mf_srv_kind kind;
    /* Fill in the middle: /infill, or /v1/completions with OpenAI's 'suffix' (its prompt is the prefix then).
     * The prompt becomes the model's FIM layout (server/infill.h). */
    bool fim;
    char *input_prefix, *input_suffix;
    mf_srv_extra *extra;
    int32_t n_extra;
    /* The prompt: chat messages (kind CHAT), or a text, or token ids (the other kinds). */
    mf_chat_message *msgs;
    int32_t n_msgs;
    char *prompt;     /* NULL when tokens are given; /infill: the text after the prefix ("" when absent) */
    mf_token *tokens; /* NULL when text is given */
    int32_t n_tokens;
    int32_t max_tokens; /* -1: until end of generation or the context is full */
    mf_sampler_params sp; /* sp.logit_bias points at logit_bias once mf_srv_req_resolve_bias has run */
    bool seed_given;
    mf_srv_bias *bias; /* logit_bias as sent */
    int32_t n_bias;
    mf_logit_bias *logit_bias; /* resolved against the vocabulary */
    /* DRY's sequence breakers as sent (NULL: llama-server's defaults), and the resolved set when the request
     * built its own (server/breakers.h); sp.dry_breakers points at the resolved set once resolved */
    char **dry_seq;
    int32_t n_dry_seq;
    mf_dry_breakers *dry_own;
    char *stop[MF_SRV_MAX_STOP];
    int32_t n_stop;
    bool stream, include_usage;
    bool logprobs;        /* return the chosen tokens' log-probabilities */
    bool post_probs;      /* ... as the sampler chain's probabilities after its last stage (post_sampling_probs) */
    int32_t top_logprobs; /* and this many alternatives per position */
    int32_t n;            /* choices sharing one prompt prefill */
    bool cache_prompt;    /* reuse cached prefixes (default true, as llama-server) */
    int32_t id_slot;      /* -1: any */
    int32_t n_cache_reuse; /* --cache-reuse's run length for this request (0 off); -1: the server's */
    int enable_thinking;  /* -1 template default, 0 off, 1 on */
    bool ignore_eos;
    char *model; /* as sent (may be NULL) */
    /* tool calling (chat): each tool's JSON as sent (compact); tool_choice "none" renders none and parses no
     * call; parallel_tool_calls false keeps the first call only */
    char **tools;
    int32_t n_tools;
    bool parallel_tool_calls;
    /* structured output: the grammar the answer must be a sentence of (GBNF, checked to compile), from
     * 'grammar', 'json_schema', response_format json_object / json_schema, or tool_choice "required" / a
     * named function; NULL: none.  constraint names the field it came from. */
    char *gbnf;
    const char *constraint;
    bool tool_choice_required; /* tool_choice "required" */
    char *tool_choice_name;    /* tool_choice naming a function */
    /* llama-server's code-completion fields (llama.vim, llama.vscode): the generator's limits (0: off), the
     * infill sampler stage ('samplers' lists it; sp.infill is set by mf_srv_req_resolve_infill) */
    int32_t n_indent;
    double t_max_predict_ms;
    bool infill_stage;
    /* the answer's shape: the tokens too (/completion's "tokens"), timings on every streamed chunk, and the
     * answer cut to these paths ("timings/prompt_n": inside "timings"; given but empty: {}) */
    bool return_tokens, timings_per_token;
    char **response_fields;
    int32_t n_response_fields;
    bool response_fields_given;
} mf_srv_req;

/* A refused request: HTTP status, the OpenAI error type, the offending field (may be "") and a message
 * that names the value and the way out. */
typedef struct {
    int status;
    const char *type; /* "invalid_request_error", "not_found_error", ... */
    char param[64];
    char msg[400];
} mf_srv_err;

/* Parses body[0..len) for the route kind.  On failure fills *e (status 400) and leaves *r freed. */
int mf_srv_req_parse(mf_srv_kind kind, const char *body, size_t len, mf_srv_req *r, mf_srv_err *e);
/* The same over the server's sampler defaults (its command line); seed_given: they name a seed. */
int mf_srv_req_parse_over(mf_srv_kind kind, const char *body, size_t len, const mf_sampler_params *defaults,
                          bool seed_given, mf_srv_req *r, mf_srv_err *e);
void mf_srv_req_free(mf_srv_req *r);
/* The request's logit_bias against a vocabulary: ids checked to be in it, texts tokenized (no special tokens,
 * as llama-server), the list checked by the sampler (not every token banned); sp then carries it.  The
 * model may be NULL for id-only lists (tests). */
int mf_srv_req_resolve_bias(mf_srv_req *r, const mf_model *model, int32_t n_vocab, mf_srv_err *e);

/* The infill stage a request's 'samplers' lists, against the server's view of the vocabulary (NULL when it has
 * none: refused with why); then the sampler's own checks (top_k bounds the stage), as 400s naming 'samplers'. */
int mf_srv_req_resolve_infill(mf_srv_req *r, const mf_infill_vocab *v, const char *why, int32_t n_vocab,
                              mf_srv_err *e);

/* Sets *e; returns -1 (so a parser can `return mf_srv_fail(...)`). */
int mf_srv_fail(mf_srv_err *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
