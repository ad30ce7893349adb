/* server/utf8: well-formed UTF-8 checked, and '?' for what is not (see utf8.h). */
#include "server/utf8.h"

#include "core/utf8.h"

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
