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
            "  -m, --model FILE    GGUF model (qwen2, qwen3)\n"
            "      --tokens N      tokens in the forward (default 1)\n"
            "      --format F      dot (default) or json\n"
            "  -o, --output FILE   write there instead of stdout\n"
            "  -c, --ctx-size N    context size the attention window is shaped for (default: max(N, 256))\n"
            "  -h, --help          this help\n");
}

int mf_cmd_viz(int argc, char **argv) {
    const char *model_path = NULL, *format = "dot", *out_path = NULL;
    long n_tok = 1, n_ctx = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        bool m = !strcmp(a, "-m") || !strcmp(a, "--model"), t = !strcmp(a, "--tokens"),
             fm = !strcmp(a, "--format"), o = !strcmp(a, "-o") || !strcmp(a, "--output"),
             c = !strcmp(a, "-c") || !strcmp(a, "--ctx-size");
        if (!(m || t || fm || o || c)) {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer viz' (see minfer viz --help)\n", a);
            return 2;
        }
        if (!(v = mf_arg_value(argc, argv, &i))) return 2;
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
    if (mf_context_write_graph(ctx, (int32_t)n_tok, format, f, &err)) goto fail;
    ret = 0;
    goto out;
fail:
    fprintf(stderr, "Error: %s\n", err.msg);
out:
    if (f && f != stdout && fclose(f) && ret == 0) {
        fprintf(stderr, "Error: writing '%s' failed: %s\n", out_path, strerror(errno));
        ret = 1;
    }
    mf_context_free(ctx);
    mf_model_free(model);
    return ret;
}
