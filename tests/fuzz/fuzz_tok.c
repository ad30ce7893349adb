/* libFuzzer harness: the tokenizer (encode) and the detokenizer (whole and streaming) over the real
 * Qwen3 vocabulary.
 *
 * The vocabulary is built once in LLVMFuzzerInitialize the way mf-genmodel builds it (the generator's
 * tokenizer.json reader writes the tokenizer.* keys into a GGUF with no tensors, in the temp dir,
 * which mf_tok_load_file loads and which is then deleted).  The folder is $MF_FUZZ_TOKENIZER_DIR, by
 * default the repository's tokenizers/qwen3 (compiled in by the Makefile).
 *
 * Input: byte 0 picks the mode, the rest is its data.
 *   mode % 4 == 0, 1   text: encode with the flags from bits 2..3, check what the header promises
 *   mode % 4 == 2      ids: 3 bytes per id, mapped into -8 .. n_vocab+7 (so some are out of range);
 *                      streaming and whole decode with the flags from bit 2
 *   mode % 4 == 3      text, encoded, then decoded in a stream against the whole decode
 *
 * Properties checked (each one written in src/tok/tok.h, none invented here):
 *   - any byte string encodes without error, every id inside the vocabulary;
 *   - tok(bytes) == tok(lossy_utf8(bytes));
 *   - with no added token possible in the text (none of the bytes that start one), detok(tok(s)) ==
 *     NFC(lossy_utf8(s)) and the PARSE_SPECIAL flag changes nothing (this is the roundtrip test_tok
 *     checks on its corpus; with added tokens the NFC runs per segment, so it is not checked there);
 *   - an out-of-range id is MF_E_RANGE for push and for decode;
 *   - the streaming chunks plus the flush are exactly mf_tok_decode of the same (valid) ids, the flush
 *     holds at most 3 bytes, and when the whole text is valid UTF-8 every chunk is too and the flush
 *     is empty (a lead byte that can never complete is passed through, so only then). */
#include "fuzz.h"

#include "gguf/gguf.h"
#include "tok/tok.h"
#include "genmodel.h" /* tools/genmodel: the generator's tokenizer.json reader */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MF_FUZZ_TOKENIZER_DIR
#define MF_FUZZ_TOKENIZER_DIR "tokenizers/qwen3"
#endif

static mf_tok *g_tok;
static int32_t g_n_vocab;
static bool g_added_first[256]; /* bytes an added (CONTROL / USER_DEFINED) token starts with */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    const char *dir = getenv("MF_FUZZ_TOKENIZER_DIR");
    if (!dir || !*dir) dir = MF_FUZZ_TOKENIZER_DIR;
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/mf-fuzz-tok-%ld.gguf", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    int rc = w ? 0 : MF_E_NOMEM;
    if (!rc) rc = gm_tokenizer_add(w, dir, GM_VOCAB, false, &err);
    if (!rc) rc = mf_gguf_writer_begin(w, path, &err);
    if (!rc) rc = mf_gguf_writer_end(w, &err);
    mf_gguf_writer_free(w);
    if (!rc) rc = mf_tok_load_file(path, &g_tok, &err);
    unlink(path);
    if (rc) {
        fprintf(stderr, "fuzz_tok: cannot build the vocabulary from '%s' (set MF_FUZZ_TOKENIZER_DIR to a folder "
                        "holding tokenizer.json and tokenizer_config.json): %s\n",
                dir, err.msg);
        exit(1);
    }
    g_n_vocab = mf_tok_n_vocab(g_tok);
    for (int32_t id = 0; id < g_n_vocab; id++) {
        mf_tok_type ty = mf_tok_type_of(g_tok, id);
        size_t len = 0;
        const char *p = mf_tok_piece(g_tok, id, &len);
        if ((ty == MF_TOKT_CONTROL || ty == MF_TOKT_USER_DEFINED) && len) g_added_first[(uint8_t)p[0]] = true;
    }
    return 0;
}

static bool same_ids(const mf_tok_ids *a, const mf_tok_ids *b) {
    return a->n == b->n && (!a->n || !memcmp(a->ids, b->ids, a->n * sizeof *a->ids));
}

static bool valid_utf8(const char *s, size_t n) {
    char *o = NULL;
    size_t on = 0;
    FAIL_IF(mf_tok_utf8_sanitize(s, n, &o, &on, NULL) != 0);
    bool ok = on == n && !memcmp(o, s, n);
    free(o);
    return ok;
}

/* Streams ids (all valid) through a fresh stream and checks it against the whole decode. */
static void check_stream(const int32_t *ids, size_t n, unsigned flags) {
    mf_error err = {0};
    char *whole = NULL;
    size_t wl = 0;
    FAIL_IF(mf_tok_decode(g_tok, ids, n, flags, &whole, &wl, &err) != 0);
    FAIL_IF(strlen(whole) > wl); /* NUL-terminated; may hold NULs itself */
    bool whole_valid = valid_utf8(whole, wl);
    mf_tok_stream st;
    mf_tok_stream_init(&st, g_tok, flags);
    size_t at = 0;
    const char *o;
    size_t ol;
    for (size_t i = 0; i < n; i++) {
        FAIL_IF(mf_tok_stream_push(&st, ids[i], &o, &ol, &err) != 0);
        FAIL_IF(at + ol > wl || (ol && memcmp(whole + at, o, ol)));
        FAIL_IF(whole_valid && !valid_utf8(o, ol)); /* valid text streams as whole characters */
        at += ol;
    }
    FAIL_IF(mf_tok_stream_flush(&st, &o, &ol, &err) != 0);
    FAIL_IF(ol > 3 || at + ol != wl || (ol && memcmp(whole + at, o, ol)));
    FAIL_IF(whole_valid && ol != 0); /* nothing is held back at the end of valid text */
    /* a flushed stream starts over */
    FAIL_IF(mf_tok_stream_flush(&st, &o, &ol, &err) != 0 || ol != 0);
    mf_tok_stream_free(&st);
    free(whole);
}

static void fuzz_text(const char *text, size_t len, unsigned mode) {
    unsigned flags = ((mode >> 2) & 1 ? MF_TOK_PARSE_SPECIAL : 0) | ((mode >> 3) & 1 ? MF_TOK_ADD_BOS : 0);
    mf_error err = {0};
    mf_tok_ids ids = {0}, ids2 = {0};
    FAIL_IF(mf_tok_encode(g_tok, text, len, flags, &ids, &err) != 0);
    for (size_t i = 0; i < ids.n; i++) FAIL_IF(ids.ids[i] < 0 || ids.ids[i] >= g_n_vocab);

    char *clean = NULL;
    size_t cl = 0;
    FAIL_IF(mf_tok_utf8_sanitize(text, len, &clean, &cl, &err) != 0);
    FAIL_IF(mf_tok_encode(g_tok, clean, cl, flags, &ids2, &err) != 0);
    FAIL_IF(!same_ids(&ids, &ids2));

    bool may_have_added = false;
    for (size_t i = 0; i < len; i++) may_have_added |= g_added_first[(uint8_t)text[i]];
    if (!may_have_added && !(flags & MF_TOK_ADD_BOS)) {
        ids2.n = 0;
        FAIL_IF(mf_tok_encode(g_tok, text, len, flags ^ MF_TOK_PARSE_SPECIAL, &ids2, &err) != 0);
        FAIL_IF(!same_ids(&ids, &ids2));
        char *dec = NULL, *nfc = NULL;
        size_t dl = 0, nl = 0;
        FAIL_IF(mf_tok_decode(g_tok, ids.ids, ids.n, MF_TOK_DECODE_SPECIAL, &dec, &dl, &err) != 0);
        FAIL_IF(mf_tok_nfc(clean, cl, &nfc, &nl, &err) != 0);
        FAIL_IF(dl != nl || memcmp(dec, nfc, dl));
        free(dec);
        free(nfc);
    }
    if ((mode & 3) == 3) check_stream(ids.ids, ids.n, (mode >> 4) & 1 ? MF_TOK_DECODE_SPECIAL : 0);
    free(clean);
    free(ids.ids);
    free(ids2.ids);
}

static void fuzz_ids(const uint8_t *d, size_t size, unsigned mode) {
    unsigned flags = (mode >> 2) & 1 ? MF_TOK_DECODE_SPECIAL : 0;
    size_t n = size / 3;
    int32_t *all = malloc((n ? n : 1) * sizeof *all), *valid = malloc((n ? n : 1) * sizeof *valid);
    FAIL_IF(!all || !valid);
    size_t nv = 0;
    bool any_bad = false;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)d[3 * i] | (uint32_t)d[3 * i + 1] << 8 | (uint32_t)d[3 * i + 2] << 16;
        int32_t id = (int32_t)(v % (uint32_t)(g_n_vocab + 16)) - 8;
        all[i] = id;
        if (id >= 0 && id < g_n_vocab) valid[nv++] = id;
        else any_bad = true;
    }
    mf_error err = {0};
    /* every id, bad ones included: bad ones are refused, naming the id */
    mf_tok_stream st;
    mf_tok_stream_init(&st, g_tok, flags);
    const char *o;
    size_t ol;
    for (size_t i = 0; i < n; i++) {
        int rc = mf_tok_stream_push(&st, all[i], &o, &ol, &err);
        bool bad = all[i] < 0 || all[i] >= g_n_vocab;
        FAIL_IF(bad ? rc != MF_E_RANGE : rc != 0);
    }
    (void)mf_tok_stream_flush(&st, &o, &ol, &err);
    mf_tok_stream_free(&st);
    char *whole = NULL;
    size_t wl;
    int rc = mf_tok_decode(g_tok, all, n, flags, &whole, &wl, &err);
    FAIL_IF(any_bad ? rc != MF_E_RANGE || whole != NULL : rc != 0);
    free(whole);

    check_stream(valid, nv, flags);
    free(all);
    free(valid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    unsigned mode = data[0];
    if ((mode & 3) == 2) fuzz_ids(data + 1, size - 1, mode);
    else fuzz_text((const char *)data + 1, size - 1, mode);
    return 0;
}
