/* Sample counts for the C tests, the same in builds with and without
 * LATTE_DISABLE: ON(n) is the count a check expects (0 when disabled),
 * count_of an ID's samples kept now (the snapshot's size), and
 * closed_rings the rings of a shared region whose thread was retired. */
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
/* The rings of the shared region `name` that are closed (their thread was
 * retired), among its first `cap` slots. */
static inline size_t closed_rings(const char *name, size_t cap) {
  struct latte_reader *r = NULL;
  latte_slot_info slots[64];
  size_t n = 0, closed = 0;
  int rc = latte_reader_open(name, &r);
  CHECK(cap <= 64 && (rc == 0 || ON(1) == 0));
  if (r == NULL || cap > 64) return 0;
  CHECK(latte_reader_slots(r, slots, cap, &n) == 0);
  for (size_t i = 0; i < n && i < cap; i++) closed += slots[i].state == LATTE_SLOT_CLOSED;
  latte_reader_close(r);
  return closed;
}
#endif
