// SPDX-License-Identifier: MIT
/* Stashes: a thread's freed blocks of 1 KiB and more, newest first.
 *
 * A span's free list hands out its own blocks only. With blocks of 1-32
 * KiB a span holds 4 to 32 of them, and a program that frees them in any
 * order leaves a few free in each of several spans: malloc then takes the
 * blocks of its current span, freed long ago and out of the cache, while
 * the block just freed waits in another span. random_mixed 4096-32768
 * spent most of malloc's time waiting for the first line of the block it
 * returned (docs/perf.md §60), and so did blocks of 1-4 KiB among 100,000
 * live ones (§71). So each of these classes has a stash per
 * heap: the owner's frees push onto it whatever span the block is in, and
 * malloc pops the newest. Its descriptor is shaped as a span's (the fields
 * malloc and free use where theirs are), and the class's current span
 * (h->cur) is the stash: malloc's and free's fast paths are the same code
 * for both. A span's push_to says where its blocks go: the span itself, or
 * its heap's stash.
 *
 * A stashed block is free (its free tag is set: a second free of it is
 * caught) but still out of its span, which counts it as in use. A stash
 * holds HAKOZUNA_STASH KiB (256 by default), 16 blocks at most; the free
 * that fills it sends the older half back to their spans; malloc_trim,
 * hz_collect and the thread's exit send all, and so does the owner's
 * first slow path after a purge delay with no malloc of the class. Remote frees go to the
 * block's span as before (remote.c), but while the owner is behind in
 * taking its inbox the freeing thread stashes them itself (hz_stash_adopt). An empty stash makes malloc refill
 * from the span behind it (its `next`), as a class without a stash refills
 * its current span. The idle trim leaves stashes alone, as it leaves
 * current spans (trim.c): the owner's malloc pops them without a lock. */
#include "internal.h"

/* Blocks a stash of class c holds at most: HAKOZUNA_STASH KiB, up to 16. */
static uint32_t stash_cap(uint32_t c) {
  size_t cap = (size_t)hz_opt(HZ_OPTION_STASH) * 1024 / hz_class_size(c);
  return (uint32_t)(cap > 16 ? 16 : cap);
}

static hz_span_t *stash_of(const hz_heap_t *h, uint32_t c) {
  return (hz_span_t *)((char *)h->stash + 64 * (c - HZ_STASH_FIRST));
}

/* After the descriptors' first lines, in the gap before their second ones:
 * each class's malloc countdown at the last aging (hz_stash_age). */
static int64_t *stash_seen(const hz_heap_t *h, uint32_t c) {
  return (int64_t *)((char *)h->stash + 64 * HZ_STASHED) + (c - HZ_STASH_FIRST);
}
_Static_assert(HZ_STASH_TRAP_AT + 64 <= HZ_SPAN_OWNER_AT, "the aging's words and the trap fit the gap");

/* The trap (heap.c, trap_free): a descriptor whose every push is a
 * "full" one, for the slow path to look at the block. Only its owner's
 * frees push onto it, and its slow path empties it at once. */
hz_span_t *hz_stash_trap(const hz_heap_t *h) {
  return h->stash == NULL ? NULL : (hz_span_t *)((char *)h->stash + HZ_STASH_TRAP_AT);
}

void hz_stash_trap_init(hz_heap_t *h) {
  hz_span_t *t = hz_stash_trap(h);
  if (t == NULL) return;
  t->heap = h;
  t->free = NULL;
  t->uses = 0;
  t->kind = HZ_SPAN_TRAP;
}

/* Where the owner's frees into the small span s go while it has no
 * trimmed page: as span_init_small set it. */
hz_span_t *hz_stash_home(const hz_heap_t *h, hz_span_t *s) {
  if (h->stash == NULL || !hz_class_stashed(s->cls)) return s;
  hz_span_t *t = stash_of(h, s->cls);
  return __atomic_load_n(&t->kind, __ATOMIC_RELAXED) == HZ_SPAN_STASH ? t : s;
}

/* The push that fills it (cap blocks, `kept` there now) turns uses negative. */
static void stash_arm(hz_span_t *t, uint32_t kept) {
  t->capacity = stash_cap(t->cls);
  t->uses = (int32_t)t->capacity - 1 - (int32_t)kept;
}

/* A class's stash is set up at its first refill, before it has a span
 * (spans point their frees at it when they are made): a thread that never
 * allocates these sizes touches none of the area. Its descriptors' two
 * lines lie HZ_SPAN_OWNER_AT apart, as in a segment. A class whose stash
 * would hold no block has none. */
void hz_stash_install(hz_heap_t *h, uint32_t c) {
  hz_span_t *t = stash_of(h, c);
  if (stash_cap(c) == 0) return;
  t->heap = h;
  t->block_size = (uint32_t)hz_class_size(c);
  t->cls = (uint8_t)c;
  t->free = NULL;
  stash_arm(t, 0);
  t->next = h->cur[c]; /* the span behind it */
  hz_heap_class_used(h, c); /* (borrow, heap.c, asks used classes only) */
  __atomic_store_n(&t->kind, HZ_SPAN_STASH, __ATOMIC_RELAXED); /* (hz_stash_count reads it from other threads) */
  h->cur[c] = t;
}

/* All but the newest `keep` blocks go back to their spans; the stash is
 * armed again for the option's capacity now. */
static void stash_flush(hz_heap_t *h, hz_span_t *t, uint32_t keep) {
  hz_block_t *rest = t->free;
  uint32_t kept = 0;
  if (keep == 0 || rest == NULL) {
    t->free = NULL;
  } else {
    hz_block_t *last = rest;
    for (kept = 1; kept < keep && hz_next_decode(last, last->next) != NULL; kept++)
      last = hz_next_decode(last, last->next);
    rest = hz_next_decode(last, last->next);
    last->next = hz_next_encode(last, NULL);
  }
  stash_arm(t, kept);
  while (rest != NULL) {
    hz_block_t *b = rest;
    rest = hz_next_decode(b, b->next);
    hz_span_t *s = hz_span_of(b);
    if (s->heap == h) {
      hz_heap_block_back(h, s, b);
    } else { /* adopted (hz_stash_adopt): to its owner now, in transit (its free was counted) */
      h->n.adopted[s->cls]--;
      h->n.remote_free[s->cls]--;
      hz_remote_free(h, s, b);
    }
  }
}

/* The refill of an empty stash: the rest of the span's list becomes the
 * stash's, counted from the span's figures (a walk of it waited for each
 * block's line in turn, mt_remote 16-32768 -7%). A span with trimmed
 * pages, whose list misses their blocks, keeps its list. */
void hz_stash_fill(hz_span_t *t, hz_span_t *s) {
  if (t->free != NULL || t->capacity == 0 || s->free == NULL || s->trimmed) return;
  uint32_t n = s->carved - (hz_span_used(s) - s->pinned);
  t->free = s->free;
  s->free = NULL;
  s->uses += (int32_t)n;
  t->uses -= (int32_t)n; /* (below 0 if more than it holds: the next free sends the oldest back) */
}

/* A block of a stashed class that another thread freed, at its owner's
 * drain (entered): onto the stash, as the owner's own free would put it.
 * (Back in its span, it waited there for the stash to run dry, and each
 * time the stash did, malloc took the slow path: mt_remote 16-32768 with
 * 90% of the frees remote ran 8% slower than without stashes.) */
void hz_stash_put(hz_heap_t *h, hz_span_t *t, hz_block_t *b) {
  b->next = hz_next_encode(b, t->free);
  t->free = b;
  if (--t->uses < 0) stash_flush(h, t, stash_cap(t->cls) / 2);
}

/* A block of a stashed class that another heap owns, freed by this thread
 * (alloc.c, free_remote): onto this thread's stash of the class, if it has
 * one (it makes such blocks itself) and the owner is behind: at this
 * thread's last send to it, the owner's inbox had held blocks since before
 * the coarse clock's last tick (HZ_BEHIND_MS; remote.c, outbox_send).
 * Threads that take turns at the same work (a Go
 * program's goroutines calling C, a pool with more threads than cores)
 * free mostly each other's blocks, and an owner that is not running takes
 * them late: meanwhile the freeing threads made new spans for their own
 * mallocs, whose blocks were cold (docs/perf.md §78). The block stays its
 * span's, which counts it in use; this thread's next malloc of the class
 * takes it with its lines in this cache, or the stash's flush sends it to
 * its owner (stash_flush). Statistics count it as a remote free, not in
 * transit. An owner that keeps up gets its blocks back as before: taken
 * always, a block another heap owns never became local again and every
 * later free of it was remote (rptest -36%, §77). */
bool hz_stash_adopt(hz_heap_t *h, const hz_span_t *s, hz_block_t *b) {
  hz_heap_t *owner = s->heap;
  uint32_t c = s->cls;
  if (!hz_class_stashed(c) || s->kind != HZ_SPAN_SMALL || owner == NULL ||
      h->behind[hz_heap_slot(owner) % HZ_OUTBOX] != owner || h->stash == NULL)
    return false;
  hz_span_t *t = stash_of(h, c);
  if (t->kind != HZ_SPAN_STASH || !h->live) return false;
  b->tag = hz_block_tag(s, b);
  h->n.remote_free[c]++;
  h->n.adopted[c]++;
  if (hz_span_push(t, b)) hz_stash_full(h, t);
  return true;
}

/* Classes of blocks of a page or more, a span of a few blocks each, where a
 * malloc that finds no free block of its class would carve fresh memory:
 * a freed block of a class above stands in for it. A program whose sizes
 * drift (a set of buffers that shrinks as it works, espresso's) left a few
 * freed blocks in each class it passed through and touched new pages in
 * the next: each class a span of its own. Two kinds of loan:
 * - a second block waiting in the stash of one of the next two classes (at
 *   most 27% bigger), at any time. A stash lends only while it holds two,
 *   so that a steady mix of sizes keeps its classes: lending the last one
 *   too, blocks drifted to bigger classes (random_mixed over a live set of
 *   100,000 blocks of 4-32 KiB, +2.6% peak RSS; docs/perf.md §79);
 * - any freed block, stashed or on a span's list, of a class up to twice
 *   as big that had no malloc of its own since the heap's last aging (a
 *   purge delay or more, hz_stash_age): a class the program has moved away
 *   from (§84). Lending while it was in use made the borrower's mallocs
 *   take the slow path for good, as its own blocks never grew: 11 more
 *   instructions a pair over 16-32768 bytes.
 * Which classes lend to which: hz_class_lenders (heap.c). Not while the
 * lender's profiler countdown is due: the caller samples by its own class. */
bool hz_stash_lent(uint32_t c, uint32_t k) {
  return k == c || (k > c && k - c <= HZ_BORROW_CLASSES && (hz_class_lenders[c] >> (k - c - 1) & 1));
}

/* A span of class k with a free block on its list: the one behind its
 * stash, or one of the first in its list (spans with room). */
static hz_span_t *borrow_span(const hz_heap_t *h, uint32_t k) {
  hz_span_t *t = stash_of(h, k), *s = t->next;
  if (s != NULL && s != &hz_span_empty && s->free != NULL) return s;
  s = h->lists[k];
  for (int i = 0; s != NULL && i < 4; s = s->next, i++)
    if (s->free != NULL) return s;
  return NULL;
}

void *hz_stash_borrow(hz_heap_t *h, uint32_t c, uint32_t lenders) {
  for (uint32_t m = lenders, k = c + 1; m != 0; m >>= 1, k++) {
    if (!(m & 1) || h->n.sample_left[k] <= 0) continue;
    hz_span_t *t = stash_of(h, k);
    hz_block_t *b = t->free;
    if (t->kind != HZ_SPAN_STASH) continue; /* (the class has no malloc yet: nothing to lend) */
    bool idle = h->n.sample_left[k] == *stash_seen(h, k);
    if (b == NULL || !(idle || (b->next != NULL && k - c <= 2))) {
      if (!idle || (t = borrow_span(h, k)) == NULL) continue;
      b = t->free;
    }
    t->free = hz_next_decode(b, b->next);
    t->uses++;
    if (!HZ_NOCHECK) b->tag = 0;
    h->n.sample_left[k]--;
    if (idle) (*stash_seen(h, k))--; /* (a loan is no malloc of k's: k stays idle) */
    return b;
  }
  return NULL;
}

void hz_stash_full(hz_heap_t *h, hz_span_t *t) {
  hz_heap_enter(h);
  stash_flush(h, t, stash_cap(t->cls) / 2);
  hz_heap_leave(h);
}

void hz_stash_empty(hz_heap_t *h) {
  if (h->stash == NULL) return;
  for (uint32_t c = HZ_STASH_FIRST; c < HZ_STASH_FIRST + HZ_STASHED; c++) {
    hz_span_t *t = stash_of(h, c);
    if (t->kind == HZ_SPAN_STASH && t->free != NULL) stash_flush(h, t, 0);
  }
}

/* Once a purge delay, at the owner's slow path (heap.c, cache_age): the
 * stash of a class that had no malloc since the last look goes back to its
 * spans, which can then empty and go back to the OS. A thread that used a
 * size once (buffers at start-up) kept its stash of it for good. */
void hz_stash_age(hz_heap_t *h) {
  for (uint32_t c = HZ_STASH_FIRST; c < HZ_STASH_FIRST + HZ_STASHED; c++) {
    hz_span_t *t = stash_of(h, c);
    if (t->kind != HZ_SPAN_STASH) continue;
    int64_t now = h->n.sample_left[c], *seen = stash_seen(h, c);
    if (now == *seen && t->free != NULL) stash_flush(h, t, 0);
    *seen = now;
  }
}

/* hz_option_set: the calling thread's stashes follow at once, other
 * threads' at their next flush. */
void hz_stash_option_changed(void) {
  hz_heap_t *h = hz_tls_heap;
  if (h == &hz_heap_empty || h->stash == NULL) return;
  hz_heap_enter(h);
  for (uint32_t c = HZ_STASH_FIRST; c < HZ_STASH_FIRST + HZ_STASHED; c++) {
    hz_span_t *t = stash_of(h, c);
    if (t->kind == HZ_SPAN_STASH) stash_flush(h, t, 0);
  }
  hz_heap_leave(h);
}

uint64_t hz_stash_count(const hz_heap_t *h, uint32_t c) {
  if (!hz_class_stashed(c) || h->stash == NULL) return 0;
  const hz_span_t *t = stash_of(h, c);
  if (__atomic_load_n(&t->kind, __ATOMIC_RELAXED) != HZ_SPAN_STASH) return 0;
  int64_t n = (int64_t)__atomic_load_n(&t->capacity, __ATOMIC_RELAXED) - 1 - __atomic_load_n(&t->uses, __ATOMIC_RELAXED);
  return n < 0 ? 0 : (uint64_t)n;
}
