// SPDX-License-Identifier: MIT
/* tests/init/dlclose.c: a program that is not preloaded dlopen()s hakozuna
 * ($HZ_LIB), uses it from a thread, and dlclose()s it while that thread
 * still runs.
 *
 * The library starts threads (the purge thread) and registers a thread key
 * whose destructor runs at every thread's exit: unmapped by dlclose, the
 * purge thread returned into unmapped code and the thread's exit ran its
 * destructor there (a helper's program crashed with SIGSEGV in both
 * cases). The library is linked with -z nodelete: dlclose leaves it
 * mapped. Checked: it is still loaded after dlclose (RTLD_NOLOAD finds
 * it), the thread exits after the dlclose, and memory it allocated through
 * the library before is still freed through it after. */
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

static void *(*lib_malloc)(size_t);
static void (*lib_free)(void *);
static pthread_barrier_t closed;

static void *worker(void *arg) {
  (void)arg;
  void *v[1000];
  for (int i = 0; i < 1000; i++) v[i] = lib_malloc((size_t)i * 97 + 1);
  for (int i = 0; i < 1000; i += 2) lib_free(v[i]);
  pthread_barrier_wait(&closed); /* main dlclose()s the library */
  pthread_barrier_wait(&closed);
  for (int i = 1; i < 1000; i += 2) lib_free(v[i]);
  void *p = lib_malloc(100000); /* a large block: a span taken after the dlclose */
  lib_free(p);
  return p;
}

TEST_MAIN() {
  const char *lib = getenv("HZ_LIB");
  if (!CHECKF(lib != NULL, "HZ_LIB names the library (tests/run.sh)")) return 1;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!CHECKF(h != NULL, "dlopen(%s): %s", lib, dlerror())) return 1;
  lib_malloc = (void *(*)(size_t))dlsym(h, "hz_malloc");
  lib_free = (void (*)(void *))dlsym(h, "hz_free");
  if (!CHECK(lib_malloc != NULL && lib_free != NULL)) return 1;
  pthread_barrier_init(&closed, NULL, 2);
  pthread_t t;
  if (!CHECK(pthread_create(&t, NULL, worker, NULL) == 0)) return 1;
  pthread_barrier_wait(&closed);
  CHECK(dlclose(h) == 0);
  void *again = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  CHECKF(again != NULL, "the library was unloaded by dlclose (it must stay: its threads and thread-exit hook)");
  pthread_barrier_wait(&closed);
  void *r = NULL;
  CHECK(pthread_join(t, &r) == 0 && r != NULL);
  if (again != NULL) {
    /* its purge thread keeps running in it: the library's collect waits
     * for nothing and returns what the thread freed */
    void (*collect)(int) = (void (*)(int))dlsym(again, "hz_collect");
    if (CHECK(collect != NULL)) collect(1);
    dlclose(again);
  }
  return check_failed() ? 1 : 0;
}
