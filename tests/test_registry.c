/* The backend registry: pinned ids, names and priorities, the registered set per build, the name fence
 * (stage 1 and stage 2 refusals, word for word), the one capability, and the process-wide fence reaching
 * assignment.  The test-only backend (tests/support) fills the test slot so the fence has a second
 * compiled-in backend to remove on every build. */
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "backend/registry.h"
#include "backend/sched.h"
#include "quant/quant.h"
#include "harness.h"
#include "support/test_backend.h"

#include <stdlib.h>

static void names_resolve_and_unknown_names_are_refused(void) {
    mf_error err = {0};
    mf_backend b;
    CHECK(mf_backend_parse("cpu", &b, &err) == 0 && b.id == 0, "cpu -> %d", b.id);
    CHECK(mf_backend_parse(" Metal ", &b, &err) == 0 && b.id == 1, "' Metal ' -> %d", b.id);
    CHECK(mf_backend_parse("\tCUDA\n", &b, &err) == 0 && b.id == 2, "CUDA -> %d", b.id);
    CHECK(MF_BACKEND_CPU.id == 0 && MF_BACKEND_METAL.id == 1 && MF_BACKEND_CUDA.id == 2, "pinned ids");
    int rc = mf_backend_parse("gpu2", &b, &err);
    CHECK(rc == MF_E_NOTFOUND, "rc=%d", rc);
    CHECK(!strcmp(err.msg, "unknown backend 'gpu2'; known backends are: cpu, metal, cuda"), "msg: %s", err.msg);
    CHECK(mf_backend_parse("", &b, &err) == MF_E_NOTFOUND, "empty name must be refused");
    /* names and debug spellings */
    const char *names[] = {"cpu", "metal", "cuda"}, *dbg[] = {"CPU", "Metal", "Cuda"};
    for (int i = 0; i < 3; i++) {
        mf_backend h;
        CHECK(mf_backend_from_index(i, &h) && mf_backend_index(h) == i, "index round trip %d", i);
        CHECK(!strcmp(mf_backend_name(h), names[i]), "name %d: %s", i, mf_backend_name(h));
        CHECK(!strcmp(mf_backend_debug_name(h), dbg[i]), "debug %d: %s", i, mf_backend_debug_name(h));
    }
    CHECK(!mf_backend_from_index(-1, &b) && !mf_backend_from_index(MF_BACKEND_SLOTS, &b), "out-of-range index");
    CHECK(mf_backend_cmp(MF_BACKEND_CPU, MF_BACKEND_METAL) < 0 && mf_backend_cmp(MF_BACKEND_METAL, MF_BACKEND_CUDA) < 0,
          "Ord by id: CPU < Metal < Cuda");
    /* a compiled-out name is a different, equally loud refusal */
    mf_backend_filter f;
    const char *metal[] = {"metal"};
    rc = mf_backend_filter_parse(metal, 1, NULL, &f, &err);
    CHECK(rc == MF_E_UNSUPPORTED, "metal rc=%d", rc);
    CHECK(!strcmp(err.msg, "backend 'metal' is known but not compiled into this build: Metal is compiled only on macOS"),
          "msg: %s", err.msg);
#if !MF_CUDA
    const char *cuda[] = {"CUDA"};
    rc = mf_backend_filter_parse(cuda, 1, NULL, &f, &err);
    CHECK(rc == MF_E_UNSUPPORTED, "cuda rc=%d", rc);
    CHECK(!strcmp(err.msg, "backend 'cuda' is known but not compiled into this build: the CUDA backend is compiled "
                           "only with make CUDA=1"),
          "msg: %s", err.msg);
#endif
    const char *unknown[] = {"cpu,gpu2"};
    rc = mf_backend_filter_parse(unknown, 1, NULL, &f, &err);
    CHECK(rc == MF_E_NOTFOUND && strstr(err.msg, "'gpu2'"), "rc=%d msg: %s", rc, err.msg);
}

static void the_registered_set_and_priority_order_are_pinned(void) {
    /* literals on purpose: a swapped or perturbed priority must fail here */
    CHECK(mf_backend_priority(MF_BACKEND_METAL) == 300, "metal %u", mf_backend_priority(MF_BACKEND_METAL));
    CHECK(mf_backend_priority(MF_BACKEND_CUDA) == 200, "cuda %u", mf_backend_priority(MF_BACKEND_CUDA));
    CHECK(mf_backend_priority(MF_BACKEND_CPU) == 100, "cpu %u", mf_backend_priority(MF_BACKEND_CPU));
    const mf_backend_entry *cpu = mf_backend_entry_get(MF_BACKEND_CPU);
    REQUIRE(cpu, "cpu must always be registered");
    CHECK(cpu->handle.id == 0 && !strcmp(cpu->name, "cpu") && cpu->priority == 100, "cpu entry");
    CHECK(!mf_backend_compiled(MF_BACKEND_METAL), "metal is never compiled into this port");
#if MF_CUDA
    const mf_backend_entry *cu = mf_backend_entry_get(MF_BACKEND_CUDA);
    REQUIRE(cu, "a CUDA build registers cuda");
    CHECK(cu->handle.id == 2 && !strcmp(cu->name, "cuda") && cu->priority == 200, "cuda entry");
#else
    CHECK(!mf_backend_compiled(MF_BACKEND_CUDA), "a CPU build has no cuda entry");
#endif
    /* the priority order over everything registered: cuda (200, if built) > test (150) > cpu (100) */
    mf_backend order[MF_BACKEND_SLOTS];
    int n = mf_backend_by_priority(NULL, order);
    int k = 0;
#if MF_CUDA
    CHECK(n == 3, "registered: %d", n);
    CHECK(order[k++].id == MF_BACKEND_ID_CUDA, "first: cuda");
#else
    CHECK(n == 2, "registered: %d", n);
#endif
    CHECK(order[k++].id == MF_BACKEND_TEST_ID, "then: test");
    CHECK(order[k++].id == MF_BACKEND_ID_CPU, "last: cpu");
    /* a restricted order keeps the relative order */
    bool only_cpu[MF_BACKEND_SLOTS] = {[MF_BACKEND_ID_CPU] = true};
    n = mf_backend_by_priority(only_cpu, order);
    CHECK(n == 1 && order[0].id == 0, "cpu only: n=%d", n);
}

static void the_packed_kv_capability_is_the_registrys_answer(void) {
    CHECK(mf_backend_reads_packed_kv(MF_BACKEND_CPU), "cpu reads packed q8_0 KV");
    CHECK(!mf_backend_reads_packed_kv(MF_BACKEND_METAL), "metal (not compiled): no");
    CHECK(!mf_backend_reads_packed_kv(MF_BACKEND_CUDA), "cuda: no (stub, or not compiled)");
    mf_backend t = {MF_BACKEND_TEST_ID};
    CHECK(!mf_backend_reads_packed_kv(t), "test backend: no");
}

static void registry_caps_match_the_backend_module(void) {
    /* the entry points at the module's own support function: one authority, no copy */
    CHECK(mf_backend_entry_get(MF_BACKEND_CPU)->supports == mf_cpu_supports, "cpu supports is mf_cpu_supports");
    mf_backend t = {MF_BACKEND_TEST_ID};
    CHECK(mf_backend_entry_get(t)->supports == mf_test_backend_supports, "test supports is its own function");
#if MF_CUDA
    CHECK(mf_backend_entry_get(MF_BACKEND_CUDA)->supports == mf_cuda_supports, "cuda supports is mf_cuda_supports");
#endif
    CHECK(mf_backend_entry_get(MF_BACKEND_CPU)->unavailable() == NULL, "cpu is always available");
}

static void the_name_surface_fences_devices_and_keeps_cpu(void) {
    mf_error err = {0};
    mf_backend_filter f;
    const int T = MF_BACKEND_TEST_ID;
    /* unset: every registered backend this machine can use */
    REQUIRE_OK(mf_backend_filter_parse(NULL, 0, NULL, &f, &err), "%s", err.msg);
    CHECK(!f.named && f.allowed[0] && f.allowed[T] && !f.requested[0], "unset allows cpu and test");
    REQUIRE_OK(mf_backend_filter_parse(NULL, 0, "  ", &f, &err), "%s", err.msg);
    CHECK(!f.named && f.allowed[T], "a blank MINFER_BACKENDS is unset");
    /* --backend cpu: the fence removes test */
    const char *cpu[] = {"cpu"};
    REQUIRE_OK(mf_backend_filter_parse(cpu, 1, NULL, &f, &err), "%s", err.msg);
    CHECK(f.named && f.allowed[0] && !f.allowed[T] && f.requested[0], "--backend cpu fences test");
    /* --backend test: cpu is still allowed (it is never removed) */
    const char *test[] = {" TEST "};
    REQUIRE_OK(mf_backend_filter_parse(test, 1, NULL, &f, &err), "%s", err.msg);
    CHECK(f.allowed[0] && f.allowed[T] && f.requested[T] && !f.requested[0], "--backend test keeps cpu");
    /* comma and repeat spellings are the same request */
    const char *comma[] = {"cpu, test"}, *repeat[] = {"cpu", "test"};
    mf_backend_filter f2;
    REQUIRE_OK(mf_backend_filter_parse(comma, 1, NULL, &f, &err), "%s", err.msg);
    REQUIRE_OK(mf_backend_filter_parse(repeat, 2, NULL, &f2, &err), "%s", err.msg);
    CHECK(!memcmp(&f, &f2, sizeof f), "comma == repeat");
    /* the flag wins: the environment is not even parsed */
    REQUIRE_OK(mf_backend_filter_parse(cpu, 1, "gpu2", &f, &err), "flag must win over env: %s", err.msg);
    CHECK(!f.allowed[T], "flag cpu, env ignored");
    int rc = mf_backend_filter_parse(NULL, 0, "gpu2", &f, &err);
    CHECK(rc == MF_E_NOTFOUND && !strcmp(err.msg, "unknown backend 'gpu2'; known backends are: cpu, metal, cuda"),
          "env alone: rc=%d %s", rc, err.msg);
    REQUIRE_OK(mf_backend_filter_parse(NULL, 0, "Test", &f, &err), "%s", err.msg);
    CHECK(f.named && f.requested[T], "env names test");
    const char *empty[] = {" , "};
    CHECK(mf_backend_filter_parse(empty, 1, NULL, &f, &err) == MF_E_INVAL, "a value with no name is refused");
    /* stage 2: a named backend this machine cannot use is refused; an unnamed one is just not used */
    mf_test_backend_set_unavailable("no test device is attached");
    REQUIRE_OK(mf_backend_filter_parse(test, 1, NULL, &f, &err), "%s", err.msg);
    rc = mf_backend_filter_resolve(&f, &err);
    CHECK(rc == MF_E_BACKEND, "rc=%d", rc);
    CHECK(!strcmp(err.msg, "backend 'test' is compiled in but not available on this machine: no test device is attached"),
          "msg: %s", err.msg);
    REQUIRE_OK(mf_backend_filter_parse(NULL, 0, NULL, &f, &err), "%s", err.msg);
    CHECK(mf_backend_filter_resolve(&f, &err) == 0, "unnamed unavailable backend is not a refusal: %s", err.msg);
    CHECK(f.allowed[0] && !f.allowed[T], "unnamed + unavailable: cpu only");
    mf_test_backend_set_unavailable(NULL);
}

static void the_cuda_probe_honours_the_disable_flag(void) {
#if MF_CUDA
    setenv("MINFER_DISABLE_CUDA", "", 1); /* presence-checked: even an empty value disables */
    const char *why = mf_backend_unavailable(MF_BACKEND_CUDA);
    CHECK(why && !strcmp(why, "no CUDA device is available, or CUDA is disabled (MINFER_DISABLE_CUDA)"), "why: %s",
          why ? why : "(null)");
    mf_error err = {0};
    mf_backend_filter f;
    const char *cuda[] = {"cuda"};
    REQUIRE_OK(mf_backend_filter_parse(cuda, 1, NULL, &f, &err), "%s", err.msg);
    CHECK(mf_backend_filter_resolve(&f, &err) == MF_E_BACKEND, "named + disabled is refused");
    CHECK(!strcmp(err.msg, "backend 'cuda' is compiled in but not available on this machine: no CUDA device is "
                           "available, or CUDA is disabled (MINFER_DISABLE_CUDA)"),
          "msg: %s", err.msg);
    REQUIRE_OK(mf_backend_filter_parse(NULL, 0, NULL, &f, &err), "%s", err.msg);
    CHECK(mf_backend_filter_resolve(&f, &err) == 0 && !f.allowed[MF_BACKEND_ID_CUDA], "unnamed + disabled: CPU run");
    unsetenv("MINFER_DISABLE_CUDA");
#else
    const char *why = mf_backend_unavailable(MF_BACKEND_CUDA);
    CHECK(why && strstr(why, "make CUDA=1"), "why: %s", why ? why : "(null)");
#endif
}

/* The CPU entry's compute hook runs exactly the node range it is given, in place (the scheduler hands it
 * one split at a time), and refuses a range outside the graph naming it. */
static void the_cpu_entry_computes_only_its_node_range(void) {
    const mf_backend_entry *e = mf_backend_entry_get(MF_BACKEND_CPU);
    REQUIRE(e && e->compute && e->enable && e->release, "cpu entry hooks");
    mf_error err = {0};
    mf_backend_opts o = {.n_threads = 2};
    void *pool = NULL;
    REQUIRE_OK(e->enable(&o, &pool, &err), "%s", err.msg);
    mf_graph *g = mf_graph_new();
    int64_t ne[1] = {4};
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 1, ne);
    int32_t y = mf_g_scale(g, x, 2.0f);
    int32_t z = mf_g_scale(g, y, 10.0f);
    mf_g_set_output(g, y);
    mf_g_set_output(g, z);
    REQUIRE_OK(mf_graph_alloc(g, &err), "%s", err.msg);
    float *xd = mf_graph_node(g, x)->data, *yd = mf_graph_node(g, y)->data, *zd = mf_graph_node(g, z)->data;
    for (int i = 0; i < 4; i++) xd[i] = (float)(i + 1), yd[i] = zd[i] = -7.0f;
    REQUIRE_OK(e->compute(pool, g, 0, 2, &err), "%s", err.msg);
    CHECK(yd[0] == 2.0f && yd[3] == 8.0f, "node 1 inside the range not computed: %g %g", yd[0], yd[3]);
    CHECK(zd[0] == -7.0f && zd[3] == -7.0f, "node 2 outside the range [0, 2) was computed: %g", zd[0]);
    REQUIRE_OK(e->compute(pool, g, 2, 3, &err), "%s", err.msg);
    CHECK(zd[0] == 20.0f && zd[3] == 80.0f, "node 2 of range [2, 3): %g %g", zd[0], zd[3]);
    CHECK(e->compute(pool, g, 1, 9, &err) == MF_E_RANGE, "range past the graph accepted");
    CHECK(!strcmp(err.msg, "CPU node range [1, 9) is outside the graph's 3 nodes"), "msg: %s", err.msg);
    mf_graph_free(g);
    e->release(pool);
}

/* Runs last: installs the process-wide fence (once) and checks that assignment reads it. */
static void a_fresh_assignment_inherits_the_runs_fence(void) {
    mf_error err = {0};
    mf_backend_filter f;
    const char *cpu[] = {"cpu"};
    REQUIRE_OK(mf_backend_filter_parse(cpu, 1, NULL, &f, &err), "%s", err.msg);
    REQUIRE_OK(mf_backend_filter_resolve(&f, &err), "%s", err.msg);
    REQUIRE_OK(mf_backend_fence_install(&f, &err), "%s", err.msg);
    CHECK(mf_backend_fence_install(&f, &err) == MF_E_INVAL, "the fence is installed once");
    CHECK(mf_backend_allowed(MF_BACKEND_CPU) && !mf_backend_allowed((mf_backend){MF_BACKEND_TEST_ID}), "fence read");
    mf_graph *g = mf_graph_new();
    int64_t ne[1] = {8};
    int32_t a = mf_g_input(g, "a", MF_TYPE_F32, 1, ne), b = mf_g_input(g, "b", MF_TYPE_F32, 1, ne);
    int32_t s = mf_g_add(g, a, b);
    REQUIRE_OK(mf_sched_assign(g, NULL, &err), "%s", err.msg);
    CHECK(mf_graph_node(g, s)->backend == MF_BACKEND_ID_CPU, "add lands on cpu under --backend cpu (got %d)",
          mf_graph_node(g, s)->backend);
    /* without the fence it would have gone to the highest-priority backend that claims add: cuda in a CUDA
     * build (stage 1 alone does not drop an unavailable one), else the test backend */
    mf_backend_filter all;
    REQUIRE_OK(mf_backend_filter_parse(NULL, 0, NULL, &all, &err), "%s", err.msg);
    REQUIRE_OK(mf_sched_assign(g, &all, &err), "%s", err.msg);
    const int want = mf_backend_compiled(MF_BACKEND_CUDA) && mf_cuda_supports(MF_OP_ADD, MF_TYPE_F32)
                         ? MF_BACKEND_ID_CUDA
                         : MF_BACKEND_TEST_ID;
    CHECK(mf_graph_node(g, s)->backend == want, "unfenced: add on %d (got %d)", want, mf_graph_node(g, s)->backend);
    mf_graph_free(g);
}

int main(void) {
    mf_error err = {0};
    if (mf_test_backend_register(&err)) {
        printf("FAIL register test backend: %s\n", err.msg);
        return 1;
    }
    RUN(names_resolve_and_unknown_names_are_refused);
    RUN(the_registered_set_and_priority_order_are_pinned);
    RUN(the_packed_kv_capability_is_the_registrys_answer);
    RUN(registry_caps_match_the_backend_module);
    RUN(the_name_surface_fences_devices_and_keeps_cpu);
    RUN(the_cuda_probe_honours_the_disable_flag);
    RUN(the_cpu_entry_computes_only_its_node_range);
    RUN(a_fresh_assignment_inherits_the_runs_fence);
    return mf_test_done();
}
