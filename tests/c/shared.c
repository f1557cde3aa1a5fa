/* The shared region and its reader through the C ABI.
 * - a second process (this program re-executed in reader mode) opens the
 *   region by name, lists the names and reads the samples the producer wrote;
 * - the inline path and the ABI path write identical samples (depth, modes);
 * - a full slot table drops and counts; name rules; 0600; EEXIST and stale
 *   objects; a second init; fork isolation; reading after the producer was
 *   SIGKILLed; unlink;
 * - a region asked for after recording began: moved, with every sample, while
 *   two threads record through the inline path.
 * Built with and without LATTE_DISABLE (then only the no-op contract is checked). */
#define _GNU_SOURCE
#include "can_move.h"
#include "check.h"
#include "latte_inline.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LATTE_DISABLE

static char region_name[64];

/* Reader mode: open `name`, check the IDs and per-ID sample counts given as
 * "id=count" arguments; exit 0 when all match. */
static int reader_main(int argc, char **argv) {
  latte_reader *r = NULL;
  latte_slot_info slots[256];
  size_t nslots = 0, i;
  int a, bad = 0;
  if (latte_reader_open(argv[2], &r) != 0) return 10;
  if (latte_reader_slots(r, slots, 256, &nslots) != 0) return 11;
  for (a = 3; a < argc; a++) {
    char id[64], name[64];
    const char *eq = strchr(argv[a], '=');
    uint32_t t, found = LATTE_INVALID_ID;
    size_t want, got = 0;
    if (!eq) return 12;
    memcpy(id, argv[a], (size_t)(eq - argv[a]));
    id[eq - argv[a]] = 0;
    want = (size_t)strtoul(eq + 1, NULL, 10);
    for (t = 0; t < latte_reader_id_count(r); t++)
      if (latte_reader_id_name(r, t, name, sizeof name) >= 0 && strcmp(name, id) == 0) found = t;
    if (found == LATTE_INVALID_ID) {
      fprintf(stderr, "reader: id %s not listed\n", id);
      bad = 1;
      continue;
    }
    for (i = 0; i < nslots; i++) {
      if (slots[i].id_token != found) continue;
      {
        latte_cursor cur;
        latte_raw_sample buf[4096];
        size_t n = 0;
        memset(&cur, 0, sizeof cur);
        do {
          if (latte_reader_read(r, slots[i].index, &cur, buf, 4096, &n) != 0) return 13;
          got += n;
        } while (n == 4096);
        if (slots[i].os_tid == 0) bad = 1;
      }
    }
    if (got != want) {
      fprintf(stderr, "reader: %s has %zu samples, want %zu\n", id, got, want);
      bad = 1;
    }
  }
  latte_reader_close(r);
  return bad ? 14 : 0;
}

/* Producer mode (a fresh process): make region argv[2] (with the default
 * config: a dead producer's region of that name is taken over), record 100
 * spans, write 'y' to fd argv[3] and wait to be killed; argv[3] "exit":
 * exit 0 instead. */
static int producer_main(char **argv) {
  int i, fd = atoi(argv[3]);
  char ok = 'x';
  if (latte_init_shared_region(argv[2]) == 0) {
    for (i = 0; i < 100; i++) {
      latte_start("killed.span", LATTE_MODE_FAST);
      latte_stop(NULL, LATTE_MODE_FAST);
    }
    ok = 'y';
  }
  if (strcmp(argv[3], "exit") == 0) return ok == 'y' ? 0 : 1;
  if (write(fd, &ok, 1) != 1) return 1;
  for (;;) pause();
}

/* Replace mode (a fresh process): the name argv[2] belongs to a dead
 * producer: with LATTE_IF_TAKEN_FAIL EEXIST, an unknown if_taken or a
 * mode past 0777 EINVAL, by default a new region. */
static int replace_main(char **argv) {
  latte_region_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.slot_capacity = 4;
  cfg.samples_per_slot = 1024;
  cfg.if_taken = LATTE_IF_TAKEN_FAIL;
  if (latte_init_shared_region_with(argv[2], &cfg) != -EEXIST) return 3;
  cfg.if_taken = 7;
  if (latte_init_shared_region_with(argv[2], &cfg) != -EINVAL) return 2;
  cfg.if_taken = LATTE_IF_TAKEN_REPLACE_STALE;
  /* Bits past 0777 are a mistake, not a request for 0777. */
  cfg.mode = 0xffffffffu;
  if (latte_init_shared_region_with(argv[2], &cfg) != -EINVAL) return 2;
  cfg.mode = 01640;
  if (latte_init_shared_region_with(argv[2], &cfg) != -EINVAL) return 2;
  cfg.mode = 0640;
  if (latte_init_shared_region_with(argv[2], &cfg) != 0) return 4;
  {
    /* The mode asked for, exactly (the umask does not apply). */
    char path[128];
    struct stat st;
    umask(077);
    snprintf(path, sizeof path, "/dev/shm%s", argv[2]);
    if (stat(path, &st) != 0 || (st.st_mode & 0777) != 0640) return 8;
  }
  return 0;
}

/* Live mode (a fresh process): the name argv[2] belongs to a live
 * producer: never replaced, by default or with LATTE_IF_TAKEN_FAIL. */
static int live_main(char **argv) {
  latte_region_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (latte_init_shared_region_with(argv[2], &cfg) != -EEXIST) return 5;
  cfg.if_taken = LATTE_IF_TAKEN_FAIL;
  return latte_init_shared_region_with(argv[2], &cfg) == -EEXIST ? 0 : 6;
}

/* Truncate mode (a fresh process): another process shrinks our object to
 * nothing while we record; recording goes on without a SIGBUS, the lost
 * pages are counted, and a reader of the shrunk object gets errors, not a
 * crash. Exit 0 when all of that holds. */
static int truncate_main(char **argv) {
  latte_counters c;
  latte_reader *r = NULL;
  int i, fd;
  if (latte_init_shared_region(argv[2]) != 0) return 2;
  for (i = 0; i < 100; i++) {
    latte_start_inline("trunc.span", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  fd = shm_open(argv[2], O_RDWR, 0);
  if (fd < 0 || ftruncate(fd, 0) != 0) return 3;
  close(fd);
  for (i = 0; i < 100000; i++) {
    latte_start_inline("trunc.span", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
    latte_start("trunc.other", LATTE_MODE_MID);
    latte_stop(NULL, LATTE_MODE_MID);
  }
  if (latte_region_get_counters(&c) != 0 || c.mapping_faults == 0) return 4;
  /* A new reader sees an empty object: an error at open. */
  if (latte_reader_open(argv[2], &r) == 0) return 5;
  latte_region_unlink(argv[2]);
  /* A SIGBUS that is not latte's (a mapping of our own whose object shrank)
   * still goes where it went before: the child dies of it (or, under ASan,
   * ASan's handler reports it and exits 1); it never reads a zero page.
   * The child's standard error (ASan's report of the intended crash) is
   * captured here and checked, not printed into the test log. */
  {
    int status = 0, errpipe[2];
    char report[65536];
    size_t got = 0;
    ssize_t k;
    pid_t pid;
    if (pipe(errpipe) != 0) return 8;
    pid = fork();
    if (pid == 0) {
      dup2(errpipe[1], 2);
      close(errpipe[0]);
      close(errpipe[1]);
      char other[96];
      volatile const char *p;
      snprintf(other, sizeof other, "%s-other", argv[2]);
      fd = shm_open(other, O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0 || ftruncate(fd, 4096) != 0) _exit(20);
      p = (volatile const char *)mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
      shm_unlink(other);
      if (p == (volatile const char *)MAP_FAILED || ftruncate(fd, 0) != 0) _exit(21);
      _exit(p[0] + 22);
    }
    close(errpipe[1]);
    while ((k = read(errpipe[0], report + got, sizeof report - 1 - got)) > 0) got += (size_t)k;
    close(errpipe[0]);
    report[got] = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return 6;
    if (WIFSIGNALED(status) ? WTERMSIG(status) != SIGBUS : WEXITSTATUS(status) != 1) return 7;
    /* Exit status 1 is ASan's: its report must name the bus error. */
    if (!WIFSIGNALED(status) && !strstr(report, "BUS")) return 9;
  }
  return 0;
}

static pid_t spawn(const char *mode, const char *name, const char *arg) {
  char *args[5];
  pid_t pid;
  args[0] = (char *)"shared";
  args[1] = (char *)mode;
  args[2] = (char *)name;
  args[3] = (char *)arg;
  args[4] = NULL;
  pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", args);
    _exit(99);
  }
  return pid;
}

static int spawn_wait(const char *mode, const char *name) {
  int status = 0;
  pid_t pid = spawn(mode, name, NULL);
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

static int run_reader(char *self, const char *name, const char **expect, int n) {
  char *args[16];
  int i, status = 0;
  pid_t pid;
  args[0] = self;
  args[1] = (char *)"reader";
  args[2] = (char *)name;
  for (i = 0; i < n; i++) args[3 + i] = (char *)expect[i];
  args[3 + n] = NULL;
  pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", args);
    _exit(99);
  }
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/* Late mode (a fresh process): recording begins in private memory (the
 * inline path on two threads, spans and pulses; a span of the main thread
 * stays open across the call), then latte_init_shared_region(argv[2])
 * moves the region into the shared object while the threads go on
 * recording. A reader process then finds every sample, those from before
 * the move included. Exit 0 when all of that holds. */
#define LATE_SPANS 30000
static int late_progress[2], late_moving;

static void *late_thread(void *arg) {
  int k = (int)(size_t)arg, i;
  latte_pulse_site site;
  memset(&site, 0, sizeof site);
  for (i = 0; i < LATE_SPANS; i++) {
    latte_start_inline("late.span", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
    latte_pulse_inline(&site, "late.pulse");
    __atomic_store_n(&late_progress[k], i + 1, __ATOMIC_RELEASE);
    /* A third of the way: wait for the move to start, then record through it. */
    if (i == LATE_SPANS / 3)
      while (!__atomic_load_n(&late_moving, __ATOMIC_ACQUIRE)) sched_yield();
  }
  return NULL;
}

static int late_main(char **argv) {
  const char *expect[] = {"late.span=60000", "late.pulse=59998", "late.open=1", "late.before=10"};
  pthread_t th[2];
  int i, rc, k;
  for (i = 0; i < 10; i++) {
    latte_start_inline("late.before", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  latte_start_inline("late.open", LATTE_MODE_FAST);
  for (k = 0; k < 2; k++) pthread_create(&th[k], NULL, late_thread, (void *)(size_t)k);
  for (k = 0; k < 2; k++)
    while (__atomic_load_n(&late_progress[k], __ATOMIC_ACQUIRE) <= LATE_SPANS / 3) sched_yield();
  __atomic_store_n(&late_moving, 1, __ATOMIC_RELEASE);
  rc = latte_init_shared_region(argv[2]);
  for (k = 0; k < 2; k++) pthread_join(th[k], NULL);
  latte_stop_inline(NULL, LATTE_MODE_FAST);
  if (!can_move()) return rc == -EBUSY ? 0 : 22; /* refused: nothing to read */
  if (rc != 0) return 20;
  return run_reader(argv[0], argv[2], expect, 4) == 0 ? 0 : 21;
}

/* Reads every decoded sample of `id` in this process's region via a reader. */
static size_t read_all(const char *id, latte_raw_sample *out, size_t cap) {
  latte_reader *r = NULL;
  latte_slot_info slots[256];
  size_t nslots = 0, i, total = 0;
  uint32_t t, tok = LATTE_INVALID_ID;
  char name[64];
  if (latte_reader_open(region_name, &r) != 0) return 0;
  for (t = 0; t < latte_reader_id_count(r); t++)
    if (latte_reader_id_name(r, t, name, sizeof name) >= 0 && strcmp(name, id) == 0) tok = t;
  latte_reader_slots(r, slots, 256, &nslots);
  for (i = 0; i < nslots; i++)
    if (slots[i].id_token == tok) {
      latte_cursor cur;
      size_t n = 0;
      memset(&cur, 0, sizeof cur);
      latte_reader_read(r, slots[i].index, &cur, out + total, cap - total, &n);
      total += n;
    }
  latte_reader_close(r);
  return total;
}

static void nest(int inl, const char *a, const char *b) {
  if (inl) {
    latte_start_inline(a, LATTE_MODE_HARD);
    latte_start_inline(b, LATTE_MODE_MID);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
    latte_start_inline(b, LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_HARD);
    latte_stop_inline(NULL, LATTE_MODE_MID);
  } else {
    latte_start(a, LATTE_MODE_HARD);
    latte_start(b, LATTE_MODE_MID);
    latte_stop(NULL, LATTE_MODE_FAST);
    latte_start(b, LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_HARD);
    latte_stop(NULL, LATTE_MODE_MID);
  }
}

static void inline_equals_abi(void) {
  static latte_raw_sample x[64], y[64];
  size_t nx, ny, i;
  int same = 1;
  latte_pulse_site s1, s2;
  memset(&s1, 0, sizeof s1);
  memset(&s2, 0, sizeof s2);
  for (i = 0; i < 5; i++) {
    nest(1, "inl.outer", "inl.inner");
    nest(0, "abi.outer", "abi.inner");
    latte_pulse_inline(&s1, "inl.pulse");
    latte_pulse(&s2, "abi.pulse");
  }
  nx = read_all("inl.inner", x, 64);
  ny = read_all("abi.inner", y, 64);
  CHECK_EQ_U(nx, 10);
  CHECK_EQ_U(ny, 10);
  for (i = 0; i < nx && i < ny; i++) same &= (x[i].packed >> LATTE_DEPTH_SHIFT) == (y[i].packed >> LATTE_DEPTH_SHIFT);
  CHECK(same);
  nx = read_all("inl.outer", x, 64);
  ny = read_all("abi.outer", y, 64);
  CHECK_EQ_U(nx, 5);
  CHECK(nx == ny && (x[0].packed >> LATTE_DEPTH_SHIFT) == (y[0].packed >> LATTE_DEPTH_SHIFT));
  CHECK_EQ_U((x[0].packed >> LATTE_START_MODE_SHIFT) & 3, LATTE_MODE_HARD);
  CHECK_EQ_U((x[0].packed >> LATTE_STOP_MODE_SHIFT) & 3, LATTE_MODE_MID);
  nx = read_all("inl.pulse", x, 64);
  ny = read_all("abi.pulse", y, 64);
  CHECK(nx == 4 && ny == 4 && (x[0].packed >> LATTE_DEPTH_SHIFT) == (y[0].packed >> LATTE_DEPTH_SHIFT));
  CHECK_EQ_U((x[0].packed >> LATTE_START_MODE_SHIFT) & 3, LATTE_MODE_PULSE);
  /* With 64 spans open (a depth the 6-bit field cannot hold): the same bits. */
  memset(&s1, 0, sizeof s1);
  memset(&s2, 0, sizeof s2);
  for (i = 0; i < 64; i++) latte_start_inline("inl.deep", LATTE_MODE_FAST);
  for (i = 0; i < 2; i++) {
    latte_pulse_inline(&s1, "inl.pulse64");
    latte_pulse(&s2, "abi.pulse64");
  }
  for (i = 0; i < 64; i++) latte_stop_inline(NULL, LATTE_MODE_FAST);
  nx = read_all("inl.pulse64", x, 64);
  ny = read_all("abi.pulse64", y, 64);
  CHECK(nx == 1 && ny == 1 && (x[0].packed >> LATTE_DEPTH_SHIFT) == (y[0].packed >> LATTE_DEPTH_SHIFT));
}

/* A second copy of the inline path's thread-local state, as a library
 * built with hidden visibility would have. */
static __thread latte_thread other_state;

static uint64_t packed_of(const char *id, size_t *n) {
  latte_raw_sample x[4];
  *n = read_all(id, x, 4);
  return *n ? x[0].packed : 0;
}

static void *mixed_paths_thread(void *arg) {
  latte_thread_counters before, after;
  (void)arg;
  CHECK(latte_thread_get_counters(&before) == 0);
  latte_start("mix.a", LATTE_MODE_HARD);             /* the library's own state */
  latte_start_inline("mix.b", LATTE_MODE_MID);       /* takes mix.a over */
  CHECK_EQ_U(latte__state.depth, 2);
  CHECK(latte_stop(NULL, LATTE_MODE_FAST) > 0);      /* the library works on it: closes mix.b */
  latte__start_on(&other_state, "mix.c", LATTE_MODE_FAST); /* another state takes mix.a over */
  CHECK_EQ_U(latte__state.depth, 0);
  CHECK_EQ_U(other_state.depth, 2);
  CHECK(latte_stop_inline(NULL, LATTE_MODE_HARD) > 0); /* through the emptied state: closes mix.c */
  CHECK(latte__stop_on(&other_state, LATTE_MODE_MID, __rdtsc()) > 0); /* closes mix.a */
  CHECK(latte_thread_get_counters(&after) == 0);
  CHECK_EQ_U(after.orphan_stops, before.orphan_stops);
  CHECK_EQ_U(after.depth, 0);
  return NULL;
}

/* The ABI, the inline path and a second inline state on one thread share
 * one span stack: each Start through another state moves it over. */
static void mixed_paths_share_one_stack(void) {
  pthread_t th;
  uint64_t p;
  size_t n;
  CHECK(pthread_create(&th, NULL, mixed_paths_thread, NULL) == 0);
  CHECK(pthread_join(th, NULL) == 0);
  p = packed_of("mix.a", &n);
  CHECK_EQ_U(n, 1);
  CHECK_EQ_U(p >> LATTE_DEPTH_SHIFT, (0u) | (LATTE_MODE_HARD << 6) | (LATTE_MODE_MID << 8));
  p = packed_of("mix.b", &n);
  CHECK_EQ_U(n, 1);
  CHECK_EQ_U(p >> LATTE_DEPTH_SHIFT, (1u) | (LATTE_MODE_MID << 6) | (LATTE_MODE_FAST << 8));
  p = packed_of("mix.c", &n);
  CHECK_EQ_U(n, 1);
  CHECK_EQ_U(p >> LATTE_DEPTH_SHIFT, (1u) | (LATTE_MODE_FAST << 6) | (LATTE_MODE_HARD << 8));
}

/* The inline path makes out-of-range durations defined as Rust does:
 * negative -> 0, beyond 48 bits -> saturated. */
static void inline_durations_out_of_range(void) {
  uint64_t st, p;
  size_t n;
  latte_start_inline("dur.neg", LATTE_MODE_FAST);
  CHECK_EQ_U(latte__stop_on(&latte__state, LATTE_MODE_FAST, 0), 0);
  latte_start_inline("dur.long", LATTE_MODE_FAST);
  st = latte__state.frame_tsc[latte__state.depth - 1];
  CHECK_EQ_U(latte__stop_on(&latte__state, LATTE_MODE_FAST, st + (1ull << 50)), LATTE_MAX_DURATION);
  p = packed_of("dur.neg", &n);
  CHECK(n == 1 && (p & LATTE_MAX_DURATION) == 0);
  p = packed_of("dur.long", &n);
  CHECK(n == 1 && (p & LATTE_MAX_DURATION) == LATTE_MAX_DURATION);
}

/* Two pulse sites and spans of one ID share the thread's ring: each site's
 * copy of the ring index goes stale whenever the others write, and every
 * sample must still land in its own place (inline and ABI paths alike). */
static void pulse_sites_share_a_ring(void) {
  static latte_raw_sample x[1024];
  latte_pulse_site a, b, c;
  size_t n, i, pulses = 0, spans = 0;
  int k;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(&c, 0, sizeof c);
  for (k = 0; k < 100; k++) {
    latte_pulse_inline(&a, "shared.ring");
    latte_pulse_inline(&b, "shared.ring");
    latte_pulse(&c, "shared.ring");
    if (k % 3 == 0) {
      latte_start_inline("shared.ring", LATTE_MODE_MID);
      latte_stop_inline(NULL, LATTE_MODE_MID);
    }
  }
  n = read_all("shared.ring", x, 1024);
  CHECK_EQ_U(n, 3 * 99 + 34);
  for (i = 0; i < n; i++) {
    unsigned modes = (unsigned)(x[i].packed >> LATTE_START_MODE_SHIFT) & 15u;
    if (modes == (LATTE_MODE_PULSE | (LATTE_MODE_PULSE << 2))) pulses++;
    if (modes == (LATTE_MODE_MID | (LATTE_MODE_MID << 2))) spans++;
  }
  CHECK_EQ_U(pulses, 3 * 99);
  CHECK_EQ_U(spans, 34);
}

/* A reader polling a live slot is paced: after a read that caught up,
 * reads through that cursor within the reader's interval return nothing
 * (the samples wait, none is lost); interval 0 looks every time. */
/* The calibration's spans go to a ring of its own, outside the region: a
 * raw reader sees no reserved ID and no slot of it after calibrating
 * (latte_reader_id_is_reserved still flags the reserved name when a region
 * holds it). */
static void reserved_ids_are_flagged(void) {
  latte_reader *r = NULL;
  latte_slot_info slots[256];
  size_t nslots = 0, i;
  uint32_t t, reserved = 0, cal = LATTE_INVALID_ID;
  char name[64];
  latte_start_inline("ordinary.c", LATTE_MODE_FAST);
  latte_stop_inline(NULL, LATTE_MODE_FAST);
  CHECK(latte_calibration_run() == 0);
  CHECK(latte_reader_open(region_name, &r) == 0);
  for (t = 0; t < latte_reader_id_count(r); t++) {
    int k = latte_reader_id_is_reserved(r, t);
    CHECK(latte_reader_id_name(r, t, name, sizeof name) >= 0);
    CHECK(k == (strcmp(name, latte_calibration_id()) == 0));
    if (k == 1) {
      reserved++;
      cal = t;
    }
  }
  /* Calibration records in a ring of its own: no ID, no slot of the region. */
  CHECK_EQ_U(reserved, 0);
  CHECK(latte_reader_slots(r, slots, 256, &nslots) == 0);
  for (i = 0, t = 0; i < nslots; i++)
    if (slots[i].id_token == cal) t++;
  CHECK(t == 0);
  CHECK(latte_reader_id_is_reserved(r, latte_reader_id_count(r)) == -EINVAL);
  CHECK(latte_reader_id_is_reserved(NULL, 0) == -EINVAL);
  latte_reader_close(r);
}

static void polling_reader_is_paced(void) {
  latte_reader *r = NULL;
  latte_slot_info slots[64];
  latte_raw_sample buf[64];
  latte_cursor cur;
  size_t nslots = 0, n = 99, i;
  uint32_t t, tok = LATTE_INVALID_ID, slot = 0xFFFFFFFFu;
  char name[64];
  int k;
  for (k = 0; k < 5; k++) {
    latte_start_inline("pace.c", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  CHECK(latte_reader_set_min_interval(NULL, 0) == -EINVAL);
  CHECK(latte_reader_open(region_name, &r) == 0);
  for (t = 0; t < latte_reader_id_count(r); t++)
    if (latte_reader_id_name(r, t, name, sizeof name) >= 0 && strcmp(name, "pace.c") == 0) tok = t;
  CHECK(latte_reader_slots(r, slots, 64, &nslots) == 0);
  for (i = 0; i < nslots; i++)
    if (slots[i].id_token == tok) slot = slots[i].index;
  CHECK(slot != 0xFFFFFFFFu);
  CHECK(latte_reader_set_min_interval(r, 60ull * 1000000000ull) == 0);
  memset(&cur, 0, sizeof cur);
  CHECK(latte_reader_read(r, slot, &cur, buf, 64, &n) == 0);
  CHECK_EQ_U(n, 5);
  for (k = 0; k < 3; k++) {
    latte_start_inline("pace.c", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  CHECK(latte_reader_read(r, slot, &cur, buf, 64, &n) == 0);
  CHECK_EQ_U(n, 0);
  CHECK(latte_reader_set_min_interval(r, 0) == 0);
  CHECK(latte_reader_read(r, slot, &cur, buf, 64, &n) == 0);
  CHECK_EQ_U(n, 3);
  CHECK(cur.read == 8 && cur.lost == 0);
  latte_reader_close(r);
}

static void capacity_grows(void) {
  /* The region was made with 32 slots: 48 more IDs on this thread make it
   * grow, and nothing is dropped. */
  char id[32];
  int k;
  latte_counters c;
  for (k = 0; k < 48; k++) {
    snprintf(id, sizeof id, "cap-%d", k);
    latte_start(strdup(id), LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
  }
  CHECK(latte_region_get_counters(&c) == 0);
  CHECK(c.slots_used > 48);
  CHECK_EQ_U(c.no_slot_drops, 0);
}

/* A reader that follows the region while another thread makes it grow
 * (new IDs, each a new ring): every ring it lists has a name, and when the
 * writer is done, read + lost == written for every ring. */
#define GROW_IDS 200
#define GROW_SPANS 300
static volatile int grow_done;
static void *grow_writer(void *arg) {
  static char names[GROW_IDS][24];
  int k, j;
  (void)arg;
  for (k = 0; k < GROW_IDS; k++) {
    snprintf(names[k], sizeof names[k], "grow-%d", k);
    for (j = 0; j < GROW_SPANS; j++) {
      latte_start_inline(names[k], LATTE_MODE_FAST);
      latte_stop_inline(NULL, LATTE_MODE_FAST);
    }
  }
  __atomic_store_n(&grow_done, 1, __ATOMIC_RELEASE);
  /* Stay alive until read: the rings stay this thread's. */
  while (__atomic_load_n(&grow_done, __ATOMIC_ACQUIRE) != 2) usleep(1000);
  return NULL;
}

static void reader_follows_growth(void) {
  static latte_slot_info slots[4096];
  static latte_cursor curs[4096];
  static latte_raw_sample buf[1024];
  latte_reader *r = NULL;
  pthread_t th;
  size_t n = 0, got, i;
  int last = 0, rings = 0, exact = 1, named = 1;
  char name[64];
  CHECK(latte_reader_open(region_name, &r) == 0);
  CHECK(latte_reader_set_min_interval(r, 0) == 0);
  memset(curs, 0, sizeof curs);
  CHECK(pthread_create(&th, NULL, grow_writer, NULL) == 0);
  while (!last) {
    last = __atomic_load_n(&grow_done, __ATOMIC_ACQUIRE) == 1;
    CHECK(latte_reader_slots(r, slots, 4096, &n) == 0);
    for (i = 0; i < n; i++) {
      if (slots[i].index >= 4096) continue;
      if (latte_reader_id_name(r, slots[i].id_token, name, sizeof name) < 0) named = 0;
      while (latte_reader_read(r, slots[i].index, &curs[slots[i].index], buf, 1024, &got) == 0 && got > 0) {
      }
    }
  }
  CHECK(latte_reader_slots(r, slots, 4096, &n) == 0);
  for (i = 0; i < n; i++) {
    latte_cursor *c = &curs[slots[i].index];
    if (latte_reader_id_name(r, slots[i].id_token, name, sizeof name) < 0 || strncmp(name, "grow-", 5) != 0) continue;
    rings++;
    if (c->read + c->lost != slots[i].write_idx || slots[i].write_idx != GROW_SPANS) exact = 0;
  }
  __atomic_store_n(&grow_done, 2, __ATOMIC_RELEASE);
  CHECK(pthread_join(th, NULL) == 0);
  CHECK_EQ_U(rings, GROW_IDS);
  CHECK(exact && named);
  latte_reader_close(r);
}

static void names_and_collisions(void) {
  char n2[80];
  struct stat st;
  int fd;
  latte_reader *r = NULL;
  /* Name rules. */
  CHECK(latte_init_shared_region("no-slash") == -EINVAL);
  CHECK(latte_init_shared_region("/a/b") == -EINVAL);
  CHECK(latte_init_shared_region("/") == -EINVAL);
  CHECK(latte_init_shared_region("/.") == -EINVAL);
  CHECK(latte_init_shared_region("/..") == -EINVAL);
  /* The form of the names latte makes regions under before publishing them. */
  CHECK(latte_init_shared_region("/.latte-new-1-0") == -EINVAL);
  CHECK(latte_region_unlink("/..") == -EINVAL);
  /* Owner-only. */
  snprintf(n2, sizeof n2, "/dev/shm%s", region_name);
  CHECK(stat(n2, &st) == 0 && (st.st_mode & 0777) == 0600);
  /* A second init: already installed. */
  CHECK(latte_init_shared_region(region_name) == -EALREADY);
  /* Not ours: reader says so. */
  snprintf(n2, sizeof n2, "%s-foreign", region_name);
  fd = shm_open(n2, O_CREAT | O_RDWR, 0600);
  CHECK(fd >= 0 && ftruncate(fd, 8192) == 0);
  CHECK(latte_reader_open(n2, &r) == LATTE_ERR_NOT_LATTE && r == NULL);
  close(fd);
  shm_unlink(n2);
  CHECK(latte_reader_open("/latte-test-absent", &r) == -ENOENT);
  CHECK(latte_reader_open(NULL, &r) == -EINVAL);
}

/* A child makes a region, records, and is SIGKILLed: the object persists
 * and reads; a new producer takes the name over (by default; not with
 * LATTE_IF_TAKEN_FAIL). A program that exited normally, run again, takes
 * its own region back; a live producer's name is never taken. */
static void survives_sigkill_and_stale_names(char *self) {
  char name[96];
  int status, p[2];
  pid_t pid;
  latte_reader *r = NULL;
  (void)self;
  latte_counters c;
  const char *expect[] = {"killed.span=100"};
  snprintf(name, sizeof name, "%s-killed", region_name);
  CHECK(pipe(p) == 0);
  {
    char fd[16];
    snprintf(fd, sizeof fd, "%d", p[1]);
    pid = spawn("producer", name, fd);
  }
  {
    char ok = 0;
    CHECK(read(p[0], &ok, 1) == 1 && ok == 'y');
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  CHECK(latte_reader_open(name, &r) == 0);
  CHECK(latte_reader_get_counters(r, &c) == 0 && c.threads_seen == 1);
  latte_reader_close(r);
  CHECK(run_reader(self, name, expect, 1) == 0);
  /* Stale: the name is taken, its producer is dead. With
   * LATTE_IF_TAKEN_FAIL: EEXIST; by default a new producer (a child) takes
   * it over. */
  CHECK(spawn_wait("replace", name) == 0);
  {
    latte_region_info info;
    CHECK(latte_reader_open(name, &r) == 0);
    CHECK(latte_reader_get_info(r, &info) == 0 && info.slot_capacity == 4 && info.samples_per_slot == 1024);
    latte_reader_close(r);
  }
  /* The name of a live producer (us) is never replaced. */
  CHECK(spawn_wait("live", region_name) == 0);
  CHECK(latte_region_unlink(name) == 0);
  CHECK(latte_region_unlink(name) == -ENOENT);
  /* A program run twice under one name, the first run having exited: the
   * second run's latte_init_shared_region succeeds, and the name then
   * holds the second run's samples only, under its pid. */
  {
    pid_t first, second;
    snprintf(name, sizeof name, "%s-rerun", region_name);
    first = spawn("producer", name, "exit");
    CHECK(waitpid(first, &status, 0) == first && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(run_reader(self, name, expect, 1) == 0);
    second = spawn("producer", name, "exit");
    CHECK(waitpid(second, &status, 0) == second && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(run_reader(self, name, expect, 1) == 0);
    {
      latte_region_info info;
      CHECK(latte_reader_open(name, &r) == 0);
      CHECK(latte_reader_get_info(r, &info) == 0 && info.producer_pid == (uint32_t)second);
      latte_reader_close(r);
    }
    CHECK(latte_region_unlink(name) == 0);
  }
}

/* Many C readers of one region at once, far past one chunk of the fault
 * table (64): every one opens and reads the same counters. */
static void many_readers_at_once(void) {
  enum { READERS = 200 };
  static latte_reader *rs[READERS];
  latte_counters c0, c;
  int i, opened = 0, same = 0;
  memset(&c0, 0, sizeof c0);
  CHECK(latte_region_get_counters(&c0) == 0);
  for (i = 0; i < READERS; i++) {
    rs[i] = NULL;
    if (latte_reader_open(region_name, &rs[i]) == 0) opened++;
  }
  for (i = 0; i < READERS; i++)
    if (rs[i] && latte_reader_get_counters(rs[i], &c) == 0 && c.threads_seen == c0.threads_seen) same++;
  for (i = 0; i < READERS; i++) latte_reader_close(rs[i]);
  CHECK_EQ_U(opened, READERS);
  CHECK_EQ_U(same, READERS);
}

static void fork_child_never_writes_parent(char *self) {
  int status;
  pid_t pid;
  const char *expect[] = {"fork.span=3"};
  int i;
  for (i = 0; i < 3; i++) {
    latte_start_inline("fork.span", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  pid = fork();
  if (pid == 0) {
    for (i = 0; i < 50; i++) {
      latte_start_inline("fork.span", LATTE_MODE_FAST);
      latte_stop_inline(NULL, LATTE_MODE_FAST);
      latte_start("fork.child", LATTE_MODE_FAST);
      latte_stop(NULL, LATTE_MODE_FAST);
    }
    {
      size_t n = 0;
      latte_samples_snapshot("fork.span", NULL, 0, &n);
      _exit(n == 53 ? 0 : 6);
    }
  }
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(run_reader(self, region_name, expect, 1) == 0);
}

static void bigger_than_dev_shm(void) {
  /* A first chunk of 65536 rings of 65536 samples: 64 GiB of address space,
   * more than /dev/shm holds. Ring memory is committed as it is written, so
   * the region is made and records (in a child that has not recorded yet),
   * holding a few pages, not its size. */
  int status;
  pid_t pid = fork();
  if (pid == 0) {
    latte_region_config cfg;
    latte_counters c;
    char name[80];
    int rc, ok;
    memset(&cfg, 0, sizeof cfg);
    cfg.slot_capacity = 65536;
    cfg.samples_per_slot = 65536;
    snprintf(name, sizeof name, "%s-huge", region_name);
    rc = latte_init_shared_region_with(name, &cfg);
    latte_start("huge.span", LATTE_MODE_FAST);
    latte_stop(NULL, LATTE_MODE_FAST);
    ok = rc == 0 && latte_region_get_counters(&c) == 0 && c.slots_used == 1 && c.committed_bytes <= 3 * 4096;
    latte_region_unlink(name);
    _exit(ok ? 0 : 7);
  }
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
  latte_region_config cfg;
  const char *expect[] = {"proc.a=1000", "proc.b=10", "<null-id>=1"};
  int i;
  if (argc > 2 && strcmp(argv[1], "reader") == 0) return reader_main(argc, argv);
  if (argc > 3 && strcmp(argv[1], "producer") == 0) return producer_main(argv);
  if (argc > 2 && strcmp(argv[1], "replace") == 0) return replace_main(argv);
  if (argc > 2 && strcmp(argv[1], "live") == 0) return live_main(argv);
  if (argc > 2 && strcmp(argv[1], "truncate") == 0) return truncate_main(argv);
  if (argc > 2 && strcmp(argv[1], "late") == 0) return late_main(argv);
  snprintf(region_name, sizeof region_name, "/latte-test-shared-%d", (int)getpid());
  bigger_than_dev_shm();
  memset(&cfg, 0, sizeof cfg);
  cfg.slot_capacity = 32;
  CHECK(latte_intern_id("interned-before-init") == 0);
  CHECK(latte_init_shared_region_with(region_name, &cfg) == 0);
  for (i = 0; i < 1000; i++) {
    latte_start_inline("proc.a", LATTE_MODE_FAST);
    latte_stop_inline(NULL, LATTE_MODE_FAST);
  }
  for (i = 0; i < 10; i++) {
    latte_start("proc.b", LATTE_MODE_MID);
    latte_stop(NULL, LATTE_MODE_MID);
  }
  latte_start(NULL, LATTE_MODE_FAST);
  latte_stop(NULL, LATTE_MODE_FAST);
  CHECK(run_reader(argv[0], region_name, expect, 3) == 0);
  inline_equals_abi();
  mixed_paths_share_one_stack();
  pulse_sites_share_a_ring();
  inline_durations_out_of_range();
  polling_reader_is_paced();
  reserved_ids_are_flagged();
  names_and_collisions();
  survives_sigkill_and_stale_names(argv[0]);
  many_readers_at_once();
  fork_child_never_writes_parent(argv[0]);
  {
    char tname[80];
    snprintf(tname, sizeof tname, "%s-trunc", region_name);
    CHECK_EQ_U(spawn_wait("truncate", tname), 0);
    snprintf(tname, sizeof tname, "%s-late", region_name);
    CHECK_EQ_U(spawn_wait("late", tname), 0);
    CHECK(latte_region_unlink(tname) == (can_move() ? 0 : -ENOENT));
  }
  capacity_grows();
  reader_follows_growth();
  {
    char name[64];
    CHECK(latte_id_name(0, name, sizeof name) > 0 && strcmp(name, "interned-before-init") == 0);
  }
  CHECK(latte_region_unlink(region_name) == 0);
  return check_summary("c shared");
}

#else /* LATTE_DISABLE: every entry point is a no-op */

int main(void) {
  latte_reader *r = (latte_reader *)1;
  latte_region_config cfg;
  memset(&cfg, 0, sizeof cfg);
  CHECK(latte_init_shared_region("/x") == 0);
  CHECK(latte_init_shared_region_with("/x", &cfg) == 0);
  CHECK(latte_reader_open("/x", &r) == LATTE_ERR_NOT_SUPPORTED && r == NULL);
  CHECK(latte_reader_id_count(r) == 0);
  CHECK(latte_reader_set_min_interval(r, 5) == 0);
  CHECK(latte_reader_id_is_reserved(r, 0) == 0);
  CHECK(strcmp(latte_version(), LATTE_VERSION_STRING) == 0);
  CHECK(latte_region_unlink("/x") == 0);
  return check_summary("c shared (disabled)");
}

#endif
