// oracle-libs: -lllama -lggml -lggml-base
//
// llama_oracle.c - llama.cpp (the prebuilt CPU libraries of node-llama-cpp@3.21.1, commit 80fb11a) as the
// numerical reference for minfer. Dev-only: it produces goldens that are committed under tests/; the test
// suite never runs it. Built by tools/oracle/build.sh.
//
//   info           --model M [--vocab-only]
//   tokenize       --model M (--text T | --file F) [--no-special] [--add-special]
//   tokenize-batch --model M --in corpus.json [--add-special]
//   eval           --model M --tokens '[ids]' [--top K] [--threads N] [--kv f32|f16] [--fa on|off|auto]
//                  [--ubatch U] [--dump-logits FILE]
//   greedy         --model M (--tokens '[ids]' | --text T) [-n N] [--top K] [--threads N] [--kv ..] [--fa ..]
//                  [--stop-eog]
//   bench          --model M [-t 2] [-p 512] [-n 128] [-r 5] [-b 2048] [-ub 512] [--kv f16] [--fa auto] [-d 0]
//   reuse          --model M --cache '[ids]' --tokens '[ids]' --min-chunk N [-n 8] [--top 5] [--kv f16] [--fa off]
//   speculative    --model TARGET --draft DRAFT (--tokens '[ids]' | --text T) [-n 128] [-t 2] [-r 1]
//                  [--draft-max 16] [--draft-min 0] [--p-min 0.75] [--kv f16] [--fa auto] [--stop-eog]
// Common: --verbose (all llama.cpp logs), --cpu-variant NAME (load only libggml-cpu-NAME.so instead of the
// best-scoring variant). JSON on stdout, errors on stderr with exit status 1.
// Debugging: ORACLE_DUMP_DIR=D writes every named contiguous f32 node of each graph run to D/<name>.f32
// (raw little-endian floats, the last run's values; '/' and ' ' in names become '_').
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#ifndef ORACLE_LLAMA_COMMIT
#define ORACLE_LLAMA_COMMIT "unknown"
#endif

// ---------------------------------------------------------------------------------------------- utilities

_Noreturn static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("llama_oracle: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory (%zu bytes)", n);
    return p;
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) die("out of memory (%zu bytes)", n);
    return p;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        cap *= 2;
        buf = xrealloc(buf, cap + 1);
    }
    if (ferror(f)) die("cannot read %s", path);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void json_str(FILE *out, const char *s, size_t n) {
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c == '\r') fputs("\\r", out);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

// Non-finite logits have no JSON form; they come out as null so a consumer notices.
static void json_float(FILE *out, double v) {
    if (isfinite(v)) fprintf(out, "%.9g", v);
    else fputs("null", out);
}

// ---------------------------------------------------------------------------------------------- JSON input

typedef struct {
    const char *start, *p, *end, *what;
} jparser;

static void jskip(jparser *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static void jexpect(jparser *j, char c) {
    jskip(j);
    if (j->p >= j->end || *j->p != c)
        die("%s: expected '%c' at byte %ld", j->what, c, (long)(j->p - j->start));
    j->p++;
}

// Returns true and consumes ']' when the array ends here; otherwise consumes a ',' unless first.
static bool jarray_next(jparser *j, bool first) {
    jskip(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return false;
    }
    if (!first) jexpect(j, ',');
    return true;
}

static long jint(jparser *j) {
    jskip(j);
    char *e;
    errno = 0;
    long v = strtol(j->p, &e, 10);
    if (e == j->p || errno) die("%s: expected an integer near \"%.20s\"", j->what, j->p);
    j->p = e;
    return v;
}

static void put_utf8(char **buf, size_t *n, size_t *cap, uint32_t cp) {
    if (*n + 4 >= *cap) {
        *cap = *cap * 2 + 16;
        *buf = xrealloc(*buf, *cap);
    }
    char *o = *buf + *n;
    if (cp < 0x80) { o[0] = (char)cp; *n += 1; }
    else if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); *n += 2; }
    else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        *n += 3;
    } else {
        o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
        o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
        *n += 4;
    }
}

static uint32_t jhex4(jparser *j) {
    if (j->end - j->p < 4) die("%s: truncated \\u escape", j->what);
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else die("%s: bad \\u escape", j->what);
    }
    return v;
}

// Decodes a JSON string to UTF-8 bytes (which may hold NULs, hence the length).
static char *jstring(jparser *j, size_t *len) {
    jexpect(j, '"');
    size_t n = 0, cap = 64;
    char *buf = xmalloc(cap);
    for (;;) {
        if (j->p >= j->end) die("%s: unterminated string", j->what);
        char c = *j->p++;
        if (c == '"') break;
        if (c != '\\') {
            if (n + 1 >= cap) { cap *= 2; buf = xrealloc(buf, cap); }
            buf[n++] = c;
            continue;
        }
        if (j->p >= j->end) die("%s: unterminated escape", j->what);
        c = *j->p++;
        uint32_t cp = 0;
        switch (c) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            cp = jhex4(j);
            if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
                const char *save = j->p;
                j->p += 2;
                uint32_t lo = jhex4(j);
                if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else j->p = save; // lone high surrogate: encoded as is (WTF-8), like a lenient reader
            }
            break;
        default: die("%s: bad escape \\%c", j->what, c);
        }
        put_utf8(&buf, &n, &cap, cp);
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static llama_token *parse_ids(const char *text, const char *what, int *n_out) {
    jparser j = {text, text, text + strlen(text), what};
    jexpect(&j, '[');
    int n = 0, cap = 64;
    llama_token *ids = xmalloc(sizeof(*ids) * (size_t)cap);
    for (bool first = true; jarray_next(&j, first); first = false) {
        long v = jint(&j);
        if (v < 0 || v > INT32_MAX) die("%s: token id %ld out of range", what, v);
        if (n == cap) ids = xrealloc(ids, sizeof(*ids) * (size_t)(cap *= 2));
        ids[n++] = (llama_token)v;
    }
    *n_out = n;
    return ids;
}

// ---------------------------------------------------------------------------------------------- options

typedef struct {
    const char *cmd, *model, *text, *file, *tokens, *in, *dump_logits, *cpu_variant;
    bool no_special, add_special, verbose, stop_eog, vocab_only, no_repack, reps_given;
    int top, threads, n, n_prompt, n_gen, reps, n_batch, n_ubatch;
    const char *kv, *fa;
    int np;    /* batched: sequences */
    int depth; /* bench: tokens in the cache before each timed run (llama-bench's -d) */
    const char *draft;              /* speculative: the draft model */
    int draft_max, draft_min;       /* speculative: llama.cpp's --draft-max / --draft-min */
    double p_min;                   /* speculative: llama.cpp's --draft-p-min */
    const char *pooling;            /* embed: mean|cls|last|rank|model */
    const char *query, *doc;        /* embed: a reranker's pair, formatted as llama-server does */
    const char *cache;              /* reuse: the tokens in the cache before the prompt comes */
    int min_chunk;                  /* reuse: llama-server's --cache-reuse */
} options;

static const char *USAGE =
    "usage: llama_oracle info|tokenize|tokenize-batch|eval|greedy|bench|batched|speculative --model M [options]\n"
    "  info           [--vocab-only]\n"
    "  tokenize       (--text T | --file F) [--no-special] [--add-special]\n"
    "  tokenize-batch --in corpus.json [--add-special]\n"
    "  eval           --tokens '[ids]' [--top 10] [--threads 2] [--kv f32|f16] [--fa off|on|auto] [--ubatch 512]\n"
    "                 [--dump-logits FILE]\n"
    "  greedy         (--tokens '[ids]' | --text T) [-n 16] [--top 5] [--threads 2] [--kv f32] [--fa off] [--stop-eog]\n"
    "  bench          [-t 2] [-p 512] [-n 128] [-r 5] [-b 2048] [-ub 512] [--kv f16|q8_0] [--fa auto]\n"
    "                 [-d 0]  (depth: prefill D tokens, not timed, before each rep, as llama-bench -d)\n"
    "  speculative    --draft D (--tokens '[ids]' | --text T) [-n 128] [-t 2] [-r 1] [--draft-max 16] [--draft-min 0]\n"
    "                 [--p-min 0.75] [--kv f16] [--fa auto] [--stop-eog]  (llama.cpp's speculative-simple loop vs\n"
    "                 plain greedy decode on the target: t/s of both, drafted, accepted, identical outputs)\n"
    "  reuse          --cache '[ids]' --tokens '[ids]' --min-chunk N [-n 8] [--top 5] [--threads 2] [--kv f16]\n"
    "                 [--fa off]  (llama-server's --cache-reuse on one sequence: the cache decoded, its runs moved\n"
    "                 to the prompt's positions, the rest of the prompt decoded (every row's top), -n greedy steps)\n"
    "  embed          (--tokens '[ids]' | --text T | --query Q --doc D) [--pooling model|mean|cls|last|rank]\n"
    "                 [--threads 2] [--kv f16] [--fa off] [--ubatch U]  (embeddings = true, one sequence; the raw\n"
    "                 pooled vector, llama_get_embeddings_seq - a reranker's n_cls_out scores; --text is tokenized\n"
    "                 with add_special and special tokens parsed; --query/--doc fill the file's rerank template\n"
    "                 as llama-server's format_prompt_rerank: no special tokens added, special tokens parsed)\n"
    "  embed-bench    --in texts.json [-t 2] [-b 512] [-ub B] [-r 3] [--kv f16]  (llama-embedding's packing: texts\n"
    "                 (strings, or a reranker's [query, document] pairs: the rerank template filled),\n"
    "                 whole into batches of -b tokens, one sequence each; compute time and tokens/s)\n"
    "  batched        [--np 4] [-t 2] [-p 32] [-n 128] [-r 3] [--kv f16] [--fa auto]  (np sequences in one context,\n"
    "                 decoded together, greedy: llama-batched-bench's S_TG; bench/serve's yardstick)\n"
    "  common         [--verbose] [--cpu-variant haswell|skylakex|icelake|...]\n"
    "                 [--no-repack]  (eval/greedy/bench: use_extra_bufts=false, no CPU weight repacking)\n";

static int to_int(const char *flag, const char *v) {
    char *e;
    errno = 0;
    long x = strtol(v, &e, 10);
    if (*v == 0 || *e || errno || x < INT_MIN || x > INT_MAX) die("%s wants an integer, got \"%s\"", flag, v);
    return (int)x;
}

static options parse_options(int argc, char **argv) {
    options o = {0};
    o.top = -1;
    o.threads = 2;
    o.n = -1;
    o.n_prompt = 512;
    o.n_gen = -1;
    o.reps = 5;
    o.n_batch = -1;
    o.n_ubatch = -1;
    o.draft_max = 16;
    o.p_min = 0.75;
    if (argc < 2) die("%s", USAGE);
    o.cmd = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
#define FLAG(name) (strcmp(a, name) == 0)
#define VAL() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), (char *)0))
        if (FLAG("--model") || FLAG("-m")) o.model = VAL();
        else if (FLAG("--text")) o.text = VAL();
        else if (FLAG("--file")) o.file = VAL();
        else if (FLAG("--tokens")) o.tokens = VAL();
        else if (FLAG("--in")) o.in = VAL();
        else if (FLAG("--dump-logits")) o.dump_logits = VAL();
        else if (FLAG("--cpu-variant")) o.cpu_variant = VAL();
        else if (FLAG("--no-special")) o.no_special = true;
        else if (FLAG("--add-special")) o.add_special = true;
        else if (FLAG("--verbose")) o.verbose = true;
        else if (FLAG("--stop-eog")) o.stop_eog = true;
        else if (FLAG("--vocab-only")) o.vocab_only = true;
        else if (FLAG("--no-repack")) o.no_repack = true;
        else if (FLAG("--top")) o.top = to_int(a, VAL());
        else if (FLAG("--threads") || FLAG("-t")) o.threads = to_int(a, VAL());
        else if (FLAG("-n") || FLAG("--n-gen")) o.n = to_int(a, VAL());
        else if (FLAG("-p") || FLAG("--n-prompt")) o.n_prompt = to_int(a, VAL());
        else if (FLAG("-r") || FLAG("--reps")) o.reps = to_int(a, VAL()), o.reps_given = true;
        else if (FLAG("--draft") || FLAG("-md")) o.draft = VAL();
        else if (FLAG("--draft-max")) o.draft_max = to_int(a, VAL());
        else if (FLAG("--draft-min")) o.draft_min = to_int(a, VAL());
        else if (FLAG("--p-min") || FLAG("--draft-p-min")) {
            const char *v = VAL();
            char *e;
            o.p_min = strtod(v, &e);
            if (*v == 0 || *e || !(o.p_min >= 0 && o.p_min <= 1)) die("%s wants a number in 0..1, got \"%s\"", a, v);
        }
        else if (FLAG("-b") || FLAG("--batch")) o.n_batch = to_int(a, VAL());
        else if (FLAG("-ub") || FLAG("--ubatch")) o.n_ubatch = to_int(a, VAL());
        else if (FLAG("--kv")) o.kv = VAL();
        else if (FLAG("--fa")) o.fa = VAL();
        else if (FLAG("--np")) o.np = to_int(a, VAL());
        else if (FLAG("--pooling")) o.pooling = VAL();
        else if (FLAG("--query")) o.query = VAL();
        else if (FLAG("--doc")) o.doc = VAL();
        else if (FLAG("--cache")) o.cache = VAL();
        else if (FLAG("--min-chunk")) o.min_chunk = to_int(a, VAL());
        else if (FLAG("-d") || FLAG("--n-depth") || FLAG("--depth")) o.depth = to_int(a, VAL());
        else if (FLAG("-h") || FLAG("--help")) { fputs(USAGE, stdout); exit(0); }
        else die("unknown argument \"%s\"\n%s", a, USAGE);
#undef FLAG
#undef VAL
    }
    if (!o.model) die("--model is required\n%s", USAGE);
    if (o.threads < 1) die("--threads must be >= 1");
    return o;
}

static enum ggml_type kv_type(const char *s, enum ggml_type dflt) {
    if (!s) return dflt;
    if (!strcmp(s, "f32")) return GGML_TYPE_F32;
    if (!strcmp(s, "f16")) return GGML_TYPE_F16;
    if (!strcmp(s, "bf16")) return GGML_TYPE_BF16;
    if (!strcmp(s, "q8_0")) return GGML_TYPE_Q8_0;
    die("--kv wants f32, f16, bf16 or q8_0, got \"%s\"", s);
    return dflt;
}

static enum llama_flash_attn_type fa_type(const char *s, enum llama_flash_attn_type dflt) {
    if (!s) return dflt;
    if (!strcmp(s, "on")) return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    if (!strcmp(s, "off")) return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (!strcmp(s, "auto")) return LLAMA_FLASH_ATTN_TYPE_AUTO;
    die("--fa wants on, off or auto, got \"%s\"", s);
    return dflt;
}

// ---------------------------------------------------------------------------------------------- llama setup

static bool g_verbose;
static enum ggml_log_level g_last_level = GGML_LOG_LEVEL_INFO;
static char g_cpu_backend_path[1200];

// Info/debug logs are dropped unless --verbose; warnings and errors always reach stderr. The path of the
// CPU variant that ggml_backend_load_all_from_path picked is remembered for the JSON reports.
static void log_cb(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level != GGML_LOG_LEVEL_CONT) g_last_level = level;
    const char *k = strstr(text, "loaded CPU backend from ");
    if (k) {
        snprintf(g_cpu_backend_path, sizeof g_cpu_backend_path, "%s", k + strlen("loaded CPU backend from "));
        size_t n = strlen(g_cpu_backend_path);
        while (n && (g_cpu_backend_path[n - 1] == '\n' || g_cpu_backend_path[n - 1] == ' ')) g_cpu_backend_path[--n] = 0;
    }
    if (g_verbose || g_last_level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static const char *cpu_variant_name(void) {
    const char *b = strrchr(g_cpu_backend_path, '/');
    b = b ? b + 1 : g_cpu_backend_path;
    return *b ? b : "unknown";
}

// The CPU backends are separate libggml-cpu-<variant>.so files that ggml loads at run time. They live next
// to libllama, which the rpath found; dladdr tells where that is.
static void backend_setup(const options *o) {
    g_verbose = o->verbose;
    llama_log_set(log_cb, NULL);
    Dl_info info;
    char dir[1024];
    if (!dladdr((void *)llama_backend_init, &info) || !info.dli_fname) die("dladdr(libllama) failed");
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    if (o->cpu_variant) {
        char path[1200];
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", dir, o->cpu_variant);
        if (!ggml_backend_load(path)) die("cannot load CPU backend %s (not present or not supported by this CPU)", path);
        snprintf(g_cpu_backend_path, sizeof g_cpu_backend_path, "%s", path);
    } else {
        ggml_backend_load_all_from_path(dir);
    }
    if (!ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) die("no CPU backend loaded from %s", dir);
    llama_backend_init();
}

static struct llama_model *load_model(const options *o, bool vocab_only) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = vocab_only;
    mp.n_gpu_layers = 0;
    // --no-repack: keep every weight in the plain CPU buffer, so ggml-cpu's "extra buffer types" (repack.cpp:
    // on AVX2 q4_0 -> q4_0_8x8, q4_K -> q4_K_8x8, iq4_nl_8x8, with their own GEMV/GEMM kernels and activation
    // quantization) are not used and mul_mat runs the ordinary vec_dot kernels.
    if (o->no_repack) mp.use_extra_bufts = false;
    struct llama_model *m = llama_model_load_from_file(o->model, mp);
    if (!m) die("failed to load model %s (run with --verbose for llama.cpp's reason)", o->model);
    return m;
}

typedef struct {
    void *pool;
    void (*pool_free)(void *);
} threadpool_t;

// Like llama-bench: a persistent CPU threadpool (hybrid polling) attached to the context. Without it
// ggml makes a fresh pool per graph, which costs time but not bits.
static threadpool_t attach_threadpool(struct llama_context *ctx, int n_threads) {
    threadpool_t tp = {0};
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    void *(*pool_new)(struct ggml_threadpool_params *) =
        (void *(*)(struct ggml_threadpool_params *))ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
    tp.pool_free = (void (*)(void *))ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
    if (!pool_new || !tp.pool_free) return tp;
    struct ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
    tp.pool = pool_new(&p);
    if (!tp.pool) die("ggml_threadpool_new(%d threads) failed", n_threads);
    llama_attach_threadpool(ctx, tp.pool, NULL);
    return tp;
}

static void detach_threadpool(struct llama_context *ctx, threadpool_t *tp) {
    if (!tp->pool) return;
    llama_detach_threadpool(ctx);
    tp->pool_free(tp->pool);
    tp->pool = NULL;
}

/* debugging aid: ORACLE_DUMP_DIR=D writes every contiguous f32 node's data to D/<name>.f32 (last write wins) */
static bool dump_cb(struct ggml_tensor *t, bool ask, void *ud) {
    const char *dir = ud;
    if (ask) return true;
    if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || !t->name[0]) return true;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.f32", dir, t->name);
    for (char *c = path + strlen(dir) + 1; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(t->data, 1, ggml_nbytes(t), f);
        fclose(f);
    }
    /* the same again as <name>.<OP>.f32: llama.cpp gives one name to several nodes (Qcur-0 is the matmul,
     * the bias add and the rope), and the plain file keeps only the last */
    snprintf(path + strlen(path) - 4, sizeof path - strlen(path) + 4, ".%s.f32", ggml_op_name(t->op));
    f = fopen(path, "wb");
    if (f) {
        fwrite(t->data, 1, ggml_nbytes(t), f);
        fclose(f);
    }
    return true;
}

static struct llama_context *new_context(struct llama_model *m, const options *o, uint32_t n_ctx, uint32_t n_batch,
                                         uint32_t n_ubatch, enum ggml_type kv, enum llama_flash_attn_type fa) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = 1;
    cp.n_threads = o->threads;
    cp.n_threads_batch = o->threads;
    cp.type_k = kv;
    cp.type_v = kv;
    cp.flash_attn_type = fa;
    cp.no_perf = true;
    if (getenv("ORACLE_DUMP_DIR")) {
        cp.cb_eval = dump_cb;
        cp.cb_eval_user_data = getenv("ORACLE_DUMP_DIR");
    }
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) die("failed to create a context (n_ctx %u, n_batch %u, n_ubatch %u, kv %s, fa %s); try --verbose",
                  n_ctx, n_batch, n_ubatch, ggml_type_name(kv), llama_flash_attn_type_name(fa));
    return ctx;
}

static llama_token *tokenize(const struct llama_vocab *v, const char *text, size_t len, bool add_special,
                             bool parse_special, int *n_out) {
    if (len > INT32_MAX) die("text too long (%zu bytes)", len);
    int cap = (int)len + 8;
    llama_token *ids = xmalloc(sizeof(*ids) * (size_t)cap);
    int n = llama_tokenize(v, text, (int32_t)len, ids, cap, add_special, parse_special);
    if (n < 0) {
        if (n == INT32_MIN) die("tokenization overflow");
        cap = -n;
        ids = xrealloc(ids, sizeof(*ids) * (size_t)cap);
        n = llama_tokenize(v, text, (int32_t)len, ids, cap, add_special, parse_special);
        if (n < 0) die("llama_tokenize failed (%d)", n);
    }
    *n_out = n;
    return ids;
}

static void print_ids(FILE *out, const llama_token *ids, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, i ? ",%d" : "%d", ids[i]);
    fputc(']', out);
}

// The k highest logits, highest first; equal logits in id order (llama.cpp's greedy sampler also keeps the
// first maximum).
static int top_k(const float *logits, int n_vocab, int k, int *ids, float *vals) {
    if (k > n_vocab) k = n_vocab;
    int have = 0;
    for (int t = 0; t < n_vocab; t++) {
        float v = logits[t];
        if (have == k && !(v > vals[k - 1])) continue;
        int pos = have < k ? have++ : k - 1;
        while (pos > 0 && v > vals[pos - 1]) {
            vals[pos] = vals[pos - 1];
            ids[pos] = ids[pos - 1];
            pos--;
        }
        vals[pos] = v;
        ids[pos] = t;
    }
    return have;
}

static void print_top(FILE *out, const float *logits, int n_vocab, int k, int *ids, float *vals) {
    int n = top_k(logits, n_vocab, k, ids, vals);
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s[%d,", i ? "," : "", ids[i]);
        json_float(out, vals[i]);
        fputc(']', out);
    }
    fputc(']', out);
}

static int argmax(const float *logits, int n_vocab) {
    int best = 0;
    for (int t = 1; t < n_vocab; t++)
        if (logits[t] > logits[best]) best = t;
    return best;
}

static void check_ids(const struct llama_vocab *v, const llama_token *ids, int n) {
    int nv = llama_vocab_n_tokens(v);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv) die("token id %d at index %d is outside the vocabulary (%d)", ids[i], i, nv);
}

// ---------------------------------------------------------------------------------------------- commands

// One batch of toks on sequence 0, positions 0..n-1, output on every row (all) or the last, decoded (dies on
// failure).
static struct llama_batch decode_all(struct llama_context *ctx, const llama_token *toks, int n, bool all) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all || i == n - 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    if (rc != 0) die("llama_decode failed (%d) for %d tokens", rc, n);
    return b;
}

static int cmd_info(const options *o) {
    struct llama_model *m = load_model(o, o->vocab_only);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    char desc[256];
    llama_model_desc(m, desc, sizeof desc);
    printf("{\"llama_cpp_commit\":\"%s\",\"vocab_only\":%s,\"cpu_backend\":", ORACLE_LLAMA_COMMIT,
           o->vocab_only ? "true" : "false");
    json_str(stdout, cpu_variant_name(), strlen(cpu_variant_name()));
    printf(",\"model_desc\":");
    json_str(stdout, desc, strlen(desc));
    printf(",\"n_vocab\":%d,\"bos\":%d,\"eos\":%d,\"eot\":%d,\"add_bos\":%s,\"add_eos\":%s", llama_vocab_n_tokens(v),
           llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_eot(v), llama_vocab_get_add_bos(v) ? "true" : "false",
           llama_vocab_get_add_eos(v) ? "true" : "false");
    if (!o->vocab_only) // the hyper-parameter getters abort on a vocab-only model
        printf(",\"model_size\":%llu,\"model_n_params\":%llu,\"n_ctx_train\":%d,\"n_embd\":%d,\"n_layer\":%d,"
               "\"n_head\":%d,\"n_head_kv\":%d",
               (unsigned long long)llama_model_size(m), (unsigned long long)llama_model_n_params(m),
               llama_model_n_ctx_train(m), llama_model_n_embd(m), llama_model_n_layer(m), llama_model_n_head(m),
               llama_model_n_head_kv(m));
    printf(",\"system_info\":");
    const char *si = llama_print_system_info();
    json_str(stdout, si, strlen(si));
    printf("}\n");
    llama_model_free(m);
    return 0;
}

static int cmd_tokenize(const options *o) {
    if (!!o->text == !!o->file) die("tokenize wants exactly one of --text and --file");
    size_t len;
    char *buf = NULL;
    const char *text = o->text;
    if (o->file) text = buf = read_file(o->file, &len);
    else len = strlen(text);
    struct llama_model *m = load_model(o, true);
    int n;
    llama_token *ids = tokenize(llama_model_get_vocab(m), text, len, o->add_special, !o->no_special, &n);
    print_ids(stdout, ids, n);
    fputc('\n', stdout);
    free(ids);
    free(buf);
    llama_model_free(m);
    return 0;
}

// One text's pooled embedding: llama.cpp with embeddings = true, the pooling asked (default: the model's),
// all tokens in one batch on sequence 0; prints the tokens and llama_get_embeddings_seq's raw floats.
// llama-server's format_prompt_rerank with the file's template, in one pass (its two passes - every {query},
// then every {document} - differ only when the query holds the text "{document}")
static llama_token *rerank_tokens(const struct llama_model *m, const char *q, const char *d, int *n) {
    const char *t = llama_model_chat_template(m, "rerank");
    if (!t) die("--query/--doc: the model has no tokenizer.chat_template.rerank");
    size_t cap = strlen(t) + 1, k = 0;
    for (const char *p = t; *p; p++) cap += *p == '{' ? strlen(q) + strlen(d) : 0;
    char *s = xmalloc(cap);
    for (const char *p = t; *p;) {
        if (!strncmp(p, "{query}", 7)) k += (size_t)sprintf(s + k, "%s", q), p += 7;
        else if (!strncmp(p, "{document}", 10)) k += (size_t)sprintf(s + k, "%s", d), p += 10;
        else s[k++] = *p++;
    }
    s[k] = 0;
    llama_token *ids = tokenize(llama_model_get_vocab(m), s, k, false, true, n);
    free(s);
    return ids;
}

static int cmd_embed(const options *o) {
    if (!!o->tokens + !!o->text + !!o->query != 1 || !o->query != !o->doc)
        die("embed wants exactly one of --tokens, --text and --query with --doc");
    struct llama_model *m = load_model(o, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int n;
    llama_token *toks = o->tokens ? parse_ids(o->tokens, "--tokens", &n)
                        : o->query ? rerank_tokens(m, o->query, o->doc, &n)
                                   : tokenize(v, o->text, strlen(o->text), true, true, &n);
    if (n == 0) die("embed: no tokens");
    check_ids(v, toks, n);
    enum llama_pooling_type pool = LLAMA_POOLING_TYPE_UNSPECIFIED;
    const char *pn = o->pooling ? o->pooling : "model";
    if (!strcmp(pn, "mean")) pool = LLAMA_POOLING_TYPE_MEAN;
    else if (!strcmp(pn, "cls")) pool = LLAMA_POOLING_TYPE_CLS;
    else if (!strcmp(pn, "last")) pool = LLAMA_POOLING_TYPE_LAST;
    else if (!strcmp(pn, "rank")) pool = LLAMA_POOLING_TYPE_RANK;
    else if (strcmp(pn, "model")) die("--pooling wants model|mean|cls|last|rank, got \"%s\"", pn);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = (uint32_t)n;
    cp.n_ubatch = o->n_ubatch > 0 && o->n_ubatch < n ? (uint32_t)o->n_ubatch : (uint32_t)n;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = o->threads;
    cp.type_k = cp.type_v = kv_type(o->kv, GGML_TYPE_F16);
    cp.flash_attn_type = fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    cp.embeddings = true;
    cp.pooling_type = pool;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) die("failed to create an embeddings context for %d tokens; try --verbose", n);
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    struct llama_batch b = decode_all(ctx, toks, n, true);
    const float *e = llama_get_embeddings_seq(ctx, 0);
    if (!e) die("no pooled embedding (pooling type %d; none is not pooled)", (int)llama_pooling_type(ctx));
    const bool rank = llama_pooling_type(ctx) == LLAMA_POOLING_TYPE_RANK;
    int ne = rank ? (int)llama_model_n_cls_out(m) : llama_model_n_embd(m);
    printf("{\"pooling\":%d,\"n_embd\":%d,\"tokens\":", (int)llama_pooling_type(ctx), ne);
    print_ids(stdout, toks, n);
    printf(",\n\"embedding\":[");
    for (int i = 0; i < ne; i++) {
        if (i) fputc(',', stdout);
        json_float(stdout, e[i]);
    }
    printf("]}\n");
    llama_batch_free(b);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    llama_model_free(m);
    free(toks);
    return 0;
}

// Embedding throughput, llama-embedding's way: the texts (a JSON array of strings, tokenized with add_special;
// or of [query, document] pairs for a reranker, formatted as llama-server does, rerank_tokens)
// packed whole into batches of at most -b tokens (-ub the same unless given), text k of a batch on sequence k,
// one llama_decode per batch, every text's pooled vector read (llama_get_embeddings_seq), the memory cleared
// between batches.  -r R timed runs after one untimed; JSON {"texts","tokens","batches","runs":[s...],
// "median_s","tokens_per_s"} (compute only: the load and the tokenization are outside the timing).
static int cmd_embed_bench(const options *o) {
    if (!o->in) die("embed-bench wants --in texts.json");
    size_t flen;
    char *src = read_file(o->in, &flen);
    jparser jp = {src, src, src + flen, o->in};
    int n = 0, cap = 64, total = 0, longest = 0;
    llama_token **ids = xmalloc(sizeof(*ids) * (size_t)cap);
    int *lens = xmalloc(sizeof(*lens) * (size_t)cap);
    struct llama_model *m = load_model(o, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    jexpect(&jp, '[');
    for (bool first = true; jarray_next(&jp, first); first = false) {
        if (n == cap) {
            cap *= 2;
            ids = xrealloc(ids, sizeof(*ids) * (size_t)cap);
            lens = xrealloc(lens, sizeof(*lens) * (size_t)cap);
        }
        size_t len;
        jskip(&jp);
        if (jp.p < jp.end && *jp.p == '[') { /* a reranker's [query, document]: llama-server's prompt */
            jexpect(&jp, '[');
            char *q = jstring(&jp, &len);
            jexpect(&jp, ',');
            char *d = jstring(&jp, &len);
            jexpect(&jp, ']');
            ids[n] = rerank_tokens(m, q, d, &lens[n]);
            free(q);
            free(d);
        } else {
            char *t = jstring(&jp, &len);
            ids[n] = tokenize(v, t, len, true, true, &lens[n]);
            free(t);
        }
        total += lens[n];
        longest = lens[n] > longest ? lens[n] : longest;
        n++;
    }
    const int nb = o->n_batch > 0 ? o->n_batch : 512, nub = o->n_ubatch > 0 ? o->n_ubatch : nb;
    if (longest > nb) die("a text has %d tokens, more than -b %d", longest, nb);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)nb;
    cp.n_batch = (uint32_t)nb;
    cp.n_ubatch = (uint32_t)nub;
    cp.n_seq_max = (uint32_t)(n < 256 ? n : 256);
    cp.n_threads = cp.n_threads_batch = o->threads;
    cp.type_k = cp.type_v = kv_type(o->kv, GGML_TYPE_F16);
    cp.flash_attn_type = fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    cp.embeddings = true;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) die("failed to create an embeddings context; try --verbose");
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    struct llama_batch b = llama_batch_init(nb, 0, 1);
    int reps = o->reps_given ? o->reps : 3, batches = 0;
    double *runs = xmalloc(sizeof(double) * (size_t)(reps + 1)), sink = 0;
    for (int r = 0; r <= reps; r++) {
        uint64_t t0 = now_ns();
        batches = 0;
        for (int i = 0; i < n;) {
            b.n_tokens = 0;
            int k = 0;
            while (i + k < n && b.n_tokens + lens[i + k] <= nb && k < (int)cp.n_seq_max) {
                for (int p = 0; p < lens[i + k]; p++) {
                    int row = b.n_tokens++;
                    b.token[row] = ids[i + k][p];
                    b.pos[row] = p;
                    b.n_seq_id[row] = 1;
                    b.seq_id[row][0] = k;
                    b.logits[row] = 1;
                }
                k++;
            }
            int rc = llama_decode(ctx, b);
            if (rc != 0) die("llama_decode failed (%d) for a batch of %d texts", rc, k);
            for (int s = 0; s < k; s++) {
                const float *e = llama_get_embeddings_seq(ctx, s);
                if (!e) die("no pooled embedding for sequence %d", s);
                sink += e[0];
            }
            llama_memory_clear(llama_get_memory(ctx), true);
            batches++;
            i += k;
        }
        if (r) runs[r - 1] = (double)(now_ns() - t0) * 1e-9; /* the first run warms up */
    }
    double med = 0;
    for (int r = 0; r < reps; r++) { /* median by counting */
        int below = 0, eq = 0;
        for (int q = 0; q < reps; q++) below += runs[q] < runs[r], eq += runs[q] == runs[r];
        if (below <= reps / 2 && below + eq > reps / 2) med = runs[r];
    }
    printf("{\"texts\":%d,\"tokens\":%d,\"batches\":%d,\"threads\":%d,\"runs\":[", n, total, batches, o->threads);
    for (int r = 0; r < reps; r++) printf(r ? ",%.4f" : "%.4f", runs[r]);
    printf("],\"median_s\":%.4f,\"tokens_per_s\":%.1f,\"cpu_backend\":\"%s\",\"check\":%g}\n", med,
           med > 0 ? total / med : 0, cpu_variant_name(), sink);
    llama_batch_free(b);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    llama_model_free(m);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(runs);
    free(src);
    return 0;
}

// Input: a JSON array of strings. Output: {"n":N,"add_special":b,"special_parsed":[[ids]...],
// "no_special":[[ids]...]} where element i of each list belongs to string i.
static int cmd_tokenize_batch(const options *o) {
    if (!o->in) die("tokenize-batch wants --in corpus.json");
    size_t flen;
    char *src = read_file(o->in, &flen);
    jparser j = {src, src, src + flen, o->in};
    int n = 0, cap = 64;
    char **texts = xmalloc(sizeof(*texts) * (size_t)cap);
    size_t *lens = xmalloc(sizeof(*lens) * (size_t)cap);
    jexpect(&j, '[');
    for (bool first = true; jarray_next(&j, first); first = false) {
        if (n == cap) {
            cap *= 2;
            texts = xrealloc(texts, sizeof(*texts) * (size_t)cap);
            lens = xrealloc(lens, sizeof(*lens) * (size_t)cap);
        }
        texts[n] = jstring(&j, &lens[n]);
        n++;
    }
    struct llama_model *m = load_model(o, true);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    printf("{\"n\":%d,\"add_special\":%s", n, o->add_special ? "true" : "false");
    for (int pass = 0; pass < 2; pass++) {
        printf(pass == 0 ? ",\n\"special_parsed\":[" : "],\n\"no_special\":[");
        for (int i = 0; i < n; i++) {
            int k;
            llama_token *ids = tokenize(v, texts[i], lens[i], o->add_special, pass == 0, &k);
            if (i) fputs(",\n", stdout);
            print_ids(stdout, ids, k);
            free(ids);
        }
    }
    printf("]}\n");
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    free(src);
    llama_model_free(m);
    return 0;
}

static int cmd_eval(const options *o) {
    if (!o->tokens) die("eval wants --tokens '[ids]'");
    int n;
    llama_token *toks = parse_ids(o->tokens, "--tokens", &n);
    if (n == 0) die("eval: --tokens is empty");
    int k = o->top < 0 ? 10 : o->top;
    struct llama_model *m = load_model(o, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    check_ids(v, toks, n);
    int n_vocab = llama_vocab_n_tokens(v);
    uint32_t ub = o->n_ubatch > 0 ? (uint32_t)o->n_ubatch : 512;
    if (ub > (uint32_t)n) ub = (uint32_t)n;
    struct llama_context *ctx = new_context(m, o, (uint32_t)n, (uint32_t)n, ub, kv_type(o->kv, GGML_TYPE_F32),
                                            fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_DISABLED));
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    struct llama_batch b = decode_all(ctx, toks, n, true);
    FILE *dump = NULL;
    if (o->dump_logits && !(dump = fopen(o->dump_logits, "wb"))) die("cannot write %s", o->dump_logits);
    int *ids = xmalloc(sizeof(int) * (size_t)(k + 1));
    float *vals = xmalloc(sizeof(float) * (size_t)(k + 1));
    for (int i = 0; i < n; i++) {
        const float *lg = llama_get_logits_ith(ctx, i);
        if (!lg) die("no logits for position %d", i);
        if (dump && fwrite(lg, sizeof(float), (size_t)n_vocab, dump) != (size_t)n_vocab)
            die("short write to %s", o->dump_logits);
        printf("{\"pos\":%d,\"token\":%d,\"top\":", i, toks[i]);
        print_top(stdout, lg, n_vocab, k, ids, vals);
        printf("}\n");
    }
    if (dump && fclose(dump)) die("cannot write %s", o->dump_logits);
    free(ids);
    free(vals);
    llama_batch_free(b);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    llama_model_free(m);
    free(toks);
    return 0;
}

static int cmd_greedy(const options *o) {
    if (!!o->tokens == !!o->text) die("greedy wants exactly one of --tokens and --text");
    int k = o->top < 0 ? 5 : o->top;
    int n_gen = o->n < 0 ? 16 : o->n;
    struct llama_model *m = load_model(o, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int n;
    llama_token *prompt = o->tokens ? parse_ids(o->tokens, "--tokens", &n)
                                    : tokenize(v, o->text, strlen(o->text), o->add_special, true, &n);
    if (n == 0) die("greedy: empty prompt");
    check_ids(v, prompt, n);
    int n_vocab = llama_vocab_n_tokens(v);
    uint32_t ub = o->n_ubatch > 0 ? (uint32_t)o->n_ubatch : 512;
    if (ub > (uint32_t)n) ub = (uint32_t)n;
    struct llama_context *ctx = new_context(m, o, (uint32_t)(n + n_gen + 1), (uint32_t)n, ub,
                                            kv_type(o->kv, GGML_TYPE_F32),
                                            fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_DISABLED));
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    struct llama_batch b = decode_all(ctx, prompt, n, false);
    llama_token *gen = xmalloc(sizeof(*gen) * (size_t)(n_gen + 1));
    int *ids = xmalloc(sizeof(int) * (size_t)(k + 2));
    float *vals = xmalloc(sizeof(float) * (size_t)(k + 2));
    char *steps = NULL;
    size_t steps_len = 0;
    FILE *sf = open_memstream(&steps, &steps_len);
    int n_out = 0;
    for (int s = 0; s < n_gen; s++) {
        const float *lg = llama_get_logits_ith(ctx, -1);
        if (!lg) die("no logits at step %d", s);
        llama_token t = argmax(lg, n_vocab);
        int k2 = top_k(lg, n_vocab, 2, ids, vals);
        double gap = k2 == 2 ? (double)vals[0] - (double)vals[1] : INFINITY;
        fprintf(sf, "%s{\"token\":%d,\"top\":", s ? ",\n" : "", t);
        print_top(sf, lg, n_vocab, k, ids, vals);
        fputs(",\"gap\":", sf);
        json_float(sf, gap);
        fputc('}', sf);
        gen[n_out++] = t;
        if (o->stop_eog && llama_vocab_is_eog(v, t)) break;
        if (s + 1 == n_gen) break; // the last token is reported, not decoded
        b.token[0] = t;
        b.pos[0] = n + s;
        b.n_seq_id[0] = 1;
        b.seq_id[0][0] = 0;
        b.logits[0] = 1;
        b.n_tokens = 1;
        int rc = llama_decode(ctx, b);
        if (rc != 0) die("llama_decode(step %d) failed (%d)", s, rc);
    }
    fclose(sf);
    printf("{\"prompt\":");
    print_ids(stdout, prompt, n);
    printf(",\n\"generated\":");
    print_ids(stdout, gen, n_out);
    printf(",\n\"threads\":%d,\"kv\":\"%s\",\"fa\":\"%s\",\"repack\":%s,\"cpu_backend\":\"%s\",\n\"steps\":[\n%s]}\n",
           o->threads,
           ggml_type_name(kv_type(o->kv, GGML_TYPE_F32)),
           llama_flash_attn_type_name(fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_DISABLED)), o->no_repack ? "false" : "true",
           cpu_variant_name(), steps ? steps : "");
    free(steps);
    free(ids);
    free(vals);
    free(gen);
    free(prompt);
    llama_batch_free(b);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    llama_model_free(m);
    return 0;
}

// llama-server's --cache-reuse on sequence 0 (tools/server/server-context.cpp at the oracle's commit): the
// --cache tokens decoded in one batch; past their common prefix with the prompt, a cache head and a prompt
// head: a run of >= --min-chunk matching tokens is moved (llama_memory_seq_rm of the cells between the heads,
// llama_memory_seq_add of the run; the K shift runs at the next decode) and both heads pass it, a shorter
// one advances the cache head; n_past-- when the prompt is covered whole; the rest removed.  Then the prompt's
// remaining tokens in one batch (every row's top) and -n greedy steps (each step's top and top-1/top-2 gap).
// Before them a second sequence takes the cells the walk freed (one token at a time, lowest first), so the
// prompt's new tokens land after the moved runs and sequence 0's cells are in position order, the order
// minfer attends them in; llama-server would put them into those holes, before the runs, which changes only
// the order of attention's sums (the second sequence's cells are masked: exact zeros).
static int cmd_reuse(const options *o) {
    if (!o->cache || !o->tokens) die("reuse wants --cache '[ids]' and --tokens '[ids]'");
    if (o->min_chunk < 1) die("reuse wants --min-chunk N >= 1");
    int nc, np;
    llama_token *cache = parse_ids(o->cache, "--cache", &nc);
    llama_token *prompt = parse_ids(o->tokens, "--tokens", &np);
    if (nc == 0 || np == 0) die("reuse: --cache and --tokens must not be empty");
    int k = o->top < 0 ? 5 : o->top, n_gen = o->n < 0 ? 8 : o->n;
    struct llama_model *m = load_model(o, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    check_ids(v, cache, nc);
    check_ids(v, prompt, np);
    int n_vocab = llama_vocab_n_tokens(v);
    uint32_t n_ctx = (uint32_t)((nc > np ? nc : np) + n_gen + 1);
    enum ggml_type kv = kv_type(o->kv, GGML_TYPE_F16);
    enum llama_flash_attn_type fa = fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_DISABLED);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx + (uint32_t)nc; /* room for the second sequence */
    cp.n_batch = cp.n_ubatch = n_ctx;
    cp.n_seq_max = 2;
    cp.kv_unified = true; /* one cell pool, as llama-server's slots share it */
    cp.n_threads = cp.n_threads_batch = o->threads;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn_type = fa;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) die("failed to create a context (n_ctx %u, kv %s); try --verbose", cp.n_ctx, ggml_type_name(kv));
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    llama_memory_t mem = llama_get_memory(ctx);
    if (!llama_memory_can_shift(mem)) die("this context's memory cannot shift");
    struct llama_batch b = decode_all(ctx, cache, nc, false);
    llama_batch_free(b);
    int n_past = 0;
    while (n_past < nc && n_past < np && cache[n_past] == prompt[n_past]) n_past++;
    char *moves = NULL;
    size_t moves_len = 0;
    FILE *mf = open_memstream(&moves, &moves_len);
    int hc = n_past, hp = n_past, n_moves = 0;
    while (hc < nc && hp < np) {
        int n = 0;
        while (hc + n < nc && hp + n < np && cache[hc + n] == prompt[hp + n]) n++;
        if (n < o->min_chunk) {
            hc++;
            continue;
        }
        llama_memory_seq_rm(mem, 0, hp, hc);
        llama_memory_seq_add(mem, 0, hc, hc + n, hp - hc);
        fprintf(mf, "%s[%d,%d,%d]", n_moves++ ? "," : "", hc, hp, n);
        n_past += n, hc += n, hp += n;
    }
    fclose(mf);
    if (n_past == np) n_past--;
    if (!llama_memory_seq_rm(mem, 0, n_past, -1)) die("llama_memory_seq_rm(%d, -1) failed", n_past);
    const int nr = np - n_past;
    b = llama_batch_init(nr > 1 ? nr : 1, 0, 1);
    for (int i = 0; i < nc - n_past; i++) { /* the holes, to sequence 1 */
        b.token[0] = cache[0];
        b.pos[0] = i;
        b.n_seq_id[0] = 1;
        b.seq_id[0][0] = 1;
        b.logits[0] = 0;
        b.n_tokens = 1;
        if (llama_decode(ctx, b) != 0) die("llama_decode of hole %d failed", i);
    }
    for (int i = 0; i < nr; i++) {
        b.token[i] = prompt[n_past + i];
        b.pos[i] = n_past + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = nr;
    if (llama_decode(ctx, b) != 0) die("llama_decode of the prompt's %d remaining tokens failed", nr);
    int *ids = xmalloc(sizeof(int) * (size_t)(k + 2));
    float *vals = xmalloc(sizeof(float) * (size_t)(k + 2));
    printf("{\"n_past\":%d,\"moves\":[%s],\"kv\":\"%s\",\"fa\":\"%s\",\"repack\":%s,\"cpu_backend\":\"%s\",\n\"rows\":[",
           n_past, moves ? moves : "", ggml_type_name(kv), llama_flash_attn_type_name(fa),
           o->no_repack ? "false" : "true", cpu_variant_name());
    free(moves);
    for (int i = 0; i < nr; i++) {
        printf("%s{\"pos\":%d,\"token\":%d,\"top\":", i ? ",\n" : "", n_past + i, prompt[n_past + i]);
        print_top(stdout, llama_get_logits_ith(ctx, i), n_vocab, k, ids, vals);
        printf("}");
    }
    printf("],\n\"steps\":[");
    const float *lg = llama_get_logits_ith(ctx, nr - 1);
    for (int s = 0; s < n_gen; s++) {
        if (!lg) die("no logits at step %d", s);
        llama_token t = argmax(lg, n_vocab);
        int k2 = top_k(lg, n_vocab, 2, ids, vals);
        printf("%s{\"token\":%d,\"gap\":", s ? ",\n" : "", t);
        json_float(stdout, k2 == 2 ? (double)vals[0] - (double)vals[1] : INFINITY);
        printf(",\"top\":");
        print_top(stdout, lg, n_vocab, k, ids, vals);
        printf("}");
        if (s + 1 == n_gen) break;
        b.token[0] = t;
        b.pos[0] = np + s;
        b.logits[0] = 1;
        b.n_tokens = 1;
        if (llama_decode(ctx, b) != 0) die("llama_decode(step %d) failed", s);
        lg = llama_get_logits_ith(ctx, -1);
    }
    printf("]}\n");
    free(ids);
    free(vals);
    llama_batch_free(b);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    llama_model_free(m);
    free(cache);
    free(prompt);
    return 0;
}

// llama-bench's test_prompt / test_gen, including its std::rand() token stream (glibc rand, unseeded).
static void bench_prompt(struct llama_context *ctx, const struct llama_vocab *v, int n_prompt, int n_batch,
                         llama_token *buf) {
    int n_vocab = llama_vocab_n_tokens(v);
    for (int done = 0; done < n_prompt;) {
        int nt = n_prompt - done < n_batch ? n_prompt - done : n_batch;
        buf[0] = done == 0 && llama_vocab_get_add_bos(v) ? llama_vocab_bos(v) : rand() % n_vocab;
        for (int i = 1; i < nt; i++) buf[i] = rand() % n_vocab;
        int rc = llama_decode(ctx, llama_batch_get_one(buf, nt));
        if (rc != 0) die("bench: prompt decode failed (%d)", rc);
        done += nt;
    }
    llama_synchronize(ctx);
}

static void bench_gen(struct llama_context *ctx, const struct llama_vocab *v, int n_gen) {
    int n_vocab = llama_vocab_n_tokens(v);
    llama_token t = llama_vocab_get_add_bos(v) ? llama_vocab_bos(v) : rand() % n_vocab;
    for (int i = 0; i < n_gen; i++) {
        int rc = llama_decode(ctx, llama_batch_get_one(&t, 1));
        if (rc != 0) die("bench: generation decode failed (%d)", rc);
        llama_synchronize(ctx);
        t = rand() % n_vocab;
    }
}

typedef struct {
    double avg, sd;
    double *ts;
    uint64_t *ns;
} bench_result;

static bench_result bench_one(struct llama_model *m, const options *o, int n_prompt, int n_gen, int n_batch,
                              int n_ubatch, enum ggml_type kv, enum llama_flash_attn_type fa) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    const int depth = o->depth;
    struct llama_context *ctx =
        new_context(m, o, (uint32_t)(n_prompt + n_gen + depth), (uint32_t)n_batch, (uint32_t)n_ubatch, kv, fa);
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    llama_token *buf = xmalloc(sizeof(*buf) * (size_t)n_batch);
    llama_memory_clear(llama_get_memory(ctx), false);
    if (n_prompt > 0) bench_prompt(ctx, v, n_prompt, n_batch, buf); // warm-up, not counted
    if (n_gen > 0) bench_gen(ctx, v, 1);
    bench_result r = {0};
    r.ts = xmalloc(sizeof(double) * (size_t)o->reps);
    r.ns = xmalloc(sizeof(uint64_t) * (size_t)o->reps);
    uint8_t *state = NULL; // llama-bench's depth cache: the sequence state after the first depth prefill
    size_t state_n = 0;
    for (int i = 0; i < o->reps; i++) {
        llama_memory_clear(llama_get_memory(ctx), false); // an empty KV cache: a fresh context for each rep
        if (depth > 0) { // as llama-bench: prefill once, restore the saved state in later reps (not timed)
            if (!state || llama_state_seq_set_data(ctx, state, state_n, 0) == 0) {
                llama_memory_clear(llama_get_memory(ctx), false);
                bench_prompt(ctx, v, depth, n_batch, buf);
                free(state);
                state_n = llama_state_seq_get_size(ctx, 0);
                state = xmalloc(state_n);
                llama_state_seq_get_data(ctx, state, state_n, 0);
            }
        }
        uint64_t t0 = now_ns();
        if (n_prompt > 0) bench_prompt(ctx, v, n_prompt, n_batch, buf);
        if (n_gen > 0) bench_gen(ctx, v, n_gen);
        r.ns[i] = now_ns() - t0;
        r.ts[i] = 1e9 * (double)(n_prompt + n_gen) / (double)r.ns[i];
    }
    // llama-bench's avg / sample stddev over tokens per second
    double s = 0, s2 = 0;
    for (int i = 0; i < o->reps; i++) s += r.ts[i], s2 += r.ts[i] * r.ts[i];
    r.avg = s / o->reps;
    r.sd = o->reps > 1 ? sqrt(fmax(0, s2 / (o->reps - 1) - r.avg * r.avg * o->reps / (o->reps - 1))) : 0;
    free(buf);
    free(state);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    return r;
}

static void print_bench_json(const char *name, int n_prompt, int n_gen, const bench_result *r, int reps) {
    printf("\"%s\":{\"n_prompt\":%d,\"n_gen\":%d,\"avg_ts\":%.6f,\"stddev_ts\":%.6f,\"samples_ts\":[", name, n_prompt,
           n_gen, r->avg, r->sd);
    for (int i = 0; i < reps; i++) printf(i ? ",%.6f" : "%.6f", r->ts[i]);
    printf("],\"samples_ns\":[");
    for (int i = 0; i < reps; i++) printf(i ? ",%llu" : "%llu", (unsigned long long)r->ns[i]);
    printf("]}");
}

/* np sequences decoded together in one context (llama.cpp's continuous-batching decode, as llama-server and
 * llama-batched-bench run it): each sequence gets its own n_prompt-token prompt (prefilled, not timed), then
 * n_gen steps of one batch holding every sequence's next (greedy) token.  Reports the aggregate generated
 * tokens per second over the reps. */
static int cmd_batched(const options *o) {
    int np = o->np > 0 ? o->np : 4, n_prompt = o->n_prompt > 0 && o->n_prompt != 512 ? o->n_prompt : 32;
    int n_gen = o->n < 0 ? 128 : o->n;
    if (o->reps < 1 || n_gen < 1) die("batched: -r and -n must be >= 1");
    struct llama_model *m = load_model(o, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int n_vocab = llama_vocab_n_tokens(v);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(np * (n_prompt + n_gen) + 64);
    cp.n_batch = cp.n_ubatch = (uint32_t)(np * n_prompt > 512 ? np * n_prompt : 512);
    cp.n_seq_max = (uint32_t)np;
    cp.n_threads = cp.n_threads_batch = o->threads;
    cp.type_k = cp.type_v = kv_type(o->kv, GGML_TYPE_F16);
    cp.flash_attn_type = fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_AUTO);
    cp.kv_unified = true; /* one cell pool for every sequence, as minfer serve (llama-server's default too) */
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) die("batched: failed to create a context for %d sequences", np);
    threadpool_t tp = attach_threadpool(ctx, o->threads);
    struct llama_batch b = llama_batch_init(np * n_prompt > np ? np * n_prompt : np, 0, 1);
    llama_token *last = xmalloc(sizeof(*last) * (size_t)np);
    double *ts = xmalloc(sizeof(double) * (size_t)(o->reps + 1));
    for (int rep = 0; rep <= o->reps; rep++) { /* rep 0 warms up */
        llama_memory_clear(llama_get_memory(ctx), false);
        b.n_tokens = 0;
        for (int s = 0; s < np; s++)
            for (int i = 0; i < n_prompt; i++) {
                b.token[b.n_tokens] = (llama_token)((1000 + 37 * s + 101 * i) % n_vocab);
                b.pos[b.n_tokens] = i;
                b.n_seq_id[b.n_tokens] = 1;
                b.seq_id[b.n_tokens][0] = s;
                b.logits[b.n_tokens] = i == n_prompt - 1;
                b.n_tokens++;
            }
        if (llama_decode(ctx, b)) die("batched: prompt decode failed");
        for (int s = 0; s < np; s++) {
            const float *lg = llama_get_logits_ith(ctx, s * n_prompt + n_prompt - 1);
            int best = 0;
            for (int t = 1; t < n_vocab; t++) best = lg[t] > lg[best] ? t : best;
            last[s] = best;
        }
        uint64_t t0 = now_ns();
        for (int step = 0; step < n_gen; step++) {
            b.n_tokens = 0;
            for (int s = 0; s < np; s++) {
                b.token[s] = last[s];
                b.pos[s] = n_prompt + step;
                b.n_seq_id[s] = 1;
                b.seq_id[s][0] = s;
                b.logits[s] = 1;
            }
            b.n_tokens = np;
            if (llama_decode(ctx, b)) die("batched: decode step %d failed", step);
            for (int s = 0; s < np; s++) {
                const float *lg = llama_get_logits_ith(ctx, s);
                int best = 0;
                for (int t = 1; t < n_vocab; t++) best = lg[t] > lg[best] ? t : best;
                last[s] = best;
            }
        }
        ts[rep] = 1e9 * (double)np * n_gen / (double)(now_ns() - t0);
    }
    double sum = 0;
    printf("{\"np\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"threads\":%d,\"type_k\":\"%s\",\"cpu_backend\":\"%s\","
           "\"samples_ts\":[", np, n_prompt, n_gen, o->threads, ggml_type_name(cp.type_k), cpu_variant_name());
    for (int r = 1; r <= o->reps; r++) printf(r > 1 ? ",%.3f" : "%.3f", ts[r]), sum += ts[r];
    printf("],\"avg_ts\":%.3f}\n", sum / o->reps);
    free(ts), free(last);
    llama_batch_free(b);
    detach_threadpool(ctx, &tp);
    llama_free(ctx);
    llama_model_free(m);
    return 0;
}

static int cmd_bench(const options *o) {
    int n_prompt = o->n_prompt, n_gen = o->n < 0 ? 128 : o->n;
    if (n_prompt < 0 || n_gen < 0 || (n_prompt == 0 && n_gen == 0)) die("bench: nothing to measure (-p %d -n %d)",
                                                                         n_prompt, n_gen);
    if (o->reps < 1) die("bench: -r must be >= 1");
    if (o->depth < 0) die("bench: -d must be >= 0, got %d", o->depth);
    int n_batch = o->n_batch > 0 ? o->n_batch : 2048; // llama-bench's defaults
    int n_ubatch = o->n_ubatch > 0 ? o->n_ubatch : 512;
    enum ggml_type kv = kv_type(o->kv, GGML_TYPE_F16);
    enum llama_flash_attn_type fa = fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_AUTO);
    struct llama_model *m = load_model(o, false);
    char desc[256];
    llama_model_desc(m, desc, sizeof desc);
    bench_result pp = {0}, tg = {0};
    if (n_prompt > 0) pp = bench_one(m, o, n_prompt, 0, n_batch, n_ubatch, kv, fa);
    if (n_gen > 0) tg = bench_one(m, o, 0, n_gen, n_batch, n_ubatch, kv, fa);
    printf("{");
    if (n_prompt > 0) print_bench_json("pp", n_prompt, 0, &pp, o->reps), printf(",\n");
    if (n_gen > 0) print_bench_json("tg", 0, n_gen, &tg, o->reps), printf(",\n");
    printf("\"n_depth\":%d,\"n_threads\":%d,\"n_batch\":%d,\"n_ubatch\":%d,\"type_k\":\"%s\",\"type_v\":\"%s\",\"flash_attn\":\"%s\","
           "\"reps\":%d,\"model_size\":%llu,\"model_n_params\":%llu,\"model_desc\":",
           o->depth, o->threads, n_batch, n_ubatch, ggml_type_name(kv), ggml_type_name(kv), llama_flash_attn_type_name(fa),
           o->reps, (unsigned long long)llama_model_size(m), (unsigned long long)llama_model_n_params(m));
    json_str(stdout, desc, strlen(desc));
    printf(",\"cpu_backend\":");
    json_str(stdout, cpu_variant_name(), strlen(cpu_variant_name()));
    printf(",\"repack\":%s,\"llama_cpp_commit\":\"%s\"}\n", o->no_repack ? "false" : "true", ORACLE_LLAMA_COMMIT);
    fprintf(stderr, "| model | size | params | backend | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
    double gib = (double)llama_model_size(m) / (1024.0 * 1024.0 * 1024.0);
    double bparams = (double)llama_model_n_params(m) / 1e9;
    for (int i = 0; i < 2; i++) {
        const bench_result *r = i ? &tg : &pp;
        int cnt = i ? n_gen : n_prompt;
        if (cnt <= 0) continue;
        char dtxt[32] = "";
        if (o->depth > 0) snprintf(dtxt, sizeof dtxt, " @ d%d", o->depth);
        fprintf(stderr, "| %s | %.2f GiB | %.2f B | CPU (%s) | %d | %s%d%s | %.2f ± %.2f |\n", desc, gib, bparams,
                cpu_variant_name(), o->threads, i ? "tg" : "pp", cnt, dtxt, r->avg, r->sd);
    }
    free(pp.ts), free(pp.ns), free(tg.ts), free(tg.ns);
    llama_model_free(m);
    return 0;
}

/* speculative: llama.cpp's own speculative decoding, as examples/speculative-simple drives
 * common/speculative.cpp's "draft-simple" implementation at this commit, against plain greedy decoding of
 * the same prompt on the target.  (node-llama-cpp's DraftSequenceTokenPredictor, oracle.mjs specbench, drafts
 * asynchronously and verified far fewer drafted tokens on the benchmark pair; this is the synchronous loop
 * llama.cpp's own tools run.)  Per round:
 *   - the draft decodes the last accepted token and proposes greedily, one 1-row decode per token, up to
 *     --draft-max tokens (and no more than the tokens still wanted - 1), stopping before a token whose
 *     probability is below --p-min.  The probability is draft-simple's: its sampler chain is top-k 10 then
 *     dist, so p is the softmax at temperature 1 over the 10 highest draft logits.  A draft shorter than
 *     --draft-min is dropped (the round is then a plain 1-token step);
 *   - the draft's cache is cut back to the target's and the target decodes [last, drafts...] in one batch,
 *     logits on every row; the same batch is then decoded on the draft too (draft-simple's process(), which
 *     keeps the draft's cache in step with the target's);
 *   - accepted: the longest prefix of drafts equal to the target's argmax at the row before, plus the
 *     target's own token after it; the rejected cells are removed from both caches (llama_memory_seq_rm).
 * Unlike speculative-simple, the prompt is prefilled whole on both models and the first token comes from the
 * target's prefill, so both timed decodes start from the same state and count the same tokens (the ones
 * after the first, as minfer specverify and bench/spec count); with no room left to draft a round drafts
 * nothing instead of drafting and overshooting -n.  Both contexts use the same threads, one persistent
 * threadpool (used in turn, so the two models' threads never spin against each other), an F16 cache and
 * flash attention auto unless --kv/--fa say otherwise.  Greedy: the outputs should be identical; llama.cpp
 * may take other matmul paths for multi-row batches, so a near-tie could flip a token: reported, not fatal. */
typedef struct {
    struct llama_context *tgt, *dft;
    struct llama_batch b;
    int n_vocab;
} spec_ctx;

static void spec_decode(struct llama_context *ctx, struct llama_batch b, const char *what) {
    int rc = llama_decode(ctx, b);
    if (rc != 0) die("speculative: llama_decode(%s, %d tokens) failed (%d)", what, b.n_tokens, rc);
}

static void batch_set(struct llama_batch *b, int i, llama_token t, int pos, bool logits) {
    b->token[i] = t;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = 0;
    b->logits[i] = logits;
}

/* Fresh caches, the prompt prefilled on the target (logits on its last row: the first token) and, when
 * draft is set, on the draft. Returns the first generated token. */
static llama_token spec_prefill(spec_ctx *s, const llama_token *prompt, int n, bool draft) {
    llama_memory_clear(llama_get_memory(s->tgt), false);
    llama_memory_clear(llama_get_memory(s->dft), false);
    for (int i = 0; i < n; i++) batch_set(&s->b, i, prompt[i], i, i == n - 1);
    s->b.n_tokens = n;
    spec_decode(s->tgt, s->b, "target prompt");
    if (draft) spec_decode(s->dft, s->b, "draft prompt");
    return argmax(llama_get_logits_ith(s->tgt, -1), s->n_vocab);
}

/* Plain greedy decode of n_gen tokens; the clock runs from the first token (known after the prefill). */
static double spec_plain(spec_ctx *s, const struct llama_vocab *v, const options *o, const llama_token *prompt,
                         int n, int n_gen, llama_token *out, int *n_out) {
    llama_token t = spec_prefill(s, prompt, n, false);
    uint64_t t0 = now_ns();
    int k = 0;
    out[k++] = t;
    while (k < n_gen && !(o->stop_eog && llama_vocab_is_eog(v, t))) {
        batch_set(&s->b, 0, t, n + k - 1, true);
        s->b.n_tokens = 1;
        spec_decode(s->tgt, s->b, "target step");
        out[k++] = t = argmax(llama_get_logits_ith(s->tgt, -1), s->n_vocab);
    }
    *n_out = k;
    return (double)(now_ns() - t0) / 1e9;
}

/* draft-simple's confidence: softmax over the 10 highest logits (its top-k 10 + dist chain) of the top one */
static double draft_p_top(const float *lg, int n_vocab, int *ids, float *vals) {
    int k = top_k(lg, n_vocab, 10, ids, vals);
    double sum = 0;
    for (int i = 0; i < k; i++) sum += exp((double)vals[i] - (double)vals[0]);
    return 1.0 / sum;
}

static double spec_run(spec_ctx *s, const struct llama_vocab *v, const options *o, const llama_token *prompt,
                       int n, int n_gen, llama_token *out, int *n_out, long *drafted, long *accepted, long *rounds) {
    llama_memory_t mt = llama_get_memory(s->tgt), md = llama_get_memory(s->dft);
    llama_token *draft = xmalloc(sizeof(*draft) * (size_t)(o->draft_max + 1));
    int ids[10];
    float vals[10];
    llama_token last = spec_prefill(s, prompt, n, true);
    uint64_t t0 = now_ns();
    int k = 0, n_past = n; /* n_past: the position of `last`, the cells before it are in both caches */
    out[k++] = last;
    *drafted = *accepted = *rounds = 0;
    bool eog = o->stop_eog && llama_vocab_is_eog(v, last);
    while (k < n_gen && !eog) {
        int room = n_gen - k - 1, nd = 0; /* speculative-simple's n_draft_max: what -n still allows */
        if (room > o->draft_max) room = o->draft_max;
        if (room > 0) {
            batch_set(&s->b, 0, last, n_past, true);
            s->b.n_tokens = 1;
            spec_decode(s->dft, s->b, "draft");
            for (;;) {
                const float *lg = llama_get_logits_ith(s->dft, -1);
                double p = draft_p_top(lg, s->n_vocab, ids, vals);
                if (p < o->p_min) break;
                draft[nd++] = ids[0];
                if (nd >= room) break;
                batch_set(&s->b, 0, ids[0], n_past + nd, true);
                s->b.n_tokens = 1;
                spec_decode(s->dft, s->b, "draft");
            }
            if (nd < o->draft_min) nd = 0;
            llama_memory_seq_rm(md, 0, n_past, -1); /* back to the target's cells before verifying */
        }
        batch_set(&s->b, 0, last, n_past, true);
        for (int i = 0; i < nd; i++) batch_set(&s->b, i + 1, draft[i], n_past + 1 + i, true);
        s->b.n_tokens = nd + 1;
        spec_decode(s->tgt, s->b, "target verify");
        for (int i = 0; i <= nd; i++) s->b.logits[i] = i == nd; /* the draft's copy needs no logits */
        spec_decode(s->dft, s->b, "draft process");
        int acc = 0;
        for (int i = 0; i <= nd && k < n_gen; i++) {
            llama_token t = argmax(llama_get_logits_ith(s->tgt, i), s->n_vocab);
            out[k++] = last = t;
            if (o->stop_eog && llama_vocab_is_eog(v, t)) { eog = true; break; }
            if (i == nd || t != draft[i]) break;
            acc++;
        }
        *drafted += nd;
        *accepted += acc;
        (*rounds)++;
        n_past += acc + 1;
        llama_memory_seq_rm(mt, 0, n_past, -1);
        llama_memory_seq_rm(md, 0, n_past, -1);
    }
    double dt = (double)(now_ns() - t0) / 1e9;
    free(draft);
    *n_out = k;
    return dt;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *a, int n) {
    double *c = xmalloc(sizeof(double) * (size_t)n);
    memcpy(c, a, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

static int cmd_speculative(const options *o) {
    if (!o->draft) die("speculative: --draft DRAFT.gguf is required");
    if (!o->tokens && !o->text) die("speculative: --tokens '[ids]' or --text T is required");
    int n_gen = o->n < 0 ? 128 : o->n, reps = o->reps_given ? o->reps : 1;
    if (n_gen < 1 || reps < 1) die("speculative: -n and -r must be >= 1, got -n %d -r %d", n_gen, reps);
    if (o->draft_max < 1 || o->draft_min < 0 || o->draft_min > o->draft_max)
        die("speculative: want 1 <= --draft-max and 0 <= --draft-min <= --draft-max, got %d and %d", o->draft_max,
            o->draft_min);
    struct llama_model *mt = load_model(o, false);
    options od = *o;
    od.model = o->draft;
    struct llama_model *md = load_model(&od, false);
    const struct llama_vocab *v = llama_model_get_vocab(mt);
    int n_vocab = llama_vocab_n_tokens(v), nd_vocab = llama_vocab_n_tokens(llama_model_get_vocab(md));
    if (nd_vocab != n_vocab) die("speculative: the draft's vocabulary has %d tokens, the target's %d", nd_vocab, n_vocab);
    int n;
    llama_token *prompt = o->tokens ? parse_ids(o->tokens, "--tokens", &n)
                                    : tokenize(v, o->text, strlen(o->text), o->add_special, true, &n);
    if (n == 0) die("speculative: empty prompt");
    check_ids(v, prompt, n);
    enum ggml_type kv = kv_type(o->kv, GGML_TYPE_F16);
    enum llama_flash_attn_type fa = fa_type(o->fa, LLAMA_FLASH_ATTN_TYPE_AUTO);
    uint32_t n_ctx = (uint32_t)(n + n_gen + o->draft_max + 8);
    uint32_t nb = (uint32_t)(n > o->draft_max + 1 ? n : o->draft_max + 1);
    spec_ctx s = {new_context(mt, o, n_ctx, nb, nb, kv, fa), new_context(md, o, n_ctx, nb, nb, kv, fa),
                  llama_batch_init((int32_t)nb, 0, 1), n_vocab};
    threadpool_t tp = attach_threadpool(s.tgt, o->threads);
    if (tp.pool) llama_attach_threadpool(s.dft, tp.pool, NULL);
    llama_token *plain = xmalloc(sizeof(*plain) * (size_t)n_gen), *spec = xmalloc(sizeof(*spec) * (size_t)n_gen);
    double *tp_plain = xmalloc(sizeof(double) * (size_t)reps), *tp_spec = xmalloc(sizeof(double) * (size_t)reps);
    int n_plain = 0, n_spec = 0, first_diff = -1;
    long drafted = 0, accepted = 0, rounds = 0;
    /* warm-up, not timed: one prefill and one step of each model pages in their weights */
    spec_prefill(&s, prompt, n, true);
    batch_set(&s.b, 0, prompt[0], n, true);
    s.b.n_tokens = 1;
    spec_decode(s.tgt, s.b, "warm-up");
    spec_decode(s.dft, s.b, "warm-up");
    for (int r = 0; r < reps; r++) { /* alternating, one of each per rep */
        double dp = spec_plain(&s, v, o, prompt, n, n_gen, plain, &n_plain);
        double ds = spec_run(&s, v, o, prompt, n, n_gen, spec, &n_spec, &drafted, &accepted, &rounds);
        tp_plain[r] = dp > 0 ? (n_plain - 1) / dp : 0;
        tp_spec[r] = ds > 0 ? (n_spec - 1) / ds : 0;
        for (int i = 0; first_diff < 0 && (i < n_plain || i < n_spec); i++)
            if (i >= n_plain || i >= n_spec || plain[i] != spec[i]) first_diff = i;
    }
    double mp = median_of(tp_plain, reps), ms = median_of(tp_spec, reps);
    double acc = drafted ? (double)accepted / (double)drafted : 0;
    printf("{\"draft\":");
    json_str(stdout, o->draft, strlen(o->draft));
    printf(",\"n_prompt\":%d,\"n_gen\":%d,\"reps\":%d,\"threads\":%d,\"type_k\":\"%s\",\"flash_attn\":\"%s\","
           "\"draft_max\":%d,\"draft_min\":%d,\"p_min\":%g,\n",
           n, n_gen, reps, o->threads, ggml_type_name(kv), llama_flash_attn_type_name(fa), o->draft_max, o->draft_min,
           o->p_min);
    printf("\"plain\":{\"median\":%.3f,\"runs\":[", mp);
    for (int r = 0; r < reps; r++) printf(r ? ",%.3f" : "%.3f", tp_plain[r]);
    printf("]},\n\"speculative\":{\"median\":%.3f,\"runs\":[", ms);
    for (int r = 0; r < reps; r++) printf(r ? ",%.3f" : "%.3f", tp_spec[r]);
    printf("]},\n\"speedup\":%.3f,\"drafted\":%ld,\"accepted\":%ld,\"rounds\":%ld,\"acceptance\":%.4f,"
           "\"identical\":%s,\"first_diff\":%d,\n\"generated\":",
           mp > 0 ? ms / mp : 0, drafted, accepted, rounds, acc, first_diff < 0 ? "true" : "false", first_diff);
    print_ids(stdout, plain, n_plain);
    printf(",\n\"speculative_generated\":");
    print_ids(stdout, spec, n_spec);
    printf(",\n\"cpu_backend\":\"%s\",\"repack\":%s,\"llama_cpp_commit\":\"%s\"}\n", cpu_variant_name(),
           o->no_repack ? "false" : "true", ORACLE_LLAMA_COMMIT);
    fprintf(stderr,
            "llama.cpp speculative (speculative-simple loop, %d threads, tg %d): plain %.2f t/s, speculative %.2f t/s "
            "(%.2fx), drafted %ld, accepted %ld, acceptance %.3f, identical %s\n",
            o->threads, n_gen, mp, ms, mp > 0 ? ms / mp : 0, drafted, accepted, acc, first_diff < 0 ? "yes" : "NO");
    free(tp_plain), free(tp_spec), free(plain), free(spec), free(prompt);
    llama_batch_free(s.b);
    if (tp.pool) llama_detach_threadpool(s.dft);
    detach_threadpool(s.tgt, &tp);
    llama_free(s.dft);
    llama_free(s.tgt);
    llama_model_free(md);
    llama_model_free(mt);
    return 0;
}

int main(int argc, char **argv) {
    options o = parse_options(argc, argv);
    static const struct {
        const char *name;
        int (*fn)(const options *);
    } cmds[] = {{"info", cmd_info},     {"tokenize", cmd_tokenize}, {"tokenize-batch", cmd_tokenize_batch},
                {"eval", cmd_eval},     {"greedy", cmd_greedy},     {"bench", cmd_bench},       {"batched", cmd_batched},
                {"speculative", cmd_speculative}, {"embed", cmd_embed}, {"embed-bench", cmd_embed_bench},
                {"reuse", cmd_reuse}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(o.cmd, cmds[i].name)) continue;
        backend_setup(&o);
        int rc = cmds[i].fn(&o);
        llama_backend_free();
        if (fflush(stdout) || ferror(stdout)) die("error writing stdout");
        return rc;
    }
    die("unknown command \"%s\"\n%s", o.cmd, USAGE);
    return 1;
}
