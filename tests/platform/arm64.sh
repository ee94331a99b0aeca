#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/platform/arm64.sh [PATTERN...]: the core suite (api, threads, misuse,
# init, options, link) cross-built for arm64 Linux (make
# TARGET=aarch64-linux-gnu) and run under qemu-user, on the default build,
# the checked build and with 64 KiB pages assumed. `make test` runs it
# (make test-arm64). Debian's cross compiler, sysroot and qemu-user are
# installed when missing (as root, tests/need.sh); otherwise the run is
# skipped with a line naming them.
set -u
cd "$(dirname "$0")/../.." || exit 1
triplet=aarch64-linux-gnu
. tests/platform/lib.sh
need_tools "arm64 (qemu)" arm64-cross qemu-aarch64
start=$EPOCHREALTIME
echo "arm64: make TARGET=$triplet, then the core tests under qemu-aarch64"
"${MAKE:-make}" -s TARGET=$triplet lib test-build >/dev/null || { echo "FAIL  arm64: cross-build"; exit 1; }
built=$EPOCHREALTIME
tests/run.sh --build "build/$triplet" --emulator tests/platform/qemu-aarch64.sh "$@"
rc=$?
awk "BEGIN { printf \"arm64: build %.0fs, tests %.0fs\n\", $built - $start, $EPOCHREALTIME - $built }"
exit $rc
