/* The split scheduler with the test-only backend (priority 150, claims ADD/MUL/SCALE/SILU on f32):
 * assignment (priority, views follow their source, a node nobody allowed can run is refused by name),
 * the splits of a graph with forced boundaries, the copy/wait counters, outputs bitwise equal to the
 * CPU-only run (async, declined and sync copies), and the staging protocol's refusals. */
#include "backend/registry.h"
#include "backend/sched.h"
#include "quant/quant.h"
#include "harness.h"
#include "support/test_backend.h"

#define T MF_BACKEND_TEST_ID

static const mf_backend_opts k_opts = {.n_threads = 1};

static float W[8 * 8], X[8 * 2], Y[8 * 2];

static void init_data(void) {
    uint32_t r = 12345;
    for (int i = 0; i < 64; i++) {
        r = r * 1664525u + 1013904223u;
        W[i] = (float)((int)(r >> 24) - 128) / 64.0f;
    }
    for (int i = 0; i < 16; i++) {
        r = r * 1664525u + 1013904223u;
        X[i] = (float)((int)(r >> 24) - 128) / 32.0f;
        r = r * 1664525u + 1013904223u;
        Y[i] = (float)((int)(r >> 24) - 128) / 32.0f;
    }
}

/* 0 x, 1 y (inputs, cpu), 2 w (weight, cpu), 3 mm = w.x (cpu), 4 a = mm + y (test), 5 s = silu(a) (test),
 * 6 r = rms_norm(s) (cpu), 7 m = r * y (test), 8 o = m + a (test, output).
 * Splits: [0,4) cpu | [4,6) test | [6,7) cpu | [7,9) test. */
static mf_graph *build(int32_t *out) {
    mf_graph *g = mf_graph_new();
    int64_t ne_x[2] = {8, 2}, ne_w[2] = {8, 8};
    int32_t x = mf_g_name(g, mf_g_input(g, "x", MF_TYPE_F32, 2, ne_x), "x");
    int32_t y = mf_g_name(g, mf_g_input(g, "y", MF_TYPE_F32, 2, ne_x), "y");
    int32_t w = mf_g_weight(g, "w", MF_TYPE_F32, 2, ne_w, W);
    int32_t mm = mf_g_name(g, mf_g_matmul(g, w, x), "mm");
    int32_t a = mf_g_name(g, mf_g_add(g, mm, y), "a");
    int32_t s = mf_g_name(g, mf_g_silu(g, a), "s");
    int32_t r = mf_g_name(g, mf_g_rms_norm(g, s, 1e-6f), "r");
    int32_t m = mf_g_name(g, mf_g_mul(g, r, y), "m");
    int32_t o = mf_g_name(g, mf_g_add(g, m, a), "o");
    mf_g_set_output(g, o);
    *out = o;
    return g;
}

/* Allocate through the scheduler (the test backend's share lands in its own, non-host memory) and write
 * the inputs through the hooks. */
static int bind(mf_sched *s, mf_graph *g, mf_error *err) {
    int rc = mf_sched_alloc(s, g, err);
    if (!rc) rc = mf_sched_write(s, g, mf_graph_find(g, "x"), 0, X, sizeof X, err);
    if (!rc) rc = mf_sched_write(s, g, mf_graph_find(g, "y"), 0, Y, sizeof Y, err);
    return rc;
}

/* 16 floats of node id, read through its backend's hook. */
static const float *out16(mf_sched *s, mf_graph *g, int32_t id) {
    static float buf[16];
    mf_error err = {0};
    memset(buf, 0, sizeof buf);
    if (mf_sched_read(s, g, id, 0, buf, sizeof buf, &err)) printf("  read failed: %s\n", err.msg);
    return buf;
}

static mf_backend_filter filter_of(bool cpu, bool test) {
    mf_backend_filter f;
    memset(&f, 0, sizeof f);
    f.allowed[MF_BACKEND_ID_CPU] = cpu;
    f.allowed[T] = test;
    return f;
}

/* The CPU-only reference output of the graph. */
static void reference(float out[16]) {
    mf_error err = {0};
    int32_t o;
    mf_graph *g = build(&o);
    mf_backend_filter f = filter_of(true, false);
    mf_sched *s = NULL;
    if (mf_sched_assign(g, &f, &err) || mf_sched_new(&k_opts, &s, &err) || bind(s, g, &err) || mf_sched_compute(s, g, &err))
        printf("  reference run failed: %s\n", err.msg);
    CHECK(s && mf_sched_n_splits(s) == 1, "cpu only: one split");
    CHECK(s && mf_sched_get_stats(s).copies == 0, "cpu only: no copies");
    memcpy(out, out16(s, g, o), 16 * sizeof(float));
    mf_sched_free(s);
    mf_graph_free(g);
}

static void assignment_follows_priority_and_views_follow_their_source(void) {
    mf_error err = {0};
    int32_t o;
    mf_graph *g = build(&o);
    int64_t ne4[1] = {4};
    int32_t v = mf_g_view(g, mf_graph_find(g, "a"), 1, ne4, (size_t[]){4}, 0);
    int64_t ne_c[2] = {8, 4}, ne_r[2] = {8, 1};
    float cache[32];
    int32_t c = mf_g_external(g, "cache", MF_TYPE_F32, 2, ne_c, cache);
    int32_t rows = mf_g_input(g, "rows", MF_TYPE_F32, 2, ne_r);
    int32_t cells = mf_g_input(g, "cells", MF_TYPE_I32, 1, (int64_t[]){1});
    int32_t st = mf_g_kv_store(g, c, rows, cells);
    REQUIRE_OK(mf_graph_error(g, &err), "%s", err.msg);
    mf_backend_filter all = filter_of(true, true);
    REQUIRE_OK(mf_sched_assign(g, &all, &err), "%s", err.msg);
    const char *want[] = {"x", "cpu", "y", "cpu", "mm", "cpu", "a", "test", "s", "test", "r", "cpu", "m", "test", "o", "test"};
    for (int i = 0; i < 16; i += 2) {
        const mf_node *n = mf_graph_node_c(g, mf_graph_find(g, want[i]));
        CHECK(!strcmp(mf_backend_name((mf_backend){(uint16_t)n->backend}), want[i + 1]), "%s on %s, want %s", want[i],
              mf_backend_name((mf_backend){(uint16_t)n->backend}), want[i + 1]);
    }
    CHECK(mf_graph_node(g, v)->backend == T, "a view of a test value lives on test (test claims no VIEW)");
    CHECK(mf_graph_node(g, st)->backend == MF_BACKEND_ID_CPU, "KV_STORE follows its cache (cpu)");
    /* a node no allowed backend can run is refused with its name, op and type */
    mf_backend_filter test_only = filter_of(false, true);
    int rc = mf_sched_assign(g, &test_only, &err);
    CHECK(rc == MF_E_UNSUPPORTED, "rc=%d", rc);
    CHECK(strstr(err.msg, "no allowed backend can run node 'x' (#0, input, type f32); allowed backends: test"),
          "msg: %s", err.msg);
    mf_graph_free(g);
    /* a weight nobody allowed can hold */
    g = mf_graph_new();
    int64_t ne_w[2] = {8, 4}, ne_x[2] = {8, 1};
    int32_t w = mf_g_weight(g, "w", MF_TYPE_F32, 2, ne_w, W);
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 2, ne_x);
    mf_g_name(g, mf_g_matmul(g, w, x), "blk.0.mm");
    REQUIRE_OK(mf_graph_error(g, &err), "%s", err.msg);
    rc = mf_sched_assign(g, &(mf_backend_filter){.allowed = {[MF_BACKEND_ID_CPU] = false, [T] = true}}, &err);
    CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, "'w' (#0, weight, type f32)"), "rc=%d msg: %s", rc, err.msg);
    mf_graph_free(g);
}

static void run_mixed(const char *what, bool decline, bool sync, uint64_t want_blocking) {
    mf_error err = {0};
    float ref[16];
    reference(ref);
    int32_t o;
    mf_graph *g = build(&o);
    mf_backend_filter all = filter_of(true, true);
    mf_sched *s = NULL;
    REQUIRE_OK(mf_sched_assign(g, &all, &err), "%s: %s", what, err.msg);
    REQUIRE_OK(mf_sched_new(&k_opts, &s, &err), "%s", err.msg);
    REQUIRE_OK(bind(s, g, &err), "%s: %s", what, err.msg);
    mf_sched_set_sync_copies(s, sync);
    mf_test_backend_set_decline(decline);
    long ran0 = mf_test_backend_nodes_run();
    int rc = mf_sched_compute(s, g, &err);
    mf_test_backend_set_decline(false);
    CHECK(rc == 0, "%s: %s", what, err.msg);
    /* the splits */
    static const int32_t want[4][4] = {{MF_BACKEND_ID_CPU, 0, 4, 0}, {T, 4, 6, 2}, {MF_BACKEND_ID_CPU, 6, 7, 1}, {T, 7, 9, 2}};
    CHECK(mf_sched_n_splits(s) == 4, "%s: %d splits", what, mf_sched_n_splits(s));
    for (int i = 0; i < 4 && i < mf_sched_n_splits(s); i++) {
        const mf_split *sp = mf_sched_get_split(s, i);
        CHECK(sp->backend.id == want[i][0] && sp->first == want[i][1] && sp->last == want[i][2] &&
                  sp->n_inputs == want[i][3],
              "%s: split %d = %s [%d,%d) %d inputs", what, i, mf_backend_name(sp->backend), sp->first, sp->last,
              sp->n_inputs);
    }
    const mf_split *s1 = mf_sched_get_split(s, 1);
    CHECK(mf_sched_split_input(s, s1, 0) == mf_graph_find(g, "mm") && mf_sched_split_input(s, s1, 1) == mf_graph_find(g, "y"),
          "%s: split 1 reads mm and y", what);
    /* counters: mm, y -> test; s -> cpu; r -> test (split 3 reads y too: staged once for test, reused) */
    mf_sched_stats st = mf_sched_get_stats(s);
    CHECK(st.copies == 4 && st.waits == 4 && st.blocking_copies == want_blocking && st.drained == 0,
          "%s: copies=%llu waits=%llu blocking=%llu drained=%llu", what, (unsigned long long)st.copies,
          (unsigned long long)st.waits, (unsigned long long)st.blocking_copies, (unsigned long long)st.drained);
    CHECK(mf_test_backend_nodes_run() - ran0 == 4, "%s: the test backend ran a, s, m, o (%ld)", what,
          mf_test_backend_nodes_run() - ran0);
    CHECK(mf_test_backend_in_flight() == 0, "%s: no copy left in flight", what);
    CHECK(!memcmp(out16(s, g, o), ref, sizeof ref), "%s: output differs from the CPU-only run", what);
    /* the test backend's values live in its own memory: an address no one outside it may dereference */
    CHECK(mf_test_backend_owns(mf_graph_node(g, o)->data) && mf_test_backend_owns(mf_graph_node(g, mf_graph_find(g, "a"))->data),
          "%s: a and o are test-backend memory", what);
    CHECK(!mf_test_backend_owns(mf_graph_node(g, mf_graph_find(g, "y"))->data), "%s: y is host memory", what);
    /* data pointers restored after the splits */
    CHECK(mf_graph_node(g, mf_graph_find(g, "y"))->data != NULL && !memcmp(out16(s, g, mf_graph_find(g, "y")), Y, sizeof Y),
          "%s: y's own memory is intact", what);
    /* a second forward reuses the plan and counts again */
    rc = mf_sched_compute(s, g, &err);
    CHECK(rc == 0, "%s (2nd): %s", what, err.msg);
    st = mf_sched_get_stats(s);
    CHECK(st.copies == 8 && st.waits == 8, "%s (2nd): copies=%llu waits=%llu", what, (unsigned long long)st.copies,
          (unsigned long long)st.waits);
    CHECK(!memcmp(out16(s, g, o), ref, sizeof ref), "%s (2nd): output differs", what);
    mf_sched_free(s);
    mf_graph_free(g);
}

static void a_forced_boundary_splits_stages_and_matches_the_cpu_bitwise(void) { run_mixed("async", false, false, 0); }
static void a_declined_copy_is_a_counted_blocking_copy(void) { run_mixed("declined", true, false, 1); }
static void sync_copies_are_the_bitwise_reference(void) { run_mixed("sync", false, true, 4); }

static void reading_a_staged_value_before_its_await_is_refused(void) {
    mf_error err = {0};
    int32_t o;
    mf_graph *g = build(&o);
    mf_backend_filter all = filter_of(true, true);
    mf_sched *s = NULL;
    REQUIRE_OK(mf_sched_assign(g, &all, &err), "%s", err.msg);
    REQUIRE_OK(mf_sched_new(&k_opts, &s, &err), "%s", err.msg);
    REQUIRE_OK(bind(s, g, &err), "%s", err.msg);
    REQUIRE_OK(mf_sched_plan(s, g, &err), "%s", err.msg);
    int32_t sv = mf_graph_find(g, "s");
    float src[16];
    for (int i = 0; i < 16; i++) src[i] = (float)i + 0.5f;
    REQUIRE_OK(mf_sched_write(s, g, sv, 0, src, sizeof src, &err), "%s", err.msg);
    void *data = NULL;
    int rc = mf_sched_cross_input(s, sv, MF_BACKEND_CPU, &data, &err);
    CHECK(rc == MF_E_BACKEND && strstr(err.msg, "never copied"), "before any copy: rc=%d %s", rc, err.msg);
    REQUIRE_OK(mf_sched_copy_across(s, g, sv, MF_BACKEND_CPU, &err), "%s", err.msg);
    rc = mf_sched_cross_input(s, sv, MF_BACKEND_CPU, &data, &err);
    CHECK(rc == MF_E_BACKEND, "a pending read must be refused (rc=%d)", rc);
    CHECK(strstr(err.msg, "'s' (#5) for cpu is still in flight") && strstr(err.msg, "not awaited"), "msg: %s", err.msg);
    /* the same request while pending is the same transfer */
    REQUIRE_OK(mf_sched_copy_across(s, g, sv, MF_BACKEND_CPU, &err), "%s", err.msg);
    CHECK(mf_sched_get_stats(s).copies == 1, "a duplicate pending request is not a second copy");
    REQUIRE_OK(mf_sched_await_cross(s, sv, MF_BACKEND_CPU, &err), "%s", err.msg);
    CHECK(mf_sched_await_cross(s, sv, MF_BACKEND_CPU, &err) == MF_E_INVAL, "one wait per copy");
    rc = mf_sched_cross_input(s, sv, MF_BACKEND_CPU, &data, &err);
    CHECK(rc == 0 && data && !memcmp(data, src, 16 * sizeof(float)), "after the await the bytes arrived (rc=%d)", rc);
    /* something nothing reads is awaited by the drain */
    int32_t yv = mf_graph_find(g, "y");
    REQUIRE_OK(mf_sched_copy_across(s, g, yv, (mf_backend){T}, &err), "%s", err.msg);
    REQUIRE_OK(mf_sched_drain(s, &err), "%s", err.msg);
    mf_sched_stats st = mf_sched_get_stats(s);
    CHECK(st.copies == 2 && st.waits == 2 && st.drained == 1, "copies=%llu waits=%llu drained=%llu",
          (unsigned long long)st.copies, (unsigned long long)st.waits, (unsigned long long)st.drained);
    /* a node no split stages */
    rc = mf_sched_copy_across(s, g, mf_graph_find(g, "x"), (mf_backend){T}, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "not staged"), "rc=%d %s", rc, err.msg);
    CHECK(mf_test_backend_in_flight() == 0, "no ticket leaked");
    mf_sched_free(s);
    mf_graph_free(g);
}

/* Two test-sourced values read by one CPU split at different nodes: both copies are enqueued at the
 * boundary (peak 2 in flight), each is awaited once, and the output matches the CPU-only run. */
static void a_boundarys_inputs_are_all_enqueued_before_any_wait(void) {
    mf_error err = {0};
    float outs[2][16];
    for (int pass = 0; pass < 2; pass++) {
        mf_graph *g = mf_graph_new();
        int64_t ne[2] = {8, 2};
        int32_t x = mf_g_name(g, mf_g_input(g, "x", MF_TYPE_F32, 2, ne), "x");
        int32_t y = mf_g_name(g, mf_g_input(g, "y", MF_TYPE_F32, 2, ne), "y");
        int32_t a = mf_g_scale(g, x, 0.5f), b = mf_g_scale(g, y, 2.0f);     /* test */
        int32_t c = mf_g_rms_norm(g, a, 1e-6f), d = mf_g_rms_norm(g, b, 1e-6f); /* cpu: reads a, then b */
        int32_t o = mf_g_swiglu(g, c, d);                                    /* cpu */
        mf_g_set_output(g, o);
        mf_backend_filter f = filter_of(true, pass == 1);
        mf_sched *s = NULL;
        REQUIRE_OK(mf_sched_assign(g, &f, &err), "%s", err.msg);
        REQUIRE_OK(mf_sched_new(&k_opts, &s, &err), "%s", err.msg);
        REQUIRE_OK(bind(s, g, &err), "%s", err.msg);
        mf_test_backend_reset_peak();
        REQUIRE_OK(mf_sched_compute(s, g, &err), "%s", err.msg);
        memcpy(outs[pass], out16(s, g, o), sizeof outs[pass]);
        if (pass == 1) {
            mf_sched_stats st = mf_sched_get_stats(s);
            CHECK(mf_sched_n_splits(s) == 3, "splits: %d", mf_sched_n_splits(s));
            CHECK(st.copies == 4 && st.waits == 4, "copies=%llu waits=%llu (x, y to test; a, b to cpu)",
                  (unsigned long long)st.copies, (unsigned long long)st.waits);
            CHECK(mf_test_backend_inflight_peak() == 2, "peak in flight %ld, want 2", mf_test_backend_inflight_peak());
            CHECK(mf_test_backend_in_flight() == 0, "all awaited");
        }
        (void)c, (void)d;
        mf_sched_free(s);
        mf_graph_free(g);
    }
    CHECK(!memcmp(outs[0], outs[1], sizeof outs[0]), "mixed output differs from the CPU-only run");
}

/* Memory is planned per backend: a test node never takes over a dying CPU buffer in place (its arena is
 * another backend's memory), and each backend's arena holds exactly its own nodes. */
static void memory_is_planned_per_backend(void) {
    mf_error err = {0};
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {16, 4};
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 2, ne);
    int32_t a = mf_g_rms_norm(g, x, 1e-6f); /* cpu */
    int32_t b = mf_g_scale(g, a, 2.0f);     /* test: a dies here, an in-place candidate */
    int32_t c = mf_g_rms_norm(g, b, 1e-6f); /* cpu: b dies here */
    mf_g_set_output(g, c);
    mf_backend_filter all = filter_of(true, true);
    REQUIRE_OK(mf_sched_assign(g, &all, &err), "%s", err.msg);
    REQUIRE(mf_graph_node(g, b)->backend == T && mf_graph_node(g, a)->backend == MF_BACKEND_ID_CPU, "b on test, a on cpu");
    size_t need[MF_GRAPH_ARENAS];
    REQUIRE_OK(mf_graph_plan_memory(g, need, &err), "%s", err.msg);
    CHECK(need[T] == 256, "the test arena holds b alone: %zu bytes, want 256", need[T]);
    CHECK(need[MF_BACKEND_ID_CPU] == 2 * 256, "the cpu arena holds x and a, c reusing a: %zu bytes, want 512", need[MF_BACKEND_ID_CPU]);
    mf_sched *s = NULL;
    REQUIRE_OK(mf_sched_new(&k_opts, &s, &err), "%s", err.msg);
    REQUIRE_OK(mf_sched_alloc(s, g, &err), "%s", err.msg);
    CHECK(mf_test_backend_owns(mf_graph_node(g, b)->data) && !mf_test_backend_owns(mf_graph_node(g, a)->data) &&
              !mf_test_backend_owns(mf_graph_node(g, c)->data),
          "b is test memory, a and c are not");
    CHECK(mf_sched_arena_bytes(s, (mf_backend){T}) == 256, "the scheduler's test arena: %zu", mf_sched_arena_bytes(s, (mf_backend){T}));
    mf_sched_free(s);
    mf_graph_free(g);
}

static void an_unassigned_graph_is_refused(void) {
    mf_error err = {0};
    int32_t o;
    mf_graph *g = build(&o);
    mf_sched *s = NULL;
    REQUIRE_OK(mf_sched_new(&k_opts, &s, &err), "%s", err.msg);
    int rc = mf_sched_plan(s, g, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "run mf_sched_assign first"), "rc=%d %s", rc, err.msg);
    mf_sched_free(s);
    mf_graph_free(g);
}

int main(void) {
    mf_error err = {0};
    if (mf_test_backend_register(&err)) {
        printf("FAIL register test backend: %s\n", err.msg);
        return 1;
    }
    init_data();
    RUN(assignment_follows_priority_and_views_follow_their_source);
    RUN(a_forced_boundary_splits_stages_and_matches_the_cpu_bitwise);
    RUN(a_declined_copy_is_a_counted_blocking_copy);
    RUN(sync_copies_are_the_bitwise_reference);
    RUN(reading_a_staged_value_before_its_await_is_refused);
    RUN(a_boundarys_inputs_are_all_enqueued_before_any_wait);
    RUN(memory_is_planned_per_backend);
    RUN(an_unassigned_graph_is_refused);
    return mf_test_done();
}
