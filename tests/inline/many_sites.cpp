// A program with 256 call sites of each recording macro in one function:
// tests/inline/check_inlined.sh checks (nm) that the compiler inlined the
// fast path at every one of them (no out-of-line copy of it exists), and
// this program that every site recorded.
#include "Latte.hpp"

#include <cstdio>

#define SITE                      \
  Latte::Fast::Start("many.fast"); \
  Latte::Fast::Stop("many.fast");  \
  Latte::Hard::Start("many.hard"); \
  Latte::Hard::Stop("many.hard");  \
  LATTE_PULSE("many.pulse");
#define X4 SITE SITE SITE SITE
#define X16 X4 X4 X4 X4
#define X64 X16 X16 X16 X16
#define X256 X64 X64 X64 X64

int main() {
  for (int i = 0; i < 10; i++) {
    X256
  }
  // Every span is recorded; each pulse site's first call only primes it.
  size_t fast = Latte::Snapshot("many.fast").size(), hard = Latte::Snapshot("many.hard").size();
  size_t pulse = Latte::Snapshot("many.pulse").size();
  std::printf("many_sites: %zu fast, %zu hard, %zu pulse samples\n", fast, hard, pulse);
  return fast == 2560 && hard == 2560 && pulse == 256 * 9 ? 0 : 1;
}
