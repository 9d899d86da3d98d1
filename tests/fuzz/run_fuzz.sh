#!/usr/bin/env bash
# A bounded fuzz run: fresh seeds from real segments, then SECONDS of
# libFuzzer, which stops at the first crash, hang or out-of-bounds access.
#   run_fuzz.sh SEEDS_TOOL FUZZER WORKDIR SECONDS REGRESSIONS_DIR
set -euo pipefail
seeds_tool=$1 fuzzer=$2 work=$3 seconds=$4 regressions=$5
rm -rf "$work/seeds" "$work/corpus"
mkdir -p "$work/seeds" "$work/corpus"
"$seeds_tool" "$work/seeds"
# Every past finding first: each must now pass.
if compgen -G "$regressions/*" >/dev/null; then
  "$fuzzer" "$regressions"/*
fi
"$fuzzer" -max_total_time="$seconds" -max_len=131072 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/corpus" "$work/seeds" 2>&1 | tail -n 80
