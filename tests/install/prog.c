/* Built against an installed latte (pkg-config or CMake): the header's
 * version is the library's, a span is recorded and read back. */
#include <latte.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  if (strcmp(latte_version(), LATTE_VERSION_STRING) != 0) {
    fprintf(stderr, "header %s, library %s\n", LATTE_VERSION_STRING, latte_version());
    return 1;
  }
  for (int i = 0; i < 10; i++) {
    latte_start("install.span", LATTE_MODE_FAST);
    latte_stop("install.span", LATTE_MODE_FAST);
  }
  uint64_t d[16];
  size_t n = 0;
  int rc = latte_samples_snapshot("install.span", d, 16, &n);
  if (rc != 0 || n != 10) {
    fprintf(stderr, "snapshot: %s, %zu samples\n", latte_error_string(rc), n);
    return 1;
  }
  printf("latte %s (%d.%d.%d): %zu samples\n", latte_version(), LATTE_VERSION_MAJOR, LATTE_VERSION_MINOR, LATTE_VERSION_PATCH, n);
  return 0;
}
