/* minfer serve: flags (llama-server's spellings) -> server/server.h. */
#include "cli/cli.h"
#include "core/env.h"
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer serve -m MODEL [options]\n"
            "\n"
            "An OpenAI- and llama-server-compatible HTTP server with continuous batching (docs/SERVER.md).\n"
            "Routes: POST /v1/chat/completions, /v1/completions, /completion, /tokenize, /detokenize,\n"
            "/apply-template, /slots/{id}?action=save|restore|erase; GET /health, /metrics, /v1/models, /props,\n"
            "/slots.  /health answers 503 until the model is loaded.  With --embeddings the server computes\n"
            "embeddings instead: POST /v1/embeddings (OpenAI) and /embedding, /embeddings (llama-server's shape;\n"
            "docs/EMBEDDINGS.md), and the generation routes answer 501.  With --rerank (a reranker such as\n"
            "Qwen3-Reranker) it scores documents against a query: POST /v1/rerank, /rerank, /v1/reranking,\n"
            "/reranking (llama-server's Jina/Cohere shape; TEI's with \"texts\").  POST /infill fills in the middle\n"
            "(llama-server's fields; a model with FIM tokens).  /v1/responses, /v1/messages and /lora-adapters\n"
            "are not served: 501 with what they are.\n"
            "Chat requests take OpenAI's tools (tool_choice auto, none, required or a named function): Qwen's\n"
            "<tool_call> blocks come back as message.tool_calls, streamed and not.  Structured output:\n"
            "response_format json_schema / json_object, json_schema, grammar (GBNF): the answer is a sentence of\n"
            "the grammar; an unsupported schema keyword is refused with 400 (docs/GRAMMAR.md).\n"
            "\n"
            "  -m, --model FILE         GGUF model (qwen2, qwen3, qwen3moe, qwen2moe architectures)\n"
            "      --host ADDR          address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)\n"
            "      --port N             port (default 8080; 0 = any free port, printed at startup)\n"
            "  -np, --parallel N        slots: requests decoded together (default 4)\n"
            "  -c, --ctx-size N         KV cells shared by all slots (default min(training context, 4096) per\n"
            "                           slot); any request may use whatever is free\n"
            "  -b, --batch-size N       most tokens per forward: decode rows plus prefill chunks (default 512;\n"
            "                           at least -np)\n"
            MF_ARG_CACHE_HELP
            MF_ARG_ROPE_HELP
            MF_ARG_GPU_HELP
            MF_ARG_DRAFT_HELP
            "                           (serve: one draft sequence per slot; answers add timings.draft_n and\n"
            "                           timings.draft_n_accepted, /metrics minfer_draft_tokens_total and\n"
            "                           minfer_draft_accepted_tokens_total)\n"
            "  -t, --threads N          CPU threads, also for the repack at load (default: online CPUs, at most 16)\n"
            "      --api-key KEY        require 'Authorization: Bearer KEY' (or X-Api-Key) on every route but\n"
            "                           /health and /v1/models\n"
            "      --api-key-file FILE  the same, the key read from FILE's first line\n"
            "      --timeout S          close a connection idle for S seconds (default 600)\n"
            "      --max-queue N        requests that may wait for a slot; more are answered 503 with\n"
            "                           Retry-After (default 64)\n"
            "      --cache-reuse N      past a prompt's cached prefix, move runs of at least N tokens that a slot\n"
            "                           holds further along to where the prompt has them (their K rows re-roped)\n"
            "                           instead of prefilling them again, as llama-server (for editor plugins:\n"
            "                           llama.vim, llama.vscode; 256 is their advice).  The moved rows were\n"
            "                           computed after other text, so replies may differ from a fresh prefill.\n"
            "                           Default 0: off; a request's n_cache_reuse overrides it\n"
            "      --slot-save-path DIR folder for POST /slots/{id}?action=save|restore files\n"
            "      --alias NAME         model name in answers and /v1/models (default: the file name)\n"
            "      --embeddings         serve embeddings, not generation (also --embedding, llama-server's\n"
            "                           spellings); the default context is one slot's share (-np does not\n"
            "                           multiply it: queued requests are embedded together, 64 inputs a run)\n"
            "      --pooling P          with --embeddings: model (default: the file's pooling_type, last when it\n"
            "                           names none), mean, cls, last, rank (a reranker's: as --rerank) or none\n"
            "                           (every token's raw vector, on /embedding only, as llama-server)\n"
            "      --rerank             serve a reranker's scores (also --reranking; --embeddings --pooling rank):\n"
            "                           the model needs a classifier head (cls.output), as Qwen3-Reranker's GGUF\n"
            "                           files have; --embeddings on such a file ranks too (its pooling is rank)\n"
            "      --matryoshka         with --embeddings: the model was trained for Matryoshka truncation, so\n"
            "                           'dimensions' below its embedding size is honoured (the Qwen3-Embedding\n"
            "                           family is known to be and needs no flag; others are refused without it)\n"
            "\n"
            "Sampling defaults for requests that do not set them (llama-server's flags; a request's fields win):\n"
            "%s"
            "  -h, --help               this help\n"
            "\n"
            "SIGINT/SIGTERM: new requests get 503 'server shutting down', in-flight ones may finish within\n"
            "MINFER_DRAIN_MS (default 30000), then the process exits 0.  Every option is given at most once.\n",
            mf_arg_sampler_serve_help());
}

/* The key from a file: its first line, without the line end; an empty key is refused. */
static char *read_key_file(const char *path) {
    size_t len = 0;
    char *s = mf_read_file(path, &len);
    if (!s) return NULL;
    s[strcspn(s, "\r\n")] = 0;
    if (!*s) {
        fprintf(stderr, "Error: --api-key-file '%s' holds no key on its first line\n", path);
        free(s);
        return NULL;
    }
    return s;
}

/* The sampler flags as request defaults: the engine's ranges (a request may not make them valid), no
 * logit bias (llama-server replaces it per request, so a server-wide one would apply to no request). */
static bool sampler_defaults_ok(mf_server_opts *o) {
    if (o->sampler.n_logit_bias) {
        fprintf(stderr, "Error: serve takes no -l/--logit-bias: a request's 'logit_bias' replaces the default in "
                        "llama-server, so send it with each request\n");
        return false;
    }
    mf_error err = {0};
    if (mf_sampler_params_check(&o->sampler, 1, &err)) {
        fprintf(stderr, "Error: the sampler flags: %s\n", err.msg);
        return false;
    }
    o->n_dry_breakers = mf_arg_sampler_breakers(&o->dry_breakers);
    return true;
}

int mf_cmd_serve(int argc, char **argv) {
    mf_server_opts o = mf_server_default_opts();
    const char *key_file = NULL, *pooling = NULL;
    bool rerank = false;
    mf_arg_seen seen = {0};
    mf_arg_cache cache = MF_ARG_CACHE_INIT;
    mf_arg_draft dr;
    mf_arg_draft_init(&dr);
    mf_arg_gpu gpu;
    mf_arg_gpu_init(&gpu);
    long l;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        const int cf = mf_arg_engine_flag(argc, argv, &i, &seen, &cache, &gpu, &dr);
        if (cf < 0) return 2;
        if (cf > 0) continue;
        const bool seed = !strcmp(a, "--seed");
        const int sf = mf_arg_sampler(argc, argv, &i, &o.sampler, &seen); /* request defaults */
        if (sf < 0) return 2;
        if (sf > 0) {
            o.seed_given |= seed;
            continue;
        }
#define IS(x, y) (!strcmp(a, x) || !strcmp(a, y))
#define INT(name, lo, hi, dst)                                                                               \
    do {                                                                                                     \
        MF_ARG_VAL(name);                                                                                    \
        if (!mf_arg_int(a, v, lo, hi, &l)) return 2;                                                         \
        dst = (int)l;                                                                                        \
    } while (0)
        if (IS("-h", "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        } else if (IS("-m", "--model")) {
            MF_ARG_VAL("-m/--model");
            o.model_path = v;
        } else if (IS("--host", "--host")) {
            MF_ARG_VAL("--host");
            o.host = v;
        } else if (IS("--port", "--port")) {
            INT("--port", 0, 65535, o.port);
        } else if (IS("-np", "--parallel")) {
            INT("-np/--parallel", 1, 256, o.n_parallel);
        } else if (IS("-c", "--ctx-size")) {
            INT("-c/--ctx-size", 0, 1 << 24, o.n_ctx);
        } else if (IS("-b", "--batch-size")) {
            INT("-b/--batch-size", 1, 1 << 16, o.n_batch);
        } else if (IS("-t", "--threads")) {
            INT("-t/--threads", 1, 1024, o.n_threads);
        } else if (IS("--timeout", "--timeout")) {
            INT("--timeout", 1, 86400, o.timeout_s);
        } else if (IS("--max-queue", "--max-queue")) {
            INT("--max-queue", 0, 1 << 20, o.max_queue);
        } else if (IS("--api-key", "--api-key")) {
            MF_ARG_VAL("--api-key");
            if (!*v) {
                fprintf(stderr, "Error: --api-key is empty; give a key, or leave the flag out for no key\n");
                return 2;
            }
            o.api_key = v;
        } else if (IS("--api-key-file", "--api-key-file")) {
            MF_ARG_VAL("--api-key-file");
            key_file = v;
        } else if (IS("--cache-reuse", "--cache-reuse")) {
            INT("--cache-reuse", 0, INT32_MAX, o.n_cache_reuse);
        } else if (IS("--slot-save-path", "--slot-save-path")) {
            MF_ARG_VAL("--slot-save-path");
            o.slot_save_path = v;
        } else if (IS("--embeddings", "--embedding")) {
            MF_ARG_ONCE("--embeddings/--embedding");
            o.embeddings = true;
        } else if (IS("--rerank", "--reranking")) {
            MF_ARG_ONCE("--rerank/--reranking");
            rerank = true;
        } else if (IS("--matryoshka", "--matryoshka")) {
            MF_ARG_ONCE("--matryoshka");
            o.matryoshka = true;
        } else if (IS("--pooling", "--pooling")) {
            MF_ARG_VAL("--pooling");
            pooling = v;
        } else if (IS("--alias", "--alias")) {
            MF_ARG_VAL("--alias");
            o.alias = v;
        } else {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer serve' (see minfer serve --help)\n", a);
            return 2;
        }
#undef IS
#undef INT
    }
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_cache_type(&cache, &o.type_k, &o.type_v) || !mf_arg_draft_check(&dr) || !mf_arg_gpu_resolve(&gpu, &mp))
        return 2;
    if (!sampler_defaults_ok(&o)) return 2;
    o.n_gpu_layers = mp.n_gpu_layers;
    o.rope = cache.rope;
    o.gpu_layers_origin = mp.gpu_layers_origin;
    o.draft_path = dr.path;
    o.draft = dr.p;
    if (!o.model_path) {
        fprintf(stderr, "Error: no model given: minfer serve -m MODEL.gguf\n");
        return 2;
    }
    if (pooling) {
        const bool known = mf_pooling_parse(pooling, &o.pooling);
        if (!known) {
            fprintf(stderr, "Error: --pooling '%s' is not one of model, none, mean, cls, last, rank\n", pooling);
            return 2;
        }
    }
    if (rerank && pooling && o.pooling != MF_POOLING_RANK) {
        fprintf(stderr, "Error: --rerank scores with rank pooling, and --pooling %s asks for another; drop one\n",
                pooling);
        return 2;
    }
    if (pooling && !o.embeddings && !rerank) {
        fprintf(stderr, "Error: --pooling applies to --embeddings; add --embeddings or drop --pooling\n");
        return 2;
    }
    if (o.matryoshka && (!o.embeddings || rerank)) {
        fprintf(stderr, "Error: --matryoshka lets /v1/embeddings shorten vectors ('dimensions'); it needs "
                        "--embeddings%s\n", rerank ? ", and --rerank scores rather than embeds" : "");
        return 2;
    }
    if (rerank) o.embeddings = o.rerank = true, o.pooling = MF_POOLING_RANK; /* llama-server's --rerank */
    if (o.embeddings && o.draft_path) {
        fprintf(stderr, "Error: %s generates no tokens, so a draft model has nothing to do; drop -md\n",
                rerank ? "--rerank" : "--embeddings");
        return 2;
    }
    if (o.api_key && key_file) {
        fprintf(stderr, "Error: --api-key and --api-key-file both given; give one\n");
        return 2;
    }
    uint64_t drain = 0;
    mf_error err = {0};
    if (mf_env_uint("MINFER_DRAIN_MS", &drain, &err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return 2;
    }
    o.drain_ms = (int)drain;
    char *key = NULL;
    if (key_file && !(o.api_key = key = read_key_file(key_file))) return 2;
    int rc = mf_server_run(&o, &err);
    free(key);
    if (rc) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return rc == MF_E_INVAL ? 2 : 1;
    }
    return 0;
}
