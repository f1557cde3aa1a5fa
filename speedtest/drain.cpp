// drain.cpp: a Fast span at N IDs per thread when the measuring thread
// only logs and another thread files the samples. Not part of `make
// speedtest` (it runs no latte code); it measures the one design that takes
// the ID lookup off the measuring thread (docs/figures.md, "Designs").
//
// The measuring thread appends {name pointer, start, duration} to a log of
// LOG_CAP records (its own, single producer, single consumer) and publishes
// its head; when the log is full it counts the span as dropped. A second
// thread, the drainer, reads the records, finds each name's ID in an
// open-addressed table of 16-byte entries at most half full (the `log+find`
// lookup of designs.cpp) and writes the sample into that ID's ring in
// latte's layout (slots 1 MiB + 2,112 bytes apart, the write index on the
// slot's first line), then publishes its tail.
//
// Per N and order, over 7 passes of 4 M calls: the measuring thread's
// cycles per call in its fastest pass (ratio to one ID), the share of spans
// dropped in the worst pass, and, averaged over the passes, the drainer's
// cycles per filed sample and the share of the pass it was busy filing.
// For scale, the same loop with no log at all (TSC reads only) is printed
// first. Needs two CPUs; the two threads are not pinned.
// Build and run: g++ -O2 -std=c++17 -pthread speedtest/drain.cpp -o drain && ./drain
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "model.h"

static const size_t LOG_CAP = size_t(1) << 16;  // records the log holds
static const uint64_t BATCH = 64;               // records per publication of the head

struct Record {
  const char *name;
  uint64_t start, dur;
};

// The log's two ends, each on its own line: the producer writes `head`, the
// drainer `tail`. Release stores after the records (or before reuse), acquire
// loads before reading them: the records are seen whole.
struct alignas(64) End {
  std::atomic<uint64_t> at{0};
};

struct Shared {
  uint8_t *slots = map_bytes(MAX_IDS * SLOT);
  Record *log = reinterpret_cast<Record *>(map_bytes(LOG_CAP * sizeof(Record)));
  std::vector<char> names = std::vector<char>(MAX_IDS * 24);
  Table table;
  End head, tail;
  std::atomic<bool> done{false};
};

// The drainer: files every record up to the producer's head until told the
// pass is over and the log is empty. Returns cycles spent and records filed.
static void drain(Shared *s, uint64_t *cycles, uint64_t *filed) {
  uint64_t tail = 0, n = 0, busy = 0;
  for (;;) {
    const bool last = s->done.load(std::memory_order_acquire);
    const uint64_t head = s->head.at.load(std::memory_order_acquire);
    if (head == tail) {
      if (last) break;
      _mm_pause();
      continue;
    }
    const uint64_t t0 = __rdtsc();
    for (; tail != head; tail++) {
      const Record r = s->log[tail & (LOG_CAP - 1)];
      uint8_t *slot = s->slots + size_t(s->table.find(r.name)) * SLOT;
      volatile uint64_t *index = reinterpret_cast<volatile uint64_t *>(slot);
      const uint64_t idx = *index;
      Sample *smp = reinterpret_cast<Sample *>(slot + SAMPLES_AT) + (idx & (CAP - 1));
      smp->start = r.start;
      smp->rest = r.dur;
      *index = idx + 1;
      n++;
      if ((n & 255) == 0) s->tail.at.store(tail + 1, std::memory_order_release);
    }
    s->tail.at.store(tail, std::memory_order_release);
    busy += __rdtsc() - t0;
  }
  *cycles = busy;
  *filed = n;
}

struct Result {
  double cycles = 1e30, dropped = 0, drain = 0, busy = 0;
};

// One pass per call of `LOG`: with the log and drainer, or TSC reads only.
template <bool LOG>
static Result run(Shared &s, size_t n, const std::vector<const char *> &ptrs) {
  Result best;
  for (int pass = 0; pass < PASSES; pass++) {
    for (size_t k = 0; k < n; k++) *reinterpret_cast<uint64_t *>(s.slots + k * SLOT) = 0;
    s.head.at.store(0, std::memory_order_relaxed);
    s.tail.at.store(0, std::memory_order_relaxed);
    s.done.store(false, std::memory_order_relaxed);
    uint64_t busy = 0, filed = 0;
    std::thread drainer;
    if (LOG) drainer = std::thread(drain, &s, &busy, &filed);
    uint64_t head = 0, tail = 0, dropped = 0, sink = 0;
    const uint64_t t0 = __rdtsc();
    for (size_t i = 0; i < CALLS; i++) {
      const uint64_t a = __rdtsc();
      const char *p = ptrs[i];
      const uint64_t b = __rdtsc();
      if (!LOG) {
        sink += b - a + uintptr_t(p);
        continue;
      }
      if (head - tail == LOG_CAP) {
        tail = s.tail.at.load(std::memory_order_acquire);
        if (head - tail == LOG_CAP) {
          dropped++;
          continue;
        }
      }
      s.log[head & (LOG_CAP - 1)] = Record{p, a, b - a};
      head++;
      if ((head & (BATCH - 1)) == 0) s.head.at.store(head, std::memory_order_release);
    }
    s.head.at.store(head, std::memory_order_release);
    const uint64_t spent = __rdtsc() - t0;
    const double cycles = double(spent) / CALLS;
    if (LOG) {
      s.done.store(true, std::memory_order_release);
      drainer.join();
    }
    if (sink == 42) std::puts("");
    // The fastest pass's cycles; the worst pass's drops, and the drainer's
    // cost and busy share over all passes (a pass that dropped ran faster).
    best.cycles = std::min(best.cycles, cycles);
    best.dropped = std::max(best.dropped, double(dropped) / CALLS);
    best.drain += double(busy) / PASSES / std::max<uint64_t>(filed, 1);
    best.busy += double(busy) / PASSES / spent;
  }
  return best;
}

int main() {
  static Shared s;
  const size_t ns[] = {1, 8, 64, 200, 512, 2000, 10000};
  std::printf("%-6s %-7s %10s %16s %9s %14s %12s\n", "N", "order", "tsc only", "measuring", "dropped", "drainer/sample",
              "drainer busy");
  double one = 0;
  for (size_t n : ns)
    for (int r = 0; r < (n == 1 ? 1 : 2); r++) {
      s.table.fill(s.names.data(), 24, n, 2);
      std::vector<const char *> ptrs(CALLS);
      std::mt19937 rng(1);
      for (size_t i = 0; i < CALLS; i++) ptrs[i] = s.names.data() + (r ? rng() % n : i % n) * 24;
      const Result bare = run<false>(s, n, ptrs);
      const Result logged = run<true>(s, n, ptrs);
      if (n == 1) one = logged.cycles;
      std::printf("%-6zu %-7s %10.1f %8.1f %6.2fx %8.1f%% %14.1f %11.0f%%\n", n, r ? "random" : "rr", bare.cycles,
                  logged.cycles, logged.cycles / one, 100 * logged.dropped, logged.drain, 100 * logged.busy);
    }
  return 0;
}
