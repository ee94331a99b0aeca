#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds release builds of the strongest peers (mimalloc 3, snmalloc,
# rpmalloc) from their public repositories into .peers/ (git-ignored: the
# peers' code never enters this repository), for
#   make bench ALLOC=hakozuna,mimalloc3=.peers/lib/libmimalloc3.so,...
#   tools/build-peers.sh            clone from GitHub (network) and build
#   SRC=DIR tools/build-peers.sh    use DIR/{mimalloc,snmalloc,rpmalloc} already unpacked
# Needs git (without SRC), cmake, a C/C++ compiler. Prints the NAME=PATH list.
set -eu
cd "$(dirname "$0")/.."
MIMALLOC_REF=${MIMALLOC_REF:-v3.4.3}
SNMALLOC_REF=${SNMALLOC_REF:-0.7.5}
RPMALLOC_REF=${RPMALLOC_REF:-2.0.1}
top=$PWD/.peers
src=${SRC:-$top/src}
mkdir -p "$src" "$top/lib" "$top/build"
jobs=$(nproc)

get() { # name url ref
  [ -d "$src/$1" ] && return
  git clone --quiet --depth 1 --branch "$3" "$2" "$src/$1"
}
get mimalloc https://github.com/microsoft/mimalloc "$MIMALLOC_REF"
get snmalloc https://github.com/microsoft/snmalloc "$SNMALLOC_REF"
get rpmalloc https://github.com/mjansson/rpmalloc "$RPMALLOC_REF"

cmake -S "$src/mimalloc" -B "$top/build/mimalloc" -DCMAKE_BUILD_TYPE=Release \
  -DMI_BUILD_TESTS=OFF -DMI_BUILD_STATIC=OFF -DMI_BUILD_OBJECT=OFF >/dev/null
cmake --build "$top/build/mimalloc" -j "$jobs" >/dev/null
cp -L "$top/build/mimalloc/libmimalloc.so" "$top/lib/libmimalloc3.so"

cmake -S "$src/snmalloc" -B "$top/build/snmalloc" -DCMAKE_BUILD_TYPE=Release \
  -DSNMALLOC_BUILD_TESTING=OFF >/dev/null
cmake --build "$top/build/snmalloc" -j "$jobs" --target snmallocshim >/dev/null
cp -L "$top/build/snmalloc/libsnmallocshim.so" "$top/lib/libsnmalloc.so"

# rpmalloc.c includes its malloc/new overrides (malloc.c) when ENABLE_OVERRIDE
# is set, which is its default; -O3 as its own release configuration.
cc -O3 -DNDEBUG -fPIC -shared -pthread -o "$top/lib/librpmalloc.so" "$src/rpmalloc/rpmalloc/rpmalloc.c"

echo "mimalloc3=$top/lib/libmimalloc3.so,snmalloc=$top/lib/libsnmalloc.so,rpmalloc=$top/lib/librpmalloc.so"
