#!/bin/sh
# Builds tests/inline/many_sites.{cpp,c} (256 call sites of each recording
# call in one function) the way a service would (-O2), runs them, and checks
# with nm that no out-of-line copy of the inline fast path exists: the
# compiler inlined it at every site. The two programs compile side by side.
# Usage: check_inlined.sh BUILD_DIR LIB_A LIBS...
set -e
b=$1; lib=$2; shift 2
mkdir -p "$b/inline"
${CXX:-c++} -O2 -std=c++17 -pthread -Icpp_compat -Iinclude tests/inline/many_sites.cpp -o "$b/inline/many_sites_cpp" "$lib" "$@" &
cxx=$!
${CC:-cc} -O2 -std=c99 -pthread -Iinclude tests/inline/many_sites.c -o "$b/inline/many_sites_c" "$lib" "$@" &
cc=$!
built=0
wait $cxx || { echo "inline: tests/inline/many_sites.cpp did not compile"; built=1; }
wait $cc || { echo "inline: tests/inline/many_sites.c did not compile"; built=1; }
[ $built = 0 ] || exit 1
fail=0
for src in tests/inline/many_sites.cpp tests/inline/many_sites.c; do
  case $src in
    *.cpp) out=$b/inline/many_sites_cpp ;;
    *.c) out=$b/inline/many_sites_c ;;
  esac
  "$out"
  copies=$(nm -C "$out" | grep -E 'latte_start_inline|latte_stop_inline|latte_pulse_inline|latte__start_on|latte__stop_on|latte__write|latte__pulse_write_own|Internal::StartIn|Internal::StopIn|Fast::Start|Fast::Stop|Hard::Start|Hard::Stop' || true)
  if [ -n "$copies" ]; then
    echo "inline: $src: out-of-line copies of the fast path:"; echo "$copies"; fail=1
  else
    echo "inline: $src: the fast path is inlined at all 256 sites"
  fi
done
exit $fail
