// SPDX-License-Identifier: MIT
/* tests/misuse/misuse.c: misuse must end the program with one line on stderr
 * and SIGABRT. Each case runs in a forked child (on Windows, which has no
 * fork, the program started again with --case N); the parent checks how the
 * child died and what it printed:
 *
 *   hakozuna: free(): double free of 0x... (block of N bytes)
 *   hakozuna: free(): invalid pointer 0x... (not allocated by hakozuna)
 *   hakozuna: free(): invalid pointer 0x... (inside a block of N bytes at 0x...)
 *   hakozuna: free(): invalid pointer 0x... (in a span of N-byte blocks, where
 *             no block was handed out yet | in the tail of a span ... past its last block)
 *   hakozuna: malloc_usable_size(): use of the freed block 0x... (block of N bytes)
 *   hakozuna: free(): double free of 0x..., or a pointer into it (a huge block, whose
 *             memory already went back to the system)
 *   hakozuna: operator delete(): size N does not match the block 0x... (M bytes)
 *
 * (free, realloc or malloc_usable_size, as called). The pointer printed must
 * be the one passed, a block's start the block's, and N at least the size
 * the block was asked with. Cases: pointers not from the allocator (stack,
 * static data, other mmaps), pointers into the middle of small, medium,
 * large and huge blocks, double frees right away, after many other
 * allocations and frees, from another thread, through realloc, and after
 * realloc(p, 0); the size of a freed block; pointers into a span's memory
 * that never held a block; C++ sized delete and hz_free_sized with a wrong
 * size. Runs on hakozuna only. On Windows a misuse report ends the process
 * with status 3, as abort() does there, after a SIGABRT handler has run
 * (hz_os_abort in src/os_windows.c). */
#include "check.h"
#include "hakozuna.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#ifndef _WIN32
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#endif

typedef enum { FN_FREE, FN_REALLOC, FN_USABLE, FN_DELETE } fn_t;
static const char *const fn_names[] = {"free", "realloc", "malloc_usable_size",
                                       "operator delete"};

/* What the child reports and the message must show. */
typedef enum { EXPECT_DOUBLE, EXPECT_FOREIGN, EXPECT_INSIDE, EXPECT_ABORT, EXPECT_NOBLOCK,
               EXPECT_SIZE, EXPECT_FREED, EXPECT_WAF, EXPECT_OVERFLOW, EXPECT_UNDERFLOW, EXPECT_GONE } expect_t;

typedef struct mcase {
  const char *what;
  fn_t fn;         /* the call that misuses */
  expect_t expect;
  size_t size;     /* of the block involved, or which foreign pointer */
  void (*run)(const struct mcase *c);
} mcase_t;

/* Through volatile pointers: the compiler must not see (or warn about) the
 * misuse, nor drop it. */
static void (*volatile free_fn)(void *) = free;
static void *(*volatile realloc_fn)(void *, size_t) = realloc;
static __typeof__(&malloc_usable_size) volatile usable_fn = malloc_usable_size; /* Windows: hz_usable_size */
static void *(*volatile malloc_fn)(size_t) = malloc;

/* One of hakozuna's functions: on Linux from the preloaded library (the
 * test is not linked with it), on Windows linked (the static library). */
#ifdef _WIN32
#define LIB_FN(type, linux_name, windows_fn) ((type)(windows_fn))
/* the C++ operators as Win64 mangles them (size_t is unsigned long long) */
void *_Znwy(size_t n);
void *_ZnwySt11align_val_t(size_t n, size_t align);
void _ZdlPvy(void *p, size_t n);
void _ZdlPvySt11align_val_t(void *p, size_t n, size_t align);
#else
#define LIB_FN(type, linux_name, windows_fn) ((type)dlsym(RTLD_DEFAULT, linux_name))
#endif

/* Exit status of a child whose churn reused the block (not the case meant):
 * not 3, which is a misuse report's on Windows. */
#define CHURN_REUSED 9

static int info_fd = -1;

/* Tell the parent which pointer is passed and which block it is in. */
static void report(const void *passed, const void *block, size_t size) {
  char buf[128];
  int n = snprintf(buf, sizeof buf, "%p %p %zu\n", passed, block, size);
  if (write(info_fd, buf, (size_t)n) != n) _exit(4);
}

static void call(fn_t fn, void *p) {
  switch (fn) {
  case FN_FREE: free_fn(p); break;
  case FN_REALLOC: realloc_fn(p, 100); break;
  case FN_USABLE: usable_fn(p); break;
  case FN_DELETE: break; /* run_sized_delete calls it */
  }
}

/* ---- pointers the allocator never handed out ---- */
enum { FOREIGN_STACK, FOREIGN_STATIC, FOREIGN_MMAP, FOREIGN_MMAP_4M, FOREIGN_N };
static const char *const foreign_names[] = {"stack", "static data", "mmap page",
                                            "mmap at a 4 MiB boundary"};
static char static_buf[8192] __attribute__((aligned(64)));

/* n bytes of fresh pages from the OS, not from any allocator; NULL if none. */
static void *map_pages(size_t n) {
#ifdef _WIN32
  return VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
#else
  void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return m == MAP_FAILED ? NULL : m;
#endif
}

static void run_foreign(const mcase_t *c) {
  char stack_buf[256] __attribute__((aligned(16)));
  memset(stack_buf, 0, sizeof stack_buf);
  free_fn(malloc_fn(10)); /* the allocator is in use */
  char *p = NULL;
  switch (c->size) {
  case FOREIGN_STACK: p = stack_buf + 16; break;
  case FOREIGN_STATIC: p = static_buf + 64; break;
  case FOREIGN_MMAP: p = map_pages(4096); break;
  case FOREIGN_MMAP_4M: { /* where an allocator might look for a header */
    char *m = map_pages(12 * MiB);
    if (m == NULL) _exit(5);
    p = (char *)(((uintptr_t)m + 4 * MiB - 1) & ~(uintptr_t)(4 * MiB - 1)) + 4096;
    break;
  }
  }
  if (p == NULL) _exit(5);
#ifdef _WIN32
  /* There free() and realloc() hand a pointer hakozuna does not know to the
   * C runtime, whose block it may be (docs/windows.md): the hz_* names are
   * the ones that report it. */
  free_fn = hz_free;
  realloc_fn = hz_realloc;
#endif
  report(p, NULL, 0);
  call(c->fn, tu_opaque_ptr(p));
}

/* ---- pointers into the middle of a block ---- */
static void run_inside(const mcase_t *c) {
  char *p = malloc_fn(c->size);
  if (!p) _exit(5);
  memset(p, 1, c->size);
  char *q = p + ((c->size / 2) & ~(size_t)15);
  report(q, p, c->size);
  call(c->fn, q);
}

/* Past the end of a large block but inside its span: 40,000 bytes take 10
 * pages of a 64 KiB span, and the rest is no block. (The checked build's
 * guard slice makes the span 96 KiB: the last slice is past the block.) */
static void run_past_end(const mcase_t *c) {
  char *p = malloc_fn(c->size);
  if (!p) _exit(5);
  memset(p, 1, c->size);
  char *q = p + (strcmp(hz_target(), "hakozuna-checked") == 0 ? 80 : 48) * KiB;
  report(q, NULL, 0);
  call(c->fn, q);
}

/* ---- pointers into span memory that never held a block ---- */
/* 48-byte blocks: a 32 KiB span holds 682 of them and a 32-byte tail that
 * looks like the start of block 682. */
static void run_span_tail(const mcase_t *c) {
  char *p = malloc_fn(40);
  if (!p) _exit(5);
  char *q = (char *)((uintptr_t)p & ~(uintptr_t)32767) + 682 * 48;
  report(q, NULL, 0);
  call(c->fn, q);
}

/* 1 KiB blocks are put on the free list four at a time: in a fresh span,
 * block 20 was never handed out. (The checked build's spans start with a
 * guard block.) */
static void run_span_uncarved(const mcase_t *c) {
  char *p = NULL;
  uintptr_t first = strcmp(hz_target(), "hakozuna-checked") == 0 ? 1024 : 0;
  for (int i = 0; i < 200 && (p == NULL || ((uintptr_t)p & 32767) != first); i++) p = malloc_fn(1000);
  if (!p || ((uintptr_t)p & 32767) != first) _exit(5);
  char *q = p + 20 * 1024;
  report(q, NULL, 0);
  call(c->fn, q);
}

/* ---- double frees ---- */
static void run_double(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  memset(p, 2, c->size);
  report(p, p, c->size);
  free_fn(p);
  call(c->fn, p);
}

static void run_realloc0(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  if (realloc_fn(p, 0) != NULL) _exit(6); /* glibc: frees, returns NULL */
  call(c->fn, p);
}

static void *free_in_thread(void *p) {
  free_fn(p);
  return NULL;
}

/* First free here, the second in another thread. */
static void run_double_thread(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  free_fn(p);
  pthread_t th;
  if (pthread_create(&th, NULL, free_in_thread, p) != 0) _exit(5);
  pthread_join(th, NULL);
}

/* A huge block freed with no cache to keep it: its memory went back to the
 * system at once, and the second call finds nothing of ours there. It was
 * reported as a pointer hakozuna never allocated. */
static void run_double_unmapped(const mcase_t *c) {
  int (*option_set)(hz_option_t, long) = LIB_FN(int (*)(hz_option_t, long), "hz_option_set", hz_option_set);
  if (!option_set || option_set(HZ_OPTION_HUGE_CACHE, 0) != 0) _exit(7);
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  free_fn(p);
#ifdef _WIN32
  free_fn = hz_free; /* (free() gives the address to the C runtime, whose block it may be now) */
  realloc_fn = hz_realloc;
#endif
  call(c->fn, p);
}

/* The same, by a thread that makes large blocks itself: it takes a large
 * block's span into its own cache at once (heap.c,
 * hz_heap_free_large_remote), where the second free must still find it
 * freed. */
static void *free_in_maker_thread(void *p) {
  void *own = malloc_fn(100000);
  free_fn(p);
  free_fn(own);
  return NULL;
}

/* A thread that uses blocks of p's size frees p after others of its owner,
 * who takes none of them meanwhile (it waits in the join), the last 4 sent
 * 10 ms after the first 4, which still wait in its inbox (the coarse clock
 * has ticked since): the owner is behind, and p goes onto that thread's
 * stash (src/stash.c, hz_stash_adopt) with its free tag set. */
static void *owner_others[8];
static double owner_start;
static void *free_in_user_thread(void *p) {
  free_fn(malloc_fn(usable_fn(p)));
  for (int i = 0; i < 4; i++) free_fn(owner_others[i]);
  tu_wait_until(owner_start + 0.010);
  for (int i = 4; i < 8; i++) free_fn(owner_others[i]);
  free_fn(p);
  return NULL;
}

/* First free in another thread (a remote free, by `first`), the second here. */
static void double_remote(const mcase_t *c, void *(*first)(void *)) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  pthread_t th;
  if (pthread_create(&th, NULL, first, p) != 0) _exit(5);
  pthread_join(th, NULL);
  call(c->fn, p);
}
static void run_double_remote(const mcase_t *c) { double_remote(c, free_in_thread); }
static void run_double_remote_maker(const mcase_t *c) { double_remote(c, free_in_maker_thread); }
static void run_double_remote_user(const mcase_t *c) {
  for (int i = 0; i < 8; i++)
    if ((owner_others[i] = malloc_fn(c->size)) == NULL) _exit(5);
  owner_start = tu_now();
  double_remote(c, free_in_user_thread);
}

/* Many allocations and frees of other sizes between the two frees. The same
 * churn runs once before the block exists, so that it has its memory
 * already, and blocks of the same size stay live around it; if the churn
 * still reuses the block's memory the case cannot be run as meant (exit
 * CHURN_REUSED, reported as such). */
static int churn(size_t target, const char *blk, size_t n) {
  static const size_t sizes[] = {16, 100, 1000, 5000, 20000, 70000, 200000, MiB};
  void *ring[32] = {0};
  int reused = 0;
  for (int i = 0; i < 4000; i++) {
    size_t s = sizes[i % 8];
    if (s * 4 > target && s < target * 4) continue; /* not the block's size */
    char *q = malloc_fn(s);
    if (!q) _exit(5);
    memset(q, 3, s < 256 ? s : 256);
    if (blk && q < blk + n && blk < q + usable_fn(q)) reused = 1;
    free_fn(ring[i % 32]);
    ring[i % 32] = q;
  }
  for (int i = 0; i < 32; i++) free_fn(ring[i]);
  return reused;
}

static void run_double_churn(const mcase_t *c) {
  void *pins[8];
  /* A freed huge block stays mapped (and its double free recognisable) only
   * while it waits in the huge cache, HAKOZUNA_PURGE_DELAY ms: keep it there
   * however long the churn takes on a loaded machine. */
  int (*option_set)(hz_option_t, long) = LIB_FN(int (*)(hz_option_t, long), "hz_option_set", hz_option_set);
  if (!option_set || option_set(HZ_OPTION_PURGE_DELAY, -1) != 0) _exit(7);
  churn(c->size, NULL, 0);
  for (int i = 0; i < 4; i++) pins[i] = malloc_fn(c->size);
  void *p = malloc_fn(c->size);
  for (int i = 4; i < 8; i++) pins[i] = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  free_fn(p);
  if (churn(c->size, p, c->size)) _exit(CHURN_REUSED);
  call(c->fn, p);
  for (int i = 0; i < 8; i++) free_fn(pins[i]);
}

/* C++ sized delete (the allocator's own operator delete(void *, size_t) and
 * its aligned form) with a size other than the one new was given:
 * c->size is new's size, the size given to delete is in the table. */
static const struct { size_t new_size, delete_size, align; } sized_cases[] = {
    {1, 32, 0},              /* new char, deleted as a 32-byte struct */
    {100, 1000, 0},          /* small, deleted as a bigger small size */
    {1000, 100, 0},          /* small, deleted as a smaller class */
    {200 * KiB, 100, 0},     /* large, deleted as small */
    {200 * KiB, 400 * KiB, 0}, /* large, deleted as another slice count */
    {16 * MiB, 32 * MiB, 0}, /* huge, deleted as a bigger one */
    {100, 300, 64},          /* aligned new, deleted with another size */
};

static void run_sized_delete(const mcase_t *c) {
  void *(*op_new)(size_t) = LIB_FN(void *(*)(size_t), "_Znwm", _Znwy);
  void *(*op_new_al)(size_t, size_t) =
      LIB_FN(void *(*)(size_t, size_t), "_ZnwmSt11align_val_t", _ZnwySt11align_val_t);
  void (*op_del)(void *, size_t) = LIB_FN(void (*)(void *, size_t), "_ZdlPvm", _ZdlPvy);
  void (*op_del_al)(void *, size_t, size_t) =
      LIB_FN(void (*)(void *, size_t, size_t), "_ZdlPvmSt11align_val_t", _ZdlPvySt11align_val_t);
  if (!op_new || !op_new_al || !op_del || !op_del_al) _exit(7);
  size_t n = sized_cases[c->size].new_size, d = sized_cases[c->size].delete_size;
  size_t a = sized_cases[c->size].align;
  /* the right size first: no report */
  void *ok = a ? op_new_al(n, a) : op_new(n);
  if (a) op_del_al(ok, n, a);
  else op_del(ok, n);
  void *p = a ? op_new_al(n, a) : op_new(n);
  report(p, p, d);
  if (a) op_del_al(p, d, a);
  else op_del(p, d);
}

/* Checked build: a write after free into a free block, at byte c->size of a
 * 40-byte block (0-15 are the free-list link and tag), shows when the block
 * is handed out again. */
static void run_write_after_free(const mcase_t *c) {
  size_t n = c->size < 40 ? 40 : 20000; /* (past the first 4 KiB: the fill is compared a page at a time) */
  unsigned char *p = malloc_fn(n);
  if (!p) _exit(5);
  report(p, p, n);
  free_fn(p);
  p[c->size] ^= 0x5a;
  for (int i = 0; i < 100000; i++) free_fn(malloc_fn(n));
}

/* Checked build: a write one byte past the request shows at free whatever
 * room the class's rounding left; also after realloc changed the request
 * in place (shrunk, from 4 bytes more than the first block held). */
static void overflow(size_t n, int shrunk) {
  unsigned char *p = malloc_fn(n);
  if (!p) _exit(5);
  if (shrunk) {
    unsigned char *q = realloc_fn(p, usable_fn(p) + 4);
    if (!q || (p = realloc_fn(q, n)) == NULL) _exit(5);
  }
  if (usable_fn(p) != n) _exit(6); /* the usable size is the request */
  memset(p, 0x41, n);
  report(p, p, n);
  ((volatile unsigned char *)p)[n] ^= 0x5a;
  free_fn(p);
}
static void run_overflow(const mcase_t *c) { overflow(c->size, 0); }
static void run_overflow_shrunk(const mcase_t *c) { overflow(c->size, 1); }

/* Checked build: a write one byte before a block shows at its free, after
 * a block in use, a freed one, or none (the first block of a span: sizes
 * that no other allocation of the child used). */
static void underflow(size_t n, int mode) {
  unsigned char *a = malloc_fn(n), *p = malloc_fn(n);
  if (!a || !p) _exit(5);
  if (mode == 1) free_fn(a);
  if (mode == 2) p = a;
  report(p, p, n);
  ((volatile unsigned char *)p)[-1] ^= 0x5a;
  free_fn(p);
}
static void run_underflow_live(const mcase_t *c) { underflow(c->size, 0); }
static void run_underflow_freed(const mcase_t *c) { underflow(c->size, 1); }
static void run_underflow_first(const mcase_t *c) { underflow(c->size, 2); }

static void run_free_sized(const mcase_t *c) {
  void (*free_sized)(void *, size_t) = LIB_FN(void (*)(void *, size_t), "hz_free_sized", hz_free_sized);
  if (!free_sized) _exit(7);
  void *p = malloc_fn(c->size);
  report(p, p, c->size);
  free_sized(p, c->size * 100 + 5000);
}

/* A 100-byte block from aligned_alloc(64): freed as aligned to 4096, then
 * as holding 5000 bytes. */
static void aligned_sized(size_t align, size_t size) {
  void (*fas)(void *, size_t, size_t) =
      LIB_FN(void (*)(void *, size_t, size_t), "hz_free_aligned_sized", hz_free_aligned_sized);
  void *(*aa)(size_t, size_t) = LIB_FN(void *(*)(size_t, size_t), "hz_aligned_alloc", hz_aligned_alloc);
  if (!fas || !aa) _exit(7);
  void *p = aa(64, 100);
  if (p && (uintptr_t)p % 4096 == 0) p = aa(64, 100); /* (the next one, not so aligned by chance) */
  if (!p || (uintptr_t)p % 4096 == 0) _exit(7);
  report(p, p, 100);
  fas(p, align, size);
}
static void run_aligned_sized_align(const mcase_t *c) { (void)c, aligned_sized(4096, 100); }
static void run_aligned_sized_size(const mcase_t *c) { (void)c, aligned_sized(64, 5000); }

/* ---- the parent's side ---- */
/* The number after `key` in msg, in base 10 or 16; 0 if none. */
static int parse_after(const char *msg, const char *key, int base, uintptr_t *out) {
  const char *s = strstr(msg, key);
  if (!s) return 0;
  s += strlen(key);
  char *end;
  *out = (uintptr_t)strtoull(s, &end, base);
  return end != s;
}
static int number_after(const char *msg, const char *key, uintptr_t *out) { return parse_after(msg, key, 10, out); }
/* A pointer (%p) is hex: 0x... from glibc, 16 digits without 0x on Windows. */
static int pointer_after(const char *msg, const char *key, uintptr_t *out) { return parse_after(msg, key, 16, out); }

static void check_message(const mcase_t *c, const char *msg, uintptr_t passed,
                          uintptr_t block, const char *name) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "hakozuna: %s(): ", fn_names[c->fn]);
  size_t len = strlen(msg);
  CHECKF(len > 0 && msg[len - 1] == '\n' && strchr(msg, '\n') == msg + len - 1,
         "%s: stderr is not one line: \"%s\"", name, msg);
  uintptr_t v;
  if (c->expect == EXPECT_ABORT || c->expect == EXPECT_WAF || c->expect == EXPECT_OVERFLOW ||
      c->expect == EXPECT_UNDERFLOW) {
    CHECKF(strncmp(msg, "hakozuna: ", 10) == 0, "%s: stderr \"%s\"", name, msg);
    if (c->expect == EXPECT_OVERFLOW)
      CHECKF(strstr(msg, "free(): buffer overflow detected: ") != NULL && pointer_after(msg, " the block ", &v) &&
                 v == passed,
             "%s: stderr \"%s\", want a buffer overflow of the block %p", name, msg, (void *)passed);
    if (c->expect == EXPECT_UNDERFLOW)
      CHECKF(strstr(msg, "free(): buffer underflow detected: ") != NULL && pointer_after(msg, " the block ", &v) &&
                 v == passed,
             "%s: stderr \"%s\", want a buffer underflow of the block %p", name, msg, (void *)passed);
    if (c->expect == EXPECT_WAF) /* found by a later malloc */
      CHECKF(strstr(msg, "write after free detected in the free block ") != NULL,
             "%s: stderr \"%s\"", name, msg);
    return;
  }
  if (!CHECKF(strncmp(msg, prefix, strlen(prefix)) == 0, "%s: stderr \"%s\" "
              "does not start with \"%s\"", name, msg, prefix))
    return;
  if (c->expect == EXPECT_GONE) {
    CHECKF(pointer_after(msg, c->fn == FN_USABLE ? "use of the freed block " : "double free of ", &v) && v == passed,
           "%s: stderr \"%s\", want a double free or use of %p", name, msg, (void *)passed);
    CHECKF(strstr(msg, "(a huge block, whose memory already went back to the system)") != NULL,
           "%s: stderr \"%s\"", name, msg);
    return;
  }
  if (c->expect == EXPECT_FREED) {
    CHECKF(pointer_after(msg, "use of the freed block ", &v) && v == passed,
           "%s: stderr \"%s\", want use of the freed block %p", name, msg, (void *)passed);
    return;
  }
  if (c->expect == EXPECT_DOUBLE) {
    CHECKF(pointer_after(msg, "double free of ", &v) && v == passed,
           "%s: stderr \"%s\", want double free of %p", name, msg, (void *)passed);
    CHECKF(number_after(msg, "(block of ", &v) && v >= c->size,
           "%s: stderr \"%s\", want (block of >= %zu bytes)", name, msg, c->size);
    return;
  }
  if (c->expect == EXPECT_SIZE) {
    CHECKF(number_after(msg, "(): size ", &v) && v == sized_cases[c->size].delete_size,
           "%s: stderr \"%s\", want size %zu", name, msg,
           sized_cases[c->size].delete_size);
    CHECKF(pointer_after(msg, "does not match the block ", &v) && v == passed,
           "%s: stderr \"%s\", want the block %p", name, msg, (void *)passed);
    return;
  }
  CHECKF(pointer_after(msg, "invalid pointer ", &v) && v == passed,
         "%s: stderr \"%s\", want invalid pointer %p", name, msg, (void *)passed);
  if (c->expect == EXPECT_FOREIGN) {
    CHECKF(strstr(msg, "(not allocated by hakozuna)") != NULL, "%s: stderr \"%s\"",
           name, msg);
    return;
  }
  if (c->expect == EXPECT_NOBLOCK) {
    CHECKF(strstr(msg, "where no block was handed out") != NULL ||
               strstr(msg, "past its last block") != NULL,
           "%s: stderr \"%s\"", name, msg);
    return;
  }
  CHECKF(number_after(msg, "(inside a block of ", &v) && v >= c->size,
         "%s: stderr \"%s\", want (inside a block of >= %zu bytes", name, msg,
         c->size);
  CHECKF(pointer_after(msg, " bytes at ", &v) && v == block,
         "%s: stderr \"%s\", want the block at %p", name, msg, (void *)block);
}

/* ---- a case in a child process ---- */
#ifdef _WIN32
/* The child's report goes to its stdout. hz_os_abort raises SIGABRT before
 * it ends the process: this handler's line shows that it did. */
static void on_sigabrt(int sig) {
  (void)sig;
  static const char line[] = "SIGABRT\n";
  if (write(info_fd, line, sizeof line - 1) < 0) _exit(4);
}
#endif

/* The child's side: case c's misuse, which must end the process. */
__attribute__((noreturn)) static void child(const mcase_t *c) {
#ifdef _WIN32
  signal(SIGABRT, on_sigabrt);
#endif
  c->run(c);
  _exit(0); /* the misuse went unnoticed */
}

/* How a child ended: CHILD_ABORTED as a misuse report ends a process, else
 * its own exit status (>= 0) or CHILD_OTHER; described in why. */
enum { CHILD_ABORTED = -1, CHILD_OTHER = -2 };

#ifdef _WIN32
#define ABORT_END "status 3 after raising SIGABRT"

/* No fork: the program again, with --case N. */
static int run_child(const mcase_t *c, int index, char *info, size_t info_cap, char *msg, size_t msg_cap,
                     char *why, size_t why_len) {
  char args[32];
  int hung;
  (void)c;
  snprintf(args, sizeof args, "--case %d", index);
  long long st = tu_spawn_self(args, 20, info, info_cap, msg, msg_cap, &hung);
  int raised = strstr(info, "SIGABRT") != NULL;
  if (st < 0) snprintf(why, why_len, "could not be started (Windows error %d)", -hung);
  else if (hung) snprintf(why, why_len, "hung (ended after 20s)");
  else snprintf(why, why_len, "exited with status %lld (0x%llx)%s", st, st, raised ? " after raising SIGABRT" : "");
  if (st < 0 || hung) return CHILD_OTHER;
  return st == 3 && raised ? CHILD_ABORTED : (int)st;
}
#else
#define ABORT_END "killed by SIGABRT"

static int run_child(const mcase_t *c, int index, char *info, size_t info_cap, char *msg, size_t msg_cap,
                     char *why, size_t why_len) {
  int err_fd, infop[2];
  (void)index;
  snprintf(why, why_len, "could not be started");
  info[0] = msg[0] = 0;
  if (pipe(infop) != 0) return CHILD_OTHER;
  pid_t pid = tu_fork_capturing(&err_fd, 20);
  if (pid < 0) return CHILD_OTHER;
  if (pid == 0) {
    close(infop[0]);
    info_fd = infop[1];
    child(c);
  }
  close(infop[1]);
  tu_read_all(infop[0], info, info_cap);
  tu_read_all(err_fd, msg, msg_cap);
  close(infop[0]);
  close(err_fd);
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return CHILD_OTHER;
  snprintf(why, why_len, "%s %d", WIFSIGNALED(st) ? "killed by signal" : "exited with status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return WTERMSIG(st) == SIGABRT ? CHILD_ABORTED : CHILD_OTHER;
  return WEXITSTATUS(st);
}
#endif

static void run_case(const mcase_t *c, int index) {
  char name[160];
  if (c->expect == EXPECT_FOREIGN)
    snprintf(name, sizeof name, "%s(): %s", fn_names[c->fn], c->what);
  else
    snprintf(name, sizeof name, "%s(): %s, %zu bytes", fn_names[c->fn], c->what,
             c->size);
  char info[256], msg[4096], why[96];
  int end = run_child(c, index, info, sizeof info, msg, sizeof msg, why, sizeof why);
  /* qemu-user adds its own line about the signal that ended the child */
  char *emu = strstr(msg, "qemu: uncaught target signal");
  if (emu != NULL) *emu = 0;
  if (end == CHURN_REUSED) {
    CHECKF(0, "%s: the churn between the frees reused the block's memory: "
           "this case needs other churn sizes", name);
    return;
  }
  if (!CHECKF(end == CHILD_ABORTED, "%s: child %s, want " ABORT_END "; stderr: \"%s\"", name, why, msg))
    return;
  void *passed = NULL, *block = NULL;
  size_t size = 0;
  if (!CHECKF(sscanf(info, "%p %p %zu", &passed, &block, &size) >= 2,
              "%s: no report from the child (\"%s\")", name, info))
    return;
  check_message(c, msg, (uintptr_t)passed, (uintptr_t)block, name);
}

/* Every case, in a fixed order (a child started with --case N finds its
 * case by its index; the environment, which the child inherits, decides
 * which are in). Returns how many. */
static int make_cases(mcase_t *out) {
  static const size_t sizes[] = {48, 20 * KiB, 200 * KiB, 16 * MiB};
  int n = 0;
  for (int fn = FN_FREE; fn <= FN_USABLE; fn++) {
    for (size_t w = 0; w < FOREIGN_N; w++)
      out[n++] = (mcase_t){foreign_names[w], fn, EXPECT_FOREIGN, w, run_foreign};
    for (int i = 0; i < 4; i++)
      out[n++] = (mcase_t){"pointer inside a block", fn, EXPECT_INSIDE, sizes[i], run_inside};
    /* (the offsets of these assume 32 KiB spans of 4 KiB pages: not with
     * HAKOZUNA_PAGE_SIZE, whose larger pages change the span geometry and
     * leave no room past the 40,000-byte block) */
    if (getenv("HAKOZUNA_PAGE_SIZE") == NULL) {
      out[n++] = (mcase_t){"pointer past a large block", fn, EXPECT_NOBLOCK, 40000, run_past_end};
      out[n++] = (mcase_t){"tail of a span past its last block", fn, EXPECT_NOBLOCK, 48, run_span_tail};
      out[n++] = (mcase_t){"block of a span never handed out", fn, EXPECT_NOBLOCK, 1024,
                           run_span_uncarved};
    }
  }
  for (int i = 0; i < 4; i++) {
    const mcase_t cs[] = {
        {"double free", FN_FREE, EXPECT_DOUBLE, sizes[i], run_double},
        {"realloc of a freed block", FN_REALLOC, EXPECT_DOUBLE, sizes[i], run_double},
        {"size of a freed block", FN_USABLE, EXPECT_FREED, sizes[i], run_double},
        {"double free after churn", FN_FREE, EXPECT_DOUBLE, sizes[i], run_double_churn},
        {"second free in another thread", FN_FREE, EXPECT_DOUBLE, sizes[i],
         run_double_thread},
        {"first free in another thread", FN_FREE, EXPECT_DOUBLE, sizes[i],
         run_double_remote},
        {"first free in another thread that makes large blocks", FN_FREE, EXPECT_DOUBLE, sizes[i],
         run_double_remote_maker},
        {"first free in another thread that uses the size, after blocks its owner has not taken", FN_FREE, EXPECT_DOUBLE,
         sizes[i], run_double_remote_user},
        {"free after realloc(p, 0)", FN_FREE, EXPECT_DOUBLE, sizes[i], run_realloc0},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) out[n++] = cs[k];
  }
  for (int fn = FN_FREE; fn <= FN_USABLE; fn++)
    out[n++] = (mcase_t){"huge block used after its memory went back", fn, EXPECT_GONE, 16 * MiB,
                         run_double_unmapped};
  for (size_t i = 0; i < sizeof sized_cases / sizeof sized_cases[0]; i++)
    out[n++] = (mcase_t){"sized delete with a wrong size", FN_DELETE, EXPECT_SIZE, i, run_sized_delete};
  if (strcmp(hz_target(), "hakozuna-checked") == 0) {
    static const size_t offsets[] = {0, 3, 8, 15, 16, 30, 4100, 12345, 19999};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
      out[n++] = (mcase_t){offsets[i] < 40 ? "write after free at this byte of a 40-byte block"
                                           : "write after free at this byte of a 20,000-byte block",
                           FN_FREE, EXPECT_WAF, offsets[i], run_write_after_free};
    /* requests 8 below their class's size (no room left: 8, 1016, 32760),
     * or with room between the request and the block's end */
    static const size_t requests[] = {8, 20, 100, 1000, 1017, 4096, 5000, 30000, 32760};
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++)
      out[n++] = (mcase_t){"write one byte past the request", FN_FREE, EXPECT_OVERFLOW, requests[i], run_overflow};
    out[n++] = (mcase_t){"write one byte past a request realloc shrank", FN_FREE, EXPECT_OVERFLOW, 30,
                         run_overflow_shrunk};
    out[n++] = (mcase_t){"write one byte past a request realloc shrank", FN_FREE, EXPECT_OVERFLOW, 3000,
                         run_overflow_shrunk};
    static const size_t under[] = {8, 24, 100, 4096, 30000};
    for (size_t i = 0; i < sizeof under / sizeof under[0]; i++) {
      out[n++] = (mcase_t){"write one byte before a block after one in use", FN_FREE, EXPECT_UNDERFLOW, under[i],
                           run_underflow_live};
      out[n++] = (mcase_t){"write one byte before a block after a freed one", FN_FREE, EXPECT_UNDERFLOW, under[i],
                           run_underflow_freed};
    }
    out[n++] = (mcase_t){"write one byte before the first block of a span", FN_FREE, EXPECT_UNDERFLOW, 12000,
                         run_underflow_first};
    out[n++] = (mcase_t){"write one byte before the first block of a span", FN_FREE, EXPECT_UNDERFLOW, 30000,
                         run_underflow_first};
  }
  out[n++] = (mcase_t){"hz_free_sized with a wrong size", FN_FREE, EXPECT_ABORT, 100, run_free_sized};
  out[n++] = (mcase_t){"hz_free_aligned_sized with a wrong alignment", FN_FREE, EXPECT_ABORT, 100,
                       run_aligned_sized_align};
  out[n++] = (mcase_t){"hz_free_aligned_sized with a wrong size", FN_FREE, EXPECT_ABORT, 100,
                       run_aligned_sized_size};
  return n;
}

TEST_MAIN() {
  static mcase_t cases[160];
  int n = make_cases(cases);
  if (argc == 3 && strcmp(argv[1], "--case") == 0) { /* one case, its report on stdout */
    int i = atoi(argv[2]);
    if (i < 0 || i >= n) return 2;
    info_fd = 1;
    child(&cases[i]);
  }
  for (int i = 0; i < n; i++) run_case(&cases[i], i);
  printf("%d misuse cases\n", n);
  return 0;
}
