// SPDX-License-Identifier: MIT
/* Statistics: per-thread plain counters (no atomics on the fast path),
 * summed over all heaps on demand; the text report, JSON and mallinfo all
 * read the same hz_stats_t. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

/* Scalar fields of hz_stats_t, in the order the text and JSON show them. */
#define HZ_STATS_SCALARS(X)                                                                                   \
  X(thread_count) X(large_allocs) X(large_frees) X(large_live_bytes) X(huge_allocs) X(huge_frees)           \
  X(huge_live_bytes) X(segments) X(bytes_reserved) X(bytes_committed) X(bytes_in_use) X(bytes_returned)    \
  X(mmap_calls) X(munmap_calls) X(madvise_calls) X(peak_rss) X(current_rss) X(bytes_allocated)              \
  X(bytes_committed_peak) X(blocks_live) X(unused_in_spans) X(unused_empty_spans) X(unused_span_cache)       \
  X(unused_huge_cache) X(unused_purge_backlog) X(unused_stashed) X(metadata) X(mprotect_calls) X(other_os_calls)

static int stats_get(hz_stats_t *out);

/* Committed bytes now and at most (arena and huge blocks), changed on the
 * slow paths that commit or return memory. */
static _Atomic int64_t hz_committed_now;
static _Atomic uint64_t hz_committed_peak;

hz_hot_text void hz_stats_commit(int64_t delta) {
  int64_t now = atomic_fetch_add_explicit(&hz_committed_now, delta, memory_order_relaxed) + delta;
  uint64_t peak = atomic_load_explicit(&hz_committed_peak, memory_order_relaxed);
  while (now > 0 && (uint64_t)now > peak &&
         !atomic_compare_exchange_weak_explicit(&hz_committed_peak, &peak, (uint64_t)now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* A caller built with an older header gets the fields its hz_stats_t has. */
#define HZ_STATS_V1_SIZE offsetof(hz_stats_t, bytes_allocated)

HZ_EXPORT int hz_stats_get(hz_stats_t *out) {
  if (out == NULL || out->size < HZ_STATS_V1_SIZE) {
    errno = EINVAL;
    return -1;
  }
  if (out->size >= sizeof(hz_stats_t)) return stats_get(out);
  hz_stats_t *st = hz_stats_new();
  if (st == NULL) return -1;
  st->version = 1;
  st->size = out->size;
  memcpy(out, st, out->size);
  hz_stats_delete(st);
  return 0;
}

/* (Not inlined, as hz_malloc in hz_stats_new is not: under valgrind, which
 * replaces both, mallinfo2 freed memcheck's block with the free inlined in
 * alloc.c, and aborted on an invalid pointer.) */
hz_noinline void hz_stats_delete(hz_stats_t *st) { hz_free(st); }

/* p is a small block of class c (not sampled by the profiler, which gives
 * blocks large spans of their own). */
static bool in_spans_of_class(const void *p, uint32_t c) {
  if (hz_segmap_get(p) != HZ_MAP_SPANS) return false;
  const hz_span_t *s = hz_span_of(p);
  return s->kind == HZ_SPAN_SMALL && s->cls == c;
}

/* The statistics in a block of our own, NULL (ENOMEM) if none: the struct is
 * 5.6 KiB, and malloc_trim, mallinfo2 and the reports may run on a thread's
 * stack of 16 KiB (PTHREAD_STACK_MIN), which a few copies overflowed. */
hz_stats_t *hz_stats_new(void) {
  hz_stats_t *st = hz_malloc(sizeof *st);
  if (st == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  stats_get(st);
  /* The snapshot leaves its own block out: a program that allocated
   * nothing had 1 block live in every report, and mallinfo2 counted it. */
  uint32_t c = hz_class_of(sizeof *st + HZ_CANARY_SIZE);
  hz_class_stats_t *cs = &st->classes[c];
  if (in_spans_of_class(st, c) && cs->live > 0 && cs->mallocs > 0) {
    cs->live--;
    cs->mallocs--;
    st->blocks_live--;
    st->bytes_in_use -= hz_class_size(c);
    st->bytes_allocated -= hz_class_size(c);
    st->unused_in_spans += hz_class_size(c);
  }
  return st;
}

/* Where committed memory that holds no live block is, the blocks live and
 * the bytes ever allocated (the fields since version 2). */
static void stats_get_usage(hz_stats_t *out) {
  hz_arena_usage_t u;
  hz_arena_usage(&u);
  out->unused_in_spans = u.span_free;
  out->unused_empty_spans = u.empty_spans;
  out->unused_span_cache = u.span_cache;
  out->unused_purge_backlog = u.dirty;
  out->metadata = u.headers;
  uint64_t huge_allocs, huge_frees, huge_live;
  hz_huge_counters(&huge_allocs, &huge_frees, &huge_live, &out->unused_huge_cache);
  out->blocks_live = out->large_allocs - out->large_frees + out->huge_allocs - out->huge_frees;
  out->bytes_allocated = hz_huge_allocated_bytes();
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all) out->bytes_allocated += h->n.large_bytes_allocated;
  for (uint32_t c = 0; c < out->class_count; c++) {
    out->blocks_live += out->classes[c].live;
    out->bytes_allocated += out->classes[c].mallocs * hz_class_size(c);
  }
  out->bytes_committed_peak = atomic_load_explicit(&hz_committed_peak, memory_order_relaxed);
}

/* A heap's small mallocs by class, read while its thread may run: again
 * if a countdown restarted meanwhile (hz_heap_count_restart). Between
 * restarts each only grows, so a read never goes back. */
static void heap_mallocs(const hz_heap_t *h, uint64_t out[HZ_NCLASS]) {
  for (int tries = 0; tries < 1000; tries++) {
    uint32_t before = __atomic_load_n(&h->n.restarts, __ATOMIC_ACQUIRE);
    for (int c = 0; c < HZ_NCLASS; c++)
      out[c] = __atomic_load_n(&h->n.malloc[c], __ATOMIC_RELAXED) -
               (uint64_t)__atomic_load_n(&h->n.sample_left[c], __ATOMIC_RELAXED);
    atomic_thread_fence(memory_order_acquire);
    if (!(before & 1) && __atomic_load_n(&h->n.restarts, __ATOMIC_RELAXED) == before) return;
  }
}

static int stats_get(hz_stats_t *out) {
  hz_init();
  memset(out, 0, sizeof *out);
  out->version = HZ_STATS_VERSION;
  out->size = sizeof *out;
  out->class_count = HZ_NCLASS;
  hz_class_stats_t *cs = out->classes;
  /* a block may be freed by another heap than its allocator */
  int64_t large_bytes = atomic_load_explicit(&hz_remote_orphan_large_bytes, memory_order_relaxed);
  int64_t transit_large = -large_bytes; /* large bytes freed, their span not yet back with its owner */
  uint64_t back[HZ_NCLASS] = {0}, held[HZ_NCLASS] = {0}, live[HZ_NCLASS] = {0}, transit_bytes = 0;
  uint64_t stashed[HZ_NCLASS] = {0}, stashed_bytes = 0;
  for (int c = 0; c <= HZ_NCLASS; c++) {
    uint64_t orphans = atomic_load_explicit(&hz_remote_orphans[c], memory_order_relaxed);
    if (c < HZ_NCLASS) cs[c].remote_frees = orphans;
    else out->large_frees = orphans;
  }
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all) {
    out->thread_count += h->live;
    uint64_t mallocs[HZ_NCLASS];
    heap_mallocs(h, mallocs);
    for (int c = 0; c < HZ_NCLASS; c++) {
      cs[c].mallocs += mallocs[c];
      cs[c].remote_frees += h->n.remote_free[c];
      back[c] += h->n.remote_back[c] + h->n.adopted[c]; /* (on a stash, not in transit) */
#if HZ_CHECKED
      held[c] += h->quarantined[c]; /* freed, not yet back in their span */
#endif
      stashed[c] += hz_stash_count(h, (uint32_t)c); /* freed, out of their span (stash.c) */
      cs[c].refills += h->n.refill[c];
      cs[c].peak += h->n.span_blocks_peak[c];
    }
    out->large_allocs += h->n.malloc[HZ_CLASS_LARGE];
    out->large_frees += h->n.large_frees;
    large_bytes += h->n.large_bytes;
    transit_large += (int64_t)(h->n.remote_large_sent - h->n.remote_large_back);
  }
  out->large_live_bytes = large_bytes > 0 ? (uint64_t)large_bytes : 0;
  hz_arena_live_blocks(live);
#if HZ_CHECKED
  /* 0-byte blocks, slots of a segment of no access, as the default build's
   * malloc(0): blocks of the first class */
  uint64_t zero_allocs = atomic_load_explicit(&hz_zero_allocs, memory_order_relaxed);
  uint64_t zero_frees = atomic_load_explicit(&hz_zero_frees, memory_order_relaxed);
  cs[HZ_FIRST_CLASS].mallocs += zero_allocs;
  live[HZ_FIRST_CLASS] += zero_allocs > zero_frees ? zero_allocs - zero_frees : 0;
#endif
  for (int c = 0; c < HZ_NCLASS; c++) {
    cs[c].block_size = hz_class_size((uint32_t)c) - HZ_CANARY_SIZE;
    uint64_t stash = live[c] > stashed[c] ? stashed[c] : live[c];
    live[c] -= stash;
    stashed_bytes += stash * hz_class_size((uint32_t)c);
    /* blocks freed by other threads and not yet back in their span are freed */
    uint64_t transit = (cs[c].remote_frees > back[c] ? cs[c].remote_frees - back[c] : 0) + held[c];
    transit = live[c] > transit ? transit : live[c];
    live[c] -= transit;
    transit_bytes += transit * hz_class_size((uint32_t)c);
    cs[c].live = live[c] < cs[c].mallocs ? live[c] : cs[c].mallocs;
    cs[c].frees = cs[c].mallocs - cs[c].live;
    /* Other threads' counters are read one after another while they run, so
     * the spans may show mallocs the counters read earlier did not: live is
     * held to mallocs above, and remote frees, counted by the threads that
     * freed, to frees (an exit report taken while threads ran showed more
     * remote frees than frees; tests/options/stats.c "snapshot"). */
    if (cs[c].remote_frees > cs[c].frees) cs[c].remote_frees = cs[c].frees;
    out->bytes_in_use += cs[c].live * hz_class_size((uint32_t)c);
  }
  uint64_t huge_cached;
  hz_huge_counters(&out->huge_allocs, &out->huge_frees, &out->huge_live_bytes, &huge_cached);
  hz_arena_counters(&out->segments, &out->bytes_reserved, &out->bytes_committed);
  out->bytes_reserved += out->huge_live_bytes + huge_cached;
  out->bytes_committed += out->huge_live_bytes + huge_cached;
  out->bytes_in_use += out->large_live_bytes + out->huge_live_bytes;
  out->bytes_returned = atomic_load_explicit(&hz_os_stats.bytes_returned, memory_order_relaxed);
  out->mmap_calls = atomic_load_explicit(&hz_os_stats.mmap_calls, memory_order_relaxed);
  out->munmap_calls = atomic_load_explicit(&hz_os_stats.munmap_calls, memory_order_relaxed);
  out->madvise_calls = atomic_load_explicit(&hz_os_stats.madvise_calls, memory_order_relaxed);
  out->mprotect_calls = atomic_load_explicit(&hz_os_stats.mprotect_calls, memory_order_relaxed);
  out->other_os_calls = atomic_load_explicit(&hz_os_stats.other_calls, memory_order_relaxed);
  out->peak_rss = hz_os_peak_rss();
  out->current_rss = hz_os_rss();
  /* read after the peak: the resident set may have grown in between. The
   * two come from different counters (statm's can be above getrusage's
   * peak), so the peak is also held to the highest one reported before. */
  static _Atomic uint64_t peak_reported;
  uint64_t before = atomic_load_explicit(&peak_reported, memory_order_relaxed);
  if (out->peak_rss < out->current_rss) out->peak_rss = out->current_rss;
  while (out->peak_rss > before &&
         !atomic_compare_exchange_weak_explicit(&peak_reported, &before, out->peak_rss, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  if (out->peak_rss < before) out->peak_rss = before;
  stats_get_usage(out);
  /* freed blocks still on their way back to their span */
  out->unused_in_spans += transit_bytes + (transit_large > 0 ? (uint64_t)transit_large : 0);
  out->unused_stashed = stashed_bytes;
  return 0;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* A byte count in at most 7 characters: 512, 12.3K, 4.0M, 1.5G. */
static const char *human(char buf[16], uint64_t b) {
  static const char units[] = "KMGTP";
  if (b < 1024) {
    snprintf(buf, 16, "%llu", (unsigned long long)b);
    return buf;
  }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  snprintf(buf, 16, "%.1f%c", v, units[u]);
  return buf;
}

/* The report: the options in effect, a row per size class in use (blocks,
 * then bytes), where the memory is, and at exit the blocks never freed. */
static void stats_report(FILE *f, const hz_stats_t *st, bool at_exit) {
  char b1[16], b2[16], b3[16], b4[16], b5[16], b6[16], b7[16];
  fprintf(f, "hakozuna %s statistics, pid %d\n", HZ_LIB_VERSION, hz_os_pid());
  hz_options_print(f);
  fprintf(f, "%7s %10s %10s %12s %12s %12s %10s %9s %9s %9s\n", "block", "live", "peak*", "mallocs", "frees",
          "remote", "refills", "allocB", "liveB", "peak*B");
  for (uint32_t c = 0; c < st->class_count; c++) {
    const hz_class_stats_t *cs = &st->classes[c];
    if (cs->mallocs == 0 && cs->frees == 0) continue;
    fprintf(f, "%7zu %10llu %10llu %12llu %12llu %12llu %10llu %9s %9s %9s\n", cs->block_size,
            (unsigned long long)cs->live, (unsigned long long)cs->peak, (unsigned long long)cs->mallocs,
            (unsigned long long)cs->frees, (unsigned long long)cs->remote_frees, (unsigned long long)cs->refills,
            human(b1, cs->mallocs * cs->block_size), human(b2, cs->live * cs->block_size),
            human(b3, cs->peak * cs->block_size));
  }
  fprintf(f, "  large %10llu %10s %12llu %12llu %12s %10s %9s %9s\n",
          (unsigned long long)(st->large_allocs - st->large_frees), "-", (unsigned long long)st->large_allocs,
          (unsigned long long)st->large_frees, "-", "-", "-", human(b1, st->large_live_bytes));
  fprintf(f, "   huge %10llu %10s %12llu %12llu %12s %10s %9s %9s\n",
          (unsigned long long)(st->huge_allocs - st->huge_frees), "-", (unsigned long long)st->huge_allocs,
          (unsigned long long)st->huge_frees, "-", "-", "-", human(b1, st->huge_live_bytes));
  fprintf(f, "  * peak: most blocks of the class in spans at once, summed over thread heaps (at least the\n"
             "    most ever live at once); allocB, liveB, peak*B: those counts times the block size\n");
  fprintf(f, "bytes: %s allocated in all, %s live in %llu blocks; committed %s now, %s at most\n",
          human(b1, st->bytes_allocated), human(b2, st->bytes_in_use), (unsigned long long)st->blocks_live,
          human(b3, st->bytes_committed), human(b4, st->bytes_committed_peak));
  fprintf(f, "memory: %.1f MiB reserved, %.1f MiB committed, %.1f MiB in use, %.1f MiB returned to the OS\n",
          mib(st->bytes_reserved), mib(st->bytes_committed), mib(st->bytes_in_use), mib(st->bytes_returned));
  fprintf(f, "committed, not in use: %s free in spans in use, %s stashed, %s empty spans kept, %s span caches, "
             "%s huge cache, %s purge backlog; %s metadata\n",
          human(b1, st->unused_in_spans), human(b7, st->unused_stashed), human(b2, st->unused_empty_spans),
          human(b3, st->unused_span_cache), human(b4, st->unused_huge_cache), human(b5, st->unused_purge_backlog),
          human(b6, st->metadata));
  fprintf(f, "process: rss %.1f MiB now, %.1f MiB peak; %u thread heaps live, %llu segments\n", mib(st->current_rss),
          mib(st->peak_rss), st->thread_count, (unsigned long long)st->segments);
  fprintf(f, "os calls: %llu mmap, %llu munmap, %llu madvise, %llu mprotect, %llu other\n",
          (unsigned long long)st->mmap_calls, (unsigned long long)st->munmap_calls,
          (unsigned long long)st->madvise_calls, (unsigned long long)st->mprotect_calls,
          (unsigned long long)st->other_os_calls);
  if (at_exit)
    fprintf(f, "%llu blocks (%s) still live at exit\n", (unsigned long long)st->blocks_live,
            human(b1, st->bytes_in_use));
}

/* malloc_info(): glibc's XML layout, so tools that parse glibc's output read
 * ours. One <heap>: the free blocks of each size class (as glibc lists its
 * free chunks by size), then the totals. "rest" is every committed byte not
 * in use; "mmap" the huge blocks; system current/max the committed bytes now
 * and at most; aspace the address space reserved and committed. */
static void info_totals(FILE *out, uint64_t free_count, uint64_t unused, const hz_stats_t *mmap) {
  fprintf(out, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n",
          (unsigned long long)free_count, (unsigned long long)unused);
  if (mmap)
    fprintf(out, "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n",
            (unsigned long long)(mmap->huge_allocs - mmap->huge_frees), (unsigned long long)mmap->huge_live_bytes);
}

static void info_system(FILE *out, const hz_stats_t *st) {
  fprintf(out, "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
               "<aspace type=\"total\" size=\"%llu\"/>\n<aspace type=\"mprotect\" size=\"%llu\"/>\n",
          (unsigned long long)st->bytes_committed, (unsigned long long)st->bytes_committed_peak,
          (unsigned long long)st->bytes_reserved, (unsigned long long)st->bytes_committed);
}

void hz_stats_malloc_info(FILE *out) {
  hz_stats_t *st = hz_stats_new();
  if (st == NULL) return;
  uint64_t capacity[HZ_NCLASS] = {0};
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all)
    for (int c = 0; c < HZ_NCLASS; c++) capacity[c] += h->n.span_blocks[c];
  uint64_t free_count = 0;
  uint64_t unused = st->unused_in_spans + st->unused_stashed + st->unused_empty_spans + st->unused_span_cache +
                    st->unused_huge_cache + st->unused_purge_backlog;
  fprintf(out, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  size_t from = 1;
  for (uint32_t c = 0; c < st->class_count; c++) {
    size_t to = st->classes[c].block_size;
    uint64_t n = capacity[c] > st->classes[c].live ? capacity[c] - st->classes[c].live : 0;
    if (n) fprintf(out, "  <size from=\"%zu\" to=\"%zu\" total=\"%llu\" count=\"%llu\"/>\n", from, to,
                   (unsigned long long)(n * to), (unsigned long long)n);
    free_count += n;
    from = to + 1;
  }
  fprintf(out, "</sizes>\n");
  info_totals(out, free_count, unused, NULL);
  info_system(out, st);
  fprintf(out, "</heap>\n");
  info_totals(out, free_count, unused, st);
  info_system(out, st);
  fprintf(out, "</malloc>\n");
  hz_stats_delete(st);
}

/* ---- messages to the program's hooks ---- */
static hz_output_fn *_Atomic hz_output_hook;
static void *_Atomic hz_output_arg;

HZ_EXPORT void hz_set_output(hz_output_fn *fn, void *arg) {
  atomic_store(&hz_output_arg, arg);
  atomic_store(&hz_output_hook, fn);
}

/* Text for the output hook, or for stderr without one. */
void hz_output(const char *msg, size_t n) {
  hz_output_fn *fn = atomic_load(&hz_output_hook);
  if (fn) fn(msg, atomic_load(&hz_output_arg));
  else hz_os_write(2, msg, n);
}

bool hz_output_hooked(void) { return atomic_load(&hz_output_hook) != NULL; }

/* Text of many lines for the output hook: a line (at most 511 bytes) per
 * call, as the hook's contract says. */
void hz_output_text(const char *buf, size_t n) {
  char piece[512];
  for (size_t done = 0; done < n;) {
    size_t k = 0;
    while (done + k < n && k < sizeof piece - 1 && (k == 0 || buf[done + k - 1] != '\n')) k++;
    memcpy(piece, buf + done, k);
    piece[k] = 0;
    hz_output(piece, k);
    done += k;
  }
}

/* A stdio stream into the output hook. */
static ssize_t hook_write(void *cookie, const char *buf, size_t n) {
  (void)cookie;
  hz_output_text(buf, n);
  return (ssize_t)n;
}

/* Report st to f, or to the output hook (stderr without one); frees st.
 * (The snapshot is taken before a stream is opened for it, whose buffers
 * would count as the program's blocks.) */
static void stats_report_to(FILE *f, hz_stats_t *st, bool at_exit) {
  if (st == NULL) return;
  if (f) {
    stats_report(f, st, at_exit);
    hz_stats_delete(st);
    return;
  }
#ifdef _WIN32
  /* no fopencookie: the report goes through a temporary file */
  FILE *hook = atomic_load(&hz_output_hook) ? tmpfile() : NULL;
  if (hook == NULL) {
    stats_report(stderr, st, at_exit);
    hz_stats_delete(st);
    return;
  }
  stats_report(hook, st, at_exit);
  hz_stats_delete(st);
  rewind(hook);
  char line[512];
  while (fgets(line, sizeof line, hook)) hook_write(NULL, line, strlen(line)); /* a line per call */
  fclose(hook);
#else
  cookie_io_functions_t io = {.write = hook_write};
  FILE *hook = atomic_load(&hz_output_hook) ? fopencookie(NULL, "w", io) : NULL;
  if (hook == NULL) {
    stats_report(stderr, st, at_exit);
    hz_stats_delete(st);
    return;
  }
  char line[512];
  setvbuf(hook, line, _IOLBF, sizeof line);
  stats_report(hook, st, at_exit);
  hz_stats_delete(st);
  fclose(hook);
#endif
}

/* stdio's writes and fclose are cancellation points: a thread with a cancel
 * pending would stop halfway through the report and leak the snapshot
 * (os.c, hz_os_nocancel_begin). */
HZ_EXPORT void hz_stats_print(FILE *f) {
  int cs = hz_os_nocancel_begin();
  stats_report_to(f, hz_stats_new(), false);
  hz_os_nocancel_end(cs);
}

/* snprintf that appends and keeps counting past the end, like snprintf. */
typedef struct { char *buf; size_t len, pos; } hz_out_t;
static void outf(hz_out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = o->pos < o->len ? o->buf + o->pos : NULL;
  int n = vsnprintf(dst, dst ? o->len - o->pos : 0, fmt, ap);
  va_end(ap);
  if (n > 0) o->pos += (size_t)n;
}

HZ_EXPORT size_t hz_stats_json(char *buf, size_t len) {
  hz_out_t o = {buf, len, 0};
  if (buf && len) buf[0] = 0;
  hz_stats_t *st = hz_stats_new();
  if (st == NULL) return 0;
  outf(&o, "{\"version\":%u,\"allocator\":\"hakozuna %s\"", st->version, HZ_LIB_VERSION);
#define HZ_JSON_FIELD(f) outf(&o, ",\"" #f "\":%llu", (unsigned long long)st->f);
  HZ_STATS_SCALARS(HZ_JSON_FIELD)
#undef HZ_JSON_FIELD
  outf(&o, ",\"classes\":[");
  bool first = true;
  for (uint32_t c = 0; c < st->class_count; c++) {
    const hz_class_stats_t *cs = &st->classes[c];
    if (cs->mallocs == 0 && cs->frees == 0) continue;
    outf(&o, "%s{\"block_size\":%zu,\"live\":%llu,\"peak\":%llu,\"mallocs\":%llu,\"frees\":%llu,\"remote_frees\":%llu,"
             "\"refills\":%llu",
         first ? "" : ",", cs->block_size, (unsigned long long)cs->live, (unsigned long long)cs->peak,
         (unsigned long long)cs->mallocs, (unsigned long long)cs->frees, (unsigned long long)cs->remote_frees,
         (unsigned long long)cs->refills);
    outf(&o, ",\"allocated_bytes\":%llu,\"live_bytes\":%llu,\"peak_bytes\":%llu}",
         (unsigned long long)(cs->mallocs * cs->block_size), (unsigned long long)(cs->live * cs->block_size),
         (unsigned long long)(cs->peak * cs->block_size));
    first = false;
  }
  outf(&o, "]}");
  hz_stats_delete(st);
  return o.pos;
}

/* Built with -DHZ_LIB_VERSION from the Makefile's VERSION (or the crate's). */
HZ_EXPORT const char *hz_version_string(void) { return HZ_LIB_VERSION; }

HZ_EXPORT int hz_version(void) {
  int part[3] = {0, 0, 0}, i = 0;
  for (const char *c = HZ_LIB_VERSION; *c && i < 3; c++) {
    if (*c == '.') i++;
    else if (*c >= '0' && *c <= '9') part[i] = part[i] * 10 + (*c - '0');
    else break; /* a pre-release suffix */
  }
  return part[0] * 10000 + part[1] * 100 + part[2];
}

/* Where the exit report goes. A stats file is opened at exit, in the
 * directory the program started in (it may change directory), named for
 * the pid then: a descriptor held from the start was inherited by forked
 * children, whose reports went into the parent's file, and its number was
 * one a shell or daemon may give a file of its own. The file is created at
 * the start, so that a name it cannot have is reported then, and the
 * report appended to it at exit: the processes of a build or a pipeline
 * that share the name all leave theirs (%p: a file each). For stderr a duplicate is kept from the start (programs like coreutils
 * close stderr before exiting), used only if it still refers to what it
 * did. */
static int hz_stats_fd = -1;
static hz_os_file_id_t hz_stats_fd_id;
static bool hz_stats_to_path;
hz_cold_bss char hz_stats_dir[4096];
hz_cold_bss char hz_stats_buf[32768]; /* a report in one write: reports sharing a file stay whole */

/* (static buffers: the constructor and the destructor, which use them, run
 * once, and the destructor possibly on a thread's small stack) */
hz_cold_bss char hz_stats_path[4096 + 4096];
hz_cold_bss char hz_stats_name[4096];
static bool stats_path(char *out, size_t size) {
  char *name = hz_stats_name;
  if (!hz_option_path(HZ_OPTION_STATS_FILE, name, sizeof hz_stats_name)) return false;
  bool absolute = name[0] == '/' || name[0] == '\\' || (name[0] != 0 && name[1] == ':');
  int n = snprintf(out, size, "%s%s", absolute ? "" : hz_stats_dir, name);
  return n > 0 && (size_t)n < size;
}

__attribute__((constructor)) static void hz_stats_ctor(void) {
  hz_init();
  hz_options_late_init();
  if (hz_opt(HZ_OPTION_STATS_FILE)) {
    if (hz_os_cwd(hz_stats_dir, sizeof hz_stats_dir - 1)) strcat(hz_stats_dir, "/");
    else hz_stats_dir[0] = 0;
    char *path = hz_stats_path;
    int fd = stats_path(path, sizeof hz_stats_path) ? hz_os_open_report(path, true) : -ENAMETOOLONG;
    if (fd >= 0) {
      hz_os_close(fd);
      hz_stats_to_path = true;
    } else {
      /* (a program run with few descriptors -- GNU tar's tests do -- has none left for it) */
      hz_warning("HAKOZUNA_STATS_FILE=\"%s\" cannot be opened for writing (errno %d%s); the report goes to stderr",
                 hz_option_get_string(HZ_OPTION_STATS_FILE), -fd,
                 -fd == EMFILE || -fd == ENFILE ? ": no file descriptor left" : "");
    }
    hz_options[HZ_OPTION_STATS] = 1;
  }
  if (hz_opt(HZ_OPTION_STATS) && !hz_stats_to_path) {
    hz_stats_fd = hz_os_open_report(NULL, false);
    hz_stats_fd_id = hz_os_fd_id(hz_stats_fd);
  }
}

__attribute__((destructor)) static void hz_stats_dtor(void) {
  if (!hz_opt(HZ_OPTION_STATS)) return;
  int cs = hz_os_nocancel_begin(); /* (as hz_stats_print: exit runs this in the program's thread) */
  /* The output hook, when the program set one, takes the place of stderr. */
  bool to_file = hz_stats_to_path || !atomic_load(&hz_output_hook);
  int fd = -1;
  char *path = hz_stats_path;
  if (hz_stats_to_path) {
    if (stats_path(path, sizeof hz_stats_path)) fd = hz_os_open_report(path, true);
  } else if (hz_os_fd_is(hz_stats_fd, hz_stats_fd_id)) {
    fd = hz_stats_fd;
  }
  hz_stats_t *st = hz_stats_new(); /* (before fdopen's stream) */
  FILE *f = to_file && fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f) setvbuf(f, hz_stats_buf, _IOFBF, sizeof hz_stats_buf);
  stats_report_to(f ? f : to_file ? stderr : NULL, st, true);
  if (f) fclose(f);
  hz_os_nocancel_end(cs);
}
