#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds redis-server from Debian's source package with MALLOC=libc into
# OUT (default build/redis-libc), once: Debian's own redis-server links
# jemalloc and calls its extended API, so preloading another allocator into
# it measures a mix. `make bench` calls this; prints the server's path
# (redis-benchmark, the load client, lies beside it).
#   bench/build-redis.sh [OUT]
# Needs a deb-src entry for the archive the system installs from (added, as
# root, from the existing `deb` entries when missing), and dpkg-dev, make and
# cc (tests/need.sh installs them as root).
# Exits 77 when it can't (not root, no network), saying why.
set -eu
out=$(mkdir -p "${1:-build/redis-libc}" && cd "${1:-build/redis-libc}" && pwd)
if [ -x "$out/redis-server" ] && [ -x "$out/redis-benchmark" ]; then
  echo "$out/redis-server"
  exit 0
fi
skip() { echo "build-redis: $*" >&2; exit 77; }
root=$([ "$(id -u)" = 0 ] && echo yes || echo no)
"$(dirname "$0")/../tests/need.sh" cc make redis-source >&2 || skip "missing build tools"
command -v apt-get >/dev/null || skip "no apt-get (not Debian)"
if ! apt-get source --print-uris redis >/dev/null 2>&1; then
  [ "$root" = yes ] || skip "no deb-src entry for redis and not root to add one"
  src=/etc/apt/sources.list.d/hakozuna-deb-src
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] && [ "$f" != "$src.sources" ] && sed 's/^Types: deb$/Types: deb-src/' "$f"
    echo
  done > "$src.sources"
  [ -e /etc/apt/sources.list ] && sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$src.list"
  apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed"
fi
tmp=$(mktemp -d "$out/src.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get source -qq redis >/dev/null 2>&1) || skip "apt-get source redis failed"
dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'redis-*' | head -1)
[ -n "$dir" ] || skip "no source tree from apt-get source redis"
make -C "$dir" -j"$(nproc)" MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no >"$out/build.log" 2>&1 ||
  skip "redis build failed (see $out/build.log)"
cp "$dir/src/redis-benchmark" "$out/redis-benchmark"
cp "$dir/src/redis-server" "$out/redis-server.tmp"
basename "$dir" > "$out/version"
mv "$out/redis-server.tmp" "$out/redis-server"
echo "$out/redis-server"
