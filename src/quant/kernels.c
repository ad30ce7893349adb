/* quant: the scalar kernel table, the ISAs of this build's architecture, and the runtime choice between
 * them (the CPU's features, MINFER_ISA).  The SIMD tables live with their architecture: kernels_x86.c
 * (x86-64 builds), kernels_neon.c (aarch64 builds); the Makefile compiles only the target's. */
#include "quant/quant_impl.h"
#include "quant/quant_iq.h"

#include "core/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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
MF_TILE_LOOP(mf_vec_dot_q2_K_scalar)
MF_TILE_LOOP(mf_vec_dot_q3_K_scalar)
MF_TILE_LOOP(mf_vec_dot_iq4_nl_scalar)
MF_TILE_LOOP(mf_vec_dot_iq4_xs_scalar)
MF_TILE_LOOP(mf_vec_dot_iq2_xxs_scalar)
MF_TILE_LOOP(mf_vec_dot_iq2_xs_scalar)
MF_TILE_LOOP(mf_vec_dot_iq2_s_scalar)
MF_TILE_LOOP(mf_vec_dot_iq3_xxs_scalar)
MF_TILE_LOOP(mf_vec_dot_iq3_s_scalar)

static const mf_quant_kernels k_scalar[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = MF_K(MF_TYPE_F32, mf_vec_dot_f32_scalar, mf_from_float_f32),
    [MF_TYPE_F16] = MF_K(MF_TYPE_F16, mf_vec_dot_f16_scalar, mf_from_float_f16),
    [MF_TYPE_BF16] = MF_K(MF_TYPE_BF16, mf_vec_dot_bf16_scalar, mf_from_float_bf16),
    [MF_TYPE_Q4_0] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_q4_0_scalar, mf_from_float_q8_0),
    [MF_TYPE_Q4_1] = MF_K(MF_TYPE_Q8_1, mf_vec_dot_q4_1_scalar, mf_from_float_q8_1),
    [MF_TYPE_Q5_0] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_q5_0_scalar, mf_from_float_q8_0),
    [MF_TYPE_Q5_1] = MF_K(MF_TYPE_Q8_1, mf_vec_dot_q5_1_scalar, mf_from_float_q8_1),
    [MF_TYPE_Q8_0] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_q8_0_scalar, mf_from_float_q8_0),
    [MF_TYPE_Q4_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q4_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q5_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q5_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q6_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q6_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q2_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q2_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q3_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q3_K_scalar, mf_from_float_q8_K),
    [MF_TYPE_IQ4_NL] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_iq4_nl_scalar, mf_from_float_q8_0),
    [MF_TYPE_IQ4_XS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq4_xs_scalar, mf_from_float_q8_K),
    [MF_TYPE_IQ2_XXS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq2_xxs_scalar, mf_from_float_q8_K),
    [MF_TYPE_IQ2_XS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq2_xs_scalar, mf_from_float_q8_K),
    [MF_TYPE_IQ2_S] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq2_s_scalar, mf_from_float_q8_K),
    [MF_TYPE_IQ3_XXS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq3_xxs_scalar, mf_from_float_q8_K),
    [MF_TYPE_IQ3_S] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq3_s_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q4_0_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_q4_0x8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q5_0_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_q5_0x8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q8_0_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_q8_0x8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q4_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q5_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q5_Kx8_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q6_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_scalar, mf_from_float_q8_K),
    [MF_TYPE_Q4_0_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_q4_0x16_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q5_0_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_q5_0x16_scalar, mf_from_float_q8_0s),
    [MF_TYPE_Q8_0_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_q8_0x16_scalar, mf_from_float_q8_0s),
    [MF_TYPE_IQ4_NL_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_iq4_nlx8_scalar, mf_from_float_q8_0s),
    [MF_TYPE_IQ4_NL_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_iq4_nlx16_scalar, mf_from_float_q8_0s),
    [MF_TYPE_IQ4_XS_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_iq4_xsx8_scalar, mf_from_float_q8_K),
};

/* The ISAs this build has, lowest first: a type without a kernel at the active level takes the next
 * lower level's (down to scalar, which has every type). */
#if defined(__x86_64__)
static const mf_isa k_levels[] = {MF_ISA_SCALAR, MF_ISA_AVX2, MF_ISA_AVX512, MF_ISA_AMX};
#elif defined(__aarch64__)
static const mf_isa k_levels[] = {MF_ISA_SCALAR, MF_ISA_NEON};
#else
static const mf_isa k_levels[] = {MF_ISA_SCALAR};
const mf_quant_kernels *mf_quant_arch_table(mf_isa isa) { return (void)isa, NULL; }
bool mf_quant_arch_cpu_has(mf_isa isa) { return (void)isa, false; }
mf_dot_rows_fn mf_quant_arch_dot_rows(mf_isa isa) { return (void)isa, NULL; }
const char *mf_quant_arch_lacks(mf_isa isa) { return (void)isa, NULL; }
#endif
#define N_LEVELS ((int)(sizeof k_levels / sizeof k_levels[0]))

const char *mf_isa_name(mf_isa isa) {
    switch (isa) {
    case MF_ISA_SCALAR: return "scalar";
    case MF_ISA_AVX2: return "avx2";
    case MF_ISA_AVX512: return "avx512";
    case MF_ISA_NEON: return "neon";
    case MF_ISA_AMX: return "amx";
    case MF_ISA_COUNT: break;
    }
    return "unknown";
}

static mf_isa g_best, g_active;
static bool g_has[MF_ISA_COUNT]; /* built for this architecture and run by this CPU */
static mf_error g_isa_err;       /* MINFER_ISA's refusal (code 0: none), reported by mf_quant_isa_check */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* A refused MINFER_ISA leaves the best ISA active for callers that never ask (tests, tools); mf_model_load
 * and the CLI ask first, so no model runs past the refusal. */
static void isa_init(void) {
    char names[64] = "";
    size_t off = 0;
    for (int l = 0; l < N_LEVELS; l++) {
        const mf_isa isa = k_levels[l];
        g_has[isa] = isa == MF_ISA_SCALAR || mf_quant_arch_cpu_has(isa);
        if (g_has[isa]) g_best = isa;
        /* a set the hardware has but cannot run here (the OS refused AMX's tile state) is said once */
        const char *why = g_has[isa] ? NULL : mf_quant_arch_lacks(isa);
        if (why && l > 0 && g_has[k_levels[l - 1]])
            mf_log(MF_LOG_INFO, "kernels: %s is not usable (%s); running the %s kernels", mf_isa_name(isa), why,
                   mf_isa_name(k_levels[l - 1]));
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", l ? "|" : "", mf_isa_name(isa));
    }
    g_active = g_best;
    /* MINFER_ISA's words (src/core/env.c) are this architecture's k_levels names, in the same order. */
    int w = -1;
    if (mf_env_word("MINFER_ISA", &w, &g_isa_err) || w < 0) return;
    if (w >= N_LEVELS) {
        mf_err(&g_isa_err, MF_E_INTERNAL, "MINFER_ISA word %d is not one of this build's %d kernel sets", w, N_LEVELS);
        return;
    }
    const mf_isa want = k_levels[w];
    const char *why = g_has[want] ? NULL : mf_quant_arch_lacks(want);
    if (why) {
        mf_err(&g_isa_err, MF_E_INVAL, "MINFER_ISA=%s: %s (the best this machine runs is %s); unset MINFER_ISA or pick one of %s up to %s",
               mf_isa_name(want), why, mf_isa_name(g_best), names, mf_isa_name(g_best));
        return;
    }
    if (!g_has[want]) {
        mf_err(&g_isa_err, MF_E_INVAL,
               "MINFER_ISA=%s: this CPU lacks %s (the best it has is %s); unset MINFER_ISA or pick one of %s up to %s",
               mf_isa_name(want), mf_isa_name(want), mf_isa_name(g_best), names, mf_isa_name(g_best));
        return;
    }
    g_active = want;
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
    if (type >= MF_TYPE_COUNT || (unsigned)isa >= MF_ISA_COUNT || !g_has[isa]) return NULL;
    const mf_quant_kernels *t = isa == MF_ISA_SCALAR ? k_scalar : mf_quant_arch_table(isa);
    return t && t[type].vec_dot_tile ? &t[type] : NULL;
}

/* Per type the highest level at or below the active one that has a kernel: a type without an AVX-512
 * kernel uses its AVX2 one, and so on down to scalar. */
const mf_quant_kernels *mf_quant_kernels_get(uint32_t type) {
    const mf_isa top = mf_quant_active_isa();
    int l = N_LEVELS - 1;
    while (l > 0 && k_levels[l] != top) l--;
    for (; l >= 0; l--) {
        const mf_quant_kernels *k = mf_quant_kernels_get_isa(type, k_levels[l]);
        if (k) return k;
    }
    return NULL;
}

void mf_quant_runnable_types(char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (uint32_t t = 0; t < MF_TYPE_COUNT; t++) {
        if (!mf_type_get_file(t) || t == MF_TYPE_Q8_K || !mf_quant_kernels_get(t)) continue;
        const int w = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", mf_type_name(t));
        if (w < 0 || (size_t)w >= cap - at) return;
        at += (size_t)w;
    }
}

mf_dot_rows_fn mf_quant_dot_rows(void) {
    const mf_isa isa = mf_quant_active_isa();
    return isa == MF_ISA_SCALAR ? NULL : mf_quant_arch_dot_rows(isa);
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
