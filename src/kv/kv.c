/* The KV cell store: cells, per-sequence cell lists, sequence operations (rm, cp by reference, the
 * context shift with copy-on-write) and per-batch spans.
 *
 * Bookkeeping, and why each part costs what it does:
 *   pos[c], refs[c]  a cell's position and how many sequences hold it (0 = free).  A shared cell has one
 *                    position for all its sharers (seq_cp never moves positions).
 *   free heap        a min-heap of the free cells: a batch takes the lowest free cells (deterministic)
 *                    in O(log n_cells) each, without scanning the cell array.
 *   seq lists        per sequence, its cells sorted by position.  A query's window is a prefix of its
 *                    sequence's list (the cells with pos <= its pos), so prepare copies each batch
 *                    sequence's list once and gives every token {offset, count}: O(cells attended).
 * Everything a forward prepares is proportional to the lists of the batch's sequences, never to n_ctx. */
#include "kv/kv.h"

#include "core/hadamard.h"
#include "core/rope.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id, n, cap;
    int32_t *cell; /* sorted by pos[cell] */
} kv_seq;

typedef struct {
    int32_t seq, pos, tok;
} kv_tok;

struct mf_kv {
    int32_t n_layer, n_cells, n_used;
    int64_t n_embd_k, n_embd_v;
    uint32_t type_k, type_v;
    size_t row_k, row_v;
    uint8_t *mem;  /* n_layer * n_cells * (row_k + row_v), aligned (mf_kv_new) */
    mf_kv_mem hooks; /* mf_kv_new_placed: where each layer's regions came from */
    bool placed;
    void **k, **v;   /* per layer: its K and V region */
    bool *host;      /* per layer: may the store touch the region in place? */
    uint8_t *row;    /* scratch: one K or V row (rows of non-host layers pass through it) */
    int32_t *pos;  /* per cell: position, -1 when free */
    int32_t *refs; /* per cell: sequences holding it */
    int32_t *heap; /* free cells, a min-heap of n_cells - n_used entries */
    kv_seq *seqs;
    int32_t n_seqs, seqs_cap;
    /* prepare: batch tokens sorted by (seq, pos), and the spans handed to attention */
    kv_tok *toks;
    int32_t toks_cap;
    int32_t *spans;
    size_t spans_cap;
    int64_t work; /* list entries the last prepare wrote (tests: the cost follows the cells attended) */
};

/* ---- the free-cell heap ---- */
static void heap_push(mf_kv *kv, int32_t c) {
    int32_t i = kv->n_cells - kv->n_used; /* the heap's size before the push */
    int32_t *h = kv->heap;
    while (i > 0 && h[(i - 1) / 2] > c) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static int32_t heap_pop(mf_kv *kv) {
    int32_t *h = kv->heap, n = kv->n_cells - kv->n_used, top = h[0], last = h[n - 1], i = 0;
    n--;
    for (;;) {
        int32_t l = 2 * i + 1, m = i;
        if (l < n && h[l] < last) m = l;
        if (l + 1 < n && h[l + 1] < (m == i ? last : h[l])) m = l + 1;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0) h[i] = last;
    return top;
}

/* a free cell, now held by one sequence at position p */
static int32_t take_cell(mf_kv *kv, int32_t p) {
    const int32_t c = heap_pop(kv);
    kv->n_used++;
    kv->pos[c] = p;
    kv->refs[c] = 1;
    return c;
}

static void unref(mf_kv *kv, int32_t c) {
    if (kv->refs[c] <= 0) return; /* never free a cell twice (the heap would hold it twice) */
    if (--kv->refs[c] > 0) return;
    kv->pos[c] = -1;
    heap_push(kv, c);
    kv->n_used--;
}

/* ---- sequences ---- */
static kv_seq *find_seq(const mf_kv *kv, int32_t id) {
    for (int32_t i = 0; i < kv->n_seqs; i++)
        if (kv->seqs[i].id == id) return &kv->seqs[i];
    return NULL;
}

static kv_seq *get_seq(mf_kv *kv, int32_t id) {
    kv_seq *s = find_seq(kv, id);
    if (s) return s;
    if (kv->n_seqs == kv->seqs_cap) {
        int32_t cap = kv->seqs_cap ? 2 * kv->seqs_cap : 8;
        kv_seq *n = realloc(kv->seqs, sizeof *n * (size_t)cap);
        if (!n) return NULL;
        kv->seqs = n;
        kv->seqs_cap = cap;
    }
    s = &kv->seqs[kv->n_seqs++];
    *s = (kv_seq){.id = id};
    return s;
}

static bool seq_reserve(kv_seq *s, int32_t n) {
    if (n <= s->cap) return true;
    int32_t cap = MF_MAX(n, 2 * s->cap);
    cap = MF_MAX(cap, 16);
    int32_t *c = realloc(s->cell, sizeof *c * (size_t)cap);
    if (!c) return false;
    s->cell = c;
    s->cap = cap;
    return true;
}

/* first index of s's list with pos >= p */
static int32_t lower_bound(const mf_kv *kv, const kv_seq *s, int32_t p) {
    int32_t lo = 0, hi = s->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (kv->pos[s->cell[mid]] < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* [lo, hi) of s's list: the entries with p0 <= pos < p1 (p0 < 0: from 0, p1 < 0: to the end) */
static void range_of(const mf_kv *kv, const kv_seq *s, int32_t p0, int32_t p1, int32_t *lo, int32_t *hi) {
    *lo = p0 < 0 ? 0 : lower_bound(kv, s, p0);
    *hi = p1 < 0 ? s->n : lower_bound(kv, s, p1);
    if (*hi < *lo) *hi = *lo;
}

bool mf_kv_type_ok(uint32_t type) {
    return type == MF_TYPE_F32 || type == MF_TYPE_F16 || type == MF_TYPE_Q8_0;
}

int mf_kv_new(int32_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int32_t n_cells, uint32_t type_k,
              uint32_t type_v, mf_kv **out, mf_error *err) {
    return mf_kv_new_placed(n_layer, n_embd_k, n_embd_v, n_cells, type_k, type_v, NULL, out, err);
}

int mf_kv_new_placed(int32_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int32_t n_cells, uint32_t type_k,
                     uint32_t type_v, const mf_kv_mem *mem, mf_kv **out, mf_error *err) {
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
    if (!mem) kv->mem = mf_huge_alloc((size_t)total); /* attention at depth reads every cell of a layer */
    kv->k = calloc((size_t)n_layer, sizeof *kv->k);
    kv->v = calloc((size_t)n_layer, sizeof *kv->v);
    kv->host = calloc((size_t)n_layer, sizeof *kv->host);
    kv->row = malloc(MF_MAX(kv->row_k, kv->row_v));
    kv->pos = malloc(sizeof(int32_t) * (size_t)n_cells);
    kv->refs = malloc(sizeof(int32_t) * (size_t)n_cells);
    kv->heap = malloc(sizeof(int32_t) * (size_t)n_cells);
    kv->spans_cap = 256;
    kv->spans = malloc(sizeof(int32_t) * kv->spans_cap);
    if ((!mem && !kv->mem) || !kv->k || !kv->v || !kv->host || !kv->row || !kv->pos || !kv->refs || !kv->heap ||
        !kv->spans) {
        mf_kv_free(kv);
        return mf_err(err, MF_E_NOMEM,
                      "out of memory for the KV cache: %llu bytes for %d cells x %d layers (lower -c)",
                      (unsigned long long)total, n_cells, n_layer);
    }
    if (!mem) {
        memset(kv->mem, 0, (size_t)total);
        for (int32_t l = 0; l < n_layer; l++) {
            kv->k[l] = kv->mem + (size_t)l * (size_t)n_cells * (kv->row_k + kv->row_v);
            kv->v[l] = (uint8_t *)kv->k[l] + (size_t)n_cells * kv->row_k;
            kv->host[l] = true;
        }
    } else {
        kv->hooks = *mem;
        kv->placed = true;
        for (int32_t l = 0; l < n_layer; l++) {
            kv->host[l] = mem->is_host(mem->user, l);
            int rc = mem->alloc(mem->user, l, (size_t)n_cells * kv->row_k, &kv->k[l], err);
            if (!rc) rc = mem->alloc(mem->user, l, (size_t)n_cells * kv->row_v, &kv->v[l], err);
            if (rc) {
                mf_kv_free(kv);
                return mf_err_prefix(err, rc, "the KV cache of layer %d (%d cells)", l, n_cells);
            }
        }
    }
    kv->spans[0] = 2; /* an empty spans buffer: its header alone */
    kv->spans[1] = 0;
    mf_kv_clear(kv);
    *out = kv;
    return 0;
}

void mf_kv_free(mf_kv *kv) {
    if (!kv) return;
    mf_aligned_free(kv->mem);
    for (int32_t l = 0; kv->placed && kv->k && l < kv->n_layer; l++) {
        if (kv->k[l]) kv->hooks.free(kv->hooks.user, l, kv->k[l]);
        if (kv->v && kv->v[l]) kv->hooks.free(kv->hooks.user, l, kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->host);
    free(kv->row);
    free(kv->pos);
    free(kv->refs);
    free(kv->heap);
    for (int32_t i = 0; i < kv->n_seqs; i++) free(kv->seqs[i].cell);
    free(kv->seqs);
    free(kv->toks);
    free(kv->spans);
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
    return kv->k[layer];
}
void *mf_kv_v(mf_kv *kv, int32_t layer) {
    return kv->v[layer];
}

int mf_kv_read_row(const mf_kv *kv, int32_t layer, bool v, int32_t cell, void *dst, mf_error *err) {
    if (layer < 0 || layer >= kv->n_layer || cell < 0 || cell >= kv->n_cells)
        return mf_err(err, MF_E_RANGE, "KV row (layer %d, cell %d) is outside %d layers x %d cells", layer, cell,
                      kv->n_layer, kv->n_cells);
    const size_t rb = v ? kv->row_v : kv->row_k;
    const uint8_t *at = (const uint8_t *)(v ? kv->v[layer] : kv->k[layer]) + (size_t)cell * rb;
    if (kv->host[layer]) {
        memcpy(dst, at, rb);
        return 0;
    }
    return kv->hooks.read(kv->hooks.user, layer, at, dst, rb, err);
}

int mf_kv_write_row(mf_kv *kv, int32_t layer, bool v, int32_t cell, const void *src, mf_error *err) {
    if (layer < 0 || layer >= kv->n_layer || cell < 0 || cell >= kv->n_cells)
        return mf_err(err, MF_E_RANGE, "KV row (layer %d, cell %d) is outside %d layers x %d cells", layer, cell,
                      kv->n_layer, kv->n_cells);
    const size_t rb = v ? kv->row_v : kv->row_k;
    uint8_t *at = (uint8_t *)(v ? kv->v[layer] : kv->k[layer]) + (size_t)cell * rb;
    if (kv->host[layer]) {
        memcpy(at, src, rb);
        return 0;
    }
    return kv->hooks.write(kv->hooks.user, layer, at, src, rb, err);
}

int32_t mf_kv_cell_pos(const mf_kv *kv, int32_t cell) {
    return cell >= 0 && cell < kv->n_cells ? kv->pos[cell] : -1;
}
int32_t mf_kv_cell_refs(const mf_kv *kv, int32_t cell) {
    return cell >= 0 && cell < kv->n_cells ? kv->refs[cell] : 0;
}
bool mf_kv_cell_in_seq(const mf_kv *kv, int32_t cell, int32_t seq) {
    const kv_seq *s = find_seq(kv, seq);
    if (!s || cell < 0 || cell >= kv->n_cells || kv->refs[cell] == 0) return false;
    const int32_t i = lower_bound(kv, s, kv->pos[cell]);
    return i < s->n && s->cell[i] == cell;
}
int32_t mf_kv_cell_seq(const mf_kv *kv, int32_t cell) {
    int32_t best = -1;
    for (int32_t i = 0; i < kv->n_seqs; i++)
        if ((best < 0 || kv->seqs[i].id < best) && mf_kv_cell_in_seq(kv, cell, kv->seqs[i].id)) best = kv->seqs[i].id;
    return best;
}

void mf_kv_clear(mf_kv *kv) {
    for (int32_t c = 0; c < kv->n_cells; c++) {
        kv->pos[c] = -1;
        kv->refs[c] = 0;
        kv->heap[c] = c; /* ascending: a valid min-heap */
    }
    for (int32_t i = 0; i < kv->n_seqs; i++) free(kv->seqs[i].cell);
    kv->n_seqs = 0;
    kv->n_used = 0;
}

static void seq_rm_one(mf_kv *kv, kv_seq *s, int32_t p0, int32_t p1) {
    int32_t lo, hi;
    range_of(kv, s, p0, p1, &lo, &hi);
    for (int32_t i = lo; i < hi; i++) unref(kv, s->cell[i]);
    memmove(s->cell + lo, s->cell + hi, sizeof(int32_t) * (size_t)(s->n - hi));
    s->n -= hi - lo;
}

void mf_kv_seq_rm(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1) {
    for (int32_t i = 0; i < kv->n_seqs; i++) {
        if (seq >= 0 && kv->seqs[i].id != seq) continue;
        seq_rm_one(kv, &kv->seqs[i], p0, p1);
        if (kv->seqs[i].n == 0) { /* an empty sequence is forgotten: ids that come and go cost nothing */
            free(kv->seqs[i].cell);
            kv->seqs[i] = kv->seqs[kv->n_seqs - 1];
            kv->n_seqs--;
            i--;
        }
    }
}

const int32_t *mf_kv_seq_cells(const mf_kv *kv, int32_t seq, int32_t *n) {
    const kv_seq *s = find_seq(kv, seq);
    *n = s ? s->n : 0;
    return s ? s->cell : NULL;
}

int32_t mf_kv_seq_pos_max(const mf_kv *kv, int32_t seq) {
    const kv_seq *s = find_seq(kv, seq);
    return s && s->n ? kv->pos[s->cell[s->n - 1]] : -1;
}

int32_t mf_kv_seq_n_cells(const mf_kv *kv, int32_t seq) {
    const kv_seq *s = find_seq(kv, seq);
    return s ? s->n : 0;
}

int mf_kv_seq_cp(mf_kv *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1, mf_error *err) {
    if (src < 0 || dst < 0)
        return mf_err(err, MF_E_INVAL, "seq_cp needs sequence ids >= 0, got %d -> %d", src, dst);
    if (src == dst) return 0;
    kv_seq *d = get_seq(kv, dst), *s = find_seq(kv, src); /* get_seq may move the array: find src after */
    if (!d) return mf_err(err, MF_E_NOMEM, "out of memory adding sequence %d", dst);
    int32_t lo = 0, hi = 0;
    if (s) range_of(kv, s, p0, p1, &lo, &hi);
    int32_t dlo, dhi;
    range_of(kv, d, p0, p1, &dlo, &dhi);
    if (!seq_reserve(d, d->n - (dhi - dlo) + (hi - lo)))
        return mf_err(err, MF_E_NOMEM, "out of memory sharing %d rows of sequence %d with sequence %d", hi - lo,
                      src, dst);
    seq_rm_one(kv, d, p0, p1);
    if (hi == lo) return 0;
    /* dst holds nothing in [p0, p1) now and src's range lies inside it: one block at dst's lower bound */
    const int32_t at = lower_bound(kv, d, kv->pos[s->cell[lo]]);
    memmove(d->cell + at + (hi - lo), d->cell + at, sizeof(int32_t) * (size_t)(d->n - at));
    for (int32_t i = lo; i < hi; i++) {
        d->cell[at + i - lo] = s->cell[i]; /* shared by reference: no byte is copied */
        kv->refs[s->cell[i]]++;
    }
    d->n += hi - lo;
    return 0;
}

/* the rope fits a K row of n_embd elements of this type */
static int rope_check(uint32_t type, int64_t n_embd, const mf_kv_rope *r, mf_error *err) {
    const int32_t n_rot = r->rope.n_rot;
    if (r->head_dim <= 0 || n_embd % r->head_dim || n_rot <= 0 || n_rot > r->head_dim || n_rot % 2 ||
        n_rot > MF_KV_ROPE_MAX)
        return mf_err(err, MF_E_INVAL, "rope of %d of %d head elements does not fit a K row of %lld (at most %d)",
                      n_rot, r->head_dim, (long long)n_embd, MF_KV_ROPE_MAX);
    if (r->rot && (r->rot < 2 || (r->rot & (r->rot - 1)) || r->head_dim % r->rot))
        return mf_err(err, MF_E_INVAL, "a rotation of %d does not fit heads of %d (a power of two dividing it)", r->rot,
                      r->head_dim);
    if (type != MF_TYPE_F32 && type != MF_TYPE_F16 && type != MF_TYPE_Q8_0)
        return mf_err(err, MF_E_UNSUPPORTED, "cannot re-rope a K row of type %s (f32, f16, q8_0)", mf_type_name(type));
    if (!mf_row_size(type, n_embd))
        return mf_err(err, MF_E_INVAL, "a K row of %lld %s elements is not whole blocks", (long long)n_embd,
                      mf_type_name(type));
    return 0;
}

/* The rope cache of a shift by delta: a pure rotation.  A stored K row already carries YaRN's magnitude scale
 * from its first rope; llama.cpp's build_rope_shift applies it again at every shift (docs/CONFORMANCE.md). */
static void shift_cache(float *cache, const mf_kv_rope *r, int32_t delta) {
    const float theta_scale = mf_rope_theta_scale(r->rope.freq_base, r->rope.n_rot);
    mf_rope_cache(cache, r->rope.n_rot, (float)delta, &r->rope, theta_scale, true);
}

static void rope_row(uint32_t type, void *row, int64_t n_embd, const mf_kv_rope *r, const float *cache, float *tmp) {
    if (type == MF_TYPE_F32)
        memcpy(tmp, row, sizeof(float) * (size_t)n_embd);
    else
        mf_dequantize_row(type, row, tmp, n_embd);
    if (r->rot) mf_hadamard_row(tmp, tmp, n_embd, r->rot); /* back to the roped row (H^2 = I) */
    for (int64_t h = 0; h < n_embd / r->head_dim; h++)
        mf_rope_row(tmp + h * r->head_dim, tmp + h * r->head_dim, r->head_dim, r->rope.n_rot, r->rope.mode, cache);
    if (r->rot) mf_hadamard_row(tmp, tmp, n_embd, r->rot);
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
    shift_cache(cache, r, delta);
    rope_row(type, row, n_embd, r, cache, tmp);
    return 0;
}


/* A cell's rows in every layer into another cell (in place for host layers, through the scratch row
 * and the hooks for the others); the first hook error is returned after every layer was tried. */
static int copy_rows(mf_kv *kv, int32_t dst, int32_t src, mf_error *err) {
    int first = 0;
    for (int32_t l = 0; l < kv->n_layer; l++) {
        if (kv->host[l]) {
            uint8_t *k = mf_kv_k(kv, l), *v = mf_kv_v(kv, l);
            memcpy(k + (size_t)dst * kv->row_k, k + (size_t)src * kv->row_k, kv->row_k);
            memcpy(v + (size_t)dst * kv->row_v, v + (size_t)src * kv->row_v, kv->row_v);
            continue;
        }
        for (int w = 0; w < 2; w++) {
            int rc = mf_kv_read_row(kv, l, w, src, kv->row, err);
            if (!rc) rc = mf_kv_write_row(kv, l, w, dst, kv->row, err);
            if (rc && !first) first = rc;
        }
    }
    return first;
}

/* Re-rope cell c's K row of a layer whose memory is not host: out, rope, back. */
static int rope_row_placed(mf_kv *kv, int32_t l, int32_t c, const mf_kv_rope *rope, const float *cache, float *tmp,
                           mf_error *err) {
    int rc = mf_kv_read_row(kv, l, false, c, kv->row, err);
    if (rc) return rc;
    rope_row(kv->type_k, kv->row, kv->n_embd_k, rope, cache, tmp);
    return mf_kv_write_row(kv, l, false, c, kv->row, err);
}

int mf_kv_seq_add(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta, const mf_kv_rope *rope,
                  mf_error *err) {
    if (seq < 0) return mf_err(err, MF_E_INVAL, "seq_add needs a sequence id >= 0, got %d", seq);
    int rc = rope_check(kv->type_k, kv->n_embd_k, rope, err);
    kv_seq *s = find_seq(kv, seq);
    if (rc || delta == 0 || !s) return rc;
    int32_t lo, hi;
    range_of(kv, s, p0, p1, &lo, &hi);
    if (lo == hi) return 0;
    /* checks first, so a refusal changes nothing: the moved block's new positions (sorted, like the
     * block) may not meet a kept position; a shared cell that stays needs a free cell of its own */
    const int64_t first = (int64_t)kv->pos[s->cell[lo]] + delta, last = (int64_t)kv->pos[s->cell[hi - 1]] + delta;
    if (last > INT32_MAX)
        return mf_err(err, MF_E_RANGE, "seq_add: position %d of sequence %d + %d overflows", kv->pos[s->cell[hi - 1]],
                      seq, delta);
    for (int32_t i = 0; i < s->n; i++) {
        if (i == lo) i = hi;
        if (i >= s->n) break;
        const int32_t p = kv->pos[s->cell[i]];
        if (p < first || p > last) continue;
        int32_t a = lo, b = hi; /* binary search p - delta among the moved positions */
        while (a < b) {
            int32_t m = a + (b - a) / 2;
            if ((int64_t)kv->pos[s->cell[m]] + delta < p)
                a = m + 1;
            else
                b = m;
        }
        if (a < hi && (int64_t)kv->pos[s->cell[a]] + delta == p)
            return mf_err(err, MF_E_INVAL,
                          "seq_add: position %d of sequence %d would move onto position %d, which the sequence "
                          "keeps outside [%d, %d); remove it first with seq_rm",
                          kv->pos[s->cell[a]], seq, p, MF_MAX(p0, 0), p1);
    }
    int32_t need = 0;
    for (int32_t i = lo; i < hi; i++) need += kv->refs[s->cell[i]] > 1 && (int64_t)kv->pos[s->cell[i]] + delta >= 0;
    if (need > kv->n_cells - kv->n_used)
        return mf_err(err, MF_E_RANGE,
                      "seq_add: %d of the moved cells of sequence %d are shared with other sequences and need a "
                      "copy each, but %d of %d cells are free (raise -c or remove sequences)",
                      need, seq, kv->n_cells - kv->n_used, kv->n_cells);
    float *tmp = malloc(sizeof(float) * (size_t)kv->n_embd_k);
    int32_t *moved = malloc(sizeof(int32_t) * (size_t)(hi - lo)), *out = malloc(sizeof(int32_t) * (size_t)s->n);
    if (!tmp || !moved || !out) {
        free(tmp);
        free(moved);
        free(out);
        return mf_err(err, MF_E_NOMEM, "out of memory shifting %d cells", hi - lo);
    }
    float cache[MF_KV_ROPE_MAX];
    shift_cache(cache, rope, delta);
    int32_t n_mv = 0, hook_rc = 0;
    for (int32_t i = lo; i < hi; i++) {
        int32_t c = s->cell[i];
        if ((int64_t)kv->pos[c] + delta < 0) { /* llama.cpp: shifted before the start = gone */
            unref(kv, c);
            continue;
        }
        if (kv->refs[c] > 1) { /* copy-on-write: the other sharers keep the cell as it is */
            const int32_t nc = take_cell(kv, kv->pos[c]);
            int crc = copy_rows(kv, nc, c, err);
            if (crc && !hook_rc) hook_rc = crc;
            kv->refs[c]--;
            c = nc;
        }
        kv->pos[c] += delta;
        for (int32_t l = 0; l < kv->n_layer; l++) {
            if (!kv->host[l]) {
                int rrc = rope_row_placed(kv, l, c, rope, cache, tmp, err);
                if (rrc && !hook_rc) hook_rc = rrc;
                continue;
            }
            rope_row(kv->type_k, (uint8_t *)mf_kv_k(kv, l) + (size_t)c * kv->row_k, kv->n_embd_k, rope, cache, tmp);
        }
        moved[n_mv++] = c;
    }
    /* the list again in position order: kept [0, lo) ++ [hi, n) (sorted) merged with the moved block */
    int32_t *kept = s->cell, n_kept = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (i < lo || i >= hi) kept[n_kept++] = s->cell[i];
    int32_t a = 0, b = 0, k = 0;
    while (a < n_kept || b < n_mv)
        out[k++] = b >= n_mv || (a < n_kept && kv->pos[kept[a]] < kv->pos[moved[b]]) ? kept[a++] : moved[b++];
    memcpy(s->cell, out, sizeof(int32_t) * (size_t)k);
    s->n = k;
    free(out);
    free(tmp);
    free(moved);
    /* a non-host layer's hook failed: the positions moved, that layer's rows may not have (reported) */
    return hook_rc ? mf_err_prefix(err, hook_rc, "seq_add: moving the rows of sequence %d", seq) : 0;
}

/* ---- a batch ---- */
static int tok_cmp(const void *a, const void *b) {
    const kv_tok *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return 0;
}

static bool spans_reserve(mf_kv *kv, size_t n) {
    if (n <= kv->spans_cap) return true;
    size_t cap = MF_MAX(n, 2 * kv->spans_cap);
    int32_t *p = realloc(kv->spans, sizeof(int32_t) * cap);
    if (!p) return false;
    kv->spans = p;
    kv->spans_cap = cap;
    return true;
}

int mf_kv_prepare(mf_kv *kv, int32_t n_tok, const int32_t *pos, const int32_t *seq, int32_t *cells_out,
                  bool spans, mf_error *err) {
    if (n_tok <= 0) return mf_err(err, MF_E_INVAL, "empty batch (0 tokens)");
    for (int32_t t = 0; t < n_tok; t++)
        if (seq[t] < 0 || pos[t] < 0)
            return mf_err(err, MF_E_INVAL, "batch token %d has sequence %d position %d; both must be >= 0", t,
                          seq[t], pos[t]);
    const int32_t n_free = kv->n_cells - kv->n_used;
    if (n_tok > n_free)
        return mf_err(
            err, MF_E_RANGE,
            "the context is full: the batch needs %d KV cells, %d of %d are free (raise -c/--ctx-size or "
            "remove sequences)",
            n_tok, n_free, kv->n_cells);
    if (n_tok > kv->toks_cap) {
        kv_tok *t = realloc(kv->toks, sizeof *t * (size_t)n_tok);
        if (!t) return mf_err(err, MF_E_NOMEM, "out of memory resolving a batch of %d", n_tok);
        kv->toks = t;
        kv->toks_cap = n_tok;
    }
    kv_tok *T = kv->toks;
    for (int32_t t = 0; t < n_tok; t++) T[t] = (kv_tok){seq[t], pos[t], t};
    qsort(T, (size_t)n_tok, sizeof *T, tok_cmp);
    /* refusals before any change: duplicates in the batch, positions already cached; room in the lists */
    for (int32_t i = 0; i < n_tok; i++) {
        if (i > 0 && T[i].seq == T[i - 1].seq && T[i].pos == T[i - 1].pos)
            return mf_err(err, MF_E_INVAL, "batch tokens %d and %d both hold sequence %d position %d",
                          MF_MIN(T[i].tok, T[i - 1].tok), MF_MAX(T[i].tok, T[i - 1].tok), T[i].seq, T[i].pos);
        const kv_seq *s = find_seq(kv, T[i].seq);
        if (!s) continue;
        const int32_t j = lower_bound(kv, s, T[i].pos);
        if (j < s->n && kv->pos[s->cell[j]] == T[i].pos)
            return mf_err(err, MF_E_INVAL,
                          "batch token %d: position %d of sequence %d is already in the KV cache (remove it first "
                          "with seq_rm)",
                          T[i].tok, T[i].pos, T[i].seq);
    }
    size_t n_spans = 2 + 2 * (size_t)n_tok;
    for (int32_t i = 0, e; i < n_tok; i = e) {
        for (e = i + 1; e < n_tok && T[e].seq == T[i].seq;) e++;
        kv_seq *s = get_seq(kv, T[i].seq);
        if (!s || !seq_reserve(s, s->n + (e - i)))
            return mf_err(err, MF_E_NOMEM, "out of memory for the cell list of sequence %d", T[i].seq);
        n_spans += (size_t)(s->n + (e - i));
    }
    if (spans && (n_spans > INT32_MAX || !spans_reserve(kv, n_spans)))
        return mf_err(err, MF_E_NOMEM, "out of memory for %zu span entries", n_spans);
    /* commit: cells in batch order (the lowest free first), then each sequence's list merged with its
     * batch tokens from the back (a decode step appends: nothing moves) */
    for (int32_t t = 0; t < n_tok; t++) cells_out[t] = take_cell(kv, pos[t]);
    kv->work = 0;
    size_t off = 2 + 2 * (size_t)n_tok;
    for (int32_t i = 0, e; i < n_tok; i = e) {
        for (e = i + 1; e < n_tok && T[e].seq == T[i].seq;) e++;
        kv_seq *s = find_seq(kv, T[i].seq);
        int32_t a = s->n - 1, w = s->n + (e - i) - 1;
        for (int32_t b = e - 1; b >= i; b--) {
            while (a >= 0 && kv->pos[s->cell[a]] > T[b].pos) s->cell[w--] = s->cell[a--];
            s->cell[w--] = cells_out[T[b].tok];
        }
        kv->work += s->n - 1 - a; /* entries moved to make room */
        s->n += e - i;
        if (!spans) continue;
        /* the list once; each token's window is its prefix up to the token's own entry */
        memcpy(kv->spans + off, s->cell, sizeof(int32_t) * (size_t)s->n);
        kv->work += s->n;
        for (int32_t b = i, j = 0; b < e; b++) {
            while (s->cell[j] != cells_out[T[b].tok]) j++; /* positions ascend with b: one pass */
            kv->spans[2 + 2 * T[b].tok] = (int32_t)off;
            kv->spans[3 + 2 * T[b].tok] = j + 1;
        }
        off += (size_t)s->n;
    }
    if (spans) {
        kv->spans[0] = (int32_t)off;
        kv->spans[1] = n_tok;
    }
    return 0;
}

void mf_kv_unprepare(mf_kv *kv, int32_t n_tok, const int32_t *seq, const int32_t *cells) {
    for (int32_t t = 0; t < n_tok; t++) {
        const int32_t c = cells[t];
        kv_seq *s = find_seq(kv, seq[t]);
        if (!s || c < 0 || c >= kv->n_cells || kv->refs[c] == 0) continue;
        const int32_t j = lower_bound(kv, s, kv->pos[c]);
        if (j >= s->n || s->cell[j] != c) continue;
        memmove(s->cell + j, s->cell + j + 1, sizeof(int32_t) * (size_t)(s->n - j - 1));
        s->n--;
        unref(kv, c);
    }
}

int32_t *mf_kv_spans(mf_kv *kv) {
    return kv->spans;
}
int64_t mf_kv_prepare_work(const mf_kv *kv) {
    return kv->work;
}

/* ---- session files: one sequence's cells out and in ---- */

int32_t mf_kv_seq_export(const mf_kv *kv, int32_t seq, int32_t *pos, int32_t *cells, int32_t cap) {
    /* the sequence's own list: position order, shared cells included (a cell's lowest holder is not
     * necessarily this sequence, so a scan of the cells by owner would miss a sharer's prefix) */
    int32_t n = 0;
    const int32_t *list = mf_kv_seq_cells(kv, seq, &n);
    n = MF_MIN(n, MF_MAX(cap, 0));
    for (int32_t i = 0; i < n; i++) cells[i] = list[i];
    for (int32_t i = 0; i < n; i++) pos[i] = kv->pos[cells[i]];
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
    /* a batch without spans: prepare takes free cells (lowest first; never a shared one, so the rows
     * written next belong to this sequence alone) and refuses with nothing changed */
    int rc = mf_kv_prepare(kv, n, pos, seqs, cells_out, false, err);
    free(seqs);
    return rc;
}
