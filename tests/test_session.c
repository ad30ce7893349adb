/* Session files (src/engine/session.c, docs/SESSION.md), on generated tiny models:
 *   the checksum is XXH64 (published vectors), streaming equals one shot;
 *   round trip BITWISE: prefill + decode (the saved cells out of position order), save, load into a fresh
 *   context (another sequence id, cells interleaved with another sequence), continue: every logit and every
 *   sampled token equal the
 *   uninterrupted run, greedy and seeded (the restored RNG state is what makes the seeded one equal);
 *   every refusal (other model, other KV type, context too small or too full, a sequence that is not
 *   empty, checksum, truncation, trailing bytes, version) leaves the KV bytes, the cell metadata, the
 *   sampler and the outputs exactly as they were, and names the mismatch;
 *   the hostile-file suite: truncation at every length, a flipped bit in every byte (refused, never a
 *   crash), inflated counts and structural edits with the checksum made valid again;
 *   a save is atomic (temp file + rename: no temporary left, a failed save keeps the old file). */
#include "harness.h"

#include "minfer.h"

#include "engine/engine_impl.h"
#include "engine/session.h"
#include "quant/quant.h"

#include <dirent.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char q2_path[512], q3_path[512];

static bool gen_model(const char *arch, const char *type, char *path, size_t cap) {
    snprintf(path, cap, "%s/session-%s-%s.gguf", mf_test_tmpdir(), arch, type);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --arch %s --type %s --seed 5 -q -o %s", mf_test_genmodel(), arch, type, path);
    return system(cmd) == 0;
}

static void tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/session-%s.mfs", mf_test_tmpdir(), name);
}

static const mf_rope_params *ctx_rope; /* the rope overrides new_ctx applies (NULL: the model's own) */

static mf_context *new_ctx(mf_model *m, int n_ctx, uint32_t kv_type) {
    mf_context_params cp = mf_context_default_params();
    if (ctx_rope) cp.rope = *ctx_rope;
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    cp.type_k = cp.type_v = kv_type;
    mf_context *c = NULL;
    mf_error err = {0};
    if (mf_context_new(m, &cp, &c, &err)) printf("  context: %s\n", err.msg);
    return c;
}

static mf_model *load_model(const char *path) {
    mf_model *m = NULL;
    mf_error err = {0};
    if (mf_model_load(path, NULL, &m, &err)) printf("  load: %s\n", err.msg);
    return m;
}

static int32_t n_vocab_of(const mf_model *m) {
    mf_model_info info;
    mf_model_get_info(m, &info);
    return info.n_vocab;
}

/* decode ids[0..n) of seq at positions p0.., logits for the last row copied to out */
static bool feed(mf_context *c, const mf_token *ids, int n, int p0, mf_seq_id seq, float *out) {
    mf_batch b;
    mf_error err = {0};
    if (mf_batch_init(&b, n, &err)) return false;
    for (int i = 0; i < n; i++) mf_batch_add(&b, ids[i], p0 + i, seq, i == n - 1);
    int rc = mf_decode(c, &b, &err);
    mf_batch_free(&b);
    if (rc) {
        printf("  decode: %s\n", err.msg);
        return false;
    }
    if (out) memcpy(out, mf_get_logits(c, -1), sizeof(float) * (size_t)n_vocab_of(mf_context_model(c)));
    return true;
}

static const mf_token P0[] = {785, 6722, 315, 9625, 374, 12095, 11, 323, 279, 6722, 315, 9856, 374};
static const mf_token P1[] = {750, 75698, 1445, 982, 262, 4210, 5598};
#define NP0 ((int)(sizeof P0 / sizeof P0[0]))
#define NP1 ((int)(sizeof P1 / sizeof P1[0]))

/* ---------------- checksum ---------------- */
static void test_xxh64_matches_the_published_vectors(void) {
    static const struct {
        const char *s;
        uint64_t h;
    } V[] = {{"", 0xEF46DB3751D8E999ull},
             {"a", 0xD24EC4F1A98C6E5Bull},
             {"abc", 0x44BC2CF5AD770999ull},
             {"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1ull}};
    for (size_t i = 0; i < MF_ARRAY_LEN(V); i++)
        CHECK(mf_xxh64(V[i].s, strlen(V[i].s), 0) == V[i].h, "xxh64('%s') = %016llx, want %016llx", V[i].s,
              (unsigned long long)mf_xxh64(V[i].s, strlen(V[i].s), 0), (unsigned long long)V[i].h);
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 131 + 7);
    uint64_t one = mf_xxh64(buf, sizeof buf, 0);
    for (size_t step = 1; step < 70; step += 3) {
        mf_xxh64_state s;
        mf_xxh64_init(&s, 0);
        for (size_t o = 0; o < sizeof buf; o += step) mf_xxh64_update(&s, buf + o, MF_MIN(step, sizeof buf - o));
        CHECK(mf_xxh64_digest(&s) == one, "streaming in pieces of %zu differs from one shot", step);
    }
}

/* ---------------- round trip ---------------- */
#define STEPS 8
#define SAVE_AT 3 /* save after sampling token SAVE_AT, before decoding it */

typedef struct {
    mf_token tok[STEPS];
    float *logits; /* [STEPS][n_vocab]: the logits each token was sampled from */
    float mu;      /* the sampler's Mirostat mu when the session was saved */
} run_rec;

/* Samples STEPS tokens after the prompt; step s decodes token s-1 first.  With save_path, the session is
 * saved right after token SAVE_AT is sampled (the history ends with that pending token). */
static bool generate(mf_context *c, mf_sampler *smp, const char *save_path, run_rec *r) {
    int32_t nv = n_vocab_of(mf_context_model(c));
    float *cur = malloc(sizeof(float) * (size_t)nv);
    mf_token hist[NP0 + STEPS];
    memcpy(hist, P0, sizeof P0);
    /* another sequence holds the first cells while the prompt goes in, then leaves: the decoded tokens take
     * cells 0.. below the prompt's, so the saved sequence's cells are not in position order */
    bool ok = feed(c, P1, 3, 0, 1, NULL) && feed(c, P0, NP0, 0, 0, cur);
    mf_seq_rm(c, 1, -1, -1);
    for (int s = 0; ok && s < STEPS; s++) {
        if (s > 0) ok = feed(c, &r->tok[s - 1], 1, NP0 + s - 1, 0, cur);
        if (!ok) break;
        memcpy(r->logits + (size_t)s * nv, cur, sizeof(float) * (size_t)nv);
        r->tok[s] = mf_sampler_sample(smp, cur);
        hist[NP0 + s] = r->tok[s];
        if (save_path && s == SAVE_AT) {
            mf_error err = {0};
            (void)mf_sampler_mu(smp, &r->mu);
            static const char app[] = "{\"turns\":[\"hello\"]}";
            if (mf_session_save(c, 0, hist, NP0 + s + 1, smp, app, sizeof app - 1, save_path, &err)) {
                printf("  save: %s\n", err.msg);
                ok = false;
            }
        }
    }
    free(cur);
    return ok;
}

/* mirostat: 0, or the version the sampler runs (its mu travels in the file: a resume without it drifts) */
static void round_trip(const char *model_path, uint32_t kv_type, float temp, int mirostat) {
    mf_model *m = load_model(model_path);
    REQUIRE(m, "model");
    int32_t nv = n_vocab_of(m);
    char path[600];
    tmp_path(path, sizeof path, "roundtrip");
    mf_sampler_params sp = mf_sampler_default_params();
    sp.temp = temp;
    sp.seed = 1234;
    if (temp > 0) { /* the whole distribution: every draw depends on the RNG state */
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
    }
    sp.mirostat = mirostat;
    run_rec ref = {.logits = malloc(sizeof(float) * (size_t)nv * STEPS)};
    run_rec got = {.logits = malloc(sizeof(float) * (size_t)nv * STEPS)};
    mf_context *a = new_ctx(m, 64, kv_type);
    mf_sampler *sa = NULL, *sb = NULL;
    mf_error err = {0};
    REQUIRE(a && !mf_sampler_new(&sp, nv, &sa, &err), "context / sampler");
    REQUIRE(generate(a, sa, path, &ref), "uninterrupted run");
    mf_context_free(a);
    mf_model_free(m);

    /* a fresh model load and context, another sequence already there (cells interleave), another seed */
    m = load_model(model_path);
    mf_context *b = m ? new_ctx(m, 64, kv_type) : NULL;
    sp.seed = 999;
    REQUIRE(b && !mf_sampler_new(&sp, nv, &sb, &err), "second context / sampler");
    REQUIRE(feed(b, P1, 3, 0, 1, NULL), "other sequence");
    mf_token *toks = NULL;
    int32_t n_toks = 0;
    void *app = NULL;
    size_t app_len = 0;
    const mf_seq_id S = 4;
    REQUIRE_OK(mf_session_load(b, S, path, &toks, &n_toks, sb, &app, &app_len, &err), "load: %s", err.msg);
    REQUIRE(feed(b, P1 + 3, 2, 3, 1, NULL), "other sequence grows between the restored cells");
    CHECK(n_toks == NP0 + SAVE_AT + 1 && !memcmp(toks, P0, sizeof P0), "history: %d tokens", n_toks);
    CHECK(app_len == 19 && !memcmp(app, "{\"turns\":[\"hello\"]}", 19), "application bytes (%zu)", app_len);
    CHECK(mf_seq_pos_max(b, S) == NP0 + SAVE_AT - 1, "restored pos max %d", mf_seq_pos_max(b, S));
    mf_token pending = toks[n_toks - 1];
    CHECK(pending == ref.tok[SAVE_AT], "the pending token %d, the run sampled %d", pending, ref.tok[SAVE_AT]);
    float mu = 0;
    if (mirostat) /* the fresh sampler's mu was 2 tau; the run's has moved */
        CHECK(mf_sampler_mu(sb, &mu) && mu == ref.mu && mu != 2 * sp.mirostat_tau, "mu %g after the load, the run's %g",
              mu, ref.mu);
    float *cur = malloc(sizeof(float) * (size_t)nv);
    got.tok[SAVE_AT] = pending;
    for (int s = SAVE_AT + 1; s < STEPS; s++) {
        mf_batch bt;
        REQUIRE(!mf_batch_init(&bt, 1, &err), "batch");
        mf_batch_add(&bt, got.tok[s - 1], NP0 + s - 1, S, true);
        int rc = mf_decode(b, &bt, &err);
        mf_batch_free(&bt);
        REQUIRE(rc == 0, "decode: %s", err.msg);
        memcpy(cur, mf_get_logits(b, -1), sizeof(float) * (size_t)nv);
        CHECK(!memcmp(cur, ref.logits + (size_t)s * nv, sizeof(float) * (size_t)nv),
              "step %d: logits differ from the uninterrupted run (kv %s, temp %g)", s, mf_type_name(kv_type), temp);
        got.tok[s] = mf_sampler_sample(sb, cur);
        CHECK(got.tok[s] == ref.tok[s], "step %d: sampled %d, the uninterrupted run %d (kv %s, temp %g)", s, got.tok[s],
              ref.tok[s], mf_type_name(kv_type), temp);
    }
    if (temp > 0) { /* the check above means something: the seed the second sampler started from draws others */
        mf_sampler *fresh = NULL;
        int differ = 0;
        REQUIRE(!mf_sampler_new(&sp, nv, &fresh, &err), "sampler");
        for (int s = SAVE_AT + 1; s < STEPS; s++) differ += mf_sampler_sample(fresh, ref.logits + (size_t)s * nv) != ref.tok[s];
        mf_sampler_free(fresh);
        CHECK(differ > 0, "seed %llu draws the same tokens as the restored state (kv %s, temp %g)", (unsigned long long)sp.seed,
              mf_type_name(kv_type), temp);
    }
    free(cur);
    free(toks);
    free(app);
    free(ref.logits);
    free(got.logits);
    mf_sampler_free(sa);
    mf_sampler_free(sb);
    mf_context_free(b);
    mf_model_free(m);
    remove(path);
}

static void test_round_trip_continues_bitwise(void) {
    round_trip(q2_path, MF_KV_TYPE_F32, 0.0f, 0);
    round_trip(q2_path, MF_KV_TYPE_F32, 0.9f, 0);
    round_trip(q3_path, MF_KV_TYPE_F16, 0.0f, 0);
    round_trip(q3_path, MF_KV_TYPE_F16, 8.0f, 0); /* the tiny qwen3 is peaked: below ~8 every seed draws alike */
    round_trip(q2_path, MF_KV_TYPE_Q8_0, 0.0f, 0);  /* rows rotated (head size 64): saved and restored as held */
    round_trip(q2_path, MF_KV_TYPE_F32, 0.9f, 2);
    round_trip(q2_path, MF_KV_TYPE_F32, 0.9f, 1);
}

/* ---------------- refusals change nothing ---------------- */
typedef struct {
    uint8_t *kv;
    int32_t *meta; /* per cell: seq, pos */
    uint64_t rng[4];
    size_t kv_bytes;
    int32_t n_cells;
} snapshot;

static void snap(mf_context *c, mf_sampler *s, snapshot *o) {
    mf_kv *kv = c->kv;
    int32_t L = c->model->hp.n_layer, n = mf_kv_n_cells(kv);
    size_t rk = mf_kv_row_bytes_k(kv) * (size_t)n, rv = mf_kv_row_bytes_v(kv) * (size_t)n;
    o->n_cells = n;
    o->kv_bytes = (size_t)L * (rk + rv);
    o->kv = malloc(o->kv_bytes);
    o->meta = malloc(sizeof(int32_t) * 2 * (size_t)n + 4);
    for (int32_t l = 0; l < L; l++) {
        memcpy(o->kv + (size_t)l * (rk + rv), mf_kv_k(kv, l), rk);
        memcpy(o->kv + (size_t)l * (rk + rv) + rk, mf_kv_v(kv, l), rv);
    }
    for (int32_t i = 0; i < n; i++) {
        o->meta[2 * i] = mf_kv_cell_seq(kv, i);
        o->meta[2 * i + 1] = mf_kv_cell_pos(kv, i);
    }
    o->meta[2 * n] = mf_kv_n_used(kv);
    mf_sampler_get_rng(s, o->rng);
}

static bool same_snap(const snapshot *a, const snapshot *b) {
    return a->kv_bytes == b->kv_bytes && !memcmp(a->kv, b->kv, a->kv_bytes) &&
           !memcmp(a->meta, b->meta, sizeof(int32_t) * (2 * (size_t)a->n_cells + 1)) && !memcmp(a->rng, b->rng, 32);
}

static void free_snap(snapshot *s) {
    free(s->kv);
    free(s->meta);
}

static bool write_file(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(d, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* Re-seals a buffer edited in place: the trailing checksum over everything before it. */
static void reseal(uint8_t *d, size_t n) {
    uint64_t h = mf_xxh64(d, n - 8, 0);
    for (int i = 0; i < 8; i++) d[n - 8 + i] = (uint8_t)(h >> (8 * i));
}

/* Loads path into (c, seq) expecting a refusal whose message holds `want`; the context, the sampler and the
 * outputs must be untouched.  Returns whether all held. */
static bool refused(mf_context *c, mf_sampler *s, mf_seq_id seq, const char *path, const char *want, int code) {
    snapshot before, after;
    snap(c, s, &before);
    mf_token *toks = (mf_token *)(uintptr_t)0x1;
    int32_t n = -7;
    void *app = (void *)(uintptr_t)0x1;
    size_t app_len = 77;
    mf_error err = {0};
    int rc = mf_session_load(c, seq, path, &toks, &n, s, &app, &app_len, &err);
    snap(c, s, &after);
    bool ok = rc != 0 && (code == 0 || rc == code) && strstr(err.msg, want) != NULL && same_snap(&before, &after) &&
              toks == (mf_token *)(uintptr_t)0x1 && n == -7 && app == (void *)(uintptr_t)0x1 && app_len == 77;
    if (!ok)
        printf("  load of %s: rc %d (%s), message '%s', wanted '%s'; state %s\n", path, rc, mf_err_code_name(rc),
               err.msg, want, same_snap(&before, &after) ? "unchanged" : "CHANGED");
    free_snap(&before);
    free_snap(&after);
    return ok;
}

/* A session of seq 0 after P0 (13 cells) on model_path with kv_type, saved to path; its bytes in *out. */
static uint8_t *make_session(const char *model_path, uint32_t kv_type, const char *path, size_t *size) {
    mf_model *m = load_model(model_path);
    mf_context *c = m ? new_ctx(m, 32, kv_type) : NULL;
    mf_sampler *s = NULL;
    mf_sampler_params sp = mf_sampler_default_params();
    mf_error err = {0};
    uint8_t *bytes = NULL;
    if (c && !mf_sampler_new(&sp, n_vocab_of(m), &s, &err) && feed(c, P0, NP0, 0, 0, NULL)) {
        if (mf_session_save(c, 0, P0, NP0, s, "chat", 4, path, &err))
            printf("  save: %s\n", err.msg);
        else
            bytes = (uint8_t *)mf_test_slurp(path, size);
    }
    mf_sampler_free(s);
    mf_context_free(c);
    mf_model_free(m);
    return bytes;
}

static void test_refusals_leave_the_context_unchanged(void) {
    char good[600], f16[600], other[600], bad[600];
    tmp_path(good, sizeof good, "good");
    tmp_path(f16, sizeof f16, "f16");
    tmp_path(other, sizeof other, "other-model");
    tmp_path(bad, sizeof bad, "bad");
    size_t n = 0, n16 = 0, no = 0;
    uint8_t *g = make_session(q2_path, MF_KV_TYPE_F32, good, &n);
    uint8_t *g16 = make_session(q2_path, MF_KV_TYPE_F16, f16, &n16);
    uint8_t *go = make_session(q3_path, MF_KV_TYPE_F32, other, &no);
    REQUIRE(g && g16 && go, "sessions written");

    mf_model *m = load_model(q2_path);
    REQUIRE(m, "model");
    mf_context *c = new_ctx(m, 32, MF_KV_TYPE_F32), *small = new_ctx(m, 8, MF_KV_TYPE_F32),
               *c16 = new_ctx(m, 32, MF_KV_TYPE_F16);
    mf_sampler *s = NULL;
    mf_sampler_params sp = mf_sampler_default_params();
    mf_error err = {0};
    REQUIRE(c && small && c16 && !mf_sampler_new(&sp, n_vocab_of(m), &s, &err), "contexts");
    /* state worth protecting: seq 1 holds P1, seq 2 two tokens, the sampler has drawn */
    REQUIRE(feed(c, P1, NP1, 0, 1, NULL) && feed(c, P1, 2, 0, 2, NULL) && feed(small, P1, 3, 0, 0, NULL) &&
                feed(c16, P1, NP1, 0, 1, NULL),
            "prefill");
    float *l = malloc(sizeof(float) * (size_t)n_vocab_of(m));
    for (int i = 0; i < n_vocab_of(m); i++) l[i] = (float)((i * 7919) % 1000) / 100.0f;
    (void)mf_sampler_sample(s, l);
    free(l);

    CHECK(refused(c, s, 3, other, "the file was written for a different model (qwen3", MF_E_UNSUPPORTED) &&
              refused(c, s, 3, other, "they differ in: architecture, tensor index.", MF_E_UNSUPPORTED),
          "other model");
    CHECK(refused(c, s, 3, f16, "the file was written with the f16 KV element type, this run uses f32", MF_E_UNSUPPORTED),
          "f16 file, f32 run");
    CHECK(refused(c16, s, 3, good, "the file was written with the f32 KV element type, this run uses f16",
                  MF_E_UNSUPPORTED),
          "f32 file, f16 run");
    CHECK(refused(small, s, 3, good, "the file holds 13 KV cells, more than this context's 8 (-c 8): run with -c 13",
                  MF_E_RANGE),
          "context too small");
    /* c has 32 cells, 9 used: 23 free >= 13; fill it up so only 10 are free */
    REQUIRE(feed(c, P0, 13, 0, 5, NULL), "fill");
    CHECK(refused(c, s, 3, good, "the file holds 13 KV cells, 10 of this context's 32 are free", MF_E_RANGE), "full");
    mf_seq_rm(c, 5, -1, -1);
    CHECK(refused(c, s, 1, good, "sequence 1 is not empty: it holds 7 cells", MF_E_INVAL), "sequence not empty");
    CHECK(refused(c, s, -1, good, "one sequence id >= 0, got -1", MF_E_INVAL), "negative sequence");

    uint8_t *d = malloc(n);
    memcpy(d, g, n);
    d[n - 100] ^= 0x10; /* inside layer 1's V rows */
    REQUIRE(write_file(bad, d, n), "write");
    CHECK(refused(c, s, 3, bad, "checksum mismatch", MF_E_FORMAT), "flipped bit");
    size_t per = 13 * 512 * 2; /* tiny: n_embd_kv 128 f32 = 512-byte rows, K and V */
    size_t layers_at = n - 8 - 2 * per;
    REQUIRE(write_file(bad, g, layers_at + per + 13 * 512 + 100), "write");
    CHECK(refused(c, s, 3, bad, "truncated — the file ends inside layer 1's V rows (offset", MF_E_FORMAT), "truncated V");
    REQUIRE(write_file(bad, g, layers_at + 5), "write");
    CHECK(refused(c, s, 3, bad, "truncated — the file ends inside layer 0's K rows", MF_E_FORMAT), "truncated K");
    REQUIRE(write_file(bad, g, 100), "write");
    CHECK(refused(c, s, 3, bad, "truncated — the file ends inside the header (offset 100 of 184)", MF_E_FORMAT),
          "truncated header");
    REQUIRE(write_file(bad, g, n - 3), "write");
    CHECK(refused(c, s, 3, bad, "ends inside the checksum", MF_E_FORMAT), "truncated checksum");
    memcpy(d, g, n);
    REQUIRE(write_file(bad, d, n) && write_file(bad, g, n), "write");
    FILE *f = fopen(bad, "ab");
    REQUIRE(f && fwrite("xy", 1, 2, f) == 2 && fclose(f) == 0, "append");
    CHECK(refused(c, s, 3, bad, "2 bytes follow the end of the session data", MF_E_FORMAT), "trailing bytes");
    memcpy(d, g, n);
    d[8] = 2;
    reseal(d, n);
    REQUIRE(write_file(bad, d, n), "write");
    CHECK(refused(c, s, 3, bad, "session file version 2; this build reads version 1", MF_E_FORMAT), "version");
    memcpy(d, g, n);
    d[80] ^= 1; /* the tensor index hash: same shapes, another model */
    reseal(d, n);
    REQUIRE(write_file(bad, d, n), "write");
    CHECK(refused(c, s, 3, bad, "they differ in: tensor index. Load it with the model that wrote it", MF_E_UNSUPPORTED),
          "tensor hash");
    REQUIRE(write_file(bad, "GGUF\3\0\0\0", 8), "write");
    CHECK(refused(c, s, 3, bad, "not a minfer session file", MF_E_FORMAT), "a GGUF");
    REQUIRE(write_file(bad, "", 0), "write");
    CHECK(refused(c, s, 3, bad, "is empty", MF_E_FORMAT), "empty file");
    remove(bad);
    CHECK(refused(c, s, 3, bad, "cannot open the session file", MF_E_NOTFOUND), "missing file");

    /* and the good file still loads into the context that refused all of the above */
    mf_token *toks = NULL;
    int32_t nt = 0;
    CHECK(mf_session_load(c, 3, good, &toks, &nt, s, NULL, NULL, &err) == 0 && nt == NP0, "good load: %s", err.msg);
    CHECK(mf_seq_pos_max(c, 3) == NP0 - 1 && mf_seq_pos_max(c, 1) == NP1 - 1, "positions after the load");
    free(toks);
    /* the application bytes survive a model mismatch */
    void *app = NULL;
    size_t app_len = 0;
    CHECK(mf_session_read_app(other, &app, &app_len, &err) == 0 && app_len == 4 && !memcmp(app, "chat", 5),
          "read_app: %s", err.msg);
    free(app);
    free(d);
    free(g);
    free(g16);
    free(go);
    mf_sampler_free(s);
    mf_context_free(c);
    mf_context_free(small);
    mf_context_free(c16);
    mf_model_free(m);
    remove(good);
    remove(f16);
    remove(other);
}

/* A q8_0 cache holds its rows rotated (llama.cpp's attention rotation) unless MINFER_ATTN_ROT_DISABLE=1: the
 * header's flags say which (bit 1 K, bit 2 V), and a file whose rows are held otherwise than this run holds
 * them is refused naming the switch, leaving the context unchanged; a file that claims rotated f32 rows is
 * malformed.  Files without the bits (every file before the rotation) load as before where nothing rotates. */
static void test_rotated_rows_are_recorded(void) {
    char rot[600], plain[600], bad[600];
    tmp_path(rot, sizeof rot, "q8-rot");
    tmp_path(plain, sizeof plain, "q8-plain");
    tmp_path(bad, sizeof bad, "q8-bad");
    size_t nr = 0, np = 0, n32 = 0;
    uint8_t *gr = make_session(q2_path, MF_KV_TYPE_Q8_0, rot, &nr);
    setenv("MINFER_ATTN_ROT_DISABLE", "1", 1);
    uint8_t *gp = make_session(q2_path, MF_KV_TYPE_Q8_0, plain, &np);
    unsetenv("MINFER_ATTN_ROT_DISABLE");
    uint8_t *g32 = make_session(q2_path, MF_KV_TYPE_F32, bad, &n32);
    REQUIRE(gr && gp && g32 && nr == np, "sessions written");
    CHECK(gr[144] == (1 | 2 | 4) && gp[144] == 1 && g32[144] == 1, "header flags: rotated 0x%x, plain 0x%x, f32 0x%x",
          gr[144], gp[144], g32[144]);
    CHECK(memcmp(gr + 184, gp + 184, nr - 8 - 184) != 0, "the rotated and plain files hold the same rows");

    mf_model *m = load_model(q2_path);
    REQUIRE(m, "model");
    mf_context *cr = new_ctx(m, 32, MF_KV_TYPE_Q8_0);
    setenv("MINFER_ATTN_ROT_DISABLE", "1", 1);
    mf_context *cp = new_ctx(m, 32, MF_KV_TYPE_Q8_0);
    unsetenv("MINFER_ATTN_ROT_DISABLE");
    mf_context *c32 = new_ctx(m, 32, MF_KV_TYPE_F32);
    mf_sampler *s = NULL;
    mf_sampler_params sp = mf_sampler_default_params();
    mf_error err = {0};
    REQUIRE(cr && cp && c32 && !mf_sampler_new(&sp, n_vocab_of(m), &s, &err), "contexts");
    REQUIRE(feed(cr, P1, NP1, 0, 1, NULL) && feed(cp, P1, NP1, 0, 1, NULL), "prefill");
    CHECK(refused(cp, s, 3, rot,
                  "the file's K and V rows are stored rotated (llama.cpp's attention rotation for a quantized cache), "
                  "this run does not rotate them (MINFER_ATTN_ROT_DISABLE): unset it",
                  MF_E_UNSUPPORTED),
          "rotated file, plain run");
    CHECK(refused(cr, s, 3, plain,
                  "the file's K and V rows are not rotated (written with MINFER_ATTN_ROT_DISABLE=1, or by a build "
                  "without the attention rotation), this run rotates them: run with MINFER_ATTN_ROT_DISABLE=1",
                  MF_E_UNSUPPORTED),
          "plain file, rotating run");
    uint8_t *d = malloc(nr);
    memcpy(d, gr, nr);
    d[144] = 1 | 4; /* only V rotated: this run rotates both */
    reseal(d, nr);
    REQUIRE(write_file(bad, d, nr), "write");
    CHECK(refused(cr, s, 3, bad, "the file's K rows are not rotated", MF_E_UNSUPPORTED), "K not rotated");
    free(d);
    d = malloc(n32);
    memcpy(d, g32, n32);
    d[144] = 1 | 2;
    reseal(d, n32);
    REQUIRE(write_file(bad, d, n32), "write");
    CHECK(refused(c32, s, 3, bad, "the header says the K rows are rotated (flags 0x3, offset 144), but they are f32",
                  MF_E_FORMAT),
          "rotated f32 rows");
    d[144] = 1 | 32;
    reseal(d, n32);
    REQUIRE(write_file(bad, d, n32), "write");
    CHECK(refused(c32, s, 3, bad, "unknown header flags 0x21 (offset 144; this build knows 0x1f)", MF_E_FORMAT),
          "unknown flag");
    d[144] = 1, d[76] = 1; /* a Mirostat mu without its flag */
    reseal(d, n32);
    REQUIRE(write_file(bad, d, n32), "write");
    CHECK(refused(c32, s, 3, bad, "reserved header bytes (offsets 76, 148) are not zero: 1, 0", MF_E_FORMAT),
          "mu bytes without the flag");
    d[144] = 1 | 16, d[76] = 0, d[77] = 0, d[78] = 0xC0, d[79] = 0x7F; /* the flag with a NaN */
    reseal(d, n32);
    REQUIRE(write_file(bad, d, n32), "write");
    CHECK(refused(c32, s, 3, bad, "the Mirostat mu (offset 76) is nan; a sampler's mu is finite", MF_E_FORMAT),
          "NaN mu");
    free(d);
    /* each loads where its rows are held the same way */
    mf_token *toks = NULL;
    int32_t nt = 0;
    CHECK(mf_session_load(cr, 3, rot, &toks, &nt, s, NULL, NULL, &err) == 0 && nt == NP0, "rotated load: %s", err.msg);
    free(toks);
    toks = NULL;
    CHECK(mf_session_load(cp, 3, plain, &toks, &nt, s, NULL, NULL, &err) == 0 && nt == NP0, "plain load: %s", err.msg);
    free(toks);
    free(gr);
    free(gp);
    free(g32);
    mf_sampler_free(s);
    mf_context_free(cr);
    mf_context_free(cp);
    mf_context_free(c32);
    mf_model_free(m);
    remove(rot);
    remove(plain);
    remove(bad);
}

/* K rows carry their rope: a file written under --rope-* or --yarn-* overrides records its rope's fingerprint
 * (flag 8, offset 148) and loads only under the same rope; a file of the model's own rope keeps both clear,
 * byte for byte what a build without overrides writes, and is refused under overrides.  Resuming under the
 * same YaRN override continues bitwise. */
static void test_rope_overrides_are_recorded(void) {
    char own[600], yarn[600];
    tmp_path(own, sizeof own, "rope-own");
    tmp_path(yarn, sizeof yarn, "rope-yarn");
    mf_rope_params ry = mf_context_default_params().rope, ry2;
    ry.scaling = MF_ROPE_SCALING_YARN;
    ry.freq_scale = 0.25f;
    ry.yarn_orig_ctx = 32768;
    ry2 = ry;
    ry2.freq_scale = 0.5f;
    size_t no = 0, ny = 0;
    uint8_t *go = make_session(q2_path, MF_KV_TYPE_F16, own, &no);
    ctx_rope = &ry;
    uint8_t *gy = make_session(q2_path, MF_KV_TYPE_F16, yarn, &ny);
    ctx_rope = NULL;
    REQUIRE(go && gy && no == ny, "sessions written");
    CHECK(go[144] == 1 && !go[148] && !go[149] && !go[150] && !go[151], "own rope: flags 0x%x, offset 148 %02x%02x%02x%02x",
          go[144], go[148], go[149], go[150], go[151]);
    CHECK(gy[144] == (1 | 8) && (gy[148] | gy[149] | gy[150] | gy[151]), "YaRN override: flags 0x%x", gy[144]);
    mf_model *m = load_model(q2_path);
    REQUIRE(m, "model");
    mf_context *c_own = new_ctx(m, 64, MF_KV_TYPE_F16);
    ctx_rope = &ry;
    mf_context *c_y = new_ctx(m, 64, MF_KV_TYPE_F16), *c_run = new_ctx(m, 64, MF_KV_TYPE_F16);
    ctx_rope = &ry2;
    mf_context *c_y2 = new_ctx(m, 64, MF_KV_TYPE_F16);
    ctx_rope = NULL;
    mf_sampler *s = NULL;
    mf_sampler_params sp = mf_sampler_default_params();
    mf_error err = {0};
    REQUIRE(c_own && c_y && c_run && c_y2 && !mf_sampler_new(&sp, n_vocab_of(m), &s, &err), "contexts");
    CHECK(refused(c_own, s, 3, yarn, "the file's K rows carry a rope set by --rope-*/--yarn-* flags", MF_E_UNSUPPORTED) &&
              refused(c_own, s, 3, yarn, "this run's is the model's own", MF_E_UNSUPPORTED),
          "YaRN file, own rope");
    CHECK(refused(c_y, s, 3, own, "the file's K rows carry the model's own rope, this run overrides it", MF_E_UNSUPPORTED),
          "own file, YaRN run");
    CHECK(refused(c_y2, s, 3, yarn, "this run's is another", MF_E_UNSUPPORTED), "YaRN 4 file, YaRN 2 run");
    /* the same override: loads, and continues as the run that never stopped */
    const int32_t nv = n_vocab_of(m);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    mf_token *toks = NULL;
    int32_t nt = 0;
    REQUIRE(a && b, "alloc");
    CHECK(mf_session_load(c_y, 3, yarn, &toks, &nt, s, NULL, NULL, &err) == 0 && nt == NP0, "YaRN load: %s", err.msg);
    free(toks);
    REQUIRE(feed(c_run, P0, NP0, 0, 0, NULL) && feed(c_run, P1, NP1, NP0, 0, a) && feed(c_y, P1, NP1, NP0, 3, b), "decode");
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv), "the resumed YaRN sequence's logits differ from the uninterrupted run's");
    free(a);
    free(b);
    free(go);
    free(gy);
    mf_sampler_free(s);
    mf_context_free(c_own);
    mf_context_free(c_y);
    mf_context_free(c_y2);
    mf_context_free(c_run);
    mf_model_free(m);
    remove(own);
    remove(yarn);
}

/* ---------------- hostile files ---------------- */
static void test_hostile_files_are_refused_never_crash(void) {
    char good[600], bad[600];
    tmp_path(good, sizeof good, "hostile-good");
    tmp_path(bad, sizeof bad, "hostile");
    size_t n = 0;
    uint8_t *g = make_session(q2_path, MF_KV_TYPE_F32, good, &n);
    REQUIRE(g, "session written");
    mf_session_view v;
    mf_error err = {0};
    REQUIRE_OK(mf_session_parse(g, n, &v, &err), "the good file parses: %s", err.msg);
    CHECK(v.n_cells == NP0 && v.n_tokens == NP0 && v.app_len == 4 && v.has_rng, "view");
    uint8_t *d = malloc(n);

    int accepted = 0, unnamed = 0;
    for (size_t len = 0; len < n; len++) { /* every truncation */
        memset(&err, 0, sizeof err);
        memcpy(d, g, len);
        int rc = mf_session_parse(d, len, &v, &err);
        accepted += rc == 0;
        unnamed += rc != 0 && !strstr(err.msg, len >= 8 ? "truncated" : "");
    }
    CHECK(accepted == 0 && unnamed == 0, "truncations: %d accepted, %d without 'truncated'", accepted, unnamed);

    accepted = 0;
    for (size_t i = 0; i < n; i++) /* a flipped bit in every byte: the checksum or the structure refuses */
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(d, g, n);
            d[i] ^= (uint8_t)(1u << bit);
            accepted += mf_session_parse(d, n, &v, &err) == 0;
        }
    CHECK(accepted == 0, "%d single-bit flips were accepted", accepted);

    /* structural edits that pass the checksum: every header byte set to several values, resealed.  The parse
     * may accept some (a hash byte, an RNG word); then the load must refuse or succeed cleanly. */
    mf_model *m = load_model(q2_path);
    mf_context *c = m ? new_ctx(m, 32, MF_KV_TYPE_F32) : NULL;
    REQUIRE(c, "context");
    int loads_ok = 0, bad_msgs = 0;
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < MF_SESSION_HEADER_BYTES + 8; i++)
        for (size_t k = 0; k < sizeof vals; k++) {
            memcpy(d, g, n);
            if (d[i] == vals[k]) continue;
            d[i] = vals[k];
            reseal(d, n);
            if (mf_session_parse(d, n, &v, &err) != 0) {
                bad_msgs += err.msg[0] == 0;
                continue;
            }
            REQUIRE(write_file(bad, d, n), "write");
            int rc = mf_session_load(c, 0, bad, NULL, NULL, NULL, NULL, NULL, &err);
            if (rc == 0) {
                loads_ok++;
                mf_seq_rm(c, 0, -1, -1);
            }
            bad_msgs += rc != 0 && err.msg[0] == 0;
            CHECK(mf_kv_n_used(c->kv) == 0, "byte %zu = %u: the context holds %d cells after the load", i, vals[k],
                  mf_kv_n_used(c->kv));
        }
    CHECK(bad_msgs == 0, "%d refusals without a message", bad_msgs);
    printf("  header edits the load accepted (RNG state bytes): %d\n", loads_ok);

    /* inflated counts (resealed): the length check refuses them before anything is allocated */
    static const struct {
        size_t off;
        uint64_t v;
        int width;
        const char *want;
    } inflate[] = {{128, 0x7fffffff, 4, "truncated"},         {132, 0x7fffffff, 4, "truncated"},
                   {136, UINT64_MAX, 8, "overflow"},          {136, 1ull << 40, 8, "truncated"},
                   {48, 0x7fffffff, 4, "layer 2's K rows"},          {48, 3, 4, "truncated"},
                   {112, 1ull << 62, 8, "do not add up"},     {96, 1ull << 40, 8, "do not add up"},
                   {128, 0x80000000u, 4, "negative"},         {88, 12345, 4, "do not add up"},
                   {128, 12, 4, "bytes follow the end"}};
    for (size_t i = 0; i < MF_ARRAY_LEN(inflate); i++) {
        memcpy(d, g, n);
        for (int b = 0; b < inflate[i].width; b++) d[inflate[i].off + b] = (uint8_t)(inflate[i].v >> (8 * b));
        reseal(d, n);
        int rc = mf_session_parse(d, n, &v, &err);
        CHECK(rc == MF_E_FORMAT && strstr(err.msg, inflate[i].want), "offset %zu = %llu: rc %d '%s' (wanted '%s')",
              inflate[i].off, (unsigned long long)inflate[i].v, rc, err.msg, inflate[i].want);
    }
    /* positions that do not rise, a token outside the vocabulary (resealed) */
    memcpy(d, g, n);
    d[184 + 4 * 5] = 3; /* position 5 becomes 3 */
    reseal(d, n);
    CHECK(mf_session_parse(d, n, &v, &err) && strstr(err.msg, "position 3 (entry 5"), "positions: %s", err.msg);
    memcpy(d, g, n);
    memset(d + 184 + 4 * NP0 + 4, 0xff, 3); /* token 1 = 0x..ffffff: huge */
    d[184 + 4 * NP0 + 4 + 3] = 0x01;
    reseal(d, n);
    CHECK(mf_session_parse(d, n, &v, &err) && strstr(err.msg, "outside the vocabulary"), "token: %s", err.msg);
    free(d);
    free(g);
    mf_context_free(c);
    mf_model_free(m);
    remove(good);
    remove(bad);
}

/* ---------------- atomic save ---------------- */
static int count_temps(const char *dir) {
    DIR *dh = opendir(dir);
    int k = 0;
    for (struct dirent *e; dh && (e = readdir(dh));)
        k += strstr(e->d_name, "session-atomic.mfs") && strstr(e->d_name, ".tmp-");
    if (dh) closedir(dh);
    return k;
}

static void test_save_is_atomic_and_an_empty_sequence_round_trips(void) {
    char path[600], missing[700];
    tmp_path(path, sizeof path, "atomic");
    snprintf(missing, sizeof missing, "%s/no-such-dir/x.mfs", mf_test_tmpdir());
    mf_model *m = load_model(q2_path);
    mf_context *c = m ? new_ctx(m, 16, MF_KV_TYPE_F32) : NULL;
    REQUIRE(c, "context");
    mf_error err = {0};
    REQUIRE(write_file(path, "old", 3), "old file");
    CHECK(mf_session_save(c, 0, NULL, 0, NULL, NULL, 0, missing, &err) == MF_E_IO &&
              strstr(err.msg, "cannot create the session file"),
          "save into a missing directory: %s", err.msg);
    char dir_path[700]; /* a directory where the file should go: the temporary is written, the rename fails */
    snprintf(dir_path, sizeof dir_path, "%s/session-atomic.mfs.dir", mf_test_tmpdir());
    char mk[800];
    snprintf(mk, sizeof mk, "mkdir -p %s", dir_path);
    REQUIRE(system(mk) == 0, "mkdir");
    CHECK(mf_session_save(c, 0, NULL, 0, NULL, NULL, 0, dir_path, &err) == MF_E_IO && strstr(err.msg, "cannot rename"),
          "save over a directory: %s", err.msg);
    CHECK(count_temps(mf_test_tmpdir()) == 0, "a failed save left its temporary file");
    rmdir(dir_path);
    mf_token bad_tok = 200000;
    CHECK(mf_session_save(c, 0, &bad_tok, 1, NULL, NULL, 0, path, &err) == MF_E_INVAL, "bad token saved");
    size_t len = 0;
    char *old = mf_test_slurp(path, &len);
    CHECK(old && len == 3 && !memcmp(old, "old", 3), "a refused save replaced the file");
    free(old);
    /* an empty sequence, no sampler: a header, no rows; it loads as nothing */
    REQUIRE_OK(mf_session_save(c, 7, NULL, 0, NULL, NULL, 0, path, &err), "save: %s", err.msg);
    CHECK(count_temps(mf_test_tmpdir()) == 0, "a temporary file was left behind");
    uint8_t *b = (uint8_t *)mf_test_slurp(path, &len);
    CHECK(b && len == MF_SESSION_HEADER_BYTES + 8, "empty session is %zu bytes", len);
    free(b);
    mf_token *toks = (mf_token *)(uintptr_t)1;
    int32_t nt = -1;
    REQUIRE_OK(mf_session_load(c, 0, path, &toks, &nt, NULL, NULL, NULL, &err), "load: %s", err.msg);
    CHECK(toks == NULL && nt == 0 && mf_kv_n_used(c->kv) == 0, "empty load");
    mf_context_free(c);
    mf_model_free(m);
    remove(path);
}

/* A sequence that shares its prefix with another (mf_seq_cp shares cells by reference, and a shared cell's
 * lowest holder is the other sequence) saves all its cells, shared ones included, in position order; the
 * file continues bitwise like the sharer in the live context. */
static void test_a_sharer_saves_its_shared_prefix(void) {
    char path[600];
    tmp_path(path, sizeof path, "sharer");
    mf_model *m = load_model(q2_path);
    REQUIRE(m, "model");
    int32_t nv = n_vocab_of(m);
    float *ref = malloc(sizeof(float) * (size_t)nv), *got = malloc(sizeof(float) * (size_t)nv);
    mf_context *c = new_ctx(m, 64, MF_KV_TYPE_F32);
    mf_error err = {0};
    REQUIRE(c && ref && got, "context");
    REQUIRE(feed(c, P0, NP0, 0, 0, NULL), "prefix");
    REQUIRE_OK(mf_seq_cp(c, 0, 2, -1, -1, &err), "seq_cp: %s", err.msg);
    CHECK(mf_session_save(c, 2, P0, NP0, NULL, NULL, 0, path, &err) == 0, "save of the sharer: %s", err.msg);
    REQUIRE(feed(c, P1, 2, NP0, 2, ref), "the sharer continues");
    mf_context *d = new_ctx(m, 64, MF_KV_TYPE_F32);
    REQUIRE(d, "second context");
    CHECK(mf_session_load(d, 0, path, NULL, NULL, NULL, NULL, NULL, &err) == 0, "load: %s", err.msg);
    CHECK(mf_seq_pos_max(d, 0) == NP0 - 1, "restored pos max %d, want %d", mf_seq_pos_max(d, 0), NP0 - 1);
    REQUIRE(feed(d, P1, 2, NP0, 0, got), "the restored sequence continues");
    CHECK(!memcmp(got, ref, sizeof(float) * (size_t)nv), "logits after the restored shared prefix differ");
    free(ref);
    free(got);
    mf_context_free(c);
    mf_context_free(d);
    mf_model_free(m);
    remove(path);
}

int main(void) {
    if (!gen_model("qwen2", "q8_0", q2_path, sizeof q2_path) || !gen_model("qwen3", "q4_0", q3_path, sizeof q3_path)) {
        printf("FAIL: mf-genmodel could not write the test models\n");
        return mf_test_done() | 1;
    }
    RUN(test_xxh64_matches_the_published_vectors);
    RUN(test_round_trip_continues_bitwise);
    RUN(test_refusals_leave_the_context_unchanged);
    RUN(test_rotated_rows_are_recorded);
    RUN(test_rope_overrides_are_recorded);
    RUN(test_hostile_files_are_refused_never_crash);
    RUN(test_save_is_atomic_and_an_empty_sequence_round_trips);
    RUN(test_a_sharer_saves_its_shared_prefix);
    remove(q2_path);
    remove(q3_path);
    return mf_test_done();
}
