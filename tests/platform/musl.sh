#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/platform/musl.sh [PATTERN...]: the suite's C programs built against
# musl (make TARGET=x86_64-linux-musl, Debian's musl-gcc) and run natively
# with the musl library preloaded or linked, on the default and the checked
# build; not the shell tests (they run the host's glibc tools). Without a
# PATTERN, the core tests (api, threads, misuse, init, options, link), as
# on arm64; `tests/platform/musl.sh /` runs every program. `make test` runs
# it (make test-musl). Debian's musl-tools is installed when missing (as
# root, tests/need.sh); otherwise the run is skipped with a line naming it.
set -u
cd "$(dirname "$0")/../.." || exit 1
triplet=x86_64-linux-musl
. tests/platform/lib.sh
[ "$(uname -m)" = x86_64 ] || { echo "SKIP  musl: runs on x86-64 hosts only"; exit 0; }
need_tools "musl" musl
start=$EPOCHREALTIME
echo "musl: make TARGET=$triplet, then the test programs natively"
"${MAKE:-make}" -s TARGET=$triplet lib musl-test-build >/dev/null || { echo "FAIL  musl: build"; exit 1; }
built=$EPOCHREALTIME
[ $# -gt 0 ] || set -- api/ threads/ misuse/ init/ options/ link/
tests/run.sh --build "build/$triplet" --musl "$@"
rc=$?
awk "BEGIN { printf \"musl: build %.0fs, tests %.0fs\n\", $built - $start, $EPOCHREALTIME - $built }"
exit $rc
