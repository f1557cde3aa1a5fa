/* A producer for the Python package's tests and its speedtest row: records
 * known samples into a shared region through liblatte's C API.
 *
 *   producer burst REGION RING PER_ID [IMAGE]
 *     py.a: PER_ID spans on each of 2 threads; py.b: PER_ID spans, each
 *     around a nested py.b.inner; py.tick: PER_ID pulse samples; then, with
 *     switch tracking on, py.sleep: 20 spans, every other one around a
 *     sleep (so switched out). Calibrates, flushes to IMAGE when given,
 *     prints "READY <samples written> <latte_sched_enable's result>", then
 *     keeps the region (and its liveness) until stdin closes.
 *   producer stream REGION RING
 *     Prints "READY", then 2 threads record py.s.a / py.s.b, 1,000 spans at
 *     a time with a pause of 100 us between, until stdin closes; prints
 *     "WROTE <samples written>" and exits.
 *   producer bulk REGION RING IDS IMAGE
 *     bulk.0 .. bulk.IDS-1: RING - 1 spans each (a ring that has not
 *     lapped: a reader keeps its oldest sample), one thread; flushes to
 *     IMAGE, removes the region, prints "WROTE <samples written>".
 *
 *   producer churn REGION RING THREADS SPANS
 *     A region of 4 rings; prints "READY", waits for a line on stdin, then
 *     runs THREADS threads one after another (each ring is handed from
 *     thread to thread), each recording SPANS spans of py.churn; prints
 *     "WROTE <samples written>" and exits when stdin closes.
 *
 * RING is the samples per slot (a power of two). Exit status 0, or 1 with a
 * message on stderr. */
#define _GNU_SOURCE
#include <latte.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what, int rc) {
  fprintf(stderr, "producer: %s: %s\n", what, latte_error_string(rc));
  return 1;
}

static int init(const char *region, unsigned ring, unsigned slots) {
  latte_region_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.slot_capacity = slots;
  cfg.samples_per_slot = ring;
  return latte_init_shared_region_with(region, &cfg);
}

static int flush_to(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  int rc = latte_flush_sync(fd, LATTE_UNIT_CYCLE);
  close(fd);
  return rc;
}

/* Waits until stdin closes. */
static void wait_stdin(void) {
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
}

static unsigned long per_id;

static void *burst_a(void *arg) {
  (void)arg;
  for (unsigned long i = 0; i < per_id; i++) {
    latte_start("py.a", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  return NULL;
}

static int burst(const char *region, unsigned ring, const char *image) {
  int rc = init(region, ring, 16);
  if (rc != 0) return fail("latte_init_shared_region_with", rc);
  pthread_t t[2];
  for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, burst_a, NULL);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  static latte_pulse_site site;
  latte_pulse(&site, "py.tick"); /* the first pulse records nothing: it starts the site's clock */
  for (unsigned long i = 0; i < per_id; i++) {
    latte_start("py.b", LATTE_MODE_MID);
    latte_start("py.b.inner", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_MID);
    latte_pulse(&site, "py.tick");
  }
  int sched = latte_sched_enable();
  for (int i = 0; i < 20; i++) {
    latte_start("py.sleep", LATTE_MODE_FAST);
    if (i % 2 == 0) usleep(200);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  if ((rc = latte_calibration_run()) != 0) return fail("latte_calibration_run", rc);
  if (image != NULL && (rc = flush_to(image)) != 0) return fail("latte_flush_sync", rc);
  printf("READY %lu %d\n", 5 * per_id + 20, sched);
  fflush(stdout);
  wait_stdin();
  return 0;
}

static atomic_int stop;
static atomic_ulong written;

static void *stream_thread(void *arg) {
  const char *id = arg;
  unsigned long n = 0;
  while (!atomic_load(&stop)) {
    for (int i = 0; i < 1000; i++) {
      latte_start(id, LATTE_MODE_FAST);
      latte_stop(NULL, LATTE_MODE_FAST);
    }
    n += 1000;
    usleep(100);
  }
  atomic_fetch_add(&written, n);
  return NULL;
}

static int stream(const char *region, unsigned ring) {
  int rc = init(region, ring, 8);
  if (rc != 0) return fail("latte_init_shared_region_with", rc);
  printf("READY\n");
  fflush(stdout);
  pthread_t t[2];
  pthread_create(&t[0], NULL, stream_thread, "py.s.a");
  pthread_create(&t[1], NULL, stream_thread, "py.s.b");
  wait_stdin();
  atomic_store(&stop, 1);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  printf("WROTE %lu\n", atomic_load(&written));
  return 0;
}

static int bulk(const char *region, unsigned ring, unsigned ids, const char *image) {
  int rc = init(region, ring, ids + 1);
  if (rc != 0) return fail("latte_init_shared_region_with", rc);
  static char names[256][16];
  for (unsigned k = 0; k < ids && k < 256; k++) {
    snprintf(names[k], sizeof names[k], "bulk.%u", k);
    for (unsigned i = 0; i + 1 < ring; i++) {
      latte_start(names[k], LATTE_MODE_FAST);
      latte_stop(NULL, LATTE_MODE_FAST);
    }
  }
  rc = flush_to(image);
  int rm = latte_region_unlink(region);
  if (rc != 0) return fail("latte_flush_sync", rc);
  if (rm != 0) return fail("latte_region_unlink", rm);
  printf("WROTE %lu\n", (unsigned long)(ring - 1) * ids);
  return 0;
}

static unsigned long churn_spans;

static void *churn_thread(void *arg) {
  (void)arg;
  for (unsigned long i = 0; i < churn_spans; i++) {
    latte_start("py.churn", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  return NULL;
}

static int churn(const char *region, unsigned ring, unsigned long threads, unsigned long spans) {
  int rc = init(region, ring, 4);
  if (rc != 0) return fail("latte_init_shared_region_with", rc);
  printf("READY\n");
  fflush(stdout);
  char go[16];
  if (fgets(go, sizeof go, stdin) == NULL) return fail("waiting for a line on stdin", -5);
  churn_spans = spans;
  for (unsigned long k = 0; k < threads; k++) {
    pthread_t t;
    if (pthread_create(&t, NULL, churn_thread, NULL) != 0) return fail("pthread_create", -11);
    pthread_join(t, NULL);
  }
  printf("WROTE %lu\n", threads * spans);
  fflush(stdout);
  wait_stdin();
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "burst") == 0) {
    per_id = strtoul(argv[4], NULL, 10);
    return burst(argv[2], (unsigned)strtoul(argv[3], NULL, 10), argc > 5 ? argv[5] : NULL);
  }
  if (argc == 4 && strcmp(argv[1], "stream") == 0) return stream(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
  if (argc == 6 && strcmp(argv[1], "bulk") == 0)
    return bulk(argv[2], (unsigned)strtoul(argv[3], NULL, 10), (unsigned)strtoul(argv[4], NULL, 10), argv[5]);
  if (argc == 6 && strcmp(argv[1], "churn") == 0)
    return churn(argv[2], (unsigned)strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10), strtoul(argv[5], NULL, 10));
  fprintf(stderr, "usage: producer burst REGION RING PER_ID [IMAGE] | stream REGION RING | bulk REGION RING IDS IMAGE | churn REGION RING THREADS SPANS\n");
  return 2;
}
