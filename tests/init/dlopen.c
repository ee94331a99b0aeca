// SPDX-License-Identifier: MIT
/* tests/init/dlopen.c: a dlopen'ed library that allocates in its constructor;
 * blocks cross between the program and the library in both directions; its
 * thread-local storage is used from many threads; it is closed and opened
 * again. The library is libdlhelper.so beside this program. */
#include "check.h"
#include "testutil.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct lib {
  void *handle;
  void *(*ctor_block)(void);
  void *(*alloc)(size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  unsigned (*tls)(unsigned char);
} lib_t;

static char lib_path[PATH_MAX];
/* musl's dlclose unloads nothing: the library stays, and its constructor
 * runs once, so its block is the program's to free once. */
#ifdef __GLIBC__
#define DLCLOSE_UNLOADS 1
#else
#define DLCLOSE_UNLOADS 0
#endif

static int lib_open(lib_t *L) {
  L->handle = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  if (!CHECKF(L->handle, "dlopen(%s): %s", lib_path, dlerror())) return 0;
  *(void **)&L->ctor_block = dlsym(L->handle, "lib_ctor_block");
  *(void **)&L->alloc = dlsym(L->handle, "lib_alloc");
  *(void **)&L->realloc = dlsym(L->handle, "lib_realloc");
  *(void **)&L->free = dlsym(L->handle, "lib_free");
  *(void **)&L->tls = dlsym(L->handle, "lib_tls");
  return CHECK(L->ctor_block && L->alloc && L->realloc && L->free && L->tls);
}

static void *tls_thread(void *arg) {
  lib_t *L = arg;
  for (int i = 0; i < 100; i++) {
    unsigned char v = (unsigned char)(i + 1);
    CHECK(L->tls(v) == 4096u * v);
    free(malloc((size_t)i * 10));
  }
  return NULL;
}

static void exercise(lib_t *L, int round) {
  /* The constructor's block, freed by the program. */
  unsigned char *c = L->ctor_block();
  if ((DLCLOSE_UNLOADS || round == 0) && CHECK(c)) {
    CHECK(c[0] == 0x77 && c[776] == 0x77);
    free(c);
  }
  static const size_t sizes[] = {1, 48, 1000, 20 * KiB, 200 * KiB, 16 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    /* program -> library */
    void *p = malloc(n);
    if (CHECK(p)) {
      tu_fill(p, n, n);
      p = L->realloc(p, 2 * n);
      if (CHECK(p)) CHECK(tu_verify(p, n, n) == 0);
      L->free(p);
    }
    /* library -> program */
    p = L->alloc(n);
    if (CHECK(p)) {
      tu_fill(p, n, round);
      CHECK(malloc_usable_size(p) >= n);
      p = realloc(p, n / 2 + 1);
      if (CHECK(p)) CHECK(tu_verify(p, n / 2 + 1, round) == 0);
      free(p);
    }
  }
  pthread_t th[8];
  for (int t = 0; t < 8; t++) CHECK(pthread_create(&th[t], NULL, tls_thread, L) == 0);
  for (int t = 0; t < 8; t++) CHECK(pthread_join(th[t], NULL) == 0);
  CHECK(L->tls(3) == 4096u * 3);
}

TEST_MAIN() {
  if (!CHECK(tu_path_beside_exe(lib_path, sizeof lib_path, "libdlhelper.so") == 0)) return 1;
  /* keep: a block the library allocated, outliving the library. */
  void *keep = NULL;
  for (int round = 0; round < 5; round++) {
    lib_t L;
    if (!lib_open(&L)) return 1;
    exercise(&L, round);
    if (round == 0) {
      keep = L.alloc(4000);
      if (CHECK(keep)) tu_fill(keep, 4000, 9);
    }
    CHECK(dlclose(L.handle) == 0);
  }
  CHECK(keep && tu_verify(keep, 4000, 9) == 0);
  free(keep);
  return 0;
}
