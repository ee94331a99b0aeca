// SPDX-License-Identifier: MIT
/* large ITERS WS [MIN] [MAX] [SEED]
 *
 * Large blocks with a small working set: WS slots (default 8), sizes uniform
 * in MIN..MAX (default 64 KiB .. 10 MiB). The slots are filled first; then
 * each iteration replaces one random slot (check and free the old block,
 * allocate the new one and write one byte in each of its pages): one op. An
 * allocator that maps and unmaps every block pays page faults and system calls
 * on each op; the minor page faults per op are reported. */
#include "bench.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 2, "ITERS WS [MIN] [MAX] [SEED]");
    uint64_t iters = arg_u64(argc, argv, 1, 20000);
    uint32_t ws = (uint32_t)arg_u64(argc, argv, 2, 8);
    size_dist_t d = arg_dist(argc, argv, 3, 64 << 10, 10 << 20);
    uint64_t seed = arg_u64(argc, argv, 5, 1);
    if (ws < 1)
        bench_fail("need WS >= 1");

    rng_t rng;
    rng_seed(&rng, seed, 0);
    slot_t *slots = xmalloc(sizeof *slots * ws);
    for (uint32_t k = 0; k < ws; k++) {
        slots[k].n = dist_size(&d, (uint32_t)rng_next(&rng));
        slots[k].p = blk_new(slots[k].n);
    }

    long f0 = minor_faults();
    double t0 = now_sec();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t x = rng_next(&rng);
        slot_t *s = &slots[scale32((uint32_t)x, ws)];
        blk_free(s->p, s->n);
        s->n = dist_size(&d, (uint32_t)(x >> 32));
        s->p = blk_new(s->n);
    }
    double secs = now_sec() - t0;
    long faults = minor_faults() - f0;
    for (uint32_t k = 0; k < ws; k++)
        blk_free(slots[k].p, slots[k].n);
    free(slots);

    res_begin("large");
    res_u64("iters", iters);
    res_u64("ws", ws);
    res_dist(&d);
    res_rate(secs, iters);
    res_f64("faults_per_op", (double)faults / (double)iters);
    res_end();
    return 0;
}
