/* minfer backends: every known backend with its id, priority, whether this build has it, whether this
 * machine can use it (and why not), and whether the fence (--backend / MINFER_BACKENDS) lets it run. */
#include "backend/registry.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int mf_cmd_backends(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: minfer [--backend NAME[,NAME...]] backends\n\n"
                   "Lists every known backend: id (a file-format contract), name, priority (placement\n"
                   "preference: higher wins), whether this build has it, whether this machine can use it\n"
                   "(and why not), and whether the fence (--backend / MINFER_BACKENDS) allows it.\n");
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        }
        fprintf(stderr, "Error: minfer backends takes no arguments, got '%s'\n", argv[i]);
        return 2;
    }
    const mf_backend_filter *fence = mf_backend_fence();
    printf("%-3s %-6s %-9s %-9s %-10s %s\n", "id", "name", "priority", "compiled", "allowed", "available");
    for (int id = 0; id < MF_N_KNOWN_BACKENDS; id++) {
        mf_backend b;
        mf_backend_from_index(id, &b);
        const mf_backend_entry *e = mf_backend_entry_get(b);
        const char *why = mf_backend_unavailable(b);
        char avail[256];
        if (!why)
            snprintf(avail, sizeof avail, "yes");
        else
            snprintf(avail, sizeof avail, "no: %s", why);
        const char *allowed = fence->allowed[id] ? "yes" : (e && !why) ? "fenced" : "no";
        printf("%-3d %-6s %-9u %-9s %-10s %s\n", id, mf_backend_name(b), (unsigned)mf_backend_priority(b),
               e ? "yes" : "no", allowed, avail);
    }
    mf_backend order[MF_BACKEND_SLOTS];
    int n = mf_backend_by_priority(fence->allowed, order);
    printf("assignment order:");
    for (int i = 0; i < n; i++) printf("%s%s", i ? " > " : " ", mf_backend_name(order[i]));
    printf("\n");
    return mf_out_check(stdout, "stdout") ? 0 : 1;
}
