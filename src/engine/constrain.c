/* A generator's grammar (mf_gen_set_grammar): which tokens may come next, and the grammar's state moving
 * past each committed token.  A token may come next when its text continues a sentence of the grammar; an
 * end-of-generation token only where the text so far is a whole sentence; control tokens never (their
 * text is markup, not output).  A reasoning model may think first: with a free block (<think>, </think>) a
 * turn whose first token is the opening one is free until the closing text has been generated, and only
 * what follows is held to the grammar; a turn that starts otherwise is held from its first token.
 * Also the public wrappers of src/grammar. */
#include "engine/engine_impl.h"

#include "grammar/grammar.h"

#include <stdlib.h>
#include <string.h>

/* Where a turn stands: nothing committed yet (the free block may still open), held to the grammar, or inside
 * the free block (waiting for its close). */
enum { AT_START, HELD, FREE };

struct mf_constraint {
    const mf_model *model;
    const mf_tok *tok;
    mf_gmatch *m;
    int32_t open_id; /* the one token that opens the free block, or -1 */
    char *close;     /* the text that closes it */
    size_t close_len;
    char *win; /* in the free block: its last close_len - 1 bytes (the close may span tokens) */
    size_t n_win;
    int phase;
    /* A piece is accepted only if its first byte alone is (the matcher's language is closed under
     * prefixes), so per grammar state one pass over the 256 bytes lets a scan of the whole vocabulary
     * turn most tokens away with two loads. */
    uint8_t *first; /* per token: its piece's first byte; 0xFF (never a UTF-8 byte) for tokens always asked:
                       end of generation, the free block's opening */
    int32_t n_vocab;
    bool first_ok[256];
    bool first_known; /* first_ok is this state's */
};

int mf_grammar_new(const char *gbnf, size_t len, mf_grammar **out, mf_error *err) {
    return mf_grammar_compile(gbnf, len, out, err);
}

int mf_grammar_from_json_schema(const char *schema, size_t len, mf_grammar **out, mf_error *err) {
    *out = NULL;
    char *gbnf = NULL;
    int rc = mf_json_schema_to_gbnf(schema, len, &gbnf, err);
    if (!rc) rc = mf_grammar_compile(gbnf, strlen(gbnf), out, err);
    free(gbnf);
    return rc;
}

void mf_grammar_free(mf_grammar *g) {
    mf_grammar_release(g);
}

void mf_constraint_free(mf_constraint *c) {
    if (!c) return;
    free(c->first);
    mf_gmatch_free(c->m);
    free(c->close);
    free(c->win);
    free(c);
}

void mf_constraint_reset(mf_constraint *c) {
    mf_gmatch_reset(c->m);
    c->first_known = false;
    c->n_win = 0;
    c->phase = c->open_id >= 0 ? AT_START : HELD;
}

int mf_constraint_new(const mf_model *model, const mf_grammar *g, const char *open, const char *close,
                      mf_constraint **out, mf_error *err) {
    *out = NULL;
    if (!model->tok)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "a grammar needs the model's tokenizer, and this model has none (%s)", model->tok_why);
    if (!open != !close || (open && (!*open || !*close)))
        return mf_err(err, MF_E_INVAL,
                      "a grammar's free block needs both its opening and closing text, non-empty "
                      "(or neither)");
    int32_t open_id = open ? mf_tok_find(model->tok, open, strlen(open)) : -1;
    if (open && open_id < 0)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "a grammar's free block opens with '%s', which is not one token of "
                      "this model (a reasoning model's <think> is)",
                      open);
    mf_constraint *c = calloc(1, sizeof *c);
    if (!c) return mf_err(err, MF_E_NOMEM, "out of memory for a grammar's state");
    c->model = model;
    c->tok = model->tok;
    c->open_id = open_id;
    int rc = mf_gmatch_new(g, &c->m, err);
    const int32_t n_vocab = c->n_vocab = mf_tok_n_vocab(c->tok);
    if (!rc && !(c->first = malloc((size_t)n_vocab)))
        rc = mf_err(err, MF_E_NOMEM, "out of memory for a grammar's table of %d tokens", n_vocab);
    for (int32_t id = 0; !rc && id < n_vocab; id++) {
        size_t len;
        const char *piece = mf_tok_piece(c->tok, id, &len);
        c->first[id] = piece && len ? (uint8_t)piece[0] : 0;
        if (id == open_id || mf_model_token_is_eog(model, id)) c->first[id] = 0xFF;
    }
    if (!rc && close) {
        c->close_len = strlen(close);
        if (!(c->close = strdup(close)) || !(c->win = malloc(c->close_len)))
            rc = mf_err(err, MF_E_NOMEM, "out of memory for a grammar's free block");
    }
    if (rc) {
        mf_constraint_free(c);
        return rc;
    }
    mf_constraint_reset(c);
    *out = c;
    return 0;
}

bool mf_constraint_active(const mf_constraint *c) {
    return c->phase != FREE;
}

static void know_first_bytes(mf_constraint *c) {
    for (int b = 0; b < 256; b++) {
        const char x = (char)b;
        c->first_ok[b] = mf_gmatch_accepts(c->m, &x, 1);
    }
    c->first_ok[0xFF] = true;
    c->first_known = true;
}

int32_t mf_constraint_maybe(void *user, int32_t *ids) {
    mf_constraint *c = user;
    if (!c->first_known) know_first_bytes(c);
    int32_t n = 0;
    for (int32_t id = 0; id < c->n_vocab; id++) {
        ids[n] = id;
        n += c->first_ok[c->first[id]];
    }
    return n;
}

bool mf_constraint_allow(void *user, int32_t id) {
    mf_constraint *c = user;
    if (c->phase == AT_START && id == c->open_id) return true;
    if (mf_model_token_is_eog(c->model, id)) return mf_gmatch_can_end(c->m);
    if (!c->first_known) know_first_bytes(c);
    if (id < 0 || id >= c->n_vocab || !c->first_ok[c->first[id]]) return false;
    const mf_tok_type t = mf_tok_type_of(c->tok, id);
    if (t != MF_TOKT_NORMAL && t != MF_TOKT_USER_DEFINED && t != MF_TOKT_BYTE) return false;
    size_t len;
    const char *piece = mf_tok_piece(c->tok, id, &len);
    return piece && len && mf_gmatch_accepts(c->m, piece, len);
}

/* In the free block: looks for its close across the window and this piece; on a find, the grammar starts
 * and takes whatever the piece holds after it. */
static int watch(mf_constraint *c, const char *piece, size_t len, mf_error *err) {
    const size_t n = c->n_win + len;
    char *all = malloc(n ? n : 1);
    if (!all)
        return mf_err(err, MF_E_NOMEM,
                      "out of memory while watching for the close of a grammar's free block");
    memcpy(all, c->win, c->n_win);
    memcpy(all + c->n_win, piece, len);
    const char *hit = memmem(all, n, c->close, c->close_len);
    int rc = 0;
    if (hit) {
        c->phase = HELD;
        const size_t after = (size_t)(hit - all) + c->close_len;
        if (mf_gmatch_advance(c->m, all + after, n - after, NULL))
            rc = mf_err(err, MF_E_UNSUPPORTED,
                        "generation: the token that closed the free block ('%s') goes on with "
                        "text the grammar does not allow",
                        c->close);
    } else {
        c->n_win = MF_MIN(n, c->close_len - 1);
        memcpy(c->win, all + n - c->n_win, c->n_win);
    }
    free(all);
    return rc;
}

int mf_constraint_commit(mf_constraint *c, int32_t id, mf_error *err) {
    if (mf_model_token_is_eog(c->model, id)) return 0;
    size_t len;
    const char *piece = mf_tok_piece(c->tok, id, &len);
    if (!piece) return 0;
    c->first_known = false;
    if (c->phase == FREE) return watch(c, piece, len, err);
    if (c->phase == AT_START && id == c->open_id) {
        c->phase = FREE;
        return 0;
    }
    c->phase = HELD;
    int rc = mf_gmatch_advance(c->m, piece, len, err);
    if (rc)
        return mf_err(err, rc,
                      "generation: token %d does not continue the grammar (the sampler chose it "
                      "outside the grammar's tokens: a bug)",
                      id);
    return 0;
}
