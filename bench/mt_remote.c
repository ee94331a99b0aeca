// SPDX-License-Identifier: MIT
/* mt_remote THREADS ITERS WS MIN MAX REMOTE_PCT [RING_SLOTS] [SEED]
 *
 * Each thread keeps WS slots and owns a single-producer ring that the previous
 * thread (i-1 mod THREADS) pushes blocks into. Per iteration a thread first
 * frees everything that arrived on its ring (each a remote free, one op), then
 * draws one random number: an empty slot gets a new block (one op); an
 * occupied one is, with probability REMOTE_PCT, pushed to the next thread's
 * ring (freed locally instead when that ring is full, counted as a fallback),
 * or else freed locally (one op). ITERS is per thread. With one thread the
 * ring leads back to the thread itself. */
#include "bench.h"

#include <stdatomic.h>
#include <stdio.h>

typedef struct {
    _Alignas(64) _Atomic uint64_t head;   /* written by the producer */
    _Alignas(64) _Atomic uint64_t tail;   /* written by the consumer */
    _Alignas(64) slot_t *buf;
    uint64_t mask;
} ring_t;

typedef struct {
    _Alignas(64) ring_t *in, *out;
    uint64_t cached_tail;                 /* producer's view of out->tail */
    uint64_t ops, mallocs, local_frees, remote_frees, pushes, fallbacks;
} worker_t;

static uint32_t n_threads, ws, remote_pct;
static uint64_t iters, seed;
static size_dist_t dist;
static _Atomic uint32_t n_done;
static worker_t *workers;

static void drain(worker_t *w)
{
    ring_t *r = w->in;
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    if (t == h)
        return;
    w->remote_frees += h - t;
    w->ops += h - t;
    for (; t != h; t++) {
        slot_t *e = &r->buf[t & r->mask];
        blk_free(e->p, e->n);
    }
    atomic_store_explicit(&r->tail, h, memory_order_release);
}

/* Pushes a block to the next thread; 0 when its ring is full. */
static int push(worker_t *w, slot_t s)
{
    ring_t *r = w->out;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - w->cached_tail > r->mask) {
        w->cached_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - w->cached_tail > r->mask)
            return 0;
    }
    r->buf[h & r->mask] = s;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 1;
}

static void worker(uint32_t id)
{
    worker_t *w = &workers[id];
    slot_t *slots = calloc(ws, sizeof *slots);
    if (!slots)
        bench_fail("out of memory");
    rng_t rng;
    rng_seed(&rng, seed, (uint64_t)id + 1);
    phase_begin();

    for (uint64_t i = 0; i < iters; i++) {
        drain(w);
        uint64_t x = rng_next(&rng);
        slot_t *s = &slots[scale32((uint32_t)x, ws)];
        if (!s->p) {
            s->n = dist_size(&dist, (uint32_t)(x >> 32));
            s->p = blk_new(s->n);
            w->mallocs++;
            w->ops++;
            continue;
        }
        if (scale32((uint32_t)(x >> 32), 100) < remote_pct) {
            w->pushes++;
            if (push(w, *s)) {
                s->p = NULL;
                continue;
            }
            w->fallbacks++;
        }
        blk_free(s->p, s->n);
        s->p = NULL;
        w->local_frees++;
        w->ops++;
    }
    /* Keep freeing what the previous thread sends until every thread is done
     * pushing, then take what is left on the ring. */
    atomic_fetch_add(&n_done, 1);
    while (atomic_load(&n_done) < n_threads)
        drain(w);
    drain(w);
    phase_end();
    for (uint32_t k = 0; k < ws; k++)
        if (slots[k].p)
            blk_free(slots[k].p, slots[k].n);
    free(slots);
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 6, "THREADS ITERS WS MIN MAX REMOTE_PCT [RING_SLOTS] [SEED]");
    n_threads = (uint32_t)arg_u64(argc, argv, 1, 1);
    iters = arg_u64(argc, argv, 2, 1000000);
    ws = (uint32_t)arg_u64(argc, argv, 3, 400);
    dist = arg_dist(argc, argv, 4, 16, 2048);
    remote_pct = (uint32_t)arg_u64(argc, argv, 6, 50);
    uint64_t ring_slots = arg_u64(argc, argv, 7, 1024);
    seed = arg_u64(argc, argv, 8, 1);
    if (n_threads < 1 || ws < 1 || remote_pct > 100)
        bench_fail("need THREADS >= 1, WS >= 1, REMOTE_PCT <= 100");
    uint64_t cap = 2;
    while (cap < ring_slots)
        cap <<= 1;

    worker_t *w = workers = xzalloc64(n_threads, sizeof *w);
    ring_t *rings = xzalloc64(n_threads, sizeof *rings);
    for (uint32_t i = 0; i < n_threads; i++) {
        rings[i].buf = calloc(cap, sizeof(slot_t));
        if (!rings[i].buf)
            bench_fail("out of memory");
        rings[i].mask = cap - 1;
    }
    for (uint32_t i = 0; i < n_threads; i++) {
        w[i].in = &rings[i];
        w[i].out = &rings[(i + 1) % n_threads];
    }
    double secs = run_parallel(n_threads, worker, NULL);
    worker_t sum = { 0 };
    for (uint32_t i = 0; i < n_threads; i++) {
        sum.ops += w[i].ops;
        sum.mallocs += w[i].mallocs;
        sum.local_frees += w[i].local_frees;
        sum.remote_frees += w[i].remote_frees;
        sum.pushes += w[i].pushes;
        sum.fallbacks += w[i].fallbacks;
    }
    uint64_t frees = sum.local_frees + sum.remote_frees;

    res_begin("mt_remote");
    res_u64("threads", n_threads);
    res_u64("iters", iters);
    res_u64("ws", ws);
    res_dist(&dist);
    res_u64("remote_pct", remote_pct);
    res_u64("ring_slots", cap);
    res_rate(secs, sum.ops);
    res_u64("mallocs", sum.mallocs);
    res_u64("remote_frees", sum.remote_frees);
    res_u64("local_frees", sum.local_frees);
    res_f64("remote_ratio", frees ? (double)sum.remote_frees / (double)frees : 0.0);
    res_f64("fallback_rate", sum.pushes ? (double)sum.fallbacks / (double)sum.pushes : 0.0);
    res_end();
    for (uint32_t i = 0; i < n_threads; i++)
        free(rings[i].buf);
    free(rings);
    free(w);
    return 0;
}
