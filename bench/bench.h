// SPDX-License-Identifier: MIT
/* Shared helpers for the hakozuna benchmark programs (the .c files in bench/).
 *
 * Every program is linked normally against libc; the allocator under test
 * arrives by LD_PRELOAD (none for glibc). Each prints one line
 *   RESULT {"bench": ..., "malloc_so": ..., ...}
 * that bench/run.py parses. A block that does not read back what was written
 * into it makes the program print "FAIL: ..." and exit with status 2, so a
 * broken allocator shows up as a failed run, not a fast one. */
#ifndef HZ_BENCH_H
#define HZ_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- Failure and arguments ---- */
void bench_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Prints "usage: PROG USAGE" and exits 1 unless argc > min_args. */
void bench_usage(int argc, char **argv, int min_args, const char *usage);
/* argv[i] as an unsigned integer (decimal, or with a k/m/g suffix for 10^3/6/9),
 * or def when i >= argc. */
uint64_t arg_u64(int argc, char **argv, int i, uint64_t def);
double arg_f64(int argc, char **argv, int i, double def);

/* ---- Time, memory ---- */
double now_sec(void);
void sleep_sec(double s);
size_t rss_bytes(void);                  /* resident set from /proc/self/statm */
long minor_faults(void);                 /* getrusage(RUSAGE_SELF).ru_minflt */

/* ---- Threads ---- */
void bench_spawn(pthread_t *t, void *(*fn)(void *), void *arg);
void bench_join(pthread_t t);
/* Runs fn(0) .. fn(n - 1) on n new threads and returns the seconds of their
 * parallel phase: each calls phase_begin() when its setup is done (it waits
 * until all have, then stamps its start) and phase_end() when its share is
 * done; the phase runs from the first start to the last end. (Timing from
 * the main thread would miss work done while it waited for a core.)
 * create_secs, if not NULL, gets the time taken to create the threads. */
double run_parallel(uint32_t n, void (*fn)(uint32_t i), double *create_secs);
void phase_begin(void);
void phase_end(void);

/* n zeroed elements of size bytes, 64-byte aligned (one cache line each
 * when size is a multiple of 64). */
void *xzalloc64(size_t n, size_t size);

/* ---- The RESULT line ---- */
void res_begin(const char *bench);
void res_u64(const char *key, uint64_t v);
void res_f64(const char *key, double v);
void res_str(const char *key, const char *v);
void res_null(const char *key);
/* secs, ops and ops_per_sec. */
void res_rate(double secs, uint64_t ops);
/* Adds malloc_so (the shared object that provides `malloc`, by dladdr on the
 * address dlsym(RTLD_DEFAULT) resolves) and maxrss_kb, then prints the line. */
void res_end(void);
const char *bench_malloc_owner(void);

/* ---- PRNG: splitmix64 seeds an xorshift64* stream ---- */
typedef struct { uint64_t s; } rng_t;

static inline uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed * 0x100000001B3ULL + stream;
    r->s = splitmix64(&x);
    if (r->s == 0)
        r->s = 1;
}

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* x (32 random bits) scaled to [0, n). */
static inline uint32_t scale32(uint32_t x, uint32_t n)
{
    return (uint32_t)(((uint64_t)x * n) >> 32);
}

/* ---- Size distributions ----
 * uniform: [min, max]. app: 80% in 16..256, 15% in 257..2048, 5% in 2049..32768.
 * mixed_large: 70% 16..256, 20% 257..4096, 9% 4097..65536, 1% 65537..1 MiB. */
enum { DIST_UNIFORM, DIST_APP, DIST_MIXED_LARGE };
typedef struct { int kind; uint32_t min, max; } size_dist_t;

/* argv[i] is a number (uniform [argv[i], argv[i+1]]; def_min and def_max
 * where absent) or the word "app". */
size_dist_t arg_dist(int argc, char **argv, int i, uint32_t def_min, uint32_t def_max);
uint32_t dist_max(const size_dist_t *d);
/* "sizes": "MIN-MAX", "app" or "mixed_large". */
void res_dist(const size_dist_t *d);

static inline uint32_t band(uint32_t x16, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(((uint64_t)x16 * (hi - lo + 1)) >> 16);
}

/* One size from 32 random bits. */
static inline uint32_t dist_size(const size_dist_t *d, uint32_t x)
{
    uint32_t pct = ((x >> 16) * 100u) >> 16, lo16 = x & 0xffffu;
    switch (d->kind) {
    case DIST_APP:
        if (pct < 80) return band(lo16, 16, 256);
        if (pct < 95) return band(lo16, 257, 2048);
        return band(lo16, 2049, 32768);
    case DIST_MIXED_LARGE:
        if (pct < 70) return band(lo16, 16, 256);
        if (pct < 90) return band(lo16, 257, 4096);
        if (pct < 99) return band(lo16, 4097, 65536);
        return band(lo16, 65537, 1u << 20);
    default:
        return d->min + scale32(x, d->max - d->min + 1);
    }
}

/* ---- Touching and checking blocks ----
 * blk_fill writes a tag derived from the address and size into the first 8
 * bytes, one byte in every 4 KiB page and the last byte; blk_check reads the
 * first 8 and the last back. Blocks under 16 bytes are filled whole. */
static inline uint64_t blk_tag(const void *p, size_t n)
{
    return ((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL) ^ (n * 0xD6E8FEB86659FD93ULL);
}

static inline void blk_fill(void *p, size_t n)
{
    unsigned char *c = p;
    uint64_t tag = blk_tag(p, n);
    if (n < 16) {
        memset(c, (int)(tag & 0xff), n);
        return;
    }
    memcpy(c, &tag, 8);
    for (size_t off = 4096; off < n; off += 4096)
        c[off] = (unsigned char)tag;
    c[n - 1] = (unsigned char)(tag >> 8);
}

static inline int blk_ok(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t tag = blk_tag(p, n), got;
    if (n < 16)
        return n == 0 || (c[0] == (tag & 0xff) && c[n - 1] == (tag & 0xff));
    memcpy(&got, c, 8);
    return got == tag && c[n - 1] == (unsigned char)(tag >> 8);
}

static inline void blk_check(const void *p, size_t n)
{
    if (!blk_ok(p, n))
        bench_fail("block %p of %zu bytes does not hold what was written into it", p, n);
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        bench_fail("malloc(%zu) returned NULL", n);
    return p;
}

/* malloc + blk_fill, and blk_check + free. */
static inline void *blk_new(size_t n)
{
    void *p = xmalloc(n);
    blk_fill(p, n);
    return p;
}

static inline void blk_free(void *p, size_t n)
{
    blk_check(p, n);
    free(p);
}

/* A block and its size: the slot of most working-set tables. */
typedef struct { void *p; size_t n; } slot_t;

#endif
