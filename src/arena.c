// SPDX-License-Identifier: MIT
/* Segments, the segment map and the span pools.
 *
 * Address space comes from the OS in regions (HAKOZUNA_ARENA_RESERVE MiB),
 * cut into 4 MiB segments. Each segment tracks its 128 slices in two bitmaps:
 * free (in the pool) and dirty (free but possibly still backed by memory).
 * Spans are runs of slices; bitmaps make coalescing free runs automatic and
 * finding a run a few word operations.
 *
 * There are several pools ("arenas", one per CPU up to 16), each with its own
 * lock, segments and regions; a threaded program's heap takes spans from the
 * arena of the CPU it runs on (hz_arena_here), and a span goes back to the
 * arena of its segment. So threads running at once rarely contend on a pool.
 *
 * Dirty slices are returned with madvise once they have been free for
 * HAKOZUNA_PURGE_DELAY ms: from the allocating threads when they return spans,
 * from the purge thread while the program idles (purge.c, which this file
 * only tells, through hz_purge_pending, that memory waits), and at once on
 * malloc_trim / hz_collect. */
#define _GNU_SOURCE
#include "internal.h"

#include <string.h>

uint8_t hz_segmap[HZ_SEGMAP_LEN];

/* The segment map is 32 MiB of which a process writes a page or two (one
 * covers 16 GiB of address space). Under mlockall every page of a writable
 * mapping becomes resident, the map's too: 32 MiB for nothing. So start-up
 * makes its whole pages read-only -- read, they all show the one zero page
 * --, and a page is opened before its first write. */
static uintptr_t segmap_lo, segmap_hi; /* the read-only part; empty if none */
static _Atomic uint64_t segmap_opened[HZ_SEGMAP_LEN / 4096 / 64];

static void segmap_protect(void) {
  static bool done; /* (once: a fork's child keeps the map and what is open) */
  if (done) return;
  done = true;
  size_t ps = hz_os_page_size;
  uintptr_t lo = ((uintptr_t)hz_segmap + ps - 1) & ~(ps - 1), hi = ((uintptr_t)hz_segmap + HZ_SEGMAP_LEN) & ~(ps - 1);
  if (lo < hi && hz_os_readonly((void *)lo, hi - lo, true) == 0) segmap_lo = lo, segmap_hi = hi;
}

/* Written under different locks (arena, huge); a page is opened under a lock
 * of its own, as opening may map it again (os.c). */
static hz_lock_t segmap_lock = HZ_LOCK_INIT;
void hz_segmap_set(uintptr_t i, uint8_t v) {
  uintptr_t a = (uintptr_t)&hz_segmap[i];
  if (a >= segmap_lo && a < segmap_hi) {
    size_t ps = hz_os_page_size, page = (a - segmap_lo) / ps;
    _Atomic uint64_t *w = &segmap_opened[page / 64];
    uint64_t bit = (uint64_t)1 << (page % 64);
    if (!(atomic_load_explicit(w, memory_order_acquire) & bit)) {
      hz_lock(&segmap_lock);
      if (!(atomic_load_explicit(w, memory_order_relaxed) & bit)) {
        if (hz_os_readonly((void *)(a & ~(ps - 1)), ps, false) != 0)
          hz_fatal("cannot make a page of the segment map writable (mprotect and mmap failed)");
        atomic_fetch_or_explicit(w, bit, memory_order_release);
      }
      hz_unlock(&segmap_lock);
    }
  }
  __atomic_store_n(&hz_segmap[i], v, __ATOMIC_RELAXED);
}

typedef unsigned __int128 hz_mask_t; /* one bit per slice */

typedef struct __attribute__((aligned(64))) hz_arena_s {
  hz_lock_t lock;
  hz_segment_t *segments;     /* newest first */
  hz_segment_t *hint;         /* where the last search succeeded */
  uintptr_t region_next, region_end;
  bool region_closed;         /* reserved inaccessible: segments are opened one by one */
  uint64_t segment_count, reserved_bytes;
  uint32_t regions;           /* reserved so far (single-threaded, each is twice the last) */
  uint64_t free_clean_slices; /* free slices known not to be backed */
  uint64_t dirty_slices;
  uint64_t last_purge_ms;
  uint64_t last_aged_ms;      /* its last aging look (purge_locked) */
  /* The budget of freed memory its frees let wait while no purge thread
   * runs (0: HZ_PURGE_BUDGET); when they last purged for it (0: not since
   * it last grew) and how much since; when it was last set, and the most
   * that waited since (bytes): arena_regrow, budget_look. */
  uint64_t budget, budget_purged_ms, budget_purged, budget_set_ms, budget_peak;
  hz_segment_t *spare_seg; /* under an address-space limit, the one empty segment kept */
  /* In a forked child: a lost thread held the lock, the arena may be torn.
   * Never used again there; spans of it that are freed are leaked. */
  bool lost;
} hz_arena_t;

#define HZ_ARENAS_MAX 16
static hz_arena_t hz_arenas[HZ_ARENAS_MAX] = {[0 ... HZ_ARENAS_MAX - 1] = {.lock = HZ_LOCK_INIT}};
static uint32_t hz_arena_count = 1;
_Atomic int hz_purge_pending;
_Atomic int hz_purge_running;

/* Regions are reserved writable: pages cost nothing until touched, and a
 * new segment needs no call. Opening segments one at a time (mprotect)
 * changed the mapping that every thread's page faults were in, which then
 * waited on the process's mmap lock: thread_flood, 1,000 threads on 16
 * cores, ran 3x slower at 4x the peak RSS (docs/perf.md section 49). They
 * are reserved closed where writable address space costs: under
 * vm.overcommit_memory=2, which charges a writable mapping whole, and once
 * the program called mlockall, which makes every page of one resident
 * (110 MB against glibc's 11 for a few blocks). */
#ifdef _WIN32
static _Atomic bool arena_reserve_closed = true; /* (Windows commits what it uses) */
#else
static _Atomic bool arena_reserve_closed;
#endif

void hz_arena_init(void) {
  unsigned cpus = hz_os_cpu_count();
  hz_arena_count = cpus > HZ_ARENAS_MAX ? HZ_ARENAS_MAX : cpus;
  segmap_protect();
  if (hz_os_overcommit_strict()) atomic_store_explicit(&arena_reserve_closed, true, memory_order_relaxed);
}

/* mlockall (override in alloc.c) would make the unused rest of every
 * region resident: it goes back to the OS first, and regions reserved after
 * are closed. (Set before the locks are taken: a region reserved meanwhile
 * is seen under its arena's lock.) */
void hz_arena_close_reserve(void) {
  atomic_store_explicit(&arena_reserve_closed, true, memory_order_seq_cst);
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++) {
    hz_arena_t *a = &hz_arenas[i];
    if (a->lost) continue; /* (its lock may be held for good: a forked child) */
    hz_lock(&a->lock);
    if (!a->region_closed && a->region_end > a->region_next) {
      hz_os_unmap((void *)a->region_next, a->region_end - a->region_next);
      a->reserved_bytes -= a->region_end - a->region_next;
      a->region_end = a->region_next;
    }
    hz_unlock(&a->lock);
  }
}

/* Written under the arena's lock; read without it by other arenas' threads
 * looking for freed memory (arena_steal_dirty). */
static inline void dirty_add(hz_arena_t *a, int64_t n) {
  __atomic_store_n(&a->dirty_slices, a->dirty_slices + (uint64_t)n, __ATOMIC_RELAXED);
}

uint32_t hz_arena_pick(uint32_t heap_index) { return heap_index % hz_arena_count; }

/* A threaded program's spans come from the arena of the CPU the thread runs
 * on, not from one fixed per thread: threads running at once then rarely
 * share a lock, and a thread that holds one is rarely preempted by another
 * that wants it. With an arena per thread, 1,000 threads on 2 cores (500 to
 * a lock) queued behind preempted holders, and ran 3.5x slower at 7x the
 * peak RSS (thread_flood, docs/perf.md section 65). A single-threaded
 * program keeps its one arena wherever it runs, and so its few segments. */
uint32_t hz_arena_here(uint32_t fallback) {
  if (hz_arena_count == 1 || hz_thread_single()) return fallback;
  int cpu = hz_os_current_cpu();
  return cpu >= 0 ? (uint32_t)cpu % hz_arena_count : fallback;
}

/* ---- bitmaps ---- */
static inline hz_mask_t mask_get(const uint64_t *m) { return (hz_mask_t)m[0] | (hz_mask_t)m[1] << 64; }
static inline void mask_put(uint64_t *m, hz_mask_t v) {
  m[0] = (uint64_t)v;
  m[1] = (uint64_t)(v >> 64);
}
static inline hz_mask_t mask_run(size_t i, size_t n) {
  hz_mask_t ones = n >= 128 ? ~(hz_mask_t)0 : (((hz_mask_t)1 << n) - 1);
  return ones << i;
}
static inline size_t mask_ctz(hz_mask_t v) {
  uint64_t lo = (uint64_t)v;
  return lo ? (size_t)__builtin_ctzll(lo) : 64 + (size_t)__builtin_ctzll((uint64_t)(v >> 64));
}
/* (by hand: x86-64's baseline has no popcnt, and the compiler's call went
 * to libgcc's, linked after the cold code: docs/perf.md §57) */
static inline size_t popcount64(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555u;
  x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
  return (size_t)((x * 0x0101010101010101u) >> 56);
}
static inline size_t mask_popcount(hz_mask_t v) {
  return popcount64((uint64_t)v) + popcount64((uint64_t)(v >> 64));
}

/* Bits set where a run of n free slices starts: AND the mask with itself
 * shifted, doubling the covered length each step. */
static hz_mask_t run_starts(hz_mask_t free, size_t n) {
  hz_mask_t x = free;
  for (size_t have = 1; have < n;) {
    size_t step = have < n - have ? have : n - have;
    x &= x >> step;
    have += step;
  }
  return x;
}

/* Start of the first run of n free slices at a multiple of align, only among
 * dirty ones when asked; 0 if none (slice 0 is the header, never free). */
static size_t segment_find_run(const hz_segment_t *seg, size_t n, size_t align, bool dirty_only) {
  hz_mask_t m = mask_get(seg->free_mask);
  if (dirty_only) m &= mask_get(seg->dirty_mask);
  if (!m) return 0;
  hz_mask_t x = run_starts(m, n);
  if (align > 1) {
    hz_mask_t aligned = 0;
    for (size_t i = align; i < HZ_SLICES; i += align) aligned |= (hz_mask_t)1 << i;
    x &= aligned;
  }
  return x ? mask_ctz(x) : 0;
}

/* Address space is short: RLIMIT_AS was set at start-up, or a region could
 * not be reserved since (a limit the program set itself, the mapping count):
 * regions are one segment, and emptied segments go back at once. The limit
 * is not read again: a sandbox may forbid the call (os.c). */
static _Atomic bool arena_as_short;
static bool arena_as_limited(void) {
  return hz_os_address_space_limited() || atomic_load_explicit(&arena_as_short, memory_order_relaxed);
}

static hz_segment_t *segment_new(hz_arena_t *a, uint32_t arena_index) {
  if (a->region_next == a->region_end) {
    /* While the program has one thread, regions start at one segment and
     * double, so that a small program takes little address space; under
     * `ulimit -v` (RLIMIT_AS), where address space is what runs out, they
     * stay one segment. A threaded program reserves the whole ARENA_RESERVE
     * at once, as it did before the doubling: each region is an mmap (and
     * an madvise) under the arena's lock, and with the doubling a flood of
     * 1,000 threads on 16 cores, each arena growing 4, 8, 16, 32 MiB while
     * the threads start, ran 2.7x slower at 4x the peak RSS (docs/perf.md
     * section 64). */
    size_t want = (size_t)hz_opt(HZ_OPTION_ARENA_RESERVE) << 20;
    size_t grown = HZ_SEG_SIZE << (a->regions < 16 ? a->regions : 16);
    if (arena_as_limited()) want = HZ_SEG_SIZE;
    else if (hz_thread_single() && grown < want) want = grown;
    want = (want + HZ_SEG_MASK) & ~HZ_SEG_MASK;
    bool closed = atomic_load_explicit(&arena_reserve_closed, memory_order_seq_cst);
    void *r = hz_os_reserve(want, HZ_SEG_SIZE, closed);
    if (r == NULL) atomic_store_explicit(&arena_as_short, true, memory_order_relaxed);
    if (r == NULL && want > HZ_SEG_SIZE) r = hz_os_reserve(want = HZ_SEG_SIZE, HZ_SEG_SIZE, closed);
    if (r == NULL) return NULL;
    a->region_closed = closed;
    a->region_next = (uintptr_t)r;
    a->region_end = a->region_next + want;
    a->reserved_bytes += want;
    a->regions++;
  }
  hz_segment_t *seg = (hz_segment_t *)a->region_next;
  if (a->region_closed && !hz_os_commit(seg, HZ_SEG_SIZE)) return NULL;
  a->region_next += HZ_SEG_SIZE;
  /* Fresh OS memory is zero: descriptors start as free spans (kind 0). */
  for (size_t i = 0; i < HZ_SLICES; i++) seg->slice_span[i] = hz_seg_span(seg, i);
  mask_put(seg->free_mask, mask_run(1, HZ_SLICES - 1));
  seg->free_slices = HZ_SLICES - 1;
  seg->arena = arena_index;
  seg->next = a->segments;
  a->segments = seg;
  a->segment_count++;
  a->free_clean_slices += HZ_SLICES - 1;
  hz_stats_commit((int64_t)HZ_SLICE_SIZE); /* the header */
  hz_segmap_set((uintptr_t)seg >> HZ_SEG_SHIFT, HZ_MAP_SPANS);
  return seg;
}

/* Out of address space (RLIMIT_AS, overcommit_memory=2): segments whose
 * slices are all in the pool go back to the OS whole, and so does the unused
 * rest of each arena's region; true if anything was unmapped. Only then:
 * otherwise a segment emptied stays for the next spans, its pages purged.
 * No span of such a segment is anyone's (a heap's spare and cached spans are
 * out of the pool), so only a bad pointer can still lead into it, and the
 * segment map then says it is not ours. Called with no allocator lock held.
 * (Windows releases a reservation only whole: nothing there.) */
#ifndef _WIN32
/* (the lock held; *link is the segment's link in a->segments) */
static void segment_unmap(hz_arena_t *a, hz_segment_t **link) {
  hz_segment_t *seg = *link;
  *link = seg->next;
  size_t dirty = mask_popcount(mask_get(seg->dirty_mask));
  dirty_add(a, -(int64_t)dirty);
  a->free_clean_slices -= HZ_SLICES - 1 - dirty;
  a->segment_count--;
  a->reserved_bytes -= HZ_SEG_SIZE;
  if (a->hint == seg) a->hint = NULL;
  if (a->spare_seg == seg) a->spare_seg = NULL;
  hz_stats_commit(-(int64_t)((dirty + 1) * HZ_SLICE_SIZE)); /* and the header */
  hz_segmap_set((uintptr_t)seg >> HZ_SEG_SHIFT, HZ_MAP_NONE);
  hz_os_unmap(seg, HZ_SEG_SIZE);
}
#endif

bool hz_arena_release(void) {
#ifdef _WIN32
  return false;
#else
  bool any = false;
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++) {
    hz_arena_t *a = &hz_arenas[i];
    if (a->lost || a->segments == NULL) continue;
    hz_lock(&a->lock);
    if (a->region_end > a->region_next) {
      hz_os_unmap((void *)a->region_next, a->region_end - a->region_next);
      a->reserved_bytes -= a->region_end - a->region_next;
      a->region_end = a->region_next;
      any = true;
    }
    for (hz_segment_t **link = &a->segments; *link != NULL;) {
      if ((*link)->free_slices != HZ_SLICES - 1) {
        link = &(*link)->next;
        continue;
      }
      segment_unmap(a, link);
      any = true;
    }
    hz_unlock(&a->lock);
  }
  return any;
#endif
}

/* A segment all of whose slices are free again, under an address-space
 * limit (RLIMIT_AS): the program's own mappings need the room. Keeping
 * freed segments until hakozuna's own mapping failed, a program that had
 * filled the limit and freed everything could start no thread (its stack's
 * mmap failed, EAGAIN) nor map a file: Python under `ulimit -v`, `can't
 * start new thread` (tests/arena/as_release). The arena keeps one, so that
 * a span freed and taken again at a segment's edge does not map and unmap
 * it each time. The lock held. */
static void segment_emptied(hz_arena_t *a, hz_segment_t *seg) {
#ifdef _WIN32
  (void)a, (void)seg;
#else
  if (a->spare_seg == NULL || a->spare_seg == seg) {
    a->spare_seg = seg;
    return;
  }
  if (!arena_as_limited()) return;
  for (hz_segment_t **link = &a->segments; *link != NULL; link = &(*link)->next)
    if (*link == seg) {
      segment_unmap(a, link);
      return;
    }
#endif
}

/* A segment whose slices are all free and purged gives back the pages of
 * its span descriptors too (4 of the header's 5 with 4 KiB pages: 73
 * segments hold 1.2 MiB of them after a 256 MiB peak). They read back as
 * zero, a free span's descriptor (kind free, no heap, recip and limit 0: the
 * fast path refuses every pointer into it), until a span is taken again.
 * The page holding the bitmaps and the slice table stays. */
static void segment_purge_spans(hz_segment_t *seg) {
  if (seg->spans_purged || seg->free_slices != HZ_SLICES - 1 || mask_get(seg->dirty_mask)) return;
  for (size_t i = 1; i < HZ_SLICES; i++) seg->slice_span[i] = hz_seg_span(seg, i);
  hz_os_purge(hz_seg_span(seg, 1), sizeof seg->spans - 64);
  seg->spans_purged = true;
}

/* Both lines of a descriptor zero (a free span's), and nothing between. */
static void span_clear(hz_span_t *s) {
  memset(s, 0, 64);
  memset(&s->free, 0, 64);
}

/* A program without the purge thread (single-threaded) that frees more than
 * the budget has all of it purged at once, so that it keeps no more if it
 * then idles, making no call. One that frees a big working set and builds
 * it again, round after round, then faulted every page of it in at each
 * round: 100,000 blocks of 4 KiB allocated and freed 5 times, 496,000 page
 * faults and 3.7x mimalloc's time; a mix of 16 B-8 KiB blocks 50 times,
 * 8x (docs/perf.md §69). Clean memory taken within a purge delay of such a
 * purge makes the budget twice what those purges returned (at least twice
 * what it was, at most HZ_BUDGET_MAX). Every eight delays of activity it
 * comes down to twice the most that waited meanwhile, by half at most: a
 * program that stopped its rounds gets the small budget back, one that
 * goes on keeps its (halving it regardless made every eighth delay's round
 * fault its pages in again). */
#define HZ_BUDGET_MAX ((uint64_t)1 << 30)
static uint64_t arena_budget(const hz_arena_t *a) { return a->budget ? a->budget : HZ_PURGE_BUDGET; }

static void arena_regrow(hz_arena_t *a) {
  uint64_t now = hz_os_now_ms(), delay = (uint64_t)hz_opt(HZ_OPTION_PURGE_DELAY);
  if (now - a->budget_purged_ms < delay) {
    uint64_t want = 2 * (a->budget_purged > arena_budget(a) ? a->budget_purged : arena_budget(a));
    a->budget = want < HZ_BUDGET_MAX ? want : HZ_BUDGET_MAX;
    a->budget_set_ms = now;
    a->budget_peak = 0;
  }
  a->budget_purged_ms = a->budget_purged = 0;
}

/* (at each purge look, the lock held) */
static void budget_look(hz_arena_t *a, uint64_t now, uint64_t delay) {
  if (a->budget == 0 || now - a->budget_set_ms < 8 * delay) return;
  uint64_t want = 2 * a->budget_peak > HZ_PURGE_BUDGET ? 2 * a->budget_peak : HZ_PURGE_BUDGET;
  if (want < a->budget / 2) want = a->budget / 2;
  if (want < a->budget) a->budget = want > HZ_PURGE_BUDGET ? want : 0;
  a->budget_set_ms = now;
  a->budget_peak = 0;
}

static hz_span_t *segment_take(hz_arena_t *a, hz_segment_t *seg, size_t idx, size_t n) {
  seg->spans_purged = false;
  if (a->spare_seg == seg) a->spare_seg = NULL;
  hz_mask_t run = mask_run(idx, n), dirty_mask = mask_get(seg->dirty_mask);
  size_t dirty = mask_popcount(dirty_mask & run);
  mask_put(seg->free_mask, mask_get(seg->free_mask) & ~run);
  mask_put(seg->dirty_mask, dirty_mask & ~run);
  mask_put(seg->aged_mask, mask_get(seg->aged_mask) & ~run);
  seg->free_slices -= (uint32_t)n;
  a->free_clean_slices -= n - dirty;
  dirty_add(a, -(int64_t)dirty);
  if (n > dirty) hz_stats_commit((int64_t)((n - dirty) * HZ_SLICE_SIZE));
  if (n > dirty && a->budget_purged_ms) arena_regrow(a);
  hz_span_t *s = hz_seg_span(seg, idx);
  for (size_t i = idx; i < idx + n; i++) seg->slice_span[i] = s;
  span_clear(s);
  s->slice_index = (uint16_t)idx;
  s->slice_count = (uint16_t)n;
  s->start = (uintptr_t)seg + idx * HZ_SLICE_SIZE;
  s->zeroed = dirty == 0;
  return s;
}

/* A run of n slices from a's segments, under its lock: memory still backed
 * by pages first (no faults, no RSS growth while freed spans wait for their
 * purge), then, unless dirty_only, any free run; each search goes round the
 * segments from where the last one succeeded. */
static hz_span_t *arena_find(hz_arena_t *a, size_t n, size_t align, bool dirty_only) {
  hz_segment_t *first = a->hint ? a->hint : a->segments;
  for (int pass = 0; pass < (dirty_only ? 2 : 4); pass++) {
    bool dirty = pass < 2;
    if (dirty && a->dirty_slices < n) continue;
    for (hz_segment_t *seg = pass & 1 ? a->segments : first; seg != NULL; seg = seg->next) {
      if ((pass & 1) && seg == first) break;
      if (seg->free_slices < n) continue;
      size_t idx = segment_find_run(seg, n, align, dirty);
      if (idx) {
        a->hint = seg;
        return segment_take(a, seg, idx, n);
      }
    }
  }
  return NULL;
}

/* Freed, still backed slices of another arena, before clean ones of a's. A
 * span goes back to the arena of its segment, so where threads allocate in
 * turns from two arenas (a producer's blocks freed by a consumer), one
 * arena's freed memory waited out the purge delay while the other faulted
 * in new pages (xmalloc-test: 35 MiB waiting at its peak, docs/perf.md
 * section 65). Called with a's lock held: the others are only tried, never
 * waited for, so no two threads can wait for each other's. */
static hz_span_t *arena_steal_dirty(uint32_t arena_index, size_t n, size_t align) {
  for (uint32_t k = 1; k < hz_arena_count; k++) {
    hz_arena_t *b = &hz_arenas[(arena_index + k) % hz_arena_count];
    if (b->lost || __atomic_load_n(&b->dirty_slices, __ATOMIC_RELAXED) < n || !hz_trylock(&b->lock)) continue;
    hz_span_t *s = arena_find(b, n, align, true);
    hz_unlock(&b->lock);
    if (s != NULL) return s;
  }
  return NULL;
}

/* No new segment (out of address space, RLIMIT_AS): any free run of the
 * other arenas, purged ones too. A threaded program's thread that ran on
 * several CPUs left memory in several arenas, and when all of it was freed
 * and purged, a malloc on another CPU found its own arena full and failed
 * while the others held free slices (tests/arena/as_limit, 1 pass in 7 on a
 * loaded machine: 10,108 blocks served again of 10,361). One lock at a
 * time, ours released first. */
static hz_span_t *arena_find_elsewhere(uint32_t arena_index, size_t n, size_t align) {
  for (uint32_t k = 1; k < hz_arena_count; k++) {
    hz_arena_t *b = &hz_arenas[(arena_index + k) % hz_arena_count];
    if (b->lost) continue;
    hz_lock(&b->lock);
    hz_span_t *s = b->lost ? NULL : arena_find(b, n, align, false);
    hz_unlock(&b->lock);
    if (s != NULL) return s;
  }
  return NULL;
}

hz_span_t *hz_arena_alloc_span(uint32_t arena_index, size_t n, size_t align) {
  for (uint32_t i = 0; hz_arenas[arena_index].lost; i++) { /* only after a fork */
    if (i == HZ_ARENAS_MAX) return NULL;
    arena_index = (arena_index + 1) % HZ_ARENAS_MAX;
  }
  hz_arena_t *a = &hz_arenas[arena_index];
  hz_lock(&a->lock);
  hz_span_t *s = arena_find(a, n, align, true);
  if (s == NULL) s = arena_steal_dirty(arena_index, n, align);
  if (s == NULL) s = arena_find(a, n, align, false);
  if (s == NULL) {
    hz_segment_t *seg = segment_new(a, arena_index);
    size_t idx = seg ? segment_find_run(seg, n, align, false) : 0;
    if (idx) {
      s = segment_take(a, seg, idx, n);
      a->hint = seg;
    }
  }
  hz_unlock(&a->lock);
  return s != NULL ? s : arena_find_elsewhere(arena_index, n, align);
}

/* Return dirty free slices of one arena: all of them (force), those of a
 * segment that has had no free for the purge delay, and, in the others,
 * those that no span took since the last aging look, a purge delay or more
 * ago. A program that frees somewhere in every segment within each delay
 * (two threads passing blocks: xmalloc-test, rptest) otherwise kept what it
 * freed after its peak until the pool held HZ_PURGE_BUDGET, and for good
 * while the purge thread ran (docs/perf.md §56). Called with the lock held. */
static void purge_locked(hz_arena_t *a, bool force) {
  uint64_t now = hz_os_now_ms();
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  a->last_purge_ms = now;
  if (!force && delay > 0) budget_look(a, now, (uint64_t)delay);
  if (a->dirty_slices == 0 || (!force && delay < 0)) return;
  bool age = force || now - a->last_aged_ms >= (uint64_t)delay;
  if (age) a->last_aged_ms = now;
  for (hz_segment_t *seg = a->segments; seg != NULL; seg = seg->next) {
    hz_mask_t dirty = mask_get(seg->dirty_mask), purge = dirty;
    if (!dirty) continue;
    if (!force && now - seg->freed_at < (uint64_t)delay) {
      if (!age) continue;
      purge = dirty & mask_get(seg->aged_mask);
      mask_put(seg->aged_mask, dirty & ~purge);
    }
    for (hz_mask_t left = purge; left;) {
      size_t i = mask_ctz(left), j = i;
      while (j < HZ_SLICES && ((left >> j) & 1)) j++;
      hz_os_purge((char *)seg + i * HZ_SLICE_SIZE, (j - i) * HZ_SLICE_SIZE);
      left &= ~mask_run(i, j - i);
      dirty_add(a, -(int64_t)(j - i));
      a->free_clean_slices += j - i;
      hz_stats_commit(-(int64_t)((j - i) * HZ_SLICE_SIZE));
    }
    mask_put(seg->dirty_mask, dirty & ~purge);
    if (purge == dirty) mask_put(seg->aged_mask, 0);
    segment_purge_spans(seg);
  }
}

void hz_arena_free_span(hz_span_t *s, bool purge_now) {
  hz_segment_t *seg = hz_segment_of((void *)s->start);
  hz_arena_t *a = &hz_arenas[seg->arena];
  hz_mask_t run = mask_run(s->slice_index, s->slice_count);
  s->kind = HZ_SPAN_FREE;
  s->heap = NULL;
  s->free = NULL;
  if (a->lost) return;
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  uint64_t now = hz_os_now_ms();
  if (purge_now) { /* (the span is no one's: its pages go back before the lock is taken) */
    hz_os_purge((char *)seg + s->slice_index * HZ_SLICE_SIZE, s->slice_count * HZ_SLICE_SIZE);
    hz_stats_commit(-(int64_t)(s->slice_count * HZ_SLICE_SIZE));
  }
  hz_lock(&a->lock);
  mask_put(seg->free_mask, mask_get(seg->free_mask) | run);
  seg->free_slices += s->slice_count;
  if (purge_now) {
    a->free_clean_slices += s->slice_count;
    segment_purge_spans(seg);
    if (seg->free_slices == HZ_SLICES - 1) segment_emptied(a, seg);
    hz_unlock(&a->lock);
    return;
  }
  mask_put(seg->dirty_mask, mask_get(seg->dirty_mask) | run);
  seg->freed_at = now;
  dirty_add(a, s->slice_count);
  if (delay == 0) purge_locked(a, true);
  else if (delay > 0 && now - a->last_purge_ms >= (uint64_t)delay) purge_locked(a, false);
  if (a->dirty_slices * HZ_SLICE_SIZE > a->budget_peak) a->budget_peak = a->dirty_slices * HZ_SLICE_SIZE;
  if (delay > 0 && a->dirty_slices * HZ_SLICE_SIZE > arena_budget(a) &&
      !atomic_load_explicit(&hz_purge_running, memory_order_relaxed)) {
    a->budget_purged += a->dirty_slices * HZ_SLICE_SIZE;
    purge_locked(a, true);
    a->budget_purged_ms = now;
  }
  if (seg->free_slices == HZ_SLICES - 1) segment_emptied(a, seg);
  bool waiting = a->dirty_slices != 0;
  hz_unlock(&a->lock);
  if (waiting) atomic_store_explicit(&hz_purge_pending, 1, memory_order_seq_cst);
}

void hz_arena_purge(bool force) {
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++) {
    hz_arena_t *a = &hz_arenas[i];
    if (a->lost) continue;
    hz_lock(&a->lock);
    purge_locked(a, force);
    hz_unlock(&a->lock);
  }
}

bool hz_arena_dirty(void) {
  bool dirty = false;
  for (uint32_t i = 0; i < HZ_ARENAS_MAX && !dirty; i++) {
    hz_arena_t *a = &hz_arenas[i];
    if (a->lost) continue;
    hz_lock(&a->lock);
    dirty = a->dirty_slices != 0;
    hz_unlock(&a->lock);
  }
  return dirty;
}

/* Blocks in use in a small span, read while its owner may change the count
 * and the unlisted flag (two stores, each seen alone: a snapshot showed 3.2
 * million live blocks of 960 bytes and unused bytes near 2^64), held to what
 * the span can hold. */
static uint64_t span_live(const hz_span_t *s) {
  int64_t live = (int64_t)(int32_t)(hz_span_used(s) - s->pinned);
  return live < 0 ? 0 : live > (int64_t)s->capacity ? s->capacity : (uint64_t)live;
}

/* Blocks in use per class, from the spans themselves (racy reads of other
 * threads' counts: good enough for statistics). */
void hz_arena_live_blocks(uint64_t live[HZ_NCLASS]) {
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++) {
    hz_arena_t *a = &hz_arenas[i];
    if (a->lost) continue;
    hz_lock(&a->lock);
    for (hz_segment_t *seg = a->segments; seg != NULL; seg = seg->next)
      for (size_t j = 1; j < HZ_SLICES; j++) {
        const hz_span_t *s = hz_seg_span(seg, j);
        if (seg->slice_span[j] == s && s->kind == HZ_SPAN_SMALL) live[s->cls] += span_live(s);
      }
    hz_unlock(&a->lock);
  }
}

/* Where committed memory that holds no live block is (racy reads of the
 * spans of other threads, as hz_arena_live_blocks). */
void hz_arena_usage(hz_arena_usage_t *u) {
  memset(u, 0, sizeof *u);
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++) {
    hz_arena_t *a = &hz_arenas[i];
    hz_lock(&a->lock);
    u->dirty += a->dirty_slices * HZ_SLICE_SIZE;
    u->headers += a->segment_count * HZ_SLICE_SIZE;
    for (hz_segment_t *seg = a->segments; seg != NULL; seg = seg->next) {
      hz_mask_t in_pool = mask_get(seg->free_mask);
      for (size_t j = 1; j < HZ_SLICES; j++) {
        const hz_span_t *s = hz_seg_span(seg, j);
        if (seg->slice_span[j] != s) continue; /* not the head of a span */
        uint64_t bytes = (uint64_t)s->slice_count * HZ_SLICE_SIZE;
        if (s->kind == HZ_SPAN_SMALL) {
          uint64_t live = span_live(s);
          if (live == 0) u->empty_spans += bytes;
          else u->span_free += bytes - live * s->block_size;
        } else if (s->kind == HZ_SPAN_LARGE) {
          u->span_free += bytes - s->block_size;
        } else if (!((in_pool >> j) & 1)) {
          u->span_cache += bytes; /* free, yet not in the pool: a heap keeps it */
        }
      }
    }
    hz_unlock(&a->lock);
  }
}

void hz_arena_counters(uint64_t *segments, uint64_t *reserved, uint64_t *committed) {
  *segments = *reserved = *committed = 0;
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++) {
    hz_arena_t *a = &hz_arenas[i];
    if (a->lost) continue;
    hz_lock(&a->lock);
    *segments += a->segment_count;
    *reserved += a->reserved_bytes;
    /* everything in segments except free slices known clean (headers count) */
    *committed += (a->segment_count * HZ_SLICES - a->free_clean_slices) * HZ_SLICE_SIZE;
    hz_unlock(&a->lock);
  }
}

/* fork (init.c): an arena whose lock a lost thread held is never used in
 * the child (its bitmaps and lists may be half changed). */
void hz_arena_fork_child(void) {
  (void)hz_lock_lost_in_fork(&segmap_lock); /* (a lost opener set no bit: the page is opened again) */
  for (uint32_t i = 0; i < HZ_ARENAS_MAX; i++)
    if (hz_lock_lost_in_fork(&hz_arenas[i].lock)) hz_arenas[i].lost = true;
}
