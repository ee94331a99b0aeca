#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/options/secure.sh: a set-user-ID program ignores HAKOZUNA_ variables.
# Its environment is its caller's: HAKOZUNA_STATS_FILE would let any user
# make a root program create and append to a file of their choosing, and
# HAKOZUNA_CHECK=0 would let it go on after a double free. A copy of
# options/options-static (hakozuna linked in), owned by root and set-user-ID,
# is run as nobody with HAKOZUNA_STATS=1 and HAKOZUNA_STATS_FILE: it must
# read stats as 0 and write no file; the same copy without the bit must
# read 1 and write the report (so the test can fail). Needs root (to give
# the copy away and drop to nobody) and setpriv.
. "$(dirname "$0")/../lib.sh"
skip() { echo "SKIP: $*"; exit 77; }
prog=$TEST_BIN/options/options-static
[ -x "$prog" ] || { fail "$prog is not built (make test-build)"; finish; }
[ "$(id -u)" = 0 ] || skip "needs root to make a set-user-ID copy and run it as nobody"
command -v setpriv >/dev/null || skip "needs setpriv (util-linux)"
nobody=$(id -u nobody 2>/dev/null) || skip "no user nobody"

# A directory where the set-user-ID bit works (not mounted nosuid) and that
# nobody can reach: the copy says whether the kernel ran it as such.
dir=
for parent in /tmp /var/tmp "$TEST_BIN"; do
  d=$(mktemp -d "$parent/hz-secure.XXXXXX") || continue
  chmod 755 "$d"
  cp "$prog" "$d/prog" && chown 0:0 "$d/prog" && chmod 4755 "$d/prog"
  if [ "$(env -i setpriv --reuid="$nobody" --regid="$nobody" --clear-groups "$d/prog" secure 2>/dev/null)" = 1 ]; then
    dir=$d
    break
  fi
  rm -rf "$d"
done
[ -n "$dir" ] || skip "no directory here runs set-user-ID programs as such (nosuid mounts?)"
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/out" && chmod 777 "$dir/out"

run() {
  env -i PATH=/usr/bin:/bin HAKOZUNA_STATS=1 HAKOZUNA_STATS_FILE="$dir/out/report" \
    setpriv --reuid="$nobody" --regid="$nobody" --clear-groups "$dir/prog" get stats 2>"$dir/err"
}

out=$(run)
[ "$out" = 0 ] || fail "set-user-ID: stats option is '$out', want 0 (the environment ignored); stderr: $(head -c 300 "$dir/err")"
[ -e "$dir/out/report" ] && fail "set-user-ID: the report file was written: $(head -c 300 "$dir/out/report")"
[ -s "$dir/err" ] && fail "set-user-ID: stderr: $(head -c 300 "$dir/err")"

chmod 0755 "$dir/prog"
out=$(run)
[ "$out" = 1 ] || fail "plain copy: stats option is '$out', want 1; stderr: $(head -c 300 "$dir/err")"
grep -q hakozuna "$dir/out/report" 2>/dev/null || fail "plain copy: no report in $dir/out/report"
finish
