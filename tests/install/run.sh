#!/bin/sh
# SPDX-License-Identifier: MIT
# Tests of `make install` / `make uninstall` and of the launcher (tools/hakozuna):
# installs into a temporary prefix, builds tests/install/prog.c against the
# installed copy through pkg-config and through CMake, runs what it built,
# runs programs under the launcher (source-tree and installed copies), then
# uninstalls and checks that exactly the installed files went away.
# Run from the repository root after `make` (make test-install does both).
set -u

MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
VERSION=${VERSION:-$(sed -n 's/^VERSION *:*= *//p' Makefile)}
SOVERSION=${SOVERSION:-$(sed -n 's/^SOVERSION *:*= *//p' Makefile)}
CC=${CC:-cc}
root=$(pwd)
case $BUILD in
/*) ;;
*) BUILD=$root/$BUILD ;;
esac
here=$root/tests/install

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hakozuna-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
log=$tmp/log
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1"; }
# check DESCRIPTION COMMAND...: runs COMMAND (output to the log, shown on failure).
check() {
	what=$1
	shift
	if "$@" >"$log" 2>&1; then
		ok "$what"
	else
		fail "$what (exit $?): $*"
		sed 's/^/    /' "$log" | tail -n 40
	fi
}
# expect DESCRIPTION WANTED COMMAND...: COMMAND's stdout must be WANTED.
expect() {
	what=$1
	want=$2
	shift 2
	got=$("$@" 2>"$log")
	if [ "$got" = "$want" ]; then
		ok "$what"
	else
		fail "$what: wanted '$want', got '$got'"
		sed 's/^/    /' "$log" | tail -n 20
	fi
}
# Lists every file and link under a tree (not directories), sorted.
files_under() { (cd "$1" && find . ! -type d | sort); }

for lib in libhakozuna.so libhakozuna.a hakozuna.o libhakozuna-checked.so; do
	[ -e "$BUILD/$lib" ] || { echo "FAIL - $BUILD/$lib missing: run make first"; exit 1; }
done

# ---- install into a prefix that already holds another package's files ----
mkdir -p "$prefix/lib" "$prefix/include" "$prefix/bin"
echo other >"$prefix/lib/libother.so"
echo other >"$prefix/include/other.h"
echo other >"$prefix/bin/other"
files_under "$prefix" >"$tmp/before"
check "make install PREFIX=$prefix" $MAKE --no-print-directory install PREFIX="$prefix" BUILD="$BUILD"

lib=$prefix/lib
for f in bin/hakozuna include/hakozuna.h lib/libhakozuna.so.$VERSION lib/libhakozuna.so.$SOVERSION \
	lib/libhakozuna.so lib/libhakozuna.a lib/libhakozuna-checked.so lib/hakozuna/hakozuna.o \
	lib/pkgconfig/hakozuna.pc lib/cmake/hakozuna/hakozunaConfig.cmake \
	lib/cmake/hakozuna/hakozunaConfigVersion.cmake lib/cmake/hakozuna/hakozunaTargets.cmake \
	share/man/man1/hakozuna.1 share/man/man3/hakozuna.3; do
	check "installed $f" test -e "$prefix/$f"
done
expect "libhakozuna.so.$SOVERSION links to libhakozuna.so.$VERSION" "libhakozuna.so.$VERSION" \
	readlink "$lib/libhakozuna.so.$SOVERSION"
expect "libhakozuna.so links to libhakozuna.so.$SOVERSION" "libhakozuna.so.$SOVERSION" \
	readlink "$lib/libhakozuna.so"
check "soname is libhakozuna.so.$SOVERSION" \
	sh -c "readelf -d '$lib/libhakozuna.so.$VERSION' | grep -q 'SONAME.*\[libhakozuna.so.$SOVERSION\]'"
check "the launcher is executable" test -x "$prefix/bin/hakozuna"
check "the header is the source tree's" cmp include/hakozuna.h "$prefix/include/hakozuna.h"
if bash tests/need.sh groff >/dev/null; then
	for page in man1/hakozuna.1 man3/hakozuna.3; do
		expect "$page renders without groff warnings" "" \
			sh -c "groff -man -ww -z -Tutf8 '$prefix/share/man/$page' 2>&1"
		check "$page names every HAKOZUNA_ option" sh -c \
			"for v in \$(sed -n 's/^| \`\(HAKOZUNA_[A-Z_]*\)\`.*/\1/p' README.md); do grep -q \"^.B \$v\\\$\" '$prefix/share/man/$page' || exit 1; done"
	done
else
	echo "skip - man pages not rendered: groff is missing (Debian package groff-base)"
fi

# ---- pkg-config ----
export PKG_CONFIG_PATH="$lib/pkgconfig"
expect "pkg-config --modversion" "$VERSION" pkg-config --modversion hakozuna
expect "pkg-config --variable=overrideobject" "$lib/hakozuna/hakozuna.o" \
	pkg-config --variable=overrideobject hakozuna
check "build with pkg-config" sh -c \
	"$CC -O2 -o '$tmp/prog_pc' '$here/prog.c' \$(pkg-config --cflags --libs hakozuna)"
check "the program needs libhakozuna.so.$SOVERSION" \
	sh -c "readelf -d '$tmp/prog_pc' | grep -q 'NEEDED.*\[libhakozuna.so.$SOVERSION\]'"
check "run the pkg-config build" env LD_LIBRARY_PATH="$lib" "$tmp/prog_pc"
cat "$log"
# The single object: overrides malloc even in a fully static program.
check "build -static with the single object" sh -c \
	"$CC -O2 -static -o '$tmp/prog_static' \$(pkg-config --cflags hakozuna) '$here/prog.c' \
	 \$(pkg-config --variable=overrideobject hakozuna) -lpthread"
check "run the static build" "$tmp/prog_static"

# ---- CMake: find_package(hakozuna) ----
check "cmake configure" cmake -S "$here" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release
check "cmake build" cmake --build "$tmp/cmake"
for t in shared static object; do
	check "run the CMake build of prog_$t" "$tmp/cmake/prog_$t"
done
check "the CMake shared build needs libhakozuna.so.$SOVERSION" \
	sh -c "readelf -d '$tmp/cmake/prog_shared' | grep -q 'NEEDED.*\[libhakozuna.so.$SOVERSION\]'"
check "the CMake static build does not" \
	sh -c "! readelf -d '$tmp/cmake/prog_static' | grep -q 'NEEDED.*libhakozuna'"

# ---- the launcher ----
# A program not linked with hakozuna, that finds it only when preloaded.
check "build the preload probe" "$CC" -O2 -DHZ_PROBE -Iinclude -o "$tmp/probe" "$here/prog.c" -ldl
check "the probe fails without the launcher" sh -c "! '$tmp/probe'"
printf 'int hz_test_empty;\n' >"$tmp/empty.c"
check "build an empty library to preload" "$CC" -shared -fPIC -o "$tmp/empty.so" "$tmp/empty.c"
show_env='echo "$HAKOZUNA_STATS|$HAKOZUNA_VERBOSE|$HAKOZUNA_PURGE_DELAY|$HAKOZUNA_THP"'

# The source tree's launcher uses build/; skip it for another BUILD.
launchers="$root/tools/hakozuna $prefix/bin/hakozuna"
if [ "$(cd "$BUILD" && pwd)" != "$(cd "$root/build" 2>/dev/null && pwd)" ]; then
	echo "skip - the source tree's launcher (it uses build/, not BUILD=$BUILD)"
	launchers="$prefix/bin/hakozuna"
fi
for hz in $launchers; do
	case $hz in
	"$prefix"/*) where=installed libdir=$lib ;;
	*) where=source libdir=$root/build ;;
	esac
	expect "$where: hakozuna --version" "hakozuna $VERSION" "$hz" --version
	check "$where: hakozuna --help" sh -c "'$hz' --help | grep -q 'hakozuna run'"
	expect "$where: hakozuna lib" "$libdir/libhakozuna.so" "$hz" lib
	expect "$where: hakozuna lib --checked" "$libdir/libhakozuna-checked.so" "$hz" lib --checked
	check "$where: run preloads hakozuna" "$hz" run -- "$tmp/probe"
	check "$where: run --checked preloads the checked build" "$hz" run --checked -- "$tmp/probe"
	expect "$where: run --checked sets LD_PRELOAD" "$libdir/libhakozuna-checked.so" \
		env -u LD_PRELOAD "$hz" run --checked -- sh -c 'echo "$LD_PRELOAD"'
	expect "$where: run prepends to LD_PRELOAD" "$libdir/libhakozuna.so:$tmp/empty.so" \
		env LD_PRELOAD="$tmp/empty.so" "$hz" run -- sh -c 'echo "$LD_PRELOAD"'
	expect "$where: --stats --verbose --option NAME=VALUE set the environment" "1|1|100|" \
		env -u HAKOZUNA_THP "$hz" run --stats --verbose --option purge_delay=100 -- sh -c "$show_env"
	expect "$where: -o and --option= forms, dash in NAME" "||5|1" \
		env -u HAKOZUNA_STATS -u HAKOZUNA_VERBOSE \
		"$hz" run -o purge-delay=5 --option=thp=1 sh -c "$show_env"
	check "$where: run --stats: a report on stderr at exit" \
		sh -c "'$hz' run --stats -- '$tmp/probe' 2>&1 >/dev/null | grep -q ."
	check "$where: run without --stats: nothing on stderr" \
		sh -c "! '$hz' run -- '$tmp/probe' 2>&1 >/dev/null | grep -q ."
	check "$where: run --stats passes the exit status" sh -c "'$hz' run --stats -- sh -c 'exit 3'; [ \$? = 3 ]"
	rm -f "$tmp"/prof-*
	check "$where: run --profile FILE writes the profile, %p the pid" \
		sh -c "'$hz' run --profile '$tmp/prof-%p.pb.gz' -- '$tmp/probe' && ls '$tmp'/prof-*.pb.gz '$tmp'/prof-*.txt"
	check "$where: run --leaks: a sampled leak report on stderr" \
		sh -c "'$hz' run --leaks -- '$tmp/probe' 2>&1 >/dev/null | grep -q 'SAMPLED leak report'"
	check "$where: run of a missing command: status 127 and a message naming it" \
		sh -c "'$hz' run -- /nonexistent/prog 2>'$tmp/nf.err'; [ \$? = 127 ] && grep -q 'command not found: /nonexistent/prog' '$tmp/nf.err'"
	for bad in "run" "run --option novalue -- true" "run --option purg_delay=1 -- true" "run --bogus -- true" "frobnicate"; do
		# shellcheck disable=SC2086 # split on purpose
		check "$where: 'hakozuna $bad' is an error" sh -c "'$hz' $bad; [ \$? = 2 ]"
	done
done
ln -s "$prefix/bin/hakozuna" "$tmp/hz-link"
expect "installed launcher through a symlink finds its libdir" "$lib/libhakozuna.so" "$tmp/hz-link" lib

# ---- a copied prefix: CMake and the launcher use the copy, not the original ----
moved=$tmp/moved
check "copy the installed prefix" cp -a "$prefix" "$moved"
check "cmake configure against the copy" cmake -S "$here" -B "$tmp/cmake-moved" -DCMAKE_PREFIX_PATH="$moved" \
	-DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release
check "cmake build against the copy" cmake --build "$tmp/cmake-moved"
check "the CMake package of the copy names no path of the original" \
	sh -c "! grep -rF '$prefix' '$moved/lib/cmake/hakozuna'"
check "the copy's build links the copy's library" \
	sh -c "grep -F '$moved/lib/libhakozuna.so' '$tmp/cmake-moved/CMakeCache.txt' '$tmp/cmake-moved/build.ninja' \
	  '$tmp/cmake-moved/CMakeFiles/prog_shared.dir/link.txt' 2>/dev/null | grep -q ."
for t in shared static object; do
	check "run the copy's CMake build of prog_$t" env LD_LIBRARY_PATH="$moved/lib" "$tmp/cmake-moved/prog_$t"
done
expect "the copied launcher finds the copy's library" "$moved/lib/libhakozuna.so" "$moved/bin/hakozuna" lib
check "the copied launcher runs a program on the copy's library" \
	sh -c "'$moved/bin/hakozuna' run -- sh -c 'echo \"\$LD_PRELOAD\"' | grep -qxF '$moved/lib/libhakozuna.so'"
rm -rf "$moved" "$tmp/cmake-moved"

# ---- CMake: the source tree by add_subdirectory (as FetchContent does) ----
check "cmake configure with add_subdirectory" cmake -S "$here" -B "$tmp/cmake-sub" -DHZ_SOURCE_DIR="$root" \
	-DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release
check "cmake build with add_subdirectory" cmake --build "$tmp/cmake-sub" -j 2
for t in shared static object; do
	check "run the add_subdirectory build of prog_$t" "$tmp/cmake-sub/prog_$t"
done
check "the add_subdirectory shared library has soname libhakozuna.so.$SOVERSION" \
	sh -c "readelf -d '$tmp/cmake-sub/hakozuna/libhakozuna.so.$VERSION' | grep -q 'SONAME.*\[libhakozuna.so.$SOVERSION\]'"
check "the add_subdirectory static build does not need libhakozuna" \
	sh -c "! readelf -d '$tmp/cmake-sub/prog_static' | grep -q 'NEEDED.*libhakozuna'"
check "the add_subdirectory library exports hz_malloc and malloc, hides internals" \
	sh -c "nm -D --defined-only '$tmp/cmake-sub/hakozuna/libhakozuna.so' >'$tmp/syms' && grep -q ' hz_malloc\$' '$tmp/syms' \
	  && grep -q ' malloc\$' '$tmp/syms' && ! grep -q ' hz_heap_get\$' '$tmp/syms'"
rm -rf "$tmp/cmake-sub"

# ---- DESTDIR: staged for another prefix, launcher falls back to ../lib ----
stage=$tmp/stage
check "make install DESTDIR" $MAKE --no-print-directory install PREFIX=/opt/hakozuna DESTDIR="$stage" BUILD="$BUILD"
check "DESTDIR holds only the prefix" test "$(ls "$stage")" = opt
expect "DESTDIR: the .pc file names the final prefix" "/opt/hakozuna" \
	sed -n 's/^prefix=//p' "$stage/opt/hakozuna/lib/pkgconfig/hakozuna.pc"
expect "DESTDIR: the staged launcher finds ../lib" "$stage/opt/hakozuna/lib/libhakozuna.so" \
	"$stage/opt/hakozuna/bin/hakozuna" lib
check "make uninstall DESTDIR" $MAKE --no-print-directory uninstall PREFIX=/opt/hakozuna DESTDIR="$stage"
expect "DESTDIR: uninstall leaves no file" "" files_under "$stage"

# ---- uninstall ----
check "make uninstall PREFIX=$prefix" $MAKE --no-print-directory uninstall PREFIX="$prefix"
files_under "$prefix" >"$tmp/after"
check "uninstall removed exactly what install added" cmp "$tmp/before" "$tmp/after"
check "uninstall removed hakozuna's own directories" \
	sh -c "[ ! -e '$lib/hakozuna' ] && [ ! -e '$lib/cmake/hakozuna' ]"

echo "install: $passed passed, $failed failed"
[ "$failed" = 0 ]
