#!/bin/bash
# The loop the three runs share; sourced by run16.sh, bisect.sh and b2.sh.
# 16-core check: interleaved passes over allocators, each pass starting one
# allocator further, until a phase's budget is spent. Lines: command, allocator,
# pass, ops/s, maxrss_kb.
cd "$(dirname "$0")"
D=$PWD
OUT=${OUT:-/tmp/out16}; mkdir -p "$OUT"
{ nproc; lscpu | grep -E 'Model name|^L2|^L3|NUMA node\(s\)'; uname -r; ldd --version | head -1;
  echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"; } > "$OUT/machine.txt" 2>&1
phase() { # file budget "allocs" then commands on stdin
  local file=$1 budget=$2; read -ra al <<< "$3"; mapfile -t cmds
  local start=$SECONDS pass=0 n=${#al[@]}
  while [ $((SECONDS - start)) -lt "$budget" ]; do
    pass=$((pass + 1))
    for c in "${cmds[@]}"; do for ((i = 0; i < n; i++)); do
      [ $((SECONDS - start)) -ge "$budget" ] && return
      a=${al[(i + pass - 1) % n]}; name=${a%%=*}; spec=${a#*=}; lib=${spec%%,*}; env=
      [[ $spec == *,* ]] && env=${spec#*,}
      out=$(env $env LD_PRELOAD=$D/$lib timeout 60 ./${c%% *} ${c#* } 2>&1 |
            grep -o '"ops_per_sec": [0-9.e+]*\|"maxrss_kb": [0-9]*' | awk '{print $2}' | tr '\n' '\t')
      echo -e "$c\t$name\t$pass\t$out" >> "$OUT/$file"
    done; done
  done
}
