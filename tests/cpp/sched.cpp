// Switch tracking from C++: Latte::SchedEnable, SchedSnap, SchedDiff and
// SchedFormat forward to the C calls; a tracked thread's spans around a
// sleep are flagged (the inline path of the header), and DumpToStream's
// text is the original's whatever the flags.
#include "Latte.hpp"
#include "check.h"
#include "sleep.h"

#include <sstream>
#include <thread>

int main() {
#ifndef LATTE_DISABLE
  CHECK(Latte::SchedEnable() == 0);
  CHECK(Latte::SchedStatus() == LATTE_SCHED_ON);
  latte_sched_point a{}, b{};
  latte_sched_delta d{};
  CHECK(Latte::SchedSnap(a) == 0);
  for (int i = 0; i < 5; i++) {
    Latte::Fast::Start("cpp.sched");
    sleep_switched(100);
    Latte::Fast::Stop(nullptr);
  }
  CHECK(Latte::SchedSnap(b) == 0);
  CHECK(Latte::SchedDiff(a, b, d) == 0);
  CHECK(d.switch_outs >= 5 && d.blocked_ns > 0 && d.lost == 0);
  std::string line = Latte::SchedFormat(d);
  CHECK(line.rfind("wall ", 0) == 0 && line.find("blocked") != std::string::npos);
  std::printf("cpp sched: %s\n", line.c_str());
  // Every span slept: every sample is flagged.
  std::vector<latte_sample_record> recs(4096);
  size_t n = 0;
  CHECK(latte_samples_extract(recs.data(), recs.size(), &n) == 0);
  uint32_t tok = Latte::InternID("cpp.sched");
  size_t mine = 0, flagged = 0;
  for (size_t i = 0; i < n; i++)
    if (recs[i].token == tok) {
      mine++;
      flagged += recs[i].switched;
    }
  CHECK(mine == 5 && flagged == 5);
  // Another thread's point is not ours.
  latte_sched_point other{};
  std::thread([&] { CHECK(Latte::SchedSnap(other) == 0); }).join();
  CHECK(Latte::SchedDiff(a, other, d) == -EINVAL);
  CHECK(Latte::SchedRelease() == 0 && Latte::SchedStatus() == LATTE_SCHED_RELEASED);
  // The report's text has no column for flags.
  std::ostringstream os;
  Latte::DumpToStream(os);
  CHECK(os.str().find("cpp.sched") != std::string::npos && os.str().find("witch") == std::string::npos);
#else
  latte_sched_point a{};
  latte_sched_delta d{};
  CHECK(Latte::SchedEnable() == LATTE_ERR_NOT_SUPPORTED);
  CHECK(Latte::SchedSnap(a) == LATTE_ERR_SCHED_OFF);
  CHECK(Latte::SchedDiff(a, a, d) == LATTE_ERR_SCHED_OFF);
  CHECK(Latte::SchedFormat(d).empty());
#endif
  return check_summary("cpp sched");
}
