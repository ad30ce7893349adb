/* Text preparation before BPE: UTF-8 repair, NFC (utf8proc) and the Qwen2 split regex (PCRE2). */
#include "tok/tok_impl.h"

#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

int mf_tok_utf8_sanitize(const char *src, size_t len, char **out, size_t *out_len, mf_error *err) {
    const unsigned char *s = (const unsigned char *)src;
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        int r = mf_utf8_seq(s + i, len - i);
        if (r < 0) bad++, i += (size_t)-r;
        else i += (size_t)r;
    }
    size_t cap = len + bad * 2 + 1; /* each bad subpart (>= 1 byte) becomes 3 bytes */
    char *o = malloc(cap);
    if (!o) return mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for %zu bytes", cap);
    size_t at = mf_utf8_lossy(src, len, o);
    o[at] = 0;
    *out = o;
    *out_len = at;
    return 0;
}

int mf_tok_nfc(const char *src, size_t len, char **out, size_t *out_len, mf_error *err) {
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)src, (utf8proc_ssize_t)len, &dst,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (r < 0) {
        free(dst);
        return mf_err(err, r == UTF8PROC_ERROR_NOMEM ? MF_E_NOMEM : MF_E_INTERNAL,
                      "tokenizer: NFC normalization of %zu bytes failed: %s", len, utf8proc_errmsg(r));
    }
    *out = (char *)dst;
    *out_len = (size_t)r;
    return 0;
}

size_t mf_tok_utf8_complete_prefix(const unsigned char *s, size_t len) {
    /* look back at most 3 bytes for a lead byte whose sequence is cut off by the end */
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = s[len - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead */
        if (c < 0xC2 || c > 0xF4) return len; /* ASCII or a byte that never starts a sequence */
        int r = mf_utf8_seq(s + len - back, back);
        /* an incomplete-but-so-far-valid sequence reports a failure exactly at the end */
        if (r == -(int)back) return len - back;
        return len;
    }
    return len;
}

/* Qwen2's tokenizer.json split regex:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with \s spelled out as Unicode White_Space (what the HF Rust tokenizer and llama.cpp use; PCRE2's
 * UCP \s would add U+180E) and the case-insensitive contractions as explicit [sS] classes, as both
 * llama.cpp and transformers.js rewrite them (so "'ſ" (long s) is not a contraction). */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char k_qwen2_re[] = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                                 "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                 "|\\p{N}"
                                 "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
                                 "|[" WS "]*[\\r\\n]+"
                                 "|[" WS "]+(?![^" WS "])"
                                 "|[" WS "]+";

int mf_tok_pretok_compile(pcre2_code **out, mf_error *err) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)k_qwen2_re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return mf_err(err, MF_E_INTERNAL, "tokenizer: the pre-tokenizer regex does not compile at offset %zu: %s",
                      (size_t)eo, (const char *)msg);
    }
    /* JIT is an optimisation only: where it is unavailable the interpreter gives the same matches */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return 0;
}
