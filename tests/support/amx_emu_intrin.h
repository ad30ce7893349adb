/* The AMX tile intrinsics redirected to tests/support/amx_emu.c's model (x86-64 test builds only): include
 * it before an AMX kernel file (amx_emu_x16.c, amx_emu_x8.c).  immintrin.h comes first, so its include guard
 * keeps the real definitions out afterwards. */
#ifndef MF_TEST_AMX_EMU_INTRIN_H
#define MF_TEST_AMX_EMU_INTRIN_H

#include "quant/quant_x86.h"

#include <stdbool.h>

void mf_amx_emu_loadconfig(const void *cfg);
void mf_amx_emu_release(void);
void mf_amx_emu_zero(int t);
void mf_amx_emu_loadd(int t, const void *base, long stride);
void mf_amx_emu_stored(int t, void *base, long stride);
void mf_amx_emu_dp(int tc, int ta, int tb, bool a_signed);

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbssd
#undef _tile_dpbusd
#define _tile_loadconfig(cfg) mf_amx_emu_loadconfig(cfg)
#define _tile_release() mf_amx_emu_release()
#define _tile_zero(t) mf_amx_emu_zero(t)
#define _tile_loadd(t, base, stride) mf_amx_emu_loadd(t, base, stride)
#define _tile_stored(t, base, stride) mf_amx_emu_stored(t, base, stride)
#define _tile_dpbssd(c, a, b) mf_amx_emu_dp(c, a, b, true)
#define _tile_dpbusd(c, a, b) mf_amx_emu_dp(c, a, b, false)

/* Without amx-tile / amx-int8 in the target: a tile intrinsic the macros above miss fails to compile. */
#define MF_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define MF_AMX_NAME(f) f##_emu

#endif
