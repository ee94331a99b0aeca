#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/install/deb.sh: the Debian packages (make deb) on this machine.
# Installs build/deb/libhakozuna<SOVERSION>_*.deb alone and checks the
# launcher works from it, then adds libhakozuna-dev_*.deb; builds and runs
# tests/install/prog.c through pkg-config and through CMake against the
# system copy; runs lintian (installed when missing) and fails on an error;
# removes and purges both and checks no file of theirs is left and ldconfig
# forgot the library. Root only (dpkg -i): otherwise it says SKIP. It does
# nothing to a machine where hakozuna is otherwise installed (a package of
# that name or a file at one of the packages' paths: SKIP), and always
# purges what it installed, also when a check fails.
set -u
MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
VERSION=${VERSION:?}
SOVERSION=${SOVERSION:?}
CC=${CC:-cc}
RUNTIME=libhakozuna$SOVERSION
DEV=libhakozuna-dev
root=$(pwd)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1"; }
skip() { echo "SKIP test-deb: $1"; exit 0; }
check() {
	what=$1
	shift
	if "$@" >"$tmp/log" 2>&1; then ok "$what"; else
		fail "$what (exit $?): $*"
		sed 's/^/    /' "$tmp/log" | tail -n 30
	fi
}

[ "$(id -u)" = 0 ] || skip "needs root to install packages with dpkg -i (run make test-deb as root)"
command -v dpkg >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 ||
	skip "not a Debian system: dpkg is missing (Debian package dpkg)"
for pkg in "$RUNTIME" "$DEV"; do
	if dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'installed\|unpacked\|config-files'; then
		skip "the package $pkg is installed already; not touching it"
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hakozuna-deb-test.XXXXXX")
installed=0
cleanup() {
	if [ "$installed" = 1 ]; then
		dpkg --purge "$DEV" "$RUNTIME" >/dev/null 2>&1 || echo "test-deb: dpkg --purge $DEV $RUNTIME failed" >&2
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

BUILD=$BUILD VERSION=$VERSION SOVERSION=$SOVERSION MAKE=$MAKE sh tools/deb.sh >"$tmp/log" 2>&1 ||
	{ cat "$tmp/log"; echo "FAIL - make deb"; exit 1; }
arch=$(dpkg --print-architecture)
rt_deb=$BUILD/deb/${RUNTIME}_${VERSION}_$arch.deb
dev_deb=$BUILD/deb/${DEV}_${VERSION}_$arch.deb
check "make deb wrote $rt_deb and $dev_deb" test -f "$rt_deb" -a -f "$dev_deb"

# Every path the packages hold (files and links).
for deb in "$rt_deb" "$dev_deb"; do
	dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { p = $6; sub(/^\./, "", p); print p }'
done >"$tmp/paths"
while read -r path; do
	[ -e "$path" ] || [ -L "$path" ] || continue
	skip "$path exists already (hakozuna installed by other means?); not overwriting it"
done <"$tmp/paths"

# ---- the packages themselves ----
check "$RUNTIME: soname in the package name, shlibs and ldconfig trigger" sh -c "
	dpkg-deb -f '$rt_deb' Package | grep -qx '$RUNTIME' &&
	dpkg-deb -I '$rt_deb' shlibs | grep -qx 'libhakozuna $SOVERSION $RUNTIME (>= $VERSION)' &&
	dpkg-deb -I '$rt_deb' triggers | grep -qx 'activate-noawait ldconfig'"
check "$DEV depends on $RUNTIME of the same version" sh -c \
	"dpkg-deb -f '$dev_deb' Depends | grep -qx '$RUNTIME (= $VERSION-[0-9]*)'"
for deb in "$rt_deb" "$dev_deb"; do
	name=$(dpkg-deb -f "$deb" Package)
	check "$name: copyright file with the MIT licence" sh -c \
		"dpkg-deb --fsys-tarfile '$deb' | tar -xOf - ./usr/share/doc/$name/copyright | grep -q 'Permission is hereby granted'"
	check "$name: changelog.Debian.gz and md5sums" sh -c \
		"dpkg-deb -c '$deb' | grep -q ' ./usr/share/doc/$name/changelog.Debian.gz$' && dpkg-deb -I '$deb' md5sums >/dev/null"
done

# ---- lintian ----
if bash tests/need.sh lintian; then
	check "lintian reports no error" lintian --fail-on error "$rt_deb" "$dev_deb"
	grep '^[EW]:' "$tmp/log" | sed 's/^/    /'
else
	echo "SKIP - lintian: not installed and could not be installed (Debian package lintian)"
fi

# ---- the runtime package alone ----
installed=1
check "dpkg -i $RUNTIME" dpkg -i "$rt_deb"
libdir=$(dirname "$(dpkg -L "$RUNTIME" | grep "/libhakozuna.so.$VERSION\$")")
check "ldconfig knows libhakozuna.so.$SOVERSION" sh -c "ldconfig -p | grep -q 'libhakozuna.so.$SOVERSION '"
check "hakozuna run -- true" hakozuna run -- true
check "hakozuna run preloads the runtime package's library" sh -c \
	"hakozuna run -- sh -c 'echo \"\$LD_PRELOAD\"' | grep -qx '$libdir/libhakozuna.so.$SOVERSION'"
check "hakozuna --version" sh -c "hakozuna --version | grep -qx 'hakozuna $VERSION'"
check "man 1 hakozuna" sh -c "man -w 1 hakozuna | grep -q '/usr/share/man/man1/hakozuna.1.gz'"

# ---- with the development package ----
check "dpkg -i $DEV" dpkg -i "$dev_deb"
check "build with pkg-config (system paths)" sh -c \
	"$CC -O2 -o '$tmp/prog_pc' '$root/tests/install/prog.c' \$(pkg-config --cflags --libs hakozuna)"
check "run it (no LD_LIBRARY_PATH)" env -u LD_LIBRARY_PATH "$tmp/prog_pc"
check "build -static with the overriding object" sh -c \
	"$CC -O2 -static -o '$tmp/prog_static' '$root/tests/install/prog.c' \$(pkg-config --variable=overrideobject hakozuna) -lpthread"
check "run the static build" "$tmp/prog_static"
check "cmake configure (find_package from /usr)" cmake -S "$root/tests/install" -B "$tmp/cmake" \
	-DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release
check "cmake build" cmake --build "$tmp/cmake"
for t in shared static object; do
	check "run the CMake build of prog_$t" env -u LD_LIBRARY_PATH "$tmp/cmake/prog_$t"
done
check "hakozuna lib is $libdir/libhakozuna.so with the -dev package" sh -c "hakozuna lib | grep -qx '$libdir/libhakozuna.so'"
check "man 3 hakozuna" sh -c "man -w 3 hakozuna | grep -q '/usr/share/man/man3/hakozuna.3.gz'"

# ---- remove, purge: nothing left ----
check "dpkg -r $DEV $RUNTIME" dpkg -r "$DEV" "$RUNTIME"
check "dpkg --purge $DEV $RUNTIME" dpkg --purge "$DEV" "$RUNTIME"
installed=0
check "dpkg knows neither package any more" sh -c \
	"! dpkg-query -W -f '\${Status}\n' '$RUNTIME' '$DEV' 2>/dev/null | grep -q 'installed\|config-files'"
left=""
while read -r path; do
	if [ -e "$path" ] || [ -L "$path" ]; then left="$left $path"; fi
done <"$tmp/paths"
check "no file of the packages is left" test -z "$left"
[ -z "$left" ] || echo "    left:$left"
check "the packages' own directories are gone" sh -c \
	"[ ! -e '$libdir/cmake/hakozuna' ] && [ ! -e '$libdir/hakozuna' ] && [ ! -e /usr/share/doc/$RUNTIME ] && [ ! -e /usr/share/doc/$DEV ]"
check "ldconfig forgot libhakozuna" sh -c "! ldconfig -p | grep -q libhakozuna"

echo "deb: $passed passed, $failed failed"
[ "$failed" = 0 ]
