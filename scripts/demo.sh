#!/usr/bin/env bash
# Installs what is missing, builds the lease demo (Release, in build/) and runs
# it. Arguments are passed to the demo (an optional segment name).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2 --target zaris-lease-demo
./build/examples/zaris-lease-demo "$@"
