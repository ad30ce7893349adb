/* grammar/match: following a compiled grammar one code point at a time.
 *
 * The state is a set of stacks (llama.cpp's llama_grammar form): each stack lists the elements still to
 * match, innermost on top, and every top is a character test, because references are expanded as soon as
 * they surface (one stack per alternative).  An empty stack means the text so far is a complete sentence.
 * A code point moves each stack whose top accepts it one element on and drops the others.  Bytes arrive as
 * token pieces, which may end inside a UTF-8 character: those bytes wait in `pend`, and the piece counts as
 * accepted when some character that starts with them could come next.
 *
 * mf_gmatch_accepts runs for thousands of tokens per sampled token, so nothing here allocates once the
 * scratch has grown: sets live in reused buffers and stacks under construction in one bump area. */
#include "grammar/grammar_impl.h"

#include <stdlib.h>
#include <string.h>

enum {
    MAX_STACKS = 4096,        /* stacks in one set: more means a grammar too ambiguous to follow */
    MAX_EXPANSIONS = 1 << 20, /* reference expansions per code point, for the same reason */
};

typedef struct {
    uint32_t *v; /* the stacks' elements, one after another */
    size_t n, cap;
    uint32_t *off, *len; /* per stack */
    size_t ns, caps;
} sset;

struct mf_gmatch {
    const mf_grammar *g;
    sset cur;
    unsigned char pend[4]; /* the start of a character the last piece did not finish */
    int n_pend;
    sset step[2];  /* scratch: the sets after each code point of a piece being tried */
    uint32_t *tmp; /* scratch: stacks being built */
    size_t tmp_n, tmp_cap;
    unsigned char *buf; /* scratch: pend + a piece */
    size_t buf_cap;
    long budget; /* expansions left for this code point */
    bool failed; /* out of memory or over a limit during the current step */
};

/* ---------------- sets ---------------- */

static bool reserve(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q, *cap = c;
    return true;
}

static void sset_free(sset *s) {
    free(s->v);
    free(s->off);
    free(s->len);
}

/* Adds st[0..len) unless the set has it already. */
static void sset_add(mf_gmatch *m, sset *d, const uint32_t *st, size_t len) {
    for (size_t i = 0; i < d->ns; i++) /* (an empty stack may come as NULL: no pointer arithmetic on it) */
        if (d->len[i] == len && (!len || !memcmp(d->v + d->off[i], st, len * sizeof *st))) return;
    if (d->ns >= MAX_STACKS) {
        m->failed = true;
        return;
    }
    size_t caps = d->caps;
    if (!reserve((void **)&d->v, &d->cap, d->n + len, sizeof *d->v) ||
        !reserve((void **)&d->off, &caps, d->ns + 1, sizeof *d->off) ||
        !reserve((void **)&d->len, &d->caps, d->ns + 1, sizeof *d->len)) {
        m->failed = true;
        return;
    }
    if (len) memcpy(d->v + d->n, st, len * sizeof *st);
    d->off[d->ns] = (uint32_t)d->n;
    d->len[d->ns++] = (uint32_t)len;
    d->n += len;
}

static bool tmp_push(mf_gmatch *m, uint32_t x) {
    if (!reserve((void **)&m->tmp, &m->tmp_cap, m->tmp_n + 1, sizeof *m->tmp)) return m->failed = true, false;
    m->tmp[m->tmp_n++] = x;
    return true;
}

/* Appends n elements to tmp: from a set's buffer (src), or from tmp itself at index from (src NULL; an
 * index, since growing tmp moves it). */
static bool tmp_copy(mf_gmatch *m, const uint32_t *src, size_t from, size_t n) {
    if (!reserve((void **)&m->tmp, &m->tmp_cap, m->tmp_n + n, sizeof *m->tmp)) return m->failed = true, false;
    if (n) memmove(m->tmp + m->tmp_n, src ? src : m->tmp + from, n * sizeof *m->tmp);
    m->tmp_n += n;
    return true;
}

/* ---------------- expansion ---------------- */

/* The stack tmp[base .. tmp_n) with references on top replaced, alternative by alternative, until a
 * character test (or nothing) is on top; each result goes into d.  tmp_n is back at its entry value on
 * return. */
static void expand(mf_gmatch *m, sset *d, size_t base) {
    const mf_grammar *g = m->g;
    const size_t len = m->tmp_n - base;
    if (len == 0 || g->el[m->tmp[m->tmp_n - 1]].type != GE_REF) {
        sset_add(m, d, len ? m->tmp + base : NULL, len);
        return;
    }
    if (--m->budget < 0) {
        m->failed = true;
        return;
    }
    const uint32_t pos = m->tmp[m->tmp_n - 1];
    const bool more = !mf_ge_is_end(&g->el[pos + 1]);
    for (uint32_t a = g->rule[g->el[pos].value];; a++) {
        const size_t nb = m->tmp_n;
        if (!tmp_copy(m, NULL, base, len - 1)) return;
        if (more && !tmp_push(m, pos + 1)) return;
        if (!mf_ge_is_end(&g->el[a]) && !tmp_push(m, a)) return;
        expand(m, d, nb);
        m->tmp_n = nb;
        if (m->failed) return;
        while (!mf_ge_is_end(&g->el[a])) a++;
        if (g->el[a].type == GE_END) break;
    }
}

static bool match_cp(const mf_grammar *g, const mf_ge *e, uint32_t cp) {
    if (e->type == GE_CHAR) return e->value == cp;
    if (e->type == GE_ANY) return true;
    const mf_gclass *c = &g->cls[e->value];
    bool in = false;
    for (uint32_t i = 0; i < c->n && !in; i++)
        in = cp >= g->ranges[c->first + i].lo && cp <= g->ranges[c->first + i].hi;
    return in != c->neg;
}

/* Some code point in [lo, hi] passes the test. */
static bool match_some(const mf_grammar *g, const mf_ge *e, uint32_t lo, uint32_t hi) {
    if (e->type == GE_CHAR) return e->value >= lo && e->value <= hi;
    if (e->type == GE_ANY) return true;
    const mf_gclass *c = &g->cls[e->value];
    const mf_grange *r = g->ranges + c->first;
    if (!c->neg) {
        for (uint32_t i = 0; i < c->n; i++)
            if (r[i].lo <= hi && r[i].hi >= lo) return true;
        return false;
    }
    for (uint32_t x = lo;;) { /* negated: look for a code point no range covers */
        uint32_t i = 0;
        while (i < c->n && !(x >= r[i].lo && x <= r[i].hi)) i++;
        if (i == c->n) return true;
        if (r[i].hi >= hi) return false;
        x = r[i].hi + 1;
    }
}

/* dst = every stack of src moved past cp (dst must not be src). */
static void step_set(mf_gmatch *m, const sset *src, uint32_t cp, sset *dst) {
    const mf_grammar *g = m->g;
    dst->n = dst->ns = 0;
    m->budget = MAX_EXPANSIONS;
    for (size_t i = 0; i < src->ns && !m->failed; i++) {
        const uint32_t len = src->len[i];
        if (!len) continue;
        const uint32_t *st = src->v + src->off[i];
        if (!match_cp(g, &g->el[st[len - 1]], cp)) continue;
        const size_t base = m->tmp_n;
        const uint32_t next = st[len - 1] + 1;
        if (!tmp_copy(m, st, 0, len - 1)) break;
        if (!mf_ge_is_end(&g->el[next]) && !tmp_push(m, next)) break;
        expand(m, dst, base);
        m->tmp_n = base;
    }
}

static bool any_top(const mf_grammar *g, const sset *s, uint32_t lo, uint32_t hi) {
    for (size_t i = 0; i < s->ns; i++) {
        const uint32_t len = s->len[i];
        if (len && match_some(g, &g->el[s->v[s->off[i] + len - 1]], lo, hi)) return true;
    }
    return false;
}

/* ---------------- UTF-8 ---------------- */

/* One character at s[0..n): its length and code point; 0 when s holds only the start of a well-formed
 * character (*lo..*hi: the code points it can still become); -1 when the bytes are not UTF-8. */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp, uint32_t *lo, uint32_t *hi) {
    const unsigned char b = s[0];
    if (b < 0x80) return *cp = b, 1;
    int len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (!len) return -1;
    uint32_t c = len == 2 ? b & 0x1Fu : len == 3 ? b & 0x0Fu : b & 0x07u;
    int i = 1;
    for (; i < len && (size_t)i < n; i++) {
        const unsigned char x = s[i];
        /* the second byte's narrower ranges rule out overlong forms, surrogates and > U+10FFFF */
        unsigned char min = 0x80, max = 0xBF;
        if (i == 1) {
            if (b == 0xE0)
                min = 0xA0;
            else if (b == 0xED)
                max = 0x9F;
            else if (b == 0xF0)
                min = 0x90;
            else if (b == 0xF4)
                max = 0x8F;
        }
        if (x < min || x > max) return -1;
        c = c << 6 | (x & 0x3Fu);
    }
    if (i == len) return *cp = c, len;
    /* the code points still possible: the bits so far, then anything - within what a lead byte alone
     * allows (E0 and F0 rule out overlong forms, ED surrogates, F4 everything above U+10FFFF) */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    const int missing = 6 * (len - i);
    *lo = c << missing;
    *hi = *lo | ((1u << missing) - 1);
    if (*lo < min_cp[len]) *lo = min_cp[len];
    if (i == 1 && b == 0xED) *hi = 0xD7FF;
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
    return 0;
}

/* ---------------- the walk ---------------- */

/* Follows pend + bytes from the current set.  Returns the set after the last whole character (the current
 * one when there is none) or NULL when the bytes are refused; *tail is how many bytes at the end start a
 * character that has not finished. */
static const sset *walk(mf_gmatch *m, const char *bytes, size_t n, size_t *tail) {
    const unsigned char *s = (const unsigned char *)bytes;
    size_t len = n;
    if (m->n_pend) {
        if (!reserve((void **)&m->buf, &m->buf_cap, n + 4, 1)) return NULL;
        memcpy(m->buf, m->pend, (size_t)m->n_pend);
        memcpy(m->buf + m->n_pend, bytes, n);
        s = m->buf, len = n + (size_t)m->n_pend;
    }
    const sset *at = &m->cur;
    int k = 0;
    m->failed = false;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0, lo = 0, hi = 0;
        int c = utf8_next(s + i, len - i, &cp, &lo, &hi);
        if (c < 0) return NULL;
        if (c == 0) { /* the piece ends inside a character */
            if (!any_top(m->g, at, lo, hi)) return NULL;
            *tail = len - i;
            return at;
        }
        if (!any_top(m->g, at, cp, cp)) return NULL; /* most pieces end here, before any copying */
        sset *next = &m->step[k];
        k ^= 1;
        step_set(m, at, cp, next);
        if (m->failed || !next->ns) return NULL;
        at = next;
        i += (size_t)c;
    }
    *tail = 0;
    return at;
}

bool mf_gmatch_accepts(mf_gmatch *m, const char *bytes, size_t n) {
    size_t tail;
    return n == 0 || walk(m, bytes, n, &tail) != NULL;
}

static void sset_swap(sset *a, sset *b) {
    sset t = *a;
    *a = *b, *b = t;
}

int mf_gmatch_advance(mf_gmatch *m, const char *bytes, size_t n, mf_error *err) {
    if (n == 0) return 0;
    size_t tail = 0;
    const sset *to = walk(m, bytes, n, &tail);
    if (!to)
        return mf_err(err, m->failed ? MF_E_UNSUPPORTED : MF_E_INVAL,
                      m->failed
                          ? "grammar: the text is ambiguous beyond %d parallel parses (or memory ran out); "
                            "simplify the grammar"
                          : "grammar: the text does not continue the grammar (%d)",
                      MAX_STACKS);
    if (to != &m->cur) sset_swap(&m->cur, (sset *)to);
    const unsigned char *s = m->n_pend ? m->buf : (const unsigned char *)bytes;
    const size_t len = n + (size_t)m->n_pend;
    memcpy(m->pend, s + len - tail, tail);
    m->n_pend = (int)tail;
    return 0;
}

bool mf_gmatch_can_end(const mf_gmatch *m) {
    if (m->n_pend) return false;
    for (size_t i = 0; i < m->cur.ns; i++)
        if (!m->cur.len[i]) return true;
    return false;
}

bool mf_gmatch_must_end(const mf_gmatch *m) {
    return mf_gmatch_can_end(m) && m->cur.ns == 1;
}

/* ---------------- lifetime ---------------- */

void mf_gmatch_reset(mf_gmatch *m) {
    const mf_grammar *g = m->g;
    m->cur.n = m->cur.ns = 0;
    m->n_pend = 0;
    m->failed = false;
    m->budget = MAX_EXPANSIONS;
    for (uint32_t a = g->rule[g->root];; a++) { /* one stack per alternative of root */
        m->tmp_n = 0;
        if (!mf_ge_is_end(&g->el[a]) && !tmp_push(m, a)) return;
        expand(m, &m->cur, 0);
        while (!mf_ge_is_end(&g->el[a])) a++;
        if (g->el[a].type == GE_END) break;
    }
    m->tmp_n = 0;
}

int mf_gmatch_new(const mf_grammar *g, mf_gmatch **out, mf_error *err) {
    *out = NULL;
    mf_gmatch *m = calloc(1, sizeof *m);
    if (!m) return mf_err(err, MF_E_NOMEM, "grammar: out of memory for a matcher");
    m->g = g;
    mf_gmatch_reset(m);
    if (m->failed) {
        mf_gmatch_free(m);
        return mf_err(err, MF_E_UNSUPPORTED,
                      "grammar: its start expands to more than %d parallel parses (or "
                      "memory ran out); simplify the grammar",
                      MAX_STACKS);
    }
    *out = m;
    return 0;
}

void mf_gmatch_free(mf_gmatch *m) {
    if (!m) return;
    sset_free(&m->cur);
    sset_free(&m->step[0]);
    sset_free(&m->step[1]);
    free(m->tmp);
    free(m->buf);
    free(m);
}

bool mf_grammar_matches(const mf_grammar *g, const char *text, size_t len) {
    mf_gmatch *m;
    if (mf_gmatch_new(g, &m, NULL)) return false;
    bool ok = !mf_gmatch_advance(m, text, len, NULL) && mf_gmatch_can_end(m);
    mf_gmatch_free(m);
    return ok;
}
