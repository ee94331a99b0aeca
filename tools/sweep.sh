#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/sweep.sh SECONDS [WORKERS]: the threaded tests, many copies at once,
# for a machine with many cores (not part of `make test`). Races that 2 cores
# never show need threads that truly run side by side and a loaded machine.
# Builds the library, the tests and the ThreadSanitizer tests, then, until
# SECONDS have passed: one worker runs the whole suite (tests/run.sh) again
# and again, WORKERS-3 (default: cores/3, at least 1) the thread, purge,
# trim, heap and remote groups, each in its own copy of the build folder, and
# two run the TSan tests (make test-tsan's) in turn. Prints a summary and
# the failures' output; exits 1 if anything failed.
#   OUT=dir   keep the summary and failures' logs there (default: a temp dir)
set -u
[ $# -ge 1 ] || { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }
duration=$1
cores=$(nproc)
workers=${2:-$((cores / 3 + 3))}
[ "$workers" -ge 4 ] || workers=4
cd "$(dirname "$0")/.."
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tsan_tests=$(sed -n 's/^TSAN_TESTS *:= *//p' mk/reliability.mk)

make -s -j"$cores" lib test-build >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
make -s -j"$cores" $(for t in $tsan_tests; do echo "build/tsan/$t"; done) >"$out/build-tsan.log" 2>&1 ||
  { echo "sweep: the TSan tests do not build here (see $out/build-tsan.log); running without them"; tsan_tests=; }
: >"$out/passes.txt"; : >"$out/failures.txt"; : >"$out/tsan.txt"
end=$((SECONDS + duration))

# suite W [PATTERN...]: tests/run.sh in its own copy of build/ until the time
# is up; a pass the end of the time cuts short counts for nothing.
suite() {
  local w=$1 i=0 rc
  shift
  cp -r build "$tmp/b$w"
  while [ $SECONDS -lt $end ]; do
    i=$((i + 1))
    timeout $((end - SECONDS + 120)) tests/run.sh --build "$tmp/b$w" "$@" >"$tmp/out$w" 2>&1
    rc=$?
    [ $rc = 124 ] && break
    [ $rc = 0 ] || { echo "=== worker $w, pass $i"; grep -A25 '^FAIL' "$tmp/out$w" | head -80; } >>"$out/failures.txt"
    echo "worker $w pass $i: $(tail -1 "$tmp/out$w")" >>"$out/passes.txt"
  done
}

tsan() {
  local w=$1 t rc
  while [ $SECONDS -lt $end ]; do
    for t in $tsan_tests; do
      env TSAN_OPTIONS='halt_on_error=1 second_deadlock_stack=1' HZ_TEST_TARGET=tsan HAKOZUNA_PURGE_DELAY=1 \
        HZ_STRESS_SECONDS=1 HZ_STRESS_MIN_OPS=1 HZ_CHURN_THREADS=1000 timeout 300 "build/tsan/$t" >"$tmp/tsan$w" 2>&1
      rc=$?
      [ $rc = 0 ] || { echo "=== TSan worker $w: $t exited $rc"; head -80 "$tmp/tsan$w"; } >>"$out/failures.txt"
      echo "$t $rc" >>"$out/tsan.txt"
    done
  done
}

suite 0 &
for ((w = 1; w <= workers - 3; w++)); do suite "$w" threads purge trim heap remote & done
if [ -n "$tsan_tests" ]; then tsan A & tsan B & fi
wait

echo "sweep: $cores cores, $workers workers, ${duration} s, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "suite passes: $(grep -c . "$out/passes.txt"), with a failure: $(grep -vc ' 0 failed' "$out/passes.txt")"
grep -v ' 0 failed' "$out/passes.txt"
[ -z "$tsan_tests" ] || echo "TSan runs: $(grep -c . "$out/tsan.txt"), failed: $(grep -vc ' 0$' "$out/tsan.txt")"
if [ -s "$out/failures.txt" ]; then
  head -c 4000 "$out/failures.txt"
  echo "sweep: FAILED (all of it in $out/failures.txt)"
  exit 1
fi
echo "sweep: no failure"
