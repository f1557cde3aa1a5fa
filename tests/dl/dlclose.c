/* liblatte loaded with dlopen, used (which installs its SIGBUS handler),
 * then unloaded with dlclose: a later SIGBUS that is not latte's must still
 * kill the process with SIGBUS (the handler from before latte was loaded,
 * here the default), not jump into unmapped code (SIGSEGV).
 * Then loaded again and recorded from a thread that ends after the
 * dlclose: the library stays loaded (the thread's end runs latte's key
 * destructor, src/recorder/exit.rs), and the thread ends cleanly. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static sem_t g_recorded, g_closed;
static void (*g_start)(const char *, unsigned);
static unsigned long long (*g_stop)(const char *, unsigned);

static void *recorder(void *arg) {
  (void)arg;
  g_start("dlclose.thread", 0);
  g_stop(NULL, 0);
  sem_post(&g_recorded);
  sem_wait(&g_closed);
  return NULL; /* latte's key destructor runs now */
}

/* A thread records through a second load, the library is closed, the
 * thread ends: 1 when the library stayed loaded and the thread ended. */
static int record_across_dlclose(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  *(void **)(&g_start) = dlsym(h, "latte_start");
  *(void **)(&g_stop) = dlsym(h, "latte_stop");
  if (!g_start || !g_stop) return 0;
  sem_init(&g_recorded, 0, 0);
  sem_init(&g_closed, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, recorder, NULL) != 0) return 0;
  sem_wait(&g_recorded);
  dlclose(h);
  void *again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  int stayed = again != NULL;
  if (again) dlclose(again);
  sem_post(&g_closed);
  pthread_join(t, NULL);
  printf("dlclose: after a thread recorded, library stayed loaded: %d\n", stayed);
  return stayed;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  /* POSIX's way to take a function from dlsym (ISO C has no object-to-function cast). */
  int (*init)(const char *);
  int (*unlink_region)(const char *);
  *(void **)(&init) = dlsym(h, "latte_init_shared_region");
  *(void **)(&unlink_region) = dlsym(h, "latte_region_unlink");
  if (!init || !unlink_region) return 1;
  char name[64];
  snprintf(name, sizeof name, "/latte-test-dlclose-%d", (int)getpid());
  if (init(name) != 0) {
    fprintf(stderr, "init_shared_region failed\n");
    return 1;
  }
  unlink_region(name);
  struct sigaction now;
  sigaction(SIGBUS, NULL, &now);
  int installed = now.sa_handler != SIG_DFL;
  dlclose(h);
  int unloaded = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) == NULL;
  printf("dlclose: handler installed while loaded: %d, library unloaded: %d\n", installed, unloaded);
  /* A SIGBUS of the program's own: a page of a file past its end. */
  pid_t pid = fork();
  if (pid == 0) {
    char path[] = "/tmp/latte-dlclose-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 4096) != 0) _exit(3);
    volatile char *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    unlink(path);
    if (p == MAP_FAILED || ftruncate(fd, 0) != 0) _exit(3);
    (void)p[0];
    _exit(4); /* not reached */
  }
  int st = 0;
  waitpid(pid, &st, 0);
  /* Nothing recorded: nothing keeps the library loaded. */
  int sigbus_ok = installed && unloaded && WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS;
  if (!sigbus_ok) printf("dlclose: the program's own SIGBUS ended as %s %d\n", WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  int thread_ok = record_across_dlclose(argv[1]);
  int passed = sigbus_ok + thread_ok;
  printf("dlclose: %d passed, %d failed\n", passed, 2 - passed);
  return passed == 2 ? 0 : 1;
}
