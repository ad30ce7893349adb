/* The mixture-of-experts ops on the CPU (MF_OP_TOPK, MF_OP_MATMUL_ID, MF_OP_MOE_SUM), against the dense ops
 * and llama.cpp's own sequence of operations, bit for bit:
 *  - a matmul_id row is the MATMUL of its expert's matrix and its input row, whatever else is in the batch,
 *    the number of threads or which experts the other rows chose (batched == alone);
 *  - moe_sum is llama.cpp's get_rows, sum_rows, clamp, div, mul and chain of adds, rounding where it rounds;
 *  - an expert id outside the tensor is an error naming it, not a read outside the weights.
 * (The op matrix holds each op to an analytic reference; the model-level identities are test_engine's.) */
#include "backend/cpu/cpu.h"
#include "graph/graph.h"
#include "quant/quant.h"
#include "harness.h"

#include <math.h>

static uint64_t rng = 7;
static uint32_t urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) { return (float)(urand() & 0xFFFFFF) / (float)0x800000 - 1.0f; }

static int compute(mf_graph *g, int n_threads, mf_error *err) {
    mf_cpu *cpu = NULL;
    int rc = mf_cpu_new(n_threads, &cpu, err);
    if (!rc) rc = mf_cpu_compute(cpu, g, err);
    mf_cpu_free(cpu);
    return rc;
}

static void put(mf_graph *g, int32_t id, const void *src) {
    mf_node *n = mf_graph_node(g, id);
    memcpy(n->data, src, mf_node_nbytes(n));
}

enum { K = 256, N = 80, E = 5, KU = 2, TMAX = 9 }; /* N: whole x8/x16 row groups, 5 tiles of 16 */

/* E experts' matrices of `type`, quantized from random floats */
static uint8_t *experts(uint32_t type) {
    const size_t rs = mf_row_size(type, K);
    uint8_t *w = malloc(rs * N * E);
    float row[K];
    for (int r = 0; r < N * E; r++) {
        for (int i = 0; i < K; i++) row[i] = frand();
        mf_quantize_row(type, row, w + rs * (size_t)r, K);
    }
    return w;
}

/* matmul_id of T tokens (rows x[t], ids[t * KU + j]) on n_threads; out[(t * KU + j) * N + n] */
static int run_id(uint32_t type, const uint8_t *w, const float *x, const int32_t *ids, int T, int n_threads, float *out,
                  mf_error *err) {
    mf_graph *g = mf_graph_new();
    int64_t nw[3] = {K, N, E}, nx[3] = {K, 1, T}, ni[2] = {KU, T};
    int32_t wi = mf_g_weight(g, "w", type, 3, nw, w), xi = mf_g_input(g, "x", MF_TYPE_F32, 3, nx),
            ii = mf_g_input(g, "ids", MF_TYPE_I32, 2, ni);
    int32_t o = mf_g_matmul_id(g, wi, xi, ii);
    int rc = mf_graph_alloc(g, err);
    if (!rc) {
        put(g, xi, x), put(g, ii, ids);
        rc = compute(g, n_threads, err);
    }
    if (!rc) memcpy(out, mf_graph_node(g, o)->data, sizeof(float) * (size_t)(N * KU * T));
    mf_graph_free(g);
    return rc;
}

/* the dense MATMUL of expert e's matrix and one row */
static int run_dense(uint32_t type, const uint8_t *w, int e, const float *x, float *out, mf_error *err) {
    mf_graph *g = mf_graph_new();
    int64_t nw[2] = {K, N}, nx[2] = {K, 1};
    int32_t wi = mf_g_weight(g, "w", type, 2, nw, w + mf_row_size(type, K) * (size_t)(e * N)),
            xi = mf_g_input(g, "x", MF_TYPE_F32, 2, nx), o = mf_g_matmul(g, wi, xi);
    int rc = mf_graph_alloc(g, err);
    if (!rc) put(g, xi, x), rc = compute(g, 1, err);
    if (!rc) memcpy(out, mf_graph_node(g, o)->data, sizeof(float) * N);
    mf_graph_free(g);
    return rc;
}

#define NO_LAYOUT UINT32_MAX /* (0 is F32's type id) */
/* the experts of `base` in the layout the CPU repacks them into at load (NO_LAYOUT when it has none here) */
static uint32_t repacked(uint32_t base) {
    const uint32_t t = mf_repack_type(base, K, N);
    return t == base ? NO_LAYOUT : t;
}

static void test_matmul_id_rows_are_their_experts_matmul_alone_or_batched(void) {
    /* the plain layouts, then the x8/x16 ones the loader repacks expert stacks into (none on some CPUs) */
    const uint32_t types[] = {MF_TYPE_Q8_0,           MF_TYPE_Q4_0,           MF_TYPE_Q4_K,           MF_TYPE_Q6_K,
                              MF_TYPE_F16,            MF_TYPE_F32,            repacked(MF_TYPE_Q8_0), repacked(MF_TYPE_Q4_0),
                              repacked(MF_TYPE_Q4_K), repacked(MF_TYPE_Q6_K)};
    float x[K * TMAX], dense[N], one[N * KU];
    float *batch = malloc(sizeof(float) * N * KU * TMAX), *batch3 = malloc(sizeof(float) * N * KU * TMAX);
    int32_t ids[KU * TMAX];
    for (int i = 0; i < K * TMAX; i++) x[i] = frand();
    /* expert 4 is chosen by no token; expert 1 by most */
    for (int t = 0; t < TMAX; t++) ids[t * KU] = t % 3 == 0 ? 0 : 1, ids[t * KU + 1] = t % 2 ? 2 : 3;
    int checked = 0;
    int n_types = 0;
    for (size_t ti = 0; ti < MF_ARRAY_LEN(types); ti++) {
        const uint32_t type = types[ti];
        if (type == NO_LAYOUT) continue;
        n_types++;
        const uint32_t base = mf_type_get(type)->row_group > 1 ? mf_repack_base(type) : type;
        uint8_t *w = experts(base);
        if (base != type) { /* the whole stack as its N * E rows, as load_repack.c does */
            uint8_t *r = malloc(mf_row_size(base, K) * N * E);
            REQUIRE(r && mf_repack_as(type, base, w, r, K, N * E) == 0, "repack %s", mf_type_name(type));
            free(w);
            w = r;
        }
        mf_error err = {0};
        REQUIRE_OK(run_id(type, w, x, ids, TMAX, 2, batch, &err), "%s", err.msg);
        REQUIRE_OK(run_id(type, w, x, ids, TMAX, 3, batch3, &err), "%s", err.msg);
        CHECK(!memcmp(batch, batch3, sizeof(float) * N * KU * TMAX), "%s: 2 threads != 3 threads", mf_type_name(type));
        for (int t = 0; t < TMAX; t++) {
            REQUIRE_OK(run_id(type, w, x + t * K, ids + t * KU, 1, 2, one, &err), "%s", err.msg);
            CHECK(!memcmp(one, batch + (size_t)t * N * KU, sizeof one), "%s: token %d alone != in a batch of %d",
                  mf_type_name(type), t, TMAX);
            for (int j = 0; j < KU; j++) {
                REQUIRE_OK(run_dense(type, w, ids[t * KU + j], x + t * K, dense, &err), "%s", err.msg);
                CHECK(!memcmp(dense, batch + (size_t)(t * KU + j) * N, sizeof dense),
                      "%s: token %d slot %d != the matmul of expert %d", mf_type_name(type), t, j, ids[t * KU + j]);
                checked++;
            }
        }
        free(w);
    }
    printf("  %d (token, slot) rows of %d types bitwise their expert's matmul\n", checked, n_types);
    free(batch), free(batch3);
}

/* llama.cpp's build_moe_ffn after the experts, one op at a time, each result rounded to float */
static void llama_moe_sum(const float *y, const float *p, const int32_t *ids, int T, int ku, int n_exp, int n, bool norm,
                          float *out) {
    for (int t = 0; t < T; t++) {
        float w[8];
        double s = 0;
        for (int j = 0; j < ku; j++) w[j] = p[t * n_exp + ids[t * ku + j]], s += (double)w[j];
        float sum = (float)s;
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int j = 0; j < ku && norm; j++) w[j] = w[j] / sum;
        for (int i = 0; i < n; i++) {
            volatile float acc = y[(t * ku + 0) * n + i] * w[0];
            for (int j = 1; j < ku; j++) {
                volatile float term = y[(t * ku + j) * n + i] * w[j];
                acc = acc + term;
            }
            out[t * n + i] = acc;
        }
    }
}

static void test_moe_sum_is_llama_cpp_sequence_of_ops(void) {
    enum { T = 4, KS = 8, NE = 16, NN = 40 };
    float y[NN * KS * T], p[NE * T], want[NN * T];
    int32_t ids[KS * T];
    for (int i = 0; i < NN * KS * T; i++) y[i] = frand() * 3.0f;
    for (int i = 0; i < NE * T; i++) p[i] = (frand() + 1.0f) * 0.06f;
    for (int e = 0; e < NE; e++) p[NE * 3 + e] = 1e-6f * (float)(e + 1); /* their sum below 2^-14: the clamp */
    for (int t = 0; t < T; t++)
        for (int j = 0; j < KS; j++) ids[t * KS + j] = (j * 5 + t) % NE;
    for (int norm = 0; norm < 2; norm++) {
        mf_graph *g = mf_graph_new();
        int64_t ny[3] = {NN, KS, T}, np[2] = {NE, T}, ni[2] = {KS, T};
        int32_t yi = mf_g_input(g, "y", MF_TYPE_F32, 3, ny), pi = mf_g_input(g, "p", MF_TYPE_F32, 2, np),
                ii = mf_g_input(g, "ids", MF_TYPE_I32, 2, ni), o = mf_g_moe_sum(g, yi, pi, ii, norm);
        mf_error err = {0};
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        put(g, yi, y), put(g, pi, p), put(g, ii, ids);
        REQUIRE_OK(compute(g, 2, &err), "%s", err.msg);
        llama_moe_sum(y, p, ids, T, KS, NE, NN, norm, want);
        const float *got = mf_graph_node(g, o)->data;
        for (int i = 0; i < NN * T; i++)
            CHECK(!memcmp(&got[i], &want[i], sizeof(float)), "norm %d: out[%d] = %.9g, llama.cpp's ops %.9g", norm, i,
                  got[i], want[i]);
        mf_graph_free(g);
    }
}

static void test_expert_id_out_of_range_is_an_error_naming_it(void) {
    uint8_t *w = experts(MF_TYPE_Q8_0);
    float x[K * 2] = {0}, out[N * KU * 2];
    int32_t ids[KU * 2] = {0, 1, E, 2}; /* token 1's first slot names expert 5 of 0..4 */
    mf_error err = {0};
    int rc = run_id(MF_TYPE_Q8_0, w, x, ids, 2, 2, out, &err);
    CHECK(rc == MF_E_RANGE, "rc %d: %s", rc, err.msg);
    CHECK(strstr(err.msg, "expert id 5 at index 2 is outside 0..4"), "msg: %s", err.msg);
    free(w);
}

static void test_topk_orders_ties_by_index(void) {
    float v[2 * 6] = {0.5f, 0.25f, 0.5f, 0.75f, 0.1f, 0.5f, /* */ -1, -2, -3, -4, -5, -6};
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {6, 2};
    int32_t xi = mf_g_input(g, "x", MF_TYPE_F32, 2, ne), o = mf_g_topk(g, xi, 4);
    mf_error err = {0};
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    put(g, xi, v);
    REQUIRE_OK(compute(g, 2, &err), "%s", err.msg);
    const int32_t *got = mf_graph_node(g, o)->data, want[8] = {3, 0, 2, 5, 0, 1, 2, 3};
    for (int i = 0; i < 8; i++) CHECK(got[i] == want[i], "ids[%d] = %d, want %d", i, got[i], want[i]);
    mf_graph_free(g);
}

static void test_builders_refuse_bad_shapes(void) {
    mf_graph *g = mf_graph_new();
    int64_t nw[3] = {K, N, E}, nx[3] = {K + 32, 1, 2}, ni[2] = {KU, 3};
    int32_t wi = mf_g_weight(g, "w", MF_TYPE_F32, 3, nw, NULL), xi = mf_g_input(g, "x", MF_TYPE_F32, 3, nx),
            ii = mf_g_input(g, "ids", MF_TYPE_I32, 2, ni);
    CHECK(mf_g_matmul_id(g, wi, xi, ii) == MF_NODE_INVALID, "K mismatch accepted");
    mf_error err = {0};
    CHECK(mf_graph_error(g, &err) && strstr(err.msg, "same K"), "msg: %s", err.msg);
    mf_graph_free(g);
    g = mf_graph_new();
    int64_t nv[2] = {4, 3};
    xi = mf_g_input(g, "x", MF_TYPE_F32, 2, nv);
    CHECK(mf_g_topk(g, xi, 5) == MF_NODE_INVALID, "k 5 of 4 accepted");
    CHECK(mf_graph_error(g, &err) && strstr(err.msg, "k 5 must be 1..ne0"), "msg: %s", err.msg);
    mf_graph_free(g);
    /* more experts a token than moe_sum keeps */
    g = mf_graph_new();
    int64_t ny[3] = {4, MF_MOE_MAX_USED + 1, 1}, np[2] = {MF_MOE_MAX_USED + 1, 1}, nk[2] = {MF_MOE_MAX_USED + 1, 1};
    int32_t yi = mf_g_input(g, "y", MF_TYPE_F32, 3, ny), pi = mf_g_input(g, "p", MF_TYPE_F32, 2, np);
    ii = mf_g_input(g, "ids", MF_TYPE_I32, 2, nk);
    CHECK(mf_g_moe_sum(g, yi, pi, ii, true) == MF_NODE_INVALID, "k %d accepted", MF_MOE_MAX_USED + 1);
    CHECK(mf_graph_error(g, &err) && strstr(err.msg, "k <= 256"), "msg: %s", err.msg);
    mf_graph_free(g);
}

int main(void) {
    RUN(test_matmul_id_rows_are_their_experts_matmul_alone_or_batched);
    RUN(test_moe_sum_is_llama_cpp_sequence_of_ops);
    RUN(test_expert_id_out_of_range_is_an_error_naming_it);
    RUN(test_topk_orders_ties_by_index);
    RUN(test_builders_refuse_bad_shapes);
    return mf_test_done();
}
