#!/usr/bin/env bash
# Runs every libFuzzer harness built by `make fuzz` ($FUZZ_BUILD/fuzz/fuzz_<name>) for FUZZ_TIME
# seconds each, one after another, and prints one line per harness with its exec count.  Exits non-zero
# if any harness reported anything (crash, ASan, LeakSanitizer, UBSan, timeout, out of memory): the
# reproducer is kept under $FUZZ_BUILD/fuzz-out/<name>/ and the report's head is printed.
#
# The committed seeds (tests/fuzz/corpus/<name>/) are read, never written: new inputs go to the
# writable corpus $FUZZ_BUILD/fuzz-out/<name>/corpus/, which later runs start from.
#   FUZZ_BUILD  the build dir (build-fuzz)     FUZZ_TIME  seconds per harness (60)
#   FUZZ_ONLY   names to run ("tok gguf"; all by default)
#   FUZZ_ARGS   extra libFuzzer flags (e.g. "-jobs=2 -workers=2")
set -u
cd "$(dirname "$0")/../.."
B=${FUZZ_BUILD:-build-fuzz}
T=${FUZZ_TIME:-60}
ONLY=${FUZZ_ONLY:-}
shopt -s nullglob
bins=("$B"/fuzz/fuzz_*)
[ ${#bins[@]} -gt 0 ] || { echo "no harnesses in $B/fuzz (run: make fuzz)"; exit 1; }

# a report stops the run (halt_on_error) and leaks fail it; abort_on_error=0 keeps libFuzzer's own exit
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
for bin in "${bins[@]}"; do
    case $bin in *.d | *.o) continue ;; esac
    name=${bin##*/fuzz_}
    if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $name "* ]]; then continue; fi
    seeds=tests/fuzz/corpus/$name
    out=$B/fuzz-out/$name
    mkdir -p "$out/corpus"
    # reproducers of an earlier run move aside, so this run's verdict is its own
    if find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) |
        grep -q .; then
        mkdir -p "$out/earlier"
        find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) \
            -exec mv {} "$out/earlier/" \;
    fi
    dict=()
    [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
    log=$out/run.log
    t0=$(date +%s)
    # stderr of the code under test is closed (-close_fd_mask=2: the CLI parsers print refusals);
    # libFuzzer and the sanitizers keep writing their reports to the log.
    "$bin" -max_total_time="$T" -timeout=20 -rss_limit_mb=4096 -close_fd_mask=2 -print_final_stats=1 \
        -artifact_prefix="$out/" "${dict[@]}" ${FUZZ_ARGS:-} "$out/corpus" "$seeds" >"$log" 2>&1
    rc=$?
    t1=$(date +%s)
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | sed 's/cov: //')
    ncorp=$(find "$out/corpus" -type f | wc -l)
    artifacts=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
        -o -name 'oom-*' \) | head -n 3)
    if [ "$rc" -ne 0 ] || grep -qE '^==[0-9]+== ?ERROR|runtime error:|^SUMMARY:|property failed' "$log" || [ -n "$artifacts" ]; then
        printf 'FAIL fuzz_%-6s exit %d after %ds, %s execs; log %s\n' "$name" "$rc" "$((t1 - t0))" "${execs:-?}" "$log"
        [ -n "$artifacts" ] && echo "$artifacts" | sed 's/^/    reproducer: /'
        grep -E '^==[0-9]+== ?ERROR|runtime error:|^SUMMARY:|property failed|#[0-9]+ 0x.* in ' "$log" |
            head -n 12 | sed 's/^/    /'
        failed=$((failed + 1))
    else
        printf 'ok   fuzz_%-6s %10s execs in %4ds, 0 crashes (cov %s, corpus %d)\n' "$name" "${execs:-?}" \
            "$((t1 - t0))" "${cov:-?}" "$ncorp"
    fi
done
[ "$failed" -eq 0 ] || { echo "fuzz: $failed harness(es) failed"; exit 1; }
