#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/faults/valgrind.sh BINDIR LIB: memcheck with hakozuna in the process.
#
# BINDIR holds vg_prog built three ways: vg-linked (-lhakozuna), vg-plain
# (for LD_PRELOAD=LIB) and vg-object (hakozuna.o linked in). For each,
# memcheck is told where the allocator lives, so it replaces hakozuna's
# malloc with its own and checks the program:
#   linked, preloaded:  --soname-synonyms=somalloc=*hakozuna*
#   object (static):    --soname-synonyms=somalloc=NONE  (the main executable)
# "clean" must give no error at all; "bad" must be reported: the read after
# free, the write past the end and the leak. Last, with a synonym that
# matches nothing, hakozuna's own code runs under memcheck (nothing
# replaced): it must do no invalid or uninitialised access.
set -u
bin=$1 lib=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# vg WHAT SYNONYM PRELOAD PROG ARG: PRELOAD is a library or -.
vg() {
  local what=$1 syn=$2 preload=$3 prog=$4 arg=$5 rc
  local envs=()
  [ "$preload" != - ] && envs=(LD_PRELOAD="$preload")
  env "${envs[@]}" valgrind -q --soname-synonyms=somalloc="$syn" --error-exitcode=9 --leak-check=full \
    --errors-for-leak-kinds=definite "$bin/$prog" "$arg" >"$out" 2>&1
  rc=$?
  if [ "$arg" = clean ]; then
    [ $rc -eq 0 ] && grep -qx done "$out" || { fail "$what clean: exit $rc"; sed 's/^/    /' "$out" | head -20; }
    return
  fi
  [ $rc -eq 9 ] || fail "$what bad: exit $rc, expected valgrind's error exit 9"
  for e in 'Invalid read of size 1' 'Invalid write of size 1' '4,000 bytes in 1 blocks are definitely lost'; do
    grep -q "$e" "$out" || fail "$what bad: memcheck did not report '$e'"
  done
}

for arg in clean bad; do
  vg linked '*hakozuna*' - vg-linked $arg
  vg preloaded '*hakozuna*' "$lib" vg-plain $arg
  vg object NONE - vg-object $arg
done
# that the replacement really happened: valgrind's trace names hakozuna's malloc
env LD_PRELOAD="$lib" valgrind --soname-synonyms=somalloc='*hakozuna*' --trace-redir=yes "$bin/vg-plain" clean >"$out" 2>&1
grep -q 'libhakozuna.so.0:malloc) redirected' "$out" || fail "valgrind did not redirect hakozuna's malloc"
# hakozuna itself under memcheck
vg "hakozuna's own code" nothing-matches - vg-linked clean
valgrind --soname-synonyms=somalloc=nothing-matches --trace-redir=yes "$bin/vg-linked" clean >"$out" 2>&1
! grep -q 'libhakozuna.so.0:malloc) redirected' "$out" || fail "memcheck replaced hakozuna's malloc in the own-code run"
[ $failures -eq 0 ] && echo "valgrind: all checks passed"
[ $failures -eq 0 ]
