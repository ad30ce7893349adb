/* Deterministic IQ2/IQ3 test blocks, shared VERBATIM by tests/test_quant_iq.c and the golden generator
 * tools/oracle/iq_golden.c (so both build the very same blocks).  Changing anything here changes the
 * goldens: regenerate them (tools/oracle/README-quant.md).
 *
 * Every byte pattern of these five formats is a valid block (each grid index field is exactly as wide
 * as its grid, every sign field and scale nibble is meaningful), so a block is random bytes with only
 * the f16 super-block scale replaced by a sane one (blockgen.h's qg_f16_scale: normal values of
 * magnitude 2^-12..2^4, some subnormal and zero ones). */
#ifndef QG_BLOCKGEN_IQ_H
#define QG_BLOCKGEN_IQ_H

#include "blockgen.h"

/* ggml type ids (file-format contract) */
enum { QG_IQ2_XXS = 16, QG_IQ2_XS = 17, QG_IQ3_XXS = 18, QG_IQ3_S = 21, QG_IQ2_S = 22 };

static const qg_type qg_iq_types[] = {
    {QG_IQ2_XXS, "iq2_xxs", 256, 66}, {QG_IQ2_XS, "iq2_xs", 256, 74}, {QG_IQ2_S, "iq2_s", 256, 82},
    {QG_IQ3_XXS, "iq3_xxs", 256, 98}, {QG_IQ3_S, "iq3_s", 256, 110},
};
#define QG_NIQ ((int)(sizeof qg_iq_types / sizeof qg_iq_types[0]))

static inline const qg_type *qg_find_iq(int type) {
    for (int i = 0; i < QG_NIQ; i++)
        if (qg_iq_types[i].type == type) return &qg_iq_types[i];
    return 0;
}

/* Fills n elements (a multiple of 256) of IQ type `type`: d (the first two bytes of every one of these
 * blocks) from qg_f16_scale, everything else random. */
static inline void qg_fill_iq(int type, uint64_t seed, int n, void *out) {
    const qg_type *t = qg_find_iq(type);
    uint64_t s = seed * 0x100000001B3ull + (uint64_t)type + 0x1000;
    uint8_t *b = (uint8_t *)out;
    for (int k = 0; k < n / t->blck; k++, b += t->bytes) {
        for (int i = 0; i < t->bytes; i++) b[i] = (uint8_t)qg_next(&s);
        qg_put16(b, qg_f16_scale(&s, k));
    }
}

#endif
