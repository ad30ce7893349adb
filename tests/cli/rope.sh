#!/usr/bin/env bash
# Rope scaling on the command line (llama.cpp's flags): a YaRN or linear file runs with the file's scaling, and
# the flags on a plain file give bitwise the same logits as the file that says the same in its metadata
# (--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768, Qwen's 128K setting); --rope-scaling none on a
# YaRN file gives the plain file's logits.  Bad values are refused with exit 2 and nothing on stdout;
# MINFER_LOG=info prints the resolved rope.  (The numerics against llama.cpp: the *-yarn and *-linear
# conformance goldens and tests/golden/rope.)
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash
unset MINFER_LOG

P="$TMP/rope-plain.gguf" Y="$TMP/rope-yarn.gguf" L="$TMP/rope-linear.gguf"
base=(--arch qwen3 --preset tiny --type q8_0 --seed 1 -q)
if ! "$GEN" "${base[@]}" -o "$P" || ! "$GEN" "${base[@]}" --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768 -o "$Y" ||
    ! "$GEN" "${base[@]}" --rope-scaling linear --rope-scale 2 -o "$L"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi

toks='[9707,11,1879,0,576,6722,315,9625,374,12095,13,1084,13631]'
ev() { "$MINFER" eval -m "$1" --tokens "$toks" --top 5 -t 2 "${@:2}" 2>/dev/null; }
ev "$P" >"$TMP/plain.json" && ev "$Y" >"$TMP/yarn.json" && ev "$L" >"$TMP/linear.json" &&
    ev "$P" --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768 >"$TMP/plain-flags-yarn.json" &&
    ev "$P" --rope-scaling linear --rope-freq-scale 0.5 >"$TMP/plain-flags-linear.json" &&
    ev "$Y" --rope-scaling none >"$TMP/yarn-flags-none.json" &&
    ev "$Y" --yarn-ext-factor 0 --rope-scaling linear >"$TMP/yarn-ext0.json" &&
    ev "$Y" --yarn-orig-ctx 32768 --yarn-beta-fast 32 --yarn-beta-slow 1 --yarn-ext-factor -1 >"$TMP/yarn-defaults.json"
rc=$?
[ $rc -eq 0 ] && ok eval_runs || bad eval_runs "an eval failed (exit $rc)"
same() { cmp -s "$TMP/$2" "$TMP/$3" && ok "$1" || bad "$1" "$2 and $3 differ"; }
differ() { cmp -s "$TMP/$2" "$TMP/$3" && bad "$1" "$2 and $3 are the same: the scaling did nothing" || ok "$1"; }
differ yarn_file_changes_logits plain.json yarn.json
differ linear_file_changes_logits plain.json linear.json
differ yarn_is_not_linear yarn.json yarn-ext0.json
same flags_equal_yarn_metadata yarn.json plain-flags-yarn.json
same flags_equal_linear_metadata linear.json plain-flags-linear.json
same scaling_none_is_the_plain_rope plain.json yarn-flags-none.json
same explicit_defaults_change_nothing yarn.json yarn-defaults.json
# YaRN with ext_factor 0 is linear interpolation by the same factor (llama.cpp's rope_yarn without the mix)
ev "$P" --rope-scaling linear --rope-scale 4 >"$TMP/plain-linear4.json"
same yarn_ext0_is_linear yarn-ext0.json plain-linear4.json

# the resolved rope at MINFER_LOG=info; the ramp by hand: 64 rotary dims, base 1e6, 32768 original context,
# 64 ln(32768 / (2 pi 32)) / (2 ln 1e6) = 11.8 -> floor 11 (beta_fast 32), 64 ln(32768 / (2 pi)) / (2 ln 1e6) = 19.8
# -> ceil 20 (beta_slow 1)
info=$(MINFER_LOG=info "$MINFER" eval -m "$Y" --tokens '[1,2]' 2>&1 >/dev/null | grep '^.*rope:' | tr '\n' ' ')
[[ "$info" == *"rope: yarn, freq_base 1e+06, freq_scale 0.25"* &&
    "$info" == *"original context 32768, ext_factor 1, beta 32/1, attn_factor 1, ramp over pairs 11..20"* ]] &&
    ok info_line || bad info_line "got '$info'"

# a file whose scaling type minfer cannot run is refused at load, naming the key and the value (llama.cpp
# asserts); the first "yarn" in the file is the type's value (metadata comes before the vocabulary)
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); open(sys.argv[2],"wb").write(d.replace(b"yarn", b"ntkx", 1))' "$Y" "$TMP/rope-ntkx.gguf"
expect file_type_refused 1 "qwen3.rope.scaling.type = 'ntkx' is not supported (none, linear, yarn)" -- \
    "$MINFER" eval -m "$TMP/rope-ntkx.gguf" --tokens '[1,2]'

# refusals: exit 2, the message, nothing on stdout
for cmd in "run -p hi -n 1" "eval --tokens [1,2]" "embed -p hi" "chat" "serve --port 0" "specverify -md $P -p hi"; do
    c=${cmd%% *}
    # shellcheck disable=SC2086
    {
        expect "$c:scaling_bad" 2 "Error: --rope-scaling longrope is not a rope scaling (none, linear, yarn)" -- "$MINFER" ${cmd} -m "$P" --rope-scaling longrope
        expect "$c:scale_zero" 2 "Error: --rope-scale must be a finite number > 0, got 0" -- "$MINFER" ${cmd} -m "$P" --rope-scale 0
        expect "$c:scale_and_freq_scale" 2 "given twice" -- "$MINFER" ${cmd} -m "$P" --rope-scale 4 --rope-freq-scale 0.25
        expect "$c:orig_ctx_zero" 2 "Error: --yarn-orig-ctx must be in [1, 2147483647], got 0" -- "$MINFER" ${cmd} -m "$P" --yarn-orig-ctx 0
        expect "$c:beta_nan" 2 "--yarn-beta-fast must be a finite number" -- "$MINFER" ${cmd} -m "$P" --yarn-beta-fast nan
        expect "$c:base_neg" 2 "--rope-freq-base must be a finite number > 0, got -5" -- "$MINFER" ${cmd} -m "$P" --rope-freq-base -5
    }
    out=$("$MINFER" "$c" --help 2>&1)
    [[ "$out" == *"--rope-scaling T"* && "$out" == *"--rope-scale N"* && "$out" == *"--yarn-orig-ctx N"* &&
        "$out" == *"--yarn-beta-slow F"* ]] && ok "$c:help" || bad "$c:help" "rope flags missing from --help"
done
# a context longer than the model was trained for (the tiny preset's 4096) is warned about once, with the way
# out; none at 4096, none where the rope scaling covers it (YaRN x4 over 32768), again past the scaled length
warn_of() { "$MINFER" run -m "$1" -p hi -n 1 --temp 0 "${@:2}" 2>&1 >/dev/null | grep -c 'more than the .* the model was trained for'; }
w1=$(warn_of "$P" -c 8192) w0=$(warn_of "$P" -c 4096) wy=$(warn_of "$Y" -c 131072) wy1=$(warn_of "$Y" -c 131073)
msg=$("$MINFER" run -m "$P" -p hi -n 1 -c 8192 2>&1 >/dev/null | grep trained)
[ "$w1" = 1 ] && [ "$w0" = 0 ] && [ "$wy" = 0 ] && [ "$wy1" = 1 ] && [[ $msg == *"use -c 4096 or less, or rope scaling"* ]] &&
    ok context_past_training_is_warned || bad context_past_training_is_warned "warnings $w1 $w0 $wy $wy1: $msg"

finish
