// speedtest: the cost of latte's hot path, in the methodology of the original
// Latte benchmark. A pinned thread, a warm-up, then ITER iterations of BATCH
// operations each, timed between `lfence; rdtsc` and `rdtscp; lfence`; the
// per-operation cost of an iteration is its cycles / BATCH; the row's Cost
// is the median of those minus the empty loop's median (same run). Rows run
// interleaved, 1,000 iterations at a time, so that the drift of a shared
// machine's speed hits every row alike.
//
// Bookkeeping of a call = its Cost minus the Cost of the timer instructions
// it must execute (same run): Fast = 2 rdtsc, Mid = 2 rdtscp, Hard = 2 rdtscp
// + 2 lfence, pulse = 1 rdtsc. The budget is what the original header-only
// engine spends on the reference machine: Fast 10, Mid 19, Hard 22, pulse 4.
//
// Usage: speedtest [--iters N] [--quick] [--no-report] [--label TEXT]
#include "Latte.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include <unistd.h>

namespace {

int ITER = 100000;
constexpr int BATCH = 100;
constexpr int ROUND = 1000;  // iterations per row before moving to the next row
volatile uint64_t g_sink;

struct Row {
  std::string name;
  double total = 0, median = 0, avg = 0, min = 0, max = 0, sd = 0, cost = 0;
};

// One chunk of `n` timed iterations of BATCH calls of F.
template <void (*F)()>
void Chunk(std::vector<double> &out, int n) {
  for (int it = 0; it < n; it++) {
    _mm_lfence();
    uint64_t t0 = __rdtsc();
    for (int b = 0; b < BATCH; b++) F();
    unsigned aux;
    uint64_t t1 = __rdtscp(&aux);
    _mm_lfence();
    out.push_back(double(t1 - t0) / BATCH);
  }
}

struct Def {
  const char *name;
  void (*chunk)(std::vector<double> &, int);
};

// Runs every row in interleaved rounds (so that drift of the machine's
// speed affects all rows alike), then summarises each.
std::vector<Row> MeasureAll(const std::vector<Def> &defs) {
  std::vector<std::vector<double>> per(defs.size());
  std::vector<double> warm;
  for (auto &d : defs) d.chunk(warm, ROUND);  // warm-up
  for (auto &p : per) p.reserve(ITER);
  for (int done = 0; done < ITER; done += ROUND)
    for (size_t k = 0; k < defs.size(); k++) defs[k].chunk(per[k], std::min(ROUND, ITER - done));
  std::vector<Row> rows;
  for (size_t k = 0; k < defs.size(); k++) {
    auto &v = per[k];
    Row r;
    r.name = defs[k].name;
    double sum = 0;
    for (double x : v) sum += x;
    r.total = sum * BATCH;
    r.avg = sum / v.size();
    double var = 0;
    for (double x : v) var += (x - r.avg) * (x - r.avg);
    r.sd = std::sqrt(var / v.size());
    std::sort(v.begin(), v.end());
    r.median = v[v.size() / 2];
    r.min = v.front();
    r.max = v.back();
    rows.push_back(r);
  }
  return rows;
}

// A reference, not latte: the least a header-only engine can do (push the
// ID and TSC on a thread-local stack; pop, and append to one fixed ring with
// no ID lookup). Its row shows the floor of this machine and methodology.
namespace reference {
struct Frame {
  const char *id;
  uint64_t tsc;
};
struct Sample {
  uint64_t tsc, dur;
};
struct Thread {
  uint32_t depth = 0;
  Frame frames[64];
};
thread_local Thread t;
Sample ring[1 << 16];
uint64_t idx;
inline void Start(const char *id) {
  uint32_t d = t.depth;
  if (d >= 64) return;
  t.frames[d].id = id;
  t.depth = d + 1;
  t.frames[d].tsc = __rdtsc();
}
inline void Stop() {
  uint64_t now = __rdtsc();
  uint32_t d = t.depth;
  if (d == 0) return;
  t.depth = --d;
  uint64_t s = t.frames[d].tsc;
  ring[idx & 0xFFFF] = Sample{s, now - s};
  idx++;
}
}  // namespace reference

#define OP(name) inline __attribute__((always_inline)) void name()
OP(op_reference) {
  reference::Start("Ref");
  reference::Stop();
}
OP(op_empty) { asm volatile("" ::: "memory"); }
OP(op_rdtsc) { g_sink = __rdtsc(); }
OP(op_rdtscp) {
  unsigned a;
  g_sink = __rdtscp(&a);
}
OP(op_lfence) { _mm_lfence(); }
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
OP(op_abi_fast) {
  latte_start("AbiFast", LATTE_MODE_FAST);
  latte_stop(nullptr, LATTE_MODE_FAST);
}
OP(op_abi_mid) {
  latte_start("AbiMid", LATTE_MODE_MID);
  latte_stop(nullptr, LATTE_MODE_MID);
}
OP(op_abi_hard) {
  latte_start("AbiHard", LATTE_MODE_HARD);
  latte_stop(nullptr, LATTE_MODE_HARD);
}
latte_pulse_site abi_site;
OP(op_abi_pulse) { latte_pulse(&abi_site, "AbiPulse"); }
OP(op_chrono) {
  auto a = std::chrono::steady_clock::now();
  auto b = std::chrono::steady_clock::now();
  g_sink = uint64_t((b - a).count());
}

void Pin() {
  cpu_set_t set;
  CPU_ZERO(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  CPU_SET(n > 1 ? 1 : 0, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) std::fprintf(stderr, "speedtest: warning: could not pin the thread (%s); going on unpinned\n", std::strerror(rc));
}

void PrintRow(const Row &r) {
  std::printf("%-28s %14.0f %9.2f %9.2f %9.2f %9.2f %9.2f\n", r.name.c_str(), r.total, r.cost, r.avg, r.min, r.max, r.sd);
}

}  // namespace

int main(int argc, char **argv) {
  bool report = true;
  const char *label = "liblatte";
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) ITER = std::max(1000, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--quick")) ITER = 20000;
    else if (!std::strcmp(argv[i], "--no-report")) report = false;
    else if (!std::strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
  }
  Pin();
  std::printf("\n== latte speedtest (%s): %d iterations x %d operations, cycles per operation ==\n", label, ITER, BATCH);

  std::vector<Row> rows = MeasureAll({
      {"(empty loop)", Chunk<op_empty>},
      {"__rdtsc", Chunk<op_rdtsc>},
      {"__rdtscp", Chunk<op_rdtscp>},
      {"_LFENCE", Chunk<op_lfence>},
      {"Fast Start+Stop", Chunk<op_fast>},
      {"Mid Start+Stop", Chunk<op_mid>},
      {"Hard Start+Stop", Chunk<op_hard>},
      {"LATTE_PULSE", Chunk<op_pulse>},
      {"(reference) minimal engine", Chunk<op_reference>},
      {"C ABI Fast start+stop", Chunk<op_abi_fast>},
      {"C ABI Mid start+stop", Chunk<op_abi_mid>},
      {"C ABI Hard start+stop", Chunk<op_abi_hard>},
      {"C ABI pulse", Chunk<op_abi_pulse>},
      {"std::chrono::now() pair", Chunk<op_chrono>},
  });
  Row base = rows.front();
  rows.erase(rows.begin());
  for (auto &r : rows) r.cost = r.median - base.median;

  std::printf("%-28s %14s %9s %9s %9s %9s %9s\n", "operation", "Total", "Cost", "Avg", "Min", "Max", "StdDev");
  PrintRow(base);
  for (auto &r : rows) PrintRow(r);

  auto cost = [&](const char *n) {
    for (auto &r : rows)
      if (r.name == n) return r.cost;
    return 0.0;
  };
  const double tsc = cost("__rdtsc"), tscp = cost("__rdtscp"), lf = cost("_LFENCE");
  struct Budget {
    const char *row;
    double timers;
    double budget;
  } budgets[] = {
      {"Fast Start+Stop", 2 * tsc, 10}, {"Mid Start+Stop", 2 * tscp, 19}, {"Hard Start+Stop", 2 * tscp + 2 * lf, 22},
      {"LATTE_PULSE", tsc, 4},          {"(reference) minimal engine", 2 * tsc, 10}, {"C ABI Fast start+stop", 2 * tsc, 10}, {"C ABI Mid start+stop", 2 * tscp, 19},
      {"C ABI Hard start+stop", 2 * tscp + 2 * lf, 22}, {"C ABI pulse", tsc, 4},
  };
  std::printf("\nbookkeeping (cost minus the timer instructions it executes), against the original engine's budget:\n");
  int fails = 0;
  for (auto &b : budgets) {
    double book = cost(b.row) - b.timers;
    bool ok = book <= b.budget;
    bool is_abi = std::strncmp(b.row, "C ABI", 5) == 0 || b.row[0] == '(';
    if (!ok && !is_abi) fails++;
    std::printf("  %-24s %7.2f cycles  (budget %4.0f)  %s\n", b.row, book, b.budget,
                ok ? "PASS" : (is_abi ? "over (informational: plain calls, see README)" : "FAIL"));
  }
  std::printf("verdict (%s): %s\n", label, fails ? "FAIL: the inline path is over budget" : "PASS: the inline path is within the original engine's budget");

  if (report) {
    std::printf("\n");
    Latte::DumpToStream(std::cout, Latte::Parameter::Cycle, Latte::Parameter::Calibrated);
  }
  return 0;
}
