#!/bin/bash
# Instructions per operation, counted by callgrind: the load on a shared
# machine moves times by 2x but not these counts, so a change to a hot path
# shows here first. Runs zaris-op-loop at 2,000 and 12,000 iterations and
# divides the difference by 10,000 (set-up and start-up cancel). Use a
# Release build.
#
#   bench/instructions.sh [BUILD_DIR]    (default: build)
set -euo pipefail
build=${1:-build}
loop="$build/bench/zaris-op-loop"
if [[ ! -x $loop ]]; then
  echo "instructions.sh: $loop not built (cmake --build $build --target zaris-op-loop)" >&2
  exit 2
fi
if ! command -v valgrind > /dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2
    exit 2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind > /dev/null
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
count() {  # count WHAT N: the instructions of the whole run
  if ! valgrind --tool=callgrind -v --callgrind-out-file=/dev/null \
      --log-file="$log" "$loop" "$1" "$2"; then
    echo "instructions.sh: zaris-op-loop $1 $2 failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  local refs
  refs=$(sed -n 's/.*refs: *//p' "$log" | tr -d ,)
  if [[ ! $refs =~ ^[0-9]+$ ]]; then
    echo "instructions.sh: no instruction count in callgrind's report:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "$refs"
}
for what in lock txn put get create queue; do
  low=$(count "$what" 2000)
  high=$(count "$what" 12000)
  label=$what
  [[ $what == lock ]] && label="lock + unlock"
  [[ $what == create ]] && label="put + delete (create)"
  awk -v l="$low" -v h="$high" -v w="$label" \
    'BEGIN { printf "%s: %.1f instructions per operation\n", w, (h - l) / 10000 }'
done
