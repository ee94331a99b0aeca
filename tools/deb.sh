#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/deb.sh: the Debian packages (`make deb` runs it from the repository
# root, after `make`), built with dpkg-deb alone, following Debian's library
# packaging conventions:
#   libhakozuna<SOVERSION>  the versioned shared library (the soname's major
#                           version in the package name, so two majors can be
#                           installed side by side), the checked build, the
#                           launcher and hakozuna(1)
#   libhakozuna-dev         header, libhakozuna.so link, .a, hakozuna.o,
#                           hakozuna.pc, the CMake package and hakozuna(3);
#                           it depends on the runtime package of the same version
# both with a copyright file (the MIT licence, machine-readable format),
# changelog.Debian.gz, md5sums; the runtime package with a shlibs file and
# an ldconfig trigger. Files go to /usr/lib/<multiarch>.
#
# Environment: BUILD, VERSION, SOVERSION (from make), DEB_REVISION (1),
# DEB_MAINTAINER (default: the last commit's author).
set -eu
BUILD=${BUILD:-build}
VERSION=${VERSION:?}
SOVERSION=${SOVERSION:?}
MAKE=${MAKE:-make}
REV=${DEB_REVISION:-1}
ARCH=$(dpkg --print-architecture)
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || ${CC:-cc} -print-multiarch)
MAINT=${DEB_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || echo 'hakozuna maintainers <hakozuna@example.org>')}
RUNTIME=libhakozuna$SOVERSION
DEV=libhakozuna-dev
out=$BUILD/deb
stage=$out/stage
rm -rf "$out"
mkdir -p "$out"

$MAKE -s --no-print-directory install DESTDIR="$PWD/$stage" PREFIX=/usr LIBDIR="/usr/lib/$MA" BUILD="$BUILD" >/dev/null

# The release date of this version (CHANGELOG.md), as the Debian changelog's date.
date=$(sed -n "s/^## \[$VERSION\] - \([0-9-]*\).*/\1/p" CHANGELOG.md)
[ -n "$date" ] || { echo "deb.sh: CHANGELOG.md has no '## [$VERSION] - DATE' line" >&2; exit 1; }
rfc_date=$(LC_ALL=C date -u -d "$date 12:00:00" -R)
year=${date%%-*}

# move FILE PKGDIR: a file of the staged install into a package tree.
move() {
	mkdir -p "$2/$(dirname "$1")"
	mv "$stage/$1" "$2/$1"
}

# docs PKG DIR: copyright, changelog.Debian.gz, compressed man pages.
docs() {
	doc=$2/usr/share/doc/$1
	mkdir -p "$doc"
	{
		echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
		echo "Upstream-Name: hakozuna"
		echo
		echo "Files: *"
		echo "Copyright: $year hakozuna contributors (see LICENSE)"
		echo "License: MIT"
		echo
		echo "License: MIT"
		sed -e 's/^[[:space:]]*$/./' -e 's/^/ /' LICENSE
	} >"$doc/copyright"
	{
		echo "hakozuna ($VERSION-$REV) unstable; urgency=medium"
		echo
		echo "  * Release $VERSION; see /usr/share/doc/$1/changelog.gz."
		echo
		echo " -- $MAINT  $rfc_date"
	} | gzip -9n >"$doc/changelog.Debian.gz"
	sed -n '/^## /,$p' CHANGELOG.md | gzip -9n >"$doc/changelog.gz"
	find "$2/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} + 2>/dev/null || true
}

# control PKG DIR DEPENDS DESCRIPTION-LINES...: DEBIAN/control and md5sums.
control() {
	pkg=$1 dir=$2 depends=$3
	shift 3
	mkdir -p "$dir/DEBIAN"
	size=$(du -k -s --exclude=DEBIAN "$dir" | cut -f1)
	{
		echo "Package: $pkg"
		echo "Source: hakozuna"
		echo "Version: $VERSION-$REV"
		echo "Architecture: $ARCH"
		echo "Maintainer: $MAINT"
		echo "Installed-Size: $size"
		echo "Depends: $depends"
		echo "Section: $section"
		echo "Priority: optional"
		[ "$pkg" = "$RUNTIME" ] && echo "Multi-Arch: same"
		[ -z "$homepage" ] || echo "Homepage: $homepage"
		for line in "$@"; do echo "$line"; done
	} >"$dir/DEBIAN/control"
	(cd "$dir" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
		xargs md5sum) >"$dir/DEBIAN/md5sums"
}
homepage=${DEB_HOMEPAGE:-}

# ---- runtime ----
rt=$out/$RUNTIME
libdir=usr/lib/$MA
move "$libdir/libhakozuna.so.$VERSION" "$rt"
move "$libdir/libhakozuna.so.$SOVERSION" "$rt"
move "$libdir/libhakozuna-checked.so" "$rt"
move usr/bin/hakozuna "$rt"
move usr/share/man/man1/hakozuna.1 "$rt"
# Debian policy: shared libraries stripped of debugging symbols and .comment.
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
	"$rt/$libdir/libhakozuna.so.$VERSION" "$rt/$libdir/libhakozuna-checked.so"
chmod 644 "$rt/$libdir/libhakozuna.so.$VERSION" "$rt/$libdir/libhakozuna-checked.so"
docs "$RUNTIME" "$rt"
# The lowest glibc version the library's symbols need.
glibc=$(objdump -T "$rt/$libdir/libhakozuna.so.$VERSION" "$rt/$libdir/libhakozuna-checked.so" |
	sed -n 's/.*GLIBC_\([0-9.]*\).*/\1/p' | sort -V | tail -1)
section=libs
control "$RUNTIME" "$rt" "libc6 (>= $glibc)" \
	"Description: fast, misuse-detecting general-purpose memory allocator" \
	" hakozuna is a drop-in malloc for Linux: per-thread caches without locks on" \
	" the fast path, memory returned to the system while the program idles, and" \
	" double or invalid frees reported with one line and abort()." \
	" ." \
	" This package holds the shared library (preload it, or link with" \
	" -lhakozuna), the checked build and the 'hakozuna run' launcher."
echo "libhakozuna $SOVERSION $RUNTIME (>= $VERSION)" >"$rt/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$rt/DEBIAN/triggers"
chmod 644 "$rt/DEBIAN/shlibs" "$rt/DEBIAN/triggers"

# ---- development ----
dev=$out/$DEV
for f in "$libdir/libhakozuna.so" "$libdir/libhakozuna.a" "$libdir/hakozuna/hakozuna.o" \
	"$libdir/pkgconfig/hakozuna.pc" "$libdir/cmake/hakozuna" usr/include/hakozuna.h \
	usr/share/man/man3/hakozuna.3; do
	move "$f" "$dev"
done
strip --strip-debug --remove-section=.comment "$dev/$libdir/libhakozuna.a" "$dev/$libdir/hakozuna/hakozuna.o"
docs "$DEV" "$dev"
section=libdevel
control "$DEV" "$dev" "$RUNTIME (= $VERSION-$REV)" \
	"Description: fast, misuse-detecting memory allocator (development files)" \
	" hakozuna is a drop-in malloc for Linux: per-thread caches without locks on" \
	" the fast path, memory returned to the system while the program idles, and" \
	" double or invalid frees reported with one line and abort()." \
	" ." \
	" This package holds the header, the static library, the single object that" \
	" overrides malloc in -static programs, pkg-config and CMake files."

# Everything staged went into a package.
left=$(find "$stage" ! -type d)
[ -z "$left" ] || { echo "deb.sh: staged files in no package: $left" >&2; exit 1; }
rm -rf "$stage"

for pkg in "$RUNTIME" "$DEV"; do
	find "$out/$pkg" -type d -exec chmod 755 {} +
	dpkg-deb --root-owner-group -Zxz --build "$out/$pkg" "$out/${pkg}_${VERSION}_$ARCH.deb" >/dev/null
	echo "  DEB  $out/${pkg}_${VERSION}_$ARCH.deb"
done
