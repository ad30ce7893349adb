/* The minfer command line: one file per subcommand, all through the public API and module headers.
 * A subcommand returns the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef MF_CLI_H
#define MF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "minfer.h"

int mf_cmd_info(int argc, char **argv);
int mf_cmd_tokenize(int argc, char **argv);
int mf_cmd_run(int argc, char **argv);
int mf_cmd_eval(int argc, char **argv);
int mf_cmd_embed(int argc, char **argv);
int mf_cmd_viz(int argc, char **argv);
int mf_cmd_bench(int argc, char **argv);
int mf_cmd_backends(int argc, char **argv);
int mf_cmd_serve(int argc, char **argv);
int mf_cmd_chat(int argc, char **argv);
int mf_cmd_specverify(int argc, char **argv);

/* Shared argument helpers: print "Error: ..." naming the flag, the value and the allowed range, and
 * return false on bad input. */
/* A decimal integer in [min, max]; "99999999999999999999" is refused as out of range, not as "not an
 * integer". */
bool mf_arg_int(const char *flag, const char *val, long min, long max, long *out);
/* An unsigned 64-bit decimal integer (seeds): digits only, refused past UINT64_MAX. */
bool mf_arg_u64(const char *flag, const char *val, uint64_t *out);
/* A finite number that fits a float (nan, inf and 1e39 are refused). */
bool mf_arg_float(const char *flag, const char *val, double *out);
/* argv[*i] is `flag`; fetch its value (argv[*i+1]) or print "Error: FLAG needs a value". */
const char *mf_arg_value(int argc, char **argv, int *i);

/* The one rule for repeated options, in every subcommand: an option is given at most once (a second
 * -p, or -p then --prompt, is refused naming both values); the only repeatable flags are run/chat's
 * --stop and the global --backend, whose values accumulate.  name is the option's spellings ("-p/--prompt"), value NULL for a
 * switch. */
enum { MF_ARG_MAX_SEEN = 48 };
typedef struct {
    const char *name[MF_ARG_MAX_SEEN], *value[MF_ARG_MAX_SEEN];
    int n;
} mf_arg_seen;
bool mf_arg_once(mf_arg_seen *s, const char *name, const char *value);
/* In a subcommand's flag loop (locals argc, argv, i, seen and the value pointer v): MF_ARG_VAL fetches
 * the option's value into v, MF_ARG_ONCE marks a switch; either returns 2 from the subcommand after the
 * refusal is printed. */
#define MF_ARG_VAL(name)                                                                                     \
    do {                                                                                                     \
        if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, name, v)) return 2;                   \
    } while (0)
#define MF_ARG_ONCE(name)                                                                                    \
    do {                                                                                                     \
        if (!mf_arg_once(&seen, name, NULL)) return 2;                                                       \
    } while (0)

/* Generation flags shared by run and chat (args_gen.c).  mf_arg_sampler: argv[*i] is a sampler flag
 * (--temp --top-k --top-p --min-p --typical --repeat-penalty --repeat-last-n --presence-penalty
 * --frequency-penalty --seed): parse its value into sp and return 1; not one: 0; a bad value: -1 (printed).
 * mf_arg_stop: one --stop value appended (repeatable, at most MF_ARG_MAX_STOP). */
enum { MF_ARG_MAX_STOP = 16 };
mf_sampler_params mf_arg_sampler_defaults(void);
int mf_arg_sampler(int argc, char **argv, int *i, mf_sampler_params *sp, mf_arg_seen *seen);
/* After the model loads: DRY's sequence breakers (--dry-sequence-breaker, else llama.cpp's defaults) resolved
 * against its vocabulary into sp->dry_breakers when DRY is on; *own is the caller's to free once the sampler
 * (which copies them) exists. */
int mf_arg_sampler_resolve(const mf_model *model, mf_sampler_params *sp, mf_dry_breakers **own, mf_error *err);
/* The --dry-sequence-breaker strings given (*strs); -1 when none was (llama.cpp's defaults), 0 for 'none'. */
int32_t mf_arg_sampler_breakers(const char *const **strs);
bool mf_arg_stop(int argc, char **argv, int *i, const char **stops, int32_t *n_stop);
const char *mf_arg_sampler_help(void); /* the usage lines of the sampler flags (and the grammar ones) */
const char *mf_arg_sampler_serve_help(void); /* the same as serve takes them: request defaults */
/* Constrained output (run, chat; llama.cpp's spellings): --grammar GBNF, --grammar-file FILE,
 * -j/--json-schema JSON, -jf/--json-schema-file FILE, at most one of them.  flag: 1 taken, 0 not one of
 * them, -1 refused (printed).  open: the compiled grammar (NULL when none was given). */
typedef struct {
    const char *flag, *value; /* the flag given and its value; flag NULL: none */
    bool file, schema;
} mf_arg_grammar;
int mf_arg_grammar_flag(int argc, char **argv, int *i, mf_arg_grammar *g);
int mf_arg_grammar_open(const mf_arg_grammar *g, mf_grammar **out, mf_error *err);
/* KV cache element types, the same flags on every command that makes a context (run, eval, bench; chat
 * and serve reuse them): -ctk/--cache-type-k T, -ctv/--cache-type-v T (llama.cpp's) and --cache-type T
 * (both), T one of f32, f16, q8_0.  Precedence: -ctk/-ctv, then --cache-type, then MINFER_CACHE_TYPE, then
 * f16 (llama.cpp's default).  Ids are the public MF_KV_TYPE_* ones. */
typedef struct {
    int k, v, both;      /* a type id from the flags, -1 when not given */
    mf_rope_params rope; /* the rope flags (mf_arg_rope_flag; mf_context_default_params' values when not given) */
} mf_arg_cache;
#define MF_ARG_CACHE_INIT {-1, -1, -1, {0, 0, 0, 0, -1.0f, -1.0f, -1.0f}}
/* Rope flags (llama.cpp's), on every command that makes a context for a model (run, chat, eval, embed, serve,
 * specverify): --rope-scaling none|linear|yarn, --rope-scale N (the context scaling factor: freq_scale 1/N),
 * --rope-freq-scale F (freq_scale itself; not with --rope-scale), --rope-freq-base F, --yarn-orig-ctx N,
 * --yarn-ext-factor F (negative: the default), --yarn-beta-fast F, --yarn-beta-slow F.  1 taken, 0 not one of
 * them, -1 refused (printed).  mf_arg_engine_flag tries them too, into cache->rope. */
int mf_arg_rope_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_rope_params *r);
#define MF_ARG_ROPE_HELP                                                                                         \
    "      --rope-scaling T     rope scaling: none, linear or yarn (default: the file's rope.scaling.type).\n"      \
    "                           Qwen's long context (128K from 32K): --rope-scaling yarn --rope-scale 4\n"     \
    "                           --yarn-orig-ctx 32768, with -c up to 131072\n"                                   \
    "      --rope-scale N       context scaling factor N (freq_scale 1/N; default: the file's, else 1)\n"          \
    "      --rope-freq-scale F  freq_scale F itself (instead of --rope-scale)\n"                                  \
    "      --rope-freq-base F   rope base frequency (default: the file's rope.freq_base)\n"                        \
    "      --yarn-orig-ctx N    YaRN: the model's original context (default: the file's, else its context)\n"     \
    "      --yarn-ext-factor F  YaRN: extrapolation mix (default 1 under YaRN; 0 = interpolation alone)\n"       \
    "      --yarn-beta-fast F   YaRN: low correction dim (default 32)\n"                                         \
    "      --yarn-beta-slow F   YaRN: high correction dim (default 1); MINFER_LOG=info prints the resolved rope\n"

/* When argv[*i] is one of the flags: takes its value (each flag at most once, through seen), checks it and
 * returns 1; returns 0 when argv[*i] is not one of them; -1 after printing the refusal ("Error: -ctk q4 is
 * not a KV cache type (f32, f16, q8_0); refusing rather than silently running with f16"). */
int mf_arg_cache_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_cache *c);
/* The resolved K and V types (flags over MINFER_CACHE_TYPE over f16); false after printing the refusal of
 * a bad MINFER_CACHE_TYPE. */
bool mf_arg_cache_type(const mf_arg_cache *c, uint32_t *type_k, uint32_t *type_v);
const char *mf_arg_cache_name(uint32_t type); /* "f32", "f16", "q8_0" */
#define MF_ARG_CACHE_HELP                                                                                        \
    "  -ctk, --cache-type-k T   KV cache element type of K: f16 (default, llama.cpp's), f32 or q8_0\n"          \
    "  -ctv, --cache-type-v T   the same for V (K and V may differ)\n"                                           \
    "      --cache-type T       both at once (-ctk/-ctv win); MINFER_CACHE_TYPE sets it from the environment\n"  \
    "                           (any flag wins).  Memory per cell row: f32 4 bytes per element, f16 2, q8_0\n"  \
    "                           34 per 32 (34/128 of f32); q8_0 needs head sizes that are multiples of 32.\n"   \
    "                           A q8_0 K/V is rotated as llama.cpp does (Walsh-Hadamard, head sizes that are\n"\
    "                           multiples of 64); MINFER_ATTN_ROT_DISABLE=1 turns that off\n"

/* Speculative decoding flags (run, chat, serve, specverify; llama.cpp's): -md/--model-draft FILE,
 * --draft-max N (1..MF_DRAFT_MAX, default 16), --draft-min N (0..draft-max, default 0), --draft-p-min P
 * (0..1, default 0.75).  mf_arg_draft_flag: 1 taken, 0 not one of them, -1 refused (printed). */
typedef struct {
    const char *path; /* NULL: no draft */
    mf_draft_params p;
    bool given_tuning; /* a --draft-* flag was given (refused without -md) */
} mf_arg_draft;
void mf_arg_draft_init(mf_arg_draft *d);
int mf_arg_draft_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_draft *d);
/* After parsing: the cross-flag rules (--draft-min <= --draft-max, tuning flags need -md); prints. */
bool mf_arg_draft_check(const mf_arg_draft *d);
/* Loads the draft model and makes its mf_draft on target's pool (nothing when d->path is NULL). */
int mf_arg_draft_open(const mf_arg_draft *d, mf_context *target, int32_t n_seq, mf_model **model, mf_draft **out,
                      mf_error *err);
#define MF_ARG_DRAFT_HELP                                                                                        \
    "  -md, --model-draft FILE  speculative decoding: a small model with the same vocabulary drafts tokens\n"    \
    "                           that the model verifies in one forward (greedy output is bitwise the output\n"  \
    "                           without it; sampling keeps the model's distribution and the seeded output)\n"   \
    "      --draft-max N        tokens drafted per round at most (default 16, 1..256)\n"                        \
    "      --draft-min N        drop a draft shorter than N (default 0)\n"                                      \
    "      --draft-p-min P      stop drafting before a token the draft gives probability < P (default 0.75,\n"  \
    "                           0..1; the draft's softmax at temperature 1)\n"

/* Offload flags (args_gpu.c), on every command that loads a model for generation (run, chat, eval, bench,
 * serve, specverify): -ngl/--gpu-layers/--n-gpu-layers N|all|auto (llama.cpp's spellings).  Precedence:
 * the flag, then MINFER_GPU_LAYERS, then auto when cuda is named by --backend / MINFER_BACKENDS, else 0.
 * mf_arg_gpu_flag: 1 taken, 0 not one of them, -1 refused (printed).  mf_arg_gpu_resolve sets
 * mp->n_gpu_layers (refusing cuda named with 0 blocks); mf_arg_gpu_report prints the report line after
 * the load and refuses a plan that put nothing on a device the user named. */
typedef struct {
    int32_t n;       /* the public request (MF_GPU_LAYERS_*) */
    bool given;      /* by the flag or MINFER_GPU_LAYERS */
    char origin[80]; /* "--gpu-layers 20", "MINFER_GPU_LAYERS=auto", ... */
} mf_arg_gpu;
void mf_arg_gpu_init(mf_arg_gpu *g);
int mf_arg_gpu_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_gpu *g);
bool mf_arg_gpu_resolve(mf_arg_gpu *g, mf_model_params *mp);
bool mf_arg_gpu_report(const mf_arg_gpu *g, const mf_model *model);
#define MF_ARG_GPU_HELP                                                                                          \
    "  -ngl, --gpu-layers N     blocks on the GPU (CUDA builds): N = blocks 0..N-1 (every block also moves the\n" \
    "                           embeddings and LM head), all, or auto (as many as fit: MINFER_GPU_MEM=<MiB>, or\n" \
    "                           3/4 of the free device memory, a quarter of it kept for KV/activations);\n"   \
    "                           also --n-gpu-layers and MINFER_GPU_LAYERS (the flag wins).  Default 0 (CPU),\n" \
    "                           auto when --backend names cuda; refused without a CUDA device\n"

/* The flag families every generating subcommand shares (KV cache types, offload, and where given the draft
 * model; their spellings are disjoint): 1 when argv[*i] was one of them (taken), 0 when not, -1 refused
 * (printed).  dr may be NULL (eval has no draft). */
int mf_arg_engine_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_cache *cache, mf_arg_gpu *gpu,
                       mf_arg_draft *dr);

/* Flushes f and checks its error flag; on a failed write prints "Error: writing to WHAT failed: ..."
 * and returns false, so a command stops at the first write that did not happen (a full disk, a reader
 * that went away with SIGPIPE ignored). */
bool mf_out_check(FILE *f, const char *what);

/* --tokens: a JSON array of token ids, each a plain integer in [0, INT32_MAX]; *out malloc'd (free() it).
 * Prints the error.  Depends on nothing else in the CLI (a fuzzer links it alone). */
bool mf_arg_token_ids(const char *flag, const char *s, int32_t **out, int32_t *n);
/* Reads a whole file (binary-exact). Returns malloc'd buffer (NUL-terminated) or NULL with an error printed.
 */
char *mf_read_file(const char *path, size_t *len);

#endif
