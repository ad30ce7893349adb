/* server/reuse: the chunk moves of --cache-reuse (reuse.h). */
#include "server/reuse.h"

int32_t mf_srv_reuse_max_moves(int32_t n_prompt, int32_t min_chunk) {
    return n_prompt / (min_chunk > 0 ? min_chunk : 1) + 1;
}

int32_t mf_srv_common_prefix(const mf_token *a, int32_t na, const mf_token *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

int32_t mf_srv_reuse_plan(const mf_token *cache, int32_t n_cache, const mf_token *prompt, int32_t n_prompt,
                          int32_t keep, int32_t min_chunk, mf_srv_move *moves, int32_t *n_moves) {
    int32_t hc = keep, hp = keep, nm = 0, last_n = 0;
    if (n_moves) *n_moves = 0;
    if (min_chunk < 1 || keep >= n_prompt - 1) return keep; /* nothing past the prefix may be covered */
    while (hc < n_cache && hp < n_prompt) {
        const int32_t n = mf_srv_common_prefix(cache + hc, n_cache - hc, prompt + hp, n_prompt - hp);
        if (n < min_chunk) {
            hc++;
            continue;
        }
        if (moves) moves[nm] = (mf_srv_move){hc, hp, n};
        nm++, last_n = n;
        hc += n, hp += n;
    }
    if (hp > n_prompt - 1) { /* the last run reached the prompt's end: its last token is run again */
        if (--last_n == 0) nm--;
        else if (moves) moves[nm - 1].n = last_n;
        hp = n_prompt - 1;
    }
    if (n_moves) *n_moves = nm;
    return hp;
}

int32_t mf_srv_reuse_apply(mf_context *ctx, mf_seq_id seq, int32_t keep, const mf_srv_move *moves,
                           int32_t n_moves, mf_error *err) {
    int32_t head = keep;
    for (int32_t i = 0; i < n_moves; i++) {
        const mf_srv_move *m = &moves[i];
        mf_seq_rm(ctx, seq, m->to, m->from); /* what the cache had between the runs */
        if (mf_seq_add(ctx, seq, m->from, m->from + m->n, m->to - m->from, err)) break;
        head = m->to + m->n;
    }
    mf_seq_rm(ctx, seq, head, -1);
    return head;
}
