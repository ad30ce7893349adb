/* Memory owned by backends, proved on the engine: the test-only backend (tests/support/test_backend.c)
 * keeps its memory behind tagged addresses that fault on any dereference and claims the ops of a block
 * with f32 weights.  A generated model (f32 blocks, a q4_0 embedding/LM head that stays on the CPU) is
 * loaded with its layers split between it and the CPU at several split points; every identity is
 * BITWISE the CPU-only run: prefill and decode logits, a chunked prefill (several graph sizes sharing
 * one arena per backend), a context shift (K rows re-roped through the hooks), a session file (rows
 * read through the hooks: the same bytes as the CPU run's file) and its load.  The cross-backend copies
 * of a decode step are counted exactly; the placed weights and KV rows are the test backend's memory;
 * repacking is the CPU's decision for the weights it owns; a quantized matrix placed on the test
 * backend is refused naming the node; nothing is leaked. */
#include "harness.h"

#include "minfer.h"

#include "backend/registry.h"
#include "backend/sched.h"
#include "engine/engine_impl.h"
#include "model/model.h"
#include "quant/quant.h"
#include "support/test_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T MF_BACKEND_TEST_ID
#define NL 4

static char f32_path[512], mixed_path[512], f32io_path[512], moe_path[512];

static bool gen(const char *args, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/split-%s.gguf", mf_test_tmpdir(), name);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --arch qwen3 --seed 5 --tied -q %s -o %s", mf_test_genmodel(), args, path);
    return system(cmd) == 0;
}

static const mf_token P0[] = {785, 6722, 315, 9625, 374, 12095, 11, 323, 279, 6722, 315, 9856, 374};
static const mf_token P1[] = {750, 75698, 1445, 982};
#define NP0 ((int)(sizeof P0 / sizeof P0[0]))

typedef struct {
    mf_model *m;
    mf_context *c;
    int n_vocab;
} eng;

static bool open_eng(const char *path, const uint16_t *plan, int n_ubatch, eng *e) {
    mf_error err = {0};
    memset(e, 0, sizeof *e);
    const mf_model_open_params op = {.repack = true, .layer_backend = plan, .n_layer_backend = plan ? NL : 0};
    if (mf_model_open(path, &op, &e->m, &err)) {
        printf("  load: %s\n", err.msg);
        return false;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.n_ubatch = n_ubatch;
    if (mf_context_new(e->m, &cp, &e->c, &err)) {
        printf("  context: %s\n", err.msg);
        return false;
    }
    e->n_vocab = e->m->hp.n_vocab;
    return true;
}

static void close_eng(eng *e) {
    mf_context_free(e->c);
    mf_model_close(e->m);
}

/* decode ids[from, to) of seq at positions pos0.., logits for the last row into out */
static bool feed(eng *e, const mf_token *ids, int from, int to, mf_pos pos0, float *out) {
    mf_batch b;
    mf_error err = {0};
    if (mf_batch_init(&b, to - from, &err)) return false;
    for (int i = from; i < to; i++) mf_batch_add(&b, ids[i], pos0 + (i - from), 0, i == to - 1);
    int rc = mf_decode(e->c, &b, &err);
    mf_batch_free(&b);
    if (rc) {
        printf("  decode: %s\n", err.msg);
        return false;
    }
    memcpy(out, mf_get_logits(e->c, -1), sizeof(float) * (size_t)e->n_vocab);
    return true;
}

/* What one plan produces: 5 logits rows and a session file. */
enum { PREFILL, STEP, SHIFTED, LOADED, CHUNKED, N_OUT };
typedef struct {
    float *out[N_OUT];
    char session[600];
    uint64_t step_copies, step_waits, step_blocking;
    int n_vocab;
} result;

/* Test-backend segments of a plan: maximal runs of consecutive test layers. */
static int segments(const uint16_t *plan) {
    int s = 0;
    for (int l = 0; l < NL; l++) s += plan[l] == T && (l == 0 || plan[l - 1] != T);
    return s;
}

static bool run_plan(const uint16_t *plan, const char *name, result *r) {
    eng e;
    mf_error err = {0};
    if (!open_eng(f32_path, plan, 512, &e)) return false;
    r->n_vocab = e.n_vocab;
    for (int i = 0; i < N_OUT; i++) r->out[i] = calloc((size_t)e.n_vocab, sizeof(float));
    /* where the memory is: a placed layer's weights and KV rows are the test backend's, the others not */
    for (int l = 0; l < NL; l++) {
        const bool on_test = plan && plan[l] == T;
        CHECK(mf_test_backend_owns(e.m->layers[l].wq->data) == on_test, "%s: layer %d's attn_q on %s", name, l,
              on_test ? "test" : "cpu");
        CHECK(mf_test_backend_owns(e.m->layers[l].ffn_norm->data) == on_test, "%s: layer %d's ffn_norm", name, l);
        CHECK(mf_test_backend_owns(mf_kv_k(e.c->kv, l)) == on_test && mf_test_backend_owns(mf_kv_v(e.c->kv, l)) == on_test,
              "%s: layer %d's KV rows on %s", name, l, on_test ? "test" : "cpu");
    }
    bool ok = feed(&e, P0, 0, NP0 - 1, 0, r->out[PREFILL]);
    /* one decode step: its copies, exactly (entering each test segment: its input value, and once per
     * forward the positions, cells and spans it reads; leaving it: its output value) */
    mf_sched_reset_stats(e.c->sched);
    ok = ok && feed(&e, P0, NP0 - 1, NP0, NP0 - 1, r->out[STEP]);
    mf_sched_stats st = mf_sched_get_stats(e.c->sched);
    r->step_copies = st.copies, r->step_waits = st.waits, r->step_blocking = st.blocking_copies;
    /* the context shift: drop positions [0, 3), move the rest back by 3, continue */
    mf_seq_rm(e.c, 0, 0, 3);
    ok = ok && mf_seq_add(e.c, 0, 3, -1, -3, &err) == 0;
    if (!ok) printf("  %s: %s\n", name, err.msg);
    ok = ok && feed(&e, P1, 0, 1, NP0 - 3, r->out[SHIFTED]);
    /* a session file of the sequence (its rows read through the hooks), then loaded into a fresh context */
    snprintf(r->session, sizeof r->session, "%s/split-%s.session", mf_test_tmpdir(), name);
    ok = ok && mf_session_save(e.c, 0, NULL, 0, NULL, NULL, 0, r->session, &err) == 0;
    if (!ok) printf("  %s: %s\n", name, err.msg);
    close_eng(&e);
    if (!ok || !open_eng(f32_path, plan, 512, &e)) return false;
    ok = mf_session_load(e.c, 0, r->session, NULL, NULL, NULL, NULL, NULL, &err) == 0;
    if (!ok) printf("  %s: session load: %s\n", name, err.msg);
    ok = ok && feed(&e, P1, 1, 2, NP0 - 2, r->out[LOADED]);
    close_eng(&e);
    /* a chunked prefill: graphs of 4 and 1 rows share one arena per backend */
    if (!ok || !open_eng(f32_path, plan, 4, &e)) return false;
    ok = feed(&e, P0, 0, NP0, 0, r->out[CHUNKED]);
    CHECK(e.c->builds >= 2, "%s: the chunks built %d graphs", name, e.c->builds);
    close_eng(&e);
    return ok;
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = false;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void free_result(result *r) {
    for (int i = 0; i < N_OUT; i++) free(r->out[i]);
    remove(r->session);
}

static void split_runs_are_bitwise_the_cpu_run(void) {
    static const uint16_t plans[][NL] = {
        {T, 0, 0, 0}, /* the first layer */
        {T, T, 0, 0}, /* half */
        {0, 0, 0, T}, /* the last layer: the LM head reads across */
        {0, T, 0, T}, /* alternating: two segments */
        {T, T, T, T}, /* every block */
    };
    static const char *const names[] = {"first", "half", "last", "alternating", "all"};
    static const char *const what[N_OUT] = {"prefill", "decode step", "after the context shift", "after a session load",
                                            "chunked prefill"};
    result ref;
    memset(&ref, 0, sizeof ref);
    REQUIRE(run_plan(NULL, "cpu", &ref), "the CPU-only run");
    CHECK(ref.step_copies == 0, "cpu only: %llu copies", (unsigned long long)ref.step_copies);
    const long live0 = mf_test_backend_live_buffers();
    for (size_t p = 0; p < sizeof plans / sizeof plans[0]; p++) {
        result r;
        memset(&r, 0, sizeof r);
        const long ran0 = mf_test_backend_nodes_run();
        bool ok = run_plan(plans[p], names[p], &r);
        CHECK(ok, "%s: the run failed", names[p]);
        if (!ok) {
            free_result(&r);
            continue;
        }
        CHECK(mf_test_backend_nodes_run() > ran0, "%s: the test backend ran nodes", names[p]);
        for (int i = 0; i < N_OUT; i++) {
            int d = -1;
            for (int k = 0; k < ref.n_vocab && d < 0; k++)
                if (memcmp(&ref.out[i][k], &r.out[i][k], sizeof(float))) d = k;
            CHECK(d < 0, "%s: %s logits differ from the CPU-only run (first at id %d: %.9g vs %.9g)", names[p], what[i], d,
                  d >= 0 ? ref.out[i][d] : 0.0, d >= 0 ? r.out[i][d] : 0.0);
        }
        CHECK(same_file(ref.session, r.session), "%s: the session file differs from the CPU-only run's", names[p]);
        const uint64_t want = 3 + 2 * (uint64_t)segments(plans[p]);
        CHECK(r.step_copies == want && r.step_waits == want && r.step_blocking == 0,
              "%s: a decode step made %llu copies, %llu waits, %llu blocking; want %llu, %llu, 0", names[p],
              (unsigned long long)r.step_copies, (unsigned long long)r.step_waits, (unsigned long long)r.step_blocking,
              (unsigned long long)want, (unsigned long long)want);
        free_result(&r);
        CHECK(mf_test_backend_live_buffers() == live0, "%s: %ld test-backend buffers left behind", names[p],
              mf_test_backend_live_buffers() - live0);
    }
    free_result(&ref);
}

/* Repacking is the CPU's decision for the weights it owns; a quantized matrix placed on the test backend
 * (f32 matmul only) is refused naming the node, at the first forward - never run elsewhere. */
static void placement_owns_layout_and_refuses_what_the_backend_cannot_run(void) {
    const uint16_t all_cpu[NL] = {0, 0, 0, 0}, l1_test[NL] = {0, T, 0, 0};
    eng a, b;
    REQUIRE(open_eng(mixed_path, all_cpu, 512, &a), "all cpu");
    REQUIRE(open_eng(mixed_path, l1_test, 512, &b), "layer 1 on test");
    const mf_gguf_tensor *up = mf_gguf_find_tensor(a.m->gguf, "blk.1.ffn_up.weight");
    REQUIRE(up && up->type == MF_TYPE_Q8_0, "the mixed model's blk.1.ffn_up is q8_0");
    const bool cpu_repacks = mf_backend_weight_layout(MF_BACKEND_CPU, up->type, up->ne[0], up->ne[1]) != up->type;
    CHECK(a.m->n_repacked - b.m->n_repacked == (cpu_repacks ? 1 : 0),
          "repacked %d with every layer on the CPU, %d with layer 1 on test (its q8_0 ffn_up is test's)",
          a.m->n_repacked, b.m->n_repacked);
    CHECK(b.m->layers[1].ffn_up->type == MF_TYPE_Q8_0 && mf_test_backend_owns(b.m->layers[1].ffn_up->data),
          "layer 1's ffn_up is uploaded to test in the file's layout");
    float *out = calloc((size_t)a.n_vocab, sizeof(float));
    CHECK(feed(&a, P0, 0, 3, 0, out), "the all-CPU run decodes");
    mf_batch bt;
    mf_error err = {0};
    REQUIRE(mf_batch_init(&bt, 3, &err) == 0, "batch");
    for (int i = 0; i < 3; i++) mf_batch_add(&bt, P0[i], i, 0, i == 2);
    int rc = mf_decode(b.c, &bt, &err);
    mf_batch_free(&bt);
    CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, "node 'blk.1.ffn_up'") && strstr(err.msg, "weight type q8_0") &&
              strstr(err.msg, "is placed on test, which cannot run it"),
          "rc=%d msg: %s", rc, err.msg);
    CHECK(mf_kv_cells_used(b.c) == 0, "the refused batch took no cell (%d)", mf_kv_cells_used(b.c));
    free(out);
    close_eng(&a);
    close_eng(&b);
    /* a plan naming a backend the fence does not allow is refused, naming it */
    mf_graph *g = mf_graph_new();
    int64_t ne[2] = {8, 1};
    int32_t x = mf_g_input(g, "x", MF_TYPE_F32, 2, ne);
    mf_g_layer(g, mf_g_scale(g, x, 2.0f), 0);
    const uint16_t one[1] = {T};
    const mf_placement pl = {.layer = one, .n_layer = 1, .io = MF_BACKEND_CPU};
    mf_backend_filter cpu_only;
    memset(&cpu_only, 0, sizeof cpu_only);
    cpu_only.allowed[MF_BACKEND_ID_CPU] = true;
    rc = mf_sched_assign_placed(g, &pl, &cpu_only, &err);
    CHECK(rc == MF_E_BACKEND && strstr(err.msg, "puts layer 0 on test") && strstr(err.msg, "does not allow"),
          "rc=%d msg: %s", rc, err.msg);
    mf_graph_free(g);
    /* a plan of the wrong length */
    mf_model *m = NULL;
    const mf_model_open_params op = {.repack = true, .layer_backend = l1_test, .n_layer_backend = 3};
    rc = mf_model_open(mixed_path, &op, &m, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "names 3 layers, the model has 4"), "rc=%d msg: %s", rc, err.msg);
    mf_model_close(m);
}

/* The offload plan through the loader (mf_model_open's gpu_layers, the test backend standing in for the
 * device): a count puts blocks 0..N-1 on it, every block also moves the embeddings, output norm and LM head
 * (all f32 here, so the test backend runs them); the report names the plan; and the runs are bitwise the
 * CPU-only run's - inputs written and logits read through the device's hooks, the host-owned spans staged. */
static bool open_offload(int32_t gpu_layers, eng *e) {
    mf_error err = {0};
    memset(e, 0, sizeof *e);
    const mf_model_open_params op = {.repack = true, .gpu_layers = gpu_layers, .gpu_backend = T};
    if (mf_model_open(f32io_path, &op, &e->m, &err)) {
        printf("  load: %s\n", err.msg);
        return false;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    if (mf_context_new(e->m, &cp, &e->c, &err)) {
        printf("  context: %s\n", err.msg);
        return false;
    }
    e->n_vocab = e->m->hp.n_vocab;
    return true;
}

static void offload_plan_places_blocks_and_io(void) {
    eng ref, e;
    REQUIRE(open_offload(0, &ref), "the CPU-only run");
    CHECK(ref.m->offload_report[0] == 0 && ref.m->io_backend == MF_BACKEND_ID_CPU, "no request: '%s'",
          ref.m->offload_report);
    float *want = calloc((size_t)ref.n_vocab * 2, sizeof(float)), *got = calloc((size_t)ref.n_vocab * 2, sizeof(float));
    REQUIRE(want && got, "memory");
    REQUIRE(feed(&ref, P0, 0, NP0 - 1, 0, want) && feed(&ref, P0, NP0 - 1, NP0, NP0 - 1, want + ref.n_vocab), "ref");
    close_eng(&ref);
    const long live0 = mf_test_backend_live_buffers();
    const int32_t reqs[] = {MF_GPU_LAYERS_ALL, 2, 4, 99};
    for (size_t q = 0; q < MF_ARRAY_LEN(reqs); q++) {
        const int32_t r = reqs[q];
        const int32_t n = r == MF_GPU_LAYERS_ALL || r > NL ? NL : r;
        if (!open_offload(r, &e)) {
            CHECK(false, "request %d: the load failed", r);
            continue;
        }
        for (int l = 0; l < NL; l++)
            CHECK(mf_test_backend_owns(e.m->layers[l].wq->data) == (l < n), "request %d: layer %d's attn_q", r, l);
        const bool io = n == NL;
        CHECK(e.m->io_backend == (io ? T : MF_BACKEND_ID_CPU) && mf_test_backend_owns(e.m->tok_embd->data) == io &&
                  mf_test_backend_owns(e.m->output_norm->data) == io && mf_test_backend_owns(e.m->output->data) == io,
              "request %d: the embeddings/output on %s", r, io ? "test" : "cpu");
        if (io)
            CHECK(e.m->output == e.m->tok_embd, "request %d: the tied LM head is the embedding matrix, uploaded once", r);
        else /* the CPU's copy of it in huge pages (model/load_repack.c), or the matrix itself */
            CHECK(e.m->output == e.m->tok_embd || (e.m->output->type == e.m->tok_embd->type &&
                                                   e.m->output->nbytes == e.m->tok_embd->nbytes &&
                                                   !memcmp(e.m->output->data, e.m->tok_embd->data,
                                                           (size_t)e.m->tok_embd->nbytes)),
                  "request %d: the tied LM head on the CPU is the embedding matrix or its copy", r);
        char head[96];
        snprintf(head, sizeof head, "offload: %d of %d blocks on test, %d on cpu; embed/output on %s (", n, NL, NL - n,
                 io ? "test" : "cpu");
        CHECK(!strncmp(e.m->offload_report, head, strlen(head)) &&
                  strstr(e.m->offload_report, "not checked against device memory: backend 'test' has no memory query"),
              "request %d: report '%s'", r, e.m->offload_report);
        bool ok = feed(&e, P0, 0, NP0 - 1, 0, got) && feed(&e, P0, NP0 - 1, NP0, NP0 - 1, got + e.n_vocab);
        CHECK(ok, "request %d: the run failed", r);
        int d = -1;
        for (int k = 0; ok && k < 2 * e.n_vocab && d < 0; k++)
            if (memcmp(&want[k], &got[k], sizeof(float))) d = k;
        CHECK(d < 0, "request %d: logits differ from the CPU-only run (first at %d)", r, d);
        close_eng(&e);
        CHECK(mf_test_backend_live_buffers() == live0, "request %d: %ld test-backend buffers left behind", r,
              mf_test_backend_live_buffers() - live0);
    }
    free(want);
    free(got);
}

/* A MoE model's experts run on the CPU only: a count of blocks on the device is refused naming why and the
 * way out, and auto plans none and says why, rather than placing blocks whose experts the device cannot run. */
static void offload_keeps_a_moe_model_on_the_cpu(void) {
    mf_error err = {0};
    mf_model *m = NULL;
    const mf_model_open_params one = {.repack = true, .gpu_layers = 1, .gpu_backend = T};
    int rc = mf_model_open(moe_path, &one, &m, &err);
    CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, "MoE model") && strstr(err.msg, "use --gpu-layers 0"),
          "rc=%d msg: %s", rc, err.msg);
    mf_model_close(m);
    m = NULL;
    const mf_model_open_params aut = {.repack = true, .gpu_layers = MF_GPU_LAYERS_AUTO, .gpu_backend = T};
    rc = mf_model_open(moe_path, &aut, &m, &err);
    CHECK(rc == 0, "auto: %s", err.msg);
    if (rc == 0)
        CHECK(m->n_gpu_layers == 0 && m->io_backend == MF_BACKEND_ID_CPU && strstr(m->offload_report, "MoE model"),
              "auto: %d blocks, report '%s'", m->n_gpu_layers, m->offload_report);
    mf_model_close(m);
}

int main(void) {
    mf_error err = {0};
    if (mf_test_backend_register(&err)) {
        printf("FAIL register test backend: %s\n", err.msg);
        return 1;
    }
    mf_test_backend_set_layer_ops(true);
    if (!gen("--type f32 --layers 4 --tensor-type token_embd.weight=q4_0", "f32", f32_path, sizeof f32_path) ||
        !gen("--type f32 --layers 4 --tensor-type token_embd.weight=q4_0 --tensor-type blk.1.ffn_up.weight=q8_0", "mixed",
             mixed_path, sizeof mixed_path) ||
        !gen("--type f32 --layers 4", "f32io", f32io_path, sizeof f32io_path)) {
        printf("FAIL mf-genmodel (build it first: make)\n");
        return 1;
    }
    char cmd[1024];
    snprintf(moe_path, sizeof moe_path, "%s/split-moe.gguf", mf_test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s --arch qwen3moe --type f32 --seed 5 -q -o %s", mf_test_genmodel(), moe_path);
    if (system(cmd) != 0) {
        printf("FAIL mf-genmodel --arch qwen3moe\n");
        return 1;
    }
    RUN(split_runs_are_bitwise_the_cpu_run);
    RUN(placement_owns_layout_and_refuses_what_the_backend_cannot_run);
    RUN(offload_plan_places_blocks_and_io);
    RUN(offload_keeps_a_moe_model_on_the_cpu);
    remove(moe_path);
    remove(f32_path);
    remove(mixed_path);
    remove(f32io_path);
    return mf_test_done();
}
