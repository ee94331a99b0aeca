// SPDX-License-Identifier: MIT
/* Threads and their heaps: a heap's setup, adoption and abandonment, and
 * what heaps give back (collection).
 *
 * A new thread's heap pointer is the static empty heap, whose current spans
 * are all empty, so its first malloc misses into heap.c, which asks
 * hz_heap_get for a heap: an abandoned one, with all its spans, or a new
 * one. When a thread exits, its heap gives back what it does not use and is
 * abandoned, for the next new thread to adopt. Collection (malloc_trim,
 * hz_collect, out of memory, thread exit) walks a heap's classes under its
 * slow-path guard (hz_heap_enter). A fork child makes every heap of a lost
 * thread abandoned. The heap layer's lists and spans are heap.c's. */
#define _GNU_SOURCE
#include "internal.h"

#include <string.h>

static hz_lock_t hz_heaps_lock = HZ_LOCK_INIT;
static _Atomic(hz_heap_t *) hz_heaps_all;
static hz_heap_t *hz_heaps_abandoned;
static hz_thread_key_t hz_heap_key;
static _Atomic bool hz_heap_key_ready;
static char *hz_meta_next, *hz_meta_end;

static void heap_key_destructor(void *arg);

/* Start-up's last steps: the key whose destructor abandons an exiting
 * thread's heap. glibc may allocate in pthread_key_create: a heap made by
 * that allocation is registered once the key exists. */
void hz_thread_key_init(void) {
  if (atomic_load_explicit(&hz_heap_key_ready, memory_order_relaxed)) return;
  if (!hz_os_thread_key(&hz_heap_key, heap_key_destructor)) {
    hz_warning("pthread_key_create failed: heaps of exiting threads will not be reused");
    return;
  }
  atomic_store_explicit(&hz_heap_key_ready, true, memory_order_release);
  hz_heap_t *h = hz_tls_heap;
  if (h != &hz_heap_empty) hz_os_thread_key_set(hz_heap_key, h);
}

/* Heaps are never unmapped (they are recycled), so they come from a bump
 * allocator over OS memory. Called with hz_heaps_lock held. */
static void *meta_alloc(size_t size) {
  size = (size + 63) & ~(size_t)63;
  if ((size_t)(hz_meta_end - hz_meta_next) < size) {
    size_t chunk = size > (1u << 20) ? size : (1u << 20);
    char *p = hz_os_map(chunk, 0);
    if (p == NULL) return NULL;
    hz_meta_next = p;
    hz_meta_end = p + chunk;
  }
  void *r = hz_meta_next;
  hz_meta_next += size;
  return r;
}

/* Heaps handed to threads, under hz_heaps_lock (hz_thread_single). */
static uint32_t thread_heaps_set_up;

/* The program has run no second thread, as far as can be told, for choices
 * of memory and of the purge thread (not of safety: the heap's barrier asks
 * hz_os_single_threaded). glibc says; where the C library does not (musl),
 * no second thread has taken a heap: one that never allocates goes unseen,
 * and treating every program as threaded started the purge thread in all
 * (unshare(CLONE_NEWUSER) then failed) and reserved every region whole. */
bool hz_thread_single(void) {
  return hz_os_threads_known() ? hz_os_single_threaded() : __atomic_load_n(&thread_heaps_set_up, __ATOMIC_RELAXED) <= 1;
}

/* The one exited thread's heap that waits with its current spans and
 * stashes for the next thread (hz_heap_abandon), or NULL. One: threads that
 * all run at once keep their heaps, and what each exited one kept was fresh
 * memory for the next (thread_flood 1000 threads: 73 -> 1,500 MiB). */
static _Atomic(hz_heap_t *) heap_kept;
static void heap_kept_ends(hz_heap_t *h) {
  hz_heap_t *k = h;
  atomic_compare_exchange_strong(&heap_kept, &k, NULL);
}

/* Start-up has run (the entry points in alloc.c see to it), or is running
 * on this thread and everything used here is set. */
static hz_noinline hz_heap_t *heap_setup(void) {
  hz_lock(&hz_heaps_lock);
  hz_heap_t *h = hz_heaps_abandoned;
  if (h != NULL) {
    hz_heaps_abandoned = h->next_abandoned;
    h->adoptions++;
    heap_kept_ends(h);
  } else if ((h = meta_alloc(HZ_HEAP_STRIDE)) != NULL) {
    static uint32_t heaps_made;
    h->arena = hz_arena_pick(heaps_made++);
    for (uint32_t c = 0; c < HZ_NCLASS; c++) h->cur[c] = &hz_span_empty;
    /* (with HAKOZUNA_STASH=0 too: the trap is there; a class whose stash
     * would hold no block installs none) */
    h->stash = HZ_STASHED ? meta_alloc(HZ_STASH_AREA) : NULL;
    if (h->stash != NULL) hz_stash_trap_init(h);
    h->next_all = atomic_load_explicit(&hz_heaps_all, memory_order_relaxed);
    atomic_store_explicit(&hz_heaps_all, h, memory_order_release);
  }
  if (h) {
    __atomic_fetch_add(&thread_heaps_set_up, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->live, true, __ATOMIC_RELAXED); /* (the idle trim reads it unlocked) */
    hz_tls_heap = h; /* under the lock: a fork child rebuilding the heap list sees it is ours */
  }
  hz_unlock(&hz_heaps_lock);
  if (h == NULL) return NULL;
  /* (the program may have become threaded: the next safe point may start the purge thread) */
  atomic_store_explicit(&hz_purge_skip, 0, memory_order_relaxed);
  if (!hz_thread_single()) { /* it does, with nothing waiting yet (purge.c) */
    int none = 0;
    atomic_compare_exchange_strong(&hz_purge_pending, &none, HZ_PURGE_RESTART);
  }
  /* may allocate (keys beyond 32); the heap is already usable then */
  if (atomic_load_explicit(&hz_heap_key_ready, memory_order_acquire)) hz_os_thread_key_set(hz_heap_key, h);
  return h;
}

hz_heap_t *hz_heap_get(void) {
  hz_heap_t *h = hz_tls_heap;
  if (hz_unlikely(h == &hz_heap_empty)) h = heap_setup();
  return h;
}

hz_heap_t *hz_heaps_first(void) { return atomic_load_explicit(&hz_heaps_all, memory_order_acquire); }

bool hz_heaps_live(void) {
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all)
    if (__atomic_load_n(&h->live, __ATOMIC_RELAXED)) return true;
  return false;
}

/* A list whose head has not moved since its last purge (or idle trim) had
 * no block freed onto it since: only its head, which may have been handed
 * out and freed again, is purged again. Programs that call malloc_trim
 * often (stress-ng's malloc stressor, every 8th round) made a madvise call
 * for every free block over a page at every call. A block whose pages went
 * back keeps a mark in its third word (in its first page, which stays): a
 * later walk skips it unless the block was handed out and written since.
 * Threads that each took over an exited one's heap, used a few of its free
 * blocks and left some live purged all of them again at every exit: 107
 * madvise calls a thread, 4x glibc's system time (docs/perf.md §81). (A
 * block handed out and freed with that word unchanged keeps its pages
 * until its span empties: resident memory, never a wrong answer.) */
static inline uintptr_t purged_mark(const hz_block_t *b) { return ((uintptr_t)b ^ hz_key) * 0x9e3779b97f4a7c15ull; }
static void span_purge_free_blocks(hz_span_t *s) {
  hz_block_t *head = s->free;
  if (head == NULL) return;
  bool again = head == s->trim_head;
  s->trim_head = head;
  for (hz_block_t *b = head; b != NULL; b = again ? NULL : hz_next_decode(b, b->next)) {
    uintptr_t *mark = (uintptr_t *)(b + 1), m = purged_mark(b);
    if (*mark == m) continue;
    hz_heap_block_purge(b, s->block_size);
    *mark = m;
  }
}

/* Give back what a heap holds but does not use: empty spans (all, or those
 * kept longer than the purge delay) and remote frees waiting in its inbox;
 * when forced, also the free pages inside partly used spans: inside blocks
 * over a page, and, for the program's own request (pages: malloc_trim,
 * hz_collect), those that hold only free blocks smaller than a page, as the
 * idle trim returns them (trim.c; not at every thread's exit: a walk of
 * every free block). Nothing here may allocate (the purge thread is
 * started by the layer above, after this returns). */
static void heap_collect_class(hz_heap_t *h, uint32_t c, bool force, bool blocks, bool pages) {
  if (force) hz_heap_set_cur(h, c, &hz_span_empty);
  bool purge_blocks = force && blocks && !HZ_CHECKED && hz_class_size(c) > hz_os_page_size;
  bool trim_pages = pages && !purge_blocks && !HZ_CHECKED && !HZ_NOCHECK; /* (free tags: trim.c) */
  /* Empty spans are unlinked during the walk and retired after it: the
   * walk itself calls nothing but madvise, so nothing can change the list
   * under it (a retire once started the purge thread from here, whose TLS
   * allocation drained the inbox and retired the span the walk had saved
   * as next: issue 10, case 3). */
  hz_span_t *empty = NULL;
  for (hz_span_t *s = h->lists[c], *next; s != NULL; s = next) {
    next = s->next;
    if (hz_span_used(s) == 0) {
      if (h->spare[c] == s) h->spare[c] = NULL;
      hz_heap_list_remove(h, s);
      s->next = empty;
      empty = s;
    } else if (purge_blocks) {
      span_purge_free_blocks(s);
    } else if (trim_pages) {
      hz_trim_span_pages(s, s->free);
    }
  }
  while (empty != NULL) {
    hz_span_t *s = empty;
    empty = s->next;
    s->next = NULL;
    hz_heap_retire_span(h, s, false);
  }
}

/* (blocks: with force, the pages inside free blocks over a page go too) */
static void heap_collect(hz_heap_t *h, bool force, bool may_cache, bool blocks, bool pages) {
  hz_heap_enter(h);
  /* The drain first: the checked build holds the large spans it frees in
   * the quarantine, which an exited thread's heap, collected only when
   * frees arrive, would otherwise keep until the next ones (2.5 MiB after
   * malloc_trim in tests/options/live). Then what the quarantine lets go
   * to other heaps is sent. */
  hz_remote_drain(h);
  if (force) hz_quarantine_flush(h);
  /* (first: spans it empties are retired below, and the blocks of other
   * heaps it held go out with the flush) */
  if (force) hz_stash_empty(h);
  hz_remote_flush(h);
  for (uint32_t w = 0; w < sizeof h->classes / sizeof h->classes[0]; w++)
    for (uint64_t m = h->classes[w]; m != 0; m &= m - 1) {
      uint32_t c = w * 64 + (uint32_t)__builtin_ctzll(m);
      heap_collect_class(h, c, force, blocks, pages);
      if (*hz_heap_cur_slot(h, c) == &hz_span_empty && h->lists[c] == NULL) h->classes[w] &= ~((uint64_t)1 << (c % 64));
    }
  hz_heap_flush_cache(h, force || !may_cache);
  hz_heap_leave(h);
}

void hz_heap_collect(hz_heap_t *h, bool force) { heap_collect(h, force, true, force, force); }

/* Out of memory for a huge block: what the calling thread's heap keeps
 * unused (empty spans, its cache, the checked build's quarantine) goes back
 * to the pool first. */
void hz_heap_collect_own(void) {
  hz_heap_t *h = hz_tls_heap;
  if (h != &hz_heap_empty && h->live) hz_heap_collect(h, true);
}

/* malloc_trim: a forced collect, but its walk of the partly used spans'
 * free pages (a madvise call for nearly each) runs at most every 10 ms in
 * a thread; the calls in between return empty spans and the span cache.
 * Programs that call malloc_trim all the time paid the walk each time:
 * stress-ng's malloc stressor, which calls it every 8th round, ran at 0.55x
 * glibc's speed; 3.2x with this (RSS +17%; every 100 ms: 3.9x, +64%). */
#define HZ_TRIM_WALK_MS 10
void hz_heap_trim(hz_heap_t *h) {
  uint64_t now = hz_os_now_ms();
  bool walk = h->trim_walk_ms == 0 || now - h->trim_walk_ms >= HZ_TRIM_WALK_MS;
  if (walk) h->trim_walk_ms = now;
  heap_collect(h, walk, false, walk, walk);
}

/* Inside a slow path until it is listed: the idle trim, which reads live,
 * keeps off meanwhile, and the heap is out of it before a thread can adopt
 * it (busy is the owner's). Its inbox is taken, its outboxes are sent, and
 * its stashed blocks, empty spans and span cache go to the pool at once;
 * the pages inside its free blocks over a page wait a purge delay
 * (hz_heaps_collect_abandoned collects them after that). Unless another
 * exited heap does already (heap_kept), its current spans and installed
 * stashes wait too, for the next thread to take the heap over as it is: a
 * program that runs a thread per task had every thread set up each class
 * again (thread_churn 500 32 16 32768 1 8: 57,000 instructions a thread,
 * 39,000 now; docs/perf.md §92), after it faulted in those pages anew (27
 * page faults and 3.3 madvise calls a thread, against rpmalloc's 18 and 1:
 * §90). The checked build's quarantine waits the delay too. With no purge
 * delay everything goes at once (with -1, never, the pages stay). */
void hz_heap_abandon(hz_heap_t *h) {
  hz_heap_enter(h);
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  hz_heap_t *none = NULL;
  bool keep = delay > 0 && atomic_compare_exchange_strong(&heap_kept, &none, h);
  if (keep) hz_stash_empty(h); /* (heap_collect's, but for its current spans) */
  heap_collect(h, !keep, false, delay == 0, false);
  hz_lock(&hz_heaps_lock);
  __atomic_store_n(&h->live, false, __ATOMIC_RELAXED);
  h->abandoned_epoch = atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed);
  h->blocks_waiting = delay > 0;
  h->next_abandoned = hz_heaps_abandoned;
  hz_heaps_abandoned = h;
  hz_heap_leave(h);
  hz_unlock(&hz_heaps_lock);
  atomic_store_explicit(&hz_purge_pending, 1, memory_order_seq_cst); /* (the destructor polls next) */
}

static void heap_key_destructor(void *arg) {
  hz_heap_t *h = arg;
  if (h == NULL || h != hz_tls_heap || hz_os_process_ending()) return;
  hz_tls_heap = &hz_heap_empty; /* (a later malloc of this thread, in another destructor, takes a heap again) */
  hz_heap_abandon(h);
  /* A safe point (no lock held, nothing half changed), and often the last
   * call of a thread that freed other threads' blocks: their owners may
   * idle, and only the purge thread returns what waits for them. */
  hz_purge_poll();
}

/* Remote frees keep arriving at the heaps of exited threads; return what
 * they free (called by the purge thread and hz_collect). */
/* Exited threads' heaps: the frees other threads sent them are taken in,
 * and once a purge delay has passed since the exit (the epoch moved on), or
 * at once when `all`, what hz_heap_abandon left for the next thread goes
 * too: current spans, stashes, the pages inside free blocks over a page.
 * True while some heap's still wait. */
bool hz_heaps_collect_abandoned(bool all) {
  uint64_t epoch = atomic_load_explicit(&hz_purge_epoch, memory_order_relaxed);
  bool left = false;
  hz_lock(&hz_heaps_lock);
  for (hz_heap_t *h = hz_heaps_abandoned; h != NULL; h = h->next_abandoned) {
    bool blocks = all || !h->blocks_waiting || epoch != h->abandoned_epoch;
    if (atomic_load_explicit(&h->inbox, memory_order_relaxed) || (h->blocks_waiting && blocks)) {
      heap_collect(h, true, false, blocks, false);
      heap_kept_ends(h);
      if (blocks) h->blocks_waiting = false;
    }
    left |= h->blocks_waiting;
  }
  hz_unlock(&hz_heaps_lock);
  return left;
}

HZ_EXPORT void hz_thread_done(void) {
  hz_heap_t *h = hz_tls_heap;
  if (h == &hz_heap_empty) return;
  hz_tls_heap = &hz_heap_empty;
  if (atomic_load_explicit(&hz_heap_key_ready, memory_order_acquire)) hz_os_thread_key_set(hz_heap_key, NULL);
  hz_heap_abandon(h);
}

/* ---- fork (init.c): in the child, only this thread is left ----
 * Every other heap lost its thread: it becomes abandoned, for the child's
 * next threads to adopt, unless its thread was inside a slow path (its lists
 * may be torn: it is left alone, its memory lost to the child). The list of
 * abandoned heaps is rebuilt from the list of all heaps (whose links are
 * published in order), so it does not matter whether a lost thread was
 * changing it, unless this thread was (a fork from a signal handler that
 * interrupted it): then nothing is touched. */
void hz_heap_fork_child(void) {
  if (hz_lock_lost_in_fork(&hz_heaps_lock)) hz_meta_next = hz_meta_end = NULL; /* maybe half carved */
  else if (hz_lock_held_here(&hz_heaps_lock)) return;
  hz_heap_t *mine = hz_tls_heap, *abandoned = NULL;
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all) {
    /* a span cache the lost purge thread was taking from may be torn: its
     * spans are lost to the child (an owner's own changes show as busy) */
    if (atomic_load_explicit(&h->cache_taking, memory_order_relaxed)) {
      memset(h->cache, 0, sizeof h->cache);
      h->cache_slices = 0;
      atomic_store_explicit(&h->cache_taking, 0, memory_order_relaxed);
    }
    /* the purge thread, lost, may have claimed it: its trim changes no list */
    atomic_fetch_and_explicit(&h->trim, ~(uint32_t)HZ_TRIM_CLAIMED, memory_order_relaxed);
    if (h == mine) continue;
    h->live = false;
    if (h->busy) continue;
    h->next_abandoned = abandoned;
    abandoned = h;
  }
  hz_heaps_abandoned = abandoned;
  /* (the kept heap may be one left alone above: none is, for the child) */
  atomic_store_explicit(&heap_kept, NULL, memory_order_relaxed);
}
