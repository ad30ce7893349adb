/* libFuzzer harness: the session file parser (src/engine/session.c, docs/SESSION.md).
 *
 * The input is a whole session file.  mf_session_parse runs on it as it is, and again on a copy whose
 * trailing checksum has been made valid for its bytes, so mutations reach the structure checks behind
 * the checksum (the length, the counts, positions, tokens, the RNG state) instead of all dying at it.
 * The comparison with a context needs a model and is covered by tests/test_session.c.
 *
 * Checked beyond "no sanitizer report": a refusal says why; an accepted file is exactly as long as its
 * header's counts make it, every row of every layer lies inside the input, positions rise strictly from
 * >= 0, tokens are in [0, n_vocab), an RNG state is never all zero; the first parse of an input whose
 * checksum was already valid agrees with the second. */
#include "fuzz.h"

#include "engine/session.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    return 0;
}

static volatile uint8_t g_sink;

static void inside(const uint8_t *p, uint64_t n, const uint8_t *data, size_t size) {
    FAIL_IF(n > size || p < data || p + n > data + size);
    if (n) g_sink ^= p[0] ^ p[n - 1];
}

/* 0 when accepted */
static int check(const uint8_t *data, size_t size) {
    mf_session_view v;
    mf_error err = {0};
    int rc = mf_session_parse(data, size, &v, &err);
    if (rc) {
        FAIL_IF(rc != MF_E_FORMAT || err.msg[0] == 0);
        return rc;
    }
    const mf_session_fp *f = &v.fp;
    FAIL_IF(v.size != size || v.n_cells < 0 || v.n_tokens < 0 || f->n_layer <= 0 || f->n_vocab <= 0);
    uint64_t per = (uint64_t)v.n_cells * (f->row_k + f->row_v);
    FAIL_IF(MF_SESSION_HEADER_BYTES + 4 * (uint64_t)v.n_cells + 4 * (uint64_t)v.n_tokens + v.app_len +
                per * (uint64_t)f->n_layer + 8 !=
            size);
    inside(v.pos, 4 * (uint64_t)v.n_cells, data, size);
    inside(v.tokens, 4 * (uint64_t)v.n_tokens, data, size);
    inside(v.app, v.app_len, data, size);
    for (int32_t i = 0; i < v.n_cells; i++) {
        FAIL_IF(mf_session_pos(&v, i) < 0 || (i > 0 && mf_session_pos(&v, i) <= mf_session_pos(&v, i - 1)));
        for (int32_t l = 0; l < f->n_layer; l++) {
            inside(mf_session_k_row(&v, l, i), f->row_k, data, size);
            inside(mf_session_v_row(&v, l, i), f->row_v, data, size);
        }
    }
    for (int32_t i = 0; i < v.n_tokens; i++) FAIL_IF(mf_session_token(&v, i) < 0 || mf_session_token(&v, i) >= f->n_vocab);
    FAIL_IF(v.has_rng && !(v.rng[0] | v.rng[1] | v.rng[2] | v.rng[3]));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int first = check(data, size);
    if (size < 8) return 0;
    uint8_t *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    uint64_t h = mf_xxh64(copy, size - 8, 0);
    bool was_valid = true;
    for (int i = 0; i < 8; i++) {
        was_valid &= copy[size - 8 + i] == (uint8_t)(h >> (8 * i));
        copy[size - 8 + i] = (uint8_t)(h >> (8 * i));
    }
    int second = check(copy, size);
    FAIL_IF(was_valid && (first == 0) != (second == 0));
    free(copy);
    return 0;
}
