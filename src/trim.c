// SPDX-License-Identifier: MIT
/* The idle trim: what the heaps of idle threads hold goes back to the OS.
 *
 * A thread that frees and then idles makes no call that could return what
 * its spans hold. The purge thread does it for heaps whose owner has made no
 * malloc for a whole purge delay: the pages of partly used spans that hold
 * only free blocks, and all of each class's spare empty span, whose blocks
 * are un-carved first (the next refill carves them again, from zero pages).
 * It claims the heap (HZ_TRIM_CLAIMED), then makes every thread pass a
 * memory barrier: an owner that entered a slow path before the claim shows
 * as busy (the heap is left alone), one entering after it waits in
 * hz_heap_enter. The owner's fast paths go on: a malloc pops only its
 * current spans and its stashes (stash.c: no spans, so blocks stashed stay
 * resident while the owner idles), which the trim leaves alone, and a free
 * only pushes onto a span's list or a stash -- it writes the list head and
 * the block it frees, never a block already on the list. So the trim reads each span's head, makes
 * every thread pass a second barrier (the links of the blocks up to that
 * head are then visible, on a weakly ordered CPU too), and from that head
 * on it owns the list: it takes off the blocks that start in pages it
 * returns, relinking around them, and marks the pages in s->trimmed, from
 * which the owner's next refill from the span puts the blocks back
 * (span_untrim). The head itself stays, as the owner's next push links to
 * it. Each relink leaves a whole list, then the pages go back, and are
 * marked last: a fork in the middle loses the child some free blocks, never
 * hands one out twice nor finds a marked page that did not go back.
 * The remote frees waiting in the heap's inbox are trimmed too (remote.c,
 * hz_remote_trim); the spans in its span cache go back from heap.c
 * (hz_heaps_trim_caches), under the same claim. */
#include "internal.h"

#define HZ_TRIM_SPANS 128    /* spans read per barrier */
#define HZ_TRIM_BLOCKS 4096  /* the most blocks of a span it looks at */
/* A heap whose trim found new frees is trimmed again at each look until
 * none came for this long (an owner still freeing may just be preempted). */
#define HZ_TRIM_SETTLE_MS 1000

/* Mallocs (counted down by the fast path), refills, large blocks and
 * adoptions: the same figure a purge delay apart means the owner made no
 * malloc meanwhile, and a heap a new thread just took is not idle.
 * (Racy reads of the owner's plain counters.) */
__attribute__((no_sanitize("thread"))) static uint64_t trim_heap_activity(const hz_heap_t *h) {
  if (!h->live) return 0; /* (abandoned heaps were collected whole) */
  uint64_t a = h->n.malloc[HZ_CLASS_LARGE] + h->n.large_frees + h->adoptions + 1;
  for (uint32_t c = 0; c < HZ_NCLASS; c++) a += (uint64_t)h->n.sample_left[c] * 31 + h->n.refill[c];
  return a;
}

/* (a macro: ThreadSanitizer instruments an inline function once inlined,
 * even into a no_sanitize one) */
#define trim_link(b) __atomic_load_n(&(b)->next, __ATOMIC_RELAXED)

/* Whether every block overlapping the page at lo is free (or not carved yet). */
static bool trim_page_free(const hz_span_t *s, const uint64_t *free_map, uintptr_t lo) {
  size_t bs = s->block_size, end = s->carved;
  size_t first = (lo - s->start) / bs, last = (lo + hz_os_page_size - 1 - s->start) / bs;
  for (size_t i = first; i <= last && i < end; i++)
    if (!(free_map[i / 64] >> (i % 64) & 1)) return false;
  return true;
}

/* The list from head (read before the barrier) is the trim's: see above.
 * False if nothing was freed onto it since its last trim (nothing to do). */
__attribute__((no_sanitize("thread"))) bool hz_trim_span_pages(hz_span_t *s, hz_block_t *head) {
  size_t bs = s->block_size, ps = hz_os_page_size, pages = (size_t)s->slice_count * HZ_SLICE_SIZE / ps;
  if (head == NULL || head == s->trim_head || pages > 64 || s->capacity > HZ_TRIM_BLOCKS) return false;
  s->trim_head = head;
  uint64_t free_map[HZ_TRIM_BLOCKS / 64] = {0};
  /* The free blocks. A link to anything but a free-tagged block of the span
   * not seen yet (the program wrote to a freed block) leaves the span as
   * it is. */
  size_t n = 0;
  for (hz_block_t *b = head; b != NULL; b = trim_link(b), n++) {
    size_t i = ((uintptr_t)b - s->start) / bs;
    if (n == s->capacity || hz_span_refuses(s, (uintptr_t)b) || (free_map[i / 64] >> (i % 64) & 1) ||
        __atomic_load_n(&b->tag, __ATOMIC_RELAXED) != hz_block_tag(s, b))
      return true;
    free_map[i / 64] |= (uint64_t)1 << (i % 64);
  }
  /* and those off the list since an earlier trim */
  for (uint64_t m = s->trimmed; m != 0; m &= m - 1) {
    uintptr_t lo = s->start + (uintptr_t)__builtin_ctzll(m) * ps;
    for (size_t i = (lo - s->start + bs - 1) / bs; i < s->carved && s->start + i * bs < lo + ps; i++)
      free_map[i / 64] |= (uint64_t)1 << (i % 64);
  }
  uint64_t trim = 0;
  uintptr_t head_page = ((uintptr_t)head - s->start) / ps;
  for (size_t p = 0; p < pages; p++)
    if (p != head_page && !(s->trimmed >> p & 1) && trim_page_free(s, free_map, s->start + p * ps))
      trim |= (uint64_t)1 << p;
  if (trim == 0) return true;
  /* Relink around the blocks that start in those pages. */
  hz_block_t *kept = head;
  for (hz_block_t *b = trim_link(head); b != NULL; b = trim_link(b)) {
    if (trim >> (((uintptr_t)b - s->start) / ps) & 1) continue;
    if (trim_link(kept) != b) __atomic_store_n(&kept->next, b, __ATOMIC_RELAXED);
    kept = b;
  }
  if (trim_link(kept) != NULL) __atomic_store_n(&kept->next, NULL, __ATOMIC_RELAXED);
  for (size_t p = 0; p < pages;) {
    size_t q = p;
    while (q < pages && (trim >> q & 1)) q++;
    if (q > p) hz_os_purge((void *)(s->start + p * ps), (q - p) * ps);
    p = q + 1;
  }
  /* Marked once they are zero: a page marked first and a fork before its
   * purge left the child a marked page still holding its blocks, which its
   * next refill reported as a double free (tests/threads/fork_trim). */
  s->trimmed |= trim;
  /* Then the owner's frees into the span go through its heap's trap, which
   * finds a second free of a block of those pages: the zeroed page took
   * its free tag, and the fast path takes it for a live block (heap.c,
   * trap_free). Remote frees are looked at where they arrive. */
  hz_span_t *trap = hz_stash_trap(s->heap);
  if (trap != NULL) __atomic_store_n(&s->push_to, trap, __ATOMIC_RELEASE);
  return true;
}

/* A spare span has no block out: it forgets its blocks (the list first, so
 * that a fork child that copied us half way loses blocks, never hands one
 * out twice) and returns its pages. */
static void trim_uncarve(hz_span_t *s) {
  s->free = NULL;
  s->trimmed = 0;
  __atomic_store_n(&s->push_to, hz_stash_home(s->heap, s), __ATOMIC_RELAXED);
  __atomic_store_n(&s->limit, 0, __ATOMIC_RELAXED);
  s->carved = 0;
  hz_os_purge((void *)hz_span_base(s), (size_t)s->slice_count * HZ_SLICE_SIZE);
#if HZ_CHECKED
  hz_checked_span_guard(s); /* (purged with the rest) */
#endif
}

typedef struct {
  hz_span_t *span;
  hz_block_t *head;
} hz_trim_snap_t;

/* Reads the heads of up to HZ_TRIM_SPANS listed spans, then (after a
 * barrier) trims them; false once no span is left. *c and *s: where to go
 * on; *freed: blocks were freed onto some list since its last trim. */
/* (the heads are read while their owner may push: racy by design) */
__attribute__((no_sanitize("thread"))) static bool trim_spans(hz_heap_t *h, uint32_t *c, hz_span_t **s, bool *freed) {
  hz_trim_snap_t snap[HZ_TRIM_SPANS];
  size_t n = 0;
  for (; *c < HZ_NCLASS && n < HZ_TRIM_SPANS; (*c)++, *s = NULL) {
    if (*s == NULL) *s = h->lists[*c];
    for (; *s != NULL && n < HZ_TRIM_SPANS; *s = (*s)->next)
      if (*s != h->cur[*c] && *s != h->spare[*c])
        snap[n++] = (hz_trim_snap_t){*s, __atomic_load_n(&(*s)->free, __ATOMIC_RELAXED)};
    if (*s != NULL) break;
  }
  if (n == 0 || !hz_os_membarrier()) return false;
  for (size_t i = 0; i < n; i++) {
    /* (an owner that woke up and waits stops the trim: it goes on at the next idle look) */
    if (atomic_load_explicit(&h->trim, memory_order_relaxed) & HZ_TRIM_WANTED) return false;
    *freed |= hz_trim_span_pages(snap[i].span, snap[i].head);
  }
  return *c < HZ_NCLASS;
}

/* True if blocks were freed since the last trim: the owner may be freeing
 * more (without a malloc, so still idle), and the heap is trimmed again at
 * the next looks (HZ_TRIM_SETTLE_MS). Spans whose list head has not moved
 * since their last trim are skipped. */
static bool trim_heap(hz_heap_t *h) {
  bool adopted = hz_remote_trim(h);
  for (uint32_t c = 0; c < HZ_NCLASS; c++) {
    hz_span_t *cur = h->cur[c], *spare = h->spare[c];
    if (spare != NULL && spare != cur && hz_span_used(spare) == 0 && spare->carved != 0) trim_uncarve(spare);
  }
  /* (a free tag marks free blocks: not in the checked build, whose free
   * blocks keep a fill pattern, nor without checks) */
  if (HZ_CHECKED || HZ_NOCHECK) return adopted;
  uint32_t c = 0;
  hz_span_t *s = NULL;
  bool freed = adopted;
  while (trim_spans(h, &c, &s, &freed)) {
  }
  return freed;
}

static bool trim_settling(const hz_heap_t *h) {
  return h->trim_freed_at != 0 && hz_os_now_ms() - h->trim_freed_at < HZ_TRIM_SETTLE_MS;
}

static bool trim_batch(hz_heap_t **claimed, size_t n, bool *again) {
  bool left = false, barrier = n != 0 && hz_os_membarrier();
  for (size_t i = 0; i < n; i++) {
    hz_heap_t *h = claimed[i];
    if (barrier && __atomic_load_n(&h->busy, __ATOMIC_ACQUIRE) == 0) {
      if (trim_heap(h)) h->trim_freed_at = hz_os_now_ms();
      *again |= trim_settling(h);
      atomic_store_explicit(&h->trim, HZ_TRIM_DONE, memory_order_release);
    } else {
      atomic_fetch_and_explicit(&h->trim, ~(uint32_t)HZ_TRIM_CLAIMED, memory_order_release);
      left |= barrier; /* without the barrier, never */
    }
  }
  return left;
}

/* One look at every live heap; true when some owner was active since the
 * last look (the purge thread looks once more, a delay later). *again: a
 * heap trimmed at this look had blocks freed since one of its trims in the
 * last HZ_TRIM_SETTLE_MS, and is looked at again while its owner stays idle
 * (it may be freeing more). */
bool hz_trim_idle(bool *again) {
  hz_heap_t *claimed[HZ_TRIM_BATCH];
  size_t n = 0;
  bool left = false;
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all) {
    uint32_t t = atomic_load_explicit(&h->trim, memory_order_relaxed);
    /* (remote frees into a trimmed heap's inbox: a look again) */
    bool inbox = atomic_load_explicit(&h->inbox, memory_order_relaxed) != h->trim_inbox;
    if ((t & HZ_TRIM_CLAIMED) || ((t & HZ_TRIM_DONE) && !trim_settling(h) && !inbox)) continue;
    uint64_t a = trim_heap_activity(h);
    if (a == 0) continue;
    if (a != h->trim_activity) {
      h->trim_activity = a;
      left = true;
      continue;
    }
    atomic_fetch_or_explicit(&h->trim, HZ_TRIM_CLAIMED, memory_order_relaxed);
    claimed[n++] = h;
    if (n == HZ_TRIM_BATCH) {
      left |= trim_batch(claimed, n, again);
      n = 0;
    }
  }
  return trim_batch(claimed, n, again) || left;
}

/* The owner entered a slow path while its heap was claimed, or the first
 * time after a trim: wait for the trim to end; the purge thread may trim the
 * heap again when it next goes idle. */
hz_cold void hz_trim_wait(hz_heap_t *h) {
  uint32_t t = atomic_load_explicit(&h->trim, memory_order_acquire);
  if (t & HZ_TRIM_CLAIMED) atomic_fetch_or_explicit(&h->trim, HZ_TRIM_WANTED, memory_order_relaxed);
  for (unsigned spins = 0; (t = atomic_load_explicit(&h->trim, memory_order_acquire)) & HZ_TRIM_CLAIMED; spins++)
    if (spins >= 64) hz_os_yield();
  if (t & (HZ_TRIM_DONE | HZ_TRIM_WANTED))
    atomic_fetch_and_explicit(&h->trim, ~(uint32_t)(HZ_TRIM_DONE | HZ_TRIM_WANTED), memory_order_relaxed);
}

