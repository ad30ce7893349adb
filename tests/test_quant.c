/* quant: type table, f16/bf16 conversions, reference (de)quantizers and dot kernels, checked against
 * goldens written by llama.cpp's own libraries (tools/oracle/quant_golden.c, README-quant.md). */
#include "harness.h"
#include "quant/quant.h"
#include "support/amx_emu.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "golden/quant/blockgen.h"

/* ---- golden files ---- */

static const char *golden_dir(void) {
    const char *d = getenv("MF_QUANT_GOLDEN");
    return d ? d : "tests/golden/quant";
}

/* Reads exactly n bytes of golden `name`; false (and a failed check naming the file) otherwise. */
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

static bool golden_hash(const char *key, uint64_t *out) {
    char buf[512] = {0}, path[512];
    snprintf(path, sizeof path, "%s/fp16.txt", golden_dir());
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strstr(buf, key);
    CHECK(p != NULL, "%s has no line '%s'", path, key);
    if (!p) return false;
    *out = strtoull(p + strlen(key) + 1, NULL, 16);
    return true;
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- type table ---- */

static void test_type_table(void) {
    static const struct { uint32_t t; const char *name; int64_t blck; size_t size; } want[] = {
        {MF_TYPE_F32, "f32", 1, 4},       {MF_TYPE_F16, "f16", 1, 2},        {MF_TYPE_BF16, "bf16", 1, 2},
        {MF_TYPE_Q4_0, "q4_0", 32, 18},   {MF_TYPE_Q4_1, "q4_1", 32, 20},    {MF_TYPE_Q5_0, "q5_0", 32, 22},
        {MF_TYPE_Q5_1, "q5_1", 32, 24},   {MF_TYPE_Q8_0, "q8_0", 32, 34},    {MF_TYPE_Q8_1, "q8_1", 32, 36},
        {MF_TYPE_Q2_K, "q2_K", 256, 84},  {MF_TYPE_Q3_K, "q3_K", 256, 110},  {MF_TYPE_Q4_K, "q4_K", 256, 144},
        {MF_TYPE_Q5_K, "q5_K", 256, 176}, {MF_TYPE_Q6_K, "q6_K", 256, 210},  {MF_TYPE_Q8_K, "q8_K", 256, 292},
        {MF_TYPE_I8, "i8", 1, 1},         {MF_TYPE_I16, "i16", 1, 2},        {MF_TYPE_I32, "i32", 1, 4},
        {MF_TYPE_I64, "i64", 1, 8},       {MF_TYPE_F64, "f64", 1, 8},
        /* the rest of ggml's ids, as numbers (the file contract), from ggml_type_name / blck / type_size */
        {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74}, {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
        {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110}, {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136},
        {29, "iq1_m", 256, 56},   {34, "tq1_0", 256, 54},  {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
        {40, "nvfp4", 64, 36},    {41, "q1_0", 128, 18},   {42, "q2_0", 64, 18},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mf_type_info *t = mf_type_get(want[i].t);
        REQUIRE(t != NULL, "type %u missing", want[i].t);
        CHECK(strcmp(t->name, want[i].name) == 0 && strcmp(mf_type_name(want[i].t), want[i].name) == 0,
              "type %u name %s", want[i].t, t->name);
        CHECK(t->blck_size == want[i].blck && t->type_size == want[i].size, "%s: blck %lld size %zu", t->name,
              (long long)t->blck_size, t->type_size);
        CHECK(t->quantized == (want[i].blck > 1), "%s quantized flag", t->name);
        CHECK(mf_row_size(want[i].t, want[i].blck * 7) == want[i].size * 7, "%s row size", t->name);
    }
    static const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 1000};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++)
        CHECK(mf_type_get(removed[i]) == NULL, "removed/unknown id %u must be NULL", removed[i]);
    CHECK(strcmp(mf_type_name(4), "unknown(4)") == 0, "got %s", mf_type_name(4));
    CHECK(mf_row_size(MF_TYPE_Q4_K, 100) == 0, "partial block must give 0");
    CHECK(mf_row_size(MF_TYPE_Q4_0, -32) == 0, "negative n must give 0");
    CHECK(mf_row_size(1000, 32) == 0, "unknown type must give 0");
    CHECK(mf_row_size(MF_TYPE_F32, INT64_MAX) == 0, "overflow must give 0");
}

/* ---- f16 / bf16 ---- */

/* An independent definition of the f16 value, for the exhaustive check. */
static float f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_fp16_exhaustive(void) {
    int bad = 0;
    uint64_t h32 = QG_HASH0;
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const float f = mf_fp16_to_fp32(h);
        h32 = qg_hash(h32, &f, 4);
        const bool nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (nan) {
            /* quiet NaN carrying the payload, same sign (what ggml and F16C produce) */
            const uint32_t want = ((uint32_t)(h & 0x8000) << 16) | 0x7FC00000u | ((uint32_t)(h & 0x3FF) << 13);
            if (fbits(f) != want && bad++ < 5) CHECK(0, "h=0x%04x -> 0x%08x, want 0x%08x", h, fbits(f), want);
            const uint16_t back = mf_fp32_to_fp16(f);
            if (back != ((h & 0x8000) | 0x7E00) && bad++ < 5) CHECK(0, "NaN 0x%04x back to 0x%04x", h, back);
            continue;
        }
        const float want = ((h >> 10) & 31) == 31 ? ((h & 0x8000) ? -INFINITY : INFINITY) : f16_value(h);
        if (fbits(f) != fbits(want) && bad++ < 5) CHECK(0, "h=0x%04x -> %a, want %a", h, f, want);
        const uint16_t back = mf_fp32_to_fp16(f);
        if (back != h && bad++ < 5) CHECK(0, "round trip 0x%04x -> %a -> 0x%04x", h, f, back);
    }
    CHECK(bad == 0, "%d f16 values wrong", bad);
    uint64_t want;
    if (golden_hash("fp16_to_fp32", &want)) CHECK(h32 == want, "hash %016llx, ggml %016llx", (unsigned long long)h32,
                                                  (unsigned long long)want);
}

/* f32 -> f16 rounding against ggml over every upper half and the rounding-point lower halves, plus
 * spot checks that say which class broke. */
static void test_fp32_to_fp16(void) {
    CHECK(mf_fp32_to_fp16(65504.0f) == 0x7BFF, "max");
    CHECK(mf_fp32_to_fp16(65519.99f) == 0x7BFF, "just below the inf threshold");
    CHECK(mf_fp32_to_fp16(65520.0f) == 0x7C00, "tie at max rounds to inf");
    CHECK(mf_fp32_to_fp16(-1e30f) == 0xFC00, "-huge");
    CHECK(mf_fp32_to_fp16(INFINITY) == 0x7C00 && mf_fp32_to_fp16(-INFINITY) == 0xFC00, "inf");
    CHECK(mf_fp32_to_fp16(NAN) == 0x7E00 && mf_fp32_to_fp16(-NAN) == 0xFE00, "NaN canonical");
    CHECK(mf_fp32_to_fp16(0x1p-24f) == 0x0001, "min subnormal");
    CHECK(mf_fp32_to_fp16(0x1p-25f) == 0x0000, "half min subnormal ties to even 0");
    CHECK(mf_fp32_to_fp16(0x1.8p-24f) == 0x0002, "1.5 min subnormal ties to even 2");
    CHECK(mf_fp32_to_fp16(0x1.000002p-25f) == 0x0001, "just above half rounds up");
    CHECK(mf_fp32_to_fp16(0x1.ff8p-15f) == 0x03FF, "max subnormal");
    CHECK(mf_fp32_to_fp16(0x1.ffcp-15f) == 0x0400, "subnormal tie rounding into the min normal");
    CHECK(mf_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3C00, "tie to even (down)");
    CHECK(mf_fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02, "tie to even (up)");
    CHECK(mf_fp32_to_fp16(-0.0f) == 0x8000, "-0");
    uint64_t h16 = QG_HASH0, hb16 = QG_HASH0, hb32 = QG_HASH0;
    for (int i = 0; i < QG_NPROBE; i++) {
        const float f = qg_probe(i);
        const uint16_t h = mf_fp32_to_fp16(f), b = mf_fp32_to_bf16(f);
        h16 = qg_hash(h16, &h, 2);
        hb16 = qg_hash(hb16, &b, 2);
    }
    for (uint32_t i = 0; i < 65536; i++) {
        const float f = mf_bf16_to_fp32((uint16_t)i);
        hb32 = qg_hash(hb32, &f, 4);
        if (((i >> 7) & 0xFF) != 0xFF || !(i & 0x7F)) CHECK(mf_fp32_to_bf16(f) == i, "bf16 round trip 0x%04x", i);
    }
    uint64_t want;
    if (golden_hash("fp32_to_fp16", &want)) CHECK(h16 == want, "f32->f16 differs from ggml");
    if (golden_hash("fp32_to_bf16", &want)) CHECK(hb16 == want, "f32->bf16 differs from ggml");
    if (golden_hash("bf16_to_fp32", &want)) CHECK(hb32 == want, "bf16->f32 differs from ggml");
    CHECK(mf_fp32_to_bf16(1.0f + 0x1p-8f) == 0x3F80, "bf16 tie to even (down)");
    CHECK(mf_fp32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82, "bf16 tie to even (up)");
    float snan;
    uint32_t sb = 0x7F800001u;
    memcpy(&snan, &sb, 4);
    CHECK(mf_fp32_to_bf16(snan) == 0x7FC0, "bf16 quiets NaN by truncation | 64: got 0x%04x", mf_fp32_to_bf16(snan));
}

/* ---- dequantization ---- */

static void test_dequant_golden(void) {
    static uint8_t blocks[QG_N * 4];
    static float got[QG_N], want[QG_N];
    for (int i = 0; i < QG_NTYPES; i++) {
        const qg_type *t = &qg_types[i];
        char name[64];
        snprintf(name, sizeof name, "deq_%s.bin", t->name);
        if (!read_golden(name, want, sizeof want)) continue;
        qg_fill(t->type, 1, QG_N, blocks);
        int rc = mf_dequantize_row((uint32_t)t->type, blocks, got, QG_N);
        CHECK(rc == 0, "%s: rc %d", t->name, rc);
        int first = -1, nbad = 0;
        for (int j = 0; j < QG_N; j++)
            if (fbits(got[j]) != fbits(want[j])) nbad++, first = first < 0 ? j : first;
        CHECK(nbad == 0, "%s: %d of %d floats differ from ggml, first at %d: %a vs %a", t->name, nbad, QG_N, first,
              first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
    }
}

static void test_dequant_refusals(void) {
    float out[64];
    int32_t in[64] = {0};
    CHECK(mf_dequantize_row(MF_TYPE_I32, in, out, 64) == MF_E_UNSUPPORTED, "i32 is not a weight type");
    CHECK(mf_dequantize_row(MF_TYPE_Q4_0, in, out, 33) == MF_E_INVAL, "partial block");
    CHECK(mf_dequantize_row(4, in, out, 32) == MF_E_INVAL, "unknown id");
    CHECK(mf_quantize_row(MF_TYPE_Q4_K, (const float *)in, out, 256) == MF_E_UNSUPPORTED, "no q4_K quantizer");
    CHECK(mf_quantize_row(MF_TYPE_Q8_0, (const float *)in, out, 31) == MF_E_INVAL, "partial block");
}

/* ---- quantization ---- */

static bool bytes_equal(const char *what, const uint8_t *got, const uint8_t *want, size_t n) {
    for (size_t j = 0; j < n; j++) {
        if (got[j] != want[j]) {
            CHECK(0, "%s: byte %zu of %zu is 0x%02x, ggml has 0x%02x", what, j, n, got[j], want[j]);
            return false;
        }
    }
    return true;
}

static void test_quantize_ref_golden(void) {
    static float x[QG_NQ];
    static uint8_t got[QG_NQ * 4], want[QG_NQ * 4];
    qg_floats(2, QG_NQ, x);
    const uint32_t types[] = {MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q4_0, MF_TYPE_Q8_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const size_t sz = mf_row_size(types[i], QG_NQ);
        char name[64];
        snprintf(name, sizeof name, "quant_%s.bin", mf_type_name(types[i]));
        if (!read_golden(name, want, sz)) continue;
        memset(got, 0xCD, sizeof got);
        CHECK(mf_quantize_row(types[i], x, got, QG_NQ) == 0, "%s rc", name);
        bytes_equal(name, got, want, sz);
    }
}

/* The activation converters must produce the bytes ggml-cpu's x86 build produces (and, for Q8_0,
 * must differ from the _ref quantizer exactly on the round-half cases). */
static void test_from_float_golden(void) {
    static float x[QG_NQ];
    static uint8_t got[QG_NQ * 4], want[QG_NQ * 4], ref[QG_NQ * 4];
    qg_floats(2, QG_NQ, x);
    const struct { uint32_t weight, act; } pairs[] = {
        {MF_TYPE_F16, MF_TYPE_F16}, {MF_TYPE_BF16, MF_TYPE_BF16}, {MF_TYPE_Q4_0, MF_TYPE_Q8_0},
        {MF_TYPE_Q4_1, MF_TYPE_Q8_1}, {MF_TYPE_Q5_1, MF_TYPE_Q8_1}, {MF_TYPE_Q4_K, MF_TYPE_Q8_K},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const size_t sz = mf_row_size(pairs[i].act, QG_NQ);
        char name[64];
        snprintf(name, sizeof name, "act_%s.bin", mf_type_name(pairs[i].act));
        if (!read_golden(name, want, sz)) continue;
        for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(pairs[i].weight, (mf_isa)isa);
            if (!k) continue;
            CHECK(k->vec_dot_type == pairs[i].act, "%s: vec_dot_type %d", name, k->vec_dot_type);
            memset(got, 0xCD, sizeof got);
            k->from_float(x, got, QG_NQ);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", name, mf_isa_name((mf_isa)isa));
            bytes_equal(what, got, want, sz);
        }
    }
    const uint32_t cpu_types[] = {MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q8_K};
    for (size_t i = 0; i < sizeof cpu_types / sizeof cpu_types[0]; i++) {
        const size_t sz = mf_row_size(cpu_types[i], QG_NQ);
        char name[64];
        snprintf(name, sizeof name, "act_%s.bin", mf_type_name(cpu_types[i]));
        if (!read_golden(name, want, sz)) continue;
        memset(got, 0xCD, sizeof got);
        CHECK(mf_quantize_row_cpu(cpu_types[i], x, got, QG_NQ) == 0, "%s rc", name);
        bytes_equal(name, got, want, sz);
    }
    CHECK(mf_quantize_row_cpu(MF_TYPE_Q4_0, x, got, 32) == MF_E_UNSUPPORTED, "q4_0 is no run-time format");
    CHECK(mf_quantize_row(MF_TYPE_Q8_0, x, ref, QG_NQ) == 0, "q8_0 ref");
    read_golden("act_q8_0.bin", want, mf_row_size(MF_TYPE_Q8_0, QG_NQ));
    CHECK(memcmp(ref, want, mf_row_size(MF_TYPE_Q8_0, QG_NQ)) != 0,
          "the test floats must contain round-half cases that tell roundf from round-half-even");
}

/* ---- dot kernels ---- */

static const uint32_t k_weight_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0,   MF_TYPE_Q4_1,
                                          MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q4_K,   MF_TYPE_Q5_K,
                                          MF_TYPE_Q6_K, MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
#define N_WEIGHT_TYPES (sizeof k_weight_types / sizeof k_weight_types[0])

/* Exact-ish reference: both operands dequantized, products summed in double.  Also returns
 * sum |w*a|, the scale every tolerance below is relative to (cancellation makes |dot| useless). */
static double dot_reference(uint32_t wt, uint32_t at, const void *w, const void *a, int64_t n, double *mag) {
    float *fw = malloc((size_t)n * sizeof(float)), *fa = malloc((size_t)n * sizeof(float));
    double s = 0, m = 0;
    if (at == MF_TYPE_Q8_1) {
        /* the kernel takes the min term from the activation's stored s = d*sum(q) (an f16), not from
         * the quants: do the same, and dequantize the weight with its min zeroed */
        const size_t bs = mf_type_get(wt)->type_size;
        uint8_t *w0 = malloc(mf_row_size(wt, n));
        memcpy(w0, w, mf_row_size(wt, n));
        const mf_block_q8_1 *ab = a;
        for (int64_t b = 0; b < n / 32; b++) {
            uint16_t mh;
            memcpy(&mh, w0 + b * bs + 2, 2);
            s += (double)mf_fp16_to_fp32(mh) * mf_fp16_to_fp32(ab[b].s);
            m += fabs((double)mf_fp16_to_fp32(mh) * mf_fp16_to_fp32(ab[b].s));
            memset(w0 + b * bs + 2, 0, 2);
        }
        mf_dequantize_row(wt, w0, fw, n);
        free(w0);
    } else {
        mf_dequantize_row(wt, w, fw, n);
    }
    mf_dequantize_row(at, a, fa, n);
    for (int64_t i = 0; i < n; i++) {
        s += (double)fw[i] * fa[i];
        m += fabs((double)fw[i] * fa[i]);
    }
    free(fw);
    free(fa);
    *mag = m;
    return s;
}

static void test_kernels_table(void) {
    /* llama.cpp's vec_dot_type of each (ggml-cpu type traits): IQ4_NL pairs with Q8_0, the other K/IQ with Q8_K */
    const mf_type want_vdt[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q8_0, MF_TYPE_Q8_1,
                                MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q8_0, MF_TYPE_Q8_K, MF_TYPE_Q8_K,
                                MF_TYPE_Q8_K, MF_TYPE_Q8_K, MF_TYPE_Q8_K, MF_TYPE_Q8_0, MF_TYPE_Q8_K};
    _Static_assert(sizeof want_vdt / sizeof want_vdt[0] == N_WEIGHT_TYPES, "one vec_dot type per weight type");
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const mf_quant_kernels *k = mf_quant_kernels_get(k_weight_types[i]);
        REQUIRE(k && k->vec_dot && k->from_float, "%s has no kernels", mf_type_name(k_weight_types[i]));
        CHECK(k->vec_dot_type == want_vdt[i], "%s: vec_dot_type %s", mf_type_name(k_weight_types[i]),
              mf_type_name(k->vec_dot_type));
        CHECK(mf_quant_kernels_get_isa(k_weight_types[i], MF_ISA_SCALAR) != NULL, "scalar kernel for every weight type");
    }
    CHECK(mf_quant_kernels_get(MF_TYPE_Q8_K) == NULL && mf_quant_kernels_get(MF_TYPE_I32) == NULL &&
              mf_quant_kernels_get(1000) == NULL, "non-weight types have no kernels");
    CHECK(mf_quant_kernels_get_isa(MF_TYPE_Q4_0, (mf_isa)7) == NULL, "bad isa");
    /* the kernel sets of the build's architecture, and none of another's */
#if defined(__x86_64__)
    const mf_isa foreign = MF_ISA_NEON;
#else
    const mf_isa foreign = MF_ISA_AVX2;
    CHECK(mf_quant_kernels_get_isa(MF_TYPE_Q4_0, MF_ISA_AVX512) == NULL, "no AVX-512 kernels outside x86-64");
#endif
    CHECK(mf_quant_kernels_get_isa(MF_TYPE_Q4_0, foreign) == NULL, "no %s kernels in this build", mf_isa_name(foreign));
#if defined(__aarch64__)
    /* every aarch64 CPU has NEON: it is the best set, with its own kernel for each of these types */
    CHECK(mf_cpu_best_isa() == MF_ISA_NEON, "best isa %s on aarch64", mf_isa_name(mf_cpu_best_isa()));
    static const uint32_t neon_types[] = {MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0,   MF_TYPE_Q4_K,  MF_TYPE_Q6_K,
                                          MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof neon_types / sizeof neon_types[0]; i++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(neon_types[i], MF_ISA_NEON),
                               *ref = mf_quant_kernels_get_isa(neon_types[i], MF_ISA_SCALAR);
        CHECK(k && ref && k->vec_dot != ref->vec_dot, "%s has a NEON vec_dot", mf_type_name(neon_types[i]));
    }
#endif
    printf("  cpu best isa: %s, active: %s\n", mf_isa_name(mf_cpu_best_isa()), mf_isa_name(mf_quant_active_isa()));
}

/* Scalar kernels against the dequantized double-precision dot: the integer part is exact, so the
 * only error is the f32 fold of per-block terms (~n/32 roundings of 2^-24 relative each). */
static void test_dot_scalar_vs_dequant(void) {
    enum { N = 4096 };
    static uint8_t w[N * 4], a[N * 4];
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(k_weight_types[i], MF_ISA_SCALAR);
        for (uint64_t seed = 1; seed <= 4; seed++) {
            qg_fill((int)k_weight_types[i], seed, N, w);
            qg_fill((int)k->vec_dot_type, seed + 50, N, a);
            float s = 0;
            k->vec_dot(N, &s, w, a);
            double mag, ref = dot_reference(k_weight_types[i], k->vec_dot_type, w, a, N, &mag);
            CHECK(fabs(s - ref) <= 1e-5 * mag + 1e-30, "%s seed %llu: %.9g vs %.9g (mag %.3g)",
                  mf_type_name(k_weight_types[i]), (unsigned long long)seed, s, ref, mag);
        }
    }
}

/* Our from_float + vec_dot against llama.cpp's (haswell build) on the same floats and weights.
 * Activation bytes are identical (test_from_float_golden), integer sums are exact, so the only
 * difference is the float accumulation order: allow 2e-6 of sum |w*a| (observed worst 3.7e-7, the
 * scalar q6_K; an integer off by one in one element would show as ~1e-4). */
static void test_dot_llama_golden(void) {
    static float x[QG_DOT_N];
    static uint8_t w[QG_DOT_N * 4], a[QG_DOT_N * 4];
    qg_floats(3, QG_DOT_N, x);
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const uint32_t wt = k_weight_types[i];
        float want[QG_DOT_ROWS];
        char name[64];
        snprintf(name, sizeof name, "dot_%s.bin", mf_type_name(wt));
        if (!read_golden(name, want, sizeof want)) continue;
        for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(wt, (mf_isa)isa);
            if (!k) continue;
            k->from_float(x, a, QG_DOT_N);
            for (int r = 0; r < QG_DOT_ROWS; r++) {
                qg_fill((int)wt, 100 + (uint64_t)r, QG_DOT_N, w);
                float s;
                k->vec_dot(QG_DOT_N, &s, w, a);
                double mag;
                dot_reference(wt, k->vec_dot_type, w, a, QG_DOT_N, &mag);
                CHECK(fabs((double)s - want[r]) <= 2e-6 * mag + 1e-30, "%s %s row %d: %.9g, llama.cpp %.9g (mag %.3g)",
                      mf_type_name(wt), mf_isa_name((mf_isa)isa), r, s, want[r], mag);
            }
        }
    }
}

/* Types whose reference kernel itself is llama.cpp's AVX2 arithmetic lane by lane (dot_lowbit.c): every ISA,
 * scalar included, must give llama.cpp's bits, and every SIMD kernel the reference's. */
static bool lane_exact(uint32_t wt) {
    return wt == MF_TYPE_Q2_K || wt == MF_TYPE_Q3_K || wt == MF_TYPE_IQ4_NL || wt == MF_TYPE_IQ4_XS;
}

/* Types whose x86 kernels repeat llama.cpp's AVX2 kernels operation for operation: with the same
 * activation bytes the AVX2 (and the lane-identical VNNI) results must equal llama.cpp's exactly. */
static bool llama_exact(uint32_t wt) {
    return wt == MF_TYPE_F32 || wt == MF_TYPE_F16 || wt == MF_TYPE_Q4_0 || wt == MF_TYPE_Q4_1 || wt == MF_TYPE_Q5_0 ||
           wt == MF_TYPE_Q5_1 || wt == MF_TYPE_Q8_0 || wt == MF_TYPE_Q4_K || wt == MF_TYPE_Q5_K || wt == MF_TYPE_Q6_K ||
           lane_exact(wt);
}

static void test_dot_llama_exact(void) {
    static float x[QG_DOT_N];
    static uint8_t w[QG_DOT_N * 4], a[QG_DOT_N * 4];
    qg_floats(3, QG_DOT_N, x);
    int tested = 0;
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const uint32_t wt = k_weight_types[i];
        float want[QG_DOT_ROWS];
        char name[64];
        snprintf(name, sizeof name, "dot_%s.bin", mf_type_name(wt));
        if (!llama_exact(wt) || !read_golden(name, want, sizeof want)) continue;
        for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
            if (!lane_exact(wt) && isa != MF_ISA_AVX2 && !mf_isa_avx512((mf_isa)isa)) continue;
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(wt, (mf_isa)isa);
            if (!k) continue;
            k->from_float(x, a, QG_DOT_N);
            for (int r = 0; r < QG_DOT_ROWS; r++) {
                qg_fill((int)wt, 100 + (uint64_t)r, QG_DOT_N, w);
                float s;
                k->vec_dot(QG_DOT_N, &s, w, a);
                CHECK(fbits(s) == fbits(want[r]), "%s %s row %d: %a, llama.cpp %a", mf_type_name(wt),
                      mf_isa_name((mf_isa)isa), r, s, want[r]);
                tested++;
            }
        }
    }
    if (!tested) SKIP("this CPU has no AVX2");
}

/* BF16 x86 kernel: llama.cpp's order for a batch (tinyBLAS<8, __m256>: one 8-lane fma chain, hsum) when
 * n % 8 == 0, else ggml_vec_dot_bf16's AVX2 order (4 x 8 fma lanes, (c1 + c3) + (c2 + c4), hsum, the tail
 * in double), both replayed here in C.  Any other float order differs in some row's last bits. */
static float hsum8(const float *a) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static float bf16_dot_llama(const uint16_t *x, const uint16_t *y, int n) {
    float acc[4][8] = {{0}};
    if (n % 8 == 0) {
        for (int i = 0; i < n; i++) acc[0][i % 8] = fmaf(mf_bf16_to_fp32(x[i]), mf_bf16_to_fp32(y[i]), acc[0][i % 8]);
        return hsum8(acc[0]);
    }
    const int np = n & ~31;
    for (int i = 0; i < np; i++)
        acc[(i / 8) % 4][i % 8] = fmaf(mf_bf16_to_fp32(x[i]), mf_bf16_to_fp32(y[i]), acc[(i / 8) % 4][i % 8]);
    float c[8];
    for (int l = 0; l < 8; l++) c[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    double sum = hsum8(c);
    for (int i = np; i < n; i++) sum += (double)(mf_bf16_to_fp32(x[i]) * mf_bf16_to_fp32(y[i]));
    return (float)sum;
}

static void test_bf16_llama_order(void) {
    static uint16_t x[1024], y[1024];
    int tested = 0;
    for (int isa = MF_ISA_AVX2; isa <= MF_ISA_AVX512; isa++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(MF_TYPE_BF16, (mf_isa)isa);
        if (!k) continue;
        for (int n = 1024; n >= 1000; n -= 3) { /* multiples of 8 and not */
            for (int r = 0; r < 8; r++) {
                uint64_t st = 0x9E3779B97F4A7C15ull * (uint64_t)(n * 8 + r + 1);
                for (int i = 0; i < n; i++) {
                    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                    x[i] = (uint16_t)((st & 0x807F) | ((120 + (st >> 20) % 12) << 7));
                    y[i] = (uint16_t)(((st >> 32) & 0x807F) | ((120 + (st >> 40) % 12) << 7));
                }
                float s, want = bf16_dot_llama(x, y, n);
                k->vec_dot(n, &s, x, y);
                CHECK(fbits(s) == fbits(want), "bf16 %s n %d row %d: %a, llama.cpp's order %a",
                      mf_isa_name((mf_isa)isa), n, r, s, want);
                tested++;
            }
        }
    }
    if (!tested) SKIP("this CPU has no AVX2");
}

/* The Q5_K min term: llama.cpp's AVX2 kernel adds dmin * msum per super-block with one fma (gcc fuses
 * `summs += dmin * msum`; dmin = -d_a * dmin_w is a full float, so it matters).  Blocks with every scale 0
 * leave only that term, replayed here; the quant goldens cannot tell (their products are exact). */
static void test_q5_K_min_term_fused(void) {
    enum { NB = 4 };
    static mf_block_q5_K w[NB];
    static mf_block_q8_K a[NB];
    static float x[NB * 256];
    int tested = 0;
    for (int isa = MF_ISA_AVX2; isa <= MF_ISA_AVX512; isa++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(MF_TYPE_Q5_K, (mf_isa)isa);
        if (!k) continue;
        for (int r = 0; r < 16; r++) {
            uint64_t st = 0x2545F4914F6CDD1Dull * (uint64_t)(r + 1);
            for (int i = 0; i < NB * 256; i++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                x[i] = (float)((int64_t)(st >> 40) - (1 << 23)) / (float)(1 << 21);
            }
            k->from_float(x, a, NB * 256);
            float summs = 0.f;
            for (int b = 0; b < NB; b++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                memset(&w[b], 0, sizeof w[b]);
                w[b].d = mf_fp32_to_fp16(0.5f);
                w[b].dmin = mf_fp32_to_fp16(0.001f + (float)(st % 1000) * 1.37e-4f);
                const int m0 = 1 + (int)((st >> 20) % 63), m1 = 1 + (int)((st >> 30) % 15);
                for (int j = 0; j < 4; j++) w[b].scales[4 + j] = (uint8_t)m0, w[b].scales[8 + j] = (uint8_t)(m1 << 4);
                for (int j = 0; j < 128; j++) w[b].qs[j] = (uint8_t)(st >> (j % 56)); /* ignored: scales are 0 */
                int msum = 0;
                for (int sb = 0; sb < 8; sb++) msum += (sb < 4 ? m0 : m1) * (a[b].bsums[2 * sb] + a[b].bsums[2 * sb + 1]);
                summs = fmaf(-a[b].d * mf_fp16_to_fp32(w[b].dmin), (float)msum, summs);
            }
            float got;
            k->vec_dot(NB * 256, &got, w, a);
            CHECK(fbits(got) == fbits(summs), "q5_K %s row %d: %a, llama.cpp's fused min term %a",
                  mf_isa_name((mf_isa)isa), r, got, summs);
            tested++;
        }
    }
    if (!tested) SKIP("this CPU has no AVX2");
}

/* The IQ4 kernels with activation quants of -128 (which ggml's sign-then-maddubs leaves negative against a
 * negative level): every ISA must give llama.cpp's bits. */
static void test_dot_llama_m128(void) {
    static const uint32_t types[] = {MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
    static uint8_t w[QG_DOT_N * 4], a[QG_DOT_N * 4];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        float want[QG_DOT_ROWS];
        char name[64];
        snprintf(name, sizeof name, "dot_%s_m128.bin", mf_type_name(types[i]));
        if (!read_golden(name, want, sizeof want)) continue;
        for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(types[i], (mf_isa)isa);
            if (!k) continue;
            qg_fill_m128((int)k->vec_dot_type, 7, QG_DOT_N, a);
            for (int r = 0; r < QG_DOT_ROWS; r++) {
                qg_fill((int)types[i], 200 + (uint64_t)r, QG_DOT_N, w);
                float s;
                k->vec_dot(QG_DOT_N, &s, w, a);
                CHECK(fbits(s) == fbits(want[r]), "%s %s row %d: %a, llama.cpp %a", mf_type_name(types[i]),
                      mf_isa_name((mf_isa)isa), r, s, want[r]);
            }
        }
    }
}

/* IQ4_NL over 3 blocks: a pair, then ggml's scalar tail for the last one (an fma: a separate multiply and add
 * gives other bits here, where the tail is as large as the pair), at every ISA. */
static void test_dot_llama_iq4_nl_odd(void) {
    enum { N = 96 };
    static float x[N];
    static uint8_t w[N * 4], a[N * 4];
    float want[QG_DOT_ROWS];
    if (!read_golden("dot_iq4_nl_odd.bin", want, sizeof want)) return;
    qg_floats(3, N, x);
    for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(MF_TYPE_IQ4_NL, (mf_isa)isa);
        if (!k) continue;
        k->from_float(x, a, N);
        for (int r = 0; r < QG_DOT_ROWS; r++) {
            qg_fill(QG_IQ4_NL, 300 + (uint64_t)r, N, w);
            float s;
            k->vec_dot(N, &s, w, a);
            CHECK(fbits(s) == fbits(want[r]), "iq4_nl %s 3 blocks row %d: %a, llama.cpp %a", mf_isa_name((mf_isa)isa),
                  r, s, want[r]);
        }
    }
}

/* Every SIMD kernel against the scalar one, on random weights and on activations from from_float
 * and from random blocks.  Integer block sums are exact on both sides.  x86: only the float folding
 * differs (8 lanes + a final horizontal sum, vs one accumulator in block order; lane int32 -> f32
 * conversions can round above 2^24 for K formats), so allow 2e-6 of sum |w*a|, about 30 f32 ulps of the
 * magnitude.  NEON keeps the scalar folding, so there every result must be bitwise the scalar one, as must
 * every kernel of the lane_exact types on every ISA. */
static void test_isa_vs_scalar(void) {
    enum { N = 4096, NF = N + 32 }; /* float types also run n = N + 24 (vector leftovers) */
    static uint8_t w[NF * 4], a[NF * 4];
    static float x[NF];
    int tested = 0;
    for (int isa = MF_ISA_SCALAR + 1; isa < MF_ISA_COUNT; isa++) {
        for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
            const uint32_t wt = k_weight_types[i];
            const bool bitwise = isa == MF_ISA_NEON || lane_exact(wt);
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(wt, (mf_isa)isa);
            const mf_quant_kernels *ref = mf_quant_kernels_get_isa(wt, MF_ISA_SCALAR);
            if (!k) continue;
            const int nfill = mf_type_get(wt)->blck_size == 1 ? NF : N;
            for (uint64_t seed = 1; seed <= 6; seed++) {
                qg_fill((int)wt, seed, nfill, w);
                if (seed % 2) {
                    qg_floats(seed, nfill, x);
                    ref->from_float(x, a, nfill);
                } else {
                    qg_fill((int)k->vec_dot_type, seed + 50, nfill, a);
                }
                for (int64_t n = N; n >= 256; n /= 4) { /* lengths with and without F32/F16 leftovers */
                    const int64_t nn = mf_type_get(wt)->blck_size == 1 ? n + 24 : n;
                    float got = 0, want = 0;
                    k->vec_dot(nn, &got, w, a);
                    ref->vec_dot(nn, &want, w, a);
                    double mag;
                    dot_reference(wt, k->vec_dot_type, w, a, nn, &mag);
                    if (bitwise)
                        CHECK(fbits(got) == fbits(want), "%s %s seed %llu n %lld: %a, scalar %a (must be bitwise equal)",
                              mf_type_name(wt), mf_isa_name((mf_isa)isa), (unsigned long long)seed, (long long)nn, got, want);
                    else
                        CHECK(fabs((double)got - want) <= 2e-6 * mag + 1e-30, "%s %s seed %llu n %lld: %.9g vs scalar %.9g (mag %.3g)",
                              mf_type_name(wt), mf_isa_name((mf_isa)isa), (unsigned long long)seed, (long long)nn, got, want, mag);
                    tested++;
                }
            }
        }
    }
    if (!tested) SKIP("this CPU has no SIMD kernel set");
}

/* SIMD activation converters write the scalar converter's bytes on many float shapes. */
static void test_from_float_isa(void) {
    enum { N = 4096 };
    static float x[N];
    static uint8_t got[N * 4], want[N * 4];
    /* the x8 / x16 layouts' activations are q8_0s (the q8_0 bytes plus each block's quant sum) */
    const uint32_t wts[] = {MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_Q8_0, MF_TYPE_Q4_K, MF_TYPE_Q8_0_X8, MF_TYPE_Q8_0_X16};
    int tested = 0;
    for (int isa = MF_ISA_SCALAR + 1; isa < MF_ISA_COUNT; isa++) {
        for (size_t i = 0; i < sizeof wts / sizeof wts[0]; i++) {
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(wts[i], (mf_isa)isa);
            const mf_quant_kernels *ref = mf_quant_kernels_get_isa(wts[i], MF_ISA_SCALAR);
            if (!k) continue;
            REQUIRE(ref && ref->from_float, "%s has no scalar converter", mf_type_name(wts[i]));
            const size_t sz = mf_row_size(k->vec_dot_type, N);
            for (uint64_t seed = 10; seed < 20; seed++) {
                qg_floats(seed, N, x);
                if (seed == 11) /* ties in magnitude with opposite signs: the first one sets Q8_K's sign */
                    for (int j = 0; j < N; j++) x[j] = (j % 7 == 3) ? -2.5f : (j % 7 == 5) ? 2.5f : x[j] * 1e-3f;
                if (seed == 12 && k->vec_dot_type == MF_TYPE_BF16) /* every rounding case, NaN, inf, subnormals */
                    for (int j = 0; j < N; j++) x[j] = qg_probe(j * 157 % QG_NPROBE);
                memset(got, 0xAB, sz);
                memset(want, 0xCD, sz);
                k->from_float(x, got, N);
                ref->from_float(x, want, N);
                char what[96];
                snprintf(what, sizeof what, "%s from_float %s seed %llu", mf_type_name(k->vec_dot_type),
                         mf_isa_name((mf_isa)isa), (unsigned long long)seed);
                bytes_equal(what, got, want, sz);
                tested++;
            }
        }
    }
    if (!tested) SKIP("this CPU has no SIMD kernel set");
}

/* the tile variants a kernel set has: 0 its vec_dot_tile; with a vec_dot_tile_ok also 1 that one (for
 * activation rows act_ok accepted) and, on x86, 2 vec_dot_tile with vdpbf16ps turned off */
static int tile_variants(const mf_quant_kernels *k) {
    return k->vec_dot_tile_ok ? 3 : 1;
}

static mf_vec_dot_tile_fn tile_variant(const mf_quant_kernels *k, int v) {
#if defined(__x86_64__)
    mf_bf16_set_dp(v != 2);
#endif
    return v == 1 ? k->vec_dot_tile_ok : k->vec_dot_tile;
}

/* Tiles must give vec_dot's bits for every pair and every tile shape, on every ISA, and so must a kernel
 * set's vec_dot_tile_ok on rows its act_ok accepts.  The float types at two lengths: one their SIMD bodies
 * cover whole (1024: the F16 tile's steps of 32, the BF16 one's 8) and one they end with a tail
 * (1048 % 32 = 24) that the tiles hand to vec_dot. */
static void test_tile_bitwise(void) {
    int ok_tiles = 0;
    enum { N = 1024 + 32, NW = MF_TILE_MAX + 1, NA = MF_TILE_MAX + 1 }; /* every shape, at two offsets */
    static uint8_t w[NW][N * 4], a[NA][N * 4];
    static float x[N];
    for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
        for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
            const uint32_t wt = k_weight_types[t];
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(wt, (mf_isa)isa);
            if (!k) continue;
            REQUIRE(k->vec_dot_tile && k->tile_w >= 1 && k->tile_w <= MF_TILE_MAX && k->tile_a >= 1 &&
                        k->tile_a <= MF_TILE_MAX, "%s %s tile fields", mf_type_name(wt), mf_isa_name((mf_isa)isa));
            const bool flt = mf_type_get(wt)->blck_size == 1;
            for (int i = 0; i < NW; i++) qg_fill((int)wt, 300 + (uint64_t)i, flt ? N : 1024, w[i]);
            for (int j = 0; j < NA; j++) {
                qg_floats(400 + (uint64_t)j, N, x);
                k->from_float(x, a[j], flt ? N : 1024);
            }
            const int64_t lens[2] = {1024, N - 8};
            for (int l = 0; l < (flt ? 2 : 1); l++) {
                const int64_t n = lens[l];
                float want[NW][NA];
                for (int i = 0; i < NW; i++)
                    for (int j = 0; j < NA; j++) k->vec_dot(n, &want[i][j], w[i], a[j]);
                bool act_ok[NA];
                for (int j = 0; j < NA; j++) act_ok[j] = k->act_ok && k->act_ok(a[j], n);
                int bad = 0;
                for (int v = 0; v < tile_variants(k); v++) {
                    const mf_vec_dot_tile_fn tile = tile_variant(k, v);
                    for (int nw = 1; nw <= MF_TILE_MAX; nw++)
                        for (int na = 1; na <= MF_TILE_MAX; na++)
                            for (int i0 = 0; i0 + nw <= NW; i0 += NW - nw > 0 ? NW - nw : 1)
                                for (int j0 = 0; j0 + na <= NA; j0 += NA - na > 0 ? NA - na : 1) {
                                    bool ok = true;
                                    for (int j = 0; j < na; j++) ok = ok && act_ok[j0 + j];
                                    if (v == 1 && !ok) continue;
                                    ok_tiles += v == 1;
                                    float got[MF_TILE_MAX][MF_TILE_MAX + 1];
                                    memset(got, 0xFF, sizeof got);
                                    tile(n, &got[0][0], MF_TILE_MAX + 1, w[i0], sizeof w[0], nw, a[j0], sizeof a[0], na);
                                    for (int i = 0; i < nw; i++)
                                        for (int j = 0; j < na; j++)
                                            if (fbits(got[i][j]) != fbits(want[i0 + i][j0 + j]) && bad++ < 3)
                                                CHECK(0, "%s %s n=%lld tile%s %dx%d at (%d,%d): pair (%d,%d) %a, vec_dot %a",
                                                      mf_type_name(wt), mf_isa_name((mf_isa)isa), (long long)n,
                                                      v == 1 ? "_ok" : v == 2 ? " (no vdpbf16ps)" : "", nw, na, i0,
                                                      j0, i, j, got[i][j], want[i0 + i][j0 + j]);
                                }
                    (void)tile_variant(k, 0);
                }
                CHECK(bad == 0, "%s %s n=%lld: %d tile results differ from vec_dot", mf_type_name(wt),
                      mf_isa_name((mf_isa)isa), (long long)n, bad);
            }
        }
    }
    /* 0 where the CPU lacks vdpbf16ps: act_ok then accepts nothing */
    printf("  %d vec_dot_tile_ok calls checked\n", ok_tiles);
}

/* The AVX-512 BF16 tile adds two products per instruction where the CPU has vdpbf16ps, which reads
 * denormal inputs as zero and flushes denormal results; it must notice inputs that could make either
 * happen (nonzero and below 2^-56) and give vec_dot's bits anyway.  Three ways to get there, each in two
 * weight rows and one activation row: denormal weights against huge activations (DAZ on a weight), the
 * reverse (DAZ on an activation: only the activation check sees it), and tiny normal values on both sides
 * whose products are denormal (FTZ); at a length with the 8-element tail too. */
static void test_bf16_tile_tiny_inputs_keep_vec_dot_bits(void) {
    enum { N = 1032, R = 8 };
    static uint16_t w[R][N], a[R][N];
    static float x[N];
    const float wscale[3] = {1e-39f, 1e30f, 1e-20f}, ascale[3] = {1e30f, 1e-39f, 1e-20f};
    int tested = 0;
    for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(MF_TYPE_BF16, (mf_isa)isa);
        if (!k) continue;
        for (int c = 0; c < 3; c++) {
            for (int i = 0; i < R; i++) { /* weight rows 1 and 6 scaled, the others plain */
                qg_floats(700 + (uint64_t)i, N, x);
                for (int e = 0; e < N; e++) w[i][e] = mf_fp32_to_bf16(i == 1 || i == 6 ? x[e] * wscale[c] : x[e]);
            }
            for (int j = 0; j < R; j++) { /* activation row 3 scaled */
                qg_floats(800 + (uint64_t)j, N, x);
                for (int e = 0; e < N; e++) a[j][e] = mf_fp32_to_bf16(j == 3 ? x[e] * ascale[c] : x[e]);
            }
            for (int l = 0; l < 2; l++) {
                const int64_t n = l ? N : N - 8;
                float got[R][R], want[R][R];
                k->vec_dot_tile(n, &got[0][0], R, w, sizeof w[0], R, a, sizeof a[0], R);
                int bad = 0;
                for (int i = 0; i < R; i++)
                    for (int j = 0; j < R; j++) {
                        k->vec_dot(n, &want[i][j], w[i], a[j]);
                        if (fbits(got[i][j]) != fbits(want[i][j]) && bad++ < 3)
                            CHECK(0, "bf16 %s case %d n=%lld pair (%d,%d): tile %a, vec_dot %a", mf_isa_name((mf_isa)isa),
                                  c, (long long)n, i, j, got[i][j], want[i][j]);
                    }
                CHECK(bad == 0, "bf16 %s case %d n=%lld: %d of %d tile results differ from vec_dot",
                      mf_isa_name((mf_isa)isa), c, (long long)n, bad, R * R);
                tested++;
            }
        }
    }
    if (!tested) SKIP("no BF16 kernels");
}

/* act_ok (the per-row check the matmul makes once, so the BF16 tile need not) accepts exactly the rows
 * with no nonzero word below 2^-56: zero and +-2^-56 itself pass, the next word down and the denormals
 * fail wherever they sit (first word, inside a 32-word step, the last word of a tail). */
static void test_bf16_act_ok_bound(void) {
    enum { N = 1032 };
    static uint16_t row[N];
    int tested = 0;
    for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(MF_TYPE_BF16, (mf_isa)isa);
        if (!k || !k->act_ok) continue;
        for (int e = 0; e < N; e++) row[e] = 0x3F80; /* 1.0 */
        if (!k->act_ok(row, N)) continue;            /* no vdpbf16ps here: act_ok accepts nothing */
        for (int e = 0; e < N; e++) row[e] = e % 3 == 0 ? 0 : e % 3 == 1 ? 0x2380 : 0xA380;
        CHECK(k->act_ok(row, N), "%s: a row of zeros and +-2^-56 refused", mf_isa_name((mf_isa)isa));
        static const uint16_t tiny[] = {0x237F, 0xA37F, 0x0001, 0x8001, 0x0080};
        static const int at[] = {0, 5, 31, 32, N - 1};
        for (size_t t = 0; t < MF_ARRAY_LEN(tiny); t++)
            for (size_t p = 0; p < MF_ARRAY_LEN(at); p++) {
                const uint16_t keep = row[at[p]];
                row[at[p]] = tiny[t];
                CHECK(!k->act_ok(row, N), "%s: word 0x%04x at %d accepted", mf_isa_name((mf_isa)isa), tiny[t], at[p]);
                row[at[p]] = keep;
            }
        tested++;
    }
    if (!tested) SKIP("no BF16 kernel set with vdpbf16ps on this CPU");
}

/* The Q8_0-family tiles convert scales in chunks of blocks: lengths across chunk edges and not a multiple
 * of 8 blocks must still give vec_dot's bits, as must a lone activation row (the M = 1 path).  IQ4_NL's
 * tile runs vec_dot's even/odd block chains and its scalar tail: odd block counts reach that tail. */
static void test_tile_bitwise_lengths(void) {
    enum { NB = 200, QK = 32, NW = 4, NA = 4 };
    static const int64_t lens[] = {QK, 3 * QK, 8 * QK, 63 * QK, 64 * QK, 65 * QK, 67 * QK, 130 * QK, NB * QK};
    static const uint32_t types[] = {MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0, MF_TYPE_IQ4_NL};
    static uint8_t w[NW][NB * 34], a[NA][NB * 34];
    static float x[NB * QK];
    for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const mf_quant_kernels *k = mf_quant_kernels_get_isa(types[t], (mf_isa)isa);
            if (!k) continue;
            for (int i = 0; i < NW; i++) qg_fill((int)types[t], 900 + (uint64_t)i, NB * QK, w[i]);
            for (int j = 0; j < NA; j++) {
                qg_floats(950 + (uint64_t)j, NB * QK, x);
                k->from_float(x, a[j], NB * QK);
            }
            int bad = 0;
            const int nw = k->tile_w < NW ? k->tile_w : NW; /* the tile's own shape, so its kernel runs */
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                const int64_t n = lens[l];
                for (int na = 1; na <= NA; na++) {
                    float got[NW][NA + 1];
                    k->vec_dot_tile(n, &got[0][0], NA + 1, w[0], sizeof w[0], nw, a[0], sizeof a[0], na);
                    for (int i = 0; i < nw; i++)
                        for (int j = 0; j < na; j++) {
                            float want;
                            k->vec_dot(n, &want, w[i], a[j]);
                            if (fbits(got[i][j]) != fbits(want) && bad++ < 3)
                                CHECK(0, "%s %s n=%lld tile %dx%d pair (%d,%d) %a, vec_dot %a", mf_type_name(types[t]),
                                      mf_isa_name((mf_isa)isa), (long long)n, nw, na, i, j, got[i][j], want);
                        }
                }
            }
            CHECK(bad == 0, "%s %s: %d results differ", mf_type_name(types[t]), mf_isa_name((mf_isa)isa), bad);
        }
    }
}

/* The x8 layouts (load-time repacking): round trip, the refusals, the reference kernel against the plain
 * dot in double, and every ISA's kernel bitwise equal to the reference for every activation count (so
 * M = 1 and batched prefill give the same bits), over lengths across the kernels' unrolled edges. */
static void test_x8_repack_and_kernels(void) {
    enum { NR = 80, KMAX = 4864, NA = 9 }; /* 80 rows: 5 x16 groups, so a span has a GEMV's 4 and a rest */
    static const uint32_t types[] = {MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0, MF_TYPE_IQ4_NL, MF_TYPE_Q4_K,
                                     MF_TYPE_Q5_K, MF_TYPE_Q6_K, MF_TYPE_IQ4_XS};
    static const int64_t lens[] = {32, 96, 896, KMAX}, lens_k[] = {256, 768, KMAX}; /* K types: 256-blocks */
    /* 34 bytes per 32 quants: the largest of the blocks (q8_0; q4_K has 18, q6_K 26.25) */
    static uint8_t w[NR * (KMAX / 32) * 34], wx[NR * (KMAX / 32) * 34], row[(KMAX / 32) * 34];
    /* activations: q8_0, q8_0s (36-byte blocks of 32) or q8_K (292 bytes per 256 = 36.5 per 32) */
    static uint8_t a[NA][(KMAX / 32) * 37];
    static float x[KMAX], wd[KMAX], ad[KMAX];
    CHECK(mf_repack_type(MF_TYPE_Q4_0, 64, 12) == MF_TYPE_Q4_0, "N %% 8 != 0 has no x8 layout");
    CHECK(mf_repack_type(MF_TYPE_Q8_0, 48, 16) == MF_TYPE_Q8_0, "K %% 32 != 0 has no x8 layout");
    CHECK(mf_repack_type(MF_TYPE_Q4_K, 128, 16) == MF_TYPE_Q4_K, "K %% 256 != 0 has no q4_K x8 layout");
    CHECK(mf_repack_type(MF_TYPE_Q3_K, 256, 16) == MF_TYPE_Q3_K, "q3_K has no x8 layout");
    CHECK(mf_repack(MF_TYPE_Q3_K, w, wx, 256, 16) == MF_E_INVAL, "mf_repack refuses a type without a layout");
    CHECK(mf_unpack_row(MF_TYPE_Q4_K, w, row, 256, 0) == MF_E_INVAL, "mf_unpack_row refuses a file type");
    CHECK(mf_type_get_file(MF_TYPE_Q8_0S) == NULL && mf_type_get(MF_TYPE_Q8_0S) != NULL,
          "q8_0s (activations with block sums) is internal");
    static const uint32_t x8s[] = {MF_TYPE_Q4_0_X8, MF_TYPE_Q5_0_X8, MF_TYPE_Q8_0_X8, MF_TYPE_IQ4_NL_X8,
                                   MF_TYPE_Q4_K_X8, MF_TYPE_Q5_K_X8, MF_TYPE_Q6_K_X8, MF_TYPE_IQ4_XS_X8};
    for (size_t t = 0; t < sizeof x8s / sizeof x8s[0]; t++)
        CHECK(mf_type_get_file(x8s[t]) == NULL && mf_type_get(x8s[t]) &&
                  mf_type_get(x8s[t])->row_group == MF_X8_ROWS,
              "x8 type %u is known but never a file type", x8s[t]);
    static const uint32_t x16s[] = {MF_TYPE_Q4_0_X16, MF_TYPE_Q5_0_X16, MF_TYPE_Q8_0_X16, MF_TYPE_IQ4_NL_X16};
    for (size_t t = 0; t < sizeof x16s / sizeof x16s[0]; t++)
        CHECK(mf_type_get_file(x16s[t]) == NULL && mf_type_get(x16s[t]) &&
                  mf_type_get(x16s[t])->row_group == MF_X16_ROWS,
              "x16 type %u is known but never a file type", x16s[t]);
    CHECK(mf_repack_type_rows(MF_TYPE_Q8_0, 64, 24, MF_X16_ROWS) == MF_TYPE_Q8_0, "N %% 16 != 0 has no x16 layout");
    CHECK(mf_repack_type_rows(MF_TYPE_Q4_K, 256, 32, MF_X16_ROWS) == MF_TYPE_Q4_K, "q4_K has no x16 layout");
    CHECK(mf_repack_as(MF_TYPE_Q8_0_X16, MF_TYPE_Q4_0, w, wx, 64, 32) == MF_E_INVAL, "mf_repack_as refuses a foreign layout");
#if defined(__x86_64__)
    CHECK(mf_repack_type(MF_TYPE_Q8_0, 64, 32) ==
              (mf_quant_active_isa() == MF_ISA_SCALAR      ? MF_TYPE_Q8_0
               : mf_isa_avx512(mf_quant_active_isa()) ? MF_TYPE_Q8_0_X16
                                                          : MF_TYPE_Q8_0_X8),
          "x16 layouts exactly when AVX-512 is active, none under the scalar kernels");
#else
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        CHECK(mf_repack_type(types[t], 256, 32) == types[t], "%s: only x86-64 builds repack", mf_type_name(types[t]));
#endif
    for (size_t t = 0; t < 2 * sizeof types / sizeof types[0]; t++) {
        const int R = t < sizeof types / sizeof types[0] ? MF_X8_ROWS : MF_X16_ROWS;
        const uint32_t bt = types[t % (sizeof types / sizeof types[0])], xt = mf_repack_type_rows(bt, KMAX, NR, R);
        if (R == MF_X16_ROWS && mf_type_get(bt)->blck_size == MF_QK_K) continue; /* no x16 K layouts */
        REQUIRE(xt != bt && mf_repack_base(xt) == bt && mf_type_get(xt)->row_group == R, "%s has an x%d layout",
                mf_type_name(bt), R);
        const bool kq = mf_type_get(bt)->blck_size == MF_QK_K;
        const size_t nlens = kq ? sizeof lens_k / sizeof lens_k[0] : sizeof lens / sizeof lens[0];
        for (size_t l = 0; l < nlens; l++) {
            const int64_t K = kq ? lens_k[l] : lens[l];
            REQUIRE(mf_row_size(bt, K) * NR <= sizeof w && mf_row_size(MF_TYPE_Q8_K, K) <= sizeof a[0],
                    "buffers fit K=%lld", (long long)K);
            const size_t rs = mf_row_size(bt, K);
            for (int r = 0; r < NR; r++) qg_fill((int)bt, 700 + (uint64_t)r, (int)K, w + (size_t)r * rs);
            REQUIRE_OK(mf_repack_as(xt, bt, w, wx, K, NR), "repack %s K=%lld", mf_type_name(xt), (long long)K);
            int bad = 0;
            for (int r = 0; r < NR; r++) {
                REQUIRE_OK(mf_unpack_row(xt, wx, row, K, r), "unpack");
                if (memcmp(row, w + (size_t)r * rs, rs) && bad++ < 3) CHECK(0, "%s K=%lld row %d round trip", mf_type_name(xt), (long long)K, r);
            }
            const mf_quant_kernels *ref = mf_quant_kernels_get_isa(xt, MF_ISA_SCALAR);
            REQUIRE(ref && !ref->vec_dot && ref->vec_dot_tile && ref->tile_w == R && ref->act_major &&
                        ref->vec_dot_type == (kq ? MF_TYPE_Q8_K : MF_TYPE_Q8_0S),
                    "%s kernel fields", mf_type_name(xt));
            for (int j = 0; j < NA; j++) {
                qg_floats(800 + (uint64_t)j, (int)K, x);
                ref->from_float(x, a[j], K);
            }
            const size_t as = sizeof a[0];
            float want[MF_X16_ROWS][NA];
            static float want_all[NR][NA];
            /* the reference: each row of each group against each activation, one at a time */
            for (int g = 0; g < NR / R; g++) {
                const uint8_t *grp = wx + (size_t)g * R * rs;
                for (int j = 0; j < NA; j++) {
                    float s1[MF_X16_ROWS];
                    ref->vec_dot_tile(K, s1, 1, grp, rs, R, a[j], as, 1);
                    for (int r = 0; r < R; r++) want[r][j] = want_all[g * R + r][j] = s1[r];
                }
                /* against the plain dot product in double: float rounding only */
                for (int r = 0; r < R; r++)
                    for (int j = 0; j < NA; j++) {
                        mf_dequantize_row(bt, w + (size_t)(g * R + r) * rs, wd, K);
                        mf_dequantize_row(ref->vec_dot_type, a[j], ad, K);
                        double d = 0, mag = 0;
                        for (int64_t i = 0; i < K; i++) d += (double)wd[i] * ad[i], mag += fabs((double)wd[i] * ad[i]);
                        if (!(fabs(want[r][j] - d) <= 1e-5 * mag + 1e-30) && bad++ < 3)
                            CHECK(0, "%s K=%lld group %d row %d act %d: %g, dequantized dot %g (mag %g)", mf_type_name(xt),
                                  (long long)K, g, r, j, want[r][j], d, mag);
                    }
                for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
                    const mf_quant_kernels *k = mf_quant_kernels_get_isa(xt, (mf_isa)isa);
                    if (!k) continue;
                    for (int na = 1; na <= NA; na++) {
                        float got[NA][MF_X16_ROWS + 1]; /* act_major: s[j * ldc + r] */
                        memset(got, 0xFF, sizeof got);
                        k->vec_dot_tile(K, &got[0][0], MF_X16_ROWS + 1, grp, rs, R, a[0], as, na);
                        for (int r = 0; r < R; r++)
                            for (int j = 0; j < na; j++)
                                if (fbits(got[j][r]) != fbits(want[r][j]) && bad++ < 3)
                                    CHECK(0, "%s %s K=%lld na=%d (row %d, act %d): %a, reference %a", mf_type_name(xt),
                                          mf_isa_name((mf_isa)isa), (long long)K, na, r, j, got[j][r], want[r][j]);
                    }
                }
            }
            /* every group in one call (a span: decode's GEMV streams several groups side by side, then the
             * rest one by one), every activation count: each row still the reference's bits, and the column
             * past the span untouched */
            for (int isa = 0; isa < MF_ISA_COUNT; isa++) {
                const mf_quant_kernels *k = mf_quant_kernels_get_isa(xt, (mf_isa)isa);
                if (!k) continue;
                /* spans: the x16 layouts (the GEMV), and the AMX set's K-quant x8 tiles (two groups a pass) */
                const bool amx_k = isa == MF_ISA_AMX && (xt == MF_TYPE_Q4_K_X8 || xt == MF_TYPE_Q5_K_X8 ||
                                                         xt == MF_TYPE_Q6_K_X8);
                CHECK(k->spans == (R == MF_X16_ROWS || amx_k),
                      "%s %s: spans exactly for the x16 layouts and the AMX K-quant x8 tiles", mf_type_name(xt),
                      mf_isa_name((mf_isa)isa));
                if (!k->spans) continue;
                for (int streams = 1; streams <= 4; streams += 3) { /* the GEMV with 1 and with 4 streams */
#if defined(__x86_64__)
                    mf_x16_set_gemv_groups(streams);
#endif
                    for (int na = 1; na <= NA; na++) {
                        static float got[NA][NR + 1];
                        memset(got, 0xFF, sizeof got);
                        k->vec_dot_tile(K, &got[0][0], NR + 1, wx, rs, NR, a[0], as, na);
                        for (int j = 0; j < NA; j++)
                            for (int r = 0; r <= NR; r++) {
                                const bool in = j < na && r < NR;
                                if ((in ? fbits(got[j][r]) != fbits(want_all[r][j])
                                        : fbits(got[j][r]) != 0xFFFFFFFFu) &&
                                    bad++ < 3)
                                    CHECK(0, "%s %s (%d GEMV streams) K=%lld span of %d rows, na=%d (row %d, act %d): "
                                          "%a, reference %a", mf_type_name(xt), mf_isa_name((mf_isa)isa), streams,
                                          (long long)K, NR, na, r, j, got[j][r], in ? want_all[r][j] : NAN);
                            }
                    }
                }
            }
#if defined(__x86_64__)
            mf_x16_set_gemv_groups(0);
#endif
            CHECK(bad == 0, "%s K=%lld: %d mismatches", mf_type_name(xt), (long long)K, bad);
        }
    }
}

/* The AMX tile kernels (the x16 layouts, q4_Kx8, q5_Kx8 and q6_Kx8) bitwise equal to the reference for every
 * activation count from 1 (they hand fewer than 8 to the AVX-512 kernels) through partial, full and several
 * 16-row tiles up to more than the kernel's tile_a (128: it loops), over K across the kernels' chunks of K
 * (16 blocks, 2 super-blocks); rows past na and the columns between nw and ldc stay untouched.  The x8 ones
 * take spans of groups, two a pass: 4 groups, 3 from the second (a pair and a single), 1.  Also from a second
 * thread: the tile config is per thread, so a kernel that loaded it only once per process fails there. */
enum { AMX_NR = 32, AMX_KMAX = 4864, AMX_NA = 140, AMX_LDC = 35 };
static uint8_t amx_w[AMX_NR * (AMX_KMAX / 32) * 34], amx_wx[AMX_NR * (AMX_KMAX / 32) * 34];
static uint8_t amx_a[AMX_NA][(AMX_KMAX / 256) * sizeof(mf_block_q8_K)];
static float amx_want[AMX_NA][AMX_NR], amx_got[AMX_NA + 1][AMX_LDC];

typedef struct {
    const mf_quant_kernels *k;
    int64_t K;
    const uint8_t *grp;
    int nw, na;
} amx_case;

static void *amx_run(void *p) {
    amx_case *c = p;
    memset(amx_got, 0xFF, sizeof amx_got);
    c->k->vec_dot_tile(c->K, &amx_got[0][0], AMX_LDC, c->grp, 0, c->nw, amx_a[0], sizeof amx_a[0], c->na);
    return NULL;
}

/* The packed path (a matmul packs its M converted rows once, in any order, then calls tile_packed on rows
 * [m0, m0 + na) for m0 a multiple of 16): the same bits as vec_dot_tile for every M from the tiles' minimum,
 * every slab start and short and long na, both groups; the padding of the last slab is never stored. */
static void amx_check_packed(const mf_quant_kernels *k, uint32_t xt, int64_t K, int *bad) {
    static const int Ms[] = {8, 9, 17, 33, 128, 129, 140};
    static uint8_t pk[((AMX_NA + 15) / 16) * 16 * (AMX_KMAX / 32) * 36];
    const size_t rs = mf_row_size(mf_repack_base(xt), K);
    CHECK(k->pack_size(K, 7) == 0, "%s: 7 rows are not packed (below the tiles' minimum)", mf_type_name(xt));
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        const int M = Ms[mi];
        const size_t need = k->pack_size(K, M);
        REQUIRE(need > 0 && need <= sizeof pk, "%s M=%d: pack_size %zu fits", mf_type_name(xt), M, need);
        memset(pk, 0xA5, need);
        for (int m = M - 1; m >= 0; m--) k->pack_row(amx_a[m], K, m, M, pk); /* last row first */
        for (int m0 = 0; m0 < M; m0 += 16) {
            const int nas[] = {M - m0 < 128 ? M - m0 : 128, 1, 7};
            for (int q = 0; q < 3; q++) {
                const int na = MF_MIN(nas[q], M - m0);
                memset(amx_got, 0xFF, sizeof amx_got);
                k->tile_packed(K, &amx_got[0][0], AMX_LDC, amx_wx, rs, AMX_NR, pk, M, m0, na);
                for (int j = 0; j <= AMX_NA; j++)
                    for (int r = 0; r < AMX_LDC; r++) {
                        const bool in = j < na && r < AMX_NR;
                        const uint32_t gb = fbits(amx_got[j][r]);
                        if ((in ? gb != fbits(amx_want[m0 + j][r]) : gb != 0xFFFFFFFFu) && (*bad)++ < 3)
                            CHECK(0, "%s K=%lld packed M=%d m0=%d na=%d: act %d row %d %a, reference %a",
                                  mf_type_name(xt), (long long)K, M, m0, na, j, r, amx_got[j][r],
                                  in ? amx_want[m0 + j][r] : NAN);
                    }
            }
        }
    }
}

static void amx_check(const mf_quant_kernels *(*get)(uint32_t xt)) {
    static const struct {
        uint32_t type;
        int rows;         /* the layout's group */
        int64_t lens[6];  /* 0-terminated */
        int calls[4][2];  /* {first row, nw}, nw 0 ends */
    } types[] = {
        {MF_TYPE_Q4_0, MF_X16_ROWS, {32, 96, 512, 544, 896, AMX_KMAX}, {{0, 16}, {16, 16}}},
        {MF_TYPE_Q5_0, MF_X16_ROWS, {32, 96, 512, 544, 896, AMX_KMAX}, {{0, 16}, {16, 16}}},
        {MF_TYPE_Q8_0, MF_X16_ROWS, {32, 96, 512, 544, 896, AMX_KMAX}, {{0, 16}, {16, 16}}},
        {MF_TYPE_IQ4_NL, MF_X16_ROWS, {32, 96, 512, 544, 896, AMX_KMAX}, {{0, 16}, {16, 16}}},
        {MF_TYPE_Q4_K, MF_X8_ROWS, {256, 512, 768, AMX_KMAX}, {{0, 32}, {8, 24}, {24, 8}}},
        {MF_TYPE_Q5_K, MF_X8_ROWS, {256, 512, 768, AMX_KMAX}, {{0, 32}, {8, 24}, {24, 8}}},
        {MF_TYPE_Q6_K, MF_X8_ROWS, {256, 512, 768, AMX_KMAX}, {{0, 32}, {8, 24}, {24, 8}}},
    };
    static const int nas[] = {1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 23, 31, 32, 33, 47, 48, 49, 63, 64, 65, 70, 127, 128, 129, 140};
    static float x[AMX_KMAX];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t ft = types[t].type, xt = mf_repack_type_rows(ft, AMX_KMAX, AMX_NR, types[t].rows);
        const mf_quant_kernels *k = get(xt), *ref = mf_quant_kernels_get_isa(xt, MF_ISA_SCALAR);
        REQUIRE(k && ref && k->act_major && k->spans && k->tile_w == types[t].rows && k->tile_a > MF_TILE_MAX &&
                    k->tile_a < 140 && k->vec_dot_type == ref->vec_dot_type &&
                    k->vec_dot_tile != mf_quant_kernels_get_isa(xt, MF_ISA_AVX512)->vec_dot_tile,
                "%s has its own AMX kernel", mf_type_name(xt));
        for (int l = 0; l < 6 && types[t].lens[l]; l++) {
            const int64_t K = types[t].lens[l];
            const size_t rs = mf_row_size(ft, K);
            for (int r = 0; r < AMX_NR; r++) qg_fill((int)ft, 1100 + (uint64_t)r + 7 * (uint64_t)l, (int)K, amx_w + (size_t)r * rs);
            REQUIRE_OK(mf_repack_as(xt, ft, amx_w, amx_wx, K, AMX_NR), "repack %s", mf_type_name(xt));
            for (int j = 0; j < AMX_NA; j++) {
                qg_floats(1200 + (uint64_t)j, (int)K, x);
                if (j == 3) /* saturated quants: the largest block sums */
                    for (int64_t i = 0; i < K; i++) x[i] = i % 3 ? 1.0f : -1.0f;
                ref->from_float(x, amx_a[j], K);
            }
            for (int r0 = 0; r0 < AMX_NR; r0 += types[t].rows)
                for (int j = 0; j < AMX_NA; j++) {
                    float s1[MF_X16_ROWS];
                    ref->vec_dot_tile(K, s1, 1, amx_wx + (size_t)r0 * rs, rs, types[t].rows, amx_a[j], sizeof amx_a[0], 1);
                    for (int r = 0; r < types[t].rows; r++) amx_want[j][r0 + r] = s1[r];
                }
            int bad = 0;
            for (int ci = 0; ci < 4 && types[t].calls[ci][1]; ci++) {
                const int r0 = types[t].calls[ci][0];
                for (size_t q = 0; q < sizeof nas / sizeof nas[0]; q++) {
                    amx_case c = {k, K, amx_wx + (size_t)r0 * rs, types[t].calls[ci][1], nas[q]};
                    pthread_t th;
                    const bool threaded = q % 4 == 1; /* every fourth count from a fresh thread */
                    if (threaded) {
                        REQUIRE(pthread_create(&th, NULL, amx_run, &c) == 0, "pthread_create");
                        pthread_join(th, NULL);
                    } else {
                        amx_run(&c);
                    }
                    char why[200];
                    const int faults = mf_amx_emu_faults(why, sizeof why);
                    if (faults && bad++ < 3)
                        CHECK(0, "%s K=%lld na=%d: %d tile faults, the first: %s", mf_type_name(xt), (long long)K, c.na,
                              faults, why);
                    for (int j = 0; j <= AMX_NA; j++)
                        for (int r = 0; r < AMX_LDC; r++) {
                            const bool in = j < c.na && r < c.nw;
                            const uint32_t gb = fbits(amx_got[j][r]);
                            if ((in ? gb != fbits(amx_want[j][r0 + r]) : gb != 0xFFFFFFFFu) && bad++ < 3)
                                CHECK(0, "%s K=%lld rows %d..%d na=%d%s: act %d row %d %a, reference %a", mf_type_name(xt),
                                      (long long)K, r0, r0 + c.nw - 1, c.na, threaded ? " (new thread)" : "", j, r0 + r,
                                      amx_got[j][r], in ? amx_want[j][r0 + r] : NAN);
                        }
                }
            }
            if (k->tile_packed) amx_check_packed(k, xt, K, &bad);
            CHECK(bad == 0, "%s K=%lld: %d mismatches", mf_type_name(xt), (long long)K, bad);
        }
    }
}

static const mf_quant_kernels *amx_real(uint32_t xt) { return mf_quant_kernels_get_isa(xt, MF_ISA_AMX); }

static void test_amx_kernels(void) {
    if (!mf_quant_kernels_get_isa(MF_TYPE_Q8_0_X16, MF_ISA_AMX))
        SKIP("AMX is not usable here (the CPU lacks AMX-INT8 or the OS refused the tile state; MINFER_LOG=info says which)");
    CHECK(mf_cpu_best_isa() == MF_ISA_AMX, "AMX usable, so it is the best set (got %s)", mf_isa_name(mf_cpu_best_isa()));
    amx_check(amx_real);
}

/* The same kernels compiled over tests/support/amx_emu.c's model of the tiles: their logic held to the
 * reference on every AVX-512 machine, and a tile shape the hardware would trap on is a failure here too. */
static void test_amx_kernels_emulated(void) {
    if (!mf_amx_emu_kernels(MF_TYPE_Q8_0_X16))
        SKIP("the emulated AMX kernels unpack and scale with AVX-512, which this CPU lacks");
    amx_check(mf_amx_emu_kernels);
}

/* mf_quant_dot_rows (attention scores: one K row against many queries) gives the F32 and F16 vec_dot bits */
static void test_dot_rows(void) {
    mf_dot_rows_fn f = mf_quant_dot_rows();
    if (!f) SKIP("no dot_rows kernel at ISA %s", mf_isa_name(mf_quant_active_isa()));
    enum { N = 128, NQ = 7 };
    static float k[N], q[NQ][N + 8], out[NQ];
    static uint16_t kh[N], qh[NQ][N];
    qg_floats(31, N, k);
    for (int i = 0; i < NQ; i++) qg_floats(32 + (uint64_t)i, N, q[i]);
    int bad = 0;
    for (int64_t n = 32; n <= N; n += 32) {
        f(n, k, &q[0][0], N + 8, NQ, out);
        for (int i = 0; i < NQ; i++) {
            float want;
            mf_quant_kernels_get(MF_TYPE_F32)->vec_dot(n, &want, k, q[i]);
            if (fbits(want) != fbits(out[i]) && bad++ < 3) CHECK(0, "f32 n=%lld row %d: %a vs vec_dot %a", (long long)n, i, out[i], want);
        }
        /* f16 values converted to f32 give the F16 vec_dot of the f16 rows */
        for (int e = 0; e < N; e++) kh[e] = mf_fp32_to_fp16(k[e]);
        static float kf[N], qf[NQ][N];
        for (int e = 0; e < N; e++) kf[e] = mf_fp16_to_fp32(kh[e]);
        for (int i = 0; i < NQ; i++)
            for (int e = 0; e < N; e++) qh[i][e] = mf_fp32_to_fp16(q[i][e]), qf[i][e] = mf_fp16_to_fp32(qh[i][e]);
        f(n, kf, &qf[0][0], N, NQ, out);
        for (int i = 0; i < NQ; i++) {
            float want;
            mf_quant_kernels_get(MF_TYPE_F16)->vec_dot(n, &want, kh, qh[i]);
            if (fbits(want) != fbits(out[i]) && bad++ < 3) CHECK(0, "f16 n=%lld row %d: %a vs vec_dot %a", (long long)n, i, out[i], want);
        }
    }
    CHECK(bad == 0, "%d dot_rows results differ from vec_dot", bad);
}

int main(void) {
    RUN(test_type_table);
    RUN(test_fp16_exhaustive);
    RUN(test_fp32_to_fp16);
    RUN(test_dequant_golden);
    RUN(test_dequant_refusals);
    RUN(test_quantize_ref_golden);
    RUN(test_from_float_golden);
    RUN(test_kernels_table);
    RUN(test_dot_scalar_vs_dequant);
    RUN(test_dot_llama_golden);
    RUN(test_dot_llama_m128);
    RUN(test_dot_llama_iq4_nl_odd);
    RUN(test_dot_llama_exact);
    RUN(test_bf16_llama_order);
    RUN(test_q5_K_min_term_fused);
    RUN(test_isa_vs_scalar);
    RUN(test_from_float_isa);
    RUN(test_tile_bitwise);
    RUN(test_bf16_tile_tiny_inputs_keep_vec_dot_bits);
    RUN(test_bf16_act_ok_bound);
    RUN(test_tile_bitwise_lengths);
    RUN(test_x8_repack_and_kernels);
    RUN(test_amx_kernels);
    RUN(test_amx_kernels_emulated);
    RUN(test_dot_rows);
    return mf_test_done();
}
