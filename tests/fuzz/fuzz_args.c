/* libFuzzer harness: the --tokens parser of `minfer run` / `minfer eval` (mf_arg_token_ids in
 * src/cli/args.c, compiled into this harness), and the number parsers beside it.
 *
 * The input, NUL-terminated, is the flag's value.  Checked: an accepted list has n >= 0 ids, each a
 * non-negative int32; it prints back as "[a, b, ...]" and that text parses to the same list (so
 * acceptance does not depend on anything but the ids).  A refusal frees everything (LeakSanitizer). */
#include "fuzz.h"

#include "cli/cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    FAIL_IF(!s);
    memcpy(s, data, size);
    s[size] = 0;

    int32_t *ids = NULL, n = -1;
    if (mf_arg_token_ids("--tokens", s, &ids, &n)) {
        FAIL_IF(n < 0 || (n > 0 && !ids));
        char *again = malloc((size_t)n * 13 + 3);
        FAIL_IF(!again);
        size_t at = 0;
        again[at++] = '[';
        for (int32_t i = 0; i < n; i++) {
            FAIL_IF(ids[i] < 0);
            at += (size_t)sprintf(again + at, i ? ", %d" : "%d", ids[i]);
        }
        again[at++] = ']';
        again[at] = 0;
        int32_t *ids2 = NULL, n2 = -1;
        FAIL_IF(!mf_arg_token_ids("--tokens", again, &ids2, &n2));
        FAIL_IF(n2 != n || (n && memcmp(ids, ids2, (size_t)n * sizeof *ids)));
        free(ids2);
        free(again);
        free(ids);
    }

    long v;
    double d;
    (void)mf_arg_int("--n", s, -5, 1L << 40, &v);
    (void)mf_arg_float("--f", s, &d);
    free(s);
    return 0;
}
