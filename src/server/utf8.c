/* server/utf8: well-formed UTF-8 checked, and made (see utf8.h). */
#include "server/utf8.h"

#include <string.h>

/* The character at s[0..n): its length when well-formed (1-4), else 0, with *sub the length of its maximal
 * ill-formed subpart: the lead byte and the continuation bytes that could still have begun a character
 * (at least 1).  The second byte's range is Unicode's table 3-7: it rules out overlongs (after E0, F0),
 * surrogates (after ED) and everything past U+10FFFF (after F4). */
static size_t char_at(const unsigned char *s, size_t n, size_t *sub) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else {
        *sub = 1; /* a continuation byte, C0/C1 or F5-FF: nothing can follow it */
        return 0;
    }
    size_t k = 1;
    for (; k <= need && k < n && s[k] >= lo && s[k] <= hi; k++) lo = 0x80, hi = 0xBF;
    if (k == need + 1) return k;
    *sub = k;
    return 0;
}

bool mf_srv_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t sub;
    for (size_t i = 0, l; i < n; i += l)
        if (!(l = char_at(s + i, n - i, &sub))) return false;
    return true;
}

void mf_srv_utf8_clean(char *str) {
    unsigned char *s = (unsigned char *)str;
    size_t n = strlen(str), i = 0, sub;
    while (i < n) {
        size_t l = char_at(s + i, n - i, &sub);
        if (l) i += l;
        else s[i++] = '?';
    }
}

size_t mf_srv_utf8_lossy(const char *str, size_t n, char *out) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, o = 0, sub;
    while (i < n) {
        size_t l = char_at(s + i, n - i, &sub);
        if (l) {
            memcpy(out + o, s + i, l);
            o += l, i += l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3); /* U+FFFD */
            o += 3, i += sub;
        }
    }
    return o;
}
