#!/usr/bin/env bash
# Runs an example and checks that it exits 0 and prints a line matching each
# extended regular expression given.
#   run_example.sh [--address ADDRESS] BINARY REGEX...
# With --address, the example runs at ADDRESS (its one argument) instead of a
# segment of its own.
set -uo pipefail
args=()
if [ "${1-}" = "--address" ]; then
  args=("$2")
  shift 2
fi
binary=$1
shift
output=$("$binary" "${args[@]}" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -ne 0 ]; then
  echo "run_example: $binary exited with $status" >&2
  exit 1
fi
for pattern in "$@"; do
  if ! grep -Eq -- "$pattern" <<<"$output"; then
    echo "run_example: no line matches: $pattern" >&2
    exit 1
  fi
done
