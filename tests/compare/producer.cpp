// A producer for the `latte record` tests and the record speed figure:
// creates the shared region argv[1], calibrates, prints READY, waits for a line on
// stdin, then records argv[2] spans of "rec.fast" back to back on one
// thread and argv[3] spans of "rec.slow" (each around a short computation)
// on another; with argv[4] (seconds) instead, "rec.fast" records flat out
// for that long. LATTE_DEMO_WORK=P (percent, default 100) scales the
// computation inside "rec.slow". Prints "DONE fast=N slow=M" (what was
// written) and exits when stdin closes.
#include "Latte.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

static volatile unsigned sink;

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  long n_fast = std::atol(argv[2]), n_slow = std::atol(argv[3]);
  double seconds = argc > 4 ? std::atof(argv[4]) : 0.0;
  const char *w = std::getenv("LATTE_DEMO_WORK");
  long work = w ? std::atol(w) : 100;
  int rc = Latte::InitSharedRegion(argv[1]);
  if (rc != 0) {
    std::fprintf(stderr, "producer: %s\n", latte_error_string(rc));
    return 1;
  }
  LATTE_CALIBRATE();  // publishes the TSC frequency with the region
  std::printf("READY\n");
  std::fflush(stdout);
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) return 1;
  long fast_done = 0;
  std::thread fast([&] {
    if (seconds > 0) {
      auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
      while (std::chrono::steady_clock::now() < end) {
        for (int i = 0; i < 4096; i++) {
          Latte::Fast::Start("rec.fast");
          Latte::Fast::Stop(nullptr);
        }
        fast_done += 4096;
      }
    } else {
      for (long i = 0; i < n_fast; i++) {
        Latte::Fast::Start("rec.fast");
        Latte::Fast::Stop(nullptr);
      }
      fast_done = n_fast;
    }
  });
  std::thread slow([&] {
    for (long i = 0; i < n_slow; i++) {
      Latte::Fast::Start("rec.slow");
      unsigned x = 0;
      long n = (50 + (i * 7919) % 200) * work / 100;
      for (long k = 0; k < n; k++) x = x * 31 + static_cast<unsigned>(k);
      sink = x;
      Latte::Fast::Stop(nullptr);
    }
  });
  fast.join();
  slow.join();
  std::printf("DONE fast=%ld slow=%ld\n", fast_done, n_slow);
  std::fflush(stdout);
  while (read(0, line, sizeof line) > 0) {
  }
  return 0;
}
