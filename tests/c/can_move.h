/* can_move: whether this kernel lets a process pause the threads that
 * write into memory with userfaultfd write-protection (also of pages never
 * written), which latte's move of a region after recording began needs
 * (src/pause.rs). Where it cannot, latte_init_shared_region after
 * recording began returns -EBUSY, and the tests expect that instead of the
 * move. The kernel's values, as pause.rs states them. */
#ifndef LATTE_TEST_CAN_MOVE_H
#define LATTE_TEST_CAN_MOVE_H
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* userfaultfd's flag for faults from user space only (Linux 5.11). */
#define CAN_MOVE_USER_MODE_ONLY 1
/* UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED (Linux 6.4). */
#define CAN_MOVE_FEATURES ((1ULL << 0) | (1ULL << 13))

static inline int can_move(void) {
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | CAN_MOVE_USER_MODE_ONLY);
  struct uffdio_api api;
  int ok;
  if (fd < 0) fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  api.api = UFFD_API;
  api.features = CAN_MOVE_FEATURES;
  api.ioctls = 0;
  ok = ioctl((int)fd, UFFDIO_API, &api) == 0 && (api.features & CAN_MOVE_FEATURES) == CAN_MOVE_FEATURES;
  close((int)fd);
  return ok;
}
#endif
