#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/profile/run.sh [PROGRAM]: the heap profiler (tests/profile/profile.c)
# end to end, with build/tests/profile/profile or PROGRAM (the same linked
# with the checked build: preloading one copy of the allocator over another
# would leave two exit profiles racing for one file). Estimates per call site within 10% of the truth; the pprof
# file read by `go tool pprof -top` (Debian's golang-go where Go is missing),
# naming the sites; the leak report naming exactly the leaking sites; exit
# profiles of a parent and its fork children; dumps while threads allocate.
# Needs TEST_BIN (run.sh).
. "$(dirname "$0")/../lib.sh"
prog=${1:-$TEST_BIN/profile/profile}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# No purge thread: only the test's threads draw sample points, in a fixed order.
run() { env HAKOZUNA_PURGE_THREAD=0 "$@"; }

# 1. Known sites, a fixed seed, a rate of 64 KiB (see profile.c).
run HAKOZUNA_PROFILE=1 HAKOZUNA_PROFILE_SEED=7 HAKOZUNA_PROFILE_RATE=65536 HAKOZUNA_PROFILE_FILE="$tmp/exit-%p.pb.gz" \
  "$prog" sites "$tmp" >"$tmp/sites.out" 2>&1 || fail "profile sites: $(tail -n 20 "$tmp/sites.out")"
cat "$tmp/sites.out"
grep -q "site_tiny;" "$tmp/sites.alloc.folded" 2>/dev/null || grep -q ";site_tiny " "$tmp/sites.alloc.folded" ||
  fail "sites.alloc.folded has no stack ending in site_tiny"
ls "$tmp"/exit-*.pb.gz >/dev/null 2>&1 || fail "no exit profile exit-PID.pb.gz"
gzip -t "$tmp/sites.pb.gz" || fail "sites.pb.gz is not a valid gzip file (CRC or length)"

# 2. Leaks: sampling on, no profile written, a report on stderr.
(cd "$tmp" && run HAKOZUNA_LEAKS=1 "$prog" leaks) 2>"$tmp/leaks.err" || fail "profile leaks failed"
grep -q "SAMPLED leak report" "$tmp/leaks.err" || fail "no sampled leak report: $(head -c 400 "$tmp/leaks.err")"
grep -q "HAKOZUNA_PROFILE_RATE=524288" "$tmp/leaks.err" || fail "the leak report does not state the rate"
found=$(grep -o '[a-z_]*_site[a-z_]*' "$tmp/leaks.err" | sort -u | tr '\n' ' ')
[ "$found" = "leak_site_one leak_site_two " ] ||
  fail "the leak report names '$found', want exactly 'leak_site_one leak_site_two '"
ls "$tmp"/hakozuna-*.pb.gz >/dev/null 2>&1 && fail "HAKOZUNA_LEAKS=1 alone wrote a profile"
# The main program is named by its file, not by argv[0], which a program
# that sets its title rewrites (redis-server showed as "redis-server *:6379").
(cd "$tmp" && run HAKOZUNA_LEAKS=1 "$prog" leaks retitle) 2>"$tmp/retitle.err" || fail "profile leaks retitle failed"
grep "leak_site_one" "$tmp/retitle.err" | grep -q "($(readlink -f "$prog"))" ||
  fail "the leak report does not name the program by its file: $(grep leak_site_one "$tmp/retitle.err" | head -n 2)"
grep -q "TTTT" "$tmp/retitle.err" && fail "the leak report names the program by its rewritten argv[0]"
# ... and to the program's output hook (hz_set_output) when it has one.
(cd "$tmp" && run HAKOZUNA_LEAKS=1 "$prog" leaks-hooked "$tmp") 2>"$tmp/leaks-hooked.err" || fail "profile leaks-hooked failed"
grep -q "SAMPLED leak report" "$tmp/hook.txt" || fail "the output hook got no leak report: $(head -c 400 "$tmp/hook.txt")"
grep -q "leak_site_two" "$tmp/hook.txt" || fail "the leak report through the hook names no leak_site_two"
grep -q "SAMPLED leak report" "$tmp/leaks-hooked.err" && fail "with an output hook set, the leak report still went to stderr"

# 3. Fork: each process writes its own exit profile (%p).
(cd "$tmp" && run HAKOZUNA_PROFILE=1 HAKOZUNA_PROFILE_FILE=fork-%p.pb.gz "$prog" fork "$tmp") \
  >"$tmp/fork.out" 2>&1 || fail "profile fork: $(tail -n 20 "$tmp/fork.out")"
ppid_=$(sed -n 's/^parent pid //p' "$tmp/fork.out")
grep -q parent_site "$tmp/fork-$ppid_.txt" 2>/dev/null || fail "the parent's exit profile fork-$ppid_.txt lacks parent_site"
[ "$(ls "$tmp"/fork-*.pb.gz | wc -l)" -eq 9 ] || fail "want 9 fork profiles (parent, 8 children): $(ls "$tmp")"

# 3b. A profile that cannot be written is reported, also by a program that
# closed stderr before exiting (the warning went to a closed descriptor).
run HAKOZUNA_PROFILE=1 HAKOZUNA_PROFILE_FILE="$tmp/no-such-dir/p.pb.gz" "$prog" close-stderr 2>"$tmp/nodir.err" ||
  fail "profile close-stderr failed"
grep -q "warning: the heap profile could not be written to $tmp/no-such-dir/p.pb.gz" "$tmp/nodir.err" ||
  fail "no warning for a profile that could not be written: '$(head -c 300 "$tmp/nodir.err")'"

# 4. Switched on at run time; dumps while two threads allocate.
run "$prog" concurrent "$tmp" >"$tmp/conc.out" 2>&1 || fail "profile concurrent: $(tail -n 20 "$tmp/conc.out")"

# 4b. Every block sampled: aligned requests stay aligned.
run HAKOZUNA_PROFILE=1 HAKOZUNA_PROFILE_RATE=1 HAKOZUNA_PROFILE_FILE="$tmp/aligned.pb.gz" "$prog" aligned \
  >"$tmp/aligned.out" 2>&1 || fail "profile aligned: $(tail -n 20 "$tmp/aligned.out")"

[ "$failures" -eq 0 ] || finish
# 5. pprof reads the profile and names the sites.
PATH=$PATH:/usr/local/go/bin
need go-pprof
for index in inuse_space alloc_space alloc_objects inuse_objects; do
  go tool pprof -top -nodefraction=0 -nodecount=1000 -sample_index=$index "$tmp/sites.pb.gz" >"$tmp/top.txt" 2>&1 ||
    fail "go tool pprof -top -nodefraction=0 -nodecount=1000 -sample_index=$index: $(head -c 400 "$tmp/top.txt")"
  for s in site_tiny site_small site_medium site_large site_huge; do
    grep -q " $s\$" "$tmp/top.txt" || fail "pprof $index: no line for $s: $(head -c 600 "$tmp/top.txt")"
  done
done
head -n 12 "$tmp/top.txt"

# 6. tools/flamegraph.py draws the collapsed stacks.
need matplotlib
/usr/bin/python3 "$(dirname "$0")/../../tools/flamegraph.py" "$tmp/sites.alloc.folded" "$tmp/flame.png" ||
  fail "tools/flamegraph.py failed"
[ "$(head -c 4 "$tmp/flame.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "flame.png is not a PNG"
finish
