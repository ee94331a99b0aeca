// SPDX-License-Identifier: MIT
/* tests/options/nothreads.c: preloaded by env.sh, every pthread_create fails
 * with EAGAIN, as in a process at its thread limit (the allocator must say so
 * under HAKOZUNA_VERBOSE=1 when its purge thread cannot start). */
#include <errno.h>
#include <pthread.h>

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  (void)t;
  (void)attr;
  (void)fn;
  (void)arg;
  return EAGAIN;
}
