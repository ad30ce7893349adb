/* KV cell store: cell resolution, windows (per sequence, position order), sequence operations and
 * refusals that leave the store unchanged. */
#include "harness.h"

#include "kv/kv.h"
#include "core/hadamard.h"
#include "core/rope.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>

#define NC 16
#define WS (NC + 1)

static mf_kv *mk(void) {
    mf_kv *kv = NULL;
    mf_error err = {0};
    int rc = mf_kv_new(2, 8, 8, NC, MF_TYPE_F32, MF_TYPE_F32, &kv, &err);
    if (rc) printf("  mf_kv_new: %s\n", err.msg);
    return kv;
}

/* prepare, with the spans turned back into one dense column per token ({count, cell ids}) for the checks */
static int prep(mf_kv *kv, int32_t n, const int32_t *pos, const int32_t *seq, int32_t *cells, int32_t *win, int32_t ws,
                mf_error *err) {
    int rc = mf_kv_prepare(kv, n, pos, seq, cells, win != NULL, err);
    if (rc || !win) return rc;
    const int32_t *sp = mf_kv_spans(kv);
    if (sp[1] != n) return printf("  spans hold %d tokens, want %d\n", sp[1], n), MF_E_INTERNAL;
    memset(win, 0, sizeof(int32_t) * (size_t)ws * (size_t)n);
    for (int32_t t = 0; t < n; t++) {
        const int32_t off = sp[2 + 2 * t], cnt = sp[3 + 2 * t];
        if (cnt < 0 || cnt >= ws || off < 2 + 2 * n || off + cnt > sp[0])
            return printf("  token %d: span {%d, %d} outside [%d, %d)\n", t, off, cnt, 2 + 2 * n, sp[0]), MF_E_INTERNAL;
        win[t * ws] = cnt;
        memcpy(win + t * ws + 1, sp + off, sizeof(int32_t) * (size_t)cnt);
    }
    return 0;
}

static void test_single_sequence_windows_are_causal(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    int32_t pos[4] = {0, 1, 2, 3}, seq[4] = {0, 0, 0, 0}, cells[4], win[4 * WS];
    mf_error err = {0};
    REQUIRE(prep(kv, 4, pos, seq, cells, win, WS, &err) == 0, "%s", err.msg);
    for (int t = 0; t < 4; t++) {
        CHECK(cells[t] == t, "token %d cell %d", t, cells[t]);
        CHECK(win[t * WS] == t + 1, "token %d window count %d", t, win[t * WS]);
        for (int j = 0; j <= t; j++)
            CHECK(win[t * WS + 1 + j] == j, "token %d window[%d] = %d", t, j, win[t * WS + 1 + j]);
    }
    CHECK(mf_kv_n_used(kv) == 4, "used %d", mf_kv_n_used(kv));
    CHECK(mf_kv_seq_pos_max(kv, 0) == 3, "pos max %d", mf_kv_seq_pos_max(kv, 0));
    /* decode step: position 4 sees all five cells */
    int32_t p1 = 4, s1 = 0, c1, w1[WS];
    REQUIRE(prep(kv, 1, &p1, &s1, &c1, w1, WS, &err) == 0, "%s", err.msg);
    CHECK(c1 == 4 && w1[0] == 5 && w1[5] == 4, "cell %d count %d last %d", c1, w1[0], w1[5]);
    mf_kv_free(kv);
}

static void test_two_sequences_never_see_each_other(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    /* interleaved: seq 0 at 0,1,2 and seq 1 at 0,1 */
    int32_t pos[5] = {0, 0, 1, 1, 2}, seq[5] = {0, 1, 0, 1, 0}, cells[5], win[5 * WS];
    mf_error err = {0};
    REQUIRE(prep(kv, 5, pos, seq, cells, win, WS, &err) == 0, "%s", err.msg);
    for (int t = 0; t < 5; t++) {
        int32_t n = win[t * WS];
        CHECK(n == pos[t] + 1, "token %d (seq %d pos %d) count %d", t, seq[t], pos[t], n);
        for (int j = 0; j < n; j++) {
            int32_t c = win[t * WS + 1 + j];
            CHECK(mf_kv_cell_seq(kv, c) == seq[t], "token %d sees cell %d of seq %d", t, c,
                  mf_kv_cell_seq(kv, c));
            CHECK(mf_kv_cell_pos(kv, c) == j, "token %d window[%d] has pos %d (position order)", t, j,
                  mf_kv_cell_pos(kv, c));
        }
    }
    mf_kv_free(kv);
}

static void test_windows_follow_positions_not_cells(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    mf_error err = {0};
    /* fill cells 0..3 with seq 0, then remove positions 1..2 so free cells are scattered */
    int32_t pos[4] = {0, 1, 2, 3}, seq[4] = {0, 0, 0, 0}, cells[4];
    REQUIRE(prep(kv, 4, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    mf_kv_seq_rm(kv, 0, 1, 3);
    CHECK(mf_kv_n_used(kv) == 2, "used %d", mf_kv_n_used(kv));
    /* re-add positions 2 then 1 (reverse order): they take cells 1 and 2 */
    int32_t p2[2] = {2, 1}, s2[2] = {0, 0}, c2[2], w2[2 * WS];
    REQUIRE(prep(kv, 2, p2, s2, c2, w2, WS, &err) == 0, "%s", err.msg);
    CHECK(c2[0] == 1 && c2[1] == 2, "cells %d %d", c2[0], c2[1]);
    /* token 0 (pos 2) sees pos 0 (cell 0), pos 1 (cell 2), pos 2 (cell 1) */
    CHECK(w2[0] == 3 && w2[1] == 0 && w2[2] == 2 && w2[3] == 1, "window %d: %d %d %d", w2[0], w2[1], w2[2],
          w2[3]);
    /* token 1 (pos 1) does not see pos 2 or pos 3 */
    CHECK(w2[WS] == 2 && w2[WS + 1] == 0 && w2[WS + 2] == 2, "window %d: %d %d", w2[WS], w2[WS + 1],
          w2[WS + 2]);
    mf_kv_free(kv);
}

static void test_refusals_change_nothing(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    mf_error err = {0};
    int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0}, cells[NC + 1];
    REQUIRE(prep(kv, 3, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    /* a cached position */
    int32_t p = 1, s = 0;
    CHECK(prep(kv, 1, &p, &s, cells, NULL, 0, &err) == MF_E_INVAL, "dup accepted");
    CHECK(strstr(err.msg, "already in the KV cache") != NULL, "msg: %s", err.msg);
    /* a duplicate inside the batch */
    int32_t pd[2] = {5, 5}, sd[2] = {1, 1};
    CHECK(prep(kv, 2, pd, sd, cells, NULL, 0, &err) == MF_E_INVAL, "batch dup accepted");
    CHECK(strstr(err.msg, "both hold sequence 1 position 5") != NULL, "msg: %s", err.msg);
    /* too many tokens: both numbers named */
    int32_t pb[NC], sb[NC];
    for (int i = 0; i < NC; i++) pb[i] = 10 + i, sb[i] = 2;
    CHECK(prep(kv, NC, pb, sb, cells, NULL, 0, &err) == MF_E_RANGE, "overfull accepted");
    CHECK(strstr(err.msg, "needs 16 KV cells, 13 of 16 are free") != NULL, "msg: %s", err.msg);
    /* negative position */
    int32_t pn = -1;
    CHECK(prep(kv, 1, &pn, &s, cells, NULL, 0, &err) == MF_E_INVAL, "negative pos accepted");
    CHECK(mf_kv_n_used(kv) == 3 && mf_kv_seq_n_cells(kv, 1) == 0 && mf_kv_seq_n_cells(kv, 2) == 0,
          "state changed: used %d", mf_kv_n_used(kv));
    /* unprepare gives cells back */
    mf_kv_unprepare(kv, 3, seq, (int32_t[]){0, 1, 2});
    CHECK(mf_kv_n_used(kv) == 0, "used %d", mf_kv_n_used(kv));
    mf_kv_free(kv);
}

static void test_seq_cp_shares_cells_by_reference(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    mf_error err = {0};
    int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0}, cells[3];
    REQUIRE(prep(kv, 3, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    REQUIRE(mf_kv_seq_cp(kv, 0, 3, 0, 2, &err) == 0, "%s", err.msg); /* positions 0 and 1 */
    CHECK(mf_kv_n_used(kv) == 3, "sharing took cells: %d used", mf_kv_n_used(kv));
    CHECK(mf_kv_seq_n_cells(kv, 3) == 2 && mf_kv_seq_pos_max(kv, 3) == 1, "dst cells %d max %d",
          mf_kv_seq_n_cells(kv, 3), mf_kv_seq_pos_max(kv, 3));
    for (int c = 0; c < 3; c++) {
        const bool shared = c < 2;
        CHECK(mf_kv_cell_refs(kv, c) == 1 + shared && mf_kv_cell_in_seq(kv, c, 3) == shared &&
                  mf_kv_cell_in_seq(kv, c, 0) && mf_kv_cell_pos(kv, c) == c && mf_kv_cell_seq(kv, c) == 0,
              "cell %d: refs %d, in seq 3 %d, pos %d", c, mf_kv_cell_refs(kv, c), mf_kv_cell_in_seq(kv, c, 3),
              mf_kv_cell_pos(kv, c));
    }
    /* the copy's next position takes a fresh cell; its window is the shared rows at their positions, then
     * its own; the source's window does not see it */
    int32_t p = 2, s = 3, c, w[WS];
    REQUIRE(prep(kv, 1, &p, &s, &c, w, WS, &err) == 0, "%s", err.msg);
    CHECK(c == 3 && w[0] == 3 && w[1] == 0 && w[2] == 1 && w[3] == 3, "cell %d window %d: %d %d %d", c, w[0], w[1],
          w[2], w[3]);
    int32_t p3 = 3, s0 = 0, c3, w3[WS];
    REQUIRE(prep(kv, 1, &p3, &s0, &c3, w3, WS, &err) == 0, "%s", err.msg);
    CHECK(w3[0] == 4 && w3[1] == 0 && w3[2] == 1 && w3[3] == 2 && w3[4] == c3, "source window %d: %d %d %d %d", w3[0],
          w3[1], w3[2], w3[3], w3[4]);
    /* a range that starts inside: dst 4 shares positions 1 and 2 (cells 1, 2) at their positions */
    REQUIRE(mf_kv_seq_cp(kv, 0, 4, 1, 3, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_seq_n_cells(kv, 4) == 2 && mf_kv_cell_in_seq(kv, 1, 4) && mf_kv_cell_in_seq(kv, 2, 4) &&
              mf_kv_seq_pos_max(kv, 4) == 2,
          "seq 4: %d cells, max %d", mf_kv_seq_n_cells(kv, 4), mf_kv_seq_pos_max(kv, 4));
    int32_t p4 = 3, s4 = 4, c4, w4[WS];
    REQUIRE(prep(kv, 1, &p4, &s4, &c4, w4, WS, &err) == 0, "%s", err.msg);
    CHECK(w4[0] == 3 && w4[1] == 1 && w4[2] == 2 && w4[3] == c4, "seq 4 window %d: %d %d %d", w4[0], w4[1], w4[2],
          w4[3]);
    /* removing a sharer frees nothing the others hold; the last holder frees the cell */
    const int32_t used = mf_kv_n_used(kv);
    mf_kv_seq_rm(kv, 0, -1, -1);
    CHECK(mf_kv_n_used(kv) == used - 1 && mf_kv_cell_refs(kv, 0) == 1 && mf_kv_cell_refs(kv, 1) == 2 &&
              mf_kv_cell_pos(kv, 0) == 0,
          "after removing seq 0: used %d (want %d), refs %d %d", mf_kv_n_used(kv), used - 1, mf_kv_cell_refs(kv, 0),
          mf_kv_cell_refs(kv, 1));
    /* clear */
    mf_kv_seq_rm(kv, -1, -1, -1);
    CHECK(mf_kv_n_used(kv) == 0 && mf_kv_cell_refs(kv, 1) == 0, "used %d", mf_kv_n_used(kv));
    mf_kv_free(kv);
}

/* Preparing a forward costs the cells attended, not the context: the same decode step (one sequence of
 * D cached cells) writes the same number of list entries whatever n_cells is, and a batch that appends
 * moves none. */
static void test_prepare_work_follows_cells_attended(void) {
    const int32_t sizes[2] = {2048, 32768}, D = 1000;
    int64_t work[2];
    for (int i = 0; i < 2; i++) {
        mf_kv *kv = NULL;
        mf_error err = {0};
        REQUIRE(mf_kv_new(1, 32, 32, sizes[i], MF_TYPE_F32, MF_TYPE_F32, &kv, &err) == 0, "%s", err.msg);
        int32_t *pos = malloc(sizeof(int32_t) * D * 3), *seq = pos + D, *cells = seq + D;
        for (int t = 0; t < D; t++) pos[t] = t, seq[t] = 0;
        REQUIRE(mf_kv_prepare(kv, D, pos, seq, cells, true, &err) == 0, "%s", err.msg);
        CHECK(mf_kv_prepare_work(kv) == D, "prefill of %d: work %lld", D, (long long)mf_kv_prepare_work(kv));
        int32_t p = D, s = 0, c;
        REQUIRE(mf_kv_prepare(kv, 1, &p, &s, &c, true, &err) == 0, "%s", err.msg);
        work[i] = mf_kv_prepare_work(kv);
        /* another sequence's cells are not attended, so they cost nothing */
        int32_t p1[4] = {0, 1, 2, 3}, s1[4] = {7, 7, 7, 7}, c1[4];
        REQUIRE(mf_kv_prepare(kv, 4, p1, s1, c1, true, &err) == 0, "%s", err.msg);
        CHECK(mf_kv_prepare_work(kv) == 4, "a new sequence of 4 beside %d cells: work %lld", D + 1,
              (long long)mf_kv_prepare_work(kv));
        free(pos);
        mf_kv_free(kv);
    }
    CHECK(work[0] == D + 1 && work[1] == D + 1, "decode at depth %d: work %lld at %d cells, %lld at %d cells", D,
          (long long)work[0], sizes[0], (long long)work[1], sizes[1]);
}

static void test_f16_rows_and_bad_types(void) {
    mf_kv *kv = NULL;
    mf_error err = {0};
    REQUIRE(mf_kv_new(1, 64, 64, 4, MF_TYPE_F16, MF_TYPE_F16, &kv, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_row_bytes_k(kv) == 128, "row %zu", mf_kv_row_bytes_k(kv));
    CHECK(mf_kv_bytes(kv) == 4 * 256, "bytes %zu", mf_kv_bytes(kv));
    mf_kv_free(kv);
    CHECK(mf_kv_new(1, 64, 64, 4, MF_TYPE_Q4_0, MF_TYPE_F16, &kv, &err) == MF_E_UNSUPPORTED, "q4_0 KV accepted");
    CHECK(strstr(err.msg, "q4_0") != NULL && strstr(err.msg, "for K") != NULL, "msg: %s", err.msg);
    CHECK(mf_kv_new(1, 64, 64, 4, MF_TYPE_F16, MF_TYPE_BF16, &kv, &err) == MF_E_UNSUPPORTED, "bf16 V accepted");
    CHECK(strstr(err.msg, "bf16") != NULL && strstr(err.msg, "for V") != NULL, "msg: %s", err.msg);
    /* q8_0 rows are whole blocks of 32: 48 elements are refused, naming both numbers */
    CHECK(mf_kv_new(1, 48, 64, 4, MF_TYPE_Q8_0, MF_TYPE_F16, &kv, &err) == MF_E_UNSUPPORTED, "q8_0 K of 48 accepted");
    CHECK(strstr(err.msg, "multiple of 32") && strstr(err.msg, "have 48"), "msg: %s", err.msg);
}

/* The footprint of each KV type (issue 11): per cell row of n elements f32 4n bytes, f16 2n, q8_0 34n/32, so
 * a q8_0 cache is exactly 34/128 of an f32 one; K and V are sized by their own types. */
static void test_footprint_per_type(void) {
    const int32_t L = 3, C = 40;
    const int64_t NK = 256, NV = 128;
    size_t bytes[3];
    const uint32_t types[3] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    for (int i = 0; i < 3; i++) {
        mf_kv *kv = NULL;
        mf_error err = {0};
        REQUIRE(mf_kv_new(L, NK, NV, C, types[i], types[i], &kv, &err) == 0, "%s", err.msg);
        bytes[i] = mf_kv_bytes(kv);
        CHECK(mf_kv_type_k(kv) == types[i] && mf_kv_type_v(kv) == types[i], "types");
        /* the regions really are that large: the last V row of the last layer ends at the end */
        CHECK((uint8_t *)mf_kv_v(kv, L - 1) + (size_t)C * mf_kv_row_bytes_v(kv) == (uint8_t *)mf_kv_k(kv, 0) + bytes[i],
              "%s: regions do not tile the %zu bytes", mf_type_name(types[i]), bytes[i]);
        mf_kv_free(kv);
    }
    CHECK(bytes[0] == (size_t)L * C * (NK + NV) * 4, "f32 %zu", bytes[0]);
    CHECK(bytes[1] * 2 == bytes[0], "f16 %zu is not half of f32 %zu", bytes[1], bytes[0]);
    CHECK(bytes[2] * 128 == bytes[0] * 34, "q8_0 %zu is not 34/128 of f32 %zu", bytes[2], bytes[0]);
    mf_kv *kv = NULL;
    mf_error err = {0};
    REQUIRE(mf_kv_new(L, NK, NV, C, MF_TYPE_F16, MF_TYPE_Q8_0, &kv, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_row_bytes_k(kv) == (size_t)NK * 2 && mf_kv_row_bytes_v(kv) == (size_t)NV / 32 * 34, "rows %zu %zu",
          mf_kv_row_bytes_k(kv), mf_kv_row_bytes_v(kv));
    CHECK(mf_kv_bytes(kv) == (size_t)L * C * (NK * 2 + NV / 32 * 34), "mixed %zu", mf_kv_bytes(kv));
    mf_kv_free(kv);
}

/* ---- context shift ---- */
#define HD 128
#define NH 8
#define NE (HD * NH)

static uint32_t rng_state = 12345;
static float frand(void) { /* deterministic values in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

/* rope every head of x at position p (the graph's rope, core/rope.c) */
static void rope_at(float *y, const float *x, int32_t p, const mf_kv_rope *r) {
    float cache[HD];
    mf_rope_cache(cache, r->rope.n_rot, (float)p, &r->rope, mf_rope_theta_scale(r->rope.freq_base, r->rope.n_rot), false);
    for (int h = 0; h < NH; h++) mf_rope_row(y + h * HD, x + h * HD, HD, r->rope.n_rot, r->rope.mode, cache);
}

/* Rope tolerance class "rope-shift": a row roped at p then re-roped by d equals the row roped at p + d
 * up to float rounding of the angles.  ggml computes pair i's angle as p * theta_scale^i by repeated
 * multiplication in float, so two rotations (p, then d) and one (p + d) differ by a few ulp of the
 * largest angle: relative error ~ |p + d| * 2^-23.  Measured max |error| over rows of |x| < 1.42 (f32,
 * MF_TEST_VERBOSE=1 prints them): 2.2e-6 at p + d = 63, 1.7e-4 at 4096, 2.2e-3 at 32005 (freq_base 1e6,
 * 128 rotary dims) - 0.2 to 0.5 ulp of the largest angle; f16 adds its rounding (9.8e-4), q8_0 its step
 * (1.2e-2).  The bound below is 4 ulp of the
 * angle, 4 * max(|p|, |d|, |p+d|, 1) * 2^-23 * 1.42 plus the cache type's own rounding of one element:
 * f16 2^-11 relative (x 2 conversions), q8_0 one quantization step (amax / 127) on each side. */
static double shift_tol(uint32_t type, int32_t p, int32_t d) {
    const double amax = 1.42, big = MF_MAX(MF_MAX(abs(p), abs(d)), MF_MAX(abs(p + d), 1));
    const double angle = 4.0 * big * ldexp(1.0, -23) * amax;
    switch (type) {
    case MF_TYPE_F16: return angle + 2.0 * amax * ldexp(1.0, -11);
    case MF_TYPE_Q8_0: return angle + 2.0 * amax / 127.0;
    default: return angle;
    }
}

static void test_rope_row_shift_equals_rope_at_new_position(void) {
    /* plain, linear, and YaRN (factor 4 over 32768, Qwen's 128K setting): the shift rotates by the delta
     * without YaRN's magnitude scale (applying it again, as llama.cpp's build_rope_shift does, would grow the
     * row by 1.139 a shift: far past the tolerance) */
    mf_kv_rope ropes[3] = {{.head_dim = HD, .rope = mf_rope_plain(HD, MF_ROPE_NEOX, 1e6f)},
                           {.head_dim = HD, .rope = mf_rope_plain(64, MF_ROPE_NEOX, 1e4f)},
                           {.head_dim = HD, .rope = mf_rope_plain(HD, MF_ROPE_NEOX, 1e6f)}};
    ropes[1].rope.freq_scale = 0.5f;
    ropes[2].rope.freq_scale = 0.25f;
    ropes[2].rope.ext_factor = 1.0f;
    mf_rope_corr_dims(HD, 32768, 1e6f, 32.0f, 1.0f, ropes[2].rope.corr_dims);
    const int32_t pd[][2] = {{0, 7}, {100, -37}, {4000, 96}, {30000, -2048}, {5, 32000}, {17, -17}};
    const uint32_t types[3] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    float *x = malloc(sizeof(float) * NE * 4), *a = x + NE, *b = x + 2 * NE, *tmp = x + 3 * NE;
    uint8_t *row = malloc(NE * 4), *want = malloc(NE * 4);
    REQUIRE(x && row && want, "alloc");
    for (int i = 0; i < NE; i++) x[i] = frand();
    mf_error err = {0};
    /* rot: rows held rotated by H_rot as llama.cpp stores a quantized K (core/hadamard.h); the re-rope must
     * rotate back, rope, rotate again.  Compared back in the unrotated domain, where H^-1 = H spreads the
     * cache type's rounding over the head: three times the unrotated tolerance (measured max 2.1e-2 for
     * q8_0 against 1.2e-2 unrotated; a skipped back rotation or a missing forward one errs by ~1) */
    for (int rot = 0; rot <= HD; rot += HD)
    for (int ri = 0; ri < 3; ri++)
        for (int ti = 0; ti < 3; ti++)
            for (size_t k = 0; k < MF_ARRAY_LEN(pd); k++) {
                const uint32_t t = types[ti];
                const int32_t p = pd[k][0], d = pd[k][1];
                mf_kv_rope r = ropes[ri];
                r.rot = rot;
                rope_at(a, x, p, &r); /* the row stored at p, in the cache type */
                if (rot) mf_hadamard_row(a, a, NE, rot);
                REQUIRE(mf_quantize_row_cpu(t, a, row, NE) == 0, "store %s", mf_type_name(t));
                REQUIRE(mf_kv_rope_row(t, row, NE, d, &r, tmp, &err) == 0, "%s", err.msg);
                REQUIRE(mf_dequantize_row(t, row, a, NE) == 0, "load");
                rope_at(b, x, p + d, &r); /* the row stored at p + d directly */
                if (rot) mf_hadamard_row(b, b, NE, rot);
                REQUIRE(mf_quantize_row_cpu(t, b, want, NE) == 0 && mf_dequantize_row(t, want, b, NE) == 0, "direct");
                if (rot) mf_hadamard_row(a, a, NE, rot), mf_hadamard_row(b, b, NE, rot);
                double e = 0;
                for (int i = 0; i < NE; i++) e = MF_MAX(e, fabs((double)a[i] - b[i]));
                const double tol = (rot ? 3 : 1) * shift_tol(t, p, d) * mf_rope_mscale(&r.rope); /* |row| grows by it */
                CHECK(e <= tol, "%s rope %d rot %d: p %d + d %d: max error %.3g > tolerance %.3g", mf_type_name(t), ri,
                      rot, p, d, e, tol);
                if (getenv("MF_TEST_VERBOSE"))
                    printf("  %s n_rot %d rot %d p %d d %d: max error %.3g (tolerance %.3g)\n", mf_type_name(t),
                           ropes[ri].rope.n_rot, rot, p, d, e, tol);
                /* past n_rot the elements pass through */
                if (t == MF_TYPE_F32 && ropes[ri].rope.n_rot < HD && !rot)
                    CHECK(a[HD - 1] == x[HD - 1], "element past n_rot changed: %g vs %g", a[HD - 1], x[HD - 1]);
            }
    /* refusals: a type without a re-rope, a rope that does not fit the row */
    CHECK(mf_kv_rope_row(MF_TYPE_Q4_0, row, NE, 3, &ropes[0], tmp, &err) == MF_E_UNSUPPORTED &&
              strstr(err.msg, "q4_0"),
          "q4_0 re-rope: %s", err.msg);
    mf_kv_rope bad = ropes[0];
    bad.head_dim = 96;
    CHECK(mf_kv_rope_row(MF_TYPE_F32, row, NE, 3, &bad, tmp, &err) == MF_E_INVAL, "head 96 of a 1024 row accepted");
    bad = ropes[0];
    bad.rot = 96;
    CHECK(mf_kv_rope_row(MF_TYPE_Q8_0, row, NE, 3, &bad, tmp, &err) == MF_E_INVAL && strstr(err.msg, "96"),
          "a rotation of 96 accepted: %s", err.msg);
    free(x);
    free(row);
    free(want);
}

/* seq_add's bookkeeping: positions in [p0, p1) move, K rows re-roped, V rows untouched, below 0 removed,
 * other sequences and the rest of the sequence untouched; a collision is refused with nothing changed */
static void test_seq_add_moves_positions_and_ropes_k_only(void) {
    mf_kv *kv = NULL;
    mf_error err = {0};
    REQUIRE(mf_kv_new(2, NE, NE, NC, MF_TYPE_F32, MF_TYPE_F32, &kv, &err) == 0, "%s", err.msg);
    const mf_kv_rope r = {.head_dim = HD, .rope = mf_rope_plain(HD, MF_ROPE_NEOX, 1e6f)};
    int32_t pos[8] = {0, 1, 2, 3, 4, 5, 0, 1}, seq[8] = {0, 0, 0, 0, 0, 0, 1, 1}, cells[8];
    REQUIRE(prep(kv, 8, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    float *k0 = malloc(sizeof(float) * NE * NC * 2 * 2), *v0 = k0 + NE * NC * 2, *want = malloc(sizeof(float) * NE);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < NE * 8; i++) {
            ((float *)mf_kv_k(kv, l))[i] = frand();
            ((float *)mf_kv_v(kv, l))[i] = frand();
        }
    for (int l = 0; l < 2; l++) {
        memcpy(k0 + l * NE * NC, mf_kv_k(kv, l), sizeof(float) * NE * NC);
        memcpy(v0 + l * NE * NC, mf_kv_v(kv, l), sizeof(float) * NE * NC);
    }
    /* a collision: moving [4, 6) by -2 lands on 2 and 3, which the sequence keeps */
    CHECK(mf_kv_seq_add(kv, 0, 4, 6, -2, &r, &err) == MF_E_INVAL && strstr(err.msg, "seq_rm"), "collision: %s",
          err.msg);
    for (int l = 0; l < 2; l++)
        CHECK(!memcmp(k0 + l * NE * NC, mf_kv_k(kv, l), sizeof(float) * NE * NC), "refused shift changed layer %d", l);
    CHECK(mf_kv_cell_pos(kv, 4) == 4 && mf_kv_n_used(kv) == 8, "refused shift moved cell 4 to %d", mf_kv_cell_pos(kv, 4));
    /* llama.cpp's context shift: keep 1, drop [1, 3), shift [3, inf) by -2 */
    mf_kv_seq_rm(kv, 0, 1, 3);
    REQUIRE(mf_kv_seq_add(kv, 0, 3, -1, -2, &r, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_seq_pos_max(kv, 0) == 3 && mf_kv_seq_n_cells(kv, 0) == 4, "seq 0: max %d, %d cells",
          mf_kv_seq_pos_max(kv, 0), mf_kv_seq_n_cells(kv, 0));
    for (int c = 0; c < 8; c++) {
        const int moved = c >= 3 && c <= 5, gone = c == 1 || c == 2;
        const int32_t want_pos = gone ? -1 : moved ? c - 2 : pos[c];
        CHECK(mf_kv_cell_pos(kv, c) == want_pos, "cell %d at %d, want %d", c, mf_kv_cell_pos(kv, c), want_pos);
        for (int l = 0; l < 2 && !gone; l++) {
            const float *k = (const float *)mf_kv_k(kv, l) + c * NE, *ko = k0 + l * NE * NC + c * NE;
            if (moved) {
                float cache[HD];
                mf_rope_cache(cache, HD, -2.0f, &r.rope, mf_rope_theta_scale(1e6f, HD), true);
                for (int h = 0; h < NH; h++) mf_rope_row(want + h * HD, ko + h * HD, HD, HD, MF_ROPE_NEOX, cache);
            } else {
                memcpy(want, ko, sizeof(float) * NE);
            }
            CHECK(!memcmp(k, want, sizeof(float) * NE), "layer %d cell %d: K row not %s", l, c,
                  moved ? "re-roped by -2" : "untouched");
            CHECK(!memcmp((const float *)mf_kv_v(kv, l) + c * NE, v0 + l * NE * NC + c * NE, sizeof(float) * NE),
                  "layer %d cell %d: V row changed", l, c);
        }
    }
    /* shifted below 0: removed (positions 0 and 1 of seq 1 by -1: position 0 goes) */
    REQUIRE(mf_kv_seq_add(kv, 1, -1, -1, -1, &r, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_seq_n_cells(kv, 1) == 1 && mf_kv_cell_seq(kv, 6) == -1 && mf_kv_cell_pos(kv, 7) == 0,
          "seq 1: %d cells, cell 6 seq %d, cell 7 pos %d", mf_kv_seq_n_cells(kv, 1), mf_kv_cell_seq(kv, 6),
          mf_kv_cell_pos(kv, 7));
    CHECK(mf_kv_n_used(kv) == 5, "used %d", mf_kv_n_used(kv));
    /* the windows follow the new positions: a token at 4 sees 0..3 of seq 0 (cells 0, 3, 4, 5) */
    int32_t p4 = 4, s0 = 0, c4, w[WS];
    REQUIRE(prep(kv, 1, &p4, &s0, &c4, w, WS, &err) == 0, "%s", err.msg);
    CHECK(w[0] == 5 && w[1] == 0 && w[2] == 3 && w[3] == 4 && w[4] == 5 && w[5] == c4, "window %d: %d %d %d %d %d",
          w[0], w[1], w[2], w[3], w[4], w[5]);
    CHECK(mf_kv_seq_add(kv, -1, -1, -1, 1, &r, &err) == MF_E_INVAL, "seq -1 accepted");
    free(k0);
    free(want);
    mf_kv_free(kv);
}

/* seq_add on a shared cell: the shifting sequence gets its own copy (rows copied, then re-roped), the
 * other sharers keep the original cell, bytes and position */
static void test_seq_add_copies_shared_cells_first(void) {
    mf_kv *kv = NULL;
    mf_error err = {0};
    REQUIRE(mf_kv_new(2, 64, 64, 6, MF_TYPE_F32, MF_TYPE_F32, &kv, &err) == 0, "%s", err.msg);
    const mf_kv_rope r = {.head_dim = 64, .rope = mf_rope_plain(64, MF_ROPE_NEOX, 1e4f)};
    int32_t pos[4] = {0, 1, 2, 3}, seq[4] = {0, 0, 0, 0}, cells[4];
    REQUIRE(prep(kv, 4, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 64 * 6; i++) ((float *)mf_kv_k(kv, l))[i] = ((float *)mf_kv_v(kv, l))[i] = frand();
    float k1[2][64], v1[2][64];
    for (int l = 0; l < 2; l++) {
        memcpy(k1[l], (float *)mf_kv_k(kv, l) + 64 * 2, sizeof k1[l]); /* cell 2: position 2 */
        memcpy(v1[l], (float *)mf_kv_v(kv, l) + 64 * 2, sizeof v1[l]);
    }
    REQUIRE(mf_kv_seq_cp(kv, 0, 1, -1, -1, &err) == 0, "%s", err.msg);
    /* seq 1 drops position 1 and shifts [2, 4) down by 1: cells 2 and 3 are shared, so two copies; only
     * two cells are free: a third would be refused */
    mf_kv_seq_rm(kv, 1, 1, 2);
    REQUIRE(mf_kv_seq_add(kv, 1, 2, -1, -1, &r, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_n_used(kv) == 6, "used %d, want 4 + 2 copies", mf_kv_n_used(kv));
    for (int c = 0; c < 4; c++)
        CHECK(mf_kv_cell_pos(kv, c) == c && mf_kv_cell_in_seq(kv, c, 0), "seq 0's cell %d moved to %d", c,
              mf_kv_cell_pos(kv, c));
    CHECK(mf_kv_cell_refs(kv, 0) == 2 && mf_kv_cell_refs(kv, 2) == 1 && mf_kv_cell_refs(kv, 3) == 1,
          "refs %d %d %d", mf_kv_cell_refs(kv, 0), mf_kv_cell_refs(kv, 2), mf_kv_cell_refs(kv, 3));
    /* the copies: cells 4 and 5 at positions 1 and 2 of seq 1, K re-roped by -1, V the original */
    CHECK(mf_kv_cell_in_seq(kv, 4, 1) && mf_kv_cell_pos(kv, 4) == 1 && mf_kv_cell_in_seq(kv, 5, 1) &&
              mf_kv_cell_pos(kv, 5) == 2,
          "copies: cell 4 pos %d, cell 5 pos %d", mf_kv_cell_pos(kv, 4), mf_kv_cell_pos(kv, 5));
    float want[64], tmp[64];
    for (int l = 0; l < 2; l++) {
        memcpy(want, k1[l], sizeof want);
        REQUIRE(mf_kv_rope_row(MF_TYPE_F32, want, 64, -1, &r, tmp, &err) == 0, "%s", err.msg);
        CHECK(!memcmp((float *)mf_kv_k(kv, l) + 64 * 4, want, sizeof want), "layer %d: the copy's K is not re-roped", l);
        CHECK(!memcmp((float *)mf_kv_k(kv, l) + 64 * 2, k1[l], sizeof k1[l]), "layer %d: the shared original changed", l);
        CHECK(!memcmp((float *)mf_kv_v(kv, l) + 64 * 4, v1[l], sizeof v1[l]), "layer %d: the copy's V differs", l);
    }
    /* no free cell left for a copy: refused, nothing changed */
    REQUIRE(mf_kv_seq_cp(kv, 0, 2, -1, -1, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_seq_add(kv, 2, 1, -1, 5, &r, &err) == MF_E_RANGE && strstr(err.msg, "0 of 6 cells are free"),
          "copy without a free cell: %s", err.msg);
    CHECK(mf_kv_seq_pos_max(kv, 2) == 3 && mf_kv_cell_refs(kv, 3) == 2, "refused shift changed seq 2: max %d",
          mf_kv_seq_pos_max(kv, 2));
    mf_kv_free(kv);
}

/* The cache's memory is advised for transparent huge pages like the repacked weights (core.h mf_huge_alloc):
 * attention at depth reads every cell of a layer each token, and with 4 KiB pages Qwen3-0.6B's decode at depth
 * 4096 ran 17 t/s where it runs 21 (docs/PERFORMANCE.md). */
static void test_cache_memory_is_advised_for_huge_pages(void) {
    mf_kv *kv = NULL;
    mf_error err = {0};
    REQUIRE(mf_kv_new(1, 1024, 1024, 2048, MF_TYPE_F16, MF_TYPE_F16, &kv, &err) == 0, "%s", err.msg); /* 8 MiB */
    const void *p = mf_kv_k(kv, 0);
    const char *unseen = mf_test_vm_flags_unseen();
    char flags[512] = "";
    const bool found = !unseen && mf_test_vm_flags(p, flags, sizeof flags);
    mf_kv_free(kv);
    if (unseen) SKIP("%s", unseen);
    CHECK(found, "no mapping in /proc/self/smaps holds the cache at %p", p);
    CHECK(strstr(flags, " hg") != NULL, "the cache's mapping is not advised for huge pages: VmFlags:%s", flags);
}

int main(void) {
    RUN(test_single_sequence_windows_are_causal);
    RUN(test_two_sequences_never_see_each_other);
    RUN(test_windows_follow_positions_not_cells);
    RUN(test_refusals_change_nothing);
    RUN(test_seq_cp_shares_cells_by_reference);
    RUN(test_seq_add_copies_shared_cells_first);
    RUN(test_prepare_work_follows_cells_attended);
    RUN(test_f16_rows_and_bad_types);
    RUN(test_rope_row_shift_equals_rope_at_new_position);
    RUN(test_seq_add_moves_positions_and_ropes_k_only);
    RUN(test_footprint_per_type);
    RUN(test_cache_memory_is_advised_for_huge_pages);
    return mf_test_done();
}
