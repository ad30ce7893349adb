/* The tokenizer.* metadata of a Qwen GGUF, built from the Hugging Face tokenizer files the way
 * llama.cpp's convert_hf_to_gguf.py (get_vocab_base + gguf.SpecialVocab) does:
 *   tokens      vocab ids 0..n_vocab-1; ids the tokenizer lacks become "[PAD<id>]" (type UNUSED)
 *   token_type  NORMAL=1, CONTROL=3 (special added tokens, or ones that look special: <|...|>),
 *               USER_DEFINED=4 (other added tokens), UNUSED=5 (padding)
 *   merges      "a b" strings (a space inside a part is written as U+0120, as the converter does)
 *   special ids from tokenizer_config.json (content looked up among the added tokens), then
 *               config.json's *_token_id where present (first setting wins, as in SpecialVocab). */
#include "genmodel.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };

static int read_file(const char *path, char **out, size_t *len, bool required, mf_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (!required) return MF_E_NOTFOUND;
        return mf_err(err, MF_E_IO, "cannot open tokenizer file '%s' (set --tokenizer DIR or MF_TOKENIZER_DIR to a "
                                    "folder holding tokenizer.json and tokenizer_config.json)", path);
    }
    if (fseek(f, 0, SEEK_END) != 0) goto io;
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) goto io;
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return mf_err(err, MF_E_NOMEM, "cannot allocate %ld bytes for '%s'", n, path);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        goto io;
    }
    buf[n] = 0;
    fclose(f);
    *out = buf;
    *len = (size_t)n;
    return 0;
io:
    fclose(f);
    return mf_err(err, MF_E_IO, "reading '%s' failed", path);
}

static int parse_json(const char *dir, const char *name, bool required, cJSON **out, mf_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *buf;
    size_t len = 0;
    *out = NULL;
    int rc = read_file(path, &buf, &len, required, err);
    if (rc) return rc;
    *out = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!*out) return mf_err(err, MF_E_FORMAT, "'%s' is not valid JSON", path);
    return 0;
}

static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    /* "<｜" ... "｜>" (fullwidth bar, U+FF5C) */
    if (n >= 8 && !strncmp(t, "<\xEF\xBD\x9C", 4) && !strcmp(t + n - 4, "\xEF\xBD\x9C>")) return true;
    if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

/* "a b", a space inside a part written as U+0120 (UTF-8 C4 A0) */
static char *merge_pair(const char *a, const char *b) {
    size_t n = 2;
    for (const char *p = a; *p; p++) n += *p == ' ' ? 2 : 1;
    for (const char *p = b; *p; p++) n += *p == ' ' ? 2 : 1;
    char *s = malloc(n), *o = s;
    if (!s) return NULL;
    for (int part = 0; part < 2; part++) {
        for (const char *p = part ? b : a; *p; p++) {
            if (*p == ' ') *o++ = (char)0xC4, *o++ = (char)0xA0;
            else *o++ = *p;
        }
        if (!part) *o++ = ' ';
    }
    *o = 0;
    return s;
}

static const char *token_content(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

int gm_tokenizer_add(mf_gguf_writer *w, const char *dir, int64_t n_vocab, bool add_eos, mf_error *err) {
    cJSON *tj = NULL, *tc = NULL, *cj = NULL;
    char **tokens = calloc((size_t)n_vocab, sizeof *tokens);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    char **merges = NULL;
    int64_t n_merges = 0;
    int rc = 0;
    if (!tokens || !types) {
        rc = mf_err(err, MF_E_NOMEM, "cannot allocate the %lld-token vocabulary", (long long)n_vocab);
        goto done;
    }
    if ((rc = parse_json(dir, "tokenizer.json", true, &tj, err))) goto done;
    if ((rc = parse_json(dir, "tokenizer_config.json", true, &tc, err))) goto done;
    rc = parse_json(dir, "config.json", false, &cj, err);
    if (rc == MF_E_NOTFOUND) rc = 0;
    if (rc) goto done;

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsObject(vocab) || !cJSON_IsString(type) || strcmp(type->valuestring, "BPE")) {
        rc = mf_err(err, MF_E_FORMAT, "%s/tokenizer.json: want a BPE model with a vocab object (model.type '%s')", dir,
                    cJSON_IsString(type) ? type->valuestring : "?");
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        double id = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (id < 0 || id >= (double)n_vocab || id != (double)(int64_t)id) {
            rc = mf_err(err, MF_E_RANGE, "%s/tokenizer.json: token '%s' has id %g, outside the model's vocab 0..%lld",
                        dir, it->string, id, (long long)n_vocab - 1);
            goto done;
        }
        int64_t i = (int64_t)id;
        free(tokens[i]);
        tokens[i] = strdup(it->string);
        types[i] = TT_NORMAL;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(it, "special");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || id->valuedouble < 0 || id->valuedouble >= (double)n_vocab) {
            rc = mf_err(err, MF_E_FORMAT, "%s/tokenizer.json: an added token lacks a valid id/content (vocab %lld)", dir,
                        (long long)n_vocab);
            goto done;
        }
        int64_t i = (int64_t)id->valuedouble;
        free(tokens[i]);
        tokens[i] = strdup(content->valuestring);
        types[i] = (cJSON_IsTrue(special) || looks_special(content->valuestring)) ? TT_CONTROL : TT_USER_DEFINED;
    }
    for (int64_t i = 0; i < n_vocab; i++) {
        if (tokens[i]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
        tokens[i] = strdup(pad);
        types[i] = TT_UNUSED;
    }
    for (int64_t i = 0; i < n_vocab; i++)
        if (!tokens[i]) {
            rc = mf_err(err, MF_E_NOMEM, "out of memory copying token strings");
            goto done;
        }

    const cJSON *jm = cJSON_GetObjectItemCaseSensitive(model, "merges");
    int nm = cJSON_GetArraySize(jm);
    merges = calloc((size_t)(nm > 0 ? nm : 1), sizeof *merges);
    if (!merges) {
        rc = mf_err(err, MF_E_NOMEM, "cannot allocate %d merges", nm);
        goto done;
    }
    cJSON_ArrayForEach(it, jm) {
        char *m = NULL;
        if (cJSON_IsString(it)) m = strdup(it->valuestring);
        else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                 cJSON_IsString(it->child->next))
            m = merge_pair(it->child->valuestring, it->child->next->valuestring);
        else {
            rc = mf_err(err, MF_E_FORMAT, "%s/tokenizer.json: merge %lld is neither \"a b\" nor [\"a\", \"b\"]", dir,
                        (long long)n_merges);
            goto done;
        }
        if (!m) {
            rc = mf_err(err, MF_E_NOMEM, "out of memory copying merges");
            goto done;
        }
        merges[n_merges++] = m;
    }

    rc = mf_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!rc) rc = mf_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    if (!rc) rc = mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)n_vocab);
    if (!rc) rc = mf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MF_GGUF_INT32, types, (uint64_t)n_vocab);
    if (!rc && n_merges)
        rc = mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)n_merges);
    if (rc) {
        rc = mf_err(err, rc, "writing the tokenizer vocabulary metadata failed (%s)", mf_err_code_name(rc));
        goto done;
    }

    /* special ids: SpecialVocab's order (tokenizer_config first, then config.json), first one wins */
    static const char *const typ[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
    static const char *const key[] = {"bos_token_id", "eos_token_id", "unknown_token_id", "seperator_token_id",
                                      "padding_token_id", "cls_token_id", "mask_token_id"};
    int64_t ids[7];
    bool add_set[7] = {0}, add_val[7] = {0};
    for (int t = 0; t < 7; t++) {
        ids[t] = -1;
        char name[32];
        snprintf(name, sizeof name, "add_%s_token", typ[t]);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(tc, name);
        if (cJSON_IsBool(a)) add_set[t] = true, add_val[t] = cJSON_IsTrue(a);
        if (t == 1 && add_eos) add_set[t] = add_val[t] = true;
        snprintf(name, sizeof name, "%s_token", typ[t]);
        const char *content = token_content(cJSON_GetObjectItemCaseSensitive(tc, name));
        if (!content) continue;
        cJSON_ArrayForEach(it, added) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
            if (cJSON_IsString(c) && !strcmp(c->valuestring, content)) {
                ids[t] = (int64_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
                break;
            }
        }
    }
    int order[7], n_order = 0; /* insertion order of SpecialVocab's dict */
    for (int t = 0; t < 7; t++)
        if (ids[t] >= 0) order[n_order++] = t;
    for (int t = 0; t < 7; t++) {
        char name[32];
        snprintf(name, sizeof name, "%s_token_id", typ[t]);
        const cJSON *v = cj ? cJSON_GetObjectItemCaseSensitive(cj, name) : NULL;
        if (ids[t] < 0 && cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < (double)n_vocab) {
            ids[t] = (int64_t)v->valuedouble;
            order[n_order++] = t;
        }
    }
    /* No config.json: Qwen's config.json declares bos_token_id = <|endoftext|>, which every Qwen GGUF
     * carries; do the same so the files look like converted ones. */
    if (ids[0] < 0) {
        for (int64_t i = 0; i < n_vocab; i++)
            if (types[i] == TT_CONTROL && !strcmp(tokens[i], "<|endoftext|>")) {
                ids[0] = i;
                order[n_order++] = 0;
                break;
            }
    }
    for (int k = 0; k < n_order && !rc; k++) {
        char name[64];
        snprintf(name, sizeof name, "tokenizer.ggml.%s", key[order[k]]);
        rc = mf_gguf_writer_set_u32(w, name, (uint32_t)ids[order[k]]);
    }
    for (int t = 0; t < 7 && !rc; t++) {
        if (!add_set[t]) continue;
        char name[64];
        snprintf(name, sizeof name, "tokenizer.ggml.add_%s_token", typ[t]);
        rc = mf_gguf_writer_set_bool(w, name, add_val[t]);
    }
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(tc, "chat_template");
    if (!rc && cJSON_IsString(tmpl)) rc = mf_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl->valuestring);
    if (rc) rc = mf_err(err, rc, "writing the tokenizer special-token metadata failed (%s)", mf_err_code_name(rc));

done:
    if (tokens)
        for (int64_t i = 0; i < n_vocab; i++) free(tokens[i]);
    free(tokens);
    free(types);
    for (int64_t i = 0; i < n_merges; i++) free(merges[i]);
    free(merges);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(cj);
    return rc;
}
