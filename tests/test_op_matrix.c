/* The op x dtype x backend matrix.
 *
 *  matrix_<backend>: every op each backend claims, for every dtype it claims (asking its own support
 *    function), is run on that backend through the scheduler and compared with an analytic reference
 *    written here - never with another backend.  An unavailable backend reports SKIP with the reason.
 *  matrix_cuda_vs_cpu: the CUDA column once more at the real models' shapes, against the CPU backend
 *    within a per-op tolerance, plus batch invariance (matmul rows, attention queries) bit for bit;
 *    SKIP with the reason where no CUDA device is usable (tests/expected-skips.txt).
 *    matrix_test_backend_vs_cpu runs that machinery on every build against the test backend.
 *  support_table_matches_support_matrix_doc: docs/SUPPORT-MATRIX.md's table is parsed and compared with
 *    the support functions, cell by cell, so the document cannot drift.
 *  every_op_has_a_matrix_decision: decision() is a switch over mf_op with no default - a new op does
 *    not compile until it has a case or an excuse here (-Werror=switch).
 *
 * `test_op_matrix --print-table` prints the table as the code answers it (to update the doc). */
#pragma GCC diagnostic error "-Wswitch"
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "backend/registry.h"
#include "backend/sched.h"
#include "quant/quant.h"
#include "harness.h"
#include "support/spans.h"
#include "support/test_backend.h"

#include <math.h>
#include <stdarg.h>

/* ---- data ---- */
static uint64_t rng = 1;
static uint32_t urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) { return (float)(urand() & 0xFFFFFF) / (float)0x800000 - 1.0f; }
static void fill(float *x, int64_t n, float amp) {
    for (int64_t i = 0; i < n; i++) x[i] = frand() * amp;
}
static void fix_f16(uint8_t *blk, size_t off, float v) {
    uint16_t h = mf_fp32_to_fp16(v);
    memcpy(blk + off, &h, 2);
}
/* R rows of K elements of `type`: quantized from floats where a quantizer exists, else random blocks
 * with sane scale fields. */
static void make_rows(uint32_t type, int64_t K, int64_t R, void *dst) {
    size_t rs = mf_row_size(type, K);
    float *tmp = malloc((size_t)K * sizeof(float));
    const mf_type_info *ti = mf_type_get(type);
    for (int64_t r = 0; r < R; r++) {
        uint8_t *row = (uint8_t *)dst + (size_t)r * rs;
        fill(tmp, K, 1.0f);
        if (mf_quantize_row(type, tmp, row, K) == 0) continue;
        for (size_t i = 0; i < rs; i++) row[i] = (uint8_t)urand();
        for (size_t b = 0; ti->quantized && b < rs / ti->type_size; b++) {
            uint8_t *blk = row + b * ti->type_size;
            float d = 0.01f + 0.02f * (frand() + 1.0f), m = 0.02f * frand();
            switch (type) {
            case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S:
            case MF_TYPE_Q4_0: case MF_TYPE_Q5_0: case MF_TYPE_Q8_0: case MF_TYPE_IQ4_NL: case MF_TYPE_IQ4_XS:
                fix_f16(blk, 0, d);
                break;
            case MF_TYPE_Q4_1: case MF_TYPE_Q5_1: case MF_TYPE_Q8_1: case MF_TYPE_Q4_K: case MF_TYPE_Q5_K:
                fix_f16(blk, 0, d), fix_f16(blk, 2, m);
                break;
            case MF_TYPE_Q2_K: fix_f16(blk, 80, d), fix_f16(blk, 82, m); break;
            case MF_TYPE_Q3_K: fix_f16(blk, 108, d); break;
            case MF_TYPE_Q6_K: fix_f16(blk, 208, d); break;
            case MF_TYPE_Q8_K: memcpy(blk, &d, 4); break;
            default: break;
            }
        }
    }
    free(tmp);
}

/* ---- running one cell ---- */
static char g_why[1024];
static bool failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool failf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_why, sizeof g_why, fmt, ap);
    va_end(ap);
    return false;
}

static mf_sched *g_sched;
static mf_backend g_b; /* the backend under test */

/* Assign (cpu + the backend under test), check `node` landed on it, allocate; inputs are bound by the
 * caller after this, then run(). */
static bool place(mf_graph *g, int32_t node) {
    mf_error err = {0};
    if (mf_graph_error(g, &err)) return failf("build: %s", err.msg);
    mf_backend_filter f;
    memset(&f, 0, sizeof f);
    f.allowed[MF_BACKEND_ID_CPU] = true;
    f.allowed[g_b.id] = true;
    if (mf_sched_assign(g, &f, &err)) return failf("assign: %s", err.msg);
    const mf_node *n = mf_graph_node_c(g, node);
    if (n->backend != g_b.id)
        return failf("%s landed on %s, not on %s", mf_op_name(n->op), mf_backend_name((mf_backend){(uint16_t)n->backend}),
                     mf_backend_name(g_b));
    if (mf_sched_alloc(g_sched, g, &err)) return failf("alloc: %s", err.msg);
    return true;
}
static bool run(mf_graph *g) {
    mf_error err = {0};
    mf_sched_invalidate(g_sched);
    if (mf_sched_compute(g_sched, g, &err)) return failf("compute: %s", err.msg);
    return true;
}
/* Inputs in and results out through the hooks of the backend each lives on (a non-host backend's
 * memory is never dereferenced here). */
static void set(mf_graph *g, int32_t id, const void *src) {
    mf_error err = {0};
    if (mf_sched_write(g_sched, g, id, 0, src, mf_node_nbytes(mf_graph_node_c(g, id)), &err))
        failf("write: %s", err.msg);
}
static void *g_got;
static const void *got(mf_graph *g, int32_t id) {
    mf_error err = {0};
    size_t n = mf_node_nbytes(mf_graph_node_c(g, id));
    void *p = realloc(g_got, n ? n : 1);
    if (!p) return NULL;
    g_got = p;
    if (mf_sched_read(g_sched, g, id, 0, g_got, n, &err)) failf("read: %s", err.msg);
    return g_got;
}
static bool close_to(const float *got, const double *want, int64_t n, double rel, double abs_tol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= abs_tol + rel * fabs(want[i])))
            return failf("%s[%lld] = %.9g, reference %.9g (|d| %.3g)", what, (long long)i, got[i], want[i], d);
    }
    return true;
}
static double silu_ref(double x) { return x / (1.0 + exp(-x)); }

/* ---- the cases: each returns true on pass, else fills g_why ---- */

static bool case_binary(mf_op op, uint32_t type) {
    (void)type;
    bool ok = true;
    /* same shape, a broadcast row (the norms' weights), a broadcast column (qwen2moe's shared-expert gate
     * times its FFN), rows of one element (that gate: silu(g) / g, the kernels' scalar tails) */
    for (int bc = 0; bc < 4 && ok; bc++) {
        mf_graph *g = mf_graph_new();
        int64_t na[2] = {bc == 3 ? 1 : 8, bc == 3 ? 24 : 3}, nb[2] = {bc == 2 ? 1 : na[0], bc == 1 ? 1 : na[1]};
        int32_t a = mf_g_input(g, "a", MF_TYPE_F32, 2, na), b = mf_g_input(g, "b", MF_TYPE_F32, 2, nb);
        int32_t o = op == MF_OP_ADD ? mf_g_add(g, a, b) : op == MF_OP_MUL ? mf_g_mul(g, a, b) : mf_g_div(g, a, b);
        float A[24], B[24];
        fill(A, 24, 4.0f), fill(B, 24, 4.0f);
        ok = place(g, o);
        if (ok) set(g, a, A), set(g, b, B), ok = run(g);
        const float *y = ok ? got(g, o) : NULL;
        for (int i = 0; ok && i < 24; i++) {
            float z = B[bc == 1 ? i % 8 : bc == 2 ? i / 8 : i]; /* one IEEE operation: exact */
            float want = op == MF_OP_ADD ? A[i] + z : op == MF_OP_MUL ? A[i] * z : A[i] / z;
            if (memcmp(&y[i], &want, 4)) ok = failf("[%d] = %.9g, want exactly %.9g", i, y[i], want);
        }
        mf_graph_free(g);
    }
    return ok;
}

static bool case_unary(mf_op op, uint32_t type) {
    (void)type;
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {16, 3};
    int32_t a = mf_g_input(g, "a", MF_TYPE_F32, 2, ne), b = -1, o;
    float A[48], B[48];
    fill(A, 48, 6.0f), fill(B, 48, 2.0f);
    if (op == MF_OP_RMS_NORM) /* rows of RMS ~3e-3 and ~1e-3, where eps = 1e-5 is 100 % and 1000 % of the
                               * mean square (an ignored or wrong eps fails), then one of RMS ~3.5 */
        for (int i = 0; i < 32; i++) A[i] *= i < 16 ? 1e-3f : 3e-4f;
    const float s = 0.375f;
    switch (op) {
    case MF_OP_SCALE: o = mf_g_scale(g, a, s); break;
    case MF_OP_SILU: o = mf_g_silu(g, a); break;
    case MF_OP_SWIGLU: b = mf_g_input(g, "b", MF_TYPE_F32, 2, ne), o = mf_g_swiglu(g, a, b); break;
    case MF_OP_SOFTMAX: o = mf_g_softmax(g, a); break;
    default: o = mf_g_rms_norm(g, a, 1e-5f); break; /* RMS_NORM */
    }
    bool ok = place(g, o);
    if (ok) {
        set(g, a, A);
        if (b >= 0) set(g, b, B);
        ok = run(g);
    }
    if (ok) {
        double want[48];
        for (int r = 0; r < 3; r++) {
            const float *x = A + 16 * r;
            double mx = -INFINITY, sum = 0, ss = 0;
            for (int i = 0; i < 16; i++) mx = fmax(mx, x[i]), ss += (double)x[i] * x[i];
            for (int i = 0; i < 16; i++) sum += exp(x[i] - mx);
            for (int i = 0; i < 16; i++) {
                double v = x[i];
                switch (op) {
                case MF_OP_SCALE: v = (double)(x[i] * s); break;
                case MF_OP_SILU: v = silu_ref(x[i]); break;
                case MF_OP_SWIGLU: v = silu_ref(x[i]) * B[16 * r + i]; break;
                case MF_OP_SOFTMAX: v = exp(x[i] - mx) / sum; break;
                default: v = x[i] / sqrt(ss / 16 + 1e-5); break;
                }
                want[16 * r + i] = v;
            }
        }
        ok = close_to(got(g, o), want, 48, op == MF_OP_SCALE ? 0 : 2e-6, 1e-7, mf_op_name(op));
    }
    mf_graph_free(g);
    return ok;
}

static bool case_rope(uint32_t type) {
    (void)type;
    enum { HD = 8, NH = 2, NT = 3 };
    mf_graph *g = mf_graph_new();
    int64_t ne[3] = {HD, NH, NT}, np = NT;
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 3, ne), p = mf_g_input(g, "pos", MF_TYPE_I32, 1, &np);
    const float base = 10000.0f;
    const mf_rope r = mf_rope_plain(HD, MF_ROPE_NEOX, base);
    int32_t o = mf_g_rope(g, x, p, &r);
    float X[HD * NH * NT];
    int32_t P[NT] = {0, 5, 17};
    fill(X, HD * NH * NT, 1.0f);
    bool ok = place(g, o);
    if (ok) set(g, x, X), set(g, p, P), ok = run(g);
    if (ok) {
        double want[HD * NH * NT];
        for (int t = 0; t < NT; t++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < HD / 2; i++) {
                    const float *v = X + (t * NH + h) * HD;
                    double th = P[t] * pow(base, -2.0 * i / HD);
                    double *w = want + (t * NH + h) * HD;
                    w[i] = v[i] * cos(th) - v[i + HD / 2] * sin(th);
                    w[i + HD / 2] = v[i] * sin(th) + v[i + HD / 2] * cos(th);
                }
        ok = close_to(got(g, o), want, HD * NH * NT, 1e-4, 1e-5, "rope");
    }
    mf_graph_free(g);
    return ok;
}

/* the fast transform against the explicit orthonormal matrix llama.cpp builds (ggml_gen_hadamard:
 * Sylvester's doubling of [1 / sqrt(n)]), two chunks per row so a chunking slip shows */
static bool case_hadamard(uint32_t type) {
    (void)type;
    enum { N = 64, NE = 2 * N, NR = 3 };
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {NE, NR};
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 2, ne);
    int32_t o = mf_g_hadamard(g, x, N);
    float X[NE * NR];
    fill(X, NE * NR, 1.0f);
    static double H[N][N];
    H[0][0] = 1.0 / sqrt((double)N);
    for (int s = 1; s < N; s *= 2)
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) {
                H[i + s][j] = H[i][j + s] = H[i][j];
                H[i + s][j + s] = -H[i][j];
            }
    bool ok = place(g, o);
    if (ok) set(g, x, X), ok = run(g);
    if (ok) {
        double want[NE * NR];
        for (int r = 0; r < NE * NR / N; r++)
            for (int i = 0; i < N; i++) {
                double a = 0;
                for (int j = 0; j < N; j++) a += H[i][j] * X[r * N + j];
                want[r * N + i] = a;
            }
        ok = close_to(mf_graph_node(g, o)->data, want, NE * NR, 1e-5, 1e-6, "hadamard");
    }
    mf_graph_free(g);
    return ok;
}

static bool case_get_rows(uint32_t type) {
    /* an x8 layout (a tied embedding's repacked copy) is made from rows of its file type and checked
     * against that type's reference dequantizer */
    const mf_type_info *ti = mf_type_get(type);
    const bool x8 = ti->row_group > 1;
    const uint32_t base = x8 ? mf_repack_base(type) : type;
    const int64_t K = 256, R = x8 ? 2 * ti->row_group : 4, N = 3;
    size_t rs = mf_row_size(base, K);
    uint8_t *table = malloc(rs * R), *tk = x8 ? malloc(rs * R) : table;
    make_rows(base, K, R, table);
    if (x8 && mf_repack_as(type, base, table, tk, K, R)) return failf("mf_repack refused %s", mf_type_name(type));
    mf_graph *g = mf_graph_new();
    int64_t nt[2] = {K, R};
    int32_t t = mf_g_weight(g, "table", type, 2, nt, tk), ids = mf_g_input(g, "ids", MF_TYPE_I32, 1, &N);
    int32_t o = mf_g_get_rows(g, t, ids);
    int32_t I[3] = {2, 0, (int32_t)R - 1}; /* R - 1: a row of the second group of an x8 table */
    bool ok = place(g, o);
    if (ok) set(g, ids, I), ok = run(g);
    float *row = malloc(K * sizeof(float));
    double *want = malloc((size_t)(K * N) * sizeof(double));
    for (int n = 0; ok && n < N; n++) {
        if (mf_dequantize_row(base, table + rs * I[n], row, K)) ok = failf("no reference dequantizer for %s", mf_type_name(type));
        for (int64_t k = 0; k < K; k++) want[n * K + k] = row[k];
    }
    if (ok) ok = close_to(got(g, o), want, K * N, 0, 0, "get_rows");
    free(row), free(want), free(table);
    if (x8) free(tk);
    mf_graph_free(g);
    return ok;
}

static bool case_matmul(uint32_t type) {
    /* an x8 layout (row groups of 8) is made from rows of its file type by mf_repack, and checked against
     * that type's reference dequantizer */
    const mf_type_info *ti = mf_type_get(type);
    const bool x8 = ti->row_group > 1;
    const uint32_t base = x8 ? mf_repack_base(type) : type;
    const int64_t K = 256, N = x8 ? ti->row_group : 4, M = 2;
    size_t rs = mf_row_size(base, K);
    uint8_t *w = malloc(rs * N), *wk = x8 ? malloc(rs * N) : w;
    make_rows(base, K, N, w);
    if (x8 && mf_repack_as(type, base, w, wk, K, N)) return failf("mf_repack refused %s", mf_type_name(type));
    /* integer activations with a block maximum of 127: exact in f16/bf16/q8_0/q8_1 */
    float X[256 * 2];
    for (int i = 0; i < K * M; i++) X[i] = (i % 32) == 0 ? 127.0f : (float)((int)(urand() % 255) - 127);
    mf_graph *g = mf_graph_new();
    int64_t nw[2] = {K, N}, nx[2] = {K, M};
    int32_t wi = mf_g_weight(g, "w", type, 2, nw, wk), xi = mf_g_input(g, "x", MF_TYPE_F32, 2, nx);
    int32_t o = mf_g_matmul(g, wi, xi);
    bool ok = place(g, o);
    if (ok) set(g, xi, X), ok = run(g);
    float *row = malloc(K * sizeof(float));
    bool kquant = ti->blck_size == 256;
    const float *out = ok ? got(g, o) : NULL;
    for (int n = 0; ok && n < N; n++) {
        if (mf_dequantize_row(base, w + rs * n, row, K)) {
            ok = failf("no reference dequantizer for %s", mf_type_name(type));
            break;
        }
        for (int m = 0; ok && m < M; m++) {
            double dot = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) dot += (double)row[k] * X[m * K + k], mag += fabs((double)row[k] * X[m * K + k]);
            double v = out[m * N + n];
            double tol = (kquant ? 1e-2 : 1e-5) * mag + 1e-6;
            if (!(fabs(v - dot) <= tol)) ok = failf("out[%d][%d] = %.9g, reference %.9g (tol %.3g)", m, n, v, dot, tol);
        }
    }
    free(row), free(w);
    if (x8) free(wk);
    mf_graph_free(g);
    return ok;
}

static bool case_kv_store(uint32_t type) {
    const int64_t E = 256, C = 5, T = 2;
    size_t rs = mf_row_size(type, E);
    uint8_t *cache = malloc(rs * C), *before = malloc(rs * C), *want = malloc(rs);
    for (size_t i = 0; i < rs * C; i++) cache[i] = (uint8_t)(i * 13 + 1);
    memcpy(before, cache, rs * C);
    float rows[256 * 2];
    fill(rows, E * T, 2.0f);
    int32_t cells[2] = {3, 1};
    mf_graph *g = mf_graph_new();
    int64_t nc[2] = {E, C}, nr[2] = {E, T};
    int32_t ci = mf_g_external(g, "cache", type, 2, nc, cache);
    int32_t ri = mf_g_input(g, "rows", MF_TYPE_F32, 2, nr), ki = mf_g_input(g, "cells", MF_TYPE_I32, 1, &T);
    int32_t st = mf_g_kv_store(g, ci, ri, ki);
    bool ok = place(g, st);
    if (ok) set(g, ri, rows), set(g, ki, cells), ok = run(g);
    for (int64_t c = 0; ok && c < C; c++) {
        int t = c == 3 ? 0 : c == 1 ? 1 : -1;
        if (t < 0) {
            if (memcmp(cache + rs * c, before + rs * c, rs)) ok = failf("cell %lld was written but not named", (long long)c);
            continue;
        }
        /* the format's reference quantizer defines the bytes */
        if (mf_quantize_row(type, rows + E * t, want, E)) ok = failf("no reference quantizer for %s", mf_type_name(type));
        else if (memcmp(cache + rs * c, want, rs)) ok = failf("cell %lld holds other bytes than quantize(%s, row %d)", (long long)c, mf_type_name(type), t);
    }
    free(cache), free(before), free(want);
    mf_graph_free(g);
    return ok;
}

static bool case_attention(uint32_t type, uint32_t kv_type) {
    (void)type;
    enum { HD = 32, NH = 4, NKV = 2, C = 6, NT = 2, NW = 4 };
    float kf[HD * NKV * C], vf[HD * NKV * C], q[HD * NH * NT];
    fill(kf, HD * NKV * C, 1.0f), fill(vf, HD * NKV * C, 1.0f), fill(q, HD * NH * NT, 1.0f);
    size_t rs = mf_row_size(kv_type, HD * NKV);
    uint8_t *k = malloc(rs * C), *v = malloc(rs * C);
    for (int c = 0; c < C; c++) {
        mf_quantize_row(kv_type, kf + c * HD * NKV, k + rs * c, HD * NKV);
        mf_quantize_row(kv_type, vf + c * HD * NKV, v + rs * c, HD * NKV);
        /* the reference reads what the cache holds */
        mf_dequantize_row(kv_type, k + rs * c, kf + c * HD * NKV, HD * NKV);
        mf_dequantize_row(kv_type, v + rs * c, vf + c * HD * NKV, HD * NKV);
    }
    int32_t win[(NW + 1) * NT] = {3, 0, 2, 5, -1, /* t1 */ 4, 1, 3, 4, 5};
    mf_graph *g = mf_graph_new();
    int64_t nq[3] = {HD, NH, NT}, nk[2] = {HD * NKV, C}, nw[2] = {2, NT + 1};
    int32_t qi = mf_g_input(g, "q", MF_TYPE_F32, 3, nq);
    int32_t ki = mf_g_external(g, "k", kv_type, 2, nk, k), vi = mf_g_external(g, "v", kv_type, 2, nk, v);
    int32_t *spans = mf_test_spans(win, NW + 1, NT);
    int32_t wi = mf_g_external(g, "spans", MF_TYPE_I32, 2, nw, spans);
    mf_graph_node(g, wi)->bound_bytes = sizeof(int32_t) * (size_t)spans[0]; /* the cell lists too, as decode.c */
    const float scale = 1.0f / sqrtf((float)HD);
    int32_t o = mf_g_attention(g, qi, ki, vi, wi, NKV, scale);
    bool ok = place(g, o);
    if (ok) set(g, qi, q), ok = run(g);
    if (ok) {
        double want[HD * NH * NT];
        for (int t = 0; t < NT; t++)
            for (int h = 0; h < NH; h++) {
                int kvh = h / (NH / NKV), cnt = win[t * (NW + 1)];
                const int32_t *cells = win + t * (NW + 1) + 1;
                double sc[NW], mx = -INFINITY, sum = 0;
                for (int j = 0; j < cnt; j++) {
                    double d = 0;
                    for (int e = 0; e < HD; e++) d += (double)q[(t * NH + h) * HD + e] * kf[cells[j] * HD * NKV + kvh * HD + e];
                    sc[j] = d * scale, mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < cnt; j++) sc[j] = exp(sc[j] - mx), sum += sc[j];
                for (int e = 0; e < HD; e++) {
                    double acc = 0;
                    for (int j = 0; j < cnt; j++) acc += sc[j] / sum * vf[cells[j] * HD * NKV + kvh * HD + e];
                    want[t * HD * NH + h * HD + e] = acc;
                }
            }
        /* a backend may round q to the cache's type for the dot (llama.cpp does for f16), and with an f16 V
         * the probabilities to f16 before p.V (llama.cpp's mul_mat(v, kq) does: up to 2^-11 of each term,
         * about 5e-4 absolute on values of size 1): the tolerance is that rounding's, per KV format */
        double rel = kv_type == MF_TYPE_F32 ? 1e-4 : kv_type == MF_TYPE_F16 ? 2e-3 : kv_type == MF_TYPE_BF16 ? 1.5e-2 : 3e-2;
        double abs_tol = kv_type == MF_TYPE_F16 ? 6e-4 : rel / 10;
        ok = close_to(got(g, o), want, HD * NH * NT, rel, abs_tol, "attention");
    }
    free(k), free(v), free(spans);
    mf_graph_free(g);
    return ok;
}

/* VIEW / RESHAPE / PERMUTE: no computation; the alias must address exactly the parent's bytes. The
 * parent is an input, so the alias lives where the input does. */
static bool case_alias(mf_op op, uint32_t type) {
    const int64_t K = 256;
    size_t rs = mf_row_size(type, K), esz = mf_type_get(type)->type_size;
    int64_t ne[3] = {K, 2, 3};
    uint8_t *P = malloc(rs * 6);
    make_rows(type, K, 6, P);
    mf_graph *g = mf_graph_new();
    int32_t p = mf_g_input(g, "p", type, 3, ne), o;
    if (op == MF_OP_VIEW) {
        int64_t nv[2] = {K, 2};
        size_t nb[2] = {esz, rs};
        o = mf_g_view(g, p, 2, nv, nb, rs); /* rows 1..2 */
    } else if (op == MF_OP_RESHAPE) {
        int64_t nr[2] = {K, 6};
        o = mf_g_reshape(g, p, 2, nr);
    } else {
        o = mf_g_permute(g, p, 0, 2, 1, 3);
    }
    bool ok = place(g, o);
    if (ok) set(g, p, P), ok = run(g);
    if (ok) {
        const mf_node *n = mf_graph_node_c(g, o);
        for (int64_t i2 = 0; ok && i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; ok && i1 < n->ne[1]; i1++) {
                size_t src_row = op == MF_OP_VIEW ? (size_t)(1 + i1) : op == MF_OP_RESHAPE ? (size_t)i1 : (size_t)(i2 + 2 * i1);
                const uint8_t *got_ = (const uint8_t *)got(g, o) + i1 * n->nb[1] + i2 * n->nb[2];
                if (memcmp(got_, P + rs * src_row, rs))
                    ok = failf("%s row (%lld, %lld) does not address parent row %zu", mf_op_name(op), (long long)i1,
                               (long long)i2, src_row);
            }
    }
    free(P);
    mf_graph_free(g);
    return ok;
}

/* The seed's "View offset" cell: a window at offset 2 of an 8-element parent reads [3, 4, 5, 6]. */
static bool case_view_offset(void) {
    mf_graph *g = mf_graph_new();
    int64_t n8 = 8, n4 = 4;
    size_t nb4 = 4;
    int32_t p = mf_g_input(g, "p", MF_TYPE_F32, 1, &n8), v = mf_g_view(g, p, 1, &n4, &nb4, 2 * sizeof(float));
    float P[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    bool ok = place(g, v);
    if (ok) set(g, p, P), ok = run(g);
    const float want[4] = {3, 4, 5, 6};
    if (ok && memcmp(got(g, v), want, sizeof want)) ok = failf("view offset 2 of 1..8 is not [3,4,5,6]");
    mf_graph_free(g);
    return ok;
}

static bool case_cont(uint32_t type) {
    size_t esz = mf_type_get(type)->type_size;
    enum { A = 4, B = 3 };
    uint8_t P[A * B * 8];
    for (size_t i = 0; i < sizeof P; i++) P[i] = (uint8_t)urand();
    if (type == MF_TYPE_F32 || type == MF_TYPE_F64) /* keep float payloads finite (bytes are compared anyway) */
        for (int i = 0; i < A * B; i++) {
            if (type == MF_TYPE_F32) {
                float f = frand();
                memcpy(P + 4 * i, &f, 4);
            } else {
                double d = frand();
                memcpy(P + 8 * i, &d, 8);
            }
        }
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {A, B};
    int32_t p = mf_g_input(g, "p", type, 2, ne);
    int32_t o = mf_g_cont(g, mf_g_permute(g, p, 1, 0, 2, 3)); /* [B, A] contiguous = transpose */
    bool ok = place(g, o);
    if (ok) set(g, p, P), ok = run(g);
    const uint8_t *y = ok ? got(g, o) : NULL;
    for (int i0 = 0; ok && i0 < B; i0++)
        for (int i1 = 0; ok && i1 < A; i1++)
            if (memcmp(y + (i0 + i1 * B) * esz, P + (i1 + i0 * A) * esz, esz))
                ok = failf("cont(transpose)[%d][%d] differs", i1, i0);
    mf_graph_free(g);
    return ok;
}

/* ---- the decision per op: a case, or an excuse.  No default on purpose. ---- */
typedef bool (*case_fn)(mf_op op, uint32_t type);
/* the k largest of each row, largest first, ties to the lower index (a tie is planted in row 1) */
static bool case_topk(uint32_t type) {
    const int64_t n = 16, R = 5;
    const int k = 4;
    float X[16 * 5];
    fill(X, n * R, 1.0f);
    X[16 + 3] = X[16 + 9] = 2.0f; /* equal maxima: 3 before 9 */
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {n, R};
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 2, ne), o = mf_g_topk(g, x, k);
    bool ok = place(g, o);
    if (ok) set(g, x, X), ok = run(g);
    const int32_t *ids = ok ? got(g, o) : NULL;
    for (int64_t r = 0; ok && r < R; r++) {
        bool taken[16] = {0};
        for (int j = 0; ok && j < k; j++) {
            int best = -1;
            for (int i = 0; i < n; i++)
                if (!taken[i] && (best < 0 || X[r * n + i] > X[r * n + best])) best = i;
            taken[best] = true;
            if (ids[r * k + j] != best) ok = failf("row %lld slot %d: %d, reference %d", (long long)r, j, ids[r * k + j], best);
        }
    }
    (void)type;
    mf_graph_free(g);
    return ok;
}

/* out[:, j, t] = expert ids[j, t]'s matrix times x[:, j % R, t], for a shared row (R 1) and a row per slot */
static bool case_matmul_id(uint32_t type) {
    /* an x8/x16 layout: the experts' rows made in its file type and repacked as one N * E row stack (N a whole
     * group), checked against the file type's reference dequantizer, as case_matmul does */
    const mf_type_info *ti = mf_type_get(type);
    const uint32_t base = ti->row_group > 1 ? mf_repack_base(type) : type;
    const int64_t K = 256, N = ti->row_group > 1 ? ti->row_group : 4, E = 3, T = 3, k = 2;
    const size_t rs = mf_row_size(base, K);
    uint8_t *w = malloc(rs * N * E), *wk = malloc(rs * N * E);
    make_rows(base, K, N * E, w);
    if (base == type) memcpy(wk, w, rs * N * E);
    else if (mf_repack_as(type, base, w, wk, K, N * E)) return failf("mf_repack refused %s", mf_type_name(type));
    const int32_t ids[6] = {2, 0, 1, 2, 0, 1};
    float X[256 * 2 * 3], *row = malloc(K * sizeof(float));
    for (int i = 0; i < K * k * T; i++) X[i] = (i % 32) == 0 ? 127.0f : (float)((int)(urand() % 255) - 127);
    const bool kquant = ti->blck_size == 256;
    bool ok = true;
    for (int64_t R = 1; ok && R <= k; R += k - 1) {
        mf_graph *g = mf_graph_new();
        int64_t nw[3] = {K, N, E}, nx[3] = {K, R, T}, ni[2] = {k, T};
        int32_t wi = mf_g_weight(g, "w", type, 3, nw, wk), xi = mf_g_input(g, "x", MF_TYPE_F32, 3, nx),
                ii = mf_g_input(g, "ids", MF_TYPE_I32, 2, ni);
        int32_t o = mf_g_matmul_id(g, wi, xi, ii);
        ok = place(g, o);
        if (ok) set(g, xi, X), set(g, ii, ids), ok = run(g);
        const float *out = ok ? got(g, o) : NULL;
        for (int64_t t = 0; ok && t < T; t++)
            for (int64_t j = 0; ok && j < k; j++)
                for (int64_t n = 0; ok && n < N; n++) {
                    if (mf_dequantize_row(base, w + rs * (size_t)(ids[t * k + j] * N + n), row, K)) {
                        ok = failf("no reference dequantizer for %s", mf_type_name(type));
                        break;
                    }
                    const float *x = X + (t * R + j % R) * K;
                    double dot = 0, mag = 0;
                    for (int64_t i = 0; i < K; i++) dot += (double)row[i] * x[i], mag += fabs((double)row[i] * x[i]);
                    const double v = out[(t * k + j) * N + n], tol = (kquant ? 1e-2 : 1e-5) * mag + 1e-6;
                    if (!(fabs(v - dot) <= tol))
                        ok = failf("R %lld out[%lld][%lld][%lld] = %.9g, reference %.9g (tol %.3g)", (long long)R,
                                   (long long)t, (long long)j, (long long)n, v, dot, tol);
                }
        mf_graph_free(g);
    }
    free(row), free(w), free(wk);
    return ok;
}

/* out[:, t] = sum_j y[:, j, t] * p[ids[j, t], t] / (the chosen p's sum) */
static bool case_moe_sum(uint32_t type) {
    const int64_t N = 8, k = 3, E = 5, T = 2;
    float Y[8 * 3 * 2], P[5 * 2];
    fill(Y, N * k * T, 1.0f);
    for (int i = 0; i < E * T; i++) P[i] = 0.05f + 0.2f * (frand() + 1.0f);
    const int32_t ids[6] = {4, 0, 2, 1, 3, 0};
    bool ok = true;
    for (int norm = 0; ok && norm < 2; norm++) {
        mf_graph *g = mf_graph_new();
        int64_t ny[3] = {N, k, T}, np[2] = {E, T}, ni[2] = {k, T};
        int32_t y = mf_g_input(g, "y", MF_TYPE_F32, 3, ny), p = mf_g_input(g, "p", MF_TYPE_F32, 2, np),
                ii = mf_g_input(g, "ids", MF_TYPE_I32, 2, ni);
        int32_t o = mf_g_moe_sum(g, y, p, ii, norm);
        ok = place(g, o);
        if (ok) set(g, y, Y), set(g, p, P), set(g, ii, ids), ok = run(g);
        double want[8 * 2];
        for (int64_t t = 0; t < T; t++) {
            double s = 0;
            for (int64_t j = 0; j < k; j++) s += P[t * E + ids[t * k + j]];
            for (int64_t n = 0; n < N; n++) {
                double v = 0;
                for (int64_t j = 0; j < k; j++) v += (double)Y[(t * k + j) * N + n] * P[t * E + ids[t * k + j]];
                want[t * N + n] = norm ? v / s : v;
            }
        }
        if (ok) ok = close_to(got(g, o), want, N * T, 1e-6, 1e-7, norm ? "moe_sum (normalized)" : "moe_sum");
        mf_graph_free(g);
    }
    (void)type;
    return ok;
}

static bool c_binary(mf_op op, uint32_t t) { return case_binary(op, t); }
static bool c_unary(mf_op op, uint32_t t) { return case_unary(op, t); }
static bool c_rope(mf_op op, uint32_t t) { return (void)op, case_rope(t); }
static bool c_hadamard(mf_op op, uint32_t t) { return (void)op, case_hadamard(t); }
static bool c_get_rows(mf_op op, uint32_t t) { return (void)op, case_get_rows(t); }
static bool c_matmul(mf_op op, uint32_t t) { return (void)op, case_matmul(t); }
static bool c_kv_store(mf_op op, uint32_t t) { return (void)op, case_kv_store(t); }
static bool c_attention(mf_op op, uint32_t t) {
    (void)op;
    /* over every KV format the backend stores (the cache type is the attention's second dtype) */
    static const uint32_t kv[] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_Q8_0};
    const mf_backend_entry *e = mf_backend_entry_get(g_b);
    for (size_t i = 0; i < MF_ARRAY_LEN(kv); i++) {
        if (!e->supports(MF_OP_KV_STORE, kv[i])) continue;
        if (!case_attention(t, kv[i])) {
            char tmp[sizeof g_why];
            memcpy(tmp, g_why, sizeof tmp);
            snprintf(g_why, sizeof g_why, "%s cache: %.900s", mf_type_name(kv[i]), tmp);
            return false;
        }
    }
    return true;
}
static bool c_alias(mf_op op, uint32_t t) {
    if (op == MF_OP_VIEW && t == MF_TYPE_F32 && !case_view_offset()) return false;
    return case_alias(op, t);
}
static bool c_cont(mf_op op, uint32_t t) { return (void)op, case_cont(t); }
static bool c_topk(mf_op op, uint32_t t) { return (void)op, case_topk(t); }
static bool c_matmul_id(mf_op op, uint32_t t) { return (void)op, case_matmul_id(t); }
static bool c_moe_sum(mf_op op, uint32_t t) { return (void)op, case_moe_sum(t); }

static case_fn decision(mf_op op, const char **excuse) {
    *excuse = NULL;
    switch (op) {
    case MF_OP_INPUT:
    case MF_OP_WEIGHT:
    case MF_OP_EXTERNAL: *excuse = "a leaf: it holds the caller's bytes and computes nothing"; return NULL;
    case MF_OP_GET_ROWS: return c_get_rows;
    case MF_OP_RMS_NORM: return c_unary;
    case MF_OP_MATMUL: return c_matmul;
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_DIV: return c_binary;
    case MF_OP_SCALE:
    case MF_OP_SILU:
    case MF_OP_SWIGLU:
    case MF_OP_SOFTMAX: return c_unary;
    case MF_OP_ROPE: return c_rope;
    case MF_OP_HADAMARD: return c_hadamard;
    case MF_OP_KV_STORE: return c_kv_store;
    case MF_OP_ATTENTION: return c_attention;
    case MF_OP_VIEW:
    case MF_OP_RESHAPE:
    case MF_OP_PERMUTE: return c_alias;
    case MF_OP_CONT: return c_cont;
    case MF_OP_TOPK: return c_topk;
    case MF_OP_MATMUL_ID: return c_matmul_id;
    case MF_OP_MOE_SUM: return c_moe_sum;
    case MF_OP_COUNT: *excuse = "not an op (the count)"; return NULL;
    }
    return NULL;
}
/* The dtype universe: every id mf_type_get knows, in id order. */
static int type_universe(uint32_t *out) {
    int n = 0;
    for (uint32_t t = 0; t < MF_TYPE_COUNT; t++)
        if (mf_type_get(t)) out[n++] = t;
    return n;
}

static void run_matrix(mf_backend b) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (!e) SKIP("%s: %s", mf_backend_name(b), mf_backend_not_compiled_reason(b));
    const char *why = e->unavailable ? e->unavailable() : NULL;
    if (why) SKIP("%s: %s", mf_backend_name(b), why);
    mf_error err = {0};
    mf_backend_opts opts = {.n_threads = 2};
    REQUIRE_OK(mf_sched_new(&opts, &g_sched, &err), "%s", err.msg);
    g_b = b;
    uint32_t types[MF_TYPE_COUNT];
    int nt = type_universe(types);
    int cells = 0;
    for (int op = 0; op < MF_OP_COUNT; op++) {
        const char *excuse;
        case_fn fn = decision((mf_op)op, &excuse);
        for (int i = 0; i < nt; i++) {
            if (!e->supports((mf_op)op, types[i])) continue;
            if (!fn) continue; /* excused (leaves) */
            rng = 0x1234567ull + (uint64_t)op * 977 + types[i];
            g_why[0] = '\0';
            bool ok = fn((mf_op)op, types[i]);
            CHECK(ok, "%s: %s %s: %s", e->name, mf_op_name((mf_op)op), mf_type_name(types[i]), g_why);
            cells++;
        }
    }
    printf("  %s: %d op x dtype cells against their references\n", e->name, cells);
    free(g_got);
    g_got = NULL;
    mf_sched_free(g_sched);
    g_sched = NULL;
}

/* ---- the CUDA column against the CPU backend ----
 *
 * matrix_cuda above holds the CUDA backend to the analytic references at the small shapes every backend
 * gets.  matrix_cuda_vs_cpu runs each (op, dtype) CUDA claims once more at the shapes of the real models
 * (K 896 / 1024, 264 output rows, batches of 1 to 300 rows: a decode kernel and the prefill kernels), once
 * on the CPU backend and once on CUDA, and compares within a per-op tolerance (vs_tol below).  For MATMUL
 * it also checks batch invariance: each row of a smaller batch is BITWISE that row of the 300-row batch
 * (the engine's promise, docs/BACKENDS.md).  Skipped, with the reason, where no CUDA device is usable. */

static mf_backend g_vs_b; /* the backend held to the CPU's results (cuda; the test backend proves the machinery) */

typedef struct {
    int n;
    int32_t id[4];
    const void *src[4];
    int32_t out;
} vs_io;
typedef void (*vs_builder)(mf_graph *g, const void *ctx, vs_io *io);

/* The builder's graph on backend b (with the CPU allowed beside it; the output must land on b): the
 * output's bytes, malloc'd, in *out. */
static bool vs_run(mf_backend b, vs_builder fn, const void *ctx, void **out, size_t *nbytes) {
    const mf_backend keep = g_b;
    g_b = b;
    mf_graph *g = mf_graph_new();
    vs_io io;
    memset(&io, 0, sizeof io);
    fn(g, ctx, &io);
    bool ok = place(g, io.out);
    for (int i = 0; ok && i < io.n; i++) {
        g_why[0] = '\0';
        set(g, io.id[i], io.src[i]);
        if (g_why[0]) ok = false;
    }
    ok = ok && run(g);
    *out = NULL;
    if (ok) {
        *nbytes = mf_node_nbytes(mf_graph_node_c(g, io.out));
        const void *y = got(g, io.out);
        *out = y ? malloc(*nbytes ? *nbytes : 1) : NULL;
        if (*out) memcpy(*out, y, *nbytes);
        else ok = failf("read of the output failed");
    }
    mf_graph_free(g);
    g_b = keep;
    return ok;
}

/* Both runs; *c = the backend's output, *r = the CPU's (free both). */
static bool vs_pair(vs_builder fn, const void *ctx, float **c, float **r, size_t *nbytes) {
    size_t n2 = 0;
    void *a = NULL, *b = NULL;
    bool ok = vs_run(MF_BACKEND_CPU, fn, ctx, &b, &n2);
    if (!ok) {
        char tmp[sizeof g_why];
        memcpy(tmp, g_why, sizeof tmp);
        snprintf(g_why, sizeof g_why, "the CPU reference run: %.900s", tmp);
    }
    ok = ok && vs_run(g_vs_b, fn, ctx, &a, nbytes);
    if (ok && n2 != *nbytes) ok = failf("output sizes differ: %s %zu bytes, cpu %zu", mf_backend_name(g_vs_b), *nbytes, n2);
    *c = a, *r = b;
    return ok;
}

/* |cuda - cpu| <= abs + rel * scale_i, where scale_i is |cpu_i| or, when mag is given, mag_i (the sum of
 * |terms| of a dot product: the size a reordering or an activation rounding can move it by). */
static double g_vs_worst, g_vs_share; /* the cell's largest |cuda - cpu| and its largest share of the tolerance */
static bool vs_close(const float *c, const float *r, const double *mag, int64_t n, double rel, double abs_tol,
                     const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)c[i] - (double)r[i]), tol = abs_tol + rel * (mag ? mag[i] : fabs((double)r[i]));
        if (!(d <= tol)) /* NaN fails too */
            return failf("%s[%lld]: %s %.9g, cpu %.9g (|d| %.3g > tol %.3g)", what, (long long)i, mf_backend_name(g_vs_b), c[i],
                         r[i], d, tol);
        g_vs_worst = fmax(g_vs_worst, d), g_vs_share = fmax(g_vs_share, d / tol);
    }
    return true;
}

static bool g_vs_exact; /* the cell was held to bitwise equality somewhere */
static bool vs_bitwise(const void *c, const void *r, size_t nbytes, const char *what) {
    const uint8_t *a = c, *b = r;
    g_vs_exact = true;
    for (size_t i = 0; i < nbytes; i++)
        if (a[i] != b[i])
            return failf("%s: byte %zu differs (%s 0x%02x, cpu 0x%02x; bitwise expected)", what, i, mf_backend_name(g_vs_b), a[i], b[i]);
    return true;
}

/* MATMUL: W [K, N] of `type`, X [K, M] */
typedef struct {
    uint32_t type;
    int64_t K, N, M;
    const void *w;
    const float *x;
} vs_mm;
static void vs_build_matmul(mf_graph *g, const void *ctx, vs_io *io) {
    const vs_mm *c = ctx;
    int64_t nw[2] = {c->K, c->N}, nx[2] = {c->K, c->M};
    int32_t w = mf_g_weight(g, "w", c->type, 2, nw, c->w), x = mf_g_input(g, "x", MF_TYPE_F32, 2, nx);
    io->n = 1, io->id[0] = x, io->src[0] = c->x;
    io->out = mf_g_matmul(g, w, x);
}
static bool vs_matmul(uint32_t type) {
    const mf_type_info *ti = mf_type_get(type);
    if (ti->row_group > 1) return true; /* the CPU's repacked layouts: never a CUDA weight */
    const int64_t K = ti->blck_size == 256 ? 1024 : 896, N = 264, MM = 300;
    static const int64_t Ms[] = {1, 7, 64, MM}; /* decode, small batch, prefill tiles, a ragged big batch */
    size_t rs = mf_row_size(type, K);
    uint8_t *w = malloc(rs * N);
    float *x = malloc(sizeof(float) * (size_t)(K * MM)), *wf = malloc(sizeof(float) * (size_t)(K * N));
    double *mag = malloc(sizeof(double) * (size_t)(N * MM));
    make_rows(type, K, N, w);
    fill(x, K * MM, 2.0f);
    bool ok = true;
    for (int64_t n = 0; ok && n < N; n++)
        if (mf_dequantize_row(type, w + rs * n, wf + K * n, K)) ok = failf("no reference dequantizer for %s", mf_type_name(type));
    for (int64_t m = 0; ok && m < MM; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += fabs((double)wf[K * n + k] * x[K * m + k]);
            mag[m * N + n] = s;
        }
    /* activations rounded to the weight type's companion format (f16, bf16, 8-bit blocks) and another
     * summation order: what each may move a dot product by, relative to the sum of its |terms| */
    const double rel = type == MF_TYPE_F32 ? 1e-5 : type == MF_TYPE_F16 ? 2e-3 : type == MF_TYPE_BF16 ? 1e-2
                       : ti->blck_size == 256 ? 1e-2 : 2e-3;
    float *big = NULL;
    for (int i = (int)MF_ARRAY_LEN(Ms) - 1; ok && i >= 0; i--) { /* the big batch first: the others' yardstick */
        vs_mm c = {type, K, N, Ms[i], w, x};
        float *cu = NULL, *cpu = NULL;
        size_t nb = 0;
        char what[64];
        snprintf(what, sizeof what, "matmul M=%lld", (long long)Ms[i]);
        ok = vs_pair(vs_build_matmul, &c, &cu, &cpu, &nb);
        if (ok) ok = vs_close(cu, cpu, mag, N * Ms[i], rel, 1e-6, what);
        if (ok && big) /* batch invariance: row m of this batch is row m of the big one, bit for bit */
            for (int64_t j = 0; ok && j < N * Ms[i]; j++)
                if (memcmp(&cu[j], &big[j], sizeof(float)))
                    ok = failf("batch invariance: out[row %lld][%lld] = %.9g with M=%lld, %.9g with M=%lld (must be bitwise equal)",
                               (long long)(j / N), (long long)(j % N), cu[j], (long long)Ms[i], big[j], (long long)MM);
        if (!big) big = cu, cu = NULL;
        free(cu), free(cpu);
    }
    free(big), free(w), free(x), free(wf), free(mag);
    return ok;
}

/* GET_ROWS: a [K, 300] table of `type`, 5 ids (first, last, repeats) */
typedef struct {
    uint32_t type;
    int64_t K, R;
    const void *t;
    const int32_t *ids;
} vs_gr;
static void vs_build_get_rows(mf_graph *g, const void *ctx, vs_io *io) {
    const vs_gr *c = ctx;
    int64_t nt[2] = {c->K, c->R}, ni = 5;
    int32_t t = mf_g_weight(g, "table", c->type, 2, nt, c->t), ids = mf_g_input(g, "ids", MF_TYPE_I32, 1, &ni);
    io->n = 1, io->id[0] = ids, io->src[0] = c->ids;
    io->out = mf_g_get_rows(g, t, ids);
}
static bool vs_get_rows(uint32_t type) {
    const mf_type_info *ti = mf_type_get(type);
    if (ti->row_group > 1) return true;
    const int64_t K = ti->blck_size == 256 ? 1024 : 896, R = 300;
    uint8_t *t = malloc(mf_row_size(type, K) * R);
    make_rows(type, K, R, t);
    static const int32_t ids[5] = {0, 299, 17, 17, 151};
    vs_gr c = {type, K, R, t, ids};
    float *cu = NULL, *cpu = NULL;
    size_t nb = 0;
    bool ok = vs_pair(vs_build_get_rows, &c, &cu, &cpu, &nb);
    /* a dequantized value is one or two float operations (d * q - m): an fma may round once less */
    if (ok) ok = vs_close(cu, cpu, NULL, 5 * K, 1e-6, 1e-7, "get_rows");
    free(cu), free(cpu), free(t);
    return ok;
}

/* The f32 element-wise ops and RMS norm / softmax / hadamard on [896, 5] (softmax also on a 4099 row) */
typedef struct {
    mf_op op;
    int64_t ne0, ne1;
    const float *a, *b;
} vs_el;
static void vs_build_elem(mf_graph *g, const void *ctx, vs_io *io) {
    const vs_el *c = ctx;
    int64_t ne[2] = {c->ne0, c->ne1}, nb1[2] = {c->ne0, 1};
    int32_t a = mf_g_input(g, "a", MF_TYPE_F32, 2, ne), b = -1;
    io->n = 1, io->id[0] = a, io->src[0] = c->a;
    switch (c->op) {
    case MF_OP_ADD: case MF_OP_MUL: /* a broadcast row, as the norms' weights are */
        b = mf_g_input(g, "b", MF_TYPE_F32, 2, nb1);
        io->out = c->op == MF_OP_ADD ? mf_g_add(g, a, b) : mf_g_mul(g, a, b);
        break;
    case MF_OP_SWIGLU: b = mf_g_input(g, "b", MF_TYPE_F32, 2, ne), io->out = mf_g_swiglu(g, a, b); break;
    case MF_OP_SCALE: io->out = mf_g_scale(g, a, 0.125f); break;
    case MF_OP_SILU: io->out = mf_g_silu(g, a); break;
    case MF_OP_SOFTMAX: io->out = mf_g_softmax(g, a); break;
    case MF_OP_HADAMARD: io->out = mf_g_hadamard(g, a, 128); break;
    default: io->out = mf_g_rms_norm(g, a, 1e-6f); break;
    }
    if (b >= 0) io->n = 2, io->id[1] = b, io->src[1] = c->b;
}
static bool vs_elem(mf_op op, uint32_t type) {
    (void)type;
    bool ok = true;
    for (int v = 0; ok && v < (op == MF_OP_SOFTMAX ? 2 : 1); v++) {
        const int64_t ne0 = op == MF_OP_HADAMARD ? 1024 : v ? 4099 : 896, ne1 = v ? 2 : 5;
        float *a = malloc(sizeof(float) * (size_t)(ne0 * ne1)), *b = malloc(sizeof(float) * (size_t)(ne0 * ne1));
        fill(a, ne0 * ne1, op == MF_OP_SOFTMAX ? 12.0f : 4.0f), fill(b, ne0 * ne1, 3.0f);
        vs_el c = {op, ne0, ne1, a, b};
        float *cu = NULL, *cpu = NULL;
        size_t nb = 0;
        ok = vs_pair(vs_build_elem, &c, &cu, &cpu, &nb);
        if (ok) {
            if (op == MF_OP_ADD || op == MF_OP_MUL || op == MF_OP_SCALE) /* one IEEE operation: exact */
                ok = vs_bitwise(cu, cpu, nb, mf_op_name(op));
            else /* exp (silu, swiglu, softmax), a reduction and a square root (rms_norm), butterflies (hadamard) */
                ok = vs_close(cu, cpu, NULL, ne0 * ne1, op == MF_OP_SOFTMAX ? 2e-5 : 1e-5, op == MF_OP_SOFTMAX ? 1e-9 : 1e-6,
                              mf_op_name(op));
        }
        free(cu), free(cpu), free(a), free(b);
    }
    return ok;
}

/* ROPE over [HD, heads, 6 tokens] at positions up to 40959 (the qwen3-0.6b context), base 1e6; plain and
 * YaRN (factor 4 over 32768, Qwen's 128K setting: the ramp, the fused angle mix and the magnitude scale) */
typedef struct {
    int64_t hd, nh;
    const float *x;
    const int32_t *pos;
    bool yarn;
} vs_rp;
static void vs_build_rope(mf_graph *g, const void *ctx, vs_io *io) {
    const vs_rp *c = ctx;
    int64_t ne[3] = {c->hd, c->nh, 6}, np = 6;
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 3, ne), p = mf_g_input(g, "pos", MF_TYPE_I32, 1, &np);
    io->n = 2, io->id[0] = x, io->src[0] = c->x, io->id[1] = p, io->src[1] = c->pos;
    mf_rope r = mf_rope_plain((int)c->hd, MF_ROPE_NEOX, 1e6f);
    if (c->yarn) {
        r.freq_scale = 0.25f;
        r.ext_factor = 1.0f;
        mf_rope_corr_dims((int)c->hd, 32768, 1e6f, 32.0f, 1.0f, r.corr_dims);
    }
    io->out = mf_g_rope(g, x, p, &r);
}
static bool vs_rope(uint32_t type) {
    (void)type;
    static const int32_t pos[6] = {0, 1, 7, 1000, 32767, 40959};
    bool ok = true;
    for (int v = 0; ok && v < 4; v++) {
        const int hd = v % 2 ? 128 : 64;
        const bool yarn = v >= 2;
        const int64_t nh = hd == 64 ? 14 : 16;
        float *x = malloc(sizeof(float) * (size_t)(hd * nh * 6));
        fill(x, hd * nh * 6, 2.0f);
        vs_rp c = {hd, nh, x, pos, yarn};
        float *cu = NULL, *cpu = NULL;
        size_t nb = 0;
        ok = vs_pair(vs_build_rope, &c, &cu, &cpu, &nb);
        /* the angle is the CPU's (ggml's rope cache: theta multiplied along by freq_base^(-2/n_dims), exact
         * float products a GPU can repeat bit for bit); sin/cos may differ by an ulp or two */
        static const char *const what[4] = {"rope hd 64", "rope hd 128", "rope yarn hd 64", "rope yarn hd 128"};
        if (ok) ok = vs_close(cu, cpu, NULL, hd * nh * 6, 1.2e-5, 2e-6, what[v]); /* yarn's scale: x1.14 */
        free(cu), free(cpu), free(x);
    }
    return ok;
}

/* ATTENTION: a 300-cell cache of `kv` (the K and V rows made by the reference quantizer), queries of
 * [HD, NH, NT] over windows with gaps; NT = 1 (decode) and 9 (prefill); the NT = 1 query is the first
 * of the NT = 9 batch, whose output must be bitwise the same (batch invariance). */
typedef struct {
    uint32_t kv;
    int64_t hd, nh, nkv, nt;
    void *k, *v;
    int32_t *spans;
    const float *q;
} vs_at;
static void vs_build_attention(mf_graph *g, const void *ctx, vs_io *io) {
    const vs_at *c = ctx;
    int64_t nq[3] = {c->hd, c->nh, c->nt}, nk[2] = {c->hd * c->nkv, 300}, nw[2] = {2, c->nt + 1};
    int32_t q = mf_g_input(g, "q", MF_TYPE_F32, 3, nq);
    int32_t k = mf_g_external(g, "k", c->kv, 2, nk, c->k), v = mf_g_external(g, "v", c->kv, 2, nk, c->v);
    /* the spans buffer's declared shape is nominal (bound_bytes carries its length), as in the engine */
    int32_t w = mf_g_external(g, "spans", MF_TYPE_I32, 2, nw, c->spans);
    mf_graph_node(g, w)->bound_bytes = sizeof(int32_t) * (size_t)c->spans[0];
    io->n = 1, io->id[0] = q, io->src[0] = c->q;
    io->out = mf_g_attention(g, q, k, v, w, (int)c->nkv, 1.0f / sqrtf((float)c->hd));
}
static bool vs_attention_kv(uint32_t kv) {
    enum { C = 300, NTM = 9, WMAX = C + 1 };
    bool ok = true;
    for (int shape = 0; ok && shape < 2; shape++) {
        const int64_t hd = shape ? 128 : 64, nh = shape ? 16 : 14, nkv = shape ? 8 : 2;
        size_t rs = mf_row_size(kv, hd * nkv);
        float *kf = malloc(sizeof(float) * (size_t)(hd * nkv * C)), *q = malloc(sizeof(float) * (size_t)(hd * nh * NTM));
        uint8_t *k = malloc(rs * C), *v = malloc(rs * C);
        fill(kf, hd * nkv * C, 1.5f), fill(q, hd * nh * NTM, 1.5f);
        for (int c = 0; c < C; c++) mf_quantize_row(kv, kf + c * hd * nkv, k + rs * c, hd * nkv);
        fill(kf, hd * nkv * C, 1.0f);
        for (int c = 0; c < C; c++) mf_quantize_row(kv, kf + c * hd * nkv, v + rs * c, hd * nkv);
        /* token t sees the cells 0 .. 250 + 5t except every 7th (a hole a removed sequence leaves) */
        int32_t *win = malloc(sizeof(int32_t) * WMAX * NTM);
        for (int t = 0; t < NTM; t++) {
            int32_t *w = win + t * WMAX, cnt = 0;
            for (int c = 0; c <= 250 + 5 * t && c < C; c++)
                if (c % 7 != 3) w[1 + cnt++] = c;
            w[0] = cnt;
        }
        float *one = NULL;
        for (int nt = NTM; ok && nt >= 1; nt -= NTM - 1) {
            int32_t *spans = mf_test_spans(win, WMAX, nt);
            vs_at c = {kv, hd, nh, nkv, nt, k, v, spans, q};
            float *cu = NULL, *cpu = NULL;
            size_t nb = 0;
            char what[96];
            snprintf(what, sizeof what, "attention %s hd %lld nt %d", mf_type_name(kv), (long long)hd, nt);
            ok = vs_pair(vs_build_attention, &c, &cu, &cpu, &nb);
            /* q rounded to the cache's type for q.k and p rounded for p.V are allowed (case_attention), on
             * either side: twice case_attention's tolerance against the exact value */
            const double rel = 2 * (kv == MF_TYPE_F32 ? 1e-4 : kv == MF_TYPE_F16 ? 2e-3 : kv == MF_TYPE_BF16 ? 1.5e-2 : 3e-2);
            if (ok) ok = vs_close(cu, cpu, NULL, hd * nh * nt, rel, kv == MF_TYPE_F16 ? 1.2e-3 : rel / 10, what);
            if (ok && one) /* nt == 1 after nt == 9: query 0 alone is query 0 of the batch */
                ok = vs_bitwise(cu, one, sizeof(float) * (size_t)(hd * nh), "attention batch invariance (query 0 alone vs in a batch of 9)");
            if (!one) one = cu, cu = NULL;
            free(cu), free(cpu), free(spans);
        }
        free(one), free(kf), free(q), free(k), free(v), free(win);
    }
    return ok;
}
static bool vs_attention(uint32_t type) {
    (void)type;
    static const uint32_t kv[] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_Q8_0};
    const mf_backend_entry *e = mf_backend_entry_get(g_vs_b);
    for (size_t i = 0; i < MF_ARRAY_LEN(kv); i++)
        if (e->supports(MF_OP_KV_STORE, kv[i]) && !vs_attention_kv(kv[i])) return false;
    return true;
}

/* KV_STORE: 5 rows into a 40-cell cache of `kv` that lives on the backend (a layer placed there, as the
 * engine does), read back through its hooks; the untouched cells must keep their bytes */
static bool vs_kv_store_on(mf_backend b, uint32_t kv, const uint8_t *cache0, size_t bytes, const float *rows,
                           uint8_t *out) {
    enum { E = 1024, T = 5 };
    static const int32_t cells[T] = {3, 39, 0, 17, 22};
    mf_error err = {0};
    void *mem = NULL;
    if (mf_backend_alloc(b, bytes, &mem, &err) || mf_backend_write(b, mem, cache0, bytes, &err))
        return failf("%s cache: %s", mf_backend_name(b), err.msg);
    mf_graph *g = mf_graph_new();
    int64_t nc[2] = {E, 40}, nr[2] = {E, T}, nt = T;
    int32_t ci = mf_g_external(g, "cache", kv, 2, nc, mem);
    int32_t ri = mf_g_input(g, "rows", MF_TYPE_F32, 2, nr), ki = mf_g_input(g, "cells", MF_TYPE_I32, 1, &nt);
    int32_t st = mf_g_kv_store(g, ci, ri, ki);
    mf_g_layer(g, ci, 0), mf_g_layer(g, ri, 0), mf_g_layer(g, ki, 0), mf_g_layer(g, st, 0);
    const uint16_t layer[1] = {b.id};
    mf_placement p = {layer, 1, MF_BACKEND_CPU};
    mf_backend_filter f;
    memset(&f, 0, sizeof f);
    f.allowed[MF_BACKEND_ID_CPU] = f.allowed[b.id] = true;
    bool ok = !mf_graph_error(g, &err) && !mf_sched_assign_placed(g, &p, &f, &err) && !mf_sched_alloc(g_sched, g, &err);
    if (!ok) failf("%s: %s", mf_backend_name(b), err.msg);
    else if (mf_graph_node_c(g, st)->backend != b.id)
        ok = failf("kv_store landed on %s, not on %s", mf_backend_name((mf_backend){(uint16_t)mf_graph_node_c(g, st)->backend}),
                   mf_backend_name(b));
    if (ok) {
        g_why[0] = '\0';
        set(g, ri, rows), set(g, ki, cells);
        ok = !g_why[0] && run(g);
    }
    if (ok && mf_backend_read(b, mem, out, bytes, &err)) ok = failf("read back: %s", err.msg);
    mf_graph_free(g);
    mf_backend_free(b, mem);
    return ok;
}
static bool vs_kv_store(uint32_t kv) {
    enum { E = 1024, C = 40, T = 5 };
    const size_t rs = mf_row_size(kv, E), bytes = rs * C;
    uint8_t *cache0 = malloc(bytes), *a = malloc(bytes), *r = malloc(bytes);
    float *rows = malloc(sizeof(float) * E * C);
    fill(rows, E * C, 3.0f);
    for (int c = 0; c < C; c++) mf_quantize_row(kv, rows + E * c, cache0 + rs * c, E); /* valid rows everywhere */
    fill(rows, E * T, 3.0f);
    bool ok = vs_kv_store_on(MF_BACKEND_CPU, kv, cache0, bytes, rows, r);
    ok = ok && vs_kv_store_on(g_vs_b, kv, cache0, bytes, rows, a);
    if (ok && kv != MF_TYPE_Q8_0) {
        ok = vs_bitwise(a, r, bytes, "kv_store"); /* a conversion rounds once, to nearest even */
    } else if (ok) { /* the scale is amax / 127 either way; a quant may round a tie the other way: one step */
        float *fa = malloc(sizeof(float) * E), *fr = malloc(sizeof(float) * E);
        for (int c = 0; ok && c < C; c++) {
            mf_dequantize_row(kv, a + rs * c, fa, E), mf_dequantize_row(kv, r + rs * c, fr, E);
            for (int i = 0; ok && i < E; i += 32) {
                uint16_t ha, hr;
                memcpy(&ha, a + rs * c + (size_t)(i / 32) * 34, 2), memcpy(&hr, r + rs * c + (size_t)(i / 32) * 34, 2);
                if (ha != hr) ok = failf("kv_store q8_0: cell %d block %d scale 0x%04x, cpu 0x%04x", c, i / 32, ha, hr);
                const double step = fabs(mf_fp16_to_fp32(hr)) * 1.0001;
                for (int j = i; ok && j < i + 32; j++)
                    if (!(fabs((double)fa[j] - fr[j]) <= step))
                        ok = failf("kv_store q8_0: cell %d [%d] = %.9g, cpu %.9g (more than one step %.3g)", c, j, fa[j], fr[j], step);
            }
        }
        free(fa), free(fr);
    }
    free(cache0), free(a), free(r), free(rows);
    return ok;
}

static void run_vs(mf_backend b) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (!e) SKIP("%s: %s", mf_backend_name(b), mf_backend_not_compiled_reason(b));
    const char *why = e->unavailable ? e->unavailable() : NULL;
    if (why) SKIP("%s: %s", mf_backend_name(b), why);
    mf_error err = {0};
    mf_backend_opts opts = {.n_threads = 4};
    REQUIRE_OK(mf_sched_new(&opts, &g_sched, &err), "%s", err.msg);
    g_vs_b = b;
    uint32_t types[MF_TYPE_COUNT];
    int nt = type_universe(types), cells = 0, other = 0;
    for (int op = 0; op < MF_OP_COUNT; op++)
        for (int i = 0; i < nt; i++) {
            if (!e->supports((mf_op)op, types[i])) continue;
            rng = 0x5eed0ull + (uint64_t)op * 977 + types[i];
            g_why[0] = '\0';
            g_vs_worst = g_vs_share = 0;
            g_vs_exact = false;
            bool ok = true, ran = true;
            switch ((mf_op)op) {
            case MF_OP_MATMUL: ok = vs_matmul(types[i]); break;
            case MF_OP_GET_ROWS: ok = vs_get_rows(types[i]); break;
            case MF_OP_RMS_NORM: case MF_OP_ADD: case MF_OP_MUL: case MF_OP_SCALE: case MF_OP_SILU:
            case MF_OP_SWIGLU: case MF_OP_SOFTMAX: case MF_OP_HADAMARD:
                ok = types[i] != MF_TYPE_F32 || vs_elem((mf_op)op, types[i]);
                break;
            case MF_OP_ROPE: ok = vs_rope(types[i]); break;
            case MF_OP_ATTENTION: ok = vs_attention(types[i]); break;
            case MF_OP_KV_STORE: ok = vs_kv_store(types[i]); break;
            default: ran = false; break; /* leaves, aliases, cont: bytes moved, matrix_cuda checks them exactly */
            }
            CHECK(ok, "%s vs cpu: %s %s: %s", e->name, mf_op_name((mf_op)op), mf_type_name(types[i]), g_why);
            if (ok && ran)
                printf("  %s vs cpu: %-9s %-6s max|d| %.3g (%.0f%% of its tolerance)%s\n", e->name, mf_op_name((mf_op)op),
                       mf_type_name(types[i]), g_vs_worst, 100 * g_vs_share, g_vs_exact ? ", bitwise where required" : "");
            cells += ran, other += !ran;
        }
    printf("  %s vs cpu: %d op x dtype cells at model shapes (%d byte-moving cells left to the analytic column)\n", e->name,
           cells, other);
    CHECK(cells > 0, "%s is usable here but claims no op: nothing was compared", e->name);
    free(g_got);
    g_got = NULL;
    mf_sched_free(g_sched);
    g_sched = NULL;
}

static void matrix_cuda_vs_cpu(void) { run_vs(MF_BACKEND_CUDA); }
/* The same machinery on every build, against the test backend in layer mode (the CPU's kernels behind
 * non-host memory): staged inputs, a KV store into a placed cache, the spans' cell lists crossing
 * (bound_bytes), batch invariance - so the device column's harness is proven before a device runs it. */
static void matrix_test_backend_vs_cpu(void) {
    mf_test_backend_set_layer_ops(true);
    const long ran0 = mf_test_backend_nodes_run();
    run_vs((mf_backend){MF_BACKEND_TEST_ID});
    mf_test_backend_set_layer_ops(false);
    /* the comparison ran the backend under test, not the CPU twice: at least one node per run */
    CHECK(mf_test_backend_nodes_run() - ran0 >= 20, "the test backend ran %ld nodes", mf_test_backend_nodes_run() - ran0);
}

static void matrix_cpu(void) { run_matrix(MF_BACKEND_CPU); }
static void matrix_metal(void) { run_matrix(MF_BACKEND_METAL); }
static void matrix_cuda(void) { run_matrix(MF_BACKEND_CUDA); }
static void matrix_test_backend(void) { run_matrix((mf_backend){MF_BACKEND_TEST_ID}); }

static void every_op_has_a_matrix_decision(void) {
    for (int op = 0; op < MF_OP_COUNT; op++) {
        const char *excuse;
        case_fn fn = decision((mf_op)op, &excuse);
        CHECK(fn || excuse, "op %s has neither a case nor an excuse", mf_op_name((mf_op)op));
        CHECK(strcmp(mf_op_name((mf_op)op), "unknown"), "op %d has no name (mf_op_name)", op);
    }
}

/* ---- the published table ---- */

/* The support functions the doc's columns describe: cpu, metal (no code in this port: claims nothing),
 * cuda (its support function is compiled on every build). */
static bool metal_supports(mf_op op, uint32_t type) { return (void)op, (void)type, false; }
typedef bool (*support_fn)(mf_op, uint32_t);
static const support_fn k_cols[3] = {mf_cpu_supports, metal_supports, mf_cuda_supports};

static void cell_text(support_fn fn, mf_op op, char *buf, size_t cap) {
    uint32_t types[MF_TYPE_COUNT];
    int nt = type_universe(types);
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < nt; i++)
        if (fn(op, types[i])) len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", len ? " " : "", mf_type_name(types[i]));
    if (!len) snprintf(buf, cap, "-");
}

static void print_table(void) {
    printf("| op | cpu | metal | cuda |\n|---|---|---|---|\n");
    for (int op = 0; op < MF_OP_COUNT; op++) {
        printf("| %s |", mf_op_name((mf_op)op));
        for (int c = 0; c < 3; c++) {
            char cell[1024];
            cell_text(k_cols[c], (mf_op)op, cell, sizeof cell);
            printf(" %s |", cell);
        }
        printf("\n");
    }
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

static void support_table_matches_support_matrix_doc(void) {
    const char *dir = getenv("MF_SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/SUPPORT-MATRIX.md", dir ? dir : ".");
    FILE *f = fopen(path, "r");
    REQUIRE(f, "cannot open %s (run from the repository root, or set MF_SRC_DIR)", path);
    char line[4096];
    bool in_table = false, seen[MF_OP_COUNT] = {0};
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (!in_table) {
            if (!strncmp(line, "| op | cpu | metal | cuda |", 27)) in_table = true;
            continue;
        }
        if (line[0] != '|') break;
        if (!strncmp(line, "|---", 4)) continue;
        /* | name | cpu | metal | cuda | */
        char *cols[5];
        int nc = 0;
        char *p = line + 1;
        while (nc < 5 && p && *p) {
            char *bar = strchr(p, '|');
            if (!bar) break;
            *bar = '\0';
            cols[nc++] = trim(p);
            p = bar + 1;
        }
        if (nc != 4) {
            CHECK(nc == 4, "a table row with %d columns (want 4: op, cpu, metal, cuda)", nc);
            continue;
        }
        int op = -1;
        for (int o = 0; o < MF_OP_COUNT; o++)
            if (!strcmp(cols[0], mf_op_name((mf_op)o))) op = o;
        CHECK(op >= 0, "the doc names op '%s', which does not exist", cols[0]);
        if (op < 0) continue;
        CHECK(!seen[op], "op %s has two rows", cols[0]);
        seen[op] = true;
        rows++;
        for (int c = 0; c < 3; c++) {
            char want[1024];
            cell_text(k_cols[c], (mf_op)op, want, sizeof want);
            const char *col = c == 0 ? "cpu" : c == 1 ? "metal" : "cuda";
            CHECK(!strcmp(cols[1 + c], want), "%s x %s: the doc says '%s', the support function says '%s' (update %s)",
                  cols[0], col, cols[1 + c], want, path);
        }
    }
    fclose(f);
    CHECK(in_table, "%s has no '| op | cpu | metal | cuda |' table", path);
    for (int op = 0; op < MF_OP_COUNT; op++) CHECK(seen[op], "op %s has no row in %s", mf_op_name((mf_op)op), path);
    CHECK(rows == MF_OP_COUNT, "%d rows for %d ops", rows, MF_OP_COUNT);
}

int main(int argc, char **argv) {
    mf_error err = {0};
    if (mf_test_backend_register(&err)) {
        printf("FAIL register test backend: %s\n", err.msg);
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--print-table")) {
        print_table();
        return 0;
    }
    RUN(every_op_has_a_matrix_decision);
    RUN(matrix_cpu);
    RUN(matrix_metal);
    RUN(matrix_cuda);
    RUN(matrix_cuda_vs_cpu);
    RUN(matrix_test_backend_vs_cpu);
    RUN(matrix_test_backend);
    RUN(support_table_matches_support_matrix_doc);
    return mf_test_done();
}
