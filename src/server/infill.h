/* server/infill: the fill-in-the-middle prompt of /infill (and of OpenAI's 'suffix' on /v1/completions), laid
 * out as llama-server lays it out (its format_prompt_infill, the repository-level pattern of Qwen2.5-Coder):
 *
 *     [<|repo_name|>myproject\n] (<|file_sep|>FILENAME\nTEXT)* <|file_sep|>filename\n   (the extra context)
 *     <|fim_prefix|>PREFIX PROMPT <|fim_suffix|>SUFFIX <|fim_middle|>
 *
 * cut to fit llama-server's ratios over a window W of 2048 tokens (llama-server's default batch; -b when
 * larger; at most half the context): the last 3W/4 tokens of the prefix, the first W/4 - 2 - (prompt) of the
 * suffix, and the last tokens of the extra context that leave W, twice max_tokens and the prompt room in the
 * context (llama-server leaves n_ctx - batch - 2 n_predict, which can overrun the context by a few tokens).
 */
#ifndef MF_SERVER_INFILL_H
#define MF_SERVER_INFILL_H

#include "minfer.h"
#include "server/request.h"

typedef struct {
    const mf_token *extra, *prefix, *prompt, *suffix;
    int32_t n_extra, n_prefix, n_prompt, n_suffix;
    mf_token pre, suf, mid;           /* the model's FIM tokens */
    int32_t window, n_ctx, n_predict; /* W; the context; max_tokens (-1: no limit, counted as 0) */
} mf_srv_fim;

/* The layout above from tokenized pieces (pure; *out malloc'd).  MF_E_NOMEM or 0. */
int mf_srv_fim_layout(const mf_srv_fim *f, mf_token **out, int32_t *n);

/* W for a server's -b and context. */
int32_t mf_srv_fim_window(int32_t n_batch, int32_t n_ctx);

/* The request's FIM prompt for this model: its pieces tokenized (prefix, suffix, extra texts and names as
 * plain text; the prompt with special tokens, as llama-server), laid out for n_batch and n_ctx.  A model
 * without the FIM tokens is refused with 501 naming the missing ones. */
int mf_srv_infill_tokens(const mf_model *model, const mf_srv_req *r, int32_t n_batch, int32_t n_ctx,
                         mf_token **out, int32_t *n, mf_srv_err *e);

#endif
