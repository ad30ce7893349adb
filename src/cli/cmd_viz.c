/* minfer viz: build the model's compute graph for N tokens and write it as DOT or JSON. */
#include "cli/cli.h"

#include "minfer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer viz -m MODEL [--tokens N] [--format dot|json] [-o FILE]\n"
            "\n"
            "Builds (does not run) the graph one forward of N tokens uses and writes it.\n"
            "\n"
            "  -m, --model FILE    GGUF model (qwen2, qwen3, qwen3moe, qwen2moe)\n"
            "      --tokens N      tokens in the forward (default 1)\n"
            "      --format F      dot (default) or json\n"
            "  -o, --output FILE   write there instead of stdout\n"
            "  -c, --ctx-size N    KV cells the cache tensors are shaped for (default: max(N, 256));\n"
            "                      --n-ctx N is the same\n"
            "  -h, --help          this help\n"
            "\n"
            "Every option is given at most once; a failed write (stdout or FILE) exits with status 1.\n");
}

int mf_cmd_viz(int argc, char **argv) {
    const char *model_path = NULL, *format = "dot", *out_path = NULL;
    long n_tok = 1, n_ctx = 0;
    mf_arg_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        }
        bool m = !strcmp(a, "-m") || !strcmp(a, "--model"), t = !strcmp(a, "--tokens"),
             fm = !strcmp(a, "--format"), o = !strcmp(a, "-o") || !strcmp(a, "--output"),
             c = !strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--n-ctx");
        if (!(m || t || fm || o || c)) {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer viz' (see minfer viz --help)\n", a);
            return 2;
        }
        const char *name = m    ? "-m/--model"
                           : t  ? "--tokens"
                           : fm ? "--format"
                           : o  ? "-o/--output"
                                : "-c/--ctx-size/--n-ctx";
        if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, name, v)) return 2;
        if (m) model_path = v;
        if (fm) format = v;
        if (o) out_path = v;
        if (t && !mf_arg_int(a, v, 1, 1 << 20, &n_tok)) return 2;
        if (c && !mf_arg_int(a, v, 1, 1 << 24, &n_ctx)) return 2;
    }
    if (!model_path) {
        fprintf(stderr, "Error: no model given: minfer viz -m MODEL.gguf --format dot\n");
        return 2;
    }
    if (strcmp(format, "dot") && strcmp(format, "json")) {
        fprintf(stderr, "Error: --format must be dot or json, got '%s'\n", format);
        return 2;
    }
    if (n_ctx == 0) n_ctx = n_tok > 256 ? n_tok : 256;
    if (n_tok > n_ctx) {
        fprintf(stderr, "Error: --tokens %ld does not fit a context of %ld (raise -c)\n", n_tok, n_ctx);
        return 2;
    }
    int ret = 1;
    mf_error err = {0};
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    FILE *f = stdout;
    if (mf_model_load(model_path, NULL, &model, &err)) goto fail;
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (int32_t)n_ctx;
    cp.n_threads = 1;
    if (mf_context_new(model, &cp, &ctx, &err)) goto fail;
    if (out_path && !(f = fopen(out_path, "w"))) {
        fprintf(stderr, "Error: cannot write '%s': %s\n", out_path, strerror(errno));
        goto out;
    }
    errno = 0;
    int wrc = mf_context_write_graph(ctx, (int32_t)n_tok, format, f, &err);
    int werr = errno;
    if (wrc && !ferror(f)) goto fail; /* not a write error: the engine's message says what */
    /* a write that failed (a full disk, a closed pipe): say where and why, whatever the final flush says */
    char where[300];
    snprintf(where, sizeof where, f == stdout ? "stdout" : "'%s'", out_path);
    bool lost = ferror(f) != 0;
    errno = 0;
    if (!lost && fflush(f)) lost = true, werr = errno;
    if (f != stdout) {
        int c = fclose(f);
        f = NULL;
        if (c && !lost) lost = true, werr = errno;
    }
    if (lost) {
        fprintf(stderr, "Error: writing to %s failed: %s; stopping\n", where,
                werr ? strerror(werr) : "I/O error");
        goto out;
    }
    ret = 0;
    goto out;
fail:
    fprintf(stderr, "Error: %s\n", err.msg);
out:
    if (f && f != stdout) fclose(f);
    mf_context_free(ctx);
    mf_model_free(model);
    return ret;
}
