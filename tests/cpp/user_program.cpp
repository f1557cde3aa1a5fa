// The shape of our users' benchmark, unchanged but for its include and link
// flags: it includes only "Latte.hpp" and relies on what that brings in
// (intrinsics, pthread affinity, std::cout). Loop sizes are reduced for the
// test run; the calls are the same.
#include "Latte.hpp"

#include "check.h"

int main() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) std::cout << "could not pin\n";
  unsigned aux = 0;
  uint64_t t0 = __rdtsc();
  _mm_lfence();
  uint64_t t1 = __rdtscp(&aux);
  _mm_pause();
  CHECK(t1 >= t0);
  for (int i = 0; i < 1000; i++)
    for (int j = 0; j < 100; j++) {
      Latte::Fast::Start("BenchFast");
      Latte::Fast::Stop(nullptr);
    }
  for (int i = 0; i < 1000; i++)
    for (int j = 0; j < 100; j++) {
      Latte::Mid::Start("BenchMid");
      Latte::Mid::Stop(nullptr);
    }
  for (int i = 0; i < 1000; i++)
    for (int j = 0; j < 100; j++) {
      Latte::Hard::Start("BenchHard");
      Latte::Hard::Stop(nullptr);
    }
  for (int i = 0; i < 100000; i++) LATTE_PULSE("BenchPulse");
  std::ostringstream out;
  Latte::DumpToStream(out, Latte::Parameter::Cycle, Latte::Parameter::Calibrated);
  // Shown in the test log without its gray escapes (the report keeps them).
  std::string shown = out.str();
  for (size_t at; (at = shown.find("\x1b[")) != std::string::npos;) shown.erase(at, shown.find('m', at) + 1 - at);
  std::cout << shown;
#ifndef LATTE_DISABLE
  for (const char *row : {"BenchFast", "BenchMid", "BenchHard", "BenchPulse", "LATTE TELEMETRY [CYCLES][CAL]"})
    CHECK(out.str().find(row) != std::string::npos);
  CHECK_EQ_U(Latte::Snapshot("BenchFast").size(), 65536u);
  CHECK_EQ_U(Latte::Snapshot("BenchPulse").size(), 65536u);
#else
  CHECK(out.str().empty());
#endif
  return check_summary("cpp user program");
}
