/* The KV cell store: cell ownership, sequence operations and per-batch window resolution. */
#include "kv/kv.h"

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
