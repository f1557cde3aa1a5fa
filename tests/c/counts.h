/* Sample counts for the C tests, the same in builds with and without
 * LATTE_DISABLE: ON(n) is the count a check expects (0 when disabled), and
 * count_of an ID's samples kept now (the snapshot's size). */
#ifndef LATTE_TEST_COUNTS_H
#define LATTE_TEST_COUNTS_H
#include <latte.h>

#include "check.h"

#ifdef LATTE_DISABLE
#define ON(n) 0
#else
#define ON(n) (n)
#endif

static size_t count_of(const char *id) {
  size_t n = 0;
  CHECK(latte_samples_snapshot(id, NULL, 0, &n) == 0 || n > 0);
  return n;
}
#endif
