/* quant, IQ2/IQ3 formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): the generated grids, the reference
 * dequantizers and dot kernels against goldens written by llama.cpp's own libraries
 * (tools/oracle/iq_golden.c), and every SIMD kernel bitwise against the reference. */
#include "harness.h"
#include "quant/quant.h"
#include "quant/iq_grids.h"

#include <math.h>
#include <stdint.h>

#include "golden/quant/blockgen_iq.h"

static const char *golden_dir(void) {
    const char *d = getenv("MF_QUANT_GOLDEN");
    return d ? d : "tests/golden/quant";
}

static bool read_golden(const char *name, void *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", golden_dir(), name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s (run from the repo root or set MF_QUANT_GOLDEN)", path);
    if (!f) return false;
    size_t got = fread(buf, 1, n, f);
    int extra = fgetc(f);
    fclose(f);
    CHECK(got == n && extra == EOF, "%s: expected %zu bytes, got %zu%s", path, n, got, extra == EOF ? "" : "+");
    return got == n && extra == EOF;
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_type_table(void) {
    for (int i = 0; i < QG_NIQ; i++) {
        const qg_type *t = &qg_iq_types[i];
        const mf_type_info *ti = mf_type_get_file((uint32_t)t->type);
        REQUIRE(ti, "type %d (%s) unknown", t->type, t->name);
        CHECK(!strcmp(ti->name, t->name) && ti->blck_size == 256 && ti->type_size == (size_t)t->bytes && ti->quantized,
              "%s: %s %lld %zu", t->name, ti->name, (long long)ti->blck_size, ti->type_size);
        CHECK(mf_row_size((uint32_t)t->type, 1024) == 4 * (size_t)t->bytes, "%s row size", t->name);
        const mf_quant_kernels *k = mf_quant_kernels_get((uint32_t)t->type);
        REQUIRE(k && k->vec_dot && k->vec_dot_tile && k->from_float, "%s has no matmul kernels", t->name);
        CHECK(k->vec_dot_type == MF_TYPE_Q8_K, "%s: vec_dot_type %s (llama.cpp pairs it with q8_K)", t->name,
              mf_type_name(k->vec_dot_type));
    }
}

/* Every grid entry is made of the format's levels, and no two entries are equal (a generator that wrote
 * one entry twice, or shifted the table, fails here before any golden does). */
static void test_grids(void) {
    static const struct { const char *name; int n, width, nlev; int lev[8]; } g[] = {
        {"iq2xxs", 256, 8, 3, {8, 25, 43}},
        {"iq2xs", 512, 8, 3, {8, 25, 43}},
        {"iq2s", 1024, 8, 3, {8, 25, 43}},
        {"iq3xxs", 256, 4, 8, {4, 12, 20, 28, 36, 44, 52, 62}},
        {"iq3s", 512, 4, 8, {1, 3, 5, 7, 9, 11, 13, 15}},
    };
    for (size_t t = 0; t < sizeof g / sizeof g[0]; t++) {
        int bad = 0, dup = 0;
        for (int e = 0; e < g[t].n; e++) {
            uint64_t v = t == 0 ? mf_iq2xxs_grid[e] : t == 1 ? mf_iq2xs_grid[e] : t == 2 ? mf_iq2s_grid[e]
                       : t == 3 ? mf_iq3xxs_grid[e] : mf_iq3s_grid[e];
            for (int j = 0; j < g[t].width; j++) {
                const int b = (int)(v >> 8 * j & 255);
                int ok = 0;
                for (int l = 0; l < g[t].nlev; l++) ok |= b == g[t].lev[l];
                bad += !ok;
            }
            for (int f = 0; f < e; f++) {
                uint64_t u = t == 0 ? mf_iq2xxs_grid[f] : t == 1 ? mf_iq2xs_grid[f] : t == 2 ? mf_iq2s_grid[f]
                           : t == 3 ? mf_iq3xxs_grid[f] : mf_iq3s_grid[f];
                dup += u == v;
            }
        }
        CHECK(bad == 0 && dup == 0, "%s grid: %d values off the levels, %d duplicate entries", g[t].name, bad, dup);
    }
    /* the sign rule: an even number of minus signs, the 7 stored bits kept */
    int bad = 0;
    for (uint32_t s = 0; s < 128; s++) {
        const uint8_t k = mf_iq_ksigns(s | 0x80u << 7); /* bits above the field are ignored */
        bad += (k & 127) != s || __builtin_popcount(k) % 2 != 0;
    }
    CHECK(bad == 0, "%d sign fields expand wrongly", bad);
}

static void test_dequant_golden(void) {
    static uint8_t blocks[QG_N];
    static float got[QG_N], want[QG_N];
    for (int i = 0; i < QG_NIQ; i++) {
        const qg_type *t = &qg_iq_types[i];
        char name[64];
        snprintf(name, sizeof name, "deq_%s.bin", t->name);
        if (!read_golden(name, want, sizeof want)) continue;
        qg_fill_iq(t->type, 1, QG_N, blocks);
        int rc = mf_dequantize_row((uint32_t)t->type, blocks, got, QG_N);
        CHECK(rc == 0, "%s: rc %d", t->name, rc);
        int first = -1, nbad = 0;
        for (int j = 0; j < QG_N; j++)
            if (fbits(got[j]) != fbits(want[j])) nbad++, first = first < 0 ? j : first;
        CHECK(nbad == 0, "%s: %d of %d floats differ from ggml, first at %d: %a vs %a", t->name, nbad, QG_N, first,
              first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
    }
}

/* Our from_float + vec_dot at EVERY ISA (the reference included) equal llama.cpp's x86 results bit for
 * bit: the kernels all fold in llama.cpp's AVX2 lane order. */
static void test_dot_llama_exact(void) {
    static float x[QG_DOT_N];
    static uint8_t w[QG_DOT_N], a[QG_DOT_N * 2];
    qg_floats(3, QG_DOT_N, x);
    for (int i = 0; i < QG_NIQ; i++) {
        const qg_type *t = &qg_iq_types[i];
        float want[QG_DOT_ROWS];
        char name[64];
        snprintf(name, sizeof name, "dot_%s.bin", t->name);
        if (!read_golden(name, want, sizeof want)) continue;
        for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
            const mf_quant_kernels *k = mf_quant_kernels_get_isa((uint32_t)t->type, (mf_isa)isa);
            if (!k) continue;
            k->from_float(x, a, QG_DOT_N);
            for (int r = 0; r < QG_DOT_ROWS; r++) {
                qg_fill_iq(t->type, 100 + (uint64_t)r, QG_DOT_N, w);
                float s = 0;
                k->vec_dot(QG_DOT_N, &s, w, a);
                CHECK(fbits(s) == fbits(want[r]), "%s %s row %d: %a, llama.cpp %a", t->name, mf_isa_name((mf_isa)isa), r,
                      s, want[r]);
            }
        }
    }
}

/* The reference dot against the double-precision dot of both dequantized rows: the integer sums are
 * exact, so only the f32 fold differs (catches a wrong multiplier or factor the goldens might share
 * with a wrong dequantizer). */
static void test_dot_vs_dequant(void) {
    enum { N = 4096 };
    static uint8_t w[N], a[N * 2];
    static float fw[N], fa[N];
    for (int i = 0; i < QG_NIQ; i++) {
        const qg_type *t = &qg_iq_types[i];
        const mf_quant_kernels *k = mf_quant_kernels_get_isa((uint32_t)t->type, MF_ISA_SCALAR);
        REQUIRE(k, "%s: no scalar kernel", t->name);
        for (uint64_t seed = 1; seed <= 4; seed++) {
            qg_fill_iq(t->type, seed, N, w);
            qg_fill(QG_Q8_K, seed + 50, N, a);
            float s = 0;
            k->vec_dot(N, &s, w, a);
            mf_dequantize_row((uint32_t)t->type, w, fw, N);
            mf_dequantize_row(MF_TYPE_Q8_K, a, fa, N);
            double ref = 0, mag = 0;
            for (int j = 0; j < N; j++) ref += (double)fw[j] * fa[j], mag += fabs((double)fw[j] * fa[j]);
            CHECK(fabs(s - ref) <= 1e-5 * mag + 1e-30, "%s seed %llu: %.9g vs %.9g (mag %.3g)", t->name,
                  (unsigned long long)seed, s, ref, mag);
        }
    }
}

/* Every SIMD kernel bitwise the reference: random weights against from_float activations and against
 * random Q8_K blocks, some with -128 quants (the int8 negation edge the sign instructions have), at
 * several lengths; the tile entry point gives vec_dot's bits too. */
static void test_isa_bitwise(void) {
    enum { N = 4096 };
    static uint8_t w[N], a[N * 2];
    static float x[N];
    int tested = 0;
    for (int isa = MF_ISA_SCALAR + 1; isa < MF_ISA_COUNT; isa++) {
        for (int i = 0; i < QG_NIQ; i++) {
            const qg_type *t = &qg_iq_types[i];
            const mf_quant_kernels *k = mf_quant_kernels_get_isa((uint32_t)t->type, (mf_isa)isa),
                                   *ref = mf_quant_kernels_get_isa((uint32_t)t->type, MF_ISA_SCALAR);
            if (!k || !ref) continue;
            for (uint64_t seed = 1; seed <= 6; seed++) {
                qg_fill_iq(t->type, seed, N, w);
                if (seed % 2) {
                    qg_floats(seed, N, x);
                    ref->from_float(x, a, N);
                } else {
                    qg_fill(QG_Q8_K, seed + 50, N, a);
                    if (seed == 4) /* a -128 at every 7th quant (bsums are not read by these kernels) */
                        for (int b = 0; b < N / 256; b++)
                            for (int j = b % 7; j < 256; j += 7) a[b * 292 + 4 + j] = 0x80;
                }
                for (int64_t n = N; n >= 256; n /= 4) {
                    float got = 0, want = 0, tile = 0;
                    k->vec_dot(n, &got, w, a);
                    ref->vec_dot(n, &want, w, a);
                    k->vec_dot_tile(n, &tile, 1, w, 0, 1, a, 0, 1);
                    CHECK(fbits(got) == fbits(want) && fbits(tile) == fbits(want),
                          "%s %s seed %llu n %lld: %a (tile %a), reference %a", t->name, mf_isa_name((mf_isa)isa),
                          (unsigned long long)seed, (long long)n, got, tile, want);
                    tested++;
                }
            }
        }
    }
    if (!tested) SKIP("this CPU has no SIMD kernel set");
}

/* The tiles share a weight row's decoding among up to 4 activations, so every tile shape the matmul may
 * ask for (nw 1..3 rows, na 1..9 activations: the 4-, 2- and 1-activation paths and their mixes) must give
 * each pair vec_dot's bits, with a -128 quant in one activation row (vpsignb's edge) and distinct rows so
 * a pair reading its neighbour's row shows. */
static void test_tile_shapes_bitwise(void) {
    enum { N = 512, NW = 3, NA = 9 };
    static uint8_t w[NW][N], a[NA][N * 2];
    int tested = 0;
    for (int isa = MF_ISA_SCALAR; isa < MF_ISA_COUNT; isa++) {
        for (int i = 0; i < QG_NIQ; i++) {
            const qg_type *t = &qg_iq_types[i];
            const mf_quant_kernels *k = mf_quant_kernels_get_isa((uint32_t)t->type, (mf_isa)isa);
            if (!k) continue;
            for (int r = 0; r < NW; r++) qg_fill_iq(t->type, 60 + (uint64_t)r, N, w[r]);
            for (int j = 0; j < NA; j++) qg_fill(QG_Q8_K, 70 + (uint64_t)j, N, a[j]);
            for (int b = 0; b < N / 256; b++) a[5][b * 292 + 4 + 17] = 0x80;
            float want[NW][NA];
            for (int r = 0; r < NW; r++)
                for (int j = 0; j < NA; j++) k->vec_dot(N, &want[r][j], w[r], a[j]);
            int bad = 0;
            for (int nw = 1; nw <= NW; nw++)
                for (int na = 1; na <= NA; na++) {
                    float got[NW][NA + 1];
                    memset(got, 0xFF, sizeof got);
                    k->vec_dot_tile(N, &got[0][0], NA + 1, w, sizeof w[0], nw, a, sizeof a[0], na);
                    for (int r = 0; r < nw; r++)
                        for (int j = 0; j < na; j++)
                            if (fbits(got[r][j]) != fbits(want[r][j]) && bad++ < 3)
                                CHECK(0, "%s %s tile %dx%d pair (%d,%d): %a, vec_dot %a", t->name,
                                      mf_isa_name((mf_isa)isa), nw, na, r, j, got[r][j], want[r][j]);
                    tested++;
                }
            CHECK(bad == 0, "%s %s: %d tile results differ from vec_dot", t->name, mf_isa_name((mf_isa)isa), bad);
        }
    }
    printf("  %d tile shapes checked\n", tested);
}

/* A kernel reads only its own row: results do not depend on neighbouring rows (a kernel reading past
 * n would change with them). */
static void test_row_independent(void) {
    enum { N = 512 };
    static uint8_t w[2 * N], a[4 * N]; /* 2 rows: 2 x 220 B of weights at most, 2 x 584 B of Q8_K */
    for (int i = 0; i < QG_NIQ; i++) {
        const qg_type *t = &qg_iq_types[i];
        const mf_quant_kernels *k = mf_quant_kernels_get((uint32_t)t->type);
        if (!k) continue;
        const size_t rs = mf_row_size((uint32_t)t->type, N), as = mf_row_size(MF_TYPE_Q8_K, N);
        qg_fill_iq(t->type, 7, 2 * N, w);
        qg_fill(QG_Q8_K, 8, 2 * N, a);
        float s1 = 0, s2 = 0;
        k->vec_dot(N, &s1, w, a);
        memset(w + rs, 0x5A, rs);
        memset(a + as, 0x33, as);
        k->vec_dot(N, &s2, w, a);
        CHECK(fbits(s1) == fbits(s2), "%s: %a then %a", t->name, s1, s2);
    }
}

int main(void) {
    RUN(test_type_table);
    RUN(test_grids);
    RUN(test_dequant_golden);
    RUN(test_dot_llama_exact);
    RUN(test_dot_vs_dequant);
    RUN(test_isa_bitwise);
    RUN(test_tile_shapes_bitwise);
    RUN(test_row_independent);
    return mf_test_done();
}
