// SPDX-License-Identifier: MIT
/* tests/threads/join_tls.c: joining threads whose TLS holds a large block
 * must not hang. A library loaded with dlopen has 3 MiB of __thread data,
 * which glibc allocates with malloc in each thread that touches it and
 * frees in pthread_join while it holds the lock that pthread_create takes
 * (its stack cache). That free of a huge block started hakozuna's purge
 * thread with pthread_create: the join deadlocked on the first round, and
 * with every signal blocked in the thread being made, only SIGKILL ended
 * it (found by preloading a program as a user would). Between rounds the
 * program waits for the purge thread, started or not, to have ended, so
 * that every round's frees find none running. A hang shows as the runner's
 * timeout. */
#include "check.h"
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 4, THREADS = 8 };
static unsigned (*touch)(unsigned char);

static void *worker(void *arg) {
  unsigned char v = (unsigned char)(uintptr_t)arg;
  CHECK(touch(v) == (unsigned)v + (unsigned char)(v + 1));
  struct timespec ts = {0, 10 * 1000 * 1000}; /* all alive at once */
  nanosleep(&ts, NULL);
  return NULL;
}

TEST_MAIN() {
  static char path[4096];
  if (!CHECK(tu_path_beside_exe(path, sizeof path, "libjointls.so") == 0)) return 1;
  void *lib = dlopen(path, RTLD_NOW);
  if (!CHECKF(lib != NULL, "dlopen %s: %s", path, dlerror())) return 1;
  touch = (unsigned (*)(unsigned char))dlsym(lib, "join_tls_touch");
  if (!CHECK(touch != NULL)) return 1;
  for (int round = 0; round < ROUNDS; round++) {
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(i + 1)) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    /* (the purge thread ends one or two purge delays, 100 ms by default,
     * after it finds nothing left: the next round's frees see none) */
    struct timespec ts = {0, 400 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(dlclose(lib) == 0);
  return 0;
}
