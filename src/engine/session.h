/* Session files (docs/SESSION.md): the container's parser and its checksum, apart from the context so the
 * fuzz harness and the tests reach them over a plain buffer.  mf_session_save / mf_session_load (the
 * public API in minfer.h) are built on these. */
#ifndef MF_ENGINE_SESSION_H
#define MF_ENGINE_SESSION_H

#include "core/core.h"
#include "core/rope.h"

#define MF_SESSION_MAGIC "MFSESS\r\n" /* 8 bytes; the CR LF catches a text-mode copy */
#define MF_SESSION_VERSION 1u
#define MF_SESSION_HEADER_BYTES 184u
#define MF_SESSION_FLAG_RNG 1u
#define MF_SESSION_FLAG_ROT_K 2u /* the K rows are held rotated (llama.cpp's attention rotation, core/hadamard.h) */
#define MF_SESSION_FLAG_ROT_V 4u /* the V rows are */
/* the K rows were roped otherwise than the model's own rope (--rope-* or --yarn-* overrides): offset 148 holds the
 * fingerprint of that rope (mf_session_rope_fp); without the bit the rope is the model's own */
#define MF_SESSION_FLAG_ROPE 8u
/* the sampler runs Mirostat: offset 76 holds its mu (f32 bits, finite); without the bit offset 76 is 0 */
#define MF_SESSION_FLAG_MU 16u

/* What a file says about the model and the KV store it was written with. */
typedef struct {
    char arch[32]; /* NUL-terminated */
    int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    uint64_t tensor_hash; /* mf_session_tensor_hash of the model's GGUF tensor index */
    uint32_t type_k, type_v;
    uint64_t n_embd_k, n_embd_v, row_k, row_v;
    bool rot_k, rot_v; /* rows rotated (header flags; only quantized rows can be) */
    bool rope_own;     /* the K rows carry the model's own rope (no MF_SESSION_FLAG_ROPE) ... */
    uint32_t rope_fp;  /* ... else this fingerprint of the rope they carry */
} mf_session_fp;

/* The low 32 bits of XXH64 over the rope's resolved values (n_rot, mode, and the f32 bits of freq_base,
 * freq_scale, ext_factor, attn_factor, corr_dims): two ropes that rope a K row alike have the same one. */
uint32_t mf_session_rope_fp(const mf_rope *r);

/* A parsed file: the header's values and where each section starts in the buffer.  Every extent lies in
 * the buffer, the checksum matched, positions rise strictly from >= 0, tokens are in [0, n_vocab). */
typedef struct {
    mf_session_fp fp;
    int32_t n_cells, n_tokens;
    uint64_t app_len;
    bool has_rng;
    uint64_t rng[4];
    bool has_mu;
    float mu; /* Mirostat's mu (MF_SESSION_FLAG_MU) */
    const uint8_t *pos, *tokens, *app, *layers; /* little-endian int32 arrays; app bytes; K/V rows */
    uint64_t size;
} mf_session_view;

/* Structure only (no model): magic, version, header, exact length (a short file is refused naming the
 * section it ends in and the offset), checksum, positions, tokens, RNG state.  MF_E_FORMAT. */
int mf_session_parse(const void *data, size_t size, mf_session_view *v, mf_error *err);

/* Row i (in position order) of layer l: a pointer into the view's buffer. */
const uint8_t *mf_session_k_row(const mf_session_view *v, int32_t layer, int32_t i);
const uint8_t *mf_session_v_row(const mf_session_view *v, int32_t layer, int32_t i);
int32_t mf_session_pos(const mf_session_view *v, int32_t i);
int32_t mf_session_token(const mf_session_view *v, int32_t i);

/* XXH64 (Yann Collet's xxHash, 64-bit), streaming: the file's checksum and the tensor index hash. */
typedef struct {
    uint64_t total, v[4];
    uint8_t mem[32];
    uint32_t mem_n;
    uint64_t seed;
} mf_xxh64_state;
void mf_xxh64_init(mf_xxh64_state *s, uint64_t seed);
void mf_xxh64_update(mf_xxh64_state *s, const void *data, size_t len);
uint64_t mf_xxh64_digest(const mf_xxh64_state *s);
uint64_t mf_xxh64(const void *data, size_t len, uint64_t seed);

#endif
