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
#include <vector>

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

// An open-addressed table (linear probing) from a name pointer to the
// name's number, its 16-byte entries found by a multiplicative hash.
struct Table {
  struct Entry {
    const char *key;
    uint64_t number;
  };
  std::vector<Entry> entries;
  int shift = 0;

  // The home entry of a name pointer.
  size_t home(const char *p) const { return size_t((uint64_t(uintptr_t(p)) * HASH) >> shift); }

  // Numbers names 0 to n - 1, `stride` bytes apart from `names`, in a
  // table of at least 1,024 entries at most 1/fill full.
  void fill(const char *names, size_t stride, size_t n, size_t fill) {
    size_t size = 1024;
    while (size < fill * n) size <<= 1;
    entries.assign(size, Entry{nullptr, 0});
    shift = 64 - __builtin_ctzll(size);
    for (size_t k = 0; k < n; k++) {
      const char *p = names + k * stride;
      size_t h = home(p);
      while (entries[h].key) h = (h + 1) & (size - 1);
      entries[h] = Entry{p, k};
    }
  }

  // The number of a name the table holds.
  uint64_t find(const char *p) const {
    const size_t mask = entries.size() - 1;
    size_t h = home(p);
    while (entries[h].key != p) h = (h + 1) & mask;
    return entries[h].number;
  }
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
