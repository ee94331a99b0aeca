/* Segments, the segment map and the global span pool.
 *
 * Address space comes from the OS in regions (HAKOZUNA_ARENA_RESERVE MiB),
 * cut into 4 MiB segments. Each segment tracks its 128 slices in two bitmaps:
 * free (in the pool) and dirty (free but possibly still backed by memory).
 * Spans are runs of slices; bitmaps make coalescing free runs automatic.
 * Dirty slices are returned with madvise once they have been free for
 * HAKOZUNA_PURGE_DELAY ms: from the allocating threads' slow paths, from a
 * small background thread while the program idles, and at once on
 * malloc_trim / hz_collect. */
#define _GNU_SOURCE
#include "internal.h"

#include <signal.h>
#include <string.h>
#include <time.h>

uint8_t hz_segmap[HZ_SEGMAP_LEN];

static hz_lock_t hz_arena_lock = HZ_LOCK_INIT;
static hz_segment_t *hz_segments;      /* every segment, newest first */
static hz_segment_t *hz_segment_hint;  /* where the last search succeeded */
static uintptr_t hz_region_next, hz_region_end;
static uint64_t hz_segment_count, hz_reserved_bytes;
static uint64_t hz_free_clean_slices;  /* free slices known not to be backed */
static uint64_t hz_dirty_slices;
static uint64_t hz_last_purge_ms;

static pthread_cond_t hz_purge_cv = PTHREAD_COND_INITIALIZER;
static bool hz_purge_thread_started, hz_purge_thread_idle;

void hz_arena_init(void) { hz_last_purge_ms = hz_os_now_ms(); }

/* ---- bitmap helpers (128 bits as two words) ---- */
static inline bool bit_get(const uint64_t *m, size_t i) { return (m[i >> 6] >> (i & 63)) & 1; }
static inline void bits_set(uint64_t *m, size_t i, size_t n, bool on) {
  for (size_t j = i; j < i + n; j++) {
    if (on) m[j >> 6] |= (uint64_t)1 << (j & 63);
    else m[j >> 6] &= ~((uint64_t)1 << (j & 63));
  }
}
static size_t bits_count(const uint64_t *m, size_t i, size_t n) {
  size_t c = 0;
  for (size_t j = i; j < i + n; j++) c += bit_get(m, j);
  return c;
}

/* First run of n free slices starting at a multiple of align; 0 if none
 * (slice 0 is the header, never free). */
static size_t segment_find_run(const hz_segment_t *seg, size_t n, size_t align) {
  size_t run = 0;
  for (size_t i = 1; i < HZ_SLICES; i++) {
    if (!bit_get(seg->free_mask, i)) { run = 0; continue; }
    if (run == 0 && (i % align) != 0) continue;
    if (++run == n) return i + 1 - n;
  }
  return 0;
}

static hz_segment_t *segment_new(void) {
  if (hz_region_next == hz_region_end) {
    size_t want = (size_t)hz_opt(HZ_OPTION_ARENA_RESERVE) << 20;
    want = (want + HZ_SEG_MASK) & ~HZ_SEG_MASK;
    void *r = hz_os_map(want, HZ_SEG_SIZE);
    if (r == NULL && want > HZ_SEG_SIZE) r = hz_os_map(want = HZ_SEG_SIZE, HZ_SEG_SIZE);
    if (r == NULL) return NULL;
    if (hz_opt(HZ_OPTION_THP)) hz_os_advise_huge(r, want, true);
    hz_region_next = (uintptr_t)r;
    hz_region_end = hz_region_next + want;
    hz_reserved_bytes += want;
  }
  hz_segment_t *seg = (hz_segment_t *)hz_region_next;
  hz_region_next += HZ_SEG_SIZE;
  /* Fresh OS memory is zero: descriptors start as free spans (kind 0). */
  for (size_t i = 0; i < HZ_SLICES; i++) seg->slice_span[i] = &seg->spans[i];
  bits_set(seg->free_mask, 1, HZ_SLICES - 1, true);
  seg->free_slices = HZ_SLICES - 1;
  seg->next = hz_segments;
  hz_segments = seg;
  hz_segment_count++;
  hz_free_clean_slices += HZ_SLICES - 1;
  hz_segmap[(uintptr_t)seg >> HZ_SEG_SHIFT] = HZ_MAP_SPANS;
  return seg;
}

static hz_span_t *segment_take(hz_segment_t *seg, size_t idx, size_t n) {
  size_t dirty = bits_count(seg->dirty_mask, idx, n);
  bits_set(seg->free_mask, idx, n, false);
  bits_set(seg->dirty_mask, idx, n, false);
  seg->free_slices -= (uint32_t)n;
  hz_free_clean_slices -= n - dirty;
  hz_dirty_slices -= dirty;
  for (size_t i = idx; i < idx + n; i++) seg->slice_span[i] = &seg->spans[idx];
  hz_span_t *s = &seg->spans[idx];
  memset(s, 0, sizeof *s);
  s->slice_index = (uint16_t)idx;
  s->slice_count = (uint16_t)n;
  s->start = (uintptr_t)seg + idx * HZ_SLICE_SIZE;
  s->zeroed = dirty == 0;
  return s;
}

hz_span_t *hz_arena_alloc_span(size_t n, size_t align) {
  hz_span_t *s = NULL;
  hz_lock(&hz_arena_lock);
  hz_segment_t *first = hz_segment_hint ? hz_segment_hint : hz_segments;
  for (int pass = 0; pass < 2 && s == NULL; pass++) {
    for (hz_segment_t *seg = pass ? hz_segments : first; seg != NULL; seg = seg->next) {
      if (pass && seg == first) break;
      if (seg->free_slices < n) continue;
      size_t idx = segment_find_run(seg, n, align);
      if (idx) { s = segment_take(seg, idx, n); hz_segment_hint = seg; break; }
    }
  }
  if (s == NULL) {
    hz_segment_t *seg = segment_new();
    size_t idx = seg ? segment_find_run(seg, n, align) : 0;
    if (idx) { s = segment_take(seg, idx, n); hz_segment_hint = seg; }
  }
  hz_unlock(&hz_arena_lock);
  return s;
}

static void purge_locked(bool force);
static void purge_thread_start(void);

void hz_arena_free_span(hz_span_t *s) {
  hz_segment_t *seg = hz_segment_of((void *)s->start);
  size_t idx = s->slice_index, n = s->slice_count;
  s->kind = HZ_SPAN_FREE;
  s->heap = NULL;
  s->free = s->local_free = NULL;
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  uint64_t now = hz_os_now_ms();
  bool start_thread = false;
  hz_lock(&hz_arena_lock);
  bits_set(seg->free_mask, idx, n, true);
  bits_set(seg->dirty_mask, idx, n, true);
  seg->free_slices += (uint32_t)n;
  seg->freed_at = now;
  hz_dirty_slices += n;
  if (delay == 0) purge_locked(true);
  else if (delay > 0 && now - hz_last_purge_ms >= (uint64_t)delay) purge_locked(false);
  if (delay > 0 && hz_opt(HZ_OPTION_PURGE_THREAD)) {
    if (!hz_purge_thread_started) start_thread = hz_purge_thread_started = true;
    else if (hz_purge_thread_idle) pthread_cond_signal(&hz_purge_cv);
  }
  hz_unlock(&hz_arena_lock);
  if (start_thread) purge_thread_start();
}

/* Return dirty free slices: all of them (force) or those free for longer
 * than the purge delay. */
static void purge_locked(bool force) {
  uint64_t now = hz_os_now_ms();
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
  hz_last_purge_ms = now;
  if (hz_dirty_slices == 0) return;
  for (hz_segment_t *seg = hz_segments; seg != NULL; seg = seg->next) {
    if (!(seg->dirty_mask[0] | seg->dirty_mask[1])) continue;
    if (!force && (delay < 0 || now - seg->freed_at < (uint64_t)delay)) continue;
    for (size_t i = 1; i < HZ_SLICES;) {
      if (!bit_get(seg->dirty_mask, i)) { i++; continue; }
      size_t j = i;
      while (j < HZ_SLICES && bit_get(seg->dirty_mask, j)) j++;
      hz_os_purge((char *)seg + i * HZ_SLICE_SIZE, (j - i) * HZ_SLICE_SIZE);
      bits_set(seg->dirty_mask, i, j - i, false);
      hz_dirty_slices -= j - i;
      hz_free_clean_slices += j - i;
      i = j;
    }
  }
}

void hz_arena_purge(bool force) {
  hz_lock(&hz_arena_lock);
  purge_locked(force);
  hz_unlock(&hz_arena_lock);
}

/* Blocks in use per class, from the spans themselves (racy reads of other
 * threads' counts: good enough for statistics). */
void hz_arena_live_blocks(uint64_t live[HZ_NCLASS]) {
  hz_lock(&hz_arena_lock);
  for (hz_segment_t *seg = hz_segments; seg != NULL; seg = seg->next)
    for (size_t i = 1; i < HZ_SLICES; i++) {
      const hz_span_t *s = &seg->spans[i];
      if (seg->slice_span[i] == s && s->kind == HZ_SPAN_SMALL) live[s->cls] += s->used - s->pinned;
    }
  hz_unlock(&hz_arena_lock);
}

void hz_arena_counters(uint64_t *segments, uint64_t *reserved, uint64_t *committed) {
  hz_lock(&hz_arena_lock);
  *segments = hz_segment_count;
  *reserved = hz_reserved_bytes;
  /* Everything in segments except free slices known clean (headers count). */
  *committed = (hz_segment_count * HZ_SLICES - hz_free_clean_slices) * HZ_SLICE_SIZE;
  hz_unlock(&hz_arena_lock);
}

/* ---- the purge thread ----
 * Sleeps until memory is freed to the pool, then wakes every purge delay
 * until nothing dirty is left; a program that frees and then idles gets its
 * memory returned without calling the allocator again. */
static void *purge_thread_main(void *arg) {
  (void)arg;
  hz_lock(&hz_arena_lock);
  for (;;) {
    long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
    if (hz_dirty_slices == 0 || delay < 0) {
      hz_purge_thread_idle = true;
      pthread_cond_wait(&hz_purge_cv, &hz_arena_lock.m);
      hz_purge_thread_idle = false;
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ms = delay < 10 ? 10 : delay;
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&hz_purge_cv, &hz_arena_lock.m, &ts);
    purge_locked(false);
    hz_unlock(&hz_arena_lock);
    hz_huge_purge(false);
    hz_heaps_collect_abandoned();
    hz_lock(&hz_arena_lock);
  }
  return NULL;
}

static void purge_thread_start(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits: no signals */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t t;
  int rc = pthread_create(&t, &attr, purge_thread_main, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) pthread_setname_np(t, "hakozuna-purge");
  else hz_verbose("cannot start the purge thread (error %d); purging from allocating threads only", rc);
}

void hz_arena_fork_prepare(void) { hz_lock(&hz_arena_lock); }
void hz_arena_fork_parent(void) { hz_unlock(&hz_arena_lock); }
void hz_arena_fork_child(void) {
  hz_lock_reinit(&hz_arena_lock);
  pthread_cond_init(&hz_purge_cv, NULL);
  hz_purge_thread_started = hz_purge_thread_idle = false; /* threads do not survive fork */
}
