#!/usr/bin/env bash
# Installs minfer's build dependencies on Debian 12 (apt) and builds everything.
#   ./scripts/setup.sh     as root (CI; fresh machines without sudo), or as a user who may sudo: then only
#                          apt-get runs through sudo, and the build stays the user's
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="build-essential clang libclang-rt-dev pkg-config python3 curl libpcre2-dev libutf8proc-dev libcjson-dev libmicrohttpd-dev"
# Node.js and npm run the server tests' official openai client (tests/server); a machine that has node already
# (e.g. from NodeSource) keeps it
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
missing=""
arch=$(dpkg --print-architecture)
# "$p:$arch" too: with a second architecture's copy installed (a cross-build machine) the bare name is ambiguous
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || dpkg -s "$p:$arch" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    as_root=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || {
            echo "setup.sh: missing packages:$missing; run this as root, or install sudo" >&2; exit 1; }
        as_root="sudo"
    fi
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
make -j"$(nproc)"
# the openai npm client for tests/cli/serve.sh, pinned by tests/server/package-lock.json
npm ci --prefix tests/server --no-audit --no-fund --loglevel=error
