// SPDX-License-Identifier: MIT
/* tests/heap/stash.c: a thread's stash of freed blocks of 1 KiB and more
 * (src/stash.c, docs/perf.md §60, §71).
 *
 * 1. Newest first, whatever span (blocks of 20000 bytes, then of 1000, the
 *    smallest stashed class): of two blocks freed in spans that are
 *    not the class's current one, malloc returns the last freed, then the
 *    other (each span's own list would have handed out a block of the
 *    current span, fresh or freed long before).
 * 2. Statistics count stashed blocks as freed: live blocks of the class are
 *    exactly those not freed, and unused_stashed counts the stashed ones
 *    (whole blocks, up to the stash's 12).
 * 3. hz_collect(1) empties the stash: every page of the freed blocks past
 *    the one holding the free-list link is back with the OS (stashed, no
 *    span of theirs would see them free).
 * 4. A thread's exit empties its stash: blocks a thread allocated and freed
 *    before it exited have their pages back after hz_collect(1) in main,
 *    which reaches no other thread's stash.
 * 5. Blocks another thread frees go onto their owner's stash when it takes
 *    them in: the owner's next two mallocs return them (from their spans,
 *    a block of the current span came first).
 * 6. A class the thread stops using gives its stash back once a purge
 *    delay has passed while the thread goes on with other sizes (slow-path
 *    calls: large blocks): unused_stashed falls to 0 (within 10 s; with the
 *    purge delay at 20 ms it takes well under one). Kept, it stayed.
 * 7. A thread that uses the class itself and frees another thread's blocks
 *    while the ones it sent before have waited in their owner's inbox for a
 *    tick of the coarse clock keeps them on its
 *    own stash (hz_stash_adopt, docs/perf.md §78): its next malloc returns
 *    the last one it freed (before, its own stashed block, while the other
 *    waited in the owner's inbox). Its exit sends them to their owner:
 *    the class's statistics balance and the owner gets them back.
 * 8. A malloc that finds no block of its class (9216 bytes) takes a freed
 *    block of a class above it (10240) from that class's stash rather than
 *    fresh memory (hz_stash_borrow, docs/perf.md §79), but only while the
 *    stash holds two: the second malloc gets fresh memory. A C++ sized delete
 *    of the lent block with the size asked is no misuse. aligned_alloc(8192)
 *    never gets such a block: no class above 8192 lends to it (9216 and
 *    10240 are multiples of 1 and 2 KiB only). On the code before, the first
 *    malloc got fresh memory.
 * 9. A class the thread has left lends any of its freed blocks, from its
 *    spans too, to a class down to half its size (docs/perf.md §84): a
 *    thread frees 4 blocks of 16 KiB and goes on with other sizes until its
 *    stash of them ages (back to their spans); its malloc(9000), which
 *    finds no 9216-byte block, gets one of them (fresh memory on the code
 *    before). Once the thread mallocs 16 KiB again, the class lends so no
 *    more: the next malloc(9000) gets a 9216-byte block.
 * The class is 20 KiB (20000-byte requests): a stash of 12 blocks by default
 * (HAKOZUNA_STASH=256 KiB), spans of 8 blocks after a first span of one. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REQ 20000
#define N 40

static uint64_t stashed_bytes(void) {
  hz_stats_t st;
  CHECK(tu_stats(&st) == 0);
  return st.unused_stashed;
}

static hz_class_stats_t class_stats(int c) {
  hz_stats_t st;
  CHECK(tu_stats(&st) == 0);
  return st.classes[c];
}

/* Resident pages of the freed block p past its first page. */
static size_t resident_tail(const char *p) {
  size_t ps = tu_page_size(), n = 0;
  uintptr_t lo = ((uintptr_t)p + ps + ps - 1) & ~(uintptr_t)(ps - 1), hi = ((uintptr_t)p + REQ) & ~(uintptr_t)(ps - 1);
  unsigned char v[16];
  if (hi <= lo) return 0;
  if (!CHECK((hi - lo) / ps <= sizeof v) || !CHECK(mincore((void *)lo, hi - lo, v) == 0)) return SIZE_MAX;
  for (size_t i = 0; i < (hi - lo) / ps; i++) n += v[i] & 1;
  return n;
}

/* 20000 bytes: b[3] and b[12] lie in two of the class's first spans; the
 * current one holds b[33..39] and has blocks not carved yet. 1000 bytes
 * (the smallest stashed class): both lie in the first span of 32, b[32..39]
 * in the current one. */
static void newest_first(size_t req) {
  char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(req);
    if (CHECK(b[i] != NULL)) memset(b[i], i, req);
  }
  free(b[3]);
  free(b[12]);
  char *x = malloc(req), *y = malloc(req);
  CHECKF(x == b[12] && y == b[3], "%zu bytes: after free(%p) and free(%p), malloc gave %p then %p", req,
         (void *)b[3], (void *)b[12], (void *)x, (void *)y);
  b[12] = x;
  b[3] = y;
  for (int i = 0; i < N; i++) free(b[i]);
  hz_collect(1);
}

static void counted_and_collected(int c) {
  char *b[N];
  hz_class_stats_t before = class_stats(c);
  for (int i = 0; i < N; i++) {
    b[i] = malloc(REQ);
    if (CHECK(b[i] != NULL)) memset(b[i], 7, REQ);
  }
  for (int i = 0; i < N; i += 2) free(b[i]); /* every second: their spans keep live blocks */
  hz_class_stats_t now = class_stats(c);
  CHECKF(now.live == before.live + N / 2, "%llu blocks of the class live, want %llu",
         (unsigned long long)now.live, (unsigned long long)(before.live + N / 2));
  CHECKF(now.frees == before.frees + N / 2, "%llu frees counted, want %llu", (unsigned long long)now.frees,
         (unsigned long long)(before.frees + N / 2));
  uint64_t stashed = stashed_bytes();
  CHECKF(stashed > 0 && stashed % 20480 == 0 && stashed <= 12 * 20480, "%llu bytes stashed",
         (unsigned long long)stashed);
  hz_collect(1);
  size_t kept = 0;
  for (int i = 0; i < N; i += 2) kept += resident_tail(b[i]);
  CHECKF(kept == 0, "%zu pages of the freed blocks resident after hz_collect(1)", kept);
  for (int i = 1; i < N; i += 2) free(b[i]);
  hz_collect(1);
}

static char *thread_blocks[N];

static void *alloc_and_free(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++) {
    thread_blocks[i] = malloc(REQ);
    if (thread_blocks[i] != NULL) memset(thread_blocks[i], 9, REQ);
  }
  for (int i = 0; i < N; i++) free(thread_blocks[i]);
  return NULL;
}

static void thread_exit(void) {
  pthread_t th;
  if (!CHECK(pthread_create(&th, NULL, alloc_and_free, NULL) == 0)) return;
  CHECK(pthread_join(th, NULL) == 0);
  hz_collect(1);
  size_t kept = 0;
  for (int i = 0; i < N; i++)
    if (CHECK(thread_blocks[i] != NULL)) kept += resident_tail(thread_blocks[i]);
  CHECKF(kept == 0, "%zu pages of the blocks an exited thread freed still resident after hz_collect(1)", kept);
}

static char *remote_blocks[2];

static void *free_two(void *arg) {
  (void)arg;
  free(remote_blocks[0]);
  free(remote_blocks[1]);
  return NULL; /* (the exit sends the thread's remote frees on) */
}

static void remote_frees(void) {
  char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(REQ);
    if (CHECK(b[i] != NULL)) memset(b[i], 3, REQ);
  }
  remote_blocks[0] = b[5];
  remote_blocks[1] = b[20];
  pthread_t th;
  if (!CHECK(pthread_create(&th, NULL, free_two, NULL) == 0)) return;
  CHECK(pthread_join(th, NULL) == 0);
  char *x = malloc(REQ), *y = malloc(REQ);
  CHECKF((x == b[5] && y == b[20]) || (x == b[20] && y == b[5]),
         "after another thread freed %p and %p, malloc gave %p and %p", (void *)b[5], (void *)b[20], (void *)x,
         (void *)y);
  b[5] = x;
  b[20] = y;
  for (int i = 0; i < N; i++) free(b[i]);
  hz_collect(1);
}

/* 4 blocks of 20 KiB send the owner a batch (64 KiB or 32 blocks,
 * remote.c), which it does not take while it waits in the join; 10 ms
 * later (the coarse clock ticks every 1-4 ms) the next 4 find that batch
 * still there: the owner is behind, and the ninth block is adopted. */
enum { ADOPT_SENT = 8 };
static char *adopt_blocks[ADOPT_SENT + 1], *adopt_got, *adopt_own;
static double adopt_start;

static void *adopt_thread(void *arg) {
  (void)arg;
  adopt_own = malloc(REQ); /* the thread uses the class: it has a stash */
  if (adopt_own != NULL) memset(adopt_own, 5, REQ);
  free(adopt_own);
  for (int i = 0; i < ADOPT_SENT / 2; i++) free(adopt_blocks[i]);
  tu_wait_until(adopt_start + 0.010);
  for (int i = ADOPT_SENT / 2; i <= ADOPT_SENT; i++) free(adopt_blocks[i]);
  adopt_got = malloc(REQ);
  if (adopt_got != NULL) memset(adopt_got, 6, REQ);
  free(adopt_got);
  return NULL;
}

static void adopted(int c) {
  hz_class_stats_t before = class_stats(c);
  for (int i = 0; i <= ADOPT_SENT; i++) {
    adopt_blocks[i] = malloc(REQ);
    if (CHECK(adopt_blocks[i] != NULL)) memset(adopt_blocks[i], 2, REQ);
  }
  pthread_t th;
  adopt_start = tu_now();
  if (!CHECK(pthread_create(&th, NULL, adopt_thread, NULL) == 0)) return;
  CHECK(pthread_join(th, NULL) == 0);
  CHECKF(adopt_got == adopt_blocks[ADOPT_SENT],
         "a thread freed another's block %p while its owner had blocks waiting; its next malloc gave %p (its own "
         "was %p)",
         (void *)adopt_blocks[ADOPT_SENT], (void *)adopt_got, (void *)adopt_own);
  hz_class_stats_t now = class_stats(c);
  CHECKF(now.live == before.live && now.frees - before.frees == now.mallocs - before.mallocs,
         "with every block freed: %llu live (%llu before), %llu mallocs and %llu frees since",
         (unsigned long long)now.live, (unsigned long long)before.live,
         (unsigned long long)(now.mallocs - before.mallocs), (unsigned long long)(now.frees - before.frees));
  /* (adopt_got, the owner's too, was freed there as well) */
  CHECKF(now.remote_frees - before.remote_frees == ADOPT_SENT + 2, "%llu remote frees counted, want %d",
         (unsigned long long)(now.remote_frees - before.remote_frees), ADOPT_SENT + 2);
  /* The exit sent the stashed ones on: they are all the owner's again. */
  char *b[ADOPT_SENT + 1];
  int back = 0;
  for (int i = 0; i <= ADOPT_SENT; i++) {
    b[i] = malloc(REQ);
    for (int k = 0; k <= ADOPT_SENT; k++) back += b[i] == adopt_blocks[k];
  }
  CHECKF(back == ADOPT_SENT + 1, "%d of the %d blocks came back to their owner", back, ADOPT_SENT + 1);
  for (int i = 0; i <= ADOPT_SENT; i++) free(b[i]);
  hz_collect(1);
}

#define LEND_REQ 10000   /* the 10240-byte class */
#define BORROW_REQ 9000  /* the 9216-byte class, the one below */
void _ZdlPvm(void *p, size_t n); /* C++'s sized operator delete (override_cxx.c) */
static char *lend_a[3], *lend_p, *lend_q, *lend_al[3];
static size_t lend_usable;

/* In a thread of its own: a heap that never used these classes. */
static void *lend_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++) {
    lend_a[i] = malloc(LEND_REQ);
    if (lend_a[i] != NULL) memset(lend_a[i], 1, LEND_REQ);
  }
  free(lend_a[0]);
  free(lend_a[1]); /* the stash of 10240 holds both */
  lend_p = malloc(BORROW_REQ);
  lend_usable = malloc_usable_size(lend_p);
  if (lend_p != NULL) memset(lend_p, 2, BORROW_REQ);
  lend_q = malloc(BORROW_REQ); /* the stash holds one: not lent */
  if (lend_q != NULL) memset(lend_q, 3, BORROW_REQ);
  _ZdlPvm(lend_p, BORROW_REQ);
  free(lend_q);
  free(lend_a[2]);
  for (int i = 0; i < 3; i++) lend_al[i] = aligned_alloc(8192, 8192);
  for (int i = 0; i < 3; i++) free(lend_al[i]);
  return NULL;
}

static void lent(void) {
  /* (no aging meanwhile: the class would be idle, and lend its last block, §84) */
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 3600000) == 0);
  pthread_t th;
  if (!CHECK(pthread_create(&th, NULL, lend_thread, NULL) == 0)) return;
  CHECK(pthread_join(th, NULL) == 0);
  CHECKF(lend_p == lend_a[1], "malloc(%d) with no block of its class and two of 10240 bytes freed (%p, then %p) gave %p",
         BORROW_REQ, (void *)lend_a[0], (void *)lend_a[1], (void *)lend_p);
  CHECKF(lend_usable == 10240, "the lent block's usable size is %zu, want 10240", lend_usable);
  CHECKF(lend_q != NULL && lend_q != lend_a[0], "the next malloc(%d) gave %p: the stash's last block (%p) was lent too",
         BORROW_REQ, (void *)lend_q, (void *)lend_a[0]);
  for (int i = 0; i < 3; i++)
    CHECKF(((uintptr_t)lend_al[i] & 8191) == 0, "aligned_alloc(8192, 8192) gave %p", (void *)lend_al[i]);
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 100) == 0);
}

#define IDLE_REQ 16000 /* the 16384-byte class, seven above 9216 */
static char *idle_a[4], *idle_p, *idle_q, *idle_r;
static size_t idle_p_usable, idle_q_usable;
static bool idle_aged;

/* (cases 6 and 9) Other sizes only, through the slow path (large blocks),
 * with the purge delay at 20 ms, until no stash holds a block: the stashes
 * of the classes not used have aged. */
static bool stashes_aged(void) {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 20) == 0);
  double give_up = tu_now() + 10;
  uint64_t stashed = stashed_bytes();
  while (stashed != 0 && tu_now() < give_up) {
    for (int i = 0; i < 100; i++) free(malloc(40000 + (size_t)i * 1000));
    usleep(5000);
    stashed = stashed_bytes();
  }
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 100) == 0);
  return stashed == 0;
}

static void *idle_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) {
    idle_a[i] = malloc(IDLE_REQ);
    if (idle_a[i] != NULL) memset(idle_a[i], 7, IDLE_REQ);
  }
  for (int i = 0; i < 4; i++) free(idle_a[i]);
  idle_aged = stashes_aged();
  idle_p = malloc(BORROW_REQ);
  idle_p_usable = malloc_usable_size(idle_p);
  idle_r = malloc(IDLE_REQ); /* the class is in use again */
  idle_q = malloc(BORROW_REQ);
  idle_q_usable = malloc_usable_size(idle_q);
  free(idle_p);
  free(idle_q);
  free(idle_r);
  return NULL;
}

static void lent_when_idle(void) {
  pthread_t th;
  if (!CHECK(pthread_create(&th, NULL, idle_thread, NULL) == 0)) return;
  CHECK(pthread_join(th, NULL) == 0);
  if (!CHECKF(idle_aged, "the stash of 16 KiB blocks did not age in 10 s")) return;
  bool theirs = false;
  for (int i = 0; i < 4; i++) theirs |= idle_p == idle_a[i];
  CHECKF(theirs && idle_p_usable == 16384,
         "malloc(%d) with no block of its class and 4 freed blocks of a class left since: %p (usable %zu), not one of "
         "%p %p %p %p",
         BORROW_REQ, (void *)idle_p, idle_p_usable, (void *)idle_a[0], (void *)idle_a[1], (void *)idle_a[2],
         (void *)idle_a[3]);
  CHECKF(idle_q_usable == 9216, "malloc(%d) once 16 KiB was in use again: usable size %zu, want 9216", BORROW_REQ,
         idle_q_usable);
  hz_collect(1);
}

static void stash_ages(void) {
  char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(REQ);
    if (CHECK(b[i] != NULL)) memset(b[i], 4, REQ);
  }
  for (int i = 0; i < N; i++) free(b[i]);
  uint64_t stashed = stashed_bytes();
  CHECKF(stashed >= 6 * 20480, "%llu bytes stashed after %d frees", (unsigned long long)stashed, N);
  /* no call of the stashed class: its stash ages */
  CHECKF(stashes_aged(), "%llu bytes still stashed after 10 s of a class not used",
         (unsigned long long)stashed_bytes());
}

TEST_MAIN() {
  if (tu_page_size() != 4096) {
    printf("SKIP: the geometry assumed here needs 4 KiB pages (have %zu)\n", tu_page_size());
    return 77;
  }
  int c = tu_class_of(REQ);
  if (!CHECK(c >= 0)) return 1;
  newest_first(REQ);
  newest_first(1000);
  counted_and_collected(c);
  thread_exit();
  remote_frees();
  adopted(c);
  lent();
  stash_ages();
  lent_when_idle();
  return check_failed();
}
