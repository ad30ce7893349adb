/* core/pyjson: JSON text -> Python json.dumps(ensure_ascii=False) form (see pyjson.h). */
#include "core/pyjson.h"
#include "core/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_DEPTH = 256 };

typedef struct {
    const unsigned char *s;
    size_t n, i;
    char *o;
    size_t on, ocap;
    bool oom;
    const char *bad; /* why the text is not JSON, at byte i */
} pj;

static void put(pj *p, const char *s, size_t n) {
    if (p->oom) return;
    if (p->on + n + 1 > p->ocap) {
        size_t cap = p->ocap ? p->ocap : 64;
        while (cap < p->on + n + 1) cap *= 2;
        char *q = realloc(p->o, cap);
        if (!q) {
            p->oom = true;
            return;
        }
        p->o = q, p->ocap = cap;
    }
    memcpy(p->o + p->on, s, n);
    p->on += n;
    p->o[p->on] = 0;
}
static void puts_(pj *p, const char *s) { put(p, s, strlen(s)); }

static bool fail(pj *p, const char *why) {
    if (!p->bad) p->bad = why;
    return false;
}

static void skip_ws(pj *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static bool literal(pj *p, const char *word) {
    size_t k = strlen(word);
    if (p->n - p->i < k || memcmp(p->s + p->i, word, k)) return fail(p, "not a JSON value");
    p->i += k;
    puts_(p, word);
    return true;
}

static int hex4(const unsigned char *h) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        int c = h[k], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static void put_cp(pj *p, uint32_t c) { /* a scalar value as UTF-8, escaped as json.dumps escapes */
    char b[8];
    size_t k = 0;
    if (c == '"') puts_(p, "\\\"");
    else if (c == '\\') puts_(p, "\\\\");
    else if (c == '\n') puts_(p, "\\n");
    else if (c == '\r') puts_(p, "\\r");
    else if (c == '\t') puts_(p, "\\t");
    else if (c == '\b') puts_(p, "\\b");
    else if (c == '\f') puts_(p, "\\f");
    else if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF)) { /* a lone surrogate has no UTF-8: Python's \u form */
        snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
        puts_(p, b);
    } else {
        if (c < 0x80) b[k++] = (char)c;
        else if (c < 0x800) b[k++] = (char)(0xC0 | c >> 6), b[k++] = (char)(0x80 | (c & 0x3F));
        else if (c < 0x10000)
            b[k++] = (char)(0xE0 | c >> 12), b[k++] = (char)(0x80 | (c >> 6 & 0x3F)), b[k++] = (char)(0x80 | (c & 0x3F));
        else
            b[k++] = (char)(0xF0 | c >> 18), b[k++] = (char)(0x80 | (c >> 12 & 0x3F)),
            b[k++] = (char)(0x80 | (c >> 6 & 0x3F)), b[k++] = (char)(0x80 | (c & 0x3F));
        put(p, b, k);
    }
}

static bool string(pj *p) {
    p->i++; /* the opening quote */
    puts_(p, "\"");
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            puts_(p, "\"");
            return true;
        }
        if (c < 0x20) return fail(p, "a control character inside a string (JSON needs it escaped)");
        if (c == '\\') {
            if (p->i + 1 >= p->n) break;
            unsigned char e = p->s[p->i + 1];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char dec[] = "\"\\/\b\f\n\r\t";
                put_cp(p, (unsigned char)dec[simple - "\"\\/bfnrt"]);
                p->i += 2;
                continue;
            }
            if (e != 'u') return fail(p, "an unknown escape in a string");
            int u = p->n - p->i >= 6 ? hex4(p->s + p->i + 2) : -1;
            if (u < 0) return fail(p, "a \\u escape without four hex digits");
            p->i += 6;
            uint32_t cp = (uint32_t)u;
            if (u >= 0xD800 && u <= 0xDBFF && p->n - p->i >= 6 && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                int lo = hex4(p->s + p->i + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + (((uint32_t)u - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p->i += 6;
                }
            }
            put_cp(p, cp);
            continue;
        }
        int k = mf_utf8_seq(p->s + p->i, p->n - p->i);
        if (k < 0) return fail(p, "a string that is not valid UTF-8");
        put(p, (const char *)p->s + p->i, (size_t)k);
        p->i += (size_t)k;
    }
    return fail(p, "an unterminated string");
}

/* Python's repr of a finite or infinite double, as json.dumps writes a float. */
static void put_float(pj *p, double d) {
    if (isinf(d)) {
        puts_(p, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    char e[40], out[64];
    int prec = 0;
    for (; prec < 17; prec++) { /* the shortest digits that read back as d */
        snprintf(e, sizeof e, "%.*e", prec, fabs(d));
        if (strtod(e, NULL) == fabs(d)) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *q = e;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    size_t k = 0;
    if (signbit(d)) out[k++] = '-';
    if (exp10 >= -4 && exp10 < 16) { /* positional, with at least one digit after the point */
        if (exp10 < 0) {
            out[k++] = '0', out[k++] = '.';
            for (int z = 0; z < -exp10 - 1; z++) out[k++] = '0';
            for (size_t z = 0; z < nd; z++) out[k++] = digits[z];
        } else {
            for (int z = 0; z <= exp10; z++) out[k++] = (size_t)z < nd ? digits[z] : '0';
            out[k++] = '.';
            if (nd > (size_t)exp10 + 1)
                for (size_t z = (size_t)exp10 + 1; z < nd; z++) out[k++] = digits[z];
            else
                out[k++] = '0';
        }
        out[k] = 0;
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (size_t z = 1; z < nd; z++) out[k++] = digits[z];
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    puts_(p, out);
}

static bool number(pj *p) {
    size_t a = p->i, i = p->i;
    const unsigned char *s = p->s;
    bool is_int = true;
    if (i < p->n && s[i] == '-') i++;
    if (i < p->n && s[i] == '0') i++;
    else if (i < p->n && s[i] >= '1' && s[i] <= '9')
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    else
        return fail(p, "not a JSON value");
    if (i < p->n && s[i] == '.') {
        is_int = false;
        if (++i >= p->n || s[i] < '0' || s[i] > '9') return fail(p, "a number without digits after its point");
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
        is_int = false;
        if (++i < p->n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9') return fail(p, "a number without exponent digits");
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    p->i = i;
    if (is_int) {
        bool zero = i - a == 2 && s[a] == '-'; /* "-0": Python's int has no negative zero */
        put(p, (const char *)s + a + zero, i - a - zero);
        return true;
    }
    char buf[512];
    if (i - a >= sizeof buf) return fail(p, "a number over 511 characters");
    memcpy(buf, s + a, i - a);
    buf[i - a] = 0;
    put_float(p, strtod(buf, NULL));
    return true;
}

static bool value(pj *p, int depth);

static bool container(pj *p, int depth, char close) {
    if (depth >= MAX_DEPTH) return fail(p, "more than 256 levels of nesting");
    p->i++;
    put(p, close == '}' ? "{" : "[", 1);
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
        p->i++;
        put(p, &close, 1);
        return true;
    }
    for (bool first = true;; first = false) {
        if (!first) puts_(p, ", ");
        if (close == '}') {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "an object key that is not a string");
            if (!string(p)) return false;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "a key without ':'");
            p->i++;
            puts_(p, ": ");
        }
        if (!value(p, depth + 1)) return false;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (unsigned char)close) {
            p->i++;
            put(p, &close, 1);
            return true;
        }
        return fail(p, close == '}' ? "an object without ',' or '}'" : "an array without ',' or ']'");
    }
}

static bool value(pj *p, int depth) {
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "the text ends where a value should be");
    switch (p->s[p->i]) {
    case '{': return container(p, depth, '}');
    case '[': return container(p, depth, ']');
    case '"': return string(p);
    case 't': return literal(p, "true");
    case 'f': return literal(p, "false");
    case 'n': return literal(p, "null");
    default: return number(p);
    }
}

int mf_pyjson(const char *s, size_t n, char **out, size_t *out_len, mf_error *err) {
    *out = NULL;
    pj p = {.s = (const unsigned char *)s, .n = n};
    put(&p, "", 0);
    bool ok = value(&p, 0);
    if (ok) {
        skip_ws(&p);
        if (p.i < p.n) ok = fail(&p, "text after the value");
    }
    if (p.oom) {
        free(p.o);
        return mf_err(err, MF_E_NOMEM, "out of memory rewriting %zu bytes of JSON", n);
    }
    if (!ok) {
        free(p.o);
        return mf_err(err, MF_E_INVAL, "not valid JSON at byte %zu of %zu: %s", p.i, n, p.bad);
    }
    *out = p.o;
    if (out_len) *out_len = p.on;
    return 0;
}
