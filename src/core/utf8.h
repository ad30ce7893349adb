/* core/utf8: the one rule for well-formed UTF-8, shared by the tokenizer (which repairs its input) and the
 * server (which checks requests and repairs what it sends): Unicode's table 3-7, and for ill-formed bytes
 * the "U+FFFD Substitution of Maximal Subparts" practice of chapter 3 (what WHATWG's decoder, Python's
 * errors="replace" and HuggingFace's lossy decode do). */
#ifndef MF_CORE_UTF8_H
#define MF_CORE_UTF8_H

#include <stddef.h>

/* Length of the well-formed sequence starting at s[0] (1..4), or -k where k >= 1 is the length of the
 * maximal ill-formed subpart to replace by one U+FFFD.  n >= 1. */
int mf_utf8_seq(const unsigned char *s, size_t n);
/* Copies s[0..n) to out with each maximal ill-formed subpart replaced by U+FFFD; out holds n + 2 bytes for
 * every such subpart (3 * n always do); returns the bytes written (no NUL added).  Splitting s before an ASCII or lead byte and converting
 * the parts gives the same bytes as converting the whole. */
size_t mf_utf8_lossy(const char *s, size_t n, char *out);

#endif
