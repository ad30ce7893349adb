#!/usr/bin/env bash
# Every mutant in tests/mutants/mutants.txt still finds its search text exactly as often as it says: a change
# that rewrites a mutated line leaves that mutant testing nothing (run.sh reports it STALE and skips it), and
# nothing else notices.  `tests/mutants/run.sh --list` is that check without a build.  The mutant runner
# itself never runs this script: in its mutated copy one search text is gone by design.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash

out=$(bash tests/mutants/run.sh --list 2>&1)
rc=$?
n=$(printf '%s\n' "$out" | grep -c .)
stale=$(printf '%s\n' "$out" | grep -E '^[a-z0-9-]+ +[^ ]+ +STALE' || true)
if [ $rc -eq 0 ] && [ -z "$stale" ] && [ "$n" -gt 0 ]; then
    ok "all $n mutants find their search text (tests/mutants/run.sh --list)"
else
    bad "mutants whose search text moved (update tests/mutants/mutants.txt)" "exit $rc; ${stale:-$(printf '%s\n' "$out" | tail -n 3)}"
fi
finish
