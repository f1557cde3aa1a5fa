// The C header included before the C++ standard headers, as a C++ program
// that uses the C ABI directly may: nothing latte.h declares may clash with
// them (glibc's <cstring> declares strerrordesc_np noexcept).
#include <latte.h>

#include <cstdio>
#include <cstring>

int main() {
  latte_start("c_header_first", LATTE_MODE_FAST);
  latte_stop(nullptr, LATTE_MODE_FAST);
  std::printf("c_header_first: latte.h then <cstring> compiles (%zu)\n", std::strlen("ok"));
  return 0;
}
