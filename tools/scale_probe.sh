#!/bin/bash
# SPDX-License-Identifier: MIT
# Thread-scaling probe used for docs/perf.md: mt_remote at several thread
# counts, remote ratios and size ranges, allocators interleaved (each run
# starts the rotation one allocator further), one tab-separated line per run.
# Needs `make lib bench-progs`.
#   tools/scale_probe.sh [RUNS] [THREADS] [PCTS] [RANGES]
#   tools/scale_probe.sh 2 "4 16" "0 90" "16-2048 16-131072"
#   tools/scale_probe.sh --table FILE     medians (min-max) per row and allocator
# ALLOCS: "NAME=PATH ..." (an empty PATH is the C library's malloc); by
# default hakozuna and Debian's peers, taken from PEERS (default
# /usr/lib/x86_64-linux-gnu, or a folder of copied .so files).
# BUDGET: stop starting runs after this many seconds (a lent machine's time).
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = --table ]; then
  exec python3 - "$2" <<'EOF'
import collections, statistics, sys
ops, order = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.split('\t')
    if len(f) < 7 or not f[0].isdigit() or not f[5].strip():
        continue
    row = (f[3], int(f[2]), int(f[1]))
    if f[4] not in order:
        order.append(f[4])
    ops[(row, f[4])].append(float(f[5]) / 1e6)
print('| row (M ops/s) | ' + ' | '.join(order) + ' | runs |')
print('|---' * (len(order) + 2) + '|')
for row in sorted({r for r, _ in ops}):
    cells = [f'{statistics.median(v):.1f} ({min(v):.0f}–{max(v):.0f})' if (v := ops.get((row, a))) else '–' for a in order]
    print(f'| {row[0]} {row[1]}% t={row[2]} | ' + ' | '.join(cells) + f' | {len(ops[(row, order[0])])} |')
EOF
fi
runs=${1:-2}; threads=${2:-"4 8 16"}; pcts=${3:-"0 50 90"}; ranges=${4:-"16-2048 16-32768 16-131072"}
P=${PEERS:-/usr/lib/x86_64-linux-gnu}
export LD_LIBRARY_PATH=$P${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
read -ra allocs <<< "${ALLOCS:-hakozuna=$PWD/build/libhakozuna.so glibc= mimalloc=$P/libmimalloc.so.2 tcmalloc=$P/libtcmalloc_minimal.so.4 jemalloc=$P/libjemalloc.so.2}"
echo "# cpus $(nproc), kernel $(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo -e "# run\tthreads\tremote%\trange\tallocator\tops/s\tmaxrss_kb"
start=$SECONDS
for r in $(seq 1 "$runs"); do
  for t in $threads; do for pct in $pcts; do for rng in $ranges; do
    n=${#allocs[@]}
    for ((i = 0; i < n; i++)); do
      [ -n "${BUDGET:-}" ] && [ $((SECONDS - start)) -ge "$BUDGET" ] && exit 0
      a=${allocs[(i + r - 1) % n]}
      out=$(LD_PRELOAD=${a#*=} timeout 120 build/bench-bin/mt_remote "$t" 1000000 400 ${rng/-/ } "$pct" 2>&1 |
            grep -o '"ops_per_sec": [0-9.e+]*\|"maxrss_kb": [0-9]*' | awk '{print $2}' | tr '\n' '\t')
      echo -e "$r\t$t\t$pct\t$rng\t${a%%=*}\t$out"
    done
  done; done; done
done
