/* minfer embed: texts -> pooled, normalised embeddings (llama.cpp's llama-embedding, with its flag spellings:
 * --pooling, --embd-normalize, --embd-separator, --embd-output-format), or a reranker's scores of
 * query/document pairs (--pooling rank, --cls-separator). */
#include "cli/cli.h"
#include "core/core.h" /* mf_time_now */

#include "minfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer embed -m MODEL (-p TEXT | -f FILE | --tokens JSON_IDS) [options]\n"
            "\n"
            "Embeds each text (the prompt split at --embd-separator) with the model's hidden states after\n"
            "its output norm, pooled and normalised, and prints them as JSON:\n"
            "  {\"object\": \"list\", \"data\": [{\"object\": \"embedding\", \"index\": 0, \"embedding\": [...]}, ...],\n"
            "   \"model\": FILE, \"usage\": {\"prompt_tokens\": N, \"total_tokens\": N}}\n"
            "\n"
            "  -m, --model FILE      GGUF model (qwen2, qwen3; an embedding model such as Qwen3-Embedding)\n"
            "  -p, --prompt TEXT     the texts, split at the separator (special tokens parsed; BOS/EOS as the\n"
            "                        model's tokenizer asks: Qwen3-Embedding appends <|endoftext|>)\n"
            "  -f, --file FILE       read the texts from FILE instead\n"
            "      --tokens JSON     one text given as token ids, e.g. '[9707, 11, 1879]'\n"
            "      --embd-separator S  what separates texts (default: a newline)\n"
            "      --pooling P       model (default: the file's pooling_type; last when it names none), mean,\n"
            "                        cls (the first token), last, or rank (a reranker's: see below); none is\n"
            "                        refused (one vector per token)\n"
            "      --embd-normalize N  -1 none, 0 max-abs (int16 range), 1 taxicab, 2 Euclidean (default,\n"
            "                        what OpenAI's endpoint returns), N > 2 the p-norm; rank: -1 only\n"
            "      --dimensions N    keep each vector's first N floats, then normalise (Matryoshka truncation,\n"
            "                        OpenAI's 'dimensions'): the Qwen3-Embedding family is trained for it; any\n"
            "                        other model is refused unless --matryoshka vouches for it\n"
            "      --matryoshka      the model was trained for Matryoshka truncation (allows --dimensions)\n"
            "      --cls-separator S  rank: what separates a text's query from its document (default: a tab)\n"
            "      --embd-output-format F  json (default) or array ([[...], ...], the vectors only)\n"
            "  -c, --ctx-size N      context size (default: the longest text, or a ubatch when the texts fill one);\n"
            "                        --n-ctx N is the same\n"
            "  -ub, --ubatch-size N  tokens per forward (default 512)\n"
            "  -t, --threads N       CPU threads, also for the repack at load (default: online CPUs, at most 16)\n"
            MF_ARG_CACHE_HELP
            MF_ARG_ROPE_HELP
            MF_ARG_GPU_HELP
            "  -h, --help            this help\n"
            "\n"
            "Reranking (--pooling rank, the default of a reranker such as Qwen3-Reranker): each text is\n"
            "\"QUERY<tab>DOCUMENT\", filled into the model's rerank prompt as llama-server does, and its vector\n"
            "is the probabilities of the model's labels (\"labels\" in the JSON; Qwen3-Reranker: yes, no), the\n"
            "first of which is llama-server's relevance_score.\n"
            "\n"
            "Every option is given at most once.  stdout is the JSON only; stderr ends with the timing line\n"
            "(\"embed: N texts, T tokens in F forwards, S s (R tokens/s)\": short texts share forwards, a ubatch\n"
            "of tokens each, with the vectors they get alone).  An empty text is refused (exit 2)\n"
            "and a model whose hidden states come out NaN or infinite is refused (exit 1) before anything is\n"
            "printed.\n");
}

/* The texts of -p / -f split at sep (an empty separator: one text). */
static int split(char *all, const char *sep, char ***out) {
    size_t ls = strlen(sep);
    int n = 1, k = 0;
    for (char *p = all; ls && (p = strstr(p, sep)); p += ls) n++;
    char **t = malloc(sizeof *t * (size_t)n);
    if (!t) return -1;
    t[k++] = all;
    for (char *p = all; ls && (p = strstr(p, sep));) {
        *p = 0;
        p += ls;
        t[k++] = p;
    }
    *out = t;
    return n;
}

typedef struct {
    const char *model_path, *prompt, *file, *tokens_json, *sep, *format, *pooling, *cls_sep;
    long norm, n_ctx, n_ubatch, n_threads, dims;
    bool norm_given, matryoshka;
} embed_args;

static int parse(int argc, char **argv, embed_args *o, mf_arg_seen *seen, mf_arg_cache *cache, mf_arg_gpu *gpu) {
    static const char *const names[][3] = {
        {"-m", "--model", "-m/--model"},         {"-p", "--prompt", "-p/--prompt"},
        {"-f", "--file", "-f/--file"},           {"--tokens", "--tokens", "--tokens"},
        {"--embd-separator", "", "--embd-separator"}, {"--embd-output-format", "", "--embd-output-format"},
        {"--pooling", "", "--pooling"},          {"--embd-normalize", "", "--embd-normalize"},
        {"-c", "--ctx-size", "-c/--ctx-size/--n-ctx"}, {"-ub", "--ubatch-size", "-ub/--ubatch-size"},
        {"-t", "--threads", "-t/--threads"},    {"--cls-separator", "", "--cls-separator"},
        {"--dimensions", "", "--dimensions"},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        }
        const int f = mf_arg_engine_flag(argc, argv, &i, seen, cache, gpu, NULL);
        if (f < 0) return 2;
        if (f > 0) continue;
        if (!strcmp(a, "--matryoshka")) {
            if (!mf_arg_once(seen, "--matryoshka", NULL)) return 2;
            o->matryoshka = true;
            continue;
        }
        int k = -1;
        for (int j = 0; j < (int)(sizeof names / sizeof names[0]) && k < 0; j++)
            if (!strcmp(a, names[j][0]) || (*names[j][1] && !strcmp(a, names[j][1]))) k = j;
        if (!strcmp(a, "--n-ctx")) k = 8;
        if (k < 0) {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer embed' (see minfer embed --help)\n", a);
            return 2;
        }
        if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(seen, names[k][2], v)) return 2;
        switch (k) {
        case 0: o->model_path = v; break;
        case 1: o->prompt = v; break;
        case 2: o->file = v; break;
        case 3: o->tokens_json = v; break;
        case 4: o->sep = v; break;
        case 5: o->format = v; break;
        case 6: o->pooling = v; break;
        case 7: if (!mf_arg_int(a, v, -1, 64, &o->norm)) return 2; o->norm_given = true; break;
        case 8: if (!mf_arg_int(a, v, 0, 1 << 24, &o->n_ctx)) return 2; break;
        case 9: if (!mf_arg_int(a, v, 1, 1 << 20, &o->n_ubatch)) return 2; break;
        case 10: if (!mf_arg_int(a, v, 1, 1024, &o->n_threads)) return 2; break;
        case 11: o->cls_sep = v; break;
        default: if (!mf_arg_int(a, v, 1, 1 << 20, &o->dims)) return 2; break;
        }
    }
    return -1; /* go on */
}

static bool pooling_of(const char *s, mf_pooling *out) {
    if (!mf_pooling_parse(s, out)) {
        fprintf(stderr, "Error: --pooling '%s' is not one of model, mean, cls, last, rank\n", s);
        return false;
    }
    if (*out == MF_POOLING_NONE) {
        fprintf(stderr, "Error: --pooling none gives one vector per token; minfer embed prints one per "
                        "text (use mean, cls, last or model; every token's vector: minfer serve --embeddings "
                        "--pooling none, POST /embedding)\n");
        return false;
    }
    return true;
}

/* a JSON string (the model path): quotes, backslashes and control bytes escaped */
static void print_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_vec(const float *v, int32_t n) {
    putchar('[');
    for (int32_t i = 0; i < n; i++) printf(i ? ", %.9g" : "%.9g", v[i]);
    putchar(']');
}

/* --pooling rank's flags: scores are probabilities (no normalisation), pairs only with rank. */
static bool rank_flags_ok(const embed_args *o, bool rank, bool from_file) {
    if (!rank && o->cls_sep) {
        fprintf(stderr, "Error: --cls-separator splits a reranker's query/document pairs; the pooling here is "
                        "not rank (--pooling rank needs a reranker)\n");
        return false;
    }
    if (rank && o->norm_given && o->norm != -1) {
        fprintf(stderr, "Error: --embd-normalize %ld: a reranker's scores (rank pooling%s) are probabilities "
                        "and are printed as they are; drop the flag or give -1\n",
                o->norm, from_file ? ", the model's own" : "");
        return false;
    }
    return true;
}

/* Text i of a reranker: "QUERY<sep>DOCUMENT" into the model's rerank prompt (exit status on failure). */
static int tokenize_pair(mf_model *model, const char *text, const char *sep, int i, mf_token **ids, int32_t *n,
                         mf_error *err) {
    const char *cut = *sep ? strstr(text, sep) : NULL;
    if (!cut) {
        fprintf(stderr, "Error: text %d has no --cls-separator ('%s'): a reranker scores \"QUERY%sDOCUMENT\"\n",
                i, strcmp(sep, "\t") ? sep : "\\t", strcmp(sep, "\t") ? sep : "\\t");
        return 2;
    }
    const char *doc = cut + strlen(sep);
    if (mf_rerank_tokenize(model, text, (size_t)(cut - text), doc, strlen(doc), ids, n, err)) {
        fprintf(stderr, "Error: %s\n", err->msg);
        return 1;
    }
    return 0;
}

/* "labels": the classifier's, the index where the file names none */
static void print_labels(const mf_model *model, int32_t n) {
    printf("], \"labels\": [");
    for (int32_t i = 0; i < n; i++) {
        const char *l = mf_model_cls_label(model, i);
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        printf(i ? ", " : "");
        print_str(l ? l : idx);
    }
}

int mf_cmd_embed(int argc, char **argv) {
    embed_args o = {.sep = "\n", .format = "json", .pooling = "model", .norm = 2};
    mf_arg_seen seen = {0};
    mf_arg_gpu gpu;
    mf_arg_gpu_init(&gpu);
    mf_arg_cache cache = MF_ARG_CACHE_INIT;
    int prc = parse(argc, argv, &o, &seen, &cache, &gpu);
    if (prc >= 0) return prc;
    uint32_t type_k, type_v;
    mf_pooling pooling;
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_cache_type(&cache, &type_k, &type_v) || !mf_arg_gpu_resolve(&gpu, &mp)) return 2;
    if (!pooling_of(o.pooling, &pooling)) return 2;
    const bool json = !strcmp(o.format, "json");
    if (!json && strcmp(o.format, "array")) {
        fprintf(stderr, "Error: --embd-output-format '%s' is not json or array\n", o.format);
        return 2;
    }
    if (!o.model_path) {
        fprintf(stderr, "Error: no model given: minfer embed -m MODEL.gguf -p TEXT\n");
        return 2;
    }
    if (!!o.prompt + !!o.file + !!o.tokens_json != 1) {
        fprintf(stderr, "Error: give exactly one of -p TEXT, -f FILE or --tokens JSON_IDS\n");
        return 2;
    }
    int ret = 1, n_texts = 0;
    char *all = NULL, **texts = NULL;
    mf_token **ids = NULL;
    int32_t *n_ids = NULL, longest = 0;
    float *vec = NULL;
    mf_error err = {0};
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    if (o.tokens_json) {
        n_texts = 1;
        ids = calloc(1, sizeof *ids);
        n_ids = calloc(1, sizeof *n_ids);
        if (!ids || !n_ids) goto nomem;
        if (!mf_arg_token_ids("--tokens", o.tokens_json, &ids[0], &n_ids[0])) {
            ret = 2;
            goto out;
        }
    } else {
        size_t len = 0;
        if (o.file) {
            if (!(all = mf_read_file(o.file, &len))) goto out; /* printed */
        } else if (!(all = strdup(o.prompt))) {
            goto nomem;
        }
        if ((n_texts = split(all, o.sep, &texts)) < 0) goto nomem;
        ids = calloc((size_t)n_texts, sizeof *ids);
        n_ids = calloc((size_t)n_texts, sizeof *n_ids);
        if (!ids || !n_ids) goto nomem;
    }
    mp.n_threads = (int32_t)o.n_threads;
    if (mf_model_load(o.model_path, &mp, &model, &err)) goto fail;
    if (!mf_arg_gpu_report(&gpu, model)) goto out;
    mf_pooling resolved;
    bool from_file;
    if (mf_embed_pooling(model, pooling, &resolved, &from_file, &err)) goto fail;
    const bool rank = resolved == MF_POOLING_RANK;
    if (!rank_flags_ok(&o, rank, from_file)) {
        ret = 2;
        goto out;
    }
    if (o.matryoshka && !o.dims) {
        fprintf(stderr, "Error: --matryoshka vouches for --dimensions, which is not given\n");
        ret = 2;
        goto out;
    }
    if (o.dims && mf_embed_dims_check(model, pooling, (int32_t)o.dims, o.matryoshka, &err)) {
        fprintf(stderr, "Error: --%s\n", err.msg);
        goto out; /* exit 1: what this model cannot do */
    }
    for (int i = 0; i < n_texts; i++) {
        if (texts && rank) {
            const int r = tokenize_pair(model, texts[i], o.cls_sep ? o.cls_sep : "\t", i, &ids[i], &n_ids[i], &err);
            if (r) {
                ret = r;
                goto out;
            }
        } else if (texts && mf_tokenize(model, texts[i], strlen(texts[i]), true, true, &ids[i], &n_ids[i], &err)) {
            goto fail;
        }
        if (n_ids[i] == 0 || (texts && !*texts[i])) { /* an empty text embeds only BOS/EOS: not what was meant */
            fprintf(stderr, "Error: text %d is empty (no tokens to embed)\n", i);
            ret = 2;
            goto out;
        }
        longest = n_ids[i] > longest ? n_ids[i] : longest;
    }
    mf_context_params cp = mf_context_default_params();
    /* room for the longest text, and for a ubatch of short ones packed together */
    long sum = 0;
    for (int i = 0; i < n_texts; i++) sum += n_ids[i];
    const long ub = o.n_ubatch ? o.n_ubatch : 512, pack = sum < ub ? sum : ub;
    cp.n_ctx = o.n_ctx ? (int32_t)o.n_ctx : (int32_t)(longest > pack ? longest : pack);
    cp.n_ubatch = (int32_t)o.n_ubatch;
    cp.n_threads = (int32_t)o.n_threads;
    cp.type_k = type_k;
    cp.rope = cache.rope;
    cp.type_v = type_v;
    cp.embeddings = true;
    cp.classifier = rank;
    if (mf_context_new(model, &cp, &ctx, &err)) goto fail;
    const int32_t dim = mf_embed_size(ctx), n_out = o.dims ? (int32_t)o.dims : dim; /* Matryoshka: the first */
    if (!(vec = malloc(sizeof(float) * (size_t)dim * (size_t)n_texts))) goto nomem;
    long total = 0;
    /* short texts share forwards (a ubatch of tokens each); every vector is the one the text gets alone */
    const double t0 = mf_time_now();
    if (mf_embed_batch(ctx, 0, (const mf_token *const *)ids, n_ids, n_texts, pooling, vec, &err)) goto fail;
    const double dt = mf_time_now() - t0;
    for (int i = 0; i < n_texts; i++) {
        if (!rank) mf_embed_normalize(vec + (size_t)i * (size_t)dim, n_out, (int)o.norm);
        total += n_ids[i];
    }
    mf_context_stats st;
    mf_context_get_stats(ctx, &st);
    fprintf(stderr, "embed: %d texts, %ld tokens in %d forwards, %.3f s (%.1f tokens/s)\n", n_texts, total,
            st.graph_builds + st.graph_reuses, dt, dt > 0 ? (double)total / dt : 0.0);
    printf(json ? "{\"object\": \"list\", \"data\": [" : "[");
    for (int i = 0; i < n_texts; i++) {
        if (json) printf("%s{\"object\": \"embedding\", \"index\": %d, \"embedding\": ", i ? ", " : "", i);
        else if (i) printf(", ");
        print_vec(vec + (size_t)i * (size_t)dim, n_out);
        if (json) putchar('}');
    }
    if (json && rank) print_labels(model, dim);
    if (json) {
        printf("], \"model\": ");
        print_str(o.model_path);
        printf(", \"usage\": {\"prompt_tokens\": %ld, \"total_tokens\": %ld}}", total, total);
    }
    printf(json ? "\n" : "]\n");
    ret = mf_out_check(stdout, "stdout") ? 0 : 1;
    goto out;
nomem:
    snprintf(err.msg, sizeof err.msg, "out of memory");
fail:
    fprintf(stderr, "Error: %s\n", err.msg);
out:
    for (int i = 0; ids && i < n_texts; i++) free(ids[i]);
    free(ids);
    free(n_ids);
    free(texts);
    free(all);
    free(vec);
    mf_context_free(ctx);
    mf_model_free(model);
    return ret;
}
