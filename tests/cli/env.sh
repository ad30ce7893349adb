#!/usr/bin/env bash
# MINFER_* at the command line: a bad value of any variable is refused before any command runs (exit 2,
# "Error: NAME='VALUE' ..." naming what is allowed; nothing on stdout, no model touched), good values still
# run, --help lists every variable (and still prints with a bad value), and README lists every variable the
# sources mention.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash
for v in MINFER_LOG MINFER_ISA MINFER_REPACK MINFER_PROFILE MINFER_SPIN MINFER_SPIN_US MINFER_BACKENDS \
    MINFER_DISABLE_CUDA MINFER_SYNC_COPIES MINFER_CACHE_TYPE MINFER_ATTN_ROT_DISABLE; do unset "$v"; done

M="$TMP/cli-env-q8_0.gguf"
if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 --seed 1 -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi

# refuse NAME VALUE WANT_STDERR: exit 2, the exact message, nothing on stdout - for `run` (which would
# load the model) and for `backends` (which loads nothing, so the check is the startup one).
refuse() {
    local name=$1 value=$2 want=$3 out err rc
    for cmd in "run -m $M -p hi -n 1 --temp 0" "backends"; do
        out=$(env "$name=$value" "$MINFER" $cmd 2>"$TMP/_err"); rc=$?
        err=$(cat "$TMP/_err")
        local t="${name}=${value}:${cmd%% *}"
        if [ "$rc" -ne 2 ]; then bad "$t" "exit $rc, wanted 2; stderr: $err"; continue; fi
        if [ "$err" != "$want" ]; then bad "$t" "stderr '$err', wanted '$want'"; continue; fi
        if [ -n "$out" ]; then bad "$t" "stdout not empty: $out"; continue; fi
        ok "$t"
    done
}
refuse MINFER_SPIN_US 99999999999999999999 \
    "Error: MINFER_SPIN_US='99999999999999999999' is out of range: allowed 0..60000000 microseconds (default: 3000); unset it or pick a value in range"
refuse MINFER_SPIN_US 60000001 \
    "Error: MINFER_SPIN_US='60000001' is out of range: allowed 0..60000000 microseconds (default: 3000); unset it or pick a value in range"
refuse MINFER_SPIN_US -5 \
    "Error: MINFER_SPIN_US='-5' is not a whole number: allowed 0..60000000 microseconds (decimal digits only; default: 3000); unset it or pick a value in range"
refuse MINFER_SPIN 12abc \
    "Error: MINFER_SPIN='12abc' is not a whole number: allowed 0..100000000 pause iterations (decimal digits only; default: 256); unset it or pick a value in range"
refuse MINFER_SPIN 100000001 \
    "Error: MINFER_SPIN='100000001' is out of range: allowed 0..100000000 pause iterations (default: 256); unset it or pick a value in range"
refuse MINFER_REPACK abc \
    "Error: MINFER_REPACK='abc' is not a boolean: allowed 1|0, true|false, on|off, yes|no (case-insensitive; default: 1); unset it or pick one of those"
refuse MINFER_PROFILE 2 \
    "Error: MINFER_PROFILE='2' is not a boolean: allowed 1|0, true|false, on|off, yes|no (case-insensitive; default: 0); unset it or pick one of those"
refuse MINFER_CACHE_TYPE q4 \
    "Error: MINFER_CACHE_TYPE=q4 is not a KV cache type (f32, f16, q8_0); refusing rather than silently running with f16"
refuse MINFER_LOG bogus \
    "Error: MINFER_LOG='bogus' is not one of error|warn|info|debug (case-insensitive; default: warn); unset it or pick one of those"
# the build architecture's kernel sets (an aarch64 build under scripts/cross-test.sh has scalar|neon)
isa_words=scalar\|avx2\|avx512\|amx isa_second=AVX2
if "$MINFER" --help 2>/dev/null | grep -q 'scalar|neon'; then isa_words=scalar\|neon isa_second=NEON; fi
refuse MINFER_ISA avx3 \
    "Error: MINFER_ISA='avx3' is not one of $isa_words (case-insensitive; default: the best this CPU has); unset it or pick one of those"
refuse MINFER_DISABLE_CUDA 0 \
    "Error: MINFER_DISABLE_CUDA='0' is refused: the variable is presence-checked (set means on, whatever the value, so this would not turn it off); allowed: empty or 1; unset it to turn it off"
refuse MINFER_SYNC_COPIES yes \
    "Error: MINFER_SYNC_COPIES='yes' is refused: the variable is presence-checked (set means on, whatever the value, so this would not turn it off); allowed: empty or 1; unset it to turn it off"
# MINFER_BACKENDS keeps the fence's own refusal (tests/cli/backends.sh has the rest)
expect backends_env_unknown 1 "Error: unknown backend 'gpu2'" -- env MINFER_BACKENDS=gpu2 "$MINFER" backends

# good values run, and the same greedy ids come out whatever the spin/log/profile settings
want=$("$MINFER" run -m "$M" -p hi -n 3 --temp 0 --ids -t 2 2>"$TMP/_err")
[ -n "$want" ] && ok baseline || bad baseline "no ids: $(cat "$TMP/_err")"
for kv in "MINFER_LOG=DEBUG" "MINFER_LOG= Error " "MINFER_LOG=" "MINFER_SPIN_US=0" "MINFER_SPIN_US=60000000" \
    "MINFER_SPIN=0" "MINFER_SPIN= 100 " "MINFER_PROFILE=off" "MINFER_PROFILE=1" "MINFER_DISABLE_CUDA=" \
    "MINFER_DISABLE_CUDA=1" "MINFER_SYNC_COPIES=1" "MINFER_ISA=scalar" "MINFER_ISA=$isa_second" "MINFER_CACHE_TYPE=F16"; do
    out=$(env "$kv" "$MINFER" run -m "$M" -p hi -n 3 --temp 0 --ids -t 2 2>"$TMP/_err"); rc=$?
    # scalar sums in another order: same shape, ids may differ in principle, so only the exit is compared there
    if [ "$rc" -ne 0 ]; then bad "good:$kv" "exit $rc: $(cat "$TMP/_err")"
    elif [ "$kv" != MINFER_ISA=scalar ] && [ "$out" != "$want" ]; then bad "good:$kv" "ids $out, wanted $want"
    else ok "good:$kv"; fi
done
# MINFER_ISA=amx (x86-64 builds): where Linux lists AMX it runs, with the same ids (the AMX kernels are bitwise
# the AVX-512 ones; -p of 40 tokens takes the tile path); elsewhere it is refused, saying why
if [ "$isa_second" = AVX2 ]; then
    long="one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
    if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
        a=$(env MINFER_ISA=avx512 "$MINFER" run -m "$M" -p "$long" -n 3 --temp 0 --ids -t 2 2>"$TMP/_err")
        b=$(env MINFER_ISA=AMX "$MINFER" run -m "$M" -p "$long" -n 3 --temp 0 --ids -t 2 2>>"$TMP/_err")
        if [ -n "$a" ] && [ "$a" = "$b" ]; then ok isa_amx_same_ids
        else bad isa_amx_same_ids "avx512 '$a', amx '$b': $(cat "$TMP/_err")"; fi
        # Linux refusing the tile state (a preloaded syscall() that fails ARCH_REQ_XCOMP_PERM): the AVX-512
        # kernels run, MINFER_LOG=info says why once, and MINFER_ISA=amx is refused with the reason.  Not
        # under ASan, whose runtime must come first among the preloaded libraries.
        if ! ldd "$MINFER" 2>/dev/null | grep -q libasan; then
            cat >"$TMP/deny_amx.c" <<'EOF_C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>
long syscall(long n, ...) {
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_arch_prctl && a[0] == 0x1023) { errno = EPERM; return -1; }
    long (*real)(long, ...) = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
EOF_C
            if ${CC:-cc} -shared -fPIC -o "$TMP/deny_amx.so" "$TMP/deny_amx.c" -ldl 2>"$TMP/_err"; then
                env LD_PRELOAD="$TMP/deny_amx.so" MINFER_LOG=info "$MINFER" run -m "$M" -p "$long" -n 3 --temp 0 --ids \
                    -t 2 >"$TMP/_out" 2>"$TMP/_err"
                n=$(grep -c "kernels: amx is not usable (the OS refused the tile data permission" "$TMP/_err")
                if [ "$n" = 1 ] && [ "$(cat "$TMP/_out")" = "$a" ]; then ok isa_amx_os_refused_info
                else bad isa_amx_os_refused_info "$n info lines, ids $(cat "$TMP/_out") (want $a): $(head -c 400 "$TMP/_err")"; fi
                expect isa_amx_os_refused 2 "Error: MINFER_ISA=amx: the OS refused the tile data permission: arch_prctl(ARCH_REQ_XCOMP_PERM) failed: Operation not permitted" \
                    -- env LD_PRELOAD="$TMP/deny_amx.so" MINFER_ISA=amx "$MINFER" run -m "$M" -p hi -n 1
            else
                bad isa_amx_os_refused "cannot build the preload shim: $(cat "$TMP/_err")"
            fi
        fi
    else
        expect isa_amx_refused 2 "Error: MINFER_ISA=amx: " -- env MINFER_ISA=amx "$MINFER" run -m "$M" -p hi -n 1
    fi
fi
# MINFER_LOG=DEBUG is debug, not ignored: debug lines appear (MINFER_LOG=error: none of them)
env MINFER_LOG=DEBUG "$MINFER" run -m "$M" -p hi -n 1 --temp 0 2>"$TMP/_dbg" >/dev/null
env MINFER_LOG=error "$MINFER" run -m "$M" -p hi -n 1 --temp 0 2>"$TMP/_err" >/dev/null
if grep -q "minfer debug:" "$TMP/_dbg" && ! grep -q "minfer debug:" "$TMP/_err"; then ok log_debug_uppercase
else bad log_debug_uppercase "no debug line with MINFER_LOG=DEBUG: $(head -c 300 "$TMP/_dbg")"; fi
# MINFER_REPACK=off is off (the file layout: no repacked matrices in the load line), =ON on
env MINFER_REPACK=off MINFER_LOG=info "$MINFER" run -m "$M" -p hi -n 1 --temp 0 2>"$TMP/_off" >/dev/null
env MINFER_REPACK=ON MINFER_LOG=info "$MINFER" run -m "$M" -p hi -n 1 --temp 0 2>"$TMP/_on" >/dev/null
# (aarch64 builds never repack: there =ON must be accepted and load the file layout as well)
repacks="repacked 15 weight matrices"; [ "$isa_second" = NEON ] && repacks="load:"
if grep -q "$repacks" "$TMP/_on" && ! grep -q "repacked" "$TMP/_off"; then ok repack_words
else bad repack_words "MINFER_REPACK=ON: $(head -c 300 "$TMP/_on"); =off: $(head -c 300 "$TMP/_off")"; fi

# --help lists every variable of the table (and prints with a bad value: it is where the values are)
help=$(env MINFER_LOG=bogus "$MINFER" --help 2>&1); rc=$?
[ "$rc" -eq 0 ] && ok help_with_bad_env || bad help_with_bad_env "exit $rc"
names=$(grep -rhoE 'MINFER_[A-Z0-9_]+' src | grep -v '^MINFER_H$' | sort -u)
[ "$(wc -l <<<"$names")" -ge 9 ] && ok names_found || bad names_found "$names"
for n in $names; do
    grep -qE "^  $n " <<<"$help" || bad "help_lists_$n" "minfer --help has no line for $n"
    grep -q "| \`$n\` |" README.md || bad "readme_lists_$n" "README.md's environment table has no row for $n"
done
ok names_listed
finish
