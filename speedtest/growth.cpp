// growth.cpp: what a ring's memory costs the measuring thread, for `make
// speedtest` (speedtest/growth.py runs it). Written against the Latte API
// alone, so that it builds against ours (cpp_compat/Latte.hpp) and against
// the original (LATTE_BENCH_HEADER names the header, as for plain.cpp).
//
// The original allocates and zeroes a new ID's whole buffer (65,536
// samples) at its first use on a thread; ours commits a ring's memory as
// it is written, in bulk, in slow paths of the writing thread (the ID's
// first use, then each growth: docs/design.md, "Memory by use"). Each of
// IDS fresh IDs is used once, then 70,000 times more (past a whole ring),
// each Start+Stop timed alone between two TSC reads.
//
// Rows (`ROW name value`, each the median over the IDs):
//   growth.first   cycles of the ID's first Start+Stop on the thread
//   growth.worst   cycles of the slowest of its next 70,000 Start+Stops
//                  (for ours: the largest growth, 512 KiB committed)
//   growth.warm    cycles of a Start+Stop pair timed the same way once the
//                  ring is written through (for scale)
//   growth.tsc_per_us   TSC ticks per microsecond, measured
// Usage: growth [IDS]   (default 12)
#ifdef LATTE_BENCH_HEADER
#include LATTE_BENCH_HEADER
#else
#include "Latte.hpp"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <x86intrin.h>

namespace {

constexpr long SPANS = 70000;  // more than a ring's 65,536 samples

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Cycles of one Fast Start+Stop of `id`, between two TSC reads.
__attribute__((noinline)) uint64_t Timed(const char *id) {
  _mm_lfence();
  uint64_t t0 = __rdtsc();
  _mm_lfence();
  Latte::Fast::Start(id);
  Latte::Fast::Stop(id);
  _mm_lfence();
  uint64_t t1 = __rdtsc();
  return t1 - t0;
}

double TscPerUs() {
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  uint64_t t0 = __rdtsc();
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 20000000L);
  uint64_t t1 = __rdtsc();
  return double(t1 - t0) / ((b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3);
}

}  // namespace

int main(int argc, char **argv) {
  int ids = argc > 1 ? std::max(3, std::atoi(argv[1])) : 12;
  std::vector<double> first, worst, warm;
  for (int k = 0; k < ids; k++) {
    // A fresh name each time: both engines key a thread's buffers by the
    // ID's pointer.
    char buf[32];
    std::snprintf(buf, sizeof buf, "growth.id.%d", k);
    const char *id = strdup(buf);
    first.push_back(double(Timed(id)));
    uint64_t w = 0;
    for (long i = 0; i < SPANS; i++) w = std::max(w, Timed(id));
    worst.push_back(double(w));
    std::vector<double> tail;
    for (int i = 0; i < 1001; i++) tail.push_back(double(Timed(id)));
    warm.push_back(Median(tail));
  }
  std::printf("ROW growth.first %.0f\n", Median(first));
  std::printf("ROW growth.worst %.0f\n", Median(worst));
  std::printf("ROW growth.warm %.0f\n", Median(warm));
  std::printf("ROW growth.tsc_per_us %.1f\n", TscPerUs());
  return 0;
}
