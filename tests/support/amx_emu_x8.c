/* src/quant/x8_amx.c compiled over the tile model (amx_emu.h), its exports renamed *_emu. */
#if defined(__x86_64__)
#include "amx_emu_intrin.h"

#include "quant/x8_amx.c"
#else
typedef int mf_amx_emu_x8_unused; /* x86-64 only */
#endif
