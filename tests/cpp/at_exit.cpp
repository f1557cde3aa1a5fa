// Recording and extraction after main returns: an atexit handler and a
// static destructor time their work and read it back, as programs that
// report at shutdown do. The main thread's thread-locals are destroyed
// before either runs.
#include "Latte.hpp"

#include <cstdlib>

#ifdef LATTE_DISABLE
constexpr size_t ON = 0;
#else
constexpr size_t ON = 1;
#endif

static void Work(const char *id, int n) {
  for (int i = 0; i < n; i++) {
    Latte::Fast::Start(id);
    Latte::Fast::Stop(nullptr);
  }
}

struct Reporter {
  ~Reporter() {
    Work("exit.dtor", 3);
    int failed = 0;
    failed += Latte::Snapshot("exit.main").size() != 10 * ON;
    failed += Latte::Snapshot("exit.atexit").size() != 5 * ON;
    failed += Latte::Snapshot("exit.dtor").size() != 3 * ON;
    failed += Latte::Manager::Get().ExtractSamplesGlobal().size() != 3 * ON;
    std::ostringstream os;
    Latte::DumpToStream(os);
    failed += (os.str().find("exit.dtor") != std::string::npos) != bool(ON);
    std::printf("cpp at exit: %d passed, %d failed\n", 5 - failed, failed);
    std::fflush(stdout);
    if (failed) std::_Exit(1);
  }
} g_reporter;

static void AtExit() { Work("exit.atexit", 5); }

int main() {
  std::atexit(AtExit);
  Work("exit.main", 10);
  return 0;
}
