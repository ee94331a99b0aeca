// SPDX-License-Identifier: MIT
/* tests/init/footprint.c: a program's allocations read none of the
 * library's read-only data segment (.rodata: the report's strings and
 * formats, the profiler's constants; .eh_frame, for the unwinder).
 *
 * Every process that preloads or links the library maps it, and a single
 * read anywhere in that segment makes the kernel map all of its pages
 * (fault-around: 64 KiB around a fault), 32 KiB of RSS in every process,
 * which mimalloc-bench's small rows count (docs/perf.md §57). So the data
 * that malloc and free read (the class table, the strings start-up passes
 * to the OS) lives beside the writable data instead, and GCC is kept from
 * loading constants for merged and vectorised stores from .rodata. Any
 * change that brings a read back (a table, a switch, a 16-byte constant)
 * fails here: the test allocates every size class, large and huge blocks,
 * aligned and zeroed ones, grows and shrinks them, frees blocks across
 * threads and waits for the purge thread, then looks at the segment's
 * pages in /proc/self/pagemap: none may be mapped. */
#include "check.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uintptr_t ro_start, ro_end;

static int find_rodata(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size, (void)arg;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libhakozuna") == NULL) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    /* the read-only segment after the code (the first holds the headers
     * and symbols, which the dynamic loader reads) */
    if (ph->p_type == PT_LOAD && ph->p_flags == PF_R && ph->p_offset != 0) {
      ro_start = info->dlpi_addr + ph->p_vaddr;
      ro_end = ro_start + ph->p_memsz;
    }
  }
  return 1;
}

#define N 4096
static void *blocks[N];

static void *worker(void *arg) {
  void **theirs = arg;
  for (int i = 0; i < N; i++) free(theirs[i]); /* remote frees */
  for (int i = 0; i < N; i++) theirs[i] = malloc(16 + (size_t)i * 8 % 30000);
  return NULL;
}

static int purge_thread_named(void) {
  DIR *d = opendir("/proc/self/task");
  int found = 0;
  for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;) {
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t k = read(fd, comm, sizeof comm - 1);
    close(fd);
    found = k > 0 && strncmp(comm, "hakozuna-purge", 14) == 0;
  }
  if (d != NULL) closedir(d);
  return found;
}

/* Pages of [start, end) mapped in this process, each named on stderr. */
static long mapped_pages(int fd, uintptr_t start, uintptr_t end, const char *what) {
  long page = sysconf(_SC_PAGESIZE), mapped = 0;
  for (uintptr_t p = start & ~(uintptr_t)(page - 1); p < end; p += (uintptr_t)page) {
    uint64_t e = 0;
    CHECK(pread(fd, &e, sizeof e, (off_t)(p / (uintptr_t)page * sizeof e)) == sizeof e);
    if (e >> 63) {
      mapped++;
      fprintf(stderr, "page at +0x%lx of %s is mapped\n", (unsigned long)(p - start), what);
    }
  }
  return mapped;
}

TEST_MAIN() {
  dl_iterate_phdr(find_rodata, NULL);
  if (ro_start == 0) {
    printf("SKIP: no separate read-only data segment in libhakozuna (not linked with it?)\n");
    return 77;
  }
  /* every small class, medium and large blocks, a huge one */
  for (size_t i = 0; i < N; i++) blocks[i] = malloc(1 + i * 8);
  void *big[] = {malloc(40000), malloc(300000), malloc(1 << 20), malloc(3 << 20), calloc(1000, 33)};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) CHECK(big[i] != NULL), memset(big[i], 1, 1000);
  for (size_t i = 0; i < N; i += 2) blocks[i] = realloc(blocks[i], 1 + i * 12);
  for (size_t i = 1; i < N; i += 2) blocks[i] = realloc(blocks[i], i / 2 + 1);
  void *a = NULL;
  CHECK(posix_memalign(&a, 4096, 5000) == 0);
  void *b = aligned_alloc(65536, 65536), *c = memalign(64, 100);
  CHECK(malloc_usable_size(c) >= 100);
  free(a), free(b), free(c);
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) free(big[i]);
  /* blocks freed by another thread, and its blocks freed here after it exits */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, blocks) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < N; i++) free(blocks[i]);
  malloc_trim(0);
  /* the purge thread names itself when it starts (a system call that
   * reads the name): wait for it, up to 10 s */
  int named = 0;
  for (int tries = 0; tries < 1000 && !(named = purge_thread_named()); tries++) {
    void *p = malloc(1 << 16); /* (frees that wake it) */
    free(p);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  CHECKF(named, "the purge thread did not start");

  int fd = open("/proc/self/pagemap", O_RDONLY);
  CHECK(fd >= 0);
  long mapped = mapped_pages(fd, ro_start, ro_end, "the read-only data segment");
  CHECKF(mapped == 0,
         "%ld of the library's read-only data pages are mapped: something on these paths reads .rodata "
         "(perf record -e page-faults -d finds the instruction)",
         mapped);
  close(fd);
  return 0;
}
