/* The CUDA backend on a device, end to end (issue 14 step 3; scripts/gpu-check.sh runs it there).
 *
 * Generated 4-block models (one per weight type the CUDA matmul claims, qwen2 and qwen3, tied output) are
 * run three times: every block on the CPU (the reference), every block on cuda, and half the blocks on cuda
 * (a split: the scheduler's cross-backend copies in a real forward).  On each GPU placement:
 *   identities, BITWISE: the prompt in one batch (logits for every row) equals the same prompt fed one
 *     token at a time (batched == serial: a row's result does not depend on the batch it is in), and two
 *     sequences decoded in one batch equal each decoded alone;
 *   conformance against the CPU run, within the tolerance class named per weight type (gpu-f32, gpu-f16,
 *     gpu-bf16, gpu-quant below): at every prompt row the largest |logit difference| over the whole
 *     vocabulary is within the class's tolerance.  Each run prints its max |d|, its share of the tolerance
 *     and its top-1 agreement with the CPU.
 * The placement is set through mf_model_params.n_gpu_layers ("all" | N, 0 for the CPU reference) and read
 * back from the loaded model, so a placement that did not take fails by name instead of comparing the CPU
 * with itself.  Without a CUDA build or a usable device every device test is SKIPped with the reason
 * (tests/expected-skips.txt); the comparison rules themselves are checked everywhere. */
#include "harness.h"

#include "minfer.h"

#include "backend/registry.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NL 4      /* blocks of every test model */
#define NSPLIT 2  /* the split run: this many blocks on cuda */

/* ---- tolerance classes: GPU logits against the CPU run's ----
 * tol(row) = max(abs, rel * |the CPU's top-1 logit of that row|).  The causes are the ones
 * docs/CONFORMANCE.md measured between minfer and llama.cpp's CPU build, since a GPU sums in yet another
 * order: f32 dot products in another order (~1e-5 on f32 models), and, where activations are rounded
 * before a matmul (to f16/bf16, or to 8-bit blocks for the quantized types), a 1-ulp difference that now and
 * then crosses a rounding boundary and is amplified by the random weights (up to ~2.3 % of the logits, the
 * loose class "llama-requant"/"x8-order"). */
typedef struct {
    const char *name;
    double abs, rel;
} tol_class;
static const tol_class k_f32 = {"gpu-f32", 1e-3, 0}, k_f16 = {"gpu-f16", 1e-1, 0}, k_bf16 = {"gpu-bf16", 0, 0.03},
                       k_quant = {"gpu-quant", 0, 0.03};

typedef struct {
    double max_d;  /* largest |gpu - cpu| over every row and id */
    double share;  /* largest |d| / tol over the rows */
    int worst_row; /* where share peaked */
    int top1_same, top1_rows; /* rows whose argmax agrees; rows compared */
    char why[512]; /* the first violation, if any */
} cmp_result;

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Compares rows x n_vocab logits: true when every row's largest |d| is within the class.  The top-1
 * agreement is counted for the report, not ruled on: a different top-1 where the CPU's top-1/top-2 gap is
 * at least 2 tol moves some logit by at least tol, so the |d| rule already fails it, and below that gap
 * a near-tie may go either way inside the class. */
static bool compare_logits(const float *gpu, const float *cpu, int rows, int n_vocab, const tol_class *tc,
                           cmp_result *r) {
    memset(r, 0, sizeof *r);
    bool ok = true;
    for (int row = 0; row < rows; row++) {
        const float *g = gpu + (size_t)row * n_vocab, *c = cpu + (size_t)row * n_vocab;
        const int tc1 = argmax(c, n_vocab);
        const double tol = fmax(tc->abs, tc->rel * fabs((double)c[tc1]));
        double worst = 0;
        int at = 0;
        for (int i = 0; i < n_vocab; i++) {
            double d = fabs((double)g[i] - (double)c[i]);
            if (!isnan(worst) && (isnan(d) || d > worst)) worst = d, at = i; /* a NaN sticks */
        }
        if (!isnan(r->max_d) && (isnan(worst) || worst > r->max_d)) r->max_d = worst;
        if (!isnan(r->share) && (isnan(worst) || worst / tol > r->share)) r->share = worst / tol, r->worst_row = row;
        if (!(worst <= tol) && ok) {
            snprintf(r->why, sizeof r->why, "row %d: |d| %.4g at id %d (gpu %.7g, cpu %.7g) exceeds the %s tolerance %.4g",
                     row, worst, at, g[at], c[at], tc->name, tol);
            ok = false;
        }
        r->top1_rows++;
        r->top1_same += argmax(g, n_vocab) == tc1;
    }
    return ok;
}

/* Runs everywhere: the rule catches what it is for (a drift past the class, a NaN) and lets through what
 * it allows (a drift inside the class, a near-tie that flips the top-1). */
static void comparison_rules(void) {
    enum { V = 64, R = 3 };
    float cpu[R * V], gpu[R * V];
    for (int i = 0; i < R * V; i++) cpu[i] = (float)((i * 37) % 50) * 0.1f; /* values 0 .. 4.9 */
    for (int r = 0; r < R; r++) cpu[r * V + 3] = 10.0f, cpu[r * V + 9] = 9.9f; /* top-1 10, runner-up 9.9 */
    cmp_result r;
    memcpy(gpu, cpu, sizeof gpu);
    CHECK(compare_logits(gpu, cpu, R, V, &k_quant, &r) && r.max_d == 0 && r.top1_same == R, "identical logits: %s", r.why);
    gpu[V + 5] += 0.29f; /* 2.9 % of |top-1| = 10: inside gpu-quant */
    CHECK(compare_logits(gpu, cpu, R, V, &k_quant, &r), "a drift inside the class was refused: %s", r.why);
    CHECK(fabs(r.max_d - 0.29) < 1e-5 && r.worst_row == 1 && fabs(r.share - 0.29 / 0.3) < 1e-4,
          "max|d| %.6g (share %.4g) at row %d, want 0.29 (0.967) at row 1", r.max_d, r.share, r.worst_row);
    gpu[V + 5] += 0.02f; /* 3.1 % */
    CHECK(!compare_logits(gpu, cpu, R, V, &k_quant, &r) && strstr(r.why, "row 1:") && strstr(r.why, "id 5 "),
          "a drift past the class passed or was misreported: %s", r.why);
    memcpy(gpu, cpu, sizeof gpu);
    gpu[2 * V + 7] = NAN;
    CHECK(!compare_logits(gpu, cpu, R, V, &k_quant, &r) && strstr(r.why, "row 2:"), "a NaN passed: %s", r.why);
    memcpy(gpu, cpu, sizeof gpu);
    gpu[2 * V + 7] = -INFINITY;
    CHECK(!compare_logits(gpu, cpu, R, V, &k_f16, &r), "an -inf passed");
    /* a near-tie flip: the runner-up 0.15 up, inside the class (tol 0.3): allowed, and counted */
    memcpy(gpu, cpu, sizeof gpu);
    gpu[V + 9] += 0.15f;
    CHECK(compare_logits(gpu, cpu, R, V, &k_quant, &r) && r.top1_same == R - 1, "a near-tie flip: %s, top-1 %d/%d", r.why,
          r.top1_same, r.top1_rows);
    /* the same under the f32 class (tol 1e-3): refused */
    CHECK(!compare_logits(gpu, cpu, R, V, &k_f32, &r), "0.15 passed the f32 class");
}

/* ---- the device runs ---- */

static const char *skip_reason(void) {
    const mf_backend_entry *e = mf_backend_entry_get(MF_BACKEND_CUDA);
    if (!e) return mf_backend_not_compiled_reason(MF_BACKEND_CUDA);
    return e->unavailable ? e->unavailable() : NULL;
}

typedef struct {
    const char *arch, *type;
    uint32_t kv;
    const tol_class *tc;
    char path[512];
} model_case;

static model_case k_cases[] = {
    {"qwen2", "q8_0", MF_KV_TYPE_F16, &k_quant, ""},   {"qwen3", "q8_0", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "q8_0", MF_KV_TYPE_Q8_0, &k_quant, ""},  {"qwen2", "q4_0", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "q4_1", MF_KV_TYPE_F16, &k_quant, ""},   {"qwen2", "q5_0", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "q5_1", MF_KV_TYPE_F16, &k_quant, ""},   {"qwen2", "q4_k_m", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "q5_k", MF_KV_TYPE_F16, &k_quant, ""},   {"qwen2", "q6_k", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "f16", MF_KV_TYPE_F16, &k_f16, ""},      {"qwen2", "bf16", MF_KV_TYPE_F16, &k_bf16, ""},
    {"qwen3", "f32", MF_KV_TYPE_F32, &k_f32, ""},
    /* the low-bit types (tiny's 256/512-wide rows keep them pure: no 32-block fallback) */
    {"qwen2", "q2_k", MF_KV_TYPE_F16, &k_quant, ""},   {"qwen3", "q3_k", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen2", "iq4_xs", MF_KV_TYPE_F16, &k_quant, ""}, {"qwen3", "iq4_nl", MF_KV_TYPE_F16, &k_quant, ""},
    /* the grid types (the lattice tables' device copies) */
    {"qwen3", "iq2_xxs", MF_KV_TYPE_F16, &k_quant, ""}, {"qwen2", "iq2_xs", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "iq2_s", MF_KV_TYPE_F16, &k_quant, ""},   {"qwen2", "iq3_xxs", MF_KV_TYPE_F16, &k_quant, ""},
    {"qwen3", "iq3_s", MF_KV_TYPE_F16, &k_quant, ""},
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))

static const char *kv_name(uint32_t kv) { return kv == MF_KV_TYPE_F32 ? "f32" : kv == MF_KV_TYPE_Q8_0 ? "q8_0" : "f16"; }

static bool gen(model_case *mc) {
    snprintf(mc->path, sizeof mc->path, "%s/gpu-%s-%s.gguf", mf_test_tmpdir(), mc->arch, mc->type);
    FILE *f = fopen(mc->path, "rb"); /* the q8_0 file serves two cases */
    if (f) return fclose(f), true;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s --arch %s --type %s --layers %d --tied --seed 7 -q -o %s", mf_test_genmodel(), mc->arch,
             mc->type, NL, mc->path);
    return system(cmd) == 0;
}

/* The one place the placement is chosen (until the public mf_model_params field lands). */
/* "all" or a count, as the public parameter */
static mf_model_params gpu_params(const char *v) {
    mf_model_params mp = mf_model_default_params();
    mp.n_gpu_layers = !strcmp(v, "all") ? MF_GPU_LAYERS_ALL : (int32_t)atoi(v);
    mp.gpu_layers_origin = "test_gpu";
    return mp;
}

static const mf_token P0[] = {785, 6722, 315, 9625, 374, 12095, 11, 323, 279, 6722, 315, 9856, 374};
static const mf_token P1[] = {750, 75698, 1445, 982, 262, 4210, 5598};
#define NP0 ((int)(sizeof P0 / sizeof P0[0]))
#define NP1 ((int)(sizeof P1 / sizeof P1[0]))

typedef struct {
    mf_model *m;
    mf_context *c;
    int n_vocab;
} eng;

/* Loads mc's model with n_gpu_layers = gl ("all" or a count) and checks that want_cuda blocks landed on cuda. */
static bool open_eng(const model_case *mc, const char *gl, int want_cuda, eng *e, char *why, size_t cap) {
    mf_error err = {0};
    memset(e, 0, sizeof *e);
    const mf_model_params mp = gpu_params(gl);
    if (mf_model_load(mc->path, &mp, &e->m, &err)) return snprintf(why, cap, "load: %s", err.msg), false;
    int on_cuda = 0;
    for (int l = 0; l < e->m->hp.n_layer; l++) on_cuda += e->m->layer_backend && e->m->layer_backend[l] == MF_BACKEND_ID_CUDA;
    if (on_cuda != want_cuda)
        return snprintf(why, cap,
                        "n_gpu_layers %s put %d of %d blocks on cuda, want %d: the placement did not take",
                        gl, on_cuda, e->m->hp.n_layer, want_cuda),
               false;
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 4;
    cp.type_k = cp.type_v = mc->kv;
    if (mf_context_new(e->m, &cp, &e->c, &err)) return snprintf(why, cap, "context: %s", err.msg), false;
    e->n_vocab = e->m->hp.n_vocab;
    return true;
}

static void close_eng(eng *e) {
    mf_context_free(e->c);
    mf_model_free(e->m);
    memset(e, 0, sizeof *e);
}

/* ids[from, to) of seq at positions from..; logits of every row (all) or of the last into out */
static bool feed(eng *e, const mf_token *ids, int from, int to, mf_seq_id seq, bool all, float *out, char *why, size_t cap) {
    mf_batch b;
    mf_error err = {0};
    if (mf_batch_init(&b, to - from, &err)) return snprintf(why, cap, "batch: %s", err.msg), false;
    for (int i = from; i < to; i++) mf_batch_add(&b, ids[i], i, seq, all || i == to - 1);
    int rc = mf_decode(e->c, &b, &err);
    mf_batch_free(&b);
    if (rc) return snprintf(why, cap, "decode: %s", err.msg), false;
    const size_t row = sizeof(float) * (size_t)e->n_vocab;
    if (out && all)
        for (int i = 0; i < to - from; i++) memcpy(out + (size_t)i * e->n_vocab, mf_get_logits(e->c, i), row);
    else if (out)
        memcpy(out, mf_get_logits(e->c, -1), row);
    return true;
}

static int first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) return (int)i;
    return -1;
}

/* What one placement gives: the prompt's rows in one batch, the same rows fed one at a time, and the final
 * decode step of two sequences batched together vs alone. */
typedef struct {
    float *batched, *serial, *alone, *together; /* NP0 rows; NP0 rows; 2 rows; 2 rows */
    int n_vocab;
} run_out;

static void free_out(run_out *o) {
    free(o->batched), free(o->serial), free(o->alone), free(o->together);
    memset(o, 0, sizeof *o);
}

static bool run_placement(const model_case *mc, const char *gl, int want_cuda, run_out *o, char *why, size_t cap) {
    eng e;
    memset(o, 0, sizeof *o);
    if (!open_eng(mc, gl, want_cuda, &e, why, cap)) {
        close_eng(&e);
        return false;
    }
    const int n = o->n_vocab = e.n_vocab;
    o->batched = malloc(sizeof(float) * (size_t)n * NP0), o->serial = malloc(sizeof(float) * (size_t)n * NP0);
    o->alone = malloc(sizeof(float) * (size_t)n * 2), o->together = malloc(sizeof(float) * (size_t)n * 2);
    bool ok = o->batched && o->serial && o->alone && o->together;
    if (!ok) snprintf(why, cap, "out of memory");
    ok = ok && feed(&e, P0, 0, NP0, 0, true, o->batched, why, cap);
    mf_kv_clear_all(e.c);
    for (int i = 0; ok && i < NP0; i++) ok = feed(&e, P0, i, i + 1, 0, false, o->serial + (size_t)i * n, why, cap);
    /* alone: each sequence in a fresh cache, prefill then one decode step */
    mf_kv_clear_all(e.c);
    ok = ok && feed(&e, P0, 0, NP0 - 1, 0, false, NULL, why, cap) && feed(&e, P0, NP0 - 1, NP0, 0, false, o->alone, why, cap);
    mf_kv_clear_all(e.c);
    ok = ok && feed(&e, P1, 0, NP1 - 1, 0, false, NULL, why, cap) &&
         feed(&e, P1, NP1 - 1, NP1, 0, false, o->alone + n, why, cap);
    mf_kv_clear_all(e.c);
    /* together: the two prefills interleaved in one batch (sequence 1 as id 5), then both steps in one */
    if (ok) {
        mf_batch b;
        mf_error err = {0};
        ok = mf_batch_init(&b, NP0 + NP1, &err) == 0;
        for (int i = 0; ok && (i < NP0 - 1 || i < NP1 - 1); i++) {
            if (i < NP1 - 1) mf_batch_add(&b, P1[i], i, 5, false);
            if (i < NP0 - 1) mf_batch_add(&b, P0[i], i, 0, false);
        }
        ok = ok && mf_decode(e.c, &b, &err) == 0;
        mf_batch_clear(&b);
        mf_batch_add(&b, P1[NP1 - 1], NP1 - 1, 5, true);
        mf_batch_add(&b, P0[NP0 - 1], NP0 - 1, 0, true);
        ok = ok && mf_decode(e.c, &b, &err) == 0;
        if (ok) {
            memcpy(o->together, mf_get_logits(e.c, 1), sizeof(float) * (size_t)n);     /* sequence 0 */
            memcpy(o->together + n, mf_get_logits(e.c, 0), sizeof(float) * (size_t)n); /* sequence 1 */
        } else {
            snprintf(why, cap, "two sequences in one batch: %s", err.msg);
        }
        mf_batch_free(&b);
    }
    close_eng(&e);
    return ok;
}

/* One device test: for every model case, the placement (all blocks, or NSPLIT) and the CPU reference. */
static void device_runs(bool split) {
    const char *why = skip_reason();
    if (why) SKIP("cuda: %s", why);
    char gl[16], msg[1400];
    snprintf(gl, sizeof gl, split ? "%d" : "all", NSPLIT);
    const int want = split ? NSPLIT : NL;
    for (int k = 0; k < N_CASES; k++) {
        model_case *mc = &k_cases[k];
        char label[96];
        snprintf(label, sizeof label, "%s %s kv %s, %d of %d blocks on cuda", mc->arch, mc->type, kv_name(mc->kv), want, NL);
        if (!gen(mc)) {
            CHECK(0, "%s: mf-genmodel could not write %s", label, mc->path);
            continue;
        }
        run_out gpu, cpu;
        memset(&cpu, 0, sizeof cpu);
        bool ok = run_placement(mc, gl, want, &gpu, msg, sizeof msg);
        CHECK(ok, "%s: %s", label, msg);
        if (ok) { /* the identities, bitwise */
            const size_t nv = (size_t)gpu.n_vocab;
            int d = first_diff(gpu.batched, gpu.serial, nv * NP0), d2 = first_diff(gpu.together, gpu.alone, nv * 2);
            CHECK(d < 0, "%s: batched != serial: row %d id %d: %.9g in one batch, %.9g fed alone", label, d / (int)nv,
                  d % (int)nv, d < 0 ? 0 : gpu.batched[d], d < 0 ? 0 : gpu.serial[d]);
            CHECK(d2 < 0, "%s: two sequences in one batch != alone: sequence %d id %d: %.9g together, %.9g alone", label,
                  d2 / (int)nv, d2 % (int)nv, d2 < 0 ? 0 : gpu.together[d2], d2 < 0 ? 0 : gpu.alone[d2]);
            printf("  %s: batched %s serial (%d rows), two sequences %s alone (bitwise)\n", label, d < 0 ? "==" : "!=", NP0,
                   d2 < 0 ? "==" : "!=");
            ok = run_placement(mc, "0", 0, &cpu, msg, sizeof msg);
            CHECK(ok, "%s: the CPU reference run: %s", label, msg);
        }
        if (ok) { /* against the CPU, within the class */
            cmp_result r;
            ok = compare_logits(gpu.batched, cpu.batched, NP0, gpu.n_vocab, mc->tc, &r);
            printf("  %s: vs cpu max|d| %.4g (%.0f%% of %s tol, row %d), top-1 %d/%d\n", label, r.max_d, 100 * r.share,
                   mc->tc->name, r.worst_row, r.top1_same, r.top1_rows);
            CHECK(ok, "%s: against the CPU run: %s", label, r.why);
        }
        free_out(&gpu), free_out(&cpu);
    }
}

static void gpu_all_blocks(void) { device_runs(false); }
static void gpu_split(void) { device_runs(true); }

int main(void) {
    RUN(comparison_rules);
    RUN(gpu_all_blocks);
    RUN(gpu_split);
    return mf_test_done();
}
