/* libFuzzer harness: constrained decoding's compilers and matcher (src/grammar).
 *
 * Input: byte 0 picks the mode and where a text is cut; then a grammar (GBNF, or a JSON Schema when bit 0
 * is set), a NUL, and a text to match.  Properties:
 *   - any grammar or schema is compiled or refused, never crashes, hangs or leaks; a schema that converts
 *     gives GBNF that compiles (the converter never writes what the compiler refuses);
 *   - a text a schema's grammar accepts is JSON (cJSON parses it): the grammar is never looser than JSON;
 *   - the matcher agrees with itself: fed in two pieces (cut where byte 0 says, even inside a UTF-8
 *     character), each piece is accepted exactly when advancing by it succeeds, and the end state says
 *     "whole" exactly when mf_grammar_matches does;
 *   - renaming every rule (mf_gbnf_prefix) and starting from the renamed root changes no answer. */
#include "fuzz.h"

#include "grammar/grammar.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

/* Feeds text in two pieces cut at `cut`; returns whether the whole text was taken and is a sentence. */
static bool in_two_pieces(const mf_grammar *g, const char *text, size_t n, size_t cut) {
    mf_gmatch *m = NULL;
    if (mf_gmatch_new(g, &m, NULL)) return false;
    bool taken = true;
    const size_t at[3] = {0, cut, n};
    for (int k = 0; k < 2 && taken; k++) {
        const char *p = text + at[k];
        const size_t len = at[k + 1] - at[k];
        const bool yes = mf_gmatch_accepts(m, p, len);
        const bool again = mf_gmatch_accepts(m, p, len); /* asking changes nothing */
        FAIL_IF(yes != again);
        const int rc = mf_gmatch_advance(m, p, len, NULL);
        /* a refusal for ambiguity (MF_E_UNSUPPORTED) is also a "no" from accepts */
        FAIL_IF(yes != (rc == 0));
        taken = rc == 0;
    }
    bool whole = taken && mf_gmatch_can_end(m);
    FAIL_IF(taken && mf_gmatch_must_end(m) && !whole);
    mf_gmatch_free(m);
    return whole;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    const char *body = (const char *)data + 1;
    const size_t n = size - 1;
    const char *sep = memchr(body, 0, n);
    const size_t glen = sep ? (size_t)(sep - body) : n;
    const char *text = sep ? sep + 1 : "";
    const size_t tlen = sep ? n - glen - 1 : 0;

    char *gbnf = NULL;
    const bool schema = mode & 1;
    if (schema) {
        if (mf_json_schema_to_gbnf(body, glen, &gbnf, NULL)) return 0;
    } else if (!(gbnf = malloc(glen + 1))) {
        return 0;
    } else {
        memcpy(gbnf, body, glen);
        gbnf[glen] = 0;
    }
    mf_grammar *g = NULL;
    const int rc = mf_grammar_compile(gbnf, strlen(gbnf), &g, NULL);
    FAIL_IF(schema && rc && rc != MF_E_NOMEM && rc != MF_E_UNSUPPORTED);
    if (!rc) {
        const bool whole = mf_grammar_matches(g, text, tlen);
        FAIL_IF(in_two_pieces(g, text, tlen, tlen ? (size_t)(mode >> 1) % (tlen + 1) : 0) != whole);
        if (schema && whole) {
            char *t = malloc(tlen + 1);
            if (t) {
                memcpy(t, text, tlen);
                t[tlen] = 0;
                cJSON *o = cJSON_ParseWithLength(t, tlen);
                FAIL_IF(!o);
                cJSON_Delete(o);
                free(t);
            }
        }
        char *renamed = NULL, *joined = NULL;
        if (!mf_gbnf_prefix(gbnf, strlen(gbnf), "z-", &renamed, NULL) &&
            (joined = malloc(strlen(renamed) + 32))) {
            sprintf(joined, "root ::= z-root\n%s", renamed);
            mf_grammar *h = NULL;
            const int rc2 = mf_grammar_compile(joined, strlen(joined), &h, NULL);
            FAIL_IF(rc2 && rc2 != MF_E_NOMEM && rc2 != MF_E_UNSUPPORTED); /* one more rule may pass a limit */
            FAIL_IF(!rc2 && mf_grammar_matches(h, text, tlen) != whole);
            mf_grammar_release(h);
        }
        free(renamed);
        free(joined);
    }
    mf_grammar_release(g);
    free(gbnf);
    return 0;
}
