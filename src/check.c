// SPDX-License-Identifier: MIT
/* Misuse reports, and the checked build's extra checks: block fills and
 * canaries, guard blocks and closed spans, the quarantine, 0-byte blocks.
 *
 * Every report is one line on stderr naming the call, the problem and the
 * pointer, then abort() (HAKOZUNA_CHECK=0: the block is leaked and the
 * program goes on). Messages are formatted on the stack and written with
 * write(2): the heap may be the thing that is broken. */
#include "internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hz_output_fn *_Atomic hz_error_hook;
static void *_Atomic hz_error_arg;

HZ_EXPORT void hz_set_error(hz_output_fn *fn, void *arg) {
  atomic_store(&hz_error_arg, arg);
  atomic_store(&hz_error_hook, fn);
}

/* One formatted line to the error hook or stderr; verbose diagnostics go to
 * the output hook instead. */
static void vreport_to(bool verbose, int fd, const char *prefix, const char *fmt, va_list ap) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "hakozuna: %s", prefix);
  if (n < 0) n = 0;
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  buf[len] = 0;
  /* (a program's hook may write with stdio: cancellation points, see os.c) */
  int cs = hz_os_nocancel_begin();
  hz_output_fn *fn = verbose ? NULL : atomic_load(&hz_error_hook);
  if (verbose) hz_output(buf, len);
  else if (fn) fn(buf, atomic_load(&hz_error_arg));
  else hz_os_write(fd, buf, len);
  hz_os_nocancel_end(cs);
}

static void vreport(const char *prefix, const char *fmt, va_list ap) { vreport_to(false, 2, prefix, fmt, ap); }

void hz_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("", fmt, ap);
  va_end(ap);
  hz_os_abort();
}

void hz_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("warning: ", fmt, ap);
  va_end(ap);
}

/* A warning at exit, to fd: a duplicate of stderr taken at the start, as
 * programs like coreutils close stderr before exiting. */
void hz_warning_to(int fd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport_to(false, fd, "warning: ", fmt, ap);
  va_end(ap);
}

void hz_verbose(const char *fmt, ...) {
  if (!hz_opt(HZ_OPTION_VERBOSE)) return;
  va_list ap;
  va_start(ap, fmt);
  vreport_to(true, 2, "", fmt, ap);
  va_end(ap);
}

static void misuse(const char *fmt, ...) {
  hz_options_init(); /* the check level is an option */
  va_list ap;
  va_start(ap, fmt);
  vreport("", fmt, ap);
  va_end(ap);
  if (hz_opt(HZ_OPTION_CHECK) != 0) hz_os_abort();
}

void hz_misuse_foreign(const void *p, const char *fn) {
  if (hz_segmap_get(p) == HZ_MAP_GONE)
    misuse("%s(): %s %p, or a pointer into it (a huge block, whose memory already went back to the system)", fn,
           strcmp(fn, "malloc_usable_size") == 0 ? "use of the freed block" : "double free of", p);
  else
    misuse("%s(): invalid pointer %p (not allocated by hakozuna)", fn, p);
}

void hz_misuse_interior(const void *p, const void *block, size_t size, const char *fn) {
  misuse("%s(): invalid pointer %p (inside a block of %zu bytes at %p)", fn, p, size, block);
}

void hz_misuse_double(const void *p, size_t size, const char *fn) {
  if (strcmp(fn, "malloc_usable_size") == 0) /* the one call here that does not free */
    misuse("%s(): use of the freed block %p (block of %zu bytes)", fn, p, size);
  else
    misuse("%s(): double free of %p (block of %zu bytes)", fn, p, size);
}

void hz_misuse_trimmed(const void *block, size_t size) {
  misuse("free(): double free of %p, or a write to it after its free (block of %zu bytes; found when its "
         "returned page was used again)",
         block, size);
}

void hz_misuse_trimmed_free(const void *block, size_t size) {
  misuse("free(): double free of %p (block of %zu bytes, in a page returned to the OS since its first free)",
         block, size);
}

void hz_misuse_size(const void *p, size_t given, size_t size, const char *fn) {
  misuse("%s(): size %zu does not match the block %p (%zu bytes)", fn, given, p, size);
}

/* A pointer into span memory that the fast path refused: report what is
 * wrong with it, or return its span if nothing is. */
hz_span_t *hz_check_span_ptr(const void *p, const char *fn) {
  uint8_t m = hz_segmap_get(p);
  if (m == HZ_MAP_HUGE || m == HZ_MAP_HUGE_TAIL) return NULL;
  if (m != HZ_MAP_SPANS) {
    hz_misuse_foreign(p, fn);
    return NULL;
  }
  hz_span_t *s = hz_span_of(p);
  uintptr_t a = (uintptr_t)p;
  if (s->kind == HZ_SPAN_FREE) {
    /* its span went back to the pool: the block was freed before */
    if (s->block_size && a >= s->start && !hz_span_misaligned(s, a)) hz_misuse_double(p, s->block_size, fn);
    else hz_misuse_foreign(p, fn);
    return NULL;
  }
  uint64_t handed = s->kind == HZ_SPAN_SMALL ? hz_span_carved_seen(s) * s->block_size : s->block_size;
  if (a >= s->start && a - s->start >= handed) {
    /* no block was ever handed out here */
    if (a - s->start >= (uintptr_t)s->capacity * s->block_size)
      misuse("%s(): invalid pointer %p (in the tail of a span of %zu-byte blocks, past its last block)", fn, p,
             (size_t)s->block_size - HZ_CANARY_SIZE);
    else
      misuse("%s(): invalid pointer %p (in a span of %zu-byte blocks, where no block was handed out yet)", fn, p,
             (size_t)s->block_size - HZ_CANARY_SIZE);
    return NULL;
  }
  if (a < s->start || hz_span_misaligned(s, a)) {
    uintptr_t off = a >= s->start && s->kind == HZ_SPAN_SMALL ? a - s->start : 0;
    hz_misuse_interior(p, (void *)(s->start + off / s->block_size * s->block_size), s->block_size - HZ_CANARY_SIZE, fn);
    return NULL;
  }
  if (!HZ_NOCHECK && hz_block_is_free(s, p)) {
    hz_misuse_double(p, s->block_size - HZ_CANARY_SIZE, fn);
    return NULL;
  }
  return s;
}

/* ---- checked build: closed spans (defined in every build, called there only) ----
 * A freed large span is made inaccessible (and marked so in
 * its segment) until the span's memory is taken again. A marked span may
 * hold inaccessible pages and is opened before use; opening one that is not
 * marked would be a wasted call. (Returns whether any slice was marked.) */
bool hz_checked_span_mark(hz_span_t *s, bool mark) {
  hz_segment_t *seg = hz_segment_of((void *)s->start);
  bool was = false;
  for (size_t i = s->slice_index, end = i + s->slice_count; i < end;) {
    size_t w = i / 64, n = end - i < 64 - i % 64 ? end - i : 64 - i % 64;
    uint64_t bits = (n == 64 ? ~0ull : ((1ull << n) - 1)) << (i % 64);
    if (mark) atomic_fetch_or_explicit(&seg->protected_mask[w], bits, memory_order_relaxed);
    else was |= (atomic_fetch_and_explicit(&seg->protected_mask[w], ~bits, memory_order_relaxed) & bits) != 0;
    i += n;
  }
  return was;
}

/* Each guard page and closed span splits a mapping in two, and a process
 * has vm.max_map_count of them (65,530 by default): past that mprotect
 * fails. Closing a span that way leaves it open, and marked, so that its
 * live block's guard page is opened with it when it is taken again; a span
 * that cannot be opened must not be handed out (it was, and the first
 * write to it crashed: 40,000 live large blocks). False then. */
bool hz_checked_span_protect(hz_span_t *s, bool inaccessible) {
  bool was = hz_checked_span_mark(s, inaccessible);
  if (!inaccessible && !was) return true;
  int err = hz_os_protect((void *)hz_span_base(s), s->slice_count * HZ_SLICE_SIZE, !inaccessible);
  if (err == 0) return true;
  static _Atomic bool warned;
  if (!atomic_exchange_explicit(&warned, true, memory_order_relaxed))
    hz_warning("mprotect failed (errno %d): the process may be out of memory mappings (vm.max_map_count; the "
               "checked build's guard pages take one each) or of memory (RLIMIT_DATA, overcommit). Large blocks go "
               "unguarded, or fail, until some are freed",
               -err);
  if (!inaccessible) hz_checked_span_mark(s, true); /* still closed */
  return false;
}

/* Guard pages and closed spans stop short of the kernel's limit, so that
 * spans can still be opened and the program still map: a thousand threads,
 * each with large blocks live and its quarantine of closed spans, reached
 * it, and small mallocs returned NULL for spans that could not be opened
 * again. The credit is how many more may split a mapping (each into up to
 * three) before the mappings are counted again (/proc/self/maps: a few ms
 * with tens of thousands); an eighth of the limit stays free. Out of room,
 * guards are skipped, and counted again after a quarter as many skips as
 * there are mappings. */
static _Atomic long guard_credit;
static _Atomic long guard_recount_at;
bool hz_checked_guard_may_split(void) {
  long c = atomic_fetch_sub_explicit(&guard_credit, 1, memory_order_relaxed);
  if (c > 0) return true;
  if (c != 0 && c != -atomic_load_explicit(&guard_recount_at, memory_order_relaxed)) return false;
  long limit = hz_os_map_limit(), n = limit > 0 ? hz_os_map_count() : -1;
  if (n < 0) { /* no limit known: none kept */
    atomic_store_explicit(&guard_credit, LONG_MAX / 2, memory_order_relaxed);
    return true;
  }
  long room = limit - limit / 8 - n;
  if (room >= 4) {
    atomic_store_explicit(&guard_credit, room / 2 - 1, memory_order_relaxed);
    return true;
  }
  atomic_store_explicit(&guard_recount_at, n / 4 > 1024 ? n / 4 : 1024, memory_order_relaxed);
  atomic_store_explicit(&guard_credit, -1, memory_order_relaxed);
  static _Atomic bool told;
  if (!atomic_exchange_explicit(&told, true, memory_order_relaxed))
    hz_verbose("%ld of the process's %ld memory mappings (vm.max_map_count) in use: the checked build's "
               "guard pages and closed freed spans are skipped until some are gone",
               n, limit);
  return false;
}

#if HZ_CHECKED
/* Checked build: free blocks are filled with a pattern that malloc verifies
 * (a write after free shows). A small block's usable size is its request,
 * exactly: the bytes after it up to the block's last 8 (the redzone) hold
 * a pattern, and the last 8 the request, both keyed by the block's address;
 * free verifies them, so a write one byte past the request shows wherever
 * the class's rounding left room (a canary at the block's end missed those:
 * mimalloc-bench's security tests one_byte_overflow_medium and
 * 32_byte_overflow_medium). */
#define HZ_FREE_FILL 0xdf

/* Its first byte is 0: a string that fills its block to the last usable
 * byte still ends there. */
static uintptr_t canary_of(const hz_block_t *b) {
  return (~(hz_key ^ (uintptr_t)b) * 0x9e3779b97f4a7c15ull) & ~(uintptr_t)0xff;
}

/* Compared with memcmp (libc's vector code) a page of the fill at a time;
 * the byte that changed is looked for only in a page that differs. A byte
 * loop took half the checked build's time on blocks of a few KiB
 * (docs/perf.md §43). */
static const unsigned char fill_page[4096] = {[0 ... 4095] = HZ_FREE_FILL};
static void fill_intact(const hz_block_t *b, size_t bs) {
  const unsigned char *q = (const unsigned char *)b;
  for (size_t i = sizeof(hz_block_t); i < bs; i += sizeof fill_page) {
    size_t n = bs - i < sizeof fill_page ? bs - i : sizeof fill_page;
    if (hz_likely(memcmp(q + i, fill_page, n) == 0)) continue;
    for (size_t j = i; j < i + n; j++)
      if (q[j] != HZ_FREE_FILL)
        hz_fatal("malloc(): write after free detected in the free block %p (%zu bytes; byte %zu changed)",
                 (const void *)b, bs - HZ_CANARY_SIZE, j);
  }
}

void hz_checked_free_intact(const hz_block_t *b, size_t bs) {
  hz_checked_link(b, bs);
  fill_intact(b, bs);
}

/* The redzone's byte at offset i from the request's end. */
static inline unsigned char redzone_byte(uintptr_t canary, size_t i) { return (unsigned char)(canary >> (8 * (i & 7))); }

/* A block's last 8 bytes, an aligned word, are written and read whole: a
 * free of the next block reads them while another thread may free or
 * resize this one (see hz_checked_on_free). */
static inline uint64_t *last_word(const hz_block_t *b, size_t bs) { return (uint64_t *)((uintptr_t)b + bs - 8); }

void hz_checked_stamp(hz_block_t *b, size_t bs, size_t request) {
  unsigned char *q = (unsigned char *)b;
  uintptr_t c = canary_of(b);
  for (size_t i = request; i < bs - HZ_CANARY_SIZE; i++) q[i] = redzone_byte(c, i - request);
  __atomic_store_n(last_word(b, bs), c ^ ((uint64_t)request << 8), __ATOMIC_RELAXED);
}

size_t hz_checked_request(const hz_block_t *b, size_t bs, const char *fn) {
  const unsigned char *q = (const unsigned char *)b;
  uintptr_t c = canary_of(b);
  uint64_t t;
  memcpy(&t, q + bs - HZ_CANARY_SIZE, sizeof t);
  uint64_t x = t ^ c;
  size_t request = (size_t)(x >> 8), room = bs - HZ_CANARY_SIZE;
  if ((x & 0xff) != 0 || request > room)
    hz_fatal("%s(): buffer overflow detected: a write past the end of the block %p reached its last 8 bytes "
             "(the block has room for %zu)", fn, (const void *)b, room);
  for (size_t i = request; i < room; i++)
    if (q[i] != redzone_byte(c, i - request))
      hz_fatal("%s(): buffer overflow detected: byte %zu after the end of the block %p (%zu bytes) was overwritten",
               fn, i - request, (const void *)b, request);
  return request;
}

/* (the link was verified before malloc followed it) */
void hz_checked_on_alloc(hz_block_t *b, size_t bs, size_t request) {
  fill_intact(b, bs);
  hz_checked_stamp(b, bs, request);
}

void hz_checked_link(const hz_block_t *b, size_t bs) {
  if (!hz_block_is_free(NULL, b))
    hz_fatal("malloc(): write after free detected in the free block %p (%zu bytes; its first 16 bytes, the "
             "free-list link, changed)", (const void *)b, bs - HZ_CANARY_SIZE);
}

/* A write before the block (an underflow) lands in the last word of the
 * block before it, which is either its request record (in use) or fill
 * (free): free looks at it too. Each changes in one store, whichever thread
 * frees the block before (blocks are 32 bytes at least: HZ_FIRST_CLASS).
 * The first block has a guard block before it (heap.c, span_init_small). */
static bool before_intact(const hz_span_t *s, const hz_block_t *b) {
  size_t bs = s->block_size;
  const hz_block_t *prev = (const hz_block_t *)((uintptr_t)b - bs);
  uint64_t w = __atomic_load_n(last_word(prev, bs), __ATOMIC_RELAXED), x = w ^ canary_of(prev);
  if ((x & 0xff) == 0 && (x >> 8) <= bs - HZ_CANARY_SIZE) return true;
  return w == 0x0101010101010101ull * HZ_FREE_FILL;
}

void hz_checked_on_free(const hz_span_t *s, hz_block_t *b, const char *fn) {
  size_t bs = s->block_size;
  hz_checked_request(b, bs, fn);
  if (!before_intact(s, b))
    hz_fatal("%s(): buffer underflow detected: the 8 bytes before the block %p (%zu bytes) were overwritten", fn,
             (const void *)b, hz_checked_request(b, bs, fn));
  memset((char *)b + sizeof(hz_block_t), HZ_FREE_FILL, bs - sizeof(hz_block_t) - 8);
  __atomic_store_n(last_word(b, bs), 0x0101010101010101ull * HZ_FREE_FILL, __ATOMIC_RELAXED);
}

/* 0-byte blocks: reading or writing one faults. Each is a 16-byte slot of one
 * inaccessible segment, with a bitmap of the slots in use (a double free
 * shows); when the slots run out, malloc(0) gets an ordinary small block.
 * Lock-free, so that nothing here can be held across a fork. */
#define HZ_ZERO_SLOTS (HZ_SEG_SIZE / 16)
static _Atomic(char *) hz_zero_base;
static _Atomic bool hz_zero_failed;
static _Atomic uint64_t hz_zero_used[HZ_ZERO_SLOTS / 64];
static _Atomic size_t hz_zero_cursor;
_Atomic uint64_t hz_zero_allocs, hz_zero_frees; /* (statistics count them as blocks of the first class) */

static char *zero_segment(void) {
  char *base = atomic_load_explicit(&hz_zero_base, memory_order_acquire);
  if (base != NULL || atomic_load_explicit(&hz_zero_failed, memory_order_relaxed)) return base;
  char *m = hz_os_reserve(HZ_SEG_SIZE, HZ_SEG_SIZE, true); /* (inaccessible) */
  if (m == NULL) {
    atomic_store_explicit(&hz_zero_failed, true, memory_order_relaxed);
    return NULL;
  }
  hz_segmap_set((uintptr_t)m >> HZ_SEG_SHIFT, HZ_MAP_ZERO);
  if (!atomic_compare_exchange_strong_explicit(&hz_zero_base, &base, m, memory_order_acq_rel, memory_order_acquire)) {
    hz_segmap_set((uintptr_t)m >> HZ_SEG_SHIFT, HZ_MAP_NONE); /* another thread won */
    hz_os_unmap(m, HZ_SEG_SIZE);
    return base;
  }
  return m;
}

void *hz_zero_alloc(void) {
  char *base = zero_segment();
  if (base == NULL) return NULL;
  /* next fit from where the last search ended: freed slots are reused late */
  size_t start = atomic_load_explicit(&hz_zero_cursor, memory_order_relaxed);
  for (size_t n = 0; n < HZ_ZERO_SLOTS; n++) {
    size_t i = (start + n) % HZ_ZERO_SLOTS;
    uint64_t bit = 1ull << (i % 64);
    if (atomic_load_explicit(&hz_zero_used[i / 64], memory_order_relaxed) & bit) continue;
    if (atomic_fetch_or_explicit(&hz_zero_used[i / 64], bit, memory_order_relaxed) & bit) continue;
    atomic_store_explicit(&hz_zero_cursor, i + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hz_zero_allocs, 1, memory_order_relaxed);
    return base + i * 16;
  }
  return NULL;
}

/* The slot of p, or -1 after reporting what is wrong with p. */
static long zero_slot(const void *p, const char *fn) {
  char *base = atomic_load_explicit(&hz_zero_base, memory_order_acquire);
  uintptr_t off = (uintptr_t)p - (uintptr_t)base;
  if (base == NULL || off >= HZ_SEG_SIZE) {
    hz_misuse_foreign(p, fn);
    return -1;
  }
  if (off % 16 != 0) {
    hz_misuse_interior(p, base + off / 16 * 16, 0, fn);
    return -1;
  }
  return (long)(off / 16);
}

bool hz_zero_valid(const void *p, const char *fn) {
  long i = zero_slot(p, fn);
  if (i < 0) return false;
  if (atomic_load_explicit(&hz_zero_used[i / 64], memory_order_relaxed) & (1ull << (i % 64))) return true;
  hz_misuse_double(p, 0, fn);
  return false;
}

void hz_zero_free(void *p, const char *fn) {
  long i = zero_slot(p, fn);
  if (i < 0) return;
  uint64_t bit = 1ull << (i % 64);
  if (!(atomic_fetch_and_explicit(&hz_zero_used[i / 64], ~bit, memory_order_relaxed) & bit))
    hz_misuse_double(p, 0, fn);
  else
    atomic_fetch_add_explicit(&hz_zero_frees, 1, memory_order_relaxed);
}

/* ---- small spans' guard blocks ----
 * The first block's room is a guard. A write before the first block (an
 * underflow) changes the guard's last word, which free verifies as it
 * does the block before any other (hz_checked_on_free); it looks like
 * a free block and is never handed out. Blocks stay aligned as their size
 * is. (Retired spans start at their base again: heap_retire_span.) */
void hz_checked_span_guard(hz_span_t *s) {
  hz_block_t *guard = (hz_block_t *)hz_span_base(s);
  guard->next = hz_next_encode(guard, NULL);
  guard->tag = hz_block_tag(s, guard);
  memset(guard + 1, 0xdf, s->block_size - sizeof *guard);
  s->start = (uintptr_t)guard + s->block_size;
}

/* ---- the quarantine ----
 * Freed small blocks wait in a per-thread FIFO before going back to their
 * span, so a write through a dangling pointer lands in a free block, not in
 * the next block handed out, and shows when the block leaves (its fill and
 * link are verified). Freed large spans, inaccessible, wait in a second
 * FIFO before the pool may hand their memory out again. */
static void quarantine_release(hz_heap_t *h, hz_block_t *b) {
  hz_span_t *s = hz_span_of(b);
  hz_checked_free_intact(b, s->block_size);
  if (s->heap != h) {
    h->n.remote_free[s->cls]--; /* (counted when it came: hz_remote_free counts it again) */
    hz_remote_free(h, s, b);
    return;
  }
  h->quarantined[s->cls]--;
  if (hz_span_push(s, b)) hz_heap_free_slow(h, s);
}

/* Statistics count a block as freed from the free call on (stats.c): an own
 * block as held here, another thread's as a remote free, as it is when it
 * goes to its owner without waiting here. */
void hz_quarantine_put(hz_heap_t *h, hz_block_t *b) {
  hz_heap_enter(h);
  b->next = hz_next_encode(b, NULL);
  hz_block_retag(b); /* marks it free: a second free is a double free */
  hz_span_t *s = hz_span_of(b);
  if (s->heap == h) h->quarantined[s->cls]++;
  else h->n.remote_free[s->cls]++;
  hz_block_t *old = h->quarantine[h->quarantine_pos];
  h->quarantine[h->quarantine_pos] = b;
  h->quarantine_pos = (h->quarantine_pos + 1) % HZ_QUARANTINE;
  if (old != NULL) quarantine_release(h, old);
  hz_heap_leave(h);
}

void hz_quarantine_flush(hz_heap_t *h) {
  for (uint32_t i = 0; i < HZ_QUARANTINE; i++) {
    hz_block_t *b = h->quarantine[i];
    h->quarantine[i] = NULL;
    if (b != NULL) quarantine_release(h, b);
  }
  for (uint32_t i = 0; i < HZ_QUARANTINE_LARGE; i++) {
    if (h->quarantine_large[i] != NULL) hz_arena_free_span(h->quarantine_large[i], false);
    h->quarantine_large[i] = NULL;
  }
}

/* A freed large span: inaccessible until the pool hands it out again. */
bool hz_quarantine_large(hz_heap_t *h, hz_span_t *s) {
  /* (its pages stay: the pool purges them later, as any free span's) */
  if (hz_checked_guard_may_split()) hz_checked_span_protect(s, true);
  else hz_checked_span_mark(s, true); /* its guard page, if any, is opened when the span is taken */
  hz_span_t *old = h->quarantine_large[h->quarantine_large_pos];
  h->quarantine_large[h->quarantine_large_pos] = s;
  h->quarantine_large_pos = (h->quarantine_large_pos + 1) % HZ_QUARANTINE_LARGE;
  if (old != NULL) hz_arena_free_span(old, false);
  return true;
}
#endif
