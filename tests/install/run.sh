#!/bin/sh
# make install-test: installs the working tree into a temporary prefix and
# uses it as a newcomer would: a C program built with pkg-config flags only
# (shared and static), a CMake project with find_package(latte) (shared and
# static, C and C++), the SONAME, `latte --version`, `man latte` through
# MANPATH; then make uninstall must leave nothing behind.
set -eu
MAKE=${MAKE:-make}
CC=${CC:-cc}
top=$(pwd)
tmp=$(mktemp -d /tmp/latte-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
pass=0
ok() { pass=$((pass + 1)); echo "install-test: ok: $1"; }
bad() { echo "install-test: FAILED: $1" >&2; exit 1; }

$MAKE -s install PREFIX="$prefix" >/dev/null
ok "make install PREFIX=$prefix"

so=$prefix/lib/liblatte.so
readelf -d "$so" | grep -q 'SONAME.*\[liblatte\.so\.0\]' || bad "SONAME of $so"
[ "$(readlink "$prefix/lib/liblatte.so")" = liblatte.so.0 ] || bad "liblatte.so -> liblatte.so.0"
[ -f "$(dirname "$so")/$(readlink "$prefix/lib/liblatte.so.0")" ] || bad "liblatte.so.0 -> a file"
ok "SONAME liblatte.so.0 and the links"
if readelf -S "$prefix/lib/liblatte.a" 2>/dev/null | grep -q '\.debug_info'; then bad "liblatte.a carries debug info"; fi
if readelf -S "$so" | grep -q '\.debug_info'; then bad "liblatte.so carries debug info"; fi
ok "no debug info in the installed libraries"

# pkg-config only.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
libdir=$(pkg-config --variable=libdir latte)
# shellcheck disable=SC2046
$CC -std=c99 -Wall -Werror tests/install/prog.c -o "$tmp/prog_shared" $(pkg-config --cflags --libs latte) -Wl,-rpath,"$libdir"
readelf -d "$tmp/prog_shared" | grep -q 'NEEDED.*\[liblatte\.so\.0\]' || bad "pkg-config shared program needs liblatte.so.0"
"$tmp/prog_shared" || bad "pkg-config shared program"
ok "pkg-config --cflags --libs latte: built, needs liblatte.so.0, runs"
# shellcheck disable=SC2046
$CC -std=c99 -Wall -Werror tests/install/prog.c -o "$tmp/prog_static" $(pkg-config --cflags latte) -static $(pkg-config --static --libs latte) 2>"$tmp/static.log" || { cat "$tmp/static.log" >&2; bad "pkg-config --static link"; }
if readelf -d "$tmp/prog_static" 2>/dev/null | grep -q liblatte; then bad "static program needs liblatte.so"; fi
"$tmp/prog_static" || bad "pkg-config static program"
ok "pkg-config --static --libs latte: built without liblatte.so, runs"

# CMake find_package.
cmake -S tests/install/cmake -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; bad "cmake configure"; }
cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; bad "cmake build"; }
for p in prog_c_shared prog_cpp_shared; do
  readelf -d "$tmp/cmake/$p" | grep -q 'NEEDED.*\[liblatte\.so\.0\]' || bad "$p needs liblatte.so.0"
  "$tmp/cmake/$p" || bad "$p"
done
for p in prog_c_static prog_cpp_static; do
  if readelf -d "$tmp/cmake/$p" | grep -q liblatte; then bad "$p needs liblatte.so"; fi
  "$tmp/cmake/$p" || bad "$p"
done
ok "find_package(latte): latte::latte and latte::latte_static, C and C++, built and run"

# The command and its man page.
version=$(sed -n 's/^version = "\([^"]*\)"/\1/p' Cargo.toml | head -n1)
[ "$("$prefix/bin/latte" --version)" = "latte $version" ] || bad "latte --version"
ok "latte --version: latte $version"
MANPATH="$prefix/share/man" MANPAGER=cat MANWIDTH=80 man latte 2>/dev/null | grep -q 'read the latency regions' || bad "MANPATH=$prefix/share/man man latte"
man -M "$prefix/share/man" -P cat latte 2>/dev/null | grep -q 'EXIT STATUS' || bad "man -M $prefix/share/man latte"
ok "man latte with MANPATH and with -M"

$MAKE -s uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" ! -type d | head -n 5)
[ -z "$left" ] || bad "make uninstall left: $left"
ok "make uninstall removes every installed file"
echo "install-test: $pass passed, 0 failed"
