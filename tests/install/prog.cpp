// The C++ veneer from an installed latte: Latte.hpp as the original's users
// include it, linked through CMake's latte::latte or latte::latte_static.
#include <Latte.hpp>
#include <cstdio>
#include <cstring>

int main() {
  for (int i = 0; i < 10; i++) {
    Latte::Fast::Start("install.cpp");
    Latte::Fast::Stop("install.cpp");
  }
  uint64_t d[16];
  size_t n = 0;
  int rc = latte_samples_snapshot("install.cpp", d, 16, &n);
  if (rc != 0 || n != 10 || std::strcmp(latte_version(), LATTE_VERSION_STRING) != 0) {
    std::fprintf(stderr, "snapshot: %s, %zu samples\n", latte_error_string(rc), n);
    return 1;
  }
  std::printf("latte %s from C++: %zu samples\n", latte_version(), n);
  return 0;
}
