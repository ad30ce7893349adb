/* quant: kernel tables per ISA and the runtime choice between them (cpuid, MINFER_ISA). */
#include "quant/quant_x86.h"

#include "core/env.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>

/* Tiles for kernels without a specialized one: loop vec_dot over the pairs (trivially bitwise equal). */
#define MF_TILE_LOOP(dot)                                                                                      \
    static void dot##_tile(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a, \
                           size_t a_stride, int na) {                                                          \
        for (int i = 0; i < nw; i++)                                                                           \
            for (int j = 0; j < na; j++)                                                                       \
                dot(n, &s[i * ldc + j], (const char *)w + i * w_stride, (const char *)a + j * a_stride);        \
    }
MF_TILE_LOOP(mf_vec_dot_f32_scalar)
MF_TILE_LOOP(mf_vec_dot_f16_scalar)
MF_TILE_LOOP(mf_vec_dot_bf16_scalar)
MF_TILE_LOOP(mf_vec_dot_q4_0_scalar)
MF_TILE_LOOP(mf_vec_dot_q4_1_scalar)
MF_TILE_LOOP(mf_vec_dot_q5_0_scalar)
MF_TILE_LOOP(mf_vec_dot_q5_1_scalar)
MF_TILE_LOOP(mf_vec_dot_q8_0_scalar)
MF_TILE_LOOP(mf_vec_dot_q4_K_scalar)
MF_TILE_LOOP(mf_vec_dot_q5_K_scalar)
MF_TILE_LOOP(mf_vec_dot_q6_K_scalar)
MF_TILE_LOOP(mf_vec_dot_f32_avx2)
MF_TILE_LOOP(mf_vec_dot_f16_avx2)
MF_TILE_LOOP(mf_vec_dot_bf16_avx2)

/* a kernel set whose tile just loops vec_dot */
#define K(vt, dot, ff) {vt, dot, ff, dot##_tile, 1, 1, false}
/* a kernel set with a specialized tile of shape tw x ta */
#define KT(vt, dot, ff, tile, tw, ta) {vt, dot, ff, tile, tw, ta, false}
/* an x8 layout: 8-row groups, activation-major output */
#define KX8(vt, tile, ff) {vt, NULL, ff, tile, MF_X8_ROWS, 4, true}
/* an x16 layout: 16-row groups, up to 8 activations per pass */
#define KX16(vt, tile, ff) {vt, NULL, ff, tile, MF_X16_ROWS, 8, true}

static const mf_quant_kernels k_scalar[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = K(MF_TYPE_F32, mf_vec_dot_f32_scalar, mf_from_float_f32),
    [MF_TYPE_F16] = K(MF_TYPE_F16, mf_vec_dot_f16_scalar, mf_from_float_f16),
    [MF_TYPE_BF16] = K(MF_TYPE_BF16, mf_vec_dot_bf16_scalar, mf_from_float_bf16),
    [MF_TYPE_Q4_0] = K(MF_TYPE_Q8_0, mf_vec_dot_q4_0_scalar, mf_from_float_q8_0),
    [MF_TYPE_Q4_1] = K(MF_TYPE_Q8_1, mf_vec_dot_q4_1_scalar, mf_from_float_q8_1),
    [MF_TYPE_Q5_0] = K(MF_TYPE_Q8_0, mf_vec_dot_q5_0_scalar, mf_from_float_q8_0),
    [MF_TYPE_Q5_1] = K(MF_TYPE_Q8_1, mf_vec_dot_q5_1_scalar, mf_from_float_q8_1),
    [MF_TYPE_Q8_0] = K(MF_TYPE_Q8_0, mf_vec_dot_q8_0_scalar, mf_from_float_q8_0),
    [MF_TYPE_Q4_K] = K(MF_TYPE_Q8_K, mf_vec_dot_q4_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q5_K] = K(MF_TYPE_Q8_K, mf_vec_dot_q5_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q6_K] = K(MF_TYPE_Q8_K, mf_vec_dot_q6_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q4_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q4_0x8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q5_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q5_0x8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q8_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q8_0x8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q4_K_X8] = KX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q6_K_X8] = KX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q4_0_X16] = KX16(MF_TYPE_Q8_0S, mf_tile_q4_0x16_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q5_0_X16] = KX16(MF_TYPE_Q8_0S, mf_tile_q5_0x16_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q8_0_X16] = KX16(MF_TYPE_Q8_0S, mf_tile_q8_0x16_scalar, mf_from_float_q8_0s),
};

/* AVX2: a type missing here falls back to its scalar kernel in mf_quant_kernels_get.  The activation
 * converters write the same bytes at every ISA (tested), so mixing levels per type is safe. */
static const mf_quant_kernels k_avx2[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = K(MF_TYPE_F32, mf_vec_dot_f32_avx2, mf_from_float_f32),
    [MF_TYPE_F16] = K(MF_TYPE_F16, mf_vec_dot_f16_avx2, mf_from_float_f16_avx2),
    [MF_TYPE_BF16] = K(MF_TYPE_BF16, mf_vec_dot_bf16_avx2, mf_from_float_bf16_avx2),
    [MF_TYPE_Q4_0] = KT(MF_TYPE_Q8_0, mf_vec_dot_q4_0_avx2, mf_from_float_q8_0_avx2, mf_tile_q4_0_avx2, 4, 4),
    [MF_TYPE_Q5_0] = KT(MF_TYPE_Q8_0, mf_vec_dot_q5_0_avx2, mf_from_float_q8_0_avx2, mf_tile_q5_0_avx2, 4, 4),
    [MF_TYPE_Q8_0] = KT(MF_TYPE_Q8_0, mf_vec_dot_q8_0_avx2, mf_from_float_q8_0_avx2, mf_tile_q8_0_avx2, 4, 4),
    [MF_TYPE_Q4_K] = KT(MF_TYPE_Q8_K, mf_vec_dot_q4_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q4_K_avx2, 2, 2),
    [MF_TYPE_Q5_K] = KT(MF_TYPE_Q8_K, mf_vec_dot_q5_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q5_K_avx2, 2, 2),
    [MF_TYPE_Q6_K] = KT(MF_TYPE_Q8_K, mf_vec_dot_q6_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q6_K_avx2, 2, 2),
    [MF_TYPE_Q4_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q4_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q5_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q5_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q8_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q8_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q4_K_X8] = KX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_avx2, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q6_K_X8] = KX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_avx2, mf_from_float_q8_K_avx2),
};

/* AVX-512: VNNI for the Q8_0 family (dot_avx512.c), the x16 layouts (x16_avx512.c) and the K x8 layouts
 * (x8_avx512.c); the AVX2 kernels for the rest. */
static const mf_quant_kernels k_avx512[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = K(MF_TYPE_F32, mf_vec_dot_f32_avx2, mf_from_float_f32),
    [MF_TYPE_F16] = K(MF_TYPE_F16, mf_vec_dot_f16_avx2, mf_from_float_f16_avx2),
    [MF_TYPE_BF16] = K(MF_TYPE_BF16, mf_vec_dot_bf16_avx2, mf_from_float_bf16_avx2),
    [MF_TYPE_Q4_0] = KT(MF_TYPE_Q8_0, mf_vec_dot_q4_0_avx512, mf_from_float_q8_0_avx2, mf_tile_q4_0_avx512, 4, 4),
    [MF_TYPE_Q5_0] = KT(MF_TYPE_Q8_0, mf_vec_dot_q5_0_avx512, mf_from_float_q8_0_avx2, mf_tile_q5_0_avx512, 4, 4),
    [MF_TYPE_Q8_0] = KT(MF_TYPE_Q8_0, mf_vec_dot_q8_0_avx512, mf_from_float_q8_0_avx2, mf_tile_q8_0_avx512, 4, 4),
    [MF_TYPE_Q4_K] = KT(MF_TYPE_Q8_K, mf_vec_dot_q4_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q4_K_avx2, 2, 2),
    [MF_TYPE_Q5_K] = KT(MF_TYPE_Q8_K, mf_vec_dot_q5_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q5_K_avx2, 2, 2),
    [MF_TYPE_Q6_K] = KT(MF_TYPE_Q8_K, mf_vec_dot_q6_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q6_K_avx2, 2, 2),
    [MF_TYPE_Q4_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q4_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q5_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q5_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q8_0_X8] = KX8(MF_TYPE_Q8_0S, mf_tile_q8_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q4_K_X8] = KX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_avx512, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q6_K_X8] = KX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_avx512, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q4_0_X16] = KX16(MF_TYPE_Q8_0S, mf_tile_q4_0x16_avx512, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q5_0_X16] = KX16(MF_TYPE_Q8_0S, mf_tile_q5_0x16_avx512, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q8_0_X16] = KX16(MF_TYPE_Q8_0S, mf_tile_q8_0x16_avx512, mf_from_float_q8_0s_avx2),
};

static const mf_quant_kernels *const k_tables[3] = {k_scalar, k_avx2, k_avx512};

const char *mf_isa_name(mf_isa isa) {
    switch (isa) {
    case MF_ISA_SCALAR: return "scalar";
    case MF_ISA_AVX2: return "avx2";
    case MF_ISA_AVX512: return "avx512";
    }
    return "unknown";
}

/* F16C is not among the names __builtin_cpu_supports knows everywhere: read cpuid leaf 1 directly. */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c & bit_F16C) != 0;
}

/* AVX2 level = AVX2+FMA+F16C (Haswell, Zen 1); AVX512 level = F+BW+VL+VNNI (Ice Lake, Zen 4). */
static bool cpu_has(mf_isa isa) {
    __builtin_cpu_init();
    switch (isa) {
    case MF_ISA_SCALAR: return true;
    case MF_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case MF_ISA_AVX512:
        return cpu_has(MF_ISA_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    }
    return false;
}

static mf_isa g_best, g_active;
static bool g_has[3];
static mf_error g_isa_err; /* MINFER_ISA's refusal (code 0: none), reported by mf_quant_isa_check */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* A refused MINFER_ISA leaves the best ISA active for callers that never ask (tests, tools); mf_model_load
 * and the CLI ask first, so no model runs past the refusal. */
static void isa_init(void) {
    for (int i = 0; i < 3; i++) g_has[i] = cpu_has((mf_isa)i);
    g_best = g_has[MF_ISA_AVX512] ? MF_ISA_AVX512 : g_has[MF_ISA_AVX2] ? MF_ISA_AVX2 : MF_ISA_SCALAR;
    g_active = g_best;
    int w = -1;
    if (mf_env_word("MINFER_ISA", &w, &g_isa_err) || w < 0) return;
    if (!g_has[w]) {
        char can[32] = "scalar";
        if (g_has[MF_ISA_AVX2]) strcat(can, " or avx2");
        mf_err(&g_isa_err, MF_E_INVAL, "MINFER_ISA=%s: this CPU lacks %s (the best it has is %s); unset MINFER_ISA or pick %s",
               mf_isa_name((mf_isa)w), mf_isa_name((mf_isa)w), mf_isa_name(g_best), can);
        return;
    }
    g_active = (mf_isa)w;
}

int mf_quant_isa_check(mf_error *err) {
    pthread_once(&g_once, isa_init);
    if (!g_isa_err.code) return 0;
    if (err) *err = g_isa_err;
    return g_isa_err.code;
}

mf_isa mf_cpu_best_isa(void) {
    pthread_once(&g_once, isa_init);
    return g_best;
}

/* The ISA kernels are chosen for: the best the CPU has unless MINFER_ISA forces a lower one. */
mf_isa mf_quant_active_isa(void) {
    pthread_once(&g_once, isa_init);
    return g_active;
}

const mf_quant_kernels *mf_quant_kernels_get_isa(uint32_t type, mf_isa isa) {
    pthread_once(&g_once, isa_init);
    if (type >= MF_TYPE_COUNT || (unsigned)isa > MF_ISA_AVX512 || !g_has[isa]) return NULL;
    const mf_quant_kernels *k = &k_tables[isa][type];
    return k->vec_dot_tile ? k : NULL;
}

/* Per type the highest ISA at or below the active one that has a kernel: a type without an AVX-512
 * kernel uses its AVX2 one, and so on down to scalar. */
const mf_quant_kernels *mf_quant_kernels_get(uint32_t type) {
    mf_isa top = mf_quant_active_isa();
    for (int i = (int)top; i >= 0; i--) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(type, (mf_isa)i);
        if (k) return k;
    }
    return NULL;
}

mf_dot_rows_fn mf_quant_dot_rows(void) {
    return mf_quant_active_isa() >= MF_ISA_AVX2 ? mf_dot_rows_f32_avx2 : NULL;
}

int mf_quantize_row_cpu(uint32_t type, const float *src, void *dst, int64_t n) {
    const mf_type_info *t = mf_type_get(type);
    if (!t || n < 0 || n % t->blck_size) return MF_E_INVAL;
    /* the activation converter of a weight type whose vec_dot type is `type` */
    uint32_t weight;
    switch (type) {
    case MF_TYPE_F32: case MF_TYPE_F16: case MF_TYPE_BF16: case MF_TYPE_Q8_0: weight = type; break;
    case MF_TYPE_Q8_1: weight = MF_TYPE_Q4_1; break;
    case MF_TYPE_Q8_K: weight = MF_TYPE_Q4_K; break;
    default: return MF_E_UNSUPPORTED;
    }
    const mf_quant_kernels *k = mf_quant_kernels_get(weight);
    if (!k || k->vec_dot_type != (mf_type)type) return MF_E_INTERNAL;
    k->from_float(src, dst, n);
    return 0;
}
