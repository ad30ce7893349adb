/* CPU backend ops against naive references written here (not against another backend), plus the
 * determinism invariants: thread counts 1/2/3 bitwise equal, matmul M=1 rows == M=7 rows bitwise,
 * attention over two interleaved sequences == each sequence alone bitwise. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_impl.h"
#include "core/threadpool.h"
#include "graph/graph.h"
#include "quant/quant.h"
#include "harness.h"
#include "core/rope.h"
#include "golden/rope/rope_cases.h"
#include "support/spans.h"

#include <math.h>
#include <stdatomic.h>
#include <time.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static void seed(uint64_t s) {
    rng = s * 0x9E3779B97F4A7C15ull + 1;
}
static uint32_t urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) {
    return (float)(urand() & 0xFFFFFF) / (float)0x800000 - 1.0f;
} /* [-1, 1) */
static void fill(float *x, int64_t n, float amp) {
    for (int64_t i = 0; i < n; i++) x[i] = frand() * amp;
}

static int compute(mf_graph *g, int n_threads, mf_error *err) {
    mf_cpu *cpu = NULL;
    int rc = mf_cpu_new(n_threads, &cpu, err);
    if (rc) return rc;
    rc = mf_cpu_compute(cpu, g, err);
    mf_cpu_free(cpu);
    return rc;
}

static void set_input(mf_graph *g, int32_t id, const void *src) {
    mf_node *n = mf_graph_node(g, id);
    memcpy(n->data, src, mf_node_nbytes(n));
}

static int32_t input_f32(mf_graph *g, const char *name, int nd, int64_t a, int64_t b, int64_t c) {
    const int64_t ne[3] = {a, b, c};
    return mf_g_input(g, name, MF_TYPE_F32, nd, ne);
}

static int32_t input_i32(mf_graph *g, const char *name, int64_t n) {
    return mf_g_input(g, name, MF_TYPE_I32, 1, &n);
}

static const float *out_f32(mf_graph *g, int32_t id) {
    return mf_graph_node(g, id)->data;
}

/* ---- weights of every type: quantized from floats where a quantizer exists, else random blocks
 * with sane scale fields (fp16 d/dmin at known offsets) ---- */
static void fix_f16(uint8_t *blk, size_t off, float v) {
    uint16_t h = mf_fp32_to_fp16(v);
    memcpy(blk + off, &h, 2);
}

static void make_rows(uint32_t type, int64_t K, int64_t R, void *dst) {
    size_t rs = mf_row_size(type, K);
    float *tmp = malloc((size_t)K * sizeof(float));
    for (int64_t r = 0; r < R; r++) {
        uint8_t *row = (uint8_t *)dst + (size_t)r * rs;
        fill(tmp, K, 1.0f);
        if (mf_quantize_row(type, tmp, row, K) == 0) continue;
        for (size_t i = 0; i < rs; i++) row[i] = (uint8_t)urand();
        const mf_type_info *ti = mf_type_get(type);
        for (size_t b = 0; b < rs / ti->type_size; b++) {
            uint8_t *blk = row + b * ti->type_size;
            float d = 0.01f + 0.04f * (frand() + 1.0f) / 2, m = 0.02f * frand();
            switch (type) {
            case MF_TYPE_Q4_1:
            case MF_TYPE_Q5_1:
            case MF_TYPE_Q4_K:
            case MF_TYPE_Q5_K:
                fix_f16(blk, 0, d);
                fix_f16(blk, 2, m);
                break;
            case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S:
            case MF_TYPE_IQ4_NL: case MF_TYPE_IQ4_XS:
            case MF_TYPE_Q5_0:
                fix_f16(blk, 0, d);
                break;
            case MF_TYPE_Q2_K:
                fix_f16(blk, 80, d);
                fix_f16(blk, 82, m);
                break;
            case MF_TYPE_Q3_K:
                fix_f16(blk, 108, d);
                break;
            case MF_TYPE_Q6_K:
                fix_f16(blk, 208, d);
                break;
            default:
                break;
            }
        }
    }
    free(tmp);
}

static const uint32_t all_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0, MF_TYPE_Q4_1,
                                     MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q2_K,
                                     MF_TYPE_Q3_K, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K, MF_TYPE_Q8_K,
                                     MF_TYPE_IQ2_XXS, MF_TYPE_IQ2_XS, MF_TYPE_IQ2_S, MF_TYPE_IQ3_XXS, MF_TYPE_IQ3_S,
                                     MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};

static void test_get_rows_every_type(void) {
    const int64_t K = 256, R = 9, n = 6;
    const int32_t ids[6] = {3, 0, 8, 3, 5, 1};
    for (size_t ti = 0; ti < MF_ARRAY_LEN(all_types); ti++) {
        uint32_t t = all_types[ti];
        CHECK(mf_cpu_supports(MF_OP_GET_ROWS, t), "get_rows %s unsupported", mf_type_name(t));
        seed(ti + 1);
        void *table = malloc(mf_row_size(t, K) * R);
        make_rows(t, K, R, table);
        mf_graph *g = mf_graph_new();
        const int64_t ne[2] = {K, R};
        int32_t tb = mf_g_weight(g, "table", t, 2, ne, table);
        int32_t id = input_i32(g, "ids", n);
        int32_t o = mf_g_get_rows(g, tb, id);
        mf_error err = {0};
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        set_input(g, id, ids);
        REQUIRE_OK(compute(g, 2, &err), "%s: %s", mf_type_name(t), err.msg);
        float *ref = malloc((size_t)K * sizeof(float));
        for (int64_t r = 0; r < n; r++) {
            mf_dequantize_row(t, (char *)table + mf_row_size(t, K) * (size_t)ids[r], ref, K);
            CHECK(!memcmp(ref, out_f32(g, o) + r * K, (size_t)K * sizeof(float)), "%s row %lld differs",
                  mf_type_name(t), (long long)r);
        }
        free(ref);
        free(table);
        mf_graph_free(g);
    }
}

/* matmul of weight type t: values vs a double reference on the dequantized weight and the activation
 * rounded through the kernel's vec_dot type; each (n, m) bitwise equal to one direct vec_dot call;
 * M=1 rows == M=7 rows and threads 1/2/3 bitwise equal */
static void matmul_case(uint32_t t, int64_t K, int64_t N, int64_t M, float *out_by_threads[3], void *w,
                        const float *x) {
    for (int th = 1; th <= 3; th++) {
        mf_graph *g = mf_graph_new();
        const int64_t ne[2] = {K, N};
        int32_t wi = mf_g_weight(g, "w", t, 2, ne, w);
        int32_t xi = input_f32(g, "x", 2, K, M, 1);
        int32_t o = mf_g_name(g, mf_g_matmul(g, wi, xi), "out");
        mf_g_set_output(g, o);
        mf_error err = {0};
        out_by_threads[th - 1] = NULL;
        if (mf_graph_alloc(g, &err) == 0) {
            set_input(g, xi, x);
            if (compute(g, th, &err) == 0) {
                out_by_threads[th - 1] = malloc((size_t)(N * M) * sizeof(float));
                memcpy(out_by_threads[th - 1], out_f32(g, o), (size_t)(N * M) * sizeof(float));
            }
        }
        CHECK(out_by_threads[th - 1], "%s threads %d: %s", mf_type_name(t), th, err.msg);
        mf_graph_free(g);
    }
}

static void test_matmul_every_type(void) {
    const int64_t K = 512, N = 37, M = 7;
    int tested = 0;
    for (size_t ti = 0; ti < MF_ARRAY_LEN(all_types); ti++) {
        uint32_t t = all_types[ti];
        if (!mf_cpu_supports(MF_OP_MATMUL, t)) continue;
        tested++;
        seed(100 + ti);
        const mf_quant_kernels *k = mf_quant_kernels_get(t);
        size_t rs = mf_row_size(t, K);
        void *w = malloc(rs * N);
        make_rows(t, K, N, w);
        float *x = malloc((size_t)(K * M) * sizeof(float));
        fill(x, K * M, 1.0f);
        float *o7[3], *o1[3];
        matmul_case(t, K, N, M, o7, w, x);
        matmul_case(t, K, N, 1, o1, w, x + 3 * K); /* row 3 alone */
        if (!o7[0] || !o7[1] || !o7[2] || !o1[0] || !o1[1] || !o1[2]) goto next;
        for (int th = 1; th < 3; th++) {
            CHECK(!memcmp(o7[0], o7[th], (size_t)(N * M) * sizeof(float)), "%s M=7: threads 1 vs %d differ",
                  mf_type_name(t), th + 1);
            CHECK(!memcmp(o1[0], o1[th], (size_t)N * sizeof(float)), "%s M=1: threads 1 vs %d differ",
                  mf_type_name(t), th + 1);
        }
        CHECK(!memcmp(o1[0], o7[0] + 3 * N, (size_t)N * sizeof(float)),
              "%s: row 3 of M=7 != the same row at M=1", mf_type_name(t));
        {
            size_t ars = mf_row_size(k->vec_dot_type, K);
            void *aq = malloc(ars);
            float *wd = malloc((size_t)K * sizeof(float)), *xd = malloc((size_t)K * sizeof(float));
            double worst = 0;
            for (int64_t m = 0; m < M; m++) {
                k->from_float(x + m * K, aq, K);
                mf_dequantize_row(k->vec_dot_type, aq, xd, K);
                for (int64_t n = 0; n < N; n++) {
                    float direct;
                    k->vec_dot(K, &direct, (char *)w + rs * (size_t)n, aq);
                    CHECK(!memcmp(&direct, &o7[0][m * N + n], sizeof direct),
                          "%s (%lld,%lld): %g vs vec_dot %g", mf_type_name(t), (long long)n, (long long)m,
                          o7[0][m * N + n], direct);
                    mf_dequantize_row(t, (char *)w + rs * (size_t)n, wd, K);
                    double ref = 0, mag = 0;
                    for (int64_t i = 0; i < K; i++) {
                        ref += (double)wd[i] * xd[i];
                        mag += fabs((double)wd[i] * xd[i]);
                    }
                    double e = fabs(o7[0][m * N + n] - ref) / (mag + 1e-30);
                    if (e > worst) worst = e;
                }
            }
            /* float rounding inside the kernels only: 1e-4 of the magnitude sum */
            CHECK(worst < 1e-4, "%s: worst relative error %g vs the reference", mf_type_name(t), worst);
            free(aq);
            free(wd);
            free(xd);
        }
    next:
        for (int i = 0; i < 3; i++) {
            free(o7[i]);
            free(o1[i]);
        }
        free(w);
        free(x);
    }
    CHECK(tested >= 3, "only %d weight types have a CPU matmul", tested);
    printf("  matmul checked for %d weight types\n", tested);
}

/* A BF16 matmul checks each activation row once as it converts it and sends only rows that passed to the
 * faster tile (vdpbf16ps, which reads denormal inputs as zero): a row holding denormals, in a block with
 * plain rows, must still give vec_dot's bits for every pair, in the batch path (M = 7, shared conversion;
 * M = 11, the row in the second block of 8) and the decode one (M = 3, each thread converting for itself),
 * at 1-3 threads. */
static void test_bf16_matmul_tiny_activation_keeps_vec_dot_bits(void) {
    const int64_t K = 512, N = 37;
    const uint32_t t = MF_TYPE_BF16;
    if (!mf_cpu_supports(MF_OP_MATMUL, t)) SKIP("no BF16 matmul");
    const mf_quant_kernels *k = mf_quant_kernels_get(t);
    const size_t rs = mf_row_size(t, K);
    seed(77);
    void *w = malloc(rs * N);
    make_rows(t, K, N, w);
    static const int64_t Ms[3] = {7, 11, 3}, tinys[3] = {3, 9, 1}; /* inside a pair the tile takes together */
    for (int c = 0; c < 3; c++) {
        const int64_t M = Ms[c], tiny = tinys[c];
        float *x = malloc((size_t)(K * M) * sizeof(float));
        fill(x, K * M, 1.0f);
        for (int64_t e = 0; e < K; e++) x[tiny * K + e] *= 1e-39f; /* bf16 denormals */
        float *o[3];
        matmul_case(t, K, N, M, o, w, x);
        void *aq = malloc(mf_row_size(k->vec_dot_type, K));
        int bad = 0, nonzero = 0;
        for (int th = 0; th < 3 && o[th]; th++)
            for (int64_t m = 0; m < M; m++) {
                k->from_float(x + m * K, aq, K);
                for (int64_t n = 0; n < N; n++) {
                    float want;
                    k->vec_dot(K, &want, (char *)w + rs * (size_t)n, aq);
                    nonzero += m == tiny && want != 0;
                    if (memcmp(&want, &o[th][m * N + n], sizeof want) && bad++ < 3)
                        CHECK(0, "M=%lld threads %d (%lld,%lld): %a vs vec_dot %a", (long long)M, th + 1, (long long)n,
                              (long long)m, o[th][m * N + n], want);
                }
            }
        CHECK(bad == 0, "M=%lld: %d results differ from vec_dot", (long long)M, bad);
        CHECK(nonzero > 0, "M=%lld: the denormal row's dots are all zero, so it shows nothing", (long long)M);
        for (int th = 0; th < 3; th++) free(o[th]);
        free(aq);
        free(x);
    }
    free(w);
}

/* Repacked (x8, or x16 with AVX-512) weights through the matmul op: threads 1..3, M = 9 (tiles and a single row)
 * vs each row alone, all bitwise; each value equals the x8 reference kernel, and the result agrees with
 * the same matrix in its file layout within float rounding (the two orders differ, see quant.h). */
static void test_matmul_x8(void) {
    const int64_t N = 48, M = 9;
    static const uint32_t bases[] = {MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0, MF_TYPE_Q4_K, MF_TYPE_Q6_K};
    for (size_t bi = 0; bi < MF_ARRAY_LEN(bases); bi++) {
        /* the K types need whole super-blocks of 256: ffn_down's 4864 */
        const int64_t K = mf_type_get(bases[bi])->blck_size == MF_QK_K ? 4864 : 896;
        const uint32_t bt = bases[bi];
        /* builds that never repack at load (aarch64) still run the layout through the op: its reference tiles */
        uint32_t xt = mf_repack_type(bt, K, N);
        if (xt == bt) xt = mf_repack_type_rows(bt, K, N, MF_X8_ROWS);
        REQUIRE(xt != bt, "%s has an x8 layout", mf_type_name(bt));
        seed(500 + bi);
        const size_t rs = mf_row_size(bt, K);
        void *w = malloc(rs * N), *wx = malloc(rs * N);
        make_rows(bt, K, N, w);
        REQUIRE_OK(mf_repack_as(xt, bt, w, wx, K, N), "repack");
        float *x = malloc((size_t)(K * M) * sizeof(float));
        fill(x, K * M, 1.0f);
        float *oM[3], *o1[3], *plain[3];
        matmul_case(xt, K, N, M, oM, wx, x);
        matmul_case(bt, K, N, M, plain, w, x);
        for (int th = 0; th < 3; th++) o1[th] = NULL;
        if (oM[0] && oM[1] && oM[2] && plain[0]) {
            for (int th = 1; th < 3; th++)
                CHECK(!memcmp(oM[0], oM[th], (size_t)(N * M) * sizeof(float)), "%s: threads 1 vs %d differ",
                      mf_type_name(xt), th + 1);
            const mf_quant_kernels *ref = mf_quant_kernels_get_isa(xt, MF_ISA_SCALAR);
            void *aq = malloc(mf_row_size(ref->vec_dot_type, K));
            int bad = 0;
            double worst = 0;
            for (int64_t m = 0; m < M; m++) {
                float *single[3];
                matmul_case(xt, K, N, 1, single, wx, x + m * K);
                if (single[0])
                    CHECK(!memcmp(single[0], oM[0] + m * N, (size_t)N * sizeof(float)),
                          "%s: row %lld of M=%lld != the same row alone", mf_type_name(xt), (long long)m, (long long)M);
                for (int th = 0; th < 3; th++) free(single[th]);
                ref->from_float(x + m * K, aq, K);
                const int R = mf_type_get(xt)->row_group; /* 8, or 16 with AVX-512 */
                for (int64_t g = 0; g < N / R; g++) {
                    float s8[MF_X16_ROWS];
                    ref->vec_dot_tile(K, s8, 1, (char *)wx + (size_t)g * R * rs, rs, R, aq, 0, 1);
                    for (int r = 0; r < R; r++) {
                        const float got = oM[0][m * N + g * R + r], pl = plain[0][m * N + g * R + r];
                        if (memcmp(&got, &s8[r], sizeof got) && bad++ < 3)
                            CHECK(0, "%s (%lld,%lld): %a, reference %a", mf_type_name(xt), (long long)(g * R + r),
                                  (long long)m, got, s8[r]);
                        const double e = fabs((double)got - pl) / (fabs((double)pl) + 1.0);
                        if (e > worst) worst = e;
                    }
                }
            }
            CHECK(bad == 0, "%s: %d values differ from the reference kernel", mf_type_name(xt), bad);
            CHECK(worst < 1e-4, "%s vs %s: relative difference %g", mf_type_name(xt), mf_type_name(bt), worst);
            free(aq);
        }
        for (int th = 0; th < 3; th++) free(oM[th]), free(o1[th]), free(plain[th]);
        free(w), free(wx), free(x);
    }
}

/* run a one-op f32 graph built by `build` on inputs a (and b), for threads 1..3; returns output of
 * threads=1 and checks 2/3 are bitwise equal */
typedef int32_t (*build_fn)(mf_graph *g, int32_t a, int32_t b);

static float *run_unary(build_fn build, const int64_t *nea, const float *a, const int64_t *neb,
                        const float *b, int64_t *n_out) {
    float *first = NULL;
    for (int th = 1; th <= 3; th++) {
        mf_graph *g = mf_graph_new();
        int32_t ia = mf_g_input(g, "a", MF_TYPE_F32, 4, nea);
        int32_t ib = b ? mf_g_input(g, "b", MF_TYPE_F32, 4, neb) : -1;
        int32_t o = build(g, ia, ib);
        mf_g_set_output(g, o);
        mf_error err = {0};
        if (mf_graph_error(g, &err) || mf_graph_alloc(g, &err)) {
            CHECK(0, "build: %s", err.msg);
            mf_graph_free(g);
            free(first);
            return NULL;
        }
        set_input(g, ia, a);
        if (b) set_input(g, ib, b);
        int rc = compute(g, th, &err);
        CHECK(rc == 0, "compute: %s", err.msg);
        int64_t n = mf_node_nelements(mf_graph_node(g, o));
        if (!first) {
            first = malloc((size_t)n * sizeof(float));
            memcpy(first, out_f32(g, o), (size_t)n * sizeof(float));
            *n_out = n;
        } else {
            CHECK(!memcmp(first, out_f32(g, o), (size_t)n * sizeof(float)), "threads %d differ from 1", th);
        }
        mf_graph_free(g);
    }
    return first;
}

static int32_t b_add(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_add(g, a, b);
}
static int32_t b_mul(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_mul(g, a, b);
}
static int32_t b_scale(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_scale(g, a, 0.37f);
}
static int32_t b_silu(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_silu(g, a);
}
static int32_t b_swiglu(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_swiglu(g, a, b);
}
static int32_t b_softmax(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_softmax(g, a);
}
static int32_t b_cont(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_cont(g, mf_g_permute(g, a, 1, 0, 2, 3));
}

/* one batch of M rows at 1, 2, 5 and 8 threads, and its last row alone, against the batch at 1 thread */
static void matmul_chunks_batch(int64_t M) {
    const int64_t K = 128, N = 1203;
    seed(77);
    const size_t rs = mf_row_size(MF_TYPE_Q8_0, K);
    uint8_t *w = malloc(rs * N);
    float *wf = malloc((size_t)K * sizeof(float)), *x = malloc((size_t)(K * M) * sizeof(float));
    float *ref = NULL;
    for (int64_t r = 0; r < N; r++) {
        fill(wf, K, 0.5f);
        mf_quantize_row(MF_TYPE_Q8_0, wf, w + r * rs, K);
    }
    fill(x, K * M, 1.0f);
    const int ths[] = {1, 2, 5, 8};
    for (size_t ti = 0; ti < MF_ARRAY_LEN(ths); ti++) {
        for (int64_t m = M; m >= 1; m -= M - 1) {
            mf_graph *g = mf_graph_new();
            const int64_t ne[2] = {K, N};
            int32_t wi = mf_g_weight(g, "w", MF_TYPE_Q8_0, 2, ne, w);
            int32_t xi = input_f32(g, "x", 2, K, m, 1);
            int32_t o = mf_g_name(g, mf_g_matmul(g, wi, xi), "out");
            mf_g_set_output(g, o);
            mf_error err = {0};
            bool ok = mf_graph_alloc(g, &err) == 0;
            if (ok) {
                set_input(g, xi, x + (M - m) * K); /* m = 1: the last row of the batch alone */
                ok = compute(g, ths[ti], &err) == 0;
            }
            CHECK(ok, "threads %d M %lld of %lld: %s", ths[ti], (long long)m, (long long)M, err.msg);
            if (ok) {
                const float *out = out_f32(g, o);
                if (!ref) {
                    ref = malloc((size_t)(N * M) * sizeof(float));
                    memcpy(ref, out, (size_t)(N * M) * sizeof(float));
                } else {
                    const float *want = m == M ? ref : ref + (M - 1) * N;
                    CHECK(!memcmp(out, want, (size_t)(N * m) * sizeof(float)),
                          "threads %d M %lld differs from threads 1 M %lld", ths[ti], (long long)m,
                          (long long)M);
                }
            }
            mf_graph_free(g);
        }
    }
    free(ref);
    free(w);
    free(wf);
    free(x);
}

/* many row chunks (the matmul hands weight rows out from a shared counter: decode's stretches with stealing
 * at M <= 4, prefill's shrinking chunks above): the result does not depend on the thread count or on the
 * other rows of the batch (the last row alone runs the decode path, so a prefill chunk that skipped or
 * misplaced weight rows shows) */
static void test_matmul_dynamic_chunks(void) {
    matmul_chunks_batch(3);
    matmul_chunks_batch(9);
}

/* Decode's read-ahead (mf_cpu_matmul_ahead) is the front of the stretch mm_stealing starts each thread on:
 * with no limit the threads' ranges tile the weights exactly, in thread order, each starting on a TILE_N
 * (16) row boundary; a limit cuts a range at its end, never moves its start; a prefill matmul (more than
 * MF_CPU_PRIVATE_CONV_ROWS rows, handed out to whoever claims them) gets none. */
static void test_matmul_read_ahead_is_each_threads_first_rows(void) {
    const int64_t K = 128, N = 1203;
    const size_t rs = mf_row_size(MF_TYPE_Q8_0, K);
    uint8_t *w = calloc(N, rs);
    const int64_t ms[] = {1, MF_CPU_PRIVATE_CONV_ROWS, MF_CPU_PRIVATE_CONV_ROWS + 1};
    const int ths[] = {1, 2, 3, 5, 8};
    for (size_t mi = 0; mi < MF_ARRAY_LEN(ms); mi++) {
        mf_graph *g = mf_graph_new();
        const int64_t ne[2] = {K, N};
        const int32_t wi = mf_g_weight(g, "w", MF_TYPE_Q8_0, 2, ne, w);
        const int32_t o = mf_g_matmul(g, wi, input_f32(g, "x", 2, K, ms[mi], 1));
        const bool decode = ms[mi] <= MF_CPU_PRIVATE_CONV_ROWS;
        for (size_t ti = 0; ti < MF_ARRAY_LEN(ths); ti++) {
            size_t at = 0;
            for (int t = 0; t < ths[ti]; t++) {
                const mf_tp_ahead a = mf_cpu_matmul_ahead(g, mf_graph_node_c(g, o), t, ths[ti], SIZE_MAX),
                                  cut = mf_cpu_matmul_ahead(g, mf_graph_node_c(g, o), t, ths[ti], 1000);
                if (!decode) {
                    CHECK(a.len == 0 && cut.len == 0, "M %lld: a prefill matmul read ahead %zu bytes",
                          (long long)ms[mi], a.len);
                    continue;
                }
                const size_t off = (size_t)(a.p - (const char *)w);
                CHECK(off == at && off % (16 * rs) == 0 && a.done == 0,
                      "M %lld threads %d: thread %d reads ahead from byte %zu, its stretch starts at %zu",
                      (long long)ms[mi], ths[ti], t, off, at);
                CHECK(cut.p == a.p && cut.len == MF_MIN((size_t)1000, a.len), "thread %d: cut %zu of %zu", t,
                      cut.len, a.len);
                at += a.len;
            }
            if (decode)
                CHECK(at == (size_t)N * rs, "M %lld threads %d: the ranges cover %zu of %zu bytes",
                      (long long)ms[mi], ths[ti], at, (size_t)N * rs);
        }
        mf_graph_free(g);
    }
    free(w);
}

/* eps is only visible where the mean square is near it: rows scaled to RMS 1e-4 .. 3 (eps = 1e-6 is
 * 1e6 .. 1e-7 of their mean square), each against the double-precision formula with the same eps,
 * relative to the output's size; and eps = 0 and eps = 1e-5 must give answers that differ from
 * eps = 1e-6 where eps matters (a kernel that ignores or hard-codes eps fails one of these). */
static float rms_eps_now;
static int32_t b_rms_eps(mf_graph *g, int32_t a, int32_t b) {
    return mf_g_rms_norm(g, a, rms_eps_now);
}

static void test_rms_norm(void) {
    enum { C = 896, R = 10 }; /* 896 = 112 x 8: no SIMD tail; the op matrix has odd widths */
    const int64_t ne[4] = {C, 5, 2, 1};
    static const float amp[R] = {1e-4f, 3e-4f, 1e-3f, 1e-3f, 2e-3f, 1e-2f, 0.1f, 1.0f, 3.0f, 1e-3f};
    static const float epss[3] = {1e-6f, 0.0f, 1e-5f};
    static float a[C * R];
    float *o[3] = {NULL, NULL, NULL};
    seed(7);
    for (int r = 0; r < R; r++) {
        double s = 0;
        fill(a + r * C, C, 1.0f);
        for (int i = 0; i < C; i++) s += (double)a[r * C + i] * a[r * C + i];
        const float k = amp[r] / (float)sqrt(s / C); /* the row's RMS becomes amp[r] */
        for (int i = 0; i < C; i++) a[r * C + i] *= k;
    }
    for (int e = 0; e < 3; e++) {
        int64_t no = 0;
        rms_eps_now = epss[e];
        o[e] = run_unary(b_rms_eps, ne, a, NULL, NULL, &no);
        REQUIRE(o[e] && no == C * R, "no output for eps %g", (double)epss[e]);
        double worst = 0;
        int wr = 0;
        for (int r = 0; r < R; r++) {
            double s = 0;
            for (int i = 0; i < C; i++) s += (double)a[r * C + i] * a[r * C + i];
            const double sc = 1.0 / sqrt(s / C + epss[e]);
            for (int i = 0; i < C; i++) {
                /* outputs are O(1) for rows well above eps, smaller below: relative to the row's scale */
                const double want = a[r * C + i] * sc, err = fabs(o[e][r * C + i] - want) / (amp[r] * sc);
                if (err > worst) worst = err, wr = r;
            }
        }
        CHECK(worst < 2e-6, "eps %g: worst error %g of the row's output scale (row %d, RMS %g; tolerance 2e-6)",
              (double)epss[e], worst, wr, (double)amp[wr]);
    }
    /* RMS 1e-3: mean square 1e-6 = eps, so eps = 0 scales by sqrt(2) more; RMS 1.0: eps is 1e-6 of the
     * mean square, below f32 resolution of the sum's effect on most outputs */
    const int r1 = 2;
    double ratio0 = o[1][r1 * C] / o[0][r1 * C], ratio5 = o[2][r1 * C] / o[0][r1 * C];
    CHECK(fabs(ratio0 - sqrt(2.0)) < 1e-5, "RMS 1e-3 row: eps 0 / eps 1e-6 = %.7f, want sqrt(2) = 1.4142136", ratio0);
    CHECK(fabs(ratio5 - sqrt(2e-6 / 11e-6)) < 1e-5, "RMS 1e-3 row: eps 1e-5 / eps 1e-6 = %.7f, want sqrt(2/11) = %.7f",
          ratio5, sqrt(2e-6 / 11e-6));
    for (int e = 0; e < 3; e++) free(o[e]);
}

static void test_add_mul_broadcast(void) {
    const int64_t nea[4] = {16, 3, 4, 2};
    const int64_t nbs[][4] = {{16, 3, 4, 2}, {16, 1, 1, 1}, {16, 3, 1, 2}, {1, 3, 4, 1}, {1, 1, 1, 1}};
    float *a = malloc(16 * 3 * 4 * 2 * sizeof(float)), *b = malloc(16 * 3 * 4 * 2 * sizeof(float));
    seed(11);
    fill(a, 384, 2.0f);
    fill(b, 384, 2.0f);
    for (size_t c = 0; c < MF_ARRAY_LEN(nbs); c++) {
        for (int op = 0; op < 2; op++) {
            int64_t no = 0;
            float *o = run_unary(op ? b_mul : b_add, nea, a, nbs[c], b, &no);
            if (!o) continue;
            int bad = 0;
            for (int64_t i3 = 0; i3 < 2; i3++)
                for (int64_t i2 = 0; i2 < 4; i2++)
                    for (int64_t i1 = 0; i1 < 3; i1++)
                        for (int64_t i0 = 0; i0 < 16; i0++) {
                            const int64_t *nb = nbs[c];
                            float x = a[((i3 * 4 + i2) * 3 + i1) * 16 + i0];
                            float y = b[(((i3 % nb[3]) * nb[2] + i2 % nb[2]) * nb[1] + i1 % nb[1]) * nb[0] +
                                        i0 % nb[0]];
                            float want = op ? x * y : x + y;
                            if (o[((i3 * 4 + i2) * 3 + i1) * 16 + i0] != want) bad++;
                        }
            CHECK(!bad, "%s with src1 [%lld,%lld,%lld,%lld]: %d elements differ", op ? "mul" : "add",
                  (long long)nbs[c][0], (long long)nbs[c][1], (long long)nbs[c][2], (long long)nbs[c][3],
                  bad);
            free(o);
        }
    }
    free(a);
    free(b);
}

/* The CPU's exp is llama.cpp's (ggml_v_expf of its AVX2 build): SiLU of 8 inputs (one vector) as
 * libggml-cpu-haswell.so of node-llama-cpp@3.21.1 (llama.cpp 80fb11a) computes them, each one where it
 * differs from x / (1 + expf(-x)) with glibc's expf; within ~2 ulp of exp() where the result is normal, 0
 * below -104, NaN kept; the vector kernels of the active ISA give the scalar form's bits, tails included,
 * and exp_sub returns the sum in llama.cpp's softmax order. */
static void test_vec_exp(void) {
    mf_cpu_vec v;
    mf_cpu_vec_init(&v);
    static const float ggml_silu[8][2] = {
        {-0x1.8p+3f, -0x1.353f18p-14f}, {-0x1.59cp+3f, -0x1.cc1014p-13f}, {-0x1.338p+3f, -0x1.52042p-11f},
        {-0x1.0ddp+3f, -0x1.e170b8p-10f}, {-0x1.d04p+2f, -0x1.500ea8p-8f}, {-0x1.84ep+2f, -0x1.c848d4p-7f},
        {-0x1.33ep+2f, -0x1.3e52b4p-5f}, {-0x1.d1p+1f, -0x1.7f513p-4f}};
    float gx[8], gy[8];
    for (int i = 0; i < 8; i++) gx[i] = ggml_silu[i][0];
    v.swiglu(8, gx, NULL, gy);
    for (int i = 0; i < 8; i++)
        CHECK(gy[i] == ggml_silu[i][1], "silu(%a) = %a, llama.cpp's %a", gx[i], gy[i], ggml_silu[i][1]);
    enum { N = 4099 };
    static float x[N], y[N], u[N], z[N];
    seed(21);
    for (int i = 0; i < N; i++) x[i] = -110.0f + 200.0f * (float)i / (float)(N - 1); /* -110 .. 90 */
    x[5] = NAN, x[6] = -INFINITY, x[7] = INFINITY, x[8] = 0.0f, x[9] = -0.0f, x[10] = 1e-40f, x[11] = -87.3f;
    fill(u, N, 2.0f);
    double worst = 0;
    int bad = 0;
    v.exp_sub(N, x, 0.0f, y);
    for (int i = 0; i < N; i++) {
        const float want = mf_cpu_expf(x[i]);
        if (isnan(x[i])) {
            CHECK(isnan(y[i]) && isnan(want), "exp(NaN) is NaN: vector %g, scalar %g", y[i], want);
            continue;
        }
        if (memcmp(&want, &y[i], 4) && bad++ < 3) CHECK(0, "exp(%a): vector %a, scalar %a", x[i], y[i], want);
        if (x[i] < -104.0f) {
            CHECK(y[i] == 0.0f, "exp(%g) = %g, want 0", x[i], y[i]);
            continue;
        }
        if (x[i] < -87.33f || x[i] > 88.3f) continue; /* denormal results / overflow */
        const double e = fabs(y[i] - exp((double)x[i])) / exp((double)x[i]);
        if (e > worst) worst = e;
    }
    CHECK(isinf(mf_cpu_expf(INFINITY)) && mf_cpu_expf(-INFINITY) == 0.0f, "exp(+-inf)");
    CHECK(worst <= 3e-7, "exp: worst relative error %g", worst);
    { /* the sum, in llama.cpp's order: per 8 in float, its horizontal add, then in double */
        static float w[N];
        fill(w, N, 4.0f);
        double ws = 0;
        for (int i = 0; i < N; i += 8) {
            float e[8] = {0};
            for (int l = 0; l < 8 && i + l < N; l++) e[l] = mf_cpu_expf(w[i + l] - 4.0f);
            ws += (double)(((e[0] + e[4]) + (e[2] + e[6])) + ((e[1] + e[5]) + (e[3] + e[7])));
        }
        const double got = v.exp_sub(N, w, 4.0f, z);
        CHECK(got == ws, "exp_sub's sum %.17g, llama.cpp's order %.17g", got, ws);
    }
    x[5] = NAN;
    /* 4099 = 256 x 16 + 3 and 4091 = 255 x 16 + 8 + 3: the AVX-512 form's 16-wide loop, an 8-wide step, the tail */
    for (int n = N; n >= N - 8; n -= 8) {
        v.swiglu(n, x, u, y);
        v.swiglu(n, x, NULL, z);
        for (int i = 0; i < n; i++) {
            /* the elements of the last n % 8 are ggml_silu_f32's (libm expf), the rest ggml_v_silu's */
            const float e = i < (n & ~7) ? mf_cpu_expf(0.0f - x[i]) : expf(-x[i]);
            const float s = x[i] / (1.0f + e), su = s * u[i];
            if (isnan(s)) {
                CHECK(isnan(y[i]) && isnan(z[i]), "silu(NaN)");
                continue;
            }
            if ((memcmp(&su, &y[i], 4) || memcmp(&s, &z[i], 4)) && bad++ < 3)
                CHECK(0, "silu(%a) of %d: vector %a / %a, scalar %a / %a", x[i], n, y[i], z[i], su, s);
        }
    }
    CHECK(bad == 0, "%d vector results differ from the scalar form", bad);
    printf("  exp worst relative error %.3g (active ISA %s)\n", worst, mf_isa_name(mf_quant_active_isa()));
}

static void test_scale_silu_swiglu_softmax(void) {
    const int64_t ne[4] = {100, 7, 1, 1};
    float a[700], b[700];
    seed(13);
    fill(a, 700, 6.0f);
    fill(b, 700, 2.0f);
    int64_t no;
    float *o = run_unary(b_scale, ne, a, NULL, NULL, &no);
    for (int i = 0; o && i < 700; i++) CHECK(o[i] == a[i] * 0.37f, "scale[%d]", i);
    free(o);
    o = run_unary(b_silu, ne, a, NULL, NULL, &no);
    for (int i = 0; o && i < 700; i++) {
        double want = a[i] / (1.0 + exp(-(double)a[i]));
        CHECK(fabs(o[i] - want) <= 1e-6 * (1 + fabs(want)), "silu[%d] %g vs %g", i, o[i], want);
    }
    free(o);
    o = run_unary(b_swiglu, ne, a, ne, b, &no);
    for (int i = 0; o && i < 700; i++) {
        double want = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
        CHECK(fabs(o[i] - want) <= 1e-6 * (1 + fabs(want)), "swiglu[%d] %g vs %g", i, o[i], want);
    }
    free(o);
    o = run_unary(b_softmax, ne, a, NULL, NULL, &no);
    for (int r = 0; o && r < 7; r++) {
        double mx = -1e30, s = 0;
        /* not fmax(): Debian 12's aarch64 cross gcc 12 crashes vectorizing that reduction (cross-test) */
        for (int i = 0; i < 100; i++) mx = a[r * 100 + i] > mx ? a[r * 100 + i] : mx;
        for (int i = 0; i < 100; i++) s += exp(a[r * 100 + i] - mx);
        for (int i = 0; i < 100; i++) {
            double want = exp(a[r * 100 + i] - mx) / s;
            CHECK(fabs(o[r * 100 + i] - want) <= 1e-6 * want + 1e-9, "softmax[%d][%d] %g vs %g", r, i,
                  o[r * 100 + i], want);
        }
    }
    free(o);
}

static void test_cont_of_permute(void) {
    const int64_t ne[4] = {5, 3, 2, 1};
    float a[30];
    for (int i = 0; i < 30; i++) a[i] = (float)i;
    int64_t no;
    float *o = run_unary(b_cont, ne, a, NULL, NULL, &no);
    REQUIRE(o && no == 30, "no output");
    /* out [3, 5, 2]: out[i2][i0][i1] = a[i2][i1][i0] */
    int bad = 0;
    for (int i2 = 0; i2 < 2; i2++)
        for (int i0 = 0; i0 < 5; i0++)
            for (int i1 = 0; i1 < 3; i1++)
                if (o[(i2 * 5 + i0) * 3 + i1] != a[(i2 * 3 + i1) * 5 + i0]) bad++;
    CHECK(!bad, "%d elements of cont(permute) misplaced", bad);
    free(o);
}

static void rope_check(int mode, int64_t hd, int n_rot) {
    const int64_t nh = 3, nt = 4;
    const int32_t pos[4] = {0, 1, 17, 93};
    const float base = 10000.0f;
    float *x = malloc((size_t)(hd * nh * nt) * sizeof(float));
    seed(17);
    fill(x, hd * nh * nt, 1.0f);
    float *first = NULL;
    for (int th = 1; th <= 3; th++) {
        mf_graph *g = mf_graph_new();
        int32_t xi = input_f32(g, "x", 3, hd, nh, nt);
        int32_t pi = input_i32(g, "pos", nt);
        mf_rope r = mf_rope_plain(n_rot, mode, base);
        int32_t o = mf_g_rope(g, xi, pi, &r);
        mf_error err = {0};
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        set_input(g, xi, x);
        set_input(g, pi, pos);
        REQUIRE_OK(compute(g, th, &err), "%s", err.msg);
        const float *y = out_f32(g, o);
        if (!first) {
            first = malloc((size_t)(hd * nh * nt) * sizeof(float));
            memcpy(first, y, (size_t)(hd * nh * nt) * sizeof(float));
        } else {
            CHECK(!memcmp(first, y, (size_t)(hd * nh * nt) * sizeof(float)), "rope threads %d differ", th);
        }
        mf_graph_free(g);
    }
    /* the KV shift's rope (core/rope.c, scalar fmaf) is the op's rule bit for bit, whatever the op's ISA */
    int shift_differs = 0;
    for (int64_t t = 0; t < nt; t++) {
        float cs[128], row[256];
        const mf_rope r = mf_rope_plain(n_rot, mode, base);
        mf_rope_cache(cs, n_rot, (float)pos[t], &r, mf_rope_theta_scale(base, n_rot), false);
        for (int64_t h = 0; h < nh; h++) {
            mf_rope_row(row, x + (t * nh + h) * hd, hd, n_rot, mode, cs);
            shift_differs += memcmp(row, first + (t * nh + h) * hd, (size_t)hd * sizeof(float)) != 0;
        }
    }
    CHECK(shift_differs == 0, "core/rope.c's mf_rope_row differs from the ROPE op in %d rows", shift_differs);
    /* bitwise llama.cpp's AVX2 build: its cos/sin cache (theta accumulated in float) and the rotation as
     * gcc contracts it, one fma per output; count where the unfused products would round otherwise */
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    int fused_bad = 0, unfused_differs = 0;
    for (int64_t t = 0; t < nt; t++) {
        float theta = (float)pos[t], cs[64];
        for (int64_t i0 = 0; i0 < n_rot; i0 += 2, theta *= theta_scale) {
            cs[i0] = cosf(theta);
            cs[i0 + 1] = sinf(theta);
        }
        for (int64_t h = 0; h < nh; h++) {
            const float *xr = x + (t * nh + h) * hd, *yr = first + (t * nh + h) * hd;
            for (int64_t i = 0; i < n_rot / 2; i++) {
                const int64_t i0 = mode == MF_ROPE_NEOX ? i : 2 * i, i1 = mode == MF_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
                const float c = cs[2 * i], sn = cs[2 * i + 1], x0 = xr[i0], x1 = xr[i1];
                const float w0 = fmaf(x0, c, -(x1 * sn));
                const float w1 = mode == MF_ROPE_NEOX ? fmaf(x0, sn, x1 * c) : fmaf(x1, c, x0 * sn);
                fused_bad += memcmp(&w0, &yr[i0], 4) != 0;
                fused_bad += memcmp(&w1, &yr[i1], 4) != 0;
                volatile float p00 = x0 * c, p11 = x1 * sn, p01 = x0 * sn, p10 = x1 * c; /* no contraction */
                const float u0 = p00 - p11, u1 = p01 + p10;
                unfused_differs += (u0 != w0) + (u1 != w1);
            }
        }
    }
    CHECK(!fused_bad, "rope mode %d: %d outputs differ from llama.cpp's fused rotation", mode, fused_bad);
    CHECK(unfused_differs > 0, "rope mode %d: the data never tells the fused rotation from the unfused one", mode);
    double worst = 0;
    int pass_bad = 0;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++) {
            const float *xr = x + (t * nh + h) * hd;
            const float *yr = first + (t * nh + h) * hd;
            for (int64_t i = 0; i < n_rot / 2; i++) {
                double th = pos[t] * pow(base, -2.0 * (double)i / n_rot);
                int64_t i0 = mode == MF_ROPE_NEOX ? i : 2 * i,
                        i1 = mode == MF_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
                double w0 = xr[i0] * cos(th) - xr[i1] * sin(th), w1 = xr[i0] * sin(th) + xr[i1] * cos(th);
                worst = fmax(worst, fmax(fabs(yr[i0] - w0), fabs(yr[i1] - w1)));
            }
            for (int64_t i = n_rot; i < hd; i++) pass_bad += yr[i] != xr[i];
        }
    /* theta is accumulated in float as ggml does: error grows with position (93 here) */
    CHECK(worst < 2e-4, "rope mode %d worst abs error %g (tolerance 2e-4)", mode, worst);
    CHECK(!pass_bad, "rope: %d unrotated dims changed", pass_bad);
    free(first);
    free(x);
}

/* The ROPE op is llama.cpp's ggml_rope_ext bit for bit, plain, linear and YaRN, at positions up to 131071:
 * tests/golden/rope/cache.bin (tools/oracle/rope_golden.c) holds its output for heads of (1, 0) pairs, i.e.
 * (cos, sin) times the magnitude scale.  The mf_rope each case becomes is resolved as llama.cpp's context
 * resolves it (rope_cases.h), so the test pins the ramp, the two fmas, the scale and corr_dims. */
static void test_rope_is_llama_cpps_bit_for_bit(void) {
    const char *dir = getenv("MF_ROPE_GOLDEN");
    char path[512];
    snprintf(path, sizeof path, "%s/cache.bin", dir ? dir : "tests/golden/rope");
    size_t total = 0;
    for (int ci = 0; ci < RG_NCASES; ci++) total += (size_t)rg_cases[ci].n_dims * RG_NPOS;
    float *gold = malloc(total * sizeof(float));
    FILE *f = fopen(path, "rb");
    REQUIRE(f && gold, "cannot open %s (run from the repo root or set MF_ROPE_GOLDEN)", path);
    const size_t got = fread(gold, sizeof(float), total, f);
    const int extra = fgetc(f);
    fclose(f);
    REQUIRE(got == total && extra == EOF, "%s: expected %zu floats, got %zu%s", path, total, got, extra == EOF ? "" : "+");
    size_t off = 0;
    int bad_total = 0, yarn_pairs_in_ramp = 0;
    for (int ci = 0; ci < RG_NCASES; ci++) {
        const rg_case *c = &rg_cases[ci];
        const int nd = c->n_dims;
        mf_rope r = mf_rope_plain(nd, c->mode, c->freq_base);
        rg_cparams(c, &r.freq_scale, &r.ext_factor, &r.attn_factor);
        if (r.ext_factor != 0.0f) mf_rope_corr_dims(nd, c->n_ctx_orig, c->freq_base, c->beta_fast, c->beta_slow, r.corr_dims);
        yarn_pairs_in_ramp += r.ext_factor != 0.0f && r.corr_dims[1] > r.corr_dims[0] + 1;
        float *x = malloc((size_t)nd * RG_NPOS * sizeof(float));
        for (int t = 0; t < RG_NPOS; t++)
            for (int i = 0; i < nd / 2; i++) {
                x[t * nd + (c->mode == MF_ROPE_NEOX ? i : 2 * i)] = 1.0f;
                x[t * nd + (c->mode == MF_ROPE_NEOX ? i + nd / 2 : 2 * i + 1)] = 0.0f;
            }
        mf_graph *g = mf_graph_new();
        int32_t xi = input_f32(g, "x", 3, nd, 1, RG_NPOS);
        int32_t pi = input_i32(g, "pos", RG_NPOS);
        int32_t o = mf_g_rope(g, xi, pi, &r);
        mf_error err = {0};
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        set_input(g, xi, x);
        set_input(g, pi, rg_pos);
        REQUIRE_OK(compute(g, 2, &err), "%s", err.msg);
        const float *y = out_f32(g, o);
        int bad = 0;
        for (size_t i = 0; i < (size_t)nd * RG_NPOS; i++) bad += memcmp(&y[i], &gold[off + i], 4) != 0;
        CHECK(bad == 0, "rope case %s: %d of %d outputs differ from llama.cpp's (MF_TEST_VERBOSE=1 shows five)",
              c->name, bad, nd * RG_NPOS);
        if (bad && getenv("MF_TEST_VERBOSE"))
            for (size_t i = 0, shown = 0; i < (size_t)nd * RG_NPOS && shown < 5; i++)
                if (memcmp(&y[i], &gold[off + i], 4))
                    printf("    %s pos %d elem %zu: %a, llama.cpp %a\n", c->name, rg_pos[i / nd], i % nd, y[i],
                           gold[off + i]), shown++;
        bad_total += bad;
        off += (size_t)nd * RG_NPOS;
        mf_graph_free(g);
        free(x);
    }
    CHECK(yarn_pairs_in_ramp >= 5, "only %d YaRN cases have a ramp wider than one pair", yarn_pairs_in_ramp);
    printf("  %zu rope outputs over %d cases x %d positions, %d differ from llama.cpp's\n", total, RG_NCASES, RG_NPOS,
           bad_total);
    free(gold);
}

static void test_rope(void) {
    rope_check(MF_ROPE_NEOX, 64, 64);
    rope_check(MF_ROPE_NEOX, 64, 32);
    rope_check(0, 64, 64);
}

static void test_kv_store_scattered(void) {
    const uint32_t types[] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    const int64_t E = 64, C = 10, T = 4;
    const int32_t cells[4] = {7, 2, 9, 4};
    float rows[4 * 64];
    seed(23);
    fill(rows, E * T, 1.0f);
    /* a q8_0 block with exact ties: amax 127 makes the scale 1, so 2.5 and -0.5 sit on .5 - ggml-cpu's
     * converter (round half to even: 2, 0) and the _ref quantizer (half away from zero: 3, -1) differ there,
     * and a store with the wrong one is caught */
    rows[0] = 127.0f, rows[1] = 2.5f, rows[2] = -0.5f;
    {
        uint8_t a[34], b[34];
        mf_quantize_row_cpu(MF_TYPE_Q8_0, rows, a, 32);
        mf_quantize_row(MF_TYPE_Q8_0, rows, b, 32);
        CHECK(memcmp(a, b, sizeof a) != 0, "the tie block does not tell the two q8_0 quantizers apart");
    }
    for (size_t ti = 0; ti < MF_ARRAY_LEN(types); ti++) {
        uint32_t t = types[ti];
        size_t rs = mf_row_size(t, E);
        uint8_t *cache = malloc(rs * C), *before = malloc(rs * C), *want = malloc(rs);
        for (size_t i = 0; i < rs * C; i++) cache[i] = (uint8_t)(i * 7);
        memcpy(before, cache, rs * C);
        mf_graph *g = mf_graph_new();
        const int64_t ne[2] = {E, C};
        int32_t ci = mf_g_external(g, "cache", t, 2, ne, cache);
        int32_t ri = input_f32(g, "rows", 2, E, T, 1);
        int32_t ki = input_i32(g, "cells", T);
        int32_t st = mf_g_kv_store(g, ci, ri, ki);
        mf_error err = {0};
        REQUIRE(st >= 0, "kv_store build failed");
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        CHECK(mf_graph_node(g, st)->data == cache, "kv_store node does not alias the cache");
        set_input(g, ri, rows);
        set_input(g, ki, cells);
        REQUIRE_OK(compute(g, 3, &err), "%s", err.msg);
        for (int64_t c = 0; c < C; c++) {
            int tok = -1;
            for (int k = 0; k < T; k++)
                if (cells[k] == c) tok = k;
            if (tok < 0) {
                CHECK(!memcmp(cache + c * rs, before + c * rs, rs), "%s: untouched cell %lld changed",
                      mf_type_name(t), (long long)c);
                continue;
            }
            /* the bytes llama.cpp's CPU backend writes at run time */
            mf_quantize_row_cpu(t, rows + tok * E, want, E);
            CHECK(!memcmp(cache + c * rs, want, rs), "%s: cell %lld != convert(row %d)", mf_type_name(t),
                  (long long)c, tok);
        }
        mf_graph_free(g);
        free(cache);
        free(before);
        free(want);
    }
}

/* ---- attention ---- */
typedef struct {
    int64_t hd, nh, nkv, cells, nt, nwin;
    uint32_t kv_type;
    bool v_own;      /* V's type is v_type, not kv_type */
    uint32_t v_type;
} att_shape;

/* runs attention; window: [nwin+1, nt] */
static float *run_attention(const att_shape *s, const float *q, const void *k, const void *v,
                            const int32_t *win, int threads) {
    mf_graph *g = mf_graph_new();
    const int64_t nk[2] = {s->hd * s->nkv, s->cells}, nw[2] = {2, s->nt + 1};
    int32_t qi = input_f32(g, "q", 3, s->hd, s->nh, s->nt);
    int32_t ki = mf_g_external(g, "k", s->kv_type, 2, nk, (void *)k);
    int32_t vi = mf_g_external(g, "v", s->v_own ? s->v_type : s->kv_type, 2, nk, (void *)v);
    int32_t *spans = mf_test_spans(win, s->nwin + 1, s->nt);
    int32_t wi = mf_g_external(g, "spans", MF_TYPE_I32, 2, nw, spans);
    int32_t o =
        mf_g_name(g, mf_g_attention(g, qi, ki, vi, wi, (int)s->nkv, 1.0f / sqrtf((float)s->hd)), "att");
    mf_error err = {0};
    float *out = NULL;
    if (mf_graph_alloc(g, &err) == 0) {
        set_input(g, qi, q);
        if (compute(g, threads, &err) == 0) {
            size_t nb = (size_t)(s->hd * s->nh * s->nt) * sizeof(float);
            out = malloc(nb);
            memcpy(out, out_f32(g, o), nb);
        }
    }
    CHECK(out, "attention: %s", err.msg);
    mf_graph_free(g);
    free(spans);
    return out;
}

static void make_kv(const att_shape *s, float *kf, float *vf, void **k, void **v) {
    int64_t n = s->hd * s->nkv * s->cells;
    fill(kf, n, 1.0f);
    fill(vf, n, 1.0f);
    size_t rs = mf_row_size(s->kv_type, s->hd * s->nkv);
    *k = malloc(rs * (size_t)s->cells);
    *v = malloc(rs * (size_t)s->cells);
    for (int64_t c = 0; c < s->cells; c++) {
        mf_quantize_row(s->kv_type, kf + c * s->hd * s->nkv, (char *)*k + rs * (size_t)c, s->hd * s->nkv);
        mf_quantize_row(s->kv_type, vf + c * s->hd * s->nkv, (char *)*v + rs * (size_t)c, s->hd * s->nkv);
        /* the reference sees exactly what the cache holds */
        mf_dequantize_row(s->kv_type, (char *)*k + rs * (size_t)c, kf + c * s->hd * s->nkv, s->hd * s->nkv);
        mf_dequantize_row(s->kv_type, (char *)*v + rs * (size_t)c, vf + c * s->hd * s->nkv, s->hd * s->nkv);
    }
}

/* The scores are computed like llama.cpp's kq = mul_mat(k, q): each query head is converted to the K
 * type's vec_dot type first (f16 cache -> f16 query, q8_0 cache -> q8_0 query).  The reference sees the
 * query exactly as rounded. */
static void round_query(uint32_t kv_type, float *q, int64_t n, int64_t hd) {
    const mf_quant_kernels *k = mf_quant_kernels_get(kv_type);
    void *tmp = malloc(mf_row_size(k->vec_dot_type, hd));
    for (int64_t i = 0; i < n; i += hd) {
        k->from_float(q + i, tmp, hd);
        mf_dequantize_row(k->vec_dot_type, tmp, q + i, hd);
    }
    free(tmp);
}

/* the probability the values are weighted with: llama.cpp's kqv = mul_mat(v, kq) converts kq to an f16 V's
 * vec_dot type, f16 (attention.c round_p_f16) */
static double p_as_used(uint32_t v_type, double p) {
    return v_type == MF_TYPE_F16 ? (double)mf_fp16_to_fp32(mf_fp32_to_fp16((float)p)) : p;
}

static void test_attention_reference(void) {
    const uint32_t types[] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    for (size_t ti = 0; ti < MF_ARRAY_LEN(types); ti++) {
        att_shape s = {64, 4, 2, 12, 3, 8, types[ti], false, 0};
        seed(31 + ti);
        float *kf = malloc((size_t)(s.hd * s.nkv * s.cells) * sizeof(float));
        float *vf = malloc((size_t)(s.hd * s.nkv * s.cells) * sizeof(float));
        void *k, *v;
        make_kv(&s, kf, vf, &k, &v);
        float *q = malloc((size_t)(s.hd * s.nh * s.nt) * sizeof(float));
        fill(q, s.hd * s.nh * s.nt, 2.0f);
        /* windows: token 0 sees cells {3}, token 1 {3, 0, 11}, token 2 eight cells */
        int32_t win[9 * 3] = {0};
        const int32_t w0[] = {1, 3}, w1[] = {3, 3, 0, 11}, w2[] = {8, 5, 1, 2, 3, 0, 11, 7, 9};
        memcpy(win + 0, w0, sizeof w0);
        memcpy(win + 9, w1, sizeof w1);
        memcpy(win + 18, w2, sizeof w2);
        float *o[3];
        for (int th = 1; th <= 3; th++) o[th - 1] = run_attention(&s, q, k, v, win, th);
        if (o[0] && o[1] && o[2]) {
            size_t nb = (size_t)(s.hd * s.nh * s.nt) * sizeof(float);
            CHECK(!memcmp(o[0], o[1], nb) && !memcmp(o[0], o[2], nb), "%s: thread counts differ",
                  mf_type_name(s.kv_type));
            double worst = 0;
            float scale = 1.0f / sqrtf((float)s.hd);
            round_query(s.kv_type, q, s.hd * s.nh * s.nt, s.hd);
            for (int64_t t = 0; t < s.nt; t++)
                for (int64_t h = 0; h < s.nh; h++) {
                    const int32_t *col = win + t * 9;
                    int64_t kh = h / (s.nh / s.nkv);
                    double sc[8], mx = -1e300, sum = 0;
                    for (int j = 0; j < col[0]; j++) {
                        double d = 0;
                        for (int64_t i = 0; i < s.hd; i++)
                            d += (double)q[(t * s.nh + h) * s.hd + i] *
                                 kf[col[1 + j] * s.hd * s.nkv + kh * s.hd + i];
                        sc[j] = d * scale;
                        mx = fmax(mx, sc[j]);
                    }
                    for (int j = 0; j < col[0]; j++) sum += exp(sc[j] - mx);
                    for (int64_t i = 0; i < s.hd; i++) {
                        double acc = 0;
                        for (int j = 0; j < col[0]; j++)
                            acc += p_as_used(s.kv_type, exp(sc[j] - mx) / sum) * vf[col[1 + j] * s.hd * s.nkv + kh * s.hd + i];
                        worst = fmax(worst, fabs(o[0][t * s.hd * s.nh + h * s.hd + i] - acc));
                    }
                }
            CHECK(worst < 1e-5, "%s cache: worst abs error %g (tolerance 1e-5)", mf_type_name(s.kv_type),
                  worst);
        }
        for (int i = 0; i < 3; i++) free(o[i]);
        free(kf);
        free(vf);
        free(k);
        free(v);
        free(q);
    }
}

/* decode: one token, so query heads of a kv head are split into blocks by thread count; the blocking
 * must not change any value */
static void test_attention_decode_blocking(void) {
    att_shape s = {64, 8, 2, 40, 1, 32, MF_TYPE_F16, false, 0};
    seed(37);
    float *kf = malloc((size_t)(s.hd * s.nkv * s.cells) * sizeof(float));
    float *vf = malloc((size_t)(s.hd * s.nkv * s.cells) * sizeof(float));
    void *k, *v;
    make_kv(&s, kf, vf, &k, &v);
    float q[64 * 8];
    fill(q, 64 * 8, 2.0f);
    int32_t win[33];
    win[0] = 32;
    for (int j = 0; j < 32; j++) win[1 + j] = (j * 7) % 40;
    const int threads[] = {1, 2, 3, 5, 8};
    float *o[5] = {0};
    for (int i = 0; i < 5; i++) o[i] = run_attention(&s, q, k, v, win, threads[i]);
    for (int i = 1; i < 5; i++)
        CHECK(o[0] && o[i] && !memcmp(o[0], o[i], sizeof(float) * 64 * 8), "threads %d differ from 1",
              threads[i]);
    double worst = 0;
    const float scale = 1.0f / sqrtf(64.0f);
    round_query(s.kv_type, q, 64 * 8, 64);
    for (int h = 0; o[0] && h < 8; h++) {
        int kh = h / 4;
        double sc[32], mx = -1e300, sum = 0;
        for (int j = 0; j < 32; j++) {
            double d = 0;
            for (int i = 0; i < 64; i++) d += (double)q[h * 64 + i] * kf[win[1 + j] * 128 + kh * 64 + i];
            sc[j] = d * scale;
            mx = fmax(mx, sc[j]);
        }
        for (int j = 0; j < 32; j++) sum += exp(sc[j] - mx);
        for (int i = 0; i < 64; i++) {
            double acc = 0;
            for (int j = 0; j < 32; j++) acc += p_as_used(s.kv_type, exp(sc[j] - mx) / sum) * vf[win[1 + j] * 128 + kh * 64 + i];
            worst = fmax(worst, fabs(o[0][h * 64 + i] - acc));
        }
    }
    CHECK(worst < 1e-5, "worst abs error %g (tolerance 1e-5)", worst);
    for (int i = 0; i < 5; i++) free(o[i]);
    free(kf);
    free(vf);
    free(k);
    free(v);
}

static void test_attention_interleaved_sequences(void) {
    /* sequence A: tokens at batch rows 0, 2, 4 over cells {0,1,2,...}; B: rows 1, 3 over cells {6,7,...} */
    att_shape s = {32, 4, 1, 12, 5, 6, MF_TYPE_F16, false, 0};
    seed(41);
    float *kf = malloc((size_t)(s.hd * s.cells) * sizeof(float)),
          *vf = malloc((size_t)(s.hd * s.cells) * sizeof(float));
    void *k, *v;
    make_kv(&s, kf, vf, &k, &v);
    float q[32 * 4 * 5];
    fill(q, 32 * 4 * 5, 1.5f);
    const int32_t cols[5][7] = {{3, 0, 1, 2}, {2, 6, 7}, {4, 0, 1, 2, 3}, {3, 6, 7, 8}, {5, 0, 1, 2, 3, 4}};
    int32_t win[7 * 5];
    for (int t = 0; t < 5; t++) memcpy(win + 7 * t, cols[t], sizeof cols[t]);
    float *both = run_attention(&s, q, k, v, win, 2);
    const int rows_a[3] = {0, 2, 4}, rows_b[2] = {1, 3};
    for (int seq = 0; seq < 2; seq++) {
        const int *rows = seq ? rows_b : rows_a;
        int nt = seq ? 2 : 3;
        att_shape s1 = s;
        s1.nt = nt;
        float q1[32 * 4 * 3];
        int32_t w1[7 * 3];
        for (int i = 0; i < nt; i++) {
            memcpy(q1 + i * 128, q + rows[i] * 128, 128 * sizeof(float));
            memcpy(w1 + i * 7, win + rows[i] * 7, 7 * sizeof(int32_t));
        }
        float *alone = run_attention(&s1, q1, k, v, w1, seq ? 3 : 1);
        for (int i = 0; both && alone && i < nt; i++)
            CHECK(!memcmp(alone + i * 128, both + rows[i] * 128, 128 * sizeof(float)),
                  "sequence %c token %d differs alone vs interleaved", seq ? 'B' : 'A', i);
        free(alone);
    }
    free(both);
    free(kf);
    free(vf);
    free(k);
    free(v);
}

/* prefill: consecutive tokens with nested windows are computed as one block (each K/V row visited once
 * for all of them); every token must still get bitwise what it gets computed alone with its window */
static void test_attention_prefill_blocks(void) {
    const uint32_t types[] = {MF_TYPE_F32, MF_TYPE_F16};
    const int64_t groups[] = {2, 7};
    enum { NT = 13, PAST = 4, CELLS = 20 }; /* PAST cells already cached: a second prefill chunk */
    for (size_t ti = 0; ti < MF_ARRAY_LEN(types); ti++)
        for (size_t gi = 0; gi < MF_ARRAY_LEN(groups); gi++) {
            att_shape s = {64, 2 * groups[gi], 2, CELLS, NT, CELLS, types[ti], false, 0};
            seed(43 + ti * 2 + gi);
            float *kf = malloc((size_t)(s.hd * s.nkv * s.cells) * sizeof(float));
            float *vf = malloc((size_t)(s.hd * s.nkv * s.cells) * sizeof(float));
            void *k, *v;
            make_kv(&s, kf, vf, &k, &v);
            const int64_t qn = s.hd * s.nh; /* floats of one token's query */
            float *q = malloc((size_t)(qn * NT) * sizeof(float));
            fill(q, qn * NT, 2.0f);
            /* token t sees the cached cells then its own and the earlier ones, at scattered cell ids */
            int32_t win[(CELLS + 1) * NT] = {0}, perm[CELLS];
            for (int c = 0; c < CELLS; c++) perm[c] = (c * 7 + 3) % CELLS;
            for (int t = 0; t < NT; t++) {
                win[t * (CELLS + 1)] = PAST + t + 1;
                memcpy(win + t * (CELLS + 1) + 1, perm, (size_t)(PAST + t + 1) * sizeof(int32_t));
            }
            att_shape s1 = s;
            s1.nt = 1;
            float *alone[NT];
            for (int t = 0; t < NT; t++)
                alone[t] = run_attention(&s1, q + t * qn, k, v, win + t * (CELLS + 1), 1);
            for (int th = 1; th <= 3; th++) {
                float *o = run_attention(&s, q, k, v, win, th);
                for (int t = 0; o && t < NT; t++)
                    CHECK(alone[t] && !memcmp(alone[t], o + t * qn, (size_t)qn * sizeof(float)),
                          "%s cache, %lld heads per kv head, %d threads: token %d differs from it alone",
                          mf_type_name(s.kv_type), (long long)groups[gi], th, t);
                free(o);
            }
            for (int t = 0; t < NT; t++) free(alone[t]);
            free(kf);
            free(vf);
            free(k);
            free(v);
            free(q);
        }
}

/* ---- fusion: rms_norm+mul, matmul+bias add, matmul+residual add are fused by the executor when the
 * ADD/MUL runs in place over its only reader's input; results must be bitwise the unfused ones ---- */
static float *fusion_graph(bool block, int threads, const float *x, const float *gamma, const void *wq,
                           const float *bias, const float *w2) {
    mf_graph *g = mf_graph_new();
    int32_t xi = input_f32(g, "x", 2, 64, 5, 1);
    int32_t n = mf_g_rms_norm(g, xi, 1e-6f);
    const int64_t gne[1] = {64}, wne[2] = {64, 48}, bne[1] = {48}, w2ne[2] = {48, 48};
    int32_t nw = mf_g_mul(g, n, mf_g_weight(g, "gamma", MF_TYPE_F32, 1, gne, gamma)); /* weight made late */
    int32_t q = mf_g_matmul(g, mf_g_weight(g, "wq", MF_TYPE_Q8_0, 2, wne, wq), nw);
    int32_t qb = mf_g_add(g, q, mf_g_weight(g, "bias", MF_TYPE_F32, 1, bne, bias));
    int32_t r = mf_g_matmul(g, mf_g_weight(g, "w2", MF_TYPE_F32, 2, w2ne, w2), qb);
    int32_t out = mf_g_add(g, r, qb);
    mf_g_set_output(g, out);
    if (block) { /* outputs are never fused or computed in place */
        mf_g_set_output(g, n);
        mf_g_set_output(g, q);
        mf_g_set_output(g, r);
    }
    mf_error err = {0};
    float *res = NULL;
    if (mf_graph_alloc(g, &err) == 0) {
        if (!block)
            CHECK(mf_graph_node(g, nw)->data == mf_graph_node(g, n)->data &&
                      mf_graph_node(g, qb)->data == mf_graph_node(g, q)->data &&
                      mf_graph_node(g, out)->data == mf_graph_node(g, r)->data,
                  "the adds/mul did not run in place (nothing to fuse)");
        set_input(g, xi, x);
        if (compute(g, threads, &err) == 0) {
            res = malloc(48 * 5 * sizeof(float));
            memcpy(res, out_f32(g, out), 48 * 5 * sizeof(float));
        }
    }
    CHECK(res, "%s", err.msg);
    mf_graph_free(g);
    return res;
}

static void test_fusion_bitwise(void) {
    float x[64 * 5], gamma[64], bias[48], w2[48 * 48], wf[64 * 48];
    static uint8_t wq[48 * 68];
    seed(51);
    fill(x, 64 * 5, 2.0f);
    fill(gamma, 64, 1.0f);
    fill(bias, 48, 1.0f);
    fill(w2, 48 * 48, 0.3f);
    fill(wf, 64 * 48, 0.3f);
    for (int r = 0; r < 48; r++) mf_quantize_row(MF_TYPE_Q8_0, wf + r * 64, wq + r * 68, 64);
    for (int th = 1; th <= 3; th += 2) {
        float *fused = fusion_graph(false, th, x, gamma, wq, bias, w2);
        float *plain = fusion_graph(true, th, x, gamma, wq, bias, w2);
        CHECK(fused && plain && !memcmp(fused, plain, 48 * 5 * sizeof(float)), "threads %d: fused != unfused",
              th);
        free(fused);
        free(plain);
    }
}

/* a graph run as two ranges [0, k) + [k, n) (scheduler splits) equals one full run, for every k */
static void test_compute_range_splits(void) {
    float x[64 * 3], gamma[64], bias[48], wf[64 * 48];
    static uint8_t wq[48 * 68];
    seed(61);
    fill(x, 64 * 3, 2.0f);
    fill(gamma, 64, 1.0f);
    fill(bias, 48, 1.0f);
    fill(wf, 64 * 48, 0.3f);
    for (int r = 0; r < 48; r++) mf_quantize_row(MF_TYPE_Q8_0, wf + r * 64, wq + r * 68, 64);
    float want[48 * 3];
    mf_cpu *cpu = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_cpu_new(3, &cpu, &err), "%s", err.msg);
    for (int k = -1; k < 64; k++) {
        mf_graph *g = mf_graph_new();
        int32_t xi = input_f32(g, "x", 2, 64, 3, 1);
        const int64_t gne[1] = {64}, wne[2] = {64, 48}, bne[1] = {48};
        int32_t nw =
            mf_g_mul(g, mf_g_rms_norm(g, xi, 1e-6f), mf_g_weight(g, "gamma", MF_TYPE_F32, 1, gne, gamma));
        int32_t q = mf_g_matmul(g, mf_g_weight(g, "wq", MF_TYPE_Q8_0, 2, wne, wq), nw);
        int32_t qb = mf_g_add(g, q, mf_g_weight(g, "bias", MF_TYPE_F32, 1, bne, bias));
        int32_t out = mf_g_silu(g, qb);
        mf_g_set_output(g, out);
        int32_t nn = mf_graph_n_nodes(g);
        if (k >= nn) {
            mf_graph_free(g);
            break;
        }
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        set_input(g, xi, x);
        int rc = k < 0 ? mf_cpu_compute(cpu, g, &err) : mf_cpu_compute_range(cpu, g, 0, k, &err);
        if (rc == 0 && k >= 0) rc = mf_cpu_compute_range(cpu, g, k, nn, &err);
        CHECK(rc == 0, "split at %d: %s", k, err.msg);
        if (k < 0)
            memcpy(want, out_f32(g, out), sizeof want);
        else
            CHECK(!memcmp(want, out_f32(g, out), sizeof want), "split at %d differs from one run", k);
        mf_graph_free(g);
    }
    mf_cpu_free(cpu);
}

/* ---- refusals ---- */
static void test_refuses_unsupported_and_bad_ids(void) {
    uint32_t no_mm = MF_TYPE_COUNT;
    for (size_t i = 0; i < MF_ARRAY_LEN(all_types); i++)
        if (!mf_cpu_supports(MF_OP_MATMUL, all_types[i])) no_mm = all_types[i];
    CHECK(!mf_cpu_supports(MF_OP_RMS_NORM, MF_TYPE_F16), "rms_norm f16 claimed");
    CHECK(!mf_cpu_supports(MF_OP_KV_STORE, MF_TYPE_Q4_0), "kv_store q4_0 claimed");
    CHECK(mf_cpu_supports(MF_OP_KV_STORE, MF_TYPE_F16), "kv_store f16 not claimed");
    mf_error err = {0};
    if (no_mm != MF_TYPE_COUNT) {
        const int64_t K = 256, N = 2;
        void *w = calloc(1, mf_row_size(no_mm, K) * N);
        mf_graph *g = mf_graph_new();
        const int64_t ne[2] = {K, N};
        int32_t wi = mf_g_weight(g, "blk.0.ffn_up.weight", no_mm, 2, ne, w);
        int32_t xi = input_f32(g, "x", 2, K, 1, 1);
        mf_g_name(g, mf_g_matmul(g, wi, xi), "ffn_up-0");
        REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
        int rc = compute(g, 1, &err);
        CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, "ffn_up-0") && strstr(err.msg, mf_type_name(no_mm)),
              "rc %d msg '%s'", rc, err.msg);
        mf_graph_free(g);
        free(w);
    }
    /* an out-of-range cell id is reported with the node named, not written */
    float cache[4 * 8] = {0}, rows[4] = {1, 2, 3, 4};
    int32_t bad = 8;
    mf_graph *g = mf_graph_new();
    const int64_t ne[2] = {4, 8};
    int32_t ci = mf_g_external(g, "cache", MF_TYPE_F32, 2, ne, cache);
    int32_t ri = input_f32(g, "rows", 2, 4, 1, 1);
    int32_t ki = input_i32(g, "cells", 1);
    mf_g_name(g, mf_g_kv_store(g, ci, ri, ki), "k_store-3");
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    set_input(g, ri, rows);
    set_input(g, ki, &bad);
    int rc = compute(g, 2, &err);
    CHECK(rc == MF_E_RANGE && strstr(err.msg, "k_store-3") && strstr(err.msg, "8"), "rc %d msg '%s'", rc,
          err.msg);
    mf_graph_free(g);
}

/* ---- threadpool ---- */
typedef struct {
    mf_threadpool *tp;
    atomic_int hits[8];
    int stage[8];
    atomic_int errors;
} tp_ctx;

static void tp_task(void *p, int ith, int nth) {
    tp_ctx *c = p;
    atomic_fetch_add(&c->hits[ith], 1);
    for (int round = 0; round < 20; round++) {
        c->stage[ith] = round;
        mf_threadpool_barrier(c->tp);
        for (int j = 0; j < nth; j++)
            if (c->stage[j] != round)
                atomic_fetch_add(&c->errors, 1); /* single writer per slot; read after barrier */
        mf_threadpool_barrier(c->tp);
    }
}

static void test_threadpool(void) {
    mf_threadpool *tp = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_threadpool_new(4, &tp, &err), "%s", err.msg);
    tp_ctx c = {.tp = tp};
    for (int i = 0; i < 200; i++) mf_threadpool_run(tp, tp_task, &c, 1 + i % 4);
    int expect[4] = {200, 150, 100, 50};
    for (int i = 0; i < 4; i++)
        CHECK(atomic_load(&c.hits[i]) == expect[i], "thread %d ran %d times", i, atomic_load(&c.hits[i]));
    CHECK(atomic_load(&c.errors) == 0, "%d barrier violations", atomic_load(&c.errors));
    mf_threadpool_set_spin(tp, 0); /* sleep immediately: exercises the futex path */
    for (int i = 0; i < 50; i++) mf_threadpool_run(tp, tp_task, &c, 4);
    CHECK(atomic_load(&c.errors) == 0, "%d barrier violations without spinning", atomic_load(&c.errors));
    mf_threadpool_free(tp);
}


/* A thread waiting at mf_threadpool_barrier_ahead reads its range ahead meanwhile: the other thread arrives
 * 20 ms late, so `done` reaches the range's end (a barrier that dropped the range would leave it at 0); and
 * the barrier still orders memory (what thread 1 wrote before it, thread 0 reads after it). */
typedef struct {
    mf_threadpool *tp;
    mf_tp_ahead ah;
    int written, seen;
} ahead_ctx;

static void ahead_task(void *p, int ith, int nth) {
    ahead_ctx *c = p;
    if (ith == 1) {
        const struct timespec late = {0, 20 * 1000 * 1000};
        nanosleep(&late, NULL);
        c->written = 42;
        mf_threadpool_barrier(c->tp);
    } else {
        mf_threadpool_barrier_ahead(c->tp, &c->ah);
        c->seen = c->written;
    }
}

static void test_threadpool_reads_ahead_while_waiting(void) {
    mf_threadpool *tp = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_threadpool_new(2, &tp, &err), "%s", err.msg);
    mf_threadpool_set_spin(tp, 1000); /* the range (64 KiB: 512 lines read, 8 a poll) takes 64 polls: spin */
    static char buf[64 << 10];
    ahead_ctx c = {.tp = tp, .ah = {.p = buf, .len = sizeof buf}};
    mf_threadpool_run(tp, ahead_task, &c, 2);
    CHECK(c.ah.done == sizeof buf, "read ahead %zu of %zu bytes while waiting 20 ms", c.ah.done, sizeof buf);
    CHECK(c.seen == 42, "after the barrier thread 0 read %d, not what thread 1 wrote before it", c.seen);
    mf_threadpool_free(tp);
}

/* A q8_0 V cache runs llama.cpp's CPU flash attention (attention.c fa_row).  (1) The vec kernels it calls
 * give the scalar forms' bits on every ISA this CPU has: mad_q8_0 reads the q8_0 row in place (no converted
 * copy) as fma(q * d, p, y), scale is y * s.  (2) The op, with K q8_0 or f16 and any thread count, equals
 * bit for bit this plain-C replica of ggml_compute_forward_flash_attn_ext_f16_one_chunk: the query
 * converted to K's vec_dot type, s = vec_dot * scale, the online softmax with libm's expf, V as q * d
 * accumulated by fma, S = fma(S, ms, vs), the result times 1 / S. */
static void test_attention_q8_0(void) {
    enum { HD = 64, NR = 3 };
    static float y0[HD * 4], y1[HD * 4];
    static uint8_t row[34 * 4 * 4];
    float src[HD * 4];
    mf_cpu_vec ref, simd;
    mf_cpu_vec_init_isa(&ref, MF_ISA_SCALAR);
    const mf_isa isas[] = {MF_ISA_AVX2, MF_ISA_AVX512, MF_ISA_AMX, MF_ISA_NEON};
    int bad = 0;
    for (size_t ii = 0; ii < MF_ARRAY_LEN(isas); ii++) {
        if (!mf_quant_kernels_get_isa(MF_TYPE_Q8_0, isas[ii])) continue; /* not on this CPU / build */
        mf_cpu_vec_init_isa(&simd, isas[ii]);
        seed(77 + ii);
        for (int rep = 0; rep < 20; rep++) {
            fill(src, HD * 4, 3.0f);
            mf_quantize_row_cpu(MF_TYPE_Q8_0, src, row, HD * 4);
            fill(y0, HD * 4, 2.0f);
            memcpy(y1, y0, sizeof y0);
            const float p = frand();
            ref.mad_q8_0(HD * 4, p, row, y0);
            simd.mad_q8_0(HD * 4, p, row, y1);
            bad += memcmp(y0, y1, sizeof y0) != 0;
            ref.scale(HD * 4 - 3, p, y0); /* a tail too */
            simd.scale(HD * 4 - 3, p, y1);
            bad += memcmp(y0, y1, sizeof y0) != 0;
            /* probabilities, down into f16's subnormals and ties: the f16 round trip is bitwise too */
            for (int j = 0; j < HD * 4; j++) y0[j] = y1[j] = fabsf(frand()) * ldexpf(1.0f, -(j % 28));
            y0[0] = y1[0] = 1.0f + ldexpf(1.0f, -11); /* a tie: to even */
            ref.round_f16(HD * 4 - 3, y0);
            simd.round_f16(HD * 4 - 3, y1);
            bad += memcmp(y0, y1, sizeof y0) != 0;
        }
        CHECK(bad == 0, "%s mad_q8_0/scale/round_f16 differ from the scalar forms in %d cases", mf_isa_name(isas[ii]), bad);
    }
    /* the in-place read is the dequantized value: mad with p = 1 onto zeros gives dequantize_row's floats */
    float deq[HD * 4];
    memset(y0, 0, sizeof y0);
    ref.mad_q8_0(HD * 4, 1.0f, row, y0);
    mf_dequantize_row(MF_TYPE_Q8_0, row, deq, HD * 4);
    CHECK(!memcmp(deq, y0, sizeof deq), "mad_q8_0 does not read q8_0 as dequantize_row does");

    const uint32_t ktypes[] = {MF_TYPE_Q8_0, MF_TYPE_F16};
    /* shape 0: short scattered windows; shape 1: a prefill run's nested windows over 150 cells (the
     * AVX-512 form's key blocks of 64: three blocks, rows leaving the run block by block) */
    for (int shape = 0; shape < 2; shape++)
    for (size_t ki = 0; ki < MF_ARRAY_LEN(ktypes); ki++) {
        att_shape s = {HD, 4, 2, shape ? 150 : 12, 3, shape ? 150 : 8, ktypes[ki], true, MF_TYPE_Q8_0};
        const int64_t ws = s.nwin + 1; /* window stride */
        seed(41 + ki);
        const int64_t ne = s.hd * s.nkv;
        float *kf = malloc((size_t)(ne * s.cells) * sizeof(float)), *vf = malloc((size_t)(ne * s.cells) * sizeof(float));
        fill(kf, ne * s.cells, 1.0f);
        fill(vf, ne * s.cells, 1.0f);
        const size_t krs = mf_row_size(s.kv_type, ne), vrs = mf_row_size(MF_TYPE_Q8_0, ne);
        uint8_t *k = malloc(krs * (size_t)s.cells), *v = malloc(vrs * (size_t)s.cells);
        for (int64_t c = 0; c < s.cells; c++) {
            mf_quantize_row_cpu(s.kv_type, kf + c * ne, k + krs * (size_t)c, ne);
            mf_quantize_row_cpu(MF_TYPE_Q8_0, vf + c * ne, v + vrs * (size_t)c, ne);
        }
        float *q = malloc((size_t)(s.hd * s.nh * s.nt) * sizeof(float));
        fill(q, s.hd * s.nh * s.nt, 2.0f);
        int32_t *win = calloc((size_t)(ws * s.nt), sizeof(int32_t));
        if (!shape) {
            const int32_t w0[] = {1, 3}, w1[] = {3, 3, 0, 11}, w2[] = {8, 5, 1, 2, 3, 0, 11, 7, 9};
            memcpy(win + 0, w0, sizeof w0);
            memcpy(win + 9, w1, sizeof w1);
            memcpy(win + 18, w2, sizeof w2);
        } else {
            for (int64_t t = 0; t < s.nt; t++) {
                win[t * ws] = (int32_t)(70 + 40 * t);
                for (int32_t j = 0; j < win[t * ws]; j++) win[t * ws + 1 + j] = (j * 37 + 5) % 150;
            }
        }
        float *o[2] = {run_attention(&s, q, k, v, win, 1), run_attention(&s, q, k, v, win, 3)};
        const mf_quant_kernels *kk = mf_quant_kernels_get(s.kv_type);
        const float scale = 1.0f / sqrtf((float)s.hd);
        int diff = 0;
        if (o[0] && o[1]) {
            CHECK(!memcmp(o[0], o[1], (size_t)(s.hd * s.nh * s.nt) * sizeof(float)), "K %s: thread counts differ",
                  mf_type_name(s.kv_type));
            uint8_t qc[HD * 4];
            float acc[HD], vrow[HD];
            for (int64_t t = 0; t < s.nt; t++)
                for (int64_t h = 0; h < s.nh; h++) {
                    const int32_t *col = win + t * ws;
                    const int64_t kh = h / (s.nh / s.nkv);
                    kk->from_float(q + (t * s.nh + h) * s.hd, qc, s.hd);
                    float M = -INFINITY, S = 0;
                    memset(acc, 0, sizeof acc);
                    for (int j = 0; j < col[0]; j++) {
                        float sc;
                        kk->vec_dot(s.hd, &sc, k + krs * (size_t)col[1 + j] + mf_row_size(s.kv_type, kh * s.hd), qc);
                        sc = sc * scale;
                        float ms = 1, vs = 1;
                        if (sc > M) {
                            const float mo = M;
                            M = sc;
                            ms = expf(mo - M);
                            for (int d = 0; d < HD; d++) acc[d] *= ms;
                        } else {
                            vs = expf(sc - M);
                        }
                        mf_dequantize_row(MF_TYPE_Q8_0, v + vrs * (size_t)col[1 + j] + mf_row_size(MF_TYPE_Q8_0, kh * s.hd), vrow, s.hd);
                        for (int d = 0; d < HD; d++) acc[d] = fmaf(vrow[d], vs, acc[d]);
                        S = fmaf(S, ms, vs);
                    }
                    const float inv = 1.0f / S;
                    for (int d = 0; d < HD; d++) {
                        const float want = acc[d] * inv;
                        diff += memcmp(&want, &o[0][(t * s.nh + h) * s.hd + d], sizeof want) != 0;
                    }
                }
        }
        CHECK(diff == 0, "K %s V q8_0, shape %d: %d outputs differ from the flash-attention replica",
              mf_type_name(s.kv_type), shape, diff);
        free(win);
        free(o[0]);
        free(o[1]);
        free(kf);
        free(vf);
        free(k);
        free(v);
        free(q);
    }
}

/* The AVX-512 attention kernels give the plain path's bits: scores16 lane i = the AVX2 F32 vec_dot of the
 * query row with key i (every head size the path takes, 1..11 rows), pv16 = llama.cpp's tinyBLAS order
 * (key j into lane j % 8 by fma, then its hsum tree) times the factor, from f32 and f16 caches. */
static void test_attention_x16_kernels(void) {
    if (!mf_isa_avx512(mf_quant_active_isa())) SKIP("AVX-512 is not active here");
    const mf_quant_kernels *f32 = mf_quant_kernels_get_isa(MF_TYPE_F32, MF_ISA_AVX2);
    REQUIRE(f32 && f32->vec_dot, "the AVX2 F32 vec_dot");
    static const int64_t hds[] = {32, 64, 96, 128, 256};
    enum { NR = 11, NK = 16, CNT = 37 };
    static float q[NR * 256], k[NK][256], kt[256 * 16], got[NR * 16], v[CNT][256], p[6][CNT], out[6 * 256];
    static uint16_t vh[CNT][256];
    static int32_t cell[CNT];
    int bad = 0;
    for (size_t hi = 0; hi < MF_ARRAY_LEN(hds); hi++) {
        const int64_t hd = hds[hi];
        CHECK(mf_cpu_att_x16_ok(hd), "head size %lld is taken", (long long)hd);
        seed(900 + hi);
        fill(q, NR * hd, 1.0f);
        for (int i = 0; i < NK; i++) {
            fill(k[i], hd, 1.0f);
            for (int64_t d = 0; d < hd; d++) kt[d * 16 + i] = k[i][d];
        }
        for (int nr = 1; nr <= NR; nr++) {
            mf_cpu_att_scores16(hd, kt, q, nr, got);
            for (int r = 0; r < nr; r++)
                for (int i = 0; i < NK; i++) {
                    float want;
                    f32->vec_dot(hd, &want, k[i], q + r * hd);
                    if (memcmp(&want, &got[r * 16 + i], sizeof want) && bad++ < 3)
                        CHECK(0, "scores16 hd %lld rows %d (%d, %d): %a, vec_dot %a", (long long)hd, nr, r, i, got[r * 16 + i], want);
                }
        }
        for (int j = 0; j < CNT; j++) {
            cell[j] = (j * 7) % CNT; /* any order of cells */
            fill(v[j], hd, 1.0f);
            for (int64_t d = 0; d < hd; d++) vh[j][d] = mf_fp32_to_fp16(v[j][d]), v[j][d] = v[j][d];
        }
        for (int vt = 0; vt < 2; vt++) {
            const int nh = 5;
            float inv[6];
            for (int h = 0; h < nh; h++) {
                for (int j = 0; j < CNT; j++) p[h][j] = fabsf(frand());
                inv[h] = 0.37f + 0.1f * (float)h;
            }
            mf_cpu_att_pv pv = {.hd = hd, .cnt = CNT, .nh = nh, .p = &p[0][0], .p_stride = CNT, .inv = inv,
                                .v = vt ? (const char *)vh : (const char *)v,
                                .v_nb1 = vt ? sizeof vh[0] : sizeof v[0], .voff = 0,
                                .vtype = vt ? MF_TYPE_F16 : MF_TYPE_F32, .cell = cell, .out = out};
            mf_cpu_att_pv16(&pv);
            for (int h = 0; h < nh; h++)
                for (int64_t d = 0; d < hd; d++) {
                    float l[8] = {0};
                    for (int j = 0; j < CNT; j++) {
                        const float x = vt ? mf_fp16_to_fp32(vh[cell[j]][d]) : v[cell[j]][d];
                        l[j % 8] = fmaf(p[h][j], x, l[j % 8]);
                    }
                    const float want = (((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))) * inv[h];
                    if (memcmp(&want, &out[h * hd + d], sizeof want) && bad++ < 3)
                        CHECK(0, "pv16 %s hd %lld head %d d %lld: %a, loop %a", vt ? "f16" : "f32", (long long)hd, h, (long long)d,
                              out[h * hd + d], want);
                }
        }
    }
    CHECK(bad == 0, "%d results differ from the plain path", bad);
}

/* The AVX-512 prefill kernels against plain loops, bit for bit: pv_rows (rows of a run with nested
 * windows, keys in blocks of kb - the lane chains continued across blocks, each row stopping at its own
 * window even where a later value is inf) and softmax_row (= normalize then the f16 rounding). */
static void test_attention_prefill_kernels(void) {
    if (!mf_isa_avx512(mf_quant_active_isa())) SKIP("AVX-512 is not active here");
    enum { NR = 13, CNT = 37, NH = 3 };
    static float v[CNT][256], p[NR][CNT], out[(NR / NH + 1) * NH * 256 + 64], acc[8 * NR * 256];
    static uint16_t vh[CNT][256];
    static int32_t cell[CNT];
    static const int64_t hds[] = {32, 64, 96, 128, 256};
    int64_t cnt[NR];
    int bad = 0;
    for (size_t hi = 0; hi < MF_ARRAY_LEN(hds); hi++) {
        const int64_t hd = hds[hi];
        seed(950 + hi);
        for (int j = 0; j < CNT; j++) {
            cell[j] = (j * 11) % CNT;
            fill(v[j], hd, 1.0f);
        }
        v[cell[CNT - 1]][0] = INFINITY; /* only the rows whose window reaches the last key may see it */
        for (int j = 0; j < CNT; j++)
            for (int64_t d = 0; d < hd; d++) vh[j][d] = mf_fp32_to_fp16(v[j][d]);
        for (int r = 0; r < NR; r++) {
            cnt[r] = CNT - 2 * ((NR - 1 - r) / NH); /* nondecreasing, one count per token */
            for (int j = 0; j < CNT; j++) p[r][j] = fabsf(frand());
        }
        for (int vt = 0; vt < 2; vt++)
            for (int64_t kb = 8; kb <= 64; kb *= 2) {
                const size_t ostride = (size_t)(NH * hd + 16);
                const mf_cpu_att_pvb b = {.hd = hd, .kb = kb, .nrows = NR, .nh = NH, .cnt = cnt, .p = &p[0][0],
                                          .p_stride = CNT, .v = vt ? (const char *)vh : (const char *)v,
                                          .v_nb1 = vt ? sizeof vh[0] : sizeof v[0], .voff = 0,
                                          .vtype = vt ? MF_TYPE_F16 : MF_TYPE_F32, .cell = cell, .acc = acc,
                                          .out = out, .out_stride = ostride};
                mf_cpu_att_pv_rows(&b);
                for (int r = 0; r < NR; r++)
                    for (int64_t d = 0; d < hd; d++) {
                        float l[8] = {0};
                        for (int j = 0; j < cnt[r]; j++) {
                            const float x = vt ? mf_fp16_to_fp32(vh[cell[j]][d]) : v[cell[j]][d];
                            l[j % 8] = fmaf(p[r][j], x, l[j % 8]);
                        }
                        const float want = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
                        const float got = out[(size_t)(r / NH) * ostride + (size_t)(r % NH) * (size_t)hd + (size_t)d];
                        if (memcmp(&want, &got, sizeof want) && bad++ < 3)
                            CHECK(0, "pv_rows %s hd %lld kb %lld row %d d %lld: %a, loop %a", vt ? "f16" : "f32",
                                  (long long)hd, (long long)kb, r, (long long)d, got, want);
                    }
            }
    }
    mf_cpu_vec ref;
    mf_cpu_vec_init_isa(&ref, MF_ISA_SCALAR);
    static const int64_t ns[] = {1, 7, 8, 9, 15, 16, 17, 24, 33, 300};
    static float x[300], want[300], got[300];
    for (size_t ni = 0; ni < MF_ARRAY_LEN(ns); ni++)
        for (int f16 = 0; f16 < 2; f16++) {
            const int64_t n = ns[ni];
            seed(990 + ni);
            float mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                x[j] = frand() * (j % 5 == 3 ? 300.0f : 12.0f); /* exp's special paths (|n| > 126, > 192) too */
                mx = x[j] > mx ? x[j] : mx;
            }
            memcpy(want, x, sizeof x);
            memcpy(got, x, sizeof x);
            const float inv = (float)(1.0 / ref.exp_sub(n, want, mx, want));
            for (int64_t j = 0; j < n; j++) want[j] *= inv;
            if (f16) ref.round_f16(n, want);
            mf_cpu_att_softmax_row(n, got, mx, f16);
            if (memcmp(want, got, (size_t)n * sizeof(float)) && bad++ < 6)
                CHECK(0, "softmax_row n %lld %s differs from normalize", (long long)n, f16 ? "f16" : "f32");
        }
    CHECK(bad == 0, "%d results differ from the plain loops", bad);
}


/* rms_norm's sums of squares run up to MF_CPU_NORM_ROWS rows side by side (vec.sumsq), and its scaling and
 * the matmul's fused bias / residual go through vec.scale_op / vec.bin_op: on every ISA this CPU has, each
 * row's sum is bit for bit ggml's chain alone (x*x rounded to float, added in double in element order),
 * whatever the row count and length, and y = (x * s) op z, y = x op z are the plain loops' values, in
 * place too.  The rows' magnitudes span 2^-20 .. 2^20, so a sum taken in another order rounds differently. */
static void test_norm_rows_side_by_side_equal_one_row_chain(void) {
    enum { NMAX = 899, RMAX = MF_CPU_NORM_ROWS };
    static float x[RMAX][NMAX], z[NMAX], y0[NMAX], y1[NMAX];
    static const int64_t ns[] = {1, 3, 4, 5, 8, 31, 64, 127, 128, 896, 899};
    const mf_isa isas[] = {MF_ISA_SCALAR, MF_ISA_AVX2, MF_ISA_AVX512, MF_ISA_AMX, MF_ISA_NEON};
    int bad = 0, ran = 0, reordered = 0;
    seed(4242);
    for (int r = 0; r < RMAX; r++)
        for (int i = 0; i < NMAX; i++) x[r][i] = ldexpf(frand(), (int)(urand() % 41) - 20);
    fill(z, NMAX, 3.0f);
    for (size_t ii = 0; ii < MF_ARRAY_LEN(isas); ii++) {
        if (isas[ii] != MF_ISA_SCALAR && !mf_quant_kernels_get_isa(MF_TYPE_Q8_0, isas[ii])) continue;
        mf_cpu_vec v;
        mf_cpu_vec_init_isa(&v, isas[ii]);
        ran++;
        for (size_t ni = 0; ni < MF_ARRAY_LEN(ns); ni++) {
            const int64_t n = ns[ni];
            for (int nr = 1; nr <= RMAX; nr++) {
                const float *rows[RMAX];
                double sum[RMAX];
                for (int k = 0; k < nr; k++) rows[k] = x[(k * 5 + nr) % RMAX]; /* rows in another order each time */
                v.sumsq(rows, nr, n, sum);
                for (int k = 0; k < nr; k++) {
                    double want = 0, pairs = 0;
                    for (int64_t i = 0; i < n; i++) want += (double)(rows[k][i] * rows[k][i]);
                    for (int64_t i = n - 1; i >= 0; i--) pairs += (double)(rows[k][i] * rows[k][i]);
                    reordered += pairs != want;
                    if (memcmp(&want, &sum[k], sizeof want) && bad++ < 4)
                        CHECK(0, "%s sumsq n %lld of %d rows, row %d: %a, chain %a", mf_isa_name(isas[ii]),
                              (long long)n, nr, k, sum[k], want);
                }
            }
            const float s = 0.37f;
            for (int op = -1; op <= 1; op++) {
                const int o = op < 0 ? -1 : op ? MF_OP_MUL : MF_OP_ADD;
                for (int z1 = 0; z1 < 2; z1++) {
                    for (int64_t i = 0; i < n; i++) {
                        const float t = x[1][i] * s, b = z1 ? z[0] : z[i];
                        y0[i] = o == MF_OP_MUL ? t * b : o == MF_OP_ADD ? t + b : t;
                    }
                    v.scale_op(n, x[1], s, o, o < 0 ? NULL : z, z1 && o >= 0, y1);
                    if (memcmp(y0, y1, (size_t)n * sizeof(float)) && bad++ < 4)
                        CHECK(0, "%s scale_op n %lld op %d z1 %d differs", mf_isa_name(isas[ii]), (long long)n, o, z1);
                    if (o < 0) continue;
                    for (int64_t i = 0; i < n; i++) {
                        const float b = z1 ? z[0] : z[i];
                        y0[i] = o == MF_OP_MUL ? x[2][i] * b : x[2][i] + b;
                    }
                    memcpy(y1, x[2], (size_t)n * sizeof(float));
                    v.bin_op(n, y1, o, z, z1, y1); /* in place, as the matmul's fused op runs */
                    if (memcmp(y0, y1, (size_t)n * sizeof(float)) && bad++ < 4)
                        CHECK(0, "%s bin_op n %lld op %d z1 %d differs", mf_isa_name(isas[ii]), (long long)n, o, z1);
                }
            }
        }
    }
    CHECK(ran >= 1 && reordered > 0, "the rows' sums do not depend on their order (%d), so order is not tested", reordered);
    CHECK(bad == 0, "%d results differ from the plain loops", bad);
}

int main(void) {
    RUN(test_threadpool);
    RUN(test_threadpool_reads_ahead_while_waiting);
    RUN(test_get_rows_every_type);
    RUN(test_matmul_every_type);
    RUN(test_bf16_matmul_tiny_activation_keeps_vec_dot_bits);
    RUN(test_matmul_dynamic_chunks);
    RUN(test_matmul_read_ahead_is_each_threads_first_rows);
    RUN(test_matmul_x8);
    RUN(test_rms_norm);
    RUN(test_norm_rows_side_by_side_equal_one_row_chain);
    RUN(test_add_mul_broadcast);
    RUN(test_vec_exp);
    RUN(test_scale_silu_swiglu_softmax);
    RUN(test_cont_of_permute);
    RUN(test_rope);
    RUN(test_rope_is_llama_cpps_bit_for_bit);
    RUN(test_kv_store_scattered);
    RUN(test_attention_reference);
    RUN(test_attention_decode_blocking);
    RUN(test_attention_interleaved_sequences);
    RUN(test_attention_prefill_blocks);
    RUN(test_attention_x16_kernels);
    RUN(test_attention_prefill_kernels);
    RUN(test_attention_q8_0);
    RUN(test_fusion_bitwise);
    RUN(test_compute_range_splits);
    RUN(test_refuses_unsupported_and_bad_ids);
    return mf_test_done();
}
