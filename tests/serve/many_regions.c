/* many_regions.c: regions for the test of `latte serve` with many regions
 * (tests/serve/many_regions.py). Makes N small regions PREFIX-0 ..
 * PREFIX-(N-1), one per child process (a process records into one region):
 * child i makes its region, records i + 1 spans of "many.span" and exits,
 * leaving the region behind (a dead producer's region stays readable). At
 * most 16 children at once. Prints "MADE N" and exits 0 when every child
 * succeeded.
 * Usage: many_regions PREFIX N */
#define _POSIX_C_SOURCE 200809L
#include <latte.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int child(const char *prefix, int i) {
  char name[200];
  latte_region_config cfg;
  int rc, k;
  memset(&cfg, 0, sizeof cfg);
  cfg.slot_capacity = 2;      /* one thread, one ID */
  cfg.samples_per_slot = 1024; /* more than any child records: nothing lost */
  snprintf(name, sizeof name, "%s-%d", prefix, i);
  rc = latte_init_shared_region_with(name, &cfg);
  if (rc != 0) {
    fprintf(stderr, "many_regions: %s: %s\n", name, latte_error_string(rc));
    return 1;
  }
  for (k = 0; k <= i; k++) {
    latte_start("many.span", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  return 0;
}

/* Waits for one child; 0 when it exited 0. */
static int reap(void) {
  int st = 0;
  if (wait(&st) < 0) return 1;
  return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv) {
  int n, i, running = 0, bad = 0;
  if (argc != 3 || (n = atoi(argv[2])) <= 0 || n > 1023) {
    fprintf(stderr, "usage: many_regions PREFIX N (N up to 1023)\n");
    return 2;
  }
  for (i = 0; i < n; i++) {
    pid_t pid;
    if (running == 16) {
      bad |= reap();
      running--;
    }
    pid = fork();
    if (pid < 0) {
      perror("many_regions: fork");
      bad = 1;
      break;
    }
    if (pid == 0) _exit(child(argv[1], i));
    running++;
  }
  while (running-- > 0) bad |= reap();
  if (bad) return 1;
  printf("MADE %d\n", n);
  return 0;
}
