/* minfer bench: llama-bench's procedure and output shapes over the public API.
 *
 * Each test (pp = one batch of -p tokens with logits for the last row only; tg = -n single-token decodes,
 * each sampling the next token greedily) runs in a context of its own, sized depth + tokens like
 * llama-bench's.  One uncounted warm-up (a whole pp, or one tg token), then -r repetitions, each from an
 * empty KV cache (with --depth D: D tokens prefilled first, not timed).  Model load, context creation and
 * token generation sit outside the timed region.  Tokens are ordinary vocabulary ids (token_type NORMAL)
 * drawn from a fixed-seed PRNG, so two runs feed identical inputs.
 *
 * Output: llama-bench's markdown table, its JSON array (same field names and order, samples_ns and
 * samples_ts last) or its CSV, so scripts written for llama-bench read these too.  With blocks offloaded
 * to cuda (the placement the model was loaded with) the backend reads CUDA, the JSON/CSV fields
 * n_gpu_layers, backends and devices say what ran where, and the table gains llama-bench's ngl column;
 * an all-CPU run prints exactly what it always did. */
#include "backend/registry.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "minfer.h"
#include "model/model.h" /* the placement the load made (which blocks run on which backend) */
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FMT_MD, FMT_JSON, FMT_CSV };

typedef struct {
    const char *model;
    long n_prompt, n_gen, threads, reps, depth, ubatch, n_ctx; /* n_ctx 0: depth + tokens */
    int fmt;
    uint32_t type_k, type_v;
    mf_arg_cache cache;
    mf_arg_gpu gpu;
    uint64_t seed;
    bool warmup, progress;
} bench_opts;

/* What llama-bench reports about the model, read from the GGUF directly. */
typedef struct {
    char type[160];        /* llama_model_desc: "qwen2 1B Q8_0" */
    uint64_t size, params; /* tensor bytes, tensor elements (llama_model_size / llama_model_n_params) */
    mf_token *ordinary;    /* ids whose token_type is NORMAL (1) */
    int32_t n_ordinary;
    char cpu_info[160];
    int n_gpu_layers; /* blocks placed on cuda (the model's placement, read back after the load) */
} model_meta;

typedef struct {
    long n_prompt, n_gen;
    uint64_t *ns;
    double *ts;
    char time[32];
} test_result;

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer bench -m FILE [options]\n\n"
            "Measures prompt processing (pp) and token generation (tg) speed the way llama-bench does:\n"
            "each test in a fresh context, one uncounted warm-up, then -r timed repetitions (mean +- sample\n"
            "stddev in tokens/s).  Load, tokenization and context setup are not timed; the tokens are random\n"
            "ordinary vocabulary ids from a fixed-seed PRNG.\n"
            "  pp: one batch of -p tokens, logits for the last row only (split into -ub sized forwards)\n"
            "  tg: -n single-token decodes, each next token sampled greedily from the logits\n\n"
            "options:\n"
            "  -m, --model FILE         the GGUF model (required)\n"
            "  -p, --n-prompt N         prompt tokens of the pp test (default 512; 0 = no pp test)\n"
            "  -n, --n-gen N            generated tokens of the tg test (default 128; 0 = no tg test)\n"
            "  -t, --threads N          CPU threads (default 2; 1..1024)\n"
            "  -r, --repetitions N      timed repetitions per test (default 5; 1..100000)\n"
            "  -d, --depth D            prefill D tokens (not timed) before each repetition, so the test\n"
            "                           runs against a KV cache already holding D tokens (default 0)\n"
            "  -o, --output FMT         md (llama-bench's markdown table, default), json (an array with one\n"
            "                           object per test, llama-bench's field names) or csv (llama-bench's\n"
            "                           columns, every value quoted)\n"
            "  -ub, --ubatch-size N     largest single forward (default 512)\n"
            "  -c, --ctx-size N         KV cells of each test's context (default: exactly depth + tokens);\n"
            "                           at least -d + -p and -d + -n.  A decode step costs the cells it\n"
            "                           attends, not N: -c 32768 and -c 2048 at the same -d time the same\n"
            "                           (docs/PERFORMANCE.md)\n"
            MF_ARG_CACHE_HELP
            MF_ARG_GPU_HELP
            "                           (f16 is llama-bench's default too; the table always shows type_k/type_v)\n"
            "  --seed N                 seed of the token PRNG (default 42; unsigned 64-bit decimal)\n"
            "  --no-warmup              skip the uncounted warm-up run\n"
            "  --progress               report each run on stderr\n"
            "  -h, --help               this help\n\n"
            "Every option is given at most once (llama-bench's comma lists are not taken).\n"
            "The whole run's context for a test holds depth + tokens cells (-d + -p for pp, -d + -n for tg),\n"
            "or -c cells when given.\n"
            "Offload (a make CUDA=1 build): the blocks run where the model was placed at load; with blocks\n"
            "on cuda the backend column reads CUDA, an ngl column gives their number, and the JSON/CSV\n"
            "fields n_gpu_layers, backends and devices say the same.\n"
            "exit status: 0 ok, 1 the model or a decode failed or a write to stdout failed, 2 bad usage\n");
}

/* ---------------- helpers ---------------- */
static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: a fixed, portable stream for token ids */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static mf_token rand_token(const model_meta *mm, uint64_t *s) {
    return mm->ordinary[rng_next(s) % (uint64_t)mm->n_ordinary];
}

/* llama_ftype names (llama_model_ftype_name) for general.file_type: every id llama.h defines, so a
 * bench table of a file llama-quantize wrote names its type as llama-bench does */
static const char *ftype_name(uint32_t ft) {
    switch (ft) {
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 19: return "IQ2_XXS - 2.0625 bpw";
    case 20: return "IQ2_XS - 2.3125 bpw";
    case 21: return "Q2_K - Small";
    case 22: return "IQ3_XS - 3.3 bpw";
    case 23: return "IQ3_XXS - 3.0625 bpw";
    case 24: return "IQ1_S - 1.5625 bpw";
    case 25: return "IQ4_NL - 4.5 bpw";
    case 26: return "IQ3_S - 3.4375 bpw";
    case 27: return "IQ3_S mix - 3.66 bpw";
    case 28: return "IQ2_S - 2.5 bpw";
    case 29: return "IQ2_M - 2.7 bpw";
    case 30: return "IQ4_XS - 4.25 bpw";
    case 31: return "IQ1_M - 1.75 bpw";
    case 32: return "BF16";
    case 36: return "TQ1_0 - 1.69 bpw ternary";
    case 37: return "TQ2_0 - 2.06 bpw ternary";
    case 38: return "MXFP4 MoE";
    case 39: return "NVFP4";
    case 40: return "Q1_0";
    case 41: return "Q2_0";
    default: return NULL;
    }
}

/* llama.cpp's size label for qwen2 / qwen3 / qwen3moe / qwen2moe (models/<arch>.cpp load_arch_hparams) */
static const char *size_label(const mf_model_info *mi) {
    const int L = mi->n_layer, E = mi->n_embd;
    if (!strcmp(mi->arch, "qwen2")) {
        switch (L) {
        case 24: return E == 1024 ? "0.5B" : "1B";
        case 28: return E == 1536 ? "1.5B" : "7B";
        case 32: return "7B";
        case 36: return "3B";
        case 40: return mi->n_head == 20 ? "4B" : "13B";
        case 48: return "14B";
        case 64: return "32B";
        case 80: return "70B";
        }
    } else if (!strcmp(mi->arch, "qwen3")) {
        switch (L) {
        case 28: return E == 1024 ? "0.6B" : "1.7B";
        case 36: return E == 2560 ? "4B" : "8B";
        case 40: return "14B";
        case 64: return "32B";
        }
    } else if (!strcmp(mi->arch, "qwen3moe")) {
        switch (L) {
        case 48: return "30B.A3B";
        case 94: return "235B.A22B";
        }
    } else if (!strcmp(mi->arch, "qwen2moe")) {
        switch (L) {
        case 24: return "A2.7B";
        case 28: return "57B.A14B";
        }
    }
    return "?B";
}

static void read_cpu_info(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, "\n");
        snprintf(buf, cap, "%.*s", (int)n, c);
        break;
    }
    fclose(f);
}

/* Size, parameter count, file type and the ordinary token ids, from the GGUF the model was loaded from. */
static int read_meta(const char *path, const mf_model_info *mi, model_meta *mm) {
    mf_error err = {0};
    mf_gguf *g = NULL;
    if (mf_gguf_open(path, &g, &err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return 1;
    }
    uint32_t most_type = 0;
    uint64_t most_bytes = 0;
    for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        uint64_t ne = 1;
        for (uint32_t d = 0; d < MF_GGUF_MAX_DIMS; d++) ne *= (uint64_t)t->ne[d];
        mm->size += t->nbytes;
        mm->params += ne;
        if (t->n_dims >= 2 && t->nbytes > most_bytes) most_bytes = t->nbytes, most_type = t->type;
    }
    uint32_t ft = 0;
    const char *fname = NULL;
    if (!mf_gguf_get_u32(g, "general.file_type", &ft, NULL)) fname = ftype_name(ft);
    if (fname)
        snprintf(mm->type, sizeof mm->type, "%s %s %s", mi->arch, size_label(mi), fname);
    else /* llama.cpp guesses the file type from the weights; say so the same way */
        snprintf(mm->type, sizeof mm->type, "%s %s (guessed) %s", mi->arch, size_label(mi), mf_type_name(most_type));

    mm->ordinary = malloc(sizeof(mf_token) * (size_t)mi->n_vocab);
    if (!mm->ordinary) {
        mf_gguf_close(g);
        fprintf(stderr, "Error: out of memory for %d token ids\n", mi->n_vocab);
        return 1;
    }
    int32_t *types = NULL;
    uint64_t n_types = 0;
    if (!mf_gguf_get_i32_array(g, "tokenizer.ggml.token_type", &types, &n_types, NULL)) {
        for (uint64_t i = 0; i < n_types && i < (uint64_t)mi->n_vocab; i++)
            if (types[i] == 1) mm->ordinary[mm->n_ordinary++] = (mf_token)i;
        free(types);
    } else { /* no token types: every id below the first special one the model names */
        int32_t lim = mi->n_vocab;
        if (mi->bos >= 0) lim = MF_MIN(lim, mi->bos);
        if (mi->eos >= 0) lim = MF_MIN(lim, mi->eos);
        for (int32_t i = 0; i < mi->n_eog; i++) lim = MF_MIN(lim, mi->eog[i]);
        for (int32_t i = 0; i < lim; i++) mm->ordinary[mm->n_ordinary++] = i;
    }
    mf_gguf_close(g);
    if (mm->n_ordinary == 0) {
        fprintf(stderr, "Error: %s has no ordinary (NORMAL) token ids to benchmark with (n_vocab %d)\n", path,
                mi->n_vocab);
        return 1;
    }
    read_cpu_info(mm->cpu_info, sizeof mm->cpu_info);
    return 0;
}

/* ---------------- the measurement ---------------- */
typedef struct {
    mf_context *ctx;
    mf_batch batch;
    mf_sampler *smp;
    const model_meta *mm;
    uint64_t rng;
    const bench_opts *o;
} runner;

/* n tokens at positions pos0.. in one mf_decode, logits for the last row only */
static int run_prompt(runner *r, int32_t pos0, int32_t n, mf_error *err) {
    mf_batch_clear(&r->batch);
    for (int32_t i = 0; i < n; i++) mf_batch_add(&r->batch, rand_token(r->mm, &r->rng), pos0 + i, 0, i == n - 1);
    return mf_decode(r->ctx, &r->batch, err);
}

/* n single-token decodes from pos0; each next token is the greedy pick from the last logits */
static int run_gen(runner *r, int32_t pos0, int32_t n, mf_error *err) {
    mf_token t = rand_token(r->mm, &r->rng);
    for (int32_t i = 0; i < n; i++) {
        mf_batch_clear(&r->batch);
        mf_batch_add(&r->batch, t, pos0 + i, 0, true);
        int rc = mf_decode(r->ctx, &r->batch, err);
        if (rc) return rc;
        const float *lg = mf_get_logits(r->ctx, -1);
        if (!lg) return mf_err(err, MF_E_INTERNAL, "no logits after the decode of generated token %d", i);
        t = mf_sampler_sample(r->smp, lg);
    }
    return 0;
}

static int run_test(mf_model *model, const model_meta *mm, const bench_opts *o, long n_prompt, long n_gen,
                    uint64_t *rng, test_result *res, mf_error *err) {
    res->n_prompt = n_prompt;
    res->n_gen = n_gen;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(res->time, sizeof res->time, "%Y-%m-%dT%H:%M:%SZ", &tm);

    runner r = {.mm = mm, .rng = *rng, .o = o};
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (int32_t)(o->n_ctx ? o->n_ctx : o->depth + n_prompt + n_gen);
    cp.n_threads = (int32_t)o->threads;
    cp.n_ubatch = (int32_t)o->ubatch;
    cp.type_k = o->type_k;
    cp.type_v = o->type_v;
    int rc = mf_context_new(model, &cp, &r.ctx, err);
    long cap = MF_MAX(MF_MAX(n_prompt, o->depth), 1);
    if (!rc) rc = mf_batch_init(&r.batch, (int32_t)cap, err);
    mf_sampler_params sp = mf_sampler_default_params();
    sp.temp = 0.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.typ_p = 1.0f;
    sp.penalty_last_n = 0;
    mf_model_info mi;
    mf_model_get_info(model, &mi);
    if (!rc) rc = mf_sampler_new(&sp, mi.n_vocab, &r.smp, err);
    res->ns = calloc((size_t)o->reps, sizeof *res->ns);
    res->ts = calloc((size_t)o->reps, sizeof *res->ts);
    if (!rc && (!res->ns || !res->ts)) rc = mf_err(err, MF_E_NOMEM, "out of memory for %ld samples", o->reps);
    const char *what = n_prompt > 0 ? "pp" : "tg";
    const long cnt = n_prompt > 0 ? n_prompt : n_gen;
    if (!rc && o->warmup) {
        if (o->progress) fprintf(stderr, "minfer bench: %s%ld: warm-up\n", what, cnt);
        mf_kv_clear_all(r.ctx);
        rc = n_prompt > 0 ? run_prompt(&r, 0, (int32_t)n_prompt, err) : run_gen(&r, 0, 1, err);
        if (rc) mf_err_prefix(err, rc, "warm-up run");
    }
    for (long i = 0; !rc && i < o->reps; i++) {
        mf_kv_clear_all(r.ctx);
        if (o->depth > 0) {
            if (o->progress) fprintf(stderr, "minfer bench: %s%ld: depth %ld prefill %ld/%ld\n", what, cnt, o->depth,
                                     i + 1, o->reps);
            if ((rc = run_prompt(&r, 0, (int32_t)o->depth, err))) {
                mf_err_prefix(err, rc, "prefilling depth %ld", o->depth);
                break;
            }
        }
        if (o->progress) fprintf(stderr, "minfer bench: %s%ld: run %ld/%ld\n", what, cnt, i + 1, o->reps);
        mf_sampler_reset(r.smp);
        uint64_t t0 = now_ns();
        rc = n_prompt > 0 ? run_prompt(&r, (int32_t)o->depth, (int32_t)n_prompt, err)
                          : run_gen(&r, (int32_t)o->depth, (int32_t)n_gen, err);
        uint64_t dt = now_ns() - t0;
        if (rc) break;
        res->ns[i] = dt ? dt : 1;
        res->ts[i] = 1e9 * (double)(n_prompt + n_gen) / (double)res->ns[i];
    }
    *rng = r.rng;
    mf_sampler_free(r.smp);
    mf_batch_free(&r.batch);
    mf_context_free(r.ctx);
    return rc;
}

/* llama-bench's avg and sample stddev (n - 1) */
static double avg_d(const double *v, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += v[i];
    return n ? s / (double)n : 0;
}
static double sd_d(const double *v, long n) {
    if (n <= 1) return 0;
    double m = avg_d(v, n), s2 = 0;
    for (long i = 0; i < n; i++) s2 += (v[i] - m) * (v[i] - m);
    return sqrt(s2 / (double)(n - 1));
}
static void ns_stats(const test_result *t, long n, uint64_t *avg, uint64_t *sd) {
    double *d = malloc(sizeof(double) * (size_t)n);
    if (!d) {
        *avg = *sd = 0;
        return;
    }
    for (long i = 0; i < n; i++) d[i] = (double)t->ns[i];
    *avg = (uint64_t)llround(avg_d(d, n));
    *sd = (uint64_t)llround(sd_d(d, n));
    free(d);
}

/* ---------------- output ---------------- */

/* llama-bench's test::get_fields(), in order */
static const char *const k_fields[] = {
    "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
    "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "cpu_mask", "cpu_strict", "poll",
    "type_k", "type_v", "n_gpu_layers", "n_cpu_moe", "split_mode", "main_gpu", "no_kv_offload", "flash_attn",
    "devices", "tensor_split", "tensor_buft_overrides", "load_mode", "lazy_mode", "embeddings", "no_op_offload",
    "no_host", "fit_target", "fit_min_ctx", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns",
    "avg_ts", "stddev_ts"};
enum { N_FIELDS = (int)MF_ARRAY_LEN(k_fields) };
typedef enum { F_STR, F_INT, F_BOOL, F_FLOAT } field_kind;

typedef struct {
    field_kind kind;
    char val[320];
} field_value;

/* The values of one test in k_fields order (ints/floats as text). */
static void test_values(const bench_opts *o, const model_meta *mm, const test_result *t, field_value *v) {
    uint64_t an, sn;
    ns_stats(t, o->reps, &an, &sn);
    const long n_batch = o->n_prompt > 0 ? o->n_prompt : o->ubatch;
    int k = 0;
#define S(x) (v[k].kind = F_STR, snprintf(v[k].val, sizeof v[k].val, "%s", (x)), k++)
#define I(x) (v[k].kind = F_INT, snprintf(v[k].val, sizeof v[k].val, "%lld", (long long)(x)), k++)
#define B(x) (v[k].kind = F_BOOL, snprintf(v[k].val, sizeof v[k].val, "%d", (x) ? 1 : 0), k++)
#define F(x) (v[k].kind = F_FLOAT, snprintf(v[k].val, sizeof v[k].val, "%f", (x)), k++)
    const bool gpu = mm->n_gpu_layers > 0;
    S("minfer");
    I(0);
    S(mm->cpu_info);
    S("");
    S(gpu ? "CUDA" : "CPU");
    S(o->model);
    S(mm->type);
    I(mm->size);
    I(mm->params);
    I(n_batch);
    I(o->ubatch);
    I(o->threads);
    S("0x0");
    B(0);
    I(0);
    S(mf_arg_cache_name(o->type_k));
    S(mf_arg_cache_name(o->type_v));
    I(mm->n_gpu_layers);
    I(0);
    S(gpu ? "layer" : "none");
    I(0);
    B(0);
    I(0);
    S(gpu ? "CUDA0" : "CPU");
    S("0.00");
    S("none");
    S("mmap");
    S("off");
    B(0);
    I(0);
    B(0);
    I(0);
    I(0);
    I(t->n_prompt);
    I(t->n_gen);
    I(o->depth);
    S(t->time);
    I(an);
    I(sn);
    F(avg_d(t->ts, o->reps));
    F(sd_d(t->ts, o->reps));
#undef S
#undef I
#undef B
#undef F
}

static void json_escaped(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void md_header(const bench_opts *o, const model_meta *mm) {
    printf("| %-30s | %10s | %10s | %-10s |", "model", "size", "params", "backend");
    if (mm->n_gpu_layers > 0) printf(" %3s |", "ngl"); /* llama-bench's column, where blocks are offloaded */
    printf(" %7s |", "threads");
    if (o->ubatch != 512) printf(" %8s |", "n_ubatch");
    /* llama-bench shows these only when they differ from its f16 default; minfer always says which ran */
    printf(" %6s | %6s |", "type_k", "type_v");
    printf(" %15s | %20s |\n", "test", "t/s");
    printf("| ------------------------------ | ---------: | ---------: | ---------- |");
    if (mm->n_gpu_layers > 0) printf(" --: |");
    printf(" ------: |");
    if (o->ubatch != 512) printf(" -------: |");
    printf(" -----: | -----: |");
    printf(" --------------: | -------------------: |\n");
}

static void md_row(const bench_opts *o, const model_meta *mm, const test_result *t) {
    char size[32], params[32], test[64], ts[64];
    if (mm->size < 1024ull * 1024 * 1024) snprintf(size, sizeof size, "%.2f MiB", (double)mm->size / 1024.0 / 1024.0);
    else snprintf(size, sizeof size, "%.2f GiB", (double)mm->size / 1024.0 / 1024.0 / 1024.0);
    if (mm->params < 1000ull * 1000 * 1000) snprintf(params, sizeof params, "%.2f M", (double)mm->params / 1e6);
    else snprintf(params, sizeof params, "%.2f B", (double)mm->params / 1e9);
    if (t->n_prompt > 0 && t->n_gen == 0) snprintf(test, sizeof test, "pp%ld", t->n_prompt);
    else if (t->n_gen > 0 && t->n_prompt == 0) snprintf(test, sizeof test, "tg%ld", t->n_gen);
    else snprintf(test, sizeof test, "pp%ld+tg%ld", t->n_prompt, t->n_gen);
    if (o->depth > 0) {
        size_t len = strlen(test);
        snprintf(test + len, sizeof test - len, " @ d%ld", o->depth);
    }
    snprintf(ts, sizeof ts, "%.2f ± %.2f", avg_d(t->ts, o->reps), sd_d(t->ts, o->reps));
    printf("| %-30s | %10s | %10s | %-10s |", mm->type, size, params, mm->n_gpu_layers > 0 ? "CUDA" : "CPU");
    if (mm->n_gpu_layers > 0) printf(" %3d |", mm->n_gpu_layers);
    printf(" %7ld |", o->threads);
    if (o->ubatch != 512) printf(" %8ld |", o->ubatch);
    printf(" %6s | %6s |", mf_arg_cache_name(o->type_k), mf_arg_cache_name(o->type_v));
    printf(" %15s | %21s |\n", test, ts); /* 21: the ± is two bytes (llama-bench's same hack) */
}

static void json_test(const bench_opts *o, const model_meta *mm, const test_result *t, bool first) {
    field_value v[N_FIELDS];
    test_values(o, mm, t, v);
    printf("%s  {\n", first ? "" : ",\n");
    for (int i = 0; i < N_FIELDS; i++) {
        printf("    \"%s\": ", k_fields[i]);
        if (v[i].kind == F_STR) json_escaped(stdout, v[i].val);
        else if (v[i].kind == F_BOOL) fputs(strcmp(v[i].val, "0") ? "true" : "false", stdout);
        else fputs(v[i].val, stdout);
        fputs(",\n", stdout);
    }
    printf("    \"minfer_isa\": \"%s\",\n", mf_isa_name(mf_quant_active_isa()));
    printf("    \"samples_ns\": [ ");
    for (long i = 0; i < o->reps; i++) printf(i ? ", %llu" : "%llu", (unsigned long long)t->ns[i]);
    printf(" ],\n    \"samples_ts\": [ ");
    for (long i = 0; i < o->reps; i++) printf(i ? ", %.6f" : "%.6f", t->ts[i]);
    printf(" ]\n  }");
}

static void csv_header(void) {
    for (int i = 0; i < N_FIELDS; i++) printf(i ? ",%s" : "%s", k_fields[i]);
    putchar('\n');
}

static void csv_row(const bench_opts *o, const model_meta *mm, const test_result *t) {
    field_value v[N_FIELDS];
    test_values(o, mm, t, v);
    for (int i = 0; i < N_FIELDS; i++) {
        if (i) putchar(',');
        putchar('"');
        for (const char *s = v[i].val; *s; s++) {
            if (*s == '"') putchar('"');
            putchar(*s);
        }
        putchar('"');
    }
    putchar('\n');
}

/* ---------------- command line ---------------- */
static bool is(const char *a, const char *s1, const char *s2) { return !strcmp(a, s1) || (s2 && !strcmp(a, s2)); }

static int parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.n_prompt = 512, .n_gen = 128, .threads = 2, .reps = 5, .ubatch = 512, .fmt = FMT_MD,
                      .cache = MF_ARG_CACHE_INIT, .seed = 42, .warmup = true};
    mf_arg_seen seen = {0};
    mf_arg_gpu_init(&o->gpu);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL, *name = NULL;
        long *num = NULL, lo = 0, hi = 0;
        int cf;
        if (is(a, "-h", "--help")) {
            usage(stdout);
            return -1;
        } else if (is(a, "--no-warmup", NULL)) {
            if (!mf_arg_once(&seen, a, NULL)) return 2;
            o->warmup = false;
            continue;
        } else if (is(a, "--progress", NULL)) {
            if (!mf_arg_once(&seen, a, NULL)) return 2;
            o->progress = true;
            continue;
        } else if (is(a, "-m", "--model")) {
            if (!(o->model = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, "-m/--model", o->model)) return 2;
            continue;
        } else if (is(a, "-p", "--n-prompt")) num = &o->n_prompt, lo = 0, hi = 1 << 20, name = "-p/--n-prompt";
        else if (is(a, "-n", "--n-gen")) num = &o->n_gen, lo = 0, hi = 1 << 20, name = "-n/--n-gen";
        else if (is(a, "-t", "--threads")) num = &o->threads, lo = 1, hi = 1024, name = "-t/--threads";
        else if (is(a, "-r", "--repetitions")) num = &o->reps, lo = 1, hi = 100000, name = "-r/--repetitions";
        else if (is(a, "-d", "--depth") || is(a, "--n-depth", NULL))
            num = &o->depth, lo = 0, hi = 1 << 20, name = "-d/--depth/--n-depth";
        else if (is(a, "-ub", "--ubatch-size")) num = &o->ubatch, lo = 1, hi = 1 << 16, name = "-ub/--ubatch-size";
        else if (is(a, "-c", "--ctx-size")) num = &o->n_ctx, lo = 1, hi = INT32_MAX / 2, name = "-c/--ctx-size";
        else if (is(a, "-o", "--output")) {
            if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, "-o/--output", v)) return 2;
            if (!strcmp(v, "md")) o->fmt = FMT_MD;
            else if (!strcmp(v, "json")) o->fmt = FMT_JSON;
            else if (!strcmp(v, "csv")) o->fmt = FMT_CSV;
            else {
                fprintf(stderr, "Error: -o/--output must be md, json or csv, got '%s'\n", v);
                return 2;
            }
            continue;
        } else if ((cf = mf_arg_cache_flag(argc, argv, &i, &seen, &o->cache)) != 0) {
            if (cf < 0) return 2;
            continue;
        } else if ((cf = mf_arg_gpu_flag(argc, argv, &i, &seen, &o->gpu)) != 0) {
            if (cf < 0) return 2;
            continue;
        } else if (is(a, "--seed", NULL)) {
            if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, a, v) || !mf_arg_u64(a, v, &o->seed))
                return 2;
            continue;
        } else {
            fprintf(stderr, "Error: unknown option '%s' (see minfer bench --help)\n", a);
            return 2;
        }
        if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, name, v)) return 2;
        if (!mf_arg_int(a, v, lo, hi, num)) return 2;
    }
    if (!mf_arg_cache_type(&o->cache, &o->type_k, &o->type_v)) return 2;
    if (!o->model) {
        fprintf(stderr, "Error: -m/--model is required (see minfer bench --help)\n");
        return 2;
    }
    if (o->n_prompt == 0 && o->n_gen == 0) {
        fprintf(stderr, "Error: nothing to measure: -p 0 and -n 0\n");
        return 2;
    }
    if (o->depth + o->n_prompt + o->n_gen > INT32_MAX / 2) {
        fprintf(stderr, "Error: -d %ld + -p %ld + -n %ld is too large a context\n", o->depth, o->n_prompt, o->n_gen);
        return 2;
    }
    if (o->n_ctx && o->n_ctx < o->depth + MF_MAX(o->n_prompt, o->n_gen)) {
        fprintf(stderr, "Error: -c %ld cells cannot hold -d %ld + %s %ld tokens; give -c %ld or more (or leave -c out)\n",
                o->n_ctx, o->depth, o->n_prompt >= o->n_gen ? "-p" : "-n", MF_MAX(o->n_prompt, o->n_gen),
                o->depth + MF_MAX(o->n_prompt, o->n_gen));
        return 2;
    }
    return 0;
}

int mf_cmd_bench(int argc, char **argv) {
    bench_opts o;
    int prc = parse(argc, argv, &o);
    if (prc < 0) return mf_out_check(stdout, "stdout") ? 0 : 1;
    if (prc) return prc;

    mf_error err = {0};
    mf_model *model = NULL;
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_gpu_resolve(&o.gpu, &mp)) return 2;
    if (mf_model_load(o.model, &mp, &model, &err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return 1;
    }
    if (!mf_arg_gpu_report(&o.gpu, model)) {
        mf_model_free(model);
        return 1;
    }
    mf_model_info mi;
    mf_model_get_info(model, &mi);
    model_meta mm = {0};
    for (int l = 0; model->layer_backend && l < mi.n_layer; l++) mm.n_gpu_layers += model->layer_backend[l] == MF_BACKEND_ID_CUDA;
    if (read_meta(o.model, &mi, &mm)) {
        mf_model_free(model);
        return 1;
    }

    long tests[2][2];
    int n_tests = 0;
    if (o.n_prompt > 0) tests[n_tests][0] = o.n_prompt, tests[n_tests][1] = 0, n_tests++;
    if (o.n_gen > 0) tests[n_tests][0] = 0, tests[n_tests][1] = o.n_gen, n_tests++;

    if (o.fmt == FMT_MD) md_header(&o, &mm);
    else if (o.fmt == FMT_JSON) printf("[\n");
    else csv_header();
    int rc = mf_out_check(stdout, "stdout") ? 0 : 1;

    uint64_t rng = o.seed;
    bool wrote = !rc; /* a failed write stops the run; it is reported once, by mf_out_check */
    for (int k = 0; wrote && k < n_tests; k++) {
        test_result t = {0};
        rc = run_test(model, &mm, &o, tests[k][0], tests[k][1], &rng, &t, &err);
        if (!rc) {
            if (o.fmt == FMT_MD) md_row(&o, &mm, &t);
            else if (o.fmt == FMT_JSON) json_test(&o, &mm, &t, k == 0);
            else csv_row(&o, &mm, &t);
            wrote = mf_out_check(stdout, "stdout");
        }
        free(t.ns);
        free(t.ts);
        if (rc) {
            fprintf(stderr, "Error: %s%ld test: %s\n", tests[k][0] ? "pp" : "tg", tests[k][0] ? tests[k][0] : tests[k][1],
                    err.msg);
            break;
        }
    }
    if (!rc && wrote) {
        if (o.fmt == FMT_MD) printf("\nbuild: minfer (kernels %s)\n", mf_isa_name(mf_quant_active_isa()));
        else if (o.fmt == FMT_JSON) printf("\n]\n");
        wrote = mf_out_check(stdout, "stdout");
    }
    free(mm.ordinary);
    mf_model_free(model);
    return rc || !wrote ? 1 : 0;
}
