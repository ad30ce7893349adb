/* The step API (mf_gen) and the conversation (mf_conv) on a generated tiny model: the loop gives exactly
 * what the hand-written decode loop gives, stop strings are held back across token boundaries and never
 * returned, the abort callback stops between forwards, limits, drafted tokens verified in one forward give
 * the plain output, several generators in one batch equal each alone (also with their samples drawn side by
 * side on the pool), and a conversation prefills only what a turn adds. */
#include "harness.h"
#include "minfer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char path[512];
static mf_model *model;
static int32_t n_vocab;

static mf_context *new_ctx(int32_t n_ctx) {
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    mf_context *c = NULL;
    mf_error err = {0};
    if (mf_context_new(model, &cp, &c, &err)) printf("  context: %s\n", err.msg);
    return c;
}

static const mf_token k_prompt[] = {785, 6722, 315, 9625, 374};
#define N_PROMPT 5

typedef struct {
    mf_token tok[512];
    int32_t n;
    char text[8192];
    size_t len;
    int status;
} result;

/* The decode loop minfer run had before the step API (prompt in one forward, sample, accept, stream). */
static void old_loop(mf_sampler_params sp, int32_t n_predict, int32_t n_ctx, result *r) {
    memset(r, 0, sizeof *r);
    mf_context *ctx = new_ctx(n_ctx);
    mf_sampler *s = NULL;
    mf_detok_stream *ds = NULL;
    mf_batch b;
    mf_sampler_new(&sp, n_vocab, &s, NULL);
    mf_detok_stream_new(model, &ds, NULL);
    mf_batch_init(&b, N_PROMPT, NULL);
    for (int32_t i = 0; i < N_PROMPT; i++) {
        mf_batch_add(&b, k_prompt[i], i, 0, i == N_PROMPT - 1);
        mf_sampler_accept(s, k_prompt[i]);
    }
    mf_decode(ctx, &b, NULL);
    int32_t pos = N_PROMPT, nc = mf_context_n_ctx(ctx);
    const char *piece;
    size_t len;
    r->status = MF_GEN_LENGTH;
    while (r->n < n_predict) {
        mf_token t = mf_sampler_sample(s, mf_get_logits(ctx, -1));
        mf_sampler_accept(s, t);
        r->tok[r->n++] = t;
        if (mf_model_is_eog(model, t)) {
            r->status = MF_GEN_EOG;
            break;
        }
        mf_detok_stream_push(ds, t, &piece, &len, NULL);
        memcpy(r->text + r->len, piece, len);
        r->len += len;
        if (r->n == n_predict) break;
        if (pos >= nc) {
            r->status = MF_GEN_CONTEXT;
            break;
        }
        mf_batch_clear(&b);
        mf_batch_add(&b, t, pos++, 0, true);
        mf_decode(ctx, &b, NULL);
    }
    mf_detok_stream_flush(ds, &piece, &len, NULL);
    memcpy(r->text + r->len, piece, len);
    r->len += len;
    mf_batch_free(&b);
    mf_detok_stream_free(ds);
    mf_sampler_free(s);
    mf_context_free(ctx);
}

/* Drives a generator to the end of its turn, collecting tokens and text; *steps counts the calls. */
static int drive(mf_gen *g, result *r, int *steps) {
    memset(r, 0, sizeof *r);
    mf_gen_out o;
    mf_error err = {0};
    int k = 0;
    do {
        if (mf_gen_step(g, &o, &err)) {
            printf("  step: %s\n", err.msg);
            return -1;
        }
        /* a step may emit nothing (NULL, 0): memcpy from NULL is undefined even for 0 bytes (UBSan) */
        if (o.n_tokens) memcpy(r->tok + r->n, o.tokens, sizeof *o.tokens * (size_t)o.n_tokens);
        r->n += o.n_tokens;
        if (o.text_len) memcpy(r->text + r->len, o.text, o.text_len);
        r->len += o.text_len;
        k++;
    } while (o.status == MF_GEN_RUNNING && k < 2000);
    r->status = o.status;
    if (steps) *steps = k;
    return 0;
}

static bool same(const result *a, const result *b) {
    return a->n == b->n && !memcmp(a->tok, b->tok, sizeof *a->tok * (size_t)a->n) && a->len == b->len &&
           !memcmp(a->text, b->text, a->len) && a->status == b->status;
}

/* A generator over a fresh context, prompt queued. */
static mf_gen *new_gen(mf_context *ctx, mf_gen_params gp) {
    mf_gen *g = NULL;
    mf_error err = {0};
    if (mf_gen_new(ctx, &gp, &g, &err) || mf_gen_feed(g, k_prompt, N_PROMPT, &err)) {
        printf("  gen: %s\n", err.msg);
        mf_gen_free(g);
        return NULL;
    }
    return g;
}

static mf_sampler_params greedy(void) {
    mf_sampler_params sp = mf_sampler_default_params();
    sp.temp = 0;
    return sp;
}

static mf_sampler_params seeded(uint64_t seed) {
    mf_sampler_params sp = mf_sampler_default_params();
    sp.seed = seed;
    return sp;
}

static void test_identical_to_the_old_loop(void) {
    const int32_t n = mf_test_emulated() ? 12 : 24; /* under an emulator 12 (34 s there at 24, 30 s at 12) */
    struct {
        mf_sampler_params sp;
        int32_t n_predict, n_ctx;
    } cases[] = {{greedy(), n, 64}, {seeded(7), n, 64}, {seeded(11), 40, 16}, {greedy(), 0, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result a, b;
        old_loop(cases[i].sp, cases[i].n_predict, cases[i].n_ctx, &a);
        mf_context *ctx = new_ctx(cases[i].n_ctx);
        REQUIRE(ctx, "context");
        mf_gen_params gp = mf_gen_default_params();
        gp.sampler = cases[i].sp;
        gp.n_predict = cases[i].n_predict;
        mf_gen *g = new_gen(ctx, gp);
        REQUIRE(g, "generator");
        drive(g, &b, NULL);
        CHECK(same(&a, &b), "case %zu: %d tokens '%.*s' (%s), old loop %d tokens '%.*s' (%s)", i, b.n, (int)b.len,
              b.text, mf_gen_status_name(b.status), a.n, (int)a.len, a.text, mf_gen_status_name(a.status));
        if (i == 2) CHECK(b.status == MF_GEN_CONTEXT && b.n == 16 - N_PROMPT + 1, "context: %d tokens", b.n);
        if (i == 3) CHECK(b.status == MF_GEN_LENGTH && b.n == 0, "-n 0: %d tokens", b.n);
        mf_gen_free(g);
        mf_context_free(ctx);
    }
}

/* The longest ASCII-printable stretch at the boundary of tokens k and k+1 of r: returns a stop string
 * that starts inside token k's text and ends inside token k+1's, or false. */
static bool boundary_stop(const result *r, char *stop, size_t *at) {
    size_t off = 0;
    for (int32_t k = 0; k + 1 < r->n; k++) {
        char *p0 = NULL, *p1 = NULL;
        size_t l0 = 0, l1 = 0;
        mf_detokenize(model, &r->tok[k], 1, &p0, &l0, NULL);
        mf_detokenize(model, &r->tok[k + 1], 1, &p1, &l1, NULL);
        bool ok = l0 >= 2 && l1 >= 2 && off + l0 + l1 <= r->len && !memcmp(r->text + off, p0, l0) &&
                  !memcmp(r->text + off + l0, p1, l1);
        for (size_t i = l0 - 2; ok && i < l0 + 2; i++) ok = r->text[off + i] > ' ' && r->text[off + i] < 127;
        free(p0);
        free(p1);
        if (ok) {
            memcpy(stop, r->text + off + l0 - 2, 4);
            stop[4] = 0;
            *at = off + l0 - 2;
            /* it must not occur earlier, or it would stop there */
            char *first = memmem(r->text, r->len, stop, 4);
            if (first && (size_t)(first - r->text) == *at) return true;
        }
        off += l0;
        if (off > r->len) return false;
    }
    return false;
}

static void test_stop_string_across_tokens_is_held_back(void) {
    mf_context *ctx = new_ctx(128);
    REQUIRE(ctx, "context");
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy();
    gp.n_predict = 48;
    mf_gen *g = new_gen(ctx, gp);
    REQUIRE(g, "generator");
    result plain;
    drive(g, &plain, NULL);
    mf_gen_free(g);
    char stop[8];
    size_t at = 0;
    REQUIRE(boundary_stop(&plain, stop, &at), "no token boundary with printable ASCII on both sides in '%.*s'",
            (int)plain.len, plain.text);
    /* with the stop string: the text is exactly what came before it, and no step ever returned a byte of it */
    mf_kv_clear_all(ctx);
    const char *stops[] = {"never-there", stop};
    gp.stop = stops;
    gp.n_stop = 2;
    REQUIRE((g = new_gen(ctx, gp)), "generator");
    result r;
    drive(g, &r, NULL);
    CHECK(r.status == MF_GEN_STOP, "status %s", mf_gen_status_name(r.status));
    CHECK(r.len == at && !memcmp(r.text, plain.text, at), "text '%.*s' (%zu bytes), want the %zu bytes before '%s'",
          (int)r.len, r.text, r.len, at, stop);
    size_t tl;
    const char *tt = mf_gen_turn_text(g, &tl);
    CHECK(tl == at && !memcmp(tt, plain.text, at), "turn text %zu bytes", tl);
    const char *word = mf_gen_stop_word(g);
    CHECK(word && !strcmp(word, stop), "stop word '%s', want '%s'", word ? word : "(null)", stop);
    mf_gen_free(g);
    /* a stop string whose start appears but which never completes: held back while undecided, then
     * released - the whole text comes out, and the step after the boundary token returned the held bytes */
    mf_kv_clear_all(ctx);
    char partial[8];
    memcpy(partial, stop, 2);
    partial[2] = '\x01';
    partial[3] = 0;
    const char *stops2[] = {partial};
    gp.stop = stops2;
    gp.n_stop = 1;
    REQUIRE((g = new_gen(ctx, gp)), "generator");
    mf_gen_out o;
    size_t got = 0;
    bool held = false;
    char text[8192];
    do {
        REQUIRE_OK(mf_gen_step(g, &o, NULL), "step");
        if (o.text_len) memcpy(text + got, o.text, o.text_len);
        got += o.text_len;
        if (got == at && o.status == MF_GEN_RUNNING) held = true; /* stopped right before the candidate */
    } while (o.status == MF_GEN_RUNNING);
    CHECK(held, "no step ended exactly before the undecided '%.2s' at byte %zu", stop, at);
    CHECK(got == plain.len && !memcmp(text, plain.text, got) && o.status == MF_GEN_LENGTH,
          "released text differs: %zu bytes, want %zu (%s)", got, plain.len, mf_gen_status_name(o.status));
    mf_gen_free(g);
    /* refusals */
    const char *empty[] = {""};
    gp.stop = empty;
    mf_error err = {0};
    CHECK(mf_gen_new(ctx, &gp, &g, &err) == MF_E_INVAL && strstr(err.msg, "empty"), "empty stop: %s", err.msg);
    gp.stop = stops;
    gp.no_text = true;
    CHECK(mf_gen_new(ctx, &gp, &g, &err) == MF_E_INVAL && strstr(err.msg, "no_text"), "no_text: %s", err.msg);
    mf_context_free(ctx);
}

static int abort_after;
static bool abort_cb(void *user) {
    int *calls = user;
    return ++*calls > abort_after;
}

static void test_abort_stops_between_forwards(void) {
    mf_context *ctx = new_ctx(64);
    REQUIRE(ctx, "context");
    int calls = 0;
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy();
    gp.n_predict = 20;
    gp.abort = abort_cb;
    gp.abort_user = &calls;
    abort_after = 3; /* prefill + 2 decodes run, the 4th forward does not */
    mf_gen *g = new_gen(ctx, gp);
    REQUIRE(g, "generator");
    result r;
    drive(g, &r, NULL);
    CHECK(r.status == MF_GEN_ABORT, "status %s", mf_gen_status_name(r.status));
    CHECK(r.n == 3, "%d tokens committed, want 3 (one per forward that ran)", r.n);
    CHECK(mf_seq_pos_max(ctx, 0) == N_PROMPT + 1, "cached up to %d, want %d", mf_seq_pos_max(ctx, 0), N_PROMPT + 1);
    CHECK(calls == 4, "abort asked %d times", calls);
    /* the text of the committed tokens is all returned (the detokenizer is flushed at the abort) */
    char *want = NULL;
    size_t wl = 0;
    mf_detokenize(model, r.tok, r.n, &want, &wl, NULL);
    CHECK(wl == r.len && !memcmp(want, r.text, wl), "text '%.*s', want '%s'", (int)r.len, r.text, want);
    free(want);
    mf_gen_free(g);
    /* during a chunked prefill: the check runs between chunks too */
    mf_kv_clear_all(ctx);
    calls = 0;
    abort_after = 2;
    gp.n_batch = 2;
    REQUIRE((g = new_gen(ctx, gp)), "generator");
    drive(g, &r, NULL);
    CHECK(r.status == MF_GEN_ABORT && r.n == 0, "%s after %d tokens", mf_gen_status_name(r.status), r.n);
    CHECK(mf_seq_pos_max(ctx, 0) == 3, "cached up to %d, want 3 (two chunks of 2)", mf_seq_pos_max(ctx, 0));
    mf_gen_free(g);
    mf_context_free(ctx);
}

static void test_n_predict_per_turn(void) {
    mf_context *ctx = new_ctx(128);
    REQUIRE(ctx, "context");
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy();
    gp.n_predict = 5;
    mf_gen *g = new_gen(ctx, gp);
    REQUIRE(g, "generator");
    result r;
    int steps = 0;
    drive(g, &r, &steps);
    CHECK(r.n == 5 && r.status == MF_GEN_LENGTH && steps == 5, "%d tokens in %d steps, %s", r.n, steps,
          mf_gen_status_name(r.status));
    /* stepping an ended turn does nothing */
    mf_gen_out o;
    REQUIRE_OK(mf_gen_step(g, &o, NULL), "step");
    CHECK(o.n_tokens == 0 && o.status == MF_GEN_LENGTH, "an ended turn stepped: %d tokens", o.n_tokens);
    /* a second turn: the limit counts again, and the queued last token is decoded with the new input */
    const mf_token more[] = {11, 1879};
    REQUIRE_OK(mf_gen_feed(g, more, 2, NULL), "feed");
    drive(g, &r, &steps);
    mf_gen_stats st;
    mf_gen_get_stats(g, &st);
    CHECK(r.n == 5 && st.turn_generated == 5 && st.turn_prefilled == 2, "turn 2: %d tokens, prefilled %d", r.n,
          st.turn_prefilled);
    CHECK(st.n_tokens == N_PROMPT + 5 + 2 + 5 && st.n_cached == st.n_tokens - 1, "%d tokens, %d cached", st.n_tokens,
          st.n_cached);
    /* a feed that does not fit is refused and changes nothing */
    mf_token big[128] = {0};
    mf_error err = {0};
    CHECK(mf_gen_feed(g, big, 128, &err) == MF_E_RANGE && strstr(err.msg, "128 positions"), "%s", err.msg);
    mf_gen_get_stats(g, &st);
    CHECK(st.n_tokens == N_PROMPT + 12, "refused feed changed the sequence: %d", st.n_tokens);
    mf_gen_free(g);
    mf_context_free(ctx);
}

/* Drafts verified in one forward give the plain tokens, for a draft that is right, one that goes wrong
 * at its 2nd token and one that is all wrong; with greedy and with seeded sampling. */
static void test_drafts_give_the_plain_output(void) {
    /* 20 tokens: 5 forwards of right drafts, 20 of wrong ones; under an emulator 12 (85 s there at 20, 68 s at 12) */
    const int32_t n_predict = mf_test_emulated() ? 12 : 20;
    for (int mode = 0; mode < 2; mode++) {
        mf_gen_params gp = mf_gen_default_params();
        gp.sampler = mode ? seeded(5) : greedy();
        gp.n_predict = n_predict;
        mf_context *ctx = new_ctx(64);
        REQUIRE(ctx, "context");
        mf_gen *g = new_gen(ctx, gp);
        REQUIRE(g, "generator");
        result plain;
        drive(g, &plain, NULL);
        mf_gen_free(g);
        for (int kind = 0; kind < 3; kind++) {
            mf_kv_clear_all(ctx);
            REQUIRE((g = new_gen(ctx, gp)), "generator");
            result r = {0};
            mf_gen_out o;
            int forwards = 0, drafted = 0, accepted = 0;
            do {
                mf_token d[3];
                int32_t nd = 0;
                for (; nd < 3 && r.n + nd < plain.n; nd++) d[nd] = plain.tok[r.n + nd];
                if (kind == 1 && nd >= 2) d[1] = (d[1] + 1) % n_vocab;
                if (kind == 2)
                    for (int32_t i = 0; i < nd; i++) d[i] = (d[i] + 7) % n_vocab;
                REQUIRE_OK(mf_gen_step_draft(g, d, nd, &o, NULL), "step");
                if (o.n_tokens) memcpy(r.tok + r.n, o.tokens, sizeof *o.tokens * (size_t)o.n_tokens);
                r.n += o.n_tokens;
                drafted += o.n_drafted;
                accepted += o.n_accepted;
                forwards++;
            } while (o.status == MF_GEN_RUNNING && forwards < 100);
            CHECK(r.n == plain.n && !memcmp(r.tok, plain.tok, sizeof *r.tok * (size_t)r.n) &&
                      o.status == plain.status,
                  "mode %d draft kind %d: %d tokens, plain %d", mode, kind, r.n, plain.n);
            /* right drafts of 3 commit 4 tokens a forward; wrong ones 1 */
            if (kind == 0) CHECK(forwards == n_predict / 4, "a right draft took %d forwards", forwards);
            if (kind == 2)
                CHECK(accepted == 0 && forwards == n_predict, "wrong drafts: %d accepted in %d forwards", accepted,
                      forwards);
            /* the cache holds exactly the committed tokens but the last (queued, as in plain decoding) */
            mf_gen_stats st;
            mf_gen_get_stats(g, &st);
            CHECK(mf_seq_pos_max(ctx, 0) == st.n_cached - 1 && st.n_cached == st.n_tokens - 1,
                  "kind %d: cache up to %d, %d cached of %d", kind, mf_seq_pos_max(ctx, 0), st.n_cached, st.n_tokens);
            (void)drafted;
            mf_gen_free(g);
        }
        mf_context_free(ctx);
    }
}

/* Two generators sharing one batch per forward equal each run alone. */
static void test_two_generators_in_one_batch(void) {
    mf_context *ctx = new_ctx(128);
    REQUIRE(ctx, "context");
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = seeded(3);
    gp.n_predict = 12;
    result alone[2];
    const mf_token p1[] = {9707, 11, 1879, 0};
    for (int k = 0; k < 2; k++) {
        mf_kv_clear_all(ctx);
        mf_gen *g = NULL;
        gp.seq = k;
        REQUIRE_OK(mf_gen_new(ctx, &gp, &g, NULL), "gen");
        REQUIRE_OK(k ? mf_gen_feed(g, p1, 4, NULL) : mf_gen_feed(g, k_prompt, N_PROMPT, NULL), "feed");
        drive(g, &alone[k], NULL);
        mf_gen_free(g);
    }
    mf_kv_clear_all(ctx);
    mf_gen *g[2] = {0};
    for (int k = 0; k < 2; k++) {
        gp.seq = k;
        REQUIRE_OK(mf_gen_new(ctx, &gp, &g[k], NULL), "gen");
    }
    REQUIRE_OK(mf_gen_feed(g[0], k_prompt, N_PROMPT, NULL), "feed");
    REQUIRE_OK(mf_gen_feed(g[1], p1, 4, NULL), "feed");
    mf_batch b;
    REQUIRE_OK(mf_batch_init(&b, 16, NULL), "batch");
    result r[2] = {0};
    for (int step = 0; step < 40 && (mf_gen_status(g[0]) == MF_GEN_RUNNING || mf_gen_status(g[1]) == MF_GEN_RUNNING);
         step++) {
        mf_batch_clear(&b);
        for (int k = 0; k < 2; k++) REQUIRE(mf_gen_batch_add(g[k], &b, NULL, 0, NULL) >= 0, "batch_add");
        REQUIRE_OK(mf_decode(ctx, &b, NULL), "decode");
        for (int k = 0; k < 2; k++) {
            mf_gen_out o;
            REQUIRE_OK(mf_gen_batch_done(g[k], &o, NULL), "done");
            if (o.n_tokens) memcpy(r[k].tok + r[k].n, o.tokens, sizeof *o.tokens * (size_t)o.n_tokens);
            r[k].n += o.n_tokens;
        }
    }
    for (int k = 0; k < 2; k++)
        CHECK(r[k].n == alone[k].n && !memcmp(r[k].tok, alone[k].tok, sizeof *r[k].tok * (size_t)r[k].n),
              "sequence %d: %d tokens batched, %d alone", k, r[k].n, alone[k].n);
    mf_batch_free(&b);
    for (int k = 0; k < 2; k++) mf_gen_free(g[k]);
    mf_context_free(ctx);
}

/* Generators whose next tokens mf_gen_batch_sample draws side by side on the pool (a server's slots) give
 * exactly what each gives alone: seeded with top_k 40 and with top_k 0 (the radix sort over every logit),
 * greedy, a prompt fed in chunks (it samples nothing while the others do), drafts (the first sample drawn
 * ahead, the later ones in batch_done).  Once, every draw taken ahead is discarded (mf_gen_batch_cancel, the
 * step's rows removed) and the step redone: the RNGs must go back, or the seeded outputs differ. */
static void test_generators_sampled_side_by_side_equal_alone(void) {
    enum { NG = 4 };
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    mf_context *ctx = NULL;
    REQUIRE_OK(mf_context_new(model, &cp, &ctx, NULL), "context");
    const mf_token p1[] = {9707, 11, 1879, 0};
    mf_gen_params gp[NG];
    for (int k = 0; k < NG; k++) {
        gp[k] = mf_gen_default_params();
        gp[k].seq = k;
        gp[k].n_predict = 10 + k;
    }
    gp[0].sampler = seeded(3);
    gp[1].sampler = seeded(4);
    gp[1].sampler.top_k = 0;
    gp[2].sampler = greedy();
    gp[3].sampler = seeded(5);
    gp[3].n_batch = 2;
    result alone[NG];
    for (int k = 0; k < NG; k++) {
        mf_kv_clear_all(ctx);
        mf_gen *g = NULL;
        REQUIRE_OK(mf_gen_new(ctx, &gp[k], &g, NULL), "gen");
        REQUIRE_OK(k & 1 ? mf_gen_feed(g, p1, 4, NULL) : mf_gen_feed(g, k_prompt, N_PROMPT, NULL), "feed");
        drive(g, &alone[k], NULL);
        mf_gen_free(g);
    }
    mf_kv_clear_all(ctx);
    mf_gen *g[NG] = {0};
    for (int k = 0; k < NG; k++) {
        REQUIRE_OK(mf_gen_new(ctx, &gp[k], &g[k], NULL), "gen");
        REQUIRE_OK(k & 1 ? mf_gen_feed(g[k], p1, 4, NULL) : mf_gen_feed(g[k], k_prompt, N_PROMPT, NULL), "feed");
    }
    mf_batch b;
    REQUIRE_OK(mf_batch_init(&b, 32, NULL), "batch");
    result r[NG] = {0};
    bool redone = false;
    for (int step = 0; step < 60; step++) {
        bool any = false;
        for (int k = 0; k < NG; k++) any |= mf_gen_status(g[k]) == MF_GEN_RUNNING;
        if (!any) break;
        mf_batch_clear(&b);
        for (int k = 0; k < NG; k++) {
            mf_token d[2];
            int32_t nd = 0;
            for (; k == 3 && nd < 2 && r[k].n + 1 + nd < alone[k].n; nd++) d[nd] = alone[k].tok[r[k].n + 1 + nd];
            REQUIRE(mf_gen_batch_add(g[k], &b, d, nd, NULL) >= 0, "batch_add");
        }
        REQUIRE_OK(mf_decode(ctx, &b, NULL), "decode");
        mf_gen_batch_sample(g, NG);
        if (step == 3 && !redone) { /* every draw discarded: the RNGs go back, the rows go */
            for (int k = 0; k < NG; k++) {
                mf_gen_stats st;
                mf_gen_get_stats(g[k], &st);
                mf_gen_batch_cancel(g[k]);
                mf_seq_rm(ctx, k, st.n_cached, -1);
            }
            redone = true;
            step--;
            continue;
        }
        for (int k = 0; k < NG; k++) {
            mf_gen_out o;
            REQUIRE_OK(mf_gen_batch_done(g[k], &o, NULL), "done");
            if (o.n_tokens) memcpy(r[k].tok + r[k].n, o.tokens, sizeof *o.tokens * (size_t)o.n_tokens);
            r[k].n += o.n_tokens;
        }
    }
    CHECK(redone, "the discarded step never ran");
    for (int k = 0; k < NG; k++)
        CHECK(r[k].n == alone[k].n && !memcmp(r[k].tok, alone[k].tok, sizeof *r[k].tok * (size_t)r[k].n),
              "generator %d: %d tokens sampled side by side, %d alone%s", k, r[k].n, alone[k].n,
              r[k].n && alone[k].n && r[k].tok[0] != alone[k].tok[0] ? " (the first differs)" : "");
    mf_batch_free(&b);
    for (int k = 0; k < NG; k++) mf_gen_free(g[k]);
    mf_context_free(ctx);
}

/* A generator attached to a prefix copied from another sequence (the server's prefix reuse) continues
 * exactly as one that prefilled the whole prompt itself, with seeded sampling (so the penalty history and
 * the RNG matter); attach is refused on a used generator or when the sequence holds another length. */
static void test_attached_prefix_continues_as_a_full_prefill(void) {
    mf_context *ctx = new_ctx(128);
    REQUIRE(ctx, "context");
    /* a prompt the model itself would continue (its own greedy text), so the penalties on the prompt's tokens
     * change what is drawn: an attach that left them out of the penalty history would show */
    enum { NP = 10 };
    mf_token prompt[NP] = {785};
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy();
    gp.n_predict = NP - 1;
    mf_gen *g = NULL;
    REQUIRE_OK(mf_gen_new(ctx, &gp, &g, NULL), "gen");
    REQUIRE_OK(mf_gen_feed(g, prompt, 1, NULL), "feed");
    result r;
    drive(g, &r, NULL);
    mf_gen_free(g);
    REQUIRE(r.n == NP - 1, "greedy run gave %d tokens", r.n);
    memcpy(prompt + 1, r.tok, sizeof *prompt * (NP - 1));
    mf_kv_clear_all(ctx);
    gp.sampler = seeded(11);
    gp.sampler.penalty_repeat = 1.5f;
    gp.sampler.penalty_present = 1.5f;
    gp.n_predict = 16;
    result full, att;
    REQUIRE_OK(mf_gen_new(ctx, &gp, &g, NULL), "gen");
    REQUIRE_OK(mf_gen_feed(g, prompt, NP, NULL), "feed");
    drive(g, &full, NULL);
    mf_gen_free(g);
    /* seq 1 gets the first NP - 1 prompt cells of seq 0 by copy, then feeds only the last token */
    REQUIRE_OK(mf_seq_cp(ctx, 0, 1, 0, NP - 1, NULL), "seq_cp");
    gp.seq = 1;
    mf_error err = {0};
    REQUIRE_OK(mf_gen_new(ctx, &gp, &g, NULL), "gen");
    CHECK(mf_gen_attach(g, prompt, NP, &err) != 0 && strstr(err.msg, "positions up to 8"),
          "attaching more tokens than the sequence holds is refused: %s", err.msg);
    REQUIRE_OK(mf_gen_attach(g, prompt, NP - 1, &err), "attach: %s", err.msg);
    CHECK(mf_gen_attach(g, prompt, NP - 1, &err) != 0 && strstr(err.msg, "fresh generator"),
          "a second attach is refused: %s", err.msg);
    REQUIRE_OK(mf_gen_feed(g, prompt + NP - 1, 1, NULL), "feed");
    drive(g, &att, NULL);
    mf_gen_stats st;
    mf_gen_get_stats(g, &st);
    CHECK(same(&full, &att), "attached: %d tokens '%.*s', full prefill: %d tokens '%.*s'", att.n, (int)att.len,
          att.text, full.n, (int)full.len, full.text);
    CHECK(st.n_prefilled == 1, "only the last prompt token ran: %lld", (long long)st.n_prefilled);
    mf_gen_free(g);
    mf_context_free(ctx);
}

/* A conversation's second turn prefills only what it adds, and continues exactly as a fresh prefill of
 * the whole sequence would. */
static void test_conversation_prefills_only_the_new_turn(void) {
    mf_context *ctx = new_ctx(512);
    REQUIRE(ctx, "context");
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy();
    gp.n_predict = 6;
    mf_gen *g = NULL;
    mf_conv *c = NULL;
    mf_conv_params vp = mf_conv_default_params();
    vp.system = "You are terse.";
    vp.chat.template_name = "chatml";
    REQUIRE_OK(mf_gen_new(ctx, &gp, &g, NULL), "gen");
    REQUIRE_OK(mf_conv_new(g, &vp, &c, NULL), "conv");
    mf_conv_turn t1, t2;
    mf_error err = {0};
    REQUIRE_OK(mf_conv_user(c, "Hello there", &t1, &err), "turn 1: %s", err.msg);
    result r1, r2;
    drive(g, &r1, NULL);
    mf_gen_stats s1;
    mf_gen_get_stats(g, &s1);
    REQUIRE_OK(mf_conv_user(c, "And again", &t2, &err), "turn 2: %s", err.msg);
    drive(g, &r2, NULL);
    mf_gen_stats s2;
    mf_gen_get_stats(g, &s2);
    CHECK(t1.n_reused == 0 && t1.n_new == s1.turn_prefilled, "turn 1: %d new, %d reused, prefilled %d", t1.n_new,
          t1.n_reused, s1.turn_prefilled);
    CHECK(t2.n_reused == s1.n_tokens && s2.turn_prefilled == t2.n_new && !t2.rerendered,
          "turn 2: %d new, %d reused (turn 1 ended with %d), prefilled %d", t2.n_new, t2.n_reused, s1.n_tokens,
          s2.turn_prefilled);
    /* the new tokens are "<|im_end|>\n<|im_start|>user\nAnd again<|im_end|>\n<|im_start|>assistant\n" */
    mf_token *want = NULL;
    int32_t nw = 0;
    const char *tail = "<|im_end|>\n<|im_start|>user\nAnd again<|im_end|>\n<|im_start|>assistant\n";
    REQUIRE_OK(mf_tokenize(model, tail, strlen(tail), false, true, &want, &nw, NULL), "tokenize");
    int32_t n_all;
    const mf_token *all = mf_gen_tokens(g, &n_all);
    CHECK(t2.n_new == nw && !memcmp(all + t2.n_reused, want, sizeof *want * (size_t)nw), "turn 2 fed %d tokens, want %d",
          t2.n_new, nw);
    free(want);
    /* a fresh generator prefilling the same sequence up to turn 2's reply continues identically */
    mf_token *seq = malloc(sizeof *seq * (size_t)n_all);
    REQUIRE(seq, "oom");
    memcpy(seq, all, sizeof *seq * (size_t)n_all);
    int32_t n_before = n_all - r2.n;
    mf_context *ctx2 = new_ctx(512);
    mf_gen *g2 = NULL;
    REQUIRE_OK(mf_gen_new(ctx2, &gp, &g2, NULL), "gen");
    REQUIRE_OK(mf_gen_feed(g2, seq, n_before, NULL), "feed");
    result r3;
    drive(g2, &r3, NULL);
    CHECK(r3.n == r2.n && !memcmp(r3.tok, r2.tok, sizeof *r3.tok * (size_t)r3.n), "turn 2 differs from a fresh prefill");
    free(seq);
    mf_gen_free(g2);
    mf_context_free(ctx2);
    mf_conv_free(c);
    mf_gen_free(g);
    mf_context_free(ctx);
}


/* Context shift in a conversation: when a turn does not fit, the oldest whole turn after the system
 * part leaves the sequence (its tokens exactly), the kept ones move down to contiguous positions, and
 * the next turn is queued after them. */
static void test_conversation_drops_the_oldest_turns(void) {
    mf_context *ctx = new_ctx(64);
    REQUIRE(ctx, "context");
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy();
    gp.n_predict = 8;
    mf_gen *g = NULL;
    mf_conv *c = NULL;
    mf_conv_params vp = mf_conv_default_params();
    vp.system = "Be brief.";
    vp.chat.template_name = "chatml";
    vp.n_reserve = 8;
    REQUIRE_OK(mf_gen_new(ctx, &gp, &g, NULL), "gen");
    REQUIRE_OK(mf_conv_new(g, &vp, &c, NULL), "conv");
    const char *msgs[] = {"Hello there", "How are you?", "Third one here", "Fourth message", "Fifth", "Sixth one"};
    mf_token *im_start = NULL;
    int32_t n_im = 0;
    REQUIRE_OK(mf_tokenize(model, "<|im_start|>", 12, false, true, &im_start, &n_im, NULL), "tokenize");
    REQUIRE(n_im == 1, "<|im_start|> is %d tokens", n_im);
    mf_token turn_tok = im_start[0];
    free(im_start);
    mf_token before[64];
    int32_t n_before = 0, shifted = 0;
    for (int k = 0; k < 6; k++) {
        mf_conv_turn t;
        mf_error err = {0};
        int32_t n;
        const mf_token *all = mf_gen_tokens(g, &n);
        memcpy(before, all, sizeof *all * (size_t)n);
        n_before = n;
        REQUIRE_OK(mf_conv_user(c, msgs[k], &t, &err), "turn %d: %s", k + 1, err.msg);
        if (t.n_dropped_turns) {
            shifted++;
            all = mf_gen_tokens(g, &n);
            /* the sequence is: the system part, the kept turns (moved down), then this turn's tokens */
            int32_t kept = n - t.n_new;
            CHECK(kept == n_before - t.n_dropped_tokens, "turn %d: %d kept, %d before, %d dropped", k + 1, kept,
                  n_before, t.n_dropped_tokens);
            /* one span [p0, p0 + dropped) of the old tokens is gone, everything else is in order, and the span
             * is whole turns: it starts at a turn's <|im_start|> and the next kept token starts one too (a
             * span can look shifted by the tokens turns share, so any such p0 will do) */
            int32_t tail = n_before - t.n_dropped_tokens, d = t.n_dropped_tokens, p0 = -1;
            for (int32_t i = 1; i < tail && p0 < 0; i++)
                if (!memcmp(all, before, sizeof *all * (size_t)i) &&
                    !memcmp(all + i, before + i + d, sizeof *all * (size_t)(tail - i)) && before[i] == turn_tok &&
                    before[i + d] == turn_tok)
                    p0 = i;
            CHECK(p0 > 0, "turn %d: the kept tokens are not the old ones minus whole turns (%d dropped)", k + 1, d);
            mf_gen_stats st;
            mf_gen_get_stats(g, &st);
            CHECK(mf_seq_pos_max(ctx, 0) == st.n_cached - 1, "turn %d: positions up to %d with %d cached", k + 1,
                  mf_seq_pos_max(ctx, 0), st.n_cached);
        }
        result r;
        REQUIRE(drive(g, &r, NULL) == 0, "turn %d", k + 1);
        CHECK(r.status == MF_GEN_LENGTH, "turn %d stopped: %s", k + 1, mf_gen_status_name(r.status));
    }
    CHECK(shifted >= 2, "%d turns dropped in a 64-token context, want 2 or more", shifted);
    mf_conv_free(c);
    mf_gen_free(g);
    mf_context_free(ctx);
}

/* The text a grammar forces (greedy), driven with the limits of gp; status and text returned. */
static int forced(mf_context *ctx, const char *gbnf, mf_gen_params gp, result *r) {
    mf_kv_clear_all(ctx);
    mf_grammar *gr = NULL;
    mf_gen *g = NULL;
    mf_error err = {0};
    gp.sampler = greedy();
    gp.n_predict = 64;
    int rc = mf_grammar_new(gbnf, strlen(gbnf), &gr, &err);
    if (!rc) rc = mf_gen_new(ctx, &gp, &g, &err);
    if (!rc) rc = mf_gen_set_grammar(g, gr, NULL, NULL, &err);
    if (!rc) rc = mf_gen_feed(g, k_prompt, N_PROMPT, &err);
    if (rc) printf("  forced: %s\n", err.msg);
    if (!rc) rc = drive(g, r, NULL);
    mf_gen_free(g);
    mf_grammar_free(gr);
    return rc;
}

/* n_indent (llama-server's, for code completion): a line after the first that starts with fewer blanks ends
 * the text at its first other character, keeping its newline and blanks; the first line is never checked. */
static void test_n_indent_ends_at_a_shallower_line(void) {
    mf_context *ctx = new_ctx(128);
    REQUIRE(ctx, "context");
    static const char *gbnf = "root ::= \"x\\n    y\\n  z\\nw\"";
    static const struct {
        int32_t n_indent;
        const char *want;
        int status;
    } c[] = {
        {0, "x\n    y\n  z\nw", MF_GEN_EOG},
        {1, "x\n    y\n  z\n", MF_GEN_LENGTH},
        {2, "x\n    y\n  z\n", MF_GEN_LENGTH},
        {3, "x\n    y\n  ", MF_GEN_LENGTH},
        {5, "x\n    ", MF_GEN_LENGTH},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        mf_gen_params gp = mf_gen_default_params();
        gp.n_indent = c[k].n_indent;
        result r;
        REQUIRE_OK(forced(ctx, gbnf, gp, &r), "generation");
        CHECK(r.len == strlen(c[k].want) && !memcmp(r.text, c[k].want, r.len) && r.status == c[k].status,
              "n_indent %d: '%.*s' (%s), want '%s' (%s)", c[k].n_indent, (int)r.len, r.text,
              mf_gen_status_name(r.status), c[k].want, mf_gen_status_name(c[k].status));
    }
    /* each turn starts its own first line: a second turn after a cut gives the same text */
    mf_kv_clear_all(ctx);
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = greedy(), gp.n_predict = 64, gp.n_indent = 3;
    mf_grammar *gr = NULL;
    mf_gen *g = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_grammar_new(gbnf, strlen(gbnf), &gr, &err), "%s", err.msg);
    REQUIRE_OK(mf_gen_new(ctx, &gp, &g, &err), "%s", err.msg);
    REQUIRE_OK(mf_gen_set_grammar(g, gr, NULL, NULL, &err), "%s", err.msg);
    result r1, r2;
    REQUIRE_OK(mf_gen_feed(g, k_prompt, N_PROMPT, &err), "%s", err.msg);
    drive(g, &r1, NULL);
    REQUIRE_OK(mf_gen_feed(g, k_prompt, 2, &err), "%s", err.msg);
    drive(g, &r2, NULL);
    CHECK(r2.len == r1.len && !memcmp(r2.text, r1.text, r1.len) && r2.status == MF_GEN_LENGTH,
          "second turn '%.*s' (%s), first '%.*s'", (int)r2.len, r2.text, mf_gen_status_name(r2.status), (int)r1.len,
          r1.text);
    mf_gen_free(g);
    mf_grammar_free(gr);
    gp = mf_gen_default_params();
    gp.n_indent = -1;
    CHECK(mf_gen_new(ctx, &gp, &g, &err) == MF_E_INVAL && strstr(err.msg, "n_indent -1"), "%s", err.msg);
    gp.n_indent = 2, gp.no_text = true;
    CHECK(mf_gen_new(ctx, &gp, &g, &err) == MF_E_INVAL && strstr(err.msg, "no_text"), "%s", err.msg);
    mf_context_free(ctx);
}

static bool sleep_2ms(void *user) {
    (void)user;
    const struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    return false;
}

/* t_max_predict_ms: once that long has passed since the first generated token, the turn ends with the next
 * token that writes a newline (every forward here takes over 2 ms, the limit is 1 ms). */
static void test_t_max_predict_ends_at_a_newline_after_the_time(void) {
    mf_context *ctx = new_ctx(128);
    REQUIRE(ctx, "context");
    static const char *gbnf = "root ::= \"ab\\ncd\\nef\\ngh\\n\"";
    mf_gen_params gp = mf_gen_default_params();
    gp.abort = sleep_2ms;
    result all, r;
    REQUIRE_OK(forced(ctx, gbnf, gp, &all), "generation");
    CHECK(all.status == MF_GEN_EOG && all.len == 12, "without the limit: %s, %zu bytes", mf_gen_status_name(all.status),
          all.len);
    gp.t_max_predict_ms = 1.0;
    REQUIRE_OK(forced(ctx, gbnf, gp, &r), "generation");
    /* the first token that writes a newline after the first token ends it */
    char *piece = NULL;
    size_t at = 0, pl;
    int32_t k = 0;
    for (; k < all.n; k++) {
        REQUIRE_OK(mf_detokenize(model, &all.tok[k], 1, &piece, &pl, NULL), "piece");
        at += pl;
        const bool nl = memchr(piece, '\n', pl) != NULL;
        free(piece);
        if (k > 0 && nl) break;
    }
    CHECK(r.status == MF_GEN_LENGTH && r.n == k + 1 && r.len == at && !memcmp(r.text, all.text, at),
          "%s after %d tokens, %zu bytes '%.*s'; want length after %d tokens, %zu bytes", mf_gen_status_name(r.status),
          r.n, r.len, (int)r.len, r.text, k + 1, at);
    /* a limit not reached changes nothing */
    gp.t_max_predict_ms = 1e9;
    REQUIRE_OK(forced(ctx, gbnf, gp, &r), "generation");
    CHECK(same(&r, &all), "t_max_predict_ms 1e9: %s, %zu bytes", mf_gen_status_name(r.status), r.len);
    mf_gen *g = NULL;
    mf_error err = {0};
    gp.t_max_predict_ms = -1;
    CHECK(mf_gen_new(ctx, &gp, &g, &err) == MF_E_INVAL && strstr(err.msg, "t_max_predict_ms -1"), "%s", err.msg);
    mf_context_free(ctx);
}

typedef struct {
    mf_token tok[64];
    int32_t n, n_post[64];
    float chosen[64], p[64][8];
    mf_token ids[64][8];
} post_result;

static void take_post(post_result *r, const mf_gen_out *o, int32_t k) {
    for (int32_t i = 0; i < o->n_tokens && r->n < 64; i++, r->n++) {
        r->tok[r->n] = o->tokens[i];
        r->n_post[r->n] = o->n_post[i];
        r->chosen[r->n] = o->post_chosen[i];
        memcpy(r->ids[r->n], o->post_ids + (size_t)i * k, sizeof(mf_token) * (size_t)o->n_post[i]);
        memcpy(r->p[r->n], o->post_p + (size_t)i * k, sizeof(float) * (size_t)o->n_post[i]);
    }
}

/* post_probs (llama-server's post_sampling_probs): per generated token the chain's probabilities after its last
 * stage - greedy the drawn token alone at 1; sampled with top_k 4 at most 4 candidates, likeliest first, summing
 * to 1, the drawn one among them at its probability - recorded without changing a draw, and the same when the
 * draw is taken ahead on the pool (the server's path). */
static void test_post_probs_are_the_chains_last_candidates(void) {
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    mf_context *ctx = NULL;
    REQUIRE_OK(mf_context_new(model, &cp, &ctx, NULL), "context");
    for (int sampled = 0; sampled < 2; sampled++) {
        mf_gen_params gp = mf_gen_default_params();
        gp.sampler = sampled ? seeded(7) : greedy();
        gp.sampler.top_k = 4, gp.sampler.top_p = 1.0f, gp.sampler.min_p = 0.0f, gp.sampler.temp = sampled ? 1.5f : 0;
        gp.n_predict = 24;
        mf_kv_clear_all(ctx);
        mf_gen *g = new_gen(ctx, gp);
        REQUIRE(g, "generator");
        result plain;
        drive(g, &plain, NULL);
        mf_gen_free(g);
        gp.post_probs = 8;
        post_result a = {0}, b = {0};
        for (int ahead = 0; ahead < 2; ahead++) {
            mf_kv_clear_all(ctx);
            REQUIRE((g = new_gen(ctx, gp)), "generator");
            mf_batch bt;
            REQUIRE_OK(mf_batch_init(&bt, 16, NULL), "batch");
            mf_gen_out o;
            do {
                if (!ahead) {
                    REQUIRE_OK(mf_gen_step(g, &o, NULL), "step");
                } else {
                    mf_batch_clear(&bt);
                    REQUIRE(mf_gen_batch_add(g, &bt, NULL, 0, NULL) >= 0, "add");
                    REQUIRE_OK(mf_decode(ctx, &bt, NULL), "decode");
                    mf_gen_batch_sample(&g, 1);
                    REQUIRE_OK(mf_gen_batch_done(g, &o, NULL), "done");
                }
                if (o.n_tokens) take_post(ahead ? &b : &a, &o, gp.post_probs);
            } while (o.status == MF_GEN_RUNNING);
            mf_batch_free(&bt);
            mf_gen_free(g);
        }
        CHECK(a.n == plain.n && !memcmp(a.tok, plain.tok, sizeof *a.tok * (size_t)a.n), "%s: recording changed the draws",
              sampled ? "sampled" : "greedy");
        CHECK(b.n == a.n && !memcmp(&a, &b, sizeof a), "%s: drawn ahead on the pool, the probabilities differ",
              sampled ? "sampled" : "greedy");
        int bad = 0, several = 0;
        for (int32_t i = 0; i < a.n; i++) {
            float sum = 0, at = -1;
            for (int32_t k = 0; k < a.n_post[i]; k++) {
                sum += a.p[i][k];
                if (a.ids[i][k] == a.tok[i]) at = a.p[i][k];
                if (k && a.p[i][k] > a.p[i][k - 1]) bad++;
            }
            several += a.n_post[i] > 1;
            if (!sampled) bad += a.n_post[i] != 1 || a.ids[i][0] != a.tok[i] || a.p[i][0] != 1.0f || a.chosen[i] != 1.0f;
            else bad += a.n_post[i] < 1 || a.n_post[i] > 4 || fabsf(sum - 1.0f) > 1e-5f || at != a.chosen[i];
        }
        CHECK(!bad && (!sampled || several > 0), "%s: %d of %d positions wrong (%d with several candidates)",
              sampled ? "sampled" : "greedy", bad, a.n, several);
    }
    mf_gen_params gp = mf_gen_default_params();
    gp.post_probs = MF_GEN_MAX_POST_PROBS + 1;
    mf_gen *g = NULL;
    mf_error err = {0};
    CHECK(mf_gen_new(ctx, &gp, &g, &err) == MF_E_INVAL && strstr(err.msg, "post_probs"), "%s", err.msg);
    mf_context_free(ctx);
}

int main(void) {
    snprintf(path, sizeof path, "%s/gen-qwen2-q8_0.gguf", mf_test_tmpdir());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --arch qwen2 --type q8_0 --seed 3 -q -o %s", mf_test_genmodel(), path);
    mf_error err = {0};
    if (system(cmd) != 0 || mf_model_load(path, NULL, &model, &err)) {
        printf("FAIL: the test model: %s\n", err.msg);
        return mf_test_done() | 1;
    }
    mf_model_info info;
    mf_model_get_info(model, &info);
    n_vocab = info.n_vocab;
    RUN(test_identical_to_the_old_loop);
    RUN(test_stop_string_across_tokens_is_held_back);
    RUN(test_abort_stops_between_forwards);
    RUN(test_n_predict_per_turn);
    RUN(test_drafts_give_the_plain_output);
    RUN(test_two_generators_in_one_batch);
    RUN(test_generators_sampled_side_by_side_equal_alone);
    RUN(test_attached_prefix_continues_as_a_full_prefill);
    RUN(test_conversation_prefills_only_the_new_turn);
    RUN(test_conversation_drops_the_oldest_turns);
    RUN(test_n_indent_ends_at_a_shallower_line);
    RUN(test_t_max_predict_ends_at_a_newline_after_the_time);
    RUN(test_post_probs_are_the_chains_last_candidates);
    mf_model_free(model);
    remove(path);
    return mf_test_done();
}
