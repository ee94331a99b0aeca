#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs the security tests of the public mimalloc-bench suite
# (github.com/daanx/mimalloc-bench, bench/security: double and invalid frees,
# overflows, uses after free, 0-byte blocks) under several allocators by
# LD_PRELOAD and prints a markdown table of what each catches. An optional
# tool like tools/mimalloc-bench.sh: `make test` and `make bench` never use it.
#
#   tools/mimalloc-bench-security.sh MB NAME=LIB.so ... [NAME=]
#     MB      a mimalloc-bench checkout with its benchmarks built in
#             MB/out/bench (cmake -B out/bench -S bench && cmake --build out/bench)
#     NAME=   (empty path) runs without preload: the system allocator
#   OUT=dir keeps each test's output and the raw results (raw.tsv)
#
# A test prints NOT_CAUGHT once the misuse went through unnoticed (or the
# weakness it looks for showed: malloc handed the freed block straight back,
# a block was not zeroed). It passes when it did not print that: "caught"
# (the process ended before, by a signal or an exit status, in 10 s at most)
# or "ok" (it ended normally: the weakness did not arise).
set -u
[ $# -ge 2 ] || { sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
MB=$(cd "$1" && pwd) || exit 2
shift
dir=$MB/out/bench/security
[ -d "$dir" ] || { echo "no $dir: build mimalloc-bench's benchmarks first" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
raw=$OUT/raw.tsv
: >"$raw"
tests=$(cd "$dir" && for f in *; do [ -f "$f" ] && [ -x "$f" ] && echo "$f"; done)
names=()
for spec in "$@"; do
  name=${spec%%=*} lib=${spec#*=}
  if [ -n "$lib" ]; then
    [ -f "$lib" ] || { echo "$name: no such library: $lib" >&2; exit 2; }
    lib=$(realpath "$lib") # (the tests run in their own folder)
  fi
  names+=("$name")
  for t in $tests; do
    log=$OUT/$name.$t.log
    rc=$( (cd "$dir" && LD_PRELOAD=$lib timeout 10 "./$t" >"$log" 2>&1; echo $?) 2>/dev/null)
    if grep -aq NOT_CAUGHT "$log"; then r=missed
    elif [ $rc = 0 ]; then r=ended0
    else r=caught; fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$t" "$r" "$rc" >>"$raw"
  done
done
python3 - "$raw" "${names[@]}" <<'EOF'
import collections, re, sys
raw, names = sys.argv[1], sys.argv[2:]
res = {}
for line in open(raw):
    name, test, r, rc = line.rstrip('\n').split('\t')
    res[name, test] = r
tests = sorted({t for _, t in res})
def group(t):
    if t.startswith('double_free'): return 'double free'
    if t.startswith('invalid_free') or 'delete' in t: return 'invalid free or delete'
    if 'flow' in t: return 'overflow, underflow'
    if 'after_free' in t or t.startswith('realloc_reuse'): return 'use after free'
    if 'zero_size' in t: return 'access to a 0-byte block'
    return 'other'
groups = collections.OrderedDict()
for g in ['double free', 'invalid free or delete', 'overflow, underflow', 'use after free',
          'access to a 0-byte block', 'other']:
    groups[g] = [t for t in tests if group(t) == g]
print("Tests passed (did not print NOT_CAUGHT), by kind:\n")
print("| kind (tests) | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for g, ts in groups.items():
    if ts:
        print(f"| {g} ({len(ts)}) | " + " | ".join(str(sum(res.get((n, t)) in ('caught', 'ended0') for t in ts)) for n in names) + " |")
print(f"| all ({len(tests)}) | " + " | ".join(str(sum(res.get((n, t)) in ('caught', 'ended0') for t in tests)) for n in names) + " |")
print("\nPer test (caught: ended by a signal or an error exit; ok: ended normally; –: NOT_CAUGHT):\n")
print("| test | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
short = {'caught': 'caught', 'missed': '–', 'ended0': 'ok'}
for t in tests:
    print(f"| {t} | " + " | ".join(short.get(res.get((n, t)), '?') for n in names) + " |")
EOF
