// capacity.cpp: what a ring's capacity does to the cost of many IDs. One
// process records Fast Start+Stop through `cpp_compat/Latte.hpp` into a
// shared region whose rings hold the number of samples given on the command
// line (`latte_region_config.samples_per_slot`), over N IDs on one thread
// (names packed one after another, as literals sit in .rodata), round-robin
// and in random order. The ID sweep `make speedtest` judges runs the
// default capacity, the original's 65,536; this tells a program with many
// IDs per thread what a smaller ring buys (docs/figures.md, "What the cost
// from 64 IDs on is made of"). `make speedtest` runs it for 65,536 and
// 1,024 samples and prints its lines for information, unjudged.
//
// Each figure is the best of 7 passes of 2 M calls, and its ratio to one ID
// in the same process; every ring is written through once first (its pages
// committed, its write position past a lap). Each capacity runs in a
// process of its own (a process has one region).
//
// Build and run by hand (after `make`), from the repository's root:
//   g++ -O3 -march=native -std=c++17 -Icpp_compat -Iinclude -pthread
//       speedtest/capacity.cpp target/release/liblatte.a -ldl -lrt -o capacity
//   ./capacity 65536; ./capacity 1024
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "Latte.hpp"

static const int IDS = 200;                     // the most IDs a row uses
static const int SWEEP_N[] = {1, 8, 64, 128, 200};
static const size_t CALLS = size_t(1) << 21;    // calls a pass makes
static const int PASSES = 7;                    // passes a figure is the best of
static const size_t ORDER = size_t(1) << 16;    // entries of an order (a power of two)

static char g_pool[IDS * 16];
static const char *g_ids[IDS];
static uint8_t g_order[ORDER];

// Best cycles per Start+Stop over PASSES passes through g_order.
static double Measure() {
  double best = 1e30;
  for (int pass = 0; pass < PASSES; pass++) {
    uint64_t t0 = __rdtsc();
    for (size_t k = 0; k < CALLS; k++) {
      Latte::Fast::Start(g_ids[g_order[k & (ORDER - 1)]]);
      Latte::Fast::Stop(nullptr);
    }
    double cycles = double(__rdtsc() - t0) / double(CALLS);
    if (cycles < best) best = cycles;
  }
  return best;
}

int main(int argc, char **argv) {
  long samples = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 0;
  if (samples < 2 || (samples & (samples - 1)) != 0 || samples > (1L << 24)) {
    std::fprintf(stderr, "usage: capacity SAMPLES_PER_RING (a power of two, 2 to 2^24)\n");
    return 2;
  }
  char name[64];
  std::snprintf(name, sizeof name, "/latte-capacity-%d", int(getpid()));
  latte_region_config config{};
  config.samples_per_slot = uint32_t(samples);
  config.slot_capacity = 256;
  int rc = Latte::InitSharedRegion(name, config);
  if (rc != 0) {
    std::fprintf(stderr, "capacity: InitSharedRegion(%s) failed: %d\n", name, rc);
    return 1;
  }
  // The region stays mapped in this process; its name goes now.
  shm_unlink(name);
  char *p = g_pool;
  for (int i = 0; i < IDS; i++) {
    g_ids[i] = p;
    p += std::snprintf(p, 16, "Cap%d", i) + 1;
  }
  for (int i = 0; i < IDS; i++)
    for (long j = 0; j < samples + 16; j++) {
      Latte::Fast::Start(g_ids[i]);
      Latte::Fast::Stop(nullptr);
    }
  std::mt19937 rng(12345);
  std::printf("ID sweep in a shared region, rings of %ld samples (information), × one ID:", samples);
  double one = 0;
  for (int random = 0; random < 2; random++)
    for (int n : SWEEP_N) {
      if (random && n == 1) continue;
      for (size_t k = 0; k < ORDER; k++) g_order[k] = uint8_t(random ? rng() % n : k % n);
      double cycles = Measure();
      if (n == 1) {
        one = cycles;
        std::printf(" 1 ID %.1f cycles;", cycles);
      } else {
        std::printf(" %d %s %.3f", n, random ? "random" : "rr", cycles / one);
      }
    }
  std::printf("\n");
  return 0;
}
