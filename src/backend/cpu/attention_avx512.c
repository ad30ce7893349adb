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

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

/* R query rows (a constant at each call) against the 16 keys of kt.  Lane i is key i's dot in exactly
 * the order of the AVX2 F32/F16 vec_dot (4 accumulators x 8 lanes over steps of 32, then its reduce4
 * tree): partial a[l][m] = sum over steps s of q[32s + 8l + m] * k[32s + 8l + m] (fma from 0), then
 * u[m] = (a0 + a2) + (a1 + a3), then ((u0 + u4) + (u1 + u5)) + ((u2 + u6) + (u3 + u7)). */
static inline __attribute__((always_inline)) AVX512 void scores_rows(int64_t hd, const float *kt, const float *q,
                                                                     float *out, const int R) {
    const int64_t steps = hd / 32;
    const __m512 zero = _mm512_setzero_ps();
    __m512 u[2][8];
    _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) {
        __m512 a[2][4];
        _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
            _Pragma("GCC unroll 2") for (int rr = 0; rr < R; rr++) a[rr][l] = zero;
            for (int64_t st = 0; st < steps; st++) {
                const int64_t d = 32 * st + 8 * l + m;
                const __m512 k = _mm512_loadu_ps(kt + 16 * d);
                _Pragma("GCC unroll 2") for (int rr = 0; rr < R; rr++) a[rr][l] = _mm512_fmadd_ps(_mm512_set1_ps(q[(size_t)rr * hd + d]), k, a[rr][l]);
            }
        }
        _Pragma("GCC unroll 2") for (int rr = 0; rr < R; rr++)
            u[rr][m] = _mm512_add_ps(_mm512_add_ps(a[rr][0], a[rr][2]), _mm512_add_ps(a[rr][1], a[rr][3]));
    }
    _Pragma("GCC unroll 2") for (int rr = 0; rr < R; rr++) {
        const __m512 t0 = _mm512_add_ps(u[rr][0], u[rr][4]), t1 = _mm512_add_ps(u[rr][1], u[rr][5]);
        const __m512 t2 = _mm512_add_ps(u[rr][2], u[rr][6]), t3 = _mm512_add_ps(u[rr][3], u[rr][7]);
        _mm512_storeu_ps(out + (size_t)rr * 16, _mm512_add_ps(_mm512_add_ps(t0, t1), _mm512_add_ps(t2, t3)));
    }
}

/* out[r * 16 + i] = dot(q row r, key i) for nrows rows (rows hd floats apart), kt = [hd][16], hd % 32 == 0 */
AVX512 void mf_cpu_att_scores16(int64_t hd, const float *kt, const float *q, int nrows, float *out) {
    int r = 0;
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
#endif
