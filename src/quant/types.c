/* quant: the type table (ids, names, block geometry are ggml's, a GGUF file-format contract). */
#include "quant/quant_impl.h"
#include "quant/quant_iq.h"

#include <stddef.h>
#include <stdio.h>

static const mf_type_info k_types[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = {"f32", 1, 4, false, 1, false},
    [MF_TYPE_F16] = {"f16", 1, 2, false, 1, false},
    [MF_TYPE_Q4_0] = {"q4_0", MF_QK4_0, sizeof(mf_block_q4_0), true, 1, false},
    [MF_TYPE_Q4_1] = {"q4_1", MF_QK4_1, sizeof(mf_block_q4_1), true, 1, false},
    [MF_TYPE_Q5_0] = {"q5_0", MF_QK5_0, sizeof(mf_block_q5_0), true, 1, false},
    [MF_TYPE_Q5_1] = {"q5_1", MF_QK5_1, sizeof(mf_block_q5_1), true, 1, false},
    [MF_TYPE_Q8_0] = {"q8_0", MF_QK8_0, sizeof(mf_block_q8_0), true, 1, false},
    [MF_TYPE_Q8_1] = {"q8_1", MF_QK8_1, sizeof(mf_block_q8_1), true, 1, false},
    [MF_TYPE_Q2_K] = {"q2_K", MF_QK_K, sizeof(mf_block_q2_K), true, 1, false},
    [MF_TYPE_Q3_K] = {"q3_K", MF_QK_K, sizeof(mf_block_q3_K), true, 1, false},
    [MF_TYPE_Q4_K] = {"q4_K", MF_QK_K, sizeof(mf_block_q4_K), true, 1, false},
    [MF_TYPE_Q5_K] = {"q5_K", MF_QK_K, sizeof(mf_block_q5_K), true, 1, false},
    [MF_TYPE_Q6_K] = {"q6_K", MF_QK_K, sizeof(mf_block_q6_K), true, 1, false},
    [MF_TYPE_Q8_K] = {"q8_K", MF_QK_K, sizeof(mf_block_q8_K), true, 1, false},
    /* Types minfer reads and shows but (where no kernel table row says otherwise) does not run: geometry
     * from ggml's type traits, so a file's tensor data sizes check out whatever its types. */
    [MF_TYPE_IQ2_XXS] = {"iq2_xxs", MF_QK_K, MF_IQ2_XXS_SIZE, true, 1, false},
    [MF_TYPE_IQ2_XS] = {"iq2_xs", MF_QK_K, MF_IQ2_XS_SIZE, true, 1, false},
    [MF_TYPE_IQ3_XXS] = {"iq3_xxs", MF_QK_K, MF_IQ3_XXS_SIZE, true, 1, false},
    [MF_TYPE_IQ1_S] = {"iq1_s", MF_QK_K, 50, true, 1, false},
    [MF_TYPE_IQ4_NL] = {"iq4_nl", MF_QK4_NL, sizeof(mf_block_iq4_nl), true, 1, false},
    [MF_TYPE_IQ3_S] = {"iq3_s", MF_QK_K, MF_IQ3_S_SIZE, true, 1, false},
    [MF_TYPE_IQ2_S] = {"iq2_s", MF_QK_K, MF_IQ2_S_SIZE, true, 1, false},
    [MF_TYPE_IQ4_XS] = {"iq4_xs", MF_QK_K, sizeof(mf_block_iq4_xs), true, 1, false},
    [MF_TYPE_IQ1_M] = {"iq1_m", MF_QK_K, 56, true, 1, false},
    [MF_TYPE_TQ1_0] = {"tq1_0", MF_QK_K, 54, true, 1, false},
    [MF_TYPE_TQ2_0] = {"tq2_0", MF_QK_K, 66, true, 1, false},
    [MF_TYPE_MXFP4] = {"mxfp4", 32, 17, true, 1, false},
    [MF_TYPE_NVFP4] = {"nvfp4", 64, 36, true, 1, false},
    [MF_TYPE_Q1_0] = {"q1_0", 128, 18, true, 1, false},
    [MF_TYPE_Q2_0] = {"q2_0", 64, 18, true, 1, false},
    [MF_TYPE_I8] = {"i8", 1, 1, false, 1, false},
    [MF_TYPE_I16] = {"i16", 1, 2, false, 1, false},
    [MF_TYPE_I32] = {"i32", 1, 4, false, 1, false},
    [MF_TYPE_I64] = {"i64", 1, 8, false, 1, false},
    [MF_TYPE_F64] = {"f64", 1, 8, false, 1, false},
    [MF_TYPE_BF16] = {"bf16", 1, 2, false, 1, false},
    [MF_TYPE_Q4_0_X8] = {"q4_0x8", MF_QK4_0, sizeof(mf_block_q4_0), true, MF_X8_ROWS, true},
    [MF_TYPE_Q8_0S] = {"q8_0s", MF_QK8_0, sizeof(mf_block_q8_0s), true, 1, true},
    [MF_TYPE_Q8_0_X8] = {"q8_0x8", MF_QK8_0, sizeof(mf_block_q8_0), true, MF_X8_ROWS, true},
    [MF_TYPE_Q5_0_X8] = {"q5_0x8", MF_QK5_0, sizeof(mf_block_q5_0), true, MF_X8_ROWS, true},
    [MF_TYPE_Q4_K_X8] = {"q4_Kx8", MF_QK_K, sizeof(mf_block_q4_K), true, MF_X8_ROWS, true},
    [MF_TYPE_Q6_K_X8] = {"q6_Kx8", MF_QK_K, sizeof(mf_block_q6_K), true, MF_X8_ROWS, true},
    [MF_TYPE_Q4_0_X16] = {"q4_0x16", MF_QK4_0, sizeof(mf_block_q4_0), true, MF_X16_ROWS, true},
    [MF_TYPE_Q5_0_X16] = {"q5_0x16", MF_QK5_0, sizeof(mf_block_q5_0), true, MF_X16_ROWS, true},
    [MF_TYPE_Q8_0_X16] = {"q8_0x16", MF_QK8_0, sizeof(mf_block_q8_0), true, MF_X16_ROWS, true},
    [MF_TYPE_IQ4_NL_X8] = {"iq4_nlx8", MF_QK4_NL, sizeof(mf_block_iq4_nl), true, MF_X8_ROWS, true},
    [MF_TYPE_IQ4_NL_X16] = {"iq4_nlx16", MF_QK4_NL, sizeof(mf_block_iq4_nl), true, MF_X16_ROWS, true},
    [MF_TYPE_IQ4_XS_X8] = {"iq4_xsx8", MF_QK_K, sizeof(mf_block_iq4_xs), true, MF_X8_ROWS, true},
    [MF_TYPE_Q5_K_X8] = {"q5_Kx8", MF_QK_K, sizeof(mf_block_q5_K), true, MF_X8_ROWS, true},
};

/* The block structs are file layouts: a padding byte here would silently corrupt every model. */
_Static_assert(sizeof(mf_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(mf_block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(mf_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(mf_block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(mf_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(mf_block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(mf_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(mf_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(mf_block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(mf_block_q8_K) == 292, "q8_K layout");
_Static_assert(sizeof(mf_block_q2_K) == 84, "q2_K layout");
_Static_assert(sizeof(mf_block_q3_K) == 110, "q3_K layout");
_Static_assert(sizeof(mf_block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(mf_block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(mf_block_q4_0x8) == 8 * sizeof(mf_block_q4_0), "q4_0x8 layout");
_Static_assert(sizeof(mf_block_q8_0x8) == 8 * sizeof(mf_block_q8_0), "q8_0x8 layout");
_Static_assert(sizeof(mf_block_q8_0s) == 36, "q8_0s layout");
_Static_assert(sizeof(mf_block_q5_0x8) == 8 * sizeof(mf_block_q5_0), "q5_0x8 layout");
_Static_assert(sizeof(mf_block_q4_Kx8) == 8 * sizeof(mf_block_q4_K), "q4_Kx8 layout");
_Static_assert(sizeof(mf_block_iq4_xsx8) == 8 * sizeof(mf_block_iq4_xs), "iq4_xsx8 layout");
_Static_assert(sizeof(mf_block_q5_Kx8) == 8 * sizeof(mf_block_q5_K), "q5_Kx8 layout");
/* the kernels read a q5_Kx8 block's q4_Kx8 fields through the q4_Kx8 type */
_Static_assert(offsetof(mf_block_q5_Kx8, scales) == offsetof(mf_block_q4_Kx8, scales) &&
                   offsetof(mf_block_q5_Kx8, qs) == offsetof(mf_block_q4_Kx8, qs),
               "q5_Kx8 starts as q4_Kx8");
_Static_assert(sizeof(mf_block_q6_Kx8) == 8 * sizeof(mf_block_q6_K), "q6_Kx8 layout");
_Static_assert(sizeof(mf_block_q4_0x16) == 16 * sizeof(mf_block_q4_0), "q4_0x16 layout");
_Static_assert(sizeof(mf_block_q5_0x16) == 16 * sizeof(mf_block_q5_0), "q5_0x16 layout");
_Static_assert(sizeof(mf_block_q8_0x16) == 16 * sizeof(mf_block_q8_0), "q8_0x16 layout");

const mf_type_info *mf_type_get(uint32_t type) {
    if (type >= MF_TYPE_COUNT || !k_types[type].name) return NULL;
    return &k_types[type];
}

const mf_type_info *mf_type_get_file(uint32_t type) {
    const mf_type_info *t = mf_type_get(type);
    return t && !t->internal ? t : NULL;
}

const char *mf_type_name(uint32_t type) {
    const mf_type_info *t = mf_type_get(type);
    if (t) return t->name;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "unknown(%u)", type);
    return buf;
}

size_t mf_row_size(uint32_t type, int64_t n) {
    const mf_type_info *t = mf_type_get(type);
    if (!t || n < 0 || n % t->blck_size != 0) return 0;
    uint64_t bytes;
    if (!mf_mul_u64((uint64_t)(n / t->blck_size), t->type_size, &bytes) || bytes > SIZE_MAX) return 0;
    return (size_t)bytes;
}
