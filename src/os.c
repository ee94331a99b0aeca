// SPDX-License-Identifier: MIT
/* The platform layer: every call into the kernel goes through here, so the
 * rest of the allocator is portable and the calls are counted for stats. */
#define _GNU_SOURCE
/* Windows has src/os_windows.c. */
#ifndef _WIN32
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <sys/auxv.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HZ_HAVE_SINGLE_THREADED 1
#endif
#endif

#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#define MADV_NOHUGEPAGE 15
#endif

hz_os_counters_t hz_os_stats;
size_t hz_os_page_size = 4096;
static size_t os_real_page_size = 4096; /* hz_os_page_size may be assumed larger */

static void count(_Atomic uint64_t *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

/* Start-up runs before malloc works, so nothing here may allocate: the page
 * size comes from the auxiliary vector, not sysconf (older glibcs allocate in
 * sysconf, and a preloaded sysconf may too). */
/* RLIMIT_AS as it was at start-up: read once, because a sandbox may end the
 * process for the system call later (OpenSSH's pre-authentication child
 * kills on prlimit64, which is what glibc's getrlimit makes; a region of
 * segments reserved there killed it). A limit the program sets later shows
 * when a reservation fails (arena.c). */
static rlim_t os_as_limit = RLIM_INFINITY;

void hz_os_init(void) {
  unsigned long ps = getauxval(AT_PAGESZ);
  if (ps >= 4096 && (ps & (ps - 1)) == 0) hz_os_page_size = os_real_page_size = (size_t)ps;
  struct rlimit r;
  int errno_saved = errno;
  if (getrlimit(RLIMIT_AS, &r) == 0) os_as_limit = r.rlim_cur;
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
}

/* A set-user-ID, set-group-ID or capability-gaining program (the kernel's
 * AT_SECURE): its environment is its caller's, not to be trusted. */
bool hz_os_secure(void) { return getauxval(AT_SECURE) != 0; }

/* CPUs this process may run on, without allocating (sysconf's CPU count
 * reads /sys with opendir in some glibcs). */
unsigned hz_os_cpu_count(void) {
  cpu_set_t set;
  int errno_saved = errno;
  long r = syscall(SYS_sched_getaffinity, 0, sizeof set, &set);
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  if (r <= 0) return 1;
  int n = CPU_COUNT_S((size_t)r, &set);
  return n > 0 ? (unsigned)n : 1;
}

/* The CPU this thread runs on now, or -1 if the OS will not say (glibc reads
 * it from the thread's rseq area: no system call). */
int hz_os_current_cpu(void) {
  int errno_saved = errno;
  int cpu = sched_getcpu();
  errno = errno_saved;
  return cpu;
}

static void os_unmap(void *p, size_t size) {
  int errno_saved = errno;
  if (munmap(p, size) != 0) hz_warning("munmap(%p, %zu) failed (errno %d)", p, size, errno);
  errno = errno_saved;
  count(&hz_os_stats.munmap_calls, 1);
}

/* Map size bytes aligned to align (a power of two >= page size). Over-map and
 * trim, because mmap only promises page alignment. */
static void *os_map_anywhere(size_t size, size_t align, int prot, int flags) {
  int errno_saved = errno;
  size_t extra = align > hz_os_page_size ? align : 0;
  if (size + extra < size) return NULL;
  void *p = mmap(NULL, size + extra, prot, flags, -1, 0);
  count(&hz_os_stats.mmap_calls, 1);
  if (p == MAP_FAILED) hz_verbose("mmap of %zu bytes failed (errno %d)", size + extra, errno);
  errno = errno_saved; /* callers report ENOMEM themselves */
  if (p == MAP_FAILED) return NULL;
  if (extra) { /* the trimmed ends were never counted as mapped */
    uintptr_t a = (uintptr_t)p, aligned = (a + align - 1) & ~(uintptr_t)(align - 1);
    if (aligned > a) os_unmap(p, aligned - a);
    size_t tail = (a + size + extra) - (aligned + size);
    if (tail) os_unmap((void *)(aligned + size), tail);
    p = (void *)aligned;
  }
  return p;
}

/* What the segment map describes (segments, huge blocks: align >= a
 * segment) must lie below 2^HZ_VA_BITS, the part of the address space the
 * map covers, so that the map takes 4 MiB of address space and not 32 (a
 * program under `ulimit -v` has that much less). The kernel places mappings
 * just below the stack, near 2^47: each is asked for at an address of the
 * window [2^40, 2^44) instead, from 2^43 up, then again from 2^40 once the
 * cursor passes the end (what was unmapped since is free again). The
 * address is taken only if free (MAP_FIXED_NOREPLACE; a kernel before 4.17
 * takes it as a hint and answers elsewhere when it is not). Where the
 * kernel's own choice is inside the window (arm64 kernels with 39 or 42
 * address bits refuse the hints, valgrind places its client low), that is
 * taken, and from then on asked for first. */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#define OS_WINDOW_LO ((uintptr_t)1 << (HZ_VA_BITS - 4))
#define OS_WINDOW_HI ((uintptr_t)1 << HZ_VA_BITS)
static _Atomic uintptr_t os_window_next = (uintptr_t)1 << (HZ_VA_BITS - 1);
static _Atomic bool os_window_native; /* the kernel places mappings inside the window */

static void *os_map_in_window(size_t size, size_t align, int prot, int flags) {
  void *p = os_map_anywhere(size, align, prot, flags);
  if (p == NULL || (uintptr_t)p + size <= OS_WINDOW_HI) return p;
  os_unmap(p, size);
  return NULL;
}

static void *os_map_window(size_t size, size_t align, int prot, int flags) {
  void *got;
  if (size > OS_WINDOW_HI - OS_WINDOW_LO) return NULL; /* (15 TiB) */
  if (atomic_load_explicit(&os_window_native, memory_order_relaxed) &&
      (got = os_map_in_window(size, align, prot, flags)) != NULL)
    return got;
  int errno_saved = errno, elsewhere = 0;
  got = NULL;
  for (int tries = 0; tries < 64 && got == NULL && elsewhere < 8; tries++) {
    uintptr_t at = atomic_load_explicit(&os_window_next, memory_order_relaxed), want, end;
    do {
      want = (at + align - 1) & ~(uintptr_t)(align - 1);
      end = want + size;
      if (end > OS_WINDOW_HI || end < want) want = OS_WINDOW_LO, end = want + size;
    } while (!atomic_compare_exchange_weak_explicit(&os_window_next, &at, end, memory_order_relaxed,
                                                    memory_order_relaxed));
    void *p = mmap((void *)want, size, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
    count(&hz_os_stats.mmap_calls, 1);
    if (p == (void *)want) got = p;
    else if (p != MAP_FAILED && ((uintptr_t)p & (align - 1)) == 0 && (uintptr_t)p + size <= OS_WINDOW_HI) got = p;
    else if (p != MAP_FAILED) os_unmap(p, size), elsewhere++; /* (an answer elsewhere: the address was taken) */
    else if (errno != EEXIST) break;
  }
  errno = errno_saved;
  if (got == NULL && (got = os_map_in_window(size, align, prot, flags)) != NULL)
    atomic_store_explicit(&os_window_native, true, memory_order_relaxed);
  return got;
}

/* Transparent huge pages. With HAKOZUNA_THP=1 every mapping of ours asks
 * for them. Without it regions of segments ask for none, also where the
 * kernel's policy is "always" (Fedora's, RHEL's, Arch's default): there a
 * segment's first touched byte made 2 MiB resident, and khugepaged filled
 * the 2 MiB ranges whose pages the purge had returned. So do huge blocks'
 * mappings under 16 MiB, whose last 2 MiB page held up to 1.8 MiB past a
 * 2.2 MB block; bigger ones follow the kernel's policy, as glibc's do: the
 * most a 2 MiB page wastes there is an eighth, and 4 KiB faults took 40 MB
 * blocks 1.9x the time (docs/perf.md §62). */
#define OS_THP_KERNEL_MIN ((size_t)16 << 20)
static bool os_thp_kernel(size_t mapping) { return !hz_opt(HZ_OPTION_THP) && mapping >= OS_THP_KERNEL_MIN; }
static void os_advise_thp(void *p, size_t size) {
  int errno_saved = errno;
  (void)madvise(p, size, hz_opt(HZ_OPTION_THP) ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  errno = errno_saved;
  count(&hz_os_stats.madvise_calls, 1);
}

static void *os_map(size_t size, size_t align, int prot, int flags, bool region) {
  flags |= MAP_PRIVATE | MAP_ANONYMOUS;
  void *p = HZ_MAP_WINDOW && align >= HZ_SEG_SIZE ? os_map_window(size, align, prot, flags)
                                                 : os_map_anywhere(size, align, prot, flags);
  if (p != NULL) {
    count(&hz_os_stats.bytes_mapped, size);
    if (region || !os_thp_kernel(size)) os_advise_thp(p, size);
  }
  return p;
}

/* Charged against the commit limit, as glibc's own mappings are: under the
 * default heuristic overcommit a request larger than memory and swap fails
 * with ENOMEM (a program that asked for 2^46 bytes to see malloc fail got
 * them, and the OOM killer ended it when it used them). */
void *hz_os_map(size_t size, size_t align) { return os_map(size, align, PROT_READ | PROT_WRITE, 0, false); }
/* The arena's regions of segments are address space taken ahead (arena.c
 * says when they are reserved closed, to be opened a segment at a time). */
void *hz_os_reserve(size_t size, size_t align, bool closed) {
  return os_map(size, align, closed ? PROT_NONE : PROT_READ | PROT_WRITE, MAP_NORESERVE, true);
}
bool hz_os_commit(void *p, size_t size) { return hz_os_readonly(p, size, false) == 0; }

/* Memory given back with munmap counts as returned, like madvise's. */
void hz_os_unmap(void *p, size_t size) {
  os_unmap(p, size);
  count(&hz_os_stats.bytes_returned, size);
}

/* Moves the pages of [from, from + size) to `to` (inside a mapping of ours,
 * which they replace) and maps fresh pages at `from`: resident memory
 * changes place without faulting a page in or copying a byte. (Linux 5.7's
 * MREMAP_DONTUNMAP would do it in one call, but qemu-user loses track of the
 * source range.) 0; -errno if nothing moved; 1 if the pages moved but
 * `from` could not be mapped again and is now a hole. */
int hz_os_move(void *from, void *to, size_t size, size_t from_mapping) {
  int errno_saved = errno, r = 0;
  void *back;
  if (mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED)
    r = -errno;
  /* Between the two calls `from` is a hole that another thread's mmap may
   * take: map it again only if it is still free (MAP_FIXED replaced that
   * mapping, silently; kernels before 4.17 take the flag as a hint). */
  else if ((back = mmap(from, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0)) != from) {
    if (back != MAP_FAILED) munmap(back, size);
    r = 1;
  } else {
    if (!os_thp_kernel(from_mapping)) os_advise_thp(from, size); /* (as its mapping was) */
  }
  errno = errno_saved;
  count(&hz_os_stats.other_calls, r < 0 ? 1 : 2);
  return r;
}

/* Moves a whole mapping [from, from + size) to `to` (inside a mapping of
 * ours, which it replaces), leaving nothing at `from`: a huge block grows
 * without a copy. 0; -errno if nothing moved (a range of several kernel
 * mappings: EFAULT). */
int hz_os_relocate(void *from, void *to, size_t size) {
  int errno_saved = errno, r = 0;
  if (mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) r = -errno;
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return r;
}

/* MADV_DONTNEED, not MADV_FREE: RSS drops at once (what users watch), and the
 * pages read back as zero, which lets calloc skip clearing them. The pages
 * of a process that locked its memory (mlockall) cannot be dropped: EINVAL.
 * They are zeroed instead, as the callers count on (calloc returned blocks
 * of freed 0xff bytes), and stay resident, as the program asked. (The
 * checked build's pool may hold closed spans: opened first.) */
void hz_os_purge(void *p, size_t size) {
  uintptr_t lo = ((uintptr_t)p + hz_os_page_size - 1) & ~(uintptr_t)(hz_os_page_size - 1);
  uintptr_t hi = ((uintptr_t)p + size) & ~(uintptr_t)(hz_os_page_size - 1);
  if (hi <= lo) return;
  int errno_saved = errno;
  count(&hz_os_stats.madvise_calls, 1);
  if (madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0) {
    count(&hz_os_stats.bytes_returned, hi - lo);
    errno = errno_saved;
    return;
  }
  static _Atomic bool told;
  if (!atomic_exchange_explicit(&told, true, memory_order_relaxed))
    hz_verbose("madvise(MADV_DONTNEED) failed (errno %d%s): freed memory is cleared instead of returned", errno,
               errno == EINVAL ? ", locked memory: mlockall?" : "");
  if (HZ_CHECKED) {
    (void)mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE);
    count(&hz_os_stats.mprotect_calls, 1);
  }
  memset((void *)lo, 0, hi - lo);
  errno = errno_saved;
}

/* Zeros size bytes, writing only the pages that are resident: the others
 * read zero already, or do once madvise drops them (a page swapped out
 * holds its data until then). A reused buffer that the program used
 * sparsely stays sparse (a 64 MiB calloc'ed block, a few pages of it used
 * each time: 1.6 MiB resident where writing zeros over it made 64), and
 * one it used whole is cleared at memset's speed, where dropping its pages
 * made the program fault them in again at ~5x the cost (docs/perf.md §68).
 * Short runs of absent pages are written: one madvise call each would cost
 * more. Which pages are there comes from /proc/self/pagemap, not mincore:
 * sandboxes that allow what glibc's malloc needs kill the process for
 * mincore (systemd's SystemCallFilter=@system-service, OpenSSH's filter),
 * and refuse an open at most (then everything is written). */
#define OS_CLEAR_MIN ((size_t)1 << 20)
#define OS_CLEAR_RUN 16 /* pages */
#define OS_PAGEMAP_THERE ((uint64_t)3 << 62) /* present, or swapped out */
void hz_os_clear(void *p, size_t size) {
  uintptr_t a = (uintptr_t)p, ps = os_real_page_size; /* (pagemap's unit) */
  uintptr_t lo = (a + ps - 1) & ~(ps - 1), hi = (a + size) & ~(ps - 1);
  if (size < OS_CLEAR_MIN || hi <= lo) {
    memset(p, 0, size);
    return;
  }
  memset(p, 0, lo - a);
  memset((void *)hi, 0, a + size - hi);
  uint64_t map[256]; /* (a thread's stack may be small) */
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  count(&hz_os_stats.other_calls, 1);
  for (uintptr_t at = lo; at < hi;) {
    size_t pages = (hi - at) / ps < sizeof map / sizeof map[0] ? (hi - at) / ps : sizeof map / sizeof map[0];
    count(&hz_os_stats.other_calls, 1);
    size_t want = pages * sizeof map[0];
    if (fd < 0 || pread(fd, map, want, (off_t)(at / ps * sizeof map[0])) != (ssize_t)want)
      for (size_t i = 0; i < pages; i++) map[i] = OS_PAGEMAP_THERE;
    for (size_t i = 0, j; i < pages; i = j) {
      bool in = (map[i] & OS_PAGEMAP_THERE) != 0;
      for (j = i + 1; j < pages && ((map[j] & OS_PAGEMAP_THERE) != 0) == in; j++) {}
      uintptr_t q = at + i * ps, e = at + j * ps, big = hz_os_page_size;
      uintptr_t ql = (q + big - 1) & ~(big - 1), el = e & ~(big - 1); /* (hz_os_purge's pages) */
      if (in || j - i < OS_CLEAR_RUN || el <= ql) {
        memset((void *)q, 0, e - q);
        continue;
      }
      memset((void *)q, 0, ql - q);
      hz_os_purge((void *)ql, el - ql);
      memset((void *)el, 0, e - el);
    }
    at += pages * ps;
  }
  if (fd >= 0) close(fd);
  hz_os_nocancel_end(cs);
  errno = errno_saved;
}

int hz_os_protect(void *p, size_t size, bool accessible) {
  int errno_saved = errno;
  int r = mprotect(p, size, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) == 0 ? 0 : -errno;
  errno = errno_saved;
  count(&hz_os_stats.mprotect_calls, 1);
  return r;
}

/* Opening (readonly false) maps the range again where mprotect is refused
 * (a sandbox may refuse it and not mmap): callers open only what they own
 * and nothing has written yet, whose fresh pages are as good. */
int hz_os_readonly(void *p, size_t size, bool readonly) {
  int errno_saved = errno;
  int r = mprotect(p, size, readonly ? PROT_READ : PROT_READ | PROT_WRITE) == 0 ? 0 : -errno;
  count(&hz_os_stats.mprotect_calls, 1);
  if (r != 0 && !readonly) {
    static _Atomic bool told;
    if (!atomic_exchange_explicit(&told, true, memory_order_relaxed))
      hz_verbose("mprotect failed (errno %d); opening reserved memory by mapping it again", -r);
    if (mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == p)
      r = 0;
    count(&hz_os_stats.mmap_calls, 1);
  }
  errno = errno_saved;
  return r;
}

/* getrandom(2) without libc's wrapper (older libcs lack it); never blocks
 * forever: GRND_NONBLOCK, and a clock/address mix as the fallback. */
uint64_t hz_os_random(void) {
  uint64_t r = 0;
  int errno_saved = errno;
  long n = syscall(SYS_getrandom, &r, sizeof r, 1 /* GRND_NONBLOCK */);
  errno = errno_saved;
  if (n != (long)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&r ^ (uint64_t)getpid() << 32;
  }
  r ^= r >> 31; r *= 0xbf58476d1ce4e5b9ull; r ^= r >> 29;
  return r ? r : 0x5bd1e9955bd1e995ull;
}

uint64_t hz_os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* open, read, write and close are cancellation points: a thread with a
 * deferred cancel pending that reached them from malloc or free (a message,
 * a guard page's count of mappings, a report) was unwound out of the
 * allocator with its heap claimed or a lock held, its work half done.
 * Every file call here runs with cancellation disabled; the caller's state
 * comes back after, so a pending cancel acts at its next cancellation
 * point. (pthread_setcancelstate leaves errno alone.) */
int hz_os_nocancel_begin(void) {
  int old = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  return old;
}

void hz_os_nocancel_end(int old) {
  int dummy;
  pthread_setcancelstate(old, &dummy);
}

void hz_os_write(int fd, const char *s, size_t n) {
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    s += w; n -= (size_t)w;
  }
  hz_os_nocancel_end(cs);
  errno = errno_saved;
}

/* Resident set from /proc/self/statm, read without stdio (no allocation). */
size_t hz_os_rss(void) {
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  char buf[128];
  size_t rss = 0;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
      buf[n] = 0;
      const char *q = buf;
      while (*q && *q != ' ') q++;
      while (*q == ' ') q++;
      while (*q >= '0' && *q <= '9') rss = rss * 10 + (size_t)(*q++ - '0');
      rss *= os_real_page_size;
    }
  }
  hz_os_nocancel_end(cs);
  errno = errno_saved;
  return rss;
}

/* The kernel's limit on a process's mappings (vm.max_map_count), and how
 * many this one has (a line each in /proc/self/maps); -1 if unknown. Read
 * without stdio: no allocation. */
static long read_count(const char *path, bool lines) {
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  long v = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[4096];
    ssize_t n;
    bool digits = false;
    v = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < n; i++) {
        if (lines) v += buf[i] == '\n';
        else if (buf[i] >= '0' && buf[i] <= '9') v = v * 10 + (buf[i] - '0'), digits = true;
        else if (digits) break;
      }
      if (!lines && digits) break;
    }
    close(fd);
    if (n < 0 || (!lines && !digits)) v = -1;
  }
  hz_os_nocancel_end(cs);
  errno = errno_saved;
  return v;
}
long hz_os_map_limit(void) { return read_count("/proc/sys/vm/max_map_count", false); }
bool hz_os_overcommit_strict(void) {
  static hz_hot_const const char path[] = "/proc/sys/vm/overcommit_memory"; /* (read at start-up) */
  return read_count(path, false) == 2;
}
bool hz_os_address_space_limited(void) { return os_as_limit != RLIM_INFINITY; }
/* Whether a mapping of n bytes could succeed if memory were given back:
 * not larger than the part of the address space the segment map covers
 * (the window, where there is one: os_map_window) nor than RLIMIT_AS. */
bool hz_os_could_map(size_t n) {
  const size_t room = HZ_MAP_WINDOW ? OS_WINDOW_HI - OS_WINDOW_LO : OS_WINDOW_HI;
  return n <= room && (os_as_limit == RLIM_INFINITY || n <= os_as_limit);
}
int hz_os_mlockall(int flags) { return (int)syscall(SYS_mlockall, flags); }
/* (/proc/self is the main thread's, empty once it called pthread_exit) */
long hz_os_map_count(void) {
  long n = read_count("/proc/thread-self/maps", true);
  return n > 0 ? n : read_count("/proc/self/maps", true);
}

int hz_os_pid(void) { return (int)getpid(); }

/* A descriptor for a report that must outlive the program closing its own:
 * path NULL duplicates stderr, else the file is created (truncated, or
 * appended to). Kept above 100 so programs that close low descriptors
 * leave it alone; one kept for long is checked with hz_os_fd_is before
 * use. */
int hz_os_open_report(const char *path, bool append) {
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  int fd = path ? open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644) : 2;
  int kept = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 100) : -1;
  if (kept < 0 && fd >= 0 && errno == EINVAL) {
    /* A descriptor limit of 100 or less (GNU tar's tests run with a few):
     * the file's own descriptor, or stderr's lowest free duplicate. The
     * report went to stderr with a warning instead of to the file. */
    if (path) kept = fd, fd = -1;
    else kept = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  }
  if (kept < 0) kept = -errno;
  if (path && fd >= 0) close(fd);
  hz_os_nocancel_end(cs);
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return kept;
}

/* What fd refers to, zero if it is not open. A program may close a
 * descriptor we kept and open another file that gets its number (a shell's
 * `exec 100>file`, a daemon's closefrom): the report must not go there. */
hz_os_file_id_t hz_os_fd_id(int fd) {
  int errno_saved = errno;
  struct stat st;
  hz_os_file_id_t id = {0, 0};
  if (fd >= 0 && fstat(fd, &st) == 0) id = (hz_os_file_id_t){(uint64_t)st.st_dev + 1, (uint64_t)st.st_ino};
  errno = errno_saved;
  return id;
}

size_t hz_os_peak_rss(void) {
  struct rusage ru;
  int errno_saved = errno;
  int r = getrusage(RUSAGE_SELF, &ru);
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return r == 0 ? (size_t)ru.ru_maxrss * 1024 : 0;
}

/* (nanosleep is a cancellation point too, but only the purge thread, the
 * allocator's own, sleeps here: nothing cancels it.) A sandbox may refuse
 * the call glibc makes, clock_nanosleep, and allow the older nanosleep
 * (tor's): then that one. False if neither sleeps: the caller must not
 * loop on it (tor's purge thread spun at 100% of a core). */
bool hz_os_sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  int errno_saved = errno, r;
  while ((r = nanosleep(&ts, &ts)) != 0 && errno == EINTR) {}
#ifdef SYS_nanosleep
  if (r != 0) {
    ts = (struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while ((r = (int)syscall(SYS_nanosleep, &ts, &ts)) != 0 && errno == EINTR) {}
  }
#endif
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return r == 0;
}

void hz_os_yield(void) {
  sched_yield();
  count(&hz_os_stats.other_calls, 1);
}

/* A memory barrier on every running thread of the process, so one thread
 * can order its accesses against others' that use only compiler barriers
 * (membarrier(2), private expedited: Linux 4.14; registered on first use).
 * False where the kernel (or an emulator) lacks it. */
#ifndef __NR_membarrier
#define __NR_membarrier -1
#endif
bool hz_os_membarrier(void) {
  enum { CMD_PRIVATE_EXPEDITED = 1 << 3, CMD_REGISTER_PRIVATE_EXPEDITED = 1 << 4 };
  static _Atomic int state; /* 0 unknown, 1 registered, -1 unavailable */
  int errno_saved = errno, st = atomic_load_explicit(&state, memory_order_relaxed);
  if (st == 0) {
    st = __NR_membarrier >= 0 && syscall(__NR_membarrier, CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
    atomic_store_explicit(&state, st, memory_order_relaxed);
  }
  bool ok = st == 1 && syscall(__NR_membarrier, CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return ok;
}

/* ---- threads: pthread calls that may allocate or make system calls ----
 * None of these may be called with an allocator lock held (ARCHITECTURE.md,
 * the lock rule): pthread_create allocates the new thread's TLS, and glibc
 * may allocate in pthread_setspecific and pthread_atfork. */
/* exit() leaves the other threads running until the process ends. */
bool hz_os_process_ending(void) { return false; }

bool hz_os_thread_key(pthread_key_t *key, void (*destructor)(void *)) {
  int errno_saved = errno;
  int rc = pthread_key_create(key, destructor);
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return rc == 0;
}

void hz_os_thread_key_set(pthread_key_t key, void *value) {
  int errno_saved = errno;
  pthread_setspecific(key, value);
  errno = errno_saved;
}

#ifdef __GLIBC__
/* (what glibc's pthread_atfork does: that is a stub in libc_nonshared.a,
 * linked at the end of the library's text, after the cold code, §57) */
extern int __register_atfork(void (*)(void), void (*)(void), void (*)(void), void *);
extern void *__dso_handle;
#endif
void hz_os_atfork_child(void (*child)(void)) {
  int errno_saved = errno;
#ifdef __GLIBC__
  __register_atfork(NULL, NULL, child, &__dso_handle);
#else
  pthread_atfork(NULL, NULL, child);
#endif
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
}

/* True while the program has never run a second thread (glibc 2.32+:
 * __libc_single_threaded, which stays false once one was started). */
bool hz_os_single_threaded(void) {
#if HZ_HAVE_SINGLE_THREADED
  return __libc_single_threaded;
#else
  return false; /* (unknown: as a threaded program) */
#endif
}

/* Whether hz_os_single_threaded knows (musl's C library does not say). */
bool hz_os_threads_known(void) {
#if HZ_HAVE_SINGLE_THREADED
  return true;
#else
  return false;
#endif
}

/* A detached helper thread with a small stack and every signal blocked (it
 * must never run a program's signal handler). errno is kept: this runs
 * inside malloc and free. Returns 0 or the pthread_create error. */
int hz_os_thread_start(void *(*fn)(void *)) {
  int errno_saved = errno;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits the mask */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t t;
  int rc = pthread_create(&t, &attr, fn, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = errno_saved;
  count(&hz_os_stats.other_calls, 1);
  return rc;
}

/* Called by the new thread itself: a detached thread may be gone before its
 * creator could name it. */
/* (dlsym finds the definition after the object that calls it: ours) */
void *hz_os_next_function(const char *name) {
  int errno_saved = errno;
  void *f = dlsym(RTLD_NEXT, name);
  errno = errno_saved;
  return f;
}

void hz_os_thread_name(const char *name) {
  int errno_saved = errno;
  pthread_setname_np(pthread_self(), name);
  errno = errno_saved;
}

/* A whole file mapped read-only (the profiler reads ELF symbol tables). */
const void *hz_os_map_file(const char *path, size_t *size) {
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  const void *p = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) p = NULL;
    else *size = (size_t)st.st_size;
  }
  if (fd >= 0) close(fd);
  hz_os_nocancel_end(cs);
  errno = errno_saved;
  return p;
}

void hz_os_unmap_file(const void *p, size_t size) { os_unmap((void *)p, size); }

/* The program's file, as the kernel has it: dladdr names the main program
 * by argv[0], which programs that set their title rewrite (redis-server
 * showed as "redis-server *:6379" in leak reports). NULL if unknown. */
hz_cold_bss char hz_os_exe_buf[4096];
const char *hz_os_exe_path(void) {
  char *path = hz_os_exe_buf;
  int errno_saved = errno;
  ssize_t n = readlink("/proc/self/exe", path, sizeof hz_os_exe_buf - 1);
  errno = errno_saved;
  if (n <= 0) return NULL;
  path[n] = 0;
  return path;
}

/* glibc's dladdr1 names the object by its link map. Elsewhere (musl has
 * no dladdr1) the loader's list is walked for the object with a loadable
 * segment that holds pc; the main program is the one whose program headers
 * the kernel passed (AT_PHDR), its name left empty as glibc's is (musl's
 * loader names it by argv[0], its static dl_iterate_phdr /proc/self/exe). */
#ifdef __GLIBC__
bool hz_os_code_object(uintptr_t pc, hz_os_code_object_t *out) {
  Dl_info info;
  struct link_map *lm = NULL;
  int errno_saved = errno;
  int ok = dladdr1((void *)pc, &info, (void **)&lm, RTLD_DL_LINKMAP);
  errno = errno_saved;
  if (ok == 0 || lm == NULL) return false;
  *out = (hz_os_code_object_t){lm, lm->l_addr, lm->l_name};
  return true;
}
#else
typedef struct {
  uintptr_t pc;
  hz_os_code_object_t *out;
} os_code_find_t;
static int os_code_find(struct dl_phdr_info *info, size_t size, void *arg) {
  os_code_find_t *f = arg;
  (void)size;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type != PT_LOAD || f->pc < lo || f->pc - lo >= ph->p_memsz) continue;
    bool program = (uintptr_t)info->dlpi_phdr == getauxval(AT_PHDR);
    *f->out = (hz_os_code_object_t){info->dlpi_phdr, info->dlpi_addr,
                                     program || !info->dlpi_name ? "" : info->dlpi_name};
    return 1;
  }
  return 0;
}
bool hz_os_code_object(uintptr_t pc, hz_os_code_object_t *out) {
  os_code_find_t f = {pc, out};
  int errno_saved = errno;
  int found = dl_iterate_phdr(os_code_find, &f);
  errno = errno_saved;
  return found != 0;
}

/* The profiler's unwinder is libgcc's, linked in (profile.c). A gcc built
 * for glibc 2.35 or later (Debian 12's, which musl-gcc wraps) has it find a
 * function's unwind table with glibc's _dl_find_object, and nothing else
 * when that fails; musl has none (the library did not load: a symbol not
 * found). This one, hidden, answers from dl_iterate_phdr: the object's
 * loadable extent and its PT_GNU_EH_FRAME; 0 if found, -1 if not. The
 * layout is glibc's where the data base is not part of it (x86-64, arm64). */
struct dl_find_object {
  unsigned long long dlfo_flags;
  void *dlfo_map_start, *dlfo_map_end;
  struct link_map *dlfo_link_map;
  void *dlfo_eh_frame;
  unsigned long long dlfo_reserved[7];
};
typedef struct {
  uintptr_t pc;
  struct dl_find_object *out;
} os_fde_find_t;
static int os_fde_find(struct dl_phdr_info *info, size_t size, void *arg) {
  os_fde_find_t *f = arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0, eh = 0;
  bool holds = false;
  (void)size;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_GNU_EH_FRAME) eh = a;
    if (ph->p_type != PT_LOAD) continue;
    if (a < lo) lo = a;
    if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    if (f->pc >= a && f->pc - a < ph->p_memsz) holds = true;
  }
  if (!holds) return 0;
  memset(f->out, 0, sizeof *f->out);
  f->out->dlfo_map_start = (void *)lo;
  f->out->dlfo_map_end = (void *)hi;
  f->out->dlfo_eh_frame = (void *)eh;
  return 1;
}
int _dl_find_object(void *pc, struct dl_find_object *out);
int _dl_find_object(void *pc, struct dl_find_object *out) {
  os_fde_find_t f = {(uintptr_t)pc, out};
  int errno_saved = errno;
  int found = dl_iterate_phdr(os_fde_find, &f);
  errno = errno_saved;
  return found ? 0 : -1;
}
#endif

/* The working directory, for paths the program gave relative to it. */
bool hz_os_cwd(char *buf, size_t size) {
  int errno_saved = errno;
  bool ok = getcwd(buf, size) != NULL;
  errno = errno_saved;
  return ok;
}

void hz_os_close(int fd) {
  int errno_saved = errno, cs = hz_os_nocancel_begin();
  close(fd);
  hz_os_nocancel_end(cs);
  errno = errno_saved;
}

void hz_os_abort(void) { abort(); }
#endif
