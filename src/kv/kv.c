/* The KV cell store: cell ownership, sequence operations and per-batch window resolution. */
#include "kv/kv.h"

#include "core/rope.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

struct mf_kv {
    int32_t n_layer, n_cells, n_used;
    int64_t n_embd_k, n_embd_v;
    uint32_t type_k, type_v;
    size_t row_k, row_v;
    uint8_t *mem; /* n_layer * n_cells * (row_k + row_v), aligned */
    int32_t *seq; /* per cell: owner or -1 */
    int32_t *pos; /* per cell: sequence-relative position */
    /* prepare scratch */
    struct kv_ent *ents;
    int32_t ents_cap;
};

typedef struct kv_ent {
    int32_t seq, pos, cell, tok; /* tok: batch index, or -1 for a cached cell */
} kv_ent;

bool mf_kv_type_ok(uint32_t type) {
    return type == MF_TYPE_F32 || type == MF_TYPE_F16 || type == MF_TYPE_Q8_0;
}

int mf_kv_new(int32_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int32_t n_cells, uint32_t type_k,
              uint32_t type_v, mf_kv **out, mf_error *err) {
    *out = NULL;
    for (int i = 0; i < 2; i++) {
        const uint32_t t = i ? type_v : type_k;
        const int64_t n = i ? n_embd_v : n_embd_k;
        if (!mf_kv_type_ok(t))
            return mf_err(err, MF_E_UNSUPPORTED, "KV cache type %s (id %u) for %s is not supported (use f32, f16 or q8_0)",
                          mf_type_name(t), t, i ? "V" : "K");
        if (n > 0 && n % mf_type_get(t)->blck_size)
            return mf_err(err, MF_E_UNSUPPORTED,
                          "a %s KV cache needs rows of a multiple of %lld elements, the model's %s rows have %lld "
                          "(use --cache-type f16)",
                          mf_type_name(t), (long long)mf_type_get(t)->blck_size, i ? "V" : "K", (long long)n);
    }
    if (n_layer <= 0 || n_cells <= 0 || n_embd_k <= 0 || n_embd_v <= 0)
        return mf_err(err, MF_E_INVAL, "KV cache needs positive sizes: %d layers, %d cells, k %lld, v %lld",
                      n_layer, n_cells, (long long)n_embd_k, (long long)n_embd_v);
    mf_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return mf_err(err, MF_E_NOMEM, "out of memory for the KV cache");
    kv->n_layer = n_layer;
    kv->n_cells = n_cells;
    kv->n_embd_k = n_embd_k;
    kv->n_embd_v = n_embd_v;
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->row_k = mf_row_size(type_k, n_embd_k);
    kv->row_v = mf_row_size(type_v, n_embd_v);
    uint64_t per = 0, total = 0;
    if (!mf_mul_u64((uint64_t)n_cells, kv->row_k + kv->row_v, &per) ||
        !mf_mul_u64(per, (uint64_t)n_layer, &total) || total > SIZE_MAX) {
        free(kv);
        return mf_err(err, MF_E_RANGE, "KV cache size overflows: %d layers x %d cells", n_layer, n_cells);
    }
    kv->mem = mf_aligned_alloc(64, (size_t)total);
    kv->seq = malloc(sizeof(int32_t) * (size_t)n_cells);
    kv->pos = malloc(sizeof(int32_t) * (size_t)n_cells);
    if (!kv->mem || !kv->seq || !kv->pos) {
        mf_kv_free(kv);
        return mf_err(err, MF_E_NOMEM,
                      "out of memory for the KV cache: %llu bytes for %d cells x %d layers (lower -c)",
                      (unsigned long long)total, n_cells, n_layer);
    }
    memset(kv->mem, 0, (size_t)total);
    mf_kv_clear(kv);
    *out = kv;
    return 0;
}

void mf_kv_free(mf_kv *kv) {
    if (!kv) return;
    mf_aligned_free(kv->mem);
    free(kv->seq);
    free(kv->pos);
    free(kv->ents);
    free(kv);
}

int32_t mf_kv_n_cells(const mf_kv *kv) {
    return kv->n_cells;
}
int32_t mf_kv_n_used(const mf_kv *kv) {
    return kv->n_used;
}
uint32_t mf_kv_type_k(const mf_kv *kv) {
    return kv->type_k;
}
uint32_t mf_kv_type_v(const mf_kv *kv) {
    return kv->type_v;
}
size_t mf_kv_row_bytes_k(const mf_kv *kv) {
    return kv->row_k;
}
size_t mf_kv_row_bytes_v(const mf_kv *kv) {
    return kv->row_v;
}
size_t mf_kv_bytes(const mf_kv *kv) {
    return (size_t)kv->n_layer * (size_t)kv->n_cells * (kv->row_k + kv->row_v);
}

void *mf_kv_k(mf_kv *kv, int32_t layer) {
    return kv->mem + (size_t)layer * (size_t)kv->n_cells * (kv->row_k + kv->row_v);
}
void *mf_kv_v(mf_kv *kv, int32_t layer) {
    return (uint8_t *)mf_kv_k(kv, layer) + (size_t)kv->n_cells * kv->row_k;
}

int32_t mf_kv_cell_seq(const mf_kv *kv, int32_t cell) {
    return cell >= 0 && cell < kv->n_cells ? kv->seq[cell] : -1;
}
int32_t mf_kv_cell_pos(const mf_kv *kv, int32_t cell) {
    return cell >= 0 && cell < kv->n_cells ? kv->pos[cell] : -1;
}

void mf_kv_clear(mf_kv *kv) {
    for (int32_t c = 0; c < kv->n_cells; c++) {
        kv->seq[c] = -1;
        kv->pos[c] = -1;
    }
    kv->n_used = 0;
}

static bool in_range(int32_t p, int32_t p0, int32_t p1) {
    return (p0 < 0 || p >= p0) && (p1 < 0 || p < p1);
}

void mf_kv_seq_rm(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1) {
    for (int32_t c = 0; c < kv->n_cells; c++) {
        if (kv->seq[c] < 0) continue;
        if (seq >= 0 && kv->seq[c] != seq) continue;
        if (!in_range(kv->pos[c], p0, p1)) continue;
        kv->seq[c] = -1;
        kv->pos[c] = -1;
        kv->n_used--;
    }
}

int32_t mf_kv_seq_pos_max(const mf_kv *kv, int32_t seq) {
    int32_t m = -1;
    for (int32_t c = 0; c < kv->n_cells; c++)
        if (kv->seq[c] == seq && kv->pos[c] > m) m = kv->pos[c];
    return m;
}

int32_t mf_kv_seq_n_cells(const mf_kv *kv, int32_t seq) {
    int32_t n = 0;
    for (int32_t c = 0; c < kv->n_cells; c++) n += kv->seq[c] == seq;
    return n;
}

/* the rope fits a K row of n_embd elements of this type */
static int rope_check(uint32_t type, int64_t n_embd, const mf_kv_rope *r, mf_error *err) {
    if (r->head_dim <= 0 || n_embd % r->head_dim || r->n_rot <= 0 || r->n_rot > r->head_dim || r->n_rot % 2 ||
        r->n_rot > MF_KV_ROPE_MAX)
        return mf_err(err, MF_E_INVAL, "rope of %d of %d head elements does not fit a K row of %lld (at most %d)",
                      r->n_rot, r->head_dim, (long long)n_embd, MF_KV_ROPE_MAX);
    if (type != MF_TYPE_F32 && type != MF_TYPE_F16 && type != MF_TYPE_Q8_0)
        return mf_err(err, MF_E_UNSUPPORTED, "cannot re-rope a K row of type %s (f32, f16, q8_0)", mf_type_name(type));
    if (!mf_row_size(type, n_embd))
        return mf_err(err, MF_E_INVAL, "a K row of %lld %s elements is not whole blocks", (long long)n_embd,
                      mf_type_name(type));
    return 0;
}

static void rope_row(uint32_t type, void *row, int64_t n_embd, const mf_kv_rope *r, const float *cache, float *tmp) {
    if (type == MF_TYPE_F32)
        memcpy(tmp, row, sizeof(float) * (size_t)n_embd);
    else
        mf_dequantize_row(type, row, tmp, n_embd);
    for (int64_t h = 0; h < n_embd / r->head_dim; h++)
        mf_rope_row(tmp + h * r->head_dim, tmp + h * r->head_dim, r->head_dim, r->n_rot, r->mode, cache);
    /* back with the converter KV_STORE uses, so a shifted cell holds what a store of that row would */
    if (type == MF_TYPE_F32)
        memcpy(row, tmp, sizeof(float) * (size_t)n_embd);
    else
        mf_quantize_row_cpu(type, tmp, row, n_embd);
}

int mf_kv_rope_row(uint32_t type, void *row, int64_t n_embd, int32_t delta, const mf_kv_rope *r, float *tmp,
                   mf_error *err) {
    int rc = rope_check(type, n_embd, r, err);
    if (rc) return rc;
    float cache[MF_KV_ROPE_MAX];
    mf_rope_cache(cache, r->n_rot, (float)delta, r->freq_scale, mf_rope_theta_scale(r->freq_base, r->n_rot));
    rope_row(type, row, n_embd, r, cache, tmp);
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

int mf_kv_seq_add(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta, const mf_kv_rope *rope,
                  mf_error *err) {
    if (seq < 0) return mf_err(err, MF_E_INVAL, "seq_add needs a sequence id >= 0, got %d", seq);
    int rc = rope_check(kv->type_k, kv->n_embd_k, rope, err);
    if (rc || delta == 0) return rc;
    /* the new positions of the moved cells, sorted; a kept cell of the sequence may not be among them */
    int32_t n_mv = 0;
    for (int32_t c = 0; c < kv->n_cells; c++) n_mv += kv->seq[c] == seq && in_range(kv->pos[c], p0, p1);
    if (!n_mv) return 0;
    int32_t *np = malloc(sizeof(int32_t) * (size_t)n_mv);
    float *tmp = malloc(sizeof(float) * (size_t)kv->n_embd_k);
    if (!np || !tmp) {
        free(np);
        free(tmp);
        return mf_err(err, MF_E_NOMEM, "out of memory shifting %d cells", n_mv);
    }
    int32_t k = 0;
    for (int32_t c = 0; c < kv->n_cells && !rc; c++) {
        if (kv->seq[c] != seq || !in_range(kv->pos[c], p0, p1)) continue;
        const int64_t p = (int64_t)kv->pos[c] + delta;
        if (p > INT32_MAX)
            rc = mf_err(err, MF_E_RANGE, "seq_add: position %d of sequence %d + %d overflows", kv->pos[c], seq, delta);
        np[k++] = (int32_t)p;
    }
    qsort(np, (size_t)k, sizeof *np, cmp_i32);
    for (int32_t c = 0; c < kv->n_cells && !rc; c++) {
        if (kv->seq[c] != seq || in_range(kv->pos[c], p0, p1) || kv->pos[c] < 0) continue;
        if (bsearch(&kv->pos[c], np, (size_t)k, sizeof *np, cmp_i32))
            rc = mf_err(err, MF_E_INVAL,
                        "seq_add: a cell of sequence %d would move onto position %d, which the sequence keeps "
                        "outside [%d, %d); remove it first with seq_rm",
                        seq, kv->pos[c], MF_MAX(p0, 0), p1);
    }
    if (!rc) {
        float cache[MF_KV_ROPE_MAX];
        mf_rope_cache(cache, rope->n_rot, (float)delta, rope->freq_scale,
                      mf_rope_theta_scale(rope->freq_base, rope->n_rot));
        for (int32_t c = 0; c < kv->n_cells; c++) {
            if (kv->seq[c] != seq || !in_range(kv->pos[c], p0, p1)) continue;
            if (kv->pos[c] + delta < 0) { /* llama.cpp: shifted before the start = gone */
                kv->seq[c] = -1;
                kv->pos[c] = -1;
                kv->n_used--;
                continue;
            }
            kv->pos[c] += delta;
            for (int32_t l = 0; l < kv->n_layer; l++)
                rope_row(kv->type_k, (uint8_t *)mf_kv_k(kv, l) + (size_t)c * kv->row_k, kv->n_embd_k, rope, cache, tmp);
        }
    }
    free(np);
    free(tmp);
    return rc;
}

static void copy_cell(mf_kv *kv, int32_t dst, int32_t src) {
    for (int32_t l = 0; l < kv->n_layer; l++) {
        uint8_t *k = mf_kv_k(kv, l), *v = mf_kv_v(kv, l);
        memcpy(k + (size_t)dst * kv->row_k, k + (size_t)src * kv->row_k, kv->row_k);
        memcpy(v + (size_t)dst * kv->row_v, v + (size_t)src * kv->row_v, kv->row_v);
    }
}

int mf_kv_seq_cp(mf_kv *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1, mf_error *err) {
    if (src < 0 || dst < 0)
        return mf_err(err, MF_E_INVAL, "seq_cp needs sequence ids >= 0, got %d -> %d", src, dst);
    if (src == dst) return 0;
    int32_t need = 0, dst_in = 0;
    for (int32_t c = 0; c < kv->n_cells; c++) {
        if (kv->seq[c] == src && in_range(kv->pos[c], p0, p1)) need++;
        if (kv->seq[c] == dst && in_range(kv->pos[c], p0, p1)) dst_in++;
    }
    int32_t free_after = kv->n_cells - kv->n_used + dst_in;
    if (need > free_after)
        return mf_err(
            err, MF_E_RANGE,
            "KV cache cannot copy %d rows of sequence %d into sequence %d: %d of %d cells free (raise -c)",
            need, src, dst, free_after, kv->n_cells);
    mf_kv_seq_rm(kv, dst, p0, p1);
    int32_t next_free = 0;
    /* walk source cells in cell order; destination takes the lowest free cells */
    for (int32_t c = 0; c < kv->n_cells; c++) {
        if (kv->seq[c] != src || !in_range(kv->pos[c], p0, p1)) continue;
        while (kv->seq[next_free] >= 0) next_free++;
        copy_cell(kv, next_free, c);
        kv->seq[next_free] = dst;
        kv->pos[next_free] = kv->pos[c];
        kv->n_used++;
    }
    return 0;
}

static int ent_cmp(const void *a, const void *b) {
    const kv_ent *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return 0;
}

int mf_kv_prepare(mf_kv *kv, int32_t n_tok, const int32_t *pos, const int32_t *seq, int32_t *cells_out,
                  int32_t *win, int32_t win_stride, mf_error *err) {
    if (n_tok <= 0) return mf_err(err, MF_E_INVAL, "empty batch (0 tokens)");
    if (win && win_stride < kv->n_cells + 1)
        return mf_err(err, MF_E_INTERNAL, "window stride %d is smaller than n_cells + 1 = %d", win_stride,
                      kv->n_cells + 1);
    for (int32_t t = 0; t < n_tok; t++)
        if (seq[t] < 0 || pos[t] < 0)
            return mf_err(err, MF_E_INVAL, "batch token %d has sequence %d position %d; both must be >= 0", t,
                          seq[t], pos[t]);
    int32_t n_free = kv->n_cells - kv->n_used;
    if (n_tok > n_free)
        return mf_err(
            err, MF_E_RANGE,
            "the context is full: the batch needs %d KV cells, %d of %d are free (raise -c/--ctx-size or "
            "remove sequences)",
            n_tok, n_free, kv->n_cells);
    int32_t n_ent = kv->n_used + n_tok;
    if (n_ent > kv->ents_cap) {
        kv_ent *e = realloc(kv->ents, sizeof(kv_ent) * (size_t)n_ent);
        if (!e) return mf_err(err, MF_E_NOMEM, "out of memory resolving %d KV entries", n_ent);
        kv->ents = e;
        kv->ents_cap = n_ent;
    }
    kv_ent *E = kv->ents;
    int32_t k = 0, next_free = 0;
    for (int32_t c = 0; c < kv->n_cells; c++)
        if (kv->seq[c] >= 0) E[k++] = (kv_ent){kv->seq[c], kv->pos[c], c, -1};
    for (int32_t t = 0; t < n_tok; t++) {
        while (kv->seq[next_free] >= 0) next_free++;
        cells_out[t] = next_free++;
        E[k++] = (kv_ent){seq[t], pos[t], cells_out[t], t};
    }
    qsort(E, (size_t)n_ent, sizeof *E, ent_cmp);
    for (int32_t i = 1; i < n_ent; i++) {
        if (E[i].seq == E[i - 1].seq && E[i].pos == E[i - 1].pos) {
            const kv_ent *a = E[i].tok >= 0 ? &E[i] : &E[i - 1], *b = a == &E[i] ? &E[i - 1] : &E[i];
            if (b->tok >= 0)
                return mf_err(err, MF_E_INVAL, "batch tokens %d and %d both hold sequence %d position %d",
                              MF_MIN(a->tok, b->tok), MF_MAX(a->tok, b->tok), a->seq, a->pos);
            return mf_err(
                err, MF_E_INVAL,
                "batch token %d: position %d of sequence %d is already in the KV cache (remove it first "
                "with seq_rm)",
                a->tok, a->pos, a->seq);
        }
    }
    /* commit */
    for (int32_t t = 0; t < n_tok; t++) {
        kv->seq[cells_out[t]] = seq[t];
        kv->pos[cells_out[t]] = pos[t];
    }
    kv->n_used += n_tok;
    if (!win) return 0;
    memset(win, 0, sizeof(int32_t) * (size_t)win_stride * (size_t)n_tok);
    /* E is sorted by (seq, pos): a query's window is a run of E ending at its own entry. */
    int32_t start = 0;
    for (int32_t i = 0; i < n_ent; i++) {
        if (i > 0 && E[i].seq != E[i - 1].seq) start = i;
        if (E[i].tok < 0) continue;
        int32_t *col = win + (size_t)E[i].tok * (size_t)win_stride;
        col[0] = i - start + 1;
        for (int32_t j = start; j <= i; j++) col[1 + j - start] = E[j].cell;
    }
    return 0;
}

void mf_kv_unprepare(mf_kv *kv, int32_t n_tok, const int32_t *cells) {
    for (int32_t t = 0; t < n_tok; t++) {
        int32_t c = cells[t];
        if (c < 0 || c >= kv->n_cells || kv->seq[c] < 0) continue;
        kv->seq[c] = -1;
        kv->pos[c] = -1;
        kv->n_used--;
    }
}

/* ---- session files: one sequence's cells out and in (built on the public cell accessors above) ---- */

/* Sort (pos, cell) pairs by position; a sequence never holds one position twice. */
static int pair_cmp(const void *a, const void *b) {
    const int32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

int32_t mf_kv_seq_export(const mf_kv *kv, int32_t seq, int32_t *pos, int32_t *cells, int32_t cap) {
    int32_t n = 0, n_cells = mf_kv_n_cells(kv);
    int32_t *pairs = malloc(sizeof(int32_t) * 2 * (size_t)MF_MAX(cap, 1));
    if (!pairs) return -1;
    for (int32_t c = 0; c < n_cells && n < cap; c++) {
        if (mf_kv_cell_seq(kv, c) != seq) continue;
        pairs[2 * n] = mf_kv_cell_pos(kv, c);
        pairs[2 * n + 1] = c;
        n++;
    }
    qsort(pairs, (size_t)n, 2 * sizeof(int32_t), pair_cmp);
    for (int32_t i = 0; i < n; i++) {
        pos[i] = pairs[2 * i];
        cells[i] = pairs[2 * i + 1];
    }
    free(pairs);
    return n;
}

int mf_kv_seq_import(mf_kv *kv, int32_t seq, int32_t n, const int32_t *pos, int32_t *cells_out, mf_error *err) {
    if (seq < 0 || n < 0)
        return mf_err(err, MF_E_INVAL, "importing %d cells into sequence %d: both must be >= 0", n, seq);
    if (n == 0) return 0;
    int32_t held = mf_kv_seq_n_cells(kv, seq);
    if (held > 0)
        return mf_err(err, MF_E_INVAL, "sequence %d already holds %d cells; remove them before importing", seq, held);
    for (int32_t i = 1; i < n; i++)
        if (pos[i] <= pos[i - 1])
            return mf_err(err, MF_E_INVAL, "imported positions must rise strictly: entry %d is %d after %d", i,
                          pos[i], pos[i - 1]);
    int32_t *seqs = malloc(sizeof(int32_t) * (size_t)n);
    if (!seqs) return mf_err(err, MF_E_NOMEM, "out of memory importing %d cells", n);
    for (int32_t i = 0; i < n; i++) seqs[i] = seq;
    /* a batch without a window: prepare takes the free cells (lowest first) and refuses with nothing changed */
    int rc = mf_kv_prepare(kv, n, pos, seqs, cells_out, NULL, 0, err);
    free(seqs);
    return rc;
}
