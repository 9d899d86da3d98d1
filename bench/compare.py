#!/usr/bin/env python3
"""Two builds of zaris-bench, side by side on a noisy machine (or one binary alone).

Runs the two binaries in ABBA rounds (A B B A, then B A A B, ...), one
repetition each, and prints for every benchmark the median time of each and
the median of its per-run ratio to a peer measured in the same run. The
machine's load moves times by up to 2x from one run to the next, even for the
peers, which are the same code in both binaries; a ratio taken within one run
and a median over rounds hold.

  bench/compare.py OLD/zaris-bench NEW/zaris-bench --rounds 10 \\
      --filter '/1000$|BM_LockUnlock$|BM_FlockLockUnlock|BM_RobustMutex' \\
      --peer BM_LockUnlock=BM_FlockLockUnlock --peer BM_Get/1000=BM_RobustMutexLockUnlock

--counter NAME adds a row BENCHMARK:NAME with the median of that user
counter (e.g. --counter cpu_ns_per_handoff for BM_LockHandoff/N).

With one binary it runs it --rounds times and prints the median time and
the median ratio to the peer of each benchmark. --arg passes an argument on
to the binary (e.g. --arg=--uri=etcd://127.0.0.1:2379):

  bench/compare.py build/bench/zaris-etcd-bench --rounds 9 \\
      --peer etcd/PutWithLease/real_time=grpc/Put/real_time
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(binary, pattern, min_time, extra, counters=()):
    """{name: real_time}, and with counters, also {name + ':' + counter: value}."""
    out = subprocess.run([binary, '--benchmark_filter=' + pattern, '--benchmark_format=json',
                          '--benchmark_min_time=' + min_time] + extra,
                         capture_output=True, text=True, check=True).stdout
    times = {}
    for b in json.loads(out)['benchmarks']:
        if 'error_occurred' in b:
            continue
        times[b['name']] = b['real_time']
        for c in counters:
            if c in b:
                times[b['name'] + ':' + c] = b[c]
    return times


def number(value, width):
    """A time or counter: one decimal, or four significant digits below 10
    (a counter such as faults_per_handoff is a small fraction)."""
    return f'{value:{width}.1f}' if abs(value) >= 10 else f'{value:{width}.4g}'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('old')
    parser.add_argument('new', nargs='?', help='leave out to run OLD alone')
    parser.add_argument('--rounds', type=int, default=6)
    parser.add_argument('--filter', default='.')
    parser.add_argument('--min-time', default='0.1', help='seconds per benchmark and run')
    parser.add_argument('--peer', action='append', default=[], metavar='BENCHMARK=PEER')
    parser.add_argument('--arg', action='append', default=[], help='passed on to the binaries')
    parser.add_argument('--counter', action='append', default=[],
                        help='a user counter to print too (its median), as a row NAME:COUNTER')
    args = parser.parse_args()
    if args.new is None:
        return alone(args)
    peers = dict(p.split('=', 1) for p in args.peer)
    runs = {'old': [], 'new': []}
    for r in range(args.rounds):
        for which in (('old', 'new', 'new', 'old') if r % 2 == 0 else ('new', 'old', 'old', 'new')):
            binary = args.old if which == 'old' else args.new
            runs[which].append(run(binary, args.filter, args.min_time, args.arg, args.counter))
    names = sorted(set().union(*(r.keys() for rs in runs.values() for r in rs)))
    print(f'{"benchmark":44} {"old":>10} {"new":>10} {"old/peer":>9} {"new/peer":>9}')
    for name in names:
        times = {w: [r[name] for r in runs[w] if name in r] for w in runs}
        line = f'{name:44}'
        for w in ('old', 'new'):
            line += ' ' + number(statistics.median(times[w]), 10) if times[w] else f' {"-":>10}'
        peer = peers.get(name)
        for w in ('old', 'new'):
            ratios = [r[name] / r[peer] for r in runs[w] if peer and name in r and peer in r]
            line += f' {statistics.median(ratios):9.3f}' if ratios else f' {"":9}'
        print(line)
    return 0


def alone(args):
    peers = dict(p.split('=', 1) for p in args.peer)
    runs = [run(args.old, args.filter, args.min_time, args.arg, args.counter)
            for _ in range(args.rounds)]
    names = sorted(set().union(*(r.keys() for r in runs)))
    print(f'{"benchmark":44} {"median":>12} {"/peer":>9}  peer')
    for name in names:
        times = [r[name] for r in runs if name in r]
        peer = peers.get(name)
        ratios = [r[name] / r[peer] for r in runs if peer and name in r and peer in r]
        ratio = f' {statistics.median(ratios):9.3f}  {peer}' if ratios else ''
        print(f'{name:44} {number(statistics.median(times), 12)}{ratio}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
