// Every row of the original Latte:: API through cpp_compat/Latte.hpp.
// Built against liblatte.so, liblatte.a, with -DLATTE_DISABLE (no liblatte),
// under ASan+UBSan and under TSan. tests/cpp/api_other_tu.cpp is linked in
// too: the header in two translation units must not break the link.
#include "Latte.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "can_move.h"
#include "check.h"

#ifdef LATTE_DISABLE
constexpr bool ON = false;
#else
constexpr bool ON = true;
#endif
static size_t On(size_t n) { return ON ? n : 0; }

int OtherTranslationUnit(int);  // api_other_tu.cpp
void OtherTuLiteral(int);       // api_other_tu.cpp
const char *OtherTuLiteralPtr();  // api_other_tu.cpp

static void ExactCounts() {
  for (int i = 0; i < 1000; i++) {
    Latte::Fast::Start("cpp.fast");
    Latte::Fast::Stop("cpp.fast");
  }
  for (int i = 0; i < 500; i++) {
    Latte::Mid::Start("cpp.mid");
    Latte::Mid::Stop(nullptr);
  }
  for (int i = 0; i < 250; i++) {
    Latte::Hard::Start("cpp.hard");
    Latte::Hard::Stop(nullptr);
  }
  CHECK_EQ_U(Latte::Snapshot("cpp.fast").size(), On(1000));
  CHECK_EQ_U(Latte::Snapshot("cpp.mid").size(), On(500));
  CHECK_EQ_U(Latte::Snapshot("cpp.hard").size(), On(250));
  CHECK(Latte::Snapshot("cpp.unknown").empty());
  // Equal text at another address is the same component.
  std::string copy = "cpp.fast";
  Latte::Fast::Start(copy.c_str());
  Latte::Fast::Stop(nullptr);
  CHECK_EQ_U(Latte::Snapshot("cpp.fast").size(), On(1001));
  // Range-for and indexing work on the result.
  uint64_t sum = 0;
  for (auto c : Latte::Snapshot("cpp.mid")) sum += c;
  CHECK(!ON || sum > 0);
}

static void NestingAndLimits() {
  // Stop ignores its argument and closes the innermost span, any mode mix.
  Latte::Hard::Start("cpp.outer");
  Latte::Fast::Start("cpp.inner");
  for (volatile int i = 0; i < 1000; i = i + 1) {
  }
  Latte::Mid::Stop("cpp.outer");  // closes cpp.inner
  Latte::Fast::Stop(nullptr);     // closes cpp.outer
  auto inner = Latte::Snapshot("cpp.inner"), outer = Latte::Snapshot("cpp.outer");
  CHECK_EQ_U(inner.size(), On(1));
  CHECK_EQ_U(outer.size(), On(1));
  if (ON) CHECK(outer[0] >= inner[0]);
  // 64 open spans at most; the rest of the Starts are ignored.
  for (int i = 0; i < 70; i++) Latte::Fast::Start("cpp.deep");
  for (int i = 0; i < 70; i++) Latte::Fast::Stop(nullptr);
  CHECK_EQ_U(Latte::Snapshot("cpp.deep").size(), On(Latte::MAX_ACTIVE_SLOTS));
  // Orphan stops: no sample, no crash.
  Latte::Fast::Stop(nullptr);
  Latte::Hard::Stop(nullptr);
  CHECK_EQ_U(Latte::Snapshot("cpp.deep").size(), On(64));
  CHECK(Latte::MAX_SAMPLES == 65536 && Latte::BUFFER_MASK == 65535 && Latte::BUFFER_PWR == 16);
}

static void Pulse() {
  for (int i = 0; i < 100; i++) LATTE_PULSE("cpp.pulse");  // site 1: 99 samples
  for (int i = 0; i < 10; i++) {
    LATTE_PULSE("cpp.pulse");  // site 2: primes separately, 9 samples
  }
  CHECK_EQ_U(Latte::Snapshot("cpp.pulse").size(), On(99 + 9));
  // Per thread: another thread primes its own state for the same site.
  std::thread th([] {
    for (int i = 0; i < 5; i++) LATTE_PULSE("cpp.pulse.t");
  });
  th.join();
  for (int i = 0; i < 5; i++) LATTE_PULSE("cpp.pulse.t");
  CHECK_EQ_U(Latte::Snapshot("cpp.pulse.t").size(), On(4 + 4));
}

static int EarlyReturn(int x) {
  LATTE_RAII();
  if (x > 0) return x;
  return -x;
}

static void Throws() {
  LATTE_RAII(Hard);
  throw std::runtime_error("boom");
}

static void TwoGuards() {
  LATTE_RAII(Mid);
  LATTE_RAII(Fast);
}

static void Raii() {
  EarlyReturn(1);
  EarlyReturn(-1);
  CHECK_EQ_U(Latte::Snapshot("EarlyReturn").size(), On(2));
  try {
    Throws();
  } catch (const std::exception &) {
  }
  CHECK_EQ_U(Latte::Snapshot("Throws").size(), On(1));
  TwoGuards();
  CHECK_EQ_U(Latte::Snapshot("TwoGuards").size(), On(2));
  auto lambda = [] { LATTE_RAII(); };
  lambda();
  CHECK_EQ_U(Latte::Snapshot("operator()").size(), On(1));
  CHECK_EQ_U(OtherTranslationUnit(3), 4u);
  CHECK_EQ_U(Latte::Snapshot("OtherTranslationUnit").size(), On(1));
}

static int g_value = 7;
static int &Ref() { return g_value; }
static int Twice(int v) { return 2 * v; }
static int g_void_calls;
static void VoidCall() { g_void_calls++; }

static void Field() {
  int v = LATTE_FIELD(Twice(21));
  CHECK_EQ_U(v, 42u);
  int &r = LATTE_FIELD(Ref());
  r = 9;
  CHECK_EQ_U(g_value, 9u);
  CHECK(&LATTE_FIELD(Ref()) == &g_value);
  LATTE_FIELD(VoidCall());
  CHECK_EQ_U(g_void_calls, 1u);
  auto &&lref = LATTE_FIELD(Ref());
  auto &&prv = LATTE_FIELD(Twice(1));
  static_assert(std::is_same_v<decltype(lref), int &>, "an lvalue comes back as a reference");
  static_assert(std::is_same_v<decltype(prv), int &&>, "a prvalue comes back as a value");
  CHECK(&lref == &g_value && prv == 2);
  CHECK_EQ_U(Latte::Snapshot("Twice(21)").size(), On(1));
  CHECK_EQ_U(Latte::Snapshot("Twice(1)").size(), On(1));
  CHECK_EQ_U(Latte::Snapshot("Ref()").size(), On(3));
  CHECK_EQ_U(Latte::Snapshot("VoidCall()").size(), On(1));
  // An exception out of the timed expression still closes its span.
  std::map<int, int> prices;
  for (int i = 0; i < 3; i++) {
    try {
      (void)LATTE_FIELD(prices.at(i));
    } catch (const std::out_of_range &) {
    }
  }
  CHECK_EQ_U(Latte::GetThreadStorage()->stack_ptr, 0u);
  CHECK_EQ_U(Latte::Snapshot("prices.at(i)").size(), On(3));
}

static void Formatting() {
  if (ON) {
    CHECK(Latte::FormatTime(512) == "512.00 ns");
    CHECK(Latte::FormatTime(1880) == "1.88 us");
    CHECK(Latte::FormatTime(3.2e6) == "3.20 ms");
    CHECK(Latte::FormatTime(1.5e9) == "1.50 s");
    CHECK(Latte::FormatTime(120e9) == "2.00 min");
  } else {
    CHECK(Latte::FormatTime(512).empty());
  }
}

static void Clean() {
  // 4 full buckets (maxima 10, 20, 30, 40) and a last bucket of 499 (skipped)
  // holding 1000: cutoff 40 + 3 * (40 - 20) = 100, one outlier.
  std::vector<double> v;
  for (double m : {10.0, 20.0, 30.0, 40.0}) {
    v.insert(v.end(), 999, 1.0);
    v.push_back(m);
  }
  v.insert(v.end(), 498, 2.0);
  v.push_back(1000.0);
  auto r = Latte::DataClean(v);
  if (ON) {
    CHECK(r.cutoff == 100.0);
    CHECK_EQ_U(r.outlier, 1u);
    CHECK_EQ_U(r.bypass, 1u);  // the March 2026 header's name for it
    CHECK_EQ_U(r.values.size(), v.size() - 1);
    CHECK(std::is_sorted(r.values.begin(), r.values.end()));
    // IQR == 0: all maxima equal -> cutoff 1.5 * q3.
    std::vector<double> flat(5000, 5.0);
    flat[1234] = 8.0;  // sorted maxima [5, 5, 5, 5, 8]: q1 = max[1] = 5 = q3 = max[3]
    auto f = Latte::DataClean(flat);
    CHECK(f.cutoff == 7.5);
    CHECK_EQ_U(f.outlier, 1u);
    // Dropping everything keeps everything.
    std::vector<double> neg(600, -4.0);
    auto n = Latte::DataClean(neg);
    CHECK_EQ_U(n.values.size(), 600u);
    CHECK_EQ_U(n.outlier, 0u);
    CHECK_EQ_U(n.bypass, 0u);
  } else {
    CHECK(r.values.empty());
  }
}

static void Reports() {
  const char *titles[2][2] = {{"LATTE TELEMETRY [CYCLES][RAW]", "LATTE TELEMETRY [CYCLES][CAL]"},
                              {"LATTE TELEMETRY [TIME][RAW]", "LATTE TELEMETRY [TIME][CAL]"}};
  for (int u = 0; u < 2; u++)
    for (int d = 0; d < 2; d++) {
      std::ostringstream os;
      Latte::DumpToStream(os, u ? Latte::Parameter::Time : Latte::Parameter::Cycle,
                          d ? Latte::Parameter::Calibrated : Latte::Parameter::Raw);
      std::string s = os.str();
      if (!ON) {
        CHECK(s.empty());
        continue;
      }
      CHECK(s.find(titles[u][d]) != std::string::npos);
      CHECK(s.find("COMPONENT") != std::string::npos && s.find("OUTLIER") != std::string::npos);
      CHECK(s.find("cpp.fast") != std::string::npos);
      CHECK(s.find("latte.calibrate") == std::string::npos);
      CHECK((s.find("SELF-OFFSET H[Start] x W[Stop]") != std::string::npos) == (d == 1));
      if (u == 1) CHECK(s.find(" ns\033") != std::string::npos || s.find(" us\033") != std::string::npos);
    }
  double f = 0;
  LATTE_FREQ(f);
  CHECK(ON ? (f > 0.1 && f < 10) : f == 0.0);
  LATTE_CALIBRATE();
  LATTE_CALIBRATE();
}

static void Trace(const char *dir) {
  Latte::Fast::Start("odd \"quoted\" \\ back\tslash\x01");
  Latte::Fast::Stop(nullptr);
  std::string path = std::string(dir) + "/api_trace.json";
  std::remove(path.c_str());
  Latte::DumpToJson(path);
  std::ifstream in(path);
  CHECK(in.good() == ON);
  if (ON) {
    std::string cmd = "python3 tests/cpp/check_trace.py " + path + " " + std::to_string(getpid());
    CHECK(std::system(cmd.c_str()) == 0);
  }
  // A path in a missing directory: no file, no crash, no exception.
  Latte::DumpToJson(std::string(dir) + "/no/such/dir/trace.json");
  std::ifstream none(std::string(dir) + "/no/such/dir/trace.json");
  CHECK(!none.good());
}

static void NewEntryPoints() {
  CHECK(Latte::InternID("cpp.fast") == (ON ? latte_intern_id("cpp.fast") : LATTE_INVALID_ID));
  if (ON) {
    CHECK(Latte::InternID("cpp.fast") != LATTE_INVALID_ID);
    // Recording began: capacities other than the region's are refused...
    std::string name = "/latte-cpp-moved-" + std::to_string(getpid());
    latte_region_config cfg{};
    cfg.slot_capacity = 4;
    cfg.samples_per_slot = 1024;
    CHECK(Latte::InitSharedRegion(name, cfg) == -EBUSY);
    // ... and without them the region moves into a shared one, samples and all.
    size_t before = Latte::Snapshot("cpp.fast").size();
    if (can_move()) {
      CHECK(Latte::InitSharedRegion(name) == 0);
      CHECK(Latte::Snapshot("cpp.fast").size() == before);
      CHECK(Latte::Reader::OpenShared(name).ok());
      CHECK(latte_region_unlink(name.c_str()) == 0);
    } else {
      // A kernel that cannot pause writers: refused, nothing changed.
      CHECK(Latte::InitSharedRegion(name) == -EBUSY);
      CHECK(Latte::Snapshot("cpp.fast").size() == before);
    }
    // The libraries `make lib` builds have the io_uring flush; a build
    // without it says so.
    if (latte_flush_supported()) {
      CHECK(Latte::FlushAsync(-1) == -EBADF);
      CHECK(Latte::PollFlush() == LATTE_FLUSH_IDLE);
    } else {
      CHECK(Latte::FlushAsync(1) == LATTE_ERR_NOT_SUPPORTED);
      CHECK(Latte::PollFlush() == LATTE_ERR_NOT_SUPPORTED);
    }
    auto r = Latte::Reader::OpenShared("/latte-no-such-region");
    CHECK(!r.ok() && r.error() == -ENOENT);
  } else {
    CHECK(Latte::InitSharedRegion("/x") == 0);
    latte_region_config cfg{};
    cfg.slot_capacity = 4;
    CHECK(Latte::InitSharedRegion("/x", cfg) == 0);
    CHECK(Latte::FlushAsync(1) == 0 && Latte::PollFlush() == 0);
    CHECK(!Latte::Reader::OpenShared("/x").ok());
  }
}

// Before anything calibrates: the Manager's figures are the original's defaults.
static void ManagerBeforeCalibration() {
  Latte::Manager &m = Latte::Manager::Get();
  CHECK(&m == &Latte::Manager::Get());
  CHECK(m.cycles_per_ns == 1.0);
  for (uint8_t k = 0; k < 12; k++) CHECK_EQ_U(m.CalibrationOffset(k), 0u);
  CHECK(ON ? (m.epoch != 0 && m.epoch <= __rdtsc()) : m.epoch == 0);
}

static void ThreadStorage() {
  Latte::ThreadStorage *ts = Latte::GetThreadStorage();
  CHECK(ts != nullptr);
  CHECK_EQ_U(Latte::GetThreadStorage()->tid, (uint64_t)syscall(SYS_gettid));
  CHECK_EQ_U(Latte::GetThreadStorage()->stack_ptr, 0u);
  Latte::Fast::Start("cpp.ts.outer");
  CHECK_EQ_U(Latte::GetThreadStorage()->stack_ptr, On(1));
  Latte::Hard::Start("cpp.ts.inner");
  CHECK_EQ_U(Latte::GetThreadStorage()->stack_ptr, On(2));
  Latte::Hard::Stop(nullptr);
  Latte::Fast::Stop(nullptr);
  CHECK_EQ_U(Latte::GetThreadStorage()->stack_ptr, 0u);
  uint64_t other = 0;
  std::thread th([&] { other = Latte::GetThreadStorage()->tid; });
  th.join();
  CHECK(other != 0 && other != Latte::GetThreadStorage()->tid);
}

// The newest upstream header's types and calls, as programs use them.
static void NewestHeader() {
  // SnapshotResult keeps what callers did with std::vector<Cycles>.
  for (int i = 0; i < 10; i++) {
    Latte::Fast::Start("cpp.snap");
    Latte::Fast::Stop(nullptr);
  }
  Latte::SnapshotResult r = Latte::Snapshot("cpp.snap");
  CHECK(r.empty() == !ON);
  CHECK_EQ_U(r.size(), On(10));
  size_t n = 0;
  for (Latte::Cycles c : r) n += c > 0 || c == 0;
  CHECK_EQ_U(n, On(10));
  CHECK_EQ_U(size_t(r.end() - r.begin()), On(10));
  std::vector<Latte::Cycles> copy = Latte::Snapshot("cpp.snap");
  const std::vector<Latte::Cycles> &view = r;
  CHECK_EQ_U(copy.size(), On(10));
  CHECK_EQ_U(view.size(), r.size());
  if (ON) CHECK(r[0] == copy[0] && r[9] == copy.back());
  std::vector<double> ns = r.to_ns();  // calibrates first
  CHECK_EQ_U(ns.size(), On(10));
  Latte::Manager &m = Latte::Manager::Get();
  if (ON) {
    CHECK(m.cycles_per_ns != 1.0 && m.cycles_per_ns == latte_tsc_cycles_per_ns());
    CHECK(m.cycles_per_ns > 0.1 && m.cycles_per_ns < 10);
    CHECK(std::fabs(ns[3] - double(r[3]) / m.cycles_per_ns) < 1e-9);
    for (uint8_t k = 0; k < Latte::Internal::CALIB_KEY_COUNT; k++) CHECK(m.CalibrationOffset(k) > 0);
    CHECK_EQ_U(m.CalibrationOffset(Latte::Internal::CalibKey(1, 2)), m.CalibrationOffset(5));
    CHECK_EQ_U(m.CalibrationOffset(10), 0u);
  } else {
    CHECK(ns.empty());
  }
  std::vector<double> t = Latte::ToNs(copy);
  CHECK_EQ_U(t.size(), On(10));
  if (ON) CHECK(t == ns);
  CHECK(m.ExtractRaw("cpp.snap") == copy);
  // LATTE_CALIBRATE is EnsureCalibrated: once. Calibrate() keeps the
  // process's figures and refreshes the Manager's copy.
  double before = m.cycles_per_ns;
  LATTE_CALIBRATE();
  CHECK(m.cycles_per_ns == before);
  m.Calibrate();
  CHECK(m.cycles_per_ns == before);
  CHECK(ON ? m.CalibrationOffset(0) > 0 : m.CalibrationOffset(0) == 0);

  // ExtractSamplesGlobal, by literal: this file's, __func__, another
  // translation unit's copy of a literal.
  OtherTuLiteral(3);
  for (int i = 0; i < 4; i++) LATTE_PULSE("cpp.global.pulse");
  Latte::Mid::Start("cpp.global.outer");
  Latte::Fast::Start("cpp.global.inner");
  Latte::Fast::Stop(nullptr);
  Latte::Mid::Stop(nullptr);
  // The first pointer seen is the key: a name first recorded through a
  // copy is found under that copy, not under the literal.
  std::string keyed = "cpp.global.keyed";
  Latte::Fast::Start(keyed.c_str());
  Latte::Fast::Stop(nullptr);
  Latte::Fast::Start("cpp.global.keyed");
  Latte::Fast::Stop(nullptr);
  std::map<Latte::ID, std::vector<Latte::Sample>> g = m.ExtractSamplesGlobal();
  CHECK_EQ_U(g.size() > 0, ON);
  if (ON) {
    CHECK_EQ_U(g.at("cpp.snap").size(), 10u);
    CHECK_EQ_U(g.at("cpp.fast").size(), 1001u);  // both addresses of ExactCounts
    CHECK_EQ_U(g["EarlyReturn"].size(), 2u);
    // The linker merges equal literals across translation units, except
    // under ASan (which pads each literal): then only the recording unit's
    // own address finds them, as with the original's address keys.
    const char *here = "cpp.other.literal";
#ifndef __SANITIZE_ADDRESS__
    CHECK(here == OtherTuLiteralPtr());
#endif
    CHECK_EQ_U(g.at(here == OtherTuLiteralPtr() ? here : OtherTuLiteralPtr()).size(), 3u);
    CHECK_EQ_U(g.count("cpp.global.keyed"), 0u);
    CHECK_EQ_U(g.at(keyed.c_str()).size(), 2u);
    for (auto &kv : g) CHECK(std::strcmp(kv.first, "latte.calibrate") != 0);
    // A pulse sample starts at the previous pulse: consecutive samples chain.
    const std::vector<Latte::Sample> &p = g.at("cpp.global.pulse");
    CHECK_EQ_U(p.size(), 3u);
    for (size_t i = 1; i < p.size(); i++) CHECK_EQ_U(p[i].start, p[i - 1].start + p[i - 1].duration);
    // Depth: spans open around the sample.
    CHECK_EQ_U(g.at("cpp.global.outer").back().depth, 0u);
    CHECK_EQ_U(g.at("cpp.global.inner").back().depth, 1u);
    CHECK(g.at("cpp.global.inner").back().start >= g.at("cpp.global.outer").back().start);
    // Several threads' samples of one ID are concatenated.
    std::thread th([] {
      for (int i = 0; i < 5; i++) {
        Latte::Fast::Start("cpp.snap");
        Latte::Fast::Stop(nullptr);
      }
    });
    th.join();
    CHECK_EQ_U(m.ExtractSamplesGlobal().at("cpp.snap").size(), 15u);
  }
  // A wrapped ring contributes in ring order: the newest samples, written
  // over the ring's start, come first; .back() of an unwrapped ring is the newest.
  const size_t extra = 10;
  for (size_t i = 0; i < Latte::MAX_SAMPLES + extra; i++) {
    Latte::Fast::Start("cpp.global.wrap");
    Latte::Fast::Stop(nullptr);
  }
  if (ON) {
    const std::vector<Latte::Sample> w = m.ExtractSamplesGlobal().at("cpp.global.wrap");
    CHECK_EQ_U(w.size(), Latte::MAX_SAMPLES);
    bool ordered = true;
    for (size_t i = 1; i < w.size(); i++)
      if (i != extra) ordered = ordered && w[i].start > w[i - 1].start;
    CHECK(ordered);
    CHECK(w[extra - 1].start > w.back().start);  // the newest sits before the oldest kept
    CHECK(w[extra].start < w[extra - 1].start);
    const std::vector<Latte::Sample> &s = g.at("cpp.snap");
    CHECK(s.back().start > s.front().start);
  }
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "build";
  ManagerBeforeCalibration();
  ThreadStorage();
  ExactCounts();
  NestingAndLimits();
  Pulse();
  Raii();
  Field();
  Formatting();
  Clean();
  Reports();
  Trace(dir);
  NewEntryPoints();
  NewestHeader();
  return check_summary("cpp api");
}
