/* Deterministic test data for the quant goldens, shared VERBATIM by tests/test_quant.c and the golden
 * generator tools/oracle/quant_golden.c (so both build the very same blocks and floats).  Changing
 * anything here changes the goldens: regenerate them (tools/oracle/README-quant.md).
 *
 * Blocks are random bytes with the scale fields overwritten by sane finite values (normal f16 of
 * magnitude 2^-12..2^4, with some subnormal and zero scales mixed in); int8 quants stay in -127..127
 * (what every quantizer produces) and Q8_K bsums are consistent with qs. */
#ifndef QG_BLOCKGEN_H
#define QG_BLOCKGEN_H

#include <stdint.h>
#include <string.h>

/* ggml type ids (file-format contract, same numbers in ggml.h and quant.h) */
enum { QG_F32 = 0, QG_F16 = 1, QG_Q4_0 = 2, QG_Q4_1 = 3, QG_Q5_0 = 6, QG_Q5_1 = 7, QG_Q8_0 = 8, QG_Q8_1 = 9,
       QG_Q2_K = 10, QG_Q3_K = 11, QG_Q4_K = 12, QG_Q5_K = 13, QG_Q6_K = 14, QG_Q8_K = 15, QG_IQ4_NL = 20,
       QG_IQ4_XS = 23, QG_BF16 = 30 };

#define QG_N 2048    /* elements per dequant golden (8 super-blocks, 64 small blocks) */
#define QG_NQ 4096   /* floats per quantizer golden */
#define QG_DOT_N 1024 /* row length of the llama.cpp vec_dot goldens */
#define QG_DOT_ROWS 16

typedef struct {
    int type;
    const char *name;
    int blck;  /* elements per block */
    int bytes; /* bytes per block */
} qg_type;

static const qg_type qg_types[] = {
    {QG_F32, "f32", 1, 4},        {QG_F16, "f16", 1, 2},        {QG_BF16, "bf16", 1, 2},
    {QG_Q4_0, "q4_0", 32, 18},    {QG_Q4_1, "q4_1", 32, 20},    {QG_Q5_0, "q5_0", 32, 22},
    {QG_Q5_1, "q5_1", 32, 24},    {QG_Q8_0, "q8_0", 32, 34},    {QG_Q2_K, "q2_K", 256, 84},
    {QG_Q3_K, "q3_K", 256, 110},  {QG_Q4_K, "q4_K", 256, 144},  {QG_Q5_K, "q5_K", 256, 176},
    {QG_Q6_K, "q6_K", 256, 210},  {QG_Q8_K, "q8_K", 256, 292},  {QG_IQ4_NL, "iq4_nl", 32, 18},
    {QG_IQ4_XS, "iq4_xs", 256, 136},
};
#define QG_NTYPES ((int)(sizeof qg_types / sizeof qg_types[0]))

/* Q8_1 is activation-only (ggml has no dequantizer for it): fillable, but no dequant golden. */
static const qg_type qg_type_q8_1 = {QG_Q8_1, "q8_1", 32, 36};

static inline const qg_type *qg_find(int type) {
    for (int i = 0; i < QG_NTYPES; i++)
        if (qg_types[i].type == type) return &qg_types[i];
    return type == QG_Q8_1 ? &qg_type_q8_1 : 0;
}

static inline uint64_t qg_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) with 24 random bits: exact in f32 */
static inline float qg_unit(uint64_t *s) { return (float)((int64_t)(qg_next(s) >> 40) - (1 << 23)) * 0x1p-23f; }

static inline void qg_put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* A scale as raw f16 bits; block index k picks the occasional zero / subnormal one. */
static inline uint16_t qg_f16_scale(uint64_t *s, int k) {
    uint64_t r = qg_next(s);
    uint16_t sign = (uint16_t)((r & 1) << 15), man = (uint16_t)((r >> 1) & 0x3FF);
    if (k % 11 == 5) return sign;                        /* +-0 */
    if (k % 7 == 3) return sign | (uint16_t)(man | 1);   /* subnormal */
    uint16_t exp = (uint16_t)(3 + (r >> 11) % 16);       /* 2^-12 .. 2^3 (times 1.x) */
    return sign | (uint16_t)(exp << 10) | man;
}

static inline float qg_f32_scale(uint64_t *s) {
    uint64_t r = qg_next(s);
    uint32_t bits = (uint32_t)((r & 1) << 31) | (uint32_t)((127 - 14 + (r >> 1) % 12) << 23) | (uint32_t)((r >> 8) & 0x7FFFFF);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline void qg_int8s(uint64_t *s, uint8_t *p, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(int8_t)((int)(qg_next(s) % 255) - 127);
}

/* Fills n elements (n a multiple of the block size) of `type` into out. */
static inline void qg_fill(int type, uint64_t seed, int n, void *out) {
    const qg_type *t = qg_find(type);
    uint64_t s = seed * 0x100000001B3ull + (uint64_t)type;
    uint8_t *b = (uint8_t *)out;
    const int nb = n / t->blck;
    for (int k = 0; k < nb; k++, b += t->bytes) {
        for (int i = 0; i < t->bytes; i++) b[i] = (uint8_t)qg_next(&s);
        switch (type) {
        case QG_F32: { float f = qg_unit(&s) * 4.0f; memcpy(b, &f, 4); break; }
        case QG_F16: { uint16_t h = qg_f16_scale(&s, k); qg_put16(b, h); break; }
        case QG_BF16: { uint16_t h = (uint16_t)((qg_next(&s) & 0x807F) | ((uint64_t)(120 + qg_next(&s) % 12) << 7)); qg_put16(b, h); break; }
        case QG_Q4_0: case QG_Q5_0: case QG_IQ4_NL: case QG_IQ4_XS: qg_put16(b, qg_f16_scale(&s, k)); break;
        case QG_Q4_1: case QG_Q5_1: qg_put16(b, qg_f16_scale(&s, k)); qg_put16(b + 2, qg_f16_scale(&s, k + 1)); break;
        case QG_Q8_0: qg_put16(b, qg_f16_scale(&s, k)); qg_int8s(&s, b + 2, 32); break;
        case QG_Q8_1: {
            qg_put16(b, qg_f16_scale(&s, k)); qg_put16(b + 2, qg_f16_scale(&s, k + 1)); qg_int8s(&s, b + 4, 32); break;
        }
        case QG_Q2_K: qg_put16(b + 80, qg_f16_scale(&s, k)); qg_put16(b + 82, qg_f16_scale(&s, k + 2)); break;
        case QG_Q3_K: qg_put16(b + 108, qg_f16_scale(&s, k)); break;
        case QG_Q4_K: case QG_Q5_K: qg_put16(b, qg_f16_scale(&s, k)); qg_put16(b + 2, qg_f16_scale(&s, k + 2)); break;
        case QG_Q6_K: qg_put16(b + 208, qg_f16_scale(&s, k)); break;
        case QG_Q8_K: {
            float d = qg_f32_scale(&s);
            memcpy(b, &d, 4);
            qg_int8s(&s, b + 4, 256);
            for (int j = 0; j < 16; j++) {
                int sum = 0;
                for (int i = 0; i < 16; i++) sum += (int8_t)b[4 + 16 * j + i];
                int16_t v = (int16_t)sum;
                memcpy(b + 260 + 2 * j, &v, 2);
            }
            break;
        }
        default: break;
        }
    }
}

/* Activation blocks (Q8_0 or Q8_K) from qg_fill with every third quant set to -128, the one int8 value ggml's
 * sign-then-maddubs kernels (IQ4_NL, IQ4_XS) cannot negate: Q8_K's quantizer writes it (scale -128/max). */
static inline void qg_fill_m128(int type, uint64_t seed, int n, void *out) {
    qg_fill(type, seed, n, out);
    const qg_type *t = qg_find(type);
    uint8_t *b = (uint8_t *)out;
    const int qoff = type == QG_Q8_K ? 4 : 2;
    for (int k = 0; k < n / t->blck; k++, b += t->bytes) {
        for (int i = 0; i < t->blck; i += 3) b[qoff + i] = 0x80;
        if (type != QG_Q8_K) continue;
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += (int8_t)b[4 + 16 * j + i];
            int16_t v = (int16_t)sum;
            memcpy(b + 260 + 2 * j, &v, 2);
        }
    }
}

/* Activation-like floats, in chunks of 32 with a shape per chunk: random at scales 2^-20..2^4,
 * all zero, constant, one outlier, and exact halves (x.5 with amax 127) that separate round-half-even
 * from round-half-away. */
static inline void qg_floats(uint64_t seed, int n, float *x) {
    uint64_t s = seed ^ 0xA5A5A5A5DEADBEEFull;
    for (int c = 0; c < n / 32; c++) {
        float *v = x + 32 * c;
        const int shape = (c / 8) % 5 == 4 ? 4 : c % 4; /* whole super-blocks of halves for Q8_K */
        const float scale = (float)(1 << ((qg_next(&s) % 25))) * 0x1p-20f; /* outliers stay f16-finite */
        for (int j = 0; j < 32; j++) v[j] = qg_unit(&s) * scale;
        if (shape == 1) memset(v, 0, 32 * sizeof(float));
        if (shape == 2) for (int j = 0; j < 32; j++) v[j] = -scale;
        if (shape == 3) v[qg_next(&s) % 32] = scale * 1000.0f;
        if (shape == 4) {
            for (int j = 0; j < 32; j++) v[j] = (float)((int)(qg_next(&s) % 253) - 126) + 0.5f;
            v[7] = 127.0f;
            if (c % 2) v[7] = -127.0f;
        }
    }
}

/* f32 bit patterns probing f16/bf16 rounding: every upper half with low halves around the f16
 * rounding points (bit 12 = half an f16 ulp, bit 13 = the f16 lsb) and the bf16 ones (bit 15). */
#define QG_PROBE_LOWS 10
#define QG_NPROBE (65536 * QG_PROBE_LOWS)
static inline float qg_probe(int i) {
    static const uint16_t lows[QG_PROBE_LOWS] = {0x0000, 0x0FFF, 0x1000, 0x1001, 0x2000,
                                                 0x3000, 0x7FFF, 0x8000, 0xE000, 0xFFFF};
    uint32_t bits = ((uint32_t)(i / QG_PROBE_LOWS) << 16) | lows[i % QG_PROBE_LOWS];
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* FNV-1a 64: compact goldens for the exhaustive conversion tables */
static inline uint64_t qg_hash(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}
#define QG_HASH0 0xCBF29CE484222325ull

#endif
