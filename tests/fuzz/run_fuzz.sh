#!/usr/bin/env bash
# A bounded fuzz run: fresh seeds from real segments, then SECONDS of
# libFuzzer, which stops at the first crash, hang or out-of-bounds access.
#   run_fuzz.sh SEEDS_TOOL FUZZER WORKDIR SECONDS REGRESSIONS_DIR
set -euo pipefail
seeds_tool=$1 fuzzer=$2 work=$3 seconds=$4 regressions=$5
rm -rf "$work/seeds" "$work/corpus" "$work"/crash-* "$work"/timeout-* "$work"/leak-* "$work"/oom-*
mkdir -p "$work/seeds" "$work/corpus"
"$seeds_tool" "$work/seeds"
# Every past finding first: each must now pass. A finding is an image of the
# layout it was found on; once the layout version goes up it is refused at
# open and tests nothing, so what it found is carried on by a seed
# (make_seeds.cpp) or a unit test, and the image removed.
if compgen -G "$regressions/*" >/dev/null; then
  "$fuzzer" "$regressions"/*
fi
# A fixed seed: a CI run explores the same way every time.
status=0
"$fuzzer" -seed=1 -max_total_time="$seconds" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "$work/seeds" \
  >"$work/fuzz.log" 2>&1 || status=$?
tail -n 200 "$work/fuzz.log"
if [ "$status" -ne 0 ]; then
  # Print the input that failed, so it can be reproduced from the log alone.
  for artifact in "$work"/crash-* "$work"/timeout-* "$work"/leak-* "$work"/oom-*; do
    [ -e "$artifact" ] || continue
    echo "finding $(basename "$artifact") (base64; add it to tests/fuzz/regressions/):"
    base64 -w 0 "$artifact"
    echo
  done
fi
exit "$status"
