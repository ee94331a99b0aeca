// SPDX-License-Identifier: MIT
/* tests/threads/fork_trim.c: children forked while the purge thread trims.
 *
 * The idle trim takes the pages of free blocks off a span's list, gives them
 * back to the OS, and marks them; the owner's next refill from the span
 * checks that a marked page still reads as zero (anything else is a write
 * after free). The marks went first: a child forked between the marking and
 * the purge kept marked pages that still held their blocks, and its threads
 * aborted with a false "double free ... found when its returned page was used
 * again" (an options audit: 26-51 of 300 children with a 1 ms purge delay,
 * 1 run in 3 with the default delay).
 *
 * Workers fill spans of 512-2047-byte blocks, free 7 in 8 and pause (the
 * trim takes the free pages), then free the rest; main forks children whose
 * threads allocate in the same classes (adopting the lost threads' heaps).
 * Every child must exit 0 (the old code: the third death by the 30th child). */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { K = 4096, WORKERS = 3, FORKS = 100, CHILD_BLOCKS = 20000 };
static atomic_int stop;

static void pause_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

static void *worker(void *arg) {
  unsigned s = (unsigned)(uintptr_t)arg;
  static __thread void *v[K];
  while (!atomic_load(&stop)) {
    for (int i = 0; i < K; i++) {
      s = s * 1103515245u + 12345u;
      v[i] = malloc(512 + (s >> 16) % 1536);
      if (!v[i]) abort();
      memset(v[i], 0x5a, 512);
    }
    for (int i = 0; i < K; i++)
      if (i % 8) free(v[i]), v[i] = NULL;
    pause_ms(3); /* idle: what the trim works on, not a synchronisation */
    for (int i = 0; i < K; i++) free(v[i]), v[i] = NULL;
  }
  return NULL;
}

static void *child_alloc(void *arg) {
  void *v[CHILD_BLOCKS];
  for (int i = 0; i < CHILD_BLOCKS; i++) {
    v[i] = malloc(512 + (size_t)(i * 37) % 1536);
    if (!v[i]) _exit(3);
    memset(v[i], 1, 64);
  }
  for (int i = 0; i < CHILD_BLOCKS; i++) free(v[i]);
  return arg;
}

TEST_MAIN() {
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 1) == 0); /* the trim at every look */
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++)
    if (!CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0)) return 1;
  int died = 0;
  for (int f = 0; f < FORKS && died < 3; f++) {
    pause_ms(1);
    pid_t p = fork();
    if (p == 0) {
      pthread_t c[3];
      pthread_attr_t at; /* (child_alloc's 160 KB array: musl's threads get 128 KiB of stack) */
      pthread_attr_init(&at);
      pthread_attr_setstacksize(&at, 1 << 20);
      for (int i = 0; i < 3; i++)
        if (pthread_create(&c[i], &at, child_alloc, NULL) != 0) _exit(4);
      for (int i = 0; i < 3; i++) pthread_join(c[i], NULL);
      _exit(0);
    }
    if (!CHECK(p > 0)) break;
    int st;
    waitpid(p, &st, 0);
    died += !CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d of %d: status 0x%x", f, FORKS, st);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  return check_failed() ? 1 : 0;
}
