#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/faults/run.sh NAME SECONDS COMMAND...: runs one test, prints
# "PASS  NAME  time" or "FAIL  NAME  time  why" followed by the end of its
# output (the whole of it is kept in $HZ_REL_LOGS, default /tmp), and exits
# with the command's status (124 when it ran past SECONDS).
name=$1 limit=$2
shift 2
logs=${HZ_REL_LOGS:-/tmp}
mkdir -p "$logs"
log=$logs/$(echo "$name" | tr '/ []' '.._.').log
start=$EPOCHREALTIME
timeout -k 10 "$limit" "$@" >"$log" 2>&1 </dev/null
rc=$?
secs=$(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $start }")
if [ $rc -eq 0 ]; then
  printf 'PASS  %-34s %6ss\n' "$name" "$secs"
  exit 0
fi
why="exit status $rc"
[ $rc -eq 124 ] && why="timed out after ${limit}s"
[ $rc -gt 128 ] && why="killed by signal $((rc - 128))"
printf 'FAIL  %-34s %6ss  %s (log: %s)\n' "$name" "$secs" "$why" "$log"
# what the test, the allocator or a sanitizer said, then the end of the log
grep -m 5 -E 'CHECK failed|fuzz_ops: |hakozuna: |runtime error|watchdog' "$log" | sed 's/^/    ! /'
tail -n 15 "$log" | sed 's/^/    | /'
exit $rc
