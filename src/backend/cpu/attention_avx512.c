/* CPU attention kernels for AVX-512 (attention.c decides when they run: f32/f16 caches, head sizes
 * 32, 64, 96, 128, 256).
 *
 * Scores: 16 keys in the 16 lanes of a register, their head slices transposed to [d][16] once per key
 * block, so a query row's 16 dots are hd broadcast-fmas, grouped exactly as the AVX2 F32/F16 vec_dot
 * groups one dot (its 32 partial sums and their reduction tree, one lane per key): the same bits as the
 * plain path, fixed per (query row, key) whatever the block, the run or the batch.
 * Values: llama.cpp's order (cpu_impl.h, MF_PV_LANE: 8 fma chains over the keys j % 8, then its hsum
 * tree), then * inv (attention.c passes 1: its probabilities are normalized already, see normalize
 * there): the same operations as the plain path's lane passes, 16 elements at a time, one lane's chains in
 * registers for a few heads of one token while that lane's keys stream through. */
#include "backend/cpu/cpu_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "backend/cpu/exp_avx512.h"

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

/* Lane i of u = the partial sum m (0..7) of R query rows' dots with key i, in the order of the AVX2
 * F32/F16 vec_dot (4 accumulators x 8 lanes over steps of 32, then its reduce4 tree): a[l] = sum over
 * steps s of q[32s + 8l + m] * k[32s + 8l + m] (fma from 0), u = (a0 + a2) + (a1 + a3). */
static inline __attribute__((always_inline)) AVX512 void partial_m(int64_t hd, const float *kt, const float *q,
                                                                   const int m, __m512 *u, const int R) {
    const int64_t steps = hd / 32;
    __m512 a[4][4];
    _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
        _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++) a[rr][l] = _mm512_setzero_ps();
        for (int64_t st = 0; st < steps; st++) {
            const int64_t d = 32 * st + 8 * l + m;
            const __m512 k = _mm512_loadu_ps(kt + 16 * d);
            _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++)
                a[rr][l] = _mm512_fmadd_ps(_mm512_set1_ps(q[(size_t)rr * hd + d]), k, a[rr][l]);
        }
    }
    _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++)
        u[rr] = _mm512_add_ps(_mm512_add_ps(a[rr][0], a[rr][2]), _mm512_add_ps(a[rr][1], a[rr][3]));
}

/* R query rows (1, 2 or 4, a constant at each call) against the 16 keys of kt: lane i is key i's dot,
 * the partial sums u0..u7 above folded by vec_dot's tree ((u0 + u4) + (u1 + u5)) + ((u2 + u6) + (u3 + u7))
 * as soon as each pair exists, so only a few sums per row are live: four rows fit the registers, and each
 * K load and the query broadcasts serve four rows' fmas (two rows were bound by the loads on Intel) */
static inline __attribute__((always_inline)) AVX512 void scores_rows(int64_t hd, const float *kt, const float *q,
                                                                     float *out, const int R) {
    __m512 lo[4], hi[4], t01[4], t2[4];
    partial_m(hd, kt, q, 0, lo, R);
    partial_m(hd, kt, q, 4, hi, R);
    _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++) t01[rr] = _mm512_add_ps(lo[rr], hi[rr]);
    partial_m(hd, kt, q, 1, lo, R);
    partial_m(hd, kt, q, 5, hi, R);
    _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++) t01[rr] = _mm512_add_ps(t01[rr], _mm512_add_ps(lo[rr], hi[rr]));
    partial_m(hd, kt, q, 2, lo, R);
    partial_m(hd, kt, q, 6, hi, R);
    _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++) t2[rr] = _mm512_add_ps(lo[rr], hi[rr]);
    partial_m(hd, kt, q, 3, lo, R);
    partial_m(hd, kt, q, 7, hi, R);
    _Pragma("GCC unroll 4") for (int rr = 0; rr < R; rr++)
        _mm512_storeu_ps(out + (size_t)rr * 16, _mm512_add_ps(t01[rr], _mm512_add_ps(t2[rr], _mm512_add_ps(lo[rr], hi[rr]))));
}

/* out[r * 16 + i] = dot(q row r, key i) for nrows rows (rows hd floats apart), kt = [hd][16], hd % 32 == 0 */
AVX512 void mf_cpu_att_scores16(int64_t hd, const float *kt, const float *q, int nrows, float *out) {
    int r = 0;
    for (; r + 4 <= nrows; r += 4) scores_rows(hd, kt, q + (size_t)r * hd, out + (size_t)r * 16, 4);
    for (; r + 2 <= nrows; r += 2) scores_rows(hd, kt, q + (size_t)r * hd, out + (size_t)r * 16, 2);
    for (; r < nrows; r++) scores_rows(hd, kt, q + (size_t)r * hd, out + (size_t)r * 16, 1);
}

/* 16 values of a cache row slice as f32 */
static inline AVX512 __m512 v16(const char *row, uint32_t type, int c) {
    if (type == MF_TYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 32 * (size_t)c)));
    return _mm512_loadu_ps((const float *)row + 16 * c);
}

/* HB heads of one token against its window: NV = hd / 16 registers per head (a constant at each call).
 * One pass per lane of llama.cpp's order (cpu_impl.h, MF_PV_LANE): the registers hold that lane's fma
 * chain for every output element, the tree's pending halves wait in part[]. */
static inline __attribute__((always_inline)) AVX512 void pv_block(const mf_cpu_att_pv *pv, int h0, const int HB,
                                                                  const int NV) {
    __m512 acc[6][16], part[3][6][16];
    const size_t vbytes = (size_t)NV * 16 * (pv->vtype == MF_TYPE_F16 ? 2 : 4);
    _Pragma("GCC unroll 16") for (int h = 0; h < HB; h++) /* every pass writes before it reads: for the compiler */
        _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) part[0][h][c] = part[1][h][c] = part[2][h][c] = _mm512_setzero_ps();
    for (int k = 0; k < 8; k++) {
        _Pragma("GCC unroll 16") for (int h = 0; h < HB; h++)
            _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) acc[h][c] = _mm512_setzero_ps();
        for (int64_t j = MF_PV_LANE(k); j < pv->cnt; j += 8) {
            if (j + 32 < pv->cnt) {
                const char *nx = pv->v + (size_t)pv->cell[j + 32] * pv->v_nb1 + pv->voff;
                for (size_t o = 0; o < vbytes; o += 64) _mm_prefetch(nx + o, _MM_HINT_T0);
            }
            const char *row = pv->v + (size_t)pv->cell[j] * pv->v_nb1 + pv->voff;
            __m512 v[16];
            _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) v[c] = v16(row, pv->vtype, c);
            _Pragma("GCC unroll 16") for (int h = 0; h < HB; h++) {
                const __m512 p = _mm512_set1_ps(pv->p[(size_t)(h0 + h) * pv->p_stride + j]);
                _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) acc[h][c] = _mm512_fmadd_ps(p, v[c], acc[h][c]);
            }
        }
        _Pragma("GCC unroll 16") for (int h = 0; h < HB; h++) {
            const __m512 inv = _mm512_set1_ps(pv->inv[h0 + h]);
            float *o = pv->out + (size_t)(h0 + h) * (size_t)NV * 16;
            _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) {
                const __m512 x = acc[h][c];
                switch (k) {
                case 0: part[0][h][c] = x; break;                               /* a0 */
                case 1: part[0][h][c] = _mm512_add_ps(part[0][h][c], x); break; /* a0 + a4 */
                case 2: part[1][h][c] = x; break;                               /* a2 */
                case 3: /* (a0 + a4) + (a2 + a6) */
                    part[0][h][c] = _mm512_add_ps(part[0][h][c], _mm512_add_ps(part[1][h][c], x));
                    break;
                case 4: part[1][h][c] = x; break;                               /* a1 */
                case 5: part[1][h][c] = _mm512_add_ps(part[1][h][c], x); break; /* a1 + a5 */
                case 6: part[2][h][c] = x; break;                               /* a3 */
                default: /* ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
                    _mm512_storeu_ps(o + 16 * c, _mm512_mul_ps(_mm512_add_ps(part[0][h][c],
                                                                             _mm512_add_ps(part[1][h][c], _mm512_add_ps(part[2][h][c], x))),
                                                               inv));
                    break;
                }
            }
        }
    }
}

#define PV_HEADS(NV, HB)                                                                                       \
    do {                                                                                                       \
        int h = 0;                                                                                             \
        for (; h + (HB) <= pv->nh; h += (HB)) pv_block(pv, h, (HB), (NV));                                     \
        for (; h < pv->nh; h++) pv_block(pv, h, 1, (NV));                                                      \
    } while (0)

AVX512 void mf_cpu_att_pv16(const mf_cpu_att_pv *pv) {
    switch (pv->hd) { /* the sizes mf_cpu_att_x16_ok takes */
    case 32: PV_HEADS(2, 6); break;
    case 64: PV_HEADS(4, 6); break;
    case 96: PV_HEADS(6, 3); break;
    case 128: PV_HEADS(8, 2); break;
    case 256: PV_HEADS(16, 1); break;
    default: break;
    }
}

/* attention.c's normalize then round_p_f16 on one row, fused: p = e^(p - mx) (exp16), their sum as
 * ggml_vec_soft_max_f32 adds it (per 8 elements ((e0+e4)+(e2+e6)) + ((e1+e5)+(e3+e7)) in float, the 8-sums
 * in double in order; a last partial group as if padded with zeros), then p * (float)(1 / sum), rounded
 * to f16 when f16: every operation as there */
AVX512 void mf_cpu_att_softmax_row(int64_t n, float *p, float mx, bool f16) {
    const __m512 vm = _mm512_set1_ps(mx);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 live = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 e = _mm512_maskz_mov_ps(live, mf_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, p + i), vm)));
        _mm512_mask_storeu_ps(p + i, live, e);
        const __m512 t1 = _mm512_add_ps(_mm512_shuffle_f32x4(e, e, _MM_SHUFFLE(2, 3, 0, 1)), e);  /* e_i + e_(i^4) */
        const __m512 t2 = _mm512_add_ps(t1, _mm512_permute_ps(t1, _MM_SHUFFLE(1, 0, 3, 2)));        /* + (i^2) */
        const __m512 t3 = _mm512_add_ps(t2, _mm512_permute_ps(t2, _MM_SHUFFLE(2, 3, 0, 1)));        /* + (i^1) */
        sum += (double)_mm512_cvtss_f32(t3);
        if (n - i > 8) sum += (double)_mm_cvtss_f32(_mm512_extractf32x4_ps(t3, 2));
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 live = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, p + i), inv);
        if (f16) x = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        _mm512_mask_storeu_ps(p + i, live, x);
    }
}

/* ---- the flash-attention form (q8_0 V) over a block of keys ---- */

/* One row's online softmax over n keys of a block, as attend_run_fa does it key by key: s = sc[i], on a
 * new maximum M the sum of values is scaled by ms = expf(M_old - s) (ggml_vec_scale_f32: acc * ms) and the
 * value added with weight 1, else with vs = expf(s - M); the value x_i = q_i * d (the block's rows
 * dequantized once, exact) added as fma(x, vs, acc) (mad_q8_0's operation); S = fmaf(S, ms, vs).  The
 * accumulator stays in registers over the block instead of being read and written per key. */
static inline __attribute__((always_inline)) AVX512 void fa_row_block(int n, const float *sc, const float *vf,
                                                                      float *M, float *S, float *acc, const int NV) {
    __m512 a[16];
    _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) a[c] = _mm512_loadu_ps(acc + 16 * c);
    float m = *M, sum = *S;
    for (int i = 0; i < n; i++) {
        const float s = sc[i];
        float ms = 1.0f, vs = 1.0f;
        if (s > m) {
            const float m_old = m;
            m = s;
            ms = expf(m_old - s);
            const __m512 f = _mm512_set1_ps(ms);
            _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) a[c] = _mm512_mul_ps(a[c], f);
        } else {
            vs = expf(s - m);
        }
        const __m512 p = _mm512_set1_ps(vs);
        const float *x = vf + (size_t)i * (size_t)NV * 16;
        _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) a[c] = _mm512_fmadd_ps(_mm512_loadu_ps(x + 16 * c), p, a[c]);
        sum = fmaf(sum, ms, vs);
    }
    _Pragma("GCC unroll 16") for (int c = 0; c < NV; c++) _mm512_storeu_ps(acc + 16 * c, a[c]);
    *M = m;
    *S = sum;
}

AVX512 void mf_cpu_att_fa_rows(int64_t hd, int n, const float *sc, const float *vf, float *M, float *S, float *acc) {
    switch (hd) {
    case 32: fa_row_block(n, sc, vf, M, S, acc, 2); break;
    case 64: fa_row_block(n, sc, vf, M, S, acc, 4); break;
    case 96: fa_row_block(n, sc, vf, M, S, acc, 6); break;
    case 128: fa_row_block(n, sc, vf, M, S, acc, 8); break;
    case 256: fa_row_block(n, sc, vf, M, S, acc, 16); break;
    default: break;
    }
}

/* ---- prefill runs: many rows at once ---- */

/* The K slices of up to 16 keys transposed into kt[d][16] (keys >= nk: 0), 16 x 16 at a time in registers
 * (f16 rows converted on the way; exact). */
AVX512 void mf_cpu_att_kt16(int64_t hd, const char *base, size_t nb1, size_t off, uint32_t type, const int32_t *cell,
                            int nk, float *kt) {
    for (int64_t c = 0; c < hd / 16; c++) {
        __m512 r[16], t[16]; /* the loops unrolled, so these stay in registers (gcc -O2 does not unroll them) */
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) r[i] = i < nk ? v16(base + (size_t)cell[i] * nb1 + off, type, (int)c) : _mm512_setzero_ps();
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);     /* per 128 bits: a0 b0 a1 b1 */
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]); /* a2 b2 a3 b3 */
        }
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) { /* r[4i + x]: element x of each 128 bits of rows 4i..4i+3 */
            r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
            r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
            r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
            r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
        }
        float *o = kt + (size_t)c * 256;
        _Pragma("GCC unroll 4") for (int x = 0; x < 4; x++) { /* element 4L + x of the 16: the L-th 128 bits of r[x], r[4 + x], r[8 + x], r[12 + x] */
            const __m512 u0 = _mm512_shuffle_f32x4(r[x], r[4 + x], 0x88), u1 = _mm512_shuffle_f32x4(r[x], r[4 + x], 0xDD);
            const __m512 u2 = _mm512_shuffle_f32x4(r[8 + x], r[12 + x], 0x88), u3 = _mm512_shuffle_f32x4(r[8 + x], r[12 + x], 0xDD);
            _mm512_storeu_ps(o + 16 * x, _mm512_shuffle_f32x4(u0, u2, 0x88));
            _mm512_storeu_ps(o + 16 * (8 + x), _mm512_shuffle_f32x4(u0, u2, 0xDD));
            _mm512_storeu_ps(o + 16 * (4 + x), _mm512_shuffle_f32x4(u1, u3, 0x88));
            _mm512_storeu_ps(o + 16 * (12 + x), _mm512_shuffle_f32x4(u1, u3, 0xDD));
        }
    }
}

/* scores16 for nrows rows, each times scale and stored under its mask (the keys its window reaches) at
 * dst + r * stride, with a running maximum per lane in mxv[r][16] (max_ps(s, m) is s > m ? s : m, the
 * scalar rule: the row's maximum is the same value, see attention.c) */
AVX512 void mf_cpu_att_scores16_put(int64_t hd, const float *kt, const float *q, int nrows, float scale,
                                    const uint16_t *mask, float *dst, size_t stride, float *mxv) {
    float s[64];
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r = 0; r < nrows;) {
        const int R = r + 4 <= nrows ? 4 : r + 2 <= nrows ? 2 : 1;
        if (R == 4) scores_rows(hd, kt, q + (size_t)r * hd, s, 4);
        else if (R == 2) scores_rows(hd, kt, q + (size_t)r * hd, s, 2);
        else scores_rows(hd, kt, q + (size_t)r * hd, s, 1);
        for (int rr = 0; rr < R; rr++, r++) {
            const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + 16 * rr), vs);
            _mm512_mask_storeu_ps(dst + (size_t)r * stride, mask[r], x);
            const __m512 m = _mm512_loadu_ps(mxv + 16 * (size_t)r);
            _mm512_storeu_ps(mxv + 16 * (size_t)r, _mm512_mask_max_ps(m, mask[r], x, m));
        }
    }
}

/* HB rows from r0 by NC 16-element chunks from c0, keys jb..je-1 of each lane: the lane's fma chain
 * continued from acc (zero at the first block), a row's keys stopping at its own window (masked fma:
 * the accumulator is left as it is, not added a 0 * v that an inf value would turn into a NaN) */
static inline __attribute__((always_inline)) AVX512 void pvb_tile(const mf_cpu_att_pvb *b, int r0, int c0, int64_t jb,
                                                                  int64_t je, bool pf, const int HB, const int NC,
                                                                  const bool F16) {
    const int64_t hd = b->hd;
    const size_t voff = b->voff + (size_t)c0 * 16 * (F16 ? 2 : 4), slice = (size_t)hd * (F16 ? 2 : 4);
    const int64_t jfull = MF_MIN(je, b->cnt[r0]), jend = MF_MIN(je, b->cnt[r0 + HB - 1]);
    for (int m = 0; m < 8; m++) {
        __m512 acc[6][4];
        float *ab = b->acc + ((size_t)m * (size_t)b->nrows + (size_t)r0) * (size_t)hd + 16 * (size_t)c0;
        _Pragma("GCC unroll 6") for (int h = 0; h < HB; h++)
            _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)
                acc[h][c] = jb ? _mm512_loadu_ps(ab + (size_t)h * hd + 16 * c) : _mm512_setzero_ps();
        int64_t j = jb + m;
        for (; j < jfull; j += 8) {
            if (pf && j + b->kb < b->cnt[b->nrows - 1]) {
                const char *nx = b->v + (size_t)b->cell[j + b->kb] * b->v_nb1 + b->voff;
                for (size_t o = 0; o < slice; o += 64) _mm_prefetch(nx + o, _MM_HINT_T1);
            }
            const char *row = b->v + (size_t)b->cell[j] * b->v_nb1 + voff;
            __m512 v[4];
            _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) v[c] = v16(row, F16 ? MF_TYPE_F16 : MF_TYPE_F32, c);
            _Pragma("GCC unroll 6") for (int h = 0; h < HB; h++) {
                const __m512 p = _mm512_set1_ps(b->p[(size_t)(r0 + h) * b->p_stride + (size_t)j]);
                _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[h][c] = _mm512_fmadd_ps(p, v[c], acc[h][c]);
            }
        }
        for (; j < jend; j += 8) { /* the run's last keys: not every row's window reaches them */
            const char *row = b->v + (size_t)b->cell[j] * b->v_nb1 + voff;
            __m512 v[4];
            _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) v[c] = v16(row, F16 ? MF_TYPE_F16 : MF_TYPE_F32, c);
            _Pragma("GCC unroll 6") for (int h = 0; h < HB; h++) {
                if (j >= b->cnt[r0 + h]) continue;
                const __m512 p = _mm512_set1_ps(b->p[(size_t)(r0 + h) * b->p_stride + (size_t)j]);
                _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[h][c] = _mm512_fmadd_ps(p, v[c], acc[h][c]);
            }
        }
        _Pragma("GCC unroll 6") for (int h = 0; h < HB; h++)
            _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) _mm512_storeu_ps(ab + (size_t)h * hd + 16 * c, acc[h][c]);
    }
}

#define PVB_ROWS(HB)                                                                                         \
    do {                                                                                                     \
        if (nc == 4) {                                                                                       \
            if (f16) pvb_tile(b, r, c0, jb, je, pf, (HB), 4, true);                                          \
            else pvb_tile(b, r, c0, jb, je, pf, (HB), 4, false);                                             \
        } else {                                                                                             \
            if (f16) pvb_tile(b, r, c0, jb, je, pf, (HB), 2, true);                                          \
            else pvb_tile(b, r, c0, jb, je, pf, (HB), 2, false);                                             \
        }                                                                                                    \
    } while (0)

AVX512 void mf_cpu_att_pv_rows(const mf_cpu_att_pvb *b) {
    const int64_t hd = b->hd, last = b->cnt[b->nrows - 1];
    const int nc = (hd / 16) % 4 == 0 ? 4 : 2;
    const bool f16 = b->vtype == MF_TYPE_F16;
    int rs = 0; /* the first row whose window reaches the block */
    for (int64_t jb = 0; jb < last; jb += b->kb) {
        const int64_t je = MF_MIN(last, jb + b->kb);
        while (b->cnt[rs] <= jb) rs++;
        bool pf = true; /* the first tile fetches the next block's value rows into L2 */
        for (int r = rs; r < b->nrows;) {
            const int left = b->nrows - r, hb = left >= 6 ? 6 : left;
            for (int c0 = 0; c0 < hd / 16; c0 += nc) {
                switch (hb) {
                case 6: PVB_ROWS(6); break;
                case 5: PVB_ROWS(5); break;
                case 4: PVB_ROWS(4); break;
                case 3: PVB_ROWS(3); break;
                case 2: PVB_ROWS(2); break;
                default: PVB_ROWS(1); break;
                }
                pf = false;
            }
            r += hb;
        }
    }
    /* tinyBLAS's hsum of the 8 lanes: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
    const size_t ls = (size_t)b->nrows * (size_t)hd;
    for (int r = 0; r < b->nrows; r++) {
        const float *a = b->acc + (size_t)r * (size_t)hd;
        float *o = b->out + (size_t)(r / b->nh) * b->out_stride + (size_t)(r % b->nh) * (size_t)hd;
        for (int64_t d = 0; d < hd; d += 16) {
            __m512 l[8];
            _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) l[m] = _mm512_loadu_ps(a + (size_t)m * ls + d);
            _mm512_storeu_ps(o + d, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                                                  _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7]))));
        }
    }
}

bool mf_cpu_att_x16_ok(int64_t hd) {
    return hd == 32 || hd == 64 || hd == 96 || hd == 128 || hd == 256;
}
#else
bool mf_cpu_att_x16_ok(int64_t hd) {
    (void)hd;
    return false;
}
void mf_cpu_att_scores16(int64_t hd, const float *kt, const float *q, int nrows, float *out) {
    (void)hd, (void)kt, (void)q, (void)nrows, (void)out;
}
void mf_cpu_att_pv16(const mf_cpu_att_pv *pv) {
    (void)pv;
}
void mf_cpu_att_kt16(int64_t hd, const char *base, size_t nb1, size_t off, uint32_t type, const int32_t *cell,
                     int nk, float *kt) {
    (void)hd, (void)base, (void)nb1, (void)off, (void)type, (void)cell, (void)nk, (void)kt;
}
void mf_cpu_att_scores16_put(int64_t hd, const float *kt, const float *q, int nrows, float scale,
                             const uint16_t *mask, float *dst, size_t stride, float *mxv) {
    (void)hd, (void)kt, (void)q, (void)nrows, (void)scale, (void)mask, (void)dst, (void)stride, (void)mxv;
}
void mf_cpu_att_pv_rows(const mf_cpu_att_pvb *b) {
    (void)b;
}
void mf_cpu_att_softmax_row(int64_t n, float *p, float mx, bool f16) {
    (void)n, (void)p, (void)mx, (void)f16;
}
void mf_cpu_att_fa_rows(int64_t hd, int n, const float *sc, const float *vf, float *M, float *S, float *acc) {
    (void)hd, (void)n, (void)sc, (void)vf, (void)M, (void)S, (void)acc;
}
#endif
