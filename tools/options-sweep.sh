#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/options-sweep.sh [PATTERN...]: the tests that do not depend on an
# option's value (the API, C++, threads, fork, start-up, misuse, a
# sandbox), run with
# each of the option sets below in the environment, on both builds (not
# part of `make test`: tests/run.sh clears every HAKOZUNA_ variable, so
# that the suite tests the defaults). Users set these options; a set that
# breaks a program nothing else runs would go unseen. PATTERNs keep only the
# sets that contain one of them (`tools/options-sweep.sh STASH`). Prints a
# PASS or FAIL line for each set, build and test, with the end of a failure's log; exits 1
# if any failed.
#   OUT=dir   keep every log there (default: a temp dir, removed)
set -u
cd "$(dirname "$0")/.."
make -s lib test-build >/dev/null || exit 1
out=${OUT:-$(mktemp -d)}
[ -n "${OUT:-}" ] || trap 'rm -rf "$out"' EXIT
mkdir -p "$out"
B=$PWD/build/tests

sets=(
  "HAKOZUNA_STASH=0"
  "HAKOZUNA_STASH=4096"
  "HAKOZUNA_PURGE_DELAY=0"
  "HAKOZUNA_PURGE_DELAY=-1"
  "HAKOZUNA_PURGE_DELAY=1 HAKOZUNA_PURGE_THREAD=2"
  "HAKOZUNA_PURGE_THREAD=0"
  "HAKOZUNA_THREAD_CACHE=0 HAKOZUNA_HUGE_CACHE=0"
  "HAKOZUNA_MMAP_THRESHOLD=32768"
  "HAKOZUNA_THP=1"
  "HAKOZUNA_ARENA_RESERVE=4"
  "HAKOZUNA_CHECK=0"
  "HAKOZUNA_PROFILE=1 HAKOZUNA_PROFILE_RATE=1 HAKOZUNA_PROFILE_FILE=$out/profile-%p.pb.gz"
  "HAKOZUNA_LEAKS=1 HAKOZUNA_PROFILE_RATE=64"
  "HAKOZUNA_STATS=1 HAKOZUNA_STATS_FILE=$out/stats-%p.txt HAKOZUNA_VERBOSE=1"
  "HAKOZUNA_PAGE_SIZE=16384 HAKOZUNA_STASH=64 HAKOZUNA_PURGE_DELAY=5"
)
tests="api/api api/cxx threads/stress threads/tiny_remote threads/fork threads/churn
  threads/lastexit threads/join threads/join_tls init/ctor init/dlopen misuse/hardened arena/sandbox_kill"

# Where a profiler samples a block, the block is served from a large span of
# its own (docs/profiling.md): misuse/hardened's small-block cases then meet
# the large blocks' checks (a freed one faults; a sized delete takes any size
# it holds), and api/api's read of a freed block faults in the checked build.
# These pairs test the sampling rate, not the option. misuse/hardened counts
# a misuse caught when the program aborts, which HAKOZUNA_CHECK=0 turns off
# (tests/misuse/trim_double.c and tests/stats/report.sh check that mode).
excluded() { # excluded SET BUILD TEST
  case $1 in
  *PROFILE_RATE=*) [ "$3" = misuse/hardened ] || { [ "$3" = api/api ] && [ "$2" = checked ]; } ;;
  *CHECK=0*) [ "$3" = misuse/hardened ] ;;
  *PURGE_THREAD=2*) [ "$3" = arena/sandbox_kill ] ;; # (its thread: not for a sandboxed program, README)
  *) return 1 ;;
  esac
}

selected() {
  [ $# -le 1 ] && return 0
  local s=$1 p
  shift
  for p in "$@"; do case $s in *"$p"*) return 0 ;; esac; done
  return 1
}

failed=0 passed=0 skipped=0 n=0
for set in "${sets[@]}"; do
  n=$((n + 1))
  selected "$set" "$@" || continue
  for build in default checked; do
    lib=$PWD/build/libhakozuna.so target=hakozuna
    [ $build = checked ] && lib=$PWD/build/libhakozuna-checked.so target=hakozuna-checked
    for t in $tests; do
      excluded "$set" $build $t && continue
      log=$out/$n-$build-${t//\//.}.log
      # shellcheck disable=SC2086 # (the set is words)
      { env $set HZ_TEST_TARGET=$target HZ_LIB="$lib" LD_PRELOAD="$lib" \
          timeout -k 10 300 "$B/$t" >"$log" 2>&1 </dev/null; } 2>/dev/null
      rc=$?
      if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "PASS  [$set] $build $t"
      elif [ $rc -eq 77 ]; then # (the test cannot run here: no seccomp filter, say)
        skipped=$((skipped + 1))
        echo "SKIP  [$set] $build $t: $(tail -n 1 "$log")"
      else
        failed=$((failed + 1))
        echo "FAIL  [$set] $build $t (exit status $rc)"
        tail -n 15 "$log" | sed 's/^/    | /'
      fi
    done
  done
done
echo "options sweep: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
