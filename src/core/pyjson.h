/* core/pyjson: a JSON text written again the way Python's json.dumps(value, ensure_ascii=False) writes the
 * value it parses to.  That is what a chat template's `tojson` puts into a prompt under transformers (the
 * Qwen templates write each tool that way), and what a Qwen model learnt to emit for a tool call's
 * arguments, so the prompt the engine renders is the one the model was trained on, byte for byte:
 *   - ", " between items and ": " after keys, no other whitespace; key order as given;
 *   - strings: only '"', '\\' and the controls escaped (\n \r \t \b \f, others \u00XX); every other
 *     character as UTF-8 (escapes such as \u00e9 or \/ decoded); a lone surrogate stays \udXXX;
 *   - numbers: an integer (no fraction, no exponent) keeps its digits ("-0" is 0); any other number is
 *     Python's repr of the double it parses to (1.5e-3 -> 0.0015, 1E2 -> 100.0, 1e400 -> Infinity).
 * A duplicated key is kept twice (Python keeps the last value, at the first key's place). */
#ifndef MF_CORE_PYJSON_H
#define MF_CORE_PYJSON_H

#include "core/core.h"

/* s[0..n) must be one JSON value (RFC 8259, UTF-8, at most 256 levels deep) with only whitespace around it;
 * anything else is MF_E_INVAL naming the byte offset.  *out malloc'd, NUL-terminated; out_len may be NULL. */
int mf_pyjson(const char *s, size_t n, char **out, size_t *out_len, mf_error *err);

#endif
