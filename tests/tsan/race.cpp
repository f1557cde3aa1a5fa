// A deliberate data race in the program's own code, in a program that also
// records through latte from several threads. Built with -fsanitize=thread:
// TSan must report the race in RacyIncrement (and only there), showing that
// a clean TSan run of the other programs means latte is race-free to TSan,
// not that TSan saw nothing.
//
// The two threads write the counter one after the other, ordered only by
// relaxed flags, which give TSan no happens-before edge, and both stay alive
// until both have written. So the report depends neither on the two writes
// landing at the same instant (two accesses that check the shadow memory
// simultaneously can both miss the other) nor on a thread that has already
// exited (whose accesses TSan may have forgotten).
#include "Latte.hpp"

static long g_counter;  // written by two threads without synchronisation

__attribute__((noinline)) static void RacyIncrement() {
  for (int i = 0; i < 100000; i++) g_counter = g_counter + 1;
}

// Set (relaxed) by each writer once its writes are done.
static std::atomic<int> g_first_done{0};
static std::atomic<int> g_second_done{0};

static void First() {
  Latte::Fast::Start("race.a");
  RacyIncrement();
  g_first_done.store(1, std::memory_order_relaxed);
  while (g_second_done.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
  Latte::Fast::Stop(nullptr);
}

static void Second() {
  Latte::Fast::Start("race.b");
  while (g_first_done.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
  RacyIncrement();
  g_second_done.store(1, std::memory_order_relaxed);
  Latte::Fast::Stop(nullptr);
}

int main() {
  std::thread a(First);
  std::thread b(Second);
  a.join();
  b.join();
  std::printf("counter %ld\n", g_counter);
  return 0;
}
