/* The model's vocabulary: its size (one row of token_embd and of output per token), the tokenizer
 * built from tokenizer.ggml.* (or the reason it cannot be), and the one end-of-generation list. */
#include "model/model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The string-array key tokenizer.ggml.tokens, or -1 when the file has none of that type (then the
 * tokenizer reports what is wrong with it). */
static int64_t tokens_key(const mf_gguf *g) {
    int64_t k = mf_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (k < 0 || mf_gguf_kv_type(g, k) != MF_GGUF_ARRAY || mf_gguf_kv_arr_type(g, k) != MF_GGUF_STRING) return -1;
    return k;
}

int mf_model_vocab_size(const mf_gguf *g, int32_t *n_vocab, mf_error *err) {
    const mf_gguf_tensor *e = mf_gguf_find_tensor(g, "token_embd.weight");
    if (!e) return mf_err(err, MF_E_FORMAT, "model lacks tensor 'token_embd.weight'");
    const mf_gguf_tensor *o = mf_gguf_find_tensor(g, "output.weight");
    const int64_t k = tokens_key(g);
    const uint64_t n_tok = k >= 0 ? mf_gguf_kv_arr_len(g, k) : 0;
    /* llama.cpp's n_vocab is the tokenizer's token count; a file without one has token_embd's rows */
    const int64_t n = k >= 0 ? (int64_t)MF_MIN(n_tok, (uint64_t)INT64_MAX) : e->ne[1];
    if (k >= 0 && e->ne[1] != n)
        return mf_err(err, MF_E_FORMAT,
                      "tensor 'token_embd.weight' has %lld rows, but the vocabulary has %lld tokens "
                      "(tokenizer.ggml.tokens); it needs one row per token (the file is inconsistent: "
                      "re-convert the model)",
                      (long long)e->ne[1], (long long)n);
    if (n <= 0 || n > INT32_MAX)
        return mf_err(err, MF_E_FORMAT, "tensor 'token_embd.weight' has %lld rows; the vocabulary must have 1 .. %d",
                      (long long)n, INT32_MAX);
    if (o && o->ne[1] != n) {
        if (k >= 0)
            return mf_err(err, MF_E_FORMAT,
                          "tensor 'output.weight' has %lld rows, but the vocabulary has %lld tokens "
                          "(tokenizer.ggml.tokens); it needs one row per token (the file is inconsistent: "
                          "re-convert the model)",
                          (long long)o->ne[1], (long long)n);
        return mf_err(err, MF_E_FORMAT,
                      "tensor 'output.weight' has %lld rows but 'token_embd.weight' has %lld; both need one row per "
                      "vocabulary token (the file is inconsistent: re-convert the model)",
                      (long long)o->ne[1], (long long)n);
    }
    *n_vocab = (int32_t)n;
    return 0;
}

/* The tokenizer is optional (the engine also takes token ids), so a file whose tokenizer cannot be
 * built still loads: the reason is logged now and kept for the refusal when text is tokenized.
 * Running out of memory is no property of the file: it fails the load as MF_E_NOMEM. */
static int load_tokenizer(mf_model *m, mf_error *err) {
    if (mf_gguf_find_key(m->gguf, "tokenizer.ggml.tokens") < 0) {
        snprintf(m->tok_why, sizeof m->tok_why, "the file has no tokenizer (no tokenizer.ggml.tokens metadata)");
        return 0;
    }
    mf_error terr = {0};
    int rc = mf_tok_load_gguf(m->gguf, &m->tok, &terr);
    if (rc == MF_E_NOMEM) {
        if (err) *err = terr;
        return mf_err_prefix(err, rc, "building the tokenizer");
    }
    if (rc) {
        m->tok = NULL;
        snprintf(m->tok_why, sizeof m->tok_why, "%s", terr.msg);
        mf_log(MF_LOG_WARN, "model '%s' has no usable tokenizer (token ids still work): %s", m->path, terr.msg);
    }
    return 0;
}

/* End of generation as llama.cpp decides it for these vocabularies: the eos, eot and eom ids, then the
 * tokens it recognises by text (Qwen: <|endoftext|>, <|im_end|> and the FIM pad / repo / file-separator
 * tokens), in id order. */
static bool is_eog_text(mf_str s) {
    static const char *const k[] = {"<|im_end|>",    "<|endoftext|>", "<|eot_id|>",   "<|end_of_text|>",
                                    "<|end|>",       "<end_of_turn>", "<|return|>",   "<|call|>",
                                    "<|fim_pad|>",   "<|repo_name|>", "<|file_sep|>"};
    for (size_t i = 0; i < MF_ARRAY_LEN(k); i++)
        if (mf_str_eq(s, k[i])) return true;
    return false;
}

static void add_eog(mf_model *m, int64_t id) {
    if (id < 0 || id >= m->hp.n_vocab) return;
    for (int i = 0; i < m->n_eog; i++)
        if (m->eog[i] == id) return;
    if (m->n_eog < MF_MAX_EOG) m->eog[m->n_eog++] = (int32_t)id;
}

static int64_t opt_id(const mf_gguf *g, const char *key) {
    if (mf_gguf_find_key(g, key) < 0) return -1;
    uint32_t v;
    if (mf_gguf_get_u32(g, key, &v, NULL)) return -1;
    return v;
}

/* The fill-in-the-middle tokens llama.cpp knows by text (llama-vocab.cpp), for files that do not name them */
static const struct {
    const char *key;
    const char *text[4];
} k_fim[MF_FIM_COUNT] = {
    [MF_FIM_PRE] = {"tokenizer.ggml.fim_pre_token_id",
                    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>"}},
    [MF_FIM_SUF] = {"tokenizer.ggml.fim_suf_token_id",
                    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>"}},
    [MF_FIM_MID] = {"tokenizer.ggml.fim_mid_token_id",
                    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>"}},
    [MF_FIM_REP] = {"tokenizer.ggml.fim_rep_token_id",
                    {"<|repo_name|>", "<repo-name>", "<reponame>", "<repo_name>"}},
    [MF_FIM_SEP] = {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>", "<file_sep>", NULL, NULL}},
};

static void find_fim(mf_model *m, const mf_str *toks, uint64_t n) {
    for (int f = 0; f < MF_FIM_COUNT; f++) {
        int64_t id = opt_id(m->gguf, k_fim[f].key);
        m->fim[f] = id >= 0 && id < m->hp.n_vocab ? (int32_t)id : -1;
        for (uint64_t i = 0; m->fim[f] < 0 && i < n; i++)
            for (int k = 0; k < 4 && k_fim[f].text[k]; k++)
                if (toks[i].len > 2 && toks[i].ptr[0] == '<' && mf_str_eq(toks[i], k_fim[f].text[k]))
                    m->fim[f] = (int32_t)i;
    }
}

static int find_eog(mf_model *m, mf_error *err) {
    for (int f = 0; f < MF_FIM_COUNT; f++) m->fim[f] = -1;
    m->bos = (int32_t)opt_id(m->gguf, "tokenizer.ggml.bos_token_id");
    m->eos = (int32_t)opt_id(m->gguf, "tokenizer.ggml.eos_token_id");
    add_eog(m, m->eos);
    add_eog(m, opt_id(m->gguf, "tokenizer.ggml.eot_token_id"));
    add_eog(m, opt_id(m->gguf, "tokenizer.ggml.eom_token_id"));
    if (tokens_key(m->gguf) < 0) return 0;
    mf_str *toks = NULL;
    uint64_t n = 0;
    int rc = mf_gguf_get_str_array(m->gguf, "tokenizer.ggml.tokens", &toks, &n, err);
    if (rc) return mf_err_prefix(err, rc, "reading the end-of-generation tokens");
    for (uint64_t i = 0; i < n; i++)
        if (toks[i].len > 2 && toks[i].ptr[0] == '<' && is_eog_text(toks[i])) add_eog(m, (int64_t)i);
    find_fim(m, toks, n);
    free(toks);
    return 0;
}

int mf_model_load_vocab(mf_model *m, mf_error *err) {
    int rc = load_tokenizer(m, err);
    if (!rc) rc = find_eog(m, err);
    return rc;
}

bool mf_model_token_is_eog(const mf_model *m, int32_t tok) {
    for (int i = 0; i < m->n_eog; i++)
        if (m->eog[i] == tok) return true;
    return false;
}
