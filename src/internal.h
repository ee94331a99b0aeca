// SPDX-License-Identifier: MIT
/* Internal types and constants shared by the layers of hakozuna.
 *
 * Layers, bottom to top (each one file; see ARCHITECTURE.md):
 *   os.c       the only file that talks to the kernel or libc's system
 *              wrappers (os.h: its interface and the locks)
 *   options.c  the option table
 *   arena.c    segments, the segment map, the span pools
 *   heap.c     per-thread heaps: spans per size class, slow paths
 *   stash.c    the 1-32 KiB classes' freed blocks, newest first
 *   thread.c   a heap's setup, adoption and abandonment; collection
 *   trim.c     the idle trim of idle threads' heaps
 *   remote.c   cross-thread frees, batched per owner heap
 *   large.c    large spans and huge (direct-mapped) blocks with a reuse cache
 *   purge.c    the purge thread and hz_collect, above heap and large
 *   init.c     process start-up and fork
 *   stats.c    counters, report, JSON
 *   check.c    misuse reports and the checked build's extra checks
 *   profile.c  the sampling heap profiler and leak report
 *   pprof.c    its outputs: symbols, pprof (protobuf + gzip), folded stacks, top table
 *   alloc.c    the fast paths and the public/overriding API
 *   override_cxx.c  C++ operator new/delete (compiled as part of alloc.c)
 */
#ifndef HZ_INTERNAL_H
#define HZ_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <pthread.h>
#endif
#include "hakozuna.h"

/* Everything declared below is internal to the library: hidden, so other
 * files reach it directly, not through the GOT (which the arm64 linker does
 * not relax: two extra instructions per global on the fast paths). */
#pragma GCC visibility push(hidden)

#ifdef _WIN32
/* hakozuna.dll exports exactly these (hz_*, C++ operators); malloc & co.
 * stay private to the static library, see docs/windows.md. */
#define HZ_EXPORT __attribute__((dllexport))
#else
#define HZ_EXPORT __attribute__((visibility("default")))
#endif
#define hz_likely(x) __builtin_expect(!!(x), 1)
#define hz_unlikely(x) __builtin_expect(!!(x), 0)
#define hz_noinline __attribute__((noinline))
/* (the free fast path: the compiler's own choice moved with the size of its cold branches) */
#define hz_always_inline inline __attribute__((always_inline))
#define hz_cold __attribute__((cold, noinline))
/* Functions of the cold files (stats.c, profile.c, linked last) that every
 * process runs: placed with the other files' code (docs/perf.md §57). */
#define hz_hot_text __attribute__((hot))
/* Read-only data that every process reads, kept beside the writable data
 * (which every process touches anyway) and out of .rodata, whose pages
 * (the report's strings, the unwinder's tables) then stay out of RSS: a
 * read there maps them all (the kernel's fault-around; docs/perf.md §57). */
/* Large buffers that most processes never write (the report's and the
 * profile's, option strings): in common storage, which the linker places
 * after every other zero-initialised variable, so that they don't spread
 * the small ones that every process writes over more pages (§57). */
#define hz_cold_bss __attribute__((common))
#ifdef __ELF__
#define hz_hot_const __attribute__((section(".data.rel.ro")))
#else
#define hz_hot_const
#endif

#ifndef HZ_CHECKED
#define HZ_CHECKED 0
#endif
/* HZ_NOCHECK=1 compiles the default misuse checks out of the fast paths. It
 * exists only so `make bench` can show what the checks cost; it is never
 * installed. */
/* HZ_NO_OVERRIDE=1 (the Rust crate) leaves malloc & co. to libc and keeps
 * only the hz_* names. */
#if defined(HZ_NO_OVERRIDE) && HZ_NO_OVERRIDE
#define HZ_OVERRIDE 0
#else
#define HZ_OVERRIDE 1
#endif
#ifndef HZ_NOCHECK
#define HZ_NOCHECK 0
#endif

#include "os.h"

/* ---- Geometry ----
 * Segments are 4 MiB, aligned to 4 MiB, cut into 128 slices of 32 KiB.
 * Slice 0 holds the segment header; a span is a run of slices. */
#define HZ_SEG_SHIFT 22
#define HZ_SEG_SIZE ((size_t)1 << HZ_SEG_SHIFT)
#define HZ_SEG_MASK (HZ_SEG_SIZE - 1)
#define HZ_SLICE_SHIFT 15
#define HZ_SLICE_SIZE ((size_t)1 << HZ_SLICE_SHIFT)
#define HZ_SLICES (HZ_SEG_SIZE / HZ_SLICE_SIZE)
/* On x86-64 Linux the segment map covers the first 2^44 bytes (16 TiB) of
 * the address space, one byte a segment: 4 MiB of zero pages until
 * segments are made. Segments and huge blocks are mapped there (os.c,
 * os_map_window). Elsewhere the map covers the whole user address space:
 * 47 bits, 48 on arm64, whose kernels hand out addresses just below 2^48
 * (qemu-user, which runs the arm64 tests, stopped granting the window's
 * addresses after some hundred mappings, answering elsewhere); Windows
 * places memory itself; the sanitizers keep their shadow memory in the
 * window (ThreadSanitizer refuses a mapping there). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define HZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define HZ_SANITIZED 1
#endif
#endif
#if !defined(__x86_64__) || defined(_WIN32) || defined(HZ_SANITIZED)
#define HZ_MAP_WINDOW 0
#if defined(__aarch64__)
#define HZ_VA_BITS 48
#else
#define HZ_VA_BITS 47
#endif
#else
#define HZ_MAP_WINDOW 1
#define HZ_VA_BITS 44
#endif
#define HZ_SEGMAP_LEN ((size_t)1 << (HZ_VA_BITS - HZ_SEG_SHIFT))

/* ---- Size classes ----
 * 16..128 in steps of 16, then 8 classes per doubling up to 32 KiB:
 * internal waste is at most 12.5% of the request. */
#define HZ_SMALL_MAX 32768
#define HZ_NCLASS 72
#define HZ_CLASS_LARGE HZ_NCLASS /* counters row for large spans */
/* Large blocks are whole spans up to this size; above it they are huge. */
#define HZ_LARGE_MAX_SLICES 64
#define HZ_LARGE_CREDIT_MAX 64 /* large spans of other threads a heap may take unasked (heap.c) */
#define HZ_LARGE_MAX (HZ_LARGE_MAX_SLICES * HZ_SLICE_SIZE)
/* Sizes beyond this can never be satisfied (and catch negative ints). */
#define HZ_MAX_REQUEST (((size_t)1 << 62))

/* Classes of sizes up to HZ_SMALL_MAX by (n + 15) / 16. */
extern hz_hot_const const uint8_t hz_class_table[HZ_SMALL_MAX / 16 + 1];

/* The checked build's blocks are 32 bytes at least. A free 16-byte block is
 * all link and tag, and its last word, where free looks for an underflow
 * of the block after it, is that tag, which the list rewrites in two
 * stores: a free by another thread read it in between and reported an
 * underflow (redis-server aborted; tests/threads/tiny_remote). */
#define HZ_FIRST_CLASS (HZ_CHECKED ? 1u : 0u)

static inline uint32_t hz_class_of_slow(size_t n) {
  if (n <= 128) return n > 16 ? (uint32_t)((n - 1) >> 4) : HZ_FIRST_CLASS;
  size_t m = n - 1;
  uint32_t k = 63 - (uint32_t)__builtin_clzll(m);
  return 8 + (k - 7) * 8 + (uint32_t)((m >> (k - 3)) & 7);
}

static inline uint32_t hz_class_of(size_t n) { return hz_class_table[(n + 15) >> 4]; }

static inline size_t hz_class_size(uint32_t c) {
  if (c < 8) return (size_t)(c + 1) << 4;
  uint32_t k = 7 + (c - 8) / 8, sub = (c - 8) % 8;
  return ((size_t)1 << k) + ((size_t)(sub + 1) << (k - 3));
}

/* Classes from HZ_STASH_FIRST (1024 bytes: requests of 897 and more) up
 * keep their blocks freed by their own thread in a stash, newest first
 * (stash.c; from 4096 bytes until docs/perf.md §71); not in the checked
 * build, whose frees go through its quarantine. */
#define HZ_STASH_FIRST 31u
#define HZ_STASHED (HZ_CHECKED ? 0u : HZ_NCLASS - HZ_STASH_FIRST)
static inline bool hz_class_stashed(uint32_t c) { return c >= HZ_STASH_FIRST && c < HZ_STASH_FIRST + HZ_STASHED; }

/* ---- Blocks ----
 * A free block holds the next pointer and a tag that marks it free: a
 * second free finds the tag and reports a double free. */
typedef struct hz_block_s {
  struct hz_block_s *next;
  uintptr_t tag;
} hz_block_t;

extern uintptr_t hz_key; /* random per process, never 0 */
struct hz_span_s;

#if HZ_CHECKED
/* The checked build hides free-list pointers from heap overflows, and its
 * tag covers the stored link too: a write after free into bytes 0-15 of a
 * free block shows as a tag that does not match (hz_block_is_free false, and
 * malloc verifies it before following the link). */
static inline hz_block_t *hz_next_encode(const hz_block_t *b, hz_block_t *next) {
  return (hz_block_t *)((uintptr_t)next ^ (hz_key * 0x9e3779b97f4a7c15ull) ^ (uintptr_t)b);
}
#define hz_next_decode hz_next_encode
static inline uintptr_t hz_block_tag(const struct hz_span_s *s, const hz_block_t *b) {
  (void)s;
  return (hz_key ^ (uintptr_t)b) ^ (uintptr_t)b->next * 0xff51afd7ed558ccdull;
}
/* Sets the tag after the link changed. */
static inline void hz_block_retag(hz_block_t *b) { b->tag = hz_block_tag(NULL, b); }
#else
#define hz_next_encode(b, n) (n)
#define hz_next_decode(b, n) (n)
/* The tag is the sum of the block's address and its span descriptor's,
 * which free holds in registers already: one add, where a random key cost a
 * load and a xor more (docs/perf.md §22). The sum of two addresses of one
 * segment is no address a program can use, and differs from block to block:
 * a live block that holds a freed one's words (copied from it after its
 * free: glibc's tst-tcfree3) does not look free. (The descriptor's address
 * alone did, for every block of its span.) */
static inline uintptr_t hz_block_tag(const struct hz_span_s *s, const hz_block_t *b) {
  return (uintptr_t)s + (uintptr_t)b;
}
static inline void hz_block_retag(hz_block_t *b) { (void)b; }
#endif
/* A block's tag says it is free (a double free, or a use of a freed block). */
static inline bool hz_block_is_free(const struct hz_span_s *s, const hz_block_t *b) {
  return b->tag == hz_block_tag(s, b);
}

/* ---- Spans ---- */
/* HZ_SPAN_STASH: no span, a heap's stash of one class (stash.c), shaped as
 * one so that malloc's fast path pops it as it pops a span. HZ_SPAN_TRAP:
 * no span either, where the owner's frees into a span with pages the trim
 * returned are pushed, so that they reach a slow path (heap.c, trap_free). */
typedef enum { HZ_SPAN_FREE = 0, HZ_SPAN_SMALL, HZ_SPAN_LARGE, HZ_SPAN_STASH, HZ_SPAN_TRAP } hz_span_kind_t;

struct hz_heap_s;

/* A descriptor is two cache lines HZ_SPAN_OWNER_AT bytes apart: the first
 * holds what every thread's free reads, the second what the owner writes on
 * every malloc and free. A segment header keeps all first lines side by
 * side, then all owners' lines (hz_seg_span): a remote free reading a first
 * line does not take the owner's line from its cache, nor the owner's next
 * malloc take it back (docs/perf.md §21). Not as neighbours: Intel's L2
 * fetches a missed line's 128-byte buddy with it, and a remote free's read
 * of the first line took the owner's line along (§39). The gap between them
 * holds other descriptors' lines and is never accessed through this one
 * (which is never copied nor cleared whole: arena.c, span_clear). */
#define HZ_SPAN_OWNER_AT ((size_t)HZ_SLICES * 64)
typedef struct hz_span_s {
  struct __attribute__((aligned(64))) {
    /* Read by frees on any thread; written when the span is set up,
     * carved, cached or retired. */
    struct hz_heap_s *heap;     /* owner; NULL while the span is free */
    uintptr_t start;            /* address of the first block */
    uint64_t recip;             /* floor(2^64 / block_size) + 1: block-start test */
    /* carved * delta (hz_span_refuses): no block starts at or past the
     * carved ones. Grows while other threads free blocks of the span:
     * accessed relaxed-atomically (a plain load on x86-64 and arm64). */
    uint64_t limit;
    uint32_t block_size;
    uint8_t cls;                /* size class, or HZ_CLASS_LARGE */
    uint8_t kind;               /* hz_span_kind_t */
    uint8_t zeroed;             /* never-handed-out memory is known zero */
    uint16_t slice_count;
    uint16_t slice_index;
    struct hz_prof_rec_s *sample; /* a profiler-sampled block's record (profile.c), else NULL */
    union {
      uint64_t cached_epoch;    /* in a heap's span cache: hz_purge_epoch when it entered */
      /* in use: where its owner's frees push its blocks, the span itself
       * or, for a stashed class, its heap's stash (stash.c); while pages
       * of it are trimmed, its heap's trap (hz_span_push_to) */
      struct hz_span_s *push_to;
    };
  };
  char gap[HZ_SPAN_OWNER_AT - 64];
  struct __attribute__((aligned(64))) {
    /* The owner's: malloc pops and free pushes. */
    hz_block_t *free;           /* free blocks (owner only) */
    int32_t uses;               /* blocks handed out and not yet back, encoded (hz_span_used) */
    uint8_t unlisted;           /* full: not in its heap's class list */
    uint8_t pinned;             /* the current span of its class: used has +1 */
    uint32_t capacity;          /* blocks that fit */
    uint32_t carved;            /* blocks put on free lists so far */
    struct hz_span_s *next, *prev; /* class list or cache list */
    /* Pages the idle trim returned (bit i: the span's i-th page); the free
     * blocks that start in them are off the list until the owner's next
     * refill from this span puts them back (trim.c, hz_trim_span_pages). */
    uint64_t trimmed;
    hz_block_t *trim_head;      /* purge thread: the list head at its last trim (no free since, no new trim) */
    uint32_t trim_inbox;        /* purge thread: its blocks in the owner's inbox (remote.c, hz_remote_trim) */
    uint32_t owner_gen;         /* large: the heap's adoptions when handed out (alloc.c, dealloc_in) */
  };
} hz_span_t;
_Static_assert(offsetof(hz_span_t, free) == HZ_SPAN_OWNER_AT && sizeof(hz_span_t) == HZ_SPAN_OWNER_AT + 64,
               "a descriptor's two lines");


typedef struct hz_segment_s {
  uint64_t free_mask[HZ_SLICES / 64];  /* slices in the global pool */
  uint64_t dirty_mask[HZ_SLICES / 64]; /* pool slices that may hold pages */
  uint64_t aged_mask[HZ_SLICES / 64];  /* dirty slices not taken since the pool's last aging look */
  uint64_t freed_at;                   /* ms: last time slices came back */
  struct hz_segment_s *next;           /* all segments */
  uint32_t free_slices;
  uint32_t arena;                      /* index of the pool it belongs to */
  bool spans_purged;                   /* all free, purged, descriptors given back (arena.c) */
  _Atomic uint64_t protected_mask[HZ_SLICES / 64]; /* checked build: slices made inaccessible */
  struct hz_span_s *slice_span[HZ_SLICES]; /* slice -> descriptor of its span */
  /* The descriptor of a span at its head slice (hz_seg_span): first lines, then owners' lines */
  _Alignas(128) unsigned char spans[2 * HZ_SPAN_OWNER_AT];
} hz_segment_t;
static inline hz_span_t *hz_seg_span(hz_segment_t *seg, size_t i) { return (hz_span_t *)(seg->spans + 64 * i); }

_Static_assert(sizeof(hz_segment_t) <= HZ_SLICE_SIZE, "segment header fits slice 0");

/* Segment map values. */
/* HZ_MAP_GONE: a huge block's mapping, returned to the OS. Nothing of ours is
 * there, but a free of it is most likely the block's double free, and says so. */
enum { HZ_MAP_NONE = 0, HZ_MAP_SPANS = 1, HZ_MAP_HUGE = 2, HZ_MAP_HUGE_TAIL = 3, HZ_MAP_ZERO = 4, HZ_MAP_GONE = 5 };
extern uint8_t hz_segmap[HZ_SEGMAP_LEN];
/* Written under different locks (arena, huge) and read by every free with
 * none: single bytes, stored atomically (relaxed); a free of a live block is
 * ordered after its segment's mark by the program's own hand-over. The read
 * is a plain byte load (an atomic one costs free's fast path an instruction:
 * the compare can no longer take its operand from memory), atomic only
 * under ThreadSanitizer, which checks exactly this intent. */
#if defined(__SANITIZE_THREAD__)
static inline uint8_t hz_segmap_at(uintptr_t i) { return __atomic_load_n(&hz_segmap[i], __ATOMIC_RELAXED); }
#else
static inline uint8_t hz_segmap_at(uintptr_t i) { return hz_segmap[i]; }
#endif
void hz_segmap_set(uintptr_t i, uint8_t v);

/* The first byte of a span's slices (its descriptor lies in the same segment). */
static inline uintptr_t hz_span_base(const hz_span_t *s) {
  return ((uintptr_t)s & ~HZ_SEG_MASK) + (uintptr_t)s->slice_index * HZ_SLICE_SIZE;
}
static inline hz_segment_t *hz_segment_of(const void *p) {
  return (hz_segment_t *)((uintptr_t)p & ~HZ_SEG_MASK);
}
static inline hz_span_t *hz_span_of(const void *p) {
  hz_segment_t *seg = hz_segment_of(p);
  return seg->slice_span[((uintptr_t)p >> HZ_SLICE_SHIFT) & (HZ_SLICES - 1)];
}
static inline uint8_t hz_segmap_get(const void *p) {
  uintptr_t i = (uintptr_t)p >> HZ_SEG_SHIFT;
  return i < HZ_SEGMAP_LEN ? hz_segmap_at(i) : HZ_MAP_NONE;
}
/* Block starts. With c = floor(2^64 / size) + 1 (the span's recip), an
 * offset below 2^32 is a multiple of the size exactly when offset * c wraps
 * below c (Lemire, Kaser & Kurz), and the k-th block's offset wraps to
 * exactly k * delta, delta = size * c - 2^64, a number in (0, size]: so one
 * multiply and one compare with the span's limit = carved * delta accept
 * the starts of carved blocks and nothing else -- no interior pointer, no
 * pointer into the not-yet-carved part or the tail past the last whole
 * block (all wrap to at least c > 2^43 > any limit). The slice map only
 * leads to the span p lies in and spans start at their first block, so
 * 0 <= offset < 4 MiB. Free spans have limit 0: every pointer is refused.
 * (tests/heap/blockstart.c checks every offset of every span shape.) */
static inline uint64_t hz_recip(size_t block_size) {
  return UINT64_MAX / block_size + 1 + ((block_size & (block_size - 1)) == 0);
}
/* The limit that accepts the first `blocks` blocks of `size` bytes. */
static inline uint64_t hz_limit(size_t size, uint64_t blocks) { return blocks * (size * hz_recip(size)); }
static inline bool hz_span_misaligned(const hz_span_t *s, uintptr_t p) {
  uint64_t off = p - s->start;
  return off * s->recip >= s->recip;
}
/* Blocks of a small span carved so far, as the fast path sees them. */
static inline uint64_t hz_span_carved_seen(const hz_span_t *s) {
  uint64_t delta = (uint64_t)s->block_size * s->recip;
  return delta ? __atomic_load_n(&s->limit, __ATOMIC_RELAXED) / delta : 0;
}
/* The fast path's pointer check: p is not the start of a carved block.
 * (limit is read plainly, as the segment map is and for the same reason --
 * the compare takes its operand from memory --, atomically under TSan.) */
static inline bool hz_span_refuses(const hz_span_t *s, uintptr_t p) {
#if defined(__SANITIZE_THREAD__)
  uint64_t limit = __atomic_load_n(&s->limit, __ATOMIC_RELAXED);
#else
  uint64_t limit = s->limit;
#endif
  return (p - s->start) * s->recip >= limit;
}

/* Where the owner's free of a block of s pushes it. The idle trim, on the
 * purge thread, points it at the heap's trap while the owner frees
 * (trim.c): read relaxed-atomically, a plain load. */
static inline hz_span_t *hz_span_push_to(const hz_span_t *s) {
#if defined(__SANITIZE_THREAD__)
  return __atomic_load_n(&s->push_to, __ATOMIC_RELAXED);
#else
  return s->push_to;
#endif
}

/* A span's `uses` is the number of its blocks handed out minus 1, less
 * HZ_UNLISTED_BIAS while the span is off its class list (full, or a large
 * block's span): so free's fast path decrements it and sends the span to
 * the slow path when it turns negative -- became empty, or was unlisted --
 * in one instruction and a branch. Read it with hz_span_used. */
#define HZ_UNLISTED_BIAS (1 << 30)
static inline uint32_t hz_span_used(const hz_span_t *s) {
  return (uint32_t)(s->uses + 1 + (s->unlisted ? HZ_UNLISTED_BIAS : 0));
}

/* A block goes back on its span's list (owner only); true when the span
 * needs the slow path: it became empty, or was full and off its list. */
static inline bool hz_span_push(hz_span_t *s, hz_block_t *b) {
  b->next = hz_next_encode(b, s->free);
  hz_block_retag(b);
  s->free = b;
  /* The count is written last: the idle trim, which reads it to learn that
   * no block is out, then sees this push (remote.c, trim_one). x86 keeps
   * stores in order, so there only the compiler must (ThreadSanitizer, which
   * knows no fence, is shown the release store). */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__SANITIZE_THREAD__)
  atomic_signal_fence(memory_order_release);
  return --s->uses < 0;
#else
  int32_t uses = s->uses - 1;
  __atomic_store_n(&s->uses, uses, __ATOMIC_RELEASE);
  return uses < 0;
#endif
}

/* n blocks already linked first..last (their links and free tags written)
 * go back on the span's list at once: a remote batch of one span, drained
 * by its owner (remote.c). The same contract and order as hz_span_push. */
static inline bool hz_span_push_list(hz_span_t *s, hz_block_t *first, hz_block_t *last, uint32_t n) {
  last->next = hz_next_encode(last, s->free);
  hz_block_retag(last);
  s->free = first;
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__SANITIZE_THREAD__)
  atomic_signal_fence(memory_order_release);
  return (s->uses -= (int32_t)n) < 0;
#else
  int32_t uses = s->uses - (int32_t)n;
  __atomic_store_n(&s->uses, uses, __ATOMIC_RELEASE);
  return uses < 0;
#endif
}

/* ---- Heaps (per-thread caches) ---- */
#define HZ_OUTBOX 8
#define HZ_QUARANTINE 1024      /* checked build: freed small blocks held back */
#define HZ_QUARANTINE_LARGE 16  /* checked build: freed large spans held back */
#define HZ_OUTBOX_BATCH 32
/* An owner whose inbox has held blocks for this long (1: since the coarse
 * clock last ticked, every 1-4 ms) is behind, most likely not running: the
 * freeing thread keeps the blocks of 1-32 KiB it would send it (stash.c,
 * hz_stash_adopt). */
#define HZ_BEHIND_MS 1
typedef struct hz_outbox_s {
  struct hz_heap_s *owner;
  uint32_t count, bytes;
  uint32_t carrier, carrier_size; /* the largest block so far (remote.c) */
  hz_block_t *blocks[HZ_OUTBOX_BATCH];
} hz_outbox_t;

/* Frees of small blocks are not counted on the fast path: stats derive them
 * from mallocs and the blocks still in use in spans. */
/* Small mallocs count down sample_left, which the profiler keeps armed
 * (profile.c): a class's mallocs are malloc[c] - sample_left[c]. */
typedef struct hz_heap_counters_s {
  int64_t sample_left[HZ_NCLASS];        /* mallocs of the class before the next sampled one */
  uint64_t malloc[HZ_NCLASS + 1];
  uint64_t large_frees;
  uint64_t remote_free[HZ_NCLASS + 1];   /* blocks this heap freed for other heaps */
  uint64_t remote_back[HZ_NCLASS + 1];   /* blocks of this heap's spans back from others */
  uint64_t adopted[HZ_NCLASS];           /* other heaps' blocks on this heap's stashes (stash.c; not
                                            remote_back, which the idle trim writes meanwhile) */
  uint64_t remote_large_sent, remote_large_back; /* bytes of large blocks, likewise */
  uint64_t refill[HZ_NCLASS + 1];
  uint64_t span_blocks[HZ_NCLASS];       /* capacity of this heap's spans */
  uint64_t span_blocks_peak[HZ_NCLASS];
  int64_t large_bytes;                   /* large bytes allocated here minus freed here */
  uint64_t large_bytes_allocated;        /* large bytes allocated here, ever */
  uint32_t restarts;                     /* odd while a countdown restarts (hz_heap_count_restart) */
} hz_heap_counters_t;

typedef struct hz_heap_s {
  hz_span_t *cur[HZ_NCLASS];            /* current span per class, or its stash (stash.c) */
  hz_heap_counters_t n;                 /* plain counters, merged on demand */
  hz_span_t *lists[HZ_NCLASS];          /* spans with room, per class (heap.c: new at the head, */
  hz_span_t *tails[HZ_NCLASS];          /* relisted at the tail) */
  hz_span_t *spare[HZ_NCLASS];          /* one empty span kept listed per class */
  uint64_t classes[(HZ_NCLASS + 63) / 64]; /* classes with a current or listed span: what
                                           heap_collect walks (a thread's exit visited all 72) */
  _Atomic(hz_block_t *) inbox;          /* remote frees from other threads */
  uint64_t inbox_since_ms;              /* when the inbox last went from empty to holding blocks (remote.c) */
  hz_outbox_t outbox[HZ_OUTBOX];        /* our remote frees not yet sent */
  uint32_t outbox_used;                 /* outboxes holding blocks */
  struct hz_heap_s *behind[HZ_OUTBOX];  /* owners whose inbox had held blocks for HZ_BEHIND_MS at our
                                           last send to them (remote.c, outbox_send; stash.c) */
  hz_span_t *cache[HZ_LARGE_MAX_SLICES + 1]; /* empty spans by slice count */
  size_t cache_slices;
  uint32_t large_credit;                /* large mallocs not yet matched by another's large block taken (heap.c) */
  _Atomic int cache_taking;             /* the purge thread takes expired spans (for a fork's child) */
  uint64_t cache_looked;                /* hz_purge_epoch when the owner last aged its cache (the purge thread reads it) */
  _Atomic uint32_t trim;                /* HZ_TRIM_* bits: the purge thread's idle trim (heap.c) */
  uint64_t trim_activity;               /* purge thread: the owner's activity at its last look */
  uint64_t trim_freed_at;               /* purge thread: ms of its last trim that found blocks freed since the one before */
  hz_block_t *trim_inbox;               /* purge thread: the inbox as its last trim left it */
  uint64_t trim_walk_ms;                /* malloc_trim: ms of its last walk of partly used spans */
  struct hz_heap_s *next_all;           /* every heap ever made */
  struct hz_heap_s *next_abandoned;
  uint64_t abandoned_epoch;             /* hz_purge_epoch at its thread's exit (thread.c) */
  bool blocks_waiting;                  /* abandoned: not yet collected whole (thread.c) */
  bool live;                            /* owned by a running thread */
  uint32_t adoptions;                   /* threads that took it over after its first */
  uint32_t busy;                        /* inside a slow path (see hz_heap_enter) */
  uint32_t arena;                       /* span pool this heap takes from */
  long sample_rate;                     /* profiler rate sample_left is armed for; 0 idle */
  hz_span_t *stash;                     /* the stashes' descriptors, HZ_STASHED of them (stash.c) */
#if HZ_CHECKED
  /* Freed small blocks and large spans wait here before they can be reused
   * (check.c, "the quarantine"). */
  hz_block_t *quarantine[HZ_QUARANTINE];
  hz_span_t *quarantine_large[HZ_QUARANTINE_LARGE];
  uint32_t quarantine_pos, quarantine_large_pos;
  uint64_t quarantined[HZ_NCLASS];      /* blocks of each class in quarantine */
#endif
} hz_heap_t;

/* Heaps lie side by side in the metadata chunks (thread.c), this far apart:
 * the address divided by it numbers them, so consecutive heaps fall in
 * different outboxes (a plain shift of the address used half of them). */
#define HZ_HEAP_STRIDE ((sizeof(hz_heap_t) + 63) & ~(size_t)63)
static inline uint32_t hz_heap_slot(const hz_heap_t *h) { return (uint32_t)((uintptr_t)h / HZ_HEAP_STRIDE); }

#ifdef _WIN32
/* GCC for Windows only knows emulated TLS (a call per access, and a malloc
 * on a thread's first access, which start-up cannot afford). Thread-locals
 * are variables of the image's own TLS block instead (os_windows.c: section
 * .tls, which the loader copies for every thread with its initial value, so
 * the heap pointer starts as &hz_heap_empty with no check), reached as the
 * compiler would for native TLS: TEB -> ThreadLocalStoragePointer[_tls_index]
 * + the variable's offset in the section. */
extern unsigned int _tls_index;
#define HZ_WIN_TLS(type, var)                                                 \
  static inline __attribute__((const)) type *var##_slot(void) {               \
    type *slot;                                                                \
    __asm__("movq %%gs:0x58, %0\n\t"                                          \
            "movl _tls_index(%%rip), %%ecx\n\t"                                \
            "movq (%0,%%rcx,8), %0\n\t"                                        \
            "leaq " #var "@SECREL32(%0), %0"                                   \
            : "=r"(slot) : : "rcx");                                           \
    return slot;                                                               \
  }
HZ_WIN_TLS(struct hz_heap_s *, hz_tls_heap_win)
HZ_WIN_TLS(bool, hz_init_running_win)
static inline hz_heap_t **hz_tls_heap_slot(void) { return hz_tls_heap_win_slot(); }
#define hz_tls_heap (*hz_tls_heap_slot())
#else
extern __thread hz_heap_t *hz_tls_heap;
#endif
extern hz_heap_t hz_heap_empty;  /* what a new thread starts with */
extern hz_span_t hz_span_empty;

/* ---- options.c ---- */
extern long hz_options[HZ_OPTION_COUNT];
void hz_options_init(void); /* once; any caller may need the options first */
void hz_options_late_init(void);
/* hz_option_set may run while other threads read: relaxed atomics (plain
 * loads and stores on x86-64 and arm64) keep that a defined race. */
static inline long hz_opt(hz_option_t o) { return __atomic_load_n(&hz_options[o], __ATOMIC_RELAXED); }
bool hz_option_path(hz_option_t o, char *out, size_t size);
void hz_options_print(FILE *out); /* one line: name=value ... */

/* ---- arena.c ---- */
void hz_arena_init(void);
uint32_t hz_arena_pick(uint32_t heap_index);
uint32_t hz_arena_here(uint32_t fallback); /* the arena of the CPU the thread runs on */
hz_span_t *hz_arena_alloc_span(uint32_t arena, size_t slices, size_t align_slices);
void hz_arena_free_span(hz_span_t *s, bool purge_now); /* purge_now: its pages go back at once */
void hz_arena_purge(bool force);
bool hz_arena_dirty(void);       /* free slices wait for their purge */
void hz_arena_fork_child(void);
/* Set when memory starts waiting for its purge delay; the purge layer starts
 * its thread at the next safe point (hz_purge_poll). HZ_PURGE_RESTART: no
 * memory is known to wait, but a threaded program's purge thread is not
 * running and starts there too (purge.c). */
extern _Atomic int hz_purge_pending;
#define HZ_PURGE_RESTART 2
/* Purge delays counted by the purger's looks (purge.c). Spans in a heap's
 * cache are stamped with it instead of the clock (a vDSO call on every
 * retire): a span stamped two delays ago has waited at least one. */
extern _Atomic uint64_t hz_purge_epoch;
/* Whether the purge thread runs (purge.c sets it). While it does not, a
 * burst of frees purges what waits over HZ_PURGE_BUDGET itself: the thread
 * ends when idle and a small free may not start it, so a program that
 * frees a lot and then idles would otherwise keep it all. (A pool's budget
 * grows where the program builds again what it gave back: arena.c.) */
extern _Atomic int hz_purge_running;
#define HZ_PURGE_BUDGET ((size_t)16 << 20)
void hz_arena_counters(uint64_t *segments, uint64_t *reserved, uint64_t *committed);
bool hz_arena_release(void); /* out of address space: unused segments go back whole */
void hz_arena_close_reserve(void); /* before mlockall: from now on regions are reserved closed */
void hz_arena_live_blocks(uint64_t live[HZ_NCLASS]);
/* Committed bytes of the segments that hold no live block, by where. */
typedef struct hz_arena_usage_s {
  uint64_t span_free;   /* free room in small and large spans with blocks in use */
  uint64_t empty_spans; /* small spans of a heap with no block in use */
  uint64_t span_cache;  /* spans in heaps' span caches */
  uint64_t dirty;       /* free pool slices not yet purged */
  uint64_t headers;     /* slice 0 of each segment */
} hz_arena_usage_t;
void hz_arena_usage(hz_arena_usage_t *u);

/* ---- heap.c ---- */
void hz_heap_init(void);
void *hz_heap_alloc_small(hz_heap_t *h, uint32_t cls, size_t request); /* sampled or checked as malloc's */
void hz_heap_free_slow(hz_heap_t *h, hz_span_t *s);       /* a local free: the span was unlisted, or is empty */
void hz_heap_free_small_slow(hz_heap_t *h, hz_span_t *s); /* the same, for a small span */
void hz_heap_free_large(hz_heap_t *h, hz_span_t *s);      /* a local free of a large block */
bool hz_heap_free_large_remote(hz_heap_t *h, hz_span_t *s, hz_block_t *b); /* into this heap's span cache */
void hz_heap_block_returned(hz_span_t *s, hz_block_t *b);
void hz_heap_block_drained(hz_span_t *s, hz_block_t *b); /* the same, at its owner's drain */
void hz_heap_blocks_returned(hz_span_t *s, hz_block_t *first, hz_block_t *last, uint32_t n); /* n linked, at once */
void hz_heap_block_back(hz_heap_t *h, hz_span_t *s, hz_block_t *b); /* a stashed block to its span (entered) */
void hz_heap_block_purge(hz_block_t *b, size_t bs); /* a free block's pages but the first */
hz_span_t *hz_heap_take_span(hz_heap_t *h, size_t slices, size_t align_slices);
/* (for thread.c's collection; entered) */
void hz_heap_set_cur(hz_heap_t *h, uint32_t c, hz_span_t *s);
void hz_heap_list_remove(hz_heap_t *h, hz_span_t *s);
void hz_heap_retire_span(hz_heap_t *h, hz_span_t *s, bool may_cache);
void hz_heap_flush_cache(hz_heap_t *h, bool all); /* all, or the spans cached past the purge delay */

/* ---- thread.c ---- */
hz_heap_t *hz_heap_get(void);                /* this thread's heap, set up if needed */
bool hz_thread_single(void);                   /* no second thread seen: for memory choices (thread.c) */
void hz_heap_collect(hz_heap_t *h, bool force);
void hz_heap_trim(hz_heap_t *h); /* malloc_trim's: the costly part at most every HZ_TRIM_WALK_MS, 10 ms */
void hz_heap_abandon(hz_heap_t *h);
void hz_heap_collect_own(void); /* out of memory: the calling thread's unused spans and quarantine */
bool hz_heaps_collect_abandoned(bool all); /* true: some exited thread's free blocks wait for their purge */
hz_heap_t *hz_heaps_first(void);
bool hz_heaps_live(void);              /* some thread has a heap (purge.c) */
void hz_heap_fork_child(void);
void hz_thread_key_init(void);

/* ---- stash.c ---- */
/* A heap's area (h->stash, from its setup): the stashes' descriptors, each
 * class's count at the last aging, then the trap's descriptor. */
#define HZ_STASH_TRAP_AT (64 * HZ_STASHED + 64 * ((8 * HZ_STASHED + 63) / 64))
#define HZ_STASH_AREA (HZ_SPAN_OWNER_AT + HZ_STASH_TRAP_AT + 64)
hz_span_t *hz_stash_trap(const hz_heap_t *h);  /* the heap's trap, or NULL (checked build) */
void hz_stash_trap_init(hz_heap_t *h);
hz_span_t *hz_stash_home(const hz_heap_t *h, hz_span_t *s); /* where frees into s go but for the trap */
void hz_stash_install(hz_heap_t *h, uint32_t c); /* the first refill of class c */
void hz_stash_full(hz_heap_t *h, hz_span_t *t); /* a free filled stash t: its oldest half goes back */
void hz_stash_fill(hz_span_t *t, hz_span_t *s); /* refill: blocks of s's list onto stash t */
void hz_stash_put(hz_heap_t *h, hz_span_t *t, hz_block_t *b); /* a remote free, drained (entered) */
bool hz_stash_adopt(hz_heap_t *h, const hz_span_t *s, hz_block_t *b);
/* a freed block for c of one of the classes `lenders` names (bit i: c + 1 + i), or NULL (entered; h->stash) */
void *hz_stash_borrow(hz_heap_t *h, uint32_t c, uint32_t lenders);
extern uint8_t hz_class_lenders[HZ_NCLASS];
bool hz_stash_lent(uint32_t c, uint32_t k);     /* may hz_stash_borrow hand a block of class k out for class c? */
#define HZ_BORROW_CLASSES 8 /* (8 classes a doubling: up to twice the size) */
void hz_stash_age(hz_heap_t *h);               /* once a purge delay: idle classes' stashes go back */
void hz_stash_empty(hz_heap_t *h);             /* every stashed block back to its span (entered) */
uint64_t hz_stash_count(const hz_heap_t *h, uint32_t c); /* blocks stashed (racy from other threads) */
void hz_stash_option_changed(void);
/* The slot of the span a class's refills take blocks from: the class's
 * current span, or, for a stashed class, the one behind its stash. */
static inline hz_span_t **hz_heap_cur_slot(hz_heap_t *h, uint32_t c) {
  hz_span_t *s = h->cur[c];
  return s->kind == HZ_SPAN_STASH ? &s->next : &h->cur[c];
}
void hz_heaps_trim_caches(void);
bool hz_heaps_cache_left(void);
void hz_heap_page_size_init(void);

/* A heap's owner marks its slow paths (class lists, outboxes, the span cache
 * in flux): after a fork, the child adopts the heaps of threads that did not
 * survive it only if they were not inside one. The stores must reach memory
 * in order for the fork's copy: a fence (free on x86) after entering. */
#if defined(__x86_64__) || defined(__i386__)
#define hz_store_fence() atomic_signal_fence(memory_order_seq_cst)
#else
#define hz_store_fence() atomic_thread_fence(memory_order_release)
#endif
/* ---- trim.c ---- */
/* The purge thread trims idle heaps (trim.c, the idle trim): it claims one,
 * then a barrier on every thread (hz_os_membarrier) lets it see whether the
 * owner is inside a slow path, and an owner entering one sees the claim and
 * waits; so the owner pays a load here, and no fence. */
enum { HZ_TRIM_CLAIMED = 1, HZ_TRIM_DONE = 2, HZ_TRIM_WANTED = 4 /* the owner waits: stop soon */ };
#define HZ_TRIM_BATCH 64 /* heaps claimed per barrier (trim.c, heap.c) */
void hz_trim_wait(hz_heap_t *h);                   /* the owner, on entering a claimed heap */
bool hz_trim_idle(bool *again);                    /* the purge thread: one look at every heap */
/* Returns the pages of s that hold only free blocks, from the list at head
 * on (the owner's, or the purge thread's under its claim); false if nothing
 * was freed onto it since its last trim. */
bool hz_trim_span_pages(hz_span_t *s, hz_block_t *head);
/* (busy is a plain counter; ThreadSanitizer, which knows neither the fences
 * nor membarrier, is shown the same order with atomic stores.) */
#if defined(__SANITIZE_THREAD__)
#define hz_heap_busy_set(h, v, order) __atomic_store_n(&(h)->busy, v, order)
#else
#define hz_heap_busy_set(h, v, order) ((h)->busy = (v))
#endif
/* The countdown of class c restarts at k, the class's malloc count kept.
 * Statistics read malloc[c] - sample_left[c] from other threads while this
 * one runs (stats.c): a restart changes both, so it is bracketed by an odd
 * count, as a seqlock (a read across one found a fresh heap's count
 * 2^64 - 45,536). The fast path only counts sample_left down: no fence. */
static inline void hz_heap_count_restart(hz_heap_t *h, uint32_t c, int64_t k) {
  __atomic_store_n(&h->n.restarts, h->n.restarts + 1, __ATOMIC_RELAXED);
  atomic_thread_fence(memory_order_release);
  __atomic_store_n(&h->n.malloc[c], h->n.malloc[c] + (uint64_t)(k - h->n.sample_left[c]), __ATOMIC_RELAXED);
  __atomic_store_n(&h->n.sample_left[c], k, __ATOMIC_RELAXED);
  __atomic_store_n(&h->n.restarts, h->n.restarts + 1, __ATOMIC_RELEASE);
}

/* A heap's used classes (hz_heap_t.classes): c's bit set, and the bits of
 * the 8 classes from k on. */
static inline void hz_heap_class_used(hz_heap_t *h, uint32_t c) { h->classes[c / 64] |= (uint64_t)1 << (c % 64); }
static inline uint32_t hz_heap_classes_from(const hz_heap_t *h, uint32_t k) {
  uint32_t w = k / 64, b = k % 64;
  uint64_t v = w < sizeof h->classes / sizeof h->classes[0] ? h->classes[w] >> b : 0;
  if (b > 56 && w + 1 < sizeof h->classes / sizeof h->classes[0]) v |= h->classes[w + 1] << (64 - b);
  return (uint32_t)v & 0xff;
}
static inline void hz_heap_enter(hz_heap_t *h) {
  hz_heap_busy_set(h, h->busy + 1, __ATOMIC_RELAXED);
  hz_store_fence();
  if (hz_unlikely(atomic_load_explicit(&h->trim, memory_order_acquire))) hz_trim_wait(h);
}
static inline void hz_heap_leave(hz_heap_t *h) {
  hz_store_fence();
  hz_heap_busy_set(h, h->busy - 1, __ATOMIC_RELEASE);
}

void hz_free_sized_new(void *p, size_t n, size_t align, const char *fn); /* alloc.c: C++ sized delete */

/* ---- remote.c ---- */
/* Remote frees by threads with no heap to count them in (exiting threads). */
extern _Atomic uint64_t hz_remote_orphans[HZ_NCLASS + 1];
extern _Atomic int64_t hz_remote_orphan_large_bytes;
void hz_remote_free(hz_heap_t *h, hz_span_t *s, hz_block_t *b);
/* A batch goes when it has HZ_OUTBOX_BATCH blocks or this many bytes: large
 * blocks must not wait in a thread's outbox by the megabyte. */
#define HZ_OUTBOX_BYTES (64 * 1024)
/* The commonest remote free, inline in free's remote branch: a small block
 * joins the outbox already collecting for its owner, where it sends no
 * batch and is no larger than the batch's carrier. The outbox is this
 * thread's alone, but a forked child adopts it as it finds it (not inside
 * a slow path: hz_heap_fork_child), so the block and its link are stored
 * before the count that shows them. False: hz_remote_free's turn. */
static inline bool hz_remote_put(hz_heap_t *h, const hz_span_t *s, hz_block_t *b) {
  hz_heap_t *owner = s->heap;
  hz_outbox_t *o = &h->outbox[hz_heap_slot(owner) % HZ_OUTBOX];
  uint32_t n = o->count, size = s->block_size;
  /* (n - 1 wraps for an unused slot, whose owner is NULL as a dead span's heap is) */
  if (o->owner != owner || n - 1 >= HZ_OUTBOX_BATCH - 2 || size > o->carrier_size ||
      o->bytes + size >= HZ_OUTBOX_BYTES || s->kind != HZ_SPAN_SMALL)
    return false;
  b->next = hz_next_encode(b, o->blocks[n - 1]); /* (the batch's list, if it goes as one) */
  b->tag = hz_block_tag(s, b);
  o->blocks[n] = b;
  __atomic_store_n(&o->count, n + 1, __ATOMIC_RELEASE);
  o->bytes += size;
  h->n.remote_free[s->cls]++;
  return true;
}
void hz_remote_flush(hz_heap_t *h);
bool hz_remote_drain(hz_heap_t *h);
bool hz_remote_trim(hz_heap_t *h);

/* ---- large.c ---- */
size_t hz_large_block_size(size_t size);
void *hz_large_alloc(hz_heap_t *h, size_t size, size_t align, size_t *dirty);
bool hz_large_resize(void *p, size_t size);
void *hz_huge_alloc(size_t size, size_t align, size_t *dirty);
void hz_huge_free(void *p, const char *fn);
size_t hz_huge_usable(const void *p, const char *fn);
bool hz_huge_resize(void *p, size_t size, const char *fn);
void *hz_huge_realloc(void *p, size_t size); /* moved to a bigger mapping; NULL: not (copy it) */
bool hz_huge_purge(bool force); /* true while cached blocks remain */
void hz_huge_counters(uint64_t *allocs, uint64_t *frees, uint64_t *live_bytes, uint64_t *cached_bytes);
uint64_t hz_huge_allocated_bytes(void);
void hz_huge_peaks(uint64_t *count, uint64_t *bytes); /* most huge blocks, and bytes of them, live at once */
void hz_huge_fork_child(void);

/* ---- stats.c ---- */
/* Bytes committed (+) or returned (-), for the committed peak. */
void hz_stats_commit(int64_t delta);
void hz_output(const char *msg, size_t n); /* to the output hook or stderr */
void hz_output_text(const char *buf, size_t n); /* many lines: a hook call per line */
bool hz_output_hooked(void);
void hz_stats_malloc_info(FILE *out);      /* malloc_info(0, out) */
hz_stats_t *hz_stats_new(void);           /* NULL: ENOMEM; give it back with hz_stats_delete */
void hz_stats_delete(hz_stats_t *st);

/* ---- purge.c ---- */
void hz_purge_start(void);
/* A safe point: no allocator lock held, nothing half done. If memory waits
 * for its purge and no purge thread runs, start one (pthread_create
 * allocates: it may not run anywhere deeper). */
/* Polls to let pass before the next look (purge.c: without the thread, a
 * look comes at every 8th). */
extern _Atomic unsigned hz_purge_skip;
static inline void hz_purge_poll(void) {
  if (hz_unlikely(atomic_load_explicit(&hz_purge_pending, memory_order_relaxed)) &&
      !atomic_load_explicit(&hz_purge_running, memory_order_seq_cst)) { /* (the thread going idle looks at pending) */
    unsigned skip = atomic_load_explicit(&hz_purge_skip, memory_order_relaxed);
    if (skip != 0) atomic_store_explicit(&hz_purge_skip, skip - 1, memory_order_relaxed);
    else hz_purge_start();
  }
}
/* The free of a huge block or of a profiler-sampled one, which glibc makes
 * holding the lock that pthread_create takes when a joined thread's TLS is
 * such a block (a dlopen'ed library's __thread data of 3 MiB:
 * tests/threads/join_tls; the thread's TLS vector, allocated by the joiner,
 * sampled): in a threaded program it never starts the thread, which the
 * next safe point does. */
static inline void hz_purge_poll_tls_free(void) {
  if (hz_unlikely(atomic_load_explicit(&hz_purge_pending, memory_order_relaxed)) && hz_os_single_threaded())
    hz_purge_poll();
}
void hz_purge_fork_child(void);
void hz_purge_trim(void); /* malloc_trim: hz_collect(1) with the span walk rate-limited (thread.c, hz_heap_trim) */

/* ---- init.c ---- */
extern _Atomic int hz_init_state; /* HZ_INIT_DONE once start-up has run */
#define HZ_INIT_DONE 2
void hz_init_slow(void);
static hz_always_inline void hz_init(void) {
  if (hz_unlikely(atomic_load_explicit(&hz_init_state, memory_order_acquire) != HZ_INIT_DONE)) hz_init_slow();
}

/* ---- check.c ---- */
__attribute__((noreturn, cold)) void hz_fatal(const char *fmt, ...);
void hz_warning(const char *fmt, ...);
void hz_warning_to(int fd, const char *fmt, ...);
void hz_verbose(const char *fmt, ...);
hz_cold void hz_misuse_foreign(const void *p, const char *fn);
hz_cold void hz_misuse_interior(const void *p, const void *block, size_t size, const char *fn);
hz_cold void hz_misuse_double(const void *p, size_t size, const char *fn);
hz_cold void hz_misuse_size(const void *p, size_t given, size_t size, const char *fn);
hz_cold void hz_misuse_trimmed(const void *block, size_t size); /* heap.c, span_untrim */
hz_cold void hz_misuse_trimmed_free(const void *block, size_t size); /* heap.c, trap_free */
/* Classify a pointer the fast path refused; returns its span or NULL
 * (huge or NULL pointer) after reporting misuse. */
hz_span_t *hz_check_span_ptr(const void *p, const char *fn);
/* Checked build (defined in every build, called only there): freed large
 * spans made inaccessible, and the count of mappings their guards split. */
bool hz_checked_span_mark(hz_span_t *s, bool mark);           /* was any slice marked? */
bool hz_checked_span_protect(hz_span_t *s, bool inaccessible); /* false: could not be opened */
bool hz_checked_guard_may_split(void); /* room for one more guard page or closed span */
#if HZ_CHECKED
void hz_checked_span_guard(hz_span_t *s); /* a small span's first block is a guard */
void hz_quarantine_put(hz_heap_t *h, hz_block_t *b); /* a freed, filled small block */
void hz_quarantine_flush(hz_heap_t *h);
bool hz_quarantine_large(hz_heap_t *h, hz_span_t *s); /* a freed large span: true, it waits there */
#else
static inline void hz_quarantine_flush(hz_heap_t *h) { (void)h; }
static inline bool hz_quarantine_large(hz_heap_t *h, hz_span_t *s) { (void)h, (void)s; return false; }
#endif
#if HZ_CHECKED
/* Large blocks end on an inaccessible span granule (a slice, or a page where
 * pages are larger), huge blocks on a page. */
#define HZ_LARGE_GUARD (hz_span_granule * HZ_SLICE_SIZE)
#define HZ_CANARY_SIZE 8
void hz_checked_on_alloc(hz_block_t *b, size_t block_size, size_t request);
void hz_checked_link(const hz_block_t *b, size_t block_size); /* before following b's link */
void hz_checked_free_intact(const hz_block_t *b, size_t block_size); /* link and fill */
/* 0-byte blocks: 16-byte slots of an inaccessible segment (HZ_MAP_ZERO). */
void *hz_zero_alloc(void);
bool hz_zero_valid(const void *p, const char *fn); /* reports misuse when false */
void hz_zero_free(void *p, const char *fn);
extern _Atomic uint64_t hz_zero_allocs, hz_zero_frees;
void hz_checked_on_free(const hz_span_t *s, hz_block_t *b, const char *fn); /* verifies, fills */
/* A small block's usable size is its request, recorded after it. */
void hz_checked_stamp(hz_block_t *b, size_t block_size, size_t request); /* after a resize in place */
size_t hz_checked_request(const hz_block_t *b, size_t block_size, const char *fn); /* reports an overflow */
#else
#define HZ_LARGE_GUARD 0
#define HZ_CANARY_SIZE 0
#endif
/* The inaccessible page after a huge block (checked build only). */
static inline size_t hz_huge_guard(void) { return HZ_CHECKED ? hz_os_page_size : 0; }

#pragma GCC visibility pop

/* ---- profile.c ---- */
/* Sampling is on (HAKOZUNA_PROFILE or HAKOZUNA_LEAKS): the mean gap in bytes. */
static inline long hz_profile_rate(void) {
  return hz_opt(HZ_OPTION_PROFILE) || hz_opt(HZ_OPTION_LEAKS) ? hz_opt(HZ_OPTION_PROFILE_RATE) : 0;
}
/* A small malloc ran its class's countdown below zero: b is the block it
 * got; returns what the malloc returns (b, after the checked build's
 * hook, or a sampled block in its place). */
__attribute__((returns_nonnull)) void *hz_profile_small(hz_heap_t *h, hz_block_t *b, size_t request); /* its class's counter went below 0 */
void hz_profile_arm(hz_heap_t *h);
/* Large and huge mallocs: a sampled block, or NULL to allocate as usual. */
void *hz_profile_big(size_t size, size_t align, size_t *dirty);
void hz_profile_free(hz_span_t *s);  /* s->sample is set */
void hz_profile_huge_free(const void *p);
extern _Atomic long hz_profile_huge_live; /* sampled huge blocks live */
void hz_profile_option_changed(void);

/* ---- pprof.c ---- */
#define HZ_PROF_DEPTH 64
/* One stack's estimates (pc[0] the caller of malloc, return addresses). */
typedef struct hz_prof_site_s {
  const uintptr_t *pc;
  uint32_t depth;
  double alloc_n, alloc_b, live_n, live_b; /* estimated blocks and bytes */
  double live_s;                           /* live sampled blocks */
} hz_prof_site_t;
int hz_pprof_write(const char *path, const hz_prof_site_t *sites, size_t n, long rate);
void hz_pprof_leaks(int fd, const hz_prof_site_t *sites, size_t n, long rate);


#endif /* HZ_INTERNAL_H */
