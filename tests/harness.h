/* A tiny test harness: every test binary prints "PASS name" / "FAIL name: why" per check group and
 * closes with "RESULT N passed, N failed, N skipped"; tests/run.sh adds them up.  Exit status 1 on failure.
 *
 *   static void test_x(void) { CHECK(a == b, "a=%d b=%d", a, b); }
 *   int main(void) { RUN(test_x); return mf_test_done(); }
 *
 * SKIP(reason) ends the current test as skipped (with the reason printed), never as passed;
 * mf_test_skip(name, reason) counts one named part of a test that did not run (a test that loops over cases).
 * Every skip prints "SKIP name: reason": tests/run.sh holds them against tests/expected-skips.txt. */
#ifndef MF_TEST_HARNESS_H
#define MF_TEST_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mf_t_passed, mf_t_failed, mf_t_skipped, mf_t_cur_failed, mf_t_cur_skipped;
static const char *mf_t_cur;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (mf_t_cur_failed < 10) {                                                            \
                fprintf(stdout, "  check failed %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
                fprintf(stdout, __VA_ARGS__);                                                      \
                fputc('\n', stdout);                                                               \
            }                                                                                      \
            mf_t_cur_failed++;                                                                     \
        }                                                                                          \
    } while (0)

/* CHECK that also returns from the test on failure (for checks later code depends on).
 * The condition is evaluated exactly once. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stdout, "  required check failed %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stdout, __VA_ARGS__);                                                          \
            fputc('\n', stdout);                                                                   \
            mf_t_cur_failed++;                                                                     \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* REQUIRE that a call returning an MF_E_* code succeeded (the call is evaluated once). */
#define REQUIRE_OK(call, ...)                                                                      \
    do {                                                                                           \
        int mf_t_rc_ = (call);                                                                     \
        REQUIRE(mf_t_rc_ == 0, __VA_ARGS__);                                                       \
    } while (0)

#define SKIP(...)                                                                                  \
    do {                                                                                           \
        fprintf(stdout, "SKIP %s: ", mf_t_cur);                                                    \
        fprintf(stdout, __VA_ARGS__);                                                              \
        fputc('\n', stdout);                                                                       \
        mf_t_cur_skipped = 1;                                                                      \
        return;                                                                                    \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        mf_t_cur = #fn;                                                                            \
        mf_t_cur_failed = 0;                                                                       \
        mf_t_cur_skipped = 0;                                                                      \
        fn();                                                                                      \
        if (mf_t_cur_failed) {                                                                     \
            fprintf(stdout, "FAIL %s (%d checks failed)\n", #fn, mf_t_cur_failed);                 \
            mf_t_failed++;                                                                         \
        } else if (mf_t_cur_skipped) {                                                             \
            mf_t_skipped++;                                                                        \
        } else {                                                                                   \
            fprintf(stdout, "PASS %s\n", #fn);                                                     \
            mf_t_passed++;                                                                         \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

/* A part of the current test (one case of its loop) that does not run here, counted as skipped with its own
 * name, so the run shows it instead of dropping it silently. */
__attribute__((format(printf, 2, 3))) static inline void mf_test_skip(const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "SKIP %s: ", name);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    mf_t_skipped++;
}

static inline int mf_test_done(void) {
    fprintf(stdout, "RESULT %d passed, %d failed, %d skipped\n", mf_t_passed, mf_t_failed, mf_t_skipped);
    return mf_t_failed ? 1 : 0;
}

/* Under a user-mode emulator (scripts/cross-test.sh sets MF_TEST_EMULATED=1) every float operation is emulated,
 * many times slower: tests whose cost is forward passes scale their repetitions down there (each says what it keeps);
 * the native run keeps them all, so no property goes untested. */
static inline int mf_test_emulated(void) {
    const char *e = getenv("MF_TEST_EMULATED");
    return e && !strcmp(e, "1");
}

/* The VmFlags of the mapping that holds p, from /proc/self/smaps, into flags (" rd wr ... hg": "hg" = advised
 * for transparent huge pages); false when no mapping holds it or the file cannot be read (not Linux). */
static inline bool mf_test_vm_flags(const void *p, char *flags, size_t cap) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return false;
    char line[512];
    bool in = false, found = false;
    flags[0] = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char c;
        if (sscanf(line, "%lx-%lx %c", &a, &b, &c) == 3) {
            in = (uintptr_t)p >= a && (uintptr_t)p < b;
            found |= in;
        } else if (in && !strncmp(line, "VmFlags:", 8)) {
            snprintf(flags, cap, "%s", line + 8);
        }
    }
    fclose(f);
    return found;
}

/* NULL where mf_test_vm_flags can show a mapping's madvise flags, else why not (a test skips with it) */
static inline const char *mf_test_vm_flags_unseen(void) {
#if !defined(__linux__)
    return "transparent huge pages are Linux's";
#else
    return mf_test_emulated() ? "under a user-mode emulator: its /proc/self/smaps does not carry the guest's madvise flags"
                              : NULL;
#endif
}

/* Where generated test artefacts go (models are generated at test time, never committed). */
/* The whole file, NUL-terminated (malloc'd; NULL if it cannot be read); *len = its size when len is not NULL. */
static inline char *mf_test_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    if (b && len) *len = (size_t)n;
    return b;
}

/* The generator the tests write their models with: $MF_TEST_GENMODEL where set (CI's ASan block names the
 * plain build's, so the models are not written by an instrumented binary; the goldens' sha256 checks still
 * hold it to this tree), else $MF_BUILD/mf-genmodel.  Not inlined, so the callers' snprintf sees a path of
 * unknown length as it did with getenv's, not a 1024-byte buffer it warns about. */
__attribute__((noinline, unused)) static const char *mf_test_genmodel(void) {
    static char path[1024];
    const char *g = getenv("MF_TEST_GENMODEL");
    if (g && *g) return g;
    const char *b = getenv("MF_BUILD");
    snprintf(path, sizeof path, "%s/mf-genmodel", b && *b ? b : "build");
    return path;
}

static inline const char *mf_test_tmpdir(void) {
    const char *d = getenv("MF_TEST_TMP");
    return d ? d : "build/test-tmp";
}

#endif
