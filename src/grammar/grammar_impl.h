/* grammar internals: the compiled form gbnf.c writes and match.c reads.
 *
 * Every rule is a run of elements in one flat array: its alternatives separated by GE_ALT, the last one
 * closed by GE_END.  A sequence element is a character test (one code point, a class, any) or a reference
 * to a rule.  Groups and repetitions were turned into generated rules at compile time, so a matcher only
 * ever sees these six kinds. */
#ifndef MF_GRAMMAR_IMPL_H
#define MF_GRAMMAR_IMPL_H

#include "grammar/grammar.h"

enum {
    GE_END = 0, /* end of the rule's last alternative */
    GE_ALT,     /* end of an alternative, another follows */
    GE_REF,     /* value: rule id */
    GE_CHAR,    /* value: code point */
    GE_CLASS,   /* value: class id */
    GE_ANY,     /* any code point */
};

typedef struct {
    uint32_t type, value;
} mf_ge;

typedef struct {
    uint32_t lo, hi; /* inclusive */
} mf_grange;

typedef struct {
    uint32_t first, n; /* ranges[first .. first + n) */
    bool neg;
} mf_gclass;

struct mf_grammar {
    mf_ge *el;
    uint32_t n_el;
    uint32_t *rule; /* rule id -> index of its first element */
    int32_t n_rules;
    uint32_t root;
    mf_grange *ranges;
    uint32_t n_ranges;
    mf_gclass *cls;
    uint32_t n_cls;
};

static inline bool mf_ge_is_end(const mf_ge *e) {
    return e->type == GE_END || e->type == GE_ALT;
}

#endif
