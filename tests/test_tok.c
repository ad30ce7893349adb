/* Tokenizer, detokenizer and chat-template tests.  The vocabulary comes from a GGUF written by the
 * synthetic generator (the real Qwen3 tokenizer), the expected ids from tests/golden/tok/tokenize.json
 * (HF tokenizer and llama.cpp, written by tools/oracle/tok_goldens.mjs), the chat renderings from
 * tests/golden/tok/chat.json (Jinja renderings of the Qwen3 / Qwen2.5 / ChatML templates). */
#include "harness.h"

#include "core/pyjson.h"
#include "gguf/gguf.h"
#include "tok/tok.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static mf_tok *g_tok;
static cJSON *g_corpus, *g_chat;

static cJSON *load_json(const char *path) {
    char *s = mf_test_slurp(path, NULL);
    if (!s) return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

/* a case's text: "hex" (when the text holds NUL) or "text" */
static char *case_text(const cJSON *c, size_t *len) {
    const cJSON *hex = cJSON_GetObjectItem(c, "hex");
    if (cJSON_IsString(hex)) {
        size_t n = strlen(hex->valuestring) / 2;
        char *o = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            unsigned v;
            sscanf(hex->valuestring + 2 * i, "%2x", &v);
            o[i] = (char)v;
        }
        o[n] = 0;
        *len = n;
        return o;
    }
    const char *t = cJSON_GetObjectItem(c, "text")->valuestring;
    *len = strlen(t);
    return strdup(t);
}

static bool ids_eq_json(const mf_tok_ids *ids, const cJSON *arr) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != ids->n) return false;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++)
        if ((int32_t)e->valuedouble != ids->ids[i]) return false;
    return true;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    printf("    %s [", what);
    for (size_t i = 0; i < n && i < 40; i++) printf(i ? ", %d" : "%d", ids[i]);
    printf("%s]\n", n > 40 ? ", ..." : "");
}

static void show_text(const char *t, size_t n) {
    printf("    text \"");
    for (size_t i = 0; i < n && i < 120; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x20 || c == '"' || c == '\\') printf("\\x%02x", c);
        else putchar(c);
    }
    printf("\"\n");
}

static bool valid_utf8(const char *s, size_t n) {
    char *o = NULL;
    size_t on = 0;
    if (mf_tok_utf8_sanitize(s, n, &o, &on, NULL)) return false;
    bool ok = on == n && !memcmp(o, s, n);
    free(o);
    return ok;
}

/* ------------------------------------------------------------------ setup */

static void test_load_gguf(void) {
    const char *dir = mf_test_tmpdir();
    char path[1024], cmd[4096];
    snprintf(path, sizeof path, "%s/tok.gguf", dir);
    struct stat st;
    if (stat(path, &st) != 0) {
        /* written under a temporary name and renamed, so a reader never sees half a file */
        snprintf(cmd, sizeof cmd,
                 "mkdir -p '%s' && '%s' --arch qwen3 --preset tiny --type q8_0 -o '%s.tmp.%d' >/dev/null && "
                 "mv '%s.tmp.%d' '%s'",
                 dir, mf_test_genmodel(), path, (int)getpid(), path, (int)getpid(), path);
        int rc = system(cmd);
        REQUIRE(rc == 0, "generating the vocabulary model failed (%d): %s", rc, cmd);
    }
    mf_error err = {0};
    double t0 = mf_time_now();
    int rc = mf_tok_load_file(path, &g_tok, &err);
    double dt = mf_time_now() - t0;
    REQUIRE(rc == 0, "loading %s: %s", path, err.msg);
    printf("  loaded %d tokens from %s in %.3f s\n", mf_tok_n_vocab(g_tok), path, dt);
    CHECK(mf_tok_n_vocab(g_tok) == 151936, "n_vocab %d", mf_tok_n_vocab(g_tok));
    CHECK(mf_tok_find(g_tok, "<|im_start|>", 12) == 151644, "im_start");
    CHECK(mf_tok_type_of(g_tok, 151644) == MF_TOKT_CONTROL, "im_start type %d", mf_tok_type_of(g_tok, 151644));
    CHECK(mf_tok_type_of(g_tok, 151667) == MF_TOKT_USER_DEFINED, "<think> type %d", mf_tok_type_of(g_tok, 151667));
    CHECK(mf_tok_eot(g_tok) == 151645, "eot %d", mf_tok_eot(g_tok));
    CHECK(!mf_tok_add_bos(g_tok), "Qwen adds no BOS");
    size_t len = 0;
    const char *p = mf_tok_piece(g_tok, 1879, &len);
    CHECK(p && len == 6 && !memcmp(p, " world", 6), "piece of 1879");
    p = mf_tok_text(g_tok, 1879, &len);
    CHECK(p && len == 7 && !memcmp(p, "\xc4\xa0world", 7), "text of 1879 is byte-level 'Ġworld'");
    CHECK(mf_tok_piece(g_tok, -1, &len) == NULL && mf_tok_piece(g_tok, 151936, &len) == NULL, "out of range pieces");
}

/* ------------------------------------------------------------------ corpus */

static void test_corpus_hf(void) {
    if (!g_tok) SKIP("no vocabulary");
    REQUIRE(g_corpus, "tests/golden/tok/tokenize.json missing or not JSON");
    const cJSON *cases = cJSON_GetObjectItem(g_corpus, "cases");
    int n = 0, match = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n++) {
        size_t len;
        char *text = case_text(c, &len);
        mf_tok_ids ids = {0};
        mf_error err = {0};
        int rc = mf_tok_encode(g_tok, text, len, MF_TOK_PARSE_SPECIAL, &ids, &err);
        CHECK(rc == 0, "encode: %s", err.msg);
        if (rc == 0 && ids_eq_json(&ids, cJSON_GetObjectItem(c, "hf"))) match++;
        else if (rc == 0) {
            CHECK(false, "case %d differs from HF", n);
            show_text(text, len);
            print_ids("minfer", ids.ids, ids.n);
        }
        free(ids.ids);
        free(text);
    }
    printf("  minfer == HF (special-parsed) on %d of %d corpus strings\n", match, n);
    CHECK(n >= 300, "corpus has only %d strings", n);
    CHECK(match == n, "%d of %d", match, n);
}

/* The three-way agreement: wherever llama.cpp differs from HF the golden names a known reason, and
 * minfer's plain (no special) mode equals llama.cpp's parse_special=false. */
static void test_corpus_llama(void) {
    if (!g_tok) SKIP("no vocabulary");
    REQUIRE(g_corpus, "no corpus");
    const cJSON *cases = cJSON_GetObjectItem(g_corpus, "cases");
    int n = 0, agree = 0, nfc_diff = 0, plain_match = 0, plain_n = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n++) {
        size_t len;
        char *text = case_text(c, &len);
        const cJSON *hf = cJSON_GetObjectItem(c, "hf"), *sp = cJSON_GetObjectItem(c, "llama_sp");
        const cJSON *diff = cJSON_GetObjectItem(c, "llama_diff");
        char *h = cJSON_PrintUnformatted(hf), *s = cJSON_PrintUnformatted(sp);
        bool same = !strcmp(h, s);
        free(h);
        free(s);
        if (!diff) {
            CHECK(same, "case %d: llama.cpp differs from HF with no recorded reason", n);
            agree += same;
        } else {
            /* the only accepted reason: llama.cpp skips NFC, so the text must change under NFC */
            CHECK(cJSON_IsString(diff) && !strcmp(diff->valuestring, "no-nfc"), "case %d: reason '%s'", n,
                  cJSON_IsString(diff) ? diff->valuestring : "?");
            char *nf = NULL;
            size_t nl = 0;
            CHECK(mf_tok_nfc(text, len, &nf, &nl, NULL) == 0 && (nl != len || memcmp(nf, text, len)),
                  "case %d marked no-nfc but NFC leaves it unchanged", n);
            free(nf);
            nfc_diff++;
        }
        if (!diff) {
            mf_tok_ids ids = {0};
            mf_error err = {0};
            CHECK(mf_tok_encode(g_tok, text, len, 0, &ids, &err) == 0, "encode: %s", err.msg);
            plain_n++;
            if (ids_eq_json(&ids, cJSON_GetObjectItem(c, "llama_pl"))) plain_match++;
            else {
                CHECK(false, "case %d: plain mode differs from llama.cpp parse_special=false", n);
                show_text(text, len);
                print_ids("minfer", ids.ids, ids.n);
            }
            free(ids.ids);
        }
        free(text);
    }
    printf("  llama.cpp == HF on %d of %d; %d differ only because llama.cpp skips NFC\n", agree, n, nfc_diff);
    printf("  minfer plain == llama.cpp parse_special=false on %d of %d\n", plain_match, plain_n);
}

/* ------------------------------------------------------------------ decode */

static void test_roundtrip_and_stream(void) {
    if (!g_tok) SKIP("no vocabulary");
    REQUIRE(g_corpus, "no corpus");
    const cJSON *cases = cJSON_GetObjectItem(g_corpus, "cases");
    int n = 0, ok_rt = 0, ok_stream = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n++) {
        size_t len;
        char *text = case_text(c, &len);
        mf_tok_ids ids = {0};
        mf_error err = {0};
        CHECK(mf_tok_encode(g_tok, text, len, MF_TOK_PARSE_SPECIAL, &ids, &err) == 0, "%s", err.msg);
        char *dec = NULL, *nf = NULL;
        size_t dl = 0, nl = 0;
        CHECK(mf_tok_decode(g_tok, ids.ids, ids.n, MF_TOK_DECODE_SPECIAL, &dec, &dl, &err) == 0, "%s", err.msg);
        CHECK(mf_tok_nfc(text, len, &nf, &nl, &err) == 0, "%s", err.msg);
        if (dec && nf && dl == nl && !memcmp(dec, nf, nl)) ok_rt++;
        else {
            CHECK(false, "case %d: detok(tok(s)) != NFC(s)", n);
            show_text(text, len);
        }
        /* streaming: chunks concatenate to the whole; each chunk is whole characters */
        mf_tok_stream st;
        mf_tok_stream_init(&st, g_tok, MF_TOK_DECODE_SPECIAL);
        char *acc = malloc(dl + 16);
        size_t al = 0;
        bool chunks_ok = true;
        for (size_t i = 0; i < ids.n; i++) {
            const char *o;
            size_t ol;
            CHECK(mf_tok_stream_push(&st, ids.ids[i], &o, &ol, &err) == 0, "%s", err.msg);
            if (al + ol > dl) {
                chunks_ok = false;
                break;
            }
            memcpy(acc + al, o, ol);
            al += ol;
            if (!valid_utf8(o, ol)) chunks_ok = false;
        }
        const char *o;
        size_t ol = 0;
        mf_tok_stream_flush(&st, &o, &ol, &err);
        CHECK(ol == 0, "case %d: %zu bytes left at the end of valid text", n, ol);
        if (chunks_ok && al == dl && !memcmp(acc, dec, dl)) ok_stream++;
        else CHECK(false, "case %d: streaming detokenize differs (chunks valid %d, %zu vs %zu bytes)", n, chunks_ok, al, dl);
        mf_tok_stream_free(&st);
        free(acc);
        free(dec);
        free(nf);
        free(ids.ids);
        free(text);
    }
    printf("  roundtrip detok(tok(s)) == NFC(s): %d of %d; streaming == whole: %d of %d\n", ok_rt, n, ok_stream, n);
}

static void test_stream_holds_partial(void) {
    if (!g_tok) SKIP("no vocabulary");
    /* "😀" is 4 bytes; find byte-level tokens for F0 9F and 98 80 by encoding pieces of it */
    int32_t f0 = mf_tok_find(g_tok, "\xc3\xb0", 2);         /* byte 0xF0 as byte-level text 'ð' */
    int32_t b9f = mf_tok_find(g_tok, "\xc5\x81", 2);        /* 0x9F -> U+0141 'Ł' */
    int32_t b98 = mf_tok_find(g_tok, "\xc4\xba", 2);        /* 0x98 -> U+013A */
    int32_t b80 = mf_tok_find(g_tok, "\xc4\xa2", 2);        /* 0x80 -> U+0122 */
    REQUIRE(f0 >= 0 && b9f >= 0 && b98 >= 0 && b80 >= 0, "byte tokens %d %d %d %d", f0, b9f, b98, b80);
    int32_t hi = mf_tok_find(g_tok, "hi", 2);
    mf_tok_stream st;
    mf_tok_stream_init(&st, g_tok, 0);
    mf_error err = {0};
    const char *o;
    size_t ol;
    int32_t seq[] = {hi, f0, b9f, b98, b80, hi};
    const char *want[] = {"hi", "", "", "", "\xf0\x9f\x98\x80", "hi"};
    for (int i = 0; i < 6; i++) {
        CHECK(mf_tok_stream_push(&st, seq[i], &o, &ol, &err) == 0, "%s", err.msg);
        CHECK(ol == strlen(want[i]) && !memcmp(o, want[i], ol), "step %d gave %zu bytes", i, ol);
    }
    /* a lead byte never completed: held, then passed through when the next token is not a continuation */
    CHECK(mf_tok_stream_push(&st, f0, &o, &ol, &err) == 0 && ol == 0, "held F0");
    CHECK(mf_tok_stream_push(&st, hi, &o, &ol, &err) == 0 && ol == 3 && !memcmp(o, "\xf0hi", 3), "F0 passed on: %zu", ol);
    /* incomplete at the end: flush returns it */
    CHECK(mf_tok_stream_push(&st, f0, &o, &ol, &err) == 0 && ol == 0, "held F0 again");
    CHECK(mf_tok_stream_flush(&st, &o, &ol, &err) == 0 && ol == 1 && (unsigned char)o[0] == 0xF0, "flush");
    /* control tokens: nothing unless asked */
    CHECK(mf_tok_stream_push(&st, 151645, &o, &ol, &err) == 0 && ol == 0, "im_end hidden");
    CHECK(mf_tok_stream_push(&st, 999999, &o, &ol, &err) == MF_E_RANGE && strstr(err.msg, "999999"), "range: %s", err.msg);
    mf_tok_stream_free(&st);
    mf_tok_stream_init(&st, g_tok, MF_TOK_DECODE_SPECIAL);
    CHECK(mf_tok_stream_push(&st, 151645, &o, &ol, &err) == 0 && ol == 10 && !memcmp(o, "<|im_end|>", 10), "im_end shown");
    mf_tok_stream_free(&st);

    CHECK(mf_tok_utf8_complete_prefix((const unsigned char *)"ab\xe2\x82", 4) == 2, "cut E2 82");
    CHECK(mf_tok_utf8_complete_prefix((const unsigned char *)"ab\xe2\x82\xac", 5) == 5, "whole E2 82 AC");
    CHECK(mf_tok_utf8_complete_prefix((const unsigned char *)"ab\xc0", 3) == 3, "C0 never starts a sequence");
    CHECK(mf_tok_utf8_complete_prefix((const unsigned char *)"ab\xe0\x80", 4) == 4, "E0 80 is already invalid");
    CHECK(mf_tok_utf8_complete_prefix((const unsigned char *)"\x80\x80", 2) == 2, "stray continuations");
}

static void test_decode_special_flag(void) {
    if (!g_tok) SKIP("no vocabulary");
    int32_t ids[] = {151644, 872, 198, 9707, 151645, 151667};
    char *s = NULL;
    size_t l = 0;
    mf_error err = {0};
    CHECK(mf_tok_decode(g_tok, ids, 6, 0, &s, &l, &err) == 0 && !strcmp(s, "user\nHello<think>"), "plain: '%s'", s);
    free(s);
    CHECK(mf_tok_decode(g_tok, ids, 6, MF_TOK_DECODE_SPECIAL, &s, &l, &err) == 0 &&
              !strcmp(s, "<|im_start|>user\nHello<|im_end|><think>"),
          "special: '%s'", s);
    free(s);
    int32_t bad[] = {1, 151936};
    CHECK(mf_tok_decode(g_tok, bad, 2, 0, &s, &l, &err) == MF_E_RANGE && strstr(err.msg, "151936"), "%s", err.msg);
}

/* ------------------------------------------------------------------ special vs plain */

static void encode_str(const char *s, unsigned flags, mf_tok_ids *ids) {
    mf_error err = {0};
    ids->n = 0;
    CHECK(mf_tok_encode(g_tok, s, strlen(s), flags, ids, &err) == 0, "%s", err.msg);
}

static void test_special_vs_plain(void) {
    if (!g_tok) SKIP("no vocabulary");
    mf_tok_ids a = {0};
    encode_str("<|im_start|>user\nhi<|im_end|>", MF_TOK_PARSE_SPECIAL, &a);
    CHECK(a.n == 5 && a.ids[0] == 151644 && a.ids[4] == 151645, "special parse: n=%zu", a.n);
    encode_str("<|im_start|>user\nhi<|im_end|>", 0, &a);
    bool any = false;
    for (size_t i = 0; i < a.n; i++) any |= a.ids[i] >= 151643;
    CHECK(a.n > 5 && !any, "plain: control tokens must not appear (n=%zu)", a.n);
    encode_str("<think>x</think>", 0, &a);
    CHECK(a.n == 3 && a.ids[0] == 151667 && a.ids[2] == 151668, "user-defined tokens split in plain mode too (n=%zu)", a.n);
    encode_str("<|endoftext|>", MF_TOK_PARSE_SPECIAL | MF_TOK_ADD_BOS, &a);
    CHECK(a.n == 1 && a.ids[0] == 151643, "ADD_BOS is a no-op for Qwen (add_bos_token false): n=%zu", a.n);
    encode_str("", MF_TOK_PARSE_SPECIAL, &a);
    CHECK(a.n == 0, "empty text gives no tokens");
    free(a.ids);
}

/* ------------------------------------------------------------------ invalid UTF-8 */

static void test_invalid_utf8(void) {
    static const struct {
        const char *in;
        size_t len;
        const char *want; /* sanitized */
    } k[] = {
        {"\xff", 1, "\xef\xbf\xbd"},
        {"a\x80z", 3, "a\xef\xbf\xbdz"},
        {"\xe2\x82", 2, "\xef\xbf\xbd"},                          /* truncated: one subpart */
        {"\xe2\x82z", 3, "\xef\xbf\xbdz"},
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate: ED alone is the subpart */
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},               /* overlong */
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf0\x9f\x98" "a\xf0\x9f\x98\x80", 8, "\xef\xbf\xbd" "a\xf0\x9f\x98\x80"},
        {"ok \xe4\xb8\xad", 6, "ok \xe4\xb8\xad"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(k); i++) {
        char *o = NULL;
        size_t ol = 0;
        CHECK(mf_tok_utf8_sanitize(k[i].in, k[i].len, &o, &ol, NULL) == 0, "sanitize");
        CHECK(ol == strlen(k[i].want) && !memcmp(o, k[i].want, ol), "case %zu: sanitized to %zu bytes", i, ol);
        if (g_tok) {
            mf_tok_ids a = {0}, b = {0};
            mf_error err = {0};
            CHECK(mf_tok_encode(g_tok, k[i].in, k[i].len, MF_TOK_PARSE_SPECIAL, &a, &err) == 0, "%s", err.msg);
            CHECK(mf_tok_encode(g_tok, o, ol, MF_TOK_PARSE_SPECIAL, &b, &err) == 0, "%s", err.msg);
            CHECK(a.n == b.n && !memcmp(a.ids, b.ids, a.n * sizeof(int32_t)), "case %zu: tok(bytes) != tok(lossy)", i);
            free(a.ids);
            free(b.ids);
        }
        free(o);
    }
    if (!g_tok) return;
    /* every byte value, alone and in runs, with a special token in the middle: never fails */
    char buf[600];
    size_t n = 0;
    for (int b = 0; b < 256; b++) buf[n++] = (char)b;
    memcpy(buf + n, "<|im_end|>", 10);
    n += 10;
    for (int b = 255; b >= 0; b--) buf[n++] = (char)b;
    mf_tok_ids a = {0};
    mf_error err = {0};
    CHECK(mf_tok_encode(g_tok, buf, n, MF_TOK_PARSE_SPECIAL, &a, &err) == 0, "%s", err.msg);
    bool has_end = false;
    for (size_t i = 0; i < a.n; i++) has_end |= a.ids[i] == 151645;
    CHECK(has_end, "the special token between invalid bytes is still found");
    free(a.ids);
}

/* ------------------------------------------------------------------ refusals */

static mf_str S(const char *s) { return (mf_str){s, strlen(s)}; }

static void test_refusals(void) {
    mf_str toks[256];
    char store[256][4];
    for (int b = 0; b < 256; b++) {
        int l = 0;
        uint32_t cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (uint32_t)b
                      : b <= 32                                                  ? 256u + (uint32_t)b
                      : b <= 160                                                 ? 256u + 33u + (uint32_t)b - 127u
                                                                                 : 256u + 67u;
        if (cp < 0x80) store[b][l++] = (char)cp;
        else {
            store[b][l++] = (char)(0xC0 | (cp >> 6));
            store[b][l++] = (char)(0x80 | (cp & 0x3F));
        }
        toks[b] = (mf_str){store[b], (uint64_t)l};
    }
    mf_tok_spec sp = {.model = "gpt2", .pre = "qwen2", .n_tokens = 256, .tokens = toks, .bos = -1, .eos = -1, .eot = -1, .pad = -1};
    mf_tok *t = NULL;
    mf_error err = {0};
    CHECK(mf_tok_new(&sp, &t, &err) == 0, "byte-only vocab: %s", err.msg);
    if (t) {
        mf_tok_ids a = {0};
        CHECK(mf_tok_encode(t, "hi", 2, 0, &a, &err) == 0 && a.n == 2, "no merges: one token per byte");
        free(a.ids);
        mf_tok_free(t);
    }
    sp.pre = "llama-bpe";
    CHECK(mf_tok_new(&sp, &t, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "llama-bpe") && strstr(err.msg, "qwen2"),
          "pre refusal: %s", err.msg);
    sp.pre = "qwen2";
    sp.model = "llama";
    CHECK(mf_tok_new(&sp, &t, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "'llama'") && strstr(err.msg, "gpt2"),
          "model refusal: %s", err.msg);
    sp.model = "gpt2";
    mf_str merges[1] = {S("a zz")};
    sp.merges = merges;
    sp.n_merges = 1;
    CHECK(mf_tok_new(&sp, &t, &err) == MF_E_FORMAT && strstr(err.msg, "merge #0"), "bad merge: %s", err.msg);
    sp.n_merges = 0;
    sp.n_tokens = 200;
    CHECK(mf_tok_new(&sp, &t, &err) == MF_E_FORMAT, "too few tokens: %s", err.msg);
    sp.n_tokens = 256;
    sp.eos = 300;
    CHECK(mf_tok_new(&sp, &t, &err) == MF_E_FORMAT && strstr(err.msg, "300"), "eos out of range: %s", err.msg);
    sp.eos = -1;

    /* through a GGUF: an unknown pre-tokenizer is refused by name */
    char path[1024];
    snprintf(path, sizeof path, "%s/tok_bad_pre.gguf", mf_test_tmpdir());
    const char *cs[256];
    char cstore[256][5];
    for (int b = 0; b < 256; b++) {
        memcpy(cstore[b], toks[b].ptr, toks[b].len);
        cstore[b][toks[b].len] = 0;
        cs[b] = cstore[b];
    }
    int32_t types[256];
    for (int b = 0; b < 256; b++) types[b] = 1;
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer");
    mf_gguf_writer_set_str(w, "general.architecture", "qwen3");
    mf_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    mf_gguf_writer_set_str(w, "tokenizer.ggml.pre", "llama-bpe");
    mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", cs, 256);
    mf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MF_GGUF_INT32, types, 256);
    mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", cs, 0);
    int rc = mf_gguf_writer_begin(w, path, &err);
    if (!rc) rc = mf_gguf_writer_end(w, &err);
    mf_gguf_writer_free(w);
    REQUIRE(rc == 0, "writing %s: %s", path, err.msg);
    CHECK(mf_tok_load_file(path, &t, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "llama-bpe"), "gguf pre: %s", err.msg);
    CHECK(mf_tok_load_file("/nonexistent/x.gguf", &t, &err) < 0 && t == NULL, "missing file");
}

/* ------------------------------------------------------------------ chat */

static void test_chat_goldens(void) {
    REQUIRE(g_chat, "tests/golden/tok/chat.json missing or not JSON");
    const cJSON *cases = cJSON_GetObjectItem(g_chat, "cases");
    int n = 0, ok = 0, n_tools = 0;
    for (const cJSON *c = cases->child; c; c = c->next) {
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        size_t nm = (size_t)cJSON_GetArraySize(msgs), i = 0;
        mf_chat_msg *m = calloc(nm, sizeof *m);
        for (const cJSON *e = msgs->child; e; e = e->next, i++) {
            m[i].role = cJSON_GetObjectItem(e, "role")->valuestring;
            m[i].content = cJSON_GetObjectItem(e, "content")->valuestring;
            const cJSON *r = cJSON_GetObjectItem(e, "reasoning_content");
            m[i].reasoning_content = cJSON_IsString(r) ? r->valuestring : NULL;
            /* the calls as a client sends them: OpenAI's arguments string */
            const cJSON *calls = cJSON_GetObjectItem(e, "tool_calls");
            size_t nc = (size_t)cJSON_GetArraySize(calls), k = 0;
            mf_chat_tool_call *tc = nc ? calloc(nc, sizeof *tc) : NULL;
            for (const cJSON *q = calls ? calls->child : NULL; q; q = q->next, k++) {
                const cJSON *fn = cJSON_GetObjectItem(q, "function");
                tc[k].name = cJSON_GetObjectItem(fn, "name")->valuestring;
                tc[k].arguments = cJSON_GetObjectItem(fn, "arguments")->valuestring;
            }
            m[i].tool_calls = tc, m[i].n_tool_calls = nc;
        }
        /* the tools as the server passes them: cJSON's compact print of each definition */
        const cJSON *tools = cJSON_GetObjectItem(c, "tools");
        size_t nt = (size_t)cJSON_GetArraySize(tools), t = 0;
        char **tj = nt ? calloc(nt, sizeof *tj) : NULL;
        for (const cJSON *q = tools ? tools->child : NULL; q; q = q->next) tj[t++] = cJSON_PrintUnformatted(q);
        n_tools += nt > 0;
        const cJSON *et = cJSON_GetObjectItem(c, "enable_thinking");
        mf_chat_opts o = {.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")),
                          .enable_thinking = cJSON_IsBool(et) ? cJSON_IsTrue(et) : -1,
                          .tools = (const char *const *)tj,
                          .n_tools = nt};
        static const struct {
            const char *key;
            mf_chat_format f;
        } fs[] = {{"qwen3", MF_CHAT_QWEN3}, {"qwen25", MF_CHAT_QWEN25}, {"chatml", MF_CHAT_CHATML}};
        for (size_t k = 0; k < 3; k++) {
            const cJSON *want = cJSON_GetObjectItem(c, fs[k].key);
            if (!cJSON_IsString(want)) continue;
            n++;
            char *out = NULL;
            size_t ol = 0;
            mf_error err = {0};
            CHECK(mf_chat_render(fs[k].f, m, nm, &o, &out, &ol, &err) == 0, "%s", err.msg);
            if (out && !strcmp(out, want->valuestring) && ol == strlen(out)) ok++;
            else
                CHECK(false, "conv %d (%s, gen %d, thinking %d):\n    got  %s\n    want %s",
                      cJSON_GetObjectItem(c, "conv")->valueint, fs[k].key, o.add_generation_prompt, o.enable_thinking, out,
                      want->valuestring);
            free(out);
        }
        for (size_t q = 0; q < nm; q++) free((void *)m[q].tool_calls);
        for (size_t q = 0; q < nt; q++) cJSON_free(tj[q]);
        free(tj);
        free(m);
    }
    printf("  chat renderings equal to the Jinja goldens: %d of %d (%d cases with tools)\n", ok, n, n_tools);
    CHECK(n >= 150 && n_tools >= 30, "only %d renderings, %d with tools", n, n_tools);
}

/* Tools reach the prompt as transformers' tojson (Python's json.dumps) writes them; the expected texts
 * below are what json.dumps(json.loads(input), ensure_ascii=False) printed (Python 3.11). */
static void test_pyjson_writes_what_json_dumps_writes(void) {
    static const struct {
        const char *in, *want;
    } k[] = {
        {"{\"a\":1,\"b\":[true,false,null]}", "{\"a\": 1, \"b\": [true, false, null]}"},
        {" { \"k\" : [ 1 , 2 ] , \"e\" : { } , \"f\" : [ ] } ", "{\"k\": [1, 2], \"e\": {}, \"f\": []}"},
        {"[-0, -0.0, 0.0, 1E2, 1.5e-3, 0.1, 1e16, 1e15, 1.25e-5, 0.0001, 123456789.125, 5e-324, "
         "1.7976931348623157e308, 1e400, -1e400, 2.5E+3, 100000000000000000000000000001]",
         "[0, -0.0, 0.0, 100.0, 0.0015, 0.1, 1e+16, 1000000000000000.0, 1.25e-05, 0.0001, 123456789.125, 5e-324, "
         "1.7976931348623157e+308, Infinity, -Infinity, 2500.0, 100000000000000000000000000001]"},
        {"\"\\u00e9\\/\\ud83d\\ude00 \\u0000\\u001f\\u007f\\b\\f\\n\\r\\t\\\"\\\\ \\u2028\"",
         "\"\xc3\xa9/\xf0\x9f\x98\x80 \\u0000\\u001f\x7f\\b\\f\\n\\r\\t\\\"\\\\ \xe2\x80\xa8\""},
        {"\"\xc3\xa9 \xf0\x9f\x98\x80 </tools>\"", "\"\xc3\xa9 \xf0\x9f\x98\x80 </tools>\""},
        {"\"\\ud800 lone\"", "\"\\ud800 lone\""}, /* Python holds a lone surrogate; it has no UTF-8 */
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(k); i++) {
        char *out = NULL;
        size_t n = 0;
        mf_error err = {0};
        CHECK(mf_pyjson(k[i].in, strlen(k[i].in), &out, &n, &err) == 0, "%zu: %s", i, err.msg);
        CHECK(out && !strcmp(out, k[i].want) && n == strlen(k[i].want), "%zu:\n    got  %s\n    want %s", i, out,
              k[i].want);
        free(out);
    }
    static const char *const bad[] = {"", "{\"a\":", "[1,]", "\"\\x\"", "01", "1.", "\"\x01\"", "[1 2]", "{\"a\" 1}",
                                      "nul", "\"abc", "\"\xff\"", "1 2", "{\"a\":1,}", "-", "\"\\u12\"", "{1:2}"};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        char *out = NULL;
        mf_error err = {0};
        CHECK(mf_pyjson(bad[i], strlen(bad[i]), &out, NULL, &err) == MF_E_INVAL && !out && strstr(err.msg, "at byte"),
              "'%s' must be refused: %s", bad[i], err.msg);
    }
    char deep[600]; /* nesting is bounded: a hostile request cannot recurse the stack away */
    memset(deep, '[', 300), memset(deep + 300, ']', 300);
    char *out = NULL;
    mf_error err = {0};
    CHECK(mf_pyjson(deep, 600, &out, NULL, &err) == MF_E_INVAL && strstr(err.msg, "256 levels"), "%s", err.msg);
}

/* Plain ChatML has no tool format: tools and calls are refused there, never dropped; a tool or arguments
 * that are not JSON are refused with where. */
static void test_chat_tools_refused_where_not_rendered(void) {
    mf_chat_tool_call call = {.name = "f", .arguments = "{\"x\": 1}"};
    mf_chat_msg m[2] = {{.role = "user", .content = "hi"},
                        {.role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1}};
    const char *tools[] = {"{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"};
    mf_chat_opts o = {.add_generation_prompt = true, .enable_thinking = -1, .tools = tools, .n_tools = 1};
    char *out = NULL;
    mf_error err = {0};
    CHECK(mf_chat_render(MF_CHAT_CHATML, m, 1, &o, &out, NULL, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "tools") &&
              !out,
          "chatml with tools: %s", err.msg);
    mf_chat_opts plain = {.add_generation_prompt = true, .enable_thinking = -1};
    CHECK(mf_chat_render(MF_CHAT_CHATML, m, 2, &plain, &out, NULL, &err) == MF_E_UNSUPPORTED &&
              strstr(err.msg, "tool calls"),
          "chatml with a call: %s", err.msg);
    const char *broken[] = {"{\"type\":\"function\",}"};
    o.tools = broken;
    for (int f = 0; f < 2; f++) {
        mf_chat_format fmt = f ? MF_CHAT_QWEN3 : MF_CHAT_QWEN25;
        CHECK(mf_chat_render(fmt, m, 1, &o, &out, NULL, &err) == MF_E_INVAL && strstr(err.msg, "tool 0") &&
                  strstr(err.msg, "at byte 19"),
              "broken tool: %s", err.msg);
        call.arguments = "{x: 1}";
        CHECK(mf_chat_render(fmt, m, 2, &plain, &out, NULL, &err) == MF_E_INVAL &&
                  strstr(err.msg, "message 1, tool call 0, arguments"),
              "broken arguments: %s", err.msg);
        call.arguments = "{\"x\": 1}";
    }
}

static void test_chat_detect(void) {
    mf_chat_format f = MF_CHAT_AUTO;
    mf_error err = {0};
    char *q3 = mf_test_slurp("tests/golden/tok/qwen3.jinja", NULL), *q25 = mf_test_slurp("tests/golden/tok/qwen2.5.jinja", NULL);
    REQUIRE(q3 && q25, "template fixtures missing");
    CHECK(mf_chat_detect(q3, strlen(q3), &f, &err) == 0 && f == MF_CHAT_QWEN3, "qwen3: %s", err.msg);
    CHECK(mf_chat_detect(q25, strlen(q25), &f, &err) == 0 && f == MF_CHAT_QWEN25, "qwen2.5: %s", err.msg);
    if (g_tok) {
        const char *t = mf_tok_chat_template(g_tok);
        CHECK(t && mf_chat_detect(t, strlen(t), &f, &err) == 0 && f == MF_CHAT_QWEN3, "the GGUF's template: %s", err.msg);
    }
    /* a Qwen3 template whose thinking switch was edited out is not claimed */
    char *edited = strdup(q3), *p = strstr(edited, "enable_thinking is false");
    REQUIRE(p, "fixture lacks enable_thinking");
    memcpy(p, "enable_thinking is true ", 24);
    CHECK(mf_chat_detect(edited, strlen(edited), &f, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "--chat-template chatml"),
          "edited: %s", err.msg);
    const char *llama3 = "{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>{% endfor %}";
    CHECK(mf_chat_detect(llama3, strlen(llama3), &f, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "--chat-template chatml"),
          "unknown: %s", err.msg);
    CHECK(mf_chat_detect(NULL, 0, &f, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "--chat-template chatml"), "none: %s",
          err.msg);
    /* the template is (pointer, length), not a C string: the refusal quotes only those bytes (the quote
     * once read on to the next NUL, past the buffer; fuzz_chat found it) */
    char unterminated[64];
    memset(unterminated, 'Z', sizeof unterminated);
    memcpy(unterminated, "{{x}}", 5);
    CHECK(mf_chat_detect(unterminated, 5, &f, &err) == MF_E_UNSUPPORTED && strstr(err.msg, "starting '{{x}}'") &&
              !strchr(err.msg, 'Z'),
          "unterminated: %s", err.msg);
    CHECK(mf_chat_format_parse("chatml", &f, &err) == 0 && f == MF_CHAT_CHATML, "parse chatml");
    CHECK(mf_chat_format_parse("qwen2.5", &f, &err) == 0 && f == MF_CHAT_QWEN25, "parse qwen2.5");
    CHECK(mf_chat_format_parse("qwen3", &f, &err) == 0 && f == MF_CHAT_QWEN3, "parse qwen3");
    CHECK(mf_chat_format_parse("llama3", &f, &err) == MF_E_INVAL && strstr(err.msg, "chatml"), "parse unknown: %s", err.msg);
    mf_chat_msg m = {.role = "user", .content = "hi"};
    char *out = NULL;
    CHECK(mf_chat_render(MF_CHAT_AUTO, &m, 1, NULL, &out, NULL, &err) == MF_E_INVAL, "auto must be resolved first");
    CHECK(mf_chat_render(MF_CHAT_QWEN3, &m, 0, NULL, &out, NULL, &err) == MF_E_INVAL, "no messages");
    /* the thinking switch, spelled out */
    mf_chat_opts o = {.add_generation_prompt = true, .enable_thinking = 0};
    CHECK(mf_chat_render(MF_CHAT_QWEN3, &m, 1, &o, &out, NULL, &err) == 0 &&
              !strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
          "enable_thinking=false: %s", out);
    free(out);
    free(edited);
    free(q3);
    free(q25);
}

/* ------------------------------------------------------------------ a long text */

static void test_long_text(void) {
    if (!g_tok) SKIP("no vocabulary");
    REQUIRE(g_corpus, "no corpus");
    /* the whole corpus joined, 8 times: one call, roundtrip exact (after NFC) */
    size_t cap = 1 << 20, n = 0;
    char *big = malloc(cap);
    for (int rep = 0; rep < 8; rep++)
        for (const cJSON *c = cJSON_GetObjectItem(g_corpus, "cases")->child; c; c = c->next) {
            size_t len;
            char *t = case_text(c, &len);
            if (n + len + 1 >= cap) big = realloc(big, cap *= 2);
            memcpy(big + n, t, len);
            n += len;
            big[n++] = '\n';
            free(t);
        }
    mf_tok_ids ids = {0};
    mf_error err = {0};
    CHECK(mf_tok_encode(g_tok, big, n, MF_TOK_PARSE_SPECIAL, &ids, &err) == 0, "%s", err.msg);
    char *dec = NULL, *nf = NULL;
    size_t dl = 0, nl = 0;
    CHECK(mf_tok_decode(g_tok, ids.ids, ids.n, MF_TOK_DECODE_SPECIAL, &dec, &dl, &err) == 0, "%s", err.msg);
    CHECK(mf_tok_nfc(big, n, &nf, &nl, &err) == 0, "%s", err.msg);
    CHECK(dec && nf && dl == nl && !memcmp(dec, nf, nl), "long roundtrip (%zu bytes, %zu tokens)", n, ids.n);
    printf("  %zu bytes -> %zu tokens\n", n, ids.n);
    free(dec);
    free(nf);
    free(ids.ids);
    free(big);
}

int main(void) {
    g_corpus = load_json("tests/golden/tok/tokenize.json");
    g_chat = load_json("tests/golden/tok/chat.json");
    RUN(test_load_gguf);
    RUN(test_corpus_hf);
    RUN(test_corpus_llama);
    RUN(test_roundtrip_and_stream);
    RUN(test_stream_holds_partial);
    RUN(test_decode_special_flag);
    RUN(test_special_vs_plain);
    RUN(test_invalid_utf8);
    RUN(test_refusals);
    RUN(test_chat_goldens);
    RUN(test_pyjson_writes_what_json_dumps_writes);
    RUN(test_chat_tools_refused_where_not_rendered);
    RUN(test_chat_detect);
    RUN(test_long_text);
    mf_tok_free(g_tok);
    cJSON_Delete(g_corpus);
    cJSON_Delete(g_chat);
    return mf_test_done();
}
