// SPDX-License-Identifier: MIT
/* tests/purge/huge_grow.c: realloc grows a huge block by moving its pages.
 *
 * A block past its mapping's end was copied to a new one: a buffer grown
 * 64 KiB at a time to 256 MiB took 18.9 s (glibc, which uses mremap: 0.57 s)
 * and twice its size in RSS while each copy ran. Now the mapping moves
 * (large.c, hz_huge_realloc) with a quarter more room. Not timed: a copy
 * writes every page of the new block, a move faults none in, so the page
 * faults of the whole growth are counted, and the block's contents are
 * checked after every realloc that moved it. Also: an aligned huge block
 * keeps its alignment's offset, and one whose mapping is made of pages
 * moved in from freed blocks (several kernel mappings, which mremap cannot
 * move as one) is still copied correctly.
 *
 * Built against the checked library too (huge_grow-checked): there the
 * block's guard page moves with it, so every realloc is followed by a
 * check that the byte after the block's usable size faults, and the one
 * at its end does not. (The checked build copied instead: the first
 * growth alone took over two minutes.) */
#include "check.h"
#include "testutil.h"
#include <stdbool.h>
#include <stdint.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>

#include "hakozuna.h"

#ifdef HZ_CHECKED_LIB
static sigjmp_buf probe_jump;
static void probe_fault(int sig) { siglongjmp(probe_jump, sig); }

/* Whether writing the byte at p faults (the handler is ours for the probe). */
static bool write_faults(volatile char *p) {
  struct sigaction sa = {.sa_handler = probe_fault}, old_segv, old_bus;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  /* (volatile: a local changed between sigsetjmp and the siglongjmp is
   * indeterminate after it; gcc with musl's headers stored the false
   * before the probing write, and no fault was ever seen) */
  volatile bool faulted = true;
  if (sigsetjmp(probe_jump, 1) == 0) {
    *p = *p;
    faulted = false;
  }
  sigaction(SIGSEGV, &old_segv, NULL);
  sigaction(SIGBUS, &old_bus, NULL);
  return faulted;
}

/* The checked build's guard page sits right after the usable size. */
static void guard_at_end(char *q) {
  size_t usable = malloc_usable_size(q);
  CHECKF(!write_faults(q + usable - 1), "the last usable byte of a %zu-byte block faults", usable);
  CHECKF(write_faults(q + usable), "the byte after a %zu-byte block (its guard page) can be written", usable);
}
#else
static void guard_at_end(char *q) { (void)q; }
#endif

static long faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Page i of a block holds a word of i and the block's generation. */
static void fill(char *p, size_t from, size_t to, uint64_t gen) {
  for (size_t i = from; i < to; i += 4096) *(uint64_t *)(p + i) = (i / 4096) * 1000003 + gen;
}
static bool intact(const char *p, size_t n, uint64_t gen) {
  for (size_t i = 0; i < n; i += 4096)
    if (*(const uint64_t *)(p + i) != (i / 4096) * 1000003 + gen) return false;
  return true;
}

/* Grows a block from `start` to `end` in `step`s, writing each new part. */
static char *grow(char *p, size_t start, size_t end, size_t step, uint64_t gen, long *moves) {
  for (size_t n = start + step; n <= end; n += step) {
    char *q = realloc(p, n);
    if (!CHECKF(q != NULL, "realloc to %zu bytes failed", n)) return p;
    if (q != p) {
      ++*moves;
      CHECKF(intact(q, n - step, gen), "a block of %zu bytes moved at %zu lost its contents", n - step, n);
    }
    fill(q, n - step, n, gen);
    guard_at_end(q);
    p = q;
  }
  return p;
}

TEST_MAIN() {
  /* 4 MiB to 256 MiB, 64 KiB at a time: 65,536 pages written once each. */
  const size_t start = 4 * MiB, end = 256 * MiB, step = 64 * KiB;
  char *p = malloc(start);
  if (!CHECK(p)) return 1;
  fill(p, 0, start, 1);
  long moves = 0, f0 = faults();
  p = grow(p, start, end, step, 1, &moves);
  long f = faults() - f0, pages = (long)((end - start) / 4096);
  printf("4 -> 256 MiB in 64 KiB steps: %ld moves, %ld page faults for %ld new pages\n", moves, f, pages);
  CHECKF(moves >= 5, "the block moved %ld times: the test grows nothing", moves);
  /* a copy faults the whole new block in at each move: 4x as many here */
  CHECKF(f < pages + pages / 4, "%ld page faults for %ld new pages: the growth copied", f, pages);
  CHECK(intact(p, end, 1));
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0 && st.huge_allocs - st.huge_frees == 1);
  free(p);

  /* aligned to 8 MiB: each move keeps the block where its alignment put it */
  p = aligned_alloc(8 * MiB, 5 * MiB);
  if (!CHECK(p && ((uintptr_t)p & (8 * MiB - 1)) == 0)) return 1;
  fill(p, 0, 5 * MiB, 2);
  moves = 0;
  p = grow(p, 5 * MiB, 40 * MiB, 256 * KiB, 2, &moves);
  CHECK(intact(p, 40 * MiB, 2) && moves >= 1);
  free(p);

  /* a mapping made of several: a 9 MiB block takes a freed 20 MiB one's
   * pages (purge/huge_reuse), then grows past its mapping */
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 600000) == 0);
  char *big = malloc(20 * MiB);
  if (!CHECK(big)) return 1;
  fill(big, 0, 20 * MiB, 3);
  free(big);
  p = malloc(9 * MiB);
  if (!CHECK(p)) return 1;
  fill(p, 0, 9 * MiB, 4);
  moves = 0;
  p = grow(p, 9 * MiB, 48 * MiB, 1 * MiB, 4, &moves);
  CHECK(intact(p, 48 * MiB, 4) && moves >= 1);
  free(p);
  return check_failed() ? 1 : 0;
}
