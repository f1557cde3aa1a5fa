// designs.cpp: what a Fast span costs at N IDs per thread under seven ways
// of storing samples, each stripped to its memory accesses (two TSC reads,
// the loads and stores the design needs, nothing else). Not part of `make
// speedtest` (it runs no latte code): it tells which design could meet the
// ID sweep's goal (docs/figures.md) at all.
//
//   ring      a ring per (thread, ID), its write index alone on the slot's
//             first line, the samples after it, slots 1 MiB + 2,112 bytes
//             apart (latte's layout, src/layout.rs); the ID's slot given
//   lines     the same rings, their write indices moved out of the slots
//             into one area, a cache line each, side by side
//   lines+at  as lines, the ring's samples found through an offset kept on
//             the write index's line (so a slot's header and samples need
//             not lie side by side)
//   segments  a ring per (thread, ID) in 256-byte segments, each taken from
//             one arena per thread when the ring first reaches it (so the
//             IDs' current segments lie side by side), found through a map
//             per ring at each segment's start; index and current segment
//             packed per thread
//   log       one log per thread, each record tagged with the ID's number,
//             and a count per ID packed per thread (so that every ID's
//             recorded count stays exact); the ID's number given
//   log+find  the log, the ID's number found from its name pointer (names
//             24 bytes apart), as `Start(id)` must, in an open-addressed
//             table of 16-byte entries of at least 1,024, at most half
//             full (or 1/FILL full: `./designs FILL`) and grown to hold
//             every ID (latte's ID cache has 1,024 entries and empties
//             itself when half full, src/recorder/cache.rs: this lookup is
//             a better one than latte's past 512 IDs)
//   staged    the rings of `ring`, written a whole line at a time: a span's
//             sample goes to the ID's line in a per-thread staging area (a
//             line per ID, side by side) and, when that line holds four,
//             the line goes to the ring with non-temporal stores (no read
//             of the ring's line first); write indices as in `lines`
//
// Each figure is cycles per call, the best of 7 passes of 4 M calls over N
// IDs in round-robin or random order; every pass starts the rings again, so
// the passes after the first touch memory already mapped. The table runs
// three times and keeps each cell's best, ratio to one ID of its design.
// Build and run: g++ -O2 -std=c++17 speedtest/designs.cpp -o designs && ./designs [FILL]
#include <x86intrin.h>

#include <algorithm>
#include <random>
#include <vector>

#include "model.h"

static const size_t SEG = 16;                   // samples a segment holds
static const size_t LOG_CAP = size_t(1) << 20;  // records a log holds
static size_t FILL = 2;                         // the table is at most 1/FILL full

// Memory every design may use, mapped once.
struct Memory {
  uint8_t *slots = map_bytes(MAX_IDS * SLOT);
  uint64_t *lines = reinterpret_cast<uint64_t *>(map_bytes(MAX_IDS * 64));
  uint64_t *per_id = reinterpret_cast<uint64_t *>(map_bytes(MAX_IDS * 8));
  Sample **current = reinterpret_cast<Sample **>(map_bytes(MAX_IDS * 8));
  uint32_t *seg_map = reinterpret_cast<uint32_t *>(map_bytes(MAX_IDS * (CAP / SEG) * 4));
  uint8_t *arena = map_bytes((MAX_IDS * CAP + SEG) * sizeof(Sample));
  Sample *log = reinterpret_cast<Sample *>(map_bytes(LOG_CAP * sizeof(Sample)));
  Sample *stage = reinterpret_cast<Sample *>(map_bytes(MAX_IDS * 64));
  std::vector<char> names = std::vector<char>(MAX_IDS * 24);
  Table table;
};

static uint64_t sink;


// One design's loop over `ids` (ID numbers) and `ptrs` (their names), best
// cycles per call over the passes.
template <int DESIGN>
static double run(Memory &m, size_t n, const std::vector<uint32_t> &ids, const std::vector<const char *> &ptrs) {
  double best = 1e30;
  for (int pass = 0; pass < PASSES; pass++) {
    for (size_t k = 0; k < n; k++) {
      *reinterpret_cast<uint64_t *>(m.slots + k * SLOT) = 0;
      m.lines[k * 8] = 0;
      m.lines[k * 8 + 1] = k * SLOT + SAMPLES_AT;
      m.per_id[k] = 0;
      m.current[k] = nullptr;
    }
    uint64_t head = 0;
    uint64_t next_seg = 1;  // segment 0 stays unused: a map entry of 0 is "not yet"
    const uint64_t t0 = __rdtsc();
    for (size_t i = 0; i < CALLS; i++) {
      const uint64_t a = __rdtsc();
      uint32_t id = ids[i];
      Sample *s;
      volatile uint64_t *index;
      uint64_t idx;
      if (DESIGN == 6) {
        index = &m.lines[size_t(id) * 8];
        idx = *index;
        s = m.stage + size_t(id) * 4 + (idx & 3);
      } else if (DESIGN == 5) {
        volatile uint64_t *line = &m.lines[size_t(id) * 8];
        index = line;
        idx = *index;
        s = reinterpret_cast<Sample *>(m.slots + line[1]) + (idx & (CAP - 1));
      } else if (DESIGN == 0 || DESIGN == 1) {
        uint8_t *slot = m.slots + size_t(id) * SLOT;
        index = DESIGN == 0 ? reinterpret_cast<volatile uint64_t *>(slot) : &m.lines[size_t(id) * 8];
        idx = *index;
        s = reinterpret_cast<Sample *>(slot + SAMPLES_AT) + (idx & (CAP - 1));
      } else if (DESIGN == 2) {
        index = &m.per_id[id];
        idx = *index;
        Sample *seg = m.current[id];
        if ((idx & (SEG - 1)) == 0) {
          uint32_t *e = m.seg_map + size_t(id) * (CAP / SEG) + ((idx / SEG) & (CAP / SEG - 1));
          if (*e == 0) *e = uint32_t(next_seg++);
          seg = reinterpret_cast<Sample *>(m.arena) + size_t(*e) * SEG;
          m.current[id] = seg;
        }
        s = seg + (idx & (SEG - 1));
      } else {
        if (DESIGN == 4) {
          id = uint32_t(m.table.find(ptrs[i]));
        }
        index = &m.per_id[id];
        idx = *index;
        s = m.log + (head++ & (LOG_CAP - 1));
      }
      const uint64_t b = __rdtsc();
      s->start = a;
      s->rest = DESIGN >= 3 && DESIGN <= 4 ? ((b - a) << 24 | id) : b - a;
      if (DESIGN == 6 && (idx & 3) == 3) {
        const __m128i *from = reinterpret_cast<const __m128i *>(m.stage + size_t(id) * 4);
        __m128i *to = reinterpret_cast<__m128i *>(m.slots + size_t(id) * SLOT + SAMPLES_AT) + ((idx - 3) & (CAP - 1));
        for (int q = 0; q < 4; q++) _mm_stream_si128(to + q, _mm_load_si128(from + q));
      }
      *index = idx + 1;
      sink += b;
    }
    best = std::min(best, double(__rdtsc() - t0) / CALLS);
  }
  return best;
}

static const int DESIGNS = 7;

// Every design at N IDs in one order.
static void measure(Memory &m, size_t n, bool random, double out[DESIGNS]) {
  m.table.fill(m.names.data(), 24, n, FILL);
  std::vector<uint32_t> ids(CALLS);
  std::vector<const char *> ptrs(CALLS);
  std::mt19937 rng(1);
  for (size_t i = 0; i < CALLS; i++) {
    ids[i] = random ? uint32_t(rng() % n) : uint32_t(i % n);
    ptrs[i] = m.names.data() + size_t(ids[i]) * 24;
  }
  madvise(m.seg_map, MAX_IDS * (CAP / SEG) * 4, MADV_DONTNEED);
  out[0] = run<0>(m, n, ids, ptrs);
  out[1] = run<1>(m, n, ids, ptrs);
  out[2] = run<2>(m, n, ids, ptrs);
  out[3] = run<3>(m, n, ids, ptrs);
  out[4] = run<4>(m, n, ids, ptrs);
  out[5] = run<5>(m, n, ids, ptrs);
  out[6] = run<6>(m, n, ids, ptrs);
}

int main(int argc, char **argv) {
  if (argc > 1) FILL = std::strtoul(argv[1], nullptr, 10);
  if (FILL < 2) FILL = 2;
  static Memory m;
  const size_t ns[] = {1, 8, 64, 200, 512, 2000, 10000};
  const size_t rows = 2 * (sizeof ns / sizeof ns[0]) - 1;
  std::vector<double> best(rows * DESIGNS, 1e30);
  for (int round = 0; round < 3; round++) {
    size_t row = 0;
    for (size_t n : ns)
      for (int r = 0; r < (n == 1 ? 1 : 2); r++, row++) {
        double c[DESIGNS];
        measure(m, n, r, c);
        for (int d = 0; d < DESIGNS; d++) best[row * DESIGNS + d] = std::min(best[row * DESIGNS + d], c[d]);
      }
  }
  std::printf("%-6s %-7s %13s %13s %13s %13s %13s %13s %13s\n", "N", "order", "ring", "lines", "segments", "log", "log+find", "lines+at",
              "staged");
  size_t row = 0;
  for (size_t n : ns)
    for (int r = 0; r < (n == 1 ? 1 : 2); r++, row++) {
      std::printf("%-6zu %-7s", n, r ? "random" : "rr");
      for (int d = 0; d < DESIGNS; d++) std::printf(" %6.1f %5.2fx", best[row * DESIGNS + d], best[row * DESIGNS + d] / best[d]);
      std::printf("\n");
    }
  if (sink == 42) std::puts("");
  return 0;
}
