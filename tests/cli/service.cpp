// A small instrumented service for the `latte` command's end-to-end test:
// records known counts into the shared region argv[1] (some with switch
// tracking on), calibrates, prints READY and the result of SchedEnable, then pulses "svc.live" about every millisecond until stdin closes,
// from its main thread, named "svc-main", with a span "svc.nap" around a
// 200 us sleep every 20th time.
//
// With argv[2] "burst": a region of rings of 4,096 samples, READY, then on
// a line from stdin 500,000 svc.burst spans of about 1 us each on one
// thread (the ring laps every few ms), DONE and the nanoseconds they took,
// and waits for stdin to close. No switch tracking.
#include "Latte.hpp"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

static int burst(const char *name) {
  latte_region_config c{};
  c.samples_per_slot = 4096;
  int rc = Latte::InitSharedRegion(name, c);  // a dead predecessor's region is taken over
  if (rc != 0) {
    std::fprintf(stderr, "service: %s\n", latte_error_string(rc));
    return 1;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  char line[16];
  if (!std::fgets(line, sizeof line, stdin)) return 1;
  auto t0 = std::chrono::steady_clock::now();
  std::thread t([] {
    for (int i = 0; i < 500000; i++) {
      Latte::Fast::Start("svc.burst");
      auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(1000);
      while (std::chrono::steady_clock::now() < end) {
      }
      Latte::Fast::Stop(nullptr);
    }
  });
  t.join();
  long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  std::printf("DONE %lld\n", ns);
  std::fflush(stdout);
  while (std::fgets(line, sizeof line, stdin)) {
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (argc > 2 && std::strcmp(argv[2], "burst") == 0) return burst(argv[1]);
  int rc = Latte::InitSharedRegion(argv[1]);
  if (rc != 0) {
    std::fprintf(stderr, "service: %s\n", latte_error_string(rc));
    return 1;
  }
  auto work = [] {
    for (int i = 0; i < 2500; i++) {
      Latte::Fast::Start("svc.a");
      Latte::Fast::Stop(nullptr);
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  for (int i = 0; i < 300; i++) {
    Latte::Mid::Start("svc.b");
    Latte::Mid::Stop(nullptr);
  }
  for (int i = 0; i < 100; i++) {
    Latte::Hard::Start("svc.outer");
    Latte::Fast::Start("svc.inner");
    Latte::Fast::Stop(nullptr);
    Latte::Hard::Stop(nullptr);
  }
  // Switch tracking on this thread: 20 spans around a sleep (each flagged),
  // 20 without one.
  int sched = Latte::SchedEnable();
  for (int i = 0; i < 40; i++) {
    Latte::Fast::Start("svc.sleep");
    if (i % 2 == 0) usleep(200);
    Latte::Fast::Stop(nullptr);
  }
  // 5 spans around a sleep each: every one flagged (nothing left with --clean).
  for (int i = 0; i < 5; i++) {
    Latte::Fast::Start("svc.allsleep");
    usleep(200);
    Latte::Fast::Stop(nullptr);
  }
  LATTE_CALIBRATE();
  pthread_setname_np(pthread_self(), "svc-main");
  std::printf("READY %d\n", sched);
  std::fflush(stdout);
  unsigned n = 0;
  for (;;) {
    pollfd p{0, POLLIN, 0};
    int r = poll(&p, 1, 1);
    if (r > 0) {
      char c;
      if (read(0, &c, 1) <= 0) break;
    }
    LATTE_PULSE("svc.live");
    // Every 20th: a span around a sleep, always switched out (nothing left
    // of it with --clean).
    if (++n % 20 == 0) {
      Latte::Fast::Start("svc.nap");
      usleep(200);
      Latte::Fast::Stop(nullptr);
    }
  }
  return 0;
}
