/* server/utf8: what the server sends is JSON, and JSON text is UTF-8.  Requests are checked against
 * core/utf8's rule (a body or field that is not UTF-8 is refused); generated text is made to follow it with
 * mf_utf8_lossy (U+FFFD), because a token's piece may be part of a character and the tokens after it need
 * not complete it. */
#ifndef MF_SERVER_UTF8_H
#define MF_SERVER_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* True when s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
bool mf_srv_utf8_valid(const char *s, size_t n);
/* Replaces every byte that is not part of well-formed UTF-8 with '?', in place (for an error message of
 * fixed size that may quote what a client sent). */
void mf_srv_utf8_clean(char *s);
/* s[0..n) as a NUL-terminated UTF-8 copy, each maximal ill-formed subpart one U+FFFD (mf_utf8_lossy), its
 * length in *len (len may be NULL; the copy may hold NUL bytes of s); the caller frees it.  NULL when out of
 * memory. */
char *mf_srv_utf8_lossy_dup(const char *s, size_t n, size_t *len);

#endif
