/* Dev-only: the IQ2/IQ3 grid tables (src/quant/iq_grids.c) and quant goldens (tests/golden/quant/) of
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S, from llama.cpp's own prebuilt libraries.
 * oracle-libs: -lggml-base -lggml-cpu-haswell
 * oracle-cflags: -I../../tests/golden/quant
 *
 *   tools/oracle/build.sh iq_golden
 *   tools/oracle/bin/iq_golden grids   > src/quant/iq_grids.c
 *   tools/oracle/bin/iq_golden goldens tests/golden/quant
 *
 * grids: the lattice points these formats index are data of the format.  This program recovers every
 * entry through ggml's public to_float: a block whose super-block scale d and sub-block scale make the
 * dequantized value equal the grid byte itself (IQ2_*: d = 8, scale nibble 0 -> 8 * 0.5 * 0.25 = 1;
 * IQ3_XXS: d = 4, 4 * 0.5 * 0.5 = 1; IQ3_S: d = 1, 1 * (1 + 2 * 0) = 1), all sign bits clear, and the
 * index field set to each entry in turn.  It checks every recovered byte is one of the format's levels
 * and exits non-zero otherwise.  It also checks the sign definition minfer computes instead of storing
 * (a 7-bit sign field s means the 8 signs s | parity(s) << 7: an even number of minus signs) by
 * dequantizing every s.
 *
 * goldens: deq_<type>.bin = ggml to_float of qg_fill_iq(type, seed 1, 2048); dot_<type>.bin = 16
 * llama.cpp vec_dot results (haswell: the AVX2 kernels) of from_float(qg_floats(seed 3, 1024)) as Q8_K
 * against qg_fill_iq(type, 100 + r, 1024). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"

#include "blockgen_iq.h"

#define F16_ONE 0x3C00
#define F16_FOUR 0x4400
#define F16_EIGHT 0x4800

static void die(const char *what) {
    fprintf(stderr, "iq_golden: %s\n", what);
    exit(1);
}

static void to_float(int type, const void *blocks, float *y, int n) {
    ggml_get_type_traits((enum ggml_type)type)->to_float(blocks, y, n);
}

/* the grid byte values of each format, for the check */
static int level_ok(int type, float v) {
    static const int l2[] = {8, 25, 43}, l3x[] = {4, 12, 20, 28, 36, 44, 52, 62}, l3s[] = {1, 3, 5, 7, 9, 11, 13, 15};
    const int *l = type == QG_IQ3_XXS ? l3x : type == QG_IQ3_S ? l3s : l2;
    const int nl = type == QG_IQ3_XXS || type == QG_IQ3_S ? 8 : 3;
    for (int i = 0; i < nl; i++)
        if (v == (float)l[i]) return 1;
    return 0;
}

/* One block of `type` with d set to make values equal the grid bytes and `entry` placed in the index
 * field of group g (0..31 for the 8-value groups of IQ2, 0..63 for the 4-value groups of IQ3); sign bits
 * and scale nibbles zero.  Returns the element offset of that group's first value. */
static int craft(int type, uint8_t *b, int g, int entry) {
    const qg_type *t = qg_find_iq(type);
    memset(b, 0, (size_t)t->bytes);
    switch (type) {
    case QG_IQ2_XXS: { /* qs as 32-bit pairs per sub-block: 4 index bytes, then signs/scale */
        qg_put16(b, F16_EIGHT);
        b[2 + 8 * (g / 4) + g % 4] = (uint8_t)entry;
        return 8 * g;
    }
    case QG_IQ2_XS: { /* qs[k] (16 bits): index in bits 0..8, sign field above */
        qg_put16(b, F16_EIGHT);
        qg_put16(b + 2 + 2 * g, (uint16_t)entry);
        return 8 * g;
    }
    case QG_IQ2_S: { /* qs[g] low 8 bits, qh[g/4] bits 2(g%4)..+1 the high 2 */
        qg_put16(b, F16_EIGHT);
        b[2 + g] = (uint8_t)(entry & 255);
        b[2 + 64 + g / 4] |= (uint8_t)((entry >> 8) << (2 * (g % 4)));
        return 8 * g;
    }
    case QG_IQ3_XXS: { /* qs[g] is the index of 4 values */
        qg_put16(b, F16_FOUR);
        b[2 + g] = (uint8_t)entry;
        return 4 * g;
    }
    case QG_IQ3_S: { /* qs[g] low 8 bits, bit g%8 of qh[g/8] the 9th */
        qg_put16(b, F16_ONE);
        b[2 + g] = (uint8_t)(entry & 255);
        b[2 + 64 + g / 8] |= (uint8_t)((entry >> 8) << (g % 8));
        return 4 * g;
    }
    }
    die("craft: bad type");
    return 0;
}

static void grid(int type, const char *cname, int entries, int width) {
    uint8_t blk[256];
    float y[256];
    printf("const uint%d_t %s[%d] = {", 8 * width, cname, entries);
    for (int e = 0; e < entries; e++) {
        const int g = e % (width == 8 ? 32 : 64); /* exercise every group position */
        const int off = craft(type, blk, g, e);
        to_float(type, blk, y, 256);
        uint64_t v = 0;
        for (int j = 0; j < width; j++) {
            if (!level_ok(type, y[off + j])) {
                fprintf(stderr, "iq_golden: %s entry %d value %d is %g, not a level of the format\n", cname, e, j,
                        (double)y[off + j]);
                exit(1);
            }
            v |= (uint64_t)(uint8_t)y[off + j] << (8 * j);
        }
        printf("%s0x%0*llx,", e % (width == 8 ? 4 : 8) ? " " : "\n    ", 2 * width, (unsigned long long)v);
    }
    printf("\n};\n\n");
}

/* IQ2_XXS sign fields: field s of group 0 must negate exactly the bits of s | parity(s) << 7 */
static void check_signs(void) {
    uint8_t blk[66];
    float y[256];
    for (int s = 0; s < 128; s++) {
        craft(QG_IQ2_XXS, blk, 0, 0);
        blk[2 + 4] = (uint8_t)s; /* aux32[1] bits 0..6: group 0's field */
        to_float(QG_IQ2_XXS, blk, y, 256);
        int want = s | (__builtin_parity((unsigned)s) << 7), got = 0;
        for (int j = 0; j < 8; j++) got |= (y[j] < 0) << j;
        if (got != want) {
            fprintf(stderr, "iq_golden: sign field %d negates %02x, expected %02x\n", s, got, want);
            exit(1);
        }
    }
}

static void gen_grids(void) {
    check_signs();
    printf("/* GENERATED by tools/oracle/iq_golden.c (`iq_golden grids`): do not edit.\n"
           " * The lattice points of the IQ2/IQ3 formats, recovered entry by entry from llama.cpp's dequantizer\n"
           " * (ggml to_float of blocks whose scales make each value equal its grid byte), llama.cpp commit\n"
           " * %s.\n"
           " * Entry k holds the 8 (IQ2) or 4 (IQ3) unsigned magnitudes of index k, value j in byte j. */\n"
           "#include \"quant/iq_grids.h\"\n\n",
           ORACLE_LLAMA_COMMIT);
    grid(QG_IQ2_XXS, "mf_iq2xxs_grid", 256, 8);
    grid(QG_IQ2_XS, "mf_iq2xs_grid", 512, 8);
    grid(QG_IQ2_S, "mf_iq2s_grid", 1024, 8);
    grid(QG_IQ3_XXS, "mf_iq3xxs_grid", 256, 4);
    grid(QG_IQ3_S, "mf_iq3s_grid", 512, 4);
}

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) die("cannot write a golden");
}

static void gen_goldens(const char *dir) {
    static uint8_t blocks[QG_N], w[QG_DOT_N], a[QG_DOT_N * 2];
    static float out[QG_N], x[QG_DOT_N];
    qg_floats(3, QG_DOT_N, x);
    for (int i = 0; i < QG_NIQ; i++) {
        const qg_type *t = &qg_iq_types[i];
        char name[64];
        qg_fill_iq(t->type, 1, QG_N, blocks);
        to_float(t->type, blocks, out, QG_N);
        snprintf(name, sizeof name, "deq_%s.bin", t->name);
        write_file(dir, name, out, sizeof out);

        const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu((enum ggml_type)t->type);
        if (tc->vec_dot_type != GGML_TYPE_Q8_K) die("vec_dot_type is not q8_K");
        memset(a, 0, sizeof a);
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x, a, QG_DOT_N);
        float res[QG_DOT_ROWS];
        for (int r = 0; r < QG_DOT_ROWS; r++) {
            qg_fill_iq(t->type, 100 + (uint64_t)r, QG_DOT_N, w);
            tc->vec_dot(QG_DOT_N, &res[r], 0, w, 0, a, 0, 1);
        }
        snprintf(name, sizeof name, "dot_%s.bin", t->name);
        write_file(dir, name, res, sizeof res);
    }
    fprintf(stderr, "iq goldens written to %s\n", dir);
}

int main(int argc, char **argv) {
    ggml_cpu_init();
    if (argc >= 2 && !strcmp(argv[1], "grids")) gen_grids();
    else if (argc >= 3 && !strcmp(argv[1], "goldens")) gen_goldens(argv[2]);
    else die("usage: iq_golden grids > src/quant/iq_grids.c | iq_golden goldens DIR");
    return 0;
}
