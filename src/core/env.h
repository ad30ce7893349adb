/* core/env: every MINFER_* environment variable the library and the CLI read, in one table, and the strict
 * parsers the reading points use.  One table serves three readers: the parsers (allowed values, range,
 * default), mf_env_check (the CLI validates every variable once at startup) and `minfer --help`.
 *
 * Rules, the same for every variable:
 *   - surrounding blanks (space, tab) are ignored; an empty value counts as unset (the default), except
 *     for the presence flags (MINFER_DISABLE_CUDA, MINFER_SYNC_COPIES), where any setting means on;
 *   - words (booleans, enum values) match case-insensitively: MINFER_LOG=DEBUG is debug;
 *   - booleans: 1|true|on|yes and 0|false|off|no;
 *   - numbers: decimal digits only (no sign, no suffix), within the variable's range;
 *   - anything else is refused (MF_E_INVAL) with a message naming the variable, the value, what is
 *     allowed and the way out.  Nothing here falls back silently. */
#ifndef MF_CORE_ENV_H
#define MF_CORE_ENV_H

#include "core/core.h"

typedef enum {
    MF_ENV_BOOL,  /* 1|0, true|false, on|off, yes|no */
    MF_ENV_UINT,  /* decimal in [min, max] */
    MF_ENV_WORD,  /* one of `words` ("a|b|c") */
    MF_ENV_FLAG,  /* presence-checked: set (empty or 1) = on, unset = off; any other value is refused */
    MF_ENV_LIST,  /* parsed by its owner (MINFER_BACKENDS: the backend fence); listed here for --help */
    MF_ENV_COUNT, /* a decimal in [min, max], or one of `words` (MINFER_GPU_LAYERS: N|all|auto) */
} mf_env_kind;

typedef struct {
    const char *name;
    mf_env_kind kind;
    const char *words;     /* WORD: "error|warn|info|debug"; COUNT: the words besides a number ("all|auto") */
    uint64_t min, max;     /* UINT */
    uint64_t dflt;         /* BOOL 0/1, UINT the value, WORD the index (MF_ENV_NO_DEFAULT: none) */
    const char *dflt_text; /* help text for the default when the number alone does not say it (or NULL) */
    const char *allowed;   /* LIST/FLAG: the values, for help; UINT: the unit; else NULL */
    const char *help;      /* what it does, one line */
    /* WORD, optional: what a value is ("a KV cache type"); a bad value is then refused as "NAME=VALUE is not
     * <noun> (a, b, c); refusing rather than silently running with <default>" */
    const char *noun;
} mf_env_var;

#define MF_ENV_NO_DEFAULT UINT64_MAX

/* The table (for --help and tests): every variable, in help order. */
const mf_env_var *mf_env_vars(size_t *n);

/* Each reads `name` (which must be in the table with that kind; anything else is MF_E_INTERNAL).
 * Unset or empty: the table's default.  A bad value: MF_E_INVAL with the message; *out keeps the default. */
int mf_env_bool(const char *name, bool *out, mf_error *err);
int mf_env_uint(const char *name, uint64_t *out, mf_error *err);
/* *out is the index into the variable's words, or -1 when unset and the table names no default. */
int mf_env_word(const char *name, int *out, mf_error *err);
int mf_env_flag(const char *name, bool *out, mf_error *err);
/* COUNT: *out is the number, or -(1 + i) for the i-th word (all -> -1, auto -> -2); *set says whether the
 * variable was given (unset or blank: *out = the table's default, *set = false). */
int mf_env_count(const char *name, int64_t *out, bool *set, mf_error *err);

/* Validates every table variable this module can parse (all but the LIST kind, which its owner checks).
 * Returns the first refusal. */
int mf_env_check(mf_error *err);

/* The value as messages print it: at most ~64 bytes, non-printable bytes as \xNN.  Returns buf. */
const char *mf_env_show(const char *value, char *buf, size_t cap);

#endif
