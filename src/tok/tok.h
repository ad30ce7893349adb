/* tok: the tokenizer (byte-level BPE with the Qwen2 pre-tokenizer, added/special tokens), the
 * detokenizer (whole and streaming) and the chat templates (ChatML as Qwen2.5 and Qwen3 render it).
 *
 * Encoding follows the HF `tokenizers` pipeline of Qwen's tokenizer.json:
 *   1. added tokens are cut out of the raw text first (leftmost, longest match);
 *   2. every other segment is NFC-normalized, split by the Qwen2 regex and byte-level BPE encoded.
 * Input bytes that are not valid UTF-8 are replaced by U+FFFD before step 2, one U+FFFD per maximal
 * ill-formed subpart (the Unicode / WHATWG rule, as JS TextDecoder and Python errors='replace' do); so
 * any byte string encodes without error, and `tok(bytes) == tok(lossy_utf8(bytes))`.
 *
 * Which added tokens are recognised: with MF_TOK_PARSE_SPECIAL every CONTROL and USER_DEFINED token
 * (what HF does, and what chat prompts need); without it only USER_DEFINED ones (<think>,
 * <tool_call> ...) while CONTROL tokens (<|im_start|>, <|endoftext|> ...) are plain text — the same
 * split llama.cpp makes with parse_special=false.  Token types are GGUF's tokenizer.ggml.token_type. */
#ifndef MF_TOK_H
#define MF_TOK_H

#include "core/core.h"
#include "gguf/gguf.h"

/* GGUF tokenizer.ggml.token_type values */
typedef enum {
    MF_TOKT_UNDEFINED = 0,
    MF_TOKT_NORMAL = 1,
    MF_TOKT_UNKNOWN = 2,
    MF_TOKT_CONTROL = 3,
    MF_TOKT_USER_DEFINED = 4,
    MF_TOKT_UNUSED = 5,
    MF_TOKT_BYTE = 6,
} mf_tok_type;

typedef struct mf_tok mf_tok;

/* A vocabulary given as arrays (what the GGUF holds): used by the GGUF loader and by tests. */
typedef struct {
    const char *model;           /* tokenizer.ggml.model: only "gpt2" (byte-level BPE) */
    const char *pre;             /* tokenizer.ggml.pre: "qwen2" or "deepseek-r1-qwen" */
    uint64_t n_tokens;
    const mf_str *tokens;        /* token text, byte-level mapped as in tokenizer.json */
    const int32_t *types;        /* mf_tok_type per token (NULL: all NORMAL) */
    uint64_t n_merges;
    const mf_str *merges;        /* "left right", rank = index */
    int32_t bos, eos, eot, pad;  /* -1 = none; eot -1 is looked up by text (<|im_end|>) */
    bool add_bos;
    bool add_eos;                /* tokenizer.ggml.add_eos_token (embedding models: Qwen3-Embedding) */
    const char *chat_template;   /* may be NULL; copied */
    uint64_t chat_template_len;
} mf_tok_spec;

int mf_tok_new(const mf_tok_spec *spec, mf_tok **out, mf_error *err);
/* Reads tokenizer.ggml.* (model, pre, tokens, token_type, merges, bos/eos/eot/padding ids,
 * add_bos_token, add_eos_token, chat_template).  Unknown model/pre values are refused, naming what is supported. */
int mf_tok_load_gguf(const mf_gguf *g, mf_tok **out, mf_error *err);
int mf_tok_load_file(const char *gguf_path, mf_tok **out, mf_error *err);
void mf_tok_free(mf_tok *t);

int32_t mf_tok_n_vocab(const mf_tok *t);
int32_t mf_tok_bos(const mf_tok *t); /* -1 when the model has none */
int32_t mf_tok_eos(const mf_tok *t);
int32_t mf_tok_eot(const mf_tok *t);
int32_t mf_tok_pad(const mf_tok *t);
bool mf_tok_add_bos(const mf_tok *t);
bool mf_tok_add_eos(const mf_tok *t);
mf_tok_type mf_tok_type_of(const mf_tok *t, int32_t id); /* MF_TOKT_UNDEFINED for an id out of range */
/* The token's text as stored in the vocabulary (byte-level mapped, "Ġhello"); NULL if out of range. */
const char *mf_tok_text(const mf_tok *t, int32_t id, size_t *len);
int32_t mf_tok_find(const mf_tok *t, const char *text, size_t len); /* id of the exact text or -1 */
/* The model's tokenizer.chat_template (NUL-terminated) or NULL. */
const char *mf_tok_chat_template(const mf_tok *t);

/* --- encoding --- */
enum {
    MF_TOK_PARSE_SPECIAL = 1 << 0, /* recognise CONTROL tokens in the text (chat prompts) */
    MF_TOK_ADD_BOS = 1 << 1,       /* llama.cpp's add_special: prepend BOS when the model asks for it
                                      (add_bos_token), append EOS when it asks for that (add_eos_token) */
};

/* A growable id list; free(ids->ids) when done.  Encode appends to it. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} mf_tok_ids;

int mf_tok_encode(const mf_tok *t, const char *text, size_t len, unsigned flags, mf_tok_ids *out,
                  mf_error *err);
/* Appends one id (MF_E_NOMEM naming the count when the list cannot grow). */
int mf_tok_ids_push(mf_tok_ids *o, int32_t id, mf_error *err);

/* --- decoding --- */
enum {
    MF_TOK_DECODE_SPECIAL = 1 << 0, /* render CONTROL tokens' text (otherwise they render as nothing) */
};
/* The bytes one token decodes to (byte-level unmapped; added tokens as written).  CONTROL tokens give
 * their text regardless of flags here.  NULL if id is out of range. */
const char *mf_tok_piece(const mf_tok *t, int32_t id, size_t *len);
/* Decodes ids to bytes (malloc'd, NUL-terminated, *len without the NUL).  An id out of range is
 * MF_E_RANGE naming it and the vocabulary size. */
int mf_tok_decode(const mf_tok *t, const int32_t *ids, size_t n, unsigned flags, char **out, size_t *len,
                  mf_error *err);

/* Streaming detokenizer: push one id at a time and get the bytes that are ready.  A trailing
 * incomplete UTF-8 sequence (a lead byte whose continuation bytes have not arrived yet) is held back
 * until a later token completes it, so every chunk ends on a character boundary while the text is
 * valid.  Bytes that can never form a character are passed through as they are: the concatenation
 * of every chunk and the final flush is exactly mf_tok_decode of the same ids. */
typedef struct {
    const mf_tok *tok;
    unsigned flags;
    unsigned char held[4];
    size_t n_held;
    char *buf;
    size_t cap;
} mf_tok_stream;

void mf_tok_stream_init(mf_tok_stream *s, const mf_tok *t, unsigned flags);
/* *out points into the stream's buffer, valid until the next call. */
int mf_tok_stream_push(mf_tok_stream *s, int32_t id, const char **out, size_t *len, mf_error *err);
/* Returns what is still held back (an incomplete sequence at the very end) and resets. */
int mf_tok_stream_flush(mf_tok_stream *s, const char **out, size_t *len, mf_error *err);
void mf_tok_stream_free(mf_tok_stream *s);

/* --- text utilities (exposed for tests) --- */
/* Valid UTF-8 copy of src: each maximal ill-formed subpart becomes U+FFFD.  malloc'd, NUL-terminated. */
int mf_tok_utf8_sanitize(const char *src, size_t len, char **out, size_t *out_len, mf_error *err);
/* NFC of valid UTF-8 (utf8proc).  malloc'd, NUL-terminated. */
int mf_tok_nfc(const char *src, size_t len, char **out, size_t *out_len, mf_error *err);
/* Length of the longest prefix of s that does not end inside an incomplete UTF-8 sequence. */
size_t mf_tok_utf8_complete_prefix(const unsigned char *s, size_t len);

/* --- chat templates --- */
typedef enum {
    MF_CHAT_AUTO = 0,  /* recognise the model's tokenizer.chat_template */
    MF_CHAT_CHATML,    /* plain ChatML: turns and the generation prompt, nothing else */
    MF_CHAT_QWEN25,    /* Qwen2.5 Instruct: default system prompt when none is given */
    MF_CHAT_QWEN3,     /* Qwen3: reasoning_content / <think> handling, enable_thinking */
} mf_chat_format;

typedef struct {
    const char *role;              /* "system", "user", "assistant", "tool" */
    const char *content;           /* NUL-terminated */
    const char *reasoning_content; /* Qwen3 only; NULL = not given */
    const mf_chat_tool_call *tool_calls; /* an assistant turn's calls (name, arguments as JSON text) */
    size_t n_tool_calls;
} mf_chat_msg;

typedef struct {
    bool add_generation_prompt;
    int enable_thinking; /* -1 = not given (template default), 0 = false, 1 = true */
    const char *const *tools; /* each tool's definition as JSON text; written as transformers' tojson does */
    size_t n_tools;
} mf_chat_opts;

/* "auto", "chatml", "qwen2.5" (also "qwen25"), "qwen3" */
int mf_chat_format_parse(const char *name, mf_chat_format *out, mf_error *err);
const char *mf_chat_format_name(mf_chat_format f);
/* Recognise a Jinja chat template.  NULL/empty or unknown -> MF_E_UNSUPPORTED whose message names
 * the way out (--chat-template chatml). */
int mf_chat_detect(const char *tmpl, size_t len, mf_chat_format *out, mf_error *err);
/* Renders exactly what the model's Jinja template renders for these messages, tools and tool calls (Qwen2.5
 * writes a call's arguments as tojson of the parsed JSON, Qwen3 as the text given; plain ChatML refuses
 * tools and calls with MF_E_UNSUPPORTED, a tool or arguments that are not JSON are MF_E_INVAL).
 * format must not be MF_CHAT_AUTO (resolve it with mf_chat_detect first).  *out malloc'd. */
int mf_chat_render(mf_chat_format f, const mf_chat_msg *msgs, size_t n, const mf_chat_opts *opts, char **out,
                   size_t *out_len, mf_error *err);

#endif
