#!/usr/bin/env bash
# A clone needs nothing outside itself: no tracked file refers to a path outside the repository (a user's
# clone has no sibling folders), and the generator finds its tokenizer from any working directory with no
# flag and no MF_TOKENIZER_DIR.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
D="$TMP/selfcontained"
rm -rf "$D" && mkdir -p "$D" && D=$(cd "$D" && pwd -P)
repo=$(pwd -P)

# Every tracked text file except the big data files: relative paths that climb out of the repository
# (resolved from the file's folder and from the repository root, the two places a tool runs from) and
# absolute paths into the development machine's layout.
if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files >"$D/files"
else
    find . -type f -not -path './.git/*' -not -path "./${MF_BUILD:-build}*" | sed 's|^\./||' >"$D/files"
fi
scan() { # ROOT LISTING: prints FILE:LINE: PATH for each reference outside ROOT
    python3 - "$1" "$2" <<'PY'
import os, re, sys
repo, listing = sys.argv[1], sys.argv[2]
skip = ("tokenizers/", "tests/golden/", "tools/oracle/package-lock.json")
climb = re.compile(r"(?<![./])((?:\.\./)+)([\w.-]+)")
absolute = re.compile(r"(?<![\w.])/(?:work|home|root|mnt|old_root|farm)/[\w.-]+")
for rel in open(listing).read().split("\n"):
    if not rel or rel.startswith(skip) or rel == "tests/cli/selfcontained.sh": continue
    try: text = open(os.path.join(repo, rel), encoding="utf-8").read()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError): continue
    for n, line in enumerate(text.split("\n"), 1):
        for m in climb.finditer(line):
            target = m.group(1) + m.group(2)
            here = os.path.normpath(os.path.join(repo, os.path.dirname(rel), target))
            top = os.path.normpath(os.path.join(repo, target))
            out = lambda p: not (p == repo or p.startswith(repo + "/"))
            # From the file's folder (links, includes) or, when that names nothing, from the root (tools run there).
            if out(here) or (not os.path.exists(here) and out(top)):
                print(f"{rel}:{n}: {target}")
        for m in absolute.finditer(line):
            print(f"{rel}:{n}: {m.group(0)}")
PY
}
scan "$repo" "$D/files" >"$D/hits"
if [ ! -s "$D/hits" ] && [ -s "$D/files" ]; then ok "no tracked file names a path outside the repository"
else bad "paths outside the repository" "$(head -n 20 "$D/hits")"; fi

# The scanner must flag a planted reference of each kind (it can fail), and leave a path inside alone.
mkdir -p "$D/fake/tools"
printf 'a = "../shared/tokenizers/qwen3"\nb = "/work/shared/x"\nc = "../tools/planted.c"\n' >"$D/fake/tools/planted.c"
echo tools/planted.c >"$D/fake/list"
planted=$(scan "$(cd "$D/fake" && pwd -P)" "$D/fake/list")
if [ "$(echo "$planted" | grep -c .)" = 2 ] && [[ "$planted" == *"planted.c:1: ../shared"* ]] && [[ "$planted" == *"/work/shared"* ]]
then ok "the scan flags planted outside paths and only those"; else bad "scan self-check" "got: $planted"; fi

for f in tokenizer.json tokenizer_config.json LICENSE; do
    if [ -s "tokenizers/qwen3/$f" ]; then ok "tokenizers/qwen3/$f is in the repository"; else bad "tokenizer file" "tokenizers/qwen3/$f missing"; fi
done

gen=$(cd "$(dirname "$GEN")" && pwd -P)/$(basename "$GEN")
if (cd "$D" && env -u MF_TOKENIZER_DIR "$gen" -q --arch qwen3 --layers 1 -o "$D/from-elsewhere.gguf") 2>"$D/err" &&
    [ -s "$D/from-elsewhere.gguf" ]; then ok "mf-genmodel finds the repository's tokenizer from another folder"
else bad "mf-genmodel default tokenizer" "$(cat "$D/err")"; fi
if "$GEN" --help | grep -qF "$repo/tokenizers/qwen3"; then ok "--help names the repository's tokenizer folder"
else bad "--help default" "$("$GEN" --help | grep -A1 -- --tokenizer)"; fi
finish
