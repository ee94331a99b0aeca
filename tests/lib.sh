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
# need COMMAND PACKAGE: install PACKAGE with apt-get when COMMAND is missing
# (as root), else skip the test.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing $2 for $1" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "$2"; } >&2 || fail "apt-get install $2"
    command -v "$1" >/dev/null 2>&1 && return 0
  fi
  echo "SKIP: $1 is not installed and cannot be installed (not root)"
  exit 77
}
