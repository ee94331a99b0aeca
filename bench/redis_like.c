// SPDX-License-Identifier: MIT
/* redis_like THREADS CYCLES OPS_PER_CYCLE MIN MAX [SEED]
 *
 * A key-value store's allocation pattern. Each thread keeps a pool of up to
 * 2 * OPS_PER_CYCLE entries, each a malloc'd string "key-N:" padded with
 * filler to a random length in MIN..MAX; before every cycle the pool is
 * brought back to half full (not timed). Patterns, each run for CYCLES cycles
 * of OPS_PER_CYCLE ops per thread, all threads at once:
 *   SET    allocate a value, format it, read it, free it
 *   GET    read a random entry (and check it)
 *   LPUSH  append a new entry, or replace a random one when the pool is full
 *   LPOP   free a random entry and move the last one into its place
 *   RANDOM 70% SET, 20% GET, 5% LPUSH, 5% LPOP
 * Reports million ops per second for each pattern. */
#include "bench.h"

#include <stdio.h>

enum { P_SET, P_GET, P_LPUSH, P_LPOP, P_RANDOM, N_PATTERNS };
static const char *pattern_names[N_PATTERNS] = { "set", "get", "lpush", "lpop", "random" };

typedef struct {
    char *p;
    uint32_t n;
} entry_t;

typedef struct {
    _Alignas(64) int id;
    entry_t *e;
    uint32_t count;
    rng_t rng;
    uint64_t sink;
    double secs[N_PATTERNS];
} worker_t;

static uint32_t n_threads, cycles, ops_per_cycle;
static size_dist_t dist;
static uint64_t seed;
static pthread_barrier_t barrier;

static char *make_value(worker_t *w, uint32_t *n_out)
{
    uint64_t x = rng_next(&w->rng);
    uint32_t n = dist_size(&dist, (uint32_t)x);
    char *p = xmalloc(n);
    int len = snprintf(p, n, "key-%u:", (uint32_t)(x >> 40));
    if (len < 0 || (uint32_t)len >= n)
        len = (int)n - 1;
    memset(p + len, 'a' + (int)(n % 26), n - 1 - (uint32_t)len);
    p[n - 1] = 0;
    *n_out = n;
    return p;
}

static uint64_t read_value(const char *p, uint32_t n)
{
    if (p[0] != 'k' || p[n - 1] != 0)
        bench_fail("value %p of %u bytes does not hold what was written into it", (void *)p, n);
    return (unsigned char)p[n / 2] + (unsigned char)p[4];
}

static void op(worker_t *w, int pattern)
{
    uint32_t cap = 2 * ops_per_cycle;
    if (pattern == P_RANDOM) {
        uint32_t r = scale32((uint32_t)rng_next(&w->rng), 100);
        pattern = r < 70 ? P_SET : r < 90 ? P_GET : r < 95 ? P_LPUSH : P_LPOP;
    }
    switch (pattern) {
    case P_SET: {
        uint32_t n;
        char *p = make_value(w, &n);
        w->sink += read_value(p, n);
        free(p);
        break;
    }
    case P_GET:
        if (w->count) {
            entry_t *e = &w->e[scale32((uint32_t)rng_next(&w->rng), w->count)];
            w->sink += read_value(e->p, e->n);
        }
        break;
    case P_LPUSH:
        if (w->count < cap) {
            entry_t *e = &w->e[w->count++];
            e->p = make_value(w, &e->n);
        } else {
            entry_t *e = &w->e[scale32((uint32_t)rng_next(&w->rng), w->count)];
            w->sink += read_value(e->p, e->n);
            free(e->p);
            e->p = make_value(w, &e->n);
        }
        break;
    case P_LPOP:
        if (w->count) {
            entry_t *e = &w->e[scale32((uint32_t)rng_next(&w->rng), w->count)];
            w->sink += read_value(e->p, e->n);
            free(e->p);
            *e = w->e[--w->count];
        }
        break;
    default:
        break;
    }
}

static void refill_half(worker_t *w)
{
    while (w->count > ops_per_cycle) {
        entry_t *e = &w->e[--w->count];
        w->sink += read_value(e->p, e->n);
        free(e->p);
    }
    while (w->count < ops_per_cycle) {
        entry_t *e = &w->e[w->count++];
        e->p = make_value(w, &e->n);
    }
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    rng_seed(&w->rng, seed, (uint64_t)w->id + 1);
    w->e = xmalloc(sizeof *w->e * 2 * ops_per_cycle);
    for (int pat = 0; pat < N_PATTERNS; pat++) {
        pthread_barrier_wait(&barrier);
        for (uint32_t c = 0; c < cycles; c++) {
            refill_half(w);
            double t0 = now_sec();
            for (uint32_t i = 0; i < ops_per_cycle; i++)
                op(w, pat);
            w->secs[pat] += now_sec() - t0;
        }
    }
    while (w->count) {
        entry_t *e = &w->e[--w->count];
        free(e->p);
    }
    free(w->e);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 5, "THREADS CYCLES OPS_PER_CYCLE MIN MAX [SEED]");
    n_threads = (uint32_t)arg_u64(argc, argv, 1, 1);
    cycles = (uint32_t)arg_u64(argc, argv, 2, 100);
    ops_per_cycle = (uint32_t)arg_u64(argc, argv, 3, 10000);
    dist = arg_dist(argc, argv, 4, 16, 512);
    seed = arg_u64(argc, argv, 6, 1);
    if (n_threads < 1 || cycles < 1 || ops_per_cycle < 1 || dist.min < 16)
        bench_fail("need THREADS, CYCLES, OPS_PER_CYCLE >= 1 and MIN >= 16");

    worker_t *w = xzalloc64(n_threads, sizeof *w);
    pthread_t *tids = xzalloc64(n_threads, sizeof *tids);
    pthread_barrier_init(&barrier, NULL, n_threads);
    for (uint32_t i = 0; i < n_threads; i++) {
        w[i].id = (int)i;
        bench_spawn(&tids[i], worker, &w[i]);
    }
    double t0 = now_sec();
    for (uint32_t i = 0; i < n_threads; i++)
        bench_join(tids[i]);
    double wall = now_sec() - t0;

    char key[32];
    uint64_t ops = (uint64_t)n_threads * cycles * ops_per_cycle;
    res_begin("redis_like");
    res_u64("threads", n_threads);
    res_u64("cycles", cycles);
    res_u64("ops_per_cycle", ops_per_cycle);
    res_dist(&dist);
    res_f64("wall_secs", wall);
    for (int pat = 0; pat < N_PATTERNS; pat++) {
        double slowest = 0;
        for (uint32_t i = 0; i < n_threads; i++)
            if (w[i].secs[pat] > slowest)
                slowest = w[i].secs[pat];
        snprintf(key, sizeof key, "%s_mops", pattern_names[pat]);
        res_f64(key, (double)ops / slowest / 1e6);
    }
    res_end();
    free(w);
    free(tids);
    return 0;
}
