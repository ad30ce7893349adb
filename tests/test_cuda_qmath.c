/* The CUDA matmul/get_rows per-block math (src/backend/cuda/qmath.h), checked on the host against the CPU
 * reference in every build: the kernels call these same functions, so a wrong scale index or nibble shift
 * fails here without a GPU. */
#include "harness.h"

#include "backend/cuda/qmath.h"
#include "quant/quant.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

#define K_ELEMS 1024 /* 32 units, 4 super-blocks */

static const uint32_t k_types[] = {MF_TYPE_F32,     MF_TYPE_F16,    MF_TYPE_BF16,   MF_TYPE_Q4_0,    MF_TYPE_Q4_1,
                                   MF_TYPE_Q5_0,    MF_TYPE_Q5_1,   MF_TYPE_Q8_0,   MF_TYPE_Q2_K,    MF_TYPE_Q3_K,
                                   MF_TYPE_Q4_K,    MF_TYPE_Q5_K,   MF_TYPE_Q6_K,   MF_TYPE_IQ4_NL,  MF_TYPE_IQ4_XS,
                                   MF_TYPE_IQ2_XXS, MF_TYPE_IQ2_XS, MF_TYPE_IQ2_S,  MF_TYPE_IQ3_XXS, MF_TYPE_IQ3_S};

/* A row of random bytes with every scale field a finite f16 of moderate size (random f16 bits would be NaN or
 * huge now and then), float types random values.  buf must hold mf_row_size(type, K_ELEMS) bytes. */
static void make_row(uint32_t type, uint8_t *buf) {
    const size_t rs = mf_row_size(type, K_ELEMS);
    if (type == MF_TYPE_F32) {
        for (int i = 0; i < K_ELEMS; i++) {
            const float v = rndf(-2.0f, 2.0f);
            memcpy(buf + 4 * i, &v, 4);
        }
        return;
    }
    if (type == MF_TYPE_F16 || type == MF_TYPE_BF16) {
        for (int i = 0; i < K_ELEMS; i++) {
            const float v = rndf(-2.0f, 2.0f);
            put16(buf + 2 * i, type == MF_TYPE_F16 ? mf_fp32_to_fp16(v) : mf_fp32_to_bf16(v));
        }
        return;
    }
    for (size_t i = 0; i < rs; i++) buf[i] = (uint8_t)rnd();
    const int bb = mf_qm_block_bytes(type);
    for (size_t o = 0; o < rs; o += (size_t)bb) {
        uint8_t *b = buf + o;
        switch (type) {
        case MF_TYPE_Q4_1: case MF_TYPE_Q5_1: case MF_TYPE_Q4_K: case MF_TYPE_Q5_K:
            put16(b, mf_fp32_to_fp16(rndf(0.001f, 0.1f)));
            put16(b + 2, mf_fp32_to_fp16(rndf(-0.05f, 0.05f)));
            break;
        case MF_TYPE_Q6_K:
            put16(b + 208, mf_fp32_to_fp16(rndf(-0.01f, 0.01f)));
            break;
        case MF_TYPE_Q2_K: /* d, dmin after scales[16] qs[64] */
            put16(b + 80, mf_fp32_to_fp16(rndf(0.001f, 0.1f)));
            put16(b + 82, mf_fp32_to_fp16(rndf(-0.05f, 0.05f)));
            break;
        case MF_TYPE_Q3_K: /* d after hmask[32] qs[64] scales[12] */
            put16(b + 108, mf_fp32_to_fp16(rndf(-0.05f, 0.05f)));
            break;
        default: /* d at offset 0; the grid types' other fields are all valid as random bytes (every index
                  * field is exactly as wide as its table, every nibble a scale) */
            put16(b, mf_fp32_to_fp16(rndf(-0.1f, 0.1f)));
            break;
        }
    }
}

static void test_f16_bf16_conversion(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = mf_hd_f16_to_f32((uint16_t)h), b = mf_fp16_to_fp32((uint16_t)h);
        if (isnan(b))
            CHECK(isnan(a), "f16 %04x: %g, want NaN", h, (double)a);
        else
            CHECK(f32_bits(a) == f32_bits(b), "f16 %04x: %a, want %a", h, (double)a, (double)b);
        const float c = mf_hd_bf16_to_f32((uint16_t)h), d = mf_bf16_to_fp32((uint16_t)h);
        CHECK(f32_bits(c) == f32_bits(d) || (isnan(c) && isnan(d)), "bf16 %04x: %a, want %a", h, (double)c, (double)d);
    }
}

/* get_rows: every quarter of every unit equals the reference dequantizer, bit for bit */
static void test_dequant_bitwise(void) {
    static uint8_t row[K_ELEMS * 4];
    static float ref[K_ELEMS];
    for (size_t ti = 0; ti < MF_ARRAY_LEN(k_types); ti++) {
        const uint32_t type = k_types[ti];
        for (int rep = 0; rep < 20; rep++) {
            make_row(type, row);
            REQUIRE_OK(mf_dequantize_row(type, row, ref, K_ELEMS), "reference dequantizer of %s", mf_type_name(type));
            int bad = 0;
            for (int j = 0; j < K_ELEMS / MF_QM_UNIT; j++)
                for (int t = 0; t < 4; t++) {
                    float y[8];
                    mf_qm_dequant8(type, row, j, t, K_ELEMS, y);
                    for (int i = 0; i < 8; i++) {
                        const int e = MF_QM_UNIT * j + 8 * t + i;
                        if (f32_bits(y[i]) != f32_bits(ref[e]) && bad++ < 3)
                            CHECK(0, "%s element %d (unit %d quarter %d): %a, reference %a", mf_type_name(type), e, j,
                                  t, (double)y[i], (double)ref[e]);
                    }
                }
            CHECK(bad == 0, "%s: %d elements differ from the reference dequantizer", mf_type_name(type), bad);
        }
    }
}

/* The activation quantizer: levels in [-127, 127], the largest magnitude at +-127, each level within half a
 * step of x / d, and s their exact sum. */
static void test_act_quantizer(void) {
    float x[MF_QM_UNIT];
    for (int rep = 0; rep < 2000; rep++) {
        const float scale = rep % 7 == 0 ? 1e-30f : rep % 5 == 0 ? 1e4f : 1.0f;
        for (int i = 0; i < MF_QM_UNIT; i++) x[i] = rep % 97 == 0 ? 0.0f : rndf(-1.0f, 1.0f) * scale;
        int8_t q[MF_QM_UNIT];
        float d;
        int s;
        mf_qm_quantize_unit(x, q, &d, &s);
        float amax = 0.0f;
        int sum = 0, at_max = 0;
        for (int i = 0; i < MF_QM_UNIT; i++) amax = fmaxf(amax, fabsf(x[i]));
        CHECK(d == amax / 127.0f, "d %a, amax/127 %a", (double)d, (double)(amax / 127.0f));
        for (int i = 0; i < MF_QM_UNIT; i++) {
            sum += q[i];
            CHECK(q[i] >= -127 && q[i] <= 127, "level %d", q[i]);
            if (d > 0) {
                CHECK(fabs((double)x[i] / d - q[i]) <= 0.5 + 1e-5, "x %g d %g level %d", (double)x[i], (double)d, q[i]);
                if (fabsf(x[i]) == amax) at_max += q[i] == 127 || q[i] == -127;
            } else {
                CHECK(q[i] == 0, "all-zero unit gave level %d", q[i]);
            }
        }
        CHECK(d == 0 || at_max > 0, "no level reached 127 (amax %g)", (double)amax);
        CHECK(s == sum, "s %d, sum %d", s, sum);
    }
}

/* One unit's dot (the kernels' integer sums and float scaling) against an independent computation from the
 * reference dequantizer: sum_e deq_e * (d_a * q_e) in double.
 *  - Q8_0, Q4_0, Q5_0: deq_e = level * d exactly (an 8-bit level times an 11-bit f16 mantissa), so the
 *    integer sum I is checked EXACTLY against sum(deq_e / d * q_e).
 *  - every type: v within 8 float roundings of the double value, measured against the magnitude of the terms
 *    (tol = 8 * 2^-24 * d_a * (sum |deq_e q_e| + |a I| + |b s|)): the reference rounds each element
 *    (d1 * q - m1, d * sc * q), the kernel scales the exact integer sum once, so they differ in the last bits
 *    only, while a wrong scale, min, nibble or bit is off by whole levels. */
static void test_unit_dot(void) {
    static uint8_t row[K_ELEMS * 4];
    static float deq[K_ELEMS], x[K_ELEMS];
    static int8_t aq[K_ELEMS];
    static mf_qm_act ad[K_ELEMS / MF_QM_UNIT];
    const int J = K_ELEMS / MF_QM_UNIT;
    for (size_t ti = 0; ti < MF_ARRAY_LEN(k_types); ti++) {
        const uint32_t type = k_types[ti];
        if (!mf_qm_type_quantized(type)) continue;
        const bool exact = type == MF_TYPE_Q8_0 || type == MF_TYPE_Q4_0 || type == MF_TYPE_Q5_0;
        int bad_i = 0, bad_v = 0;
        double worst = 0;
        for (int rep = 0; rep < 50; rep++) {
            make_row(type, row);
            REQUIRE_OK(mf_dequantize_row(type, row, deq, K_ELEMS), "dequantize %s", mf_type_name(type));
            for (int i = 0; i < K_ELEMS; i++) x[i] = rndf(-3.0f, 3.0f);
            for (int j = 0; j < J; j++) mf_qm_quantize_unit(x + MF_QM_UNIT * j, aq + MF_QM_UNIT * j, &ad[j].d, &ad[j].s);
            double total = 0, total_mag = 0;
            for (int j = 0; j < J; j++) {
                const mf_qm_unit u = mf_qm_unit_params(type, row, j);
                int isum = 0, msum = 0;
                int32_t ww[8], aw[8];
                for (int t = 0; t < 4; t++) {
                    mf_qm_quarter(type, row, j, t, &ww[2 * t], &ww[2 * t + 1]);
                    memcpy(&aw[2 * t], aq + MF_QM_UNIT * j + 8 * t, 8);
                    isum += mf_qm_quarter_isum(&u, t, ww[2 * t], ww[2 * t + 1], aw[2 * t], aw[2 * t + 1]);
                    msum += mf_qm_quarter_msum(&u, t, aw[2 * t], aw[2 * t + 1]);
                }
                CHECK(mf_qm_unit_msum(&u, aw) == msum, "%s unit %d: min words give %d, quarters %d", mf_type_name(type),
                      j, mf_qm_unit_msum(&u, aw), msum);
                const int sa = mf_qm_half_mins(type) ? msum : ad[j].s; /* what the kernels pass */
                /* the tiled kernel's form of the same integer */
                CHECK(mf_qm_unit_isum(&u, ww, aw) == isum, "%s unit %d: words give %d, quarters %d", mf_type_name(type),
                      j, mf_qm_unit_isum(&u, ww, aw), isum);
                const float v = mf_qm_unit_value(&u, isum, ad[j].d, sa);
                double ref = 0, mag = 0;
                long long iref = 0;
                const float d = mf_hd_f16_to_f32(mf_qm_ld16(mf_qm_block(type, row, j, &(int){0})));
                for (int i = 0; i < MF_QM_UNIT; i++) {
                    const int e = MF_QM_UNIT * j + i;
                    ref += (double)deq[e] * aq[e];
                    mag += fabs((double)deq[e] * aq[e]);
                    if (exact) iref += (long long)((double)deq[e] / d) * aq[e];
                }
                if (exact && d != 0 && iref != isum && bad_i++ < 3)
                    CHECK(0, "%s unit %d: integer sum %d, from the reference %lld", mf_type_name(type), j, isum, iref);
                const double da = ad[j].d, want = da * ref;
                const double tol = 8.0 / 16777216.0 * da * (mag + fabs((double)u.a * isum) + fabs((double)u.b * sa)) + 1e-30;
                if (fabs(v - want) > tol && bad_v++ < 3)
                    CHECK(0, "%s unit %d: v %.9g, reference %.9g (tolerance %.3g)", mf_type_name(type), j, (double)v,
                          want, tol);
                if (mag > 0) worst = fmax(worst, fabs(v - want) / (da * mag));
                total += want;
                total_mag += da * mag;
            }
            /* the whole row in the canonical order: the same value up to the slice sums' roundings */
            const float dot = mf_qm_row_dot_q(type, row, J, aq, ad);
            CHECK(fabs(dot - total) <= 64.0 / 16777216.0 * total_mag + 1e-30, "%s row dot %.9g, reference %.9g",
                  mf_type_name(type), (double)dot, total);
        }
        CHECK(bad_i == 0 && bad_v == 0, "%s: %d integer sums and %d unit values off", mf_type_name(type), bad_i, bad_v);
        printf("  %s: unit dot worst relative difference from the reference %.3g\n", mf_type_name(type), worst);
    }
}

/* Float weights: the canonical row dot against the double dot of the reference dequantizer's values. */
static void test_float_dot(void) {
    static uint8_t row[K_ELEMS * 4];
    static float deq[K_ELEMS], x[K_ELEMS];
    for (int ti = 0; ti < 3; ti++) {
        const uint32_t type = k_types[ti];
        for (int rep = 0; rep < 50; rep++) {
            make_row(type, row);
            REQUIRE_OK(mf_dequantize_row(type, row, deq, K_ELEMS), "dequantize %s", mf_type_name(type));
            for (int i = 0; i < K_ELEMS; i++) x[i] = rndf(-3.0f, 3.0f);
            double ref = 0, mag = 0;
            for (int i = 0; i < K_ELEMS; i++) ref += (double)deq[i] * x[i], mag += fabs((double)deq[i] * x[i]);
            const float dot = mf_qm_row_dot_f(type, row, K_ELEMS, x);
            CHECK(fabs(dot - ref) <= 16.0 / 16777216.0 * mag, "%s dot %.9g, reference %.9g", mf_type_name(type),
                  (double)dot, ref);
            /* a row that ends inside a unit (float weights take any K): the elements past K are not read */
            const int64_t k2 = K_ELEMS - 1 - (int64_t)(rnd() % 40);
            for (int64_t i = k2; i < K_ELEMS; i++) x[i] = NAN;
            double ref2 = 0, mag2 = 0;
            for (int64_t i = 0; i < k2; i++) ref2 += (double)deq[i] * x[i], mag2 += fabs((double)deq[i] * x[i]);
            const float dot2 = mf_qm_row_dot_f(type, row, k2, x);
            CHECK(fabs(dot2 - ref2) <= 16.0 / 16777216.0 * mag2, "%s K %lld: dot %.9g, reference %.9g",
                  mf_type_name(type), (long long)k2, (double)dot2, ref2);
        }
    }
}

/* mf_qm_tree8 is exactly what the decode kernel's xor butterfly over 8 lane groups (offsets 16, 8, 4 between
 * lanes, 4 lanes a group) leaves in lane 0, and in every lane. */
static void test_tree_is_butterfly(void) {
    for (int rep = 0; rep < 1000; rep++) {
        float a[8], lane[32];
        for (int s = 0; s < 8; s++) a[s] = rndf(-1.0f, 1.0f) * (float)(1 << (rnd() % 20));
        for (int l = 0; l < 32; l++) lane[l] = a[l >> 2];
        for (int off = 16; off >= 4; off >>= 1) {
            float nv[32];
            for (int l = 0; l < 32; l++) nv[l] = lane[l] + lane[l ^ off];
            memcpy(lane, nv, sizeof lane);
        }
        const float want = mf_qm_tree8(a);
        for (int l = 0; l < 32; l++) CHECK(f32_bits(lane[l]) == f32_bits(want), "lane %d: %a, tree8 %a", l, (double)lane[l], (double)want);
    }
}

/* mf_qm_dp4a's host emulation: signed bytes (the device's __dp4a with int operands) */
static void test_dp4a(void) {
    CHECK(mf_qm_dp4a((int32_t)0x80ff7f01u, (int32_t)0x0201ff7fu, 5) == 5 + (-128 * 2) + (-1 * 1) + (127 * -1) + (1 * 127),
          "dp4a %d", mf_qm_dp4a((int32_t)0x80ff7f01u, (int32_t)0x0201ff7fu, 5));
    CHECK(mf_qm_sub_bytes(0x0f000807u, 0x08080808u) == (int32_t)0x07f800ffu, "sub_bytes %08x",
          (unsigned)mf_qm_sub_bytes(0x0f000807u, 0x08080808u));
}

int main(void) {
    RUN(test_f16_bf16_conversion);
    RUN(test_dp4a);
    RUN(test_dequant_bitwise);
    RUN(test_act_quantizer);
    RUN(test_unit_dot);
    RUN(test_float_dot);
    RUN(test_tree_is_butterfly);
    return mf_test_done();
}
