/* tok internals shared by the files of src/tok (not an interface). */
#ifndef MF_TOK_IMPL_H
#define MF_TOK_IMPL_H

#include "tok/tok.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

struct mf_tok {
    int32_t n_vocab;
    /* token text: text_blob + text_off[i], text_len[i] (NUL after each) */
    char *text_blob;
    uint32_t *text_off, *text_len;
    uint8_t *type;
    /* decoded bytes: piece_blob + piece_off[i], piece_len[i] */
    char *piece_blob;
    uint32_t *piece_off, *piece_len;

    /* text -> id: open addressing, slot holds id + 1 (0 = empty) */
    uint32_t *map;
    uint32_t map_mask;

    /* (left, right) -> merge: open addressing over keys; key 0 is never a valid pair key because
     * we store (left + 1, right + 1) */
    uint64_t *mkey;
    uint32_t *mrank;
    int32_t *mres;
    uint32_t m_mask;

    int32_t byte_tok[256];

    /* added tokens recognised in text, sorted by (first byte, length desc) */
    int32_t *added;
    int32_t n_added;
    int32_t added_first[257]; /* added[added_first[b] .. added_first[b+1]) start with byte b */

    int32_t bos, eos, eot, pad, im_end;
    bool add_bos, add_eos;
    pcre2_code *re;
    char *chat_template;
};

/* byte-level mapping (GPT-2 bytes_to_unicode) */
uint32_t mf_tok_byte_to_cp(uint8_t b);
int mf_tok_cp_to_byte(uint32_t cp); /* -1 when cp is not a byte-level char */
/* UTF-8 encode cp into out (>= 4 bytes); returns the byte count */
int mf_tok_utf8_put(uint32_t cp, char *out);
/* decode one code point from valid UTF-8; returns its length */
int mf_tok_utf8_get(const unsigned char *s, size_t len, uint32_t *cp);

/* pre-tokenizer: compile the Qwen2 split regex */
int mf_tok_pretok_compile(pcre2_code **out, mf_error *err);

#endif
