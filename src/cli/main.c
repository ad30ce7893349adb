/* minfer: dispatch to one subcommand. */
#include "cli/cli.h"

#include <stdio.h>
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
               "                   comma-separated; also MINFER_BACKENDS=<csv> (the flag wins)\n"
               "  -h, --help       this help; `minfer <command> --help` documents each command\n"
               "\nenvironment: MINFER_LOG=error|warn|info|debug, MINFER_ISA=scalar|avx2|avx512\n");
}

int main(int argc, char **argv) {
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
