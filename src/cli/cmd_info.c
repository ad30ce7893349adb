/* minfer info (placeholder until its module lands). */
#include "cli/cli.h"

#include <stdio.h>

int mf_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "Error: 'minfer info' is not implemented yet\n");
    return 1;
}
