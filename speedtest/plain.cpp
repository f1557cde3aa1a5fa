// plain.cpp: Start+Stop timed the way a user's own benchmark times them,
// for `make speedtest` (speedtest/plain.py runs it): a `for` loop of calls
// between two TSC reads, with no batching, no rows interleaved and no
// reference engine (hot.cpp does those). Written against the Latte API
// alone, so that it builds against ours (cpp_compat/Latte.hpp) and against
// the original (LATTE_BENCH_HEADER names the header, as for hot.cpp).
//
// Rows (each `ROW name cycles`, cycles per Start+Stop, the best of PASSES
// passes of CALLS calls; the rings are written through once first, so no
// page is committed while a pass is timed):
//   plain.fast, plain.mid, plain.hard   one literal ID
//   plain.lit.N   Fast Start+Stop round-robin over N consecutive short
//                 literals ("id0", "id1", ...), N = 1 to 64
// Usage: plain [CALLS]   (default 3,000,000)
#ifdef LATTE_BENCH_HEADER
#include LATTE_BENCH_HEADER
#else
#include "Latte.hpp"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <pthread.h>
#include <sched.h>
#include <x86intrin.h>

namespace {

constexpr int PASSES = 7;
constexpr long WARM_CALLS = 70000;  // more than a ring's 65,536 samples

// Consecutive short literals, as a code base's IDs are laid out.
const char *const kLiterals[64] = {
    "id0",  "id1",  "id2",  "id3",  "id4",  "id5",  "id6",  "id7",  "id8",  "id9",  "id10", "id11", "id12",
    "id13", "id14", "id15", "id16", "id17", "id18", "id19", "id20", "id21", "id22", "id23", "id24", "id25",
    "id26", "id27", "id28", "id29", "id30", "id31", "id32", "id33", "id34", "id35", "id36", "id37", "id38",
    "id39", "id40", "id41", "id42", "id43", "id44", "id45", "id46", "id47", "id48", "id49", "id50", "id51",
    "id52", "id53", "id54", "id55", "id56", "id57", "id58", "id59", "id60", "id61", "id62", "id63"};
const int kSweep[] = {1, 8, 16, 24, 32, 40, 48, 64};

// Cycles per call of f over `calls` calls.
template <class F>
__attribute__((noinline)) double PerCall(F f, long calls) {
  uint64_t t0 = __rdtsc();
  for (long i = 0; i < calls; i++) f(i);
  return double(__rdtsc() - t0) / double(calls);
}

template <class F>
double Best(F f, long calls) {
  double best = 1e300;
  for (int p = 0; p < PASSES; p++) best = std::min(best, PerCall(f, calls));
  return best;
}

// Each a lambda of its own type, so that PerCall's copy for it inlines the calls.
auto Fast = [](long) {
  Latte::Fast::Start("plain.fast");
  Latte::Fast::Stop("plain.fast");
};
auto Mid = [](long) {
  Latte::Mid::Start("plain.mid");
  Latte::Mid::Stop("plain.mid");
};
auto Hard = [](long) {
  Latte::Hard::Start("plain.hard");
  Latte::Hard::Stop("plain.hard");
};

// Round-robin over the first n literals (the counter wraps without a division).
double Sweep(int n, long calls) {
  int k = 0;
  auto f = [n, &k](long) {
    Latte::Fast::Start(kLiterals[k]);
    Latte::Fast::Stop(kLiterals[k]);
    if (++k == n) k = 0;
  };
  PerCall(f, WARM_CALLS * n);
  return Best(f, calls);
}

}  // namespace

int main(int argc, char **argv) {
  long calls = argc > 1 ? std::max(1000L, std::atol(argv[1])) : 3000000L;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
  (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  PerCall(Fast, WARM_CALLS);
  PerCall(Mid, WARM_CALLS);
  PerCall(Hard, WARM_CALLS);
  std::printf("ROW plain.fast %.2f\n", Best(Fast, calls));
  std::printf("ROW plain.mid %.2f\n", Best(Mid, calls));
  std::printf("ROW plain.hard %.2f\n", Best(Hard, calls));
  for (int n : kSweep) std::printf("ROW plain.lit.%d %.2f\n", n, Sweep(n, calls));
  return 0;
}
