/* The generation flags run and chat share (sampler, --stop), parsed one way with the same refusals. */
#include "cli/cli.h"

#include "minfer.h"

#include <stdlib.h>
#include <string.h>

mf_sampler_params mf_arg_sampler_defaults(void) {
    mf_sampler_params sp = mf_sampler_default_params();
    sp.seed = 24301; /* the CLI's documented default seed */
    return sp;
}

int mf_arg_sampler(int argc, char **argv, int *i, mf_sampler_params *sp, mf_arg_seen *seen) {
    const char *a = argv[*i], *v;
    double d;
    long l;
    static const char *const k_float[] = {"--temp",           "--top-p",           "--min-p",
                                          "--typical",        "--repeat-penalty",  "--presence-penalty",
                                          "--frequency-penalty"};
    bool is_float = false;
    for (size_t k = 0; k < sizeof k_float / sizeof k_float[0]; k++) is_float |= !strcmp(a, k_float[k]);
    if (strcmp(a, "--seed") && strcmp(a, "--top-k") && strcmp(a, "--repeat-last-n") && !is_float) return 0;
    if (!(v = mf_arg_value(argc, argv, i)) || !mf_arg_once(seen, a, v)) return -1;
    if (!strcmp(a, "--seed")) return mf_arg_u64(a, v, &sp->seed) ? 1 : -1;
    if (!strcmp(a, "--top-k")) {
        if (!mf_arg_int(a, v, 0, 1 << 30, &l)) return -1;
        sp->top_k = (int32_t)l;
        return 1;
    }
    if (!strcmp(a, "--repeat-last-n")) {
        if (!mf_arg_int(a, v, -1, 1 << 20, &l)) return -1;
        sp->penalty_last_n = (int32_t)l;
        return 1;
    }
    if (!mf_arg_float(a, v, &d)) return -1;
    if (d < 0 && strcmp(a, "--presence-penalty") && strcmp(a, "--frequency-penalty")) {
        fprintf(stderr, "Error: %s must be >= 0, got %s\n", a, v);
        return -1;
    }
    if (!strcmp(a, "--temp"))
        sp->temp = (float)d;
    else if (!strcmp(a, "--top-p"))
        sp->top_p = (float)d;
    else if (!strcmp(a, "--min-p"))
        sp->min_p = (float)d;
    else if (!strcmp(a, "--typical"))
        sp->typ_p = (float)d;
    else if (!strcmp(a, "--repeat-penalty")) {
        if (d <= 0) {
            fprintf(stderr, "Error: --repeat-penalty must be > 0, got %s\n", v);
            return -1;
        }
        sp->penalty_repeat = (float)d;
    } else if (!strcmp(a, "--presence-penalty"))
        sp->penalty_present = (float)d;
    else
        sp->penalty_freq = (float)d;
    return 1;
}

bool mf_arg_stop(int argc, char **argv, int *i, const char **stops, int32_t *n_stop) {
    const char *v = mf_arg_value(argc, argv, i);
    if (!v) return false;
    if (!*v) {
        fprintf(stderr, "Error: --stop needs a non-empty string, got '' (an empty one would match at once)\n");
        return false;
    }
    if (*n_stop >= MF_ARG_MAX_STOP) {
        fprintf(stderr, "Error: --stop given more than %d times ('%s' is one too many)\n", MF_ARG_MAX_STOP, v);
        return false;
    }
    stops[(*n_stop)++] = v;
    return true;
}

const char *mf_arg_sampler_help(void) {
    return "      --temp X             temperature (default 0.8; 0 = greedy)\n"
           "      --top-k N            top-k (default 40; 0 = off)\n"
           "      --top-p X            top-p (default 0.95; 1 = off)\n"
           "      --min-p X            min-p (default 0.05; 0 = off)\n"
           "      --typical X          typical-p (default 1 = off)\n"
           "      --repeat-penalty X   repetition penalty (default 1 = off)\n"
           "      --repeat-last-n N    penalty window in tokens (default 64; 0 = off, -1 = all)\n"
           "      --presence-penalty X presence penalty (default 0)\n"
           "      --frequency-penalty X frequency penalty (default 0)\n"
           "      --seed N             sampling seed, unsigned 64-bit (default 24301; same seed, same output)\n";
}
