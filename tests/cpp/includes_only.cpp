// A program that includes only "Latte.hpp" and leans on what it brings in,
// as programs written against the original do: smart pointers, containers,
// std::function, threads, file streams, stream manipulators, algorithms,
// limits, chrono, C string and math calls, the TSC intrinsics. Built in
// every configuration of the C++ tests, LATTE_DISABLE included.
#include "Latte.hpp"

struct Stats {
  std::map<std::string, double> by_name;
  std::unique_ptr<std::vector<double>> values = std::make_unique<std::vector<double>>();
};

int main() {
  std::unique_ptr<Stats> s(new Stats);
  std::shared_ptr<int> shared = std::make_shared<int>(3);
  std::function<int(int)> twice = [](int v) { return 2 * v; };
  std::queue<int> q;
  q.push(twice(*shared));
  std::array<uint64_t, 2> tsc{__rdtsc(), 0};
  unsigned aux = 0;
  _mm_lfence();
  tsc[1] = __rdtscp(&aux);
  _mm_pause();
  std::atomic<int> counter{0};
  std::mutex mu;
  std::thread worker([&] {
    std::lock_guard<std::mutex> lock(mu);
    Latte::Fast::Start("includes.worker");
    counter.fetch_add(q.front());
    Latte::Fast::Stop(nullptr);
  });
  worker.join();
  auto t0 = std::chrono::steady_clock::now();
  s->values->push_back(std::sqrt(16.0));
  s->by_name["pi"] = std::acos(-1.0);
  std::sort(s->values->begin(), s->values->end());
  double lim = std::numeric_limits<double>::max();
  char buf[16];
  std::memset(buf, 0, sizeof buf);
  std::snprintf(buf, sizeof buf, "%d", counter.load());
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << s->by_name["pi"] << ' ' << buf;
  std::ofstream("includes_only.tmp") << os.str() << '\n';
  std::string line;
  std::ifstream in("includes_only.tmp");
  std::getline(in, line);
  std::remove("includes_only.tmp");
  auto elapsed = std::chrono::steady_clock::now() - t0;
  bool ok = line == "3.14 6" && tsc[1] >= tsc[0] && lim > 0 && elapsed.count() >= 0 && (*s->values)[0] == 4.0;
  std::cout << "cpp includes only Latte.hpp: " << (ok ? "1 passed, 0 failed" : "0 passed, 1 failed") << std::endl;
  return ok ? 0 : 1;
}
