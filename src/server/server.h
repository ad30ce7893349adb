/* server: `minfer serve`, an OpenAI- and llama-server-compatible HTTP server (docs/SERVER.md).
 * One engine thread owns the model's context and KV cache; libmicrohttpd's threads parse, validate,
 * tokenize and stream, and talk to the engine through a bounded queue of jobs. */
#ifndef MF_SERVER_H
#define MF_SERVER_H

#include "minfer.h"

#include <stdint.h>

typedef struct {
    const char *model_path;
    const char *host; /* "127.0.0.1" */
    int port;         /* 8080; 0 = any free port (printed at startup) */
    int n_parallel;   /* slots: requests decoded together (4) */
    int32_t n_ctx;    /* KV cells shared by every slot (0 = min(training context, 4096) x n_parallel) */
    int32_t n_batch;  /* tokens per forward, decode rows and prefill chunks together (512) */
    int n_threads;
    uint32_t type_k, type_v; /* KV element types (MF_KV_TYPE_*) */
    mf_rope_params rope;     /* --rope-scaling / --yarn-* (mf_context_default_params' when not given) */
    const char *api_key;        /* NULL: no key */
    int timeout_s;              /* idle connection timeout (600) */
    int max_queue;              /* requests waiting for a slot before 503 (64) */
    const char *slot_save_path; /* NULL: slot save/restore refused */
    int32_t n_cache_reuse;      /* --cache-reuse: runs of cached tokens this long move to new positions (0: off) */
    const char *alias;          /* model name in answers (default: the file name) */
    int drain_ms;               /* MINFER_DRAIN_MS: in-flight grace at shutdown (30000) */
    const char *draft_path;     /* -md: speculative decoding with this draft model (NULL: none) */
    mf_draft_params draft;      /* --draft-max/--draft-min/--draft-p-min (n_seq is the slot count) */
    int32_t n_gpu_layers;       /* --gpu-layers (mf_model_params.n_gpu_layers; the draft stays on the CPU) */
    const char *gpu_layers_origin;
    bool embeddings;    /* --embeddings: an embeddings context; /v1/embeddings served, generation refused (501) */
    mf_pooling pooling; /* --pooling (MF_POOLING_MODEL: the file's) */
    bool rerank;        /* --rerank: embeddings with rank pooling (named so in the ready line) */
    bool matryoshka;    /* --matryoshka: 'dimensions' below n_embd on any model (mf_embed_dims_check) */
    /* Request defaults, as llama-server takes them on its command line (--temp, --top-k, --dry-*, ...): a
     * request's fields override them.  logit_bias stays per request; seed_given: every request without a
     * seed draws from sampler.seed (else each gets a fresh one). */
    mf_sampler_params sampler;
    bool seed_given;
    const char *const *dry_breakers; /* DRY's breakers for requests that send none; n_dry_breakers -1: */
    int32_t n_dry_breakers;          /* llama-server's defaults "\n", ":", "\"", "*" */
} mf_server_opts;

mf_server_opts mf_server_default_opts(void);

/* Runs until SIGINT/SIGTERM (then drains and returns 0) or a startup failure (returns the error). */
int mf_server_run(const mf_server_opts *opts, mf_error *err);

#endif
