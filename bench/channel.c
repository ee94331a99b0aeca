// SPDX-License-Identifier: MIT
/* channel THREADS ITERS MIN MAX [SLOTS] [SEED]
 *
 * Workers that take turns at the same work, as the goroutines of a Go
 * program calling C through cgo, or the tasks of a thread pool: THREADS
 * threads share one channel of SLOTS blocks (1024). Each iteration a
 * thread makes a block of MIN..MAX bytes and writes all of it; puts it in
 * the channel, or frees it at once when the channel is full; and every
 * third iteration takes the oldest block from the channel, reads every
 * line of it and frees it. Which thread takes a block is chance, so most
 * of its frees are of other threads' blocks, and the blocks it makes next
 * are written whole: an allocator that hands out the memory a thread has
 * just freed gives lines still in its cache. Op: a malloc or a free. The
 * memory to watch is maxrss_kb; the channel holds SLOTS * (MIN + MAX) / 2
 * bytes (docs/perf.md §76). */
#include "bench.h"

#include <stdio.h>

typedef struct {
    pthread_mutex_t lock;
    slot_t *q;
    uint32_t head, len, cap;
} chan_t;

static chan_t ch = {.lock = PTHREAD_MUTEX_INITIALIZER};
static uint64_t iters, seed;
static size_dist_t dist;
static uint64_t *ops; /* per thread, 8 apart: one cache line each */

/* Every line written, as a program fills a buffer it asked for. */
static void *make(size_t n)
{
    unsigned char *p = xmalloc(n);
    memset(p, (int)(n & 0xff), n);
    blk_fill(p, n);
    return p;
}

static void drop(const slot_t *s)
{
    const unsigned char *c = s->p;
    unsigned sum = 0;
    for (size_t off = 64; off + 1 < s->n; off += 64)
        sum += c[off];
    if (sum == 1) /* (never: the bytes read are n's; the sum keeps the reads) */
        fputc(0, stderr);
    blk_free(s->p, s->n);
}

static void worker(uint32_t id)
{
    rng_t rng;
    rng_seed(&rng, seed, (uint64_t)id + 1);
    uint64_t n_ops = 0;
    phase_begin();
    for (uint64_t i = 0; i < iters; i++) {
        slot_t s = {.n = dist_size(&dist, (uint32_t)rng_next(&rng))};
        s.p = make(s.n);
        n_ops++;
        pthread_mutex_lock(&ch.lock);
        int kept = ch.len < ch.cap;
        if (kept)
            ch.q[(ch.head + ch.len++) % ch.cap] = s;
        slot_t out = {0};
        if (i % 3 == 0 && ch.len > 0) {
            out = ch.q[ch.head];
            ch.head = (ch.head + 1) % ch.cap;
            ch.len--;
        }
        pthread_mutex_unlock(&ch.lock);
        if (!kept) {
            drop(&s);
            n_ops++;
        }
        if (out.p) {
            drop(&out);
            n_ops++;
        }
    }
    phase_end();
    ops[id * 8] = n_ops;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 4, "THREADS ITERS MIN MAX [SLOTS] [SEED]");
    uint32_t threads = (uint32_t)arg_u64(argc, argv, 1, 8);
    iters = arg_u64(argc, argv, 2, 200000);
    dist = arg_dist(argc, argv, 3, 32768, 70000);
    ch.cap = (uint32_t)arg_u64(argc, argv, 5, 1024);
    seed = arg_u64(argc, argv, 6, 1);
    if (threads < 1 || ch.cap < 1)
        bench_fail("THREADS and SLOTS must be at least 1");
    ch.q = xzalloc64(ch.cap, sizeof *ch.q);
    ops = xzalloc64(threads, 8 * sizeof *ops);
    double secs = run_parallel(threads, worker, NULL);
    uint64_t total = 0;
    for (uint32_t i = 0; i < threads; i++)
        total += ops[i * 8];
    for (; ch.len > 0; ch.len--, ch.head = (ch.head + 1) % ch.cap) {
        drop(&ch.q[ch.head]);
        total++;
    }
    if (total != 2 * threads * iters)
        bench_fail("%llu mallocs and frees of %llu", (unsigned long long)total,
                   (unsigned long long)(2 * threads * iters));
    res_begin("channel");
    res_u64("threads", threads);
    res_u64("iters", iters);
    res_dist(&dist);
    res_u64("slots", ch.cap);
    res_rate(secs, total);
    res_end();
    free(ch.q);
    free(ops);
    return 0;
}
