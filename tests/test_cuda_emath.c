/* The CUDA kernels' per-element arithmetic (backend/cuda/emath.h), run on the host, against the CPU
 * reference bit for bit: f16 both ways (src/quant), the KV store's q8_0 rows (mf_quantize_row_cpu), the
 * exp / SiLU / softmax sum of vec.c, RMS norm, the rope angle and rotation (core/rope.c), the Hadamard
 * butterfly (core/hadamard.c); and the attention chunk merge against a plain softmax.  Runs in every build:
 * no GPU needed, and the device compiles the same functions. */
#include "backend/cuda/emath.h"

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_impl.h"
#include "core/hadamard.h"
#include "core/rope.h"
#include "graph/graph.h"
#include "quant/quant.h"
#include "harness.h"

#include <math.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float frand(void) {
    return (float)(urand() & 0xFFFFFF) / (float)0x800000 - 1.0f;
} /* [-1, 1) */

static uint32_t bits(float f) {
    return mf_f32_bits(f);
}

/* f16 -> f32: every one of the 65536 patterns (NaN payloads included) */
static void test_f16_to_f32_all(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint32_t want = bits(mf_fp16_to_fp32((uint16_t)h)), got = bits(mf_hd_f16_to_f32((uint16_t)h));
        if (want != got && bad++ < 5) CHECK(0, "h=0x%04x: cpu 0x%08x, emath 0x%08x", h, want, got);
    }
    CHECK(bad == 0, "%d of 65536 f16 patterns differ", bad);
}

/* f32 -> f16: every exponent (zero, subnormal, normal, inf/NaN) with the mantissas around each rounding
 * boundary, both signs, plus a stride through all 2^32 patterns */
static void test_f32_to_f16(void) {
    static const uint32_t mans[] = {0,        1,        2,        0xFFF,    0x1000,   0x1001,   0x1FFF,  0x2000,
                                    0x3000,   0x5000,   0x7FF000, 0x7FEFFF, 0x7FF001, 0x7FFFFF, 0x400000, 0x400001,
                                    0x3FFFFF, 0x200000, 0x600000, 0x123456, 0x0FFFFF, 0x100000, 0x0C0000, 0x080000};
    int bad = 0;
    long n = 0;
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t e = 0; e < 256; e++)
            for (size_t m = 0; m < sizeof mans / sizeof mans[0]; m++) {
                const float f = mf_bits_f32(s << 31 | e << 23 | mans[m]);
                const uint16_t want = mf_fp32_to_fp16(f), got = mf_hd_f32_to_f16(f);
                n++;
                if (want != got && bad++ < 5) CHECK(0, "f=0x%08x: cpu 0x%04x, emath 0x%04x", bits(f), want, got);
            }
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        const float f = mf_bits_f32((uint32_t)u);
        const uint16_t want = mf_fp32_to_fp16(f), got = mf_hd_f32_to_f16(f);
        n++;
        if (want != got && bad++ < 5) CHECK(0, "f=0x%08x: cpu 0x%04x, emath 0x%04x", (uint32_t)u, want, got);
    }
    CHECK(bad == 0, "%d of %ld f32 patterns differ", bad, n);
}

/* q8_0 rows as KV_STORE writes them on the CPU: random rows at several magnitudes, exact ties (x * 127 /
 * amax on a .5), an all-zero block, a block whose extreme is negative, huge and tiny values */
static void test_q8_0_rows(void) {
    enum { N = 256 };
    float x[N];
    unsigned char want[N / 32 * 34], got[N / 32 * 34];
    int bad = 0;
    for (int it = 0; it < 400; it++) {
        const float amp = it % 5 == 0 ? 1e-30f : it % 5 == 1 ? 3e4f : it % 5 == 2 ? 1.0f : it % 5 == 3 ? 1e-6f : 77.0f;
        for (int i = 0; i < N; i++) x[i] = frand() * amp;
        if (it % 7 == 0)
            for (int i = 0; i < 32; i++) x[i] = 0.0f;
        if (it % 11 == 0) { /* ties: amax 127 so x * 127 / amax = x, and halves */
            for (int i = 32; i < 64; i++) x[i] = (float)((int)(urand() % 254) - 127) + 0.5f;
            x[32] = -127.0f;
        }
        if (it % 13 == 0) x[70] = -2.0f * amp;
        if (it % 2) { /* values a hair from a tie of x * 127 / amax: where 1 / d and 127 / amax differ by an
                       * ulp, the rounding does too */
            for (int b = 2; b < N / 32; b++) {
                const float am = 0.5f + (float)(urand() % 100000) / 1000.0f;
                x[32 * b] = am;
                for (int j = 1; j < 32; j++)
                    x[32 * b + j] = ((float)((int)(urand() % 254) - 127) + 0.5f) * (am / 127.f) *
                                    (1.0f + (float)((int)(urand() % 9) - 4) * 0x1p-23f);
            }
        }
        REQUIRE_OK(mf_quantize_row_cpu(MF_TYPE_Q8_0, x, want, N), "quantize_row_cpu");
        for (int b = 0; b < N / 32; b++) mf_hd_q8_0_block(x + 32 * b, got + 34 * b);
        if (memcmp(want, got, sizeof want) && bad++ < 5) {
            for (size_t i = 0; i < sizeof want; i++)
                if (want[i] != got[i]) {
                    CHECK(0, "row %d byte %zu: cpu %u, emath %u", it, i, want[i], got[i]);
                    break;
                }
        }
    }
    CHECK(bad == 0, "%d of 400 q8_0 rows differ", bad);
}

/* exp: the CPU's ggml_v_expf lane over the softmax range and its edges */
static void test_expf(void) {
    int bad = 0;
    long n = 0;
    for (float x = -120.0f; x < 100.0f; x += 0.0137f) {
        n++;
        if (bits(mf_cpu_expf(x)) != bits(mf_hd_expf(x)) && bad++ < 5)
            CHECK(0, "x=%a: cpu %a, emath %a", x, mf_cpu_expf(x), mf_hd_expf(x));
    }
    const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.3f, 88.73f, 89.0f, -87.3f, -103.9f, -104.5f, 1e-30f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        n++;
        const float w = mf_cpu_expf(edge[i]), g = mf_hd_expf(edge[i]);
        if (!(bits(w) == bits(g) || (isnan(w) && isnan(g))) && bad++ < 5) CHECK(0, "x=%a: cpu %a, emath %a", edge[i], w, g);
    }
    CHECK(mf_hd_expf(-INFINITY) == 0.0f, "e^-inf = %a (the first merge needs 0)", mf_hd_expf(-INFINITY));
    CHECK(bad == 0, "%d of %ld exp values differ", bad, n);
}

/* a one-op CPU graph on rows [ne0, nrows] (scalar vec kernels and AVX2 give the same bits) */
typedef int32_t (*build_fn)(mf_graph *g, int32_t a);
static int cpu_rows(build_fn build, int64_t ne0, int64_t nrows, const float *x, float *y) {
    mf_graph *g = mf_graph_new();
    const int64_t ne[2] = {ne0, nrows};
    const int32_t in = mf_g_input(g, "x", MF_TYPE_F32, 2, ne);
    const int32_t out = build(g, in);
    mf_g_set_output(g, out);
    mf_error err = {0};
    mf_cpu *cpu = NULL;
    int rc = mf_graph_error(g, &err);
    if (!rc) rc = mf_graph_alloc(g, &err);
    if (!rc) {
        memcpy(mf_graph_node(g, in)->data, x, (size_t)(ne0 * nrows) * sizeof(float));
        rc = mf_cpu_new(1, &cpu, &err);
    }
    if (!rc) rc = mf_cpu_compute(cpu, g, &err);
    if (!rc) memcpy(y, mf_graph_node(g, out)->data, (size_t)(ne0 * nrows) * sizeof(float));
    if (rc) printf("  cpu graph: %s\n", err.msg);
    mf_cpu_free(cpu);
    mf_graph_free(g);
    return rc;
}

static float rms_eps = 1e-6f;
static int32_t b_rms(mf_graph *g, int32_t a) {
    return mf_g_rms_norm(g, a, rms_eps);
}
static int32_t b_silu(mf_graph *g, int32_t a) {
    return mf_g_silu(g, a);
}
static int32_t b_softmax(mf_graph *g, int32_t a) {
    return mf_g_softmax(g, a);
}
static int hd_n = 64;
static int32_t b_hadamard(mf_graph *g, int32_t a) {
    return mf_g_hadamard(g, a, hd_n);
}

/* RMS norm as rms_norm_kernel computes a row: squares rounded to float, summed in double per thread
 * (threads stride the row), the 128 thread sums added in elem.cu's tree, then the scale */
#define RMS_THREADS 128
static void rms_row_gpu_order(const float *x, int64_t ne0, float eps, float *y) {
    double part[RMS_THREADS];
    for (int t = 0; t < RMS_THREADS; t++) {
        double s = 0.0;
        for (int64_t i = t; i < ne0; i += RMS_THREADS) s += (double)(x[i] * x[i]);
        part[t] = s;
    }
    for (int w = RMS_THREADS / 2; w > 0; w /= 2)
        for (int t = 0; t < w; t++) part[t] += part[t + w];
    const float sc = mf_hd_rms_scale(part[0], ne0, eps);
    for (int64_t i = 0; i < ne0; i++) y[i] = x[i] * sc;
}

static void test_rms_norm_rows(void) {
    static const int64_t sizes[] = {64, 128, 896, 1024, 100};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t ne0 = sizes[k], nr = 6;
        float *x = malloc((size_t)(ne0 * nr) * sizeof(float)), *want = malloc((size_t)(ne0 * nr) * sizeof(float)),
              *got = malloc((size_t)(ne0 * nr) * sizeof(float));
        for (int64_t i = 0; i < ne0 * nr; i++) x[i] = frand() * (i % 17 == 0 ? 30.0f : 2.0f);
        rms_eps = k % 2 ? 1e-5f : 1e-6f;
        if (cpu_rows(b_rms, ne0, nr, x, want) == 0) {
            for (int64_t r = 0; r < nr; r++) rms_row_gpu_order(x + r * ne0, ne0, rms_eps, got + r * ne0);
            CHECK(!memcmp(want, got, (size_t)(ne0 * nr) * sizeof(float)), "rms_norm ne0=%lld differs from the CPU op",
                  (long long)ne0);
        } else {
            CHECK(0, "cpu rms_norm failed");
        }
        free(x), free(want), free(got);
    }
}

/* SiLU over a multiple of 8 (the CPU's vector part: ggml_v_silu with ggml's exp) */
static void test_silu_rows(void) {
    const int64_t ne0 = 4864, nr = 2;
    float *x = malloc((size_t)(ne0 * nr) * sizeof(float)), *want = malloc((size_t)(ne0 * nr) * sizeof(float));
    for (int64_t i = 0; i < ne0 * nr; i++) x[i] = frand() * (i % 3 ? 6.0f : 90.0f);
    x[5] = -100.0f, x[6] = 100.0f, x[7] = 0.0f;
    if (cpu_rows(b_silu, ne0, nr, x, want) == 0) {
        int bad = 0;
        for (int64_t i = 0; i < ne0 * nr; i++)
            if (bits(mf_hd_silu(x[i])) != bits(want[i]) && bad++ < 5)
                CHECK(0, "silu(%a): cpu %a, emath %a", x[i], want[i], mf_hd_silu(x[i]));
        CHECK(bad == 0, "%d silu values differ", bad);
    } else {
        CHECK(0, "cpu silu failed");
    }
    free(x), free(want);
}

/* softmax as softmax_kernel: max, then per 8-element group e^(x - max) summed as vec.c's hsum8 and the
 * group sums added in double per thread (threads stride the groups), the thread sums in elem.cu's tree */
#define SM_THREADS 128
static void softmax_row_gpu_order(const float *x, int64_t ne0, float *y) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < ne0; i++) mx = x[i] > mx ? x[i] : mx;
    double part[SM_THREADS];
    const int64_t ng = (ne0 + 7) / 8;
    for (int t = 0; t < SM_THREADS; t++) {
        double s = 0.0;
        for (int64_t gi = t; gi < ng; gi += SM_THREADS) {
            float e[8] = {0};
            for (int l = 0; l < 8 && gi * 8 + l < ne0; l++) e[l] = y[gi * 8 + l] = mf_hd_expf(x[gi * 8 + l] - mx);
            s += (double)(((e[0] + e[4]) + (e[2] + e[6])) + ((e[1] + e[5]) + (e[3] + e[7])));
        }
        part[t] = s;
    }
    for (int w = SM_THREADS / 2; w > 0; w /= 2)
        for (int t = 0; t < w; t++) part[t] += part[t + w];
    const float inv = (float)(1.0 / part[0]);
    for (int64_t i = 0; i < ne0; i++) y[i] *= inv;
}

static void test_softmax_rows(void) {
    static const int64_t sizes[] = {8, 37, 256, 1000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t ne0 = sizes[k], nr = 3;
        float *x = malloc((size_t)(ne0 * nr) * sizeof(float)), *want = malloc((size_t)(ne0 * nr) * sizeof(float)),
              *got = malloc((size_t)(ne0 * nr) * sizeof(float));
        for (int64_t i = 0; i < ne0 * nr; i++) x[i] = frand() * 12.0f;
        if (cpu_rows(b_softmax, ne0, nr, x, want) == 0) {
            for (int64_t r = 0; r < nr; r++) softmax_row_gpu_order(x + r * ne0, ne0, got + r * ne0);
            CHECK(!memcmp(want, got, (size_t)(ne0 * nr) * sizeof(float)), "softmax ne0=%lld differs from the CPU op",
                  (long long)ne0);
        } else {
            CHECK(0, "cpu softmax failed");
        }
        free(x), free(want), free(got);
    }
}

/* the rope: angle (cos/sin of it with the host's libm equal mf_rope_cache's) and rotation (mf_rope_row) */
static void test_rope(void) {
    static const float bases[] = {10000.0f, 1000000.0f};
    static const int32_t pos[] = {0, 1, 7, 100, 4095, 32767};
    static const int ndims[] = {64, 128, 32};
    int bad = 0;
    for (size_t bi = 0; bi < 2; bi++)
        for (size_t di = 0; di < 3; di++)
            for (size_t pi = 0; pi < sizeof pos / sizeof pos[0]; pi++)
                for (int mode = 0; mode <= MF_ROPE_NEOX; mode += MF_ROPE_NEOX) {
                    const int nd = ndims[di], ne0 = 128;
                    const float fs = pi % 2 ? 1.0f : 0.25f, ts = mf_rope_theta_scale(bases[bi], nd);
                    float cache[128], x[128], want[128], got[128];
                    /* every third case a YaRN rope (factor 1/fs, original context 4096 or 32768) */
                    mf_rope r = mf_rope_plain(nd, mode, bases[bi]);
                    r.freq_scale = fs;
                    if (pi % 3 == 0) {
                        r.ext_factor = pi ? 0.5f : 1.0f;
                        mf_rope_corr_dims(nd, pi ? 4096 : 32768, bases[bi], 32.0f, 1.0f, r.corr_dims);
                    }
                    const float ms = mf_rope_mscale(&r);
                    mf_rope_cache(cache, nd, (float)pos[pi], &r, ts, false);
                    for (int i = 0; i < nd / 2; i++) {
                        const float t = r.ext_factor == 0.0f ? mf_hd_rope_theta((float)pos[pi], fs, ts, i)
                                                             : mf_hd_rope_yarn_theta((float)pos[pi], fs, ts, i,
                                                                                     r.ext_factor, r.corr_dims[0],
                                                                                     r.corr_dims[1]);
                        const float c = mf_hd_mul(cosf(t), ms), s = mf_hd_mul(sinf(t), ms);
                        if ((bits(c) != bits(cache[2 * i]) || bits(s) != bits(cache[2 * i + 1])) && bad++ < 5)
                            CHECK(0, "angle p=%d pair %d base %g ext %g: cache (%a, %a), emath (%a, %a)", pos[pi], i,
                                  bases[bi], (double)r.ext_factor, cache[2 * i], cache[2 * i + 1], c, s);
                    }
                    for (int i = 0; i < ne0; i++) x[i] = frand() * 3.0f;
                    mf_rope_row(want, x, ne0, nd, mode, cache);
                    memcpy(got, x, sizeof got);
                    const int neox = mode == MF_ROPE_NEOX, half = neox ? nd / 2 : 1;
                    for (int i = 0; i < nd / 2; i++) {
                        const int ic = neox ? i : 2 * i;
                        mf_hd_rope_pair(x[ic], x[ic + half], cache[2 * i], cache[2 * i + 1], neox, &got[ic],
                                        &got[ic + half]);
                    }
                    if (memcmp(want, got, sizeof got) && bad++ < 5)
                        CHECK(0, "rotation p=%d nd=%d mode %d differs from mf_rope_row", pos[pi], nd, mode);
                }
    CHECK(bad == 0, "%d rope cases differ", bad);
}

/* the butterfly as hadamard_kernel schedules it (pass by pass, pair j at mf_hd_fwht_lo) vs the CPU op */
static void test_hadamard(void) {
    static const int ns[] = {64, 128};
    for (int k = 0; k < 2; k++) {
        const int n = ns[k];
        const int64_t ne0 = 256, nr = 3;
        float x[256 * 3], want[256 * 3], got[256 * 3];
        for (int i = 0; i < 256 * 3; i++) x[i] = frand() * 5.0f;
        hd_n = n;
        if (cpu_rows(b_hadamard, ne0, nr, x, want)) {
            CHECK(0, "cpu hadamard failed");
            continue;
        }
        const float scale = 1.0f / sqrtf((float)n);
        for (int64_t c = 0; c < ne0 * nr; c += n) {
            float *r = got + c;
            for (int j = 0; j < n; j++) r[j] = x[c + j] * scale;
            for (int len = 1; len < n; len <<= 1)
                for (int j = 0; j < n / 2; j++) {
                    const int lo = mf_hd_fwht_lo(j, len);
                    const float u = r[lo], v = r[lo + len];
                    r[lo] = u + v;
                    r[lo + len] = u - v;
                }
        }
        CHECK(!memcmp(want, got, sizeof got), "hadamard n=%d differs from the CPU op", n);
    }
}

/* the attention merge: chunks of 64 scores merged in order equal a plain softmax-weighted sum (to float
 * accuracy), and a chunking of one query's keys never depends on anything but its own scores */
static void test_att_merge(void) {
    enum { CNT = 300, CH = 64, HD = 4 };
    float s[CNT], v[CNT][HD];
    for (int i = 0; i < CNT; i++) {
        s[i] = frand() * 20.0f;
        for (int d = 0; d < HD; d++) v[i][d] = frand();
    }
    double mx = -INFINITY, l = 0, o[HD] = {0};
    for (int i = 0; i < CNT; i++) mx = s[i] > mx ? s[i] : mx;
    for (int i = 0; i < CNT; i++) {
        const double p = exp(s[i] - mx);
        l += p;
        for (int d = 0; d < HD; d++) o[d] += p * v[i][d];
    }
    float M = -INFINITY, L = 0.0f, O[HD] = {0};
    for (int c0 = 0; c0 < CNT; c0 += CH) {
        const int e = c0 + CH < CNT ? c0 + CH : CNT;
        float m = -INFINITY, lc = 0.0f, oc[HD] = {0};
        for (int i = c0; i < e; i++) m = s[i] > m ? s[i] : m;
        for (int i = c0; i < e; i++) {
            const float p = mf_hd_expf(s[i] - m);
            lc += p;
            for (int d = 0; d < HD; d++) oc[d] += p * v[i][d];
        }
        float a, b;
        mf_hd_att_merge(&M, &L, m, lc, &a, &b);
        for (int d = 0; d < HD; d++) O[d] = mf_hd_att_merge_o(O[d], oc[d], a, b);
    }
    CHECK(M == (float)mx, "max %g, want %g", M, mx);
    for (int d = 0; d < HD; d++) {
        const double want = o[d] / l, got = mf_hd_att_out(O[d], L);
        CHECK(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "out[%d] = %.9g, want %.9g", d, got, want);
    }
    CHECK(mf_hd_att_out(1.0f, 0.0f) == 0.0f, "an empty sum gives 0");
}

int main(void) {
    RUN(test_f16_to_f32_all);
    RUN(test_f32_to_f16);
    RUN(test_q8_0_rows);
    RUN(test_expf);
    RUN(test_rms_norm_rows);
    RUN(test_silu_rows);
    RUN(test_softmax_rows);
    RUN(test_rope);
    RUN(test_hadamard);
    RUN(test_att_merge);
    return mf_test_done();
}
