#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/run.sh: runs the test suite (`make test` builds it and calls this).
#
#   tests/run.sh [--glibc | --windows | --musl] [--build DIR] [--emulator CMD] [PATTERN...]
#
# Prints one PASS/FAIL/SKIP line per test (a failure also shows the end of
# its output; the whole of it is in DIR/tests/logs/) and a summary; exits 1
# if any test failed. PATTERNs keep only the tests whose name contains one
# of them. Default: every test on hakozuna (build/libhakozuna.so preloaded
# or linked), then the core tests again on build/libhakozuna-checked.so and
# with 64 KiB pages assumed (HAKOZUNA_PAGE_SIZE=65536).
# --glibc: the allocator-independent tests on the system's malloc, without
# preloading anything (to debug the tests themselves).
# --emulator CMD: the test programs are another architecture's, run as
# CMD PROGRAM ARGS (tests/platform/qemu-aarch64.sh), which gets the library
# to preload in HZ_GUEST_PRELOAD; only the test programs run (not the shell
# tests, which use host tools), with smaller sizes (see test_env below).
# --windows: the Windows programs (make TARGET=x86_64-w64-mingw32
# win-test-build), with --emulator tests/platform/wine.sh.
# --musl: the programs built against musl (make TARGET=x86_64-linux-musl
# musl-test-build), run natively; the library is preloaded into the program
# only (tests/platform/musl-run.sh: the runner's tools are glibc's, whose
# loader cannot load it), and only the test programs run, as emulated.
set -u

build=build
mode=hakozuna
emulator=""
musl=""
patterns=()
while [ $# -gt 0 ]; do
  case $1 in
  --glibc) mode=glibc ;;
  --windows) mode=windows ;;
  --musl) musl=1 ;;
  --build) build=$2; shift ;;
  --emulator) emulator=$2; shift ;;
  -h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) patterns+=("$1") ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$root" && mkdir -p "$build" && cd "$build" && pwd)
export TEST_BIN=$build/tests
logs=$TEST_BIN/logs
mkdir -p "$logs"
lib=$build/libhakozuna.so
lib_checked=$build/libhakozuna-checked.so

# Nothing from the caller's environment changes the allocator under test.
unset LD_PRELOAD
for v in $(env | sed -n 's/^\(HAKOZUNA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# Extra environment of every test (the 64 KiB-page pass sets it).
test_env=()
# Emulated runs are slow: shorter timed loops, fewer threads.
[ -n "$emulator" ] && test_env=(HZ_TEST_EMULATED=1 HZ_STRESS_SECONDS=0.5 HZ_STRESS_MIN_OPS=50
                                HZ_CHURN_THREADS=400 HZ_SWEEP_STEP=7)
# musl's run checks the port: the timed loops shorter, as emulated.
[ -n "$musl" ] && test_env=(HZ_STRESS_SECONDS=0.5 HZ_STRESS_MIN_OPS=50 HZ_CHURN_THREADS=400 HZ_SWEEP_STEP=7)

passed=0 failed=0 skipped=0
failed_names=()
suite_start=$EPOCHREALTIME

selected() {
  [ ${#patterns[@]} -eq 0 ] && return 0
  for p in "${patterns[@]}"; do
    case $1 in *"$p"*) return 0 ;; esac
  done
  return 1
}

# t NAME TIMEOUT PRELOAD TARGET COMMAND...: one test. PRELOAD is a library
# for LD_PRELOAD or -, TARGET the allocator (HZ_TEST_TARGET, see check.h).
t() {
  local name=$1 limit=$2 preload=$3 target=$4
  shift 4
  selected "$name" || return 0
  local log=$logs/$(echo "$name" | tr '/ []' '.._.').log
  local start=$EPOCHREALTIME rc
  if [ ! -x "$1" ]; then
    echo "$1 is not built (make test-build)" >"$log"
    rc=127
  else
    local env=(HZ_TEST_TARGET="$target" HZ_LIB="$lib" "${test_env[@]}") run=("$@")
    if [ -n "$emulator" ] || [ -n "$musl" ]; then
      [ "$preload" != - ] && env+=(HZ_GUEST_PRELOAD="$preload")
      run=(${emulator:-$root/tests/platform/musl-run.sh} "$@")
    elif [ "$preload" != - ]; then
      env+=(LD_PRELOAD="$preload" HZ_LIB="$preload")
    fi
    # (the outer 2>/dev/null: no "Segmentation fault" line from bash itself)
    { env "${env[@]}" timeout -k 10 "$limit" "${run[@]}" >"$log" 2>&1 </dev/null; } 2>/dev/null
    rc=$?
  fi
  local secs
  secs=$(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $start }")
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    printf 'PASS  %-28s %6ss\n' "$name" "$secs"
  elif [ $rc -eq 77 ]; then
    skipped=$((skipped + 1))
    printf 'SKIP  %-28s %6ss  %s\n' "$name" "$secs" "$(grep -m1 SKIP "$log")"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    local why="exit status $rc"
    [ $rc -eq 124 ] && why="timed out after ${limit}s"
    [ $rc -gt 128 ] && [ $rc -ne 137 ] && why="killed by signal $((rc - 128)) ($(kill -l $((rc - 128))))"
    [ $rc -eq 137 ] && why="killed (SIGKILL; timeout or out of memory)"
    printf 'FAIL  %-28s %6ss  %s\n' "$name" "$secs" "$why"
    tail -n 25 "$log" | sed 's/^/    | /'
  fi
}

# skip NAME REASON: a test that cannot run here, counted and shown.
skip() {
  selected "$1" || return 0
  skipped=$((skipped + 1))
  printf 'SKIP  %-28s %6ss  SKIP: %s\n' "$1" - "$2"
}

B=$TEST_BIN
if [ $mode = glibc ]; then
  g() { t "$1" "$2" - glibc "${@:3}"; }
  g api/api 300 "$B/api/api"
  g api/cxx 120 "$B/api/cxx"
  g threads/stress 120 "$B/threads/stress"
  g threads/tiny_remote 60 "$B/threads/tiny_remote"
  g threads/fork 180 "$B/threads/fork"
  g threads/churn 120 "$B/threads/churn"
  g threads/lastexit 60 "$B/threads/lastexit"
  g threads/join 60 "$B/threads/join"
  g threads/join_tls 60 "$B/threads/join_tls"
  g threads/cancel_pending 60 "$B/threads/cancel_pending"
  g threads/smallstack 60 "$B/threads/smallstack"
  g init/ctor 60 "$B/init/ctor"
  g init/dlopen 60 "$B/init/dlopen"
  g init/fork_stdio 120 "$B/init/fork_stdio"
  g init/fork_signal 120 "$B/init/fork_signal"
  g purge/trim 120 "$B/purge/trim"
  g purge/trim_pages 60 "$B/purge/trim_pages"
  g purge/calloc_reuse 60 "$B/purge/calloc_reuse"
  g purge/errno 60 "$B/purge/errno"
  g arena/as_limit 60 "$B/arena/as_limit"
  g arena/as_release 60 "$B/arena/as_release"
  g arena/as_budget 60 "$B/arena/as_budget"
  g arena/no_mprotect 60 "$B/arena/no_mprotect"
  g arena/sandbox_kill 60 "$B/arena/sandbox_kill"
  g purge/collect 60 "$B/purge/collect"
elif [ $mode = windows ]; then
  # Linked with the static library (malloc redirected) or, api/dll, with the
  # hz_* names from hakozuna.dll. No fork, preloading or glibc extras there.
  w() { t "$1" "$2" - hakozuna "${@:3}"; }
  w api/hz 300 "$B/api/api-hz.exe"
  w api/dll 300 "$B/api/api-dll.exe"
  w api/cxx 120 "$B/api/cxx.exe"
  w threads/stress 120 "$B/threads/stress.exe"
  w threads/churn 120 "$B/threads/churn.exe"
  # each case in a child started with --case N (no fork)
  w misuse/misuse 120 "$B/misuse/misuse.exe"
  w options/options 60 "$B/options/options.exe"
  w options/stats 120 "$B/options/stats.exe"
  # smoke runs: they must finish and check their blocks; no timings kept
  w bench/random_mixed 120 "$B/bench/random_mixed.exe" 200000 400 16 32768
  w bench/mt_remote 120 "$B/bench/mt_remote.exe" 4 50000 400 16 32768 50
else
  m() { # m NAME REASON COMMAND...: the test, or SKIP REASON on musl
    if [ -n "$musl" ]; then skip "$1" "musl: $2"; else "${@:3}"; fi
  }
  # (these hold hakozuna to what it does in a single-threaded program)
  single="musl says not whether a program runs a second thread (no __libc_single_threaded): hakozuna knows one only once it allocates"
  # The core tests run on both builds: NAME and NAME [checked].
  core() {
    local sfx=$1 l=$2 target=$3 hz_api=$4
    # (emulated and on musl: once; api/hz runs the same cases through the library's
    # malloc and its hz_* names in every pass)
    [ -z "$emulator$musl" ] || [ -z "$sfx" ] && t "api/api$sfx" 300 "$l" "$target" "$B/api/api"
    t "api/hz$sfx" 300 - "$target" "$B/api/$hz_api"
    m "api/cxx$sfx" "musl-gcc compiles no C++" t "api/cxx$sfx" 120 "$l" "$target" "$B/api/cxx"
    t "threads/stress$sfx" 120 "$l" "$target" "$B/threads/stress"
    t "threads/tiny_remote$sfx" 60 "$l" "$target" "$B/threads/tiny_remote"
    if [ -n "$emulator" ]; then
      skip "threads/fork$sfx" "qemu-user 7.2 aborts in a child forked while other threads run (cpu == current_cpu), on glibc too"
    else
      t "threads/fork$sfx" 180 "$l" "$target" "$B/threads/fork"
    fi
    t "misuse/misuse$sfx" 120 "$l" "$target" "$B/misuse/misuse"
    t "misuse/hardened$sfx" 120 "$l" "$target" "$B/misuse/hardened"
  }
  core "" "$lib" hakozuna api-hz
  h() { t "$1" "$2" "$lib" hakozuna "${@:3}"; }
  h threads/churn 120 "$B/threads/churn"
  m threads/lastexit "a fork child whose first thread ends while another runs hangs before musl 1.2.5 (its thread list lock stays taken)" \
    h threads/lastexit 60 "$B/threads/lastexit"
  h threads/join 60 "$B/threads/join"
  h threads/join_tls 60 "$B/threads/join_tls"
  h init/ctor 60 "$B/init/ctor"
  h init/dlopen 60 "$B/init/dlopen"
  # (not preloaded: it dlopens $HZ_LIB)
  m init/dlclose "its loader refuses to dlopen a library with initial-exec TLS" t init/dlclose 60 - glibc "$B/init/dlclose"
  # Issue 10's hangs: each runs its rounds in children with a watchdog.
  # Under qemu-user some cannot run (docs/testing.md#other-platforms): the
  # emulator cannot exec an arm64 program (no binfmt), aborts in children
  # forked while threads run, adds a thread of its own to /proc/self/status
  # and keeps its own address space outside RLIMIT_AS.
  e() { # e NAME REASON COMMAND...: the test, or SKIP REASON when emulated
    if [ -n "$emulator" ]; then skip "$1" "qemu-user: $2"; else "${@:3}"; fi
  }
  e threads/smallstack "execs /proc/self/exe (no binfmt for arm64 here)" h threads/smallstack 60 "$B/threads/smallstack"
  e threads/cancel_pending "execs /proc/self/exe (no binfmt for arm64 here)" h threads/cancel_pending 60 "$B/threads/cancel_pending"
  e "threads/cancel_pending [checked]" "execs /proc/self/exe (no binfmt for arm64 here)" \
    t "threads/cancel_pending [checked]" 60 "$lib_checked" hakozuna-checked "$B/threads/cancel_pending"
  e init/reenter "execs /proc/self/exe (no binfmt for arm64 here)" \
    t init/reenter 90 - glibc "$B/init/reenter" "$B/init/liballocshim.so"
  e init/fork_stdio "aborts in children forked while threads run" h init/fork_stdio 120 "$B/init/fork_stdio"
  e init/fork_signal "a fork from a signal handler hangs the emulated child" h init/fork_signal 120 "$B/init/fork_signal"
  e init/fork_reclaim "aborts in children forked while threads run" \
    t init/fork_reclaim 90 - hakozuna "$B/init/fork_reclaim"
  e purge/trim "its own thread counts in /proc/self/status" h purge/trim 120 "$B/purge/trim"
  e purge/trim_pages "RSS counts the emulator's own memory" h purge/trim_pages 60 "$B/purge/trim_pages"
  e purge/calloc_reuse "RSS counts the emulator's own memory" h purge/calloc_reuse 60 "$B/purge/calloc_reuse"
  e "purge/calloc_reuse [checked]" "RSS counts the emulator's own memory" \
    t "purge/calloc_reuse [checked]" 60 "$lib_checked" hakozuna-checked "$B/purge/calloc_reuse"
  e purge/errno "RLIMIT_AS does not bound the emulator's mappings" h purge/errno 60 "$B/purge/errno"
  e purge/mlock "mlockall would lock the emulator's own memory" h purge/mlock 60 "$B/purge/mlock"
  e "purge/mlock [checked]" "mlockall would lock the emulator's own memory" \
    t "purge/mlock [checked]" 60 "$lib_checked" hakozuna-checked "$B/purge/mlock"
  e arena/as_limit "RLIMIT_AS does not bound the emulator's mappings" h arena/as_limit 60 "$B/arena/as_limit"
  e "arena/as_limit [checked]" "RLIMIT_AS does not bound the emulator's mappings" \
    t "arena/as_limit [checked]" 60 "$lib_checked" hakozuna-checked "$B/arena/as_limit"
  e arena/as_release "RLIMIT_AS does not bound the emulator's mappings" h arena/as_release 60 "$B/arena/as_release"
  e "arena/as_release [checked]" "RLIMIT_AS does not bound the emulator's mappings" \
    t "arena/as_release [checked]" 60 "$lib_checked" hakozuna-checked "$B/arena/as_release"
  e arena/as_budget "RLIMIT_AS does not bound the emulator's mappings" h arena/as_budget 60 "$B/arena/as_budget"
  e "arena/as_budget [checked]" "RLIMIT_AS does not bound the emulator's mappings" \
    t "arena/as_budget [checked]" 60 "$lib_checked" hakozuna-checked "$B/arena/as_budget"
  e arena/mlock_rss "mlockall would lock the emulator's own memory" h arena/mlock_rss 60 "$B/arena/mlock_rss"
  e "arena/mlock_rss [checked]" "mlockall would lock the emulator's own memory" \
    t "arena/mlock_rss [checked]" 60 "$lib_checked" hakozuna-checked "$B/arena/mlock_rss"
  e arena/no_mprotect "a seccomp filter would apply to the emulator's own calls" h arena/no_mprotect 60 "$B/arena/no_mprotect"
  e "arena/no_mprotect [checked]" "a seccomp filter would apply to the emulator's own calls" \
    t "arena/no_mprotect [checked]" 60 "$lib_checked" hakozuna-checked "$B/arena/no_mprotect"
  e arena/sandbox_kill "a seccomp filter would apply to the emulator's own calls" h arena/sandbox_kill 60 "$B/arena/sandbox_kill"
  e "arena/sandbox_kill [checked]" "a seccomp filter would apply to the emulator's own calls" \
    t "arena/sandbox_kill [checked]" 60 "$lib_checked" hakozuna-checked "$B/arena/sandbox_kill"
  h purge/collect 60 "$B/purge/collect"
  m heap/collect "$single" e heap/collect "its own thread counts in /proc/self/status" t heap/collect 60 - hakozuna "$B/heap/collect"
  t heap/blockstart 60 - glibc "$B/heap/blockstart"
  t trim/idle 60 - hakozuna "$B/trim/idle"
  t trim/race 60 - hakozuna "$B/trim/race"
  t heap/exit_return 60 - hakozuna "$B/heap/exit_return"
  t heap/busy_cache 60 - hakozuna "$B/heap/busy_cache"
  t arena/busy_purge 60 - hakozuna "$B/arena/busy_purge"
  e arena/thp "execs /proc/self/exe (no binfmt for arm64 here), and madvise advice is not passed on" t arena/thp 60 - hakozuna "$B/arena/thp"

    t arena/regions 60 - hakozuna "$B/arena/regions"
  t arena/cpu_arenas 60 - hakozuna "$B/arena/cpu_arenas"
  t arena/impossible 60 - hakozuna "$B/arena/impossible"
  e arena/sandbox "a seccomp filter would apply to the emulator's own calls" t arena/sandbox 120 - hakozuna "$B/arena/sandbox"
  e "arena/sandbox [checked]" "a seccomp filter would apply to the emulator's own calls" \
    t "arena/sandbox [checked]" 120 "$lib_checked" hakozuna-checked "$B/arena/sandbox"
  e arena/cpu_limit "RLIMIT_AS does not bound the emulator's mappings" t arena/cpu_limit 60 - hakozuna "$B/arena/cpu_limit"
  e init/footprint "/proc/self/pagemap shows the emulator's pages" t init/footprint 60 - hakozuna "$B/init/footprint"
  t heap/span_reuse 60 - hakozuna "$B/heap/span_reuse"
  t heap/stash 60 - hakozuna "$B/heap/stash"
  t purge/idle_free 60 - hakozuna "$B/purge/idle_free"
  t purge/idle_threaded 60 - hakozuna "$B/purge/idle_threaded"
  e threads/exit_pages "RSS counts the emulator's own memory" t threads/exit_pages 60 - hakozuna "$B/threads/exit_pages"
  e purge/cycles "RSS and page faults count the emulator's own memory" t purge/cycles 60 - hakozuna "$B/purge/cycles"
  m purge/single "$single" \
    e purge/single "its own thread counts in /proc/self/status, and a fork from a signal handler hangs the emulated child" \
    t purge/single 60 - hakozuna "$B/purge/single"
  t purge/huge_reuse 120 - hakozuna "$B/purge/huge_reuse"
  t purge/huge_grow 120 - hakozuna "$B/purge/huge_grow"
  t "purge/huge_grow [checked]" 120 - hakozuna-checked "$B/purge/huge_grow-checked"
  t purge/trim_rate 120 - hakozuna "$B/purge/trim_rate"
  e purge/no_sleep "a seccomp filter would apply to the emulator's own calls" t purge/no_sleep 60 - hakozuna "$B/purge/no_sleep"
  t threads/remote 60 - hakozuna "$B/threads/remote"
  t threads/idle_inbox 60 - hakozuna "$B/threads/idle_inbox"
  e threads/fork_trim "aborts in children forked while threads run" t threads/fork_trim 120 - hakozuna "$B/threads/fork_trim"
  t threads/inbox_full 60 - hakozuna "$B/threads/inbox_full"
  t threads/join_adopted 60 - hakozuna "$B/threads/join_adopted"
  t threads/adopt 60 - hakozuna "$B/threads/adopt"
  t threads/large_remote 60 - hakozuna "$B/threads/large_remote"
  t "threads/large_remote [checked]" 60 "$lib_checked" hakozuna-checked "$B/threads/large_remote"
  t misuse/trim_double 60 - hakozuna "$B/misuse/trim_double"
  t purge/trim_huge 60 - hakozuna "$B/purge/trim_huge"
  t "purge/trim_huge [checked]" 60 - hakozuna-checked "$B/purge/trim_huge-checked"
  for kind in shared archive object static; do
    t "link/$kind" 60 - hakozuna "$B/link/link-$kind"
  done
  t options/options 60 - hakozuna "$B/options/options"
  t options/stats 120 - hakozuna "$B/options/stats"
  t options/live 120 - hakozuna "$B/options/live"
  t "options/live [checked]" 120 "$lib_checked" hakozuna-checked "$B/options/live"
  if [ -z "$emulator" ] && [ -z "$musl" ]; then
    t options/env 60 - hakozuna "$root/tests/options/env.sh"
    t options/json 300 - hakozuna "$root/tests/options/json.sh"
    t options/secure 60 - hakozuna "$root/tests/options/secure.sh"
    t stats/report 120 - hakozuna "$root/tests/stats/report.sh"
    t profile/profile 300 - hakozuna "$root/tests/profile/run.sh"
    t "profile/profile [checked]" 300 - hakozuna-checked "$root/tests/profile/run.sh" "$B/profile/profile-checked"
    # These run the programs with and without LD_PRELOAD=$HZ_LIB themselves.
    for prog in python sort gcc git sqlite; do
      t "programs/$prog" 300 - hakozuna "$root/tests/programs/programs.sh" "$prog"
    done
  fi
  # (~37,000 live large blocks: enough guard pages to use up vm.max_map_count)
  e heap/maps "the emulator, not the program, owns the mappings counted against vm.max_map_count" h heap/maps 180 "$B/heap/maps"
  e "heap/maps [checked]" "the emulator, not the program, owns the mappings counted against vm.max_map_count" \
    t "heap/maps [checked]" 180 "$lib_checked" hakozuna-checked "$B/heap/maps"
  core " [checked]" "$lib_checked" hakozuna-checked api-hz-checked
  # The geometry of 64 KiB-page kernels (arm64, ppc64): spans of whole pages.
  test_env+=(HAKOZUNA_PAGE_SIZE=65536)
  if [ -n "$musl" ]; then skip "core [64k pages]" "musl: the page geometry is no libc's (the glibc run has it)"
  else core " [64k pages]" "$lib" hakozuna api-hz; fi
fi

total=$((passed + failed + skipped))
secs=$(awk "BEGIN { printf \"%.0f\", $EPOCHREALTIME - $suite_start }")
echo "$total tests: $passed passed, $failed failed, $skipped skipped (${secs}s, logs in $logs)"
if [ $failed -gt 0 ]; then
  printf 'failed: %s\n' "${failed_names[*]}"
  exit 1
fi
exit 0
