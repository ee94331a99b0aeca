// SPDX-License-Identifier: MIT
/* tests/heap/carve.c: a thread that allocates one block of a class holds
 * about one page of that class, not a batch of blocks (issue 11, target
 * 5b: with a thousand threads, what each holds beyond its blocks adds up).
 * Fresh spans hand out blocks from their start and write the free-list link
 * of each block put on the list: blocks up to a page are now put on the
 * list a page at a time; hakozuna used to put at least four, so a 2,304-byte
 * block touched three pages. A new thread takes one block of each class
 * from 1,152 to 4,096 bytes and counts the resident pages of its span with
 * mincore. Linked with hakozuna: it counts on its geometry (fresh spans of
 * 32 KiB for these classes, from memory never touched). */
#include "check.h"
#include "testutil.h"

#include <pthread.h>
#include <sys/mman.h>

#include "hakozuna.h"

#define SPAN 32768

static void *taker(void *arg) {
  (void)arg;
  size_t ps = tu_page_size();
  for (size_t bs = 1152; bs <= 4096; bs += bs < 2048 ? 128 : 256) {
    char *p = malloc(bs);
    if (!CHECK(p != NULL)) continue;
    memset(p, 0x5a, bs);
    if (!CHECKF((uintptr_t)p % SPAN == 0, "the %zu-byte block starts a fresh span (%p)", bs, (void *)p)) continue;
    unsigned char v[SPAN / 4096];
    size_t resident = 0;
    if (CHECK(mincore(p, SPAN, v) == 0))
      for (size_t i = 0; i < SPAN / ps; i++) resident += v[i] & 1;
    CHECKF(resident == (bs + ps - 1) / ps, "one %zu-byte block: %zu pages of its span resident", bs, resident);
  }
  return NULL;
}

TEST_MAIN() {
  if (tu_page_size() != 4096) {
    printf("SKIP: the geometry assumed here needs 4 KiB pages (have %zu)\n", tu_page_size());
    return 77;
  }
  pthread_t t;
  if (CHECK(pthread_create(&t, NULL, taker, NULL) == 0)) CHECK(pthread_join(t, NULL) == 0);
  return check_failed() ? 1 : 0;
}
