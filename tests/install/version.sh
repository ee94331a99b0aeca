#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/install/version.sh: every place that states hakozuna's version agrees
# with the one definition, VERSION in the Makefile: the shared library's file
# name and soname, hakozuna.pc, the CMake version file, the launcher (source
# tree and installed copy), hz_version()/hz_version_string(), the header's
# HZ_VERSION_* macros, the exit report, the Rust crate, CHANGELOG.md,
# docs/install.md's table of installed files, the
# man pages (source and installed) and the Debian packages' names and
# control files (when build/deb holds them: make deb).
# Run from the repository root after `make` (make test-install runs it).
. "$(dirname "$0")/../lib.sh"
MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
CC=${CC:-cc}
v=$(sed -n 's/^VERSION *:*= *//p' Makefile)
major=${v%%.*}
case $v in [0-9]*.[0-9]*.[0-9]*) ;; *) fail "Makefile VERSION '$v' is not MAJOR.MINOR.PATCH"; finish ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -f "$BUILD/libhakozuna.so.$v" ] || fail "$BUILD/libhakozuna.so.$v does not exist"
soname=$(readelf -d "$BUILD/libhakozuna.so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = "libhakozuna.so.$major" ] || fail "soname is '$soname', want libhakozuna.so.$major"

$MAKE -s --no-print-directory install DESTDIR="$tmp/root" PREFIX=/usr >"$tmp/log" 2>&1 ||
  fail "make install: $(tail -5 "$tmp/log")"
pc=$(sed -n 's/^Version: *//p' "$tmp/root/usr/lib/pkgconfig/hakozuna.pc")
[ "$pc" = "$v" ] || fail "hakozuna.pc says '$pc', want $v"
cm=$(sed -n 's/^set(PACKAGE_VERSION "\([^"]*\)")/\1/p' "$tmp/root/usr/lib/cmake/hakozuna/hakozunaConfigVersion.cmake")
[ "$cm" = "$v" ] || fail "hakozunaConfigVersion.cmake says '$cm', want $v"
out=$(tools/hakozuna --version)
[ "$out" = "hakozuna $v" ] || fail "tools/hakozuna --version says '$out', want 'hakozuna $v'"
out=$("$tmp/root/usr/bin/hakozuna" --version)
[ "$out" = "hakozuna $v" ] || fail "installed hakozuna --version says '$out', want 'hakozuna $v'"

cat >"$tmp/v.c" <<'C'
#include <stdio.h>
#include "hakozuna.h"
int main(void) {
  printf("%d %s %d %s\n", hz_version(), hz_version_string(), HZ_VERSION, HZ_VERSION_STRING);
  return 0;
}
C
"$CC" -Iinclude "$tmp/v.c" -o "$tmp/v" -L"$BUILD" -Wl,-rpath,"$(cd "$BUILD" && pwd)" -lhakozuna ||
  fail "cannot build the hz_version program"
num=$(echo "$v" | awk -F. '{ print $1 * 10000 + $2 * 100 + $3 }')
out=$("$tmp/v")
[ "$out" = "$num $v $num $v" ] ||
  fail "hz_version() hz_version_string() HZ_VERSION HZ_VERSION_STRING are '$out', want '$num $v $num $v'"
out=$(HAKOZUNA_STATS=1 "$tmp/v" 2>&1 >/dev/null | head -1)
case $out in "hakozuna $v statistics"*) ;; *) fail "the exit report starts '$out', want 'hakozuna $v statistics'" ;; esac

crate=$(sed -n 's/^version = "\(.*\)"/\1/p' bindings/rust/Cargo.toml | head -1)
[ "$crate" = "$v" ] || fail "bindings/rust/Cargo.toml version is '$crate', want $v"
lock=$(sed -n '/^name = "hakozuna"$/{n;s/^version = "\(.*\)"/\1/p;}' bindings/rust/Cargo.lock)
[ "$lock" = "$v" ] || fail "bindings/rust/Cargo.lock has hakozuna '$lock', want $v"
grep -q "^## \[$v\]" CHANGELOG.md || fail "CHANGELOG.md has no '## [$v]' section"
# the install table names the library file (it said 0.1.0 after 0.2.0)
other=$(grep -o 'libhakozuna\.so\.[0-9]*\.[0-9]*\.[0-9]*' docs/install.md | grep -vx "libhakozuna.so.$v")
[ -z "$other" ] || fail "docs/install.md names $other, want libhakozuna.so.$v"
for page in docs/man/hakozuna.1 docs/man/hakozuna.3 "$tmp/root/usr/share/man/man1/hakozuna.1" \
  "$tmp/root/usr/share/man/man3/hakozuna.3"; do
  th=$(sed -n 's/^\.TH HAKOZUNA [13] "[^"]*" "hakozuna \([^"]*\)".*/\1/p' "$page")
  [ "$th" = "$v" ] || fail "$page says version '$th', want $v"
done
for deb in "$BUILD"/deb/*.deb; do
  [ -e "$deb" ] || continue
  case ${deb##*/} in
  libhakozuna${major}_${v}_*.deb | libhakozuna-dev_${v}_*.deb) ;;
  *) fail "$deb: a Debian package of another version (want libhakozuna${major}_${v}, libhakozuna-dev_${v})" ;;
  esac
  dv=$(dpkg-deb -f "$deb" Version 2>/dev/null)
  case $dv in "$v"-*) ;; *) fail "$deb: control Version '$dv', want $v-N" ;; esac
done
finish
