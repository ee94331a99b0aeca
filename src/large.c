// SPDX-License-Identifier: MIT
/* Large and huge blocks.
 *
 * Large blocks (32 KiB < size <= 2 MiB) are whole spans of 32 KiB slices,
 * owned by the allocating thread's heap like small spans; freed ones wait in
 * the heap's span cache, so repeated large malloc/free never reaches the OS.
 * Huge blocks (> 2 MiB, or alignments a segment can't give) are mapped
 * directly, 4 MiB-aligned so the segment map knows them, and freed ones are
 * kept in a size-keyed reuse cache for HAKOZUNA_PURGE_DELAY ms, so a program
 * cycling through big buffers does not mmap/munmap each time. */
#include "internal.h"

#include <errno.h>
#include <string.h>

/* Large blocks are page-granular inside a span of whole slices: a block of
 * 32 KiB + 1 byte takes 9 pages, not 16 (waste under 12.5% above 32 KiB, as
 * the small classes below). The rest of the last slice stays unused, and
 * realloc grows into it in place. */
size_t hz_large_block_size(size_t size) {
  size_t ps = hz_os_page_size;
  return (size + HZ_LARGE_GUARD + ps - 1) & ~(ps - 1);
}

/* hz_recip of a span of n slices, kept: not a 64-bit division on every
 * large malloc. (Filled on first use; racing writers store the same value.) */
static uint64_t large_recip(size_t n) {
  static uint64_t table[HZ_LARGE_MAX_SLICES + 1];
  uint64_t r = __atomic_load_n(&table[n], __ATOMIC_RELAXED);
  if (hz_unlikely(r == 0)) {
    r = hz_recip(n * HZ_SLICE_SIZE);
    __atomic_store_n(&table[n], r, __ATOMIC_RELAXED);
  }
  return r;
}

/* Where a large block starts in its first page: a cache line picked by its
 * span's address (the same line each time the span serves a large block)
 * where the bytes its last page leaves unused (`slack`) and the rest of
 * its span's last slice (`room`) make room for it, else the page's start.
 * Blocks that all began on a page boundary had their first bytes, and
 * every byte at the same offset into a page, compete for the few cache
 * sets those addresses map to: mt_remote 1 thread 32769-131072, which
 * writes a byte in each page of a block, 7.4 M ops/s, now 10.4. An offset
 * scaled to each block's slack instead moved with the block's size, and
 * a span's next blocks touched other lines of its pages: 2.3x the
 * last-level write misses, and short runs lost 10% (docs/perf.md §89).
 * The block keeps its usable size (hz_good_size) and, written up to its
 * request, no page more. Not in the checked build, whose guard follows
 * the block's last page, nor for blocks aligned to more than a line. */
static size_t large_offset(const hz_span_t *s, size_t slack, size_t room) {
  size_t off = (size_t)((((uintptr_t)s >> 6) * 0x9E3779B97F4A7C15ull) >> 58) << 6; /* 0..4032, by descriptor */
  return off <= slack && off <= room ? off : 0;
}

void *hz_large_alloc(hz_heap_t *h, size_t size, size_t align, size_t *dirty) {
  if (h == &hz_heap_empty || !h->live) h = hz_heap_get();
  size_t bs = h ? hz_large_block_size(size) : 0;
  size_t slices = (bs + HZ_SLICE_SIZE - 1) / HZ_SLICE_SIZE;
  size_t align_slices = align > HZ_SLICE_SIZE ? align / HZ_SLICE_SIZE : 1;
  hz_span_t *s = h ? hz_heap_take_span(h, slices, align_slices) : NULL;
  if (s == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  slices = s->slice_count; /* (granule-rounded) */
  size_t off = HZ_CHECKED || align > 64 ? 0 : large_offset(s, bs - size, slices * HZ_SLICE_SIZE - bs);
  s->kind = HZ_SPAN_LARGE;
  s->cls = HZ_CLASS_LARGE;
  s->start = hz_span_base(s) + off; /* (a small span's starts after its guard block in the checked build) */
  s->heap = h;
  s->push_to = s;
  s->block_size = (uint32_t)bs;
  /* only the block's start is one (the block-start test with the span's
   * size as divisor) */
  s->recip = large_recip(slices);
  s->capacity = s->carved = 1;
  s->owner_gen = h->adoptions;
  s->uses = 1 - 1 - HZ_UNLISTED_BIAS; /* one block out, unlisted */
  __atomic_store_n(&s->limit, s->recip * (slices * HZ_SLICE_SIZE), __ATOMIC_RELAXED); /* hz_limit(span, 1) */
  s->unlisted = 1;
  s->free = NULL;
  *dirty = s->zeroed ? 0 : size;
  if (HZ_CHECKED && hz_checked_guard_may_split())
    hz_os_protect((void *)(s->start + bs - HZ_LARGE_GUARD), HZ_LARGE_GUARD, false);
  h->n.malloc[HZ_CLASS_LARGE]++;
  if (h->large_credit < HZ_LARGE_CREDIT_MAX) h->large_credit++; /* (heap.c, hz_heap_free_large_remote) */
  h->n.large_bytes += bs;
  h->n.large_bytes_allocated += bs;
  hz_block_t *b = (hz_block_t *)s->start;
  b->tag = 0;
  return b;
}

/* realloc: a large block grows into the unused rest of its span, or shrinks
 * where it is (its usable size follows). Not in the checked build, whose
 * guard would have to move. */
bool hz_large_resize(void *p, size_t size) {
  if (HZ_CHECKED || hz_segmap_get(p) != HZ_MAP_SPANS) return false;
  hz_span_t *s = hz_span_of(p);
  size_t bs = hz_large_block_size(size), off = s->start - hz_span_base(s);
  if (s->kind != HZ_SPAN_LARGE || off + bs > (size_t)s->slice_count * HZ_SLICE_SIZE) return false;
  hz_heap_t *h = hz_heap_get();
  if (h == NULL) return false;
  h->n.large_bytes += (int64_t)(bs - s->block_size);
  s->block_size = (uint32_t)bs;
  return true;
}

/* ---- huge blocks ---- */
typedef struct hz_huge_s {
  uintptr_t magic;   /* hz_key ^ address: this really is a huge header */
  size_t map_size;   /* multiple of the segment size */
  size_t used_size;  /* offset + block + guard, a whole number of pages: the
                        usable size is what hz_good_size says, not the mapping's
                        (memory accounting that reads malloc_usable_size -- ruby's
                        GC, redis's used_memory -- would count 4 MiB steps) */
  size_t resident;   /* pages past it were never touched, or went back (at least used_size) */
  size_t offset;     /* block = base + offset */
  size_t base_align;
  size_t splits;     /* kernel mappings (VMAs) its moves of pages added */
  bool cached;
  uint64_t cached_at;
  struct hz_huge_s *next;
} hz_huge_t;

#define HZ_HUGE_HEADER 64
static hz_lock_t hz_huge_lock = HZ_LOCK_INIT;
static hz_huge_t *hz_huge_cache;
static size_t hz_huge_cached_bytes;
static uint64_t hz_huge_allocs, hz_huge_frees, hz_huge_live, hz_huge_allocated;
static uint64_t hz_huge_peak_count, hz_huge_peak_bytes; /* (malloc_stats' "max mmap regions/bytes") */
/* Each move of pages splits kernel mappings; the process may have only so
 * many (vm.max_map_count, 65530 by default, the program's own mmaps
 * included), so the moves stop while the splits add up to this. */
#define HZ_HUGE_SPLITS_MAX 4096
static size_t hz_huge_splits;
static bool hz_huge_move_unsupported;
/* Live blocks whose mapping holds pages past their end that a bigger block
 * had filled. Those pages go back once the block has lived a fifth of the
 * purge delay (seen at the next huge malloc, or by hz_huge_purge), not when
 * it is taken: a block that soon goes back to the cache had the next, bigger
 * block fault them in again (bench/large, 8 live blocks of 64 KiB-10 MiB:
 * 4.7x the time; after a whole delay, malloc-large kept 8% more RSS:
 * docs/perf.md §59). Beyond this many at once, at once. The lock guards
 * them. */
#define HZ_HUGE_TAILS 16
static struct {
  hz_huge_t *hh;
  uint64_t since;
} hz_huge_tails[HZ_HUGE_TAILS];
static size_t hz_huge_tail_count;

static void segmap_mark(hz_huge_t *hh, uint8_t v) {
  uintptr_t i = (uintptr_t)hh >> HZ_SEG_SHIFT, n = hh->map_size >> HZ_SEG_SHIFT;
  hz_segmap_set(i, v);
  for (uintptr_t j = 1; j < n; j++) hz_segmap_set(i + j, v == HZ_MAP_HUGE ? HZ_MAP_HUGE_TAIL : v);
}

/* (the caller took its splits off hz_huge_splits, holding the lock) */
static void huge_unmap(hz_huge_t *hh) {
  segmap_mark(hh, HZ_MAP_GONE);
  hz_stats_commit(-(int64_t)hh->map_size);
  hz_os_unmap(hh, hh->map_size);
}

/* How a cached mapping whose last block left `have` bytes resident suits a
 * block of `used` (lower is better): pages past the block's end would be
 * purged, and pages short of it moved from other cached mappings (gather),
 * or faulted in where pages cannot move. */
static size_t misfit(size_t have, size_t used) {
  return have > used ? have - used : used - have;
}

/* A cached mapping that fits without wasting more than a quarter, the one
 * whose resident pages suit the block best. */
static hz_huge_t *cache_take(size_t need, size_t used, size_t base_align) {
  hz_huge_t **best = NULL;
  for (hz_huge_t **link = &hz_huge_cache; *link; link = &(*link)->next) {
    hz_huge_t *c = *link;
    if (c->map_size < need || c->map_size - need > need / 4 + HZ_SEG_SIZE) continue;
    if (((uintptr_t)c & (base_align - 1)) != 0) continue;
    if (best == NULL || misfit(c->resident, used) < misfit((*best)->resident, used)) best = link;
  }
  if (best == NULL) return NULL;
  hz_huge_t *c = *best;
  *best = c->next;
  hz_huge_cached_bytes -= c->map_size;
  return c;
}

/* ---- moving pages between mappings ----
 * A freed huge block's pages are worth keeping only if a new block can use
 * them, and blocks rarely come back in the same sizes: so pages move
 * (mremap) from cached mappings to the block being allocated, and a freed
 * block's pages serve a new block of any size. mimalloc-bench's
 * malloc-large (20 live blocks of 5-25 MiB, replaced at random) had a pool
 * of mappings that did not fit staying resident while fresh ones faulted
 * in: 612 MiB peak for 397 MiB live. */

/* Takes the cached mapping with the most pages past its header page to
 * give, among those cached at cached_before or earlier, off the list (the
 * move is made without the lock). */
static hz_huge_t *donor_take(uint64_t cached_before) {
  hz_huge_t **best = NULL, *c;
  size_t best_n = 0, ps = hz_os_page_size;
  hz_lock(&hz_huge_lock);
  if (!hz_huge_move_unsupported && hz_huge_splits < HZ_HUGE_SPLITS_MAX && hz_huge_guard() == 0)
    for (hz_huge_t **link = &hz_huge_cache; (c = *link) != NULL; link = &c->next)
      if (c->resident - ps > best_n && c->cached_at <= cached_before) best = link, best_n = c->resident - ps;
  c = best ? *best : NULL;
  if (c) {
    *best = c->next;
    hz_huge_splits += 4; /* each move: at most two new boundaries on each side */
  }
  hz_unlock(&hz_huge_lock);
  return c;
}

/* Moves the last `size` resident bytes of donor d to own + have, then puts
 * d back. A donor whose pages moved away but which could not be mapped
 * again has a hole that may be another mapping's by now (an mmap of another
 * thread took the address space: 2 runs in 30 of faults/oom freed or
 * unmapped another thread's huge block): it is left as it is, its pages
 * purged and its header no longer one, never unmapped. True if the pages
 * moved. */
static bool donor_move(hz_huge_t *d, hz_huge_t *own, size_t have, size_t size) {
  char *from = (char *)d + d->resident - size;
  int r = hz_os_move(from, (char *)own + have, size, d->map_size);
  hz_lock(&hz_huge_lock);
  if (r < 0) hz_huge_splits -= 4;
  else d->splits += 2, own->splits += 2, d->resident -= size;
  if (r == -EINVAL || r == -ENOSYS) hz_huge_move_unsupported = true;
  if (r > 0) {
    hz_huge_cached_bytes -= d->map_size;
    hz_huge_splits -= d->splits;
  } else {
    d->next = hz_huge_cache;
    hz_huge_cache = d;
  }
  hz_unlock(&hz_huge_lock);
  if (r > 0) {
    size_t ps = hz_os_page_size, head = (size_t)(from - (char *)d);
    hz_stats_commit(-(int64_t)d->map_size);
    d->magic = 0; /* a free of a pointer into it reports */
    if (head > ps) hz_os_purge((char *)d + ps, head - ps);
    hz_verbose("a huge mapping of %zu bytes lost part of its address space to another mapping: left unused",
               d->map_size);
  }
  return r >= 0;
}

/* Pages from cached mappings to [own + have, own + want), instead of
 * faulting fresh ones in; each donor gives its tail, keeping its header
 * page. Returns how far own is resident now. */
static size_t gather(hz_huge_t *own, size_t have, size_t want, uint64_t cached_before) {
  hz_huge_t *d;
  for (int moves = 0; have < want && moves < 4 && (d = donor_take(cached_before)) != NULL; moves++) {
    size_t take = d->resident - hz_os_page_size;
    if (take > want - have) take = want - have;
    if (!donor_move(d, own, have, take)) break;
    have += take;
  }
  return have;
}

static bool tail_defer(hz_huge_t *hh) {
  if (hz_huge_tail_count == HZ_HUGE_TAILS || hz_opt(HZ_OPTION_PURGE_DELAY) <= 0) return false;
  hz_huge_tails[hz_huge_tail_count].hh = hh;
  hz_huge_tails[hz_huge_tail_count++].since = hz_os_now_ms();
  return true;
}

/* Purges the tails registered at least `age` ms ago (all when forced). */
static void tails_purge(uint64_t now, uint64_t age, bool force) {
  for (size_t i = 0; i < hz_huge_tail_count;) {
    hz_huge_t *hh = hz_huge_tails[i].hh;
    if (force || now - hz_huge_tails[i].since >= age) {
      /* (under the lock: the block may not be resized or freed meanwhile) */
      hz_os_purge((char *)hh + hh->used_size, hh->resident - hh->used_size);
      hh->resident = hh->used_size;
      hz_huge_tails[i] = hz_huge_tails[--hz_huge_tail_count];
    } else {
      i++;
    }
  }
}

/* (the block is freed, resized or moved: its pages are accounted there) */
static void tail_forget(const hz_huge_t *hh) {
  for (size_t i = 0; i < hz_huge_tail_count; i++)
    if (hz_huge_tails[i].hh == hh) {
      hz_huge_tails[i] = hz_huge_tails[--hz_huge_tail_count];
      return;
    }
}

static void cache_drop_all(void) {
  while (hz_huge_cache) {
    hz_huge_t *c = hz_huge_cache;
    hz_huge_cache = c->next;
    hz_huge_cached_bytes -= c->map_size;
    hz_huge_splits -= c->splits;
    huge_unmap(c);
  }
}

void *hz_huge_alloc(size_t size, size_t align, size_t *dirty) {
  size_t offset = align > HZ_HUGE_HEADER ? align : HZ_HUGE_HEADER;
  size_t base_align = align > HZ_SEG_SIZE ? align : HZ_SEG_SIZE;
  if (size > HZ_MAX_REQUEST || offset > HZ_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  size_t guard = hz_huge_guard(), ps = hz_os_page_size;
  size_t used = (offset + size + guard + ps - 1) & ~(ps - 1);
  size_t need = (used + HZ_SEG_MASK) & ~HZ_SEG_MASK;
  bool fresh = false;
  hz_lock(&hz_huge_lock);
  hz_huge_t *hh = cache_take(need, used, base_align);
  hz_unlock(&hz_huge_lock);
  if (hh == NULL) {
    hh = hz_os_map(need, base_align);
    /* A request that no address space could hold (glibc's tests ask for
     * 2^62 bytes, over and over) fails at once: what follows gave back the
     * cache and every empty segment each time, which the next small malloc
     * mapped again (354,000 segments mapped and unmapped in
     * tst-malloc-too-large: 12 s against glibc's 1). */
    bool may_fit = hh == NULL && hz_os_could_map(need);
    if (may_fit) { /* cached mappings hold address space: let them go */
      hz_lock(&hz_huge_lock);
      cache_drop_all();
      hz_unlock(&hz_huge_lock);
      hh = hz_os_map(need, base_align);
    }
    if (may_fit && hh == NULL) { /* and unused segments, with what this thread's heap and
                                  * exited threads' heaps hold unused */
      hz_heap_collect_own();
      hz_heaps_collect_abandoned(true);
      if (hz_arena_release()) hh = hz_os_map(need, base_align);
    }
    if (hh == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    hh->map_size = need;
    hz_stats_commit((int64_t)need);
    hh->base_align = base_align;
    hh->magic = hz_key ^ (uintptr_t)hh;
    segmap_mark(hh, HZ_MAP_HUGE);
    hh->resident = gather(hh, ps, used, UINT64_MAX); /* (the header page faults in) */
    fresh = true;
  } else {
    /* Pages short of this block come from mappings left for half the purge
     * delay, whose pages would soon go back to the OS; a mapping freed just
     * now is likely to serve a block soon itself, and each move costs as
     * much as ~30 page faults (large 20000 8: 1.35x the time, no fewer faults). */
    long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
    if (hh->resident < used && delay > 0) hh->resident = gather(hh, hh->resident, used, hz_os_now_ms() - (uint64_t)delay / 2);
  }
  hh->offset = offset;
  hh->used_size = used;
  /* Past what was resident, pages are untouched or went back: zero. A fresh
   * mapping's header page holds nothing of the block but the header. */
  *dirty = hh->resident <= offset || (fresh && hh->resident == ps) ? 0 : hh->resident - offset;
  if (hh->resident < used) hh->resident = used;
  hh->cached = false;
  if (guard) hz_os_protect((char *)hh + used - guard, guard, false);
  /* Pages past the block stay untouched while it lives: more than an
   * eighth of it goes back, a fifth of the purge delay later (a 50 MiB
   * block in a mapping a 66 MiB one had filled kept 16 MiB resident for as
   * long as it lived). */
  bool tail = hh->resident > used + used / 8, deferred = false;
  hz_lock(&hz_huge_lock);
  if (hz_huge_tail_count) tails_purge(hz_os_now_ms(), (uint64_t)hz_opt(HZ_OPTION_PURGE_DELAY) / 5, false);
  if (tail) deferred = tail_defer(hh);
  hz_huge_allocs++;
  hz_huge_live += hh->map_size;
  if (hz_huge_allocs - hz_huge_frees > hz_huge_peak_count) hz_huge_peak_count = hz_huge_allocs - hz_huge_frees;
  if (hz_huge_live > hz_huge_peak_bytes) hz_huge_peak_bytes = hz_huge_live;
  hz_huge_allocated += hh->map_size;
  hz_unlock(&hz_huge_lock);
  if (deferred) {
    atomic_store_explicit(&hz_purge_pending, 1, memory_order_seq_cst);
  } else if (tail) {
    hz_os_purge((char *)hh + used, hh->resident - used);
    hh->resident = used;
  }
  return (char *)hh + offset;
}

/* The header of the huge block p belongs to, after checking p is its start. */
static hz_huge_t *huge_lookup(const void *p, const char *fn) {
  uintptr_t i = (uintptr_t)p >> HZ_SEG_SHIFT;
  while (i > 0 && hz_segmap_at(i) == HZ_MAP_HUGE_TAIL) i--;
  hz_huge_t *hh = (hz_huge_t *)(i << HZ_SEG_SHIFT);
  if (hz_segmap_at(i) != HZ_MAP_HUGE || hh->magic != (hz_key ^ (uintptr_t)hh)) {
    hz_misuse_foreign(p, fn);
    return NULL;
  }
  char *block = (char *)hh + hh->offset;
  size_t usable = hh->used_size - hh->offset - hz_huge_guard();
  if (hh->cached) {
    hz_misuse_double(p, usable, fn);
    return NULL;
  }
  if ((const char *)p != block) {
    hz_misuse_interior(p, block, usable, fn);
    return NULL;
  }
  return hh;
}

size_t hz_huge_usable(const void *p, const char *fn) {
  hz_huge_t *hh = huge_lookup(p, fn);
  return hh ? hh->used_size - hh->offset - hz_huge_guard() : 0;
}

/* Checked build: the guard page of a huge block whose end moved from `was`
 * to `used` (0: none), opened where it was and closed where it is. */
static void huge_guard_move(hz_huge_t *hh, size_t was, size_t used) {
  size_t guard = hz_huge_guard();
  if (used) hz_os_protect((char *)hh + used - guard, guard, false);
  if (was) hz_os_protect((char *)hh + was - guard, guard, true);
}

/* realloc: a huge block grows into the rest of its mapping (never touched by
 * this block, so it costs nothing until written), or shrinks where it is and
 * gives back the pages it no longer uses. The checked build's guard page
 * moves to the block's new end. */
bool hz_huge_resize(void *p, size_t size, const char *fn) {
  size_t guard = hz_huge_guard();
  hz_lock(&hz_huge_lock);
  hz_huge_t *hh = huge_lookup(p, fn);
  size_t ps = hz_os_page_size, used = hh ? (hh->offset + size + guard + ps - 1) & ~(ps - 1) : 0, before = 0;
  size_t was = hh ? hh->used_size : 0;
  bool fits = hh != NULL && size <= hh->map_size && used <= hh->map_size;
  if (fits) {
    tail_forget(hh);
    before = hh->resident;
    hh->used_size = used;
    hh->resident = used;
  }
  hz_unlock(&hz_huge_lock);
  if (fits && guard && used != was) huge_guard_move(hh, was, used);
  if (fits && used < before) hz_os_purge((char *)hh + used, before - used);
  return fits;
}

/* realloc past the end of a huge block's mapping: the mapping moves
 * (mremap) into a bigger one instead of being copied, with a quarter more
 * room, so that a buffer that keeps growing moves O(log n) times. A buffer
 * grown 64 KiB at a time to 256 MiB was copied at every 4 MiB: 18.9 s,
 * glibc (mremap) 0.57 s. The checked build opens its guard page first (one
 * kernel mapping again) and closes it at the block's new end: it copied,
 * and the same growth took over two minutes. NULL when it cannot move (the
 * caller copies): a mapping the kernel holds as several (pages moved in
 * from cached mappings), or no mremap. */
void *hz_huge_realloc(void *p, size_t size) {
  if (size > HZ_MAX_REQUEST / 2 || hz_huge_move_unsupported) return NULL;
  size_t guard = hz_huge_guard();
  hz_lock(&hz_huge_lock);
  hz_huge_t *hh = huge_lookup(p, "realloc");
  size_t ps = hz_os_page_size, offset = hh ? hh->offset : 0, old_size = hh ? hh->map_size : 0;
  size_t base_align = hh ? hh->base_align : 0, was = hh ? hh->used_size : 0;
  if (hh) {
    tail_forget(hh);
    segmap_mark(hh, HZ_MAP_GONE); /* (its pages are on the move) */
  }
  hz_unlock(&hz_huge_lock);
  if (hh == NULL) return NULL;
  if (guard) huge_guard_move(hh, was, 0);
  size_t used = (offset + size + guard + ps - 1) & ~(ps - 1), need = (used + used / 4 + HZ_SEG_MASK) & ~HZ_SEG_MASK;
  hz_huge_t *nh = hz_os_map(need, base_align);
  int r = nh ? hz_os_relocate(hh, nh, old_size) : -ENOMEM;
  if (r != 0 && guard) huge_guard_move(hh, 0, was);
  hz_lock(&hz_huge_lock);
  if (r != 0) {
    if (r == -EINVAL || r == -ENOSYS) hz_huge_move_unsupported = true;
    segmap_mark(hh, HZ_MAP_HUGE);
    hz_unlock(&hz_huge_lock);
    if (nh) hz_os_unmap(nh, need);
    return NULL;
  }
  /* the header came with the pages */
  hz_huge_splits -= nh->splits;
  nh->splits = 1; /* (the moved pages and the new room may stay two kernel mappings) */
  hz_huge_splits += nh->splits;
  nh->magic = hz_key ^ (uintptr_t)nh;
  nh->map_size = need;
  nh->used_size = used;
  segmap_mark(nh, HZ_MAP_HUGE);
  hz_huge_allocs++, hz_huge_frees++; /* as the copy's malloc and free */
  hz_huge_live += need - old_size;
  hz_huge_allocated += need;
  if (hz_huge_live > hz_huge_peak_bytes) hz_huge_peak_bytes = hz_huge_live;
  hz_unlock(&hz_huge_lock);
  if (guard) huge_guard_move(nh, 0, used);
  hz_stats_commit((int64_t)need - (int64_t)old_size);
  return (char *)nh + offset;
}

void hz_huge_free(void *p, const char *fn) {
  hz_lock(&hz_huge_lock); /* held so two racing frees can't both pass the check */
  hz_huge_t *hh = huge_lookup(p, fn);
  if (hh == NULL) {
    hz_unlock(&hz_huge_lock);
    return;
  }
  hz_huge_frees++;
  hz_huge_live -= hh->map_size;
  tail_forget(hh);
  hh->cached = true;
  if (hz_huge_guard()) hz_os_protect((char *)hh + hh->used_size - hz_huge_guard(), hz_huge_guard(), true);
  size_t budget = (size_t)hz_opt(HZ_OPTION_HUGE_CACHE) << 20;
  bool keep = hz_opt(HZ_OPTION_PURGE_DELAY) != 0 && hz_huge_cached_bytes + hh->map_size <= budget;
  if (keep) {
    hh->cached_at = hz_os_now_ms();
    hh->next = hz_huge_cache;
    hz_huge_cache = hh;
    hz_huge_cached_bytes += hh->map_size;
  } else {
    hz_huge_splits -= hh->splits;
  }
  hz_unlock(&hz_huge_lock);
  if (keep) atomic_store_explicit(&hz_purge_pending, 1, memory_order_seq_cst);
  else huge_unmap(hh);
}

bool hz_huge_purge(bool force) {
  uint64_t now = hz_os_now_ms();
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  hz_lock(&hz_huge_lock);
  for (hz_huge_t **link = &hz_huge_cache; *link;) {
    hz_huge_t *c = *link;
    if (force || (delay >= 0 && now - c->cached_at >= (uint64_t)delay)) {
      *link = c->next;
      hz_huge_cached_bytes -= c->map_size;
      hz_huge_splits -= c->splits;
      huge_unmap(c);
    } else {
      link = &c->next;
    }
  }
  if (force || delay >= 0) tails_purge(now, (uint64_t)delay / 5, force);
  bool left = hz_huge_cache != NULL || hz_huge_tail_count != 0;
  hz_unlock(&hz_huge_lock);
  return left;
}

void hz_huge_counters(uint64_t *allocs, uint64_t *frees, uint64_t *live_bytes, uint64_t *cached_bytes) {
  hz_lock(&hz_huge_lock);
  *allocs = hz_huge_allocs;
  *frees = hz_huge_frees;
  *live_bytes = hz_huge_live;
  *cached_bytes = hz_huge_cached_bytes;
  hz_unlock(&hz_huge_lock);
}

void hz_huge_peaks(uint64_t *count, uint64_t *bytes) {
  hz_lock(&hz_huge_lock);
  *count = hz_huge_peak_count;
  *bytes = hz_huge_peak_bytes;
  hz_unlock(&hz_huge_lock);
}

uint64_t hz_huge_allocated_bytes(void) {
  hz_lock(&hz_huge_lock);
  uint64_t n = hz_huge_allocated;
  hz_unlock(&hz_huge_lock);
  return n;
}

/* fork (init.c): if a lost thread held the lock, the cache list may be half
 * changed: the child forgets it (the cached mappings stay mapped, unused). */
void hz_huge_fork_child(void) {
  if (!hz_lock_lost_in_fork(&hz_huge_lock)) return;
  hz_huge_cache = NULL;
  hz_huge_cached_bytes = 0;
  hz_huge_tail_count = 0;
}
