// hot.cpp: the hot-path benchmark of `make speedtest`, written against the
// Latte API alone, so that it builds against any header that provides it:
// ours (cpp_compat/Latte.hpp, which forwards to liblatte) or the header a
// user is migrating from (make speedtest ORIGINAL=/path/to/Latte.hpp). It
// uses Latte::{Fast,Mid,Hard}::{Start,Stop}, LATTE_PULSE, Latte::Snapshot
// and Latte::MAX_SAMPLES; with ours (LATTE_HPP_COMPAT) also Latte::Prefault.
//
// Method. A row is an operation called BATCH (100) times between two timer
// reads (`lfence; rdtsc` ... `rdtscp; lfence`); the reading / BATCH is its
// cost per call for that iteration, so a TSC that advances in coarse steps
// (some VMs step by ~26 cycles) is divided by 100. Rows run interleaved in
// rounds of ROUND iterations, so that the drift of a shared machine's speed
// meets every row alike. A row's cost is its median per-call reading minus
// the empty loop's; its ratio to its base row (the reference engine for the
// hot-path rows, the one-ID row for the ID sweep) is computed round by round
// from the two rows' round medians, and summarised as the median over
// rounds with quartiles. speedtest/run.py runs this program several times
// (alternating with the original's build, when there is one) and judges.
//
// Code placement. Where a loop's instructions fall relative to the front
// end's 32- and 64-byte windows moves a call of a few dozen cycles by a few
// percent, more than the parity tolerance, and it depends on everything
// else in the binary: a figure from one build says as much about the
// linker as about the engine. So the Makefile builds this program at
// several placements (LATTE_BENCH_PLACEMENT = k: every measuring loop's
// function starts 8 k bytes past a 64-byte boundary), run.py runs each
// once and takes medians over them; a row and its base are always
// compared within one run, at one placement.
//
// Modes (one per run; every result is a line starting with ROW or INFO):
//   hot [ITER]  the timer rows, the reference engine, Fast/Mid/Hard/pulse,
//               and the ID sweep (N = 1, 8, 32, 64, 128, 200 IDs on one
//               thread, round-robin and random order); with ours, Fast and
//               pulse with the thread's switch tracking on and off
//   layouts [ITER]  the ID sweep to 10,000 IDs over four address layouts
//               of the names (see "The ID sweep over address layouts")
//   snapshot    Snapshot of a full ring (65,536 samples), microseconds
//   stall       a producer's Start+Stop latency p99.9 while nothing else
//               runs vs while another thread takes a Snapshot of its ID
//               every millisecond
//   warmup      (ours only) the first 65,536 Start+Stop of a fresh ring,
//               of a ring given Latte::Prefault first, and of a warm ring
// The engine's header: LATTE_BENCH_HEADER names it (the Makefile passes the
// original's path that way), else "Latte.hpp" on the include path.
#ifdef LATTE_BENCH_HEADER
#include LATTE_BENCH_HEADER
#else
#include "Latte.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

namespace {

constexpr int BATCH = 100;
constexpr int ROUND = 100;
int ITER = 20000;
volatile uint64_t g_sink;

// ------------------------------------------------------------ reference ----
// Not latte and not the original: the least an engine can do per span, in
// the same header-only style. Start pushes the ID and the TSC on a
// thread-local stack; Stop pops, and appends (start, duration) to one fixed
// ring, with no ID lookup and no protocol for readers. The state is
// constant-initialised (a thread_local with a dynamic initialiser would add
// a guard test to every access) and the ring is read at the end (Checksum),
// so the compiler cannot drop its stores.
namespace reference {
struct Frame {
  const char *id;
  uint64_t tsc;
};
struct Sample {
  uint64_t tsc, dur;
};
struct Thread {
  uint32_t depth;
  Frame frames[64];
};
thread_local Thread t{};
Sample ring[1 << 16];
uint64_t idx;
inline uint64_t RdtscpNoAux() {
  uint32_t lo, hi;
  __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi) : : "rcx");
  return (uint64_t(hi) << 32) | lo;
}
template <int M>
inline uint64_t TscStart() {
  if (M == 1) return RdtscpNoAux();
  if (M == 2) {
    _mm_lfence();
    return RdtscpNoAux();
  }
  return __rdtsc();
}
template <int M>
inline uint64_t TscStop() {
  if (M == 1) return RdtscpNoAux();
  if (M == 2) {
    uint64_t x = RdtscpNoAux();
    _mm_lfence();
    return x;
  }
  return __rdtsc();
}
template <int M>
inline void Start(const char *id) {
  uint32_t d = t.depth;
  if (d >= 64) return;
  t.frames[d].id = id;
  t.depth = d + 1;
  t.frames[d].tsc = TscStart<M>();
}
template <int M>
inline void Stop() {
  uint64_t now = TscStop<M>();
  uint32_t d = t.depth;
  if (d == 0) return;
  t.depth = --d;
  uint64_t s = t.frames[d].tsc;
  ring[idx & 0xFFFF] = Sample{s, now - s};
  idx++;
}
thread_local uint64_t pulse_last;
inline void Pulse() {
  uint64_t now = __rdtsc();
  ring[idx & 0xFFFF] = Sample{pulse_last, now - pulse_last};
  idx++;
  pulse_last = now;
}
uint64_t Checksum() {
  uint64_t sum = idx;
  for (auto &x : ring) sum += x.tsc ^ x.dur;
  return sum;
}
}  // namespace reference

// ------------------------------------------------------------ operations ----
#define OP(name) inline __attribute__((always_inline)) void name()
OP(op_empty) { asm volatile("" ::: "memory"); }
OP(op_rdtsc) { g_sink = __rdtsc(); }
OP(op_rdtscp) { g_sink = reference::RdtscpNoAux(); }
OP(op_lfence) { _mm_lfence(); }
OP(op_ref_fast) {
  reference::Start<0>("RefFast");
  reference::Stop<0>();
}
OP(op_ref_mid) {
  reference::Start<1>("RefMid");
  reference::Stop<1>();
}
OP(op_ref_hard) {
  reference::Start<2>("RefHard");
  reference::Stop<2>();
}
OP(op_ref_pulse) { reference::Pulse(); }
OP(op_fast) {
  Latte::Fast::Start("BenchFast");
  Latte::Fast::Stop(nullptr);
}
OP(op_mid) {
  Latte::Mid::Start("BenchMid");
  Latte::Mid::Stop(nullptr);
}
OP(op_hard) {
  Latte::Hard::Start("BenchHard");
  Latte::Hard::Stop(nullptr);
}
OP(op_pulse) { LATTE_PULSE("BenchPulse"); }

// The ID sweep: sweep row K draws its IDs from order[K] (indices into
// g_ids), 65,536 entries long, round-robin or random. The IDs are distinct
// strings packed one after another, as literals sit in .rodata. Row 0 has
// one ID: the base of every other sweep row. Every row pays the same two
// loads to find its ID.
constexpr int SWEEP_N[] = {1, 8, 32, 64, 128, 200};
constexpr int SWEEP_ROWS = 1 + 2 * 5;  // one-ID, then (rr, random) for each N > 1
char g_pool[256 * 16];
const char *g_ids[256];
uint8_t g_order[SWEEP_ROWS][1 << 16];
uint32_t g_pos;
int SweepN(int k) { return k == 0 ? 1 : SWEEP_N[1 + (k - 1) / 2]; }
bool SweepRandom(int k) { return k > 0 && (k - 1) % 2 == 1; }
std::string SweepKey(int k) {
  if (k == 0) return "sweep.1";
  return std::string("sweep.") + (SweepRandom(k) ? "rand." : "rr.") + std::to_string(SweepN(k));
}
void SetUpSweep() {
  char *p = g_pool;
  for (int i = 0; i < 256; i++) {
    g_ids[i] = p;
    p += std::snprintf(p, 16, "Sweep%d", i) + 1;
  }
  std::mt19937 rng(12345);
  for (int k = 0; k < SWEEP_ROWS; k++) {
    int n = SweepN(k);
    for (int i = 0; i < (1 << 16); i++) g_order[k][i] = uint8_t(SweepRandom(k) ? rng() % n : i % n);
  }
  // Every ring written through once beforehand (both engines' rings are
  // then committed and warm; the warm-up table measures the first pass).
  for (int i = 0; i < 200; i++)
    for (size_t j = 0; j < Latte::MAX_SAMPLES + 16; j++) {
      Latte::Fast::Start(g_ids[i]);
      Latte::Fast::Stop(nullptr);
    }
}
template <int K>
OP(op_sweep) {
  const char *id = g_ids[g_order[K][g_pos++ & 0xFFFF]];
  Latte::Fast::Start(id);
  Latte::Fast::Stop(nullptr);
}

// The ID sweep over address layouts (mode "layouts"): where an engine's
// cost per ID comes from the memory system, it depends on where the names
// and the rings land. Four layouts of MAX_LAYOUT_IDS distinct names each,
// named apart (so that each layout has rings of its own):
//   literals  short names packed one after another, as literals of one
//             translation unit sit in .rodata
//   spread    one name per 4 KiB and 64 bytes, as literals of many
//             translation units land on pages of their own
//   heap      names allocated one by one, handed out in shuffled order
//   mixed     names of 4 to 120 bytes, packed
// Rows per layout: its one-ID base, then N = LAYOUT_NS round-robin and
// random; every row draws indices from the same orders (g_lorder), so the
// layouts differ only in where the names are. A row's chunk points the
// op at its layout and order first (untimed); every row, the base
// included, pays the same loads to find its ID.
constexpr int LAYOUTS = 4;
const char *const LAYOUT_NAMES[LAYOUTS] = {"literals", "spread", "heap", "mixed"};
constexpr int LAYOUT_NS[] = {1, 8, 64, 512, 2000, 10000};
constexpr int LAYOUT_NN = sizeof LAYOUT_NS / sizeof LAYOUT_NS[0];
constexpr int LAYOUT_ROWS = 1 + 2 * (LAYOUT_NN - 1);  // one-ID, then (rr, random) per N > 1
constexpr int MAX_LAYOUT_IDS = 10000;
const char *g_lids[LAYOUTS][MAX_LAYOUT_IDS];
uint16_t g_lorder[LAYOUT_ROWS][1 << 16];
const char *const *g_cur_ids = g_lids[0];
const uint16_t *g_cur_order = g_lorder[0];
int LayoutN(int k) { return LAYOUT_NS[k == 0 ? 0 : 1 + (k - 1) / 2]; }
bool LayoutRandom(int k) { return k > 0 && (k - 1) % 2 == 1; }
std::string LayoutKey(int l, int k) {
  std::string key = std::string("layout.") + LAYOUT_NAMES[l] + ".";
  if (k == 0) return key + "1";
  return key + (LayoutRandom(k) ? "rand." : "rr.") + std::to_string(LayoutN(k));
}
OP(op_layout) {
  const char *id = g_cur_ids[g_cur_order[g_pos++ & 0xFFFF]];
  Latte::Fast::Start(id);
  Latte::Fast::Stop(nullptr);
}

// ----------------------------------------------------------- measuring ----
#ifndef LATTE_BENCH_PLACEMENT
#define LATTE_BENCH_PLACEMENT 0
#endif
// The placement's padding, ahead of the loop (run once per chunk, untimed).
inline __attribute__((always_inline)) void Place() {
#if LATTE_BENCH_PLACEMENT > 0
  asm volatile(".p2align 6\n\t.skip %c0, 0x90" ::"i"(8 * LATTE_BENCH_PLACEMENT));
#else
  asm volatile(".p2align 6");
#endif
}

template <void (*F)()>
void Chunk(std::vector<double> &out, int n) {
  Place();
  for (int it = 0; it < n; it++) {
    _mm_lfence();
    uint64_t t0 = __rdtsc();
    for (int b = 0; b < BATCH; b++) F();
    uint64_t t1 = reference::RdtscpNoAux();
    _mm_lfence();
    out.push_back(double(t1 - t0) / BATCH);
  }
}

struct Def {
  std::string key;
  void (*chunk)(std::vector<double> &, int);
  std::string base;   // row its ratio is taken to ("" = none)
  double n_tsc, n_tscp, n_lf;  // timer instructions one call executes
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = size_t(q * double(v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int Cpus() { return int(sysconf(_SC_NPROCESSORS_ONLN)); }

// Runs `defs` interleaved (rows[0] must be the empty loop) and prints a
// ROW line per row: key, cost per call, its timer instructions' cost, base,
// ratio to base (median over rounds) and its quartiles.
void Measure(std::vector<Def> defs) {
  size_t n = defs.size();
  std::vector<std::vector<double>> all(n), rounds(n);
  std::vector<double> scratch;
  for (auto &d : defs) d.chunk(scratch, ROUND);  // warm-up
  for (auto &a : all) a.reserve(ITER);
  std::vector<double> chunk;
  for (int done = 0; done < ITER; done += ROUND)
    for (size_t k = 0; k < n; k++) {
      chunk.clear();
      defs[k].chunk(chunk, std::min(ROUND, ITER - done));
      rounds[k].push_back(Median(chunk));
      all[k].insert(all[k].end(), chunk.begin(), chunk.end());
    }
  g_sink = reference::Checksum();
  auto index = [&](const std::string &key) {
    for (size_t k = 0; k < n; k++)
      if (defs[k].key == key) return k;
    return size_t(0);
  };
  double empty = Median(all[0]);
  double c_tsc = Median(all[index("rdtsc")]) - empty, c_tscp = Median(all[index("rdtscp")]) - empty,
         c_lf = Median(all[index("lfence")]) - empty;
  for (size_t k = 0; k < n; k++) {
    const Def &d = defs[k];
    double cost = Median(all[k]) - (k == 0 ? 0 : empty);
    double timer = d.n_tsc * c_tsc + d.n_tscp * c_tscp + d.n_lf * c_lf;
    double ratio = 0, q1 = 0, q3 = 0;
    if (!d.base.empty()) {
      size_t b = index(d.base);
      std::vector<double> r;
      for (size_t i = 0; i < rounds[k].size(); i++) {
        double e = rounds[0][i];
        double den = rounds[b][i] - e;
        if (den > 0) r.push_back((rounds[k][i] - e) / den);
      }
      ratio = Median(r);
      q1 = Quantile(r, 0.25);
      q3 = Quantile(r, 0.75);
    }
    std::printf("ROW %s %.3f %.3f %s %.4f %.4f %.4f\n", d.key.c_str(), cost, timer, d.base.empty() ? "-" : d.base.c_str(), ratio,
                q1, q3);
  }
}

// Two groups, each interleaved within itself: the hot-path rows first, while
// the engine knows only their IDs (as in a benchmark of one ID per row);
// then the ID sweep, after its 200 IDs were recorded once each. The timer
// rows and the reference engine run in both (the second time under keys
// ending in ".2", a second look at the machine's steadiness).
#ifdef LATTE_HPP_COMPAT
void SchedRows();
#endif
void Hot() {
  std::printf("INFO iterations %d rounds %d batch %d placement %d\n", ITER, ITER / ROUND, BATCH, LATTE_BENCH_PLACEMENT);
  Measure({
      {"empty", Chunk<op_empty>, "", 0, 0, 0},
      {"rdtsc", Chunk<op_rdtsc>, "", 0, 0, 0},
      {"rdtscp", Chunk<op_rdtscp>, "", 0, 0, 0},
      {"lfence", Chunk<op_lfence>, "", 0, 0, 0},
      {"ref.fast", Chunk<op_ref_fast>, "", 2, 0, 0},
      {"ref.mid", Chunk<op_ref_mid>, "", 0, 2, 0},
      {"ref.hard", Chunk<op_ref_hard>, "", 0, 2, 2},
      {"ref.pulse", Chunk<op_ref_pulse>, "", 1, 0, 0},
      {"fast", Chunk<op_fast>, "ref.fast", 2, 0, 0},
      {"mid", Chunk<op_mid>, "ref.mid", 0, 2, 0},
      {"hard", Chunk<op_hard>, "ref.hard", 0, 2, 2},
      {"pulse", Chunk<op_pulse>, "ref.pulse", 1, 0, 0},
  });
  SetUpSweep();
  Measure({
      {"empty.2", Chunk<op_empty>, "", 0, 0, 0},
      {"rdtsc", Chunk<op_rdtsc>, "", 0, 0, 0},
      {"rdtscp", Chunk<op_rdtscp>, "", 0, 0, 0},
      {"lfence", Chunk<op_lfence>, "", 0, 0, 0},
      {"ref.fast.2", Chunk<op_ref_fast>, "", 2, 0, 0},
      {SweepKey(0), Chunk<op_sweep<0>>, "", 2, 0, 0},
      {SweepKey(1), Chunk<op_sweep<1>>, "sweep.1", 2, 0, 0},
      {SweepKey(2), Chunk<op_sweep<2>>, "sweep.1", 2, 0, 0},
      {SweepKey(3), Chunk<op_sweep<3>>, "sweep.1", 2, 0, 0},
      {SweepKey(4), Chunk<op_sweep<4>>, "sweep.1", 2, 0, 0},
      {SweepKey(5), Chunk<op_sweep<5>>, "sweep.1", 2, 0, 0},
      {SweepKey(6), Chunk<op_sweep<6>>, "sweep.1", 2, 0, 0},
      {SweepKey(7), Chunk<op_sweep<7>>, "sweep.1", 2, 0, 0},
      {SweepKey(8), Chunk<op_sweep<8>>, "sweep.1", 2, 0, 0},
      {SweepKey(9), Chunk<op_sweep<9>>, "sweep.1", 2, 0, 0},
      {SweepKey(10), Chunk<op_sweep<10>>, "sweep.1", 2, 0, 0},
  });
#ifdef LATTE_HPP_COMPAT
  SchedRows();
#endif
}

#ifdef LATTE_HPP_COMPAT
// A chunk of row F with this thread's switch tracking on: its perf event
// opened before the timed batches and released after (two syscalls and a
// mapping per chunk, outside every timed batch), so that the "on" and "off"
// rows alternate in the same rounds on the same thread.
template <void (*F)()>
void ChunkTracked(std::vector<double> &out, int n) {
  if (Latte::SchedEnable() != 0 || Latte::SchedStatus() != LATTE_SCHED_ON) std::printf("INFO sched refused %d\n", Latte::SchedStatus());
  Chunk<F>(out, n);
  (void)Latte::SchedRelease();
}

// Fast Start+Stop and the pulse with the thread tracked vs not, each "on"
// row's ratio to its "off" row round by round (ours only).
void SchedRows() {
  Measure({
      {"empty.3", Chunk<op_empty>, "", 0, 0, 0},
      {"rdtsc", Chunk<op_rdtsc>, "", 0, 0, 0},
      {"rdtscp", Chunk<op_rdtscp>, "", 0, 0, 0},
      {"lfence", Chunk<op_lfence>, "", 0, 0, 0},
      {"sched.fast.off", Chunk<op_fast>, "", 2, 0, 0},
      {"sched.fast.on", ChunkTracked<op_fast>, "sched.fast.off", 2, 0, 0},
      {"sched.pulse.off", Chunk<op_pulse>, "", 1, 0, 0},
      {"sched.pulse.on", ChunkTracked<op_pulse>, "sched.pulse.off", 1, 0, 0},
  });
}
#endif

// A chunk of layout L's row K: the op pointed at the layout's names and
// the row's order, then timed as every chunk is.
template <int L, int K>
void ChunkLayout(std::vector<double> &out, int n) {
  g_cur_ids = g_lids[L];
  g_cur_order = g_lorder[K];
  Chunk<op_layout>(out, n);
}

#define LAYOUT_ROW(L, K) {LayoutKey(L, K), ChunkLayout<L, K>, K == 0 ? "" : LayoutKey(L, 0), 2, 0, 0}
#define LAYOUT_DEFS(L)                                                                                                    \
  LAYOUT_ROW(L, 0), LAYOUT_ROW(L, 1), LAYOUT_ROW(L, 2), LAYOUT_ROW(L, 3), LAYOUT_ROW(L, 4), LAYOUT_ROW(L, 5), LAYOUT_ROW(L, 6), \
      LAYOUT_ROW(L, 7), LAYOUT_ROW(L, 8), LAYOUT_ROW(L, 9), LAYOUT_ROW(L, 10)
static_assert(LAYOUT_ROWS == 11, "LAYOUT_DEFS lists 11 rows per layout");

// The layouts' names, the orders, and every ring the rows will write
// committed beforehand: ID i gets as many spans as the rows using it will
// record (each row of N IDs records (ITER + ROUND) * BATCH spans over its
// N IDs), at most a ring and a bit, so that a ring used by few IDs wraps
// as it will in the rows.
void SetUpLayouts() {
  static char packed[MAX_LAYOUT_IDS * 16], mixed[MAX_LAYOUT_IDS * 128];
  static std::vector<char> spread(size_t(MAX_LAYOUT_IDS) * 4160);
  char *p = packed, *m = mixed;
  std::vector<char *> heap;
  for (int i = 0; i < MAX_LAYOUT_IDS; i++) {
    g_lids[0][i] = p;
    p += std::snprintf(p, 16, "Lit%d", i) + 1;
    char *s = &spread[size_t(i) * 4160];
    std::snprintf(s, 16, "Spread%d", i);
    g_lids[1][i] = s;
    heap.push_back(strdup(("Heap" + std::to_string(i)).c_str()));
    int len = 4 + (i * 37) % 117;
    std::string name = "Mix" + std::to_string(i) + "-";
    name.resize(std::max<size_t>(name.size(), size_t(len)), 'x');
    std::memcpy(m, name.c_str(), name.size() + 1);
    g_lids[3][i] = m;
    m += name.size() + 1;
  }
  std::mt19937 rng(4242);
  std::shuffle(heap.begin(), heap.end(), rng);
  for (int i = 0; i < MAX_LAYOUT_IDS; i++) g_lids[2][i] = heap[i];
  for (int k = 0; k < LAYOUT_ROWS; k++) {
    int n = LayoutN(k);
    for (int i = 0; i < (1 << 16); i++) g_lorder[k][i] = uint16_t(LayoutRandom(k) ? rng() % n : i % n);
  }
  for (int i = 0; i < MAX_LAYOUT_IDS; i++) {
    double spans = 512;
    for (int k = 0; k < LAYOUT_ROWS; k++)
      if (LayoutN(k) > i) spans += double(ITER + ROUND) * BATCH / LayoutN(k);
    size_t n = size_t(std::min(spans, double(Latte::MAX_SAMPLES + 16)));
    for (int l = 0; l < LAYOUTS; l++)
      for (size_t j = 0; j < n; j++) {
        Latte::Fast::Start(g_lids[l][i]);
        Latte::Fast::Stop(nullptr);
      }
  }
}

// The layouts, each measured in a group of its own (its rows interleaved
// with the timer rows).
void Layouts() {
  std::printf("INFO iterations %d rounds %d batch %d placement %d\n", ITER, ITER / ROUND, BATCH, LATTE_BENCH_PLACEMENT);
  SetUpLayouts();
  std::vector<Def> timers = {{"empty", Chunk<op_empty>, "", 0, 0, 0}, {"rdtsc", Chunk<op_rdtsc>, "", 0, 0, 0},
                             {"rdtscp", Chunk<op_rdtscp>, "", 0, 0, 0}, {"lfence", Chunk<op_lfence>, "", 0, 0, 0}};
  std::vector<std::vector<Def>> groups = {{LAYOUT_DEFS(0)}, {LAYOUT_DEFS(1)}, {LAYOUT_DEFS(2)}, {LAYOUT_DEFS(3)}};
  for (auto &g : groups) {
    std::vector<Def> defs = timers;
    defs.insert(defs.end(), g.begin(), g.end());
    Measure(defs);
  }
}

double NowSec() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void SnapshotRow() {
  for (size_t i = 0; i < Latte::MAX_SAMPLES + 10; i++) {
    Latte::Fast::Start("SnapFill");
    Latte::Fast::Stop(nullptr);
  }
  std::vector<double> us;
  size_t got = 0;
  for (int k = 0; k < 60; k++) {
    double t0 = NowSec();
    auto v = Latte::Snapshot("SnapFill");
    us.push_back((NowSec() - t0) * 1e6);
    got = v.size();
  }
  std::printf("INFO snapshot samples %zu\n", got);
  std::printf("ROW snapshot %.3f 0 - 0 0 0\n", Median(us));
}

double Percentile(std::vector<uint64_t> &v, double q) {
  if (v.empty()) return 0;
  size_t k = size_t(std::ceil(q * double(v.size())));
  k = std::max<size_t>(1, std::min(k, v.size()));
  std::nth_element(v.begin(), v.begin() + (k - 1), v.end());
  return double(v[k - 1]);
}

// Producer latency while another thread extracts with Snapshot: phases (a)
// nothing else and (c) a Snapshot loop alternate, ROUNDS times, 50 ms each;
// the p99.9 of each phase per round, and the median over rounds of the
// per-round ratio (c)/(a).
void StallRow() {
  const int rounds = 12;
  std::atomic<int> phase{-1};
  std::atomic<bool> done{false};
  for (int i = 0; i < 1000; i++) {
    Latte::Fast::Start("StallSpan");
    Latte::Fast::Stop(nullptr);
  }
  std::vector<double> p_a, p_c, ratio;
  // One Snapshot a millisecond, with either engine: back to back, a faster
  // Snapshot would run more often and pass over the producer's lines more
  // often, and the row would compare how fast the two extract rather than
  // how much one extraction disturbs the producer.
  std::thread snapper([&] {
    Pin(0);
    while (!done.load(std::memory_order_relaxed)) {
      if (phase.load(std::memory_order_relaxed) == 1) {
        double t0 = NowSec();
        (void)Latte::Snapshot("StallSpan");
        double left = 0.001 - (NowSec() - t0);
        if (left > 0) usleep(useconds_t(left * 1e6));
      } else {
        usleep(200);
      }
    }
  });
  std::thread producer([&] {
    Pin(Cpus() > 1 ? 1 : 0);
    // The producer's ring must exist on this thread before timing.
    for (int i = 0; i < 1000; i++) {
      Latte::Fast::Start("StallSpan");
      Latte::Fast::Stop(nullptr);
    }
    std::vector<uint64_t> lat[2];
    for (auto &l : lat) l.reserve(2000000);
    for (int r = 0; r < rounds; r++) {
      double pr[2];
      for (int ph = 0; ph < 2; ph++) {
        lat[ph].clear();
        phase = ph;
        usleep(10000);
        double t0 = NowSec();
        while (NowSec() - t0 < 0.05)
          for (int i = 0; i < 1000; i++) {
            uint64_t a = __rdtsc();
            Latte::Fast::Start("StallSpan");
            Latte::Fast::Stop(nullptr);
            lat[ph].push_back(__rdtsc() - a);
          }
        pr[ph] = Percentile(lat[ph], 0.999);
      }
      phase = -1;
      p_a.push_back(pr[0]);
      p_c.push_back(pr[1]);
      ratio.push_back(pr[1] / pr[0]);
    }
  });
  producer.join();
  done = true;
  snapper.join();
  std::printf("ROW stall.quiet %.3f 0 - 0 %.4f %.4f\n", Median(p_a), Quantile(p_a, 0.25), Quantile(p_a, 0.75));
  std::printf("ROW stall.snapshot %.3f 0 stall.quiet %.4f %.4f %.4f\n", Median(p_c), Median(ratio), Quantile(ratio, 0.25),
              Quantile(ratio, 0.75));
}

#ifdef LATTE_HPP_COMPAT
// The first 65,536 Start+Stop into a ring, each timed alone (rdtsc before
// Start, rdtsc after Stop): a fresh ring (its pages committed by the first
// write to each), a fresh ring given Latte::Prefault first, and a ring
// that has been written through once (warm). Each on a thread of its own
// (a fresh thread gets fresh rings), the three alternating, several times.
void WarmupRow() {
  const int reps = 5;
  const char *what[3] = {"warmup.fresh", "warmup.prefaulted", "warmup.warm"};
  std::vector<uint64_t> lat[3];
  std::vector<double> prefault_us;
  static char names[3 * reps][32];
  for (int r = 0; r < reps; r++)
    for (int kind = 0; kind < 3; kind++) {
      char *id = names[r * 3 + kind];
      std::snprintf(id, 32, "Warm%d.%d", kind, r);
      std::thread th([&, id, kind] {
        Pin(Cpus() > 1 ? 1 : 0);
        if (kind == 1) {
          double t0 = NowSec();
          (void)Latte::Prefault(id);
          prefault_us.push_back((NowSec() - t0) * 1e6);
        }
        if (kind == 2)
          for (size_t i = 0; i < Latte::MAX_SAMPLES; i++) {
            Latte::Fast::Start(id);
            Latte::Fast::Stop(nullptr);
          }
        std::vector<uint64_t> &l = lat[kind];
        l.reserve(l.size() + Latte::MAX_SAMPLES);
        for (size_t i = 0; i < Latte::MAX_SAMPLES; i++) {
          uint64_t a = __rdtsc();
          Latte::Fast::Start(id);
          Latte::Fast::Stop(nullptr);
          l.push_back(__rdtsc() - a);
        }
      });
      th.join();
    }
  for (int k = 0; k < 3; k++) {
    double p50 = Percentile(lat[k], 0.5), p9999 = Percentile(lat[k], 0.9999);
    double mx = double(*std::max_element(lat[k].begin(), lat[k].end()));
    std::printf("ROW %s %.1f %.1f %.1f\n", what[k], p50, p9999, mx);
  }
  std::printf("INFO prefault_us %.1f\n", Median(prefault_us));
}
#endif

}  // namespace

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "hot";
  if (argc > 2) ITER = std::max(1000, std::atoi(argv[2]));
  if (!std::strcmp(mode, "hot")) {
    Pin(Cpus() > 1 ? 1 : 0);
    Hot();
  } else if (!std::strcmp(mode, "layouts")) {
    Pin(Cpus() > 1 ? 1 : 0);
    Layouts();
  } else if (!std::strcmp(mode, "snapshot")) {
    Pin(Cpus() > 1 ? 1 : 0);
    SnapshotRow();
  } else if (!std::strcmp(mode, "stall")) {
    StallRow();
  } else if (!std::strcmp(mode, "warmup")) {
#ifdef LATTE_HPP_COMPAT
    WarmupRow();
#else
    std::printf("INFO warmup needs Latte::Prefault (ours only)\n");
#endif
  } else {
    std::fprintf(stderr, "usage: hot [hot [ITER] | layouts [ITER] | snapshot | stall | warmup]\n");
    return 2;
  }
  return 0;
}
