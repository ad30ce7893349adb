/* core/env: the MINFER_* table and its strict parsers (rules in env.h). */
#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__)
#define MF_ENV_ISA_WORDS "scalar|avx2|avx512|amx"
#elif defined(__aarch64__)
#define MF_ENV_ISA_WORDS "scalar|neon"
#else
#define MF_ENV_ISA_WORDS "scalar"
#endif

/* Ranges: the spin count is an int in the pool (1e8 pause instructions is already seconds of spinning); the
 * spin time is held in nanoseconds (60 s fits easily, and nobody wants a thread spinning for longer). */
static const mf_env_var k_vars[] = {
    {"MINFER_LOG", MF_ENV_WORD, "error|warn|info|debug", 0, 0, 1, NULL, NULL,
     "messages on stderr at this level and above", NULL},
    /* the kernel sets of this build's architecture, in quant/kernels.c's k_levels order */
    {"MINFER_ISA", MF_ENV_WORD, MF_ENV_ISA_WORDS, 0, 0, MF_ENV_NO_DEFAULT, "the best this CPU has", NULL,
     "force a kernel set (amx: AVX-512 + AMX tiles for prefill; one this machine cannot run is refused, with the reason)", NULL},
    {"MINFER_REPACK", MF_ENV_BOOL, NULL, 0, 0, 1, NULL, NULL,
     "0: keep Q4_0/Q5_0/Q8_0/IQ4_NL/Q4_K/Q6_K/IQ4_XS weights in the file's layout and all in its mapping (slower)", NULL},
    /* the KV element type the CLI uses for K and V (-ctk/-ctv/--cache-type win); index 1 = f16, llama.cpp's */
    {"MINFER_CACHE_TYPE", MF_ENV_WORD, "f32|f16|q8_0", 0, 0, 1, NULL, NULL,
     "KV cache element type for K and V of run/eval/bench/chat/serve (their -ctk/-ctv/--cache-type win)", "a KV cache type"},
    /* llama.cpp's LLAMA_ATTN_ROT_DISABLE; read by mf_context_new (mf_context_params.no_attn_rot says the same) */
    {"MINFER_ATTN_ROT_DISABLE", MF_ENV_BOOL, NULL, 0, 0, 0, NULL, NULL,
     "1: no Walsh-Hadamard rotation of Q/K/V for a q8_0 KV cache (llama.cpp's LLAMA_ATTN_ROT_DISABLE)", NULL},
    {"MINFER_PROFILE", MF_ENV_BOOL, NULL, 0, 0, 0, NULL, NULL, "1: print the CPU time per op kind per forward", NULL},
    {"MINFER_SPIN", MF_ENV_UINT, NULL, 0, 100000000, 256, NULL, "pause iterations",
     "how long a waiting thread pauses before it yields", NULL},
    {"MINFER_SPIN_US", MF_ENV_UINT, NULL, 0, 60000000, 3000, NULL, "microseconds",
     "how long it then yield-spins before it sleeps", NULL},
    {"MINFER_DRAIN_MS", MF_ENV_UINT, NULL, 0, 3600000, 30000, NULL, "milliseconds",
     "serve: how long in-flight requests may finish after SIGTERM/SIGINT before they are answered 503", NULL},
    {"MINFER_BACKENDS", MF_ENV_LIST, NULL, 0, 0, MF_ENV_NO_DEFAULT, "every usable backend",
     "cpu,metal,cuda", "the backend fence, as --backend (the flag wins; names case-insensitive; blank = unset)", NULL},
    {"MINFER_DISABLE_CUDA", MF_ENV_FLAG, NULL, 0, 0, 0, "unset", "set (empty or 1)",
     "never use the CUDA device (presence-checked)", NULL},
    /* the CLI's --gpu-layers / -ngl from the environment (the flag wins); words in MF_GPU_LAYERS_* order */
    {"MINFER_GPU_LAYERS", MF_ENV_COUNT, "all|auto", 0, 1000000, 0, "0, or auto when cuda is named by --backend",
     "N|all|auto", "blocks on the GPU for run/chat/eval/bench/serve/specverify, as --gpu-layers (the flag wins)", NULL},
    {"MINFER_GPU_MEM", MF_ENV_UINT, NULL, 1, 1u << 30, 0, "unset: 3/4 of the device's free memory", "MiB",
     "the device memory budget --gpu-layers auto fits into (a quarter reserved for KV/activations)", NULL},
    {"MINFER_CUDA_GRAPHS", MF_ENV_BOOL, NULL, 0, 0, 1, NULL, NULL,
     "0: launch every CUDA kernel one by one instead of replaying a captured graph of the decode step", NULL},
    {"MINFER_SYNC_COPIES", MF_ENV_FLAG, NULL, 0, 0, 0, "unset", "set (empty or 1)",
     "blocking cross-backend copies (the bitwise reference; presence-checked)", NULL},
};

const mf_env_var *mf_env_vars(size_t *n) {
    *n = MF_ARRAY_LEN(k_vars);
    return k_vars;
}

static const mf_env_var *find(const char *name, mf_env_kind kind, mf_error *err) {
    for (size_t i = 0; i < MF_ARRAY_LEN(k_vars); i++)
        if (!strcmp(k_vars[i].name, name)) {
            if (k_vars[i].kind == kind) return &k_vars[i];
            break;
        }
    mf_err(err, MF_E_INTERNAL, "environment variable %s is read as kind %d but the table (src/core/env.c) says otherwise",
           name, (int)kind);
    return NULL;
}

const char *mf_env_show(const char *v, char *buf, size_t cap) {
    size_t at = 0, i = 0;
    for (; v[i] && i < 64 && at + 5 < cap; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') buf[at++] = (char)c;
        else at += (size_t)snprintf(buf + at, cap - at, "\\x%02x", c);
    }
    if (v[i] && at + 4 < cap) memcpy(buf + at, "...", 3), at += 3;
    buf[at] = 0;
    return buf;
}

/* The value with surrounding blanks removed: [*b, *b + *n). */
static void trimmed(const char *v, const char **b, size_t *n) {
    size_t s = 0, e = strlen(v);
    while (s < e && (v[s] == ' ' || v[s] == '\t')) s++;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    *b = v + s;
    *n = e - s;
}

/* Index of the word (case-insensitive) in "a|b|c", or -1. */
static int word_index(const char *words, const char *w, size_t n) {
    int idx = 0;
    for (const char *p = words;; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncasecmp(p, w, n)) return idx;
        if (!bar) return -1;
        p = bar + 1;
    }
}

static const char *word_at(const char *words, int idx, char *buf, size_t cap) {
    const char *p = words;
    for (int i = 0; i < idx; i++) p = strchr(p, '|') + 1;
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len >= cap) len = cap - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    return buf;
}

/* getenv, and whether the variable is set to a non-blank value. */
static bool value_of(const char *name, const char **v, const char **b, size_t *n) {
    *v = getenv(name);
    if (!*v) return false;
    trimmed(*v, b, n);
    return *n > 0;
}

/* The value of n decimal digits at b: false if a character is not a digit; *over set if it does not fit
 * (the scan goes on after an overflow, so "999...9x" is still named as not a number). */
static bool decimal(const char *b, size_t n, uint64_t *x, bool *over) {
    *x = 0;
    *over = false;
    bool digits = true;
    for (size_t i = 0; i < n; i++) {
        if (b[i] < '0' || b[i] > '9') digits = false;
        else if (!*over && (!mf_mul_u64(*x, 10, x) || !mf_add_u64(*x, (uint64_t)(b[i] - '0'), x))) *over = true;
    }
    return digits;
}

int mf_env_bool(const char *name, bool *out, mf_error *err) {
    const mf_env_var *e = find(name, MF_ENV_BOOL, err);
    if (!e) return MF_E_INTERNAL;
    *out = e->dflt != 0;
    const char *v, *b;
    size_t n;
    if (!value_of(name, &v, &b, &n)) return 0;
    int w = word_index("0|1|false|true|off|on|no|yes", b, n);
    if (w >= 0) {
        *out = (w & 1) != 0;
        return 0;
    }
    char shown[300];
    return mf_err(err, MF_E_INVAL,
                  "%s='%s' is not a boolean: allowed 1|0, true|false, on|off, yes|no (case-insensitive; default: %d); "
                  "unset it or pick one of those",
                  name, mf_env_show(v, shown, sizeof shown), (int)e->dflt);
}

int mf_env_uint(const char *name, uint64_t *out, mf_error *err) {
    const mf_env_var *e = find(name, MF_ENV_UINT, err);
    if (!e) return MF_E_INTERNAL;
    *out = e->dflt;
    const char *v, *b;
    size_t n;
    if (!value_of(name, &v, &b, &n)) return 0;
    char shown[300];
    uint64_t x;
    bool over;
    if (!decimal(b, n, &x, &over))
        return mf_err(err, MF_E_INVAL,
                      "%s='%s' is not a whole number: allowed %llu..%llu %s (decimal digits only; default: %llu); "
                      "unset it or pick a value in range",
                      name, mf_env_show(v, shown, sizeof shown), (unsigned long long)e->min,
                      (unsigned long long)e->max, e->allowed, (unsigned long long)e->dflt);
    if (over || x < e->min || x > e->max)
        return mf_err(err, MF_E_INVAL,
                      "%s='%s' is out of range: allowed %llu..%llu %s (default: %llu); unset it or pick a value in range",
                      name, mf_env_show(v, shown, sizeof shown), (unsigned long long)e->min,
                      (unsigned long long)e->max, e->allowed, (unsigned long long)e->dflt);
    *out = x;
    return 0;
}

int mf_env_word(const char *name, int *out, mf_error *err) {
    const mf_env_var *e = find(name, MF_ENV_WORD, err);
    if (!e) return MF_E_INTERNAL;
    *out = e->dflt == MF_ENV_NO_DEFAULT ? -1 : (int)e->dflt;
    const char *v, *b;
    size_t n;
    if (!value_of(name, &v, &b, &n)) return 0;
    int w = word_index(e->words, b, n);
    if (w >= 0) {
        *out = w;
        return 0;
    }
    char shown[300], dw[32];
    if (e->noun) {
        char list[128];
        size_t at = 0;
        for (const char *p = e->words; *p && at + 3 < sizeof list; p++) {
            if (*p == '|') list[at++] = ',', list[at++] = ' ';
            else list[at++] = *p;
        }
        list[at] = 0;
        return mf_err(err, MF_E_INVAL, "%s=%s is not %s (%s); refusing rather than silently running with %s", name,
                      mf_env_show(v, shown, sizeof shown), e->noun, list, word_at(e->words, (int)e->dflt, dw, sizeof dw));
    }
    return mf_err(err, MF_E_INVAL, "%s='%s' is not one of %s (case-insensitive; default: %s); unset it or pick one of those",
                  name, mf_env_show(v, shown, sizeof shown), e->words,
                  e->dflt == MF_ENV_NO_DEFAULT ? e->dflt_text : word_at(e->words, (int)e->dflt, dw, sizeof dw));
}

int mf_env_flag(const char *name, bool *out, mf_error *err) {
    if (!find(name, MF_ENV_FLAG, err)) return MF_E_INTERNAL;
    const char *v = getenv(name), *b;
    size_t n;
    *out = v != NULL;
    if (!v) return 0;
    trimmed(v, &b, &n);
    if (n == 0 || (n == 1 && *b == '1')) return 0;
    char shown[300];
    return mf_err(err, MF_E_INVAL,
                  "%s='%s' is refused: the variable is presence-checked (set means on, whatever the value, so this "
                  "would not turn it off); allowed: empty or 1; unset it to turn it off",
                  name, mf_env_show(v, shown, sizeof shown));
}

int mf_env_count(const char *name, int64_t *out, bool *set, mf_error *err) {
    const mf_env_var *e = find(name, MF_ENV_COUNT, err);
    if (!e) return MF_E_INTERNAL;
    *out = (int64_t)e->dflt;
    *set = false;
    const char *v, *b;
    size_t n;
    if (!value_of(name, &v, &b, &n)) return 0;
    int w = word_index(e->words, b, n);
    if (w >= 0) {
        *out = -1 - (int64_t)w;
        *set = true;
        return 0;
    }
    uint64_t x;
    bool over, digits = decimal(b, n, &x, &over);
    if (digits && !over && x >= e->min && x <= e->max) {
        *out = (int64_t)x;
        *set = true;
        return 0;
    }
    char shown[300];
    return mf_err(err, MF_E_INVAL,
                  "%s='%s' is %s: allowed a whole number %llu..%llu or one of %s (case-insensitive; default: %s); unset "
                  "it or pick one of those",
                  name, mf_env_show(v, shown, sizeof shown), digits ? "out of range" : "not a count",
                  (unsigned long long)e->min, (unsigned long long)e->max, e->words, e->dflt_text);
}

int mf_env_check(mf_error *err) {
    for (size_t i = 0; i < MF_ARRAY_LEN(k_vars); i++) {
        const mf_env_var *e = &k_vars[i];
        int rc = 0, w;
        bool bv;
        uint64_t u;
        int64_t c;
        switch (e->kind) {
        case MF_ENV_BOOL: rc = mf_env_bool(e->name, &bv, err); break;
        case MF_ENV_UINT: rc = mf_env_uint(e->name, &u, err); break;
        case MF_ENV_WORD: rc = mf_env_word(e->name, &w, err); break;
        case MF_ENV_FLAG: rc = mf_env_flag(e->name, &bv, err); break;
        case MF_ENV_COUNT: rc = mf_env_count(e->name, &c, &bv, err); break;
        case MF_ENV_LIST: break;
        }
        if (rc) return rc;
    }
    return 0;
}
