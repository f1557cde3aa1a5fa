// speedtest: the cost of latte's hot path, in the methodology of the original
// Latte benchmark. A pinned thread, a warm-up, then ITER iterations of BATCH
// operations each, timed between `lfence; rdtsc` and `rdtscp; lfence`; the
// per-operation cost of an iteration is its cycles / BATCH; the row's Cost
// is the median of those minus the empty loop's median (same run). Rows run
// interleaved, 200 iterations at a time (a paired round), so that the drift of a shared
// machine's speed hits every row alike.
//
// Bookkeeping of a call = its Cost minus the Cost of the timer instructions
// it must execute (same run): Fast = 2 rdtsc, Mid = 2 rdtscp, Hard = 2 rdtscp
// + 2 lfence, pulse = 1 rdtsc. The budget is what the original header-only
// engine spends on the reference machine: Fast 10, Mid 19, Hard 22, pulse 4.
//
// With --shared NAME the run records into a shared region and adds the
// extraction benchmarks: the old path (a full Snapshot copy), a reader
// process copying out of the live region beside memcpy of the same bytes,
// and the producer's Start+Stop latency while nothing reads, while a reader
// process polls back to back (with the reader's pacing, and without it), and
// while an in-process Snapshot loops.
//
// Usage: speedtest [--iters N] [--quick] [--no-report] [--label TEXT] [--shared NAME]
#include "Latte.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include <csignal>
#include <sys/wait.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

int ITER = 100000;
constexpr int BATCH = 100;
constexpr int ROUND = 200;  // iterations per row before moving to the next row (one paired round)
volatile uint64_t g_sink;

struct Row {
  std::string name;
  double total = 0, median = 0, avg = 0, min = 0, max = 0, sd = 0, cost = 0;
  std::vector<double> round_medians;  // median of each interleaved round
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
    for (size_t at = 0; at < v.size(); at += ROUND) {
      std::vector<double> round(v.begin() + at, v.begin() + std::min(v.size(), at + ROUND));
      std::nth_element(round.begin(), round.begin() + round.size() / 2, round.end());
      r.round_medians.push_back(round[round.size() / 2]);
    }
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
// Two traps it must avoid to be a fair floor: a thread_local with a
// non-constant initialiser gets a TLS guard test on every access, and a
// ring nobody reads has its stores removed by the compiler (an earlier
// version measured ~5 cycles that way, without writing any sample). So the
// state is constant-initialised and the ring is read at the end (Checksum).
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
// Reads every sample, so that the stores above are observable.
uint64_t Checksum() {
  uint64_t sum = idx;
  for (auto &x : ring) sum += x.tsc ^ x.dur;
  return sum;
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
// Two IDs whose pointers share a home entry of the per-thread ID cache (found in
// a buffer at start-up), alternating: two Start+Stop pairs per operation.
char g_set_pool[1 << 16];
const char *g_set_ids[2] = {"BenchSetA", "BenchSetB"};
void FindSetIds() {
  int n = 0;
  size_t set = latte__cache_index(g_set_pool);
  for (int k = 0; k < (1 << 16) - 64 && n < 2; k += 64)
    if (latte__cache_index(g_set_pool + k) == set) {
      std::snprintf(g_set_pool + k, 16, "BenchSet%c", 'A' + n);
      g_set_ids[n++] = g_set_pool + k;
    }
}
OP(op_fast_set) {
  Latte::Fast::Start(g_set_ids[0]);
  Latte::Fast::Stop(nullptr);
  Latte::Fast::Start(g_set_ids[1]);
  Latte::Fast::Stop(nullptr);
}
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

// ------------------------------------------------------------ extraction --

double Percentile(std::vector<uint64_t> &v, double q) {
  if (v.empty()) return 0;
  size_t k = size_t(std::ceil(q * double(v.size())));
  if (k < 1) k = 1;
  if (k > v.size()) k = v.size();
  std::nth_element(v.begin(), v.begin() + (k - 1), v.end());
  return double(v[k - 1]);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The slots of `id` in a reader's view.
std::vector<latte_slot_info> SlotsOf(const Latte::Reader &r, const char *id) {
  uint32_t tok = LATTE_INVALID_ID;
  for (auto &i : r.Ids())
    if (i.name == id) tok = i.token;
  std::vector<latte_slot_info> out;
  for (auto &s : r.Slots())
    if (s.id_token == tok) out.push_back(s);
  return out;
}

// Child mode "--copy NAME ID SECONDS": copies the slot of ID out of the live
// region again and again (a fresh cursor each pass: the whole ring), each
// pass followed by memcpy of as many bytes from the same ring in the same
// mapping (alternating, so that both meet the same machine), and prints both
// rates.
int CopyChild(const char *name, const char *id, double secs) {
  PinTo(0);
  auto r = Latte::Reader::OpenShared(name);
  if (!r.ok()) return 2;
  auto slots = SlotsOf(r, id);
  if (slots.empty()) return 3;
  std::unique_ptr<latte_raw_sample[]> out(new latte_raw_sample[Latte::MAX_SAMPLES]);
  int sfd = shm_open(name, O_RDONLY, 0);
  if (sfd < 0) return 4;
  struct stat st;
  fstat(sfd, &st);
  void *m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, sfd, 0);
  close(sfd);
  if (m == MAP_FAILED) return 5;
  const latte_region_header *h = static_cast<const latte_region_header *>(m);
  const char *ring = static_cast<const char *>(m) + h->slots_offset + uint64_t(slots[0].index) * h->slot_stride + LATTE_SLOT_HEADER_SIZE;
  double bytes = 0, secs_reader = 0, secs_memcpy = 0, t0 = Now();
  int passes = 0;
  while (Now() - t0 < secs) {
    latte_cursor cur{};
    size_t n = 0;
    double a = Now();
    r.Read(slots[0].index, cur, out.get(), Latte::MAX_SAMPLES, &n);
    double b = Now();
    std::memcpy(out.get(), ring, n * sizeof(latte_raw_sample));  // into the same buffer: the same cache footprint
    asm volatile("" : : "r"(out.get()) : "memory");
    double c = Now();
    secs_reader += b - a;
    secs_memcpy += c - b;
    bytes += double(n * sizeof(latte_raw_sample));
    passes++;
  }
  munmap(m, size_t(st.st_size));
  std::printf("COPY %.0f %.0f %zu\n", bytes / secs_reader, bytes / secs_memcpy, size_t(bytes / passes));
  return 0;
}

// Child mode "--poll NAME ID SECONDS PACE": polls every slot of ID with its
// own cursor, back to back, re-listing the slots every 10 ms (what a live
// sidecar does: new threads get new slots; listing loads every slot's
// write_idx, so it is not done in the read loop). PACE "default" keeps the
// reader's pacing (LATTE_READER_MIN_INTERVAL_NS), "0" turns it off.
int PollChild(const char *name, const char *id, double secs, const char *pace) {
  PinTo(0);
  auto r = Latte::Reader::OpenShared(name);
  if (!r.ok()) return 2;
  if (std::strcmp(pace, "default") != 0) r.SetMinInterval(std::strtoull(pace, nullptr, 10));
  std::vector<latte_cursor> cur(r.Info().slot_capacity);
  std::unique_ptr<latte_raw_sample[]> out(new latte_raw_sample[Latte::MAX_SAMPLES]);
  double t0 = Now();
  unsigned long long read = 0, lost = 0;
  while (Now() - t0 < secs) {
    auto slots = SlotsOf(r, id);
    for (double t1 = Now(); Now() - t1 < 0.01;)
      for (auto &sl : slots) {
        size_t n = 0;
        latte_cursor &c = cur[sl.index];
        uint64_t before = c.lost;
        r.Read(sl.index, c, out.get(), Latte::MAX_SAMPLES, &n);
        read += n;
        lost += c.lost - before;
      }
  }
  std::printf("POLL %llu %llu\n", read, lost);
  return 0;
}

// Starts this program in a child mode; returns its stdout's read end.
pid_t SpawnChild(const char *mode, const char *name, const char *id, double secs, FILE **out, const char *extra = "-") {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    char s[32];
    std::snprintf(s, sizeof s, "%.3f", secs);
    execl("/proc/self/exe", "speedtest", mode, name, id, s, extra, (char *)nullptr);
    _exit(99);
  }
  close(p[1]);
  *out = fdopen(p[0], "r");
  return pid;
}

struct Stall {
  double p50, p99, p999, max;
};

Stall Summarize(std::vector<uint64_t> &lat) {
  Stall s;
  s.p50 = Percentile(lat, 0.5);
  s.p99 = Percentile(lat, 0.99);
  s.p999 = Percentile(lat, 0.999);
  s.max = lat.empty() ? 0 : double(*std::max_element(lat.begin(), lat.end()));
  return s;
}

// Start+Stop latency on one producer thread pinned to CPU 1, in interleaved
// windows: (a) the reader processes are stopped (SIGSTOP) and nothing reads,
// (b) a reader process polls with the reader's default pacing (SIGCONT),
// (b') a reader process polls with pacing off, (c) an in-process thread runs
// Snapshot in a loop. Interleaving makes them comparable on a machine whose
// speed drifts.
void StallPhases(pid_t paced, pid_t spinning, Stall out[4]) {
  std::vector<uint64_t> lat[4];
  std::atomic<bool> snap{false}, done{false};
  std::thread snapper([&] {
    PinTo(0);
    while (!done.load(std::memory_order_relaxed)) {
      if (snap.load(std::memory_order_relaxed))
        (void)Latte::Snapshot("StallSpan");
      else
        usleep(200);
    }
  });
  std::thread producer([&] {
    PinTo(1);
    for (auto &l : lat) l.reserve(4000000);
    for (int round = 0; round < 20; round++)
      for (int phase = 0; phase < 4; phase++) {
        if (phase == 1) kill(paced, SIGCONT);
        if (phase == 2) kill(spinning, SIGCONT);
        if (phase == 3) snap = true;
        usleep(20000);  // let the phase settle
        double t0 = Now();
        while (Now() - t0 < 0.05)
          for (int i = 0; i < 1000; i++) {
            uint64_t a = __rdtsc();
            Latte::Fast::Start("StallSpan");
            Latte::Fast::Stop(nullptr);
            lat[phase].push_back(__rdtsc() - a);
          }
        if (phase == 1) kill(paced, SIGSTOP);
        if (phase == 2) kill(spinning, SIGSTOP);
        if (phase == 3) snap = false;
      }
  });
  producer.join();
  done = true;
  snapper.join();
  for (int k = 0; k < 4; k++) out[k] = Summarize(lat[k]);
}

void Extraction(const char *name) {
  std::printf("\n== extraction (shared region %s) ==\n", name);
  // The old path: a full Snapshot copy of one ID's 65,536 samples.
  for (size_t i = 0; i < Latte::MAX_SAMPLES + 10; i++) {
    Latte::Fast::Start("ExtractFill");
    Latte::Fast::Stop(nullptr);
  }
  std::vector<double> us;
  size_t n = 0;
  for (int k = 0; k < 50; k++) {
    double t0 = Now();
    auto v = Latte::Snapshot("ExtractFill");
    us.push_back((Now() - t0) * 1e6);
    n = v.size();
  }
  std::sort(us.begin(), us.end());
  double snap_us = us[us.size() / 2];
  std::printf("old path: Snapshot of %zu samples: %.1f us median (%.2f GB/s of 8-byte durations)\n", n, snap_us,
              double(n * 8) / (snap_us * 1e-6) / 1e9);

  // A reader process copying out of a live region, beside memcpy.
  std::atomic<bool> go{true};
  std::thread producer([&] {
    PinTo(1);
    while (go.load(std::memory_order_relaxed))
      for (int i = 0; i < 1000; i++) {
        Latte::Fast::Start("ExtractLive");
        Latte::Fast::Stop(nullptr);
      }
  });
  while (Latte::Snapshot("ExtractLive").size() < Latte::MAX_SAMPLES - 1) usleep(1000);  // a live ring reads capacity - 1
  FILE *out = nullptr;
  pid_t pid = SpawnChild("--copy", name, "ExtractLive", 1.0, &out);
  double reader_rate = 0, memcpy_rate = 0;
  size_t per_pass = 0;
  char line[256];
  while (out && fgets(line, sizeof line, out))
    if (std::sscanf(line, "COPY %lf %lf %zu", &reader_rate, &memcpy_rate, &per_pass) == 3) break;
  int status = 0;
  waitpid(pid, &status, 0);
  if (out) fclose(out);
  go = false;
  producer.join();
  double ratio = memcpy_rate > 0 ? reader_rate / memcpy_rate : 0;
  std::printf("reader process, live ring (%zu bytes a pass): %.2f GB/s; memcpy of the same bytes: %.2f GB/s; ratio %.2f  %s\n",
              per_pass, reader_rate / 1e9, memcpy_rate / 1e9, ratio,
              ratio >= 0.5 ? "PASS (goal: at least half of memcpy)" : "FAIL (goal: at least half of memcpy)");

  // Producer stall: (a) nothing reads, (b) a reader process polls, (c) in-process Snapshot loops.
  for (int i = 0; i < 1000; i++) {  // the slot exists before the poller lists it
    Latte::Fast::Start("StallSpan");
    Latte::Fast::Stop(nullptr);
  }
  FILE *out2 = nullptr;
  pid = SpawnChild("--poll", name, "StallSpan", 1e9, &out, "default");
  pid_t spin = SpawnChild("--poll", name, "StallSpan", 1e9, &out2, "0");
  usleep(100000);
  kill(pid, SIGSTOP);
  kill(spin, SIGSTOP);
  Stall st[4];
  std::thread([&] { StallPhases(pid, spin, st); }).join();
  for (pid_t p : {pid, spin}) {
    kill(p, SIGKILL);
    waitpid(p, &status, 0);
  }
  if (out) fclose(out);
  if (out2) fclose(out2);
  std::printf("producer Start+Stop latency in cycles, 20 interleaved rounds (p50 / p99 / p99.9 / max):\n");
  const char *what[4] = {"(a) nothing reads           ", "(b) reader process polls    ", "(b') same, pacing off       ",
                         "(c) in-process Snapshot loop"};
  const char *note[4] = {"", "   (back to back, every slot of the ID; the reader's default pacing)",
                         "   (informational: looks at the writer's index on every call)", ""};
  for (int k = 0; k < 4; k++)
    std::printf("  %s  %6.0f %7.0f %8.0f %9.0f%s\n", what[k], st[k].p50, st[k].p99, st[k].p999, st[k].max, note[k]);
  for (int k : {1, 3})
    std::printf("  p99.9 %.3s/(a) = %.2f  %s\n", what[k], st[k].p999 / st[0].p999,
                st[k].p999 <= 1.2 * st[0].p999 ? "PASS (goal: within 1.2x)" : "FAIL (goal: within 1.2x)");
  std::printf("  p99.9 (b')/(a) = %.2f  (informational)\n", st[2].p999 / st[0].p999);
}

// ----------------------------------------------------------------- flush --

// How long latte_flush_async takes to return and to complete on a full
// region, and the producer's Start+Stop latency (a) while nothing happens,
// (b) while an io_uring flush is in flight, (c) while the main thread write()s
// the same bytes: interleaved rounds, one producer thread pinned to CPU 1.
void FlushBench() {
  std::printf("\n== flush to disk ==\n");
  if (!latte_flush_supported()) {
    std::printf("flush: this build has no io_uring flush (cargo build --features uring)\n");
    return;
  }
  const int rings = 16;
  std::thread filler([] {
    static const char *ids[rings] = {"Flush0", "Flush1", "Flush2",  "Flush3",  "Flush4",  "Flush5",  "Flush6",  "Flush7",
                                     "Flush8", "Flush9", "Flush10", "Flush11", "Flush12", "Flush13", "Flush14", "Flush15"};
    for (auto id : ids)
      for (size_t i = 0; i < Latte::MAX_SAMPLES; i++) {
        Latte::Fast::Start(id);
        Latte::Fast::Stop(nullptr);
      }
  });
  filler.join();
  (void)latte_cycles_per_ns();
  char path[96];
  std::snprintf(path, sizeof path, "/tmp/latte-speedtest-flush-%d.img", int(getpid()));
  auto flush_once = [&](double *ret_us, double *done_ms) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    double t0 = Now();
    int rc = latte_flush_async(fd, LATTE_UNIT_TIME);
    double t1 = Now();
    while (rc == 0 && latte_poll_flush() == LATTE_FLUSH_PENDING) usleep(50);
    double t2 = Now();
    close(fd);
    *ret_us = (t1 - t0) * 1e6;
    *done_ms = (t2 - t0) * 1e3;
    return rc == 0 && latte_poll_flush() == LATTE_FLUSH_IDLE;
  };
  std::vector<double> ret, done;
  bool ok = true;
  for (int k = 0; k < 10; k++) {
    double r, d;
    ok &= flush_once(&r, &d);
    ret.push_back(r);
    done.push_back(d);
  }
  latte_flush_status st{};
  latte_flush_get_status(&st);
  std::sort(ret.begin(), ret.end());
  std::sort(done.begin(), done.end());
  std::printf("latte_flush_async returns in %.1f us (median of 10); the %.1f MiB image is on disk after %.2f ms (%.2f GB/s)%s\n", ret[5],
              double(st.bytes_total) / (1 << 20), done[5], double(st.bytes_total) / (done[5] * 1e-3) / 1e9, ok ? "" : "  [A FLUSH FAILED]");

  std::vector<char> copy(st.bytes_total, 1);
  std::vector<uint64_t> lat[3];
  std::atomic<int> phase{-1};
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    PinTo(1);
    for (auto &l : lat) l.reserve(4000000);
    while (!stop.load(std::memory_order_relaxed)) {
      int p = phase.load(std::memory_order_relaxed);
      for (int i = 0; i < 100; i++) {
        uint64_t a = __rdtsc();
        Latte::Fast::Start("FlushStall");
        Latte::Fast::Stop(nullptr);
        uint64_t d = __rdtsc() - a;
        if (p >= 0) lat[p].push_back(d);
      }
    }
  });
  PinTo(0);
  for (int round = 0; round < 10; round++) {
    phase = 0;
    usleep(5000);
    phase = 1;
    double r, d;
    flush_once(&r, &d);
    phase = 2;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    size_t off = 0;
    while (off < copy.size()) {
      ssize_t w = write(fd, copy.data() + off, copy.size() - off);
      if (w <= 0) break;
      off += size_t(w);
    }
    close(fd);
    phase = -1;
    usleep(1000);
  }
  stop = true;
  producer.join();
  unlink(path);
  Stall s[3];
  for (int k = 0; k < 3; k++) s[k] = Summarize(lat[k]);
  std::printf("producer Start+Stop latency in cycles, 10 interleaved rounds (p50 / p99 / p99.9 / max):\n");
  std::printf("  (a) nothing happens            %6.0f %7.0f %8.0f %9.0f\n", s[0].p50, s[0].p99, s[0].p999, s[0].max);
  std::printf("  (b) io_uring flush in flight   %6.0f %7.0f %8.0f %9.0f\n", s[1].p50, s[1].p99, s[1].p999, s[1].max);
  std::printf("  (c) plain write() of the bytes %6.0f %7.0f %8.0f %9.0f\n", s[2].p50, s[2].p99, s[2].p999, s[2].max);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc == 6 && !std::strcmp(argv[1], "--copy")) return CopyChild(argv[2], argv[3], std::atof(argv[4]));
  if (argc == 6 && !std::strcmp(argv[1], "--poll")) return PollChild(argv[2], argv[3], std::atof(argv[4]), argv[5]);
  bool report = true;
  const char *label = "liblatte";
  const char *shared = nullptr;
  bool flush_only = false;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) ITER = std::max(1000, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--quick")) ITER = 20000;
    else if (!std::strcmp(argv[i], "--no-report")) report = false;
    else if (!std::strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
    else if (!std::strcmp(argv[i], "--shared") && i + 1 < argc) shared = argv[++i];
    else if (!std::strcmp(argv[i], "--flush-only")) flush_only = true;
  }
  if (shared) {
    latte_region_config cfg{};
    cfg.replace_stale = 1;  // a region left by a killed run of ours is replaced
    int rc = latte_init_shared_region_with(shared, &cfg);
    if (rc != 0) {
      std::fprintf(stderr, "speedtest: InitSharedRegion(%s): %s\n", shared, latte_strerror(rc));
      return 1;
    }
  }
  if (flush_only) {
    FlushBench();
    return 0;
  }
  Pin();
  FindSetIds();
  std::printf("\n== latte speedtest (%s, %s region): %d iterations x %d operations, cycles per operation ==\n", label,
              shared ? "shared" : "private", ITER, BATCH);

  std::vector<Row> rows = MeasureAll({
      {"(empty loop)", Chunk<op_empty>},
      {"__rdtsc", Chunk<op_rdtsc>},
      {"__rdtscp", Chunk<op_rdtscp>},
      {"_LFENCE", Chunk<op_lfence>},
      {"Fast Start+Stop", Chunk<op_fast>},
      {"Mid Start+Stop", Chunk<op_mid>},
      {"Hard Start+Stop", Chunk<op_hard>},
      {"LATTE_PULSE", Chunk<op_pulse>},
      {"Fast x2, IDs in one set", Chunk<op_fast_set>},
      {"(reference) minimal engine", Chunk<op_reference>},
      {"C ABI Fast start+stop", Chunk<op_abi_fast>},
      {"C ABI Mid start+stop", Chunk<op_abi_mid>},
      {"C ABI Hard start+stop", Chunk<op_abi_hard>},
      {"C ABI pulse", Chunk<op_abi_pulse>},
      {"std::chrono::now() pair", Chunk<op_chrono>},
  });
  g_sink = reference::Checksum();
  Row base = rows.front();
  rows.erase(rows.begin());
  for (auto &r : rows) r.cost = r.median - base.median;

  std::printf("%-28s %14s %9s %9s %9s %9s %9s\n", "operation", "Total", "Cost", "Avg", "Min", "Max", "StdDev");
  PrintRow(base);
  for (auto &r : rows) PrintRow(r);

  auto find = [&](const char *n) -> const Row & {
    for (auto &r : rows)
      if (r.name == n) return r;
    return base;
  };
  // Bookkeeping is estimated round by round: in each interleaved round,
  // row - empty loop - the row's timer instructions (all measured in that
  // round), then the median over rounds with its quartiles. Pairing within
  // a round cancels the machine's drift between rounds, which otherwise
  // dominates a difference of a few cycles between rows ~100 cycles long.
  struct Book {
    double median, q1, q3;
  };
  auto bookkeeping = [&](const char *row, double n_tsc, double n_tscp, double n_lf) {
    const Row &r = find(row), &t = find("__rdtsc"), &tp = find("__rdtscp"), &l = find("_LFENCE");
    std::vector<double> b;
    for (size_t i = 0; i < r.round_medians.size(); i++) {
      double e = base.round_medians[i];
      b.push_back(r.round_medians[i] - e - n_tsc * (t.round_medians[i] - e) - n_tscp * (tp.round_medians[i] - e) -
                  n_lf * (l.round_medians[i] - e));
    }
    std::sort(b.begin(), b.end());
    size_t n = b.size();
    return Book{b[n / 2], b[n / 4], b[(3 * n) / 4]};
  };
  struct Budget {
    const char *row;
    double n_tsc, n_tscp, n_lf;
    double budget;
  } budgets[] = {
      {"Fast Start+Stop", 2, 0, 0, 10},       {"Mid Start+Stop", 0, 2, 0, 19},         {"Hard Start+Stop", 0, 2, 2, 22},
      {"LATTE_PULSE", 1, 0, 0, 4},            {"(reference) minimal engine", 2, 0, 0, 10}, {"C ABI Fast start+stop", 2, 0, 0, 10},
      {"C ABI Mid start+stop", 0, 2, 0, 19},  {"C ABI Hard start+stop", 0, 2, 2, 22},  {"C ABI pulse", 1, 0, 0, 4},
  };
  std::printf("\nbookkeeping (cost minus the timer instructions it executes; median over %zu paired rounds [quartiles]),\n"
              "against the original engine's budget:\n",
              base.round_medians.size());
  int fails = 0;
  for (auto &b : budgets) {
    Book k = bookkeeping(b.row, b.n_tsc, b.n_tscp, b.n_lf);
    bool ok = k.median <= b.budget;
    bool is_abi = std::strncmp(b.row, "C ABI", 5) == 0, is_reference = b.row[0] == '(';
    if (!ok && !is_abi && !is_reference) fails++;
    std::printf("  %-26s %6.2f cycles [%6.2f %6.2f]  (budget %4.0f)  %s\n", b.row, k.median, k.q1, k.q3, b.budget,
                ok ? "PASS"
                   : is_abi     ? "over (informational: plain calls, see README)"
                   : is_reference ? "over (informational: not latte; the machine is busy)"
                                  : "FAIL");
  }
  {
    Book k = bookkeeping("Fast x2, IDs in one set", 4, 0, 0);
    std::printf("  %-26s %6.2f cycles [%6.2f %6.2f]  per Start+Stop (informational: two IDs that share a cache set)\n",
                "Fast, IDs in one set", k.median / 2, k.q1 / 2, k.q3 / 2);
  }
  std::printf("verdict (%s): %s\n", label, fails ? "FAIL: the inline path is over budget" : "PASS: the inline path is within the original engine's budget");

  if (shared) {
    Extraction(shared);
    latte_shm_unlink(shared);
  }
  if (report) {
    std::printf("\n");
    Latte::DumpToStream(std::cout, Latte::Parameter::Cycle, Latte::Parameter::Calibrated);
  }
  return 0;
}
