#!/usr/bin/env bash
# include/minfer.h is all an embedder needs: it compiles with -Iinclude alone (no -Isrc) as C and C++, defines
# the error struct, codes and KV type ids itself, and leaks none of the internal macros or helpers of
# src/core/core.h (a program may use those names for its own things).  A program built that way links
# against libminfer.a and gets the codes back.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
D="$TMP/public_header"
rm -rf "$D" && mkdir -p "$D"

cat >"$D/embed.c" <<'EOF'
#include <minfer.h>
#include <string.h>

/* internal macros of core/core.h must not be visible */
#if defined(MF_ARRAY_LEN) || defined(MF_MIN) || defined(MF_MAX) || defined(MF_CORE_H)
#error "minfer.h exposes core/core.h's internal macros"
#endif
/* nor its internal functions: these objects would clash with their declarations */
static int mf_err = 1, mf_add_u64 = 2, mf_log = 3, mf_aligned_alloc = 4;

int main(void) {
    mf_error err;
    memset(&err, 0, sizeof err);
    mf_context_params cp = mf_context_default_params();
    if (cp.type_k != MF_KV_TYPE_F16 || cp.type_v != MF_KV_TYPE_F16) return 3; /* the documented default */
    cp.type_v = MF_KV_TYPE_Q8_0;
    mf_model *m = NULL;
    int rc = mf_model_load("", NULL, &m, &err); /* no path: refused with MF_E_INVAL */
    if (rc != MF_E_INVAL || strcmp(mf_err_code_name(rc), "invalid argument") != 0 || !err.msg[0]) return 1;
    if (mf_model_load("", NULL, &m, NULL) != MF_E_INVAL) return 2; /* err is optional */
    return (int)cp.type_v - MF_KV_TYPE_Q8_0 + (mf_err + mf_add_u64 + mf_log + mf_aligned_alloc) * 0;
}
EOF

for cc in gcc clang; do
    command -v "$cc" >/dev/null || continue
    if "$cc" -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -Iinclude "$D/embed.c" 2>"$D/err_$cc"; then
        ok "c_$cc"
    else
        bad "c_$cc" "$(head -c 600 "$D/err_$cc")"
    fi
done
for cxx in g++ clang++; do
    command -v "$cxx" >/dev/null || continue
    if "$cxx" -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ -Iinclude "$D/embed.c" 2>"$D/err_$cxx"; then
        ok "cxx_$cxx"
    else
        bad "cxx_$cxx" "$(head -c 600 "$D/err_$cxx")"
    fi
done

# The same program linked against the library (the libraries the README names).
LIB="${MF_BUILD:-build}/libminfer.a"
libs=$(pkg-config --libs libpcre2-8 libutf8proc libcjson 2>/dev/null)
# a sanitizer build's library (make asan) needs the sanitizer runtimes at link time
if nm "$LIB" 2>/dev/null | grep -q __asan_; then libs="$libs -fsanitize=address,undefined"; fi
# (a cross build's run: MF_TEST_CC is the target's compiler, MF_TEST_EXEC the emulator; scripts/cross-test.sh)
if ${MF_TEST_CC:-gcc} -std=c11 -Iinclude "$D/embed.c" "$LIB" $libs -lm -pthread -o "$D/embed" 2>"$D/err_link"; then
    ${MF_TEST_EXEC:-} "$D/embed" && ok link_and_run || bad link_and_run "exit $? (want 0)"
else
    bad link "$(head -c 600 "$D/err_link")"
fi
finish
