// SPDX-License-Identifier: MIT
/* tests/options/options.c: the option table through the header API.
 *
 *   options            hz_option_get/set/name/description round trips
 *   options get NAME   print the option's value (tests/options/env.sh sets
 *                      HAKOZUNA_<NAME> and reads it back with this)
 *   options names      print the option names, one a line
 *   options alloc N    malloc(N); print "null" or "ok" (env.sh runs it under
 *                      a memory limit with HAKOZUNA_VERBOSE=1)
 *   options fork N     fork N children that allocate and exit (each leaves
 *                      a statistics report), wait for them
 *   options clobber F  open F onto every descriptor from 100 to 163, as a
 *                      shell's `exec 100>F` does, and write "userdata" to 100
 *                      (the exit report must not go there) */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <ctype.h>
#include <errno.h>
#ifndef _WIN32
#include <malloc.h>
#endif
#include <stdint.h>
#ifndef _WIN32
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#endif
#ifdef __linux__
#include <sys/auxv.h>
#endif

static int by_name(const char *name) {
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    const char *n = hz_option_name((hz_option_t)i);
    if (n && strcmp(n, name) == 0) return i;
  }
  return -1;
}

static void test_table(void) {
  static const char *const expected[] = {
      "verbose", "stats", "purge_delay", "purge_thread", "thp", "arena_reserve",
      "thread_cache", "huge_cache", "check", "stats_file",
      "mmap_threshold", "page_size", "profile", "profile_rate",
      "profile_file", "profile_seed", "leaks", "stash"};
  CHECK(sizeof expected / sizeof expected[0] == HZ_OPTION_COUNT);
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    hz_option_t o = (hz_option_t)i;
    const char *name = hz_option_name(o), *desc = hz_option_description(o);
    if (!CHECKF(name && desc && *desc, "option %d has no name or description", i))
      continue;
    CHECKF(strcmp(name, expected[i]) == 0, "option %d is \"%s\", want \"%s\"", i,
           name, expected[i]);
    for (const char *c = name; *c; c++)
      CHECKF(islower((unsigned char)*c) || *c == '_', "option name \"%s\"", name);
    if (hz_option_get_string(o) != NULL) continue; /* string options: test_string */
    /* Setting the current value back succeeds and changes nothing. */
    long v = hz_option_get(o);
    CHECKF(hz_option_set(o, v) == 0, "hz_option_set(%s, %ld) (its own value) "
           "failed, errno %d", name, v, errno);
    CHECK(hz_option_get(o) == v);
  }
}

static void set_get(hz_option_t o, long v) {
  long old = hz_option_get(o);
  CHECKF(hz_option_set(o, v) == 0 && hz_option_get(o) == v,
         "%s: set %ld, get %ld", hz_option_name(o), v, hz_option_get(o));
  CHECK(hz_option_set(o, old) == 0 && hz_option_get(o) == old);
}

static void test_set(void) {
  set_get(HZ_OPTION_VERBOSE, 1);
  set_get(HZ_OPTION_VERBOSE, 0);
  set_get(HZ_OPTION_STATS, 1);
  set_get(HZ_OPTION_PURGE_DELAY, 1234);
  set_get(HZ_OPTION_PURGE_DELAY, 0);
  set_get(HZ_OPTION_PURGE_DELAY, -1); /* never */
  set_get(HZ_OPTION_HUGE_CACHE, 0);
  set_get(HZ_OPTION_THREAD_CACHE, 256);
  /* The allocator keeps working with the changed settings. */
  long delay = hz_option_get(HZ_OPTION_PURGE_DELAY);
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 0) == 0);
  for (int i = 0; i < 100; i++) free(malloc((size_t)i << 14));
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, delay) == 0);
  /* Invalid option or value: -1, EINVAL, nothing changes. */
  errno = 0;
  CHECK(hz_option_set(HZ_OPTION_COUNT, 1) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(hz_option_set((hz_option_t)-1, 1) == -1 && errno == EINVAL);
  long check = hz_option_get(HZ_OPTION_CHECK);
  errno = 0;
  CHECKF(hz_option_set(HZ_OPTION_CHECK, 99) == -1 && errno == EINVAL,
         "check=99 (levels are 0, 1, 2) accepted, errno %d", errno);
  CHECK(hz_option_get(HZ_OPTION_CHECK) == check);
  /* page_size reads back the page size in use and is fixed once running. */
  long page = hz_option_get(HZ_OPTION_PAGE_SIZE);
  CHECKF(page >= (long)tu_page_size() && (page & (page - 1)) == 0, "page_size %ld", page);
  errno = 0;
  CHECKF(hz_option_set(HZ_OPTION_PAGE_SIZE, page * 2) == -1 && errno == EINVAL,
         "page_size changed while running, errno %d", errno);
  CHECK(hz_option_get(HZ_OPTION_PAGE_SIZE) == page);
  /* an invalid option reads -1 with errno EINVAL, unlike a valid -1 */
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0);
  errno = 0;
  CHECK(hz_option_get(HZ_OPTION_PURGE_DELAY) == -1 && errno == 0);
  CHECK(hz_option_get(HZ_OPTION_COUNT) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(hz_option_get((hz_option_t)-5) == -1 && errno == EINVAL);
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, delay) == 0);
}

#ifdef M_MMAP_THRESHOLD /* mallopt's parameters are glibc's (neither Windows nor musl has them) */
static uint64_t huge_allocs(void) {
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  return st.huge_allocs;
}

/* mallopt: the parameters that map onto an option change it and return 1;
 * the others return 1 too, as glibc's, and change nothing (README, "mallopt"). */
static void test_mallopt(void) {
  long saved[HZ_OPTION_COUNT];
  for (int i = 0; i < HZ_OPTION_COUNT; i++) saved[i] = hz_option_get((hz_option_t)i);
  CHECK(mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1);
  CHECK(hz_option_get(HZ_OPTION_MMAP_THRESHOLD) == 128 * 1024);
  CHECKF(hz_option_get(HZ_OPTION_HUGE_CACHE) == 0, "M_MMAP_THRESHOLD lowered: huge_cache %ld, want 0 (glibc "
         "unmaps mapped blocks at their free)", hz_option_get(HZ_OPTION_HUGE_CACHE));
  /* Blocks above a lowered threshold give their pages back at their free,
   * and are not mapped one by one: each mapping took a 4 MiB window of
   * address space (and of the commit charge), 2,000 blocks 8 GB. */
  enum { NBIG = 2000 };
  static char *bigs[NBIG];
  uint64_t h0 = huge_allocs();
  long vm0 = tu_statm_mib_quiet(1);
  for (int i = 0; i < NBIG; i++) {
    bigs[i] = malloc(200 * 1024);
    CHECK(bigs[i] != NULL);
    if (bigs[i] != NULL) memset(bigs[i], i, 200 * 1024);
  }
  long vm1 = tu_statm_mib_quiet(1);
  CHECKF(vm0 < 0 || vm1 - vm0 < NBIG * 400 / 1024, "M_MMAP_THRESHOLD=128K: %d blocks of 200 KiB took %ld MiB "
         "of address space", NBIG, vm1 - vm0);
  CHECKF(huge_allocs() == h0, "M_MMAP_THRESHOLD=128K: %llu blocks of 200 KiB mapped one by one",
         (unsigned long long)(huge_allocs() - h0));
  hz_stats_t st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
  CHECK(hz_stats_get(&st0) == 0);
  for (int i = 0; i < NBIG; i++) free(bigs[i]);
  CHECK(hz_stats_get(&st1) == 0);
  CHECKF(st0.bytes_committed - st1.bytes_committed >= (uint64_t)NBIG * 200 * 1024,
         "M_MMAP_THRESHOLD=128K: freeing %d blocks of 200 KiB gave back %lld KiB at once, want all",
         NBIG, ((long long)st0.bytes_committed - (long long)st1.bytes_committed) >> 10);
  hz_option_set(HZ_OPTION_HUGE_CACHE, 256);
  CHECK(mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024) == 1); /* clamped to what a span holds */
  CHECK(hz_option_get(HZ_OPTION_MMAP_THRESHOLD) == 2 * 1024 * 1024);
  CHECK(hz_option_get(HZ_OPTION_HUGE_CACHE) == 256); /* raised: the cache stays */
  CHECK(mallopt(M_MMAP_THRESHOLD, -1) == 0);
  CHECK(mallopt(M_TRIM_THRESHOLD, -1) == 1 && hz_option_get(HZ_OPTION_PURGE_DELAY) == -1);
  CHECK(mallopt(M_TRIM_THRESHOLD, 0) == 1 && hz_option_get(HZ_OPTION_PURGE_DELAY) == 0);
  CHECK(mallopt(M_TRIM_THRESHOLD, 8 << 20) == 1 && hz_option_get(HZ_OPTION_THREAD_CACHE) == 8192);
  CHECK(mallopt(M_CHECK_ACTION, 1) == 1 && hz_option_get(HZ_OPTION_CHECK) == 0);
  CHECK(mallopt(M_CHECK_ACTION, 3) == 1 && hz_option_get(HZ_OPTION_CHECK) == 1);
  for (int i = 0; i < HZ_OPTION_COUNT; i++) hz_option_set((hz_option_t)i, saved[i]);
  /* accepted as glibc accepts them (it returns 1; programs and glibc's own
   * tests treat 0 as failure), and nothing changes */
  static const int ignored[] = {M_MXFAST, M_TOP_PAD, M_MMAP_MAX, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX, 12345};
  for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
    CHECKF(mallopt(ignored[i], 1) == 1, "mallopt(%d, 1) returned 0, glibc 1", ignored[i]);
  CHECK(mallopt(M_ARENA_MAX, 0) == 1 && mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_MXFAST, 0) == 1);
  CHECK(mallopt(M_MXFAST, 160) == 1);
  CHECKF(mallopt(M_MXFAST, 161) == 0 && mallopt(M_MXFAST, -1) == 0, "M_MXFAST out of glibc's range accepted");
  for (int i = 0; i < HZ_OPTION_COUNT; i++)
    CHECKF(hz_option_get((hz_option_t)i) == saved[i], "%s changed by a mallopt that has no effect here",
           hz_option_name((hz_option_t)i));
}
#endif

/* String options: the text round-trips, the numeric calls refuse them,
 * the string calls refuse numeric options. */
static void test_string(void) {
  hz_option_t o = HZ_OPTION_STATS_FILE;
  const char *old = hz_option_get_string(o);
  CHECKF(old && *old == 0, "stats_file is \"%s\" by default, want \"\"", old ? old : "(null)");
  CHECK(hz_option_get(o) == 0);
  CHECK(hz_option_set_string(o, "/tmp/x-%p.txt") == 0);
  CHECKF(strcmp(hz_option_get_string(o), "/tmp/x-%p.txt") == 0, "got \"%s\"", hz_option_get_string(o));
  CHECK(hz_option_get(o) == 1);
  errno = 0;
  CHECK(hz_option_set(o, 1) == -1 && errno == EINVAL);
  static char longer[5000];
  memset(longer, 'a', sizeof longer - 1);
  errno = 0;
  CHECK(hz_option_set_string(o, longer) == -1 && errno == ENAMETOOLONG);
  CHECK(strcmp(hz_option_get_string(o), "/tmp/x-%p.txt") == 0);
  CHECK(hz_option_set_string(o, "") == 0 && hz_option_get(o) == 0);
  errno = 0;
  CHECK(hz_option_get_string(HZ_OPTION_PURGE_DELAY) == NULL && errno == EINVAL);
  errno = 0;
  CHECK(hz_option_set_string(HZ_OPTION_PURGE_DELAY, "1") == -1 && errno == EINVAL);
  errno = 0;
  CHECK(hz_option_set_string(HZ_OPTION_COUNT, "x") == -1 && errno == EINVAL);
  const char *prof = hz_option_get_string(HZ_OPTION_PROFILE_FILE);
  CHECKF(prof && strcmp(prof, "hakozuna-%p.pb.gz") == 0, "profile_file is \"%s\" by default", prof ? prof : "(null)");
}

TEST_MAIN() {
  if (argc == 3 && strcmp(argv[1], "get") == 0) {
    int o = by_name(argv[2]);
    if (!CHECKF(o >= 0, "no option named %s", argv[2])) return 1;
    free(malloc(100));
    printf("%ld\n", hz_option_get((hz_option_t)o));
    return 0;
  }
#ifdef __linux__
  if (argc == 2 && strcmp(argv[1], "secure") == 0) { /* (options/secure: did the kernel see set-user-ID?) */
    printf("%lu\n", getauxval(AT_SECURE));
    return 0;
  }
#endif
  if (argc == 2 && strcmp(argv[1], "names") == 0) {
    for (int i = 0; i < HZ_OPTION_COUNT; i++) printf("%s\n", hz_option_name((hz_option_t)i));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "alloc") == 0) {
    void *p = malloc(strtoull(argv[2], NULL, 0));
    printf("%s\n", p ? "ok" : "null");
    free(p);
    return 0;
  }
#ifndef _WIN32
  if (argc == 3 && strcmp(argv[1], "fork") == 0) {
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
      pid_t pid = fork();
      if (!CHECKF(pid >= 0, "fork: %s", strerror(errno))) return 1;
      if (pid == 0) {
        free(malloc(100 + (size_t)i));
        exit(0);
      }
    }
    int status;
    while (wait(&status) > 0) CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("ok\n");
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "clobber") == 0) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!CHECKF(fd >= 0, "open %s: %s", argv[2], strerror(errno))) return 1;
    for (int i = 100; i < 164; i++) CHECK(dup2(fd, i) == i);
    CHECK(write(100, "userdata\n", 9) == 9);
    free(malloc(100));
    return 0;
  }
#endif
  test_table();
  test_set();
  test_string();
#ifdef M_MMAP_THRESHOLD
  test_mallopt();
#endif
  return 0;
}
