/* minfer bench (placeholder until its module lands). */
#include "cli/cli.h"

#include <stdio.h>

int mf_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "Error: 'minfer bench' is not implemented yet\n");
    return 1;
}
