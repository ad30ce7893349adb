/* server/utf8: what the server sends is JSON, and JSON text is UTF-8.  Requests are checked against these
 * rules (a body or field that is not UTF-8 is refused); generated text is made to follow them, because a
 * token's piece may be part of a character and the tokens after it need not complete it. */
#ifndef MF_SERVER_UTF8_H
#define MF_SERVER_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* True when s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
bool mf_srv_utf8_valid(const char *s, size_t n);
/* Replaces every byte that is not part of well-formed UTF-8 with '?', in place (for an error message of
 * fixed size that may quote what a client sent). */
void mf_srv_utf8_clean(char *s);
/* Copies s[0..n) to out with each maximal ill-formed subpart replaced by U+FFFD (Unicode's recommended
 * practice, chapter 3, "U+FFFD Substitution of Maximal Subparts": what WHATWG's decoder, Python's
 * errors="replace" and HuggingFace's lossy decode do, and what llama-server's JSON writer sends).  out holds
 * at least 3 * n bytes; returns the bytes written.  Splitting s before an ASCII or lead byte and converting
 * the parts gives the same bytes as converting the whole. */
size_t mf_srv_utf8_lossy(const char *s, size_t n, char *out);

#endif
