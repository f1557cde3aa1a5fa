// model.h: what speedtest/designs.cpp and speedtest/drain.cpp share: the
// sweep's sizes, latte's ring layout stripped to its numbers (src/layout.rs),
// a sample, an entry of an open-addressed table keyed by name pointer, and
// memory mapped for them. They run no latte code.
#ifndef LATTE_SPEEDTEST_MODEL_H
#define LATTE_SPEEDTEST_MODEL_H

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

static const size_t CALLS = size_t(1) << 22;              // calls a pass makes
static const int PASSES = 7;                              // passes a figure is the best of
static const size_t MAX_IDS = 10000;                      // the sweep's largest N
static const size_t CAP = 65536;                          // samples a ring holds
static const size_t SLOT = (size_t(1) << 20) + 2112;      // bytes between slots
static const size_t SAMPLES_AT = 128;                     // the samples' offset in a slot
static const uint64_t HASH = 0x9E3779B97F4A7C15ull;       // the tables' multiplicative hash

struct Sample {
  uint64_t start, rest;
};
struct Entry {
  const char *key;
  uint64_t number;
};

// `bytes` of zeroed memory, committed as it is touched; exits when the
// address space is short.
static inline uint8_t *map_bytes(size_t bytes) {
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  return static_cast<uint8_t *>(p);
}

#endif
