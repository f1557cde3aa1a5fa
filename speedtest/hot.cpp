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
// hot-path rows, the tracking-off row for the switch rows) is computed round by round
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
//   hot [ITER]  the timer rows, the reference engine and Fast/Mid/Hard/
//               pulse; with ours, Fast and pulse with the thread's switch
//               tracking on and off (the ID sweep is speedtest/sweep.cpp:
//               a row per process, so that no row pays for another's rings)
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

// The hot-path rows interleaved, while the engine knows only their IDs (as
// in a benchmark of one ID per row).
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
    std::fprintf(stderr, "usage: hot [hot [ITER] | snapshot | stall | warmup]\n");
    return 2;
  }
  return 0;
}
