/* The vocabulary: token texts and types, the text -> id map, merge ranks, the decoded pieces, the
 * added-token table, and loading all of it from GGUF tokenizer.ggml.* metadata. */
#include "tok/tok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte-level mapping (GPT-2 bytes_to_unicode) ---- */

static bool byte_is_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174); }

/* the 68 non-printable bytes (0..32, 127..160, 173) map to 256.. in byte order */
uint32_t mf_tok_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 32) return 256u + b;
    if (b <= 160) return 256u + 33u + (b - 127u);
    return 256u + 67u; /* 173 */
}

int mf_tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable((int)cp) ? (int)cp : -1;
    uint32_t n = cp - 256;
    if (n <= 32) return (int)n;
    if (n <= 66) return (int)(127 + n - 33);
    if (n == 67) return 173;
    return -1;
}

int mf_tok_utf8_put(uint32_t cp, char *o) {
    unsigned char *u = (unsigned char *)o;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | (cp >> 18));
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int mf_tok_utf8_get(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned char c = s[0];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if ((size_t)n > len) n = (int)len;
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int i = 1; i < n; i++) v = (v << 6) | (s[i] & 0x3Fu);
    *cp = v;
    return n;
}

/* ---- hashing ---- */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n * 2) c <<= 1;
    return c;
}

int32_t mf_tok_find(const mf_tok *t, const char *text, size_t len) {
    uint32_t i = hash_bytes(text, len) & t->map_mask;
    for (;;) {
        uint32_t v = t->map[i];
        if (!v) return -1;
        int32_t id = (int32_t)(v - 1);
        if (t->text_len[id] == len && !memcmp(t->text_blob + t->text_off[id], text, len)) return id;
        i = (i + 1) & t->map_mask;
    }
}

/* ---- construction ---- */

static int set_added_tokens(mf_tok *t, mf_error *err) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == MF_TOKT_CONTROL || t->type[i] == MF_TOKT_USER_DEFINED) && t->text_len[i] > 0) n++;
    t->added = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!t->added) return mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for %d added tokens", n);
    /* counting sort by first byte, then longest first within a bucket (leftmost-longest match) */
    int32_t count[257] = {0};
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == MF_TOKT_CONTROL || t->type[i] == MF_TOKT_USER_DEFINED) && t->text_len[i] > 0)
            count[(unsigned char)t->text_blob[t->text_off[i]]]++;
    t->added_first[0] = 0;
    for (int b = 0; b < 256; b++) t->added_first[b + 1] = t->added_first[b] + count[b];
    int32_t fill[256];
    for (int b = 0; b < 256; b++) fill[b] = t->added_first[b];
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == MF_TOKT_CONTROL || t->type[i] == MF_TOKT_USER_DEFINED) && t->text_len[i] > 0)
            t->added[fill[(unsigned char)t->text_blob[t->text_off[i]]]++] = i;
    for (int b = 0; b < 256; b++) {
        int32_t *a = t->added + t->added_first[b];
        int32_t m = t->added_first[b + 1] - t->added_first[b];
        for (int32_t i = 1; i < m; i++) { /* insertion sort: buckets are tiny */
            int32_t v = a[i], j = i - 1;
            while (j >= 0 && (t->text_len[a[j]] < t->text_len[v] || (t->text_len[a[j]] == t->text_len[v] && a[j] > v))) {
                a[j + 1] = a[j];
                j--;
            }
            a[j + 1] = v;
        }
    }
    t->n_added = n;
    return 0;
}

static int build_pieces(mf_tok *t, mf_error *err) {
    uint64_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->text_len[i];
    t->piece_blob = malloc(total + 1);
    t->piece_off = malloc(sizeof(uint32_t) * (size_t)t->n_vocab);
    t->piece_len = malloc(sizeof(uint32_t) * (size_t)t->n_vocab);
    if (!t->piece_blob || !t->piece_off || !t->piece_len)
        return mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for %llu bytes of pieces", (unsigned long long)total);
    uint64_t at = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const unsigned char *s = (const unsigned char *)t->text_blob + t->text_off[i];
        size_t n = t->text_len[i];
        t->piece_off[i] = (uint32_t)at;
        if (t->type[i] == MF_TOKT_CONTROL || t->type[i] == MF_TOKT_USER_DEFINED) {
            memcpy(t->piece_blob + at, s, n);
            at += n;
        } else {
            /* a code point outside the byte-level alphabet cannot come from the byte-level encoder;
             * such a token keeps its UTF-8 (it can only be produced as a whole, never by BPE) */
            for (size_t k = 0; k < n;) {
                uint32_t cp;
                int l = mf_tok_utf8_get(s + k, n - k, &cp);
                int b = mf_tok_cp_to_byte(cp);
                if (b >= 0) t->piece_blob[at++] = (char)b;
                else {
                    memcpy(t->piece_blob + at, s + k, (size_t)l);
                    at += (size_t)l;
                }
                k += (size_t)l;
            }
        }
        t->piece_len[i] = (uint32_t)(at - t->piece_off[i]);
    }
    t->piece_blob[at] = 0;
    return 0;
}

/* *ok: s is valid UTF-8 (its sanitized copy is itself).  The copy can run out of memory, which is an
 * error of its own, never "not valid". */
static int check_utf8(const unsigned char *s, size_t n, bool *ok, mf_error *err) {
    char *tmp = NULL;
    size_t tl = 0;
    int rc = mf_tok_utf8_sanitize((const char *)s, n, &tmp, &tl, err);
    if (rc) return rc;
    *ok = tl == n && !memcmp(tmp, s, n);
    free(tmp);
    return 0;
}

int mf_tok_new(const mf_tok_spec *spec, mf_tok **out, mf_error *err) {
    *out = NULL;
    if (!spec->model || strcmp(spec->model, "gpt2"))
        return mf_err(err, MF_E_UNSUPPORTED,
                      "tokenizer model '%s' is not supported (this build reads byte-level BPE, tokenizer.ggml.model "
                      "= 'gpt2', as Qwen2/2.5/3 GGUFs have)",
                      spec->model ? spec->model : "(missing)");
    if (!spec->pre || (strcmp(spec->pre, "qwen2") && strcmp(spec->pre, "deepseek-r1-qwen")))
        return mf_err(err, MF_E_UNSUPPORTED,
                      "tokenizer pre-tokenizer '%s' is not supported (supported tokenizer.ggml.pre values: 'qwen2', "
                      "'deepseek-r1-qwen' — the Qwen2/2.5/3 tokenizers)",
                      spec->pre ? spec->pre : "(missing)");
    if (spec->n_tokens < 256 || spec->n_tokens > INT32_MAX / 2)
        return mf_err(err, MF_E_FORMAT, "tokenizer: %llu tokens is not a usable byte-level vocabulary (needs 256 .. %d)",
                      (unsigned long long)spec->n_tokens, INT32_MAX / 2);

    mf_tok *t = calloc(1, sizeof *t);
    if (!t) return mf_err(err, MF_E_NOMEM, "tokenizer: out of memory");
    int rc = 0;
    int32_t n = (int32_t)spec->n_tokens;
    t->n_vocab = n;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) total += spec->tokens[i].len + 1;
    if (total > UINT32_MAX) {
        rc = mf_err(err, MF_E_FORMAT, "tokenizer: token texts total %llu bytes (limit 4 GiB)", (unsigned long long)total);
        goto fail;
    }
    t->text_blob = malloc(total + 1);
    t->text_off = malloc(sizeof(uint32_t) * (size_t)n);
    t->text_len = malloc(sizeof(uint32_t) * (size_t)n);
    t->type = malloc((size_t)n);
    t->map_mask = pow2_at_least((uint64_t)n) - 1;
    t->map = calloc((size_t)t->map_mask + 1, sizeof(uint32_t));
    if (!t->text_blob || !t->text_off || !t->text_len || !t->type || !t->map) {
        rc = mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for %d tokens", n);
        goto fail;
    }
    uint64_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t ty = spec->types ? spec->types[i] : MF_TOKT_NORMAL;
        if (ty < 0 || ty > MF_TOKT_BYTE) {
            rc = mf_err(err, MF_E_FORMAT, "tokenizer: token %d has type %d (valid: 0..6)", i, ty);
            goto fail;
        }
        t->type[i] = (uint8_t)ty;
        t->text_off[i] = (uint32_t)at;
        t->text_len[i] = (uint32_t)spec->tokens[i].len;
        memcpy(t->text_blob + at, spec->tokens[i].ptr, spec->tokens[i].len);
        at += spec->tokens[i].len;
        t->text_blob[at++] = 0;
        /* insert unless the same text is already present (the first id wins, as in HF's vocab map) */
        uint32_t h = hash_bytes(spec->tokens[i].ptr, spec->tokens[i].len) & t->map_mask;
        for (;;) {
            uint32_t v = t->map[h];
            if (!v) {
                t->map[h] = (uint32_t)i + 1;
                break;
            }
            int32_t o = (int32_t)(v - 1);
            if (t->text_len[o] == spec->tokens[i].len && !memcmp(t->text_blob + t->text_off[o], spec->tokens[i].ptr, spec->tokens[i].len))
                break;
            h = (h + 1) & t->map_mask;
        }
    }
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = mf_tok_utf8_put(mf_tok_byte_to_cp((uint8_t)b), u);
        t->byte_tok[b] = mf_tok_find(t, u, (size_t)l);
        if (t->byte_tok[b] < 0) {
            rc = mf_err(err, MF_E_FORMAT,
                        "tokenizer: the vocabulary has no token for byte 0x%02x (byte-level text '%.*s'); not a "
                        "byte-level BPE vocabulary",
                        b, l, u);
            goto fail;
        }
    }

    /* merges */
    t->m_mask = pow2_at_least(spec->n_merges ? spec->n_merges : 1) - 1;
    t->mkey = calloc((size_t)t->m_mask + 1, sizeof(uint64_t));
    t->mrank = malloc(sizeof(uint32_t) * ((size_t)t->m_mask + 1));
    t->mres = malloc(sizeof(int32_t) * ((size_t)t->m_mask + 1));
    if (!t->mkey || !t->mrank || !t->mres) {
        rc = mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)spec->n_merges);
        goto fail;
    }
    {
        char stackbuf[512];
        for (uint64_t r = 0; r < spec->n_merges; r++) {
            mf_str m = spec->merges[r];
            const char *sp = memchr(m.ptr, ' ', m.len);
            if (!sp || sp == m.ptr || sp + 1 == m.ptr + m.len) {
                rc = mf_err(err, MF_E_FORMAT, "tokenizer: merge #%llu '%.*s' is not 'left right'", (unsigned long long)r,
                            (int)MF_MIN(m.len, 200), m.ptr);
                goto fail;
            }
            size_t ll = (size_t)(sp - m.ptr), rl = m.len - ll - 1;
            int32_t a = mf_tok_find(t, m.ptr, ll), b = mf_tok_find(t, sp + 1, rl);
            char *cat = ll + rl <= sizeof stackbuf ? stackbuf : malloc(ll + rl);
            if (!cat) {
                rc = mf_err(err, MF_E_NOMEM, "tokenizer: out of memory");
                goto fail;
            }
            memcpy(cat, m.ptr, ll);
            memcpy(cat + ll, sp + 1, rl);
            int32_t c = mf_tok_find(t, cat, ll + rl);
            if (cat != stackbuf) free(cat);
            if (a < 0 || b < 0 || c < 0) {
                rc = mf_err(err, MF_E_FORMAT, "tokenizer: merge #%llu '%.*s': %s is not in the vocabulary",
                            (unsigned long long)r, (int)MF_MIN(m.len, 200), m.ptr,
                            a < 0 ? "the left part" : b < 0 ? "the right part" : "the merged token");
                goto fail;
            }
            uint64_t key = ((uint64_t)(uint32_t)(a + 1) << 32) | (uint32_t)(b + 1);
            uint32_t h = hash_u64(key) & t->m_mask;
            while (t->mkey[h] && t->mkey[h] != key) h = (h + 1) & t->m_mask;
            if (!t->mkey[h]) { /* a repeated pair keeps its first (lowest) rank */
                t->mkey[h] = key;
                t->mrank[h] = (uint32_t)r;
                t->mres[h] = c;
            }
        }
    }

    for (int32_t i = 0; i < n; i++) {
        if (t->type[i] != MF_TOKT_CONTROL && t->type[i] != MF_TOKT_USER_DEFINED) continue;
        bool ok = false;
        if ((rc = check_utf8((const unsigned char *)t->text_blob + t->text_off[i], t->text_len[i], &ok, err)))
            goto fail;
        if (!ok) {
            rc = mf_err(err, MF_E_FORMAT, "tokenizer: added token %d is not valid UTF-8", i);
            goto fail;
        }
    }
    if ((rc = set_added_tokens(t, err))) goto fail;
    if ((rc = build_pieces(t, err))) goto fail;

    int32_t ids[4] = {spec->bos, spec->eos, spec->eot, spec->pad};
    const char *names[4] = {"bos", "eos", "eot", "padding"};
    for (int k = 0; k < 4; k++)
        if (ids[k] < -1 || ids[k] >= n) {
            rc = mf_err(err, MF_E_FORMAT, "tokenizer: %s token id %d is outside the vocabulary (%d tokens)", names[k],
                        ids[k], n);
            goto fail;
        }
    t->bos = spec->bos;
    t->eos = spec->eos;
    t->pad = spec->pad;
    t->im_end = mf_tok_find(t, "<|im_end|>", 10);
    t->eot = spec->eot >= 0 ? spec->eot : t->im_end;
    t->add_bos = spec->add_bos;
    t->add_eos = spec->add_eos;
    if (spec->add_bos && spec->bos < 0) {
        rc = mf_err(err, MF_E_FORMAT, "tokenizer: add_bos_token is true but the model has no bos token id");
        goto fail;
    }
    if (spec->add_eos && spec->eos < 0) {
        rc = mf_err(err, MF_E_FORMAT, "tokenizer: add_eos_token is true but the model has no eos token id");
        goto fail;
    }
    if (spec->chat_template) {
        t->chat_template = malloc(spec->chat_template_len + 1);
        if (!t->chat_template) {
            rc = mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for the chat template");
            goto fail;
        }
        memcpy(t->chat_template, spec->chat_template, spec->chat_template_len);
        t->chat_template[spec->chat_template_len] = 0;
    }
    if ((rc = mf_tok_pretok_compile(&t->re, err))) goto fail;
    *out = t;
    return 0;
fail:
    mf_tok_free(t);
    return rc;
}

void mf_tok_free(mf_tok *t) {
    if (!t) return;
    free(t->text_blob);
    free(t->text_off);
    free(t->text_len);
    free(t->type);
    free(t->piece_blob);
    free(t->piece_off);
    free(t->piece_len);
    free(t->map);
    free(t->mkey);
    free(t->mrank);
    free(t->mres);
    free(t->added);
    free(t->chat_template);
    if (t->re) pcre2_code_free(t->re);
    free(t);
}

/* ---- GGUF ---- */

static int get_opt_id(const mf_gguf *g, const char *key, int32_t *out, mf_error *err) {
    *out = -1;
    if (mf_gguf_find_key(g, key) < 0) return 0;
    int64_t v;
    int rc = mf_gguf_get_i64(g, key, &v, err);
    if (rc) return rc;
    if (v < -1 || v > INT32_MAX) return mf_err(err, MF_E_FORMAT, "%s = %lld is not a token id", key, (long long)v);
    *out = (int32_t)v;
    return 0;
}

static char *str_dup(mf_str s) {
    char *c = malloc(s.len + 1);
    if (c) {
        memcpy(c, s.ptr, s.len);
        c[s.len] = 0;
    }
    return c;
}

int mf_tok_load_gguf(const mf_gguf *g, mf_tok **out, mf_error *err) {
    *out = NULL;
    mf_tok_spec sp;
    memset(&sp, 0, sizeof sp);
    mf_str model = {0}, pre = {0}, tmpl = {0};
    mf_str *tokens = NULL, *merges = NULL;
    int32_t *types = NULL;
    uint64_t n_types = 0;
    char *model_c = NULL, *pre_c = NULL;
    int rc;
    if ((rc = mf_gguf_get_str(g, "tokenizer.ggml.model", &model, err))) goto done;
    if (!(model_c = str_dup(model))) goto nomem;
    if (strcmp(model_c, "gpt2")) {
        rc = mf_err(err, MF_E_UNSUPPORTED,
                    "tokenizer.ggml.model is '%s'; this build supports only 'gpt2' (byte-level BPE: Qwen2, Qwen2.5, "
                    "Qwen3)",
                    model_c);
        goto done;
    }
    if (mf_gguf_find_key(g, "tokenizer.ggml.pre") < 0) {
        rc = mf_err(err, MF_E_UNSUPPORTED,
                    "tokenizer.ggml.pre is missing: the pre-tokenizer is unknown (supported: 'qwen2', "
                    "'deepseek-r1-qwen'); re-convert the model with a current convert_hf_to_gguf.py");
        goto done;
    }
    if ((rc = mf_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))) goto done;
    if (!(pre_c = str_dup(pre))) goto nomem;
    if ((rc = mf_gguf_get_str_array(g, "tokenizer.ggml.tokens", &tokens, &sp.n_tokens, err))) goto done;
    if ((rc = mf_gguf_get_i32_array(g, "tokenizer.ggml.token_type", &types, &n_types, err))) goto done;
    if (n_types != sp.n_tokens) {
        rc = mf_err(err, MF_E_FORMAT, "tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu",
                    (unsigned long long)n_types, (unsigned long long)sp.n_tokens);
        goto done;
    }
    if ((rc = mf_gguf_get_str_array(g, "tokenizer.ggml.merges", &merges, &sp.n_merges, err))) goto done;
    if ((rc = get_opt_id(g, "tokenizer.ggml.bos_token_id", &sp.bos, err))) goto done;
    if ((rc = get_opt_id(g, "tokenizer.ggml.eos_token_id", &sp.eos, err))) goto done;
    if ((rc = get_opt_id(g, "tokenizer.ggml.eot_token_id", &sp.eot, err))) goto done;
    if ((rc = get_opt_id(g, "tokenizer.ggml.padding_token_id", &sp.pad, err))) goto done;
    if (mf_gguf_find_key(g, "tokenizer.ggml.add_bos_token") >= 0 &&
        (rc = mf_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &sp.add_bos, err)))
        goto done;
    if (mf_gguf_find_key(g, "tokenizer.ggml.add_eos_token") >= 0 &&
        (rc = mf_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &sp.add_eos, err)))
        goto done;
    if (mf_gguf_find_key(g, "tokenizer.chat_template") >= 0) {
        if ((rc = mf_gguf_get_str(g, "tokenizer.chat_template", &tmpl, err))) goto done;
        sp.chat_template = tmpl.ptr;
        sp.chat_template_len = tmpl.len;
    }
    sp.model = model_c;
    sp.pre = pre_c;
    sp.tokens = tokens;
    sp.types = types;
    sp.merges = merges;
    rc = mf_tok_new(&sp, out, err);
    goto done;
nomem:
    rc = mf_err(err, MF_E_NOMEM, "tokenizer: out of memory");
done:
    free(model_c);
    free(pre_c);
    free(tokens);
    free(merges);
    free(types);
    return rc;
}

int mf_tok_load_file(const char *path, mf_tok **out, mf_error *err) {
    *out = NULL;
    mf_gguf *g = NULL;
    int rc = mf_gguf_open(path, &g, err);
    if (rc) return rc;
    rc = mf_tok_load_gguf(g, out, err);
    if (rc) mf_err_prefix(err, rc, "%s", path);
    mf_gguf_close(g);
    return rc;
}

/* ---- accessors ---- */

int32_t mf_tok_n_vocab(const mf_tok *t) { return t->n_vocab; }
int32_t mf_tok_bos(const mf_tok *t) { return t->bos; }
int32_t mf_tok_eos(const mf_tok *t) { return t->eos; }
int32_t mf_tok_eot(const mf_tok *t) { return t->eot; }
int32_t mf_tok_pad(const mf_tok *t) { return t->pad; }
bool mf_tok_add_bos(const mf_tok *t) { return t->add_bos; }
bool mf_tok_add_eos(const mf_tok *t) { return t->add_eos; }
const char *mf_tok_chat_template(const mf_tok *t) { return t->chat_template; }

mf_tok_type mf_tok_type_of(const mf_tok *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return MF_TOKT_UNDEFINED;
    return (mf_tok_type)t->type[id];
}

const char *mf_tok_text(const mf_tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = t->text_len[id];
    return t->text_blob + t->text_off[id];
}

const char *mf_tok_piece(const mf_tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = t->piece_len[id];
    return t->piece_blob + t->piece_off[id];
}
