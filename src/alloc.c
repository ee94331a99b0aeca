// SPDX-License-Identifier: MIT
/* The fast paths and the public API.
 *
 * malloc: size -> class, pop the current span's free list. free: the segment
 * map says the pointer is ours, the segment header gives its span, a
 * multiply checks it is a block start, the block's tag says it isn't already
 * free, and if this thread owns the span the block goes back on its list.
 * Everything else (empty lists, other threads' blocks, large and huge
 * blocks, misuse) is in noinline functions; those here see that start-up
 * has run before calling down, and end at the purge layer's safe point
 * (nothing held, nothing half done) before returning to the program. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#ifndef _WIN32
#include <malloc.h>
#endif
#include <string.h>

/* ---- malloc ---- */
/* (The safe point first, so that the refill is a tail call: memory that
 * starts waiting during this refill is seen at the next slow path.) While
 * memory waits, a class looks at every 8th of its refills only: they come
 * every few mallocs, and a look (hz_purge_start) cost 1.3 instructions a
 * malloc+free pair of 16-32768 bytes (docs/perf.md §34). */
static hz_noinline void *refill(hz_heap_t *h, hz_span_t *const *cur, size_t request) {
  uint32_t c = (uint32_t)(cur - h->cur); /* (the class: the fast path keeps one register fewer) */
  hz_init();
  if (hz_unlikely(atomic_load_explicit(&hz_purge_pending, memory_order_relaxed)) && (h->n.refill[c] & 7) == 0)
    hz_purge_poll();
  return hz_heap_alloc_small(h, c, request);
}

/* Who asks: malloc and its family return NULL when out of memory; C++'s
 * new calls the new_handler and throws, its nothrow form returns NULL
 * after the handler (new_failed, override_cxx.c). For new, the slow paths
 * below see to that themselves, so that new's fast path is malloc's, tail
 * calls included, with nothing of its own to keep across them. */
typedef enum { ASK_MALLOC, ASK_NEW, ASK_NEW_NOTHROW } alloc_ask_t;
#if HZ_OVERRIDE
static hz_noinline void *new_failed(size_t n, size_t align, bool nothrow);
#else
static void *new_failed(size_t n, size_t align, bool nothrow) { /* (no operator new in this build) */
  (void)n, (void)align, (void)nothrow;
  return NULL;
}
#endif
static hz_noinline void *refill_new(hz_heap_t *h, hz_span_t *const *cur, size_t n, alloc_ask_t ask) {
  void *p = refill(h, cur, n);
  return p != NULL ? p : new_failed(n, 0, ask == ASK_NEW_NOTHROW);
}

static inline void *alloc_class(size_t c, size_t request, alloc_ask_t ask) {
  hz_heap_t *h = hz_tls_heap;
  hz_span_t **cur = &h->cur[c];
  hz_span_t *s = *cur;
  hz_block_t *b = s->free;
  if (hz_likely(b != NULL)) {
#if HZ_CHECKED
    hz_checked_link(b, s->block_size);
#endif
    hz_block_t *next = hz_next_decode(b, b->next);
    s->free = next;
    /* The next malloc of the class reads this block's link: a block freed
     * long ago is out of the cache, and a program that allocates many in
     * a row waited for each line in turn. Into L2, not L1, whose lines a
     * program touching other classes in between still needs (glibc-simple
     * 24% faster, 15% with an L1 prefetch; one instruction: docs/perf.md §53). */
    __builtin_prefetch(next, 1, 2);
    s->uses++;
    if (!HZ_NOCHECK) b->tag = 0;
    if (hz_unlikely(--h->n.sample_left[c] < 0)) return hz_profile_small(h, b, request);
  } else {
    return ask == ASK_MALLOC ? refill(h, cur, request) : refill_new(h, cur, request, ask);
  }
#if HZ_CHECKED
  hz_checked_on_alloc(b, hz_class_size(c), request);
#endif
  (void)request;
  return b;
}

/* Requests above 2 MiB (what a span holds) are mapped directly. Those
 * above a lowered mmap_threshold are not mapped one by one: a mapping takes
 * a 4 MiB window of address space (the segment map's unit), and 2,000
 * blocks of 100 KB were charged 8 GB of it; their spans give their pages
 * back at the free instead (heap.c), as glibc's munmap would. */
static bool goes_huge(size_t n, size_t align) { return n + HZ_LARGE_GUARD > HZ_LARGE_MAX || align > HZ_LARGE_MAX; }

/* calloc's clearing of the first `dirty` bytes of a big block: past them
 * the pages are untouched or went back to the OS, zero. */
static void clear_big(void *p, size_t dirty, size_t n) { hz_os_clear(p, dirty < n ? dirty : n); }

static hz_noinline void *alloc_big(size_t n, size_t align, bool zero) {
  size_t dirty = 0;
  void *p;
  if (n > HZ_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  if (n == 0) n = 1; /* aligned requests of 0 bytes still get a real block */
  hz_init(); /* the checked build's guard follows the page size */
  if (hz_unlikely(hz_profile_rate() != 0) && (p = hz_profile_big(n, align, &dirty)) != NULL) {
    if (zero) clear_big(p, dirty, n);
    return p;
  }
  if (!goes_huge(n, align)) p = hz_large_alloc(hz_tls_heap, n, align, &dirty);
  else p = hz_huge_alloc(n, align, &dirty);
  if (p == NULL) hz_verbose("out of memory: a request of %zu bytes failed", n);
  if (p != NULL && zero) clear_big(p, dirty, n);
  hz_purge_poll();
  return p;
}

static hz_noinline void *alloc_big_new(size_t n, alloc_ask_t ask) {
  void *p = alloc_big(n, 0, false);
  return p != NULL ? p : new_failed(n, 0, ask == ASK_NEW_NOTHROW);
}

static inline void *alloc_for(size_t n, alloc_ask_t ask) {
#if HZ_CHECKED
  void *z;
  if (n == 0 && (z = hz_zero_alloc()) != NULL) return z; /* any access faults */
  if (n == 0) n = 1; /* slots ran out: an ordinary block, whose usable size (its request) is not 0 */
#endif
  if (hz_likely(n <= HZ_SMALL_MAX - HZ_CANARY_SIZE)) return alloc_class(hz_class_of(n + HZ_CANARY_SIZE), n, ask);
  return ask == ASK_MALLOC ? alloc_big(n, 0, false) : alloc_big_new(n, ask);
}
static inline void *alloc(size_t n) { return alloc_for(n, ASK_MALLOC); }

/* Small aligned blocks come from a class whose size is a multiple of the
 * alignment: spans start 32 KiB-aligned, so every block of it is aligned. */
static uint32_t small_class(size_t n, size_t align) {
  if (n > HZ_SMALL_MAX - HZ_CANARY_SIZE || align > HZ_SLICE_SIZE) return HZ_NCLASS;
  uint32_t c = hz_class_of(n + HZ_CANARY_SIZE);
  if (align > 16)
    while (c < HZ_NCLASS && (hz_class_size(c) & (align - 1)) != 0) c++;
  return c;
}

static hz_noinline void *alloc_aligned(size_t align, size_t n) {
  if (align <= 16) return alloc(n);
  if (HZ_CHECKED && n == 0) n = 1; /* (as alloc's, when 0-byte slots run out) */
  uint32_t c = small_class(n, align);
  if (c < HZ_NCLASS) return alloc_class(c, n, ASK_MALLOC);
  return alloc_big(n, align, false);
}

/* ---- free ---- */
static hz_noinline void free_rare(void *p, const char *fn) {
  if (p == NULL) return;
  uint8_t m = hz_segmap_get(p);
  if (m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL) {
    if (atomic_load_explicit(&hz_profile_huge_live, memory_order_relaxed)) hz_profile_huge_free(p);
    hz_huge_free(p, fn);
  }
#if HZ_CHECKED
  else if (m == HZ_MAP_ZERO) hz_zero_free(p, fn);
#endif
  else hz_check_span_ptr(p, fn); /* reports */
  hz_purge_poll_tls_free();
}

static hz_noinline void free_remote_slow(hz_heap_t *h, hz_span_t *s, hz_block_t *b, const char *fn) {
  if (s->kind == HZ_SPAN_FREE || s->heap == NULL) {
    hz_check_span_ptr(b, fn);
    return;
  }
#if HZ_CHECKED
  if (s->kind == HZ_SPAN_SMALL) {
    hz_checked_on_free(s, b, fn);
    if (h != &hz_heap_empty && h->live) {
      hz_quarantine_put(h, b);
      return;
    }
  }
#endif
  if (s->sample) hz_profile_free(s);
  hz_init(); /* a thread that only frees gets a heap (after a fork, start-up may rerun) */
  if (s->kind == HZ_SPAN_LARGE && hz_heap_free_large_remote(h, s, b)) return;
  hz_remote_free(h, s, b);
}

static hz_noinline void free_remote_stashed(hz_heap_t *h, hz_span_t *s, hz_block_t *b, const char *fn) {
  if (hz_stash_adopt(h, s, b)) return;
  if (!hz_remote_put(h, s, b)) free_remote_slow(h, s, b, fn);
}

/* A block of a class below the stashes (most remote frees) goes on with no
 * call but a tail call, so with no register saved: asking hz_stash_adopt
 * first cost 30 of a 64-byte block's 125 instructions (xmalloc-test;
 * docs/perf.md §93). The checked build has no stashes: its remote frees
 * wait in its quarantine first. */
static hz_noinline void free_remote(hz_heap_t *h, hz_span_t *s, hz_block_t *b, const char *fn) {
  if (hz_class_stashed(s->cls)) free_remote_stashed(h, s, b, fn);
  else if (HZ_CHECKED || !hz_remote_put(h, s, b)) free_remote_slow(h, s, b, fn);
}


/* p is in a segment of spans (the segment map said so), s its span. */
static hz_always_inline void dealloc_in(void *p, hz_span_t *s, const char *fn) {
  uintptr_t a = (uintptr_t)p;
  hz_block_t *b = p;
  if (!HZ_NOCHECK && hz_unlikely(hz_span_refuses(s, a) || hz_block_is_free(s, b))) {
    hz_check_span_ptr(p, fn);
    return;
  }
  hz_heap_t *h = hz_tls_heap;
  if (hz_likely(s->heap == h)) {
#if HZ_CHECKED
    if (s->kind == HZ_SPAN_SMALL) {
      hz_checked_on_free(s, b, fn);
      hz_quarantine_put(h, b);
      return;
    }
#endif
    if (!HZ_NOCHECK) b->tag = hz_block_tag(s, b);
    hz_span_t *t = hz_span_push_to(s); /* s, the stash of s's class (stash.c) or the trap */
    if (hz_unlikely(hz_span_push(t, b))) {
      if (t->kind != HZ_SPAN_LARGE) {
        hz_heap_free_small_slow(h, t);
        return;
      }
      hz_heap_free_large(h, s);
    }
    return;
  }
  free_remote(h, s, b, fn);
}

static inline bool in_spans(uintptr_t a) {
  return (a >> HZ_SEG_SHIFT) < HZ_SEGMAP_LEN && hz_segmap_at(a >> HZ_SEG_SHIFT) == HZ_MAP_SPANS;
}

static hz_always_inline void dealloc(void *p, const char *fn) {
  uintptr_t a = (uintptr_t)p, i = a >> HZ_SEG_SHIFT;
  if (hz_unlikely(i >= HZ_SEGMAP_LEN || hz_segmap_at(i) != HZ_MAP_SPANS)) {
    free_rare(p, fn);
    return;
  }
  /* The segment from the map's index: one shift where the compiler would
   * copy and mask the pointer (the empty asm keeps it from doing so). */
  __asm__("" : "+r"(i));
  hz_segment_t *seg = (hz_segment_t *)(i << HZ_SEG_SHIFT);
  dealloc_in(p, seg->slice_span[(a >> HZ_SLICE_SHIFT) & (HZ_SLICES - 1)], fn);
}

/* Usable bytes of a live block of s (the checked build: a small block's
 * request, verifying the bytes after it). */
static inline size_t span_usable(const hz_span_t *s, const void *p, const char *fn) {
  if (s->kind != HZ_SPAN_SMALL) return s->block_size - HZ_LARGE_GUARD;
#if HZ_CHECKED
  return hz_checked_request(p, s->block_size, fn);
#else
  (void)p, (void)fn;
  return s->block_size - HZ_CANARY_SIZE;
#endif
}

/* Usable bytes of a block, after checking the pointer is a live block. */
static hz_noinline size_t usable_rare(const void *p, const char *fn) {
  if (p == NULL) return 0;
  uint8_t m = hz_segmap_get(p);
  if (m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL) return hz_huge_usable(p, fn);
#if HZ_CHECKED
  if (m == HZ_MAP_ZERO) { /* a 0-byte block has no usable byte */
    hz_zero_valid(p, fn);
    return 0;
  }
#endif
  hz_span_t *s = hz_check_span_ptr(p, fn); /* reports a bad pointer */
  return s ? span_usable(s, p, fn) : 0;
}

/* Free's tests inline: ruby (and others that account for their memory)
 * call malloc_usable_size on every malloc and free. */
static inline size_t usable(const void *p, const char *fn) {
  uintptr_t a = (uintptr_t)p;
  if (hz_likely(in_spans(a))) {
    hz_span_t *s = hz_span_of(p);
    if (hz_likely(!hz_span_refuses(s, a) && (HZ_NOCHECK || !hz_block_is_free(s, p)))) return span_usable(s, p, fn);
  }
  return usable_rare(p, fn);
}

/* ---- the hz_ API ---- */
HZ_EXPORT void *hz_malloc(size_t n) { return alloc(n); }
HZ_EXPORT void hz_free(void *p) { dealloc(p, "free"); }

HZ_EXPORT void *hz_calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  if (n > HZ_SMALL_MAX - HZ_CANARY_SIZE) return alloc_big(n, 0, true);
  void *p = alloc(n);
  if (p != NULL) memset(p, 0, n);
  return p;
}

HZ_EXPORT void *hz_realloc(void *p, size_t n) {
  if (p == NULL) return alloc(n);
#if HZ_CHECKED
  if (hz_segmap_get(p) == HZ_MAP_ZERO) {
    if (!hz_zero_valid(p, "realloc")) {
      errno = EINVAL;
      return NULL;
    }
    void *q = n ? alloc(n) : NULL;
    if (q != NULL || n == 0) hz_zero_free(p, "realloc");
    return q;
  }
#endif
  size_t old = usable(p, "realloc");
  if (old == 0) { /* misuse reported and tolerated (HAKOZUNA_CHECK=0) */
    errno = EINVAL;
    return NULL;
  }
  if (n == 0) { /* glibc: frees and returns NULL */
    dealloc(p, "realloc");
    return NULL;
  }
  /* Large and huge blocks resize in place when they can: their usable size
   * follows the request (what programs count as their memory, e.g. redis's
   * used_memory from malloc_usable_size), and a huge block's freed tail goes
   * back to the OS. */
  bool big = old > HZ_SMALL_MAX - HZ_CANARY_SIZE, shrinks = n <= old && n >= old / 2;
  if (big && (n > old || old - n >= hz_os_page_size) && (shrinks || n > old)) {
    uint8_t m = hz_segmap_get(p);
    if (m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL ? hz_huge_resize(p, n, "realloc")
        : n > HZ_SMALL_MAX - HZ_CANARY_SIZE && n + HZ_LARGE_GUARD <= HZ_LARGE_MAX && hz_large_resize(p, n))
      return p;
  }
#if HZ_CHECKED
  /* a small block keeps its place while it fits, its usable size following
   * (one in spans: a small request aligned to 4 MiB or more is a huge block,
   * at a segment's start, whose bytes hz_span_of would read as a header) */
  hz_span_t *s = big || !in_spans((uintptr_t)p) ? NULL : hz_span_of(p);
  if (s != NULL && s->kind == HZ_SPAN_SMALL && (shrinks || n > old) && n <= s->block_size - HZ_CANARY_SIZE) {
    hz_checked_stamp(p, s->block_size, n);
    return p;
  }
#endif
  if (shrinks) return p;
  if (big && n > old && !atomic_load_explicit(&hz_profile_huge_live, memory_order_relaxed)) {
    uint8_t m = hz_segmap_get(p); /* a huge block moves its pages, not its bytes */
    void *q = m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL ? hz_huge_realloc(p, n) : NULL;
    if (q != NULL) return q;
  }
  /* A block that grows is likely to grow again (strings, vectors): move it
   * to a block with a quarter more room, so the next appends stay in place.
   * Only where that is cheap: below the huge sizes, which are mapped. */
  void *q = NULL;
  if (n > old && n < HZ_LARGE_MAX / 2 && n < old + old / 4) q = alloc(old + old / 4);
  if (q == NULL && (q = alloc(n)) == NULL) return NULL; /* the old block stays valid */
  memcpy(q, p, n < old ? n : old);
  dealloc(p, "realloc");
  return q;
}

HZ_EXPORT void *hz_reallocarray(void *p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return hz_realloc(p, n);
}

/* A small block whose class is the one of n bytes: free's tests are all
 * that is left to do (sized frees, the commonest case). The class as
 * malloc finds it: C++ calls this on every delete of an object. */
static inline bool dealloc_sized_small(void *p, size_t n, const char *fn) {
  uint32_t c;
  if (hz_likely(n <= HZ_SMALL_MAX - HZ_CANARY_SIZE)) c = hz_class_of(n + HZ_CANARY_SIZE);
  else return false;
  if (hz_unlikely(!in_spans((uintptr_t)p))) return false;
  hz_span_t *s = hz_span_of(p);
  if (hz_unlikely(s->cls != c)) return false;
  dealloc_in(p, s, fn);
  return true;
}

/* C23's sized frees. The size must be the one the block was asked with,
 * or last realloc'ed to, which may have kept a larger block: what is
 * checked is that the block holds it. */
static hz_noinline void free_sized_rest(void *p, size_t size, const char *fn) {
  if (p != NULL && size > usable(p, fn))
    hz_fatal("%s(): size %zu is larger than the block %p (%zu bytes)", fn, size, p, usable(p, fn));
  dealloc(p, fn);
}

HZ_EXPORT void hz_free_sized(void *p, size_t size) {
  if (dealloc_sized_small(p, size, "free_sized")) return;
  free_sized_rest(p, size, "free_sized");
}

static bool is_pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

/* (a block from aligned_alloc: aligned as it says, and holding the size) */
HZ_EXPORT void hz_free_aligned_sized(void *p, size_t align, size_t size) {
  if (p != NULL && !is_pow2(align))
    hz_fatal("free_aligned_sized(): alignment %zu is not a power of two (block %p)", align, p);
  if (((uintptr_t)p & (align - 1)) != 0)
    hz_fatal("free_aligned_sized(): block %p is not aligned to %zu bytes", p, align);
  if (align <= 16 && dealloc_sized_small(p, size, "free_aligned_sized")) return;
  free_sized_rest(p, size, "free_aligned_sized");
}

/* C++ sized delete: the size must be the one operator new was given, so it
 * must lead to the block's class (small), page count (large), or to a huge
 * block at least that big. Only the sized forms pay for the check; this is
 * the rest of it, after dealloc_sized's inline test for small blocks. */
hz_noinline void hz_free_sized_new(void *p, size_t n, size_t align, const char *fn) {
  if (p == NULL) return;
  uint8_t m = hz_segmap_get(p);
  size_t have = usable(p, fn), want; /* reports a bad pointer */
  if (have == 0 && m != HZ_MAP_ZERO) return;
  uint32_t c = small_class(n, align);
  if (m == HZ_MAP_SPANS && hz_span_of(p)->sample != NULL)
    want = n <= have ? have : SIZE_MAX; /* sampled by the profiler: any size it can hold */
  else if (m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL)
    want = goes_huge(n, align) ? n : SIZE_MAX;
  else if (m == HZ_MAP_ZERO)
    want = n == 0 ? 0 : SIZE_MAX;
  else if (hz_span_of(p)->kind == HZ_SPAN_SMALL) { /* (the class decides: the checked build's usable size is the request) */
    have = hz_span_of(p)->block_size; /* (or a class above, lent: hz_stash_borrow) */
    want = c < HZ_NCLASS && hz_stash_lent(c, hz_span_of(p)->cls) ? have : SIZE_MAX;
  }
  else
    want = c >= HZ_NCLASS && !goes_huge(n, align) ? hz_large_block_size(n ? n : 1) - HZ_LARGE_GUARD : SIZE_MAX;
  bool huge = m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL;
  if (huge ? want > have : want != have) {
    hz_misuse_size(p, n, have, fn);
    return;
  }
  dealloc(p, fn);
}

static inline void dealloc_sized(void *p, size_t n, size_t align, const char *fn) {
  if (hz_likely(align == 0 && dealloc_sized_small(p, n, fn))) return;
  hz_free_sized_new(p, n, align, fn);
}

HZ_EXPORT void *hz_aligned_alloc(size_t align, size_t n) {
  if (!is_pow2(align)) {
    errno = EINVAL;
    return NULL;
  }
  return alloc_aligned(align, n);
}

/* glibc's memalign takes any alignment up to SIZE_MAX / 2 + 1 and rounds it
 * up to a power of two (0 and 1 mean none); programs written against it
 * pass sizes such as 24. (aligned_alloc refuses them, as glibc 2.38 does.) */
HZ_EXPORT void *hz_memalign(size_t align, size_t n) {
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (align == 0) align = 1;
  if (!is_pow2(align)) align = (size_t)1 << (64 - __builtin_clzll((unsigned long long)align));
  return alloc_aligned(align, n);
}

HZ_EXPORT int hz_posix_memalign(void **out, size_t align, size_t n) {
  if (!is_pow2(align) || align < sizeof(void *)) return EINVAL;
  void *p = alloc_aligned(align, n); /* sets errno to ENOMEM on failure, as glibc does */
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

/* The page size is known once hz_init has run. */
static size_t page_size(void) {
  hz_init();
  return hz_os_page_size;
}

HZ_EXPORT void *hz_valloc(size_t n) { return alloc_aligned(page_size(), n); }

HZ_EXPORT void *hz_pvalloc(size_t n) {
  size_t ps = page_size();
  if (n > HZ_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  n = n ? (n + ps - 1) & ~(ps - 1) : ps;
  return alloc_aligned(ps, n);
}

HZ_EXPORT size_t hz_usable_size(const void *p) { return usable(p, "malloc_usable_size"); }

HZ_EXPORT size_t hz_good_size(size_t n) {
  if (HZ_CHECKED && n == 0) return 0; /* an inaccessible 0-byte block */
  if (n <= HZ_SMALL_MAX - HZ_CANARY_SIZE) /* (checked: exactly the request, the rest watched) */
    return HZ_CHECKED ? n : hz_class_size(hz_class_of(n + HZ_CANARY_SIZE)) - HZ_CANARY_SIZE;
  if (n > HZ_MAX_REQUEST) return n;
  page_size(); /* the large and huge sizes need the page size */
  if (!goes_huge(n, 0)) return hz_large_block_size(n) - HZ_LARGE_GUARD;
  size_t ps = hz_os_page_size;
  return ((n + 64 + hz_huge_guard() + ps - 1) & ~(ps - 1)) - 64 - hz_huge_guard();
}

/* Windows overrides less, and differently: override_windows.c. */
#if HZ_OVERRIDE && !defined(_WIN32)
/* ---- glibc extras that read our own counters ---- */
static int hz_trim(size_t pad) {
  (void)pad;
  uint64_t before = atomic_load_explicit(&hz_os_stats.bytes_returned, memory_order_relaxed);
  hz_purge_trim();
  return atomic_load_explicit(&hz_os_stats.bytes_returned, memory_order_relaxed) > before;
}

/* mallinfo and glibc's __libc_* names exist on glibc only: musl has no
 * struct mallinfo (so no program built against it calls mallinfo), and its
 * __libc_malloc and kin are names hidden inside libc, with which it keeps
 * its own allocations (the loader's, atexit's, locales') on its own malloc
 * once malloc is replaced; defined here, they would take those over in a
 * static link. */
#ifdef __GLIBC__
static struct mallinfo2 hz_mallinfo2(void) {
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  hz_stats_t *st = hz_stats_new();
  if (st == NULL) return mi;
  /* As glibc's: arena and uordblks leave out the mapped (huge) blocks,
   * which hblkhd counts; programs add uordblks and hblkhd. */
  mi.arena = st->bytes_committed > st->huge_live_bytes ? st->bytes_committed - st->huge_live_bytes : 0;
  mi.hblks = st->huge_allocs - st->huge_frees;
  mi.hblkhd = st->huge_live_bytes;
  mi.uordblks = st->bytes_in_use > st->huge_live_bytes ? st->bytes_in_use - st->huge_live_bytes : 0;
  mi.fordblks = mi.arena > mi.uordblks ? mi.arena - mi.uordblks : 0;
  mi.usmblks = st->peak_rss;
  hz_stats_delete(st);
  return mi;
}

static struct mallinfo hz_mallinfo(void) {
  struct mallinfo2 m2 = hz_mallinfo2();
  struct mallinfo mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = (int)m2.arena;
  mi.hblks = (int)m2.hblks;
  mi.hblkhd = (int)m2.hblkhd;
  mi.uordblks = (int)m2.uordblks;
  mi.fordblks = (int)m2.fordblks;
  mi.usmblks = (int)m2.usmblks;
  return mi;
}
#endif

/* hakozuna's report, then glibc's totals in glibc's words, for the scripts
 * that read them (and glibc's tst-malloc-stats-cancellation). Not a
 * cancellation point (glibc's is not), though it writes to stderr. */
static void hz_malloc_stats(void) {
  int old = hz_os_nocancel_begin();
  hz_stats_print(NULL);
  hz_stats_t *st = hz_stats_new();
  if (st != NULL) {
    uint64_t count, bytes;
    hz_huge_peaks(&count, &bytes);
    char line[256];
    int n = snprintf(line, sizeof line,
                     "Total (incl. mmap):\nsystem bytes     = %10llu\nin use bytes     = %10llu\n"
                     "max mmap regions = %10llu\nmax mmap bytes   = %10llu\n",
                     (unsigned long long)st->bytes_committed, (unsigned long long)st->bytes_in_use,
                     (unsigned long long)count, (unsigned long long)bytes);
    hz_stats_delete(st);
    if (n > 0) hz_output_text(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  }
  hz_os_nocancel_end(old);
}
/* glibc's tunables, mapped onto the option table where they mean something
 * here (README, "mallopt"). The others are accepted and change nothing: 1,
 * as glibc returns for every parameter it knows and any it does not, but
 * for a fast-bin size out of its range. Programs check it (glibc's own
 * tests of fork and thread exit stop when mallopt(M_ARENA_MAX) returns 0). */
static int hz_mallopt(int param, int value) {
  hz_init();
  switch (param) {
#ifdef M_MMAP_THRESHOLD /* glibc's values; other libcs may lack them */
  case M_MMAP_THRESHOLD: /* clamped: spans hold up to 2 MiB, small blocks never map */
    if (value < 0) return 0;
    /* Lowered, glibc gives each mapped block back at its free: a program
     * that asks for that (stress-ng --malloc-thresh) kept up to the huge
     * cache's 256 MiB resident, 4.5x glibc's peak. */
    if (value < (long)HZ_LARGE_MAX && hz_option_set(HZ_OPTION_HUGE_CACHE, 0) != 0) return 0;
    return hz_option_set(HZ_OPTION_MMAP_THRESHOLD, value < HZ_SMALL_MAX ? HZ_SMALL_MAX
                                                   : value > (long)HZ_LARGE_MAX ? (long)HZ_LARGE_MAX : value) == 0;
  case M_TRIM_THRESHOLD: { /* free memory kept before it goes back to the OS */
    if (value < 0) return hz_option_set(HZ_OPTION_PURGE_DELAY, -1) == 0;
    if (value == 0) return hz_option_set(HZ_OPTION_PURGE_DELAY, 0) == 0;
    long kib = ((long)value + 1023) / 1024;
    return hz_option_set(HZ_OPTION_THREAD_CACHE, kib < 1048576 ? kib : 1048576) == 0;
  }
  case M_CHECK_ACTION: /* bit 1: abort on a detected misuse */
    return hz_option_set(HZ_OPTION_CHECK, (value & 2) != 0) == 0;
  case M_MXFAST: /* glibc's range check, no such knob */
    return value >= 0 && value <= 80 * (int)sizeof(size_t) / 4;
#endif
  default: /* M_TOP_PAD, M_MMAP_MAX, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX, unknown: no such knob */
    return 1;
  }
}

static int hz_malloc_info(int options, FILE *out) {
  if (options != 0 || out == NULL) {
    errno = EINVAL;
    return -1;
  }
  hz_stats_malloc_info(out);
  return 0;
}

/* ---- overriding the C API ---- */
/* glibc's declarations of these carry fewer attributes than ours; harmless
 * (gcc warns about it; clang has no such warning group). */
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
#define HZ_ALIAS(target) __attribute__((alias(#target), visibility("default")))
void *malloc(size_t n) HZ_ALIAS(hz_malloc);
void free(void *p) HZ_ALIAS(hz_free);
void *calloc(size_t count, size_t size) HZ_ALIAS(hz_calloc);
void *realloc(void *p, size_t n) HZ_ALIAS(hz_realloc);
void *reallocarray(void *p, size_t count, size_t size) HZ_ALIAS(hz_reallocarray);
void free_sized(void *p, size_t size) HZ_ALIAS(hz_free_sized);
void free_aligned_sized(void *p, size_t align, size_t size) HZ_ALIAS(hz_free_aligned_sized);
void *aligned_alloc(size_t align, size_t n) HZ_ALIAS(hz_aligned_alloc);
void *memalign(size_t align, size_t n) HZ_ALIAS(hz_memalign);
int posix_memalign(void **out, size_t align, size_t n) HZ_ALIAS(hz_posix_memalign);
void *valloc(size_t n) HZ_ALIAS(hz_valloc);
void *pvalloc(size_t n) HZ_ALIAS(hz_pvalloc);
size_t malloc_usable_size(void *p) HZ_ALIAS(hz_usable_size);
/* (malloc_trim, malloc_stats, mallopt and malloc_info are glibc's too, but
 * need none of its types: musl's programs may declare and call them.) */
int malloc_trim(size_t pad) HZ_ALIAS(hz_trim);
void malloc_stats(void) HZ_ALIAS(hz_malloc_stats);
int mallopt(int param, int value) HZ_ALIAS(hz_mallopt);
int malloc_info(int options, FILE *out) HZ_ALIAS(hz_malloc_info);
#ifdef __GLIBC__
void *__libc_malloc(size_t n) HZ_ALIAS(hz_malloc);
void __libc_free(void *p) HZ_ALIAS(hz_free);
void *__libc_calloc(size_t count, size_t size) HZ_ALIAS(hz_calloc);
void *__libc_realloc(void *p, size_t n) HZ_ALIAS(hz_realloc);
void *__libc_memalign(size_t align, size_t n) HZ_ALIAS(hz_memalign);
void *__libc_valloc(size_t n) HZ_ALIAS(hz_valloc);
void *__libc_pvalloc(size_t n) HZ_ALIAS(hz_pvalloc);
int __posix_memalign(void **out, size_t align, size_t n) HZ_ALIAS(hz_posix_memalign);
struct mallinfo2 mallinfo2(void) HZ_ALIAS(hz_mallinfo2);
struct mallinfo mallinfo(void) HZ_ALIAS(hz_mallinfo);
struct mallinfo __libc_mallinfo(void) HZ_ALIAS(hz_mallinfo);
int __libc_mallopt(int param, int value) HZ_ALIAS(hz_mallopt);
#endif
/* mlockall makes every page of a writable mapping resident: the arena's
 * address space reserved ahead is given back first (arena.c). */
static int hz_mlockall(int flags) {
  hz_arena_close_reserve();
  return hz_os_mlockall(flags);
}
int mlockall(int flags) HZ_ALIAS(hz_mlockall);
#endif

/* C++ operator new and delete inline the fast paths above: compiled as
 * part of this file (on its own, override_cxx.c is empty). */
#define HZ_ALLOC_C 1
#include "override_cxx.c"
