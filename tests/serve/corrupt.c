// Corrupts the first slot of the shared region argv[1] as a hostile writer
// of /dev/shm would: its ID token is set past every ID the region holds.
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "latte.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char path[512];
  snprintf(path, sizeof path, "/dev/shm%s", argv[1]);
  int fd = open(path, O_RDWR);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(path);
    return 1;
  }
  uint8_t *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  latte_region_header *h = (latte_region_header *)base;
  latte_slot_header *s = (latte_slot_header *)(base + h->slot_chunks[0]);
  s->id_token = 0x7fffffff;
  munmap(base, (size_t)st.st_size);
  close(fd);
  return 0;
}
