/* server/think: <think>...</think> splitting for streamed replies (see think.h). */
#include "server/think.h"

#include <stdlib.h>
#include <string.h>

static const char k_open[] = "<think>", k_close[] = "</think>";

bool mf_srv_buf_add(mf_srv_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) return false;
        b->s = p, b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return true;
}

void mf_srv_buf_free(mf_srv_buf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

static bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t mf_srv_partial_tag(const char *s, size_t n, const char *tag) {
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && !memcmp(s + n - k, tag, k)) return k;
    return 0;
}

void mf_srv_buf_take(mf_srv_buf *b, size_t k) {
    if (!k) return;
    memmove(b->s, b->s + k, b->n - k);
    b->n -= k;
    if (b->s) b->s[b->n] = 0;
}

static bool step(mf_srv_think *t, mf_srv_buf *content, mf_srv_buf *reasoning) {
    mf_srv_buf *h = &t->hold;
    for (;;) {
        if (t->state == 0) {
            size_t i = 0;
            while (i < h->n && blank(h->s[i])) i++;
            size_t rest = h->n - i, ol = strlen(k_open);
            if (rest < ol && !memcmp(h->s + i, k_open, rest)) return true; /* could still be <think> */
            if (rest >= ol && !memcmp(h->s + i, k_open, ol)) {
                mf_srv_buf_take(h, i + ol);
                t->state = 1;
                continue;
            }
            t->state = 3; /* a plain answer: the held text is content, blanks included */
            continue;
        }
        if (t->state == 1) {
            char *end = h->n ? memmem(h->s, h->n, k_close, strlen(k_close)) : NULL;
            if (end) {
                size_t k = (size_t)(end - h->s);
                if (!mf_srv_buf_add(reasoning, h->s, k)) return false;
                mf_srv_buf_take(h, k + strlen(k_close));
                t->state = 2;
                continue;
            }
            size_t keep = mf_srv_partial_tag(h->s, h->n, k_close);
            if (!mf_srv_buf_add(reasoning, h->s, h->n - keep)) return false;
            mf_srv_buf_take(h, h->n - keep);
            return true;
        }
        if (t->state == 2) {
            size_t i = 0;
            while (i < h->n && blank(h->s[i])) i++;
            mf_srv_buf_take(h, i);
            if (h->n == 0) return true;
            t->state = 3;
        }
        bool ok = mf_srv_buf_add(content, h->s, h->n);
        mf_srv_buf_take(h, h->n);
        return ok;
    }
}

bool mf_srv_think_push(mf_srv_think *t, const char *s, size_t n, mf_srv_buf *content, mf_srv_buf *reasoning) {
    if (!mf_srv_buf_add(&t->hold, s, n)) return false;
    return step(t, content, reasoning);
}

bool mf_srv_think_flush(mf_srv_think *t, mf_srv_buf *content, mf_srv_buf *reasoning) {
    mf_srv_buf *h = &t->hold;
    bool ok = true;
    if (t->state == 1) ok = mf_srv_buf_add(reasoning, h->s, h->n);
    else if (t->state != 2) ok = mf_srv_buf_add(content, h->s, h->n);
    if (h->n) mf_srv_buf_take(h, h->n);
    return ok;
}

void mf_srv_think_free(mf_srv_think *t) { mf_srv_buf_free(&t->hold); }
