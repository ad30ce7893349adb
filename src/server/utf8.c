/* server/utf8: well-formed UTF-8 checked, and '?' for what is not (see utf8.h). */
#include "server/utf8.h"

#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>

bool mf_srv_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        int r = mf_utf8_seq(s + i, n - i);
        if (r < 0) return false;
        i += (size_t)r;
    }
    return true;
}

void mf_srv_utf8_clean(char *str) {
    unsigned char *s = (unsigned char *)str;
    size_t n = strlen(str), i = 0;
    while (i < n) {
        int r = mf_utf8_seq(s + i, n - i);
        if (r > 0) i += (size_t)r;
        else s[i++] = '?';
    }
}

char *mf_srv_utf8_lossy_dup(const char *s, size_t n, size_t *len) {
    char *out = malloc(3 * n + 1); /* a U+FFFD (3 bytes) per input byte at most */
    if (!out) return NULL;
    size_t l = mf_utf8_lossy(s, n, out);
    out[l] = 0;
    if (len) *len = l;
    return out;
}
