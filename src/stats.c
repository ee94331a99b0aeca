// SPDX-License-Identifier: MIT
/* Statistics: per-thread plain counters (no atomics on the fast path),
 * summed over all heaps on demand; the text report, JSON and mallinfo all
 * read the same hz_stats_t. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Scalar fields of hz_stats_t, in the order the text and JSON show them. */
#define HZ_STATS_SCALARS(X)                                                                                   \
  X(thread_count) X(large_allocs) X(large_frees) X(large_live_bytes) X(huge_allocs) X(huge_frees)           \
  X(huge_live_bytes) X(segments) X(bytes_reserved) X(bytes_committed) X(bytes_in_use) X(bytes_returned)    \
  X(mmap_calls) X(munmap_calls) X(madvise_calls) X(peak_rss) X(current_rss)

HZ_EXPORT int hz_stats_get(hz_stats_t *out) {
  if (out == NULL || out->size < sizeof(hz_stats_t)) {
    errno = EINVAL;
    return -1;
  }
  hz_init();
  memset(out, 0, sizeof *out);
  out->version = HZ_STATS_VERSION;
  out->size = sizeof *out;
  out->class_count = HZ_NCLASS;
  hz_class_stats_t *cs = out->classes;
  int64_t large_bytes = 0; /* a block may be freed by another heap than its allocator */
  for (hz_heap_t *h = hz_heaps_first(); h != NULL; h = h->next_all) {
    out->thread_count += h->live;
    for (int c = 0; c < HZ_NCLASS; c++) {
      cs[c].mallocs += h->n.malloc[c];
      cs[c].remote_frees += h->n.remote_free[c];
      cs[c].refills += h->n.refill[c];
      cs[c].peak += h->n.span_blocks_peak[c];
    }
    out->large_allocs += h->n.malloc[HZ_CLASS_LARGE];
    out->large_frees += h->n.large_frees;
    large_bytes += h->n.large_bytes;
  }
  out->large_live_bytes = large_bytes > 0 ? (uint64_t)large_bytes : 0;
  uint64_t live[HZ_NCLASS] = {0};
  hz_arena_live_blocks(live);
  for (int c = 0; c < HZ_NCLASS; c++) {
    cs[c].block_size = hz_class_size((uint32_t)c) - HZ_CANARY_SIZE;
    cs[c].live = live[c] < cs[c].mallocs ? live[c] : cs[c].mallocs;
    cs[c].frees = cs[c].mallocs - cs[c].live;
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
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) out->peak_rss = (uint64_t)ru.ru_maxrss * 1024;
  out->current_rss = hz_os_rss();
  return 0;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

HZ_EXPORT void hz_stats_print(FILE *f) {
  hz_stats_t st = {.size = sizeof st};
  if (f == NULL || hz_stats_get(&st) != 0) return;
  fprintf(f, "hakozuna %s statistics, pid %d\n", HZ_LIB_VERSION,
          (int)getpid());
  fprintf(f, "%7s %10s %10s %12s %12s %12s %10s\n", "block", "live", "peak*", "mallocs", "frees", "remote", "refills");
  for (uint32_t c = 0; c < st.class_count; c++) {
    const hz_class_stats_t *cs = &st.classes[c];
    if (cs->mallocs == 0 && cs->frees == 0) continue;
    fprintf(f, "%7zu %10llu %10llu %12llu %12llu %12llu %10llu\n", cs->block_size, (unsigned long long)cs->live,
            (unsigned long long)cs->peak, (unsigned long long)cs->mallocs, (unsigned long long)cs->frees,
            (unsigned long long)cs->remote_frees, (unsigned long long)cs->refills);
  }
  fprintf(f, "  large %10llu %10s %12llu %12llu  (%.1f MiB live)\n",
          (unsigned long long)(st.large_allocs - st.large_frees), "-", (unsigned long long)st.large_allocs,
          (unsigned long long)st.large_frees, mib(st.large_live_bytes));
  fprintf(f, "   huge %10llu %10s %12llu %12llu  (%.1f MiB live)\n",
          (unsigned long long)(st.huge_allocs - st.huge_frees), "-", (unsigned long long)st.huge_allocs,
          (unsigned long long)st.huge_frees, mib(st.huge_live_bytes));
  fprintf(f, "  * peak: most blocks of the class in spans at once, summed over thread heaps\n");
  fprintf(f, "memory: %.1f MiB reserved, %.1f MiB committed, %.1f MiB in use, %.1f MiB returned to the OS\n",
          mib(st.bytes_reserved), mib(st.bytes_committed), mib(st.bytes_in_use), mib(st.bytes_returned));
  fprintf(f, "process: rss %.1f MiB now, %.1f MiB peak; %u thread heaps live, %llu segments\n", mib(st.current_rss),
          mib(st.peak_rss), st.thread_count, (unsigned long long)st.segments);
  fprintf(f, "os calls: %llu mmap, %llu munmap, %llu madvise\n", (unsigned long long)st.mmap_calls,
          (unsigned long long)st.munmap_calls, (unsigned long long)st.madvise_calls);
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
  hz_stats_t st = {.size = sizeof st};
  hz_stats_get(&st);
  hz_out_t o = {buf, len, 0};
  if (buf && len) buf[0] = 0;
  outf(&o, "{\"version\":%u,\"allocator\":\"hakozuna %s\"", st.version, HZ_LIB_VERSION);
#define HZ_JSON_FIELD(f) outf(&o, ",\"" #f "\":%llu", (unsigned long long)st.f);
  HZ_STATS_SCALARS(HZ_JSON_FIELD)
#undef HZ_JSON_FIELD
  outf(&o, ",\"classes\":[");
  bool first = true;
  for (uint32_t c = 0; c < st.class_count; c++) {
    const hz_class_stats_t *cs = &st.classes[c];
    if (cs->mallocs == 0 && cs->frees == 0) continue;
    outf(&o, "%s{\"block_size\":%zu,\"live\":%llu,\"peak\":%llu,\"mallocs\":%llu,\"frees\":%llu,\"remote_frees\":%llu,"
             "\"refills\":%llu}",
         first ? "" : ",", cs->block_size, (unsigned long long)cs->live, (unsigned long long)cs->peak,
         (unsigned long long)cs->mallocs, (unsigned long long)cs->frees, (unsigned long long)cs->remote_frees,
         (unsigned long long)cs->refills);
    first = false;
  }
  outf(&o, "]}");
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

/* Programs like coreutils close stderr before exiting; when the report is
 * asked for, keep a descriptor of our own for it. The stats file is opened
 * now, so a program that changes directory still writes where it was asked. */
static int hz_stats_fd = -1;

__attribute__((constructor)) static void hz_stats_ctor(void) {
  hz_init();
  hz_options_late_init();
  char path[4096];
  if (hz_opt(HZ_OPTION_STATS_FILE)) {
    if (hz_option_path(HZ_OPTION_STATS_FILE, path, sizeof path) && (hz_stats_fd = hz_os_open_report(path)) >= 0)
      hz_options[HZ_OPTION_STATS] = 1;
    else
      hz_warning("HAKOZUNA_STATS_FILE=\"%s\" cannot be opened for writing; the report goes to stderr",
                 hz_option_get_string(HZ_OPTION_STATS_FILE));
  }
  if (hz_opt(HZ_OPTION_STATS) && hz_stats_fd < 0) hz_stats_fd = hz_os_open_report(NULL);
}

__attribute__((destructor)) static void hz_stats_dtor(void) {
  if (!hz_opt(HZ_OPTION_STATS)) return;
  FILE *f = hz_stats_fd >= 0 ? fdopen(hz_stats_fd, "w") : NULL;
  hz_stats_print(f ? f : stderr);
  if (f) fclose(f);
}
