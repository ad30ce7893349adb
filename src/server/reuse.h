/* server/reuse: llama-server's --cache-reuse N (a request's n_cache_reuse).  Past the common prefix of a
 * slot's cached tokens and a new prompt, runs of at least N tokens that the cache holds further along are
 * moved to where the prompt has them (mf_seq_rm of the cells in between, mf_seq_add of the run: its K rows
 * re-roped), so they are not prefilled again.  Editor plugins (llama.vim, llama.vscode) need it: their
 * prompts keep chunks of context that slide as the ring of chunks turns.
 *
 * The moved rows were computed with the old text before them, so a reply can differ from the one a fresh
 * prefill gives, as in llama-server; hence it is off unless asked for.  The plan is llama-server's walk:
 * two heads, one in the cache and one in the prompt; a run of >= N matching tokens moves and both heads
 * pass it, a shorter one advances the cache head by one.  The prompt's last token is never covered (its
 * logits give the first token), which can shorten the last run below N, as llama-server's n_past-- does. */
#ifndef MF_SERVER_REUSE_H
#define MF_SERVER_REUSE_H

#include "minfer.h"

typedef struct {
    int32_t from, to, n; /* the cells at positions [from, from + n) move to [to, to + n) */
} mf_srv_move;

/* How many leading tokens a and b share (the slot choice's common prefix, and each run of the walk). */
int32_t mf_srv_common_prefix(const mf_token *a, int32_t na, const mf_token *b, int32_t nb);

/* The plan for a cache of n_cache tokens (token i at position i) and a prompt of n_prompt, past their
 * common prefix `keep` (keep <= both; the caller's, already capped at n_prompt - 1), runs of at least
 * min_chunk >= 1.  Returns the prompt tokens the cells will hold, keep included.  moves (room for
 * mf_srv_reuse_max_moves) receives the moves in order, *n_moves their count; both may be NULL to count. */
int32_t mf_srv_reuse_plan(const mf_token *cache, int32_t n_cache, const mf_token *prompt, int32_t n_prompt,
                          int32_t keep, int32_t min_chunk, mf_srv_move *moves, int32_t *n_moves);

/* Room the plan may need. */
int32_t mf_srv_reuse_max_moves(int32_t n_prompt, int32_t min_chunk);

/* Carries out a plan on sequence seq, whose cells hold the cache it was made from: every cell after the
 * moved runs is removed.  Returns the prompt tokens seq then holds (positions 0 .. ret-1): the plan's count,
 * or fewer when a move could not be made (mf_seq_add needs a free cell to copy a cell shared with another
 * sequence, and none was left); *err then says why. */
int32_t mf_srv_reuse_apply(mf_context *ctx, mf_seq_id seq, int32_t keep, const mf_srv_move *moves,
                           int32_t n_moves, mf_error *err);

#endif
