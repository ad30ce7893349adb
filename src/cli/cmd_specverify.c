/* minfer specverify: plain and speculative greedy decoding of the same prompt must give the same tokens,
 * bit for bit (the verify forward's rows equal sequential decode's).  Prints both speeds and the draft's
 * acceptance rate; exit 1 naming the first differing position. */
#include "cli/cli.h"

#include "minfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer specverify -m TARGET -md DRAFT (-p PROMPT | -f FILE) [options]\n"
            "\n"
            "Decodes the prompt greedily twice, without and with the draft model, and compares the generated\n"
            "tokens.  Identical: prints the text, both decode speeds (tokens/s, drafting included) and the\n"
            "acceptance rate, exit 0.  Different: names the first differing position and both tokens, exit 1.\n"
            "\n"
            "  -m, --model FILE         the target model (GGUF)\n"
            "  -p, --prompt TEXT        prompt text\n"
            "  -f, --file FILE          read the prompt from FILE\n"
            "  -n, --n-predict N        tokens to generate (default 128; fewer when EOS or the context end comes)\n"
            "  -t, --threads N          CPU threads, also for the repack at load (default: online CPUs, at most 16)\n"
            "  -c, --ctx-size N         context size (default: min(training context, 4096))\n"
            "      --ignore-eos         generate past end-of-generation tokens\n"
            MF_ARG_CACHE_HELP
            MF_ARG_ROPE_HELP
            MF_ARG_GPU_HELP
            MF_ARG_DRAFT_HELP
            "  -h, --help               this help\n");
}

typedef struct {
    mf_token *ids;
    int32_t n;
    mf_gen_stats st;
    int32_t status;
} run_result;

/* One greedy decode of the prompt in a cleared context; d NULL: plain. */
static int decode(mf_context *ctx, mf_draft *d, const mf_token *prompt, int32_t n_prompt, int32_t n_predict,
                  bool ignore_eos, run_result *r, mf_error *err) {
    mf_kv_clear_all(ctx);
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler.temp = 0;
    gp.n_predict = n_predict;
    gp.ignore_eos = ignore_eos;
    gp.no_text = true;
    mf_gen *g = NULL;
    int rc = mf_gen_new(ctx, &gp, &g, err);
    if (!rc) rc = mf_gen_feed(g, prompt, n_prompt, err);
    mf_gen_out o = {0};
    while (!rc) {
        rc = mf_gen_step_spec(g, d, &o, err);
        if (o.status != MF_GEN_RUNNING) break;
    }
    if (!rc) {
        int32_t n;
        const mf_token *t = mf_gen_tokens(g, &n);
        r->n = n - n_prompt;
        r->ids = malloc(sizeof *r->ids * (size_t)(r->n > 0 ? r->n : 1));
        if (!r->ids) rc = MF_E_NOMEM;
        else if (r->n > 0) memcpy(r->ids, t + n_prompt, sizeof *t * (size_t)r->n);
        mf_gen_get_stats(g, &r->st);
        r->status = o.status;
    }
    mf_gen_free(g);
    return rc;
}

static void piece(const mf_model *m, mf_token t, char *buf, size_t cap) {
    char *s = NULL;
    size_t len = 0;
    buf[0] = 0;
    if (mf_detokenize(m, &t, 1, &s, &len, NULL)) return;
    size_t j = 0;
    for (size_t i = 0; i < len && j + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '\'') buf[j++] = (char)c;
        else j += (size_t)snprintf(buf + j, cap - j, "\\x%02x", c);
    }
    buf[j] = 0;
    free(s);
}

static double tps(const run_result *r) {
    int32_t n_dec = r->st.turn_generated > 0 ? r->st.turn_generated - 1 : 0;
    return r->st.t_decode_s > 0 ? n_dec / r->st.t_decode_s : 0.0;
}

int mf_cmd_specverify(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *file = NULL;
    long n_predict = 128, n_threads = 0, n_ctx = 0;
    bool ignore_eos = false;
    mf_arg_seen seen = {0};
    mf_arg_gpu gpu;
    mf_arg_gpu_init(&gpu);
    mf_arg_cache cache = MF_ARG_CACHE_INIT;
    mf_arg_draft dr;
    mf_arg_draft_init(&dr);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        const int f = mf_arg_engine_flag(argc, argv, &i, &seen, &cache, &gpu, &dr);
        if (f < 0) return 2;
        if (f > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            MF_ARG_VAL("-m/--model");
            model_path = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            MF_ARG_VAL("-p/--prompt");
            prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            MF_ARG_VAL("-f/--file");
            file = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            MF_ARG_VAL("-n/--n-predict");
            if (!mf_arg_int(a, v, 1, 1 << 20, &n_predict)) return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            MF_ARG_VAL("-t/--threads");
            if (!mf_arg_int(a, v, 1, 1024, &n_threads)) return 2;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            MF_ARG_VAL("-c/--ctx-size");
            if (!mf_arg_int(a, v, 0, 1 << 24, &n_ctx)) return 2;
        } else if (!strcmp(a, "--ignore-eos")) {
            MF_ARG_ONCE("--ignore-eos");
            ignore_eos = true;
        } else {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer specverify' (see minfer specverify --help)\n", a);
            return 2;
        }
    }
    uint32_t type_k, type_v;
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_cache_type(&cache, &type_k, &type_v) || !mf_arg_draft_check(&dr) || !mf_arg_gpu_resolve(&gpu, &mp))
        return 2;
    if (!model_path || !dr.path) {
        fprintf(stderr, "Error: specverify needs both models: minfer specverify -m TARGET.gguf -md DRAFT.gguf -p "
                        "PROMPT\n");
        return 2;
    }
    if ((prompt != NULL) + (file != NULL) != 1) {
        fprintf(stderr, "Error: %s; give exactly one prompt source: -p TEXT or -f FILE\n",
                prompt ? "-p and -f both given" : "no prompt given");
        return 2;
    }
    char *file_text = NULL;
    size_t file_len = 0;
    if (file && !(file_text = mf_read_file(file, &file_len))) return 1;

    int ret = 1;
    mf_error err = {0};
    mf_model *model = NULL, *draft_model = NULL;
    mf_context *ctx = NULL;
    mf_draft *draft = NULL;
    mf_token *ids = NULL;
    int32_t n_ids = 0;
    run_result plain = {0}, spec = {0};
    mp.n_threads = (int32_t)n_threads; /* the repack at load too */
    if (mf_model_load(model_path, &mp, &model, &err)) goto fail;
    if (!mf_arg_gpu_report(&gpu, model)) goto out; /* printed; ret is 1 */
    const char *text = prompt ? prompt : file_text;
    if (mf_tokenize(model, text, prompt ? strlen(prompt) : file_len, true, true, &ids, &n_ids, &err)) goto fail;
    if (n_ids == 0) {
        fprintf(stderr, "Error: the prompt is empty (0 tokens)\n");
        ret = 2;
        goto out;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (int32_t)n_ctx;
    cp.n_threads = (int32_t)n_threads;
    cp.type_k = type_k;
    cp.rope = cache.rope;
    cp.type_v = type_v;
    if (mf_context_new(model, &cp, &ctx, &err)) goto fail;
    if (n_ids >= mf_context_n_ctx(ctx)) {
        fprintf(stderr, "Error: the prompt has %d tokens and the context holds %d (raise -c/--ctx-size to at least "
                        "%d)\n", n_ids, mf_context_n_ctx(ctx), n_ids + 1);
        goto out;
    }
    if (mf_arg_draft_open(&dr, ctx, 1, &draft_model, &draft, &err)) goto fail;
    mf_context_stats c0, c1, c2;
    mf_context_get_stats(ctx, &c0);
    if (decode(ctx, NULL, ids, n_ids, (int32_t)n_predict, ignore_eos, &plain, &err)) goto fail;
    mf_context_get_stats(ctx, &c1);
    if (decode(ctx, draft, ids, n_ids, (int32_t)n_predict, ignore_eos, &spec, &err)) goto fail;
    mf_context_get_stats(ctx, &c2);
    /* a verify forward's row count varies with the draft's length: each new one builds a graph */
    fprintf(stderr, "specverify: target graphs built: plain %d, speculative %d (reused %d)\n",
            c1.graph_builds - c0.graph_builds, c2.graph_builds - c1.graph_builds, c2.graph_reuses - c1.graph_reuses);
    for (int32_t i = 0; i < plain.n || i < spec.n; i++) {
        if (i < plain.n && i < spec.n && plain.ids[i] == spec.ids[i]) continue;
        char a[128] = "(none: it ended)", b[128] = "(none: it ended)";
        if (i < plain.n) piece(model, plain.ids[i], a, sizeof a);
        if (i < spec.n) piece(model, spec.ids[i], b, sizeof b);
        fprintf(stderr,
                "specverify: FAILED: the outputs differ at generated token %d (position %d): plain %d '%s', "
                "speculative %d '%s' (plain stopped after %d tokens: %s, speculative after %d: %s)\n",
                i, n_ids + i, i < plain.n ? plain.ids[i] : -1, a, i < spec.n ? spec.ids[i] : -1, b, plain.n,
                mf_gen_status_name(plain.status), spec.n, mf_gen_status_name(spec.status));
        goto out;
    }
    char *out_text = NULL;
    size_t out_len = 0;
    if (mf_detokenize(model, plain.ids, plain.n, &out_text, &out_len, &err)) goto fail;
    fwrite(out_text, 1, out_len, stdout);
    free(out_text);
    double tp = tps(&plain), ts = tps(&spec);
    printf("\nspecverify: identical: %d generated tokens (stop: %s)\n", plain.n, mf_gen_status_name(plain.status));
    printf("plain:       %.2f tok/s decode\n", tp);
    printf("speculative: %.2f tok/s decode (%.2fx), drafted %lld, accepted %lld, acceptance %.3f, draft-max %d\n", ts,
           tp > 0 ? ts / tp : 0.0, (long long)spec.st.n_drafted, (long long)spec.st.n_accepted,
           spec.st.n_drafted ? (double)spec.st.n_accepted / (double)spec.st.n_drafted : 0.0, dr.p.draft_max);
    ret = mf_out_check(stdout, "stdout") ? 0 : 1;
    goto out;
fail:
    fprintf(stderr, "Error: %s\n", err.msg[0] ? err.msg : "out of memory");
    ret = 1;
out:
    free(plain.ids);
    free(spec.ids);
    mf_draft_free(draft);
    mf_model_free(draft_model);
    mf_context_free(ctx);
    mf_model_free(model);
    free(ids);
    free(file_text);
    return ret;
}
