// SPDX-License-Identifier: MIT
/* tests/threads/join_tls_lib.c: a library loaded with dlopen whose __thread
 * data glibc allocates with malloc for each thread that touches it and
 * frees when the thread is joined: 3 MiB, a huge block for hakozuna
 * (libjointls.so, tests/threads/join_tls), or JOIN_TLS_BYTES, 256 KiB, a
 * large block, a span of the thread's heap (libjoinadopted.so,
 * tests/threads/join_adopted). */
#ifndef JOIN_TLS_BYTES
#define JOIN_TLS_BYTES (3 << 20)
#endif
__thread char join_tls_big[JOIN_TLS_BYTES];

unsigned join_tls_touch(unsigned char v) {
  volatile char *b = join_tls_big; /* (the accesses must happen: they allocate it) */
  b[0] = (char)v;
  b[sizeof join_tls_big - 1] = (char)(v + 1);
  return (unsigned char)b[0] + (unsigned char)b[sizeof join_tls_big - 1];
}
