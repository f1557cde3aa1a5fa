// A stand-in for "the original engine" in the test of `make speedtest
// ORIGINAL=...` (tests/speedtest/check_mechanism.py): a small header-only
// engine with the API speedtest/hot.cpp uses, written naively on purpose
// (a hash map lookup per Start, a mutex-guarded registry for Snapshot).
// It is not Latte and measures nothing of interest; it only has to build
// and run so that the mechanism can be tested without any original code.
#ifndef STANDIN_LATTE_HPP
#define STANDIN_LATTE_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>
#include <x86intrin.h>

namespace Latte {
using ID = const char *;
constexpr size_t MAX_SAMPLES = size_t(1) << 16;

namespace StandIn {
struct Ring {
  std::unique_ptr<std::atomic<uint64_t>[]> v{new std::atomic<uint64_t>[MAX_SAMPLES]()};
  std::atomic<uint64_t> n{0};
  void Push(uint64_t x) {
    uint64_t i = n.load(std::memory_order_relaxed);
    v[i % MAX_SAMPLES].store(x, std::memory_order_relaxed);
    n.store(i + 1, std::memory_order_release);
  }
};
struct Thread {
  std::unordered_map<ID, Ring *> rings;
  ID ids[64];
  uint64_t starts[64];
  int depth = 0;
};
struct Registry {
  std::mutex m;
  std::unordered_map<ID, std::vector<Ring *>> by_id;
};
inline Registry &Reg() {
  static Registry r;
  return r;
}
inline Thread &Me() {
  thread_local Thread t;
  return t;
}
inline Ring *RingOf(Thread &t, ID id) {
  auto it = t.rings.find(id);
  if (it != t.rings.end()) return it->second;
  Ring *r = new Ring;  // kept for the process's life
  t.rings[id] = r;
  std::lock_guard<std::mutex> g(Reg().m);
  Reg().by_id[id].push_back(r);
  return r;
}
inline uint64_t Tscp() {
  unsigned a;
  return __rdtscp(&a);
}
template <int M>
inline uint64_t Read() {
  if (M == 0) return __rdtsc();
  if (M == 2) _mm_lfence();
  return Tscp();
}
template <int M>
inline void Start(ID id) {
  Thread &t = Me();
  if (t.depth >= 64) return;
  RingOf(t, id);
  t.ids[t.depth] = id;
  t.starts[t.depth++] = Read<M>();
}
template <int M>
inline void Stop() {
  uint64_t now = Read<M>();
  Thread &t = Me();
  if (t.depth == 0) return;
  t.depth--;
  RingOf(t, t.ids[t.depth])->Push(now - t.starts[t.depth]);
}
}  // namespace StandIn

namespace Fast {
inline void Start(ID id) { StandIn::Start<0>(id); }
inline void Stop(ID) { StandIn::Stop<0>(); }
}  // namespace Fast
namespace Mid {
inline void Start(ID id) { StandIn::Start<1>(id); }
inline void Stop(ID) { StandIn::Stop<1>(); }
}  // namespace Mid
namespace Hard {
inline void Start(ID id) { StandIn::Start<2>(id); }
inline void Stop(ID) { StandIn::Stop<2>(); }
}  // namespace Hard

inline std::vector<uint64_t> Snapshot(ID id) {
  std::vector<uint64_t> out;
  std::lock_guard<std::mutex> g(StandIn::Reg().m);
  for (StandIn::Ring *r : StandIn::Reg().by_id[id]) {
    uint64_t n = r->n.load(std::memory_order_acquire);
    uint64_t from = n > MAX_SAMPLES ? n - MAX_SAMPLES : 0;
    for (uint64_t i = from; i < n; i++) out.push_back(r->v[i % MAX_SAMPLES].load(std::memory_order_relaxed));
  }
  return out;
}
}  // namespace Latte

#define LATTE_PULSE(id)                                                  \
  do {                                                                   \
    static thread_local uint64_t standin_last_ = 0;                      \
    uint64_t standin_now_ = __rdtsc();                                   \
    if (standin_last_)                                                   \
      Latte::StandIn::RingOf(Latte::StandIn::Me(), (id))->Push(standin_now_ - standin_last_); \
    standin_last_ = standin_now_;                                        \
  } while (0)

#endif
