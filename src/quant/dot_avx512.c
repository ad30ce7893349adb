/* quant: AVX-512 (F/BW/VL + VNNI) dot kernels.
 *
 * Only the Q8_0-family kernels change at this level: vpdpbusd replaces maddubs+madd.  It sums the
 * same four adjacent products into each int32 lane, so every lane, and therefore every float result,
 * is bitwise the AVX2 one (and llama.cpp's); the gain is fewer uops per block.  The K-format and float
 * kernels have no VNNI shape that keeps their lanes (their scales multiply 16-bit pair sums), so the
 * AVX-512 table has no rows for them and the AVX2 ones serve (kernels_x86.c).  The loop is quant_x86.h's,
 * shared with dot_avx2.c; only the multiply-sum differs. */
#include "quant/quant_x86.h"

MF_DEFINE_Q8_DOTS(avx512, MF_AVX512, mf_mulsum_i8_vnni)
