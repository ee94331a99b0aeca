#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs rows of the public mimalloc-bench suite (github.com/daanx/mimalloc-bench)
# under several allocators by LD_PRELOAD, interleaved (run 1 of every row and
# allocator, then run 2, ...), and prints a markdown table of medians as ratios
# to the best allocator of each row, with their geometric means. An optional
# tool like tools/build-peers.sh: `make test` and `make bench` never use it.
#
#   tools/mimalloc-bench.sh MB NAME=LIB.so ... [NAME=]
#     MB      a mimalloc-bench checkout: its benchmarks built in MB/out/bench
#             (cmake -B out/bench -S bench), and in MB/extern what its
#             build-bench-env.sh puts there: lua/ (tag v5.4.7), large.pdf,
#             redis-6.2.7/ built with `make MALLOC=libc USE_JEMALLOC=no`
#     NAME=   (empty path) runs without preload: the system allocator
#   RUNS=3 PROCS=2 ROWS="cfrac espresso ..." OUT=dir (raw results and logs)
#   TIMEOUT=600 seconds per command; a crash or timeout shows as "fail".
#   tools/mimalloc-bench.sh --table RAW   prints the table of an earlier
#             run's OUT/raw.tsv (a run cut short included) and exits.
# Needs GNU time (/usr/bin/time) and python3; gs, ruby and z3 for their rows.
# Time is elapsed seconds, or as mimalloc-bench computes it from the
# program's own output (larson, rptest, xmalloc-test, glibc-thread, redis);
# peak RSS is GNU time's maximum resident set size (for redis: the server's).
set -u
table() { # raw.tsv NAME... -> markdown
python3 - "$@" <<'EOF'
import math, statistics, sys
raw, names = sys.argv[1], sys.argv[2:]
data, rows = {}, []
for line in open(raw):
    if line.startswith('#'):
        continue
    row, name, _, t, m = line.rstrip('\n').split('\t')
    if row not in rows:
        rows.append(row)
    d = data.setdefault((row, name), ([], [], [0]))
    if t == 'fail':
        d[2][0] += 1
    else:
        d[0].append(float(t)); d[1].append(int(m) / 1024)
def med(row, name, k):
    d = data.get((row, name))
    return statistics.median(d[k]) if d and d[k] else None
best = {}
for row in rows:
    for k in (0, 1):
        v = [med(row, n, k) for n in names if med(row, n, k) is not None]
        best[row, k] = min(v) if v else None
full = [r for r in rows if all(med(r, n, 0) for n in names)]
def geo(name, k):
    return math.exp(sum(math.log(med(r, name, k) / best[r, k]) for r in full) / len(full))
order = sorted(names, key=lambda n: geo(n, 0)) if full else names
print(f"Geomean over {len(full)} rows of (median / best median in the row); lower is better.\n")
print("| allocator | time | peak RSS |")
print("|---|---|---|")
gt = min(geo(n, 0) for n in names) if full else 0
gm = min(geo(n, 1) for n in names) if full else 0
for n in order:
    t, m = geo(n, 0), geo(n, 1)
    ts = f"**{t:.3f}**" if t == gt else f"{t:.3f}"
    ms = f"**{m:.3f}**" if m == gm else f"{m:.3f}"
    print(f"| {n} | {ts} | {ms} |")
print("\nPer row: median time / best, median peak RSS / best (best = 1.00, in bold); "
      "the best absolute figures in the first columns.\n")
print("| row | best s | best MiB | " + " | ".join(order) + " |")
print("|---|---|---|" + "---|" * len(order))
for r in rows:
    cells = []
    for n in order:
        t, m = med(r, n, 0), med(r, n, 1)
        fails = data.get((r, n), ([], [], [0]))[2][0]
        if t is None:
            cells.append("fail")
            continue
        ts = f"{t / best[r, 0]:.2f}"; ms = f"{m / best[r, 1]:.2f}"
        if t == best[r, 0]: ts = f"**{ts}**"
        if m == best[r, 1]: ms = f"**{ms}**"
        cells.append(f"{ts} / {ms}" + (f" ({fails} fail)" if fails else ""))
    bt, bm = best[r, 0], best[r, 1]
    print(f"| {r} | {bt:.3f} | {bm:.1f} | " + " | ".join(cells) + " |")
EOF
}
if [ "${1:-}" = --table ] && [ $# -eq 2 ]; then
  table "$2" $(sed -n 's/^# alloc \([^ ]*\) .*/\1/p' "$2")
  exit
fi
[ $# -ge 2 ] || { sed -n '3,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
MB=$(cd "$1" && pwd) || exit 2
shift
RUNS=${RUNS:-3}
PROCS=${PROCS:-2}
TIMEOUT=${TIMEOUT:-600}
ALL_ROWS="cfrac espresso barnes redis larsonN larsonN-sized mstressN rptestN gs
lua alloc-test1 alloc-testN xmalloc-testN cache-scratch1 cache-scratchN
cache-thrash1 cache-thrashN glibc-simple glibc-thread malloc-large mleak10
mleak100 rbstress1 rbstressN z3"
ROWS=${ROWS:-$ALL_ROWS}
OUT=${OUT:-$(mktemp -d /tmp/mimalloc-bench.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
bin=$MB/out/bench
ext=$MB/extern
src=$MB/bench
redis=$ext/redis-6.2.7/src
raw=$OUT/raw.tsv
names=()
libs=()
for a in "$@"; do
  case $a in
    # (made absolute: the commands run in $bin, where a relative path would
    # make ld.so ignore the preload and the row measure the system allocator)
    *=?*) names+=("${a%%=*}"); libs+=("$(realpath -e -- "${a#*=}" 2>/dev/null || echo "${a#*=}")") ;;
    *=) names+=("${a%%=*}"); libs+=("") ;;
    *) echo "allocator '$a' is not NAME=PATH" >&2; exit 2 ;;
  esac
done
for l in "${libs[@]}"; do
  [ -z "$l" ] || [ -f "$l" ] || { echo "no such library: $l" >&2; exit 2; }
done
[ -x "$bin/cfrac" ] || { echo "no benchmarks in $bin (build them first)" >&2; exit 2; }

cmd_of() { # row -> command line (run in $bin)
  local p=$PROCS
  case $1 in
    cfrac) echo "./cfrac 17545186520507317056371138836327483792789528" ;;
    espresso) echo "./espresso $src/espresso/largest.espresso" ;;
    barnes) echo "./barnes" ;;
    larsonN) echo "./larson 5 8 1000 5000 100 4141 $p" ;;
    larsonN-sized) echo "./larson-sized 5 8 1000 5000 100 4141 $p" ;;
    mstressN) echo "./mstress $p 50 25" ;;
    rptestN) echo "./rptest $p 0 1 2 500 1000 100 8 16000" ;;
    gs) echo "gs -dBATCH -dNODISPLAY $ext/large.pdf" ;;
    lua) echo "make -C $ext/lua -j $p" ;;
    alloc-test1) echo "./alloc-test 1" ;;
    alloc-testN) echo "./alloc-test $((p > 16 ? 16 : p))" ;;
    xmalloc-testN) echo "./xmalloc-test -w $p -t 5 -s 64" ;;
    cache-scratch1) echo "./cache-scratch 1 1000 1 2000000 $p" ;;
    cache-scratchN) echo "./cache-scratch $p 1000 1 2000000 $p" ;;
    cache-thrash1) echo "./cache-thrash 1 1000 1 2000000 $p" ;;
    cache-thrashN) echo "./cache-thrash $p 1000 1 2000000 $p" ;;
    glibc-simple) echo "./glibc-simple" ;;
    glibc-thread) echo "./glibc-thread $p" ;;
    malloc-large) echo "./malloc-large" ;;
    mleak10) echo "./mleak 5" ;;
    mleak100) echo "./mleak 50" ;;
    rbstress1) echo "ruby $src/rbstress/stress_mem.rb 1" ;;
    rbstressN) echo "ruby $src/rbstress/stress_mem.rb $p" ;;
    z3) echo "z3 -smt2 $src/z3/test1.smt2" ;;
    redis) echo "$redis/redis-benchmark -p PORT -r 1000000 -n 100000 -q -P 16 lpush a 1 2 3 4 5 lrange a 1 5" ;;
    *) return 1 ;;
  esac
}

# The redis server runs under the allocator (timed for its peak RSS); the
# client runs without preload; time = 2,000,000 / requests per second, as in
# mimalloc-bench. --save '' keeps the run off the disk.
run_redis() { # env-prefix log tfile
  local port=$((20000 + $$ % 20000)) i
  (cd "$OUT" && exec /usr/bin/time -o "$3" -f "%e %M" env $1 "$redis/redis-server" \
     --port $port --save '' --appendonly no >"$2.server" 2>&1) &
  local srv=$!
  for i in $(seq 1 200); do
    "$redis/redis-cli" -p $port ping >/dev/null 2>&1 && break
    kill -0 $srv 2>/dev/null || break
    sleep 0.05 # polling the server's start, not standing in for it
  done
  timeout "$TIMEOUT" $(cmd_of redis | sed "s/PORT/$port/") >"$2" 2>&1
  local rc=$?
  "$redis/redis-cli" -p $port shutdown nosave >/dev/null 2>&1
  wait $srv
  [ $rc -eq 0 ] || return 1
  local ops
  ops=$(tr '\r' '\n' <"$2" | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1)
  [ -n "$ops" ] || return 1
  awk -v o="$ops" '{ printf "%.4f %s\n", 2000000 / o, $2 }' "$3"
}

run_one() { # row name lib run -> prints "time rss_kib" or returns 1
  local row=$1 name=$2 lib=$3 envp="" log="$OUT/$1-$2-$4.log" tf="$OUT/.time"
  [ -n "$lib" ] && envp="LD_PRELOAD=$lib"
  rm -f "$tf"
  if [ "$row" = redis ]; then
    run_redis "$envp" "$log" "$tf"
    return
  fi
  [ "$row" = lua ] && make -C "$ext/lua" clean >/dev/null 2>&1
  local in=/dev/null
  [ "$row" = barnes ] && in=$src/barnes/input
  (cd "$bin" && timeout "$TIMEOUT" /usr/bin/time -o "$tf" -f "%e %M" \
     env $envp $(cmd_of "$row") <"$in" >"$log" 2>&1) || return 1
  local t rss
  read -r t rss <"$tf" || return 1
  case $row in
    larson*) t=$(sed -n 's/.* time: \([0-9.]*\).*/\1/p' "$log") ;;
    xmalloc*) t=$(sed -n 's/rtime: \([0-9.]*\).*/\1/p' "$log") ;;
    rptest*) t=$(sed -n 's/.*\.\.\.\([0-9]*\) memory ops.*/\1/p' "$log" |
                 awk '{ printf "%.4f", 2000000 / $1 }') ;;
    glibc-thread) t=$(sed -n '1s/^\([0-9.]*\).*/\1/p' "$log" |
                      awk '{ printf "%.4f", 1000000000 / $1 }') ;;
  esac
  [ -n "$t" ] || return 1
  echo "$t $rss"
}

{
  echo "# mimalloc-bench $(git -C "$MB" rev-parse --short HEAD 2>/dev/null || echo '?'), procs=$PROCS, runs=$RUNS, $(date -u +%FT%TZ)"
  for i in "${!names[@]}"; do echo "# alloc ${names[$i]} ${libs[$i]:-(no preload)}"; done
} >"$raw"
for r in $(seq 1 "$RUNS"); do
  echo "# pass $r start: $(uptime)" | tee -a "$raw" >&2
  for row in $ROWS; do
    cmd_of "$row" >/dev/null || { echo "unknown row $row" >&2; exit 2; }
    n=${#names[@]}
    for k in $(seq 0 $((n - 1))); do
      i=$(((k + r - 1) % n)) # rotate the starting allocator each pass
      if res=$(run_one "$row" "${names[$i]}" "${libs[$i]}" "$r"); then
        echo "$row	${names[$i]}	$r	${res% *}	${res#* }" >>"$raw"
      else
        echo "$row	${names[$i]}	$r	fail	fail" >>"$raw"
      fi
      echo "pass $r $row ${names[$i]}: ${res:-fail}" >&2
    done
  done
done
echo "# end: $(uptime)" | tee -a "$raw" >&2

table "$raw" "${names[@]}"
echo "raw results: $raw" >&2
