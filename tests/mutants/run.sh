#!/usr/bin/env bash
# Mutation check: every mutant in tests/mutants/mutants.txt must make the suite fail.
#
#   tests/mutants/run.sh [--list] [--no-baseline] [ID...]
#   (--list: the mutants and whether each search text is still found; no build)
#
# Copies the working tree (tracked and untracked, not ignored: uncommitted edits included) into a
# scratch folder, builds it once and runs the whole suite there (the baseline must pass, or every
# mutant would "die" for nothing).  Then, per mutant: apply the one text edit, rebuild (only what
# depends on the file), run the tests cheapest first and stop at the first failure, restore the file.
# One line per mutant:
#   KILLED   id  by TEST (seconds)      a test failed, crashed or timed out: good
#   SURVIVED id                          the whole suite passed: the suite misses this bug
#   STALE    id  (found N, want M)      the search text moved: update the entry
#   BROKEN   id  (does not build)       the mutant does not compile: fix the entry
# and a summary.  Exit status 0 only when every mutant was killed.
#
# Environment: MF_MUTANTS_TMP (scratch parent, default ${TMPDIR:-/tmp}), MF_MUTANTS_JOBS (make -j,
# default 2), MF_MUTANTS_TIMEOUT (seconds per test, default 900), MF_MUTANTS_KEEP=1 (keep the scratch),
# MF_MUTANTS_SKIP="test_engine engine" (leave these tests out: to see what else kills a mutant).
# Costs one full build and one suite run, plus per mutant one partial build and the tests up to the
# first failure (a mutant that only test_conformance kills runs everything).
set -u
# the body is one function, parsed whole before it runs: editing this file during a run cannot break it
main() {
cd "$(dirname "$0")/../.."
LIST=tests/mutants/mutants.txt
JOBS=${MF_MUTANTS_JOBS:-2}
TMO=${MF_MUTANTS_TIMEOUT:-900}
baseline=1 list_only=0
want_ids=()
for a in "$@"; do
    case "$a" in
    --list) list_only=1 ;;
    --no-baseline) baseline=0 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown flag '$a' (--list, --no-baseline, ID...)" >&2; exit 2 ;;
    *) want_ids+=("$a") ;;
    esac
done

# ---- parse the list into parallel arrays ----
ids=() files=() finds=() repls=() counts=() whys=() cpus=()
flush() {
    [ -z "${m_id:-}" ] && return 0
    if [ -z "${m_file:-}" ] || [ -z "${m_find:-}" ] || [ -z "${m_repl+x}" ]; then
        echo "run.sh: $LIST: mutant '$m_id' lacks file, find or repl" >&2; exit 2
    fi
    ids+=("$m_id"); files+=("$m_file"); finds+=("$m_find"); repls+=("$m_repl")
    counts+=("${m_count:-1}"); whys+=("${m_why:-}"); cpus+=("${m_cpu:-}")
    unset m_id m_file m_find m_repl m_count m_why m_cpu
}
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
    '#'*) continue ;;
    '') flush ;;
    id:\ *)
        # a block without its blank line would take the next block's keys over its own
        [ -n "${m_id:-}" ] && { echo "run.sh: $LIST: mutant '$m_id' runs into '${line#id: }' (a blank line must end each block)" >&2; exit 2; }
        m_id=${line#id: } ;;
    file:\ *) m_file=${line#file: } ;;
    find:\ *) m_find=${line#find: } ;;
    repl:\ *) m_repl=${line#repl: } ;;
    count:\ *) m_count=${line#count: } ;;
    why:\ *) m_why=${line#why: } ;;
    cpu:\ *) m_cpu=${line#cpu: } ;;
    *) echo "run.sh: $LIST: cannot read line: $line" >&2; exit 2 ;;
    esac
done <"$LIST"
flush
for w in "${want_ids[@]+"${want_ids[@]}"}"; do
    found=0
    for i in "${!ids[@]}"; do [ "${ids[$i]}" = "$w" ] && found=1; done
    [ $found = 1 ] || { echo "run.sh: no mutant '$w' in $LIST (--list shows them)" >&2; exit 2; }
done
selected() {
    [ ${#want_ids[@]} -eq 0 ] && return 0
    local w
    for w in "${want_ids[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}
occurrences() { # FILE TEXT: how many times TEXT occurs in FILE (0 when FILE is missing)
    [ -f "$1" ] || { echo 0; return; }
    local src rest
    src=$(cat "$1"; printf x)
    src=${src%x}
    rest=${src//"$2"/}
    echo $(((${#src} - ${#rest}) / ${#2}))
}
if [ $list_only = 1 ]; then # also a cheap staleness check: no build
    bad=0
    for i in "${!ids[@]}"; do
        got=$(occurrences "${files[$i]}" "${finds[$i]}") st=ok
        [ "$got" -ne "${counts[$i]}" ] && st="STALE(found $got, want ${counts[$i]})" && bad=1
        printf '%-26s %-30s %-4s %s\n' "${ids[$i]}" "${files[$i]}" "$st" "${whys[$i]}"
    done
    exit $bad
fi

# ---- scratch copy ----
parent=${MF_MUTANTS_TMP:-${TMPDIR:-/tmp}}
mkdir -p "$parent"
S=$(mktemp -d "$parent/minfer-mutants.XXXXXX") || exit 2
if git -C "$S" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # tests/cli/selfcontained.sh would list the enclosing repository's files, not the copy's
    echo "run.sh: the scratch $S is inside a git work tree; set MF_MUTANTS_TMP to a folder outside one" >&2
    rmdir "$S"; exit 2
fi
cleanup() { [ "${MF_MUTANTS_KEEP:-0}" = 1 ] && echo "scratch kept: $S" || rm -rf "$S"; }
trap cleanup EXIT
git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$S" || { echo "run.sh: copying the tree failed" >&2; exit 2; }
# installed test dependencies are git-ignored, so not copied: the server tests' npm client is linked in
[ -d tests/server/node_modules ] && ln -s "$PWD/tests/server/node_modules" "$S/tests/server/node_modules"
cd "$S"
export MF_BUILD=build MF_TEST_TMP=build/test-tmp
# warnings are not failures here: a mutant that only trips -Werror (an unused variable) must still run
MK=(make -j"$JOBS" BUILD=build WERROR=)

# The tests, cheapest first; each "fails" like in tests/run.sh: exit status, failed count, no RESULT line.
tests=()
for t in test_quant test_cpu_ops test_op_matrix test_kv test_sampler test_gguf test_graph test_sched \
    test_registry test_tok test_engine; do
    [ -f "tests/$t.c" ] && tests+=("build/tests/$t")
done
for t in tests/test_*.c; do # any other unit test not named above, before the CLI scripts
    b="build/tests/$(basename "$t" .c)"
    case " ${tests[*]} " in *" $b "*) ;; *) [ "$b" != build/tests/test_conformance ] && tests+=("$b") ;; esac
done
for s in tokenize info backends selfcontained genmodel bench engine; do
    [ -f "tests/cli/$s.sh" ] && tests+=("tests/cli/$s.sh")
done
for s in tests/cli/*.sh; do
    # mutants_list.sh checks that every search text is in the tree: in a mutated copy one never is
    [ "$s" = tests/cli/mutants_list.sh ] && continue
    case " ${tests[*]} " in *" $s "*) ;; *) tests+=("$s") ;; esac
done
tests+=(build/tests/test_conformance)
if [ -n "${MF_MUTANTS_SKIP:-}" ]; then # diagnosis only: which other test would kill a mutant
    kept=()
    for t in "${tests[@]}"; do
        case " $MF_MUTANTS_SKIP " in *" $(basename "$t" .sh) "* | *" $(basename "$t") "*) ;; *) kept+=("$t") ;; esac
    done
    tests=("${kept[@]}")
    echo "skipping: $MF_MUTANTS_SKIP (a diagnosis run: the check itself needs every test)"
fi

run_test() { # $1 test; returns 0 when it passed
    local t=$1 log="$MF_TEST_TMP/mutant-$(basename "$t").log" rc res f
    mkdir -p "$MF_TEST_TMP"
    if [[ "$t" == *.sh ]]; then timeout "$TMO" bash "$t" >"$log" 2>&1; else timeout "$TMO" "$t" >"$log" 2>&1; fi
    rc=$?
    res=$(grep -E '^RESULT [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    [ -z "$res" ] && return 1
    f=$(echo "$res" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    [ "$rc" -eq 0 ] && [ "$f" -eq 0 ]
}

# first failing test, or "" when every test passed
suite() {
    local t t0
    for t in "${tests[@]}"; do
        t0=$(date +%s)
        if ! run_test "$t"; then
            echo "$(basename "$t") ($(($(date +%s) - t0))s)"
            return
        fi
    done
    echo ""
}

echo "scratch: $S"
if ! "${MK[@]}" >build.log 2>&1; then
    echo "run.sh: the unmutated tree does not build (log: $S/build.log)"; tail -n 20 build.log; exit 2
fi
if [ $baseline = 1 ]; then
    t0=$(date +%s)
    first=$(suite)
    if [ -n "$first" ]; then
        echo "run.sh: the unmutated suite fails ($first); fix that first"
        MF_MUTANTS_KEEP=1
        exit 2
    fi
    echo "baseline: the suite passes ($(($(date +%s) - t0))s)"
fi

killed=0 survived=0 stale=0 broken=0 notrun=0 n=0
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
for i in "${!ids[@]}"; do
    selected "${ids[$i]}" || continue
    n=$((n + 1))
    id=${ids[$i]} f=${files[$i]} find=${finds[$i]} repl=${repls[$i]} want=${counts[$i]}
    if [ ! -f "$f" ]; then
        printf 'STALE    %-26s (%s is gone)\n' "$id" "$f"; stale=$((stale + 1)); continue
    fi
    got=$(occurrences "$f" "$find")
    if [ "$got" -ne "$want" ]; then
        printf 'STALE    %-26s (%s: found %d, want %d: %s)\n' "$id" "$f" "$got" "$want" "$find"
        stale=$((stale + 1)); continue
    fi
    if [ -n "${cpus[$i]}" ] && [[ $cpu_flags != *" ${cpus[$i]} "* ]]; then
        printf 'NOT RUN  %-26s (only a CPU with %s runs the mutated code)\n' "$id" "${cpus[$i]}"
        notrun=$((notrun + 1)); continue
    fi
    cp -p "$f" "$S/.orig"
    src=$(cat "$f"; printf x) # keep trailing newlines
    src=${src%x}
    printf '%s' "${src//"$find"/"$repl"}" >"$f"
    t0=$(date +%s)
    if ! "${MK[@]}" >"build-$id.log" 2>&1; then
        printf 'BROKEN   %-26s (does not build: %s/build-%s.log)\n' "$id" "$S" "$id"
        broken=$((broken + 1))
        MF_MUTANTS_KEEP=1
    else
        first=$(suite)
        if [ -n "$first" ]; then
            printf 'KILLED   %-26s by %s\n' "$id" "$first"
            killed=$((killed + 1))
        else
            printf 'SURVIVED %-26s %s (%ds)\n' "$id" "${whys[$i]}" "$(($(date +%s) - t0))"
            survived=$((survived + 1))
        fi
    fi
    cp "$S/.orig" "$f"
    touch "$f" # newer than the mutated objects: the next build recompiles it
done
"${MK[@]}" >/dev/null 2>&1 # leave the scratch build unmutated (for MF_MUTANTS_KEEP)
echo "$n mutants: $killed killed, $survived survived, $stale stale, $broken broken$([ $notrun -gt 0 ] && echo ", $notrun not run (CPU)")"
[ $((survived + stale + broken)) -eq 0 ]
}
main "$@"
exit $?
