// SPDX-License-Identifier: MIT
/* tests/heap/collect.c: trimming walks a heap's class lists; nothing done
 * during that walk may change them (issue 10, case 3). hakozuna used to
 * start its purge thread from inside the walk, and pthread_create allocates
 * (glibc: the new thread's TLS); that allocation took the inbox, emptied the
 * span the walk had saved as its next step, and the walk then unlinked it
 * again and freed it to its pool twice: the pool counted a span of memory
 * waiting for its purge for ever, and the purge thread never ended.
 *
 * Made deterministic here: this program's own pthread_create (the
 * executable's symbol comes first, so the allocator's call reaches it)
 * lets another thread's remote frees arrive and then allocates, as glibc's
 * does, before creating the thread. The heap is set up so that those frees
 * empty, in order, a span that takes the class's one "spare" place and the
 * span after the one the walk retires first. Linked with hakozuna: the
 * set-up counts on its geometry (16-byte blocks, 2,048 to a span), which
 * the statistics confirm. */
#include "check.h"
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>

#include "hakozuna.h"

#define PER_SPAN 2048
#define BLOCKS (3 * PER_SPAN)

static void *b[BLOCKS];
static sem_t go, done, leave;
static int armed;
static void *nested;

typedef int (*create_fn_t)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  static create_fn_t real;
  if (real == NULL) real = (create_fn_t)dlsym(RTLD_NEXT, "pthread_create");
  if (__atomic_exchange_n(&armed, 0, __ATOMIC_ACQ_REL)) {
    sem_post(&go); /* the other thread's frees arrive now... */
    sem_wait(&done);
    nested = malloc(6000); /* ...and thread creation allocates */
  }
  return real(t, attr, fn, arg);
}

static void *freer(void *arg) {
  (void)arg;
  sem_wait(&go);
  /* First the span after the one the walk retires (all but the block main
   * freed), then the last span: the inbox hands blocks back last-sent first. */
  for (int i = 1; i < PER_SPAN; i++) free(b[i]);
  free(malloc(3000)); /* a refill sends what this thread still batches */
  for (int i = 2 * PER_SPAN; i < BLOCKS; i++) free(b[i]);
  free(malloc(9000));
  sem_post(&done);
  sem_wait(&leave);
  return NULL;
}

static hz_class_stats_t class0(void) {
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  return st.classes[0];
}

TEST_MAIN() {
  alarm(60);
  if (!CHECKF(class0().mallocs == 0 && class0().block_size == 16, "16-byte blocks used before the test")) return 1;
  /* three spans of 16-byte blocks, in order: P1, P2, P3 (P3 current) */
  for (int i = 0; i < BLOCKS; i++) {
    b[i] = malloc(16);
    if (!CHECK(b[i])) return 1;
  }
  CHECKF(class0().peak == BLOCKS, "%llu blocks in spans, expected 3 spans of %d", (unsigned long long)class0().peak,
         PER_SPAN);
  free(b[0]); /* P1 has room: back on the list */
  for (int i = PER_SPAN; i < 2 * PER_SPAN; i++) free(b[i]); /* P2 empty: the spare, first in the list */
  sem_init(&go, 0, 0);
  sem_init(&done, 0, 0);
  sem_init(&leave, 0, 0);
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, freer, NULL) == 0)) return 1;
  __atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
  malloc_trim(0); /* retires P2, which wants the purge thread started */
  CHECKF(!__atomic_load_n(&armed, __ATOMIC_ACQUIRE), "malloc_trim did not start the purge thread");
  sem_post(&leave);
  CHECK(pthread_join(t, NULL) == 0);
  free(nested);
  malloc_trim(0);
  CHECK(class0().live == 0);
  /* Everything is back: the purge thread must end (it waits for nothing). */
  double give_up = tu_now() + 5;
  while (tu_threads() > 1 && tu_now() < give_up) usleep(1000);
  CHECKF(tu_threads() == 1, "%d threads 5 s after everything was freed and trimmed: the purge thread still "
         "finds memory waiting for it (a span freed twice?)", tu_threads());
  return 0;
}
