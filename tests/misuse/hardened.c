// SPDX-License-Identifier: MIT
/* tests/misuse/hardened.c: thirty kinds of heap misuse, modelled on the
 * names of hardened_malloc's simple-memory-corruption tests (our own
 * programs, not theirs): double frees, frees of pointers that are no block,
 * reads and writes after free, accesses to 0-byte blocks, overflows,
 * mismatched sizes. Each runs in a forked child; a case is caught when the
 * child dies by SIGABRT with a "hakozuna: " line (a report), by SIGSEGV or
 * SIGBUS where the case touches memory that should be inaccessible, or, for
 * the two cases that read data, when the child finds nothing it should not.
 *
 * Prints each case and the tally. On the checked build every case must be
 * caught; on the default build at least those marked "default" (the rest
 * need the checked build's fill, canaries, guard pages and quarantine).
 * Run by hand on another allocator it only prints the tally. */
#include "check.h"
#include "testutil.h"

#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

static void (*volatile free_fn)(void *) = free;
static void *(*volatile malloc_fn)(size_t) = malloc;
static void *(*volatile realloc_fn)(void *, size_t) = realloc;
static size_t (*volatile usable_fn)(void *) = malloc_usable_size;
static size_t (*object_size)(const void *); /* hz_usable_size: our malloc_object_size */

#define SMALL 16
#define LARGE (256 * KiB)

static char *xmalloc(size_t n) {
  char *p = malloc_fn(n);
  if (!p) _exit(5);
  return p;
}

/* ---- the cases: each returns what the child's exit status should be when
 * the misuse went unnoticed (it is then not caught) ---- */
static int double_free_small(void) { char *p = xmalloc(SMALL); free_fn(p); free_fn(p); return 0; }
static int double_free_small_delayed(void) {
  char *p = xmalloc(SMALL), *q = xmalloc(SMALL);
  free_fn(p); free_fn(q); free_fn(p);
  return 0;
}
static int double_free_large(void) { char *p = xmalloc(LARGE); free_fn(p); free_fn(p); return 0; }
static int double_free_large_delayed(void) {
  char *p = xmalloc(LARGE), *q = xmalloc(LARGE);
  free_fn(p); free_fn(q); free_fn(p);
  return 0;
}
static int unaligned_free_small(void) { free_fn(xmalloc(SMALL) + 1); return 0; }
static int unaligned_free_large(void) { free_fn(xmalloc(LARGE) + 1); return 0; }

/* Reads of freed memory must not show its old contents (48 bytes: a 16-byte
 * block's every byte is the free-list link and tag anyway). A few bytes of
 * the random-looking link and tag may equal the old ones by chance: the data
 * counts as seen when more than a quarter of the bytes still hold it. */
static int read_after_free(size_t n) {
  volatile char *p = xmalloc(n);
  memset((char *)p, 'a', n);
  free_fn((char *)p);
  size_t same = 0;
  for (size_t i = 0; i < n; i++) same += p[i] == 'a';
  return same > n / 4;
}
static int read_after_free_small(void) { return read_after_free(48); }
static int read_after_free_large(void) { return read_after_free(LARGE); }

static int write_after_free_small(void) {
  char *p = xmalloc(128);
  free_fn(p);
  ((volatile char *)p)[65] = 'a';
  for (int i = 0; i < 100000; i++) free_fn(malloc_fn(128));
  return 0;
}
static int write_after_free_small_reuse(void) {
  char *p = xmalloc(128);
  free_fn(p);
  char *q = xmalloc(128); /* may be p again */
  ((volatile char *)p)[65] = 'a';
  for (int i = 0; i < 100000; i++) free_fn(malloc_fn(128));
  free_fn(q);
  return 0;
}
static int write_after_free_large(void) {
  char *p = xmalloc(LARGE);
  free_fn(p);
  ((volatile char *)p)[64 * KiB + 1] = 'a';
  return 0;
}
static int write_after_free_large_reuse(void) {
  char *p = xmalloc(LARGE);
  free_fn(p);
  char *q = xmalloc(LARGE); /* may be p again */
  ((volatile char *)p)[64 * KiB + 1] = 'a';
  free_fn(q);
  return 0;
}

static int read_zero_size(void) { volatile char *p = xmalloc(0); return p[0] == 123 ? 0 : 0; }
static int write_zero_size(void) { volatile char *p = xmalloc(0); p[0] = 1; return 0; }

static int invalid_free_mmap(int prot) {
  free_fn(xmalloc(SMALL));
  char *m = mmap(NULL, 16 * 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) _exit(5);
  free_fn(m + 8 * 4096);
  return 0;
}
static int invalid_free_protected(void) { return invalid_free_mmap(PROT_NONE); }
static int invalid_free_unprotected(void) { return invalid_free_mmap(PROT_READ | PROT_WRITE); }
static int invalid_free_small_region(void) { free_fn(xmalloc(SMALL) + 16 * KiB); return 0; }
static int invalid_free_small_region_far(void) { free_fn(xmalloc(SMALL) + 1024 * MiB); return 0; }
static int uninitialized_free(void) { free_fn(tu_opaque_ptr((void *)1)); return 0; }
static int uninitialized_realloc(void) { realloc_fn(tu_opaque_ptr((void *)1), 64); return 0; }
static int uninitialized_malloc_usable_size(void) { usable_fn(tu_opaque_ptr((void *)1)); return 0; }

static int eight_byte_overflow(size_t n) {
  char *p = xmalloc(n);
  ((volatile char *)p)[usable_fn(p) + 7] ^= 1;
  free_fn(p);
  return 0;
}
static int eight_byte_overflow_small(void) { return eight_byte_overflow(8); }
static int eight_byte_overflow_large(void) { return eight_byte_overflow(LARGE); }

/* A string that fills its block to the last usable byte still ends there. */
static int string_overflow(void) {
  char *p = xmalloc(SMALL);
  size_t n = usable_fn(p);
  memset(p, 'a', n);
  return strlen(p) == n ? 0 : 1;
}

/* new char, deleted as a 32-byte struct (the allocator's sized delete). */
static int delete_type_size_mismatch(void) {
  void *(*op_new)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
  void (*op_del)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
  if (!op_new || !op_del) _exit(7);
  op_del(op_new(1), 32);
  return 0;
}

static int unaligned_malloc_usable_size_small(void) { usable_fn(xmalloc(SMALL) + 1); return 0; }
static int invalid_malloc_usable_size_small(void) { usable_fn(xmalloc(SMALL) + 16 * KiB); return 0; }
static int invalid_malloc_usable_size_small_quarantine(void) {
  char *p = xmalloc(SMALL);
  free_fn(p);
  usable_fn(p);
  return 0;
}
static int invalid_malloc_object_size_small(void) { object_size(xmalloc(SMALL) + 16 * KiB); return 0; }
static int invalid_malloc_object_size_small_quarantine(void) {
  char *p = xmalloc(SMALL);
  free_fn(p);
  object_size(p);
  return 0;
}

/* How a case counts as caught: a report, a fault, or the child's own check. */
typedef enum { BY_REPORT, BY_FAULT, BY_CHECK } how_t;

static const struct {
  const char *name;
  int (*run)(void);
  how_t how;
  int in_default; /* the default build catches it too */
} cases[] = {
#define C(name, how, dflt) {#name, name, how, dflt}
    C(double_free_small, BY_REPORT, 1),
    C(double_free_small_delayed, BY_REPORT, 1),
    C(double_free_large, BY_REPORT, 1),
    C(double_free_large_delayed, BY_REPORT, 1),
    C(unaligned_free_small, BY_REPORT, 1),
    C(unaligned_free_large, BY_REPORT, 1),
    C(read_after_free_small, BY_CHECK, 0),
    C(read_after_free_large, BY_FAULT, 0),
    C(write_after_free_small, BY_REPORT, 0),
    C(write_after_free_small_reuse, BY_REPORT, 0),
    C(write_after_free_large, BY_FAULT, 0),
    C(write_after_free_large_reuse, BY_FAULT, 0),
    C(read_zero_size, BY_FAULT, 0),
    C(write_zero_size, BY_FAULT, 0),
    C(invalid_free_protected, BY_REPORT, 1),
    C(invalid_free_unprotected, BY_REPORT, 1),
    C(invalid_free_small_region, BY_REPORT, 1),
    C(invalid_free_small_region_far, BY_REPORT, 1),
    C(uninitialized_free, BY_REPORT, 1),
    C(uninitialized_realloc, BY_REPORT, 1),
    C(uninitialized_malloc_usable_size, BY_REPORT, 1),
    C(eight_byte_overflow_small, BY_REPORT, 0),
    C(eight_byte_overflow_large, BY_FAULT, 0),
    C(string_overflow, BY_CHECK, 0),
    C(delete_type_size_mismatch, BY_REPORT, 1),
    C(unaligned_malloc_usable_size_small, BY_REPORT, 1),
    C(invalid_malloc_usable_size_small, BY_REPORT, 1),
    C(invalid_malloc_usable_size_small_quarantine, BY_REPORT, 1),
    C(invalid_malloc_object_size_small, BY_REPORT, 1),
    C(invalid_malloc_object_size_small_quarantine, BY_REPORT, 1),
#undef C
};
#define NCASES (sizeof cases / sizeof cases[0])

/* Runs case i in a child; true when caught. */
static int run(size_t i) {
  int err_fd;
  pid_t pid = tu_fork_capturing(&err_fd, 30);
  if (!CHECK(pid >= 0)) return 0;
  if (pid == 0) _exit(cases[i].run());
  char msg[1024];
  tu_read_all(err_fd, msg, sizeof msg);
  close(err_fd);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  /* (another allocator, run by hand: its own abort message counts) */
  int report = sig == SIGABRT && (strstr(msg, "hakozuna: ") != NULL || strncmp(hz_target(), "hakozuna", 8) != 0);
  int caught;
  switch (cases[i].how) {
  case BY_REPORT: caught = report; break;
  case BY_FAULT: caught = sig == SIGSEGV || sig == SIGBUS || report; break;
  default: caught = WIFEXITED(st) && WEXITSTATUS(st) == 0; break;
  }
  char *nl = strchr(msg, '\n');
  if (nl) *nl = 0;
  printf("%-46s %s", cases[i].name, caught ? "caught" : "missed");
  if (sig) printf(" (signal %d%s%s)", sig, *msg ? ": " : "", msg);
  else printf(" (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  printf("\n");
  return caught;
}

TEST_MAIN() {
  object_size = (size_t (*)(const void *))dlsym(RTLD_DEFAULT, "hz_usable_size");
  if (!object_size) object_size = (size_t (*)(const void *))usable_fn;
  int checked = strcmp(hz_target(), "hakozuna-checked") == 0;
  int dflt = strcmp(hz_target(), "hakozuna") == 0;
  size_t caught = 0;
  for (size_t i = 0; i < NCASES; i++) {
    int c = run(i);
    caught += c;
    if (checked || (dflt && cases[i].in_default))
      CHECKF(c, "%s: not caught on %s", cases[i].name, hz_target());
  }
  printf("%zu of %zu cases caught (%s)\n", caught, NCASES, *hz_target() ? hz_target() : "by hand");
  return 0;
}
