// SPDX-License-Identifier: MIT
/* thread_flood THREADS ALLOCS [MIN] [MAX] [SEED]
 *
 * THREADS threads (the suite runs 100 and 1000) are created, wait at one
 * barrier, and are released together: each allocates and writes ALLOCS blocks
 * of MIN..MAX bytes (default 16..4096), keeping them all live, then checks and
 * frees them and exits. Timed from the first thread released to the last one
 * done; an op is one malloc or one free. Also reports the time to create the
 * threads. */
#include "bench.h"

#include <stdio.h>

static uint64_t allocs, seed;
static size_dist_t dist;

static void worker(uint32_t id)
{
    rng_t rng;
    rng_seed(&rng, seed, (uint64_t)id + 1);
    slot_t *blk = xmalloc(sizeof *blk * allocs);
    phase_begin();
    for (uint64_t i = 0; i < allocs; i++) {
        blk[i].n = dist_size(&dist, (uint32_t)rng_next(&rng));
        blk[i].p = blk_new(blk[i].n);
    }
    for (uint64_t i = allocs; i-- > 0;)
        blk_free(blk[i].p, blk[i].n);
    free(blk);
    phase_end();
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 2, "THREADS ALLOCS [MIN] [MAX] [SEED]");
    uint32_t n_threads = (uint32_t)arg_u64(argc, argv, 1, 100);
    allocs = arg_u64(argc, argv, 2, 1000);
    dist = arg_dist(argc, argv, 3, 16, 4096);
    seed = arg_u64(argc, argv, 5, 1);
    if (n_threads < 1 || allocs < 1)
        bench_fail("need THREADS, ALLOCS >= 1");
    double create_secs;
    double secs = run_parallel(n_threads, worker, &create_secs);

    uint64_t ops = 2 * allocs * n_threads;
    res_begin("thread_flood");
    res_u64("threads", n_threads);
    res_u64("allocs", allocs);
    res_dist(&dist);
    res_f64("create_secs", create_secs);
    res_rate(secs, ops);
    res_end();
    return 0;
}
