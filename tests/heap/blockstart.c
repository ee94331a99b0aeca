// SPDX-License-Identifier: MIT
/* tests/heap/blockstart.c: free's one-multiply pointer check
 * (hz_span_refuses in src/internal.h) accepts exactly the starts of the
 * blocks carved so far, for every span shape the allocator makes: each small
 * class in spans of 1 to 8 slices with nothing, one block, half and all of
 * it carved, and each large span (1 to 64 slices, whose only block is at
 * its start), at every byte offset of the span; and a free span (limit 0)
 * refuses everything. The reference is plain division. White-box: it
 * compiles the header's inline functions, nothing of the library runs. */
#include "check.h"

#include "../src/internal.h"

static long refused_wrongly, accepted_wrongly;

/* Every offset of a span of `bytes` bytes whose first `carved` blocks of
 * `divisor` bytes are handed out. */
static void sweep(size_t divisor, uint64_t recip, uint64_t limit, size_t bytes, uint64_t carved) {
  hz_span_t s;
  memset(&s, 0, sizeof s);
  s.start = (uintptr_t)1 << 40; /* any span base: only offsets matter */
  s.recip = recip;
  s.limit = limit;
  for (size_t off = 0; off < bytes; off++) {
    bool ok = off % divisor == 0 && off / divisor < carved;
    bool refused = hz_span_refuses(&s, s.start + off);
    if (ok && refused) refused_wrongly++;
    if (!ok && !refused) accepted_wrongly++;
    if (ok == refused && !CHECKF(refused_wrongly + accepted_wrongly < 5,
                                 "block %zu, offset %zu, %llu carved: %s", divisor, off,
                                 (unsigned long long)carved, refused ? "refused" : "accepted"))
      return;
  }
}

TEST_MAIN() {
  for (uint32_t c = 0; c < HZ_NCLASS; c++) {
    size_t bs = hz_class_size(c);
    uint64_t recip = hz_recip(bs);
    for (size_t slices = 1; slices <= 8; slices *= 2) {
      size_t bytes = slices * HZ_SLICE_SIZE;
      uint64_t cap = bytes / bs;
      if (cap == 0) continue;
      uint64_t carved[] = {0, 1, cap / 2, cap};
      for (size_t i = 0; i < sizeof carved / sizeof carved[0]; i++)
        sweep(bs, recip, hz_limit(bs, carved[i]), bytes, carved[i]);
    }
  }
  for (size_t slices = 1; slices <= HZ_LARGE_MAX_SLICES; slices++) {
    size_t bytes = slices * HZ_SLICE_SIZE;
    sweep(bytes, hz_recip(bytes), hz_limit(bytes, 1), bytes, 1);
  }
  sweep(64, hz_recip(64), 0, HZ_SLICE_SIZE, 0); /* a free span */
  CHECKF(refused_wrongly == 0, "%ld block starts refused", refused_wrongly);
  CHECKF(accepted_wrongly == 0, "%ld other offsets accepted", accepted_wrongly);
  return 0;
}
