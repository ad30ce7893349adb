/* quant: the x86-64 kernel tables (AVX2, AVX-512) and the CPU checks for them (cpuid).  Built for x86-64
 * targets only (Makefile); kernels.c holds the scalar table and the choice. */
#include "quant/quant_x86.h"
#include "quant/quant_iq.h"

#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

MF_TILE_LOOP(mf_vec_dot_f32_avx2)
MF_TILE_LOOP(mf_vec_dot_f16_avx2)

/* AVX2: a type missing here falls back to its scalar kernel in mf_quant_kernels_get.  The activation
 * converters write the same bytes at every ISA (tested), so mixing levels per type is safe. */
static const mf_quant_kernels k_avx2[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = MF_K(MF_TYPE_F32, mf_vec_dot_f32_avx2, mf_from_float_f32),
    [MF_TYPE_F16] = MF_K(MF_TYPE_F16, mf_vec_dot_f16_avx2, mf_from_float_f16_avx2),
    [MF_TYPE_BF16] = MF_KT(MF_TYPE_BF16, mf_vec_dot_bf16_avx2, mf_from_float_bf16_avx2, mf_tile_bf16_avx2, 4, 4),
    [MF_TYPE_Q4_0] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_q4_0_avx2, mf_from_float_q8_0_avx2, mf_tile_q4_0_avx2, 4, 4),
    [MF_TYPE_Q4_1] = MF_KT(MF_TYPE_Q8_1, mf_vec_dot_q4_1_avx2, mf_from_float_q8_1_avx2, mf_tile_q4_1_avx2, 4, 4),
    [MF_TYPE_Q5_0] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_q5_0_avx2, mf_from_float_q8_0_avx2, mf_tile_q5_0_avx2, 4, 4),
    [MF_TYPE_Q5_1] = MF_KT(MF_TYPE_Q8_1, mf_vec_dot_q5_1_avx2, mf_from_float_q8_1_avx2, mf_tile_q5_1_avx2, 4, 4),
    [MF_TYPE_Q8_0] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_q8_0_avx2, mf_from_float_q8_0_avx2, mf_tile_q8_0_avx2, 4, 4),
    [MF_TYPE_Q4_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q4_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q4_K_avx2, 2, 2),
    [MF_TYPE_Q5_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q5_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q5_K_avx2, 2, 2),
    [MF_TYPE_Q6_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q6_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q6_K_avx2, 2, 2),
    [MF_TYPE_Q2_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q2_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q2_K_avx2, 2, 2),
    [MF_TYPE_Q3_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q3_K_avx2, mf_from_float_q8_K_avx2, mf_tile_q3_K_avx2, 2, 2),
    [MF_TYPE_IQ4_NL] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_iq4_nl_avx2, mf_from_float_q8_0_avx2, mf_tile_iq4_nl_avx2, 2, 2),
    [MF_TYPE_IQ4_XS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq4_xs_avx2, mf_from_float_q8_K_avx2, mf_tile_iq4_xs_avx2, 2, 2),
    [MF_TYPE_IQ2_XXS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq2_xxs_avx2, mf_from_float_q8_K_avx2, mf_tile_iq2_xxs_avx2, 1, 8),
    [MF_TYPE_IQ2_XS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq2_xs_avx2, mf_from_float_q8_K_avx2, mf_tile_iq2_xs_avx2, 1, 8),
    [MF_TYPE_IQ2_S] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq2_s_avx2, mf_from_float_q8_K_avx2, mf_tile_iq2_s_avx2, 1, 8),
    [MF_TYPE_IQ3_XXS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq3_xxs_avx2, mf_from_float_q8_K_avx2, mf_tile_iq3_xxs_avx2, 1, 8),
    [MF_TYPE_IQ3_S] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq3_s_avx2, mf_from_float_q8_K_avx2, mf_tile_iq3_s_avx2, 1, 8),
    [MF_TYPE_Q4_0_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_q4_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q5_0_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_q5_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q8_0_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_q8_0x8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_IQ4_NL_X8] = MF_KX8(MF_TYPE_Q8_0S, mf_tile_iq4_nlx8_avx2, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q4_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_avx2, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q5_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q5_Kx8_avx2, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q6_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_avx2, mf_from_float_q8_K_avx2),
    [MF_TYPE_IQ4_XS_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_iq4_xsx8_avx2, mf_from_float_q8_K_avx2),
};

/* AVX-512: only what differs from AVX2 - VNNI for the Q8_0 family (dot_avx512.c, tile_avx512.c) and for
 * Q2_K/Q3_K/IQ4_NL/IQ4_XS (lowbit_avx512.c; for a batch, Q2_K/Q3_K/IQ4_NL/IQ4_XS take the AVX2 2x2 tiles of
 * lowbit_avx2.c, the same bits and measured 1.3-1.9x the AVX-512 vec_dot per pair (Q3_K/IQ4; Q2_K +7-9 % on a
 * whole Q2_K file's prefill); IQ4_NL and IQ4_XS only
 * where they are not repacked: N % 8 != 0, MINFER_REPACK=0), the F16 and BF16 tiles (float_avx512.c; their
 * vec_dot stays the AVX2 one, whose order they keep), the x16 layouts (x16_avx512.c) and the K x8 layouts,
 * iq4_xsx8 among them (x8_avx512.c).  Every other type (F32, Q4_K/Q5_K/Q6_K, the Q*_0 x8 layouts) falls back
 * to its AVX2 row in mf_quant_kernels_get. */
static const mf_quant_kernels k_avx512[MF_TYPE_COUNT] = {
    [MF_TYPE_F16] = MF_KT(MF_TYPE_F16, mf_vec_dot_f16_avx2, mf_from_float_f16_avx2, mf_tile_f16_avx512, 4, 4),
    [MF_TYPE_BF16] = MF_KT_OK(MF_TYPE_BF16, mf_vec_dot_bf16_avx2, mf_from_float_bf16_avx2, mf_tile_bf16_avx512, 8, 8,
                              mf_bf16_act_ok_avx512, mf_tile_bf16_ok_avx512),
    [MF_TYPE_Q4_0] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_q4_0_avx512, mf_from_float_q8_0_avx2, mf_tile_q4_0_avx512, 4, 4),
    [MF_TYPE_Q5_0] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_q5_0_avx512, mf_from_float_q8_0_avx2, mf_tile_q5_0_avx512, 4, 4),
    [MF_TYPE_Q8_0] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_q8_0_avx512, mf_from_float_q8_0_avx2, mf_tile_q8_0_avx512, 4, 4),
    [MF_TYPE_Q2_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q2_K_avx512, mf_from_float_q8_K_avx2, mf_tile_q2_K_avx512, 2, 2),
    [MF_TYPE_Q3_K] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_q3_K_avx512, mf_from_float_q8_K_avx2, mf_tile_q3_K_avx512, 2, 2),
    [MF_TYPE_IQ4_NL] = MF_KT(MF_TYPE_Q8_0, mf_vec_dot_iq4_nl_avx512, mf_from_float_q8_0_avx2, mf_tile_iq4_nl_avx512, 2, 2),
    [MF_TYPE_IQ4_XS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq4_xs_avx512, mf_from_float_q8_K_avx2, mf_tile_iq4_xs_avx512, 2, 2),
    [MF_TYPE_Q4_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_avx512, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q5_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q5_Kx8_avx512, mf_from_float_q8_K_avx2),
    [MF_TYPE_IQ2_XXS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq2_xxs_avx512, mf_from_float_q8_K_avx2, mf_tile_iq2_xxs_avx512, 1, 8),
    [MF_TYPE_IQ2_XS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq2_xs_avx512, mf_from_float_q8_K_avx2, mf_tile_iq2_xs_avx512, 1, 8),
    [MF_TYPE_IQ2_S] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq2_s_avx512, mf_from_float_q8_K_avx2, mf_tile_iq2_s_avx512, 1, 8),
    [MF_TYPE_IQ3_XXS] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq3_xxs_avx512, mf_from_float_q8_K_avx2, mf_tile_iq3_xxs_avx512, 1, 8),
    [MF_TYPE_IQ3_S] = MF_KT(MF_TYPE_Q8_K, mf_vec_dot_iq3_s_avx512, mf_from_float_q8_K_avx2, mf_tile_iq3_s_avx512, 1, 8),
    [MF_TYPE_Q6_K_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_avx512, mf_from_float_q8_K_avx2),
    [MF_TYPE_IQ4_XS_X8] = MF_KX8(MF_TYPE_Q8_K, mf_tile_iq4_xsx8_avx512, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q4_0_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_q4_0x16_avx512, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q5_0_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_q5_0x16_avx512, mf_from_float_q8_0s_avx2),
    [MF_TYPE_Q8_0_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_q8_0x16_avx512, mf_from_float_q8_0s_avx2),
    [MF_TYPE_IQ4_NL_X16] = MF_KX16(MF_TYPE_Q8_0S, mf_tile_iq4_nlx16_avx512, mf_from_float_q8_0s_avx2),
};

/* AMX: the AVX-512 set plus AMX-INT8 tiles for the x16 layouts (x16_amx.c) and q4_Kx8 / q5_Kx8 / q6_Kx8 (x8_amx.c);
 * below 8 activations they hand the work to the AVX-512 kernels, same bits.  Everything else falls back to
 * the AVX-512 row. */
static const mf_quant_kernels k_amx[MF_TYPE_COUNT] = {
    [MF_TYPE_Q4_0_X16] = MF_KAMX(MF_TYPE_Q8_0S, mf_tile_q4_0x16_amx, mf_from_float_q8_0s_avx2,
                                  mf_tile_q4_0x16_amx_packed),
    [MF_TYPE_Q5_0_X16] = MF_KAMX(MF_TYPE_Q8_0S, mf_tile_q5_0x16_amx, mf_from_float_q8_0s_avx2,
                                  mf_tile_q5_0x16_amx_packed),
    [MF_TYPE_Q8_0_X16] = MF_KAMX(MF_TYPE_Q8_0S, mf_tile_q8_0x16_amx, mf_from_float_q8_0s_avx2,
                                  mf_tile_q8_0x16_amx_packed),
    [MF_TYPE_IQ4_NL_X16] = MF_KAMX(MF_TYPE_Q8_0S, mf_tile_iq4_nlx16_amx, mf_from_float_q8_0s_avx2,
                                  mf_tile_iq4_nlx16_amx_packed),
    [MF_TYPE_Q4_K_X8] = MF_KAMX8(MF_TYPE_Q8_K, mf_tile_q4_Kx8_amx, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q5_K_X8] = MF_KAMX8(MF_TYPE_Q8_K, mf_tile_q5_Kx8_amx, mf_from_float_q8_K_avx2),
    [MF_TYPE_Q6_K_X8] = MF_KAMX8(MF_TYPE_Q8_K, mf_tile_q6_Kx8_amx, mf_from_float_q8_K_avx2),
};

const mf_quant_kernels *mf_quant_arch_table(mf_isa isa) {
    return isa == MF_ISA_AVX2 ? k_avx2 : isa == MF_ISA_AVX512 ? k_avx512 : isa == MF_ISA_AMX ? k_amx : NULL;
}

/* AMX needs three things: the CPU (cpuid 7.0 EDX: AMX-TILE bit 24, AMX-INT8 bit 25), the OS managing the
 * tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA), and - Linux 5.16+ keeps the 8 KiB of tile data off
 * by default - this process's permission, asked for once here.  The permission is per process, so every
 * thread the pool starts later may use the tiles (each loads its own tile config, x16_amx.c). */
#define MF_ARCH_REQ_XCOMP_PERM 0x1023
#define MF_XFEATURE_XTILEDATA 18
static char g_amx_why[160]; /* why the CPU has AMX but this process may not use it ("": usable or absent) */
static bool g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return; /* no AMX */
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) {
        snprintf(g_amx_why, sizeof g_amx_why, "the OS has not enabled XSAVE, so no tile state");
        return;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) {
        snprintf(g_amx_why, sizeof g_amx_why, "the OS has not enabled the tile state (XCR0 = 0x%x)", lo);
        return;
    }
#if defined(__linux__)
    if (syscall(SYS_arch_prctl, MF_ARCH_REQ_XCOMP_PERM, MF_XFEATURE_XTILEDATA) != 0) {
        snprintf(g_amx_why, sizeof g_amx_why,
                 "the OS refused the tile data permission: arch_prctl(ARCH_REQ_XCOMP_PERM) failed: %s (Linux 5.16+ "
                 "grants it)", strerror(errno));
        return;
    }
    g_amx_ok = true;
#else
    snprintf(g_amx_why, sizeof g_amx_why, "minfer asks for the tile state only on Linux");
#endif
}

const char *mf_quant_arch_lacks(mf_isa isa) {
    if (isa != MF_ISA_AMX) return NULL;
    pthread_once(&g_amx_once, amx_probe);
    return g_amx_why[0] ? g_amx_why : NULL;
}

/* F16C is not among the names __builtin_cpu_supports knows everywhere: read cpuid leaf 1 directly. */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c & bit_F16C) != 0;
}

/* asked once; every thread that races here stores the same answer */
bool mf_cpu_has_avx512bf16(void) {
    static _Atomic int have = -1;
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        unsigned a = 0, b, c, d;
        h = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h;
}

/* AVX2 level = AVX2+FMA+F16C (Haswell, Zen 1); AVX512 level = F+BW+VL+VNNI (Ice Lake, Zen 4). */
bool mf_quant_arch_cpu_has(mf_isa isa) {
    __builtin_cpu_init();
    switch (isa) {
    case MF_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case MF_ISA_AVX512:
        return mf_quant_arch_cpu_has(MF_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni");
    case MF_ISA_AMX:
        pthread_once(&g_amx_once, amx_probe);
        return g_amx_ok && mf_quant_arch_cpu_has(MF_ISA_AVX512);
    default: return false;
    }
}

mf_dot_rows_fn mf_quant_arch_dot_rows(mf_isa isa) {
    return isa == MF_ISA_AVX2 || mf_isa_avx512(isa) ? mf_dot_rows_f32_avx2 : NULL;
}

