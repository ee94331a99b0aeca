# SPDX-License-Identifier: MIT
# tests/lib.sh: helpers for the shell tests (sourced). A test calls `check`
# or `fail` as often as it likes and ends with `finish`; exit 77 is a skip.

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# check DESCRIPTION COMMAND...: fail unless the command succeeds.
check() {
  what=$1
  shift
  "$@" || fail "$what"
}
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures checks failed" >&2
    exit 1
  fi
  exit 0
}
# need CAPABILITY...: make them work through tests/need.sh (it installs the
# Debian packages when root); a test whose needs cannot be met here is skipped
# (exit 77) with need.sh's line naming the package.
need() {
  local out rc
  # (bash knows this file's path; sh scripts source it from tests/*/)
  if [ -n "${BASH_SOURCE:-}" ]; then out=$(dirname "$BASH_SOURCE")/need.sh; else out=$(dirname "$0")/../need.sh; fi
  out=$("$out" "$@" 2>&1)
  rc=$?
  [ $rc = 0 ] && return 0
  printf '%s\n' "$out"
  [ $rc = 77 ] && exit 77
  fail "tests/need.sh $*: exit $rc"
  exit 1
}
