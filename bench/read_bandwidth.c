/* Read bandwidth of one core over a file's mapping (as a llama2.c runner reads its checkpoint): the best of
 * PASSES sums of every 64-bit word, in GB/s. scripts/llama_peers.sh compares a runner's bytes per second with it.
 *   read_bandwidth FILE [PASSES]   (prints "read bandwidth: X GB/s over N bytes") */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: read_bandwidth FILE [PASSES]\n");
    return 1;
  }
  const int passes = argc > 2 ? atoi(argv[2]) : 20;
  const int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 64 || passes < 1) {
    fprintf(stderr, "read_bandwidth: cannot read %s\n", argv[1]);
    return 1;
  }
  const size_t words = (size_t)st.st_size / 64 * 8;
  const uint64_t* p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    fprintf(stderr, "read_bandwidth: cannot map %s\n", argv[1]);
    return 1;
  }
  double best = 0;
  uint64_t check = 0;
  for (int r = 0; r < passes; ++r) {
    const double t0 = now();
    uint64_t s[8] = {0}; /* eight independent sums: the compiler's vectors, no dependency chain */
    for (size_t i = 0; i < words; i += 8)
      for (int j = 0; j < 8; ++j) s[j] += p[i + j];
    const double t = now() - t0;
    for (int j = 0; j < 8; ++j) check += s[j];
    if (t > 0 && words * 8 / t > best) best = words * 8 / t;
  }
  printf("read bandwidth: %.1f GB/s over %zu bytes (checksum %llu)\n", best / 1e9, words * 8,
         (unsigned long long)(check & 0xff));
  return 0;
}
