/* grammar/schema: JSON Schema -> GBNF text (see grammar.h).
 *
 * Built the way llama.cpp's json-schema-to-grammar builds it: every value rule ends in `space`, and `space`
 * is bounded (at most two newlines and twenty blanks), so a model cannot spend its whole budget on
 * whitespace.  Each sub-schema that is more than one rule name becomes a rule named after where it sits
 * ("root-address-street"); each $ref target becomes one rule, generated once from a worklist, which is what
 * lets a schema refer to itself (a tree node whose children are nodes).
 *
 * The grammar may be stricter than the schema (members in declared order, numbers as JSON writes them,
 * no escapes in undeclared keys, a schema without "type" taken as the type its keywords are about), never
 * looser: a keyword that would constrain what we cannot express is refused, naming it and its path. */
#include "grammar/grammar.h"
#include "core/utf8.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_DEPTH = 64,   /* schema levels below the root (or below a $ref target): bounds our C stack */
    MAX_COUNT = 1000, /* minItems/maxItems/minLength/maxLength: keeps the expanded repetitions small */
    MAX_PREFIX = 64,  /* prefixItems entries: each nests one optional group in the array rule */
    HINT_SEG = 24,    /* bytes of a property name that go into a rule name */
    HINT_MAX = 96,    /* bytes of a rule name before its collision counter */
    PATH_SEG = 64,    /* bytes of a key that go into a message's path */
    PATH_MAX_ = 600,  /* bytes of a path in a message (mf_error holds 1024) */
};
#define UNBOUNDED (-1L)

#define SUPPORTED                                                                                            \
    "type, properties, required, additionalProperties, items, prefixItems, minItems, maxItems, enum, "       \
    "const, "                                                                                                \
    "anyOf, oneOf, $ref, $defs, definitions, minLength, maxLength, allOf with one schema"

/* ---- growable text ---- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}
static void sb_long(sbuf *b, long v) {
    char t[24];
    snprintf(t, sizeof t, "%ld", v);
    sb_puts(b, t);
}
static void sb_free(sbuf *b) {
    free(b->p);
    *b = (sbuf){0};
}

/* ---- a small hash map from byte strings to ints (rule names taken; $ref targets by address) ---- */

typedef struct {
    char *key; /* NULL: empty slot */
    size_t klen;
    int val;
} hslot;
typedef struct {
    hslot *s;
    size_t cap, n;
} hmap;

static uint64_t hash_bytes(const void *k, size_t n) {
    const unsigned char *p = k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static hslot *hm_slot(const hmap *m, const void *k, size_t n) {
    size_t i = (size_t)hash_bytes(k, n) & (m->cap - 1);
    while (m->s[i].key && (m->s[i].klen != n || memcmp(m->s[i].key, k, n))) i = (i + 1) & (m->cap - 1);
    return &m->s[i];
}

static int *hm_get(const hmap *m, const void *k, size_t n) {
    if (!m->cap) return NULL;
    hslot *s = hm_slot(m, k, n);
    return s->key ? &s->val : NULL;
}

static bool hm_set(hmap *m, const void *k, size_t n, int val) {
    if ((m->n + 1) * 2 > m->cap) { /* keep it at most half full, so probes stay short */
        hmap g = {calloc(m->cap ? m->cap * 2 : 64, sizeof(hslot)), m->cap ? m->cap * 2 : 64, m->n};
        if (!g.s) return false;
        for (size_t i = 0; i < m->cap; i++)
            if (m->s[i].key) *hm_slot(&g, m->s[i].key, m->s[i].klen) = m->s[i];
        free(m->s);
        *m = g;
    }
    hslot *s = hm_slot(m, k, n);
    if (!s->key) {
        char *key = malloc(n ? n : 1);
        if (!key) return false;
        memcpy(key, k, n);
        s->key = key, s->klen = n;
        m->n++;
    }
    s->val = val;
    return true;
}

static void hm_free(hmap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->s[i].key);
    free(m->s);
    *m = (hmap){0};
}

/* ---- the conversion's state ---- */

/* A node is one place a rule body is written: the root, a $ref target, or a sub-schema.  A sub-schema whose
 * body came out as a single rule name gets no rule of its own (name NULL), but stays a node so the
 * left-recursion check still sees the path through it. */
typedef struct {
    char *name, *body;
    char *path;          /* a $ref target's JSON pointer (for messages), else NULL */
    const cJSON *target; /* a $ref target still to be generated; NULL once done and for other nodes */
} gnode;

enum {
    P_SPACE,
    P_STRING,
    P_CHAR,
    P_INTEGRAL,
    P_DECIMAL,
    P_INTEGER,
    P_NUMBER,
    P_BOOLEAN,
    P_NULL,
    P_VALUE,
    P_OBJECT,
    P_ARRAY,
    P_COUNT
};

#define B(p) (1u << (p))
static const struct {
    const char *name, *body;
    unsigned deps;
} prims[P_COUNT] = {
    [P_SPACE] = {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", 0},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\" space", B(P_CHAR) | B(P_SPACE)},
    [P_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    [P_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [P_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [P_INTEGER] = {"integer", "(\"-\"? integral-part) space", B(P_INTEGRAL) | B(P_SPACE)},
    [P_NUMBER] = {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
                  B(P_INTEGRAL) | B(P_DECIMAL) | B(P_SPACE)},
    [P_BOOLEAN] = {"boolean", "(\"true\" | \"false\") space", B(P_SPACE)},
    [P_NULL] = {"null", "\"null\" space", B(P_SPACE)},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 B(P_OBJECT) | B(P_ARRAY) | B(P_STRING) | B(P_NUMBER) | B(P_BOOLEAN) | B(P_NULL)},
    [P_OBJECT] =
        {"object",
         "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
         B(P_STRING) | B(P_VALUE) | B(P_SPACE)},
    [P_ARRAY] = {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", B(P_VALUE) | B(P_SPACE)},
};

/* What JSON text a character of an undeclared key may be: a string character that needs no escape. */
#define KEY_CHAR_CLASS "[^\"\\\\\\x7F\\x00-\\x1F"

typedef struct {
    const cJSON *root;
    gnode *nodes;
    size_t n_nodes, cap_nodes;
    int *edges; /* pairs (from, to): `to` is referred to before `from` has consumed anything */
    size_t n_edges, cap_edges;
    hmap names;    /* every rule name taken (primitives included) -> the next collision counter to try */
    hmap refs;     /* $ref target address -> node */
    hmap strings;  /* "min:max" -> the node of the length-bounded string rule */
    unsigned used; /* primitives referred to */
    mf_error *err;
} ctx;

/* Where a schema sits: what messages name and what rules made for it are called. */
typedef struct {
    char *path; /* JSON pointer, e.g. "#/properties/age" */
    char *hint; /* the name a rule made for it starts from, e.g. "root-age" */
    int depth;  /* schema levels below the root or the $ref target being generated */
    int cur;    /* the node whose rule body this text goes into */
    bool head;  /* nothing consumed yet in that body: a $ref here could be left recursion */
} site;

static int nomem(ctx *c) {
    return mf_err(c->err, MF_E_NOMEM, "out of memory while turning a JSON schema into a grammar");
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return false;
    *p = q, *cap = n;
    return true;
}

static int new_node(ctx *c) {
    if (!grow((void **)&c->nodes, &c->cap_nodes, c->n_nodes + 1, sizeof(gnode))) return -1;
    c->nodes[c->n_nodes] = (gnode){0};
    return (int)c->n_nodes++;
}

static bool add_edge(ctx *c, int from, int to) {
    if (!grow((void **)&c->edges, &c->cap_edges, c->n_edges * 2 + 2, sizeof(int))) return false;
    c->edges[c->n_edges * 2] = from, c->edges[c->n_edges * 2 + 1] = to;
    c->n_edges++;
    return true;
}

static void use(ctx *c, int p, sbuf *out) {
    c->used |= B(p);
    sb_puts(out, prims[p].name);
}

/* A short rendering of a JSON value for messages ("got ..."). */
static void show(const cJSON *v, char *buf, size_t n) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) {
        snprintf(buf, n, "(a value)");
        return;
    }
    if (strlen(t) + 1 > n && n > 4)
        snprintf(buf, n, "%.*s...", (int)(n - 4), t);
    else
        snprintf(buf, n, "%s", t);
    cJSON_free(t);
}

static const char *kind_of(const cJSON *v) {
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* ---- names, paths, literals ---- */

static bool is_name(const char *s) {
    if (!s || !*s) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-'))
            return false;
    return true;
}

/* parent + "-" + seg with every byte outside [A-Za-z0-9] turned into '-', both parts cut short, so rule
 * names stay readable and bounded however long the keys are. */
static char *make_hint(const char *parent, const char *seg) {
    size_t np = MF_MIN(strlen(parent), (size_t)(HINT_MAX - HINT_SEG - 1)),
           ns = MF_MIN(strlen(seg), (size_t)HINT_SEG);
    char *h = malloc(np + ns + 2);
    if (!h) return NULL;
    memcpy(h, parent, np);
    size_t k = np;
    if (np) h[k++] = '-';
    for (size_t i = 0; i < ns; i++) {
        char ch = seg[i];
        h[k++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ? ch : '-';
    }
    if (!k) h[k++] = 'r'; /* never an empty name */
    h[k] = 0;
    return h;
}

/* A rule name not taken yet: base itself, else base-2, base-3, ... (the map remembers where to go on). */
static char *unique_name(ctx *c, const char *base) {
    size_t bn = strlen(base);
    int *next = hm_get(&c->names, base, bn);
    if (!next) {
        char *s = strdup(base);
        if (!s || !hm_set(&c->names, base, bn, 2)) {
            free(s);
            return NULL;
        }
        return s;
    }
    char buf[HINT_MAX + 64];
    for (int k = *next;; k++) {
        snprintf(buf, sizeof buf, "%.*s-%d", HINT_MAX + 32, base, k);
        size_t n = strlen(buf);
        if (hm_get(&c->names, buf, n)) continue;
        char *s = strdup(buf);
        if (!s || !hm_set(&c->names, buf, n, 2) || !hm_set(&c->names, base, bn, k + 1)) {
            free(s);
            return NULL;
        }
        return s;
    }
}

/* Appends s as one JSON-pointer segment ('~' -> "~0", '/' -> "~1"), cut at PATH_SEG bytes. */
static void put_pointer_seg(sbuf *b, const char *s) {
    size_t n = strlen(s), cut = n > PATH_SEG ? PATH_SEG : n;
    while (cut < n && cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--; /* not inside a character */
    for (size_t i = 0; i < cut; i++) {
        if (s[i] == '~')
            sb_puts(b, "~0");
        else if (s[i] == '/')
            sb_puts(b, "~1");
        else
            sb_put(b, s + i, 1);
    }
    if (cut < n) sb_puts(b, "...");
}

/* The site of a sub-schema: path parent + "/" + kw (+ "/" + key or index), hint parent + "-" + name_seg
 * (or the key or the index).  Not yet at the head of a body: callers that are (anyOf, allOf) say so. */
static bool sub_site(const site *p, const char *kw, const char *key, long idx, const char *name_seg,
                     site *ch) {
    sbuf b = {0};
    char num[24];
    snprintf(num, sizeof num, "%ld", idx);
    if (strlen(p->path) < PATH_MAX_) {
        sb_puts(&b, p->path);
        sb_puts(&b, "/");
        sb_puts(&b, kw);
        if (key)
            sb_puts(&b, "/"), put_pointer_seg(&b, key);
        else if (idx >= 0)
            sb_puts(&b, "/"), sb_puts(&b, num);
    } else {
        sb_puts(&b, p->path); /* already as long as a message can show */
    }
    *ch = (site){.path = b.p, .depth = p->depth + 1, .cur = p->cur, .head = false};
    ch->hint = make_hint(p->hint, name_seg ? name_seg : key ? key : num);
    if (b.oom || !ch->path || !ch->hint) {
        free(ch->path), free(ch->hint);
        ch->path = ch->hint = NULL;
        return false;
    }
    return true;
}

static void free_site(site *s) {
    free(s->path), free(s->hint);
    s->path = s->hint = NULL;
}

/* The code point of the well-formed UTF-8 sequence at s[*i] (moving *i past it); false when ill-formed. */
static bool next_cp(const char *s, size_t n, size_t *i, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)s + *i;
    int k = mf_utf8_seq(p, n - *i);
    if (k < 1) return false;
    uint32_t c = k == 1 ? p[0] : k == 2 ? p[0] & 0x1Fu : k == 3 ? p[0] & 0x0Fu : p[0] & 0x07u;
    for (int j = 1; j < k; j++) c = c << 6 | (p[j] & 0x3Fu);
    *cp = c;
    *i += (size_t)k;
    return true;
}

static void put_cp_escape(sbuf *b, uint32_t cp) {
    char t[16];
    snprintf(t, sizeof t, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", (unsigned)cp);
    sb_puts(b, t);
}

/* s[0..n) as a GBNF literal "...": printable ASCII as itself (" and \ escaped), everything else as an
 * escape, so the grammar text is plain ASCII whatever the schema holds.  False when s is not UTF-8. */
static bool put_literal(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80) {
            uint32_t cp;
            if (!next_cp(s, n, &i, &cp)) return false;
            put_cp_escape(b, cp);
            continue;
        }
        char t[8];
        if (ch == '"')
            sb_puts(b, "\\\"");
        else if (ch == '\\')
            sb_puts(b, "\\\\");
        else if (ch == '\n')
            sb_puts(b, "\\n");
        else if (ch == '\r')
            sb_puts(b, "\\r");
        else if (ch == '\t')
            sb_puts(b, "\\t");
        else if (ch < 0x20 || ch == 0x7F)
            snprintf(t, sizeof t, "\\x%02X", ch), sb_puts(b, t);
        else
            sb_put(b, (const char *)&ch, 1);
        i++;
    }
    sb_puts(b, "\"");
    return true;
}

/* The JSON text of a string (quotes included), as a model writes it: " \ and control characters escaped. */
static void put_json_string(sbuf *b, const char *s) {
    sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char t[8];
        switch (*p) {
        case '"':
            sb_puts(b, "\\\"");
            break;
        case '\\':
            sb_puts(b, "\\\\");
            break;
        case '\b':
            sb_puts(b, "\\b");
            break;
        case '\f':
            sb_puts(b, "\\f");
            break;
        case '\n':
            sb_puts(b, "\\n");
            break;
        case '\r':
            sb_puts(b, "\\r");
            break;
        case '\t':
            sb_puts(b, "\\t");
            break;
        default:
            if (*p < 0x20)
                snprintf(t, sizeof t, "\\u%04x", *p), sb_puts(b, t);
            else
                sb_put(b, (const char *)p, 1);
        }
    }
    sb_puts(b, "\"");
}

/* item{lo,hi} in the shortest GBNF form (hi UNBOUNDED: no upper bound); nothing at all for {0,0}. */
static void put_rep(sbuf *b, const char *item, long lo, long hi) {
    if (hi == 0) return;
    sb_puts(b, item);
    if (lo == 1 && hi == 1) return;
    if (lo == 0 && hi == 1)
        sb_puts(b, "?");
    else if (lo == 0 && hi == UNBOUNDED)
        sb_puts(b, "*");
    else if (lo == 1 && hi == UNBOUNDED)
        sb_puts(b, "+");
    else {
        sb_puts(b, "{");
        sb_long(b, lo);
        if (hi != lo) {
            sb_puts(b, ",");
            if (hi != UNBOUNDED) sb_long(b, hi);
        }
        sb_puts(b, "}");
    }
}

/* ---- keywords ---- */

enum {
    K_TYPE,
    K_PROPERTIES,
    K_REQUIRED,
    K_ADDITIONAL,
    K_ITEMS,
    K_PREFIX,
    K_MIN_ITEMS,
    K_MAX_ITEMS,
    K_ENUM,
    K_CONST,
    K_ANY_OF,
    K_ONE_OF,
    K_ALL_OF,
    K_REF,
    K_MIN_LENGTH,
    K_MAX_LENGTH,
    K_COUNT
};
static const char *const kw_names[K_COUNT] = {
    "type",  "properties",  "required",  "additionalProperties",
    "items", "prefixItems", "minItems",  "maxItems",
    "enum",  "const",       "anyOf",     "oneOf",
    "allOf", "$ref",        "minLength", "maxLength",
};

/* Keywords of the JSON Schema vocabularies (2020-12 and the drafts before it) that constrain a value in a way
 * we do not express.  Any other key not in kw_names is an annotation (title, description, default,
 * examples, $defs, ...) or belongs to no vocabulary; neither constrains anything, so both are skipped. */
static const char *const refused[] = {
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "$dynamicRef",
    "$recursiveRef",
    "divisibleBy",
    "disallow",
    "extends",
};

static int kw_index(const char *key) {
    for (int k = 0; k < K_COUNT; k++)
        if (!strcmp(key, kw_names[k])) return k;
    return -1;
}

/* Sorts a schema object's keys into kw[] (NULL where absent), refusing what we cannot express. */
static int scan_keywords(ctx *c, const cJSON *s, const char *path, const cJSON *kw[K_COUNT]) {
    for (int k = 0; k < K_COUNT; k++) kw[k] = NULL;
    for (const cJSON *it = s->child; it; it = it->next) {
        const char *key = it->string ? it->string : "";
        int k = kw_index(key);
        if (k >= 0) {
            if (kw[k])
                return mf_err(c->err, MF_E_INVAL, "JSON schema keyword '%s' appears twice at %s; keep one",
                              key, path);
            kw[k] = it;
            continue;
        }
        if (!strcmp(key, "uniqueItems") && cJSON_IsFalse(it)) continue; /* false constrains nothing */
        for (size_t r = 0; r < MF_ARRAY_LEN(refused); r++)
            if (!strcmp(key, refused[r]))
                return mf_err(c->err, MF_E_UNSUPPORTED,
                              "JSON schema keyword '%s' at %s is not supported (supported: " SUPPORTED
                              "); remove it or use a grammar",
                              key, path);
    }
    return 0;
}

enum {
    T_STRING = 1,
    T_NUMBER = 2,
    T_INTEGER = 4,
    T_BOOLEAN = 8,
    T_NULL = 16,
    T_OBJECT = 32,
    T_ARRAY = 64,
    T_ALL = 127
};
static const char *const type_names[] = {"string", "number", "integer", "boolean", "null", "object", "array"};

static int parse_type_name(ctx *c, const cJSON *t, const char *path, unsigned *mask) {
    if (!cJSON_IsString(t)) {
        char b[48];
        show(t, b, sizeof b);
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema 'type' at %s holds %s %s; types are strings such as \"string\"", path,
                      kind_of(t), b);
    }
    for (size_t i = 0; i < MF_ARRAY_LEN(type_names); i++)
        if (!strcmp(t->valuestring, type_names[i])) {
            *mask |= 1u << i;
            return 0;
        }
    return mf_err(c->err, MF_E_INVAL,
                  "JSON schema type '%.80s' at %s is not a type; use string, number, integer, boolean, null, "
                  "object or array",
                  t->valuestring, path);
}

/* 'type' as a set of T_* bits: one name or an array of names (an alternation). */
static int parse_types(ctx *c, const cJSON *t, const char *path, unsigned *mask) {
    *mask = 0;
    if (!cJSON_IsArray(t)) return parse_type_name(c, t, path, mask);
    if (!t->child)
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema 'type' at %s is an empty array; name at least one type", path);
    for (const cJSON *e = t->child; e; e = e->next) {
        int rc = parse_type_name(c, e, path, mask);
        if (rc) return rc;
    }
    return 0;
}

/* A non-negative integer count keyword (minItems, ...) into *out, dflt when absent. */
static int get_count(ctx *c, const cJSON *v, const char *path, long dflt, long *out) {
    *out = dflt;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble != floor(v->valuedouble)) {
        char b[48];
        show(v, b, sizeof b);
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema keyword '%s' at %s must be a non-negative integer, got %s", v->string,
                      path, b);
    }
    if (v->valuedouble > MAX_COUNT)
        return mf_err(c->err, MF_E_UNSUPPORTED,
                      "JSON schema keyword '%s' at %s is %.0f, above %d, the largest count the grammar is "
                      "written with; "
                      "lower it or remove it",
                      v->string, path, v->valuedouble, MAX_COUNT);
    *out = (long)v->valuedouble;
    return 0;
}

/* minKw/maxKw as a range, refusing an empty one. */
static int get_range(ctx *c, const cJSON *lo_kw, const cJSON *hi_kw, const char *path, long *lo, long *hi) {
    int rc = get_count(c, lo_kw, path, 0, lo);
    if (!rc) rc = get_count(c, hi_kw, path, UNBOUNDED, hi);
    if (rc) return rc;
    if (*hi != UNBOUNDED && *hi < *lo)
        return mf_err(
            c->err, MF_E_INVAL,
            "JSON schema keyword '%s' %ld at %s is below '%s' %ld, so nothing can match; fix one of them",
            hi_kw->string, *hi, path, lo_kw->string, *lo);
    return 0;
}

/* ---- generation ---- */

static int gen_body(ctx *c, const cJSON *s, const site *at, sbuf *out);

/* Appends one rule name standing for schema s: a primitive, a $ref target, or a rule made for it here.
 * The new node is reached from at->cur without consuming anything when at->head. */
static int gen_ref(ctx *c, const cJSON *s, const site *at, sbuf *out) {
    int nd = new_node(c);
    if (nd < 0 || (at->head && !add_edge(c, at->cur, nd))) return nomem(c);
    site inner = *at;
    inner.cur = nd, inner.head = true;
    sbuf body = {0};
    int rc = gen_body(c, s, &inner, &body);
    if (!rc && body.oom) rc = nomem(c);
    if (rc) {
        sb_free(&body);
        return rc;
    }
    if (is_name(body.p)) { /* one name already: refer to it directly */
        sb_puts(out, body.p);
        sb_free(&body);
        return 0;
    }
    char *name = unique_name(c, at->hint);
    if (!name) {
        sb_free(&body);
        return nomem(c);
    }
    c->nodes[nd].name = name;
    c->nodes[nd].body = body.p;
    sb_puts(out, name);
    return 0;
}

static int hexval(char ch) {
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* The value a local reference's fragment (after '#') points at: %HH decoded as URI fragments write it, then
 * JSON-pointer segments (~1 is '/', ~0 is '~') walked through objects by key and arrays by index.  NULL when
 * nothing is there; *last gets the last segment (to name the rule after). */
static const cJSON *resolve_pointer(const cJSON *root, const char *frag, sbuf *last) {
    sbuf dec = {0};
    for (const char *p = frag; *p; p++) {
        if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            char ch = (char)(hexval(p[1]) * 16 + hexval(p[2]));
            if (!ch) { /* no key holds a NUL */
                sb_free(&dec);
                return NULL;
            }
            sb_put(&dec, &ch, 1);
            p += 2;
        } else {
            sb_put(&dec, p, 1);
        }
    }
    if (dec.oom) {
        sb_free(&dec);
        return NULL;
    }
    const cJSON *cur = root;
    const char *p = dec.p ? dec.p : "";
    while (cur && *p == '/') {
        p++;
        last->n = 0;
        sb_puts(last, "");
        for (; *p && *p != '/'; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1'))
                sb_puts(last, p[1] == '0' ? "~" : "/"), p++;
            else if (*p == '~')
                cur = NULL; /* not a JSON pointer */
            else
                sb_put(last, p, 1);
        }
        if (!cur || last->oom) {
            cur = NULL;
            break;
        }
        if (cJSON_IsObject(cur)) {
            cur = cJSON_GetObjectItemCaseSensitive(cur, last->p);
        } else if (cJSON_IsArray(cur)) {
            const char *d = last->p;
            long idx = 0;
            bool ok = *d && (d[0] != '0' || !d[1]) && strlen(d) < 10;
            for (; ok && *d; d++) ok = *d >= '0' && *d <= '9', idx = idx * 10 + (*d - '0');
            cur = ok && idx < cJSON_GetArraySize(cur) ? cJSON_GetArrayItem(cur, (int)idx) : NULL;
        } else {
            cur = NULL;
        }
    }
    if (*p) cur = NULL; /* a fragment that is not a pointer */
    sb_free(&dec);
    return cur;
}

/* "$ref": the name of the rule for its target, which is generated once, from the worklist. */
static int gen_ref_keyword(ctx *c, const cJSON *ref, const site *at, sbuf *out) {
    if (!cJSON_IsString(ref)) {
        char b[48];
        show(ref, b, sizeof b);
        return mf_err(c->err, MF_E_INVAL, "JSON schema '$ref' at %s must be a string, got %s", at->path, b);
    }
    const char *r = ref->valuestring;
    if (r[0] != '#')
        return mf_err(
            c->err, MF_E_UNSUPPORTED,
            "JSON schema '$ref' \"%.200s\" at %s refers outside this schema; only local references (\"#\", "
            "\"#/$defs/NAME\", \"#/definitions/NAME\") are supported: copy the schema into $defs",
            r, at->path);
    if (r[1] && r[1] != '/')
        return mf_err(
            c->err, MF_E_UNSUPPORTED,
            "JSON schema '$ref' \"%.200s\" at %s names an anchor; only JSON-pointer references such as "
            "\"#/$defs/NAME\" are supported",
            r, at->path);
    sbuf last = {0};
    const cJSON *target = resolve_pointer(c->root, r + 1, &last);
    if (!target) {
        sb_free(&last);
        return mf_err(
            c->err, MF_E_INVAL,
            "JSON schema '$ref' \"%.200s\" at %s points at nothing in this schema; define it under $defs", r,
            at->path);
    }
    int *known = hm_get(&c->refs, &target, sizeof target);
    int nd;
    if (known) {
        nd = *known;
        sb_free(&last);
    } else {
        char *hint = make_hint("", last.n ? last.p : "ref");
        sb_free(&last);
        char *name = hint ? unique_name(c, hint) : NULL;
        free(hint);
        char *path = strdup(r);
        nd = name && path ? new_node(c) : -1;
        if (nd < 0 || !hm_set(&c->refs, &target, sizeof target, nd)) {
            free(name), free(path);
            return nomem(c);
        }
        c->nodes[nd] = (gnode){.name = name, .path = path, .target = target};
    }
    if (at->head && !add_edge(c, at->cur, nd)) return nomem(c);
    sb_puts(out, c->nodes[nd].name);
    return 0;
}

/* $ref, anyOf, oneOf or allOf: a schema made of other schemas.  We do not merge schemas, so nothing else
 * that constrains may sit beside it. */
static int gen_combinator(ctx *c, const cJSON *kw[K_COUNT], int which, const site *at, sbuf *out) {
    for (int k = 0; k < K_COUNT; k++)
        if (kw[k] && k != which)
            return mf_err(
                c->err, MF_E_UNSUPPORTED,
                "JSON schema keywords '%s' and '%s' side by side at %s are not supported (schemas are not "
                "merged); move '%s' into each alternative or into the referenced schema",
                kw_names[which], kw_names[k], at->path, kw_names[k]);
    const cJSON *v = kw[which];
    if (which == K_REF) return gen_ref_keyword(c, v, at, out);
    if (!cJSON_IsArray(v) || !v->child)
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema keyword '%s' at %s must be a non-empty array of schemas, got %s",
                      kw_names[which], at->path, kind_of(v));
    if (which == K_ALL_OF) {
        if (v->child->next)
            return mf_err(
                c->err, MF_E_UNSUPPORTED,
                "JSON schema keyword 'allOf' at %s with %d schemas is not supported (schemas are not "
                "merged; only a single schema is); merge them into one schema",
                at->path, cJSON_GetArraySize(v));
        site sub;
        if (!sub_site(at, "allOf", NULL, 0, "", &sub)) return nomem(c);
        free(sub.hint);
        sub.hint = strdup(at->hint); /* the same value: the same name */
        sub.cur = at->cur, sub.head = at->head;
        int rc = sub.hint ? gen_body(c, v->child, &sub, out) : nomem(c);
        free_site(&sub);
        return rc;
    }
    /* anyOf, and oneOf read as anyOf: a value matching two alternatives of a oneOf is let through.  Telling
     * "exactly one" from "at least one" is beyond a context-free grammar in general. */
    long i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        site sub;
        if (!sub_site(at, kw_names[which], NULL, i, NULL, &sub)) return nomem(c);
        sub.head = at->head;
        if (i) sb_puts(out, " | ");
        int rc = gen_ref(c, e, &sub, out);
        free_site(&sub);
        if (rc) return rc;
    }
    return 0;
}

static bool has_types(const cJSON *v, unsigned mask) {
    if (cJSON_IsString(v)) return mask & T_STRING;
    if (cJSON_IsNumber(v))
        return (mask & T_NUMBER) ||
               ((mask & T_INTEGER) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble));
    if (cJSON_IsBool(v)) return mask & T_BOOLEAN;
    if (cJSON_IsNull(v)) return mask & T_NULL;
    if (cJSON_IsArray(v)) return mask & T_ARRAY;
    return mask & T_OBJECT;
}

/* Every number in v is one JSON prints back exactly (finite, and an integer below 2^53 when it is one):
 * cJSON prints a non-finite number as null and rounds beyond 17 digits, which would match another value. */
static bool numbers_exact(const cJSON *v) {
    if (cJSON_IsNumber(v)) return isfinite(v->valuedouble) && fabs(v->valuedouble) < 9007199254740992.0;
    for (const cJSON *e = v->child; e; e = e->next)
        if (!numbers_exact(e)) return false;
    return true;
}

/* One enum/const value as an alternative: its compact JSON text, exactly. */
static int put_value_literal(ctx *c, const cJSON *v, const char *where, const site *at, sbuf *out,
                             int *n_alts) {
    if (!numbers_exact(v))
        return mf_err(
            c->err, MF_E_UNSUPPORTED,
            "a number in JSON schema '%s' at %s cannot be written back exactly (beyond 2^53 or not finite); "
            "use a smaller number or a string",
            where, at->path);
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return nomem(c);
    if (*n_alts) sb_puts(out, " | ");
    bool ok = put_literal(out, t, strlen(t));
    cJSON_free(t);
    if (!ok)
        return mf_err(c->err, MF_E_INVAL, "a string in JSON schema '%s' at %s is not valid UTF-8", where,
                      at->path);
    sb_puts(out, " space");
    c->used |= B(P_SPACE);
    (*n_alts)++;
    return 0;
}

/* enum / const: the listed values, exactly; 'type' (the only keyword allowed beside them) drops the values
 * not of that type. */
static int gen_literals(ctx *c, const cJSON *kw[K_COUNT], const site *at, sbuf *out) {
    int lit = kw[K_ENUM] ? K_ENUM : K_CONST;
    for (int k = 0; k < K_COUNT; k++)
        if (kw[k] && k != lit && k != K_TYPE)
            return mf_err(c->err, MF_E_UNSUPPORTED,
                          "JSON schema keyword '%s' beside '%s' at %s is not supported (only 'type' may sit "
                          "beside it); "
                          "remove it or drop the values it rules out from '%s'",
                          kw_names[k], kw_names[lit], at->path, kw_names[lit]);
    unsigned mask = T_ALL;
    int rc = kw[K_TYPE] ? parse_types(c, kw[K_TYPE], at->path, &mask) : 0;
    if (rc) return rc;
    int n = 0;
    if (lit == K_CONST) {
        if (has_types(kw[K_CONST], mask)) rc = put_value_literal(c, kw[K_CONST], "const", at, out, &n);
    } else {
        if (!cJSON_IsArray(kw[K_ENUM]))
            return mf_err(c->err, MF_E_INVAL, "JSON schema 'enum' at %s must be an array of values, got %s",
                          at->path, kind_of(kw[K_ENUM]));
        for (const cJSON *e = kw[K_ENUM]->child; e && !rc; e = e->next)
            if (has_types(e, mask)) rc = put_value_literal(c, e, "enum", at, out, &n);
    }
    if (rc) return rc;
    if (!n)
        return mf_err(
            c->err, MF_E_UNSUPPORTED,
            "JSON schema '%s' at %s leaves no value%s, so nothing can match; fix the values or 'type'",
            kw_names[lit], at->path, kw[K_TYPE] ? " of the schema's 'type'" : "");
    return 0;
}

/* A string, its length bounded by minLength/maxLength (in characters). */
static int gen_string(ctx *c, const cJSON *kw[K_COUNT], const site *at, sbuf *out) {
    if (!kw[K_MIN_LENGTH] && !kw[K_MAX_LENGTH]) {
        use(c, P_STRING, out);
        return 0;
    }
    long lo, hi;
    int rc = get_range(c, kw[K_MIN_LENGTH], kw[K_MAX_LENGTH], at->path, &lo, &hi);
    if (rc) return rc;
    /* one rule per pair of bounds, shared: the compiler expands char{m,n} into rules each time it is written
     */
    char key[64];
    snprintf(key, sizeof key, "%ld:%ld", lo, hi);
    int *known = hm_get(&c->strings, key, strlen(key));
    if (known) {
        sb_puts(out, c->nodes[*known].name);
        return 0;
    }
    char base[64];
    if (hi == UNBOUNDED)
        snprintf(base, sizeof base, "string-%ld-up", lo);
    else
        snprintf(base, sizeof base, "string-%ld-%ld", lo, hi);
    sbuf b = {0};
    sb_puts(&b, "\"\\\"\" ");
    put_rep(&b, "char", lo, hi);
    sb_puts(&b, hi ? " \"\\\"\" space" : "\"\\\"\" space");
    int nd = b.oom ? -1 : new_node(c);
    char *name = nd >= 0 ? unique_name(c, base) : NULL;
    if (!name || !hm_set(&c->strings, key, strlen(key), nd)) {
        free(name);
        sb_free(&b);
        return nomem(c);
    }
    c->nodes[nd].name = name, c->nodes[nd].body = b.p;
    c->used |= B(P_CHAR) | B(P_SPACE);
    sb_puts(out, name);
    return 0;
}

/* ---- objects ---- */

typedef struct {
    uint32_t cp;
    int child, next; /* first child, next sibling: -1 for none */
    bool term;       /* a declared key ends here */
    char *name;
} tnode;

/* A rule for the JSON text of a key that no declared property has, so an additional property cannot stand in
 * for a declared one with a value of another schema.  A trie of the declared keys, one rule per node: the
 * next character leaves the trie, or follows it.  Undeclared keys are written without escapes (stricter, but
 * a key spelled with an escape could not be told from a declared one); so declared keys that need an
 * escape cannot be spelled at all and need no exclusion. */
static int gen_other_key(ctx *c, const cJSON *props, const site *at, sbuf *out) {
    tnode *t = NULL;
    size_t nt = 0, cap = 0;
    int rc = 0;
    if (!grow((void **)&t, &cap, 1, sizeof *t)) return nomem(c);
    t[nt++] = (tnode){0, -1, -1, false, NULL};
    for (const cJSON *p = props->child; p && !rc; p = p->next) {
        const char *k = p->string ? p->string : "";
        size_t n = strlen(k), i = 0;
        bool plain = true;
        for (size_t j = 0; plain && j < n;) {
            uint32_t cp;
            plain = next_cp(k, n, &j, &cp) && cp >= 0x20 && cp != '"' && cp != '\\' && cp != 0x7F;
        }
        if (!plain) continue;
        int at_node = 0;
        while (i < n) {
            uint32_t cp;
            next_cp(k, n, &i, &cp);
            int ch = t[at_node].child;
            while (ch >= 0 && t[ch].cp != cp) ch = t[ch].next;
            if (ch < 0) {
                if (!grow((void **)&t, &cap, nt + 1, sizeof *t)) {
                    rc = nomem(c);
                    break;
                }
                t[nt] = (tnode){cp, -1, t[at_node].child, false, NULL};
                t[at_node].child = ch = (int)nt++;
            }
            at_node = ch;
        }
        if (!rc) t[at_node].term = true;
    }
    char *base = rc ? NULL : make_hint(at->hint, "key");
    if (!rc && !base) rc = nomem(c);
    for (size_t i = 0; i < nt && !rc; i++)
        if (!(t[i].name = unique_name(c, base))) rc = nomem(c);
    free(base);
    for (size_t i = 0; i < nt && !rc; i++) {
        sbuf b = {0};
        if (!t[i].term) sb_puts(&b, "( ");
        sb_puts(&b, KEY_CHAR_CLASS);
        for (int ch = t[i].child; ch >= 0; ch = t[ch].next) put_cp_escape(&b, t[ch].cp);
        sb_puts(&b, "] " KEY_CHAR_CLASS "]*");
        for (int ch = t[i].child; ch >= 0; ch = t[ch].next) {
            sb_puts(&b, " | \"");
            if (t[ch].cp < 0x80 && t[ch].cp != '"' && t[ch].cp != '\\')
                sb_put(&b, (const char[]){(char)t[ch].cp}, 1);
            else
                put_cp_escape(&b, t[ch].cp);
            sb_puts(&b, "\" ");
            sb_puts(&b, t[ch].name);
        }
        if (!t[i].term) sb_puts(&b, " )?");
        int nd = b.oom ? -1 : new_node(c);
        if (nd < 0) {
            sb_free(&b);
            rc = nomem(c);
            break;
        }
        c->nodes[nd].name = t[i].name, c->nodes[nd].body = b.p;
        t[i].name = NULL; /* the node owns it now */
    }
    if (!rc) {
        sb_puts(out, "\"\\\"\" ");
        sb_puts(out, c->nodes[c->n_nodes - nt].name);
        sb_puts(out, " \"\\\"\" space");
        c->used |= B(P_SPACE);
    }
    for (size_t i = 0; i < nt; i++) free(t[i].name);
    free(t);
    return rc;
}

/* What an additional member's value is: "value" for true, a rule for a schema. */
static int gen_additional_value(ctx *c, const cJSON *addl, const site *at, sbuf *out) {
    if (cJSON_IsTrue(addl)) {
        use(c, P_VALUE, out);
        return 0;
    }
    site sub;
    if (!sub_site(at, "additionalProperties", NULL, -1, "additional", &sub)) return nomem(c);
    int rc = gen_ref(c, addl, &sub, out);
    free_site(&sub);
    return rc;
}

/* One declared member, `"\"key\"" space ":" space value`, into m. */
static int gen_member(ctx *c, const cJSON *p, const site *at, sbuf *m) {
    const char *key = p->string ? p->string : "";
    sbuf js = {0};
    put_json_string(&js, key);
    bool oom = js.oom, ok = !oom && put_literal(m, js.p, js.n);
    sb_free(&js);
    if (!ok)
        return oom ? nomem(c)
                   : mf_err(c->err, MF_E_INVAL,
                            "JSON schema property name at %s/properties is not valid UTF-8", at->path);
    sb_puts(m, " space \":\" space ");
    site sub;
    if (!sub_site(at, "properties", key, -1, NULL, &sub)) return nomem(c);
    int rc = gen_ref(c, p, &sub, m);
    free_site(&sub);
    return rc;
}

/* The object's members in declared order, required ones always, optional ones maybe, then (when extra is
 * given) any further members, with exactly one comma between two members.  Alternative i of the result
 * starts with member i (the first present; all before it optional); rest(j) is members j.. when something
 * came before, each after a comma.  rest(j) for j <= k (k: the first required member) is a chain of rules, so
 * the text stays linear in the number of members. */
static int put_members(ctx *c, char **m, const bool *req, int n, const char *extra, const site *at,
                       sbuf *out) {
    int k = 0;
    while (k < n - 1 && !req[k]) k++;
    bool any_req = req[k];
    /* the inline tail: members k+1.. after a comma each, then the additional ones */
    sbuf tail = {0};
    for (int j = k + 1; j < n; j++) {
        sb_puts(&tail, req[j] ? " \",\" space " : " (\",\" space ");
        sb_puts(&tail, m[j]);
        if (!req[j]) sb_puts(&tail, ")?");
    }
    if (extra) sb_puts(&tail, " (\",\" space "), sb_puts(&tail, extra), sb_puts(&tail, ")*");
    /* rest[j] for 1 <= j <= k+1: a rule's name (its node owns it), or "" when that rest is empty.  Names
     * first, front to back, then the bodies, each referring to the next. */
    const char **rest = calloc((size_t)k + 2, sizeof *rest);
    int rc = rest && !tail.oom ? 0 : nomem(c), first = (int)c->n_nodes;
    char *base = rc ? NULL : make_hint(at->hint, "rest");
    if (!rc && !base) rc = nomem(c);
    for (int j = 1; j <= k + 1 && k > 0 && !rc; j++) {
        rest[j] = "";
        if (j == k + 1 && !tail.n) break;
        int nd = new_node(c);
        char *name = nd >= 0 ? unique_name(c, base) : NULL;
        if (!name)
            rc = nomem(c);
        else
            c->nodes[nd].name = name, rest[j] = name;
    }
    for (int j = 1; j <= k + 1 && k > 0 && !rc; j++) {
        if (!*rest[j]) break;
        sbuf b = {0};
        if (j == k + 1) {
            sb_puts(&b, tail.p + 1);
        } else {
            sb_puts(&b, req[j] ? "\",\" space " : "(\",\" space ");
            sb_puts(&b, m[j]);
            sb_puts(&b, req[j] ? "" : ")?");
            if (*rest[j + 1]) sb_puts(&b, " "), sb_puts(&b, rest[j + 1]);
        }
        if (b.oom)
            rc = nomem(c);
        else
            c->nodes[first + j - 1].body = b.p, b.p = NULL;
        sb_free(&b);
    }
    if (!rc) {
        sb_puts(out, "( ");
        for (int i = 0; i <= k; i++) {
            if (i) sb_puts(out, " | ");
            sb_puts(out, m[i]);
            const char *r = k > 0 ? rest[i + 1] : tail.n ? tail.p + 1 : "";
            if (*r) sb_puts(out, " "), sb_puts(out, r);
        }
        if (!any_req && extra)
            sb_puts(out, " | "), sb_puts(out, extra), sb_puts(out, " (\",\" space "), sb_puts(out, extra),
                sb_puts(out, ")*");
        sb_puts(out, any_req ? " )" : " )?");
    }
    free(rest);
    free(base);
    sb_free(&tail);
    return rc;
}

static int gen_object(ctx *c, const cJSON *kw[K_COUNT], const site *at, sbuf *out) {
    const cJSON *props = kw[K_PROPERTIES], *req = kw[K_REQUIRED], *addl = kw[K_ADDITIONAL];
    if (props && !cJSON_IsObject(props))
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema 'properties' at %s must be an object of schemas, got %s", at->path,
                      kind_of(props));
    if (req && !cJSON_IsArray(req))
        return mf_err(c->err, MF_E_INVAL, "JSON schema 'required' at %s must be an array of names, got %s",
                      at->path, kind_of(req));
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema 'additionalProperties' at %s must be a boolean or a schema, got %s",
                      at->path, kind_of(addl));
    /* declared names -> their index, which also catches a name declared twice */
    hmap idx = {0};
    int n = 0, rc = 0;
    for (const cJSON *p = props ? props->child : NULL; p && !rc; p = p->next, n++) {
        const char *key = p->string ? p->string : "";
        if (hm_get(&idx, key, strlen(key)))
            rc = mf_err(c->err, MF_E_INVAL,
                        "JSON schema property '%.100s' is declared twice in %s/properties; keep one", key,
                        at->path);
        else if (!hm_set(&idx, key, strlen(key), n))
            rc = nomem(c);
    }
    bool *is_req = rc ? NULL : calloc((size_t)n + 1, sizeof *is_req);
    if (!rc && !is_req) rc = nomem(c);
    for (const cJSON *r = req ? req->child : NULL; r && !rc; r = r->next) {
        if (!cJSON_IsString(r)) {
            rc = mf_err(c->err, MF_E_INVAL,
                        "JSON schema 'required' at %s holds %s; it lists property names (strings)", at->path,
                        kind_of(r));
            break;
        }
        int *i = hm_get(&idx, r->valuestring, strlen(r->valuestring));
        if (!i)
            rc = mf_err(c->err, MF_E_UNSUPPORTED,
                        "JSON schema 'required' at %s names '%.100s', which is not in its 'properties'; "
                        "declare it there "
                        "(with its schema) or drop it from 'required'",
                        at->path, r->valuestring);
        else
            is_req[*i] = true;
    }
    hm_free(&idx);
    sbuf extra = {0};
    bool has_extra = addl && !cJSON_IsFalse(addl);
    if (!rc && !props && (!addl || cJSON_IsTrue(addl))) { /* nothing said about the members: any object */
        use(c, P_OBJECT, out);
    } else if (!rc) {
        if (has_extra) {
            if (props)
                rc = gen_other_key(c, props, at, &extra);
            else
                use(c, P_STRING, &extra); /* no declared key to tell an additional one from */
            if (!rc) sb_puts(&extra, " \":\" space "), rc = gen_additional_value(c, addl, at, &extra);
        }
        char **m = rc ? NULL : calloc((size_t)n + 1, sizeof *m);
        if (!rc && !m) rc = nomem(c);
        int i = 0;
        for (const cJSON *p = props ? props->child : NULL; p && !rc; p = p->next, i++) {
            sbuf mb = {0};
            rc = gen_member(c, p, at, &mb);
            if (!rc && mb.oom) rc = nomem(c);
            m[i] = mb.p;
            if (rc) break;
        }
        if (!rc && extra.oom) rc = nomem(c);
        if (!rc) {
            sb_puts(out, "\"{\" space ");
            if (n)
                rc = put_members(c, m, is_req, n, has_extra ? extra.p : NULL, at, out);
            else if (has_extra)
                sb_puts(out, "( "), sb_puts(out, extra.p), sb_puts(out, " (\",\" space "),
                    sb_puts(out, extra.p), sb_puts(out, ")* )?");
            sb_puts(out, n || has_extra ? " \"}\" space" : "\"}\" space");
            c->used |= B(P_SPACE);
        }
        for (int j = 0; m && j < n; j++) free(m[j]);
        free(m);
    }
    sb_free(&extra);
    free(is_req);
    return rc;
}

/* ---- arrays ---- */

static int gen_array(ctx *c, const cJSON *kw[K_COUNT], const site *at, sbuf *out) {
    const cJSON *items = kw[K_ITEMS], *prefix = kw[K_PREFIX];
    if (items && cJSON_IsArray(items))
        return mf_err(
            c->err, MF_E_UNSUPPORTED,
            "JSON schema 'items' at %s is an array (the tuple form of older drafts), which is not supported; "
            "write the list as 'prefixItems'",
            at->path);
    if (items && !cJSON_IsBool(items) && !cJSON_IsObject(items))
        return mf_err(c->err, MF_E_INVAL, "JSON schema 'items' at %s must be a schema, got %s", at->path,
                      kind_of(items));
    if (prefix && !cJSON_IsArray(prefix))
        return mf_err(c->err, MF_E_INVAL,
                      "JSON schema 'prefixItems' at %s must be an array of schemas, got %s", at->path,
                      kind_of(prefix));
    long p = prefix ? cJSON_GetArraySize(prefix) : 0;
    if (p > MAX_PREFIX)
        return mf_err(c->err, MF_E_UNSUPPORTED,
                      "JSON schema 'prefixItems' at %s lists %ld schemas, more than the %d supported",
                      at->path, p, MAX_PREFIX);
    long lo, hi;
    int rc = get_range(c, kw[K_MIN_ITEMS], kw[K_MAX_ITEMS], at->path, &lo, &hi);
    if (rc) return rc;
    if (!items && !prefix && lo == 0 && hi == UNBOUNDED) {
        use(c, P_ARRAY, out);
        return 0;
    }
    long top = hi; /* the most items there can be */
    if (cJSON_IsFalse(items) && (top == UNBOUNDED || top > p)) top = p;
    if (top != UNBOUNDED && lo > top)
        return mf_err(c->err, MF_E_UNSUPPORTED,
                      "JSON schema 'minItems' %ld at %s asks for more items than the %ld that 'prefixItems' "
                      "allows with "
                      "'items' false, so nothing can match; fix one of them",
                      lo, at->path, top);
    c->used |= B(P_SPACE);
    sb_puts(out, "\"[\" space ");
    long opened = 0, shown = top == UNBOUNDED ? p : MF_MIN(p, top);
    long i = 0;
    for (const cJSON *e = prefix ? prefix->child : NULL; e && i < shown && !rc; e = e->next, i++) {
        if (i >= lo) sb_puts(out, "( "), opened++; /* from here on the array may end */
        if (i) sb_puts(out, "\",\" space ");
        site sub;
        if (!sub_site(at, "prefixItems", NULL, i, NULL, &sub)) return nomem(c);
        char seg[32];
        snprintf(seg, sizeof seg, "tuple-%ld", i);
        free(sub.hint);
        sub.hint = make_hint(at->hint, seg);
        rc = sub.hint ? gen_ref(c, e, &sub, out) : nomem(c);
        free_site(&sub);
        sb_puts(out, " ");
    }
    if (!rc && (top == UNBOUNDED || top > p)) { /* the items after the prefix */
        sbuf item = {0};
        if (!items || cJSON_IsTrue(items)) {
            use(c, P_VALUE, &item);
        } else {
            site sub;
            if (!sub_site(at, "items", NULL, -1, "items", &sub)) return nomem(c);
            rc = gen_ref(c, items, &sub, &item);
            free_site(&sub);
        }
        if (!rc && item.oom) rc = nomem(c);
        if (!rc) {
            long more_lo = lo > p ? lo - p : 0, more_hi = top == UNBOUNDED ? UNBOUNDED : top - p;
            sbuf rep = {0};
            sb_puts(&rep, "(\",\" space "), sb_puts(&rep, item.p), sb_puts(&rep, ")");
            if (rep.oom)
                rc = nomem(c);
            else if (p)
                put_rep(out, rep.p, more_lo, more_hi);
            else { /* the first item has no comma before it */
                if (!more_lo) sb_puts(out, "( ");
                sb_puts(out, item.p), sb_puts(out, " ");
                put_rep(out, rep.p, more_lo ? more_lo - 1 : 0,
                        more_hi == UNBOUNDED ? UNBOUNDED : more_hi - 1);
                if (!more_lo) sb_puts(out, " )?");
            }
            sb_free(&rep);
        }
        sb_free(&item);
    }
    for (long k = 0; k < opened; k++) sb_puts(out, " )?");
    sb_puts(out, " \"]\" space");
    return rc;
}

/* ---- one schema ---- */

/* No 'type': the types its keywords are about (properties -> object, ...), 0 when it has none.  A schema
 * saying `"properties": {...}` alone would also let through any number or string; an object is what is
 * meant, and the stricter reading is safe. */
static unsigned infer_types(const cJSON *kw[K_COUNT]) {
    unsigned m = 0;
    if (kw[K_PROPERTIES] || kw[K_REQUIRED] || kw[K_ADDITIONAL]) m |= T_OBJECT;
    if (kw[K_ITEMS] || kw[K_PREFIX] || kw[K_MIN_ITEMS] || kw[K_MAX_ITEMS]) m |= T_ARRAY;
    if (kw[K_MIN_LENGTH] || kw[K_MAX_LENGTH]) m |= T_STRING;
    return m;
}

/* The schema by its type(s): one alternative per type. */
static int gen_typed(ctx *c, const cJSON *kw[K_COUNT], const site *at, sbuf *out) {
    unsigned mask = 0;
    int rc = kw[K_TYPE] ? parse_types(c, kw[K_TYPE], at->path, &mask) : 0;
    if (rc) return rc;
    if (!kw[K_TYPE]) mask = infer_types(kw);
    if (!mask) { /* nothing that constrains: any value */
        use(c, P_VALUE, out);
        return 0;
    }
    if (mask & T_NUMBER) mask &= ~(unsigned)T_INTEGER; /* every integer is a number */
    int n = 0;
    static const unsigned order[] = {T_OBJECT, T_ARRAY, T_STRING, T_NUMBER, T_INTEGER, T_BOOLEAN, T_NULL};
    for (size_t i = 0; i < MF_ARRAY_LEN(order) && !rc; i++) {
        if (!(mask & order[i])) continue;
        if (n++) sb_puts(out, " | ");
        switch (order[i]) {
        case T_OBJECT:
            rc = gen_object(c, kw, at, out);
            break;
        case T_ARRAY:
            rc = gen_array(c, kw, at, out);
            break;
        case T_STRING:
            rc = gen_string(c, kw, at, out);
            break;
        case T_NUMBER:
            use(c, P_NUMBER, out);
            break;
        case T_INTEGER:
            use(c, P_INTEGER, out);
            break;
        case T_BOOLEAN:
            use(c, P_BOOLEAN, out);
            break;
        default:
            use(c, P_NULL, out);
            break;
        }
    }
    return rc;
}

/* The body of a rule matching schema s (alternatives allowed at its top level). */
static int gen_body(ctx *c, const cJSON *s, const site *at, sbuf *out) {
    if (at->depth > MAX_DEPTH)
        return mf_err(c->err, MF_E_UNSUPPORTED,
                      "the JSON schema nests deeper than %d levels at %s; move inner schemas into $defs and "
                      "refer to them "
                      "with $ref",
                      MAX_DEPTH, at->path);
    if (cJSON_IsTrue(s)) {
        use(c, P_VALUE, out);
        return 0;
    }
    if (cJSON_IsFalse(s))
        return mf_err(c->err, MF_E_UNSUPPORTED,
                      "the JSON schema at %s is false, which no value matches; remove it (or the property or "
                      "item it is for)",
                      at->path);
    if (!cJSON_IsObject(s)) {
        char b[48];
        show(s, b, sizeof b);
        return mf_err(c->err, MF_E_INVAL, "the JSON schema at %s is %s (%s), not an object or a boolean",
                      at->path, kind_of(s), b);
    }
    const cJSON *kw[K_COUNT];
    int rc = scan_keywords(c, s, at->path, kw);
    if (rc) return rc;
    static const int combinators[] = {K_REF, K_ANY_OF, K_ONE_OF, K_ALL_OF};
    for (size_t i = 0; i < MF_ARRAY_LEN(combinators); i++)
        if (kw[combinators[i]]) return gen_combinator(c, kw, combinators[i], at, out);
    if (kw[K_ENUM] && kw[K_CONST])
        return mf_err(
            c->err, MF_E_UNSUPPORTED,
            "JSON schema keywords 'enum' and 'const' side by side at %s are not supported; keep one",
            at->path);
    if (kw[K_ENUM] || kw[K_CONST]) return gen_literals(c, kw, at, out);
    return gen_typed(c, kw, at, out);
}

/* ---- the whole schema ---- */

/* A cycle of rules reaching each other without consuming a character (a $ref back to itself through anyOf
 * or $ref only) matches no finite text, and a stack matcher cannot follow it: refuse it, naming a $ref
 * target on the cycle.  Iterative depth-first search, so no recursion however many rules. */
static int check_left_recursion(ctx *c) {
    size_t nn = c->n_nodes, ne = c->n_edges;
    size_t *start = calloc(nn + 1, sizeof *start);
    int *adj = malloc((ne ? ne : 1) * sizeof *adj), *stack = malloc(nn * sizeof *stack);
    size_t *pos = malloc(nn * sizeof *pos);
    unsigned char *color = calloc(nn, 1); /* 0 unseen, 1 on the stack, 2 done */
    int rc = start && adj && stack && pos && color ? 0 : nomem(c);
    if (!rc) { /* edges grouped by their first node (counting sort) */
        for (size_t e = 0; e < ne; e++) start[c->edges[2 * e] + 1]++;
        for (size_t i = 0; i < nn; i++) start[i + 1] += start[i];
        for (size_t i = 0; i < nn; i++) pos[i] = start[i];
        for (size_t e = 0; e < ne; e++) adj[pos[c->edges[2 * e]]++] = c->edges[2 * e + 1];
    }
    for (size_t r = 0; r < nn && !rc; r++) {
        if (color[r]) continue;
        size_t sp = 0;
        stack[sp++] = (int)r, pos[r] = start[r], color[r] = 1;
        while (sp && !rc) {
            int v = stack[sp - 1];
            if (pos[v] == start[v + 1]) {
                color[v] = 2, sp--;
                continue;
            }
            int w = adj[pos[v]++];
            if (color[w] == 0) {
                stack[sp++] = w, pos[w] = start[w], color[w] = 1;
            } else if (color[w] == 1) { /* back to w: the stack from w up is the cycle */
                const char *path = "#";
                for (size_t k = sp; k-- > 0;) {
                    if (c->nodes[stack[k]].path) path = c->nodes[stack[k]].path;
                    if (stack[k] == w) break;
                }
                rc = mf_err(c->err, MF_E_UNSUPPORTED,
                            "the JSON schema at %s refers back to itself through $ref/anyOf/oneOf/allOf "
                            "before any JSON "
                            "text (left recursion), so no finite value can match; put the reference inside "
                            "'properties' or 'items'",
                            path);
            }
        }
    }
    free(start), free(adj), free(stack), free(pos), free(color);
    return rc;
}

static void put_rule(sbuf *b, const char *name, const char *body) {
    sb_puts(b, name);
    sb_puts(b, " ::= ");
    sb_puts(b, body);
    sb_puts(b, "\n");
}

/* Every $ref target, the root first, into its rule; then the rules in order, then the primitives used. */
static int generate(ctx *c, char **out) {
    for (int p = 0; p < P_COUNT; p++) /* generated rules never take a primitive's name */
        if (!hm_set(&c->names, prims[p].name, strlen(prims[p].name), 2)) return nomem(c);
    int root = new_node(c);
    char *rname = strdup("root"), *rpath = strdup("#");
    if (root < 0 || !rname || !rpath || !hm_set(&c->names, "root", 4, 2) ||
        !hm_set(&c->refs, &c->root, sizeof c->root, root)) {
        free(rname), free(rpath);
        return nomem(c);
    }
    c->nodes[root] = (gnode){.name = rname, .path = rpath, .target = c->root};
    for (size_t i = 0; i < c->n_nodes; i++) { /* the loop sees the targets found on the way */
        if (!c->nodes[i].target) continue;
        const cJSON *s = c->nodes[i].target;
        c->nodes[i].target = NULL;
        site at = {
            .path = c->nodes[i].path, .hint = c->nodes[i].name, .depth = 1, .cur = (int)i, .head = true};
        sbuf body = {0};
        int rc = gen_body(c, s, &at, &body);
        if (!rc && body.oom) rc = nomem(c);
        if (rc) {
            sb_free(&body);
            return rc;
        }
        c->nodes[i].body = body.p;
    }
    int rc = check_left_recursion(c);
    if (rc) return rc;
    c->used |= B(P_SPACE);
    for (unsigned prev = 0; prev != c->used;) { /* the primitives the used ones refer to */
        prev = c->used;
        for (int p = 0; p < P_COUNT; p++)
            if (c->used & B(p)) c->used |= prims[p].deps;
    }
    sbuf g = {0};
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].name && c->nodes[i].body) put_rule(&g, c->nodes[i].name, c->nodes[i].body);
    for (int p = 0; p < P_COUNT; p++)
        if (c->used & B(p)) put_rule(&g, prims[p].name, prims[p].body);
    if (g.oom) {
        sb_free(&g);
        return nomem(c);
    }
    *out = g.p;
    return 0;
}

/* The byte offset of a "\u0000" escape in the text, or len: cJSON would cut the string at that NUL and the
 * grammar would match a different key or value. */
static size_t find_nul_escape(const char *json, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (json[i] != '\\') continue;
        if (json[i + 1] == 'u' && len - i >= 6 && !memcmp(json + i + 2, "0000", 4)) return i;
        i++; /* the escaped character is not itself an escape */
    }
    return len;
}

int mf_json_schema_to_gbnf(const char *json, size_t len, char **out, mf_error *err) {
    if (!out) return mf_err(err, MF_E_INVAL, "mf_json_schema_to_gbnf: out is NULL");
    *out = NULL;
    if (!json || !len)
        return mf_err(err, MF_E_INVAL,
                      "the JSON schema is empty; pass a JSON object such as {\"type\": \"string\"}, or true");
    const char *nul = memchr(json, 0, len);
    if (nul)
        return mf_err(err, MF_E_INVAL, "the JSON schema holds a NUL byte at byte %zu; JSON text has none",
                      (size_t)(nul - json));
    size_t at = find_nul_escape(json, len);
    if (at < len)
        return mf_err(
            err, MF_E_UNSUPPORTED,
            "the JSON schema holds the escape \\u0000 at byte %zu, which is not supported; remove it", at);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return mf_err(err, MF_E_INVAL,
                      "the JSON schema is not valid JSON near byte %zu; check the text there", off);
    }
    size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : len;
    while (off < len && (json[off] == ' ' || json[off] == '\t' || json[off] == '\n' || json[off] == '\r'))
        off++;
    if (off < len) {
        cJSON_Delete(root);
        return mf_err(err, MF_E_INVAL,
                      "the JSON schema has more text after its value, at byte %zu; pass one JSON value", off);
    }
    ctx c = {.root = root, .err = err};
    int rc = generate(&c, out);
    for (size_t i = 0; i < c.n_nodes; i++)
        free(c.nodes[i].name), free(c.nodes[i].body), free(c.nodes[i].path);
    free(c.nodes);
    free(c.edges);
    hm_free(&c.names);
    hm_free(&c.refs);
    hm_free(&c.strings);
    cJSON_Delete(root);
    return rc;
}
