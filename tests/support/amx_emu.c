/* The AMX-INT8 model and the AMX kernels compiled over it (amx_emu.h says what and why). */
#include "amx_emu.h"

#if defined(__x86_64__)
#include "amx_emu_intrin.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum { EMU_TILES = 8, EMU_ROWS = 16, EMU_COLSB = 64 };

typedef struct {
    int rows, colsb; /* the config's shape; 0 x 0 = not configured */
    uint8_t b[EMU_ROWS][EMU_COLSB];
} emu_tile;

/* The tile registers are per thread, as on the hardware (the kernels load their config on every call). */
static _Thread_local struct {
    bool configured;
    emu_tile t[EMU_TILES];
} emu;

static int g_faults;
static char g_why[200];

static void fault(const char *fmt, ...) {
    if (g_faults++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_why, sizeof g_why, fmt, ap);
        va_end(ap);
    }
}

int mf_amx_emu_faults(char *why, size_t n) {
    const int f = g_faults;
    if (n) snprintf(why, n, "%s", f ? g_why : "");
    g_faults = 0;
    g_why[0] = 0;
    return f;
}

/* LDTILECFG: palette 1 (0 would release), start_row and the reserved bytes 0, tiles past 8 unused, each tile
 * rows <= 16 and colsb <= 64, both zero or neither. */
void mf_amx_emu_loadconfig(const void *p) {
    const uint8_t *c = p;
    memset(&emu, 0, sizeof emu);
    if (c[0] != 1) {
        fault("ldtilecfg: palette %d (the kernels use palette 1)", c[0]);
        return;
    }
    for (int i = 1; i < 16; i++)
        if (c[i]) {
            fault("ldtilecfg: byte %d (start_row / reserved) is %d, must be 0", i, c[i]);
            return;
        }
    for (int t = 0; t < 16; t++) {
        const int colsb = c[16 + 2 * t] | c[17 + 2 * t] << 8;
        const int rows = c[48 + t];
        if (t >= EMU_TILES ? rows || colsb : rows > EMU_ROWS || colsb > EMU_COLSB || !rows != !colsb) {
            fault("ldtilecfg: tile %d has %d rows of %d bytes", t, rows, colsb);
            return;
        }
        if (t < EMU_TILES) emu.t[t].rows = rows, emu.t[t].colsb = colsb;
    }
    emu.configured = true;
}

void mf_amx_emu_release(void) { memset(&emu, 0, sizeof emu); }

static emu_tile *tile(int t) {
    if (!emu.configured) return fault("tile %d used without a tile config", t), NULL;
    if (t < 0 || t >= EMU_TILES || !emu.t[t].rows) return fault("tile %d used but not configured", t), NULL;
    return &emu.t[t];
}

void mf_amx_emu_zero(int t) {
    emu_tile *x = tile(t);
    if (x) memset(x->b, 0, sizeof x->b);
}

void mf_amx_emu_loadd(int t, const void *base, long stride) {
    emu_tile *x = tile(t);
    if (!x) return;
    memset(x->b, 0, sizeof x->b);
    for (int r = 0; r < x->rows; r++) memcpy(x->b[r], (const char *)base + (ptrdiff_t)r * stride, (size_t)x->colsb);
}

void mf_amx_emu_stored(int t, void *base, long stride) {
    emu_tile *x = tile(t);
    if (!x) return;
    for (int r = 0; r < x->rows; r++) memcpy((char *)base + (ptrdiff_t)r * stride, x->b[r], (size_t)x->colsb);
}

/* TDPBSSD (a_signed) / TDPBUSD: C[m][n] += sum over k of the 4 byte products of A[m] dword k and B[k] dword
 * n, in int32 that wraps; then the rows and bytes outside C's shape are zero. */
void mf_amx_emu_dp(int tc, int ta, int tb, bool a_signed) {
    emu_tile *c = tile(tc), *a = tile(ta), *b = tile(tb);
    if (!c || !a || !b) return;
    if (tc == ta || tc == tb || ta == tb) {
        fault("tdpb*d: tiles %d, %d, %d are not distinct", tc, ta, tb);
        return;
    }
    if (c->colsb % 4 || a->colsb % 4 || c->rows != a->rows || a->colsb / 4 != b->rows || c->colsb != b->colsb) {
        fault("tdpb*d: C (tile %d) %d x %d bytes, A (%d) %d x %d, B (%d) %d x %d do not chain (C rows = A rows, A"
              " bytes / 4 = B rows, C bytes = B bytes)",
              tc, c->rows, c->colsb, ta, a->rows, a->colsb, tb, b->rows, b->colsb);
        return;
    }
    for (int m = 0; m < c->rows; m++)
        for (int n = 0; n < c->colsb / 4; n++) {
            uint32_t acc;
            memcpy(&acc, c->b[m] + 4 * n, 4);
            for (int k = 0; k < a->colsb / 4; k++)
                for (int i = 0; i < 4; i++) {
                    const int32_t av = a_signed ? (int8_t)a->b[m][4 * k + i] : a->b[m][4 * k + i];
                    acc += (uint32_t)(av * (int8_t)b->b[k][4 * n + i]);
                }
            memcpy(c->b[m] + 4 * n, &acc, 4);
        }
    for (int m = 0; m < EMU_ROWS; m++)
        memset(c->b[m] + (m < c->rows ? c->colsb : 0), 0, (size_t)(EMU_COLSB - (m < c->rows ? c->colsb : 0)));
}

/* The kernels compiled over the model (amx_emu_x16.c, amx_emu_x8.c) */
mf_tile_fn_t mf_tile_q4_0x16_amx_emu, mf_tile_q5_0x16_amx_emu, mf_tile_q8_0x16_amx_emu, mf_tile_iq4_nlx16_amx_emu,
    mf_tile_q4_Kx8_amx_emu, mf_tile_q5_Kx8_amx_emu, mf_tile_q6_Kx8_amx_emu;
mf_tile_packed_fn_t mf_tile_q4_0x16_amx_packed_emu, mf_tile_q5_0x16_amx_packed_emu, mf_tile_q8_0x16_amx_packed_emu,
    mf_tile_iq4_nlx16_amx_packed_emu;
size_t mf_amx_pack_size_emu(int64_t K, int64_t M);
void mf_amx_pack_row_emu(const void *row, int64_t K, int64_t m, int64_t M, void *p);

/* The amx table's own entry (kernels_x86.c: its shape, spans, activation type), its kernel swapped for the
 * twin compiled over the model. */
const mf_quant_kernels *mf_amx_emu_kernels(uint32_t type) {
    static const struct {
        mf_vec_dot_tile_fn real, emu;
        mf_tile_packed_fn_t *packed_emu; /* the packed twin (the x16 layouts) */
    } twins[] = {
        {mf_tile_q4_0x16_amx, mf_tile_q4_0x16_amx_emu, mf_tile_q4_0x16_amx_packed_emu},
        {mf_tile_q5_0x16_amx, mf_tile_q5_0x16_amx_emu, mf_tile_q5_0x16_amx_packed_emu},
        {mf_tile_q8_0x16_amx, mf_tile_q8_0x16_amx_emu, mf_tile_q8_0x16_amx_packed_emu},
        {mf_tile_iq4_nlx16_amx, mf_tile_iq4_nlx16_amx_emu, mf_tile_iq4_nlx16_amx_packed_emu},
        {mf_tile_q4_Kx8_amx, mf_tile_q4_Kx8_amx_emu, NULL},
        {mf_tile_q5_Kx8_amx, mf_tile_q5_Kx8_amx_emu, NULL},
        {mf_tile_q6_Kx8_amx, mf_tile_q6_Kx8_amx_emu, NULL},
    };
    static mf_quant_kernels k[MF_TYPE_COUNT];
    if (type >= MF_TYPE_COUNT || !mf_quant_arch_cpu_has(MF_ISA_AVX512)) return NULL;
    const mf_quant_kernels *amx = &mf_quant_arch_table(MF_ISA_AMX)[type];
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++)
        if (amx->vec_dot_tile == twins[i].real) {
            k[type] = *amx;
            k[type].vec_dot_tile = twins[i].emu;
            if (twins[i].packed_emu) {
                k[type].pack_size = mf_amx_pack_size_emu;
                k[type].pack_row = mf_amx_pack_row_emu;
                k[type].tile_packed = twins[i].packed_emu;
            }
            return &k[type];
        }
    return NULL; /* no AMX kernel of its own, or one without a twin here */
}

#else
typedef int mf_amx_emu_unused; /* x86-64 only */
const mf_quant_kernels *mf_amx_emu_kernels(uint32_t type) {
    (void)type;
    return NULL;
}
int mf_amx_emu_faults(char *why, size_t n) {
    if (n) why[0] = 0;
    return 0;
}
#endif
