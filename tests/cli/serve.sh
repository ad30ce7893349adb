#!/usr/bin/env bash
# minfer serve over loopback: routes and OpenAI shapes, a bad-input corpus of 70+ requests, batch invariance end to
# end (4 concurrent greedy requests equal alone), streaming, sampled text as UTF-8, a client disconnect
# freeing its slot, a bounded load test that overflows --max-queue, slot save/restore, the API key, the
# openai npm client, tool calls (a scripted model), llama.vim's /infill requests, and SIGTERM draining.
# Servers listen on 127.0.0.1 with --port 0 (the port is read from the startup line); every wait is bounded.
source "$(dirname "$0")/lib.bash"
M="$TMP/serve-qwen3.gguf"
PY=tests/server/client.py
if ! "$GEN" --arch qwen3 --preset tiny --type q8_0 --seed 3 -q -o "$M"; then
    bad generate "mf-genmodel failed"; finish; exit 1
fi

# start_server NAME ARGS...: sets PORT and SPID, waits (at most 60 s) for the ready line
start_server() {
    local name=$1; shift
    LOG="$TMP/serve-$name.log"
    "$MINFER" serve -m "$M" --port 0 "$@" 2>"$LOG" &
    SPID=$!
    for _ in $(seq 600); do
        grep -q '^\[server\] ready' "$LOG" 2>/dev/null && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    PORT=$(grep -o 'http://127.0.0.1:[0-9]*' "$LOG" | head -1 | cut -d: -f3)
    if ! grep -q '^\[server\] ready' "$LOG"; then bad "start $name" "no ready line: $(cat "$LOG")"; return 1; fi
    ok "start $name (port $PORT)"
}
# stop_server: SIGTERM, at most 30 s, exit status 0
stop_server() {
    kill -TERM "$SPID" 2>/dev/null
    local rc=0
    for _ in $(seq 300); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SPID" 2>/dev/null; then kill -9 "$SPID"; bad "stop" "still running 30 s after SIGTERM"; return; fi
    wait "$SPID"; rc=$?
    if [ "$rc" -eq 0 ] && grep -q '^\[server\] stopped' "$LOG"; then ok "stop: SIGTERM exits 0"; else bad stop "exit $rc: $(tail -3 "$LOG")"; fi
}
# py CHECK...: runs a client.py check, counting its PASS/FAIL lines
py() {
    local out
    out=$(timeout 600 python3 "$PY" "$PORT" "$@" 2>&1)
    local rc=$?
    while IFS= read -r line; do
        case "$line" in
        PASS\ *) ok "${line#PASS }" ;;
        FAIL\ *) bad "${line#FAIL }" "" ;;
        esac
    done <<<"$out"
    [ "$rc" -eq 0 ] || [[ "$out" == *FAIL* ]] || bad "client.py $*" "exit $rc: $out"
}
# sdk [MODE]: the openai npm client's checks against PORT (openai_client.mjs PORT MODE), counting its lines
sdk() {
    if [ ! -d tests/server/node_modules/openai ]; then
        bad "openai client $*" "tests/server/node_modules/openai is missing: run scripts/setup.sh (npm ci --prefix tests/server)"
        return
    fi
    local out rc
    out=$(cd tests/server && timeout 300 node openai_client.mjs "$PORT" "$@" 2>&1); rc=$?
    while IFS= read -r line; do
        case "$line" in PASS\ *) ok "${line#PASS }" ;; FAIL\ *) bad "${line#FAIL }" "" ;; esac
    done <<<"$out"
    [ "$rc" -eq 0 ] || [[ "$out" == *FAIL* ]] || bad "openai client $*" "exit $rc: $out"
}

rm -rf "$TMP/serve-slots" && mkdir -p "$TMP/serve-slots"
if start_server main -np 4 -c 4096 -b 128 --slot-save-path "$TMP/serve-slots"; then
    py routes
    py bad_input
    py identity
    py stream
    py utf8
    py disconnect
    py slots
    py cache_reuse
    py tools_template
    py structured
    py logit_bias
    py samplers
    py n_probs
    py infill
    py code_completion
    sdk
    stop_server
fi

# tool calls: a model that writes 'Checking.<tool_call>{"name":"now","arguments":{}}</tool_call>' after the
# generation prompt's "\n" (198), then <|im_end|> (mf-genmodel --script; tokens as `minfer tokenize` splits it)
MT="$TMP/serve-tools.gguf"
if "$GEN" --arch qwen3 --type q8_0 -q --script 198,40129,13,151657,4913,606,3252,3328,2198,16370,788,90,3417,151658,151645 \
    -o "$MT"; then
    M_SAVE=$M M=$MT
    if start_server tools -np 2 -c 1024; then
        py tools
        sdk tools
        stop_server
    fi
    M=$M_SAVE
else bad "tools model" "mf-genmodel --script failed"; fi

# embeddings: a server started with --embeddings on a Qwen3-Embedding-like model (pooling last, EOS appended)
ME="$TMP/serve-embed.gguf"
if "$GEN" --arch qwen3 --type q8_0 --pooling last --add-eos --seed 8 -q -o "$ME"; then
    M_SAVE=$M M=$ME
    if start_server embed -np 2 -c 64 --embeddings; then
        grep -q 'embeddings, last pooling (the model' "$LOG" && ok "embed: the ready line names the pooling" ||
            bad "embed ready line" "$(cat "$LOG")"
        py embed
        sdk embed
        stop_server
    fi
    # pooling none: every token's raw vector on /embedding, the first and last rows the CLI's cls and last
    python3 -c 'import json, sys; print(json.dumps([json.loads(a)[0] for a in sys.argv[1:]]))' \
        "$("$MINFER" embed -m "$ME" -p 'Hello world' --pooling last --embd-normalize -1 --embd-output-format array 2>/dev/null)" \
        "$("$MINFER" embed -m "$ME" -p 'Hello world' --pooling cls --embd-normalize -1 --embd-output-format array 2>/dev/null)" \
        >"$TMP/serve-none-want.json" || bad "none: minfer embed" "failed"
    if start_server embed-none -np 1 -c 64 --embeddings --pooling none; then
        grep -q 'embeddings, none pooling (--pooling' "$LOG" && ok "none: the ready line names the pooling" ||
            bad "none ready line" "$(cat "$LOG")"
        py embed_none "$TMP/serve-none-want.json"
        stop_server
    fi
    M=$M_SAVE
    expect "serve --pooling without --embeddings" 2 "--pooling applies to --embeddings" -- "$MINFER" serve -m "$ME" --pooling mean
    expect "serve --embeddings with -md" 2 "drop -md" -- "$MINFER" serve -m "$ME" --embeddings -md "$ME"
    expect "serve --matryoshka without --embeddings" 2 "it needs --embeddings" -- "$MINFER" serve -m "$ME" --matryoshka
    rm -f "$ME"
else bad "embed model" "mf-genmodel failed"; fi

# reranking: a server started with --rerank on a Qwen3-Reranker-like model (labels yes/no, the rerank template);
# the scores must be the ones `minfer embed --pooling rank` prints for the same pairs
MR="$TMP/serve-rerank.gguf"
if "$GEN" --arch qwen3 --type q8_0 --reranker --seed 9 -q -o "$MR"; then
    "$MINFER" embed -m "$MR" --embd-output-format array \
        -p $'What is a panda?\thi\nWhat is a panda?\tThe giant panda is a bear species endemic to China.' \
        >"$TMP/serve-rerank-want.json" 2>/dev/null || bad "rerank: minfer embed --pooling rank" "failed"
    M_SAVE=$M M=$MR
    if start_server rerank -np 2 -c 256 --rerank; then
        grep -q 'reranking, rank pooling (--rerank)' "$LOG" && ok "rerank: the ready line says reranking" ||
            bad "rerank ready line" "$(cat "$LOG")"
        py rerank "$TMP/serve-rerank-want.json"
        stop_server
    fi
    if start_server rerank-file -np 1 -c 256 --embeddings; then
        grep -q 'reranking, rank pooling (the model' "$LOG" && ok "rerank: --embeddings on a reranker ranks (its pooling)" ||
            bad "rerank-file ready line" "$(cat "$LOG")"
        stop_server
    fi
    M=$M_SAVE
    expect "serve --rerank --pooling mean" 2 "drop one" -- "$MINFER" serve -m "$MR" --rerank --pooling mean
    expect "serve --rerank with -md" 2 "drop -md" -- "$MINFER" serve -m "$MR" --rerank -md "$MR"
    expect "serve --rerank on a model without a head" 1 "classifier head (cls.output.weight)" -- \
        "$MINFER" serve -m "$M" --rerank --port 0
    rm -f "$MR"
else bad "rerank model" "mf-genmodel --reranker failed"; fi

# llama-server's sampler flags as request defaults; the ones no request could use are refused at startup
if start_server defaults -np 1 -c 1024 --temp 0 --top-k 5 --seed 9 --dry-multiplier 1000 --dry-allowed-length 3 \
    --dry-sequence-breaker $'\u241f' --cache-reuse 4; then
    py server_defaults
    py cache_reuse_default
    stop_server
fi
expect serve_logit_bias_flag 2 "serve takes no -l/--logit-bias" -- "$MINFER" serve -m "$M" --port 0 -l 5+1
expect serve_xtc_threshold_0 2 "threshold 0" -- "$MINFER" serve -m "$M" --port 0 --xtc-probability 0.5 --xtc-threshold 0
expect serve_cache_reuse_negative 2 "--cache-reuse" -- "$MINFER" serve -m "$M" --port 0 --cache-reuse -1
expect serve_mirostat_3 2 "--mirostat must be in [0, 2], got 3" -- "$MINFER" serve -m "$M" --port 0 --mirostat 3

# overflow: 2 slots, a queue of 4, 16 clients x 200 requests
if start_server load -np 2 -c 1024 -b 64 --max-queue 4; then
    py load
    stop_server
fi

# the API key (from a file), /health stays open
printf 'sekrit-key\n' >"$TMP/serve-key"
if start_server auth -np 1 -c 512 --api-key-file "$TMP/serve-key"; then
    py auth sekrit-key
    stop_server
fi

# SIGTERM while a request runs: it finishes (200), a new one is refused 503, the process exits 0
if MINFER_DRAIN_MS=120000 start_server drain -np 1 -c 1024; then
    curl -s -m 300 -o "$TMP/serve-drain.json" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/completions" \
        -d '{"prompt":"Hello","max_tokens":200,"temperature":0,"ignore_eos":true}' >"$TMP/serve-drain.code" &
    CPID=$!
    for _ in $(seq 100); do
        curl -s "http://127.0.0.1:$PORT/metrics" | grep -q '^minfer_slots_busy 1' && break; sleep 0.05
    done
    kill -TERM "$SPID"
    sleep 0.2
    code=$(curl -s -m 60 -o "$TMP/serve-late.json" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/completions" \
        -d '{"prompt":"Hello","max_tokens":2}')
    wait "$CPID"
    if [ "$(cat "$TMP/serve-drain.code")" = 200 ] && grep -q '"completion_tokens":200' "$TMP/serve-drain.json"; then
        ok "drain: the in-flight request finished"
    else bad "drain: in-flight" "$(cat "$TMP/serve-drain.code") $(head -c 300 "$TMP/serve-drain.json")"; fi
    if [ "$code" = 503 ] && grep -q 'server shutting down' "$TMP/serve-late.json"; then ok "drain: a new request is 503"
    elif [ "$code" = 000 ]; then ok "drain: a new request is refused (connection closed)"
    else bad "drain: new request" "$code $(cat "$TMP/serve-late.json")"; fi
    stop_server
fi

# a forward that fails (a NaN in the LM head: every forward's logits are refused) answers each request in it
# with one 500, and the server goes on serving
N="$TMP/serve-nan.gguf"
poison_lm_head "$M" "$N" 1000 0x7E00
M_SAVE=$M M=$N
if start_server nan -np 2 -c 512; then
    cpids=()
    for i in 1 2; do
        curl -s -m 120 -o "$TMP/serve-nan-$i.json" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/completions" \
            -d '{"prompt":"Hello","max_tokens":4}' >"$TMP/serve-nan-$i.code" &
        cpids+=($!)
    done
    wait "${cpids[@]}"
    for i in 1 2; do
        if [ "$(cat "$TMP/serve-nan-$i.code")" = 500 ] && grep -q 'the forward failed: .*not finite' "$TMP/serve-nan-$i.json"; then
            ok "failed forward: request $i answered 500 naming the cause"
        else bad "failed forward: request $i" "$(cat "$TMP/serve-nan-$i.code") $(cat "$TMP/serve-nan-$i.json")"; fi
    done
    h=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")
    d=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^minfer_jobs_dropped_total //p')
    b=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^minfer_slots_busy //p')
    if [ "$h" = 200 ] && [ "$d" = 2 ] && [ "$b" = 0 ] && grep -q '^\[server\] step failed' "$LOG"; then
        ok "failed forward: still serving, 2 jobs dropped, slots free, logged"
    else bad "failed forward: after" "health $h, dropped '$d', busy '$b'"; fi
    stop_server
fi
M=$M_SAVE

# while the model loads, /health and the API answer 503 "Loading model": a FIFO as the model file holds the
# load in open() until the test opens it for writing; a FIFO is no regular file, so the server exits 1 with one error
F="$TMP/serve-fifo.gguf"
rm -f "$F" && mkfifo "$F"
LOG="$TMP/serve-fifo.log"
"$MINFER" serve -m "$F" --port 0 2>"$LOG" &
SPID=$!
for _ in $(seq 100); do grep -q 'listening on' "$LOG" && break; sleep 0.1; done
PORT=$(grep -o 'http://127.0.0.1:[0-9]*' "$LOG" | head -1 | cut -d: -f3)
h=$(curl -s -m 10 -w ' %{http_code}' "http://127.0.0.1:$PORT/health")
c=$(curl -s -m 10 -w ' %{http_code}' -X POST "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt":"Hi","max_tokens":2}')
case "$h" in *'"Loading model"'*' 503') ok "loading: /health is 503 Loading model" ;; *) bad "loading: /health" "$h" ;; esac
case "$c" in *'"Loading model"'*' 503') ok "loading: a completion is 503 Loading model" ;; *) bad "loading: completion" "$c" ;; esac
timeout 30 bash -c ': >"$1"' _ "$F" # open and close the FIFO for writing: the load reads nothing
rc=0
for _ in $(seq 300); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SPID" 2>/dev/null; then kill -9 "$SPID"; rc=killed; else wait "$SPID"; rc=$?; fi
n=$(grep -c "cannot load model '$F'" "$LOG")
if [ "$rc" = 1 ] && [ "$n" = 1 ]; then ok "loading: a failed load exits 1 with one error line"
else bad "loading: failed load" "exit $rc, $n error lines: $(cat "$LOG")"; fi
rm -f "$F"

# speculative decoding: a server with -md answers greedy requests as the same model without a draft
ST="$TMP/serve-spec-target.gguf" SD="$TMP/serve-spec-draft.gguf"
PAIR=(--arch qwen2 --type q8_0 --lowrank 64 --layer-scale 0.06 --seed 7 -q)
if "$GEN" "${PAIR[@]}" -o "$ST" && "$GEN" "${PAIR[@]}" --draft -o "$SD"; then
    M_SAVE=$M M=$ST
    if start_server spec-plain -np 2 -c 1024; then
        PLAIN_PID=$SPID PLAIN_PORT=$PORT PLAIN_LOG=$LOG
        if start_server spec -np 2 -c 1024 -md "$SD" --draft-max 8; then
            py spec "$PLAIN_PORT"
            stop_server
        fi
        SPID=$PLAIN_PID LOG=$PLAIN_LOG
        stop_server
    fi
    M=$M_SAVE
else bad "spec pair" "mf-genmodel failed"; fi
expect "serve --draft-max without -md" 2 "need a draft model" -- "$MINFER" serve -m "$M" --draft-max 4
expect "serve -md with a bad --draft-p-min" 2 "--draft-p-min must be in 0..1, got -1" -- "$MINFER" serve -m "$M" -md "$M" --draft-p-min -1

# flags
expect "serve without -m" 2 "no model given" -- "$MINFER" serve
expect "serve bad port" 2 "--port must be in [0, 65535]" -- "$MINFER" serve -m "$M" --port 70000
expect "serve -b below -np" 2 "smaller than -np/--parallel" -- "$MINFER" serve -m "$M" -np 8 -b 4 --port 0
expect "serve missing model" 1 "m-missing.gguf" -- "$MINFER" serve -m "$TMP/m-missing.gguf" --port 0
expect "serve bad MINFER_DRAIN_MS" 2 "MINFER_DRAIN_MS" -- env MINFER_DRAIN_MS=soon "$MINFER" serve -m "$M"
finish
