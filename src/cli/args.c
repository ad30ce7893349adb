/* Argument helpers shared by the subcommands: strict number parsing with messages that name the flag,
 * the value and the allowed range; the one rule for repeated options; checked writes to stdout. */
#include "cli/cli.h"
#include "core/env.h"

#include "minfer.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Only an optional '-' then decimal digits: no leading blanks, no '+', so what is printed back in a
 * message is exactly what the number was. */
static bool plain_integer(const char *s, bool allow_minus) {
    if (allow_minus && *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return false;
    while (isdigit((unsigned char)*s)) s++;
    return *s == 0;
}

bool mf_arg_int(const char *flag, const char *val, long min, long max, long *out) {
    if (!plain_integer(val, true)) {
        fprintf(stderr, "Error: %s expects an integer in [%ld, %ld], got '%s'\n", flag, min, max, val);
        return false;
    }
    errno = 0;
    long long v = strtoll(val, NULL, 10);
    if (errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "Error: %s must be in [%ld, %ld], got %s%s\n", flag, min, max, val,
                errno == ERANGE ? " (out of range)" : "");
        return false;
    }
    *out = (long)v;
    return true;
}

bool mf_arg_u64(const char *flag, const char *val, uint64_t *out) {
    if (!plain_integer(val, false)) {
        fprintf(stderr, "Error: %s expects an unsigned decimal integer in [0, %" PRIu64 "], got '%s'\n", flag,
                UINT64_MAX, val);
        return false;
    }
    errno = 0;
    unsigned long long v = strtoull(val, NULL, 10);
    if (errno == ERANGE) {
        fprintf(stderr, "Error: %s must be in [0, %" PRIu64 "], got %s (out of range)\n", flag, UINT64_MAX,
                val);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

/* Every float flag ends up in a float: refuse what is not a finite float (nan, inf, 1e39) here. */
bool mf_arg_float(const char *flag, const char *val, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (end == val || *end || isspace((unsigned char)*val)) {
        fprintf(stderr, "Error: %s expects a number, got '%s'\n", flag, val);
        return false;
    }
    if (isnan(v) || isinf(v)) {
        fprintf(stderr, "Error: %s must be a finite number, got '%s'\n", flag, val);
        return false;
    }
    if (errno == ERANGE || fabs(v) > FLT_MAX) {
        fprintf(stderr, "Error: %s must be a finite number within +-%g, got '%s' (out of range)\n", flag,
                (double)FLT_MAX, val);
        return false;
    }
    *out = v;
    return true;
}

const char *mf_arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "Error: %s needs a value\n", argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

/* Marks a switch (an option without a value) in the seen-table. */
static const char k_switch[] = "";

bool mf_arg_once(mf_arg_seen *s, const char *name, const char *value) {
    for (int k = 0; k < s->n; k++) {
        if (strcmp(s->name[k], name)) continue;
        const char *a = s->value[k];
        if (a == k_switch || !value)
            fprintf(stderr, "Error: %s given twice; give it once\n", name);
        else
            fprintf(stderr, "Error: %s given twice ('%.60s%s', then '%.60s%s'); give it once\n", name, a,
                    strlen(a) > 60 ? "..." : "", value, strlen(value) > 60 ? "..." : "");
        return false;
    }
    if (s->n == MF_ARG_MAX_SEEN) { /* more distinct options than any command has: a programming error */
        fprintf(stderr, "Error: too many options (more than %d)\n", MF_ARG_MAX_SEEN);
        return false;
    }
    s->name[s->n] = name;
    s->value[s->n++] = value ? value : k_switch;
    return true;
}

bool mf_out_check(FILE *f, const char *what) {
    /* a write that failed inside an earlier fprintf (a text longer than the stdio buffer) set the error
     * flag and errno then; the flush below may fail without a write of its own, leaving errno 0 */
    int e0 = ferror(f) ? errno : 0;
    errno = 0;
    if (fflush(f) == 0 && !ferror(f)) return true;
    int e = errno ? errno : e0;
    fprintf(stderr, "Error: writing to %s failed: %s; stopping\n", what, e ? strerror(e) : "I/O error");
    return false;
}

char *mf_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "Error: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "Error: cannot read '%s'\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* --tokens: JSON (cJSON checks the syntax), an array whose elements are numbers written as plain
 * integers.  cJSON reads numbers with strtod, which takes "01" and "1e2"; so once the structure is known
 * to be [number, ...], the number texts are re-read from s and held to 0|[1-9][0-9]* in [0, INT32_MAX]. */
bool mf_arg_token_ids(const char *flag, const char *s, int32_t **out, int32_t *n) {
    *out = NULL;
    *n = 0;
    const char *end = NULL;
    /* cJSON skips every byte <= 0x20 as a blank; JSON allows only space, tab, CR and LF there */
    for (const char *c = s; *c && !end; c++)
        if ((unsigned char)*c < 0x20 && !strchr("\t\r\n", *c)) end = c;
    cJSON *root = end ? NULL : cJSON_ParseWithOpts(s, &end, true);
    if (!root) {
        size_t at = end && end >= s ? (size_t)(end - s) : 0;
        fprintf(stderr,
                "Error: %s expects a JSON array of token ids such as '[9707, 11, 1879]', got '%.60s%s' "
                "(not valid JSON at byte %zu)\n",
                flag, s, strlen(s) > 60 ? "..." : "", at);
        return false;
    }
    if (!cJSON_IsArray(root)) {
        fprintf(stderr,
                "Error: %s expects a JSON array of token ids such as '[9707, 11, 1879]', got '%.60s%s'\n",
                flag, s, strlen(s) > 60 ? "..." : "");
        cJSON_Delete(root);
        return false;
    }
    int count = cJSON_GetArraySize(root), k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!cJSON_IsNumber(it)) {
            fprintf(stderr, "Error: %s element %d is not a number; token ids are integers in [0, %d]\n", flag,
                    k, INT32_MAX);
            cJSON_Delete(root);
            return false;
        }
        k++;
    }
    cJSON_Delete(root);
    int32_t *ids = malloc(sizeof *ids * (size_t)(count > 0 ? count : 1));
    if (!ids) {
        fprintf(stderr, "Error: out of memory for %d token ids\n", count);
        return false;
    }
    /* Valid JSON holding only numbers: the text is blanks, '[', ']', ',' and the number texts, in order. */
    const char *p = s;
    for (k = 0; k < count; k++) {
        while (*p && strchr(" \t\r\n[,", *p)) p++;
        size_t len = strcspn(p, " \t\r\n,]");
        int shown = (int)(len > 40 ? 40 : len);
        bool digits = true;
        for (size_t j = 0; j < len; j++) digits = digits && isdigit((unsigned char)p[j]);
        if (!digits || (p[0] == '0' && len > 1)) {
            fprintf(
                stderr,
                "Error: %s element %d is '%.*s'; token ids are plain decimal integers in [0, %d] (no sign, "
                "leading zero, fraction or exponent)\n",
                flag, k, shown, p, INT32_MAX);
            free(ids);
            return false;
        }
        long long v = len > 10 ? INT64_MAX : strtoll(p, NULL, 10);
        if (v > INT32_MAX) {
            fprintf(stderr, "Error: %s element %d is %.*s%s, outside the token id range [0, %d]\n", flag, k,
                    shown, p, (size_t)shown < len ? "..." : "", INT32_MAX);
            free(ids);
            return false;
        }
        ids[k] = (int32_t)v;
        p += len;
    }
    *out = ids;
    *n = count;
    return true;
}

/* ---- KV cache types ---- */
static const struct {
    const char *name;
    uint32_t id;
} k_cache_types[] = {{"f32", MF_KV_TYPE_F32}, {"f16", MF_KV_TYPE_F16}, {"q8_0", MF_KV_TYPE_Q8_0}};
#define CACHE_DEFAULT MF_KV_TYPE_F16 /* MINFER_CACHE_TYPE's default in src/core/env.c says the same */

const char *mf_arg_cache_name(uint32_t type) {
    for (size_t i = 0; i < sizeof k_cache_types / sizeof k_cache_types[0]; i++)
        if (k_cache_types[i].id == type) return k_cache_types[i].name;
    return "unknown";
}

int mf_arg_cache_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_cache *c) {
    const char *a = argv[*i], *v;
    int *slot;
    const char *name;
    if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) slot = &c->k, name = "-ctk/--cache-type-k";
    else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) slot = &c->v, name = "-ctv/--cache-type-v";
    else if (!strcmp(a, "--cache-type")) slot = &c->both, name = "--cache-type";
    else return 0;
    if (!(v = mf_arg_value(argc, argv, i)) || !mf_arg_once(seen, name, v)) return -1;
    for (size_t j = 0; j < sizeof k_cache_types / sizeof k_cache_types[0]; j++)
        if (!strcasecmp(v, k_cache_types[j].name)) {
            *slot = (int)k_cache_types[j].id;
            return 1;
        }
    fprintf(stderr, "Error: %s %s is not a KV cache type (f32, f16, q8_0); refusing rather than silently running with %s\n",
            a, *v ? v : "''", mf_arg_cache_name(CACHE_DEFAULT));
    return -1;
}

bool mf_arg_cache_type(const mf_arg_cache *c, uint32_t *type_k, uint32_t *type_v) {
    mf_error err = {0};
    int w = -1;
    if (mf_env_word("MINFER_CACHE_TYPE", &w, &err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return false;
    }
    const uint32_t env = w >= 0 ? k_cache_types[w].id : CACHE_DEFAULT;
    const uint32_t both = c->both >= 0 ? (uint32_t)c->both : env;
    *type_k = c->k >= 0 ? (uint32_t)c->k : both;
    *type_v = c->v >= 0 ? (uint32_t)c->v : both;
    return true;
}

/* ---- rope (llama.cpp's flags; the library checks the combination against the file) ---- */
enum { ROPE_SCALING, ROPE_SCALE, ROPE_FREQ_SCALE, ROPE_FREQ_BASE, YARN_ORIG_CTX, YARN_EXT, YARN_BETA_FAST, YARN_BETA_SLOW };

int mf_arg_rope_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_rope_params *r) {
    static const char *const names[] = {
        [ROPE_SCALING] = "--rope-scaling",     [ROPE_SCALE] = "--rope-scale",         [ROPE_FREQ_SCALE] = "--rope-freq-scale",
        [ROPE_FREQ_BASE] = "--rope-freq-base", [YARN_ORIG_CTX] = "--yarn-orig-ctx",   [YARN_EXT] = "--yarn-ext-factor",
        [YARN_BETA_FAST] = "--yarn-beta-fast", [YARN_BETA_SLOW] = "--yarn-beta-slow"};
    const char *a = argv[*i], *v;
    int k = -1;
    for (int j = 0; j < (int)(sizeof names / sizeof names[0]); j++)
        if (!strcmp(a, names[j])) k = j;
    if (k < 0) return 0;
    /* --rope-scale and --rope-freq-scale set the same value: one of them, once */
    const char *once = k == ROPE_SCALE || k == ROPE_FREQ_SCALE ? "--rope-scale/--rope-freq-scale" : a;
    if (!(v = mf_arg_value(argc, argv, i)) || !mf_arg_once(seen, once, v)) return -1;
    if (k == ROPE_SCALING) {
        static const char *const types[] = {"none", "linear", "yarn"}; /* MF_ROPE_SCALING_NONE.. in order */
        for (int j = 0; j < 3; j++)
            if (!strcasecmp(v, types[j])) {
                r->scaling = MF_ROPE_SCALING_NONE + j;
                return 1;
            }
        fprintf(stderr, "Error: --rope-scaling %s is not a rope scaling (none, linear, yarn); drop it to use the file's\n",
                *v ? v : "''");
        return -1;
    }
    if (k == YARN_ORIG_CTX) {
        long l;
        if (!mf_arg_int(a, v, 1, INT32_MAX, &l)) return -1;
        r->yarn_orig_ctx = (int32_t)l;
        return 1;
    }
    double x;
    if (!mf_arg_float(a, v, &x)) return -1;
    const bool any_sign = k == YARN_EXT; /* negative is llama.cpp's "default" */
    if (!isfinite(x) || (!any_sign && !(x >= 1e-30)) || fabs(x) > 1e30) {
        fprintf(stderr, "Error: %s must be a finite number %s, got %s\n", a, any_sign ? "(negative: the default)" : "> 0", v);
        return -1;
    }
    switch (k) {
    case ROPE_SCALE: r->freq_scale = (float)(1.0 / x); break; /* the context scaling factor: freq_scale 1/N */
    case ROPE_FREQ_SCALE: r->freq_scale = (float)x; break;
    case ROPE_FREQ_BASE: r->freq_base = (float)x; break;
    case YARN_EXT: r->yarn_ext_factor = x < 0 ? -1.0f : (float)x; break;
    case YARN_BETA_FAST: r->yarn_beta_fast = (float)x; break;
    default: r->yarn_beta_slow = (float)x; break;
    }
    return 1;
}
