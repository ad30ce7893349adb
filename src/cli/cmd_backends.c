/* minfer backends (placeholder until its module lands). */
#include "cli/cli.h"

#include <stdio.h>

int mf_cmd_backends(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "Error: 'minfer backends' is not implemented yet\n");
    return 1;
}
