/* grammar/gbnf: GBNF text -> the flat rule form of grammar_impl.h (the dialect is in grammar.h).
 *
 * One pass of recursive descent writes each rule's elements into its own growable vector; groups and
 * repetitions become generated rules there (x* is R ::= x R | empty, x{m,n} is m copies of x then a chain
 * of n - m optional ones), so the matcher only knows characters and references.  Then the checks a matcher
 * relies on: every referenced rule defined, a `root`, and no rule that reaches itself without consuming
 * a character (the matcher expands references eagerly and would never return). */
#include "grammar/grammar_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_REPEAT = 10000, /* the largest bound in x{m,n}: each copy costs elements or a rule */
    MAX_NEST = 256,     /* parentheses inside each other */
    MAX_ELEMENTS = 1 << 24,
    MAX_RULES = 1 << 15, /* bounds the recursion of the checks and of a matcher's expansion */
};

typedef struct {
    mf_ge *v;
    uint32_t n, cap;
} gvec;

typedef struct {
    char *name;    /* a generated rule: its parent's name + "/" + a number */
    gvec body;     /* alternatives, ALT-separated, END-closed once parsed */
    bool defined;  /* written by `name ::=` (or generated) */
    uint32_t line; /* where it was first named: reported when it is never defined */
} prule;

typedef struct {
    const char *s, *p, *e;
    prule *r;
    int32_t n_r, cap_r;
    mf_grange *ranges;
    uint32_t n_ranges, cap_ranges;
    mf_gclass *cls;
    uint32_t n_cls, cap_cls;
    int32_t cur; /* the named rule being parsed (generated rules are named after it) */
    int32_t n_gen;
    int depth;
    int rc;
    mf_error *err;
} parser;

/* ---------------- errors and vectors ---------------- */

static void where(const parser *ps, const char *at, uint32_t *line, uint32_t *col) {
    *line = 1, *col = 1;
    for (const char *q = ps->s; q < at && q < ps->e; q++) {
        if (*q == '\n')
            ++*line, *col = 1;
        else if (((unsigned char)*q & 0xC0) != 0x80)
            ++*col;
    }
}

/* A syntax error at `at`; the first error wins.  Returns false so callers can `return fail(...)`. */
static bool fail(parser *ps, const char *at, const char *fmt, const char *arg) {
    if (ps->rc) return false;
    uint32_t line, col;
    where(ps, at, &line, &col);
    char what[512];
    snprintf(what, sizeof what, fmt, arg ? arg : "");
    ps->rc = mf_err(ps->err, MF_E_INVAL, "grammar: line %u, column %u: %s", line, col, what);
    return false;
}

static bool nomem(parser *ps) {
    if (!ps->rc) ps->rc = mf_err(ps->err, MF_E_NOMEM, "grammar: out of memory while compiling");
    return false;
}

static bool grow(parser *ps, void **v, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return true;
    if (need > MAX_ELEMENTS) {
        if (!ps->rc)
            ps->rc = mf_err(ps->err, MF_E_UNSUPPORTED,
                            "grammar: more than %d elements after expanding "
                            "repetitions; use smaller {m,n} bounds",
                            MAX_ELEMENTS);
        return false;
    }
    uint32_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*v, c * elem);
    if (!q) return nomem(ps);
    *v = q, *cap = c;
    return true;
}

static bool push(parser *ps, gvec *v, uint32_t type, uint32_t value) {
    if (!grow(ps, (void **)&v->v, &v->cap, v->n + 1, sizeof *v->v)) return false;
    v->v[v->n++] = (mf_ge){type, value};
    return true;
}

/* ---------------- rules by name ---------------- */

static int32_t add_rule(parser *ps, char *name, uint32_t line) {
    if (!name) return nomem(ps), -1;
    if (ps->n_r >= MAX_RULES) {
        free(name);
        if (!ps->rc)
            ps->rc = mf_err(ps->err, MF_E_UNSUPPORTED,
                            "grammar: more than %d rules (repetitions {m,n} make one per "
                            "optional copy); use smaller bounds",
                            MAX_RULES);
        return -1;
    }
    if (ps->n_r == ps->cap_r) {
        int32_t c = ps->cap_r ? ps->cap_r * 2 : 16;
        prule *q = realloc(ps->r, sizeof *q * (size_t)c);
        if (!q) return free(name), nomem(ps), -1;
        ps->r = q, ps->cap_r = c;
    }
    ps->r[ps->n_r] = (prule){.name = name, .line = line};
    return ps->n_r++;
}

static int32_t rule_named(parser *ps, const char *name, size_t len, const char *at) {
    for (int32_t i = 0; i < ps->n_r; i++)
        if (strlen(ps->r[i].name) == len && !memcmp(ps->r[i].name, name, len)) return i;
    uint32_t line, col;
    where(ps, at, &line, &col);
    return add_rule(ps, strndup(name, len), line);
}

static int32_t new_generated(parser *ps) {
    char buf[600];
    snprintf(buf, sizeof buf, "%s/%d", ps->cur >= 0 ? ps->r[ps->cur].name : "?", ++ps->n_gen);
    int32_t id = add_rule(ps, strdup(buf), 0);
    if (id >= 0) ps->r[id].defined = true;
    return id;
}

/* ---------------- lexing ---------------- */

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Spaces, tabs and comments; newlines too where newline_ok. */
static void skip_space(parser *ps, bool newline_ok) {
    while (ps->p < ps->e) {
        char c = *ps->p;
        if (c == ' ' || c == '\t')
            ps->p++;
        else if (c == '#')
            while (ps->p < ps->e && *ps->p != '\n') ps->p++;
        else if ((c == '\n' || c == '\r') && newline_ok)
            ps->p++;
        else
            break;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 encoded character of the grammar text itself. */
static bool utf8_char(parser *ps, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)ps->p;
    size_t left = (size_t)(ps->e - ps->p);
    unsigned char b = s[0];
    int n = b < 0x80                 ? 1
            : b >= 0xC2 && b <= 0xDF ? 2
            : b >= 0xE0 && b <= 0xEF ? 3
            : b >= 0xF0 && b <= 0xF4 ? 4
                                     : 0;
    if (!n || (size_t)n > left) return fail(ps, ps->p, "the grammar text is not valid UTF-8 here%s", NULL);
    uint32_t c = n == 1 ? b : n == 2 ? b & 0x1Fu : n == 3 ? b & 0x0Fu : b & 0x07u;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return fail(ps, ps->p, "the grammar text is not valid UTF-8 here%s", NULL);
        c = c << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return fail(ps, ps->p, "the grammar text is not valid UTF-8 here%s", NULL);
    ps->p += n;
    *cp = c;
    return true;
}

/* A character inside a literal or class: an escape or one UTF-8 character. */
static bool lit_char(parser *ps, uint32_t *cp) {
    if (ps->p >= ps->e) return fail(ps, ps->p, "the text ends inside a literal or class%s", NULL);
    if (*ps->p != '\\') return utf8_char(ps, cp);
    const char *at = ps->p++;
    if (ps->p >= ps->e) return fail(ps, at, "the text ends after a backslash%s", NULL);
    char c = *ps->p++;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (!digits) {
        switch (c) {
        case 'n':
            *cp = '\n';
            return true;
        case 'r':
            *cp = '\r';
            return true;
        case 't':
            *cp = '\t';
            return true;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
            *cp = (uint32_t)c;
            return true;
        default: {
            char s[2] = {c, 0};
            return fail(
                ps, at,
                "unknown escape '\\%s' (known: \\n \\r \\t \\\\ \\\" \\' \\[ \\] \\- \\^ \\xHH \\uHHHH "
                "\\UHHHHHHHH)",
                s);
        }
        }
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = ps->p < ps->e ? hexval(*ps->p) : -1;
        if (h < 0) return fail(ps, at, "an escape '\\%s' needs its hex digits", (char[2]){c, 0});
        v = v << 4 | (uint32_t)h;
        ps->p++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return fail(ps, at, "the escape names no Unicode character (a surrogate or above U+10FFFF)%s", NULL);
    *cp = v;
    return true;
}

/* [...] or [^...] -> a class id */
static bool parse_class(parser *ps, uint32_t *id) {
    const char *at = ps->p++;
    bool neg = ps->p < ps->e && *ps->p == '^';
    if (neg) ps->p++;
    uint32_t first = ps->n_ranges;
    while (ps->p < ps->e && *ps->p != ']') {
        uint32_t lo, hi;
        if (!lit_char(ps, &lo)) return false;
        hi = lo;
        if (ps->p + 1 < ps->e && ps->p[0] == '-' && ps->p[1] != ']') {
            ps->p++;
            if (!lit_char(ps, &hi)) return false;
            if (hi < lo) return fail(ps, at, "a range in a character class runs backwards%s", NULL);
        }
        if (!grow(ps, (void **)&ps->ranges, &ps->cap_ranges, ps->n_ranges + 1, sizeof *ps->ranges))
            return false;
        ps->ranges[ps->n_ranges++] = (mf_grange){lo, hi};
    }
    if (ps->p >= ps->e) return fail(ps, at, "a character class is not closed with ']'%s", NULL);
    ps->p++;
    if (ps->n_ranges == first) return fail(ps, at, "an empty character class matches nothing%s", NULL);
    if (!grow(ps, (void **)&ps->cls, &ps->cap_cls, ps->n_cls + 1, sizeof *ps->cls)) return false;
    ps->cls[ps->n_cls] = (mf_gclass){first, ps->n_ranges - first, neg};
    *id = ps->n_cls++;
    return true;
}

static bool parse_count(parser *ps, uint32_t *v) {
    const char *at = ps->p;
    uint64_t x = 0;
    if (ps->p >= ps->e || *ps->p < '0' || *ps->p > '9')
        return fail(ps, at, "expected a number in {m,n}%s", NULL);
    while (ps->p < ps->e && *ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (uint64_t)(*ps->p++ - '0');
        if (x > MAX_REPEAT) return fail(ps, at, "a repetition bound above 10000%s", NULL);
    }
    *v = (uint32_t)x;
    return true;
}

/* ---------------- repetition ---------------- */

/* The element run v[from..) is the last symbol; make it one element (a generated rule when it is longer,
 * a literal "abc" for instance, so x* repeats all of it). */
static bool single(parser *ps, gvec *v, uint32_t from, mf_ge *out) {
    if (v->n - from == 1) {
        *out = v->v[from];
        return true;
    }
    int32_t id = new_generated(ps);
    if (id < 0) return false;
    gvec *b = &ps->r[id].body;
    for (uint32_t i = from; i < v->n; i++)
        if (!push(ps, b, v->v[i].type, v->v[i].value)) return false;
    if (!push(ps, b, GE_END, 0)) return false;
    *out = (mf_ge){GE_REF, (uint32_t)id};
    return true;
}

/* x{lo,hi} (hi < 0: no upper bound) in place of the last symbol v[from..). */
static bool repeat(parser *ps, gvec *v, uint32_t from, uint32_t lo, int64_t hi) {
    mf_ge x;
    if (!single(ps, v, from, &x)) return false;
    v->n = from;
    for (uint32_t i = 0; i < lo; i++)
        if (!push(ps, v, x.type, x.value)) return false;
    if (hi < 0) { /* R ::= x R | (empty) */
        int32_t r = new_generated(ps);
        if (r < 0) return false;
        gvec *b = &ps->r[r].body;
        if (!push(ps, b, x.type, x.value) || !push(ps, b, GE_REF, (uint32_t)r) || !push(ps, b, GE_ALT, 0) ||
            !push(ps, b, GE_END, 0))
            return false;
        return push(ps, v, GE_REF, (uint32_t)r);
    }
    /* hi - lo optional copies, each inside the one before, built from the innermost out:
     * Rk ::= x | (empty), R(k-1) ::= x Rk | (empty), ..., and R1 takes the symbol's place */
    int32_t next = -1;
    for (int64_t i = 0; i < hi - lo; i++) {
        int32_t r = new_generated(ps);
        if (r < 0) return false;
        gvec *b = &ps->r[r].body;
        if (!push(ps, b, x.type, x.value)) return false;
        if (next >= 0 && !push(ps, b, GE_REF, (uint32_t)next)) return false;
        if (!push(ps, b, GE_ALT, 0) || !push(ps, b, GE_END, 0)) return false;
        next = r;
    }
    return next < 0 || push(ps, v, GE_REF, (uint32_t)next);
}

/* ---------------- syntax ---------------- */

static bool parse_alternates(parser *ps, gvec *v, bool nested);

static bool parse_sequence(parser *ps, gvec *v, bool nested) {
    int64_t last = -1; /* where the last symbol's elements start */
    while (ps->p < ps->e && !ps->rc) {
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            last = v->n;
            ps->p++;
            while (ps->p < ps->e && *ps->p != '"') {
                uint32_t cp;
                if (!lit_char(ps, &cp) || !push(ps, v, GE_CHAR, cp)) return false;
            }
            if (ps->p >= ps->e) return fail(ps, at, "a literal is not closed with '\"'%s", NULL);
            ps->p++;
            if (v->n == (uint32_t)last) last = -1; /* "" adds nothing to repeat */
        } else if (c == '[') {
            uint32_t id;
            last = v->n;
            if (!parse_class(ps, &id) || !push(ps, v, GE_CLASS, id)) return false;
        } else if (c == '.') {
            last = v->n;
            ps->p++;
            if (!push(ps, v, GE_ANY, 0)) return false;
        } else if (is_name_char(c)) {
            const char *n0 = ps->p;
            while (ps->p < ps->e && is_name_char(*ps->p)) ps->p++;
            int32_t id = rule_named(ps, n0, (size_t)(ps->p - n0), n0);
            last = v->n;
            if (id < 0 || !push(ps, v, GE_REF, (uint32_t)id)) return false;
        } else if (c == '(') {
            if (++ps->depth > MAX_NEST) return fail(ps, at, "parentheses nested deeper than 256%s", NULL);
            ps->p++;
            skip_space(ps, true);
            int32_t id = new_generated(ps);
            if (id < 0) return false;
            gvec body = {0};
            bool ok = parse_alternates(ps, &body, true);
            ps->r[id].body = body; /* ps->r may have moved while parsing */
            if (!ok) return false;
            if (ps->p >= ps->e || *ps->p != ')') return fail(ps, at, "a '(' is not closed with ')'%s", NULL);
            ps->p++;
            ps->depth--;
            last = v->n;
            if (!push(ps, v, GE_REF, (uint32_t)id)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0)
                return fail(ps, at, "'%s' repeats nothing (put it after a symbol)", (char[2]){c, 0});
            uint32_t lo = c == '+' ? 1 : 0;
            int64_t hi = c == '?' ? 1 : -1;
            ps->p++;
            if (c == '{') {
                skip_space(ps, false);
                if (!parse_count(ps, &lo)) return false;
                skip_space(ps, false);
                hi = lo;
                if (ps->p < ps->e && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, false);
                    hi = -1;
                    if (ps->p < ps->e && *ps->p != '}') {
                        uint32_t h;
                        if (!parse_count(ps, &h)) return false;
                        if (h < lo) return fail(ps, at, "a repetition {m,n} with n below m%s", NULL);
                        hi = h;
                        skip_space(ps, false);
                    }
                }
                if (ps->p >= ps->e || *ps->p != '}')
                    return fail(ps, at, "a '{' is not closed with '}'%s", NULL);
                ps->p++;
            }
            if (!repeat(ps, v, (uint32_t)last, lo, hi)) return false;
            last = -1; /* x** would repeat a repetition: refused, as llama.cpp does */
        } else {
            break;
        }
        skip_space(ps, nested);
    }
    return !ps->rc;
}

static bool parse_alternates(parser *ps, gvec *v, bool nested) {
    if (!parse_sequence(ps, v, nested)) return false;
    while (ps->p < ps->e && *ps->p == '|') {
        ps->p++;
        skip_space(ps, true);
        if (!push(ps, v, GE_ALT, 0) || !parse_sequence(ps, v, nested)) return false;
    }
    return push(ps, v, GE_END, 0);
}

static bool parse_rule(parser *ps) {
    const char *at = ps->p;
    while (ps->p < ps->e && is_name_char(*ps->p)) ps->p++;
    if (ps->p == at) return fail(ps, at, "expected a rule name%s", NULL);
    int32_t id = rule_named(ps, at, (size_t)(ps->p - at), at);
    if (id < 0) return false;
    if (ps->r[id].defined) return fail(ps, at, "rule '%s' is defined twice", ps->r[id].name);
    ps->r[id].defined = true;
    ps->cur = id;
    skip_space(ps, false);
    if (ps->e - ps->p < 3 || memcmp(ps->p, "::=", 3))
        return fail(ps, ps->p, "expected '::=' after '%s'", ps->r[id].name);
    ps->p += 3;
    skip_space(ps, true);
    gvec body = {0};
    bool ok = parse_alternates(ps, &body, false);
    ps->r[id].body = body;
    if (!ok) return false;
    if (ps->p < ps->e && *ps->p != '\n' && *ps->p != '\r') {
        if (*ps->p == ')') return fail(ps, ps->p, "a ')' without its '('%s", NULL);
        return fail(ps, ps->p, "unexpected character here in rule '%s'", ps->r[id].name);
    }
    return true;
}

/* ---------------- checks ---------------- */

/* Rules that can match the empty text (a fixpoint over the alternatives). */
static bool *nullable_rules(const parser *ps) {
    bool *nul = calloc((size_t)ps->n_r, 1);
    if (!nul) return NULL;
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < ps->n_r; r++) {
            if (nul[r]) continue;
            const mf_ge *e = ps->r[r].body.v;
            for (bool alt_ok = true;; e++) {
                if (mf_ge_is_end(e)) {
                    if (alt_ok) {
                        nul[r] = changed = true;
                        break;
                    }
                    if (e->type == GE_END) break;
                    alt_ok = true;
                } else if (e->type != GE_REF || !nul[e->value]) {
                    alt_ok = false;
                }
            }
        }
    }
    return nul;
}

/* Depth-first search over "r can start with a reference to q" (through nullable prefixes): a cycle is left
 * recursion.  state: 0 unseen, 1 on the path, 2 done. */
static int32_t left_cycle(const parser *ps, const bool *nul, uint8_t *state, int32_t r) {
    state[r] = 1;
    bool open = true; /* still at the start of an alternative (everything before it nullable) */
    for (const mf_ge *e = ps->r[r].body.v;; e++) {
        if (mf_ge_is_end(e)) {
            if (e->type == GE_END) break;
            open = true;
            continue;
        }
        if (!open) continue;
        if (e->type != GE_REF) {
            open = false;
            continue;
        }
        int32_t q = (int32_t)e->value;
        if (state[q] == 1) return q;
        if (state[q] == 0) {
            int32_t c = left_cycle(ps, nul, state, q);
            if (c >= 0) return c;
        }
        open = nul[q];
    }
    state[r] = 2;
    return -1;
}

static int check(parser *ps) {
    for (int32_t r = 0; r < ps->n_r; r++)
        if (!ps->r[r].defined)
            return mf_err(ps->err, MF_E_INVAL, "grammar: rule '%s' (line %u) is used but never defined",
                          ps->r[r].name, ps->r[r].line);
    int32_t root = -1;
    for (int32_t r = 0; r < ps->n_r; r++)
        if (!strcmp(ps->r[r].name, "root")) root = r;
    if (root < 0) return mf_err(ps->err, MF_E_INVAL, "grammar: there is no 'root' rule (the start symbol)");
    bool *nul = nullable_rules(ps);
    uint8_t *state = calloc((size_t)ps->n_r, 1);
    int rc = 0;
    if (!nul || !state) rc = mf_err(ps->err, MF_E_NOMEM, "grammar: out of memory while compiling");
    for (int32_t r = 0; r < ps->n_r && !rc; r++) {
        int32_t c = state[r] ? -1 : left_cycle(ps, nul, state, r);
        if (c >= 0) {
            const char *name = ps->r[c].name, *slash = strchr(name, '/');
            rc = mf_err(
                ps->err, MF_E_INVAL,
                "grammar: %s '%.*s' can reach itself without consuming a character (left recursion, or a "
                "repetition of something that can be empty); rewrite it so each step consumes text",
                slash ? "a group or repetition in rule" : "rule",
                slash ? (int)(slash - name) : (int)strlen(name), name);
        }
    }
    free(nul);
    free(state);
    return rc ? rc : root;
}

/* ---------------- assembly ---------------- */

static void free_parser(parser *ps) {
    for (int32_t i = 0; i < ps->n_r; i++) {
        free(ps->r[i].name);
        free(ps->r[i].body.v);
    }
    free(ps->r);
    free(ps->ranges);
    free(ps->cls);
}

static int assemble(parser *ps, int32_t root, mf_grammar **out) {
    mf_grammar *g = calloc(1, sizeof *g);
    uint64_t n = 0;
    for (int32_t r = 0; r < ps->n_r; r++) n += ps->r[r].body.n;
    if (g) {
        g->el = malloc(sizeof *g->el * (size_t)(n ? n : 1));
        g->rule = malloc(sizeof *g->rule * (size_t)ps->n_r);
    }
    if (!g || !g->el || !g->rule) {
        mf_grammar_release(g);
        return mf_err(ps->err, MF_E_NOMEM, "grammar: out of memory while compiling");
    }
    for (int32_t r = 0; r < ps->n_r; r++) {
        g->rule[r] = g->n_el;
        memcpy(g->el + g->n_el, ps->r[r].body.v, sizeof *g->el * ps->r[r].body.n);
        g->n_el += ps->r[r].body.n;
    }
    g->n_rules = ps->n_r;
    g->root = (uint32_t)root;
    g->ranges = ps->ranges, g->n_ranges = ps->n_ranges;
    g->cls = ps->cls, g->n_cls = ps->n_cls;
    ps->ranges = NULL, ps->cls = NULL;
    *out = g;
    return 0;
}

int mf_grammar_compile(const char *text, size_t len, mf_grammar **out, mf_error *err) {
    *out = NULL;
    if (!text && len) return mf_err(err, MF_E_INVAL, "grammar: no text");
    parser ps = {.s = text, .p = text, .e = text + len, .cur = -1, .err = err};
    skip_space(&ps, true);
    while (ps.p < ps.e && !ps.rc) {
        parse_rule(&ps);
        skip_space(&ps, true);
    }
    int rc = ps.rc;
    if (!rc) {
        int32_t root = check(&ps);
        rc = root < 0 ? root : assemble(&ps, root, out);
    }
    free_parser(&ps);
    return rc;
}

void mf_grammar_release(mf_grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->rule);
    free(g->ranges);
    free(g->cls);
    free(g);
}

int32_t mf_grammar_n_rules(const mf_grammar *g) {
    return g->n_rules;
}

/* ---------------- renaming ---------------- */

/* Copies GBNF text with every rule name (definitions and references) prefixed, so grammars made apart
 * (a JSON Schema per tool) can live in one: literals, classes and {m,n} bounds are copied as they are,
 * comments dropped.  Only the lexing matters here; mf_grammar_compile judges the result. */
int mf_gbnf_prefix(const char *text, size_t len, const char *prefix, char **out, mf_error *err) {
    *out = NULL;
    const size_t pl = strlen(prefix);
    size_t cap = len + 1, n = 0;
    for (size_t i = 0; i < len; i++) cap += is_name_char(text[i]) ? pl : 0; /* at most one prefix per char */
    char *o = malloc(cap);
    if (!o) return mf_err(err, MF_E_NOMEM, "grammar: out of memory renaming rules");
    for (size_t i = 0; i < len;) {
        const char c = text[i];
        if (c == '"' || c == '[' || c == '{') { /* copy through the closing character, escapes included */
            const char close = c == '"' ? '"' : c == '[' ? ']' : '}';
            o[n++] = text[i++];
            while (i < len && text[i] != close) {
                if (text[i] == '\\' && i + 1 < len) o[n++] = text[i++];
                o[n++] = text[i++];
            }
            if (i < len) o[n++] = text[i++];
        } else if (c == '#') {
            while (i < len && text[i] != '\n') i++;
        } else if (is_name_char(c)) {
            memcpy(o + n, prefix, pl);
            n += pl;
            while (i < len && is_name_char(text[i])) o[n++] = text[i++];
        } else {
            o[n++] = text[i++];
        }
    }
    o[n] = 0;
    *out = o;
    return 0;
}
