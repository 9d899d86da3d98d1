#!/usr/bin/env bash
# Installs what is missing, builds the leader-election demo (Release, in build/) and runs
# it: three candidates, the leader killed with SIGKILL, a follower taking over.
# Arguments are passed to the demo: [ADDRESS] [--ttl-ms MS] (a segment or
# etcd://HOST:PORT/PREFIX; the session TTL in milliseconds).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2 --target zaris-election-demo
./build/examples/zaris-election-demo "$@"
