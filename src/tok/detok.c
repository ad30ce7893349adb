/* Decoding token ids to bytes, whole and streaming. */
#include "tok/tok_impl.h"

#include <stdlib.h>
#include <string.h>

static bool renders(const mf_tok *t, int32_t id, unsigned flags) {
    return t->type[id] != MF_TOKT_CONTROL || (flags & MF_TOK_DECODE_SPECIAL);
}

int mf_tok_decode(const mf_tok *t, const int32_t *ids, size_t n, unsigned flags, char **out, size_t *len,
                  mf_error *err) {
    *out = NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return mf_err(err, MF_E_RANGE, "token id %d at position %zu is outside the vocabulary (0 .. %d)", ids[i], i,
                          t->n_vocab - 1);
        if (renders(t, ids[i], flags)) total += t->piece_len[ids[i]];
    }
    char *o = malloc(total + 1);
    if (!o) return mf_err(err, MF_E_NOMEM, "detokenize: out of memory for %zu bytes", total + 1);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!renders(t, ids[i], flags)) continue;
        memcpy(o + at, t->piece_blob + t->piece_off[ids[i]], t->piece_len[ids[i]]);
        at += t->piece_len[ids[i]];
    }
    o[at] = 0;
    *out = o;
    if (len) *len = at;
    return 0;
}

void mf_tok_stream_init(mf_tok_stream *s, const mf_tok *t, unsigned flags) {
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->flags = flags;
}

void mf_tok_stream_free(mf_tok_stream *s) {
    if (!s) return;
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
    s->n_held = 0;
}

static int reserve(mf_tok_stream *s, size_t need, mf_error *err) {
    if (need <= s->cap) return 0;
    size_t nc = s->cap ? s->cap : 64;
    while (nc < need) nc *= 2;
    char *p = realloc(s->buf, nc);
    if (!p) return mf_err(err, MF_E_NOMEM, "detokenize: out of memory for %zu bytes", nc);
    s->buf = p;
    s->cap = nc;
    return 0;
}

int mf_tok_stream_push(mf_tok_stream *s, int32_t id, const char **out, size_t *len, mf_error *err) {
    const mf_tok *t = s->tok;
    *out = "";
    *len = 0;
    if (id < 0 || id >= t->n_vocab)
        return mf_err(err, MF_E_RANGE, "token id %d is outside the vocabulary (0 .. %d)", id, t->n_vocab - 1);
    size_t pl = renders(t, id, s->flags) ? t->piece_len[id] : 0;
    int rc = reserve(s, s->n_held + pl + 1, err);
    if (rc) return rc;
    memcpy(s->buf, s->held, s->n_held);
    memcpy(s->buf + s->n_held, t->piece_blob + t->piece_off[id], pl);
    size_t total = s->n_held + pl;
    size_t ready = mf_tok_utf8_complete_prefix((const unsigned char *)s->buf, total);
    s->n_held = total - ready; /* at most 3 bytes */
    memcpy(s->held, s->buf + ready, s->n_held);
    s->buf[ready] = 0;
    *out = s->buf;
    *len = ready;
    return 0;
}

int mf_tok_stream_flush(mf_tok_stream *s, const char **out, size_t *len, mf_error *err) {
    int rc = reserve(s, s->n_held + 1, err);
    if (rc) return rc;
    memcpy(s->buf, s->held, s->n_held);
    s->buf[s->n_held] = 0;
    *out = s->buf;
    *len = s->n_held;
    s->n_held = 0;
    return 0;
}
