/* quant: the aarch64 kernel table (NEON).  Built for aarch64 targets only (Makefile); kernels.c holds the
 * scalar table and the choice.  NEON (Advanced SIMD) is part of every aarch64 CPU (GB10, Apple M, Graviton),
 * so the set is always available there (Q2_K/Q3_K/IQ4_NL/IQ4_XS: lowbit_neon.c).  Types without a NEON
 * kernel (F32/F16/BF16, Q4_1/Q5_1, Q5_K) use the scalar ones; so do the activation converters, whose bytes are the same on every ISA anyway.  No x8 /
 * x16 layouts: aarch64 builds never repack (repack.c). */
#include "quant/quant_impl.h"
#include "quant/quant_iq.h"

MF_TILE_LOOP(mf_vec_dot_q4_0_neon)
MF_TILE_LOOP(mf_vec_dot_q5_0_neon)
MF_TILE_LOOP(mf_vec_dot_q8_0_neon)
MF_TILE_LOOP(mf_vec_dot_q4_K_neon)
MF_TILE_LOOP(mf_vec_dot_q6_K_neon)
MF_TILE_LOOP(mf_vec_dot_q2_K_neon)
MF_TILE_LOOP(mf_vec_dot_q3_K_neon)
MF_TILE_LOOP(mf_vec_dot_iq4_nl_neon)
MF_TILE_LOOP(mf_vec_dot_iq4_xs_neon)
MF_TILE_LOOP(mf_vec_dot_iq2_xxs_neon)
MF_TILE_LOOP(mf_vec_dot_iq2_xs_neon)
MF_TILE_LOOP(mf_vec_dot_iq2_s_neon)
MF_TILE_LOOP(mf_vec_dot_iq3_xxs_neon)
MF_TILE_LOOP(mf_vec_dot_iq3_s_neon)

static const mf_quant_kernels k_neon[MF_TYPE_COUNT] = {
    [MF_TYPE_Q4_0] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_q4_0_neon, mf_from_float_q8_0),
    [MF_TYPE_Q5_0] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_q5_0_neon, mf_from_float_q8_0),
    [MF_TYPE_Q8_0] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_q8_0_neon, mf_from_float_q8_0),
    [MF_TYPE_Q4_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q4_K_neon, mf_from_float_q8_K),
    [MF_TYPE_Q6_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q6_K_neon, mf_from_float_q8_K),
    [MF_TYPE_Q2_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q2_K_neon, mf_from_float_q8_K),
    [MF_TYPE_Q3_K] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_q3_K_neon, mf_from_float_q8_K),
    [MF_TYPE_IQ4_NL] = MF_K(MF_TYPE_Q8_0, mf_vec_dot_iq4_nl_neon, mf_from_float_q8_0),
    [MF_TYPE_IQ4_XS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq4_xs_neon, mf_from_float_q8_K),
    [MF_TYPE_IQ2_XXS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq2_xxs_neon, mf_from_float_q8_K),
    [MF_TYPE_IQ2_XS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq2_xs_neon, mf_from_float_q8_K),
    [MF_TYPE_IQ2_S] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq2_s_neon, mf_from_float_q8_K),
    [MF_TYPE_IQ3_XXS] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq3_xxs_neon, mf_from_float_q8_K),
    [MF_TYPE_IQ3_S] = MF_K(MF_TYPE_Q8_K, mf_vec_dot_iq3_s_neon, mf_from_float_q8_K),
};

const mf_quant_kernels *mf_quant_arch_table(mf_isa isa) {
    return isa == MF_ISA_NEON ? k_neon : NULL;
}

bool mf_quant_arch_cpu_has(mf_isa isa) {
    return isa == MF_ISA_NEON;
}

/* attention loops the F32/F16 vec_dot, which is scalar here */
mf_dot_rows_fn mf_quant_arch_dot_rows(mf_isa isa) {
    (void)isa;
    return NULL;
}

const char *mf_quant_arch_lacks(mf_isa isa) {
    (void)isa;
    return NULL;
}
