/* libFuzzer harness: the embedding and reranking request parsers (src/server/embed.c, src/server/rerank.c),
 * which tokenize what they accept with the model.
 *
 * The model is made once in LLVMFuzzerInitialize with the generator's library, as `mf-genmodel --arch qwen3
 * --type q4_0 --reranker` writes it (the real Qwen3 vocabulary, the rerank template), in the temp dir, loaded
 * and the file deleted.  The tokenizer folder is $MF_FUZZ_TOKENIZER_DIR, by default the repository's
 * tokenizers/qwen3 (compiled in by the Makefile).
 *
 * Input: byte 0 picks the route (% 3: 0 /v1/embeddings, 1 /embedding, 2 /v1/rerank) and, from bit 2 on, the
 * context the request must fit (16 .. 527 tokens); the rest is the HTTP body.
 * Properties (embed.h's and rerank.h's rules):
 *   - any body is parsed or refused, never crashes or leaks;
 *   - a refusal is status 400 (500 only for out of memory) with a non-empty message and a parameter name;
 *   - an accepted embedding request has 1 .. MF_SRV_EMBED_MAX_INPUTS inputs, each of 1 .. n_ctx tokens inside
 *     the vocabulary, n_tokens their sum, embd_normalize -1 .. 64 (always 2 on the OpenAI route);
 *   - an accepted rerank request has as many documents (each kept, valid UTF-8) as pairs, each pair 1 .. n_ctx
 *     tokens inside the vocabulary and starting with the template's <|im_start|>, n_tokens their sum, and
 *     0 <= top_n <= the documents. */
#include "fuzz.h"

#include "genmodel.h" /* tools/genmodel: the generator */
#include "server/embed.h"
#include "server/rerank.h"
#include "server/utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MF_FUZZ_TOKENIZER_DIR
#define MF_FUZZ_TOKENIZER_DIR "tokenizers/qwen3"
#endif

static mf_model *g_model;
static int32_t g_n_vocab, g_n_embd;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    const char *dir = getenv("MF_FUZZ_TOKENIZER_DIR"), *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/mf-fuzz-embed-%ld.gguf", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    gm_config c = {0};
    c.arch = GM_ARCH_QWEN3;
    c.p = *gm_preset_find("tiny");
    c.p.n_layer = 1;
    c.seed = 1;
    c.layer_scale = 1.0f;
    c.pooling = 4;
    c.reranker = true;
    c.quiet = true;
    c.tokenizer_dir = dir && *dir ? dir : MF_FUZZ_TOKENIZER_DIR;
    c.out_path = path;
    mf_error err = {0};
    int rc = gm_ftype_parse("q4_0", &c.ftype);
    if (!rc) rc = gm_generate(&c, &err);
    mf_model_params mp = mf_model_default_params();
    mp.no_repack = true;
    if (!rc) rc = mf_model_load(path, &mp, &g_model, &err);
    remove(path);
    if (rc) {
        fprintf(stderr, "fuzz_embed: the model (tokenizers in %s): %s\n", c.tokenizer_dir, err.msg);
        abort();
    }
    mf_model_info info;
    mf_model_get_info(g_model, &info);
    g_n_vocab = info.n_vocab, g_n_embd = info.n_embd;
    return 0;
}

static void check_refusal(const mf_srv_err *e) {
    FAIL_IF(e->status != 400 && e->status != 500);
    FAIL_IF(!e->msg[0] || !e->type);
}

static void check_inputs(const mf_srv_embed_req *r, int32_t n_ctx) {
    FAIL_IF(r->n < 1 || r->n > MF_SRV_EMBED_MAX_INPUTS);
    int64_t sum = 0;
    for (int32_t i = 0; i < r->n; i++) {
        FAIL_IF(r->n_ids[i] < 1 || r->n_ids[i] > n_ctx);
        for (int32_t k = 0; k < r->n_ids[i]; k++) FAIL_IF(r->ids[i][k] < 0 || r->ids[i][k] >= g_n_vocab);
        sum += r->n_ids[i];
    }
    FAIL_IF(sum != r->n_tokens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int route = data[0] % 3;
    const int32_t n_ctx = 16 + (data[0] >> 2) * 8;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    mf_srv_err e = {0};
    if (route < 2) {
        mf_srv_embed_req r;
        /* the model's own pooling is rank (no 'dimensions' but null); last with --matryoshka takes any 1..n_embd;
         * bit 7 without it: pooling none (per-token vectors, native route only) */
        const bool mrl = (data[0] & 2) != 0, none = !mrl && (data[0] & 0x80);
        const mf_srv_embed_limits lim = {n_ctx, mrl ? MF_POOLING_LAST : none ? MF_POOLING_NONE : MF_POOLING_MODEL, mrl};
        if (mf_srv_embed_parse(g_model, &lim, route == 0, body, len, &r, &e)) {
            check_refusal(&e);
            FAIL_IF(r.ids || r.n_ids);
            return 0;
        }
        check_inputs(&r, n_ctx);
        FAIL_IF(r.normalize < -1 || r.normalize > 64 || (route == 0 && r.normalize != 2));
        FAIL_IF(r.dims < 0 || r.dims > g_n_embd || (!mrl && r.dims));
        FAIL_IF(none && (route == 0 || r.normalize != -1));
        mf_srv_embed_req_free(&r);
        return 0;
    }
    mf_srv_rerank_req r;
    if (mf_srv_rerank_parse(g_model, n_ctx, body, len, &r, &e)) {
        check_refusal(&e);
        FAIL_IF(r.docs || r.in.ids);
        return 0;
    }
    check_inputs(&r.in, n_ctx);
    FAIL_IF(r.top_n < 0 || r.top_n > r.in.n);
    for (int32_t i = 0; i < r.in.n; i++) {
        FAIL_IF(!r.docs[i] || !mf_srv_utf8_valid(r.docs[i], strlen(r.docs[i])));
        FAIL_IF(r.in.ids[i][0] != 151644); /* the template's first token, <|im_start|> */
    }
    mf_srv_rerank_req_free(&r);
    return 0;
}
