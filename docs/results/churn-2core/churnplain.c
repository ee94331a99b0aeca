// SPDX-License-Identifier: MIT
/* churnplain N: N rounds of 4 threads, each allocating 32 blocks of 16 B-20 KB,
 * freeing half, and leaving the rest to main (which frees two of three) or
 * to nobody; a detached thread every 7th round (docs/perf.md §81). Written
 * by a helper testing Boehm GC's programs under hakozuna, with no GC. */


#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static pthread_key_t key;
static void dtor(void *p) { free(p); }
static void *child(void *arg) {
  size_t n = (size_t)arg;
  void *v[32];
  for (int i = 0; i < 32; i++) { v[i] = malloc(16 + (n * 37 + i * 101) % 20000); memset(v[i], 1, 16); }
  pthread_setspecific(key, malloc(100));
  void **g = malloc(64); g[0] = v[0];
  for (int i = 1; i < 32; i += 2) free(v[i]);
  if (n % 3 == 0) { for (int i = 0; i < 32; i += 2) free(v[i]); return g; }
  /* leave half of the blocks to be freed by another thread */
  return v[0] ? (free(v[2]), v[0]) : NULL;
}
int main(int argc, char **argv) {
  
  pthread_key_create(&key, dtor);
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  for (int i = 0; i < n; i++) {
    pthread_t t[4]; void *r;
    for (int j = 0; j < 4; j++) if (pthread_create(&t[j], NULL, child, (void*)(size_t)(i*4+j))) { perror("create"); abort(); }
    
    for (int j = 0; j < 4; j++) { pthread_join(t[j], &r); if ((i*4+j) % 3) free(r); }
    if (i % 7 == 0) { pthread_t d; pthread_create(&d, NULL, child, (void*)(size_t)(3*i)); pthread_detach(d); }
  }
  printf("ok\n");
  return 0;
}
