/* minfer eval: one forward over the tokens, then one JSON line per position with the top-K raw logits
 * (the shape of the llama.cpp oracle's `eval`, so the two can be compared line by line). */
#include "cli/cli.h"

#include "minfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer eval -m MODEL (-p TEXT | --tokens JSON_IDS) [options]\n"
            "\n"
            "Teacher-forced forward: runs every token once and prints, per position, the top-K raw logits\n"
            "(highest first, ties by lower id):  {\"pos\": i, \"token\": id, \"top\": [[id, logit], ...]}\n"
            "\n"
            "  -m, --model FILE      GGUF model (qwen2, qwen3, qwen3moe, qwen2moe)\n"
            "  -p, --prompt TEXT     text to tokenize (special tokens parsed, BOS as the model asks)\n"
            "      --tokens JSON     token ids, e.g. '[9707, 11, 1879]'\n"
            "      --top K           logits per position (default 5)\n"
            "  -c, --ctx-size N      context size (default: the token count); --n-ctx N is the same\n"
            "  -t, --threads N       CPU threads, also for the repack at load (default: online CPUs, at most 16)\n"
            MF_ARG_CACHE_HELP
            MF_ARG_ROPE_HELP
            MF_ARG_GPU_HELP
            "  -h, --help            this help\n"
            "\n"
            "Every option is given at most once.  stdout is JSON lines only: a model whose logits come out "
            "NaN or\n"
            "infinite is refused (exit 1, the error names the position) before any line is printed, and a "
            "failed\n"
            "write to stdout stops with exit status 1.\n");
}

typedef struct {
    int32_t id;
    float v;
} top_ent;

/* the k highest logits, highest first, ties by lower id */
static int32_t top_k(const float *l, int32_t n, int32_t k, top_ent *out) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m == k && !(l[i] > out[m - 1].v)) continue;
        int32_t j = m < k ? m++ : k - 1;
        while (j > 0 && l[i] > out[j - 1].v) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = (top_ent){i, l[i]};
    }
    return m;
}

int mf_cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *tokens_json = NULL;
    long k = 5, n_ctx = 0, n_threads = 0;
    mf_arg_seen seen = {0};
    mf_arg_gpu gpu;
    mf_arg_gpu_init(&gpu);
    mf_arg_cache cache = MF_ARG_CACHE_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        }
        const int f = mf_arg_engine_flag(argc, argv, &i, &seen, &cache, &gpu, NULL);
        if (f < 0) return 2;
        if (f > 0) continue;
        bool m = !strcmp(a, "-m") || !strcmp(a, "--model"), p = !strcmp(a, "-p") || !strcmp(a, "--prompt"),
             t = !strcmp(a, "--tokens"), top = !strcmp(a, "--top"),
             c = !strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--n-ctx"),
             th = !strcmp(a, "-t") || !strcmp(a, "--threads");
        if (!(m || p || t || top || c || th)) {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer eval' (see minfer eval --help)\n", a);
            return 2;
        }
        const char *name = m     ? "-m/--model"
                           : p   ? "-p/--prompt"
                           : t   ? "--tokens"
                           : top ? "--top"
                           : c   ? "-c/--ctx-size/--n-ctx"
                                 : "-t/--threads";
        if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, name, v)) return 2;
        if (m) model_path = v;
        if (p) prompt = v;
        if (t) tokens_json = v;
        if (top && !mf_arg_int(a, v, 1, 1000, &k)) return 2;
        if (c && !mf_arg_int(a, v, 0, 1 << 24, &n_ctx)) return 2;
        if (th && !mf_arg_int(a, v, 1, 1024, &n_threads)) return 2;
    }
    uint32_t type_k, type_v;
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_cache_type(&cache, &type_k, &type_v) || !mf_arg_gpu_resolve(&gpu, &mp)) return 2;
    if (!model_path) {
        fprintf(stderr, "Error: no model given: minfer eval -m MODEL.gguf --tokens '[...]'\n");
        return 2;
    }
    if ((prompt != NULL) == (tokens_json != NULL)) {
        fprintf(stderr, "Error: give exactly one of -p TEXT or --tokens JSON_IDS\n");
        return 2;
    }
    mf_token *ids = NULL;
    int32_t n = 0;
    if (tokens_json && !mf_arg_token_ids("--tokens", tokens_json, &ids, &n)) return 2;
    int ret = 1;
    mf_error err = {0};
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_batch b = {0};
    top_ent *tops = malloc(sizeof(top_ent) * (size_t)k);
    if (!tops) goto fail;
    mp.n_threads = (int32_t)n_threads; /* the repack at load too */
    if (mf_model_load(model_path, &mp, &model, &err)) goto fail;
    if (!mf_arg_gpu_report(&gpu, model)) goto out; /* printed; ret is 1 */
    if (prompt && mf_tokenize(model, prompt, strlen(prompt), true, true, &ids, &n, &err)) goto fail;
    if (n == 0) {
        fprintf(stderr, "Error: no tokens to evaluate\n");
        ret = 2;
        goto out;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = n_ctx ? (int32_t)n_ctx : n;
    cp.n_threads = (int32_t)n_threads;
    cp.type_k = type_k;
    cp.rope = cache.rope;
    cp.type_v = type_v;
    if (cp.n_ctx < n) {
        fprintf(stderr, "Error: %d tokens do not fit a context of %d (raise -c/--ctx-size to at least %d)\n",
                n, cp.n_ctx, n);
        goto out;
    }
    if (mf_context_new(model, &cp, &ctx, &err)) goto fail;
    if (mf_batch_init(&b, n, &err)) goto fail;
    for (int32_t i = 0; i < n; i++) mf_batch_add(&b, ids[i], i, 0, true);
    if (mf_decode(ctx, &b, &err)) goto fail;
    mf_model_info info;
    mf_model_get_info(model, &info);
    for (int32_t i = 0; i < n; i++) {
        const float *l = mf_get_logits(ctx, i);
        int32_t m = top_k(l, info.n_vocab, (int32_t)k, tops);
        printf("{\"pos\": %d, \"token\": %d, \"top\": [", i, ids[i]);
        for (int32_t j = 0; j < m; j++) printf("%s[%d, %.9g]", j ? ", " : "", tops[j].id, tops[j].v);
        printf("]}\n");
        if (ferror(stdout)) break; /* mf_out_check below says why */
    }
    if (!mf_out_check(stdout, "stdout")) goto out;
    ret = 0;
    goto out;
fail:
    fprintf(stderr, "Error: %s\n", err.msg[0] ? err.msg : "out of memory");
    ret = 1;
out:
    mf_batch_free(&b);
    mf_context_free(ctx);
    mf_model_free(model);
    free(ids);
    free(tops);
    return ret;
}
