/* A software model of the AMX-INT8 tile unit (test-only, x86-64): the AMX tile kernels of src/quant compiled
 * a second time over it (amx_emu.c), so their logic - tile shapes, strides, the unpacked B layout, the tail
 * slab, the float part - runs and is held to the reference on every AVX-512 machine, not only on the few
 * with AMX.  What it cannot check is the hardware's side of the intrinsics; test_amx_kernels does that where
 * AMX exists.
 *
 * The model follows the instruction set reference's pseudo-code: LDTILECFG palette 1 (8 tiles, at most 16
 * rows of at most 64 bytes), TILELOADD / TILESTORED of rows x colsb bytes at a stride (a load zeroes the rest
 * of the tile), TILEZERO, TDPBSSD / TDPBUSD (C[m][n] += the four byte products of A row m dword k and B row k
 * dword n, wrapping int32).  Where the hardware would raise #UD or #GP (no config, a config out of range,
 * operands whose shapes do not chain, a tile used twice in one dot product) the model counts a fault and
 * records the first one's reason instead of executing: a kernel that would trap on AMX fails its test here. */
#ifndef MF_TEST_AMX_EMU_H
#define MF_TEST_AMX_EMU_H

#include "quant/quant.h"

#include <stddef.h>

/* The emulated kernel set for a repacked type the AMX set serves (the x16 layouts, q4_Kx8, q5_Kx8,
 * q6_Kx8): the amx table's entry with its kernel compiled over the model.  NULL for other types, on other
 * architectures, and where the CPU lacks AVX-512 (the kernels' unpacking and float part use it). */
const mf_quant_kernels *mf_amx_emu_kernels(uint32_t type);

/* Faults since the last call (0: none) and the first one's reason in why[n]; resets both. */
int mf_amx_emu_faults(char *why, size_t n);

#endif
