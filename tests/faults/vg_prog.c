// SPDX-License-Identifier: MIT
/* tests/faults/vg_prog.c: a program for the valgrind test. "clean" does
 * ordinary allocation work (every size range, realloc, threads) and frees
 * everything; "bad" also reads a freed block, writes past the end of a
 * block and leaks one, which memcheck must report when it has replaced the
 * allocator (--soname-synonyms=somalloc=...). Exit status 0 either way: the
 * verdict is valgrind's. Both call mallinfo2 and malloc_trim, which allocate
 * inside the library. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg) {
  char *blocks[64];
  for (int i = 0; i < 64; i++) {
    size_t n = (size_t)(i * i * 97) % 300000 + 1;
    blocks[i] = malloc(n);
    memset(blocks[i], i, n);
  }
  for (int i = 0; i < 64; i++) {
    blocks[i] = realloc(blocks[i], (size_t)(i + 1) * 1000);
    free(blocks[i]);
  }
  return arg;
}

int main(int argc, char **argv) {
  int bad = argc > 1 && strcmp(argv[1], "bad") == 0;
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, NULL);
  work(NULL);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  char *huge = calloc(1, 5 << 20);
  huge[12345] = 1;
  free(huge);
  /* the functions that allocate inside the library: their blocks must come
   * from and go back to the same allocator (mallinfo2 freed memcheck's
   * block with hakozuna's inlined free: "invalid pointer") */
  struct mallinfo2 mi = mallinfo2();
  malloc_trim(0);
  if (mi.arena == 0) puts("mallinfo2: no arena?");
  if (bad) {
    volatile char *p = malloc(100);
    free((void *)p);
    printf("read after free: %d\n", p[10]); /* invalid read */
    char *q = malloc(24);
    q[24] = 1;                             /* invalid write */
    free(q);
    char *leak = malloc(4000);              /* definitely lost */
    leak[0] = 1;
    leak = NULL;
  }
  puts("done");
  return 0;
}
