#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/platform/windows.sh [PATTERN...]: the portable part of the suite
# (hz_* API, threads, options, stats) and the random_mixed and mt_remote
# benchmarks (a smoke run: their timings under wine mean nothing), built
# for Windows x64 (make TARGET=x86_64-w64-mingw32) and run under wine.
# `make test` runs it (make test-windows). mingw-w64 and wine64 are installed
# when missing (as root, tests/need.sh); otherwise the run is skipped with a
# line naming them.
set -u
cd "$(dirname "$0")/../.." || exit 1
triplet=x86_64-w64-mingw32
. tests/platform/lib.sh
need_tools "windows (wine)" mingw wine
start=$EPOCHREALTIME
echo "windows: make TARGET=$triplet, then the portable tests under wine"
"${MAKE:-make}" -s TARGET=$triplet lib win-test-build >/dev/null || { echo "FAIL  windows: cross-build"; exit 1; }
built=$EPOCHREALTIME
# A prefix of our own (made on first use, ~15 s), no Mono/Gecko installers,
# no debug chatter; one wine server for the whole run.
export WINEPREFIX=$PWD/build/$triplet/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
wineserver=$(command -v wineserver 2>/dev/null || echo /usr/lib/wine/wineserver)
"$wineserver" -p 30 2>/dev/null
tests/platform/wine.sh cmd /c exit 0 >/dev/null 2>&1 # creates the prefix
ready=$EPOCHREALTIME
tests/run.sh --windows --build "build/$triplet" --emulator tests/platform/wine.sh "$@"
rc=$?
"$wineserver" -k 2>/dev/null
awk "BEGIN { printf \"windows: build %.0fs, wine prefix %.0fs, tests %.0fs\n\", \
  $built - $start, $ready - $built, $EPOCHREALTIME - $ready }"
exit $rc
