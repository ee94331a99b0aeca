// SPDX-License-Identifier: MIT
/* tests/init/ctor.c: allocation before main and after it. A .preinit_array
 * function runs before any library's constructor (so, preloaded, before
 * hakozuna's own); then a constructor allocates, starts a thread that
 * allocates, and frees a block from the preinit stage; main checks and frees
 * what they made; a destructor and an atexit handler free what main left. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static void *pre_block, *pre_block2, *ctor_block, *thread_block, *main_block;
static void *atexit_block;

#define PRE_N 5000
#define CTOR_N 300000
#define MAIN_N 70

static void *alloc_filled(size_t n, uint64_t seed) {
  void *p = malloc(n);
  if (CHECK(p)) tu_fill(p, n, seed);
  return p;
}

static void check_and_free(void *p, size_t n, uint64_t seed, const char *what) {
  if (!CHECKF(p != NULL, "%s is missing", what)) return;
  CHECKF(tu_verify(p, n, seed) == 0, "%s changed", what);
  free(p);
}

static void preinit(int argc, char **argv, char **envp) {
  (void)argc, (void)argv, (void)envp;
  pre_block = alloc_filled(PRE_N, 1);
  pre_block2 = calloc(100, 100);
  CHECK(pre_block2 && tu_nonzero(pre_block2, 10000) == 0);
  void *p = NULL;
  CHECK(posix_memalign(&p, 4096, 100) == 0 && ((uintptr_t)p & 4095) == 0);
  p = realloc(p, 20000);
  CHECK(p);
  free(p);
}
/* (musl runs no .preinit_array: its start-up knows only init arrays) */
#ifdef __GLIBC__
#define HAVE_PREINIT 1
__attribute__((section(".preinit_array"), used))
static void (*const preinit_entry)(int, char **, char **) = preinit;
#else
#define HAVE_PREINIT 0
#endif

static void *ctor_thread(void *arg) {
  (void)arg;
  thread_block = alloc_filled(1000, 3);
  for (int i = 0; i < 1000; i++) free(malloc((size_t)i * 33));
  return NULL;
}

__attribute__((constructor(101))) static void ctor(void) {
  ctor_block = alloc_filled(CTOR_N, 2);
  free(pre_block2); /* the preinit stage's calloc block */
  pthread_t th;
  if (CHECK(pthread_create(&th, NULL, ctor_thread, NULL) == 0))
    CHECK(pthread_join(th, NULL) == 0);
}

static void at_exit(void) {
  check_and_free(atexit_block, 12345, 5, "block for the atexit handler");
  free(strdup("allocating in an atexit handler"));
}

__attribute__((destructor)) static void dtor(void) {
  check_and_free(main_block, MAIN_N, 4, "block main left");
  void *p = alloc_filled(1 << 20, 6);
  check_and_free(p, 1 << 20, 6, "block allocated in a destructor");
  if (check_failed()) _exit(1); /* main has returned already */
}

TEST_MAIN() {
  if (HAVE_PREINIT) check_and_free(pre_block, PRE_N, 1, "preinit block");
  else (void)preinit;
  check_and_free(ctor_block, CTOR_N, 2, "constructor block");
  check_and_free(thread_block, 1000, 3, "block of a thread started before main");
  main_block = alloc_filled(MAIN_N, 4);
  atexit_block = alloc_filled(12345, 5);
  CHECK(atexit(at_exit) == 0);
  return 0;
}
