// SPDX-License-Identifier: MIT
/* tests/init/dlopen_lib.c: the library tests/init/dlopen.c loads. It
 * allocates in its constructor, frees in its destructor, has thread-local
 * storage (which the dynamic loader allocates with malloc for a dlopen'ed
 * library), and exports functions that allocate and free for the program. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *ctor_block, *private_block;
static __thread char tls_buf[4096];

__attribute__((constructor)) static void lib_ctor(void) {
  ctor_block = malloc(777);
  if (ctor_block) memset(ctor_block, 0x77, 777);
  private_block = calloc(1, 50000);
}

__attribute__((destructor)) static void lib_dtor(void) { free(private_block); }

void *lib_ctor_block(void) { return ctor_block; }
void *lib_alloc(size_t n) { return malloc(n); }
void *lib_realloc(void *p, size_t n) { return realloc(p, n); }
void lib_free(void *p) { free(p); }

/* Touches this thread's TLS block; returns a checksum of it. */
unsigned lib_tls(unsigned char v) {
  memset(tls_buf, v, sizeof tls_buf);
  unsigned sum = 0;
  for (size_t i = 0; i < sizeof tls_buf; i++) sum += (unsigned char)tls_buf[i];
  return sum;
}
