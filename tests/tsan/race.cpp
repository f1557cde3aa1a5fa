// A deliberate data race in the program's own code, in a program that also
// records through latte from several threads. Built with -fsanitize=thread:
// TSan must report the race in RacyIncrement (and only there), showing that
// a clean TSan run of the other programs means latte is race-free to TSan,
// not that TSan saw nothing.
#include "Latte.hpp"

static long g_counter;  // written by two threads without synchronisation

__attribute__((noinline)) static void RacyIncrement() {
  for (int i = 0; i < 100000; i++) g_counter = g_counter + 1;
}

static std::atomic<int> g_arrived{0};

// Both threads make their first Start, meet, then race inside the span.
static void Worker(const char *id) {
  Latte::Fast::Start(id);
  g_arrived.fetch_add(1);
  while (g_arrived.load() < 2) std::this_thread::yield();
  RacyIncrement();
  Latte::Fast::Stop(nullptr);
}

int main() {
  std::thread a(Worker, "race.a");
  std::thread b(Worker, "race.b");
  a.join();
  b.join();
  std::printf("counter %ld\n", g_counter);
  return 0;
}
