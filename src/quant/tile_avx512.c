/* quant: AVX-512 VNNI tile kernels (see tile_x86.h and the tile contract in quant.h). */
#include "quant/tile_x86.h"

MF_DEFINE_Q8_TILE(mf_tile_q4_0_avx512, MF_AVX512, mf_block_q4_0, mf_q4_0_bytes, mf_mulsum_i8_vnni, mf_vec_dot_q4_0_avx512)
MF_DEFINE_Q8_TILE(mf_tile_q5_0_avx512, MF_AVX512, mf_block_q5_0, mf_q5_0_bytes, mf_mulsum_i8_vnni, mf_vec_dot_q5_0_avx512)
MF_DEFINE_Q8_TILE(mf_tile_q8_0_avx512, MF_AVX512, mf_block_q8_0, mf_q8_0_bytes, mf_mulsum_i8_vnni, mf_vec_dot_q8_0_avx512)
