// SPDX-License-Identifier: MIT
/* tests/threads/join_tls_lib.c: a library loaded with dlopen whose __thread
 * data (3 MiB) glibc allocates with malloc for each thread that touches it,
 * a huge block for hakozuna, and frees when the thread is joined. */
__thread char join_tls_big[3 << 20];

unsigned join_tls_touch(unsigned char v) {
  volatile char *b = join_tls_big; /* (the accesses must happen: they allocate it) */
  b[0] = (char)v;
  b[sizeof join_tls_big - 1] = (char)(v + 1);
  return (unsigned char)b[0] + (unsigned char)b[sizeof join_tls_big - 1];
}
