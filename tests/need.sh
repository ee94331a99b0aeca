#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/need.sh: what the tests and benchmarks need from the machine, checked
# by capability (does the thing the test does actually work?), not by package
# name, and installed from Debian when it does not. The one list: the tests,
# the benchmarks and .ci/run all ask this script.
#
#   tests/need.sh CAPABILITY...   make each one work: when one fails its check
#                                 and we are root with apt-get, install the
#                                 Debian packages that provide it and check again
#   tests/need.sh --all           the same for every capability (what .ci/run does)
#   tests/need.sh --list          the capabilities, their packages and checks
#
# Exit status: 0 all work; 77 some do not and cannot be installed here (not
# root, no apt-get, or the install failed): one line each,
# "SKIP: needs CAPABILITY (Debian package P)"; 1 installed but the check still
# fails (a real failure). Services that packages start on install (redis,
# memcached) are kept from starting: the tests start their own.
set -u

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hz-need.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- the list: name, what it is for, its check (cap_NAME) and its packages
# (pkgs_NAME, printed; may depend on what is installed already) -------------
CAPS=(cc cxx gcc make python3 cargo pkg-config cmake groff lintian git sqlite3 ubsan tsan fuzzer valgrind
      cpython-tests redis redis-source memcached matplotlib go-pprof mimalloc tcmalloc jemalloc
      arm64-cross qemu-aarch64 mingw wine musl)

declare -A WHY=(
  [cc]="the C compiler, for the library and the tests"
  [cxx]="the C++ compiler, for the C++ tests"
  [gcc]="tests/programs: gcc itself under the allocator"
  [make]="the build"
  [python3]="shell tests' helpers, the benchmark runner"
  [cargo]="make test-rust: the Rust crate's tests"
  [pkg-config]="tests/install: a consumer through pkg-config"
  [cmake]="tests/install: a consumer through find_package"
  [groff]="tests/install: the man pages render without warnings"
  [lintian]="make test-deb: checks the Debian packages"
  [git]="tests/programs: git under the allocator"
  [sqlite3]="tests/programs: sqlite3 under the allocator"
  [ubsan]="make test-ubsan: gcc's -fsanitize=undefined runtime"
  [tsan]="make test-tsan: gcc's -fsanitize=thread runtime"
  [fuzzer]="make test-fuzz: clang's libFuzzer and UBSan runtimes"
  [valgrind]="make test-valgrind and make bench-instructions"
  [cpython-tests]="tests/programs/heavy python: CPython's regression test modules"
  [redis]="tests/programs/heavy redis: redis-server, redis-benchmark"
  [redis-source]="the redis benchmark: redis built from Debian's source package (bench/build-redis.sh)"
  [memcached]="tests/programs/heavy memcached and the memcached benchmark"
  [matplotlib]="make bench: the charts; tests/profile: tools/flamegraph.py"
  [go-pprof]="tests/profile: go tool pprof reads the heap profile"
  [mimalloc]="make bench: the mimalloc peer"
  [tcmalloc]="make bench: the tcmalloc peer"
  [jemalloc]="make bench: the jemalloc peer"
  [arm64-cross]="make test-arm64: the arm64 Linux cross compilers and C library"
  [qemu-aarch64]="make test-arm64: runs the arm64 tests"
  [mingw]="make test-windows: the Windows x64 cross compilers"
  [wine]="make test-windows: runs the Windows tests"
  [musl]="make test-musl: musl's C compiler wrapper and C library (x86-64)"
)

# compiles_runs COMPILER FLAGS...: a one-line C program builds and runs.
compiles_runs() {
  local compiler=$1
  shift
  printf 'int main(void) { return 0; }\n' >"$tmp/t.c"
  command -v "$compiler" >/dev/null 2>&1 && "$compiler" "$@" "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1 && "$tmp/t"
}
has() { command -v "$1" >/dev/null 2>&1; }
has_lib() { ldconfig -p 2>/dev/null | grep -q "[[:space:]]$1 "; }
# Debian's interpreter (heavy.sh runs it by path: a python3 of pyenv or a
# venv earlier on PATH has test modules of its own that prove nothing).
SYS_PY=/usr/bin/python3
py_minor() { "$SYS_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3.11; }
clang_major() { clang -dumpversion 2>/dev/null | cut -d. -f1; }

# CC and CXX as make passes them (the compilers the tests are built with).
cap_cc() { compiles_runs "${CC:-cc}" -x c; }
pkgs_cc() { echo build-essential; }
cap_cxx() {
  printf '#include <vector>\nint main() { std::vector<int> v(3); return v[0]; }\n' >"$tmp/t.cc"
  has "${CXX:-c++}" && ${CXX:-c++} "$tmp/t.cc" -o "$tmp/tcc" >/dev/null 2>&1 && "$tmp/tcc"
}
pkgs_cxx() { echo g++; }
cap_gcc() { compiles_runs gcc -x c; }
pkgs_gcc() { echo gcc; }
cap_make() { has make; }
pkgs_make() { echo make; }
cap_python3() { python3 -c 'import json, socket, subprocess' 2>/dev/null; }
pkgs_python3() { echo python3; }
# Debian 12's cargo-web is Rust 1.85 (its plain cargo is 1.63, the crate's
# minimum, too old for cargo package); rustup's in ~/.cargo/bin comes first.
cap_cargo() { cargo --version >/dev/null 2>&1; }
pkgs_cargo() { echo cargo-web; }
cap_pkg-config() { pkg-config --version >/dev/null 2>&1; }
pkgs_pkg-config() { echo pkg-config; }
cap_cmake() { cmake --version >/dev/null 2>&1; }
pkgs_cmake() { echo cmake; }
cap_groff() { groff --version >/dev/null 2>&1; }
pkgs_groff() { echo groff-base; }
cap_lintian() { lintian --version >/dev/null 2>&1; }
pkgs_lintian() { echo lintian; }
cap_git() { git --version >/dev/null 2>&1; }
pkgs_git() { echo git; }
cap_sqlite3() { echo 'select 1;' | sqlite3 >/dev/null 2>&1; }
pkgs_sqlite3() { echo sqlite3; }
cap_ubsan() { compiles_runs cc -x c -fsanitize=undefined -fno-sanitize-recover=all; }
pkgs_ubsan() { echo libubsan1; }
cap_tsan() { compiles_runs "${CC:-cc}" -x c -fsanitize=thread -pthread; }
pkgs_tsan() { echo libtsan2; }
# The fuzz harness links libFuzzer and UBSan's standalone runtime: both come
# with clang's runtime package, which Debian does not install with clang.
cap_fuzzer() {
  printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' \
    >"$tmp/f.c"
  has clang && clang -fsanitize=fuzzer,undefined "$tmp/f.c" -o "$tmp/f" >/dev/null 2>&1 && "$tmp/f" -runs=1 >/dev/null 2>&1
}
pkgs_fuzzer() {
  if has clang; then echo "libclang-rt-$(clang_major)-dev"; else echo clang libclang-rt-dev; fi
}
cap_valgrind() { valgrind --version >/dev/null 2>&1; }
pkgs_valgrind() { echo valgrind; }
# The interpreter ships regrtest; the test modules are a package of their own.
cap_cpython-tests() { "$SYS_PY" -c 'import test.libregrtest, test.test_list, test.test_dict' >/dev/null 2>&1; }
pkgs_cpython-tests() {
  if [ -x "$SYS_PY" ]; then echo "libpython$(py_minor)-testsuite"; else echo python3 libpython3.11-testsuite; fi
}
cap_redis() { redis-server --version >/dev/null 2>&1 && redis-benchmark --version >/dev/null 2>&1; }
pkgs_redis() { echo redis-server redis-tools; }
cap_redis-source() { has dpkg-source; }
pkgs_redis-source() { echo dpkg-dev; }
cap_memcached() { memcached -V >/dev/null 2>&1 || memcached -h >/dev/null 2>&1; }
pkgs_memcached() { echo memcached; }
cap_matplotlib() { "$SYS_PY" -c 'import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot' >/dev/null 2>&1; }
pkgs_matplotlib() { echo python3-matplotlib; }
# Go from go.dev in /usr/local/go, or Debian's golang-go: either pprof reads the files.
cap_go-pprof() { PATH=$PATH:/usr/local/go/bin go tool -n pprof >/dev/null 2>&1; }
pkgs_go-pprof() { echo golang-go; }
cap_mimalloc() { has_lib libmimalloc.so.2; }
pkgs_mimalloc() { echo libmimalloc2.0; }
cap_tcmalloc() { has_lib libtcmalloc_minimal.so.4; }
pkgs_tcmalloc() { echo libtcmalloc-minimal4; }
cap_jemalloc() { has_lib libjemalloc.so.2; }
pkgs_jemalloc() { echo libjemalloc2; }

cap_arm64-cross() {
  compiles_static aarch64-linux-gnu-gcc -x c && compiles_static aarch64-linux-gnu-g++ -x c++
}
pkgs_arm64-cross() { echo gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross; }
cap_qemu-aarch64() { qemu-aarch64 --version >/dev/null 2>&1; }
pkgs_qemu-aarch64() { echo qemu-user; }
cap_mingw() { compiles_static x86_64-w64-mingw32-gcc -x c && compiles_static x86_64-w64-mingw32-g++-posix -x c++; }
pkgs_mingw() { echo mingw-w64; }
# Debian's wine64 puts the loader in /usr/lib/wine (the wine package adds
# the wrappers on PATH).
wine_path() { command -v wine64 2>/dev/null || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; }; }
cap_wine() { [ -n "$(wine_path)" ] && "$(wine_path)" --version >/dev/null 2>&1; }
pkgs_wine() { echo wine64; }
# musl-gcc's programs run here: built dynamic (musl's loader) and static.
cap_musl() { compiles_runs x86_64-linux-musl-gcc -x c && compiles_runs x86_64-linux-musl-gcc -x c -static; }
pkgs_musl() { echo musl-tools; }
# compiles_static COMPILER FLAGS...: a one-line program builds, statically
# linked (cross compilers: it is not run here).
compiles_static() {
  local compiler=$1
  shift
  printf 'int main(void) { return 0; }\n' >"$tmp/s.c"
  command -v "$compiler" >/dev/null 2>&1 && "$compiler" "$@" "$tmp/s.c" -static -o "$tmp/s" >/dev/null 2>&1
}

# ---- the mechanism -----------------------------------------------------------
known() { declare -F "cap_$1" >/dev/null; }

can_install() { [ "$(id -u)" = 0 ] && has apt-get; }

apt_updated=""
apt_install() {
  local made_policy="" rc=1 try
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
  fi
  for try in 1 2; do
    if [ -z "$apt_updated" ] || [ "$try" = 2 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get -q -o Acquire::Retries=3 update >"$tmp/apt.log" 2>&1
      apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends -o Dpkg::Use-Pty=0 \
      -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3 install "$@" >>"$tmp/apt.log" 2>&1 && { rc=0; break; }
  done
  [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
  [ $rc = 0 ] || { echo "need.sh: apt-get install $* failed:" >&2; tail -5 "$tmp/apt.log" >&2; }
  return $rc
}

case ${1:-} in
--list)
  for c in "${CAPS[@]}"; do
    if "cap_$c"; then s=ok; else s=missing; fi
    printf '%-14s %-8s %-40s %s\n' "$c" "$s" "$("pkgs_$c")" "${WHY[$c]}"
  done
  exit 0 ;;
--all) set -- "${CAPS[@]}" ;;
"") echo "usage: tests/need.sh CAPABILITY... | --all | --list" >&2; exit 2 ;;
esac

missing=() pkgs=()
for c in "$@"; do
  known "$c" || { echo "need.sh: unknown capability '$c' (see tests/need.sh --list)" >&2; exit 2; }
  "cap_$c" && continue
  missing+=("$c")
  # shellcheck disable=SC2207 # package names have no spaces
  pkgs+=($("pkgs_$c"))
done
[ ${#missing[@]} = 0 ] && exit 0

if ! can_install; then
  for c in "${missing[@]}"; do echo "SKIP: needs $c (Debian package $("pkgs_$c"); run as root to install it)"; done
  exit 77
fi
echo "need.sh: ${missing[*]} missing: installing ${pkgs[*]}" >&2
if ! apt_install "${pkgs[@]}"; then
  for c in "${missing[@]}"; do echo "SKIP: needs $c (Debian package $("pkgs_$c"): apt-get install failed)"; done
  exit 77
fi
# A package that installs its compiler first may name its runtime only now.
rc=0
for c in "${missing[@]}"; do
  "cap_$c" && continue
  more=$("pkgs_$c")
  apt_install $more && "cap_$c" && continue
  echo "need.sh: $c still does not work after installing $more" >&2
  rc=1
done
exit $rc
