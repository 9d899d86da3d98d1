#!/usr/bin/env python3
"""The Python binding's cost: a keep_alive round trip (client.leases.keep_alive,
through ctypes into libzaris.so and its lock-free renewal) against an empty
ctypes call (zaris_range_count(NULL): a null check), in one run. Prints the
median of 7 rounds of each and their ratio.

  ZARIS_LIBRARY=build/libzaris.so.0.1 PYTHONPATH=python python3 bench/python_bench.py [CALLS]
"""
import os
import statistics
import sys
import time

import zaris


def per_call(function, calls):
    started = time.perf_counter_ns()
    for _ in range(calls):
        function()
    return (time.perf_counter_ns() - started) / calls


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    if calls < 1:
        print("usage: python_bench.py [CALLS >= 1]", file=sys.stderr)
        return 2
    name = f"zaris-bench-py-{os.getpid()}"
    with zaris.Client.create(name, max_leases=64, max_keys=64) as client:
        try:
            leases = client.leases
            lease = leases.grant(ttl=3600)
            empty = zaris._f["zaris_range_count"]  # the binding's own ctypes function
            keep_alive, nothing = [], []
            for _ in range(7):  # interleaved: a drift in the machine's load hits both
                keep_alive.append(per_call(lambda: leases.keep_alive(lease), calls))
                nothing.append(per_call(lambda: empty(None), calls))
        finally:
            zaris.destroy(name)
    k, e = statistics.median(keep_alive), statistics.median(nothing)
    print(f"python keep_alive: {k:.0f} ns  empty ctypes call: {e:.0f} ns  ratio: {k / e:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
