#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/soak.sh MINUTES [THREADS]: a long multi-thread stress with hakozuna
# preloaded (not part of `make test`). Builds tests/faults/soak.c and the
# library if needed, runs for MINUTES with THREADS threads (default: the
# number of cores, at least 2), printing the elapsed seconds, operations,
# live bytes and RSS every INTERVAL seconds (env, default 5). Exits non-zero
# on any content error, failed allocation or crash.
#   BUILD=dir   the build directory (default build)
#   HZ_LIB=lib  the library to preload (default $BUILD/libhakozuna.so)
set -eu
[ $# -ge 1 ] || { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }
minutes=$1
threads=${2:-$(nproc)}
[ "$threads" -ge 2 ] 2>/dev/null || threads=2
cd "$(dirname "$0")/.."
build=${BUILD:-build}
make -s BUILD="$build" lib "$build/reliability/soak"
lib=${HZ_LIB:-$build/libhakozuna.so}
seconds=$(awk "BEGIN { print $minutes * 60 }")
echo "soak: $threads threads for $minutes min with $lib preloaded"
exec env LD_PRELOAD="$lib" HZ_TEST_TARGET=hakozuna "$build/reliability/soak" "$seconds" "$threads" "${INTERVAL:-5}"
