/* Tests that drive ATTENTION by hand: the old dense window form ([stride, n_tok], column t = {count, cell
 * ids}) turned into the op's spans buffer (graph.h): {L, n_tok}, {offset, count} per token, then each
 * token's list.  Free the result with free(). */
#ifndef MF_TEST_SPANS_H
#define MF_TEST_SPANS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int32_t *mf_test_spans(const int32_t *win, int64_t stride, int64_t n_tok) {
    int64_t len = 2 + 2 * n_tok;
    for (int64_t t = 0; t < n_tok; t++) len += win[t * stride] > 0 ? win[t * stride] : 0;
    int32_t *s = malloc(sizeof(int32_t) * (size_t)len);
    if (!s) return NULL;
    s[0] = (int32_t)len;
    s[1] = (int32_t)n_tok;
    int64_t off = 2 + 2 * n_tok;
    for (int64_t t = 0; t < n_tok; t++) {
        const int32_t cnt = win[t * stride];
        s[2 + 2 * t] = (int32_t)off;
        s[3 + 2 * t] = cnt;
        if (cnt > 0) memcpy(s + off, win + t * stride + 1, sizeof(int32_t) * (size_t)cnt);
        off += cnt > 0 ? cnt : 0;
    }
    return s;
}

#endif
