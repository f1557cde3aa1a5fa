/* Minimal test harness for the C test programs: CHECK counts, the summary
 * prints "N passed, M failed" and sets the exit status. */
#ifndef LATTE_TEST_CHECK_H
#define LATTE_TEST_CHECK_H
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (cond) {                                                              \
      check_passed++;                                                        \
    } else {                                                                 \
      check_failed++;                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                        \
  } while (0)

#define CHECK_EQ_U(a, b)                                                     \
  do {                                                                       \
    unsigned long long check_a_ = (unsigned long long)(a), check_b_ = (unsigned long long)(b); \
    if (check_a_ == check_b_) {                                              \
      check_passed++;                                                        \
    } else {                                                                 \
      check_failed++;                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b, check_a_, check_b_); \
    }                                                                        \
  } while (0)

static int check_summary(const char *name) {
  printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
  return check_failed ? 1 : 0;
}
#endif
