// SPDX-License-Identifier: MIT
/* tests/check.h: the test harness. A test includes this header, defines
 *
 *     TEST_MAIN() { ... return 0; }   (argc and argv are in scope)
 *
 * and calls CHECK(cond) / CHECKF(cond, fmt, ...) as often as it likes. A
 * failed check prints file:line and the expression (plus the CHECKF message)
 * to stderr and is counted; main() exits 1 if any check failed or test_main
 * returned non-zero. Checks may be called from any thread.
 *
 * HZ_TEST_TARGET (set by tests/run.sh) names the allocator the test is meant
 * to run on. For "hakozuna..." main() first checks that malloc really is
 * hakozuna's (so a preload that did not take fails instead of silently
 * testing glibc); hz_strict() tells the parts of a test that hold hakozuna to
 * a contract stricter than the glibc on the build machine. */
#ifndef HZ_TEST_CHECK_H
#define HZ_TEST_CHECK_H

#ifdef _WIN32
#include "hakozuna.h" /* Windows tests link hakozuna (no preloading there) */
#else
#include <dlfcn.h>
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(_WIN32) && !defined(__GLIBC__)
/* musl (make TARGET=x86_64-linux-musl): its headers and libc lack these
 * glibc extras, which hakozuna exports; weak, as a test that calls them
 * links with libc alone and finds them in the preloaded library. (No
 * mallinfo there: musl has no struct mallinfo, and hakozuna defines none.) */
int malloc_trim(size_t pad) __attribute__((weak));
void malloc_stats(void) __attribute__((weak));
int malloc_info(int options, FILE *out) __attribute__((weak));
int mallopt(int param, int value) __attribute__((weak));
void *pvalloc(size_t n) __attribute__((weak));
#endif

#define CHECK_MAX_PRINTED 40

static int check_failures;
static long check_total;

/* Returns cond so callers can bail out of a loop after a failure. */
static int check_at(int cond, const char *file, int line, const char *expr) {
  __atomic_add_fetch(&check_total, 1, __ATOMIC_RELAXED);
  if (cond) return 1;
  int n = __atomic_add_fetch(&check_failures, 1, __ATOMIC_RELAXED);
  if (n <= CHECK_MAX_PRINTED)
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
  else if (n == CHECK_MAX_PRINTED + 1)
    fprintf(stderr, "(further failed checks are counted, not printed)\n");
  return 0;
}

#define CHECK(cond) check_at(!!(cond), __FILE__, __LINE__, #cond)
/* CHECKF(cond, fmt, ...): as CHECK, and prints the message when it fails. */
#define CHECKF(cond, ...)                                                     \
  (check_at(!!(cond), __FILE__, __LINE__, #cond)                             \
       ? 1                                                                    \
       : (__atomic_load_n(&check_failures, __ATOMIC_RELAXED) <=               \
                  CHECK_MAX_PRINTED                                           \
              ? (fprintf(stderr, "    "), fprintf(stderr, __VA_ARGS__),       \
                 fputc('\n', stderr), 0)                                      \
              : 0))

static inline int check_failed(void) {
  return __atomic_load_n(&check_failures, __ATOMIC_RELAXED);
}

/* The allocator this run is meant to test: "glibc", "hakozuna",
 * "hakozuna-checked", or "" when run by hand without the runner. */
static inline const char *hz_target(void) {
  const char *t = getenv("HZ_TEST_TARGET");
  return t ? t : "";
}
/* True when the test runs on hakozuna (or by hand): hold it to hakozuna's
 * documented contract where that is stricter than the local glibc's. */
static inline int hz_strict(void) { return strcmp(hz_target(), "glibc") != 0; }

#if defined(_WIN32) && !defined(CHECK_NO_TARGET)
/* Windows: the tests link the static library ahead of the C runtime, so
 * malloc must be hakozuna's; hz_usable_size of a block it did not make would
 * abort, so this cannot pass by accident. */
static void check_target(void) {
  void *p = malloc(100);
  CHECK(p != NULL && hz_usable_size(p) >= 100);
  free(p);
}
#elif !defined(CHECK_NO_TARGET)
/* For a "hakozuna..." target: malloc must be hakozuna's. hz_usable_size of a
 * block that glibc allocated would abort, so this cannot pass by accident. */
static void check_target(void) {
  if (strncmp(hz_target(), "hakozuna", 8) != 0) return;
  size_t (*usable)(const void *) =
      (size_t (*)(const void *))dlsym(RTLD_DEFAULT, "hz_usable_size");
  if (!CHECKF(usable != NULL, "HZ_TEST_TARGET=%s but hz_usable_size is not "
              "in the process (preload or link did not take)", hz_target()))
    return;
  void *p = malloc(100);
  CHECK(p != NULL);
  CHECKF(usable(p) == malloc_usable_size(p),
         "malloc is not hakozuna's: hz_usable_size %zu, malloc_usable_size %zu",
         usable(p), malloc_usable_size(p));
  free(p);
}
#else
static void check_target(void) {}
#endif

#define TEST_MAIN()                                                           \
  int test_main(int argc __attribute__((unused)),                             \
                char **argv __attribute__((unused)))
TEST_MAIN();

int main(int argc, char **argv) {
  check_target();
  int rc = check_failed() ? 1 : test_main(argc, argv);
  int failed = check_failed();
  if (failed) {
    fprintf(stderr, "%s: %d of %ld checks failed\n", argv[0], failed,
            __atomic_load_n(&check_total, __ATOMIC_RELAXED));
    return 1;
  }
  if (rc) fprintf(stderr, "%s: test_main returned %d\n", argv[0], rc);
  return rc ? 1 : 0;
}

#endif /* HZ_TEST_CHECK_H */
