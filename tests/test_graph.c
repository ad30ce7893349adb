/* graph IR: builder validation messages, zero-copy views, allocator properties (checked exhaustively),
 * graph cache MRU/LRU behaviour, JSON/DOT export. */
#include "backend/cpu/cpu.h"
#include "graph/graph.h"
#include "quant/quant.h"
#include "harness.h"

#include <cJSON.h>
#include <math.h>

static uint64_t rng = 1;
static uint32_t urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) {
    return (float)(urand() & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

static int32_t in2(mf_graph *g, const char *name, int64_t a, int64_t b) {
    const int64_t ne[2] = {a, b};
    return mf_g_input(g, name, MF_TYPE_F32, 2, ne);
}

static void test_builder_messages(void) {
    mf_graph *g = mf_graph_new();
    static float wdata[896 * 896];
    const int64_t wne[2] = {896, 896};
    int32_t w = mf_g_weight(g, "blk.0.attn_q.weight", MF_TYPE_F32, 2, wne, wdata);
    int32_t x = mf_g_name(g, in2(g, "attn_norm-0", 768, 7), "attn_norm-0");
    REQUIRE(w >= 0 && x >= 0, "leaves failed");
    int32_t q = mf_g_name(g, mf_g_matmul(g, w, x), "blk.0.attn_q");
    CHECK(q == MF_NODE_INVALID, "matmul accepted mismatched shapes");
    mf_error err = {0};
    int rc = mf_graph_error(g, &err);
    CHECK(rc == MF_E_INVAL, "rc %d", rc);
    CHECK(strstr(err.msg, "matmul 'blk.0.attn_q'") && strstr(err.msg, "[896, 896]") &&
              strstr(err.msg, "[768, 7]") && strstr(err.msg, "ne0"),
          "message: %s", err.msg);
    /* later builders on an invalid source stay invalid and keep the first error */
    int32_t r = mf_g_name(g, mf_g_rms_norm(g, q, 1e-6f), "later");
    CHECK(r == MF_NODE_INVALID, "builder on invalid source returned %d", r);
    mf_error err2 = {0};
    mf_graph_error(g, &err2);
    CHECK(!strcmp(err.msg, err2.msg), "first error replaced: %s", err2.msg);
    int arc = mf_graph_alloc(g, &err2);
    REQUIRE(arc != 0, "alloc of a failed graph succeeded");
    mf_graph_free(g);

    /* broadcast mismatch names both shapes */
    g = mf_graph_new();
    int32_t a = mf_g_name(g, in2(g, "a", 16, 4), "a");
    int32_t b = mf_g_name(g, in2(g, "b", 16, 3), "b");
    mf_g_name(g, mf_g_add(g, a, b), "ffn_out-2");
    mf_graph_error(g, &err);
    CHECK(strstr(err.msg, "add 'ffn_out-2'") && strstr(err.msg, "'a' [16, 4]") &&
              strstr(err.msg, "'b' [16, 3]") && strstr(err.msg, "ne1"),
          "message: %s", err.msg);
    mf_graph_free(g);

    /* an unnamed failure still says which node */
    g = mf_graph_new();
    const int64_t h16[1] = {16};
    int32_t f16 = mf_g_input(g, "h", MF_TYPE_F16, 1, h16);
    mf_g_rms_norm(g, f16, 1e-6f);
    CHECK(mf_graph_error(g, &err) == MF_E_TYPE && strstr(err.msg, "rms_norm") && strstr(err.msg, "f16") &&
              strstr(err.msg, "node #1"),
          "message: %s", err.msg);
    mf_graph_free(g);

    /* rope: positions must match n_tok; attention: GQA divisibility */
    g = mf_graph_new();
    const int64_t qne[3] = {64, 14, 5}, kne[2] = {64 * 3, 32}, wne2[2] = {2, 6};
    int32_t qq = mf_g_input(g, "q", MF_TYPE_F32, 3, qne);
    int64_t four = 4;
    int32_t pos = mf_g_input(g, "pos", MF_TYPE_I32, 1, &four);
    const mf_rope r64 = mf_rope_plain(64, MF_ROPE_NEOX, 1e6f);
    mf_g_name(g, mf_g_rope(g, qq, pos, &r64), "Qcur-0");
    mf_graph_error(g, &err);
    CHECK(strstr(err.msg, "rope 'Qcur-0'") && strstr(err.msg, "5 vs 4"), "message: %s", err.msg);
    mf_graph_free(g);
    g = mf_graph_new();
    qq = mf_g_input(g, "q", MF_TYPE_F32, 3, qne);
    static float kc[64 * 3 * 32], vc[64 * 3 * 32];
    int32_t kk = mf_g_external(g, "k", MF_TYPE_F32, 2, kne, kc),
            vv = mf_g_external(g, "v", MF_TYPE_F32, 2, kne, vc);
    int32_t ww = mf_g_input(g, "win", MF_TYPE_I32, 2, wne2);
    mf_g_name(g, mf_g_attention(g, qq, kk, vv, ww, 3, 0.125f), "kqv-0");
    mf_graph_error(g, &err);
    CHECK(strstr(err.msg, "attention 'kqv-0'") && strstr(err.msg, "n_head 14") &&
              strstr(err.msg, "n_head_kv 3"),
          "message: %s", err.msg);
    mf_graph_free(g);
}

static void test_views(void) {
    mf_graph *g = mf_graph_new();
    const int64_t ne[3] = {8, 4, 2};
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 3, ne);
    const mf_node *xn = mf_graph_node_c(g, x);
    CHECK(xn->nb[0] == 4 && xn->nb[1] == 32 && xn->nb[2] == 128 && xn->nb[3] == 256,
          "strides %zu %zu %zu %zu", xn->nb[0], xn->nb[1], xn->nb[2], xn->nb[3]);
    const int64_t vne[2] = {8, 2};
    const size_t vnb[2] = {4, 32};
    int32_t v1 = mf_g_view(g, x, 2, vne, vnb, 32);
    const int64_t one[1] = {8};
    int32_t v2 = mf_g_name(g, mf_g_view(g, v1, 1, one, NULL, 32), "row2");
    REQUIRE(v1 >= 0 && v2 >= 0, "views failed");
    CHECK(mf_graph_node_c(g, v2)->view_src == x && mf_graph_node_c(g, v2)->view_offs == 64,
          "view of view: src %d offs %llu", mf_graph_node_c(g, v2)->view_src,
          (unsigned long long)mf_graph_node_c(g, v2)->view_offs);
    CHECK(mf_graph_find(g, "row2") == v2 && mf_graph_find(g, "nope") == -1, "find");
    int32_t p = mf_g_permute(g, x, 1, 0, 2, 3);
    const mf_node *pn = mf_graph_node_c(g, p);
    CHECK(pn->ne[0] == 4 && pn->ne[1] == 8 && pn->nb[0] == 32 && pn->nb[1] == 4 && !mf_node_is_contiguous(pn),
          "permute ne %lld %lld nb %zu %zu", (long long)pn->ne[0], (long long)pn->ne[1], pn->nb[0],
          pn->nb[1]);
    const int64_t rne[2] = {16, 4};
    int32_t rs = mf_g_reshape(g, x, 2, rne);
    CHECK(rs >= 0 && mf_graph_node_c(g, rs)->view_src == x, "reshape");
    int32_t c = mf_g_cont(g, p);
    mf_g_set_output(g, c);
    mf_error err = {0};
    REQUIRE_OK(mf_graph_error(g, &err), "%s", err.msg);
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    char *base = mf_graph_node(g, x)->data;
    CHECK(mf_graph_node(g, v2)->data == base + 64 && mf_graph_node(g, p)->data == base &&
              mf_graph_node(g, rs)->data == base,
          "view data pointers do not resolve to the root buffer");
    mf_graph_free(g);

    /* refusals: out-of-bounds view, reshape of a strided tensor, element count mismatch */
    g = mf_graph_new();
    x = mf_g_input(g, "x", MF_TYPE_F32, 3, ne);
    mf_g_view(g, x, 2, vne, vnb, 32 * 7);
    CHECK(mf_graph_error(g, &err) == MF_E_RANGE && strstr(err.msg, "past the end"), "view oob: %s", err.msg);
    mf_graph_free(g);
    g = mf_graph_new();
    x = mf_g_input(g, "x", MF_TYPE_F32, 3, ne);
    mf_g_name(g, mf_g_reshape(g, mf_g_permute(g, x, 1, 0, 2, 3), 2, rne), "bad_reshape");
    CHECK(mf_graph_error(g, &err) == MF_E_INVAL && strstr(err.msg, "bad_reshape") && strstr(err.msg, "cont"),
          "reshape strided: %s", err.msg);
    mf_graph_free(g);
    g = mf_graph_new();
    x = mf_g_input(g, "x", MF_TYPE_F32, 3, ne);
    const int64_t bad[2] = {10, 4};
    mf_g_reshape(g, x, 2, bad);
    CHECK(mf_graph_error(g, &err) == MF_E_INVAL && strstr(err.msg, "64 elements"), "reshape count: %s",
          err.msg);
    mf_graph_free(g);
}

/* ---- allocator ---- */

/* the buffer node n may run in place over: its src0, or the root of a reshape src0 (the same bytes) */
static int32_t in_place_source(mf_graph *g, const mf_node *n) {
    if (n->src[0] < 0) return -1;
    const mf_node *s = mf_graph_node_c(g, n->src[0]);
    return s->op == MF_OP_RESHAPE && s->view_offs == 0 ? s->view_src : n->src[0];
}

/* Independent liveness: a root's life is [its index, last reader of it or of any view of it]; outputs
 * and inputs live to the end.  Two arena buffers may overlap only if one's life ended before the other
 * was computed, or the later one was computed in place over the earlier one (or a reshape of it) at its
 * last use. */
static int check_no_live_overlap(mf_graph *g) {
    int32_t n = mf_graph_n_nodes(g);
    int32_t *last = malloc((size_t)n * sizeof *last);
    for (int32_t i = 0; i < n; i++) last[i] = i;
    for (int32_t i = 0; i < n; i++) {
        const mf_node *nd = mf_graph_node_c(g, i);
        int32_t r = nd->view_src >= 0 ? nd->view_src : i;
        if (nd->flags & MF_NODE_OUTPUT) last[r] = INT32_MAX;
        if (nd->view_src >= 0 && last[r] < i) last[r] = i;
        for (int s = 0; s < MF_MAX_SRC; s++) {
            if (nd->src[s] < 0) continue;
            const mf_node *sn = mf_graph_node_c(g, nd->src[s]);
            int32_t sr = sn->view_src >= 0 ? sn->view_src : nd->src[s];
            if (last[sr] < i) last[sr] = i;
        }
        if (nd->op == MF_OP_INPUT) last[i] = INT32_MAX;
    }
    int violations = 0;
    for (int32_t a = 0; a < n; a++) {
        const mf_node *na = mf_graph_node_c(g, a);
        if (na->view_src >= 0 || na->op == MF_OP_WEIGHT || na->op == MF_OP_EXTERNAL) continue;
        char *a0 = na->data, *a1 = a0 + mf_node_nbytes(na);
        for (int32_t b = a + 1; b < n; b++) {
            const mf_node *nb = mf_graph_node_c(g, b);
            if (nb->view_src >= 0 || nb->op == MF_OP_WEIGHT || nb->op == MF_OP_EXTERNAL) continue;
            char *b0 = nb->data, *b1 = b0 + mf_node_nbytes(nb);
            if (a1 <= b0 || b1 <= a0) continue;                        /* disjoint */
            if (last[a] < b) continue;                                 /* a died before b was computed */
            if (last[a] == b && a0 == b0 && in_place_source(g, nb) == a) continue; /* b in place over a */
            if (violations++ < 5)
                printf("  overlap: node %d [%s] live to %d and node %d [%s]\n", a, mf_op_name(na->op),
                       last[a], b, mf_op_name(nb->op));
        }
    }
    free(last);
    return violations;
}

static size_t sum_sizes(mf_graph *g) {
    size_t s = 0;
    for (int32_t i = 0; i < mf_graph_n_nodes(g); i++) {
        const mf_node *nd = mf_graph_node_c(g, i);
        if (nd->view_src < 0 && nd->op != MF_OP_WEIGHT && nd->op != MF_OP_EXTERNAL) s += mf_node_nbytes(nd);
    }
    return s;
}

static void test_alloc_chain(void) {
    mf_graph *g = mf_graph_new();
    static float w[64 * 64];
    const int64_t wne[2] = {64, 64};
    int32_t wi = mf_g_weight(g, "w", MF_TYPE_F32, 2, wne, w);
    int32_t x = in2(g, "x", 64, 8);
    for (int i = 0; i < 20; i++) x = mf_g_matmul(g, wi, x); /* matmul never runs in place */
    mf_g_set_output(g, x);
    mf_error err = {0};
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    size_t peak = mf_graph_peak_bytes(g), sum = sum_sizes(g);
    CHECK(peak < sum, "peak %zu not below the sum of sizes %zu", peak, sum);
    /* input + output + two ping-pong buffers */
    CHECK(peak <= 4 * 2048, "peak %zu for a chain of 2 KiB buffers", peak);
    CHECK(check_no_live_overlap(g) == 0, "live buffers overlap");
    for (int32_t i = 0; i < mf_graph_n_nodes(g); i++) {
        const mf_node *nd = mf_graph_node_c(g, i);
        if (nd->op != MF_OP_WEIGHT) CHECK(((uintptr_t)nd->data & 63) == 0, "node %d not 64-byte aligned", i);
    }
    mf_graph_free(g);

    /* an elementwise chain runs in place: one buffer besides the input */
    g = mf_graph_new();
    x = in2(g, "x", 64, 8);
    int32_t y = mf_g_scale(g, x, 2.0f); /* cannot overwrite the input */
    for (int i = 0; i < 10; i++) y = mf_g_silu(g, mf_g_scale(g, y, 0.5f));
    int32_t out = mf_g_add(g, y, x);
    mf_g_set_output(g, out);
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    CHECK(mf_graph_node(g, x)->data != mf_graph_node(g, y)->data, "input was overwritten in place");
    CHECK(mf_graph_peak_bytes(g) <= 3 * 2048, "peak %zu: in-place not used", mf_graph_peak_bytes(g));
    CHECK(check_no_live_overlap(g) == 0, "live buffers overlap");
    mf_graph_free(g);
}

/* Random DAGs of [32, 4] f32 values: the exhaustive overlap check holds, and computing with buffer reuse
 * on 4 threads (barriers elided between independent nodes, shared matmul conversions) gives bitwise the
 * same output as computing with every node kept (all marked output = no reuse) on 1 thread. */
#define D 32
static mf_graph *random_graph(uint64_t s, bool keep_all, const float *w, const void *wq, int32_t *in_id,
                              int32_t *out_id) {
    rng = s;
    mf_graph *g = mf_graph_new();
    const int64_t wne[2] = {D, D};
    int32_t wi = mf_g_weight(g, "w", MF_TYPE_F32, 2, wne, w);
    int32_t wqi = mf_g_weight(g, "wq", MF_TYPE_Q8_0, 2, wne, wq);
    int32_t pool[64];
    int np = 0;
    pool[np++] = *in_id = in2(g, "x", D, 4);
    const int64_t bne[2] = {D, 1};
    int32_t bias = mf_g_input(g, "bias", MF_TYPE_F32, 2, bne);
    for (int step = 0; step < 40 && np < 64; step++) {
        int32_t a = pool[np - 1 - (int)(urand() % (uint32_t)(np < 4 ? np : 4))];
        int32_t b = pool[urand() % (uint32_t)np];
        int32_t r;
        switch (urand() % 11) {
        case 0:
            r = mf_g_add(g, a, b);
            break;
        case 1:
            r = mf_g_mul(g, a, b);
            break;
        case 2:
            r = mf_g_scale(g, a, 0.75f);
            break;
        case 3:
            r = mf_g_silu(g, a);
            break;
        case 4:
            r = mf_g_rms_norm(g, a, 1e-5f);
            break;
        case 5:
            r = mf_g_matmul(g, wi, a);
            break;
        case 6:
            r = mf_g_swiglu(g, a, b);
            break;
        case 7: {
            /* transpose twice through views: the second reshape aliases the cont result */
            const int64_t ne[2] = {D, 4};
            r = mf_g_reshape(g, mf_g_cont(g, mf_g_permute(g, a, 1, 0, 2, 3)), 2, ne);
            break;
        }
        case 8:
            r = mf_g_matmul(g, wqi, mf_g_rms_norm(g, a, 1e-5f));
            break;
        case 9: {
            /* two matmuls of one input: one shared conversion, no barrier between them */
            int32_t n = mf_g_rms_norm(g, a, 1e-5f);
            r = mf_g_swiglu(g, mf_g_matmul(g, wqi, n), mf_g_matmul(g, wqi, n));
            break;
        }
        default:
            r = mf_g_add(g, a, bias);
            break;
        }
        if (keep_all && r >= 0) {
            for (int32_t i = 0; i < mf_graph_n_nodes(g); i++) mf_g_set_output(g, i);
        }
        pool[np++] = r;
    }
    int32_t out = mf_g_add(g, pool[np - 1], pool[np - 2]);
    mf_g_set_output(g, out);
    *out_id = out;
    return g;
}

/* a store (an alias node) as the last reader still releases the buffer it read */
static void test_alloc_store_releases(void) {
    static float cache[64 * 16];
    mf_graph *g = mf_graph_new();
    const int64_t cne[2] = {64, 16};
    int32_t c = mf_g_external(g, "cache", MF_TYPE_F32, 2, cne, cache);
    int32_t x = in2(g, "x", 64, 4);
    int64_t four = 4;
    int32_t cells = mf_g_input(g, "cells", MF_TYPE_I32, 1, &four);
    int32_t rows = mf_g_scale(g, x, 2.0f);
    int32_t st = mf_g_kv_store(g, c, rows, cells);
    int32_t z = mf_g_scale(g, x, 3.0f); /* same size as rows, computed after rows died */
    int32_t o = mf_g_add(g, z, mf_g_view(g, st, 2, (const int64_t[]){64, 4}, NULL, 0));
    mf_g_set_output(g, o);
    mf_error err = {0};
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    CHECK(mf_graph_node(g, z)->data == mf_graph_node(g, rows)->data,
          "the stored rows' buffer was not reused");
    CHECK(check_no_live_overlap(g) == 0, "live buffers overlap");
    mf_graph_free(g);
}

/* Qwen2's q and k go to RoPE through a reshape into heads.  Each rope takes its own matmul's buffer
 * over (a reshape is the same bytes): had the k rope been given the q buffer the q rope had just freed,
 * the CPU plan would put a barrier between the two ropes (the second writing what the first still
 * reads), one more a layer and a token.  A reshape whose root is read again later is left alone. */
static void test_rope_over_reshaped_heads_runs_in_place(void) {
    static float w[64 * 64];
    const int64_t wne[2] = {64, 64}, heads[3] = {16, 4, 2};
    for (int keep_q = 0; keep_q < 2; keep_q++) {
        mf_graph *g = mf_graph_new();
        int32_t wi = mf_g_weight(g, "w", MF_TYPE_F32, 2, wne, w);
        int32_t x = in2(g, "x", 64, 2);
        int64_t two = 2;
        int32_t pos = mf_g_input(g, "pos", MF_TYPE_I32, 1, &two);
        int32_t q = mf_g_matmul(g, wi, x), k = mf_g_matmul(g, wi, x);
        const mf_rope r16 = mf_rope_plain(16, MF_ROPE_NEOX, 10000.0f);
        int32_t rq = mf_g_rope(g, mf_g_reshape(g, q, 3, heads), pos, &r16);
        int32_t rk = mf_g_rope(g, mf_g_reshape(g, k, 3, heads), pos, &r16);
        int32_t o = mf_g_add(g, rq, rk);
        if (keep_q) o = mf_g_add(g, o, mf_g_reshape(g, q, 3, heads)); /* q is read after its rope */
        mf_g_set_output(g, o);
        mf_error err = {0};
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        const void *dq = mf_graph_node(g, q)->data, *dk = mf_graph_node(g, k)->data;
        CHECK((mf_graph_node(g, rq)->data == dq) == !keep_q, "keep_q %d: q rope in place %d", keep_q,
              mf_graph_node(g, rq)->data == dq);
        CHECK(mf_graph_node(g, rk)->data == dk, "keep_q %d: the k rope did not take k's buffer", keep_q);
        CHECK(check_no_live_overlap(g) == 0, "keep_q %d: live buffers overlap", keep_q);
        mf_graph_free(g);
    }
}

static void test_alloc_random_graphs(void) {
    static float w[D * D];
    static uint8_t wq[D * D / 32 * 34];
    for (int i = 0; i < D * D; i++) w[i] = (float)((i * 37) % 17 - 8) / 32.0f;
    for (int r = 0; r < D; r++) mf_quantize_row(MF_TYPE_Q8_0, w + r * D, wq + r * 34 * (D / 32), D);
    float x[D * 4], bias[D];
    for (int i = 0; i < D * 4; i++) x[i] = (float)((i * 13) % 11 - 5) / 4.0f;
    for (int i = 0; i < D; i++) bias[i] = 0.1f * (float)i;
    mf_cpu *cpu[2] = {NULL, NULL};
    mf_error err = {0};
    REQUIRE_OK(mf_cpu_new(4, &cpu[0], &err), "%s", err.msg);
    REQUIRE_OK(mf_cpu_new(1, &cpu[1], &err), "%s", err.msg);
    int reused = 0;
    for (uint64_t s = 1; s <= 60; s++) {
        float res[2][D * 4];
        size_t peaks[2];
        for (int keep = 0; keep < 2; keep++) {
            int32_t in, out;
            mf_graph *g = random_graph(s, keep, w, wq, &in, &out);
            REQUIRE_OK(mf_graph_error(g, &err), "seed %llu: %s", (unsigned long long)s, err.msg);
            REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
            CHECK(check_no_live_overlap(g) == 0, "seed %llu keep %d: live buffers overlap",
                  (unsigned long long)s, keep);
            memcpy(mf_graph_node(g, in)->data, x, sizeof x);
            memcpy(mf_graph_node(g, mf_graph_find(g, "bias"))->data, bias, sizeof bias);
            REQUIRE_OK(mf_cpu_compute(cpu[keep], g, &err), "%s", err.msg);
            memcpy(res[keep], mf_graph_node(g, out)->data, sizeof res[keep]);
            peaks[keep] = mf_graph_peak_bytes(g);
            mf_graph_free(g);
        }
        CHECK(!memcmp(res[0], res[1], sizeof res[0]), "seed %llu: reuse/threads changed the result",
              (unsigned long long)s);
        reused += peaks[0] < peaks[1];
    }
    CHECK(reused >= 45, "only %d of 60 graphs got smaller with reuse", reused);
    mf_cpu_free(cpu[0]);
    mf_cpu_free(cpu[1]);
    (void)frand;
}
#undef D

static void test_output_never_reused(void) {
    mf_graph *g = mf_graph_new();
    int32_t x = in2(g, "x", 32, 2);
    int32_t o1 = mf_g_scale(g, mf_g_silu(g, x), 3.0f);
    mf_g_set_output(g, o1);
    int32_t y = o1;
    for (int i = 0; i < 6; i++) y = mf_g_silu(g, mf_g_scale(g, y, 0.5f)); /* could run in place over o1 */
    mf_g_set_output(g, y);
    mf_error err = {0};
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    char *o0 = mf_graph_node(g, o1)->data;
    for (int32_t i = o1 + 1; i < mf_graph_n_nodes(g); i++) {
        char *d = mf_graph_node(g, i)->data;
        CHECK(d + 256 <= o0 || o0 + 256 <= d, "node %d overlaps the output", i);
    }
    CHECK(check_no_live_overlap(g) == 0, "live buffers overlap");
    mf_graph_free(g);
}

/* ---- cache ---- */
static bool io_eq(const mf_graph_io *a, const mf_graph_io *b) {
    return a->tokens == b->tokens && a->pos == b->pos && a->cells == b->cells && a->spans == b->spans &&
           a->out_ids == b->out_ids && a->logits == b->logits;
}

static void test_cache_mru_lru(void) {
    mf_graph_cache *c = mf_graph_cache_new(2);
    mf_graph_key k1 = {1, 1, 0}, k7 = {7, 1, 0}, k7all = {7, 7, 0}, k1f = {1, 1, 1};
    mf_graph *g1 = mf_graph_new(), *g7 = mf_graph_new(), *g7all = mf_graph_new();
    /* each graph's input and logits ids come back with it, never another entry's */
    const mf_graph_io io1 = {0, 1, 2, 3, -1, 40}, io7 = {0, 1, 2, 3, 4, 70}, io7all = {5, 6, 7, 8, -1, 99};
    mf_graph_io io = {0};
    CHECK(mf_graph_cache_get(c, &k1, &io) == NULL, "empty hit");
    mf_graph_cache_put(c, &k1, g1, &io1);
    mf_graph_cache_put(c, &k7, g7, &io7);
    CHECK(mf_graph_cache_get(c, &k1, &io) == g1 && io_eq(&io, &io1), "k1 miss or its ids lost (logits %d)",
          io.logits); /* k1 is now MRU, k7 LRU */
    CHECK(mf_graph_cache_get(c, &k7, &io) == g7 && io_eq(&io, &io7), "k7 ids: logits %d out_ids %d", io.logits,
          io.out_ids);
    CHECK(mf_graph_cache_get(c, &k1, NULL) == g1, "k1 without ids"); /* k1 MRU again */
    CHECK(mf_graph_cache_get(c, &k1f, &io) == NULL, "flags ignored in the key");
    mf_graph_cache_put(c, &k7all, g7all, &io7all); /* evicts k7 (and frees it) */
    CHECK(mf_graph_cache_get(c, &k7, &io) == NULL, "LRU entry not evicted");
    CHECK(mf_graph_cache_get(c, &k1, &io) == g1 && io_eq(&io, &io1), "MRU entry evicted or its ids moved");
    CHECK(mf_graph_cache_get(c, &k7all, &io) == g7all && io_eq(&io, &io7all), "new entry missing or its ids");
    CHECK(mf_graph_cache_hits(c) == 5 && mf_graph_cache_misses(c) == 3, "hits %d misses %d",
          mf_graph_cache_hits(c), mf_graph_cache_misses(c));
    mf_graph *g1b = mf_graph_new();
    const mf_graph_io io1b = {10, 11, 12, 13, 14, 15};
    mf_graph_cache_put(c, &k1, g1b, &io1b); /* replaces (frees) g1 */
    CHECK(mf_graph_cache_get(c, &k1, &io) == g1b && io_eq(&io, &io1b), "replacement or its ids not returned");
    mf_graph_cache_free(c);
}

/* ---- export ---- */
static void test_export_json_dot(void) {
    mf_graph *g = mf_graph_new();
    int32_t x = mf_g_name(g, in2(g, "x", 8, 2), "in \"quoted\" \\ name\n");
    int32_t y = mf_g_layer(g, mf_g_name(g, mf_g_silu(g, x), "silu-%d", 3), 3);
    mf_g_set_output(g, y);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_OK(mf_graph_write_json(g, f), "json write");
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    REQUIRE(j, "invalid JSON: %s", buf);
    cJSON *nodes = cJSON_GetObjectItem(j, "nodes");
    CHECK(cJSON_GetArraySize(nodes) == 2, "node count");
    cJSON *n0 = cJSON_GetArrayItem(nodes, 0), *n1 = cJSON_GetArrayItem(nodes, 1);
    CHECK(!strcmp(cJSON_GetObjectItem(n0, "name")->valuestring, "in \"quoted\" \\ name\n"),
          "name round trip");
    CHECK(!strcmp(cJSON_GetObjectItem(n1, "op")->valuestring, "silu"), "op");
    CHECK(!strcmp(cJSON_GetObjectItem(n1, "type")->valuestring, "f32"), "type");
    CHECK(cJSON_GetObjectItem(n1, "layer")->valueint == 3 &&
              cJSON_GetObjectItem(n1, "backend")->valueint == -1,
          "layer/backend");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(n1, "ne")) == 2 &&
              cJSON_GetArrayItem(cJSON_GetObjectItem(n1, "src"), 0)->valueint == 0,
          "ne/src");
    cJSON_Delete(j);
    free(buf);
    f = open_memstream(&buf, &len);
    REQUIRE_OK(mf_graph_write_dot(g, f), "dot write");
    fclose(f);
    CHECK(strstr(buf, "digraph") && strstr(buf, "n0 -> n1") && strstr(buf, "silu-3") &&
              strstr(buf, "\\\"quoted\\\""),
          "dot: %s", buf);
    free(buf);
    mf_graph_free(g);
}

int main(void) {
    RUN(test_builder_messages);
    RUN(test_views);
    RUN(test_alloc_chain);
    RUN(test_alloc_store_releases);
    RUN(test_rope_over_reshaped_heads_runs_in_place);
    RUN(test_alloc_random_graphs);
    RUN(test_output_never_reused);
    RUN(test_cache_mru_lru);
    RUN(test_export_json_dot);
    return mf_test_done();
}
