/* grammar: constrained decoding.  A grammar in GBNF (llama.cpp's dialect, docs/GRAMMAR.md) is compiled
 * into rules of elements, and a matcher follows it as a set of pushdown stacks over Unicode code points
 * (the way llama.cpp's llama_grammar does), so the sampler can ask of any token "may these bytes come
 * next?".  JSON Schema is turned into GBNF text first (schema.c), so both travel one path.
 *
 * The dialect:
 *   name ::= alternatives          a rule (names: [A-Za-z0-9_-]+); the start rule is `root`
 *   a b                            sequence;   a | b   alternatives;   ( ... )  group
 *   "text"                         literal (escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH)
 *   [a-z0-9_] [^"\\]               character class, negated class (same escapes, plus \- and \^)
 *   .                              any character
 *   x* x+ x? x{m} x{m,} x{m,n}     repetition
 *   # comment                      to the end of the line
 * A rule's body ends at a newline outside parentheses; a newline may follow `|` and `::=`.  Every rule that
 * is referenced must be defined, and no rule may reach itself without consuming a character (left
 * recursion, which a stack matcher cannot follow): both are refused at compile time, naming the rule. */
#ifndef MF_GRAMMAR_H
#define MF_GRAMMAR_H

#include "core/core.h"

typedef struct mf_grammar mf_grammar; /* compiled, immutable: many matchers may share one */
typedef struct mf_gmatch mf_gmatch;   /* one position in a grammar (a generation's state) */

/* Compiles GBNF text (len bytes, need not be NUL-terminated).  A syntax error is MF_E_INVAL naming the
 * line, column and what was expected; an undefined rule, a missing `root`, left recursion likewise. */
int mf_grammar_compile(const char *text, size_t len, mf_grammar **out, mf_error *err);
void mf_grammar_release(mf_grammar *g);
int32_t mf_grammar_n_rules(const mf_grammar *g); /* after repetitions and groups became rules */

/* JSON Schema (the text of one JSON object or boolean) to GBNF text whose `root` matches exactly the JSON
 * texts the schema allows, written with bounded whitespace (docs/GRAMMAR.md lists the keywords).  A keyword
 * outside that list that would constrain the value is refused (MF_E_UNSUPPORTED, naming it and its path):
 * never a grammar looser than the schema.  *out malloc'd and NUL-terminated. */
int mf_json_schema_to_gbnf(const char *json, size_t len, char **out, mf_error *err);

/* GBNF text with every rule name prefixed (definitions and references; literals, classes and bounds kept),
 * so grammars written apart can be joined into one.  *out malloc'd and NUL-terminated. */
int mf_gbnf_prefix(const char *text, size_t len, const char *prefix, char **out, mf_error *err);

/* A matcher at the grammar's start. */
int mf_gmatch_new(const mf_grammar *g, mf_gmatch **out, mf_error *err);
void mf_gmatch_free(mf_gmatch *m);
void mf_gmatch_reset(mf_gmatch *m); /* back to the start */
/* Would these bytes be accepted next?  A trailing incomplete UTF-8 sequence counts when some character
 * starting with it could follow.  n == 0 is true.  The state does not change. */
bool mf_gmatch_accepts(mf_gmatch *m, const char *bytes, size_t n);
/* Moves past the bytes; MF_E_INVAL (state unchanged) where mf_gmatch_accepts would be false. */
int mf_gmatch_advance(mf_gmatch *m, const char *bytes, size_t n, mf_error *err);
/* The text so far is a complete sentence of the grammar (it may also go on). */
bool mf_gmatch_can_end(const mf_gmatch *m);
/* The text so far is complete and nothing may follow it. */
bool mf_gmatch_must_end(const mf_gmatch *m);

/* Whether the whole of text[0..len) is a sentence of the grammar (tests and tools). */
bool mf_grammar_matches(const mf_grammar *g, const char *text, size_t len);

#endif
