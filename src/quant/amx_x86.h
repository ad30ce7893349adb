/* quant: what the AMX tile kernels share (x16_amx.c, x8_amx.c; this folder only). */
#ifndef MF_AMX_X86_H
#define MF_AMX_X86_H

#include "quant/quant_x86.h"

/* tests/support/amx_emu_*.c compile the AMX files a second time over a software model of the tiles, with
 * their own MF_AMX (no AMX target: a tile intrinsic they do not model fails to compile) and MF_AMX_NAME
 * (renamed exports). */
#ifndef MF_AMX
#define MF_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,prfchw,amx-tile,amx-int8")))
#endif
#ifndef MF_AMX_NAME
#define MF_AMX_NAME(f) f
#endif

/* ldtilecfg's 64-byte operand (palette 1) */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* gcc's tile intrinsics are asm statements that name no memory: order them against the plain stores and
 * loads around them (the config, the unpacked B tiles, the C tiles' buffer) explicitly.  The emulated
 * build (function calls) cannot show a missing one; only an AMX machine can. */
#define MEM_FENCE() __asm__ volatile("" ::: "memory")

#endif
