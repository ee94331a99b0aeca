#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/options/env.sh: options from HAKOZUNA_<NAME> environment variables.
# Boolean values 1/yes/on/true in any case; HAKOZUNA_STATS=1 prints the
# report (containing "hakozuna") on stderr at exit; a bad value warns, naming
# the option, and leaves the default; an unknown name warns; HAKOZUNA_VERBOSE
# explains a failed allocation; the launcher's --option knows the same names.
# Needs TEST_BIN and HZ_LIB (run.sh).
. "$(dirname "$0")/../lib.sh"
opts=$TEST_BIN/options/options
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# get NAME [VAR=VALUE]: the option's value as the program sees it; its
# stderr goes to $tmp/err.
get() {
  env -u HAKOZUNA_STATS -u HAKOZUNA_PURGE_DELAY -u HAKOZUNA_VERBOSE ${2:+"$2"} \
    "$opts" get "$1" 2>"$tmp/err"
}

for v in 1 yes on true YES On TRUE Yes; do
  out=$(get stats HAKOZUNA_STATS=$v)
  [ "$out" = 1 ] || fail "HAKOZUNA_STATS=$v: stats option is '$out', want 1"
  grep -q hakozuna "$tmp/err" ||
    fail "HAKOZUNA_STATS=$v: no report on stderr: $(head -c 300 "$tmp/err")"
done
for v in 0 no off false NO Off FALSE; do
  out=$(get stats HAKOZUNA_STATS=$v)
  [ "$out" = 0 ] || fail "HAKOZUNA_STATS=$v: stats option is '$out', want 0"
  [ -s "$tmp/err" ] && fail "HAKOZUNA_STATS=$v: stderr: $(head -c 300 "$tmp/err")"
done

out=$(get verbose HAKOZUNA_VERBOSE=on)
[ "$out" = 1 ] || fail "HAKOZUNA_VERBOSE=on: verbose is '$out'"

default=$(get purge_delay)
[ -s "$tmp/err" ] && fail "no options set: stderr: $(head -c 300 "$tmp/err")"
out=$(get purge_delay HAKOZUNA_PURGE_DELAY=250)
[ "$out" = 250 ] || fail "HAKOZUNA_PURGE_DELAY=250: purge_delay is '$out'"
[ "$default" != 250 ] || fail "default purge_delay is 250: pick another value"
out=$(get purge_delay HAKOZUNA_PURGE_DELAY=banana)
[ "$out" = "$default" ] ||
  fail "HAKOZUNA_PURGE_DELAY=banana: purge_delay is '$out', want the default $default"
grep -qi purge_delay "$tmp/err" ||
  fail "HAKOZUNA_PURGE_DELAY=banana: no warning naming purge_delay: $(head -c 300 "$tmp/err")"
[ "$(grep -c . "$tmp/err")" -le 2 ] ||
  fail "HAKOZUNA_PURGE_DELAY=banana: warning is long: $(head -c 500 "$tmp/err")"

# The boolean words are numbers, range-checked like any: 0/off/1/yes for an
# option whose least value is 4 warn and keep the default (arena_reserve=0
# once crashed the first malloc).
default=$(get arena_reserve)
for v in 0 off no 1 yes 3; do
  out=$(get arena_reserve HAKOZUNA_ARENA_RESERVE=$v)
  [ "$out" = "$default" ] ||
    fail "HAKOZUNA_ARENA_RESERVE=$v: arena_reserve is '$out', want the default $default"
  grep -qi arena_reserve "$tmp/err" ||
    fail "HAKOZUNA_ARENA_RESERVE=$v: no warning naming arena_reserve: $(head -c 300 "$tmp/err")"
done
out=$(get mmap_threshold HAKOZUNA_MMAP_THRESHOLD=yes)
[ "$out" != 1 ] || fail "HAKOZUNA_MMAP_THRESHOLD=yes: mmap_threshold is 1 (range starts at 32768)"

# HAKOZUNA_STATS_FILE: the report goes to the file (%p: the pid), not to
# stderr, also from a program that changes directory; an unwritable path warns
# and the report goes to stderr.
env -u HAKOZUNA_STATS HAKOZUNA_STATS_FILE="$tmp/report-%p.txt" sh -c 'cd / && exec "$0" get stats' "$opts" \
  >"$tmp/out" 2>"$tmp/err"
[ "$(cat "$tmp/out")" = 1 ] || fail "HAKOZUNA_STATS_FILE: stats option is '$(cat "$tmp/out")', want 1"
[ -s "$tmp/err" ] && fail "HAKOZUNA_STATS_FILE: stderr is not empty: $(head -c 300 "$tmp/err")"
set -- "$tmp"/report-*.txt
[ $# = 1 ] && [ -f "$1" ] || fail "HAKOZUNA_STATS_FILE=$tmp/report-%p.txt: no single report file: $*"
case $1 in *report-[0-9]*.txt) ;; *) fail "HAKOZUNA_STATS_FILE: %p not replaced by a pid: $1" ;; esac
grep -q hakozuna "$1" || fail "HAKOZUNA_STATS_FILE: $1 holds no report: $(head -c 300 "$1")"
# Forked children name their own file (%p), or append their reports, each
# whole, to a shared one; a program that puts files of its own on high
# descriptors (a shell's `exec 100>file`) gets none of the report there.
env -u HAKOZUNA_STATS HAKOZUNA_STATS_FILE="$tmp/fork-%p.txt" "$opts" fork 4 >/dev/null 2>"$tmp/err" ||
  fail "options fork 4: $(head -c 300 "$tmp/err")"
set -- "$tmp"/fork-*.txt
[ $# = 5 ] || fail "HAKOZUNA_STATS_FILE=fork-%p.txt, 5 processes: $# files: $*"
for f; do
  [ "$(grep -c 'statistics, pid' "$f")" = 1 ] || fail "$f: not one report: $(grep 'statistics, pid' "$f")"
done
env -u HAKOZUNA_STATS HAKOZUNA_STATS_FILE="$tmp/shared.txt" "$opts" fork 4 >/dev/null 2>"$tmp/err"
[ "$(grep -c 'statistics, pid' "$tmp/shared.txt")" = 5 ] ||
  fail "HAKOZUNA_STATS_FILE=shared.txt, 5 processes: $(grep -c 'statistics, pid' "$tmp/shared.txt") reports"
[ "$(grep -c '^hakozuna .* statistics, pid' "$tmp/shared.txt")" = 5 ] &&
  [ "$(grep -c '^process: ' "$tmp/shared.txt")" = 5 ] ||
  fail "HAKOZUNA_STATS_FILE=shared.txt: reports interleaved: $(grep -n 'statistics, pid\|^process: ' "$tmp/shared.txt")"
for how in HAKOZUNA_STATS_FILE="$tmp/clobbered-report.txt" HAKOZUNA_STATS=1; do
  env -u HAKOZUNA_STATS "$how" "$opts" clobber "$tmp/user.txt" 2>"$tmp/err" || fail "options clobber: $(cat "$tmp/err")"
  [ "$(cat "$tmp/user.txt")" = userdata ] ||
    fail "$how, the program's file on descriptor 100: $(head -c 300 "$tmp/user.txt")"
done
grep -q 'statistics, pid' "$tmp/clobbered-report.txt" || fail "HAKOZUNA_STATS_FILE with descriptor 100 clobbered: no report"
grep -q 'statistics, pid' "$tmp/err" || fail "HAKOZUNA_STATS=1 with descriptors 100-163 clobbered: no report on stderr"
HAKOZUNA_STATS_FILE=/nonexistent-dir/r.txt "$opts" get stats >/dev/null 2>"$tmp/err"
grep -q 'STATS_FILE.*(errno 2)' "$tmp/err" && grep -q 'statistics, pid' "$tmp/err" ||
  fail "HAKOZUNA_STATS_FILE unwritable: want a warning and the report on stderr: $(head -c 300 "$tmp/err")"
# ... and under a descriptor limit below the 100 it keeps its descriptor above
# (GNU tar's tests run so): it was "cannot be opened" and went to stderr
(ulimit -n 50 && env -u HAKOZUNA_STATS HAKOZUNA_STATS_FILE="$tmp/low-%p.txt" "$opts" get stats >/dev/null 2>"$tmp/err")
set -- "$tmp"/low-*.txt
[ -f "$1" ] && grep -q 'statistics, pid' "$1" && [ ! -s "$tmp/err" ] ||
  fail "HAKOZUNA_STATS_FILE under ulimit -n 50: want the report in the file: $* ($(head -c 300 "$tmp/err"))"
# HAKOZUNA_PAGE_SIZE: a larger power of two is taken (and reads back);
# anything else warns, naming it, and the OS page size stays.
os_page=$(getconf PAGESIZE)
out=$(get page_size)
[ "$out" = "$os_page" ] || fail "page_size is '$out', want the OS page size $os_page"
out=$(get page_size HAKOZUNA_PAGE_SIZE=65536)
[ "$out" = 65536 ] || fail "HAKOZUNA_PAGE_SIZE=65536: page_size is '$out'"
out=$(get page_size HAKOZUNA_PAGE_SIZE=12288)
[ "$out" = "$os_page" ] || fail "HAKOZUNA_PAGE_SIZE=12288: page_size is '$out', want $os_page"
grep -qi PAGE_SIZE "$tmp/err" ||
  fail "HAKOZUNA_PAGE_SIZE=12288: no warning naming it: $(head -c 300 "$tmp/err")"

# An unknown HAKOZUNA_ name (a typo) is not silently ignored.
env HAKOZUNA_STAT=1 "$opts" get stats >/dev/null 2>"$tmp/err"
grep -q "unknown option HAKOZUNA_STAT " "$tmp/err" ||
  fail "HAKOZUNA_STAT=1: no warning naming it: $(head -c 300 "$tmp/err")"
[ "$(grep -c . "$tmp/err")" -eq 1 ] || fail "HAKOZUNA_STAT=1: stderr: $(head -c 500 "$tmp/err")"

# HAKOZUNA_VERBOSE=1 says why an allocation failed (here: under a 1 GiB
# address-space limit, a 4 GiB request); without it, nothing is printed.
for v in 1 0; do
  out=$( (ulimit -v 1048576 && env HAKOZUNA_VERBOSE=$v "$opts" alloc 4294967296) 2>"$tmp/err")
  [ "$out" = null ] || fail "malloc(4 GiB) under ulimit -v 1048576 printed '$out', want null"
  if [ $v = 1 ]; then
    grep -q "mmap of [0-9]* bytes failed" "$tmp/err" ||
      fail "HAKOZUNA_VERBOSE=1: no mmap failure reported: $(head -c 300 "$tmp/err")"
    grep -q "out of memory: a request of 4294967296 bytes failed" "$tmp/err" ||
      fail "HAKOZUNA_VERBOSE=1: no out-of-memory line: $(head -c 300 "$tmp/err")"
  else
    [ -s "$tmp/err" ] && fail "HAKOZUNA_VERBOSE=0: stderr: $(head -c 300 "$tmp/err")"
  fi
done

# ... and a purge thread that could not start (every pthread_create fails;
# a freed 16 MiB block waits in the huge cache for the purge thread, which
# this single-threaded program starts only with HAKOZUNA_PURGE_THREAD=2).
env HAKOZUNA_VERBOSE=1 HAKOZUNA_PURGE_THREAD=2 LD_PRELOAD="$TEST_BIN/options/libnothreads.so" "$opts" alloc 16777216 \
  >/dev/null 2>"$tmp/err"
grep -q "purge thread" "$tmp/err" ||
  fail "HAKOZUNA_VERBOSE=1, pthread_create failing: no word of the purge thread: $(head -c 300 "$tmp/err")"

# The launcher knows the same option names as the library and refuses others.
root=$(cd "$(dirname "$0")/../.." && pwd)
"$opts" names >"$tmp/lib-names"
"$root/tools/hakozuna" options >"$tmp/launcher-names"
cmp -s "$tmp/lib-names" "$tmp/launcher-names" ||
  fail "tools/hakozuna's option list differs from src/options.c: $(diff "$tmp/lib-names" "$tmp/launcher-names" | tr '\n' ' ')"
"$root/tools/hakozuna" run --option purg_delay=1 -- true 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "unknown option 'purg_delay'" "$tmp/err" ||
  fail "hakozuna run --option purg_delay=1: exit $rc, stderr: $(head -c 300 "$tmp/err")"

# The report also comes from a program that is not linked with hakozuna,
# also one that allocates before main, before any library constructor (a
# .preinit_array function). (Not sort or ls: they close stderr themselves.)
for prog in init/dlopen init/ctor; do
  env HAKOZUNA_STATS=1 LD_PRELOAD="$HZ_LIB" "$TEST_BIN/$prog" 2>"$tmp/err" >/dev/null
  grep -q hakozuna "$tmp/err" ||
    fail "HAKOZUNA_STATS=1 LD_PRELOAD=$HZ_LIB $TEST_BIN/$prog: no report on stderr: $(head -c 300 "$tmp/err")"
done
finish
