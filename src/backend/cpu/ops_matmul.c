/* CPU matmul: out[m][n] = vec_dot(K, w_n, a_m) with the quant kernels of the weight type.
 *
 * Phase 1 converts each activation row once to the kernel's vec_dot type (rows split over threads), and
 * where the kernel has an act_ok check, notes per row whether its faster tile may take it (the flags
 * follow the rows in the conversion buffer; 0 where the kernel has no check), and where the kernel takes
 * its activations packed (the AMX x16 tiles: quant.h, pack_size), also places each row in that packed copy,
 * after the flags, so no kernel call copies rows of its own.
 * Phase 2 splits the weight rows over threads; a thread walks its rows in tiles and, for each tile,
 * every activation row, so a weight row is streamed from memory once per forward while it is hot.
 * Invariant: (n, m) is always one vec_dot call on the same bytes, so the result depends neither on M
 * nor on the thread count (batched == serial, bitwise). */
#include "backend/cpu/cpu_impl.h"

#define TILE_N 16 /* weight rows per cache tile (a multiple of every kernel tile width) */

static bool direct_f32(const mf_quant_kernels *k) {
    return k->vec_dot_type == MF_TYPE_F32;
}

/* where the packed copy of the activations starts in the conversion buffer: after the rows and their flags */
static size_t pack_offset(size_t rs, int64_t M) {
    return ((rs + 1) * (size_t)M + 63) / 64 * 64;
}

/* the bytes of the packed activations matmul n makes (the AMX x16 kernels; 0: none) */
static size_t pack_bytes(const mf_quant_kernels *k, int64_t K, int64_t M) {
    return k->pack_size && M > MF_CPU_PRIVATE_CONV_ROWS ? k->pack_size(K, M) : 0;
}

bool mf_cpu_matmul_packs(const mf_graph *g, const mf_node *n) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    return k && pack_bytes(k, x->ne[0], mf_cpu_nrows(x)) > 0;
}

size_t mf_cpu_matmul_shared_bytes(const mf_graph *g, const mf_node *n) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    if (!k || direct_f32(k)) return 0;
    const int64_t M = mf_cpu_nrows(x);
    const size_t rs = mf_row_size(k->vec_dot_type, x->ne[0]);
    /* the rows, a flag per row, then the packed copy if the kernel takes one */
    return pack_offset(rs, M) + pack_bytes(k, x->ne[0], M) + 64;
}

bool mf_cpu_matmul_private(const mf_graph *g, const mf_node *n) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    const int64_t M = mf_cpu_nrows(x);
    return k && !direct_f32(k) && M <= MF_CPU_PRIVATE_CONV_ROWS && M * x->ne[0] <= MF_CPU_PRIVATE_CONV_ELEMS;
}

size_t mf_cpu_matmul_private_bytes(const mf_graph *g, const mf_node *n) {
    if (!mf_cpu_matmul_private(g, n)) return 0;
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    return (mf_row_size(mf_quant_kernels_get(w->type)->vec_dot_type, x->ne[0]) + 1) * (size_t)mf_cpu_nrows(x) + 64;
}

/* a fused ADD/MUL (in place over this result): columns [t0, t1) of every row, the same float operation
 * the unfused node performs */
static void apply_fused(const mf_cpu_exec *ex, const mf_node *f, float *out, int64_t N, int64_t M, int64_t t0,
                        int64_t t1) {
    const mf_node *b = mf_graph_node_c(ex->g, f->src[1]);
    const bool z1 = b->ne[0] == 1;
    for (int64_t m = 0; m < M; m++) {
        const float *z = mf_cpu_bcast_row(b, f, m);
        ex->cpu->vec.bin_op(t1 - t0, out + m * N + t0, (int)f->op, z1 ? z : z + t0, z1, out + m * N + t0);
    }
}

/* what one matmul's row ranges need */
typedef struct {
    const mf_quant_kernels *k;
    int64_t K, N, M;
    const mf_node *x;
    bool direct;
    const uint8_t *abuf;
    const uint8_t *ok; /* per activation row: act_ok accepted it (NULL: the kernel has no vec_dot_tile_ok) */
    const void *pk;    /* the packed activations (NULL: the kernel takes none) */
    size_t rs, as;
    int tw, ta;
    const char *wd;
    size_t ws;
    float *out; /* contiguous [N, M] */
    const mf_node *f;
    const mf_cpu_exec *ex;
} mm_ctx;

/* the tile for activation rows [m0, m0 + na): the faster one when act_ok accepted every one of them */
static mf_vec_dot_tile_fn tile_for(const mm_ctx *c, int64_t m0, int na) {
    if (!c->ok) return c->k->vec_dot_tile;
    for (int j = 0; j < na; j++)
        if (!c->ok[m0 + j]) return c->k->vec_dot_tile;
    return c->k->vec_dot_tile_ok;
}

/* weight rows [n0, n1) against every activation row, then the fused op over those columns */
static void mm_rows(const mm_ctx *c, int64_t n0, int64_t n1) {
    const mf_quant_kernels *k = c->k;
    const int64_t K = c->K, N = c->N, M = c->M;
    float *out = c->out;
    float s[MF_TILE_MAX * MF_TILE_MAX];
    if (k->act_major && c->ta > MF_TILE_MAX) {
        /* AMX (128 activations a call): activations outer, so a block of them stays in L2 for every weight
         * group of the range instead of streaming all M rows from memory again for each group (the FFN down
         * matrix's 512 x 4864 activations are 2.8 MB).  The same calls as below, in another order. */
        for (int64_t m0 = 0; m0 < M; m0 += c->ta) {
            const int na = (int)MF_MIN((int64_t)c->ta, M - m0);
            const void *a = c->abuf + (size_t)m0 * c->rs;
            const mf_vec_dot_tile_fn tile = tile_for(c, m0, na);
            if (c->pk) /* the same calls on the copy packed once for all of them */
                k->tile_packed(K, &out[m0 * N + n0], (size_t)N, c->wd + (size_t)n0 * c->ws, c->ws, (int)(n1 - n0),
                               c->pk, M, m0, na);
            else if (k->spans) /* the whole range in one call (below 8 activations it streams groups side by side) */
                tile(K, &out[m0 * N + n0], (size_t)N, c->wd + (size_t)n0 * c->ws, c->ws, (int)(n1 - n0),
                                a, c->as, na);
            else
                for (int64_t j0 = n0; j0 < n1; j0 += c->tw)
                    tile(K, &out[m0 * N + j0], (size_t)N, c->wd + (size_t)j0 * c->ws, c->ws,
                                    (int)MF_MIN((int64_t)c->tw, n1 - j0), a, c->as, na);
        }
        if (c->f) apply_fused(c->ex, c->f, out, N, M, n0, n1);
        return;
    }
    if (k->spans && M <= c->ta) {
        /* one pass of the activations: the range in one call, so a GEMV (decode) streams several groups of
         * rows side by side instead of one group per call (x16_avx512.c) */
        tile_for(c, 0, (int)M)(K, &out[n0], (size_t)N, c->wd + (size_t)n0 * c->ws, c->ws, (int)(n1 - n0), c->abuf,
                               c->as, (int)M);
        if (c->f) apply_fused(c->ex, c->f, out, N, M, n0, n1);
        return;
    }
    for (int64_t t0 = n0; t0 < n1; t0 += TILE_N) {
        const int64_t t1 = t0 + TILE_N < n1 ? t0 + TILE_N : n1;
        for (int64_t m0 = 0; m0 < M; m0 += c->ta) {
            const int na = (int)MF_MIN((int64_t)c->ta, M - m0);
            const void *a = c->direct ? (const void *)((const char *)c->x->data + mf_cpu_row_offs(c->x, m0))
                                      : (const void *)(c->abuf + (size_t)m0 * c->rs);
            const mf_vec_dot_tile_fn tile = c->direct ? k->vec_dot_tile : tile_for(c, m0, na);
            for (int64_t j0 = t0; j0 < t1; j0 += c->tw) {
                const int nw = (int)MF_MIN((int64_t)c->tw, t1 - j0);
                const char *wr = c->wd + (size_t)j0 * c->ws;
                if (k->act_major) { /* straight into the output rows */
                    tile(K, &out[m0 * N + j0], (size_t)N, wr, c->ws, nw, a, c->as, na);
                    continue;
                }
                if (nw == 1 && na == 1 && k->vec_dot) {
                    k->vec_dot(K, &out[m0 * N + j0], wr, a);
                    continue;
                }
                tile(K, s, MF_TILE_MAX, wr, c->ws, nw, a, c->as, na);
                for (int i = 0; i < nw; i++)
                    for (int j = 0; j < na; j++) out[(m0 + j) * N + j0 + i] = s[i * MF_TILE_MAX + j];
            }
        }
    }
    if (c->f) apply_fused(c->ex, c->f, out, N, M, n0, n1);
}

/* Claims up to `want` of the n units of a stretch whose claims word is *st, from its front or its back;
 * returns the first unit claimed (and *got), or -1 when nothing is left. */
static int64_t claim(_Atomic uint64_t *st, int64_t n, int64_t want, bool back, int64_t *got) {
    uint64_t v = atomic_load_explicit(st, memory_order_relaxed);
    for (;;) {
        const int64_t fr = (int64_t)(uint32_t)v, bk = (int64_t)(v >> 32), left = n - fr - bk;
        if (left <= 0) return -1;
        const int64_t take = MF_MIN(want, left);
        const uint64_t nv = back ? v + ((uint64_t)take << 32) : v + (uint64_t)take;
        if (atomic_compare_exchange_weak_explicit(st, &v, nv, memory_order_relaxed, memory_order_relaxed)) {
            *got = take;
            return back ? n - bk - take : fr;
        }
    }
}

/* The next weight rows of a prefill matmul from the counter *next (the first row not yet claimed): about
 * 1 / (2 * nth) of those left, in whole tiles, between one tile and `most` rows.  With fixed 4-tile chunks
 * a thread could wait up to one chunk's time at the next barrier: for the FFN down matrix at pp512 (64 rows
 * x 512 activations x 4864) about 0.4 ms, estimated from its share of the profile, not measured alone.
 * Returns the first row claimed and sets *end; N when none is left. */
static int64_t claim_rows(_Atomic int32_t *next, int64_t N, int64_t most, int nth, int64_t *end) {
    int32_t v = atomic_load_explicit(next, memory_order_relaxed);
    for (;;) {
        if (v >= N) return N;
        const int64_t left = N - v, share = left / (2 * (int64_t)nth) / TILE_N * TILE_N;
        const int64_t take = MF_MIN(left, MF_MIN(most, MF_MAX((int64_t)TILE_N, share)));
        if (atomic_compare_exchange_weak_explicit(next, &v, (int32_t)(v + take), memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *end = v + take;
            return v;
        }
    }
}

#define OWN_CHUNK_BYTES ((size_t)1024 << 10)  /* the owner claims this much of its stretch at a time */
#define STEAL_CHUNK_BYTES ((size_t)24 << 10) /* a thief this much from the end of another's */

/* A decode matmul (at most MF_CPU_PRIVATE_CONV_ROWS activation rows) gives each thread its own stretch of
 * the weight rows (mm_stealing); a prefill one hands rows out from a shared counter.  mf_cpu_matmul_ahead
 * reads ahead only where the stretches hold, so the two ask the same question here. */
static bool by_stretches(int64_t M) { return M <= MF_CPU_PRIVATE_CONV_ROWS; }

/* thread t's own stretch of the units: [*u0, *u0 + returned) */
static int64_t stretch(int64_t units, int t, int nth, int64_t *u0) {
    *u0 = units * t / nth;
    return units * (t + 1) / nth - *u0;
}

/* Decode (<= 4 activation rows, memory-bound): each thread streams one contiguous stretch of the weight
 * rows from its front - one long forward read, which the prefetchers follow - and a thread that is done
 * takes pieces from the BACK of a slower thread's stretch, so a delayed or slower core does not hold the
 * other at the next barrier.  Units are tiles of TILE_N rows. */
static void mm_stealing(const mm_ctx *c, _Atomic uint64_t *steal, int ith, int nth) {
    const int64_t units = (c->N + TILE_N - 1) / TILE_N;
    const size_t ubytes = (size_t)TILE_N * c->ws;
    const int64_t own = MF_MAX((int64_t)1, (int64_t)(OWN_CHUNK_BYTES / ubytes)),
                  theft = MF_MAX((int64_t)1, (int64_t)(STEAL_CHUNK_BYTES / ubytes));
    for (int v = 0; v < nth; v++) {
        const int t = (ith + v) % nth; /* own stretch first, then the others' */
        int64_t u0;
        const int64_t n = stretch(units, t, nth, &u0);
        int64_t got, first;
        while ((first = claim(&steal[t], n, v == 0 ? own : theft, v != 0, &got)) >= 0)
            mm_rows(c, (u0 + first) * TILE_N, MF_MIN(c->N, (u0 + first + got) * TILE_N));
    }
}

mf_tp_ahead mf_cpu_matmul_ahead(const mf_graph *g, const mf_node *n, int ith, int nth, size_t most) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    mf_tp_ahead ah = {0};
    if (!by_stretches(mf_cpu_nrows(x))) return ah; /* prefill: rows go to whoever claims them */
    int64_t u0;
    const int64_t n_units = stretch((w->ne[1] + TILE_N - 1) / TILE_N, ith, nth, &u0);
    const int64_t r0 = u0 * TILE_N, r1 = MF_MIN(w->ne[1], (u0 + n_units) * TILE_N);
    ah.p = (const char *)w->data + (size_t)r0 * w->nb[1];
    ah.len = MF_MIN(most, (size_t)MF_MAX(r1 - r0, (int64_t)0) * w->nb[1]);
    return ah;
}

void mf_cpu_op_matmul(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *w = mf_graph_node_c(ex->g, n->src[0]), *x = mf_graph_node_c(ex->g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    const int64_t K = w->ne[0], N = w->ne[1], M = mf_cpu_nrows(x);
    const bool direct = direct_f32(k);
    const size_t rs = direct ? 0 : mf_row_size(k->vec_dot_type, K);

    const int32_t id = (int32_t)(n - mf_graph_node_c(ex->g, 0));
    const bool priv = ex->plan[id] & MF_CPU_PLAN_PRIVATE;
    uint8_t *abuf = priv ? ex->conv + (size_t)ith * ex->conv_size : ex->shared;
    uint8_t *ok = direct ? NULL : abuf + (size_t)M * rs; /* the flags after the rows */
    /* the packed copy, by the plan's own rule (mf_cpu_matmul_packs): never for a private conversion, whose
     * M is at most MF_CPU_PRIVATE_CONV_ROWS, nor for a kernel without pack_size (the F32 direct ones) */
    uint8_t *pk = pack_bytes(k, K, M) ? abuf + pack_offset(rs, M) : NULL;
    if (!direct && !(ex->plan[id] & MF_CPU_PLAN_REUSE)) {
        int64_t m0 = 0, m1 = M;
        if (!priv) mf_cpu_split(M, ith, nth, &m0, &m1);
        for (int64_t m = m0; m < m1; m++) {
            uint8_t *row = abuf + (size_t)m * rs;
            k->from_float((const float *)((const char *)x->data + mf_cpu_row_offs(x, m)), row, K);
            /* written for every conversion, so a matmul that reuses it reads flags of its own rows */
            ok[m] = k->act_ok && k->act_ok(row, K);
            if (pk) k->pack_row(row, K, m, M, pk);
        }
        if (!priv) mf_threadpool_barrier(ex->cpu->tp);
    }

    /* activation rows at a uniform stride can go through the kernel's tile (bitwise = vec_dot) */
    const bool uniform = !direct || (x->ne[2] * x->ne[3] == 1) ||
                         (x->nb[2] == x->nb[1] * (size_t)x->ne[1] && x->nb[3] == x->nb[2] * (size_t)x->ne[2]);
    mm_ctx c = {.k = k, .K = K, .N = N, .M = M, .x = x, .direct = direct, .abuf = abuf,
                .ok = k->vec_dot_tile_ok ? ok : NULL, .pk = pk, .rs = rs,
                .as = direct ? x->nb[1] : rs,
                /* an x8/x16 layout's tile is one whole group of rows (TILE_N is a multiple of both) */
                .tw = k->act_major ? k->tile_w : MF_MAX(1, MF_MIN(k->tile_w, MF_TILE_MAX)),
                /* an act_major tile stores straight into the output, so it may take more than MF_TILE_MAX (AMX) */
                .ta = uniform ? MF_MAX(1, k->act_major ? k->tile_a : MF_MIN(k->tile_a, MF_TILE_MAX)) : 1,
                .wd = w->data, .ws = w->nb[1], .out = n->data, .f = mf_cpu_fused(ex, n), .ex = ex};

    if (by_stretches(M)) {
        mm_stealing(&c, &ex->steal[(size_t)id * (size_t)nth], ith, nth);
        return;
    }
    /* Prefill: weight rows are handed out from a shared counter in chunks of at most 4 tiles that shrink
     * to one tile as the rows run out (claim_rows), so a thread the OS delays does not stall the other at
     * the next barrier, and the threads finish close together.  Which thread computes a row never changes
     * its value: (n, m) is always the same one kernel call. */
    int64_t ch = (N + (int64_t)nth * 8 - 1) / ((int64_t)nth * 8);
    ch = MF_MIN(MF_MAX((ch + TILE_N - 1) / TILE_N * TILE_N, (int64_t)TILE_N), 4 * (int64_t)TILE_N);
    int64_t n0, n1;
    while ((n0 = claim_rows(&ex->chunks[id], N, ch, nth, &n1)) < N) mm_rows(&c, n0, n1);
}
