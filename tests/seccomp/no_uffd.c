/* no_uffd PROGRAM [ARG...]: runs PROGRAM where the userfaultfd system call
 * fails with EPERM (a seccomp filter, as a container runtime's default
 * profile installs for unprivileged containers), so that the tests see
 * latte on a kernel that cannot pause writers: a region asked for after
 * recording began is refused with -EBUSY (tests/c/can_move.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (argc < 2) {
    fprintf(stderr, "usage: no_uffd PROGRAM [ARG...]\n");
    return 2;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("no_uffd: seccomp");
    return 2;
  }
  execvp(argv[1], argv + 1);
  perror("no_uffd: exec");
  return 127;
}
