// sweep.cpp: the ID sweep of `make speedtest` (speedtest/sweep.py runs it):
// Fast Start+Stop over N distinct IDs on one thread, one row per process,
// so that a row's cost holds its own rings' TLB entries and cache lines
// and no other row's. Written against the Latte API alone, so that it
// builds against ours (cpp_compat/Latte.hpp) and against the original
// (LATTE_BENCH_HEADER names the header, as for plain.cpp).
//
// A row: LAYOUT of the names, N IDs, ORDER and TEMP.
//   LAYOUT  literals  short names packed one after another, as literals of
//                     one translation unit sit in .rodata
//           spread    one name per 4 KiB and 64 bytes, as literals of many
//                     translation units land on pages of their own
//           heap      names allocated one by one, used in shuffled order
//           mixed     names of 4 to 120 bytes, packed
//   ORDER   rr (round-robin) or rand (drawn at random, the same draws in
//           every process)
//   TEMP    cold: each ID used once (its first use, untimed), then timed:
//           the timed calls are the first to write the rings past that
//           warm: each ring written through once (a lap and a bit), then
//           timed: they write memory written before (speedtest/sweep.py
//           asks for warm rows up to 256 IDs: at 10,000 IDs rings written
//           through are 10 GiB of memory, and a thread that uses that many
//           IDs has most of them far from a lap)
// The timed calls: CALLS (60,000) in batches of BATCH between two timer
// reads, at most one ring's worth for a single ID, so that a cold row
// stays in its rings' first lap. The batches alternate in rounds with the
// empty loop and with a reference (two TSC reads and their difference
// handed to an empty asm: no memory, so that a row's rings cannot slow it),
// so that a row's figure is its cost over the reference's in the same
// process: a change of the machine's speed between two processes cancels.
//
// `floor N ORDER TEMP` (no engine code): what a span costs at N IDs when it
// does only the memory traffic a ring per (thread, ID) must: two TSC reads,
// a 16-byte sample stored at the ring's next index and the index stored
// back into the ring's header, rings 1 MiB + 2,112 bytes apart with their
// samples 128 bytes past the header (latte's slot layout, src/layout.rs),
// with no lookup. Cold: the memory the timed calls write is committed
// (MADV_POPULATE_WRITE) and not written before; warm: written once before.
//
// Output: `ROW cost ref ratio` (cycles per call of the row and of the
// reference, the empty loop's taken off, and the median over rounds of
// their ratio) and `INFO` lines.
// Usage: sweep id LAYOUT N ORDER TEMP | sweep floor N ORDER TEMP
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
#include <random>
#include <string>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

constexpr int BATCH = 100;             // calls between two timer reads
constexpr int ROUND = 50;              // batches of one row in a round
constexpr int BATCHES = 600;           // timed batches of a row: CALLS calls
constexpr long CALLS = long(BATCH) * BATCHES;
constexpr int MAX_IDS = 10000;
constexpr size_t SLOT = (size_t(1) << 20) + 2112;  // the floor's ring stride
constexpr size_t SAMPLES_AT = 128;                 // its samples' offset in a ring
constexpr size_t RING = 65536;                     // samples a ring holds

const char *g_ids[MAX_IDS];
uint16_t g_order[1 << 16];
uint32_t g_pos;
uint8_t *g_floor;


#define OP(name) inline __attribute__((always_inline)) void name()
OP(op_empty) { asm volatile("" ::: "memory"); }
OP(op_ref) {
  uint64_t a = __rdtsc();
  uint64_t b = __rdtsc();
  asm volatile("" : : "r"(b - a));
}
OP(op_id) {
  const char *id = g_ids[g_order[g_pos++ & 0xFFFF]];
  Latte::Fast::Start(id);
  Latte::Fast::Stop(nullptr);
}
OP(op_floor) {
  uint8_t *ring = g_floor + size_t(g_order[g_pos++ & 0xFFFF]) * SLOT;
  uint64_t a = __rdtsc();
  asm volatile("" ::: "memory");
  uint64_t b = __rdtsc();
  uint64_t *head = reinterpret_cast<uint64_t *>(ring);
  uint64_t i = *head;
  uint64_t *s = reinterpret_cast<uint64_t *>(ring + SAMPLES_AT + (i & (RING - 1)) * 16);
  s[0] = a;
  s[1] = b - a;
  *head = i + 1;
}

inline uint64_t RdtscpNoAux() {
  uint32_t lo, hi;
  __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi) : : "rcx");
  return (uint64_t(hi) << 32) | lo;
}

// `n` batches of F, each batch's cycles per call appended to `out`.
template <void (*F)()>
__attribute__((noinline)) void Chunk(std::vector<double> &out, int n) {
  asm volatile(".p2align 6");
  for (int it = 0; it < n; it++) {
    _mm_lfence();
    uint64_t t0 = __rdtsc();
    for (int b = 0; b < BATCH; b++) F();
    uint64_t t1 = RdtscpNoAux();
    _mm_lfence();
    out.push_back(double(t1 - t0) / BATCH);
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Times row F against the reference and the empty loop, in rounds, and
// prints its ROW line.
template <void (*F)()>
void Measure() {
  std::vector<double> row, ref, empty, ratio, chunk;
  // The reference and the empty loop warmed first; the row is not, so
  // that a cold row's first batches are its first calls.
  Chunk<op_ref>(chunk, ROUND);
  Chunk<op_empty>(chunk, ROUND);
  for (int done = 0; done < BATCHES; done += ROUND) {
    double m[3];
    chunk.clear();
    Chunk<F>(chunk, ROUND);
    m[0] = Median(chunk);
    row.insert(row.end(), chunk.begin(), chunk.end());
    chunk.clear();
    Chunk<op_ref>(chunk, ROUND);
    m[1] = Median(chunk);
    ref.insert(ref.end(), chunk.begin(), chunk.end());
    chunk.clear();
    Chunk<op_empty>(chunk, ROUND);
    m[2] = Median(chunk);
    empty.insert(empty.end(), chunk.begin(), chunk.end());
    if (m[1] > m[2]) ratio.push_back((m[0] - m[2]) / (m[1] - m[2]));
  }
  double e = Median(empty);
  std::printf("ROW %.3f %.3f %.4f\n", Median(row) - e, Median(ref) - e, Median(ratio));
}

// The first `n` names of a layout (as speedtest/hot.cpp's layouts were).
bool SetUpNames(const char *layout, int n) {
  static std::vector<char> mem;
  if (!std::strcmp(layout, "literals") || !std::strcmp(layout, "mixed")) {
    bool mixed = layout[0] == 'm';
    mem.assign(size_t(n) * 128, 0);
    char *p = mem.data();
    for (int i = 0; i < n; i++) {
      std::string name = (mixed ? "Mix" : "Lit") + std::to_string(i);
      if (mixed) name.resize(std::max<size_t>(name.size() + 1, size_t(4 + (i * 37) % 117)), 'x');
      std::memcpy(p, name.c_str(), name.size() + 1);
      g_ids[i] = p;
      p += name.size() + 1;
    }
  } else if (!std::strcmp(layout, "spread")) {
    mem.assign(size_t(n) * 4160, 0);
    for (int i = 0; i < n; i++) {
      char *s = &mem[size_t(i) * 4160];
      std::snprintf(s, 16, "Spread%d", i);
      g_ids[i] = s;
    }
  } else if (!std::strcmp(layout, "heap")) {
    std::vector<char *> heap;
    for (int i = 0; i < n; i++) heap.push_back(strdup(("Heap" + std::to_string(i)).c_str()));
    std::mt19937 rng(4242);
    std::shuffle(heap.begin(), heap.end(), rng);
    for (int i = 0; i < n; i++) g_ids[i] = heap[i];
  } else {
    return false;
  }
  return true;
}

void SetUpOrder(int n, bool random) {
  std::mt19937 rng(12345);
  for (int i = 0; i < (1 << 16); i++) g_order[i] = uint16_t(random ? rng() % uint32_t(n) : uint32_t(i % n));
}

// Spans the timed calls give each of `n` IDs, twice over (random order
// gives some IDs more than their share), and a margin.
long SpansPerId(int n) { return std::min<long>(2 * (CALLS / n) + 2 * BATCH, long(RING)); }
// Spans that write a ring through once: a lap and a bit.
constexpr long LAP = long(RING) + 16;

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int Usage() {
  std::fprintf(stderr, "usage: sweep id LAYOUT N ORDER TEMP | sweep floor N ORDER TEMP\n"
                       "  LAYOUT literals|spread|heap|mixed, N 1..%d, ORDER rr|rand, TEMP cold|warm\n", MAX_IDS);
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  bool floor = argc == 5 && !std::strcmp(argv[1], "floor");
  if (!floor && !(argc == 6 && !std::strcmp(argv[1], "id"))) return Usage();
  const char *layout = floor ? "-" : argv[2];
  int n = std::atoi(argv[floor ? 2 : 3]);
  const char *order = argv[floor ? 3 : 4], *temp = argv[floor ? 4 : 5];
  bool random = !std::strcmp(order, "rand"), cold = !std::strcmp(temp, "cold");
  if (n < 1 || n > MAX_IDS || (!random && std::strcmp(order, "rr")) || (!cold && std::strcmp(temp, "warm"))) return Usage();
  Pin(sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0);
  SetUpOrder(n, random);
  long spans = SpansPerId(n);
  if (floor) {
    void *p = mmap(nullptr, size_t(n) * SLOT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return std::perror("mmap"), 1;
    g_floor = static_cast<uint8_t *>(p);
    for (int i = 0; i < n; i++) {
      uint8_t *ring = g_floor + size_t(i) * SLOT;
      // From the page that holds the ring's header (madvise takes whole pages).
      uint8_t *from = reinterpret_cast<uint8_t *>(reinterpret_cast<uintptr_t>(ring) & ~uintptr_t(4095));
      size_t bytes = size_t(ring - from) + SAMPLES_AT + size_t(cold ? spans : long(RING)) * 16;
      if (madvise(from, bytes, MADV_POPULATE_WRITE) != 0) return std::perror("madvise"), 1;
    }
    if (!cold)
      for (int i = 0; i < n; i++) {
        uint64_t *head = reinterpret_cast<uint64_t *>(g_floor + size_t(i) * SLOT);
        for (long c = 0; c < LAP; c++) reinterpret_cast<uint64_t *>(g_floor + size_t(i) * SLOT + SAMPLES_AT)[2 * (c & (RING - 1))] = 1;
        *head = uint64_t(LAP);
      }
    Measure<op_floor>();
    return 0;
  }
  if (!SetUpNames(layout, n)) return Usage();
  for (int i = 0; i < n; i++) {
    Latte::Fast::Start(g_ids[i]);
    Latte::Fast::Stop(nullptr);
  }
  if (!cold)
    for (int i = 0; i < n; i++)
      for (long c = 0; c < LAP; c++) {
        Latte::Fast::Start(g_ids[i]);
        Latte::Fast::Stop(nullptr);
      }
  Measure<op_id>();
  return 0;
}
