// SPDX-License-Identifier: MIT
/* hakozuna: a fast, misuse-detecting general-purpose memory allocator.
 *
 * Linking with -lhakozuna (or preloading libhakozuna.so) replaces malloc, free
 * and the rest of the C and C++ allocation API for the whole process. The hz_*
 * functions below are the same allocator under names of its own, for programs
 * that want to call it explicitly, plus the controls and statistics that the
 * standard API has no words for. */
#ifndef HAKOZUNA_H
#define HAKOZUNA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header belongs to; hz_version() tells the version of the
 * library a program actually runs with (they differ after an upgrade of the
 * shared library alone). */
#define HZ_VERSION_MAJOR 0
#define HZ_VERSION_MINOR 2
#define HZ_VERSION_PATCH 0
#define HZ_VERSION ((HZ_VERSION_MAJOR * 10000) + (HZ_VERSION_MINOR * 100) + HZ_VERSION_PATCH)
#define HZ_VERSION_STRING "0.2.0"

#if defined(__GNUC__)
#define HZ_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#define HZ_ALLOC_SIZE(...) __attribute__((alloc_size(__VA_ARGS__)))
#define HZ_ALLOC_ALIGN(n) __attribute__((alloc_align(n)))
#else
#define HZ_MALLOC_ATTR
#define HZ_ALLOC_SIZE(...)
#define HZ_ALLOC_ALIGN(n)
#endif

/* The running library's version as a number in the form of HZ_VERSION
 * (major * 10000 + minor * 100 + patch) and as a string ("0.2.0"). */
int hz_version(void);
const char *hz_version_string(void);

/* ---- The standard API under hz_ names (same semantics as glibc's) ---- */
void *hz_malloc(size_t size) HZ_MALLOC_ATTR HZ_ALLOC_SIZE(1);
void *hz_calloc(size_t count, size_t size) HZ_MALLOC_ATTR HZ_ALLOC_SIZE(1, 2);
void *hz_realloc(void *p, size_t size) HZ_ALLOC_SIZE(2);
void *hz_reallocarray(void *p, size_t count, size_t size) HZ_ALLOC_SIZE(2, 3);
void hz_free(void *p);
/* Free with the size the block was requested with (C23 free_sized); the size
 * is checked against the block, a mismatch aborts. */
void hz_free_sized(void *p, size_t size);
/* Free a block from hz_aligned_alloc with its alignment and size (C23
 * free_aligned_sized); a block not so aligned, or smaller, aborts. */
void hz_free_aligned_sized(void *p, size_t alignment, size_t size);
void *hz_aligned_alloc(size_t alignment, size_t size) HZ_MALLOC_ATTR HZ_ALLOC_SIZE(2) HZ_ALLOC_ALIGN(1);
int hz_posix_memalign(void **out, size_t alignment, size_t size);
void *hz_memalign(size_t alignment, size_t size) HZ_MALLOC_ATTR HZ_ALLOC_SIZE(2) HZ_ALLOC_ALIGN(1);
void *hz_valloc(size_t size) HZ_MALLOC_ATTR HZ_ALLOC_SIZE(1);
void *hz_pvalloc(size_t size) HZ_MALLOC_ATTR;
/* Bytes usable at p (>= the size asked for); 0 for NULL. */
size_t hz_usable_size(const void *p);
/* The usable size a request of `size` bytes gets: at least this, and exactly
 * but where a freed block of one of the next two classes stands in for
 * fresh memory (blocks of a page or more, default build). */
size_t hz_good_size(size_t size);

/* ---- Control ---- */
/* Return cached free memory to the OS now. force != 0 also flushes this
 * thread's caches and processes memory of threads that have exited. */
void hz_collect(int force);
/* For thread pools: hand this thread's cache back now (as if it exited);
 * the thread may keep allocating afterwards and gets a fresh cache. */
void hz_thread_done(void);

/* ---- Options (one table: see src/options.c; env HAKOZUNA_<NAME>) ---- */
typedef enum hz_option_e {
  HZ_OPTION_VERBOSE,          /* print diagnostics to stderr */
  HZ_OPTION_STATS,            /* print the statistics report at exit */
  HZ_OPTION_PURGE_DELAY,      /* ms before free memory goes back to the OS; -1 never */
  HZ_OPTION_PURGE_THREAD,     /* purge in a background thread while the program idles */
  HZ_OPTION_THP,              /* allow transparent huge pages on segments */
  HZ_OPTION_ARENA_RESERVE,    /* MiB of address space reserved per OS request for segments */
  HZ_OPTION_THREAD_CACHE,     /* KiB of empty spans a thread keeps cached */
  HZ_OPTION_HUGE_CACHE,       /* MiB of freed huge blocks kept for reuse */
  HZ_OPTION_CHECK,            /* on misuse: 1 report and abort (default), 0 report and go on */
  HZ_OPTION_STATS_FILE,       /* string: the exit report goes to this file (%p: pid) */
  HZ_OPTION_MMAP_THRESHOLD,   /* bytes: larger requests are mapped directly (mallopt M_MMAP_THRESHOLD) */
  HZ_OPTION_PAGE_SIZE,        /* assume pages this large (a power of two); 0: the OS's */
  HZ_OPTION_PROFILE,          /* sample allocations; write a heap profile at exit */
  HZ_OPTION_PROFILE_RATE,     /* mean bytes allocated between two samples */
  HZ_OPTION_PROFILE_FILE,     /* string: where the exit profile goes (%p: pid) */
  HZ_OPTION_PROFILE_SEED,     /* 0: random sampling; else a fixed seed (reproducible runs) */
  HZ_OPTION_LEAKS,            /* sample allocations; report those still live at exit */
  HZ_OPTION_STASH,            /* KiB of freed blocks of 1 KiB and more a thread keeps per size class */
  HZ_OPTION_COUNT
} hz_option_t;

/* Returns -1 with errno EINVAL if the option is invalid (errno is left alone
 * otherwise: an option's value may be -1). */
long hz_option_get(hz_option_t option);
/* Returns 0 on success, -1 (errno EINVAL) if the option or value is invalid. */
int hz_option_set(hz_option_t option, long value);
/* String options (a path): get returns the text ("" when unset; NULL with
 * errno EINVAL for a numeric option), set copies it (-1 with EINVAL, or
 * ENAMETOOLONG past 4095 bytes). For those, hz_option_get is 1 while set. */
const char *hz_option_get_string(hz_option_t option);
int hz_option_set_string(hz_option_t option, const char *value);
const char *hz_option_name(hz_option_t option);        /* e.g. "purge_delay" */
const char *hz_option_description(hz_option_t option);
/* The whole option table as a Markdown table (the README's list). */
void hz_options_markdown(FILE *out);

/* ---- Heap profile (HAKOZUNA_PROFILE; see docs/profiling.md) ----
 * Writes the sampled profile to `path` (a pprof file, gzip'd protobuf),
 * beside it the collapsed stacks (path without .pb.gz, plus .folded) and a
 * top table (.txt). NULL: HAKOZUNA_PROFILE_FILE. Returns 0 on success, -1
 * with errno set otherwise. */
int hz_profile_dump(const char *path);

/* ---- Statistics ---- */
#define HZ_STATS_VERSION 2
#define HZ_STATS_MAX_CLASSES 96

/* Bytes of a class are blocks times block_size: allocated = mallocs *
 * block_size (bytes handed out since the start), live = live * block_size,
 * peak live = peak * block_size (the report and the JSON show all three).
 * (The checked build's block_size is what the program may use: the totals,
 * bytes_in_use among them, also count the 8-byte canary after each block.)
 * Read while other threads run, mallocs never goes back; frees and live
 * come from a second read (the blocks the spans hold) and may be off, in
 * either direction, by what those threads did between the two. */
typedef struct hz_class_stats_s {
  size_t block_size;     /* 0 for unused rows */
  uint64_t live;         /* blocks allocated now */
  uint64_t peak;         /* most blocks of the class in spans at once (per thread, summed): at
                            least the most blocks ever live at once, which is not tracked */
  uint64_t mallocs;
  uint64_t frees;        /* all frees, local and remote */
  uint64_t remote_frees; /* frees by a thread other than the owner */
  uint64_t refills;      /* times the thread cache went to the slow path */
} hz_class_stats_t;

typedef struct hz_stats_s {
  uint32_t version;      /* HZ_STATS_VERSION */
  uint32_t size;         /* sizeof(hz_stats_t) of the caller; set it before calling */
  uint32_t class_count;
  uint32_t thread_count; /* live thread caches */
  hz_class_stats_t classes[HZ_STATS_MAX_CLASSES];
  uint64_t large_allocs, large_frees, large_live_bytes;
  uint64_t huge_allocs, huge_frees, huge_live_bytes;
  uint64_t segments;          /* 4 MiB segments mapped now */
  uint64_t bytes_reserved;    /* address space mapped from the OS */
  uint64_t bytes_committed;   /* part of it not returned with madvise */
  uint64_t bytes_in_use;      /* part of it in spans/blocks in use */
  uint64_t bytes_returned;    /* total bytes given back with madvise/munmap */
  uint64_t mmap_calls, munmap_calls, madvise_calls;
  uint64_t peak_rss;          /* bytes, from getrusage */
  uint64_t current_rss;       /* bytes, from /proc/self/statm (0 if unavailable) */
  /* Since version 2. Bytes of blocks count whole blocks (small: the class
   * size; large and huge: as mapped), as bytes_in_use does. */
  uint64_t bytes_allocated;      /* bytes handed out since the start (small, large and huge) */
  uint64_t bytes_committed_peak; /* the most bytes committed at once, exactly (sampled at each change) */
  uint64_t blocks_live;          /* blocks allocated now (small, large and huge) */
  /* Where bytes_committed that is not bytes_in_use sits: */
  uint64_t unused_in_spans;      /* free room in spans that hold live blocks */
  uint64_t unused_empty_spans;   /* empty small spans threads keep (current and spare) */
  uint64_t unused_span_cache;    /* empty spans in thread span caches (HAKOZUNA_THREAD_CACHE) */
  uint64_t unused_huge_cache;    /* freed huge blocks kept mapped (HAKOZUNA_HUGE_CACHE) */
  uint64_t unused_purge_backlog; /* free memory waiting out HAKOZUNA_PURGE_DELAY */
  uint64_t metadata;             /* segment headers (span descriptors) */
  uint64_t mprotect_calls;       /* mprotect calls (guard pages of the checked build) */
  uint64_t other_os_calls;       /* other system calls and libc system wrappers (threads, sleeps, rusage, ...) */
  uint64_t unused_stashed;       /* committed, not in use: freed blocks in threads' stashes (HAKOZUNA_STASH) */
} hz_stats_t;

/* Fill *out (out->size must be set to sizeof(hz_stats_t) of the caller's
 * header: a program built for version 1 gets the version-1 fields); 0 on
 * success. */
int hz_stats_get(hz_stats_t *out);
/* The report that HAKOZUNA_STATS prints at exit; NULL: to the output hook
 * (hz_set_output) if one is set, else stderr. */
void hz_stats_print(FILE *out);
/* Write the statistics as JSON into buf (NUL-terminated, truncated to len);
 * returns the length the full text needs, like snprintf. The numbers move
 * between two calls (the buffer's own malloc counts too), so give the buffer
 * room to spare, or call again until the length returned is below len. */
size_t hz_stats_json(char *buf, size_t len);

/* ---- Messages ----
 * By default hakozuna writes to stderr (file descriptor 2). A program that
 * embeds it can take the messages instead, as mimalloc's
 * mi_register_output/mi_register_error allow: each call gets one
 * NUL-terminated piece of text, usually one line ending in a newline, and
 * the arg given here. fn NULL restores stderr. The hooks must not call
 * hakozuna's statistics functions. The output hook may allocate; the error
 * hook must not: it may be called with the allocator's locks held (a
 * failing munmap, a misuse report, after which abort() follows unless
 * HAKOZUNA_CHECK=0).
 *   output: the statistics report (at exit, hz_stats_print(NULL),
 *           malloc_stats()), the leak report (HAKOZUNA_LEAKS) and
 *           HAKOZUNA_VERBOSE diagnostics;
 *   error:  warnings (a bad option value) and misuse reports. */
typedef void hz_output_fn(const char *msg, void *arg);
void hz_set_output(hz_output_fn *fn, void *arg);
void hz_set_error(hz_output_fn *fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* HAKOZUNA_H */
