/* KV cell store: cell resolution, windows (per sequence, position order), sequence operations and
 * refusals that leave the store unchanged. */
#include "harness.h"

#include "kv/kv.h"
#include "quant/quant.h"

#define NC 16
#define WS (NC + 1)

static mf_kv *mk(void) {
    mf_kv *kv = NULL;
    mf_error err = {0};
    int rc = mf_kv_new(2, 8, 8, NC, MF_TYPE_F32, MF_TYPE_F32, &kv, &err);
    if (rc) printf("  mf_kv_new: %s\n", err.msg);
    return kv;
}

static void test_single_sequence_windows_are_causal(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    int32_t pos[4] = {0, 1, 2, 3}, seq[4] = {0, 0, 0, 0}, cells[4], win[4 * WS];
    mf_error err = {0};
    REQUIRE(mf_kv_prepare(kv, 4, pos, seq, cells, win, WS, &err) == 0, "%s", err.msg);
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
    REQUIRE(mf_kv_prepare(kv, 1, &p1, &s1, &c1, w1, WS, &err) == 0, "%s", err.msg);
    CHECK(c1 == 4 && w1[0] == 5 && w1[5] == 4, "cell %d count %d last %d", c1, w1[0], w1[5]);
    mf_kv_free(kv);
}

static void test_two_sequences_never_see_each_other(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    /* interleaved: seq 0 at 0,1,2 and seq 1 at 0,1 */
    int32_t pos[5] = {0, 0, 1, 1, 2}, seq[5] = {0, 1, 0, 1, 0}, cells[5], win[5 * WS];
    mf_error err = {0};
    REQUIRE(mf_kv_prepare(kv, 5, pos, seq, cells, win, WS, &err) == 0, "%s", err.msg);
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
    REQUIRE(mf_kv_prepare(kv, 4, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    mf_kv_seq_rm(kv, 0, 1, 3);
    CHECK(mf_kv_n_used(kv) == 2, "used %d", mf_kv_n_used(kv));
    /* re-add positions 2 then 1 (reverse order): they take cells 1 and 2 */
    int32_t p2[2] = {2, 1}, s2[2] = {0, 0}, c2[2], w2[2 * WS];
    REQUIRE(mf_kv_prepare(kv, 2, p2, s2, c2, w2, WS, &err) == 0, "%s", err.msg);
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
    REQUIRE(mf_kv_prepare(kv, 3, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    /* a cached position */
    int32_t p = 1, s = 0;
    CHECK(mf_kv_prepare(kv, 1, &p, &s, cells, NULL, 0, &err) == MF_E_INVAL, "dup accepted");
    CHECK(strstr(err.msg, "already in the KV cache") != NULL, "msg: %s", err.msg);
    /* a duplicate inside the batch */
    int32_t pd[2] = {5, 5}, sd[2] = {1, 1};
    CHECK(mf_kv_prepare(kv, 2, pd, sd, cells, NULL, 0, &err) == MF_E_INVAL, "batch dup accepted");
    CHECK(strstr(err.msg, "both hold sequence 1 position 5") != NULL, "msg: %s", err.msg);
    /* too many tokens: both numbers named */
    int32_t pb[NC], sb[NC];
    for (int i = 0; i < NC; i++) pb[i] = 10 + i, sb[i] = 2;
    CHECK(mf_kv_prepare(kv, NC, pb, sb, cells, NULL, 0, &err) == MF_E_RANGE, "overfull accepted");
    CHECK(strstr(err.msg, "needs 16 KV cells, 13 of 16 are free") != NULL, "msg: %s", err.msg);
    /* negative position */
    int32_t pn = -1;
    CHECK(mf_kv_prepare(kv, 1, &pn, &s, cells, NULL, 0, &err) == MF_E_INVAL, "negative pos accepted");
    CHECK(mf_kv_n_used(kv) == 3 && mf_kv_seq_n_cells(kv, 1) == 0 && mf_kv_seq_n_cells(kv, 2) == 0,
          "state changed: used %d", mf_kv_n_used(kv));
    /* unprepare gives cells back */
    mf_kv_unprepare(kv, 3, (int32_t[]){0, 1, 2});
    CHECK(mf_kv_n_used(kv) == 0, "used %d", mf_kv_n_used(kv));
    mf_kv_free(kv);
}

static void test_seq_cp_copies_rows_into_new_cells(void) {
    mf_kv *kv = mk();
    REQUIRE(kv, "new");
    mf_error err = {0};
    int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0}, cells[3];
    REQUIRE(mf_kv_prepare(kv, 3, pos, seq, cells, NULL, 0, &err) == 0, "%s", err.msg);
    for (int l = 0; l < 2; l++)
        for (int c = 0; c < 3; c++)
            for (int e = 0; e < 8; e++) {
                ((float *)mf_kv_k(kv, l))[c * 8 + e] = (float)(100 * l + 10 * c + e);
                ((float *)mf_kv_v(kv, l))[c * 8 + e] = (float)-(100 * l + 10 * c + e);
            }
    REQUIRE(mf_kv_seq_cp(kv, 0, 3, 0, 2, &err) == 0, "%s", err.msg); /* positions 0 and 1 */
    CHECK(mf_kv_seq_n_cells(kv, 3) == 2 && mf_kv_seq_pos_max(kv, 3) == 1, "dst cells %d max %d",
          mf_kv_seq_n_cells(kv, 3), mf_kv_seq_pos_max(kv, 3));
    for (int c = 3; c < 5; c++) {
        /* source cells in cell order to the lowest free cells: cell 3 <- cell 0 (pos 0), 4 <- 1 (pos 1) */
        const int src = c - 3;
        CHECK(mf_kv_cell_seq(kv, c) == 3 && mf_kv_cell_pos(kv, c) == src, "cell %d: seq %d pos %d, want seq 3 pos %d",
              c, mf_kv_cell_seq(kv, c), mf_kv_cell_pos(kv, c), src);
        CHECK(mf_kv_cell_seq(kv, src) == 0 && mf_kv_cell_pos(kv, src) == src, "source cell %d now seq %d pos %d", src,
              mf_kv_cell_seq(kv, src), mf_kv_cell_pos(kv, src));
        for (int l = 0; l < 2; l++)
            CHECK(((float *)mf_kv_k(kv, l))[c * 8 + 5] == (float)(100 * l + 10 * src + 5) &&
                      ((float *)mf_kv_v(kv, l))[c * 8 + 5] == (float)-(100 * l + 10 * src + 5),
                  "layer %d cell %d row not copied", l, c);
    }
    /* writing the copy's next position does not touch the source */
    int32_t p = 2, s = 3, c, w[WS];
    REQUIRE(mf_kv_prepare(kv, 1, &p, &s, &c, w, WS, &err) == 0, "%s", err.msg);
    CHECK(c == 5 && w[0] == 3 && w[1] == 3 && w[2] == 4 && w[3] == 5, "cell %d window %d: %d %d %d", c, w[0],
          w[1], w[2], w[3]);
    /* a range that starts inside: positions 1 and 2 keep their positions (cells 6, 7) */
    REQUIRE(mf_kv_seq_cp(kv, 0, 4, 1, 3, &err) == 0, "%s", err.msg);
    CHECK(mf_kv_seq_n_cells(kv, 4) == 2 && mf_kv_cell_seq(kv, 6) == 4 && mf_kv_cell_pos(kv, 6) == 1 &&
              mf_kv_cell_seq(kv, 7) == 4 && mf_kv_cell_pos(kv, 7) == 2,
          "seq 4: %d cells, cell 6 seq %d pos %d, cell 7 seq %d pos %d (want pos 1, 2)", mf_kv_seq_n_cells(kv, 4),
          mf_kv_cell_seq(kv, 6), mf_kv_cell_pos(kv, 6), mf_kv_cell_seq(kv, 7), mf_kv_cell_pos(kv, 7));
    /* clear */
    mf_kv_seq_rm(kv, -1, -1, -1);
    CHECK(mf_kv_n_used(kv) == 0, "used %d", mf_kv_n_used(kv));
    mf_kv_free(kv);
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

int main(void) {
    RUN(test_single_sequence_windows_are_causal);
    RUN(test_two_sequences_never_see_each_other);
    RUN(test_windows_follow_positions_not_cells);
    RUN(test_refusals_change_nothing);
    RUN(test_seq_cp_copies_rows_into_new_cells);
    RUN(test_f16_rows_and_bad_types);
    RUN(test_footprint_per_type);
    return mf_test_done();
}
