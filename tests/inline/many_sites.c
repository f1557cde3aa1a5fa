/* The C face of tests/inline/many_sites.cpp: 256 call sites of the inline
 * Start/Stop and LATTE_PULSE_AT in one function. */
#include "latte_inline.h"

#include <errno.h>
#include <stdio.h>

#define SITE                                        \
  latte_start_inline("many.c", LATTE_MODE_FAST);    \
  (void)latte_stop_inline("many.c", LATTE_MODE_FAST); \
  LATTE_PULSE_AT("many.c.pulse");
#define X4 SITE SITE SITE SITE
#define X16 X4 X4 X4 X4
#define X64 X16 X16 X16 X16
#define X256 X64 X64 X64 X64

int main(void) {
  size_t spans = 0, pulses = 0;
  int i;
  for (i = 0; i < 10; i++) {
    X256
  }
  /* Asked with no room: -ERANGE and the count. */
  if (latte_samples_snapshot("many.c", NULL, 0, &spans) != -ERANGE) return 1;
  if (latte_samples_snapshot("many.c.pulse", NULL, 0, &pulses) != -ERANGE) return 1;
  printf("many_sites (C): %zu spans, %zu pulses\n", spans, pulses);
  return spans == 2560 && pulses == 256 * 9 ? 0 : 1;
}
