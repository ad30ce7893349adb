/* Session files: one sequence's KV rows, positions, token history, sampler RNG state and application
 * bytes in a versioned, checksummed container (docs/SESSION.md has the byte layout).
 *
 * A load never changes the context until the whole file has been verified: the parse checks the
 * structure, the exact length and the checksum; then the file is compared with this context (model
 * fingerprint, KV element types, room, an empty target sequence); only then are cells taken and rows
 * copied, and nothing after that point can fail.  A save writes a temporary file beside the target and
 * renames it over the target, so readers see the old file or the new one, never half of one. */
#include "engine/session.h"

#include "engine/engine_impl.h"
#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------- XXH64 ---------------- */
static const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                      P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;

static uint64_t rotl64(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}
static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t xround(uint64_t acc, uint64_t in) {
    return rotl64(acc + in * P2, 31) * P1;
}
static uint64_t xmerge(uint64_t h, uint64_t v) {
    return (h ^ xround(0, v)) * P1 + P4;
}

void mf_xxh64_init(mf_xxh64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
}

static void stripe(uint64_t v[4], const uint8_t *p) {
    for (int i = 0; i < 4; i++) v[i] = xround(v[i], rd64(p + 8 * i));
}

void mf_xxh64_update(mf_xxh64_state *s, const void *data, size_t len) {
    const uint8_t *p = data;
    s->total += len;
    if (s->mem_n + len < 32) {
        if (len) memcpy(s->mem + s->mem_n, p, len);
        s->mem_n += (uint32_t)len;
        return;
    }
    if (s->mem_n) {
        size_t take = 32 - s->mem_n;
        memcpy(s->mem + s->mem_n, p, take);
        stripe(s->v, s->mem);
        p += take;
        len -= take;
        s->mem_n = 0;
    }
    for (; len >= 32; p += 32, len -= 32) stripe(s->v, p);
    if (len) memcpy(s->mem, p, len);
    s->mem_n = (uint32_t)len;
}

uint64_t mf_xxh64_digest(const mf_xxh64_state *s) {
    uint64_t h;
    if (s->total >= 32) {
        h = rotl64(s->v[0], 1) + rotl64(s->v[1], 7) + rotl64(s->v[2], 12) + rotl64(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = xmerge(h, s->v[i]);
    } else {
        h = s->seed + P5;
    }
    h += s->total;
    const uint8_t *p = s->mem;
    uint32_t n = s->mem_n;
    for (; n >= 8; p += 8, n -= 8) h = rotl64(h ^ xround(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) {
        h = rotl64(h ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n > 0; p++, n--) h = rotl64(h ^ *p * P5, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t mf_xxh64(const void *data, size_t len, uint64_t seed) {
    mf_xxh64_state s;
    mf_xxh64_init(&s, seed);
    mf_xxh64_update(&s, data, len);
    return mf_xxh64_digest(&s);
}

/* ---------------- the model's fingerprint ---------------- */
/* XXH64 over the GGUF tensor index in file order: per tensor its name, a 0 byte, type (u32), n_dims (u32)
 * and each ne (i64), little-endian.  Weights are not read (a fingerprint, not a content hash). */
static uint64_t tensor_hash(const mf_gguf *g) {
    mf_xxh64_state s;
    mf_xxh64_init(&s, 0);
    int64_t n = mf_gguf_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        uint8_t b[8 + 8 * MF_GGUF_MAX_DIMS] = {0};
        mf_xxh64_update(&s, t->name.ptr, (size_t)t->name.len);
        mf_xxh64_update(&s, b, 1);
        wr32(b, t->type);
        wr32(b + 4, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < MF_GGUF_MAX_DIMS; d++) wr64(b + 8 + 8 * d, (uint64_t)t->ne[d]);
        mf_xxh64_update(&s, b, 8 + 8 * (size_t)MF_MIN(t->n_dims, (uint32_t)MF_GGUF_MAX_DIMS));
    }
    return mf_xxh64_digest(&s);
}

/* K and V element types of the store (each its own; the file keeps them apart). */
static uint32_t kv_type_k(const mf_kv *kv) {
    return mf_kv_type_k(kv);
}
static uint32_t kv_type_v(const mf_kv *kv) {
    return mf_kv_type_v(kv);
}

static void context_fp(const mf_context *ctx, mf_session_fp *fp) {
    const mf_hparams *hp = &ctx->model->hp;
    memset(fp, 0, sizeof *fp);
    snprintf(fp->arch, sizeof fp->arch, "%s", hp->arch_name);
    fp->n_layer = hp->n_layer;
    fp->n_embd = hp->n_embd;
    fp->n_head = hp->n_head;
    fp->n_head_kv = hp->n_head_kv;
    fp->head_dim = hp->head_dim;
    fp->n_ff = hp->n_ff;
    fp->n_vocab = hp->n_vocab;
    fp->tensor_hash = tensor_hash(ctx->model->gguf);
    fp->type_k = kv_type_k(ctx->kv);
    fp->type_v = kv_type_v(ctx->kv);
    fp->n_embd_k = (uint64_t)hp->n_embd_kv;
    fp->n_embd_v = (uint64_t)hp->n_embd_kv;
    fp->row_k = mf_kv_row_bytes_k(ctx->kv);
    fp->row_v = mf_kv_row_bytes_v(ctx->kv);
    fp->rot_k = ctx->rot_k != 0;
    fp->rot_v = ctx->rot_v != 0;
    /* the model's own rope is what a context without --rope-* or --yarn-* overrides runs (and all an older build
     * could run); a file written under overrides says which rope its K rows carry */
    const mf_context_params dp = mf_context_default_params();
    mf_rope own;
    mf_error e = {0};
    fp->rope_fp = mf_session_rope_fp(&ctx->rope);
    fp->rope_own = mf_model_rope(ctx->model, &dp.rope, &own, NULL, &e) == 0 && mf_session_rope_fp(&own) == fp->rope_fp;
}

uint32_t mf_session_rope_fp(const mf_rope *r) {
    uint8_t b[32];
    const float f[6] = {r->freq_base, r->freq_scale, r->ext_factor, r->attn_factor, r->corr_dims[0], r->corr_dims[1]};
    wr32(b, (uint32_t)r->n_rot);
    wr32(b + 4, (uint32_t)r->mode);
    for (int i = 0; i < 6; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        wr32(b + 8 + 4 * i, u);
    }
    return (uint32_t)mf_xxh64(b, sizeof b, 0);
}

static void encode_header(uint8_t h[MF_SESSION_HEADER_BYTES], const mf_session_fp *fp, int32_t n_cells,
                          int32_t n_tokens, uint64_t app_len, const uint64_t *rng, const float *mu) {
    memset(h, 0, MF_SESSION_HEADER_BYTES);
    memcpy(h, MF_SESSION_MAGIC, 8);
    wr32(h + 8, MF_SESSION_VERSION);
    wr32(h + 12, MF_SESSION_HEADER_BYTES);
    memcpy(h + 16, fp->arch, strnlen(fp->arch, 31));
    const int32_t shape[7] = {fp->n_layer, fp->n_embd, fp->n_head, fp->n_head_kv, fp->head_dim, fp->n_ff, fp->n_vocab};
    for (int i = 0; i < 7; i++) wr32(h + 48 + 4 * i, (uint32_t)shape[i]);
    wr64(h + 80, fp->tensor_hash);
    wr32(h + 88, fp->type_k);
    wr32(h + 92, fp->type_v);
    wr64(h + 96, fp->n_embd_k);
    wr64(h + 104, fp->n_embd_v);
    wr64(h + 112, fp->row_k);
    wr64(h + 120, fp->row_v);
    wr32(h + 128, (uint32_t)n_cells);
    wr32(h + 132, (uint32_t)n_tokens);
    wr64(h + 136, app_len);
    wr32(h + 144, (rng ? MF_SESSION_FLAG_RNG : 0) | (fp->rot_k ? MF_SESSION_FLAG_ROT_K : 0) |
                      (fp->rot_v ? MF_SESSION_FLAG_ROT_V : 0) | (fp->rope_own ? 0 : MF_SESSION_FLAG_ROPE) |
                      (mu ? MF_SESSION_FLAG_MU : 0));
    if (mu) {
        uint32_t u;
        memcpy(&u, mu, 4);
        wr32(h + 76, u);
    }
    if (!fp->rope_own) wr32(h + 148, fp->rope_fp);
    for (int i = 0; rng && i < 4; i++) wr64(h + 152 + 8 * i, rng[i]);
}

/* ---------------- parse ---------------- */
/* Section offsets of a file with the header's counts; false when they overflow 64 bits. */
typedef struct {
    uint64_t pos, tokens, app, layers, checksum, end;
} layout;

static bool compute_layout(const mf_session_view *v, layout *L) {
    uint64_t a, b, per_layer, all;
    L->pos = MF_SESSION_HEADER_BYTES;
    L->tokens = L->pos + 4 * (uint64_t)v->n_cells;
    L->app = L->tokens + 4 * (uint64_t)v->n_tokens;
    if (!mf_add_u64(L->app, v->app_len, &L->layers)) return false;
    if (!mf_mul_u64((uint64_t)v->n_cells, v->fp.row_k, &a) || !mf_mul_u64((uint64_t)v->n_cells, v->fp.row_v, &b) ||
        !mf_add_u64(a, b, &per_layer) || !mf_mul_u64(per_layer, (uint64_t)v->fp.n_layer, &all) ||
        !mf_add_u64(L->layers, all, &L->checksum) || !mf_add_u64(L->checksum, 8, &L->end))
        return false;
    return true;
}

/* Names the section that holds byte `off` (where a short file ends). */
static void section_at(const mf_session_view *v, const layout *L, uint64_t off, char *buf, size_t cap) {
    if (off < L->tokens) {
        snprintf(buf, cap, "the positions (%d cells)", v->n_cells);
    } else if (off < L->app) {
        snprintf(buf, cap, "the token history (%d tokens)", v->n_tokens);
    } else if (off < L->layers) {
        snprintf(buf, cap, "the application bytes (%llu)", (unsigned long long)v->app_len);
    } else if (off < L->checksum) {
        uint64_t k = (uint64_t)v->n_cells * v->fp.row_k, per = k + (uint64_t)v->n_cells * v->fp.row_v;
        uint64_t rel = off - L->layers, layer = rel / per;
        snprintf(buf, cap, "layer %llu's %s rows", (unsigned long long)layer, rel - layer * per < k ? "K" : "V");
    } else {
        snprintf(buf, cap, "the checksum");
    }
}

static const char *type_name(uint32_t t) {
    return mf_type_get_file(t) ? mf_type_name(t) : "an unknown type";
}

int mf_session_parse(const void *data, size_t size, mf_session_view *v, mf_error *err) {
    const uint8_t *d = data;
    memset(v, 0, sizeof *v);
    v->size = size;
    const size_t HB = MF_SESSION_HEADER_BYTES;
    size_t mlen = MF_MIN(size, (size_t)8);
    if (memcmp(d, MF_SESSION_MAGIC, mlen) != 0 || size == 0)
        return mf_err(err, MF_E_FORMAT, "not a minfer session file (it does not start with the bytes \"MFSESS\\r\\n\")");
    if (size < 12)
        return mf_err(err, MF_E_FORMAT, "truncated — the file ends inside the header (offset %zu of %zu)", size, HB);
    uint32_t version = rd32(d + 8);
    if (version != MF_SESSION_VERSION)
        return mf_err(err, MF_E_FORMAT,
                      "session file version %u; this build reads version %u (write the session again with this build)",
                      version, MF_SESSION_VERSION);
    if (size < HB)
        return mf_err(err, MF_E_FORMAT, "truncated — the file ends inside the header (offset %zu of %zu)", size, HB);
    if (rd32(d + 12) != HB)
        return mf_err(err, MF_E_FORMAT, "the header says it is %u bytes; version %u headers are %zu", rd32(d + 12),
                      version, HB);
    mf_session_fp *fp = &v->fp;
    memcpy(fp->arch, d + 16, 32);
    if (fp->arch[31] != 0 || fp->arch[0] == 0)
        return mf_err(err, MF_E_FORMAT, "the header's architecture name (offset 16) is empty or not NUL-terminated");
    for (size_t i = strlen(fp->arch); i < 32; i++)
        if (d[16 + i]) return mf_err(err, MF_E_FORMAT, "the architecture name's padding (offset %zu) is not zero", 16 + i);
    int32_t *shape[7] = {&fp->n_layer, &fp->n_embd, &fp->n_head, &fp->n_head_kv, &fp->head_dim, &fp->n_ff, &fp->n_vocab};
    static const char *const shape_name[7] = {"n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab"};
    for (int i = 0; i < 7; i++) {
        *shape[i] = (int32_t)rd32(d + 48 + 4 * i);
        if (*shape[i] <= 0)
            return mf_err(err, MF_E_FORMAT, "the header's %s (offset %d) is %d; it must be > 0", shape_name[i], 48 + 4 * i,
                          *shape[i]);
    }
    const bool rope_flag = rd32(d + 144) & MF_SESSION_FLAG_ROPE, mu_flag = rd32(d + 144) & MF_SESSION_FLAG_MU;
    if ((!mu_flag && rd32(d + 76)) || (!rope_flag && rd32(d + 148)))
        return mf_err(err, MF_E_FORMAT, "reserved header bytes (offsets 76, 148) are not zero: %u, %u", rd32(d + 76),
                      rd32(d + 148));
    fp->rope_own = !rope_flag;
    fp->rope_fp = rope_flag ? rd32(d + 148) : 0;
    fp->tensor_hash = rd64(d + 80);
    fp->type_k = rd32(d + 88);
    fp->type_v = rd32(d + 92);
    fp->n_embd_k = rd64(d + 96);
    fp->n_embd_v = rd64(d + 104);
    fp->row_k = rd64(d + 112);
    fp->row_v = rd64(d + 120);
    const char *kv_name[2] = {"K", "V"};
    const uint32_t types[2] = {fp->type_k, fp->type_v};
    const uint64_t ne[2] = {fp->n_embd_k, fp->n_embd_v}, rows[2] = {fp->row_k, fp->row_v};
    for (int i = 0; i < 2; i++) {
        size_t want = mf_type_get_file(types[i]) && ne[i] > 0 && ne[i] <= (uint64_t)INT32_MAX
                          ? mf_row_size(types[i], (int64_t)ne[i])
                          : 0;
        if (want == 0 || want != rows[i])
            return mf_err(err, MF_E_FORMAT,
                          "the header's %s rows do not add up: type %u (%s), %llu elements, %llu bytes per row "
                          "(that type and length make %zu)",
                          kv_name[i], types[i], type_name(types[i]), (unsigned long long)ne[i],
                          (unsigned long long)rows[i], want);
    }
    v->n_cells = (int32_t)rd32(d + 128);
    v->n_tokens = (int32_t)rd32(d + 132);
    v->app_len = rd64(d + 136);
    if (v->n_cells < 0 || v->n_tokens < 0)
        return mf_err(err, MF_E_FORMAT, "the header's counts are negative: %d cells, %d tokens", v->n_cells, v->n_tokens);
    uint32_t flags = rd32(d + 144);
    const uint32_t known = MF_SESSION_FLAG_RNG | MF_SESSION_FLAG_ROT_K | MF_SESSION_FLAG_ROT_V | MF_SESSION_FLAG_ROPE |
                           MF_SESSION_FLAG_MU;
    if (flags & ~known)
        return mf_err(err, MF_E_FORMAT, "unknown header flags 0x%x (offset 144; this build knows 0x%x)", flags, known);
    v->has_rng = flags & MF_SESSION_FLAG_RNG;
    v->has_mu = flags & MF_SESSION_FLAG_MU;
    if (v->has_mu) {
        const uint32_t u = rd32(d + 76);
        memcpy(&v->mu, &u, 4);
        if (!isfinite(v->mu))
            return mf_err(err, MF_E_FORMAT, "the Mirostat mu (offset 76) is %g; a sampler's mu is finite", v->mu);
    }
    fp->rot_k = flags & MF_SESSION_FLAG_ROT_K;
    fp->rot_v = flags & MF_SESSION_FLAG_ROT_V;
    for (int i = 0; i < 2; i++)
        if ((i ? fp->rot_v : fp->rot_k) && mf_type_get_file(types[i])->blck_size == 1)
            return mf_err(err, MF_E_FORMAT,
                          "the header says the %s rows are rotated (flags 0x%x, offset 144), but they are %s; only "
                          "quantized rows are",
                          kv_name[i], flags, type_name(types[i]));
    for (int i = 0; i < 4; i++) v->rng[i] = rd64(d + 152 + 8 * i);
    if (v->has_rng && !(v->rng[0] | v->rng[1] | v->rng[2] | v->rng[3]))
        return mf_err(err, MF_E_FORMAT, "the sampler RNG state (offset 152) is all zero, which the RNG never reaches");
    if (!v->has_rng && (v->rng[0] | v->rng[1] | v->rng[2] | v->rng[3]))
        return mf_err(err, MF_E_FORMAT, "the file has no RNG state (flags 0x%x) but bytes 152..183 are not zero", flags);

    layout L;
    if (!compute_layout(v, &L))
        return mf_err(err, MF_E_FORMAT,
                      "the header's counts overflow: %d cells x %d layers x (%llu + %llu) bytes per row, %llu "
                      "application bytes",
                      v->n_cells, fp->n_layer, (unsigned long long)fp->row_k, (unsigned long long)fp->row_v,
                      (unsigned long long)v->app_len);
    if ((uint64_t)size < L.end) {
        char where[96];
        section_at(v, &L, size, where, sizeof where);
        return mf_err(err, MF_E_FORMAT,
                      "truncated — the file ends inside %s (offset %zu; the header's counts make a %llu-byte file: "
                      "%d cells, %d tokens, %d layers)",
                      where, size, (unsigned long long)L.end, v->n_cells, v->n_tokens, fp->n_layer);
    }
    if ((uint64_t)size > L.end)
        return mf_err(err, MF_E_FORMAT, "%llu bytes follow the end of the session data at offset %llu (the file is %zu bytes)",
                      (unsigned long long)(size - L.end), (unsigned long long)L.end, size);
    uint64_t want = rd64(d + L.checksum), got = mf_xxh64(d, (size_t)L.checksum, 0);
    if (want != got)
        return mf_err(err, MF_E_FORMAT,
                      "checksum mismatch: the file says 0x%016llx, its bytes hash to 0x%016llx (the file is damaged)",
                      (unsigned long long)want, (unsigned long long)got);
    v->pos = d + L.pos;
    v->tokens = d + L.tokens;
    v->app = d + L.app;
    v->layers = d + L.layers;
    for (int32_t i = 0; i < v->n_cells; i++) {
        int32_t p = mf_session_pos(v, i), q = i > 0 ? mf_session_pos(v, i - 1) : -1;
        if (p <= q)
            return mf_err(err, MF_E_FORMAT, "position %d (entry %d, offset %llu) does not rise above %d", p, i,
                          (unsigned long long)(L.pos + 4 * (uint64_t)i), q);
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        int32_t t = mf_session_token(v, i);
        if (t < 0 || t >= fp->n_vocab)
            return mf_err(err, MF_E_FORMAT, "token %d of the history is %d, outside the vocabulary [0, %d)", i, t,
                          fp->n_vocab);
    }
    return 0;
}

int32_t mf_session_pos(const mf_session_view *v, int32_t i) {
    return (int32_t)rd32(v->pos + 4 * (size_t)i);
}
int32_t mf_session_token(const mf_session_view *v, int32_t i) {
    return (int32_t)rd32(v->tokens + 4 * (size_t)i);
}
const uint8_t *mf_session_k_row(const mf_session_view *v, int32_t layer, int32_t i) {
    size_t n = (size_t)v->n_cells, per = n * (size_t)(v->fp.row_k + v->fp.row_v);
    return v->layers + (size_t)layer * per + (size_t)i * (size_t)v->fp.row_k;
}
const uint8_t *mf_session_v_row(const mf_session_view *v, int32_t layer, int32_t i) {
    size_t n = (size_t)v->n_cells, per = n * (size_t)(v->fp.row_k + v->fp.row_v);
    return v->layers + (size_t)layer * per + n * (size_t)v->fp.row_k + (size_t)i * (size_t)v->fp.row_v;
}

/* ---------------- file access ---------------- */
typedef struct {
    void *map;
    size_t size;
} mapped;

static int map_file(const char *path, mapped *m, mf_error *err) {
    memset(m, 0, sizeof *m);
    if (!path || !*path) return mf_err(err, MF_E_INVAL, "no session file path given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return mf_err(err, errno == ENOENT ? MF_E_NOTFOUND : MF_E_IO, "cannot open the session file '%s': %s", path,
                      strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mf_err(err, MF_E_IO, "the session file '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return mf_err(err, MF_E_FORMAT, "the session file '%s' is empty (0 bytes)", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return mf_err(err, MF_E_RANGE, "the session file '%s' is too large to map", path);
    }
    m->size = (size_t)st.st_size;
    m->map = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m->map == MAP_FAILED) {
        m->map = NULL;
        return mf_err(err, MF_E_IO, "cannot map the session file '%s' (%zu bytes): %s", path, m->size, strerror(errno));
    }
    return 0;
}

static void unmap_file(mapped *m) {
    if (m->map) munmap(m->map, m->size);
    m->map = NULL;
}

/* ---------------- compare with this context ---------------- */
static void describe(const mf_session_fp *f, char *buf, size_t cap) {
    snprintf(buf, cap, "%s, %d layers, n_embd %d, %d/%d heads of %d, n_ff %d, %d tokens, tensor index %016llx",
             f->arch, f->n_layer, f->n_embd, f->n_head, f->n_head_kv, f->head_dim, f->n_ff, f->n_vocab,
             (unsigned long long)f->tensor_hash);
}

static int check_context(mf_context *ctx, mf_seq_id seq, const mf_session_view *v, mf_error *err) {
    mf_session_fp me;
    context_fp(ctx, &me);
    const mf_session_fp *f = &v->fp;
    if (strcmp(f->arch, me.arch) || f->n_layer != me.n_layer || f->n_embd != me.n_embd || f->n_head != me.n_head ||
        f->n_head_kv != me.n_head_kv || f->head_dim != me.head_dim || f->n_ff != me.n_ff || f->n_vocab != me.n_vocab ||
        f->tensor_hash != me.tensor_hash) {
        char a[256], b[256], diff[160] = "";
        describe(f, a, sizeof a);
        describe(&me, b, sizeof b);
        const struct {
            bool differ;
            const char *name;
        } fields[] = {{strcmp(f->arch, me.arch) != 0, "architecture"}, {f->n_layer != me.n_layer, "layers"},
                      {f->n_embd != me.n_embd, "n_embd"},           {f->n_head != me.n_head, "heads"},
                      {f->n_head_kv != me.n_head_kv, "KV heads"},   {f->head_dim != me.head_dim, "head_dim"},
                      {f->n_ff != me.n_ff, "n_ff"},                 {f->n_vocab != me.n_vocab, "vocabulary"},
                      {f->tensor_hash != me.tensor_hash, "tensor index"}};
        for (size_t i = 0; i < MF_ARRAY_LEN(fields); i++)
            if (fields[i].differ)
                snprintf(diff + strlen(diff), sizeof diff - strlen(diff), "%s%s", diff[0] ? ", " : "", fields[i].name);
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the file was written for a different model (%s); this model is %s; they differ in: %s. Load it "
                      "with the model that wrote it, or start afresh",
                      a, b, diff);
    }
    if (f->type_k != me.type_k || f->type_v != me.type_v) {
        if (f->type_k == f->type_v && me.type_k == me.type_v)
            return mf_err(err, MF_E_UNSUPPORTED,
                          "the file was written with the %s KV element type, this run uses %s (run with --cache-type %s "
                          "to load it)",
                          type_name(f->type_k), type_name(me.type_k), type_name(f->type_k));
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the file was written with KV element types K %s, V %s; this run uses K %s, V %s (run with "
                      "-ctk %s -ctv %s to load it)",
                      type_name(f->type_k), type_name(f->type_v), type_name(me.type_k), type_name(me.type_v),
                      type_name(f->type_k), type_name(f->type_v));
    }
    if (f->rot_k != me.rot_k || f->rot_v != me.rot_v) {
        const bool file_rot = f->rot_k != me.rot_k ? f->rot_k : f->rot_v;
        const char *which = f->rot_k != me.rot_k && f->rot_v != me.rot_v ? "K and V" : f->rot_k != me.rot_k ? "K" : "V";
        if (file_rot)
            return mf_err(err, MF_E_UNSUPPORTED,
                          "the file's %s rows are stored rotated (llama.cpp's attention rotation for a quantized "
                          "cache), this run does not rotate them (MINFER_ATTN_ROT_DISABLE): unset it to load the file",
                          which);
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the file's %s rows are not rotated (written with MINFER_ATTN_ROT_DISABLE=1, or by a build "
                      "without the attention rotation), this run rotates them: run with MINFER_ATTN_ROT_DISABLE=1 to "
                      "load it",
                      which);
    }
    /* K rows carry their rope: resuming them under another would be silently wrong */
    if (f->rope_own != me.rope_own || (!f->rope_own && f->rope_fp != me.rope_fp)) {
        if (f->rope_own)
            return mf_err(err, MF_E_UNSUPPORTED,
                          "the file's K rows carry the model's own rope, this run overrides it (--rope-scaling, "
                          "--rope-scale, --rope-freq-base, --yarn-*): drop those flags to load the file");
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the file's K rows carry a rope set by --rope-*/--yarn-* flags (fingerprint 0x%08x), this run's is "
                      "%s (0x%08x): run with the flags the file was written with",
                      f->rope_fp, me.rope_own ? "the model's own" : "another", me.rope_fp);
    }
    if (f->n_embd_k != me.n_embd_k || f->n_embd_v != me.n_embd_v || f->row_k != me.row_k || f->row_v != me.row_v)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the file's KV rows are %llu/%llu elements (%llu/%llu bytes), this context's %llu/%llu (%llu/%llu "
                      "bytes)",
                      (unsigned long long)f->n_embd_k, (unsigned long long)f->n_embd_v, (unsigned long long)f->row_k,
                      (unsigned long long)f->row_v, (unsigned long long)me.n_embd_k, (unsigned long long)me.n_embd_v,
                      (unsigned long long)me.row_k, (unsigned long long)me.row_v);
    if (seq < 0) return mf_err(err, MF_E_INVAL, "a session loads into one sequence id >= 0, got %d", seq);
    int32_t held = mf_kv_seq_n_cells(ctx->kv, seq);
    if (held > 0)
        return mf_err(err, MF_E_INVAL,
                      "sequence %d is not empty: it holds %d cells (positions up to %d); remove them first (mf_seq_rm) "
                      "or load into an empty sequence",
                      seq, held, mf_kv_seq_pos_max(ctx->kv, seq));
    int32_t n_all = mf_kv_n_cells(ctx->kv), n_free = n_all - mf_kv_n_used(ctx->kv);
    if (v->n_cells > n_all)
        return mf_err(err, MF_E_RANGE,
                      "the file holds %d KV cells, more than this context's %d (-c %d): run with -c %d or more", v->n_cells,
                      n_all, n_all, v->n_cells);
    if (v->n_cells > n_free)
        return mf_err(err, MF_E_RANGE,
                      "the file holds %d KV cells, %d of this context's %d are free (other sequences hold %d): remove "
                      "some or raise -c",
                      v->n_cells, n_free, n_all, n_all - n_free);
    return 0;
}

/* ---------------- public API ---------------- */
int mf_session_load(mf_context *ctx, mf_seq_id seq, const char *path, mf_token **tokens, int32_t *n_tokens,
                    mf_sampler *smp, void **app, size_t *app_len, mf_error *err) {
    mapped m;
    int rc = map_file(path, &m, err);
    if (rc) return rc;
    mf_session_view v;
    mf_token *tok = NULL;
    uint8_t *app_copy = NULL;
    int32_t *pos = NULL, *cells = NULL;
    if ((rc = mf_session_parse(m.map, m.size, &v, err)) || (rc = check_context(ctx, seq, &v, err))) goto out;
    /* everything that can fail happens before the first change */
    size_t nc = (size_t)MF_MAX(v.n_cells, 1);
    pos = malloc(sizeof(int32_t) * nc);
    cells = malloc(sizeof(int32_t) * nc);
    if (tokens && v.n_tokens > 0) tok = malloc(sizeof(mf_token) * (size_t)v.n_tokens);
    if (app && v.app_len > 0 && v.app_len < SIZE_MAX) app_copy = malloc((size_t)v.app_len + 1);
    if (!pos || !cells || (tokens && v.n_tokens > 0 && !tok) || (app && v.app_len > 0 && !app_copy)) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory loading a session of %d cells, %d tokens, %llu application bytes",
                    v.n_cells, v.n_tokens, (unsigned long long)v.app_len);
        goto out;
    }
    for (int32_t i = 0; i < v.n_cells; i++) pos[i] = mf_session_pos(&v, i);
    if ((rc = mf_kv_seq_import(ctx->kv, seq, v.n_cells, pos, cells, err))) goto out;
    /* rows through the store, which reaches a layer's memory on whichever backend holds it */
    for (int32_t l = 0; l < v.fp.n_layer && !rc; l++)
        for (int32_t i = 0; i < v.n_cells && !rc; i++)
            if (!(rc = mf_kv_write_row(ctx->kv, l, false, cells[i], mf_session_k_row(&v, l, i), err)))
                rc = mf_kv_write_row(ctx->kv, l, true, cells[i], mf_session_v_row(&v, l, i), err);
    if (rc) {
        mf_kv_seq_rm(ctx->kv, seq, -1, -1); /* nothing half-loaded stays */
        goto out;
    }
    if (smp && v.has_rng) (void)mf_sampler_set_rng(smp, v.rng, NULL); /* parse refused the one invalid state */
    if (smp && v.has_mu) mf_sampler_set_mu(smp, v.mu);
    if (tokens) {
        for (int32_t i = 0; i < v.n_tokens; i++) tok[i] = mf_session_token(&v, i);
        *tokens = tok;
        tok = NULL;
    }
    if (n_tokens) *n_tokens = v.n_tokens;
    if (app) {
        if (app_copy) {
            memcpy(app_copy, v.app, (size_t)v.app_len);
            app_copy[v.app_len] = 0;
        }
        *app = app_copy;
        app_copy = NULL;
    }
    if (app_len) *app_len = (size_t)v.app_len;
out:
    free(pos);
    free(cells);
    free(tok);
    free(app_copy);
    unmap_file(&m);
    if (rc) return mf_err_prefix(err, rc, "session file '%s'", path);
    return 0;
}

int mf_session_read_app(const char *path, void **app, size_t *app_len, mf_error *err) {
    *app = NULL;
    *app_len = 0;
    mapped m;
    int rc = map_file(path, &m, err);
    if (rc) return rc;
    mf_session_view v;
    if ((rc = mf_session_parse(m.map, m.size, &v, err))) {
        unmap_file(&m);
        return mf_err_prefix(err, rc, "session file '%s'", path);
    }
    uint8_t *copy = NULL;
    if (v.app_len > 0) {
        copy = malloc((size_t)v.app_len + 1);
        if (!copy) {
            unmap_file(&m);
            return mf_err(err, MF_E_NOMEM, "out of memory for %llu application bytes of '%s'",
                          (unsigned long long)v.app_len, path);
        }
        memcpy(copy, v.app, (size_t)v.app_len);
        copy[v.app_len] = 0;
    }
    *app = copy;
    *app_len = (size_t)v.app_len;
    unmap_file(&m);
    return 0;
}

/* A writer that hashes what it writes. */
typedef struct {
    FILE *f;
    mf_xxh64_state h;
    bool failed;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->failed || n == 0) return;
    mf_xxh64_update(&w->h, p, n);
    if (fwrite(p, 1, n, w->f) != n) w->failed = true;
}

static void put_i32s(writer *w, const int32_t *a, int32_t n) {
    uint8_t buf[1024];
    for (int32_t i = 0; i < n;) {
        int32_t k = 0;
        for (; k < (int32_t)(sizeof buf / 4) && i < n; k++, i++) wr32(buf + 4 * k, (uint32_t)a[i]);
        put(w, buf, 4 * (size_t)k);
    }
}

int mf_session_save(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, const mf_sampler *smp,
                    const void *app, size_t app_len, const char *path, mf_error *err) {
    if (!path || !*path) return mf_err(err, MF_E_INVAL, "no session file path given");
    if (seq < 0) return mf_err(err, MF_E_INVAL, "a session saves one sequence id >= 0, got %d", seq);
    if (n_tokens < 0 || (n_tokens > 0 && !tokens) || (app_len > 0 && !app))
        return mf_err(err, MF_E_INVAL, "session save: %d tokens at %p, %zu application bytes at %p", n_tokens,
                      (const void *)tokens, app_len, app);
    mf_session_fp fp;
    context_fp(ctx, &fp);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= fp.n_vocab)
            return mf_err(err, MF_E_INVAL, "token %d of the history is %d, outside the vocabulary [0, %d)", i, tokens[i],
                          fp.n_vocab);
    int32_t n = mf_kv_seq_n_cells(ctx->kv, seq);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)MF_MAX(n, 1)), *cells = malloc(sizeof(int32_t) * (size_t)MF_MAX(n, 1));
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    uint8_t *rowbuf = malloc((size_t)MF_MAX(fp.row_k, fp.row_v));
    if (!pos || !cells || !tmp || !rowbuf || mf_kv_seq_export(ctx->kv, seq, pos, cells, n) != n) {
        free(pos);
        free(cells);
        free(tmp);
        free(rowbuf);
        return mf_err(err, MF_E_NOMEM, "out of memory saving a session of %d cells", n);
    }
    uint64_t rng[4];
    float mu = 0;
    const bool has_mu = smp && mf_sampler_mu(smp, &mu);
    if (smp) mf_sampler_get_rng(smp, rng);
    uint8_t head[MF_SESSION_HEADER_BYTES];
    encode_header(head, &fp, n, n_tokens, app_len, smp ? rng : NULL, has_mu ? &mu : NULL);

    snprintf(tmp, plen + 16, "%s.tmp-XXXXXX", path);
    int rc = 0, fd = mkstemp(tmp);
    writer w = {0};
    if (fd < 0) {
        rc = mf_err(err, MF_E_IO, "cannot create the session file '%s' (temporary '%s'): %s", path, tmp, strerror(errno));
        goto done;
    }
    w.f = fdopen(fd, "wb");
    if (!w.f) {
        close(fd);
        rc = mf_err(err, MF_E_IO, "cannot write '%s': %s", tmp, strerror(errno));
        goto fail_tmp;
    }
    mf_xxh64_init(&w.h, 0);
    put(&w, head, sizeof head);
    put_i32s(&w, pos, n);
    put_i32s(&w, tokens, n_tokens);
    put(&w, app, app_len);
    /* rows through the store (whichever backend holds a layer's memory), one row buffer */
    for (int32_t l = 0; l < fp.n_layer && !rc; l++)
        for (int vv = 0; vv < 2 && !rc; vv++)
            for (int32_t i = 0; i < n && !rc; i++) {
                const size_t rb = vv ? (size_t)fp.row_v : (size_t)fp.row_k;
                if (!(rc = mf_kv_read_row(ctx->kv, l, vv, cells[i], rowbuf, err))) put(&w, rowbuf, rb);
            }
    if (rc) {
        fclose(w.f);
        goto fail_tmp;
    }
    uint8_t sum[8];
    wr64(sum, mf_xxh64_digest(&w.h));
    put(&w, sum, 8);
    int e = w.failed ? errno : 0;
    if (!w.failed && (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)) {
        e = errno;
        w.failed = true;
    }
    if (fclose(w.f) != 0 && !w.failed) {
        e = errno;
        w.failed = true;
    }
    if (w.failed) {
        rc = mf_err(err, MF_E_IO, "writing the session file '%s' failed: %s (nothing replaced)", tmp,
                    e ? strerror(e) : "short write");
        goto fail_tmp;
    }
    if (rename(tmp, path) != 0) {
        rc = mf_err(err, MF_E_IO, "cannot rename '%s' to '%s': %s (nothing replaced)", tmp, path, strerror(errno));
        goto fail_tmp;
    }
    goto done;
fail_tmp:
    unlink(tmp);
done:
    free(pos);
    free(cells);
    free(tmp);
    free(rowbuf);
    return rc;
}
