#!/bin/bash
# SPDX-License-Identifier: MIT
# Thread-scaling probe used for docs/perf.md: mt_remote at several thread
# counts, remote ratios and size ranges, allocators interleaved, printed one
# line per run. Needs `make lib bench-progs`; peer libraries are taken from
# PEERS (default /usr/lib/x86_64-linux-gnu, or a folder of copied .so files).
#   tools/scale_probe.sh [RUNS] [THREADS] [PCTS] [RANGES]
#   tools/scale_probe.sh 2 "4 16" "0 90" "16-2048 16-131072"
set -u
cd "$(dirname "$0")/.."
runs=${1:-2}; threads=${2:-"4 8 16"}; pcts=${3:-"0 50 90"}; ranges=${4:-"16-2048 16-32768 16-131072"}
P=${PEERS:-/usr/lib/x86_64-linux-gnu}
export LD_LIBRARY_PATH=$P${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "# cpus $(nproc), kernel $(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# run threads remote% range allocator ops/s maxrss_kb"
for r in $(seq 1 "$runs"); do
  for t in $threads; do for pct in $pcts; do for rng in $ranges; do
    for a in hakozuna glibc mimalloc tcmalloc jemalloc; do
      case $a in
        hakozuna) L=$PWD/build/libhakozuna.so ;; glibc) L= ;;
        mimalloc) L=$P/libmimalloc.so.2 ;; tcmalloc) L=$P/libtcmalloc_minimal.so.4 ;; jemalloc) L=$P/libjemalloc.so.2 ;;
      esac
      out=$(LD_PRELOAD=$L timeout 120 build/bench-bin/mt_remote "$t" 1000000 400 ${rng/-/ } "$pct" 2>&1 |
            grep -o '"ops_per_sec": [0-9.e+]*\|"maxrss_kb": [0-9]*' | awk '{print $2}' | tr '\n' ' ')
      echo "$r $t $pct $rng $a $out"
    done
  done; done; done
done
