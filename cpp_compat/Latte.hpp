// Latte.hpp: the Latte:: C++ API over liblatte.
//
// Existing programs compile unchanged against this header and link liblatte:
//   g++ -O3 -march=native -std=c++17 -I cpp_compat -I include app.cpp
//       -L target/release -llatte -Wl,-rpath,<dir>/target/release -lpthread
// or statically with target/release/liblatte.a (see the README).
//
// This header only forwards: recording goes through the inline fast path of
// latte_inline.h (the same effect as latte_start/latte_stop, over the
// per-thread state Rust owns); statistics, the outlier rule, calibration
// figures, the report text and the trace JSON all come from the library.
// With LATTE_DISABLE defined before the include, everything compiles to
// no-ops and the program links without liblatte.
#ifndef LATTE_HPP_COMPAT
#define LATTE_HPP_COMPAT

#include <x86intrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

// Every standard header the original brings in (programs lean on them),
// in both builds.
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <ios>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <queue>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "latte_inline.h"

namespace Latte {

using ID = const char *;
using Cycles = uint64_t;

enum class Mode : uint8_t { Fast = 0, Mid = 1, Hard = 2 };

constexpr size_t MAX_ACTIVE_SLOTS = LATTE_MAX_DEPTH;
constexpr size_t BUFFER_PWR = 16;
constexpr size_t MAX_SAMPLES = size_t(1) << BUFFER_PWR;
constexpr size_t BUFFER_MASK = MAX_SAMPLES - 1;
static_assert(MAX_SAMPLES == LATTE_DEFAULT_SAMPLES, "ring capacity mismatch");

namespace Parameter {
enum Unit { Cycle, Time };
enum Data { Raw, Calibrated };
}  // namespace Parameter

namespace Internal {
struct CleanResult {
  std::vector<double> values;  // kept, sorted
  size_t outlier = 0;
  // The same count under the name the March 2026 header gives it, so that
  // code written against either header compiles.
  size_t bypass = 0;
  double cutoff = 0.0;
};

// Keys of Manager::CalibrationOffset: start mode x 3 + stop mode, 9 = pulse.
constexpr uint8_t CALIB_KEY_UNSET = 0xFF;
constexpr uint8_t CALIB_KEY_MIXED = 0xFE;
constexpr uint8_t CALIB_KEY_PULSE = LATTE_MODE_PAIRS;
constexpr size_t CALIB_KEY_COUNT = LATTE_MODE_PAIRS + 1;
inline uint8_t CalibKey(uint8_t start_mode, uint8_t stop_mode) {
  return (start_mode < 3 && stop_mode < 3) ? static_cast<uint8_t>(start_mode * 3 + stop_mode) : CALIB_KEY_UNSET;
}

template <latte_mode M>
LATTE_ALWAYS_INLINE inline void StartIn(ID id) { latte_start_inline(id, M); }
template <latte_mode M>
LATTE_ALWAYS_INLINE inline void StopIn(ID id) { (void)latte_stop_inline(id, M); }
}  // namespace Internal

namespace Fast {
LATTE_ALWAYS_INLINE inline void Start(ID id) { Internal::StartIn<LATTE_MODE_FAST>(id); }
LATTE_ALWAYS_INLINE inline void Stop(ID id) { Internal::StopIn<LATTE_MODE_FAST>(id); }
}  // namespace Fast
namespace Mid {
LATTE_ALWAYS_INLINE inline void Start(ID id) { Internal::StartIn<LATTE_MODE_MID>(id); }
LATTE_ALWAYS_INLINE inline void Stop(ID id) { Internal::StopIn<LATTE_MODE_MID>(id); }
}  // namespace Mid
namespace Hard {
LATTE_ALWAYS_INLINE inline void Start(ID id) { Internal::StartIn<LATTE_MODE_HARD>(id); }
LATTE_ALWAYS_INLINE inline void Stop(ID id) { Internal::StopIn<LATTE_MODE_HARD>(id); }
}  // namespace Hard

namespace Internal {

// Runs the calibration loops on the path callers use (this header's inline
// Start/Stop and pulse); the library computes and publishes the figures.
template <latte_mode S, latte_mode E>
inline void CalibrationLoop(ID id, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    latte_start_inline(id, S);
    (void)latte_stop_inline(id, E);
  }
}

inline void Calibrate() {
  if (!latte_calibration_begin()) return;
  ID id = latte_calibration_id();
  const uint32_t n = latte_calibration_iterations();
  CalibrationLoop<LATTE_MODE_FAST, LATTE_MODE_FAST>(id, n);
  CalibrationLoop<LATTE_MODE_FAST, LATTE_MODE_MID>(id, n);
  CalibrationLoop<LATTE_MODE_FAST, LATTE_MODE_HARD>(id, n);
  CalibrationLoop<LATTE_MODE_MID, LATTE_MODE_FAST>(id, n);
  CalibrationLoop<LATTE_MODE_MID, LATTE_MODE_MID>(id, n);
  CalibrationLoop<LATTE_MODE_MID, LATTE_MODE_HARD>(id, n);
  CalibrationLoop<LATTE_MODE_HARD, LATTE_MODE_FAST>(id, n);
  CalibrationLoop<LATTE_MODE_HARD, LATTE_MODE_MID>(id, n);
  CalibrationLoop<LATTE_MODE_HARD, LATTE_MODE_HARD>(id, n);
  static thread_local latte_pulse_site site;
  site.last_tsc = 0;  // unprimed: the first call of the loop primes it
  for (uint32_t i = 0; i <= n; i++) latte_pulse_inline(&site, id);
  (void)latte_calibration_end();
}

// Scope guard of LATTE_RAII.
template <latte_mode M>
class Guard {
 public:
  LATTE_ALWAYS_INLINE explicit Guard(ID id) { latte_start_inline(id, M); }
  LATTE_ALWAYS_INLINE ~Guard() { (void)latte_stop_inline(nullptr, M); }
  Guard(const Guard &) = delete;
  Guard &operator=(const Guard &) = delete;
};
using RaiiMode_ = Guard<LATTE_MODE_FAST>;
using RaiiMode_Fast = Guard<LATTE_MODE_FAST>;
using RaiiMode_Mid = Guard<LATTE_MODE_MID>;
using RaiiMode_Hard = Guard<LATTE_MODE_HARD>;

// LATTE_FIELD: times f() in Fast mode under `id`, returning its result with
// its value category (a reference stays a reference; void works). The span
// is closed by a guard, so an exception thrown by f() closes it too.
template <class F>
inline decltype(auto) Field(ID id, F &&f) {
  Guard<LATTE_MODE_FAST> g(id);
  return f();
}

}  // namespace Internal

// One sample as ExtractSamplesGlobal gives it: duration, raw TSC at Start
// (for a pulse, the previous pulse's TSC), spans open around it.
struct Sample {
  Cycles duration;
  Cycles start;
  uint8_t depth;
};

// The calling thread's view as the original kept it: spans open now and
// the OS thread id. Refreshed by each GetThreadStorage() call.
struct ThreadStorage {
  size_t stack_ptr = 0;
  uint64_t tid = 0;
};

inline ThreadStorage *GetThreadStorage() {
  static thread_local ThreadStorage ts;
  if (ts.tid == 0) ts.tid = static_cast<uint64_t>(::syscall(SYS_gettid));
#ifndef LATTE_DISABLE
  if (latte__state.attached) {
    ts.stack_ptr = latte__state.depth;
  } else {
    // Spans were opened through the C calls (another state), or none yet.
    latte_thread_counters c{};
    ts.stack_ptr = latte_thread_get_counters(&c) == 0 ? c.depth : 0;
  }
#endif
  return &ts;
}

class Manager;
inline std::vector<double> ToNs(const std::vector<Cycles> &values);

// What Snapshot returns: the durations (a std::vector<Cycles>, so every use
// of the vector keeps working) with a conversion to nanoseconds.
#ifndef LATTE_DISABLE
class SnapshotResult : public std::vector<Cycles> {
 public:
  SnapshotResult() = default;
  explicit SnapshotResult(std::vector<Cycles> v) : std::vector<Cycles>(std::move(v)) {}
  // Each value / cycles per ns, in order; calibrates first if not yet done.
  std::vector<double> to_ns() const { return ToNs(*this); }
};
#else
struct SnapshotResult {
  bool empty() const { return true; }
  size_t size() const { return 0; }
  Cycles operator[](size_t) const { return 0; }
  const Cycles *begin() const { return nullptr; }
  const Cycles *end() const { return nullptr; }
  std::vector<double> to_ns() const { return {}; }
  operator const std::vector<Cycles> &() const {
    static const std::vector<Cycles> none;
    return none;
  }
};
#endif

namespace Internal {
// The durations of `id` on every thread (at most a ring's worth per thread,
// the newest: MAX_SAMPLES, or what LATTE_RING_SAMPLES sets); empty for an
// unknown ID.
inline std::vector<Cycles> Durations(ID id) {
  std::vector<Cycles> v;
  size_t n = MAX_SAMPLES;  // one thread's ring: one call in the common case
  for (;;) {
    v.resize(n);
    size_t got = 0;
    int rc = latte_samples_snapshot(id, v.data(), v.size(), &got);
    if (rc == 0) {
      v.resize(got);
      return v;
    }
    if (rc != -ERANGE) {  // ERANGE: more threads recorded it
      v.clear();
      return v;
    }
    n = got + 1024;  // room for samples recorded meanwhile
  }
}
}  // namespace Internal

// The durations recorded for `id` on every thread (at most a ring's worth
// per thread, the newest); empty for an unknown ID.
inline SnapshotResult Snapshot(ID id) {
#ifndef LATTE_DISABLE
  return SnapshotResult(Internal::Durations(id));
#else
  (void)id;
  return SnapshotResult();
#endif
}

// "512.00 ns", "1.88 us", "3.20 ms", "1.50 s", "2.00 min".
inline std::string FormatTime(double ns) {
  char buf[64];
  int n = latte_time_format(ns, buf, sizeof buf);
  return n > 0 ? std::string(buf) : std::string();
}

// The outlier rule of the report (docs/design.md).
inline Internal::CleanResult DataClean(const std::vector<double> &values) {
  Internal::CleanResult r;
  r.values.resize(values.size());
  size_t kept = 0, outliers = 0;
  double cutoff = 0.0;
  int has = 0;
  if (latte_samples_clean(values.data(), values.size(), r.values.data(), &kept, &outliers, &cutoff, &has) != 0) kept = 0;
  r.values.resize(kept);
  r.outlier = outliers;
  r.bypass = outliers;
  r.cutoff = has ? cutoff : std::numeric_limits<double>::max();  // no cutoff: nothing is above it
  return r;
}

// The process-wide view the original kept: calibration figures, the
// start-up TSC, and extraction. Everything forwards to the library.
class Manager {
 public:
  // Cycles per ns: 1.0 until calibrated; refreshed by EnsureCalibrated,
  // Calibrate and every dump.
  double cycles_per_ns = 1.0;
  // TSC at start-up; trace times count from it.
  Cycles epoch = 0;

  static Manager &Get() {
    static Manager instance;
    return instance;
  }

  // Calibrates once; later calls do nothing.
  void EnsureCalibrated() {
    std::call_once(calibrate_once_, [this] { Calibrate(); });
  }

  // Calibrates (the library measures once per process) and refreshes
  // cycles_per_ns.
  void Calibrate() {
    Internal::Calibrate();
    calibrated_.store(true, std::memory_order_release);
    Refresh();
  }

  // The self-offset of a (start, stop) mode pair (key = start x 3 + stop,
  // 9 = pulse), in cycles; 0 when unknown or before calibration.
  Cycles CalibrationOffset(uint8_t key) const {
    if (key >= Internal::CALIB_KEY_COUNT) return 0;
    double pairs[LATTE_MODE_PAIRS] = {0}, pulse = 0;
    if (latte_calibration_get_overheads(pairs, &pulse) != 0) return 0;
    double v = key == Internal::CALIB_KEY_PULSE ? pulse : pairs[key];
    return v > 0 ? static_cast<Cycles>(std::llround(v)) : 0;
  }

  // The durations of `id` (= Snapshot's).
  std::vector<Cycles> ExtractRaw(ID id) { return Internal::Durations(id); }

  // Every kept sample of every thread, per ID: a ring contributes in its
  // slot order, several threads' samples of an ID are concatenated,
  // calibration never appears. Keys are the first pointer the program
  // recorded each name through, so literal lookups find their samples.
  std::map<ID, std::vector<Sample>> ExtractSamplesGlobal() {
    std::map<ID, std::vector<Sample>> out;
    std::vector<latte_sample_record> recs;
    size_t n = 0, missed = 0;
    // Two passes, whatever the threads record meanwhile: the count, then
    // as many as fit in it and a little more; what did not fit is counted
    // (ExtractMissed), never chased.
    int rc = latte_samples_extract(nullptr, 0, &n);
    if (rc != 0 && rc != -ERANGE) return out;
    recs.resize(n + n / 8 + 4096);
    rc = latte_samples_extract_some(recs.data(), recs.size(), &n, &missed);
    extract_missed_.store(missed, std::memory_order_relaxed);
    if (rc != 0) return out;
    recs.resize(n);
    std::map<uint32_t, ID> keys;
    std::map<uint32_t, bool> keyed;
    for (const latte_sample_record &r : recs) {
      auto k = keys.find(r.token);
      if (k == keys.end()) {
        ID key = latte_id_key(r.token);
        // No pointer recorded it: the NULL ID's samples (key nullptr, as
        // the original files them), or none to file.
        char name[sizeof "<null-id>"];
        bool null_id = key == nullptr && latte_id_name(r.token, name, sizeof name) == int(sizeof name - 1) && std::strcmp(name, "<null-id>") == 0;
        k = keys.emplace(r.token, key).first;
        keyed[r.token] = key != nullptr || null_id;
      }
      if (!keyed[r.token]) continue;
      out[k->second].push_back(Sample{r.duration, r.start_tsc, r.depth});
    }
    return out;
  }

  // Samples the last ExtractSamplesGlobal could not take (recorded while
  // it ran, past the room its single pass had); 0 when it took everything.
  size_t ExtractMissed() const { return extract_missed_.load(std::memory_order_relaxed); }

  Manager() : epoch(latte_tsc_epoch()) {}
  Manager(const Manager &) = delete;
  Manager &operator=(const Manager &) = delete;

  // After a dump: cycles per ns once calibrated, the start-up TSC.
  // Written only when they change (once, in practice), so that dumps on
  // several threads, and readers of the members, do not race.
  void Refresh() {
    if (calibrated_.load(std::memory_order_acquire)) {
      double f = latte_tsc_cycles_per_ns();
      if (f > 0 && f != cycles_per_ns) cycles_per_ns = f;  // 0: not measurable (or LATTE_DISABLE)
    }
    Cycles e = latte_tsc_epoch();
    if (e != epoch) epoch = e;
  }

 private:
  std::once_flag calibrate_once_;
  std::atomic<bool> calibrated_{false};
  std::atomic<size_t> extract_missed_{0};
};

// Each value / cycles per ns, in order; calibrates first if not yet done.
inline std::vector<double> ToNs(const std::vector<Cycles> &values) {
#ifndef LATTE_DISABLE
  Manager &m = Manager::Get();
  m.EnsureCalibrated();
  std::vector<double> out;
  out.reserve(values.size());
  for (Cycles c : values) out.push_back(static_cast<double>(c) / m.cycles_per_ns);
  return out;
#else
  (void)values;
  return {};
#endif
}

// Prints the report table; calibrates first when Time or Calibrated is asked.
inline void DumpToStream(std::ostream &os, Parameter::Unit unit = Parameter::Cycle,
                         Parameter::Data data = Parameter::Raw) {
  Manager &m = Manager::Get();
  if (unit == Parameter::Time || data == Parameter::Calibrated) m.EnsureCalibrated();
  // The original's bytes, gray borders included.
  char *s = latte_report_string_color(unit == Parameter::Time ? LATTE_UNIT_TIME : LATTE_UNIT_CYCLE,
                                      data == Parameter::Calibrated ? LATTE_DATA_CALIBRATED : LATTE_DATA_RAW);
  if (s) {
    os << s << std::flush;
    latte_string_free(s);
  }
  m.Refresh();
}

// Writes every kept sample as a Chrome trace JSON array (times in us from
// Manager::epoch); calibrates first. Nothing (and no exception) when the
// path cannot be opened.
inline void DumpToJson(const std::string &path) {
  Manager &m = Manager::Get();
  m.EnsureCalibrated();
  (void)latte_trace_write(path.c_str());
  m.Refresh();
}

// New entry points (see include/latte.h for their codes).
inline int InitSharedRegion(const char *shm_name) { return latte_init_shared_region(shm_name); }
inline int InitSharedRegion(const std::string &shm_name) { return InitSharedRegion(shm_name.c_str()); }
// With the region's capacities, permissions and what to do when the name is
// taken (latte_region_config: a zero field takes its default), e.g.
//   latte_region_config c{};
//   c.slot_capacity = 16;
//   c.samples_per_slot = 4096;
//   Latte::InitSharedRegion("/svc", c);
inline int InitSharedRegion(const char *shm_name, const latte_region_config &config) {
  return latte_init_shared_region_with(shm_name, &config);
}
inline int InitSharedRegion(const std::string &shm_name, const latte_region_config &config) {
  return InitSharedRegion(shm_name.c_str(), config);
}
inline uint32_t InternID(ID id) { return latte_intern_id(id); }
// Commits this thread's ring for `id` before a hot loop: see latte_thread_prefault.
inline int64_t Prefault(ID id) { return latte_thread_prefault(id); }
inline int FlushAsync(int fd, Parameter::Unit unit = Parameter::Time) {
  return latte_flush_async(fd, unit == Parameter::Time ? LATTE_UNIT_TIME : LATTE_UNIT_CYCLE);
}
inline int PollFlush() { return latte_poll_flush(); }

// Switch tracking (latte_sched_*): which samples the OS switched out, and
// where a slow operation's time went. SchedEnable turns it on for the
// process and opens the calling thread's perf event (0 or a negative errno:
// recording goes on either way); SchedSnap takes a point of the calling
// thread (no syscall once its event is open); SchedDiff splits the time
// between two of its points (LATTE_ERR_SCHED_LOST when the thread's ring
// overran: `out` then says only the wall time); SchedFormat prints a
// delta on one line ("" on error).
inline int SchedEnable() { return latte_sched_enable(); }
inline int SchedRelease() { return latte_sched_release(); }
inline int SchedStatus() { return latte_sched_status(); }
inline int SchedSnap(latte_sched_point &out) { return latte_sched_snap(&out); }
inline int SchedDiff(const latte_sched_point &before, const latte_sched_point &after, latte_sched_delta &out) {
  return latte_sched_diff(&before, &after, &out);
}
inline std::string SchedFormat(const latte_sched_delta &d) {
  size_t n = 0;
  if (latte_sched_format(&d, nullptr, 0, &n) != -ERANGE) return std::string();
  std::string s(n + 1, '\0');
  if (latte_sched_format(&d, &s[0], s.size(), &n) != 0) return std::string();
  s.resize(n);
  return s;
}

// A sidecar's read-only view of a region (shm name or flushed file).
class Reader {
 public:
  struct Id {
    uint32_t token;
    std::string name;
  };
  static Reader OpenShared(const std::string &shm_name) {
    Reader r;
    r.err_ = latte_reader_open(shm_name.c_str(), &r.r_);
    return r;
  }
  static Reader OpenFile(const std::string &path) {
    Reader r;
    r.err_ = latte_reader_open_file(path.c_str(), &r.r_);
    return r;
  }
  Reader(Reader &&o) noexcept : r_(o.r_), err_(o.err_) { o.r_ = nullptr; }
  Reader &operator=(Reader &&o) noexcept {
    std::swap(r_, o.r_);
    std::swap(err_, o.err_);
    return *this;
  }
  Reader(const Reader &) = delete;
  Reader &operator=(const Reader &) = delete;
  ~Reader() { latte_reader_close(r_); }

  bool ok() const { return r_ != nullptr; }
  int error() const { return err_; }
  std::string error_text() const { return latte_error_string(err_); }

  std::vector<Id> Ids() const {
    std::vector<Id> v;
    uint32_t n = latte_reader_id_count(r_);
    std::string name(64, '\0');
    for (uint32_t t = 0; t < n; t++) {
      int len = latte_reader_id_name(r_, t, &name[0], name.size() + 1);
      if (len < 0) continue;
      if (size_t(len) > name.size()) {  // a longer name: ask again with room for it
        name.resize(len);
        len = latte_reader_id_name(r_, t, &name[0], name.size() + 1);
        if (len < 0) continue;
      }
      v.push_back(Id{t, std::string(name.data(), std::min(size_t(len), name.size()))});
    }
    return v;
  }
  std::vector<latte_slot_info> Slots() const {
    std::vector<latte_slot_info> v;
    size_t n = 0;
    if (latte_reader_slots(r_, nullptr, 0, &n) != 0 && n == 0) return v;
    v.resize(n + 64);
    if (latte_reader_slots(r_, v.data(), v.size(), &n) != 0) n = 0;
    v.resize(n);
    return v;
  }
  // Pacing of Read (ns; 0 = off): after a read that returned everything a
  // live slot had published, reads through that cursor within the interval
  // return nothing without looking (see latte_reader_set_min_interval).
  int SetMinInterval(uint64_t ns) { return latte_reader_set_min_interval(r_, ns); }
  // Reads the samples of `slot` newer than `cursor` into out[0..*n] (at most
  // `cap`), straight from the region: no allocation, no zero-fill.
  int Read(uint32_t slot, latte_cursor &cursor, latte_raw_sample *out, size_t cap, size_t *n) const {
    return latte_reader_read(r_, slot, &cursor, out, cap, n);
  }
  // Appends the samples of `slot` newer than `cursor` (at most `max`).
  int Read(uint32_t slot, latte_cursor &cursor, std::vector<latte_raw_sample> &out, size_t max = MAX_SAMPLES) const {
    size_t at = out.size(), n = 0;
    out.resize(at + max);
    int rc = latte_reader_read(r_, slot, &cursor, out.data() + at, max, &n);
    out.resize(at + (rc == 0 ? n : 0));
    return rc;
  }
  latte_counters Counters() const {
    latte_counters c{};
    (void)latte_reader_get_counters(r_, &c);
    return c;
  }
  latte_region_info Info() const {
    latte_region_info i{};
    (void)latte_reader_get_info(r_, &i);
    return i;
  }

  static Cycles Duration(const latte_raw_sample &s) { return s.packed & LATTE_MAX_DURATION; }
  static unsigned Depth(const latte_raw_sample &s) { return unsigned(s.packed >> LATTE_DEPTH_SHIFT) & ((1u << (LATTE_START_MODE_SHIFT - LATTE_DEPTH_SHIFT)) - 1u); }

 private:
  Reader() = default;
  latte_reader *r_ = nullptr;
  int err_ = 0;
};

}  // namespace Latte

#define LATTE__CAT2(a, b) a##b
#define LATTE__CAT(a, b) LATTE__CAT2(a, b)
#define LATTE__RAII_TYPE(...) ::Latte::Internal::RaiiMode_##__VA_ARGS__

#ifndef LATTE_DISABLE
// A pulse from this call site (per site and thread; the first call primes it).
#define LATTE_PULSE(id) LATTE_PULSE_AT(id)
// A scope guard timing the enclosing scope under __func__; mode Fast by default.
#define LATTE_RAII(...) LATTE__RAII_TYPE(__VA_ARGS__) LATTE__CAT(latte_raii_, __COUNTER__)(__func__)
// Times `expr` in Fast mode under the id #expr and yields its result.
#define LATTE_FIELD(expr) ::Latte::Internal::Field(#expr, [&]() -> decltype(auto) { return (expr); })
// Measures cycles per ns over LATTE_FREQ_WINDOW_MS (120 ms) against CLOCK_MONOTONIC_RAW.
#define LATTE_FREQ(var) ((var) = ::latte_tsc_measure_cycles_per_ns(LATTE_FREQ_WINDOW_MS))
// Calibrates once (thread-safe; later calls do nothing).
#define LATTE_CALIBRATE() ::Latte::Manager::Get().EnsureCalibrated()
#else
#define LATTE_PULSE(id) ((void)sizeof(id))
#define LATTE_RAII(...) static_cast<void>(0)
#define LATTE_FIELD(expr) (expr)
#define LATTE_FREQ(var) ((var) = 0.0)
#define LATTE_CALIBRATE() static_cast<void>(0)
#endif

#endif  // LATTE_HPP_COMPAT
