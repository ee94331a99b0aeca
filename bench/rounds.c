// SPDX-License-Identifier: MIT
/* rounds ROUNDS N [MIN] [MAX] [SEED]
 *
 * A batch program's shape (a compiler's files, a server's requests in bulk,
 * a test harness's cases): N blocks of random sizes in MIN..MAX (or "app")
 * are allocated and written (blk_fill: a byte in every page), then all
 * freed, ROUNDS times, on one thread. An allocator that gives the freed
 * memory back at each round faults it all in again at the next: minor page
 * faults per round show it. Op: one malloc and its free. */
#include "bench.h"

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 2, "ROUNDS N [MIN] [MAX] [SEED]");
    uint64_t rounds = arg_u64(argc, argv, 1, 20);
    uint64_t n = arg_u64(argc, argv, 2, 100000);
    size_dist_t d = arg_dist(argc, argv, 3, 16, 8192);
    uint64_t seed = arg_u64(argc, argv, 5, 1);
    if (n < 1)
        bench_fail("need N >= 1");
    slot_t *slots = xmalloc(sizeof *slots * n);
    rng_t rng;
    rng_seed(&rng, seed, 0);

    long f0 = minor_faults();
    double t0 = now_sec();
    for (uint64_t r = 0; r < rounds; r++) {
        for (uint64_t i = 0; i < n; i++) {
            slots[i].n = dist_size(&d, (uint32_t)rng_next(&rng));
            slots[i].p = blk_new(slots[i].n);
        }
        for (uint64_t i = 0; i < n; i++)
            blk_free(slots[i].p, slots[i].n);
    }
    double secs = now_sec() - t0;
    long faults = minor_faults() - f0;
    free(slots);

    res_begin("rounds");
    res_u64("rounds", rounds);
    res_u64("n", n);
    res_dist(&d);
    res_rate(secs, rounds * n);
    res_f64("faults_per_round", (double)faults / (double)rounds);
    res_end();
    return 0;
}
