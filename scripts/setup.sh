#!/usr/bin/env bash
# Installs minfer's build dependencies on Debian 12 (apt) and builds everything.
#   sudo ./scripts/setup.sh        (CI runs it as root)
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="build-essential clang pkg-config python3 libpcre2-dev libutf8proc-dev libcjson-dev libmicrohttpd-dev"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing
fi
make -j"$(nproc)"
