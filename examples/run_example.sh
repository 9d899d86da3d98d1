#!/usr/bin/env bash
# Runs an example and checks that it exits 0 and prints a line matching each
# extended regular expression given.   run_example.sh BINARY REGEX...
set -uo pipefail
binary=$1
shift
output=$("$binary" 2>&1)
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
