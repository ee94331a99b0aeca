// SPDX-License-Identifier: MIT
/* Per-thread heaps: the thread cache behind the fast paths.
 *
 * A heap owns spans. For each size class it has a current span (the fast
 * path pops its free list) and a list of other spans with room. Frees by the
 * owner go straight back on the span's free list; frees by other threads reach the
 * heap's inbox (remote.c). A new thread's heap pointer is the static empty
 * heap, whose current spans are all empty, so its first malloc simply misses
 * into this file, which sets the thread up (thread.c: a heap's setup,
 * adoption, abandonment and collection). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

hz_cold_bss hz_span_t hz_span_empty; /* (read, never written) */
#define HZ_EMPTY_CUR { [0 ... HZ_NCLASS - 1] = &hz_span_empty }
hz_heap_t hz_heap_empty = { .cur = HZ_EMPTY_CUR };
#ifndef _WIN32 /* Windows: os_windows.c */
__thread hz_heap_t *hz_tls_heap = &hz_heap_empty;
#endif

static uint8_t hz_class_slices[HZ_NCLASS];
static uint64_t hz_class_recip[HZ_NCLASS];
static uint16_t hz_class_carve[HZ_NCLASS]; /* blocks a carve puts on the list: a page's worth, at least 1 */
uint8_t hz_class_lenders[HZ_NCLASS];         /* bit i: class c + 1 + i may lend to c (hz_stash_borrow) */
/* hz_class_of_slow(16 * i), constant so that a thread's very first malloc,
 * before hz_init, already picks the right class (hz_heap_init verifies it).
 * One table for every small size: a second one for sizes over 1 KiB, behind
 * a compare, cost that compare and its mispredictions on mixed sizes
 * (docs/perf.md §38). (A table by byte, indexed by the size itself, saved
 * malloc an add and a shift but made glibc-simple 13% slower: §22.) Above
 * 1 KiB each class covers 8, 16, ... 128 entries: the runs below. */
#define R8(c) c, c, c, c, c, c, c, c
#define R16(c) R8(c), R8(c)
#define R32(c) R16(c), R16(c)
#define R64(c) R32(c), R32(c)
#define R128(c) R64(c), R64(c)
#define CLASSES8(R, c) R(c), R(c + 1), R(c + 2), R(c + 3), R(c + 4), R(c + 5), R(c + 6), R(c + 7)
hz_hot_const const uint8_t hz_class_table[HZ_SMALL_MAX / 16 + 1] = {
    HZ_FIRST_CLASS, HZ_FIRST_CLASS, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23,
    23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 27, 27, 27, 27, 28, 28, 28, 28, 29, 29, 29, 29, 30, 30, 30, 30,
    31, 31, 31, 31, CLASSES8(R8, 32), CLASSES8(R16, 40), CLASSES8(R32, 48), CLASSES8(R64, 56), CLASSES8(R128, 64)};
#undef R8
#undef R16
#undef R32
#undef R64
#undef R128
#undef CLASSES8

size_t hz_span_granule = 1;

/* Start-up (init.c), after the options: the page size in use, the OS's or
 * HAKOZUNA_PAGE_SIZE where that is a larger power of two; spans then cover
 * whole pages. */
void hz_heap_page_size_init(void) {
  size_t want = (size_t)hz_opt(HZ_OPTION_PAGE_SIZE);
  if (want > hz_os_page_size && (want & (want - 1)) == 0) hz_os_page_size = want;
  else if (want != 0 && want != hz_os_page_size)
    hz_warning("HAKOZUNA_PAGE_SIZE=%zu is not a power of two above the OS page size %zu; using %zu", want,
               hz_os_page_size, hz_os_page_size);
  hz_options[HZ_OPTION_PAGE_SIZE] = (long)hz_os_page_size;
  if (hz_os_page_size > HZ_SLICE_SIZE) hz_span_granule = hz_os_page_size / HZ_SLICE_SIZE;
  for (uint32_t c = 0; c < HZ_NCLASS; c++) {
    size_t size = hz_class_size(c), n = hz_os_page_size / size;
    hz_class_carve[c] = (uint16_t)(n < 1 ? 1 : n > UINT16_MAX ? UINT16_MAX : n);
    /* Blocks of a page or more, from stashed classes up to twice as big
     * whose blocks are as aligned as c's: aligned_alloc picks a class by
     * its alignment (alloc.c, small_class). */
    hz_class_lenders[c] = 0;
    for (uint32_t i = 0; i < HZ_BORROW_CLASSES; i++) {
      uint32_t k = c + 1 + i;
      if (HZ_STASHED != 0 && size >= hz_os_page_size && k < HZ_STASH_FIRST + HZ_STASHED && hz_class_size(k) <= 2 * size &&
          (hz_class_size(k) & ((size & -size) - 1)) == 0)
        hz_class_lenders[c] |= (uint8_t)(1u << i);
    }
  }
}

/* Start-up (init.c): class geometry. */
void hz_heap_init(void) {
  for (size_t i = 0; i <= HZ_SMALL_MAX / 16; i++)
    if (hz_class_table[i] != hz_class_of_slow(i * 16)) hz_fatal("internal error: class table entry %zu", i);
  for (uint32_t c = 0; c < HZ_NCLASS; c++) {
    /* At least 4 blocks a span (as many as fit its slices), so that blocks
     * of 4-32 KiB do not take a slice each. With 8, frees in any order left
     * more spans partly used: 6-9% more peak RSS on rows of such blocks, for
     * 0.8 instructions a malloc+free pair less (docs/perf.md §63). */
    size_t n = (4 * hz_class_size(c) + HZ_SLICE_SIZE - 1) / HZ_SLICE_SIZE;
    hz_class_slices[c] = (uint8_t)(n ? n : 1);
    hz_class_recip[c] = hz_recip(hz_class_size(c));
  }
}

/* ---- class lists ----
 * Refills take the head. A new span goes there; a full span that a free
 * relists goes to the tail: at the head, with its one free block, it made
 * the next refill switch spans again after one malloc (larson: a refill
 * every 4 mallocs of a class); at the tail it collects frees the longest. */
static void list_listed(hz_span_t *s) {
  if (s->unlisted) s->uses += HZ_UNLISTED_BIAS;
  s->unlisted = 0;
}


static void list_push(hz_heap_t *h, hz_span_t *s) {
  hz_heap_class_used(h, s->cls);
  hz_span_t **head = &h->lists[s->cls];
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  else h->tails[s->cls] = s;
  *head = s;
  list_listed(s);
}

static hz_always_inline void list_append(hz_heap_t *h, hz_span_t *s) {
  hz_heap_class_used(h, s->cls);
  hz_span_t *tail = h->tails[s->cls];
  s->next = NULL;
  s->prev = tail;
  if (tail) tail->next = s;
  else h->lists[s->cls] = s;
  h->tails[s->cls] = s;
  list_listed(s);
}

static inline void list_unlink(hz_heap_t *h, hz_span_t *s) {
  if (s->prev) s->prev->next = s->next;
  else h->lists[s->cls] = s->next;
  if (s->next) s->next->prev = s->prev;
  else h->tails[s->cls] = s->prev;
  s->next = s->prev = NULL;
  if (!s->unlisted) s->uses -= HZ_UNLISTED_BIAS;
  s->unlisted = 1;
}
/* (inlined in refill_quick only: inlined everywhere, large frees took 8
 * instructions more, docs/perf.md §54) */
hz_noinline void hz_heap_list_remove(hz_heap_t *h, hz_span_t *s) { list_unlink(h, s); }

/* ---- spans ---- */
static void class_blocks_add(hz_heap_t *h, uint32_t c, int64_t n) {
  uint64_t now = h->n.span_blocks[c] += (uint64_t)n;
  if (now > h->n.span_blocks_peak[c]) h->n.span_blocks_peak[c] = now;
}

static hz_noinline void span_init_small(hz_heap_t *h, hz_span_t *s, uint32_t c) { /* (a new span: rare; inlined, its size computation ran on every refill) */
  size_t bs = hz_class_size(c);
  s->kind = HZ_SPAN_SMALL;
  s->cls = (uint8_t)c;
  s->heap = h;
  s->push_to = h->cur[c]->kind == HZ_SPAN_STASH ? h->cur[c] : s;
  s->block_size = (uint32_t)bs;
  s->recip = hz_class_recip[c];
  s->start = hz_span_base(s); /* (a large block's may have started further in: large.c) */
#if HZ_CHECKED
  hz_checked_span_guard(s);
  s->capacity = (uint32_t)(s->slice_count * HZ_SLICE_SIZE / bs - 1);
#else
  s->capacity = (uint32_t)(s->slice_count * HZ_SLICE_SIZE / bs);
#endif
  s->carved = 0;
  __atomic_store_n(&s->limit, 0, __ATOMIC_RELAXED);
  s->unlisted = 1; /* (until list_push) */
  s->uses = -1 - HZ_UNLISTED_BIAS;
  s->free = NULL;
  s->trimmed = 0;
  s->trim_head = NULL;
  class_blocks_add(h, c, s->capacity);
}

/* Put the next few never-used blocks on the free list: touching a page at a
 * time (one block, for blocks of a page or more) keeps a fresh span's
 * footprint small (docs/perf.md §33). */
static void span_carve(hz_span_t *s) {
  size_t bs = s->block_size;
  size_t n = s->capacity - s->carved, want = hz_class_carve[s->cls];
  if (n > want) n = want;
  uintptr_t first = s->start + s->carved * bs;
  hz_block_t *next = s->free;
  for (size_t i = n; i-- > 0;) {
    hz_block_t *b = (hz_block_t *)(first + i * bs);
    b->next = hz_next_encode(b, next);
    b->tag = hz_block_tag(s, b);
#if HZ_CHECKED
    memset(b + 1, 0xdf, bs - sizeof *b);
#endif
    next = b;
  }
  s->free = next;
  s->carved += (uint32_t)n;
  /* hz_limit, but with the span's reciprocal: a carve comes every few
   * refills, and its two 64-bit divides (this and the page's worth) cost
   * more than the rest of it */
  __atomic_store_n(&s->limit, (uint64_t)s->carved * (bs * s->recip), __ATOMIC_RELAXED);
}

/* The span cache is the owner's, changed only inside its slow paths (between
 * hz_heap_enter and hz_heap_leave), and unlocked: the locked exchange a
 * lock took on every large malloc and free waited for the stores before it
 * (docs/perf.md §36). The purge thread takes expired spans from it under
 * the idle trim's claim (hz_heaps_trim_caches). */

/* An owner in its slow paths returns its own expired spans, once a purge
 * delay: the purge thread claims only heaps whose owner has not done so for
 * two, as a claim makes an owner entering a slow path wait (for a whole
 * time slice when the purge thread has lost its core meanwhile). */
static inline void cache_age(hz_heap_t *h) {
  uint64_t epoch = atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed);
  if (hz_likely(epoch == h->cache_looked)) return;
  __atomic_store_n(&h->cache_looked, epoch, __ATOMIC_RELAXED); /* (read by the purge thread) */
  if (h->cache_slices) hz_heap_flush_cache(h, false);
  if (h->stash != NULL) hz_stash_age(h);
}
static inline hz_span_t *cache_unlink(hz_heap_t *h, size_t n) {
  hz_span_t *s = h->cache[n];
  h->cache[n] = s->next;
  __atomic_store_n(&h->cache_slices, h->cache_slices - n, __ATOMIC_RELAXED); /* (read racily: hz_heaps_cache_left) */
  return s;
}

/* Slices of a new span of class c: at least 4 blocks, but a heap's first
 * span of a class of blocks of a page or more (carved one at a time, as
 * used) holds one block's worth. On memory already resident (the pool's
 * and the cache's spans are, first), all its pages stayed so: a class that
 * hands out a block now and then kept 256 KiB for a 32 KiB block (16
 * threads passing blocks of up to 300 KB: docs/perf.md §46). Its next
 * spans hold 4 blocks or more: the class is in use. */
static hz_noinline size_t class_span_slices(const hz_heap_t *h, uint32_t c) { /* (rare: inlined, hz_class_size was hoisted onto every refill) */
  size_t bs = hz_class_size(c);
  /* (the checked build's spans start with a guard block) */
  if (bs >= hz_os_page_size && h->n.span_blocks[c] == 0) return ((HZ_CHECKED ? 2 : 1) * bs + HZ_SLICE_SIZE - 1) / HZ_SLICE_SIZE;
  return hz_class_slices[c];
}

/* A cached span for a new span of `slices` slices: one of that size, else,
 * for a large block (c = HZ_CLASS_LARGE), the smallest of up to half as big
 * again, whole (the block has room to grow in place). Keyed by exact size
 * alone, a thread whose large blocks vary in size kept a whole THREAD_CACHE
 * of spans it never asked for again while it took new ones: 16 threads
 * passing blocks of up to 300 KB to each other (docs/perf.md §46). Cut to
 * size instead, the rests left too few spans big enough, and it took more
 * new ones; up to twice the size, the slack of long-lived blocks cost RSS
 * (§46). */
static hz_span_t *cache_take(hz_heap_t *h, size_t slices, uint32_t c) {
  if (slices > HZ_LARGE_MAX_SLICES) return NULL;
  if (h->cache[slices] != NULL) return cache_unlink(h, slices);
  if (c != HZ_CLASS_LARGE || h->cache_slices <= slices) return NULL;
  size_t most = slices + (slices + 1) / 2;
  for (size_t n = slices + 1; n <= most && n <= HZ_LARGE_MAX_SLICES; n++)
    if (h->cache[n] != NULL) return cache_unlink(h, n);
  return NULL;
}

/* A span of `slices` slices for class c (HZ_CLASS_LARGE: a large block). */
static hz_span_t *heap_take_span(hz_heap_t *h, size_t slices, size_t align, uint32_t c) {
  /* Large blocks freed by other threads wait in the inbox; a thread that
   * allocates mostly large blocks rarely refills a small class, so look
   * here too before taking new memory. */
  if (atomic_load_explicit(&h->inbox, memory_order_relaxed)) hz_remote_drain(h);
  cache_age(h);
  size_t g = hz_span_granule;
  slices = (slices + g - 1) & ~(g - 1);
  if (align < g) align = g;
  hz_span_t *s = align == g ? cache_take(h, slices, c) : NULL; /* cached spans are granule-aligned */
  if (s != NULL) {
    s->next = s->prev = NULL;
    s->zeroed = 0;
    return s;
  }
  uint32_t arena = hz_arena_here(h->arena);
  s = hz_arena_alloc_span(arena, slices, align);
  if (s == NULL) {
    /* Cached spans may coalesce into a fit, and the checked build's
     * quarantine holds freed blocks back (a program that freed all of its
     * blocks at the RLIMIT_AS limit got none again, not even after). */
    hz_heap_collect(h, true);
    s = hz_arena_alloc_span(arena, slices, align);
  }
  if (s == NULL) { /* out of address space? what exited threads' heaps got freed, cached huge
                     * mappings and unused segments go back */
    hz_heaps_collect_abandoned(true);
    hz_huge_purge(true);
    hz_arena_release();
    s = hz_arena_alloc_span(arena, slices, align);
  }
  if (HZ_CHECKED && s != NULL && !hz_checked_span_protect(s, false)) {
    hz_arena_free_span(s, false); /* closed, as a span the quarantine lets go */
    return NULL;
  }
  return s;
}

/* A large block's span. The common case, a cached span of exactly its size
 * with nothing else to do first (no remote frees waiting, the cache aged at
 * this epoch), is taken here with nothing called (docs/perf.md §89). */
hz_span_t *hz_heap_take_span(hz_heap_t *h, size_t slices, size_t align) {
  hz_heap_enter(h);
  size_t g = hz_span_granule;
  slices = (slices + g - 1) & ~(g - 1);
  hz_span_t *s = NULL;
  if (hz_likely(slices <= HZ_LARGE_MAX_SLICES && align <= g && !atomic_load_explicit(&h->inbox, memory_order_relaxed) &&
                atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed) == h->cache_looked))
    s = h->cache[slices];
  if (hz_likely(s != NULL)) {
    cache_unlink(h, slices);
    s->next = s->prev = NULL;
    s->zeroed = 0;
  } else {
    s = heap_take_span(h, slices, align, HZ_CLASS_LARGE);
  }
  hz_heap_leave(h);
  return s;
}

static hz_always_inline void span_free_fields(hz_span_t *s) {
  s->kind = HZ_SPAN_FREE;
  s->heap = NULL;
  s->free = NULL;
  if (HZ_CHECKED) s->start = hz_span_base(s); /* (a small span's started after its guard) */
  s->trimmed = 0;
  __atomic_store_n(&s->limit, 0, __ATOMIC_RELAXED); /* the fast path refuses its pointers without reading them */
}

/* A program that lowered mmap_threshold asks for blocks above it to go back
 * to the OS at their free (alloc.c, goes_huge). */
static inline bool large_goes_back(const hz_span_t *s) {
  size_t threshold = (size_t)hz_opt(HZ_OPTION_MMAP_THRESHOLD);
  return threshold < HZ_LARGE_MAX && s->block_size > threshold;
}

/* Whether the cache, holding `before` slices, has room for n more. */
static inline bool cache_room(size_t before, size_t n) {
  return n <= HZ_LARGE_MAX_SLICES && before + n <= (size_t)hz_opt(HZ_OPTION_THREAD_CACHE) * 1024 / HZ_SLICE_SIZE;
}

static hz_always_inline void cache_put(hz_heap_t *h, hz_span_t *s, size_t n, size_t before) {
  s->cached_epoch = atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed);
  s->next = h->cache[n];
  h->cache[n] = s;
  __atomic_store_n(&h->cache_slices, before + n, __ATOMIC_RELAXED);
  /* the purge thread returns the cache if we idle */
  if (before == 0) atomic_store_explicit(&hz_purge_pending, 1, memory_order_seq_cst);
}

void hz_heap_retire_span(hz_heap_t *h, hz_span_t *s, bool may_cache) {
  if (s->kind == HZ_SPAN_SMALL) class_blocks_add(h, s->cls, -(int64_t)s->capacity);
  bool large = s->kind == HZ_SPAN_LARGE;
  span_free_fields(s);
  if (large && hz_quarantine_large(h, s)) return;
  if (large && large_goes_back(s)) {
    hz_arena_free_span(s, true);
    return;
  }
  size_t n = s->slice_count, before = h->cache_slices;
  if (may_cache && cache_room(before, n)) cache_put(h, s, n, before);
  else hz_arena_free_span(s, false);
}

/* A listed small span has no block out. Keep one such span per class (a
 * class whose few blocks come and go would otherwise retire and re-create a
 * span over and over); retire the others. A class's one-block first span
 * (class_span_slices) is not kept once the class has a bigger current span:
 * its pages can serve other classes. */
static hz_noinline void span_emptied(hz_heap_t *h, hz_span_t *s, bool keep_spare) {
  uint32_t c = s->cls;
  hz_span_t *cur = *hz_heap_cur_slot(h, c);
  bool superseded = s->slice_count < hz_class_slices[c] && cur != &hz_span_empty && cur->slice_count >= hz_class_slices[c];
  if (keep_spare && h->spare[c] == NULL && !superseded) {
    h->spare[c] = s;
    return;
  }
  if (h->spare[c] == s) h->spare[c] = NULL;
  hz_heap_list_remove(h, s);
  hz_heap_retire_span(h, s, keep_spare);
}

/* The current span carries one extra "use" so it never looks empty to the
 * free fast path: a malloc/free ping-pong stays on the fast path. */
static inline void span_pin(hz_heap_t *h, uint32_t c, hz_span_t *s) {
  *hz_heap_cur_slot(h, c) = s; /* (from the class's list, whose push set its hz_heap_class_used bit) */
  s->uses++;
  s->pinned = 1;
  if (h->spare[c] == s) h->spare[c] = NULL;
}
void hz_heap_set_cur(hz_heap_t *h, uint32_t c, hz_span_t *s) {
  hz_span_t **slot = hz_heap_cur_slot(h, c), *old = *slot;
  if (s != &hz_span_empty) span_pin(h, c, s);
  else *slot = s;
  if (old != &hz_span_empty) {
    old->uses--;
    old->pinned = 0;
    if (hz_span_used(old) == 0 && !old->unlisted) span_emptied(h, old, h->live);
  }
}

/* A page the trim returned reads as zero until written, and nothing may
 * write where its blocks lie: they are free and off the list. Something
 * did when a block of it was freed a second time (the trim's zeroing took
 * its free tag, so that free passed and pushed it: it may have been handed
 * out since) or written after its free. The first such block, or NULL.
 * (From the first block that starts in the page: one that starts in the
 * page before is the owner's to hand out and may reach into it.) */
static const hz_block_t *trimmed_page_written(const hz_span_t *s, uintptr_t lo) {
  size_t bs = s->block_size;
  uintptr_t from = s->start + (lo - s->start + bs - 1) / bs * bs;
  for (const uint64_t *w = (const uint64_t *)from; (uintptr_t)w < lo + hz_os_page_size; w++)
    if (*w != 0) return (const hz_block_t *)(s->start + ((uintptr_t)w - s->start) / bs * bs);
  return NULL;
}

/* The blocks that start in pages the idle trim or malloc_trim returned go
 * back on the list (touching those pages again), as carving does for fresh
 * ones; those of a page written meanwhile are misuse, and stay off it. */
static void span_untrim(hz_span_t *s) {
  size_t bs = s->block_size, ps = hz_os_page_size;
  for (uint64_t m = s->trimmed; m != 0; m &= m - 1) {
    uintptr_t lo = s->start + (uintptr_t)__builtin_ctzll(m) * ps;
    const hz_block_t *bad = trimmed_page_written(s, lo);
    if (bad != NULL) {
      hz_misuse_trimmed(bad, bs);
      continue;
    }
    for (size_t i = (lo - s->start + bs - 1) / bs; i < s->carved && s->start + i * bs < lo + ps; i++) {
      hz_block_t *b = (hz_block_t *)(s->start + i * bs);
      b->next = hz_next_encode(b, s->free);
      b->tag = hz_block_tag(s, b);
      s->free = b;
    }
  }
  s->trimmed = 0;
  __atomic_store_n(&s->push_to, hz_stash_home(s->heap, s), __ATOMIC_RELAXED); /* (no longer the trap) */
}

/* ---- malloc slow path ---- */
static inline void *span_pop(hz_heap_t *h, hz_span_t *s, uint32_t c) {
  hz_block_t *b = s->free;
#if HZ_CHECKED
  hz_checked_link(b, s->block_size);
#endif
  s->free = hz_next_decode(b, b->next);
  s->uses++;
  if (!HZ_NOCHECK) b->tag = 0;
  h->n.sample_left[c]--; /* below 0: hz_heap_alloc_small samples (profile.c) */
  return b;
}

/* A refill of a stashed class takes the block for this malloc from the span
 * behind its stash, and the rest of that span's list with it (hz_stash_fill):
 * blocks that other threads free come back to their spans, and with one
 * block a refill, a malloc after each such free took the slow path
 * (mt_remote 16-32768, 50% remote: 10% slower than without stashes). */
static inline void *feed_pop(hz_heap_t *h, hz_span_t *s, uint32_t c) {
  void *p = span_pop(h, s, c);
  if (h->cur[c]->kind == HZ_SPAN_STASH) hz_stash_fill(h->cur[c], s);
  return p;
}

/* hz_heap_enter for the quick paths below: false, and nothing entered,
 * while the idle trim claims the heap (their slow paths wait for it). */
static inline bool heap_try_enter(hz_heap_t *h) {
  hz_heap_busy_set(h, h->busy + 1, __ATOMIC_RELAXED);
  hz_store_fence();
  if (hz_likely(!atomic_load_explicit(&h->trim, memory_order_acquire))) return true;
  hz_heap_leave(h);
  return false;
}

/* Class c is about to take fresh memory: for blocks of a page or more, a
 * freed block of a class above it that the heap uses may stand in
 * (stash.c, hz_stash_borrow). (The test inline: refill_quick makes no call
 * for the other classes, nor where no lender is in use: a walk over all of
 * c's lenders cost each fresh block 78 instructions where none was,
 * rounds 3 100000 4000 4000, docs/perf.md §91.) */
static inline void *borrow(hz_heap_t *h, uint32_t c) {
  uint32_t lenders = hz_class_lenders[c];
  if (lenders != 0) lenders &= hz_heap_classes_from(h, c + 1);
  return lenders != 0 && h->stash != NULL ? hz_stash_borrow(h, c, lenders) : NULL;
}

/* The commonest refills, with nothing else to do first (no remote frees
 * waiting, none to send, no cache to age, no page trimmed): carve the
 * current span, or, when it is full, make the next span of the class with
 * a free block current. (A stashed class refills from the span behind its
 * stash, whose list may hold blocks.) No call on this path: the slow path's registers
 * and calls cost more than the rest of a refill (docs/perf.md §54). */
static inline void *refill_quick(hz_heap_t *h, uint32_t c) {
  hz_span_t *s = *hz_heap_cur_slot(h, c);
  if (s == &hz_span_empty || s->trimmed || atomic_load_explicit(&h->inbox, memory_order_relaxed) ||
      h->outbox_used || atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed) != h->cache_looked)
    return NULL;
  if (s->free != NULL) { /* (the span behind an empty stash) */
  } else if (s->carved < s->capacity) {
    void *b = borrow(h, c);
    if (b != NULL) return b;
    span_carve(s);
  } else {
    hz_span_t *next = h->lists[c] != s ? h->lists[c] : s->next;
    if (next == NULL || next->free == NULL) return NULL;
    list_unlink(h, s); /* full until a block comes back */
    s->uses--; /* unpinned: unlisted, so not empty to span_emptied */
    s->pinned = 0;
    span_pin(h, c, next);
    s = next;
  }
  h->n.refill[c]++;
  return feed_pop(h, s, c);
}

/* The current span of class c has no free block: take remote frees, send
 * ours, carve fresh blocks, or move to another span or a new one. */
static hz_noinline void *heap_alloc_small(hz_heap_t *h, uint32_t c) {
  h->n.refill[c]++;
  if (h->cur[c] == &hz_span_empty && c >= HZ_STASH_FIRST && h->stash != NULL) hz_stash_install(h, c);
  cache_age(h);
  if (atomic_load_explicit(&h->inbox, memory_order_relaxed)) hz_remote_drain(h);
  if (h->outbox_used) hz_remote_flush(h);
  if (h->cur[c]->free != NULL) return span_pop(h, h->cur[c], c); /* (the drain's blocks, current span or stash) */
  for (;;) {
    hz_span_t *s = *hz_heap_cur_slot(h, c);
    if (s != &hz_span_empty) {
      if (s->free == NULL && s->trimmed) span_untrim(s);
      if (s->free == NULL && s->carved < s->capacity) {
        void *b = borrow(h, c);
        if (b != NULL) return b;
        span_carve(s);
      }
      if (s->free) return feed_pop(h, s, c);
      hz_heap_list_remove(h, s); /* full until a block comes back */
      /* (the next span with room replaces it directly: the commonest refill) */
      if (h->lists[c] == NULL) hz_heap_set_cur(h, c, &hz_span_empty);
    }
    if ((s = h->lists[c]) != NULL) { hz_heap_set_cur(h, c, s); continue; }
    void *b = borrow(h, c);
    if (b != NULL) return b;
    s = heap_take_span(h, class_span_slices(h, c), 1, c);
    if (s == NULL) return NULL;
    span_init_small(h, s, c);
    list_push(h, s);
    hz_heap_set_cur(h, c, s);
  }
}

/* A sampling point that fell due here is taken here, as the fast path takes
 * its own: a class whose mallocs all refill (fresh blocks of a span carved
 * one at a time, never freed) is sampled too. */
static inline void *alloc_small_done(hz_heap_t *h, uint32_t c, void *p, size_t request) {
  if (hz_unlikely(h->n.sample_left[c] < 0)) return hz_profile_small(h, p, request);
#if HZ_CHECKED
  hz_checked_on_alloc(p, hz_class_size(c), request);
#endif
  (void)request;
  return p;
}

static hz_noinline void *alloc_small_slow(hz_heap_t *h, uint32_t c, size_t request) {
  /* (h is what the fast path read: a thread's first malloc may have started
   * the purge thread since, whose pthread_create allocated and set this
   * thread's heap up -- a second one leaked the first, docs/perf.md §61) */
  if (h == &hz_heap_empty && (h = hz_heap_get()) == NULL) goto oom;
  hz_heap_enter(h);
  void *p = heap_alloc_small(h, c);
  hz_heap_leave(h);
  if (p) return alloc_small_done(h, c, p, request);
oom:
  hz_verbose("out of memory: no span for %zu-byte blocks", hz_class_size(c));
  errno = ENOMEM;
  return NULL;
}

void *hz_heap_alloc_small(hz_heap_t *h, uint32_t c, size_t request) {
  void *p = NULL;
  if (hz_likely(h != &hz_heap_empty) && heap_try_enter(h)) {
    p = refill_quick(h, c);
    hz_heap_leave(h);
  }
  return p != NULL ? alloc_small_done(h, c, p, request) : alloc_small_slow(h, c, request);
}

/* ---- free slow path: a span became empty, or was full ---- */
static void span_after_free(hz_heap_t *h, hz_span_t *s, bool may_cache, bool remote) {
  if (s->kind == HZ_SPAN_LARGE) {
    if (s->sample) hz_profile_free(s); /* a sampled block (profile.c); remote frees cleared it */
    if (!remote) { /* a remote free was counted by its sender */
      h->n.large_frees++;
      h->n.large_bytes -= s->block_size;
    } else {
      h->n.remote_large_back += s->block_size;
    }
    /* (checked build: the guard slice stays inaccessible, the whole span
     * becomes so in hz_quarantine_large) */
    hz_heap_retire_span(h, s, may_cache);
    return;
  }
  if (s->unlisted) list_append(h, s);
  if (hz_span_used(s) == 0) span_emptied(h, s, may_cache); /* never the current span: it is pinned */
}

void hz_heap_free_slow(hz_heap_t *h, hz_span_t *s) {
  hz_heap_enter(h);
  span_after_free(h, s, true, false);
  hz_heap_leave(h);
}

/* The free of a large block by its heap's thread. Its span goes to the span
 * cache: the common case here, with nothing called (docs/perf.md §89).
 * Only the free of a large block that this thread allocated may start the
 * purge thread. glibc frees a joined thread's TLS (its vector, a small
 * block; a dlopen'ed library's __thread data) holding the lock that
 * pthread_create takes, and starting it there deadlocked (200 threads
 * joined: 5 hangs in 5): that free is ours only when this thread took over
 * the joined one's heap (tests/threads/join_adopted), and a sampled small
 * block has a large span of its own. Memory that other frees leave waiting
 * is seen at the next malloc slow path. */
void hz_heap_free_large(hz_heap_t *h, hz_span_t *s) {
  bool own = !s->sample && s->owner_gen == h->adoptions;
  size_t n = s->slice_count;
  hz_heap_enter(h);
  size_t before = h->cache_slices;
  if (hz_likely(!HZ_CHECKED && !s->sample && cache_room(before, n) && !large_goes_back(s))) {
    h->n.large_frees++;
    h->n.large_bytes -= s->block_size;
    span_free_fields(s);
    cache_put(h, s, n, before);
  } else {
    span_after_free(h, s, true, false);
  }
  hz_heap_leave(h);
  if (own) hz_purge_poll();
  else hz_purge_poll_tls_free();
}

/* A large block freed by a thread other than its owner's. Its span holds no
 * other block and is on none of the owner's lists, so a thread that makes
 * large blocks itself retires it into its own span cache at once, as if the
 * block were its own, instead of sending it to the owner's inbox: its next
 * large malloc reuses lines still in its cache, and an owner that idles
 * holds no freed span. (Threads that take turns at the same work -- Go's
 * cgo calls, thread pools -- free mostly each other's blocks: docs/perf.md
 * §76.) Each large malloc here lets one such span in, and only while the
 * cache has room: a thread that only frees (a consumer) sends them back to
 * their maker, which would otherwise map new ones while the consumer's
 * cache filled. False: the block goes to its owner. */
bool hz_heap_free_large_remote(hz_heap_t *h, hz_span_t *s, hz_block_t *b) {
  if (h == &hz_heap_empty || !h->live || h->large_credit == 0) return false;
  size_t cached = __atomic_load_n(&h->cache_slices, __ATOMIC_RELAXED); /* (the purge thread may take some) */
  if (cached + s->slice_count > (size_t)hz_opt(HZ_OPTION_THREAD_CACHE) * 1024 / HZ_SLICE_SIZE) return false;
  h->large_credit--;
  b->tag = hz_block_tag(s, b); /* (a second free stops at it, as at a local one's) */
  s->heap = h;
  hz_heap_free_slow(h, s);
  hz_purge_poll_tls_free();
  return true;
}

/* Whether b starts in a page of s the trim returned: then it was free and
 * off the list already, and this is a second free. (The trim zeroed its
 * free tag with the page, so free's fast path took it for a live block.) */
static bool block_trimmed(const hz_span_t *s, const hz_block_t *b) {
  atomic_thread_fence(memory_order_acquire); /* (the marks the trim made before pointing push_to here) */
  uint64_t m = __atomic_load_n(&s->trimmed, __ATOMIC_RELAXED);
  if (m == 0) return false;
  size_t page = ((uintptr_t)b - s->start) / hz_os_page_size; /* (as trim.c counts them) */
  return page < 64 && (m >> page & 1);
}

/* The free wrote the block's link and tag into a page that was zero: they
 * go, so that the refill that puts the page's blocks back finds it as the
 * trim left it (and does not report the block a second time). */
static hz_noinline void trimmed_free(const hz_span_t *s, hz_block_t *b) {
  b->next = NULL;
  b->tag = 0;
  hz_misuse_trimmed_free(b, s->block_size);
}

/* A free of ours into a span with trimmed pages went to the heap's trap: a
 * block in one of those pages is freed a second time; any other goes where
 * the span's frees go. */
static hz_noinline void trap_free(hz_heap_t *h, hz_span_t *t) {
  hz_block_t *b = t->free;
  t->free = NULL;
  t->uses = 0;
  hz_span_t *s = hz_span_of(b);
  if (block_trimmed(s, b)) {
    trimmed_free(s, b);
    return;
  }
  hz_span_t *home = hz_stash_home(h, s);
  if (hz_span_push(home, b)) hz_heap_free_small_slow(h, home);
}

/* hz_heap_free_slow for a small span, the commonest case first and with no
 * call: a full span has a block back and goes back on its class's list
 * (docs/perf.md §54). (Large spans do not come here: a test for them in
 * hz_heap_free_slow cost their frees 10 instructions.) */
void hz_heap_free_small_slow(hz_heap_t *h, hz_span_t *s) {
  if (s->kind == HZ_SPAN_TRAP) {
    trap_free(h, s);
    return;
  }
  if (s->kind == HZ_SPAN_STASH) {
    hz_stash_full(h, s);
    return;
  }
  if (heap_try_enter(h)) {
    bool quick = s->unlisted && s->uses != -1 - HZ_UNLISTED_BIAS; /* (not empty then) */
    if (quick) list_append(h, s);
    hz_heap_leave(h);
    if (quick) return;
  }
  hz_heap_free_slow(h, s);
}

void hz_heap_block_back(hz_heap_t *h, hz_span_t *s, hz_block_t *b) {
  if (hz_span_push(s, b)) span_after_free(h, s, true, false);
}

/* A block freed by another thread reaches its owner (remote.c). */
void hz_heap_block_returned(hz_span_t *s, hz_block_t *b) {
  hz_heap_t *h = s->heap;
  if (hz_unlikely(s->trimmed) && block_trimmed(s, b)) {
    trimmed_free(s, b);
    return;
  }
  h->n.remote_back[s->cls]++;
  if (hz_span_push(s, b)) span_after_free(h, s, __atomic_load_n(&h->live, __ATOMIC_RELAXED), true);
}

/* The same for n blocks of s linked first..last, whose span is no stash's. */
void hz_heap_blocks_returned(hz_span_t *s, hz_block_t *first, hz_block_t *last, uint32_t n) {
  hz_heap_t *h = s->heap;
  h->n.remote_back[s->cls] += n;
  if (hz_span_push_list(s, first, last, n)) span_after_free(h, s, __atomic_load_n(&h->live, __ATOMIC_RELAXED), true);
}

/* At the owner's drain, or a collect of an abandoned heap: a block of a
 * stashed class goes onto the stash (not from the idle trim's adoption,
 * while the owner's malloc may pop the stash). */
void hz_heap_block_drained(hz_span_t *s, hz_block_t *b) {
  hz_span_t *t = s->push_to;
  if (t->kind == HZ_SPAN_TRAP) {
    if (block_trimmed(s, b)) {
      trimmed_free(s, b);
      return;
    }
    t = hz_stash_home(s->heap, s);
  }
  if (t == s) {
    hz_heap_block_returned(s, b);
    return;
  }
  s->heap->n.remote_back[s->cls]++;
  hz_stash_put(s->heap, t, b);
}

/* ---- collection, thread exit, adoption ---- */
/* Takes the cached spans (all, or those kept past the purge delay) off the
 * heap's cache and onto *out. */
static void cache_take_expired(hz_heap_t *h, bool all, hz_span_t **out) {
  uint64_t epoch = atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed);
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  for (size_t n = 1; n <= HZ_LARGE_MAX_SLICES && h->cache_slices; n++) {
    hz_span_t **link = &h->cache[n];
    while (*link) {
      hz_span_t *s = *link;
      if (all || delay == 0 || (delay > 0 && epoch - s->cached_epoch >= 2)) {
        *link = s->next;
        __atomic_store_n(&h->cache_slices, h->cache_slices - n, __ATOMIC_RELAXED);
        s->next = *out;
        *out = s;
      } else {
        link = &s->next;
      }
    }
  }
}

static void spans_free(hz_span_t *s) {
  for (hz_span_t *next; s != NULL; s = next) {
    next = s->next;
    hz_arena_free_span(s, false);
  }
}

void hz_heap_flush_cache(hz_heap_t *h, bool all) {
  hz_span_t *out = NULL;
  cache_take_expired(h, all, &out);
  spans_free(out);
}

/* The purge thread: spans kept in a heap's cache past the purge delay go
 * back to the pools, an idle thread's too. An owner in its slow paths
 * returns its own (cache_age); the purge thread claims, as the idle trim
 * does, the heaps whose owner has not for two purge delays -- it idles, or
 * makes only fast-path calls -- and takes from those whose owner is still
 * outside its slow paths. Without a barrier on every thread (membarrier
 * unavailable) those keep their caches, as they keep their partly used
 * spans, unless no other thread runs (purge_here, at the owner's own safe
 * point). */
static void caches_take(hz_heap_t **claimed, size_t n, hz_span_t **out) {
  bool barrier = n != 0 && (hz_os_single_threaded() || hz_os_membarrier());
  for (size_t i = 0; i < n; i++) {
    hz_heap_t *h = claimed[i];
    if (barrier && __atomic_load_n(&h->busy, __ATOMIC_ACQUIRE) == 0) {
      /* (a fork meanwhile: the child drops this cache, maybe torn) */
      atomic_store_explicit(&h->cache_taking, 1, memory_order_relaxed);
      atomic_thread_fence(memory_order_release);
      cache_take_expired(h, false, out);
      atomic_store_explicit(&h->cache_taking, 0, memory_order_release);
    }
    atomic_fetch_and_explicit(&h->trim, ~(uint32_t)HZ_TRIM_CLAIMED, memory_order_release);
  }
}

void hz_heaps_trim_caches(void) {
  uint64_t epoch = atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed);
  hz_span_t *out = NULL;
  hz_heap_t *claimed[HZ_TRIM_BATCH];
  size_t n = 0;
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all) {
    if (!__atomic_load_n(&h->cache_slices, __ATOMIC_RELAXED)) continue;
    if (atomic_load_explicit(&h->trim, memory_order_relaxed) & HZ_TRIM_CLAIMED) continue;
    if (epoch - __atomic_load_n(&h->cache_looked, __ATOMIC_RELAXED) < 2) continue;
    atomic_fetch_or_explicit(&h->trim, HZ_TRIM_CLAIMED, memory_order_relaxed);
    claimed[n++] = h;
    if (n == HZ_TRIM_BATCH) {
      caches_take(claimed, n, &out);
      n = 0;
    }
  }
  caches_take(claimed, n, &out);
  spans_free(out);
}

/* Spans that still hold a live block can't go back to the pool, but the
 * pages inside their free blocks can: all but the page holding the block's
 * link. Worth a system call for blocks larger than a page. (Not in the
 * checked build, whose free blocks keep a fill pattern.) */
void hz_heap_block_purge(hz_block_t *b, size_t bs) {
  size_t ps = hz_os_page_size;
  uintptr_t lo = ((uintptr_t)(b + 1) + ps - 1) & ~(uintptr_t)(ps - 1);
  uintptr_t hi = ((uintptr_t)b + bs) & ~(uintptr_t)(ps - 1);
  if (hi > lo) hz_os_purge((void *)lo, hi - lo);
}

/* Whether some heap still caches spans (the purge thread keeps running).
 * Racy reads: a thread that caches into an empty cache raises
 * hz_purge_pending afterwards, which the purge thread reads last. */
bool hz_heaps_cache_left(void) {
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all)
    if (__atomic_load_n(&h->cache_slices, __ATOMIC_RELAXED)) return true;
  return false;
}
