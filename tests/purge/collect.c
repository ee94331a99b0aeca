// SPDX-License-Identifier: MIT
/* tests/purge/collect.c: malloc_trim(0) over and over while threads come
 * and go: each short-lived thread allocates blocks of every size range,
 * frees half of them, frees blocks an earlier thread left (remote frees into
 * heaps that are being abandoned and adopted) and leaves the rest for the
 * next. Trimming walks every abandoned heap and pool while they change, so
 * this is where the lock order between the heap list, the span pools and
 * the huge cache is exercised; make test-tsan runs it under ThreadSanitizer
 * too. HZ_COLLECT_SECONDS (0.5) of it; contents are checked before each
 * free. */
#include "check.h"
#include "testutil.h"

#include <malloc.h>
#include <pthread.h>

#define KEEP 64
#define SPAWNERS 2

static void *left[SPAWNERS][KEEP];
static size_t left_size[SPAWNERS][KEEP];
static int stop;

static size_t size_of(uint64_t r) {
  switch (r % 16) {
  case 0: return 3 * MiB + (size_t)(r >> 8) % MiB;
  case 1: case 2: return 40 * KiB + (size_t)(r >> 8) % (200 * KiB);
  default: return (size_t)(r >> 8) % 3000;
  }
}

static void *short_lived(void *arg) {
  int w = (int)(uintptr_t)arg;
  uint64_t rng = (uint64_t)(uintptr_t)&rng | 1;
  for (int i = 0; i < KEEP; i++) {
    if (left[w][i]) { /* from the previous thread, which has exited */
      CHECK(tu_verify(left[w][i], left_size[w][i] < 512 ? left_size[w][i] : 512, left_size[w][i]) == 0);
      free(left[w][i]);
    }
    size_t n = size_of(tu_rand(&rng));
    char *p = malloc(n);
    if (!CHECK(p)) continue;
    tu_fill(p, n < 512 ? n : 512, n);
    if (i % 2) {
      free(p);
      p = NULL;
    }
    left[w][i] = p;
    left_size[w][i] = n;
  }
  return NULL;
}

static void *spawner(void *arg) {
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    pthread_t t;
    if (!CHECK(pthread_create(&t, NULL, short_lived, arg) == 0)) break;
    CHECK(pthread_join(t, NULL) == 0);
  }
  return NULL;
}

TEST_MAIN() {
  alarm(120);
  pthread_t t[SPAWNERS];
  for (int i = 0; i < SPAWNERS; i++) CHECK(pthread_create(&t[i], NULL, spawner, (void *)(uintptr_t)i) == 0);
  double end = tu_now() + tu_env_double("HZ_COLLECT_SECONDS", 0.5);
  long trims = 0;
  while (tu_now() < end && !check_failed()) {
    malloc_trim(0);
    trims++;
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < SPAWNERS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (int w = 0; w < SPAWNERS; w++)
    for (int i = 0; i < KEEP; i++) free(left[w][i]);
  CHECK(trims > 0);
  return 0;
}
