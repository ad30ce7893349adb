/* The generation flags run and chat share (sampler, --stop), parsed one way with the same refusals. */
#include "cli/cli.h"
#include "core/core.h" /* mf_err */

#include "minfer.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* --logit-bias entries: the sampler copies them, but the params point here until it does (one parse a process) */
enum { MAX_BIAS = 256 };
static mf_logit_bias g_bias[MAX_BIAS];

/* llama.cpp's spelling TOKEN_ID(+|-)BIAS: "15043+1", "15043-0.5", "15043-inf" (a ban).  The token's range is
 * the sampler's to check: the vocabulary is not known yet. */
static int logit_bias_arg(const char *v, mf_sampler_params *sp) {
    char *end;
    long id = strtol(v, &end, 10);
    const bool digits = end != v && *v >= '0' && *v <= '9';
    double d = 0;
    if (digits && (*end == '+' || *end == '-') && end[1]) {
        char *e2;
        d = strtod(end + 1, &e2);
        if (*e2 || d < 0 || isnan(d) || (isinf(d) && *end == '+'))
            d = NAN;
        else if (*end == '-')
            d = -d;
    }
    if (!digits || id > INT32_MAX || (*end != '+' && *end != '-') || isnan(d)) {
        fprintf(stderr,
                "Error: --logit-bias takes TOKEN_ID+BIAS or TOKEN_ID-BIAS (15043+1, 15043-0.5, 15043-inf to "
                "ban), got '%s'\n",
                v);
        return -1;
    }
    if (sp->n_logit_bias >= MAX_BIAS) {
        fprintf(stderr, "Error: --logit-bias given more than %d times ('%s' is one too many)\n", MAX_BIAS, v);
        return -1;
    }
    g_bias[sp->n_logit_bias++] = (mf_logit_bias){(mf_token)id, (float)d};
    sp->logit_bias = g_bias;
    return 1;
}

mf_sampler_params mf_arg_sampler_defaults(void) {
    mf_sampler_params sp = mf_sampler_default_params();
    sp.seed = 24301; /* the CLI's documented default seed */
    return sp;
}

/* --dry-sequence-breaker values (llama.cpp's flag: each one replaces the defaults; "none" leaves none) */
enum { MAX_BREAKERS = 64 };
static const char *g_breakers[MAX_BREAKERS];
static int32_t g_n_breakers = -1; /* -1: not given, the defaults */

/* A sampler flag that takes one number: llama.cpp's spelling, the range, and the field it sets. */
typedef struct {
    const char *name;
    bool is_int;
    double lo, hi;
    size_t off;
} num_flag;

#define F(name, lo, hi, field) {name, false, lo, hi, offsetof(mf_sampler_params, field)}
#define I(name, lo, hi, field) {name, true, lo, hi, offsetof(mf_sampler_params, field)}
static const num_flag k_flags[] = {
    F("--temp", 0, FLT_MAX, temp),
    I("--top-k", 0, 1 << 30, top_k),
    F("--top-p", 0, FLT_MAX, top_p),
    F("--min-p", 0, FLT_MAX, min_p),
    F("--typical", 0, FLT_MAX, typ_p),
    F("--repeat-penalty", FLT_MIN, FLT_MAX, penalty_repeat),
    I("--repeat-last-n", -1, 1 << 20, penalty_last_n),
    F("--presence-penalty", -FLT_MAX, FLT_MAX, penalty_present),
    F("--frequency-penalty", -FLT_MAX, FLT_MAX, penalty_freq),
    F("--dry-multiplier", 0, FLT_MAX, dry_multiplier),
    F("--dry-base", 1, FLT_MAX, dry_base),
    I("--dry-allowed-length", 0, 1 << 20, dry_allowed_length),
    I("--dry-penalty-last-n", -1, 1 << 30, dry_last_n),
    F("--top-nsigma", -FLT_MAX, FLT_MAX, top_n_sigma),
    F("--xtc-probability", 0, 1, xtc_probability),
    F("--xtc-threshold", 0, 1, xtc_threshold),
    F("--dynatemp-range", 0, FLT_MAX, dynatemp_range),
    F("--dynatemp-exp", 0, FLT_MAX, dynatemp_exponent),
    I("--mirostat", 0, 2, mirostat),
    F("--mirostat-lr", 0, FLT_MAX, mirostat_eta),
    F("--mirostat-ent", 0, FLT_MAX, mirostat_tau),
    I("--min-keep", 0, 1 << 20, min_keep),
};
#undef F
#undef I

static int breaker_arg(const char *v) {
    if (!*v) {
        fprintf(stderr, "Error: --dry-sequence-breaker needs a non-empty string ('none' for no breakers)\n");
        return -1;
    }
    if (g_n_breakers < 0) g_n_breakers = 0;
    if (!strcmp(v, "none")) return 1; /* llama.cpp's: no breakers at all */
    if (g_n_breakers >= MAX_BREAKERS) {
        fprintf(stderr, "Error: --dry-sequence-breaker given more than %d times ('%s' is one too many)\n",
                MAX_BREAKERS, v);
        return -1;
    }
    if (strlen(v) > 40) {
        fprintf(stderr,
                "Error: --dry-sequence-breaker '%s' is %zu bytes; a breaker is at most 40 (llama.cpp would cut it "
                "there and match more than you gave)\n",
                v, strlen(v));
        return -1;
    }
    g_breakers[g_n_breakers++] = v;
    return 1;
}

int mf_arg_sampler(int argc, char **argv, int *i, mf_sampler_params *sp, mf_arg_seen *seen) {
    const char *a = argv[*i], *v;
    if (!strcmp(a, "-l") || !strcmp(a, "--logit-bias"))
        return (v = mf_arg_value(argc, argv, i)) ? logit_bias_arg(v, sp) : -1;
    if (!strcmp(a, "--dry-sequence-breaker")) return (v = mf_arg_value(argc, argv, i)) ? breaker_arg(v) : -1;
    if (!strcmp(a, "--seed"))
        return (v = mf_arg_value(argc, argv, i)) && mf_arg_once(seen, a, v) && mf_arg_u64(a, v, &sp->seed) ? 1 : -1;
    const num_flag *f = NULL;
    for (size_t k = 0; k < sizeof k_flags / sizeof k_flags[0] && !f; k++)
        if (!strcmp(a, k_flags[k].name)) f = &k_flags[k];
    if (!f) return 0;
    if (!(v = mf_arg_value(argc, argv, i)) || !mf_arg_once(seen, a, v)) return -1;
    char *field = (char *)sp + f->off;
    if (f->is_int) {
        long l;
        if (!mf_arg_int(a, v, (long)f->lo, (long)f->hi, &l)) return -1;
        *(int32_t *)field = (int32_t)l;
        return 1;
    }
    double d;
    if (!mf_arg_float(a, v, &d)) return -1;
    if (d < f->lo || d > f->hi) {
        if (f->hi < FLT_MAX) fprintf(stderr, "Error: %s must be in [%g, %g], got %s\n", a, f->lo, f->hi, v);
        else if (f->lo > 0 && f->lo < 1) fprintf(stderr, "Error: %s must be > 0, got %s\n", a, v);
        else fprintf(stderr, "Error: %s must be >= %g, got %s\n", a, f->lo, v);
        return -1;
    }
    *(float *)field = (float)d;
    return 1;
}

int32_t mf_arg_sampler_breakers(const char *const **strs) {
    *strs = g_breakers;
    return g_n_breakers;
}

int mf_arg_sampler_resolve(const mf_model *model, mf_sampler_params *sp, mf_dry_breakers **own, mf_error *err) {
    *own = NULL;
    if (!(sp->dry_multiplier > 0) || sp->dry_last_n == 0 || g_n_breakers == 0) return 0;
    const char *const *strs = g_breakers;
    const int32_t n = g_n_breakers < 0 ? mf_dry_default_breakers(&strs) : g_n_breakers;
    const int rc = mf_dry_breakers_new(model, strs, n, own, err);
    if (!rc) sp->dry_breakers = *own;
    return rc;
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

/* The sampler flags' help, in parts: serve takes the same flags as request defaults, with its own seed line
 * and without the logit bias and grammar ones. */
#define HELP_BASIC                                                                                           \
    "      --temp X             temperature (default 0.8; 0 = greedy)\n"                                  \
    "      --top-k N            top-k (default 40; 0 = off)\n"                                            \
    "      --top-p X            top-p (default 0.95; 1 = off)\n"                                          \
    "      --min-p X            min-p (default 0.05; 0 = off)\n"                                          \
    "      --typical X          typical-p (default 1 = off)\n"                                            \
    "      --repeat-penalty X   repetition penalty (default 1 = off)\n"                                   \
    "      --repeat-last-n N    penalty window in tokens (default 64; 0 = off, -1 = all)\n"               \
    "      --presence-penalty X presence penalty (default 0)\n"                                           \
    "      --frequency-penalty X frequency penalty (default 0)\n"
#define HELP_STAGES                                                                                          \
    "      --dry-multiplier X   DRY: a token that would extend a repeat of n >= the allowed length loses\n"  \
    "                           X * base^(n - length) (default 0 = off)\n"                               \
    "      --dry-base X         DRY's base (default 1.75; >= 1)\n"                                        \
    "      --dry-allowed-length N  repeats up to N tokens go unpenalized (default 2)\n"                   \
    "      --dry-penalty-last-n N  DRY's window in tokens (default -1 = all; 0 = off)\n"                  \
    "      --dry-sequence-breaker S  a repeat does not reach back across S; repeatable, replaces the\n"    \
    "                           defaults \"\\n\" \":\" \"\\\"\" \"*\"; 'none' for no breakers\n"                \
    "      --top-nsigma X       keep logits >= max - X standard deviations (default -1 = off)\n"         \
    "      --xtc-probability X  XTC: with this chance per token drop every candidate of p >= the threshold\n" \
    "                           but the least likely (default 0 = off)\n"                                \
    "      --xtc-threshold X    XTC's threshold (default 0.1; above 0.5 off)\n"                           \
    "      --dynatemp-range X   temperature in temp +- X by the candidates' entropy (default 0 = off)\n"  \
    "      --dynatemp-exp X     dynamic temperature's exponent (default 1)\n"                             \
    "      --mirostat N         Mirostat 1 or 2 instead of top-k/typical/top-p/min-p/XTC (default 0 = off;\n" \
    "                           penalties and DRY still apply)\n"                                         \
    "      --mirostat-lr X      Mirostat's learning rate eta (default 0.1)\n"                             \
    "      --mirostat-ent X     Mirostat's target surprise tau (default 5)\n"                             \
    "      --min-keep N         top-p, min-p, typical-p and XTC leave at least N candidates (default 0)\n"

const char *mf_arg_sampler_help(void) {
    return HELP_BASIC
        "      --seed N             sampling seed, unsigned 64-bit (default 24301; same seed, same output)\n"
        "  -l, --logit-bias ID+X    add X to token ID's logit before sampling (ID-X subtracts, ID-inf bans it);\n"
        "                           repeatable, entries for one token add up\n" HELP_STAGES
        "      --grammar GBNF       the output is a sentence of this grammar (llama.cpp's GBNF, start rule root;\n"
        "                           docs/GRAMMAR.md); --grammar-file FILE reads it from a file\n"
        "  -j,  --json-schema JSON  the output is JSON this JSON Schema allows (a keyword the compiler lacks is\n"
        "                           refused, never ignored); -jf/--json-schema-file FILE reads it from a file\n";
}

const char *mf_arg_sampler_serve_help(void) {
    return HELP_BASIC
        "      --seed N             the seed of requests that send none (default: a fresh one per request)\n"
        HELP_STAGES;
}

void mf_arg_draft_init(mf_arg_draft *d) {
    memset(d, 0, sizeof *d);
    d->p = mf_draft_default_params();
}

int mf_arg_engine_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_cache *cache, mf_arg_gpu *gpu,
                       mf_arg_draft *dr) {
    int f = mf_arg_cache_flag(argc, argv, i, seen, cache);
    if (!f) f = mf_arg_rope_flag(argc, argv, i, seen, &cache->rope);
    if (!f) f = mf_arg_gpu_flag(argc, argv, i, seen, gpu);
    if (!f && dr) f = mf_arg_draft_flag(argc, argv, i, seen, dr);
    return f;
}

int mf_arg_draft_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_draft *d) {
    const char *a = argv[*i], *v;
    bool path = !strcmp(a, "-md") || !strcmp(a, "--model-draft");
    if (!path && strcmp(a, "--draft-max") && strcmp(a, "--draft-min") && strcmp(a, "--draft-p-min")) return 0;
    if (!(v = mf_arg_value(argc, argv, i)) || !mf_arg_once(seen, path ? "-md/--model-draft" : a, v)) return -1;
    long l;
    double x;
    if (path) {
        if (!*v) {
            fprintf(stderr, "Error: %s needs a GGUF file, got '' (drop it to decode without a draft)\n", a);
            return -1;
        }
        d->path = v;
        return 1;
    }
    d->given_tuning = true;
    if (!strcmp(a, "--draft-p-min")) {
        if (!mf_arg_float(a, v, &x)) return -1;
        if (x < 0 || x > 1) {
            fprintf(stderr, "Error: --draft-p-min must be in 0..1, got %s (0 drafts regardless of confidence)\n", v);
            return -1;
        }
        d->p.p_min = (float)x;
        return 1;
    }
    bool max = !strcmp(a, "--draft-max");
    if (!mf_arg_int(a, v, max ? 1 : 0, MF_DRAFT_MAX, &l)) return -1;
    if (max) d->p.draft_max = (int32_t)l;
    else d->p.draft_min = (int32_t)l;
    return 1;
}

bool mf_arg_draft_check(const mf_arg_draft *d) {
    if (d->given_tuning && !d->path) {
        fprintf(stderr, "Error: --draft-max, --draft-min and --draft-p-min need a draft model: add -md/--model-draft "
                        "FILE (or drop them)\n");
        return false;
    }
    if (d->p.draft_min > d->p.draft_max) {
        fprintf(stderr, "Error: --draft-min %d is above --draft-max %d: no draft could ever be used (lower "
                        "--draft-min or raise --draft-max)\n", d->p.draft_min, d->p.draft_max);
        return false;
    }
    return true;
}

int mf_arg_draft_open(const mf_arg_draft *d, mf_context *target, int32_t n_seq, mf_model **model, mf_draft **out,
                      mf_error *err) {
    *model = NULL;
    *out = NULL;
    if (!d->path) return 0;
    mf_model_params mp = mf_model_default_params();
    int rc = mf_model_load(d->path, &mp, model, err);
    if (rc) return rc;
    mf_draft_params p = d->p;
    p.n_seq = n_seq;
    if ((rc = mf_draft_new(*model, target, &p, out, err))) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        mf_err(err, rc, "draft model '%s': %s", d->path, why);
        mf_model_free(*model);
        *model = NULL;
    }
    return rc;
}

/* ---------------- constrained output ---------------- */

int mf_arg_grammar_flag(int argc, char **argv, int *i, mf_arg_grammar *g) {
    const char *a = argv[*i];
    const bool gbnf = !strcmp(a, "--grammar"), gfile = !strcmp(a, "--grammar-file");
    const bool js = !strcmp(a, "-j") || !strcmp(a, "--json-schema");
    const bool jfile = !strcmp(a, "-jf") || !strcmp(a, "--json-schema-file");
    if (!gbnf && !gfile && !js && !jfile) return 0;
    const char *v = mf_arg_value(argc, argv, i);
    if (!v) return -1;
    if (g->flag) {
        fprintf(stderr, "Error: %s and %s both constrain the output; give one of --grammar, --grammar-file, "
                        "-j/--json-schema and -jf/--json-schema-file\n", g->flag, a);
        return -1;
    }
    g->flag = a, g->value = v, g->file = gfile || jfile, g->schema = js || jfile;
    return 1;
}

int mf_arg_grammar_open(const mf_arg_grammar *g, mf_grammar **out, mf_error *err) {
    *out = NULL;
    if (!g->flag) return 0;
    size_t len = strlen(g->value);
    char *text = g->file ? mf_read_file(g->value, &len) : NULL;
    if (g->file && !text) return mf_err(err, MF_E_IO, "%s: cannot read '%s'", g->flag, g->value);
    const char *t = text ? text : g->value;
    int rc = g->schema ? mf_grammar_from_json_schema(t, len, out, err) : mf_grammar_new(t, len, out, err);
    free(text);
    if (rc) {
        mf_error inner = *err;
        mf_err(err, rc, "%s: %s", g->flag, inner.msg);
    }
    return rc;
}
