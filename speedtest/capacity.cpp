// capacity.cpp: what a ring's capacity does to the cost of many IDs. One
// process records Fast Start+Stop through `cpp_compat/Latte.hpp` into a
// shared region whose rings hold the number of samples given on the command
// line (`latte_region_config.samples_per_slot`), over N IDs on one thread
// (names packed one after another, as literals sit in .rodata), round-robin
// and in random order, in a plain loop (N = 8, 64, 128, 200). The ID
// sweep `make speedtest` judges runs the default capacity, the original's
// 65,536, in hot.cpp; this tells a program with many IDs per thread what a
// smaller ring buys, at the price of fewer spans kept (docs/figures.md,
// "Ring size and the cost of many IDs"). `make speedtest` runs it for 65,536 and
// 1,024 samples and prints its tables for information, unjudged.
//
// Each figure is the best of 7 passes of 2 M calls over N IDs, divided by
// the best of 7 passes over one ID taking turns with them (so that a drift
// of the machine's speed meets both alike); every ring is written through
// once first (its pages committed, its write position past a lap). Each capacity runs in a process of its own (a process has one
// region).
//
// Build and run by hand (after `make`), from the repository's root:
//   g++ -O3 -march=native -std=c++17 -Icpp_compat -Iinclude -pthread speedtest/capacity.cpp target/release/liblatte.a -ldl -lrt -o capacity
//   ./capacity 65536; ./capacity 1024
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "Latte.hpp"

static const int IDS = 200;                     // the most IDs a row uses
static const int SWEEP_N[] = {8, 64, 128, 200};
static const size_t CALLS = size_t(1) << 21;    // calls a pass makes
static const int PASSES = 7;                    // passes a figure is the best of
static const size_t ORDER = size_t(1) << 16;    // entries of an order (a power of two)
static const long MAX_SAMPLES = 1L << 20;       // 200 rings of 16 MiB: 3.2 GiB of /dev/shm

static char g_pool[IDS * 16];
static const char *g_ids[IDS];
static uint8_t g_one[ORDER];    // one ID: all entries 0
static uint8_t g_order[ORDER];  // the row's IDs, in its order

// Cycles per Start+Stop of one pass through `order`.
static double Pass(const uint8_t *order) {
  uint64_t t0 = __rdtsc();
  for (size_t k = 0; k < CALLS; k++) {
    Latte::Fast::Start(g_ids[order[k & (ORDER - 1)]]);
    Latte::Fast::Stop(nullptr);
  }
  return double(__rdtsc() - t0) / double(CALLS);
}

// Cycles per Start+Stop over n IDs, round-robin or in random order, and
// over one ID, each the best of PASSES passes, the two taking turns (so
// that a change of the machine's speed meets both alike).
struct Figures {
  double n_ids, one_id;
};
static Figures Row(int n, bool shuffled, std::mt19937 &rng) {
  for (size_t k = 0; k < ORDER; k++) g_order[k] = uint8_t(shuffled ? rng() % n : k % n);
  Figures f{1e30, 1e30};
  for (int pass = 0; pass < PASSES; pass++) {
    f.one_id = std::min(f.one_id, Pass(g_one));
    f.n_ids = std::min(f.n_ids, Pass(g_order));
  }
  return f;
}

int main(int argc, char **argv) {
  char *end = nullptr;
  long samples = argc == 2 ? std::strtol(argv[1], &end, 10) : 0;
  if (argc != 2 || *end != '\0' || samples < 2 || (samples & (samples - 1)) != 0 || samples > MAX_SAMPLES) {
    std::fprintf(stderr, "usage: capacity SAMPLES_PER_RING (a power of two, 2 to %ld)\n", MAX_SAMPLES);
    return 2;
  }
  char name[64];
  std::snprintf(name, sizeof name, "/latte-capacity-%d", int(getpid()));
  latte_region_config config{};
  config.samples_per_slot = uint32_t(samples);
  config.slot_capacity = IDS;
  int rc = Latte::InitSharedRegion(name, config);
  if (rc != 0) {
    std::fprintf(stderr, "capacity: a shared region %s with rings of %ld samples: %s\n", name, samples, latte_error_string(rc));
    return 1;
  }
  // The region stays mapped in this process; its name goes now.
  latte_region_unlink(name);
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
  double one = 0, ratio[2][sizeof SWEEP_N / sizeof SWEEP_N[0]];
  for (int shuffled = 0; shuffled < 2; shuffled++)
    for (size_t r = 0; r < sizeof SWEEP_N / sizeof SWEEP_N[0]; r++) {
      Figures f = Row(SWEEP_N[r], shuffled != 0, rng);
      ratio[shuffled][r] = f.n_ids / f.one_id;
      if (one == 0) one = f.one_id;
    }
  std::printf("capacity.cpp, information (not judged): Fast Start+Stop in a plain loop, a shared region whose rings hold %ld samples\n", samples);
  std::printf("  one ID %.1f cycles; N IDs, × one ID measured in turn with them:\n  %-6s %-12s %s\n", one, "N", "round-robin", "random");
  for (size_t r = 0; r < sizeof SWEEP_N / sizeof SWEEP_N[0]; r++) std::printf("  %-6d %-12.3f %.3f\n", SWEEP_N[r], ratio[0][r], ratio[1][r]);
  return 0;
}
