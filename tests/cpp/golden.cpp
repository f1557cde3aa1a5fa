// The report (DumpToStream, all four modes) and the trace (DumpToJson)
// compared whole against hand-written golden texts of the original Latte's
// layout (tests/cpp/golden/), numbers masked by tests/cpp/golden_check.py.
// The program records a known sequence on one thread, so the rows and the
// trace's events are known in number and order.
#include "Latte.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "check.h"

#ifdef LATTE_DISABLE
constexpr bool ON = false;
#else
constexpr bool ON = true;
#endif

static std::string g_dir;

static void Write(const std::string &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Runs the checker on `actual` against `golden`; in the disabled build the
// output must be empty instead.
static void Compare(const char *kind, const std::string &actual_path, const char *golden) {
  if (!ON) {
    std::ifstream f(actual_path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK(ss.str().empty());
    return;
  }
  std::string cmd = std::string("python3 tests/cpp/golden_check.py ") + kind + " tests/cpp/golden/" + golden + " " + actual_path;
  int rc = std::system(cmd.c_str());
  if (rc != 0) std::fprintf(stderr, "golden mismatch: %s vs %s\n", actual_path.c_str(), golden);
  CHECK(rc == 0);
}

static void Record() {
  for (int i = 0; i < 3; i++) {
    Latte::Fast::Start("alpha");
    Latte::Mid::Start("beta");
    Latte::Mid::Stop(nullptr);
    Latte::Fast::Stop(nullptr);
  }
  for (int i = 0; i < 2; i++) {
    Latte::Hard::Start("gamma");
    Latte::Hard::Stop(nullptr);
  }
  for (int i = 0; i < 5; i++) LATTE_PULSE("tick");
  Latte::Fast::Start("say \"hi\"");
  Latte::Fast::Stop(nullptr);
}

int main(int argc, char **argv) {
  g_dir = argc > 1 ? argv[1] : "build";
  const std::string pre = g_dir + "/golden_" + (ON ? "on" : "off") + "_";
  Record();
  // The trace first: its events are exactly what Record wrote.
  std::string trace = pre + "trace.json";
  std::remove(trace.c_str());
  Latte::DumpToJson(trace);
  if (!ON) Write(trace, "");  // nothing written: an empty file to compare
  Compare("trace", trace, "trace.json");
  struct Mode {
    Latte::Parameter::Unit unit;
    Latte::Parameter::Data data;
    const char *golden;
  } modes[] = {
      {Latte::Parameter::Cycle, Latte::Parameter::Raw, "report_cycles_raw.txt"},
      {Latte::Parameter::Cycle, Latte::Parameter::Calibrated, "report_cycles_cal.txt"},
      {Latte::Parameter::Time, Latte::Parameter::Raw, "report_time_raw.txt"},
      {Latte::Parameter::Time, Latte::Parameter::Calibrated, "report_time_cal.txt"},
  };
  for (const Mode &m : modes) {
    std::ostringstream os;
    Latte::DumpToStream(os, m.unit, m.data);
    std::string path = pre + m.golden;
    Write(path, os.str());
    Compare(m.unit == Latte::Parameter::Time ? "report-time" : "report-cycles", path, m.golden);
  }
  return check_summary("cpp golden");
}
