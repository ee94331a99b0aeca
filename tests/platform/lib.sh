# SPDX-License-Identifier: MIT
# tests/platform/lib.sh: sourced by arm64.sh and windows.sh.
#
# need_tools LABEL CAPABILITY...: tests/need.sh installs what is missing (as
# root); when it cannot, print "SKIP  LABEL: needs ..." and exit 0.
need_tools() {
  local label=$1 out rc
  shift
  out=$(tests/need.sh "$@")
  rc=$?
  printf '%s\n' "$out" | sed -n "s/^SKIP: /SKIP  $label: /p"
  [ $rc = 77 ] && exit 0
  [ $rc = 0 ] || { echo "FAIL  $label: tests/need.sh $*"; exit 1; }
}
