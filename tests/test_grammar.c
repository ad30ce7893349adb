/* Constrained decoding: the GBNF compiler (what it refuses, and where it says so), the matcher (its language,
 * pieces that split a character), the sampler over allowed tokens (bitwise the plain sampler over masked
 * logits) and generation under a grammar on a synthetic model (every output is a sentence of the grammar;
 * drafts change nothing).  JSON Schema's own checks are in test_schema. */
#include "engine/engine_impl.h"
#include "grammar/grammar.h"
#include "harness.h"
#include "minfer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char path[512];
static mf_model *model;
static int32_t n_vocab;

static mf_grammar *compile(const char *text) {
    mf_grammar *g = NULL;
    mf_error err = {0};
    if (mf_grammar_compile(text, strlen(text), &g, &err)) printf("  compile %s: %s\n", text, err.msg);
    return g;
}

static void test_gbnf_errors_name_the_place_and_the_rule(void) {
    static const struct {
        const char *gbnf, *want;
    } cases[] = {
        {"root ::= x", "rule 'x' (line 1) is used but never defined"},
        {"a ::= \"b\"", "no 'root' rule"},
        {"root ::= root \"a\"", "rule 'root' can reach itself without consuming a character"},
        {"root ::= a\na ::= \"b\"? root", "can reach itself"},
        {"root ::= (\"a\"?)*", "a group or repetition in rule 'root' can reach itself"},
        {"root ::= \"a", "line 1, column 10: a literal is not closed"},
        {"root ::= (\"a\"", "a '(' is not closed"},
        {"root ::= \"a\" )", "line 1, column 14: a ')' without its '('"},
        {"root ::= [z-a]", "runs backwards"},
        {"root ::= []", "empty character class"},
        {"root ::= *", "'*' repeats nothing"},
        {"root ::= \"\\q\"", "unknown escape '\\q'"},
        {"root ::= \"\\u12\"", "needs its hex digits"},
        {"root ::= \"\\ud800\"", "surrogate"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
        {"root ::= \"a\"{3,2}", "n below m"},
        {"root ::= \"a\"{1,20000}", "above 10000"},
        {"root = \"a\"", "expected '::=' after 'root'"},
        {"root ::= \"a\"\n  \"b\"", "line 2, column 3: expected a rule name"},
        {"root ::= \"\xff\"", "not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mf_grammar *g = NULL;
        mf_error err = {0};
        int rc = mf_grammar_compile(cases[i].gbnf, strlen(cases[i].gbnf), &g, &err);
        CHECK(rc == MF_E_INVAL && !g, "'%s' compiled (rc %d)", cases[i].gbnf, rc);
        CHECK(strstr(err.msg, cases[i].want), "'%s': message '%s' lacks '%s'", cases[i].gbnf, err.msg,
              cases[i].want);
        mf_grammar_release(g);
    }
}

static void test_grammar_matches_its_sentences_and_nothing_else(void) {
    static const struct {
        const char *gbnf, *text;
        bool in;
    } cases[] = {
        {"root ::=", "", true}, /* an empty root (fuzz_grammar: corpus/grammar/regress-empty-root) */
        {"root ::=", "a", false},
        {"root ::= \"abc\"", "abc", true},
        {"root ::= \"abc\"", "ab", false},
        {"root ::= \"abc\"", "abcd", false},
        {"root ::= [a-c]+", "cabba", true},
        {"root ::= [a-c]+", "", false},
        {"root ::= [a-c]*", "", true},
        {"root ::= [^\"\\\\]* \"\\\"\"", "x y\"", true},
        {"root ::= [^\"\\\\]* \"\\\"\"", "x\\\"", false},
        {"root ::= \"ab\"{2,3}", "ab", false},
        {"root ::= \"ab\"{2,3}", "abab", true},
        {"root ::= \"ab\"{2,3}", "ababab", true},
        {"root ::= \"ab\"{2,3}", "abababab", false},
        {"root ::= \"a\"{2,}", "a", false},
        {"root ::= \"a\"{2,}", "aaaaaaa", true},
        {"root ::= \"a\"{0}", "", true},
        {"root ::= (\"a\" | \"bc\")* \"d\"", "abcad", true},
        {"root ::= (\"a\" | \"bc\")* \"d\"", "abd", false},
        {"root ::= x y?\nx ::= \"a\"\ny ::= \"b\"", "a", true},
        {"root ::= x y?\nx ::= \"a\"\ny ::= \"b\"", "ab", true},
        {"root ::= x |\n  y # comment\nx ::= \"1\"\ny ::= \"2\"", "2", true},
        {"root ::= ( \"a\"\n  \"b\" )", "ab", true},
        {"root ::= [\\u4e00-\\u9fff]{2}", "\xe4\xb8\xad\xe6\x96\x87", true},
        {"root ::= \"\\xe9\" .", "\xc3\xa9z", true},
        {"root ::= .", "\xc3", false},
        {"root ::= [^a]", "\xf0\x9f\x98\x80", true},
        {"root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= [0-9]+ | root", "[1,[2,[3]],4]", true},
        {"root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= [0-9]+ | root", "[1,[2,[3],4]", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mf_grammar *g = compile(cases[i].gbnf);
        REQUIRE(g, "case %zu", i);
        bool in = mf_grammar_matches(g, cases[i].text, strlen(cases[i].text));
        CHECK(in == cases[i].in, "'%s' on '%s': %d, want %d", cases[i].gbnf, cases[i].text, in, cases[i].in);
        mf_grammar_release(g);
    }
}

/* Byte-level BPE pieces end inside characters: the bytes wait, and count when a character the grammar
 * allows can start with them. */
static void test_pieces_that_split_a_character_wait_for_its_end(void) {
    mf_grammar *g = compile("root ::= \"a\" [\\u4e00-\\u9fff] \"b\"");
    REQUIRE(g, "compile");
    mf_gmatch *m = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_gmatch_new(g, &m, &err), "%s", err.msg);
    CHECK(mf_gmatch_accepts(m, "a\xe4", 2), "a + the first byte of U+4E2D");
    CHECK(!mf_gmatch_accepts(m, "a\xc3", 2), "a + the first byte of a two-byte character (below U+0800)");
    CHECK(!mf_gmatch_accepts(m, "a\x80", 2), "a + a stray continuation byte");
    CHECK(mf_gmatch_advance(m, "a\xe4", 2, &err) == 0, "%s", err.msg);
    CHECK(!mf_gmatch_can_end(m), "ends inside a character");
    CHECK(mf_gmatch_accepts(m, "\xb8\xad", 2) && mf_gmatch_accepts(m, "\xb8", 1), "the rest of U+4E2D");
    CHECK(!mf_gmatch_accepts(m, "\x41", 1), "ASCII where a continuation byte must come");
    CHECK(mf_gmatch_advance(m, "\xb8", 1, &err) == 0, "%s", err.msg);
    CHECK(mf_gmatch_advance(m,
                            "\xad"
                            "b",
                            2, &err) == 0,
          "%s", err.msg);
    CHECK(mf_gmatch_must_end(m), "after a, U+4E2D, b the sentence is whole");
    mf_gmatch_free(m);
    mf_grammar_release(g);
}

/* A lead byte alone promises a character of its length only: F0 is U+10000 or above, never '{'. */
static void test_a_lead_byte_alone_promises_only_what_it_can_become(void) {
    static const struct {
        const char *gbnf, *bytes;
        bool ok;
    } cases[] = {
        {"root ::= \"{\"", "\xf0", false},
        {"root ::= \"{\"", "\xc2", false},
        {"root ::= [\\u0080-\\u07ff]", "\xc2", true},
        {"root ::= [\\u0080-\\u07ff]", "\xe0", false},
        {"root ::= [\\ue000-\\uffff]", "\xed", false},
        {"root ::= [\\ud000-\\ud7ff]", "\xed", true},
        {"root ::= [\\U00010000-\\U0010ffff]", "\xf4", true},
        {"root ::= [\\U00010000-\\U0010ffff]", "\xe0", false},
        {"root ::= [^\\u0800-\\uffff]", "\xe0", false},
        {"root ::= [^\\u0800-\\u0fff]", "\xe0", false},
        {"root ::= [^\\u0800-\\u0ffe]", "\xe0", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mf_grammar *g = compile(cases[i].gbnf);
        mf_gmatch *m = NULL;
        mf_error err = {0};
        REQUIRE(g && !mf_gmatch_new(g, &m, &err), "case %zu", i);
        bool ok = mf_gmatch_accepts(m, cases[i].bytes, strlen(cases[i].bytes));
        CHECK(ok == cases[i].ok, "'%s' on byte %02X: %d", cases[i].gbnf, (unsigned char)cases[i].bytes[0],
              ok);
        mf_gmatch_free(m);
        mf_grammar_release(g);
    }
}

/* accepts() is asked thousands of times per token: it must leave the state exactly as it was. */
static void test_asking_changes_nothing(void) {
    mf_grammar *g = compile("root ::= \"{\" ( [a-z]+ \":\" [0-9]+ )? \"}\"");
    REQUIRE(g, "compile");
    mf_gmatch *m = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_gmatch_new(g, &m, &err), "%s", err.msg);
    const char *pieces[] = {"{", "ab", "c:", "12", "}"};
    for (int i = 0; i < 5; i++) {
        const char *probes[] = {"{", "}", "zz", ":", "9", "x:1}", "\xe4", ""};
        bool before[8], after[8];
        for (int k = 0; k < 8; k++) before[k] = mf_gmatch_accepts(m, probes[k], strlen(probes[k]));
        for (int k = 0; k < 8; k++) after[k] = mf_gmatch_accepts(m, probes[k], strlen(probes[k]));
        CHECK(!memcmp(before, after, sizeof before), "answers changed after asking, at piece %d", i);
        CHECK(!mf_gmatch_can_end(m), "whole before '}' (piece %d)", i);
        REQUIRE_OK(mf_gmatch_advance(m, pieces[i], strlen(pieces[i]), &err), "piece %d: %s", i, err.msg);
    }
    CHECK(mf_gmatch_must_end(m), "{abc:12} is whole");
    CHECK(mf_gmatch_advance(m, "x", 1, &err) == MF_E_INVAL, "text after the end");
    mf_gmatch_free(m);
    mf_grammar_release(g);
}

/* ---------------- the sampler over allowed tokens ---------------- */

typedef struct {
    int kind;
} allow_set;

static bool allow_fn(void *user, int32_t id) {
    const allow_set *a = user;
    switch (a->kind) {
    case 0:
        return id % 3 != 0; /* most tokens */
    case 1:
        return id % 97 == 5; /* a few, spread out */
    case 2:
        return id >= 990; /* a few, all unlikely below */
    default:
        return id == 7; /* one */
    }
}

/* A superset of the allowed ids, ascending: every id but multiples of 5 that set 0 would refuse anyway. */
static int32_t maybe_fn(void *user, int32_t *ids) {
    const allow_set *a = user;
    int32_t n = 0;
    for (int32_t i = 0; i < 1000; i++)
        if (a->kind != 0 || i % 15 != 0) ids[n++] = i;
    return n;
}

/* The invariant: mf_sampler_sample_allowed draws exactly what mf_sampler_sample draws from the same logits
 * with every disallowed token at -inf, seed for seed, for every stage of the chain. */
static void test_allowed_sampling_is_sampling_of_masked_logits(void) {
    enum { V = 1000, DRAWS = 150 };
    float *lg = malloc(sizeof *lg * V), *masked = malloc(sizeof *masked * V);
    REQUIRE(lg && masked, "memory");
    enum { NC = 14 };
    mf_sampler_params configs[NC];
    for (int c = 0; c < NC; c++) configs[c] = mf_sampler_default_params();
    configs[1].temp = 0;
    configs[2].top_k = 0;
    configs[3].top_k = 5, configs[3].penalty_repeat = 1.3f, configs[3].penalty_freq = 0.2f;
    configs[4].typ_p = 0.8f;
    configs[5].top_k = 300, configs[5].top_p = 0.7f;
    configs[6].temp = 0, configs[6].penalty_present = 0.5f;
    configs[7].dry_multiplier = 2.0f, configs[7].dry_allowed_length = 1; /* DRY: every repeat counts */
    configs[8].top_n_sigma = 1.0f, configs[8].min_p = 0;
    configs[9].xtc_probability = 0.7f, configs[9].xtc_threshold = 0.05f, configs[9].min_p = 0;
    configs[10].dynatemp_range = 0.5f, configs[10].min_p = 0, configs[10].top_p = 1;
    configs[11].mirostat = 1;
    configs[12].mirostat = 2, configs[12].dry_multiplier = 1.0f, configs[12].dry_allowed_length = 1;
    configs[13].min_keep = 6, configs[13].top_p = 0.3f, configs[13].xtc_probability = 0.5f, configs[13].min_p = 0;
    uint64_t x = 0x1234567;
    int mismatches = 0, compared = 0;
    for (int c = 0; c < NC; c++) {
        for (int kind = 0; kind < 4; kind++) {
            allow_set a = {kind};
            mf_sampler *s1 = NULL, *s2 = NULL;
            mf_error err = {0};
            REQUIRE_OK(mf_sampler_new(&configs[c], V, &s1, &err), "%s", err.msg);
            REQUIRE_OK(mf_sampler_new(&configs[c], V, &s2, &err), "%s", err.msg);
            for (int d = 0; d < DRAWS; d++) {
                for (int i = 0; i < V; i++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    lg[i] = (float)((x >> 40) % 2000) / 100.0f - 10.0f;
                    masked[i] = allow_fn(&a, i) ? lg[i] : -INFINITY;
                }
                const mf_token_filter f = {allow_fn, (d & 1) ? maybe_fn : NULL, &a};
                mf_token t1 = mf_sampler_sample_allowed(s1, lg, &f), t2 = mf_sampler_sample(s2, masked);
                compared++;
                if (t1 != t2 && mismatches++ < 5)
                    printf("  config %d, set %d, draw %d: %d vs %d\n", c, kind, d, t1, t2);
                CHECK(t1 >= 0 && allow_fn(&a, t1), "config %d set %d drew %d, not allowed", c, kind, t1);
                mf_sampler_accept(s1, t1);
                mf_sampler_accept(s2, t2);
            }
            mf_sampler_free(s1);
            mf_sampler_free(s2);
        }
    }
    printf("  %d draws compared, %d differ\n", compared, mismatches);
    CHECK(mismatches == 0, "%d of %d draws differ from sampling masked logits", mismatches, compared);
    free(lg);
    free(masked);
}

static bool allow_none(void *user, int32_t id) {
    return false;
}

static void test_a_filter_that_allows_nothing_gives_minus_one(void) {
    mf_sampler *s = NULL;
    mf_error err = {0};
    mf_sampler_params sp = mf_sampler_default_params();
    REQUIRE_OK(mf_sampler_new(&sp, 100, &s, &err), "%s", err.msg);
    float lg[100] = {0};
    const mf_token_filter f = {allow_none, NULL, NULL};
    CHECK(mf_sampler_sample_allowed(s, lg, &f) == -1, "a token from an empty set");
    mf_sampler_free(s);
}

/* ---------------- generation on a synthetic model ---------------- */

static const mf_token k_prompt[] = {785, 6722, 315, 9625, 374};

typedef struct {
    mf_token tok[600];
    int32_t n;
    char text[8192];
    size_t len;
    int status;
} result;

/* Generates under gbnf (NULL: none) with sp, drafting `drafts` of the reference tokens ref (with every
 * third drafted token wrong) when ref is given. */
static int run(const mf_grammar *gr, mf_sampler_params sp, const result *ref, result *r) {
    memset(r, 0, sizeof *r);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 1;
    mf_context *ctx = NULL;
    mf_gen *g = NULL;
    mf_error err = {0};
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = sp;
    gp.n_predict = 300;
    int rc = mf_context_new(model, &cp, &ctx, &err);
    if (!rc) rc = mf_gen_new(ctx, &gp, &g, &err);
    if (!rc && gr) rc = mf_gen_set_grammar(g, gr, NULL, NULL, &err);
    if (!rc) rc = mf_gen_feed(g, k_prompt, 5, &err);
    for (mf_gen_out o = {0}; !rc && o.status == MF_GEN_RUNNING;) {
        mf_token d[4];
        int32_t nd = 0;
        for (; ref && nd < 4 && r->n + nd < ref->n; nd++)
            d[nd] = (r->n + nd) % 3 == 2 ? 1234 : ref->tok[r->n + nd];
        rc = mf_gen_step_draft(g, d, nd, &o, &err);
        if (rc) break;
        memcpy(r->tok + r->n, o.tokens, sizeof *o.tokens * (size_t)o.n_tokens);
        r->n += o.n_tokens;
        memcpy(r->text + r->len, o.text, o.text_len);
        r->len += o.text_len;
        r->status = o.status;
    }
    if (rc) printf("  generation: %s\n", err.msg);
    mf_gen_free(g);
    mf_context_free(ctx);
    return rc;
}

static const char k_record[] =
    "root ::= \"{\\\"n\\\": \" [1-9] [0-9]{0,2} \", \\\"s\\\": \\\"\" [a-z ]{1,12} \"\\\"}\"";

/* Whatever the model would say, the text is a sentence of the grammar and ends with end-of-generation. */
static void test_every_output_is_a_sentence_of_the_grammar(void) {
    mf_grammar *g = compile(k_record);
    REQUIRE(g, "compile");
    for (int k = 0; k < 4; k++) {
        mf_sampler_params sp = mf_sampler_default_params();
        sp.temp = k == 0 ? 0.0f : 1.0f;
        sp.seed = (uint64_t)k;
        sp.top_k = k == 3 ? 0 : 40;
        result r;
        REQUIRE(run(g, sp, NULL, &r) == 0, "run %d", k);
        printf("  run %d: %d tokens, %s: %.*s\n", k, r.n, mf_gen_status_name(r.status), (int)r.len, r.text);
        CHECK(r.status == MF_GEN_EOG, "run %d ended %s", k, mf_gen_status_name(r.status));
        CHECK(mf_grammar_matches(g, r.text, r.len), "run %d: '%.*s' is not a sentence", k, (int)r.len,
              r.text);
    }
    mf_grammar_release(g);
}

/* Drafted tokens are verified one sample at a time, the grammar moving past each committed one: the output
 * is the plain grammar output, token for token. */
static void test_drafts_under_a_grammar_give_the_plain_output(void) {
    mf_grammar *g = compile(k_record);
    REQUIRE(g, "compile");
    for (int k = 0; k < 2; k++) {
        mf_sampler_params sp = mf_sampler_default_params();
        sp.temp = k ? 0.7f : 0.0f;
        result plain, drafted;
        REQUIRE(run(g, sp, NULL, &plain) == 0 && run(g, sp, &plain, &drafted) == 0, "runs");
        CHECK(plain.n == drafted.n && !memcmp(plain.tok, drafted.tok, sizeof *plain.tok * (size_t)plain.n) &&
                  plain.status == drafted.status,
              "temp %.1f: %d tokens plain, %d drafted", sp.temp, plain.n, drafted.n);
    }
    mf_grammar_release(g);
}

static mf_constraint *constraint(const char *gbnf, const char *open, const char *close, mf_grammar **g) {
    *g = compile(gbnf);
    mf_constraint *c = NULL;
    mf_error err = {0};
    if (*g && mf_constraint_new(model, *g, open, close, &c, &err)) printf("  constraint: %s\n", err.msg);
    return c;
}

static int32_t id_of(const char *text) {
    mf_tok_ids ids = {0};
    mf_error err = {0};
    int32_t id = -1;
    if (!mf_tok_encode(model->tok, text, strlen(text), MF_TOK_PARSE_SPECIAL, &ids, &err) && ids.n == 1)
        id = ids.ids[0];
    free(ids.ids);
    return id;
}

/* End of generation only where the sentence is whole; control tokens never; only EOG where nothing may
 * follow. */
static void test_end_only_where_the_sentence_is_whole(void) {
    mf_grammar *g;
    mf_constraint *c = constraint("root ::= \"ab\" \"c\"?", NULL, NULL, &g);
    REQUIRE(c, "constraint");
    const int32_t eos = mf_tok_eos(model->tok), a = id_of("a"), b = id_of("b"), cc = id_of("c"),
                  im = id_of("<|im_start|>");
    REQUIRE(eos >= 0 && a >= 0 && b >= 0 && cc >= 0 && im >= 0, "ids %d %d %d %d %d", eos, a, b, cc, im);
    mf_error err = {0};
    CHECK(!mf_constraint_allow(c, eos) && mf_constraint_allow(c, a) && !mf_constraint_allow(c, b),
          "at the start");
    CHECK(!mf_constraint_allow(c, im), "a control token");
    REQUIRE_OK(mf_constraint_commit(c, a, &err), "%s", err.msg);
    REQUIRE_OK(mf_constraint_commit(c, b, &err), "%s", err.msg);
    CHECK(mf_constraint_allow(c, eos) && mf_constraint_allow(c, cc), "after ab: the end, or c");
    REQUIRE_OK(mf_constraint_commit(c, cc, &err), "%s", err.msg);
    int32_t allowed = 0;
    for (int32_t t = 0; t < n_vocab; t++) allowed += mf_constraint_allow(c, t);
    CHECK(allowed >= 1 && mf_constraint_allow(c, eos),
          "after abc: %d tokens allowed, want only end-of-generation", allowed);
    CHECK(allowed == model->n_eog, "after abc: %d tokens allowed, %d end-of-generation tokens", allowed,
          model->n_eog);
    mf_constraint_free(c);
    mf_grammar_release(g);
}

/* A turn that opens with <think> is free until </think> (spelt in any tokens), then held; a turn that
 * starts otherwise is held from its first token. */
static void test_a_free_block_opens_only_at_the_start(void) {
    mf_grammar *g;
    mf_constraint *c = constraint("root ::= \"x\"", "<think>", "</think>", &g);
    REQUIRE(c, "constraint");
    const int32_t open = id_of("<think>"), lt = id_of("</"), think = id_of("think"), gt = id_of(">"),
                  x = id_of("x"), y = id_of("y"), close = id_of("</think>");
    mf_error err = {0};
    REQUIRE(open >= 0 && lt >= 0 && think >= 0 && gt >= 0 && x >= 0 && y >= 0 && close >= 0, "ids");
    CHECK(mf_constraint_active(c) && mf_constraint_allow(c, open) && mf_constraint_allow(c, x) &&
              !mf_constraint_allow(c, y),
          "at the start: <think> or the grammar's x");
    REQUIRE_OK(mf_constraint_commit(c, open, &err), "%s", err.msg);
    CHECK(!mf_constraint_active(c), "held inside the free block");
    REQUIRE_OK(mf_constraint_commit(c, y, &err), "%s", err.msg);
    REQUIRE_OK(mf_constraint_commit(c, lt, &err), "%s", err.msg);
    REQUIRE_OK(mf_constraint_commit(c, think, &err), "%s", err.msg);
    CHECK(!mf_constraint_active(c), "held after </think");
    REQUIRE_OK(mf_constraint_commit(c, gt, &err), "%s", err.msg);
    CHECK(mf_constraint_active(c), "free after </think> spelt in three tokens");
    CHECK(mf_constraint_allow(c, x) && !mf_constraint_allow(c, y) && !mf_constraint_allow(c, open),
          "after the block: x only");
    mf_constraint_reset(c);
    REQUIRE_OK(mf_constraint_commit(c, open, &err), "%s", err.msg);
    REQUIRE_OK(mf_constraint_commit(c, close, &err), "%s", err.msg);
    CHECK(mf_constraint_active(c), "free after the </think> token");
    mf_constraint_reset(c);
    REQUIRE_OK(mf_constraint_commit(c, x, &err), "%s", err.msg);
    CHECK(!mf_constraint_allow(c, open), "<think> after the first token");
    mf_constraint_free(c);
    mf_grammar_release(g);
    mf_constraint *bad = NULL;
    g = compile("root ::= \"x\"");
    CHECK(mf_constraint_new(model, g, "<thi", "nk>", &bad, &err) == MF_E_UNSUPPORTED &&
              strstr(err.msg, "one token"),
          "an opening text that is no single token: %s", err.msg);
    CHECK(mf_constraint_new(model, g, "<think>", NULL, &bad, &err) == MF_E_INVAL, "an open without a close");
    mf_grammar_release(g);
}

static void test_grammar_refused_with_ignore_eos(void) {
    mf_grammar *g = compile("root ::= \"a\"");
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    mf_context *ctx = NULL;
    mf_gen *gen = NULL;
    mf_error err = {0};
    mf_gen_params gp = mf_gen_default_params();
    gp.ignore_eos = true;
    REQUIRE(g && !mf_context_new(model, &cp, &ctx, &err) && !mf_gen_new(ctx, &gp, &gen, &err), "%s", err.msg);
    CHECK(mf_gen_set_grammar(gen, g, NULL, NULL, &err) == MF_E_INVAL && strstr(err.msg, "ignore_eos"), "%s",
          err.msg);
    mf_gen_free(gen);
    mf_context_free(ctx);
    mf_grammar_release(g);
}

int main(void) {
    RUN(test_gbnf_errors_name_the_place_and_the_rule);
    RUN(test_grammar_matches_its_sentences_and_nothing_else);
    RUN(test_pieces_that_split_a_character_wait_for_its_end);
    RUN(test_a_lead_byte_alone_promises_only_what_it_can_become);
    RUN(test_asking_changes_nothing);
    RUN(test_allowed_sampling_is_sampling_of_masked_logits);
    RUN(test_a_filter_that_allows_nothing_gives_minus_one);
    snprintf(path, sizeof path, "%s/grammar-qwen3.gguf", mf_test_tmpdir());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --arch qwen3 --type q8_0 --seed 5 -q -o %s", mf_test_genmodel(), path);
    mf_error err = {0};
    if (system(cmd) != 0 || mf_model_load(path, NULL, &model, &err)) {
        printf("FAIL: the test model: %s\n", err.msg);
        return mf_test_done() | 1;
    }
    mf_model_info info;
    mf_model_get_info(model, &info);
    n_vocab = info.n_vocab;
    RUN(test_every_output_is_a_sentence_of_the_grammar);
    RUN(test_drafts_under_a_grammar_give_the_plain_output);
    RUN(test_end_only_where_the_sentence_is_whole);
    RUN(test_a_free_block_opens_only_at_the_start);
    RUN(test_grammar_refused_with_ignore_eos);
    mf_model_free(model);
    remove(path);
    return mf_test_done();
}
