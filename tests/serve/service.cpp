// The instrumented service of `latte serve`'s tests, recording into the
// shared region argv[1]. Modes (argv[2]):
//
//   known  calibrates, then records known counts of known distributions,
//          prints READY and records nothing more until stdin closes:
//            svc.spread   4,000 spans spinning 60 ns .. 150 us, log-uniform
//            svc.bimodal  3,000 spans: 2,880 spinning 400 ns, 120 spinning 40 us
//            svc.fast     2 threads x 20,000 empty spans
//            svc "odd" \ é  50 empty spans (a name to escape)
//   live   never calibrates; records svc.tick (a 2 us spin) about every
//          millisecond, prints READY after the first, until stdin closes;
//          rings of 4,096 samples (8 MiB in all); takes the name over from a
//          producer that is gone.
//   small  a region of 4 slots of 64 samples: 10 svc.small spans, READY,
//          then waits for stdin to close (its object is a small file to copy).
//   churn  a region of 8 slots: READY, then for 3 s one short-lived thread
//          after another (4 at a time), each recording 20 svc.churn spans,
//          so that rings are handed from exited threads to new ones; then
//          DONE, and waits for stdin to close.
//   inc    one incarnation of a service that restarts: takes the name over
//          from the previous one, records 10,000 svc.inc spans, prints
//          READY and exits.
//   flat   4 rings of 2^21 samples (32 MiB each): READY, then after a line on
//          stdin records svc.flat back to back on one thread for
//          FLAT_SECONDS, prints "DONE n" (the spans written), and waits
//          for stdin to close.
//   sched  switch tracking on (SchedEnable), 40 svc.sched spans, every
//          other one around a 200 us sleep (switched out), then READY and
//          SchedEnable's result, and waits for stdin to close.
#include "Latte.hpp"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

static void spin_ns(double ns) {
  auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds((long long)ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}

static void wait_for_stdin_eof() {
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

static int known() {
  LATTE_CALIBRATE();
  const int spread_n = 4000;
  for (int i = 0; i < spread_n; i++) {
    // A permutation of 0 .. n-1 (7919 is prime to n): no trend in time.
    double x = (double)((long long)i * 7919 % spread_n) / spread_n;
    double ns = 60.0 * std::pow(150000.0 / 60.0, x);
    Latte::Fast::Start("svc.spread");
    spin_ns(ns);
    Latte::Fast::Stop(nullptr);
  }
  for (int i = 0; i < 3000; i++) {
    double ns = i % 25 == 7 ? 40000.0 : 400.0;  // 120 of 3,000 slow
    Latte::Fast::Start("svc.bimodal");
    spin_ns(ns);
    Latte::Fast::Stop(nullptr);
  }
  auto fast = [] {
    for (int i = 0; i < 20000; i++) {
      Latte::Fast::Start("svc.fast");
      Latte::Fast::Stop(nullptr);
    }
  };
  std::thread t1(fast), t2(fast);
  t1.join();
  t2.join();
  for (int i = 0; i < 50; i++) {
    Latte::Fast::Start("svc \"odd\" \\ \xc3\xa9");
    Latte::Fast::Stop(nullptr);
  }
  std::printf("READY\n");
  std::fflush(stdout);
  wait_for_stdin_eof();
  return 0;
}

static int live() {
  bool ready = false;
  for (;;) {
    Latte::Fast::Start("svc.tick");
    spin_ns(2000);
    Latte::Fast::Stop(nullptr);
    if (!ready) {
      std::printf("READY\n");
      std::fflush(stdout);
      ready = true;
    }
    pollfd p{0, POLLIN, 0};
    if (poll(&p, 1, 1) > 0) {
      char c;
      if (read(0, &c, 1) <= 0) return 0;
    }
  }
}

static int init(const char *name, uint32_t slots, uint32_t samples, uint32_t ids) {
  latte_region_config c{};
  c.slot_capacity = slots;
  c.samples_per_slot = samples;
  c.id_capacity = ids;
  return Latte::InitSharedRegion(name, c);  // a dead predecessor's region is taken over
}

static int small() {
  for (int i = 0; i < 10; i++) {
    Latte::Fast::Start("svc.small");
    Latte::Fast::Stop(nullptr);
  }
  std::printf("READY\n");
  std::fflush(stdout);
  wait_for_stdin_eof();
  return 0;
}

static int churn() {
  std::printf("READY\n");
  std::fflush(stdout);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < end) {
    std::thread t[4];
    for (auto &x : t)
      x = std::thread([] {
        for (int i = 0; i < 20; i++) {
          Latte::Fast::Start("svc.churn");
          Latte::Fast::Stop(nullptr);
        }
      });
    for (auto &x : t) x.join();
  }
  std::printf("DONE\n");
  std::fflush(stdout);
  wait_for_stdin_eof();
  return 0;
}

static int inc() {
  for (int i = 0; i < 10000; i++) {
    Latte::Fast::Start("svc.inc");
    Latte::Fast::Stop(nullptr);
  }
  std::printf("READY\n");
  std::fflush(stdout);
  return 0;
}

static int sched() {
  int rc = Latte::SchedEnable();
  for (int i = 0; i < 40; i++) {
    Latte::Fast::Start("svc.sched");
    if (i % 2 == 0) usleep(200);
    Latte::Fast::Stop(nullptr);
  }
  std::printf("READY %d\n", rc);
  std::fflush(stdout);
  wait_for_stdin_eof();
  return 0;
}

// How long `flat` records flat out.
static const double FLAT_SECONDS = 10.0;
// Its rings: 2^21 samples, which a thread recording 50 M spans/s laps in
// 42 ms: serve, which reads a busy ring every millisecond at least, loses
// nothing unless it is kept off its CPU for most of that.
static const uint32_t FLAT_RING = 1u << 21;

static int flat() {
  LATTE_CALIBRATE();
  std::printf("READY\n");
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) == 1 && c != '\n') {
  }
  long n = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(FLAT_SECONDS);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 4096; i++) {
      Latte::Fast::Start("svc.flat");
      Latte::Fast::Stop(nullptr);
    }
    n += 4096;
  }
  std::printf("DONE %ld\n", n);
  std::fflush(stdout);
  wait_for_stdin_eof();
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: service REGION known|live|small|churn|sched|inc|flat\n");
    return 2;
  }
  const char *mode = argv[2];
  int rc = std::strcmp(mode, "known") == 0  ? Latte::InitSharedRegion(argv[1])
           : std::strcmp(mode, "small") == 0 ? init(argv[1], 4, 64, 8)
           : std::strcmp(mode, "churn") == 0 ? init(argv[1], 8, 64, 8)
           : std::strcmp(mode, "inc") == 0   ? init(argv[1], 4, 16384, 8)
           : std::strcmp(mode, "flat") == 0  ? init(argv[1], 4, FLAT_RING, 0)
                                             : init(argv[1], 0, 4096, 0);
  if (rc != 0) {
    std::fprintf(stderr, "service: %s: %s\n", argv[1], latte_error_string(rc));
    return 1;
  }
  if (std::strcmp(mode, "known") == 0) return known();
  if (std::strcmp(mode, "live") == 0) return live();
  if (std::strcmp(mode, "small") == 0) return small();
  if (std::strcmp(mode, "churn") == 0) return churn();
  if (std::strcmp(mode, "sched") == 0) return sched();
  if (std::strcmp(mode, "inc") == 0) return inc();
  if (std::strcmp(mode, "flat") == 0) return flat();
  std::fprintf(stderr, "service: unknown mode %s\n", mode);
  return 2;
}
