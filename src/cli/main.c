/* minfer: take the backend fence out of argv, install it, then dispatch to one subcommand. */
#include "backend/registry.h"
#include "cli/cli.h"
#include "core/env.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} mf_subcommand;

static const mf_subcommand k_cmds[] = {
    {"run", mf_cmd_run, "generate text from a prompt"},
    {"chat", mf_cmd_chat, "interactive multi-turn chat (stdin lines in, streamed replies out)"},
    {"embed", mf_cmd_embed, "embeddings of texts: pooled, normalised hidden states (JSON)"},
    {"eval", mf_cmd_eval, "teacher-forced forward: top-k logits at every position (JSON lines)"},
    {"tokenize", mf_cmd_tokenize, "print the token ids of a text"},
    {"info", mf_cmd_info, "print a GGUF file's metadata and tensor table"},
    {"viz", mf_cmd_viz, "write the compute graph as DOT or JSON"},
    {"specverify", mf_cmd_specverify, "check speculative greedy decoding against plain (same tokens), with speeds"},
    {"bench", mf_cmd_bench, "measure prefill and decode speed (llama-bench style)"},
    {"serve", mf_cmd_serve, "OpenAI- and llama-server-compatible HTTP server (continuous batching)"},
    {"backends", mf_cmd_backends, "list the known backends and whether they are usable here"},
};

/* Every variable from the one table the parsers use (src/core/env.c), so the list cannot go stale. */
static void env_usage(FILE *f) {
    fprintf(f, "\nenvironment (checked before any command runs; a bad value is refused, exit 2):\n");
    size_t n;
    const mf_env_var *v = mf_env_vars(&n);
    for (size_t i = 0; i < n; i++) {
        char allowed[96], dflt[64];
        switch (v[i].kind) {
        case MF_ENV_BOOL: snprintf(allowed, sizeof allowed, "boolean"); break;
        case MF_ENV_UINT:
            snprintf(allowed, sizeof allowed, "%llu..%llu %s", (unsigned long long)v[i].min, (unsigned long long)v[i].max,
                     v[i].allowed);
            break;
        case MF_ENV_WORD: snprintf(allowed, sizeof allowed, "%s", v[i].words); break;
        default: snprintf(allowed, sizeof allowed, "%s", v[i].allowed); break;
        }
        if (v[i].dflt_text) snprintf(dflt, sizeof dflt, "%s", v[i].dflt_text);
        else if (v[i].kind == MF_ENV_WORD) {
            const char *w = v[i].words;
            for (uint64_t k = 0; k < v[i].dflt; k++) w = strchr(w, '|') + 1;
            snprintf(dflt, sizeof dflt, "%.*s", (int)strcspn(w, "|"), w);
        } else snprintf(dflt, sizeof dflt, "%llu", (unsigned long long)v[i].dflt);
        fprintf(f, "  %-20s %s (default: %s)\n  %-20s   %s\n", v[i].name, allowed, dflt, "", v[i].help);
    }
    fprintf(f, "  booleans are 1|0, true|false, on|off, yes|no; words match case-insensitively; surrounding\n"
               "  blanks are ignored; an empty value is unset (the presence-checked ones: set)\n");
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: minfer [--backend NAME[,NAME...]] <command> [options]\n"
        "       minfer [--backend NAME[,NAME...]] MODEL.gguf [PROMPT] [run options]\n"
        "              (a first argument ending in .gguf: the same as minfer run -m MODEL.gguf -p PROMPT;\n"
        "              a PROMPT that starts with '-' has to be given as -p PROMPT)\n"
        "\ncommands:\n");
    for (size_t i = 0; i < sizeof k_cmds / sizeof k_cmds[0]; i++)
        fprintf(f, "  %-10s %s\n", k_cmds[i].name, k_cmds[i].help);
    fprintf(f, "\nglobal options:\n"
               "  --backend NAME   restrict execution to these backends (cpu, metal, cuda); repeatable,\n"
               "                   comma-separated, case-insensitive; a fence: it removes backends and\n"
               "                   never adds one, cpu is always allowed; also MINFER_BACKENDS=<csv>\n"
               "                   (the flag wins); `minfer backends` lists what this build can use\n"
               "  -h, --help       this help; `minfer <command> --help` documents each command\n"
               "\nEvery option of a command is given at most once (a second -p is refused, not taken); --backend\n"
               "and --stop (run, chat) are the repeatable flags.  Numbers are refused when out of range or not\n"
               "finite, a failed write to stdout ends a command with exit status 1.  `run`, `chat`, `eval` and\n"
               "`viz` take --n-ctx N for -c N.\n");
    env_usage(f);
}

/* Removes every `--backend NAME` / `--backend=NAME` before a `--` terminator from argv (compacting it, so
 * no subcommand ever sees the flag) and collects the values.  Returns the new argc, or -1 after printing
 * a usage error. */
static int take_backend_flags(int argc, char **argv, const char **values, int *n_values) {
    int w = 1;
    bool rest = false;
    *n_values = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!rest && !strcmp(a, "--")) rest = true;
        if (!rest && !strcmp(a, "--backend")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "Error: --backend needs a value (cpu, metal, cuda; comma-separated)\n");
                return -1;
            }
            values[(*n_values)++] = argv[++i];
            continue;
        }
        if (!rest && !strncmp(a, "--backend=", 10)) {
            values[(*n_values)++] = a + 10;
            continue;
        }
        argv[w++] = argv[i];
    }
    argv[w] = NULL;
    return w;
}

/* Stage 1 (names) and stage 2 (availability of the named ones), then install the process-wide fence -
 * all before any subcommand runs, so no model is ever loaded past a refusal. */
static int setup_fence(int *argc, char **argv) {
    const char **values = calloc((size_t)*argc + 1, sizeof *values);
    if (!values) {
        fprintf(stderr, "Error: out of memory parsing the command line\n");
        return 1;
    }
    int n_values = 0;
    int n = take_backend_flags(*argc, argv, values, &n_values);
    if (n < 0) {
        free(values);
        return 2;
    }
    *argc = n;
    mf_backend_filter f;
    mf_error err = {0};
    int rc = mf_backend_filter_parse(values, n_values, getenv("MINFER_BACKENDS"), &f, &err);
    free(values);
    if (!rc) rc = mf_backend_filter_resolve(&f, &err);
    if (!rc) rc = mf_backend_fence_install(&f, &err);
    if (rc) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return rc == MF_E_INVAL ? 2 : 1;
    }
    return 0;
}

/* Every MINFER_* value (MINFER_BACKENDS by the fence above) before any command does work; help still
 * prints with a bad value, since it is where the allowed values are listed. */
static int check_env(void) {
    mf_error err = {0};
    if (mf_env_check(&err) || mf_quant_isa_check(&err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return 2;
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && !strcmp(s + n - k, suffix);
}

/* The reference design's short form: `minfer MODEL.gguf [PROMPT] [options]` is
 * `minfer run -m MODEL.gguf [-p PROMPT] [options]` (a PROMPT is the second argument unless it starts
 * with '-', which makes it an option).  A path that does not open is refused by run, naming it. */
static int run_short_form(int argc, char **argv) {
    char **av = calloc((size_t)argc + 4, sizeof *av);
    if (!av) {
        fprintf(stderr, "Error: out of memory parsing the command line\n");
        return 1;
    }
    int n = 0, i = 2;
    av[n++] = "run";
    av[n++] = "-m";
    av[n++] = argv[1];
    if (i < argc && argv[i][0] != '-') {
        av[n++] = "-p";
        av[n++] = argv[i++];
    }
    while (i < argc) av[n++] = argv[i++];
    int rc = mf_cmd_run(n, av);
    free(av);
    return rc;
}

int main(int argc, char **argv) {
    int frc = setup_fence(&argc, argv);
    if (frc) return frc;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return mf_out_check(stdout, "stdout") ? 0 : 1;
    }
    int erc = check_env();
    if (erc) return erc;
    if (ends_with(argv[1], ".gguf")) return run_short_form(argc, argv);
    for (size_t i = 0; i < sizeof k_cmds / sizeof k_cmds[0]; i++)
        if (!strcmp(argv[1], k_cmds[i].name)) return k_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "Error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
