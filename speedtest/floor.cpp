// floor.cpp: what a span costs at N IDs when it does nothing but what any
// design with memory of its own per ID must: two TSC reads and one 16-byte
// store into the ID's memory, with no lookup and no load on the way. The
// IDs' memory is laid out four ways: packed 16 bytes apart, 64 bytes apart
// (a cache line each), 4 KiB + 2,112 bytes apart (a page each, their
// offsets in the page staggered as latte staggers its rings), and 1 MiB +
// 2,112 bytes apart (a ring each: latte's slot stride for rings of 65,536
// samples, src/layout.rs). Not part of `make
// speedtest` (it measures no latte code): it tells how far a layout lets
// the ID sweep's goal (docs/figures.md) be reached at all.
//
// Each figure is cycles per call, the best of 7 passes of 4 M calls over N
// IDs in round-robin or random order, and its ratio to one ID of the same
// layout. Every ID's memory is written once first.
// Build and run: g++ -O2 -std=c++17 speedtest/floor.cpp -o floor && ./floor
#include <x86intrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

static const size_t CALLS = size_t(1) << 22;
static const int PASSES = 7;

// Best cycles per call over PASSES passes, stores STRIDE bytes apart.
template <size_t STRIDE>
static double run(size_t n, bool random, uint8_t *mem) {
  std::vector<uint32_t> order(CALLS);
  std::mt19937 rng(1);
  for (size_t i = 0; i < CALLS; i++) order[i] = random ? uint32_t(rng() % n) : uint32_t(i % n);
  uint64_t sink = 0;
  double best = 1e30;
  for (int pass = 0; pass < PASSES; pass++) {
    uint64_t t0 = __rdtsc();
    for (size_t i = 0; i < CALLS; i++) {
      uint64_t a = __rdtsc();
      uint64_t *at = reinterpret_cast<uint64_t *>(mem + size_t(order[i]) * STRIDE);
      uint64_t b = __rdtsc();
      at[0] = a;
      at[1] = b - a;
      sink += b;
    }
    best = std::min(best, double(__rdtsc() - t0) / CALLS);
  }
  if (sink == 42) std::puts("");  // keeps the loop
  return best;
}

// Prints the line of /proc/self/smaps_rollup that counts huge pages.
static void print_huge_pages() {
  FILE *f = std::fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  while (f && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "AnonHugePages:", 14) == 0) std::printf("%s", line);
  if (f) std::fclose(f);
}

int main(int argc, char **argv) {
  const size_t ns[] = {1, 8, 64, 512, 2000, 10000};
  const size_t page = 4096 + 2112;
  const size_t ring = (size_t(1) << 20) + 2112;
  const size_t huge = size_t(2) << 20;
  const bool want_huge = argc > 1 && std::strcmp(argv[1], "huge") == 0;
  void *p = mmap(nullptr, 10000 * ring + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 1;
  uint8_t *mem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(p) + huge - 1) & ~(huge - 1));
  if (want_huge && madvise(mem, 10000 * ring, MADV_HUGEPAGE) != 0) {
    std::perror("madvise(MADV_HUGEPAGE)");
    return 1;
  }
  mem[0] = 1;
  run<16>(1, false, mem);  // warms the loop; not printed
  std::printf("%-6s %-7s %13s %13s %13s %13s\n", "N", "order", "16 B apart", "64 B apart", "4 KiB+2112", "1 MiB+2112");
  double base[4] = {0, 0, 0, 0};
  for (size_t n : ns) {
    for (size_t i = 0; i < n; i++) mem[i * 16] = mem[i * 64] = mem[i * page] = mem[i * ring] = 1;
    for (int r = 0; r < (n == 1 ? 1 : 2); r++) {
      const double c[4] = {run<16>(n, r, mem), run<64>(n, r, mem), run<4096 + 2112>(n, r, mem), run<(size_t(1) << 20) + 2112>(n, r, mem)};
      if (n == 1) std::copy(c, c + 4, base);
      std::printf("%-6zu %-7s", n, r ? "random" : "rr");
      for (int k = 0; k < 4; k++) std::printf(" %6.1f %5.2fx", c[k], c[k] / base[k]);
      std::printf("\n");
    }
  }
  if (want_huge) print_huge_pages();
  return 0;
}
