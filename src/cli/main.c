/* minfer: take the backend fence out of argv, install it, then dispatch to one subcommand. */
#include "backend/registry.h"
#include "cli/cli.h"

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
    {"eval", mf_cmd_eval, "teacher-forced forward: top-k logits at every position (JSON lines)"},
    {"tokenize", mf_cmd_tokenize, "print the token ids of a text"},
    {"info", mf_cmd_info, "print a GGUF file's metadata and tensor table"},
    {"viz", mf_cmd_viz, "write the compute graph as DOT or JSON"},
    {"bench", mf_cmd_bench, "measure prefill and decode speed (llama-bench style)"},
    {"backends", mf_cmd_backends, "list the known backends and whether they are usable here"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: minfer [--backend NAME[,NAME...]] <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_cmds / sizeof k_cmds[0]; i++)
        fprintf(f, "  %-10s %s\n", k_cmds[i].name, k_cmds[i].help);
    fprintf(f, "\nglobal options:\n"
               "  --backend NAME   restrict execution to these backends (cpu, metal, cuda); repeatable,\n"
               "                   comma-separated, case-insensitive; a fence: it removes backends and\n"
               "                   never adds one, cpu is always allowed; also MINFER_BACKENDS=<csv>\n"
               "                   (the flag wins); `minfer backends` lists what this build can use\n"
               "  -h, --help       this help; `minfer <command> --help` documents each command\n"
               "\nenvironment: MINFER_LOG=error|warn|info|debug,\n"
               "             MINFER_ISA=scalar|avx2|avx512 (x86-64 builds), scalar|neon (aarch64 builds),\n"
               "             MINFER_BACKENDS=<csv>, MINFER_DISABLE_CUDA (set: do not use the device),\n"
               "             MINFER_SPIN=N (pause iterations before a waiting thread yields, default 256),\n"
               "             MINFER_SPIN_US=N (then yield-spin this long before sleeping, default 3000)\n");
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

int main(int argc, char **argv) {
    int frc = setup_fence(&argc, argv);
    if (frc) return frc;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof k_cmds / sizeof k_cmds[0]; i++)
        if (!strcmp(argv[1], k_cmds[i].name)) return k_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "Error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
