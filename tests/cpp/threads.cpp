// Many threads making their first Start at the same moment: the library's
// first-use paths (thread registry, ID interning, slot allocation) run
// concurrently. Under TSan (the .tsan build) this must produce no report
// that comes from latte; in every build the counts must be exact.
#include "Latte.hpp"

#include <atomic>
#include <condition_variable>

#include "check.h"

#ifdef LATTE_DISABLE
constexpr bool ON = false;
#else
constexpr bool ON = true;
#endif

static const char *const kIds[] = {"threads.a", "threads.b", "threads.c", "threads.d"};
constexpr int kThreads = 8;
constexpr int kSpans = 1000;

// A thread_local object that times its own destruction, as a thread's
// pools and caches do at its end.
struct TimesItsTeardown {
  bool armed = false;
  ~TimesItsTeardown() {
    if (!armed) return;
    Latte::Fast::Start("threads.tls.dtor");
    Latte::Fast::Stop(nullptr);
    for (int i = 0; i < 2; i++) LATTE_PULSE("threads.tls.pulse");  // one interval
  }
};
thread_local TimesItsTeardown t_teardown;

int main() {
  std::mutex m;
  std::condition_variable cv;
  int ready = 0;
  bool go = false;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      {
        std::unique_lock<std::mutex> lk(m);
        ready++;
        cv.notify_all();
        cv.wait(lk, [&] { return go; });
      }
      // Everyone's first Start at once: a shared ID, a thread's own ID.
      Latte::Fast::Start("threads.shared");
      Latte::Mid::Start(kIds[t % 4]);
      Latte::Mid::Stop(nullptr);
      Latte::Fast::Stop(nullptr);
      for (int i = 1; i < kSpans; i++) {
        Latte::Fast::Start("threads.shared");
        LATTE_PULSE("threads.pulse");
        Latte::Fast::Stop(nullptr);
      }
      (void)Latte::InternID(kIds[(t + 1) % 4]);
      (void)Latte::GetThreadStorage()->stack_ptr;
    });
  }
  {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return ready == kThreads; });
    go = true;
  }
  cv.notify_all();
  for (auto &th : ts) th.join();
  CHECK_EQ_U(Latte::Snapshot("threads.shared").size(), ON ? kThreads * kSpans : 0);
  CHECK_EQ_U(Latte::Snapshot("threads.pulse").size(), ON ? kThreads * (kSpans - 2) : 0);
  size_t per_id = 0;
  for (const char *id : kIds) per_id += Latte::Snapshot(id).size();
  CHECK_EQ_U(per_id, ON ? kThreads : 0);
  auto all = Latte::Manager::Get().ExtractSamplesGlobal();
  CHECK_EQ_U(all.size(), ON ? 6u : 0u);
  CHECK_EQ_U(Latte::Manager::Get().ExtractMissed(), 0u);
  // ExtractSamplesGlobal while two threads record flat out: one count and
  // one extraction, never a chase after what they record meanwhile (which
  // is what ExtractMissed counts); each ID's samples fit its rings.
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<std::thread> busy;
  for (int t = 0; t < 2; t++)
    busy.emplace_back([&] {
      started.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
        Latte::Fast::Start("threads.busy");
        Latte::Fast::Stop(nullptr);
      }
    });
  while (started.load() < 2) std::this_thread::yield();
  for (int k = 0; k < 5; k++) {
    auto g = Latte::Manager::Get().ExtractSamplesGlobal();
    auto b = g.find("threads.busy");
    size_t n = b == g.end() ? 0 : b->second.size();
    CHECK(n <= 2u * 65536u);
    CHECK_EQ_U(g.size(), ON ? 7u : 0u);
  }
  stop.store(true);
  for (auto &th : busy) th.join();
  // What a thread's thread_local destructors record is kept: latte retires
  // the thread after them. One thread that recorded before (its object
  // made before its first span), one whose first span is in the destructor.
  std::thread([] {
    t_teardown.armed = true;
    Latte::Fast::Start("threads.tls.body");
    Latte::Fast::Stop(nullptr);
  }).join();
  std::thread([] { t_teardown.armed = true; }).join();
  CHECK_EQ_U(Latte::Snapshot("threads.tls.body").size(), ON ? 1u : 0u);
  CHECK_EQ_U(Latte::Snapshot("threads.tls.dtor").size(), ON ? 2u : 0u);
  CHECK_EQ_U(Latte::Snapshot("threads.tls.pulse").size(), ON ? 2u : 0u);
  return check_summary("cpp threads");
}
