// A program written for the original single-header Latte, using its API
// only: the test of LATTE_REGION (tests/cli/env_region.py) runs it
// unchanged. One span from a static constructor (before main), COUNT spans
// of "unchanged.work" in main; then READY on standard output, and, once
// standard input closes, the original's report.
// Usage: unchanged COUNT
#include "Latte.hpp"

#include <cstdlib>
#include <iostream>
#include <string>

namespace {
struct Early {
  Early() {
    Latte::Fast::Start("unchanged.static");
    Latte::Fast::Stop("unchanged.static");
  }
} early;
}  // namespace

int main(int argc, char **argv) {
  long count = argc > 1 ? std::atol(argv[1]) : 1000;
  unsigned long x = 1;
  for (long i = 0; i < count; i++) {
    Latte::Fast::Start("unchanged.work");
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    Latte::Fast::Stop("unchanged.work");
  }
  std::cout << "READY " << (x & 1) << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  Latte::DumpToStream(std::cout, Latte::Parameter::Cycle, Latte::Parameter::Raw);
  return 0;
}
